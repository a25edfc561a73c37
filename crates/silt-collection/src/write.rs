//! The write side of a collection: the document lock, and every write of a document with its
//! index entries.
//!
//! **Lock order on every write path**, outermost first:
//! 1. a document's `_id` stripe ([`DocLock`], several in sorted stripe order);
//! 2. the collection's `build` RwLock, shared (an index build or drop takes it exclusively,
//!    then the store's `ddl` mutex);
//! 3. the unique-key stripes, in sorted order.
//!
//! The rules a writer must follow are types: [`Collection::replace`], [`Collection::delete`]
//! and [`Collection::fast_update`] take the [`DocLock`] of the document, so they cannot be
//! called without it, and they take `build` themselves.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use parking_lot::MutexGuard;
use silt_storage::WriteBatch;

use crate::index::{self, KeyError};
use crate::{
    encode_doc, id_key, stripe_of, CollError, Collection, Index, KeySet, Result,
    MAX_INDEX_KEY_BYTES,
};

/// The lock of one document (its `_id` key's stripe): writers of the same document
/// serialise here, and a read under it stays current until the guard is dropped.
pub struct DocLock<'a> {
    coll: &'a Collection,
    key: Vec<u8>,
    _guard: MutexGuard<'a, ()>,
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

    /// The document as it is now (stable while the lock is held).
    pub fn read(&self) -> Result<Option<Document>> {
        self.coll.get_by_key(&self.key)
    }
}

impl Collection {
    /// Lock the document with encoded `_id` `key`.
    pub fn lock_doc(&self, key: Vec<u8>) -> DocLock<'_> {
        let guard = self.locks[stripe_of(&[&key])].lock();
        DocLock {
            coll: self,
            key,
            _guard: guard,
        }
    }

    /// Insert `doc` (which must carry `_id`); a document with the same `_id` is an error, as
    /// is a unique-index violation (nothing is written then).
    pub fn insert(&self, doc: &Document) -> Result<()> {
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        let key = id_key(&id);
        let lock = self.lock_doc(key);
        let _b = self.build.read();
        if self.dict.get(lock.key())?.is_some() {
            return Err(CollError::DuplicateKey {
                ns: self.ns.clone(),
                index: "_id_".into(),
                key_pattern: Box::new(doc! { "_id": 1 }),
                key_value: Box::new(doc! { "_id": id }),
            });
        }
        self.write_doc(lock.key(), None, Some(doc))
    }

    /// Insert each document unless one with its `_id` exists, without reading: one
    /// insert-if-absent message per document, all in one engine batch. A duplicate is skipped
    /// when its message reaches a leaf, so nobody learns which documents were duplicates.
    /// Only possible while the collection has no secondary index (an index entry would need
    /// to know whether its document went in); returns `false`, writing nothing, otherwise.
    pub fn insert_if_absent(&self, docs: &[Document]) -> Result<bool> {
        let keys: Vec<Vec<u8>> = docs
            .iter()
            .map(|d| id_key(d.get("_id").unwrap_or(&Bson::Null)))
            .collect();
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
        let mut batch = WriteBatch::new();
        for (key, d) in keys.iter().zip(docs) {
            batch.put_if_absent(&self.dict, key, &encode_doc(d))?;
        }
        // A duplicate is charged to the count until its message reaches a leaf.
        self.mark_count_uncertain()?;
        batch.commit()?;
        Ok(true)
    }

    /// Replace `old` by `new`: the document `lock` holds, which the caller read under it.
    /// Index entries follow; a unique violation writes nothing.
    pub fn replace(&self, lock: &DocLock<'_>, old: &Document, new: &Document) -> Result<()> {
        self.check_lock(lock)?;
        let _b = self.build.read();
        self.write_doc(lock.key(), Some(old), Some(new))
    }

    /// Delete `old`: the document `lock` holds, which the caller read under it.
    pub fn delete(&self, lock: &DocLock<'_>, old: &Document) -> Result<()> {
        self.check_lock(lock)?;
        let _b = self.build.read();
        self.write_doc(lock.key(), Some(old), None)
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
        let _b = self.build.read();
        if !eligible(&self.indexes.read()) {
            return Ok(false);
        }
        if uncertain {
            self.mark_count_uncertain()?;
        }
        self.dict.update(lock.key(), func, arg)?;
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
            },
        }
    }

    /// The write itself, with index maintenance (the caller holds `build` shared and the
    /// `_id` stripe). Every index key is computed and every unique constraint checked before
    /// anything is written.
    fn write_doc(&self, key: &[u8], old: Option<&Document>, new: Option<&Document>) -> Result<()> {
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
            plans.push((ix, ok, nk, mk, ov != nv, nv));
        }
        // Unique checks under the stripes of the new prefixes.
        let mut stripes: Vec<usize> = Vec::new();
        for (ix, ok, nk, ..) in &plans {
            if !ix.spec.unique {
                continue;
            }
            for (p, _) in nk {
                if !ok.iter().any(|(o, _)| o == p) {
                    stripes.push(stripe_of(&[ix.name().as_bytes(), p]));
                }
            }
        }
        stripes.sort_unstable();
        stripes.dedup();
        let _guards: Vec<MutexGuard<'_, ()>> =
            stripes.iter().map(|s| self.ukey_locks[*s].lock()).collect();
        for (ix, ok, nk, ..) in &plans {
            if !ix.spec.unique {
                continue;
            }
            for (p, vals) in nk {
                if ok.iter().any(|(o, _)| o == p) {
                    continue;
                }
                let hi = index::prefix_end(p);
                let hi_b = match &hi {
                    Some(h) => Bound::Excluded(h.as_slice()),
                    None => Bound::Unbounded,
                };
                let mut cur = ix.dict().cursor(Bound::Included(p.as_slice()), hi_b);
                while let Some((k, _)) = cur.next()? {
                    if k.get(p.len()..) != Some(key) {
                        return Err(CollError::DuplicateKey {
                            ns: self.ns.clone(),
                            index: ix.name().to_string(),
                            key_pattern: Box::new(ix.spec.key_pattern.clone()),
                            key_value: Box::new(ix.spec.key_value_doc(vals)),
                        });
                    }
                }
            }
        }
        // Flag multikey before any entry is written, so no planner sees an array key in an
        // index it believes is not multikey.
        let mut flag_changed = false;
        for (ix, _, _, mk, ..) in &plans {
            if *mk && ix.set_multikey() {
                flag_changed = true;
            }
        }
        // The document and its index entries are one engine batch: after a crash they are
        // all there or none is.
        let mut batch = WriteBatch::new();
        let bytes = new.map(encode_doc);
        match (&bytes, old) {
            (Some(b), Some(_)) => batch.replace(&self.dict, key, b)?,
            (Some(b), None) => batch.put(&self.dict, key, b)?,
            (None, _) => batch.delete(&self.dict, key)?,
        }
        for (ix, ok, nk, _, value_changed, val) in &plans {
            let entry = |p: &[u8]| {
                let mut e = Vec::with_capacity(p.len() + key.len());
                e.extend_from_slice(p);
                e.extend_from_slice(key);
                e
            };
            for (p, _) in ok {
                if !nk.iter().any(|(n, _)| n == p) {
                    batch.delete(ix.dict(), &entry(p))?;
                }
            }
            // An entry whose key stays is rewritten when its value changes (the document of a
            // clustering index, or the shape: `1` becoming `NumberLong(1)` keeps the key).
            for (p, _) in nk {
                if ok.iter().any(|(o, _)| o == p) {
                    if *value_changed {
                        batch.replace(ix.dict(), &entry(p), val)?;
                    }
                } else {
                    batch.put(ix.dict(), &entry(p), val)?;
                }
            }
        }
        // A newly multikey index is recorded in the catalog in the same batch as the entries
        // that made it so: after a crash the planner never trusts a stale "not multikey".
        let _meta = if flag_changed {
            let g = self.meta_lock.lock();
            if self.live.load(Ordering::Acquire) {
                batch.put(
                    &self.catalog,
                    self.ns.as_bytes(),
                    &encode_doc(&self.meta_doc()),
                )?;
            }
            Some(g)
        } else {
            None
        };
        batch.commit()?;
        Ok(())
    }
}
