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

use crate::created::{Created, Pending};
use crate::oplog::{Entries, Op, OpSession, Oplog};
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
    /// The transaction a member of a multi-member set applies a replicated entry in
    /// (`crate::replicated`): it logs nothing of its own and trims no capped collection (the
    /// primary's trimming arrives as entries of its own).
    Apply,
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
    /// What it changed, for the oplog: logged when it commits, in the order made.
    logged: Mutex<Logged>,
    /// Collections it created: hidden from listings until it commits (`created.rs`).
    created: Mutex<Created>,
}

/// A transaction's changes waiting for its commit to be logged.
#[derive(Default)]
struct Logged {
    oplog: Option<Arc<Oplog>>,
    ops: Vec<Op>,
    /// Writes to the session table, replicated with the entries (`Entries::side`).
    side: Vec<Op>,
    /// Pre-images (`changeStreamPreAndPostImages`): the operation's index and the document
    /// before it.
    pre_images: Vec<(usize, bson::Document)>,
    session: Option<OpSession>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("kind", &self.kind)
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(
        inner: silt_storage::Txn,
        kind: TxnKind,
        wait: Duration,
        oplog: Option<Arc<Oplog>>,
    ) -> Transaction {
        Transaction {
            snap: Snapshot::new(inner.snapshot().clone()),
            inner,
            kind,
            wait,
            capped: Mutex::new(Vec::new()),
            logged: Mutex::new(Logged {
                oplog,
                ..Logged::default()
            }),
            created: Mutex::new(Created::default()),
        }
    }

    /// Note that it created collection `ns` (hidden until it commits).
    pub(crate) fn note_created(&self, pending: &Arc<Pending>, ns: &str) {
        self.created.lock().add(pending, ns);
    }

    /// Whether it created collection `ns`.
    pub fn created(&self, ns: &str) -> bool {
        self.created.lock().contains(ns)
    }

    /// Name the session (and transaction number) whose transaction this is: its oplog
    /// entries carry them (`lsid`, `txnNumber`).
    pub fn set_session(&self, session: OpSession) {
        self.logged.lock().session = Some(session);
    }

    /// Note a change made in this transaction, to log when it commits.
    pub(crate) fn log_op(&self, oplog: &Arc<Oplog>, op: Op, pre_image: Option<bson::Document>) {
        if self.kind == TxnKind::Apply {
            return;
        }
        let mut l = self.logged.lock();
        l.oplog.get_or_insert_with(|| oplog.clone());
        if let Some(p) = pre_image {
            let n = l.ops.len();
            l.pre_images.push((n, p));
        }
        l.ops.push(op);
    }

    /// Note a write to the session table, replicated with its entries on a multi-member set.
    pub(crate) fn log_side(&self, op: Op) {
        if self.kind != TxnKind::Apply {
            self.logged.lock().side.push(op);
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
        let Transaction {
            inner,
            capped,
            logged,
            kind,
            created,
            ..
        } = self;
        // The entries go in with the transaction's writes, before its commit record: the
        // changes and their entries commit together or not at all (on a multi-member set, once
        // the set's log holds them).
        let logged = logged.into_inner();
        let entries = Entries {
            // One `applyOps` entry, as mongod logs a transaction; a retryable write's
            // statements one entry each, chained by `prevOpTime`.
            txn: kind == TxnKind::Multi,
            ops: logged.ops,
            session: logged.session,
            pre_images: logged.pre_images,
            side: logged.side,
            message: None,
        };
        let commit = move |batch: silt_storage::WriteBatch| -> Result<()> {
            batch.commit_in(&inner)?;
            inner.commit(durable)?;
            Ok(())
        };
        match (&logged.oplog, kind) {
            (Some(log), TxnKind::Multi | TxnKind::Retryable) => {
                log.commit_logged(silt_storage::WriteBatch::new(), entries, commit)?;
            }
            _ => commit(silt_storage::WriteBatch::new())?,
        }
        created.into_inner().commit();
        if kind == TxnKind::Apply {
            return Ok(());
        }
        for c in capped.into_inner() {
            if let Err(e) = c.enforce_cap() {
                tracing::warn!(ns = %c.ns, error = %e, "cannot trim the capped collection");
            }
        }
        Ok(())
    }

    /// Commit a transaction that applied a replicated entry, with `batch` (the entry's oplog
    /// rows and the applied position) in it.
    pub(crate) fn commit_applied(self, batch: silt_storage::WriteBatch) -> Result<()> {
        batch.commit_in(&self.inner)?;
        self.inner.commit(false)?;
        self.created.into_inner().commit();
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
