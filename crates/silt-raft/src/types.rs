//! The type configuration of our Raft group: what an entry carries and what applying it
//! answers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A member's id in the group (MongoDB's member `_id`).
pub type NodeId = u64;

/// What the group's membership records of a member besides its id: where it is, and the
/// replica-set options that shape elections and what `hello` lists (they change no data).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberInfo {
    /// `host:port`.
    pub addr: String,
    /// MongoDB's `priority` in thousandths (0 never campaigns; a higher one takes over from
    /// a lower primary once caught up).
    pub priority_milli: u32,
    /// MongoDB's `hidden`: not listed by `hello`, never primary.
    pub hidden: bool,
    /// MongoDB's `tags` (`hello.tags`, which read preferences with tag sets select by).
    pub tags: std::collections::BTreeMap<String, String>,
}

impl MemberInfo {
    /// A member at `addr` with priority 1, not hidden.
    pub fn at(addr: &str) -> MemberInfo {
        MemberInfo {
            addr: addr.to_string(),
            priority_milli: 1000,
            hidden: false,
            tags: std::collections::BTreeMap::new(),
        }
    }
}

/// A replicated command: bytes only the state machine reads.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Command(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Command({} bytes)", self.0.len())
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What applying a command answered (bytes from the state machine).
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Reply(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reply({} bytes)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// SiltDB's Raft types: one leader per term (so a term names an election, MongoDB's
    /// `electionId`), members addressed by `host:port`.
    pub TypeConfig:
        D = Command,
        R = Reply,
        NodeId = NodeId,
        Node = MemberInfo,
        Term = u64,
        LeaderId = openraft::impls::leader_id_std::LeaderId<u64, NodeId>,
        AsyncRuntime = openraft_rt_tokio::TokioRuntime,
);

/// A snapshot's data: the file holding the state machine's bytes (`snapshots.rs`).
#[derive(Clone, Debug)]
pub(crate) struct SnapshotData {
    pub(crate) path: std::path::PathBuf,
}

pub(crate) type Entry = openraft::type_config::alias::EntryOf<TypeConfig>;
pub(crate) type LogId = openraft::type_config::alias::LogIdOf<TypeConfig>;
pub(crate) type Vote = openraft::type_config::alias::VoteOf<TypeConfig>;
pub(crate) type StoredMembership = openraft::type_config::alias::StoredMembershipOf<TypeConfig>;
pub(crate) type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<TypeConfig>;
pub(crate) type Snapshot = openraft::type_config::alias::SnapshotOf<TypeConfig, SnapshotData>;

/// Encode a value of ours or openraft's for the Raft log or the network (`bincode` through
/// serde; openraft's serde form is not promised stable across its versions, so a change of
/// the pin is a change of the log's format).
pub(crate) fn encode<T: Serialize>(v: &T) -> std::io::Result<Vec<u8>> {
    bincode::serialize(v).map_err(std::io::Error::other)
}

/// Decode what [`encode`] made.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> std::io::Result<T> {
    bincode::deserialize(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
