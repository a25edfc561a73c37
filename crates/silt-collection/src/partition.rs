//! Partitioned collections (issue 12, `docs/partitions-plan.md`): the catalog form of the
//! partitions, and adding and dropping them.
//!
//! A partitioned collection's primary dictionary and each index are [`Parts`] with the same
//! pivots: partition `i` holds the documents whose `_id` is above partition `i - 1`'s `max`
//! and at most its own, with their index entries. The catalog entry lists the partitions:
//!
//! ```text
//! partitions: [{_id: NumberLong, createTime: Date, dict, indexes: {name: dict}, max?: {_id}}]
//! nextPartitionId: NumberLong
//! ```
//!
//! (`max` is absent on the last partition, which is unbounded.) The top-level `dict` and each
//! index spec's `dict` name the first partition's, for readers of the catalog that know no
//! partitions.
//!
//! **Crash safety.** Adding creates the new dictionaries, then writes the catalog entry (one
//! engine write) and syncs the log. Dropping writes the catalog entry without the partitions,
//! syncs, and only then drops their dictionaries. A crash between the two steps leaves
//! dictionaries no catalog entry names, which [`Store::open`] drops as orphans: after recovery
//! the collection is as it was before the operation or after it, never between.
//!
//! **Locks.** Both operations hold the collection's `build` lock exclusively (then the store's
//! `ddl` mutex) only while they swap the layout and write the catalog entry: writers of any
//! partition wait that long, readers not at all (they keep the layout they took; a member
//! dropped under a cursor ends, and a point read in it finds nothing). The dictionaries of a
//! dropped partition are dropped after the locks are released.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bson::{Bson, Document};
use silt_storage::Dict;

use crate::collection::{Layout, PartInfo};
use crate::parts::{Member, Parts};
use crate::{CollError, Collection, IndexSpec, PrimaryKey, Result, Store};

/// Which partitions `dropPartition` drops.
#[derive(Debug, Clone)]
pub enum DropPartitions {
    /// The partition with this id (any position).
    Id(u64),
    /// From the first, every partition whose `max` is at or below this key document
    /// (`{_id: v}`, or every field of the collection's `primaryKey`); the last partition always
    /// stays.
    UpTo(Document),
}

/// One partition as `getPartitionInfo` and `collStats` show it.
#[derive(Debug, Clone)]
pub struct PartitionStats {
    pub info: PartInfo,
    /// Documents (the engine's maintained count).
    pub count: u64,
    /// Uncompressed document bytes.
    pub size: u64,
    /// Bytes its primary dictionary's file takes.
    pub storage_size: u64,
    /// Bytes its index files take.
    pub index_size: u64,
}

fn bad(code: i32, msg: impl Into<String>) -> CollError {
    CollError::Partition {
        code,
        msg: msg.into(),
    }
}

/// The layout of a new partitioned collection: one partition, id 0, unbounded.
pub(crate) fn first_layout(dict: Dict) -> Layout {
    Layout {
        primary: Parts::single(dict),
        partitions: Some(vec![PartInfo {
            id: 0,
            max: None,
            created: bson::DateTime::now(),
        }]),
        next_id: 1,
    }
}

/// The layout and each index's members from a catalog entry's `partitions` (see the module
/// docs), opening dictionaries with `open`.
pub(crate) fn load(
    ns: &str,
    meta: &Document,
    list: &bson::Array,
    specs: &[(IndexSpec, Document)],
    open: &mut dyn FnMut(&str) -> Result<Dict>,
) -> Result<(Layout, Vec<Parts>)> {
    let pk = PrimaryKey::of_options(&meta.get_document("options").cloned().unwrap_or_default())
        .unwrap_or_default();
    let bad_entry = |detail: String| CollError::BadStoredDocument {
        ns: ns.to_string(),
        detail,
    };
    let mut infos = Vec::new();
    let mut primary = Vec::new();
    let mut ixmembers: Vec<Vec<Member>> = specs.iter().map(|_| Vec::new()).collect();
    for p in list {
        let Bson::Document(p) = p else {
            return Err(bad_entry("a partition entry is not a document".into()));
        };
        let id = p
            .get_i64("_id")
            .map_err(|_| bad_entry("a partition without an _id".into()))? as u64;
        let max = p.get_document("max").ok().cloned();
        let created = p
            .get_datetime("createTime")
            .copied()
            .unwrap_or(bson::DateTime::from_millis(0));
        let max_key = match &max {
            Some(m) => Some(
                pk.key_of_bound(m)
                    .map_err(|e| bad_entry(format!("partition {id}: max {m}: {e}")))?,
            ),
            None => None,
        };
        let dict = open(p.get_str("dict").unwrap_or_default())?;
        primary.push(Member {
            id,
            max: max_key.clone(),
            dict,
        });
        let ixd = p.get_document("indexes").cloned().unwrap_or_default();
        for ((spec, _), members) in specs.iter().zip(ixmembers.iter_mut()) {
            let name = ixd.get_str(&spec.name).map_err(|_| {
                bad_entry(format!(
                    "partition {id}: no dictionary for index {}",
                    spec.name
                ))
            })?;
            members.push(Member {
                id,
                max: max_key.clone(),
                dict: open(name)?,
            });
        }
        infos.push(PartInfo { id, max, created });
    }
    let next_id = meta
        .get_i64("nextPartitionId")
        .map(|n| n as u64)
        .unwrap_or_else(|_| infos.iter().map(|p| p.id + 1).max().unwrap_or(0));
    let primary = Parts::new(primary).map_err(|e| bad_entry(e.to_string()))?;
    let mut ixparts = Vec::new();
    for m in ixmembers {
        ixparts.push(Parts::new(m).map_err(|e| bad_entry(e.to_string()))?);
    }
    Ok((
        Layout {
            primary,
            partitions: Some(infos),
            next_id,
        },
        ixparts,
    ))
}

/// `members` with member `i`'s `max` set to `max` (and the rest as they are).
fn with_max(members: &[Member], i: usize, max: Option<Vec<u8>>) -> Vec<Member> {
    let mut m = members.to_vec();
    m[i].max = max;
    m
}

impl Collection {
    fn partitions_or_refuse(&self) -> Result<Arc<Layout>> {
        let layout = self.layout();
        if layout.partitions.is_none() {
            return Err(bad(
                20,
                format!("collection {} is not partitioned", self.ns),
            ));
        }
        Ok(layout)
    }

    /// Each partition with its figures, in order (`getPartitionInfo`, `collStats`).
    pub fn partition_stats(&self) -> Result<Vec<PartitionStats>> {
        let layout = self.partitions_or_refuse()?;
        let ixparts: Vec<Arc<Parts>> = self.indexes.read().iter().map(|i| i.parts()).collect();
        let infos = layout.partitions.as_deref().unwrap_or_default();
        Ok(infos
            .iter()
            .enumerate()
            .map(|(n, info)| {
                let s = layout.primary.members()[n].dict.stats();
                let index_size = ixparts
                    .iter()
                    .filter_map(|p| p.members().get(n))
                    .map(|m| m.dict.stats().file_bytes)
                    .sum();
                PartitionStats {
                    info: info.clone(),
                    count: s.rows,
                    size: s.data_bytes,
                    storage_size: s.file_bytes,
                    index_size,
                }
            })
            .collect())
    }

    /// The largest primary key of the last partition, if it holds any document.
    fn last_key(&self, layout: &Layout) -> Result<Option<Vec<u8>>> {
        let last = &layout.primary.members()[layout.primary.members().len() - 1];
        let mut c = last.dict.cursor(Bound::Unbounded, Bound::Unbounded);
        c.seek_last();
        Ok(c.prev()?.map(|(k, _)| k))
    }

    /// Install `layout` with each index's members `ixparts` and write the catalog entry; on
    /// failure the old layout comes back. The caller holds `build` exclusively.
    fn swap_layout(&self, layout: Layout, ixparts: Vec<Parts>, op: crate::oplog::Op) -> Result<()> {
        let old = self.layout();
        let indexes = self.indexes.read().clone();
        let old_ix: Vec<Arc<Parts>> = indexes.iter().map(|i| i.parts()).collect();
        *self.layout.write() = Arc::new(layout);
        for (ix, p) in indexes.iter().zip(ixparts) {
            ix.set_parts(p);
        }
        if let Err(e) = self.persist_meta_logged(&[op]) {
            *self.layout.write() = old;
            for (ix, p) in indexes.iter().zip(old_ix) {
                ix.set_parts((*p).clone());
            }
            return Err(e);
        }
        Ok(())
    }
}

impl Store {
    fn partitioned(&self, ns: &str) -> Result<Arc<Collection>> {
        let c = self
            .get(ns)
            .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string()))?;
        c.partitions_or_refuse()?;
        Ok(c)
    }

    /// `addPartition`: cap the last partition at `new_max` (an `_id`), or without one at the
    /// largest `_id` it holds, and open a new, empty last partition. Returns it.
    pub fn add_partition(&self, ns: &str, new_max: Option<Document>) -> Result<PartInfo> {
        let c = self.partitioned(ns)?;
        loop {
            // The new partition's dictionaries first, outside the collection's locks (making
            // a file syncs the engine's catalog): a crash before the catalog write leaves
            // them orphaned, and the next start drops them.
            let nix = c.indexes.read().len();
            let mut made = Vec::new();
            let built = (|| -> Result<(Dict, Vec<Dict>)> {
                let mut create = |kind: &str| -> Result<Dict> {
                    let name = self.new_dict_name(kind);
                    let d = self.env.create_counted_dict(&name)?;
                    made.push(name);
                    Ok(d)
                };
                let d = create("coll")?;
                let mut ixd = Vec::new();
                for _ in 0..nix {
                    ixd.push(create("idx")?);
                }
                Ok((d, ixd))
            })();
            let r = built.and_then(|(d, ixd)| self.install_partition(&c, new_max.clone(), d, ixd));
            match r {
                Ok(Some(info)) => {
                    // Durable before the reply (and before the crash point, so that the
                    // test sees the catalog entry written).
                    self.env.sync_log()?;
                    self.crash_points.hit(&self.crash_points.partition_add);
                    tracing::info!(ns, partition = info.id, "added a partition");
                    return Ok(info);
                }
                Ok(None) | Err(_) => {
                    for name in &made {
                        let _ = self.env.drop_dict(name);
                    }
                    // An index was created or dropped meanwhile: again, with its count.
                    r?;
                }
            }
        }
    }

    /// Cap the last partition and append one over `dict` and `ixdicts` (one per index), under
    /// the collection's `build` lock and the store's `ddl` mutex; `None` when the collection's
    /// indexes are no longer as many as `ixdicts`.
    fn install_partition(
        &self,
        c: &Collection,
        new_max: Option<Document>,
        dict: Dict,
        ixdicts: Vec<Dict>,
    ) -> Result<Option<PartInfo>> {
        let _b = c.build.write();
        let _g = self.ddl.lock();
        let indexes = c.indexes.read().clone();
        if indexes.len() != ixdicts.len() {
            return Ok(None);
        }
        let layout = c.partitions_or_refuse()?;
        let members = layout.primary.members();
        let n = members.len();
        let prev_max = (n > 1).then(|| members[n - 2].max.clone()).flatten();
        let last_key = c.last_key(&layout)?;
        let (cap, cap_value) = match new_max {
            None => {
                let Some(k) = last_key else {
                    return Err(bad(
                        17248,
                        "can only cap a partition with no pivot if it is non-empty",
                    ));
                };
                let v = c
                    .pk
                    .doc_of_key(&k)
                    .ok_or_else(|| bad(2, "the largest key of the last partition is unreadable"))?;
                (k, v)
            }
            Some(v) => {
                if v.values().any(|x| matches!(x, Bson::MaxKey)) {
                    return Err(bad(2, format!("newMax must be below MaxKey: {v}")));
                }
                let k = c.pk.key_of_bound(&v)?;
                if prev_max.as_ref().is_some_and(|p| &k <= p) {
                    return Err(bad(
                        17249,
                        format!(
                            "newMax {v} must be greater than the max of the previous partition"
                        ),
                    ));
                }
                if last_key.as_ref().is_some_and(|l| &k < l) {
                    return Err(bad(
                        17250,
                        format!("newMax {v} must be at least the largest key in the collection"),
                    ));
                }
                (k, v)
            }
        };
        let id = layout.next_id;
        let info = PartInfo {
            id,
            max: None,
            created: bson::DateTime::now(),
        };
        let extend = |old: &[Member], d: Dict| -> Result<Parts> {
            let mut m = with_max(old, n - 1, Some(cap.clone()));
            m.push(Member {
                id,
                max: None,
                dict: d,
            });
            Ok(Parts::new(m)?)
        };
        let primary = extend(members, dict)?;
        let mut ixparts = Vec::new();
        for (ix, d) in indexes.iter().zip(ixdicts) {
            ixparts.push(extend(ix.parts().members(), d)?);
        }
        let mut infos = layout.partitions.clone().unwrap_or_default();
        if let Some(last) = infos.last_mut() {
            last.max = Some(cap_value.clone());
        }
        infos.push(info.clone());
        c.swap_layout(
            Layout {
                primary,
                partitions: Some(infos),
                next_id: id + 1,
            },
            ixparts,
            c.ddl_op("addPartition", bson::doc! { "newMax": cap_value.clone() }),
        )?;
        tracing::debug!(ns = %c.ns, partition = id, max = %cap_value, "capped the last partition");
        Ok(Some(info))
    }

    /// `dropPartition`: drop the chosen partitions (their dictionaries, so their space is
    /// freed at once). Returns the ids dropped. Dropping the only partition is refused
    /// (17252); dropping by `max` always leaves the last partition.
    pub fn drop_partition(&self, ns: &str, which: DropPartitions) -> Result<Vec<u64>> {
        let c = self.partitioned(ns)?;
        let gone: Vec<Dict>;
        let ids: Vec<u64>;
        {
            let _b = c.build.write();
            let _g = self.ddl.lock();
            let layout = c.partitions_or_refuse()?;
            let members = layout.primary.members();
            let n = members.len();
            let drop: Vec<usize> = match &which {
                DropPartitions::Id(id) => {
                    let Some(i) = members.iter().position(|m| m.id == *id) else {
                        return Err(bad(2, format!("no partition with id {id} in {ns}")));
                    };
                    if n == 1 {
                        return Err(bad(
                            17252,
                            "cannot drop the only partition of a collection; drop the collection instead",
                        ));
                    }
                    vec![i]
                }
                DropPartitions::UpTo(v) => {
                    let k = c.pk.key_of_bound(v)?;
                    (0..n - 1)
                        .take_while(|&i| members[i].max.as_ref().is_some_and(|m| m <= &k))
                        .collect()
                }
            };
            if drop.is_empty() {
                return Ok(Vec::new());
            }
            let keep = |i: &usize| !drop.contains(i);
            let shrink = |old: &[Member]| -> Result<Parts> {
                let mut m: Vec<Member> = (0..old.len())
                    .filter(keep)
                    .map(|i| old[i].clone())
                    .collect();
                // The last partition is unbounded, whichever it is now.
                if let Some(last) = m.last_mut() {
                    last.max = None;
                }
                Ok(Parts::new(m)?)
            };
            let indexes = c.indexes.read().clone();
            let primary = shrink(members)?;
            let mut ixparts = Vec::new();
            let mut dicts: Vec<Dict> = drop.iter().map(|&i| members[i].dict.clone()).collect();
            for ix in &indexes {
                let p = ix.parts();
                dicts.extend(drop.iter().map(|&i| p.members()[i].dict.clone()));
                ixparts.push(shrink(p.members())?);
            }
            let old_infos = layout.partitions.clone().unwrap_or_default();
            let mut infos: Vec<PartInfo> =
                (0..n).filter(keep).map(|i| old_infos[i].clone()).collect();
            if let Some(last) = infos.last_mut() {
                last.max = None;
            }
            ids = drop.iter().map(|&i| members[i].id).collect();
            let logged: Vec<i64> = ids
                .iter()
                .map(|&i| i64::try_from(i).unwrap_or(i64::MAX))
                .collect();
            c.swap_layout(
                Layout {
                    primary,
                    partitions: Some(infos),
                    next_id: layout.next_id,
                },
                ixparts,
                c.ddl_op("dropPartition", bson::doc! { "ids": logged }),
            )?;
            gone = dicts;
        }
        // Durable before the files go: a crash from here on leaves orphans that the next
        // start drops, never a catalog entry naming a missing file.
        self.env.sync_log()?;
        self.crash_points.hit(&self.crash_points.partition_drop);
        for d in gone {
            self.env.drop_dict(&d.name())?;
        }
        tracing::info!(ns, partitions = ?ids, "dropped partitions");
        Ok(ids)
    }
}

/// Test hooks that end the process at a point of a partition change, as a crash there would
/// (the server's `configureFailPoint` sets them; the crash tests restart and check).
#[derive(Debug, Default)]
pub struct CrashPoints {
    /// After `addPartition` has written and synced the catalog entry.
    pub partition_add: AtomicBool,
    /// After `dropPartition` has written the catalog entry, before it drops the dictionaries.
    pub partition_drop: AtomicBool,
}

impl CrashPoints {
    fn hit(&self, point: &AtomicBool) {
        if point.load(Ordering::Acquire) {
            tracing::error!("crash point reached: the process ends here, as in a crash");
            std::process::abort();
        }
    }
}

/// The `max` of a partition as `getPartitionInfo` shows it: `{_id: value}`, MaxKey for the
/// last partition.
pub fn max_doc(info: &PartInfo, pk: &PrimaryKey) -> Document {
    info.max.clone().unwrap_or_else(|| pk.max_key_doc())
}

/// When a partitioned collection rotates by itself: the `partitionRetention` option of
/// `create`, `{every: {documents: N} | {seconds: S}, keep: K}`. Once the last partition holds
/// N documents, or was opened S seconds ago (and holds any), a new partition is opened; then
/// the oldest partitions beyond K (the new one included) are dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub every: Every,
    /// Partitions kept, the one being filled included.
    pub keep: u64,
}

/// How often a new partition is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    Documents(u64),
    Seconds(u64),
}

/// What one rotation did.
#[derive(Debug, Clone)]
pub struct Rotation {
    pub ns: String,
    /// The partition opened, with the documents the one before it holds.
    pub added: Option<(u64, u64)>,
    /// Partitions dropped.
    pub dropped: Vec<u64>,
    /// How long the drop took.
    pub drop_ms: u64,
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is integral and in [1, 9e15): exact in u64"
)]
fn positive(v: Option<&Bson>) -> Option<u64> {
    match v? {
        Bson::Int32(n) if *n > 0 => Some(*n as u64),
        Bson::Int64(n) if *n > 0 => Some(*n as u64),
        Bson::Double(f) if *f >= 1.0 && f.fract() == 0.0 && *f < 9.0e15 => Some(*f as u64),
        _ => None,
    }
}

impl Retention {
    /// Parse the option; the error names what is wrong.
    pub fn parse(d: &Document) -> std::result::Result<Retention, String> {
        const SHAPE: &str =
            "partitionRetention must be {every: {documents: <n>} or {seconds: <n>}, keep: <n>}";
        if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "every" | "keep")) {
            return Err(format!("{SHAPE}: unknown field {k}"));
        }
        let keep = positive(d.get("keep"))
            .ok_or_else(|| format!("{SHAPE}: keep must be a positive whole number"))?;
        let every = match d.get("every") {
            Some(Bson::Document(e)) if e.len() == 1 => {
                match (positive(e.get("documents")), positive(e.get("seconds"))) {
                    (Some(n), None) => Every::Documents(n),
                    (None, Some(s)) => Every::Seconds(s),
                    _ => {
                        return Err(format!(
                            "{SHAPE}: every takes documents or seconds, a positive whole number"
                        ))
                    }
                }
            }
            _ => return Err(format!("{SHAPE}: every is missing or malformed")),
        };
        Ok(Retention { every, keep })
    }
}

impl Store {
    /// Rotate every partitioned collection whose `partitionRetention` says it is due (the
    /// server calls this once a second). Failures are logged and the others go on.
    pub fn run_retention(&self) -> Vec<Rotation> {
        let colls: Vec<Arc<Collection>> = self.colls.read().values().cloned().collect();
        let mut out = Vec::new();
        for c in colls {
            let Some(Ok(r)) = c
                .options
                .read()
                .get_document("partitionRetention")
                .ok()
                .map(Retention::parse)
            else {
                continue;
            };
            match self.rotate(&c, r) {
                Ok(Some(rot)) => out.push(rot),
                Ok(None) => {}
                Err(e) => tracing::warn!(ns = %c.ns, error = %e, "partition rotation failed"),
            }
        }
        out
    }

    fn rotate(&self, c: &Collection, r: Retention) -> Result<Option<Rotation>> {
        let stats = c.partition_stats()?;
        let Some(last) = stats.last() else {
            return Ok(None);
        };
        let due = last.count > 0
            && match r.every {
                Every::Documents(n) => last.count >= n,
                Every::Seconds(s) => {
                    let age = bson::DateTime::now().timestamp_millis()
                        - last.info.created.timestamp_millis();
                    age >= (s as i64).saturating_mul(1000)
                }
            };
        let mut rot = Rotation {
            ns: c.ns.clone(),
            added: None,
            dropped: Vec::new(),
            drop_ms: 0,
        };
        let mut n = stats.len() as u64;
        if due {
            match self.add_partition(&c.ns, None) {
                Ok(p) => {
                    rot.added = Some((p.id, last.count));
                    n += 1;
                }
                // Emptied meanwhile: nothing to cap.
                Err(CollError::Partition { code: 17248, .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if n > r.keep {
            let started = std::time::Instant::now();
            let first: Vec<u64> = c
                .partition_stats()?
                .iter()
                .take(usize::try_from(n - r.keep).unwrap_or(usize::MAX))
                .map(|p| p.info.id)
                .collect();
            for id in first {
                rot.dropped
                    .extend(self.drop_partition(&c.ns, DropPartitions::Id(id))?);
            }
            rot.drop_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        }
        if rot.added.is_none() && rot.dropped.is_empty() {
            return Ok(None);
        }
        tracing::info!(
            ns = %rot.ns,
            added = ?rot.added.map(|a| a.0),
            documents_in_capped = ?rot.added.map(|a| a.1),
            dropped = ?rot.dropped,
            drop_ms = rot.drop_ms,
            "partition rotation"
        );
        Ok(Some(rot))
    }
}
