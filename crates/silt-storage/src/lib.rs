//! # silt-storage: SiltDB's fractal-tree storage engine
//!
//! Bytes in, bytes out. This crate owns the on-disk format, the node cache and its memory
//! budget, the write-ahead log, checkpoints and recovery. It knows nothing of BSON, documents,
//! indexes or the network: the document layer above maps each collection and index onto one
//! [`Dict`] and supplies order-preserving keys.
//!
//! ## A tour
//! - [`Env`] (`env.rs`) opens a directory: catalog, one file per dictionary, the log. It runs
//!   recovery on open, checkpoints periodically and on close, and starts the background
//!   workers (flusher, evictor, log syncer, checkpointer).
//! - [`Dict`] (`dict.rs`) is a B^ε-tree (`tree/`). Writes become messages injected into the
//!   root's buffers; when a node's buffers outgrow the node size, the heaviest child's buffer
//!   is flushed one level down, and at the leaves messages are applied in MSN order. Reads
//!   apply the pending messages they meet on the way down to what they return, without
//!   modifying the leaf. Leaves are cut into basements that are read and evicted one at a time.
//! - `format/` is the byte layout (documented in `docs/format.md`); `file.rs` does block I/O
//!   and keeps the block translation tables; `wal/` is the log; `cache.rs` the budget.
//! - [`inspect`] reads files offline for the `siltctl` tool.
//!
//! Every message carries a transaction id ([`Xid`]) and a message sequence number ([`Msn`]).
//! `mvcc.rs` and `txn.rs` have MVCC: a write outside a transaction is committed at once; a [`Txn`]'s writes
//! are provisional versions in the leaves until its COMMIT or ABORT messages reach them; a
//! [`Snapshot`] reads one consistent state of every dictionary.

#![warn(missing_docs)]

mod batch;
mod bufpool;
mod bulk;
mod cache;
mod catalog;
mod checkpoint;
mod dict;
mod env;
mod error;
mod file;
mod format;
#[doc(hidden)]
pub mod fuzzing;
mod ids;
pub mod inspect;
mod locks;
#[doc(hidden)]
pub mod microbench;
mod msg;
mod mvcc;
mod options;
mod poison;
mod recovery;
mod tree;
mod tree_io;
mod txn;
pub mod vfs;
mod wal;
mod width;
mod write;

pub use batch::WriteBatch;
pub use dict::{CountStats, Cursor, Dict, DictStats, RangeLock};
pub use env::{DropDeferral, Env, EnvStats};
pub use error::PoisonCause;
pub use error::{Error, Result};
pub use format::btt::Extent;
pub use format::header::FileHeader;
pub use ids::{BlockNum, DictId, Lsn, Msn, Xid};
pub use locks::{LockMode, LockOwner};
pub use msg::{UpdateFn, UpdateOutcome, UpdateRegistry};
pub use mvcc::Snapshot;
pub use options::{Compression, EnvOptions, SyncPolicy, MAX_KEY_BYTES, MAX_VALUE_BYTES};
pub use poison::FailPoints;
pub use txn::Txn;
pub use wal::{read_file as read_log_file, LogFile, LogRecord};
