//! The document layer: databases and collections stored in the fractal-tree engine.
//!
//! Owns the catalog (one engine dictionary, `_catalog`, mapping each namespace `db.coll` to
//! its dictionary, options and index specs: `store.rs`), each collection's primary
//! dictionary, whose keys are the order-preserving encoding of `_id` (`silt_bson::keyenc`),
//! or of the fields of a compound `primaryKey` ending in `_id` (`pk.rs`), and whose values are the documents' BSON bytes (`collection.rs`), and its secondary
//! indexes: key generation (`index.rs`), maintenance on every write (`write.rs`), builds
//! (`build.rs`). A partitioned collection holds one such set of dictionaries per `_id` range
//! (`parts.rs` routes and merges, `partition.rs` adds, drops and rotates partitions); every
//! read and write goes through `Parts`, one member for an unpartitioned collection. It
//! serialises writers to the same `_id` (striped key locks) so that an
//! insert's duplicate check and its write are atomic, and nothing more: different documents
//! are written concurrently.
//!
//! It also reads along the plans `silt_query::plan` chooses over its indexes (`plan.rs`):
//! value intervals become key ranges (`keyrange.rs`), and `MatchSource` streams the matching
//! documents, from index entries alone when the plan is covered (`read.rs`); fast counts and
//! exact scans count or list entries without reading a document.
//!
//! It is the only way up to the engine: the server uses the types re-exported here, its own
//! [`Transaction`] and the wrappers on [`Store`], never `silt_storage` itself. Every document
//! write goes through one function under the write rules (`rules.rs`, `write.rs`). It must not know the wire protocol,
//! commands or reply shapes; the query language it knows only through `silt-query` (the
//! matcher and the planner).

mod build;
mod catalog;
mod collection;
mod created;
mod image;
pub mod index;
mod keyrange;
pub mod oplog;
mod partition;
mod parts;
mod pk;
mod plan;
mod read;
mod replicated;
mod rules;
mod snapshot;
pub mod sorter;
mod store;
mod txn;
mod validate;
mod write;

use std::path::Path;

use bson::{Bson, Document};

/// What the server needs of the engine, so that it never names `silt_storage`: the options
/// it opens the store with, the registry of update functions (fast updates) and what they
/// return, the engine's statistics, its poison state and its fail points. (Snapshots are this crate's own: `snapshot.rs`.)
pub use silt_storage::{
    Compression, EnvOptions, EnvStats, FailPoints, PoisonCause, SyncPolicy, UpdateOutcome,
    UpdateRegistry,
};

pub use build::{BuildObserver, CreateIndexesOutcome, Unobserved, BUILD_INSERTING, BUILD_SCANNING};
pub use collection::{sum_stats, CollStats, Collection, DocCursor, PartInfo};
pub use image::{ImageStats, ImageView};
pub use index::{parse_expire_after, Accesses, Index, IndexSpec, KeyError, SpecError};
pub use keyrange::{KeyRange, KeyScan};
pub use oplog::{limit_wait, Refusal, Replicator, WaitLimit, DEFAULT_WAIT};
pub use partition::{
    max_doc, CrashPoints, DropPartitions, Every, PartitionStats, Retention, Rotation,
};
pub use pk::PrimaryKey;
pub use plan::{FastCount, Planned};
pub use read::{MatchSource, Stop};
pub use replicated::Replicated;
pub use rules::{check_limits, nesting_depth, MAX_DOC_BYTES, MAX_STORAGE_DEPTH};
pub use snapshot::Snapshot;
pub use store::Store;
pub use txn::{Transaction, TxnKind, Writer};
pub use validate::ValidateReport;
pub use write::{DocLock, NON_TXN_LOCK_WAIT};

use collection::{stripe_of, KeySet, MAX_INDEX_KEY_BYTES};

/// Failures of the document layer.
#[derive(Debug, thiserror::Error)]
pub enum CollError {
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] silt_storage::Error),
    /// A unique index (`_id_` included) already holds this key for another document.
    #[error(
        "E11000 duplicate key error collection: {ns} index: {index} dup key: {}",
        fmt_key(key_value)
    )]
    DuplicateKey {
        /// Namespace.
        ns: String,
        /// The index name.
        index: String,
        /// The index's key pattern.
        key_pattern: Box<Document>,
        /// The duplicate key's values by field.
        key_value: Box<Document>,
    },
    /// A document that an index cannot hold (two indexed arrays).
    #[error("cannot index parallel arrays [{0}] [{1}]")]
    ParallelArrays(String, String),
    /// A document an index cannot read for another reason (a text index's language
    /// override: 17261, 17262).
    #[error("{msg}")]
    BadDocument {
        /// The error code the client sees.
        code: i32,
        msg: String,
    },
    /// An index request that conflicts with an existing index (code 85 or 86).
    #[error("{msg}")]
    IndexConflict {
        /// 85 IndexOptionsConflict or 86 IndexKeySpecsConflict.
        code: i32,
        msg: String,
    },
    /// No such index.
    #[error("{0}")]
    IndexNotFound(String),
    /// A partition operation that cannot hold (TokuMX's codes: 17248 a cap of an empty
    /// partition, 17249/17250 a `newMax` not above the data, 17252 dropping the only
    /// partition, 17351 a unique index; 2 BadValue for arguments).
    #[error("{msg}")]
    Partition {
        /// The error code the client sees.
        code: i32,
        msg: String,
    },
    /// A write a rule of the collection refuses (`rules.rs`), with MongoDB's code: 10334 too
    /// large, 15 nested too deep, 263 and 20 a capped collection in a transaction.
    #[error("{msg}")]
    Refused {
        /// The error code the client sees.
        code: i32,
        msg: String,
    },
    /// A reader of the oplog whose position was trimmed away (136 CappedPositionLost, or
    /// 286 ChangeStreamHistoryLost for a change stream).
    #[error("{0}")]
    PositionLost(String),
    /// A document the collection's validator refuses; the box holds MongoDB's `errInfo`.
    #[error("Document failed validation")]
    Validation(Box<Document>),
    /// The namespace exists already.
    #[error("Collection {0} already exists.")]
    NamespaceExists(String),
    /// The namespace does not exist.
    #[error("ns not found: {0}")]
    NamespaceNotFound(String),
    /// The operation was stopped on request (an index build whose [`BuildObserver`] said so,
    /// or a read whose [`Stop::interrupted`] did).
    /// A write met another writer of the same document or unique value: a lock the lock
    /// manager refused (timeout, deadlock), or a version committed after the transaction's
    /// snapshot. The client retries (MongoDB's WriteConflict, 112).
    #[error("Write conflict during plan execution and yielding is disabled. :: {0}")]
    WriteConflict(String),

    #[error("operation was interrupted")]
    Interrupted,
    /// A read ran past its [`Stop::deadline`] (`maxTimeMS`).
    #[error("operation exceeded time limit")]
    TimeLimit,
    /// Stored bytes that are not a BSON document.
    #[error("stored document in {ns} is not valid BSON: {detail}")]
    BadStoredDocument {
        /// Namespace.
        ns: String,
        /// What the decoder said.
        detail: String,
    },
}

impl CollError {
    /// Whether the engine refused a key or value larger than it can store.
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            CollError::Storage(silt_storage::Error::TooLarge { .. })
        )
    }

    /// Whether the engine met bytes on disk that are not what it wrote (a checksum or
    /// structural check failed); the message names the file and block.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            CollError::Storage(silt_storage::Error::Corruption { .. })
        )
    }

    /// The data directory, when another process holds its lock.
    pub fn locked_dir(&self) -> Option<&Path> {
        match self {
            CollError::Storage(silt_storage::Error::Locked(p)) => Some(p),
            _ => None,
        }
    }
}

/// Shorthand.
pub type Result<T, E = CollError> = std::result::Result<T, E>;

/// `{ a: 1, b: "x" }`, as MongoDB prints a duplicate key.
pub fn fmt_key(d: &Document) -> String {
    silt_query::expr::fmt_doc(d)
}

/// The encoded primary key of a document with this `_id`.
pub fn id_key(id: &Bson) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    silt_bson::keyenc::encode_value(id, &mut k);
    k
}

pub(crate) fn encode_doc(d: &Document) -> Vec<u8> {
    let mut v = Vec::new();
    // Writing a document to a Vec cannot fail.
    let _ = d.to_writer(&mut v);
    v
}

pub(crate) fn decode_doc(ns: &str, bytes: &[u8]) -> Result<Document> {
    Document::from_reader(bytes).map_err(|e| CollError::BadStoredDocument {
        ns: ns.to_string(),
        detail: e.to_string(),
    })
}

/// The top-level fields `names` of a stored document, decoded (the others skipped, never
/// decoded), in the document's order: what a count's matcher reads.
pub(crate) fn decode_fields(ns: &str, bytes: &[u8], names: &[String]) -> Result<Document> {
    let bad = |detail: String| CollError::BadStoredDocument {
        ns: ns.to_string(),
        detail,
    };
    let raw = bson::RawDocument::from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
    let mut d = Document::new();
    for e in raw {
        let (k, v) = e.map_err(|e| bad(e.to_string()))?;
        if names.iter().any(|n| n == k) {
            d.insert(k, Bson::try_from(v).map_err(|e| bad(e.to_string()))?);
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_image;
#[cfg(test)]
mod tests_oplog;
#[cfg(test)]
mod tests_parts;
#[cfg(test)]
mod tests_replicated;
#[cfg(test)]
mod tests_rules;
#[cfg(test)]
mod tests_txn;
