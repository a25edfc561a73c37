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
use crate::oplog::{Op, OpSession, Oplog, SessionStmt};
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
    pub(crate) fn new(inner: silt_storage::Txn, kind: TxnKind, wait: Duration) -> Transaction {
        Transaction {
            snap: Snapshot::new(inner.snapshot().clone()),
            inner,
            kind,
            wait,
            capped: Mutex::new(Vec::new()),
            logged: Mutex::new(Logged::default()),
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
        let mut l = self.logged.lock();
        l.oplog.get_or_insert_with(|| oplog.clone());
        if let Some(p) = pre_image {
            let n = l.ops.len();
            l.pre_images.push((n, p));
        }
        l.ops.push(op);
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
        // changes and their entries commit together or not at all. The times stay pending
        // (readers of the oplog stop below them) until the commit is in.
        let logged = logged.into_inner();
        let _reserved = match &logged.oplog {
            Some(log) if !logged.ops.is_empty() => {
                let mut batch = silt_storage::WriteBatch::new();
                let r = match kind {
                    // One `applyOps` entry, as mongod logs a transaction.
                    TxnKind::Multi => {
                        let r = log.reserve(1);
                        r.put_transaction(&mut batch, &logged.ops, logged.session.as_ref())?;
                        for (idx, doc) in &logged.pre_images {
                            let idx = u32::try_from(*idx).unwrap_or(u32::MAX - 1);
                            r.put_pre_image(&mut batch, 0, idx, doc)?;
                        }
                        r
                    }
                    // A retryable write's statements, one entry each, chained by
                    // `prevOpTime`.
                    TxnKind::Retryable => {
                        let r = log.reserve(logged.ops.len());
                        let mut prev = None;
                        for (n, op) in logged.ops.iter().enumerate() {
                            let stmt = i32::try_from(n).unwrap_or(i32::MAX);
                            let session = logged.session.as_ref().map(|session| SessionStmt {
                                session,
                                stmt: Some(stmt),
                                prev,
                            });
                            r.put(&mut batch, n, op, session)?;
                            prev = Some((r.ts(n), log.term()));
                        }
                        for (n, doc) in &logged.pre_images {
                            r.put_pre_image(&mut batch, *n, 0, doc)?;
                        }
                        r
                    }
                };
                batch.commit_in(&inner)?;
                Some(r)
            }
            _ => None,
        };
        inner.commit(durable)?;
        drop(_reserved);
        created.into_inner().commit();
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
