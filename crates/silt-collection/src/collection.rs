//! One collection: its primary dictionary (keys: the encoded `_id`, values: the documents'
//! BSON), or one per partition ([`Layout`]), options, secondary indexes, striped document
//! locks and statistics.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bson::{doc, Bson, Document};
use parking_lot::{Mutex, RwLock};
use silt_query::collation::Collation;
use silt_storage::{Dict, Env};

use crate::Snapshot;

use crate::parts::{Parts, PartsCursor};
use crate::pk::PrimaryKey;
use crate::{decode_doc, encode_doc, id_key, Accesses, Index, Result};

/// One partition of a partitioned collection, as `getPartitionInfo` shows it.
#[derive(Clone, Debug)]
pub struct PartInfo {
    /// The partition's id (increasing, never reused).
    pub id: u64,
    /// The partition's upper bound as a key document (`{_id: v}`, or every field of the
    /// `primaryKey`); `None` for the last partition (MaxKey).
    pub max: Option<Document>,
    /// When the partition was opened.
    pub created: bson::DateTime,
}

/// Where a collection's documents live: the primary dictionary's members and, for a
/// partitioned collection, what each member is. Replaced whole (under the collection's
/// `build` lock, exclusively) when a partition is added or dropped; readers keep the `Arc`
/// they took.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub primary: Parts,
    /// One per member of `primary`, for a partitioned collection.
    pub partitions: Option<Vec<PartInfo>>,
    /// The id the next partition gets.
    pub next_id: u64,
}

impl Layout {
    /// An unpartitioned collection over `dict`.
    pub(crate) fn single(dict: Dict) -> Layout {
        Layout {
            primary: Parts::single(dict),
            partitions: None,
            next_id: 1,
        }
    }
}

/// Figures for `collStats`/`dbStats`.
#[derive(Clone, Debug, Default)]
pub struct CollStats {
    /// Documents (maintained incrementally, an estimate between checkpoints).
    pub count: u64,
    /// Uncompressed document bytes.
    pub size: u64,
    /// Bytes the collection's file takes on disk.
    pub storage_size: u64,
    /// Each secondary index's file size (`_id_` is the collection's own tree).
    pub index_sizes: Vec<(String, u64)>,
    /// Their sum.
    pub total_index_size: u64,
}

pub(crate) const STRIPES: usize = 256;

/// Largest index entry key (the engine's key limit): checked before anything is written.
pub(crate) const MAX_INDEX_KEY_BYTES: usize = silt_storage::MAX_KEY_BYTES;

#[expect(
    clippy::cast_possible_truncation,
    reason = "the stripe is below STRIPES, a usize"
)]
pub(crate) fn stripe_of(parts: &[&[u8]]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    (h % STRIPES as u64) as usize
}

/// One collection: its primary dictionary, options and secondary indexes.
pub struct Collection {
    pub(crate) ns: String,
    /// The collection's UUID: given at creation, kept across renames and restarts
    /// (`listCollections` `info.uuid`).
    uuid: bson::Uuid,
    pub(crate) layout: RwLock<Arc<Layout>>,
    pub(crate) options: RwLock<Document>,
    pub(crate) locks: Vec<Mutex<()>>,
    /// Stripes for unique-index key prefixes (taken after the `_id` stripe, in index order).
    pub(crate) ukey_locks: Vec<Mutex<()>>,
    pub(crate) indexes: RwLock<Vec<Arc<Index>>>,
    /// Writers take it shared; an index build or drop takes it exclusively.
    pub(crate) build: RwLock<()>,
    pub(crate) catalog: Dict,
    /// False once dropped or renamed away (its catalog entry must not be written again).
    pub(crate) live: AtomicBool,
    pub(crate) meta_lock: Mutex<()>,
    /// Set while messages whose effect on the document count is unknown until they reach a
    /// leaf (fast upserts, insert-if-absent) may be pending; persisted in the catalog entry.
    pub(crate) count_uncertain: AtomicBool,
    /// Bumped by every such write, so `compact` clears the flag only if none came meanwhile.
    pub(crate) uncertain_writes: AtomicU64,
    /// Operations answered through the `_id_` index (the primary tree's `_id` order).
    pub(crate) id_accesses: Accesses,
    /// What the documents are keyed by (`primaryKey`, fixed at creation).
    pub(crate) pk: PrimaryKey,
    /// A capped collection's last insertion sequence (read from the tree on first use).
    pub(crate) natural_seq: Mutex<Option<i64>>,
    /// Held while a capped collection removes its oldest documents.
    pub(crate) cap_lock: Mutex<()>,
    /// The compiled `validator` option (with its level and action), if any.
    pub(crate) validator: RwLock<Option<Arc<silt_query::validator::Validator>>>,
    /// The `collation` option: the default of commands and indexes that name none (fixed at
    /// creation). `None` is the simple collation.
    pub(crate) collation: Option<Arc<Collation>>,
    /// This collection itself, for what must outlive a borrow of it (a transaction's list of
    /// capped collections to trim when it commits).
    pub(crate) me: Weak<Collection>,
    /// The oplog its writes are logged in (none on a standalone server, and none for the
    /// namespaces mongod does not log: `oplog::is_logged`).
    pub(crate) oplog: Option<Arc<crate::oplog::Oplog>>,
}

/// The default collation of a collection with `options` (checked by `create`; one that no
/// longer parses is logged and read as the simple collation).
fn default_collation(ns: &str, options: &Document) -> Option<Arc<Collation>> {
    let c = options.get("collation")?;
    match Collation::parse(c) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(ns, error = %e.msg, "cannot read the collection's collation");
            None
        }
    }
}

/// The validator of a collection with `options` (checked by `create`/`collMod`; one that
/// no longer parses is logged and ignored rather than refusing every write).
pub(crate) fn compile_validator(
    ns: &str,
    options: &Document,
) -> Option<Arc<silt_query::validator::Validator>> {
    // A validator compares under the collection's default collation: it is compiled and,
    // by the write rules (`rules.rs`), evaluated under it.
    let collation = default_collation(ns, options);
    let _collation = Collation::scope(collation.as_ref());
    match silt_query::validator::Validator::from_options(options) {
        Ok(v) => v.map(Arc::new),
        Err(e) => {
            tracing::error!(ns, error = %e, "cannot compile the collection's validator");
            None
        }
    }
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").field("ns", &self.ns).finish()
    }
}

/// The keys one index has for one version of a document.
pub(crate) type KeySet = Vec<(Vec<u8>, Vec<Bson>)>;

impl Collection {
    pub(crate) fn new(
        ns: String,
        uuid: bson::Uuid,
        layout: Layout,
        options: Document,
        indexes: Vec<Arc<Index>>,
        catalog: Dict,
        oplog: Option<&Arc<crate::oplog::Oplog>>,
    ) -> Arc<Collection> {
        let oplog = oplog.filter(|_| crate::oplog::is_logged(&ns)).cloned();
        Arc::new_cyclic(|me| {
            let mut c = Collection::with_self(ns, uuid, layout, options, indexes, catalog, me);
            c.oplog = oplog;
            c
        })
    }

    fn with_self(
        ns: String,
        uuid: bson::Uuid,
        layout: Layout,
        options: Document,
        indexes: Vec<Arc<Index>>,
        catalog: Dict,
        me: &Weak<Collection>,
    ) -> Collection {
        // Validated by `create`; an unreadable one in the catalog falls back to `_id`.
        let pk = PrimaryKey::of_options(&options).unwrap_or_default();
        let validator = compile_validator(&ns, &options);
        let collation = default_collation(&ns, &options);
        Collection {
            uuid,
            pk,
            collation,
            validator: RwLock::new(validator),
            natural_seq: Mutex::new(None),
            cap_lock: Mutex::new(()),
            ns,
            layout: RwLock::new(Arc::new(layout)),
            options: RwLock::new(options),
            locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            ukey_locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            indexes: RwLock::new(indexes),
            build: RwLock::new(()),
            catalog,
            live: AtomicBool::new(true),
            meta_lock: Mutex::new(()),
            count_uncertain: AtomicBool::new(false),
            uncertain_writes: AtomicU64::new(0),
            id_accesses: Accesses::default(),
            me: me.clone(),
            oplog: None,
        }
    }

    /// The catalog entry (the caller holds `meta_lock`).
    /// The collection's UUID (kept across renames and restarts).
    pub fn uuid(&self) -> bson::Uuid {
        self.uuid
    }

    pub(crate) fn meta_doc(&self) -> Document {
        let indexes = self.indexes.read().clone();
        let idx: Vec<Bson> = indexes
            .iter()
            .map(|i| Bson::Document(i.catalog_doc()))
            .collect();
        let layout = self.layout();
        let mut meta = doc! {
            "uuid": self.uuid,
            "dict": layout.primary.first().name(),
            "options": self.options.read().clone(),
            "indexes": idx,
        };
        if let Some(parts) = &layout.partitions {
            let ixparts: Vec<Arc<Parts>> = indexes.iter().map(|i| i.parts()).collect();
            let list: Vec<Bson> = parts
                .iter()
                .enumerate()
                .map(|(n, p)| {
                    let mut ixd = Document::new();
                    for (ix, ps) in indexes.iter().zip(&ixparts) {
                        ixd.insert(ix.name(), ps.members()[n].dict.name());
                    }
                    let mut d = doc! {
                        "_id": p.id as i64,
                        "createTime": p.created,
                        "dict": layout.primary.members()[n].dict.name(),
                        "indexes": ixd,
                    };
                    if let Some(m) = &p.max {
                        d.insert("max", m.clone());
                    }
                    Bson::Document(d)
                })
                .collect();
            meta.insert("partitions", list);
            meta.insert("nextPartitionId", layout.next_id as i64);
        }
        if self.count_uncertain.load(Ordering::Acquire) {
            meta.insert("countUncertain", true);
        }
        meta
    }

    /// Call before injecting a message whose effect on the document count is unknown: the
    /// maintained count stops being trusted until `compact` has applied every message.
    pub fn mark_count_uncertain(&self) -> Result<()> {
        self.uncertain_writes.fetch_add(1, Ordering::AcqRel);
        if !self.count_uncertain.swap(true, Ordering::AcqRel) {
            self.persist_meta()?;
        }
        Ok(())
    }

    /// Whether the engine's maintained row count is the exact document count.
    pub fn count_is_exact(&self) -> bool {
        !self.count_uncertain.load(Ordering::Acquire)
    }

    /// Write this collection's catalog entry (dictionary, options, index specs).
    pub(crate) fn persist_meta(&self) -> Result<()> {
        let _g = self.meta_lock.lock();
        if !self.live.load(Ordering::Acquire) {
            return Ok(());
        }
        self.catalog
            .put(self.ns.as_bytes(), &encode_doc(&self.meta_doc()))?;
        Ok(())
    }

    /// Write the catalog entry with the oplog entries of the change (create, createIndexes,
    /// dropIndexes, collMod), in one batch: after a crash the catalog and the oplog agree.
    pub(crate) fn persist_meta_logged(&self, ops: &[crate::oplog::Op]) -> Result<()> {
        let Some(log) = self.oplog.as_ref().filter(|_| !ops.is_empty()) else {
            return self.persist_meta();
        };
        let _g = self.meta_lock.lock();
        if !self.live.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut batch = silt_storage::WriteBatch::new();
        batch.put(
            &self.catalog,
            self.ns.as_bytes(),
            &encode_doc(&self.meta_doc()),
        )?;
        log.commit_logged(batch, crate::oplog::Entries::each(ops.to_vec()), |b| {
            Ok(b.commit()?)
        })
    }

    /// A command entry about this collection: `o` is `{<name>: <collection>, ...rest}`.
    pub(crate) fn ddl_op(&self, name: &str, rest: Document) -> crate::oplog::Op {
        let (db, coll) = self.ns.split_once('.').unwrap_or((&self.ns, ""));
        let mut o = doc! { name: coll };
        o.extend(rest);
        crate::oplog::Op::command(db, Some(self.uuid), o)
    }

    /// Whether its changes keep the document before them for change streams
    /// (`changeStreamPreAndPostImages: {enabled: true}`).
    pub fn keeps_pre_images(&self) -> bool {
        self.options
            .read()
            .get_document("changeStreamPreAndPostImages")
            .is_ok_and(|d| d.get_bool("enabled").unwrap_or(false))
    }

    /// `db.coll`.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The collection's default collation (`None`: the simple collation).
    pub fn default_collation(&self) -> Option<&Arc<Collation>> {
        self.collation.as_ref()
    }

    /// The collection's validator, if it has one.
    pub fn validator(&self) -> Option<Arc<silt_query::validator::Validator>> {
        self.validator.read().clone()
    }

    /// Options given at creation.
    pub fn options(&self) -> Document {
        self.options.read().clone()
    }

    /// Operations answered through `_id_` (points or ranges of the primary tree).
    pub fn id_accesses(&self) -> &Accesses {
        &self.id_accesses
    }

    /// Where the documents live now (the primary dictionary's members, partitions).
    pub(crate) fn layout(&self) -> Arc<Layout> {
        self.layout.read().clone()
    }

    /// Whether the collection was created with `partitioned: true`.
    pub fn is_partitioned(&self) -> bool {
        self.layout.read().partitions.is_some()
    }

    /// The secondary indexes (not `_id_`, which is the primary dictionary).
    pub fn indexes(&self) -> Vec<Arc<Index>> {
        self.indexes.read().clone()
    }

    /// The secondary index named `name`.
    pub fn index(&self, name: &str) -> Option<Arc<Index>> {
        self.indexes
            .read()
            .iter()
            .find(|i| i.name() == name)
            .cloned()
    }

    /// The document with this encoded key (its newest committed version).
    pub fn get_by_key(&self, key: &[u8]) -> Result<Option<Document>> {
        match self.layout().primary.get(key)? {
            Some(v) => Ok(Some(decode_doc(&self.ns, &v)?)),
            None => Ok(None),
        }
    }

    /// The stored bytes of the document with this encoded key as `snap` sees it.
    /// The stored documents of `keys` (ascending) that `snap` sees, each given to `f` with
    /// its index in `keys` (one descent per basement: `silt_storage::Dict::get_sorted`).
    pub(crate) fn get_raw_sorted_at(
        &self,
        keys: &[&[u8]],
        snap: &Snapshot,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        Ok(self
            .layout()
            .primary
            .get_sorted_at(keys, snap.engine(), f)?)
    }

    pub(crate) fn get_raw_by_key_at(&self, key: &[u8], snap: &Snapshot) -> Result<Option<Vec<u8>>> {
        Ok(self.layout().primary.get_at(key, snap.engine())?)
    }

    /// The document with this encoded key as `snap` sees it.
    pub fn get_by_key_at(&self, key: &[u8], snap: &Snapshot) -> Result<Option<Document>> {
        match self.layout().primary.get_at(key, snap.engine())? {
            Some(v) => Ok(Some(decode_doc(&self.ns, &v)?)),
            None => Ok(None),
        }
    }

    /// A snapshot of every collection of the store, as of now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.layout().primary.first().snapshot())
    }

    /// The document with this `_id`.
    pub fn get(&self, id: &Bson) -> Result<Option<Document>> {
        match self.key_of_id(id)? {
            Some(k) => self.get_by_key(&k),
            None => Ok(None),
        }
    }

    /// What the documents are keyed by.
    pub fn primary_key(&self) -> &PrimaryKey {
        &self.pk
    }

    /// The name the primary tree goes by as an index: `_id_`, or `primaryKey` under another
    /// primary key (TokuMX's name; `_id_` is a secondary index then).
    pub fn primary_index_name(&self) -> &'static str {
        if self.pk.is_id() {
            "_id_"
        } else {
            "primaryKey"
        }
    }

    /// The primary tree as `listIndexes` shows it.
    pub fn primary_index_doc(&self) -> Document {
        if self.pk.is_id() {
            let mut d = doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" };
            if let Some(c) = &self.collation {
                d.insert("collation", c.resolved().clone());
            }
            d
        } else {
            doc! {
                "v": 2,
                "key": self.pk.pattern(),
                "name": "primaryKey",
                "unique": true,
                "clustering": true,
            }
        }
    }

    /// The record key a new document gets: [`Collection::record_key`], or in a capped
    /// collection the next insertion sequence followed by the encoded `_id` (so the `_id`
    /// stays the key's last value, as index entries and covered reads expect).
    pub(crate) fn new_record_key(&self, doc: &Document) -> Result<Vec<u8>> {
        if !self.pk.is_natural() {
            return self.record_key(doc);
        }
        let mut seq = self.natural_seq.lock();
        let last = match *seq {
            Some(n) => n,
            None => {
                let mut last = 0i64;
                let mut cur = self.scan(Bound::Unbounded, Bound::Unbounded);
                while let Some((k, _)) = cur.next_doc()? {
                    // Keys decode canonically (a small Int64 comes back as an Int32).
                    let first = crate::pk::decode_values(&k).and_then(|v| v.into_iter().next());
                    if let Some(silt_bson::compare::Num::Int(n)) =
                        first.as_ref().and_then(silt_bson::compare::as_num)
                    {
                        last = last.max(n);
                    }
                }
                last
            }
        };
        *seq = Some(last + 1);
        let mut out = Vec::new();
        silt_bson::keyenc::encode_value(&Bson::Int64(last + 1), &mut out);
        silt_bson::keyenc::encode_value(doc.get("_id").unwrap_or(&Bson::Null), &mut out);
        Ok(out)
    }

    /// A capped collection: remove the oldest documents while it holds more than its `max`
    /// documents or `size` bytes (never the newest one).
    pub(crate) fn enforce_cap(&self) -> Result<()> {
        let (size, max) = {
            let o = self.options.read();
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a double option is read as MongoDB does: fraction dropped, values past \
                          the i64 range saturate"
            )]
            let num = |k: &str| match o.get(k) {
                Some(Bson::Int32(n)) => Some(i64::from(*n)),
                Some(Bson::Int64(n)) => Some(*n),
                Some(Bson::Double(f)) => Some(*f as i64),
                _ => None,
            };
            (
                num("size").filter(|n| *n > 0),
                num("max").filter(|n| *n > 0),
            )
        };
        let _g = self.cap_lock.lock();
        loop {
            let st = self.stats();
            let over = size.is_some_and(|s| st.size as i64 > s)
                || max.is_some_and(|m| st.count as i64 > m);
            if !over || st.count <= 1 {
                return Ok(());
            }
            let first = {
                let mut cur = self.scan(Bound::Unbounded, Bound::Unbounded);
                cur.next_doc()?
            };
            let Some((key, _)) = first else {
                return Ok(());
            };
            let lock = self.lock_doc(key)?;
            if let Some(old) = lock.read()? {
                self.delete(&lock, &old)?;
            }
        }
    }

    /// The record key of `doc` (its encoded `_id` unless `primaryKey` says otherwise).
    pub fn record_key(&self, doc: &Document) -> Result<Vec<u8>> {
        self.pk.key_of(doc)
    }

    /// The record key of the document with this `_id`: the encoded `_id` itself, or, under
    /// another `primaryKey`, what the `_id_` index holds for it (`None` when none does).
    pub fn key_of_id(&self, id: &Bson) -> Result<Option<Vec<u8>>> {
        if self.pk.is_id() {
            return Ok(Some(id_key(id)));
        }
        let Some(ix) = self.index("_id_") else {
            return Ok(None);
        };
        let p = id_key(id);
        let hi = crate::index::prefix_end(&p);
        let hi_b = match &hi {
            Some(h) => Bound::Excluded(h.as_slice()),
            None => Bound::Unbounded,
        };
        let mut cur = ix
            .parts()
            .cursor(Bound::Included(p.as_slice()), hi_b, None, false);
        match cur.next()? {
            Some((k, _)) => Ok(ix.entry_id_key(&k).map(<[u8]>::to_vec)),
            None => Ok(None),
        }
    }

    /// Decode a stored document (as held by a clustering index entry).
    pub fn decode(&self, bytes: &[u8]) -> Result<Document> {
        decode_doc(&self.ns, bytes)
    }

    /// A cursor over documents in `_id` order between encoded bounds.
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> DocCursor {
        DocCursor {
            ns: self.ns.clone(),
            inner: self.layout().primary.cursor(lo, hi, None, true),
        }
    }

    /// [`Collection::scan`] of what `snap` sees, from the first document to the last.
    pub fn scan_at(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, snap: &Snapshot) -> DocCursor {
        DocCursor {
            ns: self.ns.clone(),
            inner: self
                .layout()
                .primary
                .cursor(lo, hi, Some(snap.engine()), true),
        }
    }

    /// Apply every pending message of the collection and its indexes to the leaves (the
    /// engine's optimize), so that reads meet no buffered work and the maintained count is
    /// exact. Returns the file bytes freed by the checkpoint that follows, if any.
    pub(crate) fn compact(&self, env: &Env) -> Result<u64> {
        let layout = self.layout();
        let ixparts: Vec<Arc<Parts>> = self.indexes.read().iter().map(|i| i.parts()).collect();
        let dicts: Vec<Dict> = layout
            .primary
            .dicts()
            .chain(ixparts.iter().flat_map(|p| p.dicts()))
            .cloned()
            .collect();
        let before: u64 = dicts.iter().map(|d| d.stats().file_allocated_bytes).sum();
        let marks = self.uncertain_writes.load(Ordering::Acquire);
        for d in &dicts {
            d.optimize()?;
        }
        // Every message injected before the optimize has reached a leaf: the maintained
        // count is exact again, unless an uncertain write came in meanwhile.
        if self.uncertain_writes.load(Ordering::Acquire) == marks
            && self.count_uncertain.swap(false, Ordering::AcqRel)
        {
            self.persist_meta()?;
            if self.uncertain_writes.load(Ordering::Acquire) != marks {
                self.count_uncertain.store(true, Ordering::Release);
                self.persist_meta()?;
            }
        }
        env.checkpoint()?;
        let after: u64 = dicts.iter().map(|d| d.stats().file_allocated_bytes).sum();
        Ok(before.saturating_sub(after))
    }

    /// Count of documents, maintained by the engine: O(1). Writes through [`Collection`]
    /// keep it exact; documents created by update messages (fast upserts) or skipped by
    /// insert-if-absent messages are accounted when their messages reach a leaf.
    pub fn estimated_count(&self) -> u64 {
        self.layout().primary.stats().rows
    }

    /// Exact count of documents, counted in the tree without decoding documents.
    pub fn count(&self) -> Result<u64> {
        Ok(self
            .layout()
            .primary
            .count_range(Bound::Unbounded, Bound::Unbounded, true)?)
    }

    /// Size figures.
    pub fn stats(&self) -> CollStats {
        let s = self.layout().primary.stats();
        let index_sizes: Vec<(String, u64)> = self
            .indexes
            .read()
            .iter()
            .map(|i| (i.name().to_string(), i.parts().stats().file_bytes))
            .collect();
        CollStats {
            count: s.rows,
            size: s.data_bytes,
            storage_size: s.file_bytes,
            total_index_size: index_sizes.iter().map(|(_, n)| n).sum(),
            index_sizes,
        }
    }
}

/// Documents in key order.
pub struct DocCursor {
    pub(crate) ns: String,
    pub(crate) inner: PartsCursor,
}

impl std::fmt::Debug for DocCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocCursor").field("ns", &self.ns).finish()
    }
}

impl DocCursor {
    /// The next document and its encoded key.
    pub fn next_doc(&mut self) -> Result<Option<(Vec<u8>, Document)>> {
        match self.inner.next()? {
            Some((k, v)) => Ok(Some((k, decode_doc(&self.ns, &v)?))),
            None => Ok(None),
        }
    }
}

/// Per-database figures summed over collections.
pub fn sum_stats<'a>(colls: impl Iterator<Item = &'a Arc<Collection>>) -> CollStats {
    let mut t = CollStats::default();
    for c in colls {
        let s = c.stats();
        t.count += s.count;
        t.size += s.size;
        t.storage_size += s.storage_size;
        t.total_index_size += s.total_index_size;
        t.index_sizes.extend(s.index_sizes);
    }
    t
}
