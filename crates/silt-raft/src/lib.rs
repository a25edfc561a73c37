//! SiltDB's replication layer: a member of a Raft group, on **openraft** (pinned to one exact
//! version in `Cargo.toml`; nothing else in the workspace names an openraft type).
//!
//! What this crate owns:
//! - the Raft log, durable in an engine environment of its own (`log_store.rs`), and the
//!   newest snapshot, in files beside it (`snapshots.rs`), streamed in chunks to a member
//!   behind the purged log;
//! - the adapters from openraft's traits to two small ones the server fills in: a
//!   [`StateMachine`] that applies committed commands (opaque bytes) and a [`Transport`] that
//!   carries a request's bytes to another member and its answer back (`state.rs`,
//!   `network.rs`);
//! - a [`Member`] handle with blocking methods, usable from the server's connection threads,
//!   over openraft running on a private tokio runtime (`member.rs`).
//!
//! What it must not know: BSON documents, collections, the oplog's entry format, the wire
//! protocol or sockets. A command is bytes; so is a request between members.
//!
//! Consensus is openraft's: one leader per term (`leader_id_std`), Pre-Vote, and CheckQuorum
//! (a leader that has not heard from a quorum within its lease refuses proposals and is not
//! [`Status::writable`]).

mod log_store;
mod member;
mod network;
mod snapshots;
mod state;
mod types;

#[cfg(test)]
mod tests;

pub use log_store::LogStore;
pub use member::{Member, MemberOptions, Peer, ProposeError, Proposed, Role, Status};
pub use network::Transport;
pub use state::{Applied, SnapshotView, StateMachine};
pub use types::{MemberInfo, NodeId};
