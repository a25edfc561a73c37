//! The write side of a collection: the document lock, and every write of a document with its
//! index entries.
//!
//! **Lock order on every write path**, outermost first:
//! 0. lock-manager locks (`silt_storage` `locks.rs`): the document's `_id` key, exclusive,
//!    then each unique-index value it writes. A transaction holds them until it ends; a write
//!    outside one holds them for the write. Waiting here holds nothing below, so the
//!    manager's deadlock detection sees every wait that matters;
//! 1. a document's `_id` stripe ([`DocLock`], several in sorted stripe order);
//! 2. the collection's `build` RwLock, shared (an index build or drop takes it exclusively,
//!    then the store's `ddl` mutex);
//! 3. the unique-key stripes, in sorted order.
//!
//! Inside a transaction ([`Collection::lock_doc_as`] with a writer in one) a document is read at the transaction's
//! snapshot (with its own writes), and writing a document someone committed after that
//! snapshot is a write conflict (first committer wins), as MongoDB's snapshot isolation: every
//! write of a whole document checks it. A fast update ([`Collection::fast_update`]) does not:
//! it is a blind message that applies to the newest committed version when it reaches the
//! leaf, so no update is lost, and checking would cost the very read it exists to avoid (the
//! document lock still keeps every other writer out until the transaction ends).
//!
//! The rules a writer must follow are types: [`Collection::replace`], [`Collection::delete`]
//! and [`Collection::fast_update`] take the [`DocLock`] of the document, so they cannot be
//! called without it, and they take `build` themselves.

use std::cell::Cell;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};
use parking_lot::MutexGuard;
use silt_storage::{LockMode, RangeLock, WriteBatch};

use crate::index::{self, KeyError};
use crate::oplog::{Entries, Message, Op};
use crate::{
    encode_doc, id_key, stripe_of, CollError, Collection, Index, KeySet, Result, Writer,
    MAX_INDEX_KEY_BYTES,
};

/// How long a write outside a transaction waits for a transaction that holds its document
/// (at most the transaction's lifetime: MongoDB's `transactionLifetimeLimitSeconds`).
pub const NON_TXN_LOCK_WAIT: Duration = Duration::from_secs(60);

/// The lock of one document: its `_id` key in the lock manager (for a transaction, held until
/// it ends) and its stripe, taken for one [`Writer`]. Writers of the same document serialise
/// here, and a read under it stays current until the guard is dropped. Every write of the
/// document goes through it, under the writer's rules (`rules.rs`).
pub struct DocLock<'a> {
    coll: &'a Collection,
    key: Vec<u8>,
    /// Who writes: the transaction, if any, and the command's flags.
    writer: Writer<'a>,
    /// The lock-manager locks of a write outside a transaction.
    range: Option<RangeLock>,
    guard: Option<MutexGuard<'a, ()>>,
    /// Set when a document went into a capped collection outside a transaction: the
    /// collection is trimmed once this lock is released (trimming locks other documents).
    trim: Cell<bool>,
}

impl Drop for DocLock<'_> {
    fn drop(&mut self) {
        self.guard.take();
        self.range.take();
        if self.trim.get() {
            if let Err(e) = self.coll.enforce_cap() {
                tracing::warn!(ns = %self.coll.ns, error = %e, "cannot trim the capped collection");
            }
        }
    }
}

impl std::fmt::Debug for DocLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocLock")
            .field("ns", &self.coll.ns)
            .finish()
    }
}

impl DocLock<'_> {
    /// The document's encoded `_id`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The document as it is now (stable while the lock is held); inside a transaction, as
    /// the transaction sees it.
    pub fn read(&self) -> Result<Option<Document>> {
        match self.writer.txn {
            Some(t) => self.coll.get_by_key_at(&self.key, t.snapshot()),
            None => self.coll.get_by_key(&self.key),
        }
    }

    /// Lock `[lo, hi]` of `d` exclusively too, for as long as this lock's owner holds locks.
    fn also(&self, d: &silt_storage::Dict, range: (&[u8], &[u8])) -> Result<()> {
        let r = match (&self.writer.txn, &self.range) {
            (Some(t), _) => t.inner.lock(d, range, LockMode::Exclusive, t.lock_wait()),
            (None, Some(g)) => g.also(d, range, LockMode::Exclusive, NON_TXN_LOCK_WAIT),
            (None, None) => Ok(()),
        };
        r.map_err(conflict)
    }
}

/// A lock the manager refused (a timeout or a deadlock) is a write conflict.
fn conflict(e: silt_storage::Error) -> CollError {
    match e {
        silt_storage::Error::LockTimeout | silt_storage::Error::Deadlock => {
            CollError::WriteConflict(e.to_string())
        }
        e => CollError::Storage(e),
    }
}

/// How the oplog records a write that replaces a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logged {
    /// The whole new document (an insert, a replacement; a delete logs the `_id`).
    Whole,
    /// The `$v: 2` difference (an update).
    Diff,
}

impl Collection {
    /// The oplog entry of a write of `old` into `new`.
    fn oplog_op(&self, old: Option<&Document>, new: Option<&Document>, how: Logged) -> Op {
        match (old, new) {
            (None, Some(n)) => Op::insert(&self.ns, self.uuid(), n),
            (Some(o), Some(n)) if how == Logged::Diff => Op::update(&self.ns, self.uuid(), o, n),
            (_, Some(n)) => Op::replace(&self.ns, self.uuid(), n),
            (Some(o), None) => Op::delete(&self.ns, self.uuid(), o),
            (None, None) => Op::noop("nothing written"),
        }
    }

    /// Lock the document with encoded `_id` `key` for a write outside any transaction. If a
    /// transaction holds it, this waits (up to [`NON_TXN_LOCK_WAIT`]) for it to end.
    pub fn lock_doc(&self, key: Vec<u8>) -> Result<DocLock<'_>> {
        self.lock_doc_as(key, Writer::plain())
    }

    /// Lock the document with encoded `_id` `key` for writer `w`. In a transaction the lock
    /// is held until it ends; waiting for another transaction that holds it fails, after
    /// the transaction's lock wait, with [`CollError::WriteConflict`] (also on a deadlock:
    /// this transaction is the victim), and a write under the lock fails so when a version
    /// of the document was committed after the transaction's snapshot.
    pub fn lock_doc_as<'a>(&'a self, key: Vec<u8>, w: Writer<'a>) -> Result<DocLock<'a>> {
        let member = self.layout().primary.member_for(&key).clone();
        let range = match w.txn {
            Some(t) => {
                t.inner
                    .lock(&member, (&key, &key), LockMode::Exclusive, t.lock_wait())
                    .map_err(conflict)?;
                None
            }
            None => Some(
                member
                    .lock_range((&key, &key), LockMode::Exclusive, w.lock_wait())
                    .map_err(conflict)?,
            ),
        };
        let guard = self.locks[stripe_of(&[&key])].lock();
        Ok(DocLock {
            coll: self,
            key,
            writer: w,
            range,
            guard: Some(guard),
            trim: Cell::new(false),
        })
    }

    /// Insert `doc` (which must carry `_id`) outside any transaction; see
    /// [`Collection::insert_as`].
    pub fn insert(&self, doc: &Document) -> Result<()> {
        self.insert_as(doc, Writer::plain())
    }

    /// Insert `doc` (which must carry `_id`) for writer `w`; a document with the same `_id`
    /// is an error, as is a unique-index violation or a broken rule (nothing is written
    /// then).
    pub fn insert_as(&self, doc: &Document, w: Writer<'_>) -> Result<()> {
        let lock = self.lock_doc_as(self.new_record_key(doc)?, w)?;
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        self.insert_locked(&lock, doc, id)
    }

    /// Insert `doc` as the document `lock` holds (its record key must be the lock's): for a
    /// caller that read under the lock and found nothing.
    pub fn insert_under(&self, lock: &DocLock<'_>, doc: &Document) -> Result<()> {
        self.check_lock(lock)?;
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        if self.record_key(doc)? != lock.key() {
            return Err(CollError::Storage(silt_storage::Error::InvalidArgument(
                "a document lock of another _id".into(),
            )));
        }
        self.insert_locked(lock, doc, id)
    }

    fn insert_locked(&self, lock: &DocLock<'_>, doc: &Document, id: Bson) -> Result<()> {
        let _b = self.build.read();
        if lock.read()?.is_some() {
            return Err(CollError::DuplicateKey {
                ns: self.ns.clone(),
                index: "_id_".into(),
                key_pattern: Box::new(doc! { "_id": 1 }),
                key_value: Box::new(doc! { "_id": id }),
            });
        }
        self.write_doc(lock, None, Some(doc), Logged::Whole)
    }

    /// Insert each document unless one with its `_id` exists, without reading: one
    /// insert-if-absent message per document, all in one engine batch. A duplicate is skipped
    /// when its message reaches a leaf, so nobody learns which documents were duplicates.
    /// Only possible while the collection has no secondary index (an index entry would need
    /// to know whether its document went in), no transaction holds one of the documents,
    /// the writer is outside a transaction (messages are not provisional) and every document
    /// keeps the write rules (`rules.rs`); returns `false`, writing nothing, otherwise.
    pub fn insert_if_absent(&self, docs: &[Document], w: Writer<'_>) -> Result<bool> {
        if !self.pk.is_id() || w.txn.is_some() || self.oplog.is_some() {
            // Under another primary key the `_id_` index is a secondary index; inside a
            // transaction writes must be provisional, and messages are not.
            return Ok(false);
        }
        let mut encoded = Vec::with_capacity(docs.len());
        for d in docs {
            let bytes = encode_doc(d);
            if self.check_write(&w, None, Some((d, bytes.len()))).is_err() {
                // The normal path reports the document on its own.
                return Ok(false);
            }
            encoded.push(bytes);
        }
        let keys: Vec<Vec<u8>> = docs
            .iter()
            .map(|d| id_key(d.get("_id").unwrap_or(&Bson::Null)))
            .collect();
        // The documents' lock-manager locks, without waiting: when a transaction holds one,
        // the caller's normal path (which waits for it) does the inserts instead.
        let mut sorted: Vec<&Vec<u8>> = keys.iter().collect();
        sorted.sort();
        sorted.dedup();
        let Some(first) = sorted.first() else {
            return Ok(true);
        };
        let busy = |e: silt_storage::Error| match e {
            silt_storage::Error::LockTimeout | silt_storage::Error::Deadlock => Ok(false),
            e => Err(CollError::Storage(e)),
        };
        let layout = self.layout();
        let primary = &layout.primary;
        let guard = match primary.member_for(first).lock_range(
            (first, first),
            LockMode::Exclusive,
            Duration::ZERO,
        ) {
            Ok(g) => g,
            Err(e) => return busy(e),
        };
        for k in &sorted[1..] {
            let d = primary.member_for(k);
            if let Err(e) = guard.also(d, (k, k), LockMode::Exclusive, Duration::ZERO) {
                return busy(e);
            }
        }
        // The `_id` stripes (sorted, as every path takes several), so that a plain insert's
        // check-then-put of the same `_id` cannot straddle these messages.
        let mut stripes: Vec<usize> = keys.iter().map(|k| stripe_of(&[k])).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let _locks: Vec<MutexGuard<'_, ()>> =
            stripes.iter().map(|s| self.locks[*s].lock()).collect();
        let _b = self.build.read();
        if !self.indexes.read().is_empty() {
            return Ok(false);
        }
        // Under `build`, the layout cannot change: route by the current one.
        let layout = self.layout();
        let mut batch = WriteBatch::new();
        for (key, bytes) in keys.iter().zip(&encoded) {
            batch.put_if_absent(layout.primary.member_for(key), key, bytes)?;
        }
        // A duplicate is charged to the count until its message reaches a leaf.
        self.mark_count_uncertain()?;
        batch.commit()?;
        Ok(true)
    }

    /// Replace `old` by `new`: the document `lock` holds, which the caller read under it.
    /// Index entries follow; a unique violation writes nothing. The oplog records a
    /// replacement (the whole new document).
    pub fn replace(&self, lock: &DocLock<'_>, old: &Document, new: &Document) -> Result<()> {
        self.rewrite(lock, old, new, Logged::Whole)
    }

    /// [`Collection::replace`] for an update (operators or a pipeline): the oplog records
    /// the difference (`$v: 2`), as mongod logs an update.
    pub fn update(&self, lock: &DocLock<'_>, old: &Document, new: &Document) -> Result<()> {
        self.rewrite(lock, old, new, Logged::Diff)
    }

    fn rewrite(
        &self,
        lock: &DocLock<'_>,
        old: &Document,
        new: &Document,
        how: Logged,
    ) -> Result<()> {
        self.check_lock(lock)?;
        if !self.pk.is_id() && !self.pk.is_natural() && self.record_key(new)? != lock.key() {
            // The document would have to move; MongoDB refuses it for `_id` (the caller's
            // check) and for a shard key alike.
            let field = self
                .pk
                .fields()
                .iter()
                .find(|f| silt_bson::path::get_path(old, f) != silt_bson::path::get_path(new, f))
                .cloned()
                .unwrap_or_else(|| "_id".into());
            return Err(CollError::Partition {
                code: 66,
                msg: format!(
                    "After applying the update, the (immutable) field '{field}' was found to have been altered: it is part of the collection's primaryKey {}",
                    self.pk.pattern()
                ),
            });
        }
        let _b = self.build.read();
        self.write_doc(lock, Some(old), Some(new), how)
    }

    /// Delete `old`: the document `lock` holds, which the caller read under it.
    pub fn delete(&self, lock: &DocLock<'_>, old: &Document) -> Result<()> {
        self.check_lock(lock)?;
        let _b = self.build.read();
        self.write_doc(lock, Some(old), None, Logged::Whole)
    }

    /// A fast update of the document `lock` holds: under one `build` guard, so that no index
    /// can be created or dropped between the decision and the injection, ask `eligible`
    /// whether the update may go without a read given the collection's current indexes, and
    /// if so inject update function `func` with `arg` into the primary tree. `uncertain`
    /// marks a message that may create the document (a fast upsert), so the maintained count
    /// stops being trusted first. Returns whether the message was injected.
    pub fn fast_update(
        &self,
        lock: &DocLock<'_>,
        eligible: impl FnOnce(&[Arc<Index>]) -> bool,
        uncertain: bool,
        func: u32,
        arg: &[u8],
    ) -> Result<bool> {
        self.check_lock(lock)?;
        if !self.pk.is_id() {
            // A message could change a key field without moving the document.
            return Ok(false);
        }
        // A validator must see the new document, which a blind message never reads; a
        // pre-image is the document before, which it never reads either.
        if self.is_capped()
            || (self.validator().is_some() && !lock.writer.bypass_validation)
            || (self.oplog.is_some() && self.keeps_pre_images())
        {
            return Ok(false);
        }
        let _b = self.build.read();
        if !eligible(&self.indexes.read()) {
            return Ok(false);
        }
        if uncertain {
            self.mark_count_uncertain()?;
        }
        let layout = self.layout();
        let d = layout.primary.member_for(lock.key());
        // The oplog entry is the message itself (`oplog/entry.rs`, `Op::message`): logged
        // without reading, in the same batch, or kept by the transaction for its commit.
        let id = || silt_bson::keyenc::decode_value(lock.key()).map_or(Bson::Null, |(v, _)| v);
        match (lock.writer.txn, self.oplog.as_ref()) {
            (Some(t), log) => {
                t.inner.update(d, lock.key(), func, arg)?;
                if let Some(log) = log {
                    t.log_op(
                        log,
                        Op::message(&self.ns, self.uuid(), id(), func, arg),
                        None,
                    );
                }
            }
            (None, Some(log)) => {
                let mut batch = WriteBatch::new();
                batch.update(d, lock.key(), func, arg)?;
                let entries = Entries {
                    message: Some(Message {
                        ns: self.ns.clone(),
                        ui: self.uuid(),
                        id: id(),
                        func,
                        arg: arg.to_vec(),
                    }),
                    ..Entries::default()
                };
                log.commit_logged(batch, entries, |b| Ok(b.commit()?))?;
            }
            (None, None) => d.update(lock.key(), func, arg)?,
        }
        Ok(true)
    }

    fn check_lock(&self, lock: &DocLock<'_>) -> Result<()> {
        if std::ptr::eq(lock.coll, self) {
            Ok(())
        } else {
            Err(CollError::Storage(silt_storage::Error::InvalidArgument(
                "a document lock of another collection".into(),
            )))
        }
    }

    fn keys_of(&self, ix: &Index, d: Option<&Document>) -> Result<(KeySet, bool)> {
        match d {
            None => Ok((Vec::new(), false)),
            Some(d) => match ix.spec.keys(d) {
                Ok(k) => Ok((k.keys, k.multikey)),
                Err(KeyError::ParallelArrays(a, b)) => Err(CollError::ParallelArrays(a, b)),
                Err(KeyError::Text(code, msg)) => Err(CollError::BadDocument { code, msg }),
            },
        }
    }

    /// Every document write ends here, whatever its entry point: the write rules of
    /// `rules.rs` (capped collections in transactions, size and nesting limits, the
    /// validator), then index maintenance, then one engine batch (the caller holds `build`
    /// shared and the document's lock). Every rule is checked, every index key computed and
    /// every unique constraint checked before anything is written.
    fn write_doc(
        &self,
        lock: &DocLock<'_>,
        old: Option<&Document>,
        new: Option<&Document>,
        how: Logged,
    ) -> Result<()> {
        let key = lock.key();
        let bytes = new.map(encode_doc);
        self.check_write(&lock.writer, old, new.zip(bytes.as_ref().map(Vec::len)))?;
        let txn = lock.writer.txn.map(|t| &t.inner);
        // The caller holds `build`, so the layout and the indexes' members stay as read here.
        let layout = self.layout();
        let primary = layout.primary.member_for(key);
        if let Some(t) = txn {
            if primary.write_conflict(key, Some(t))? {
                return Err(CollError::WriteConflict(
                    "the document was changed after the transaction's snapshot".into(),
                ));
            }
        }
        let idxs = self.indexes.read().clone();
        let mut plans = Vec::with_capacity(idxs.len());
        for ix in &idxs {
            let (ok, _) = self.keys_of(ix, old)?;
            let (nk, mk) = self.keys_of(ix, new)?;
            for (p, _) in &nk {
                if p.len() + key.len() > MAX_INDEX_KEY_BYTES {
                    return Err(CollError::Storage(silt_storage::Error::TooLarge {
                        what: "index key",
                        len: p.len() + key.len(),
                        limit: MAX_INDEX_KEY_BYTES,
                    }));
                }
            }
            // What each entry's value must be: the document (clustering) or its shape.
            let value = |d: Option<&Document>| match d {
                Some(d) if ix.spec.clustering => encode_doc(d),
                Some(d) if ix.is_coverable() => ix.spec.shape(d),
                _ => Vec::new(),
            };
            let (ov, nv) = (value(old), value(new));
            // The member of the document's partition holds its entries.
            let dict = ix.parts().member_for(key).clone();
            plans.push((ix, dict, ok, nk, mk, ov != nv, nv));
        }
        // Unique checks under the lock-manager locks and the stripes of the new prefixes.
        let mut stripes: Vec<usize> = Vec::new();
        for (ix, dict, ok, nk, ..) in &plans {
            if !ix.spec.unique {
                continue;
            }
            for (p, _) in nk {
                if !ok.iter().any(|(o, _)| o == p) {
                    lock.also(dict, (p, p))?;
                    stripes.push(stripe_of(&[ix.name().as_bytes(), p]));
                }
            }
        }
        stripes.sort_unstable();
        stripes.dedup();
        let _guards: Vec<MutexGuard<'_, ()>> =
            stripes.iter().map(|s| self.ukey_locks[*s].lock()).collect();
        for (ix, dict, ok, nk, ..) in &plans {
            if !ix.spec.unique {
                continue;
            }
            // The member of the document's partition: a unique index is never partitioned
            // (refused with 17351), except `_id_` under a `primaryKey` other than `_id`,
            // unique within each partition.
            for (p, vals) in nk {
                if ok.iter().any(|(o, _)| o == p) {
                    continue;
                }
                let hi = index::prefix_end(p);
                let hi_b = match &hi {
                    Some(h) => Bound::Excluded(h.as_slice()),
                    None => Bound::Unbounded,
                };
                let dup = || CollError::DuplicateKey {
                    ns: self.ns.clone(),
                    index: ix.name().to_string(),
                    key_pattern: Box::new(ix.spec.key_pattern.clone()),
                    key_value: Box::new(ix.spec.key_value_doc(vals)),
                };
                let lo_b = Bound::Included(p.as_slice());
                // The committed entries (no other transaction can hold one of this value
                // provisionally: it would hold the value's lock).
                let mut cur = dict.cursor(lo_b, hi_b);
                while let Some((k, _)) = cur.next()? {
                    if k.get(p.len()..) == Some(key) {
                        continue;
                    }
                    let Some(t) = txn else { return Err(dup()) };
                    if dict.write_conflict(&k, Some(t))? {
                        return Err(CollError::WriteConflict(
                            "a unique index value was committed after the transaction's snapshot"
                                .into(),
                        ));
                    }
                    // Unless the transaction deleted it.
                    if dict.get_at(&k, t.snapshot())?.is_some() {
                        return Err(dup());
                    }
                }
                // And the transaction's own entries.
                if let Some(t) = txn {
                    let mut cur = dict.cursor_at(lo_b, hi_b, t.snapshot());
                    while let Some((k, _)) = cur.next()? {
                        if k.get(p.len()..) != Some(key) {
                            return Err(dup());
                        }
                    }
                }
            }
        }
        // Flag multikey before any entry is written, so no planner sees an array key in an
        // index it believes is not multikey.
        let mut flag_changed = false;
        for (ix, _, _, _, mk, ..) in &plans {
            if *mk && ix.set_multikey() {
                flag_changed = true;
            }
        }
        // The document and its index entries are one engine batch: after a crash they are
        // all there or none is.
        let mut batch = WriteBatch::new();
        match (&bytes, old) {
            (Some(b), Some(_)) => batch.replace(primary, key, b)?,
            (Some(b), None) => batch.put(primary, key, b)?,
            (None, _) => batch.delete(primary, key)?,
        }
        for (_, dict, ok, nk, _, value_changed, val) in &plans {
            let entry = |p: &[u8]| {
                let mut e = Vec::with_capacity(p.len() + key.len());
                e.extend_from_slice(p);
                e.extend_from_slice(key);
                e
            };
            for (p, _) in ok {
                if !nk.iter().any(|(n, _)| n == p) {
                    batch.delete(dict, &entry(p))?;
                }
            }
            // An entry whose key stays is rewritten when its value changes (the document of a
            // clustering index, or the shape: `1` becoming `NumberLong(1)` keeps the key).
            for (p, _) in nk {
                if ok.iter().any(|(o, _)| o == p) {
                    if *value_changed {
                        batch.replace(dict, &entry(p), val)?;
                    }
                } else {
                    batch.put(dict, &entry(p), val)?;
                }
            }
        }
        // A newly multikey index is recorded in the catalog in the same batch as the entries
        // that made it so: after a crash the planner never trusts a stale "not multikey".
        // In a transaction the catalog is written at once, outside it (a flag set early only
        // costs plans): two transactions must not conflict on the catalog entry.
        let _meta = if flag_changed {
            let g = self.meta_lock.lock();
            if self.live.load(Ordering::Acquire) {
                let meta = encode_doc(&self.meta_doc());
                match txn {
                    Some(_) => self.catalog.put(self.ns.as_bytes(), &meta)?,
                    None => batch.put(&self.catalog, self.ns.as_bytes(), &meta)?,
                }
            }
            Some(g)
        } else {
            None
        };
        // The oplog entry: in the same batch outside a transaction (its time pending until the
        // batch is in), or kept by the transaction to log when it commits.
        let op = self
            .oplog
            .as_ref()
            .map(|log| (log, self.oplog_op(old, new, how)));
        let pre_image = old.filter(|_| op.is_some() && self.keeps_pre_images());
        match (op, lock.writer.txn) {
            (Some((log, op)), None) => {
                let entries = Entries {
                    ops: vec![op],
                    pre_images: pre_image.map(|p| (0, p.clone())).into_iter().collect(),
                    ..Entries::default()
                };
                log.commit_logged(batch, entries, |b| Ok(b.commit()?))?;
            }
            (op, Some(t)) => {
                batch.commit_in(&t.inner)?;
                match op {
                    Some((log, op)) => t.log_op(log, op, pre_image.cloned()),
                    // The session table is replicated with the transaction's entries.
                    None if self.ns == crate::oplog::SESSION_TABLE_NS => {
                        t.log_side(self.oplog_op(old, new, how));
                    }
                    None => {}
                }
            }
            (None, None) => batch.commit()?,
        }
        drop(_meta);
        if self.is_capped() && old.is_none() && new.is_some() {
            // A capped collection is trimmed back to its cap after the insert is committed.
            match lock.writer.txn {
                Some(t) => {
                    if let Some(me) = self.me.upgrade() {
                        t.inserted_into_capped(me);
                    }
                }
                None => lock.trim.set(true),
            }
        }
        Ok(())
    }
}
