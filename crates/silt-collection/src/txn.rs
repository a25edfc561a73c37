//! The document layer's transaction, and who a write is made by.
//!
//! A [`Transaction`] wraps the engine's: its reads see one snapshot (with its own writes), its
//! writes go through [`crate::Collection::lock_doc_as`] and [`crate::Collection::insert_as`]
//! with a [`Writer`] that names it, and [`Transaction::commit`] is where work that must follow
//! a commit runs (today: trimming the capped collections it inserted into; with replication,
//! the commit's log entry). The server never sees the engine's transaction.
//!
//! A [`Writer`] is what every document write carries: the transaction it belongs to (if any)
//! and the command's `bypassDocumentValidation`. The write rules (`crate::rules`) read it.

use std::sync::Arc;
use std::time::Duration;

use crate::Snapshot;
use parking_lot::Mutex;

use crate::write::NON_TXN_LOCK_WAIT;
use crate::{Collection, Result};

/// What a transaction is for; the rules differ (a multi-document transaction may not write a
/// capped collection, as in MongoDB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnKind {
    /// A session's multi-document transaction (`startTransaction`).
    Multi,
    /// The transaction a single retryable write runs in, with the record of its reply.
    Retryable,
}

/// A transaction over every collection of a store (begun by [`crate::Store::begin`]).
pub struct Transaction {
    pub(crate) inner: silt_storage::Txn,
    /// `inner`'s snapshot, as this crate hands it out.
    snap: Snapshot,
    kind: TxnKind,
    /// How long its writes wait for a document another transaction holds.
    wait: Duration,
    /// Capped collections it inserted into: they are trimmed once it commits.
    capped: Mutex<Vec<Arc<Collection>>>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("kind", &self.kind)
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(inner: silt_storage::Txn, kind: TxnKind, wait: Duration) -> Transaction {
        Transaction {
            snap: Snapshot::new(inner.snapshot().clone()),
            inner,
            kind,
            wait,
            capped: Mutex::new(Vec::new()),
        }
    }

    /// The snapshot its reads use (its own writes included).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    /// Whether this is a multi-document transaction.
    pub fn is_multi(&self) -> bool {
        self.kind == TxnKind::Multi
    }

    /// How long its writes wait for a document another transaction holds.
    pub fn lock_wait(&self) -> Duration {
        self.wait
    }

    /// Note a capped collection this transaction inserted into.
    pub(crate) fn inserted_into_capped(&self, c: Arc<Collection>) {
        let mut list = self.capped.lock();
        if !list.iter().any(|x| Arc::ptr_eq(x, &c)) {
            list.push(c);
        }
    }

    /// Commit (to the log, synced when `durable`), then do what follows a commit: trim the
    /// capped collections it inserted into. Once the commit is in, the result is `Ok`: a
    /// trimming that fails is logged (the next insert trims again), not reported as a failed
    /// commit.
    pub fn commit(self, durable: bool) -> Result<()> {
        let Transaction { inner, capped, .. } = self;
        inner.commit(durable)?;
        for c in capped.into_inner() {
            if let Err(e) = c.enforce_cap() {
                tracing::warn!(ns = %c.ns, error = %e, "cannot trim the capped collection");
            }
        }
        Ok(())
    }

    /// Abort: nothing it wrote stays.
    pub fn abort(self) -> Result<()> {
        Ok(self.inner.abort()?)
    }
}

/// Who makes a write: the transaction it belongs to (if any) and whether the command bypasses
/// document validation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Writer<'a> {
    pub(crate) txn: Option<&'a Transaction>,
    pub(crate) bypass_validation: bool,
}

impl<'a> Writer<'a> {
    /// A write that commits on its own, validated.
    pub fn plain() -> Writer<'static> {
        Writer::default()
    }

    /// A write inside `txn` (or on its own for `None`), validated.
    pub fn new(txn: Option<&'a Transaction>) -> Writer<'a> {
        Writer {
            txn,
            bypass_validation: false,
        }
    }

    /// The same writer, bypassing the validator when `bypass` (`bypassDocumentValidation`).
    pub fn bypassing_validation(self, bypass: bool) -> Writer<'a> {
        Writer {
            bypass_validation: bypass,
            ..self
        }
    }

    /// The transaction it writes in.
    pub fn txn(&self) -> Option<&'a Transaction> {
        self.txn
    }

    /// How long it waits for a document a transaction holds.
    pub(crate) fn lock_wait(&self) -> Duration {
        self.txn.map_or(NON_TXN_LOCK_WAIT, Transaction::lock_wait)
    }
}
