//! The oplog, `local.oplog.rs`: every change of a replica-set member's data, in MongoDB's
//! entry format (`entry.rs`), kept as TokuMX kept it, in a partitioned store trimmed by
//! dropping whole partitions.
//!
//! **Storage.** Each partition is one engine dictionary keyed by the entry's time (`ts`
//! packed, `clock.rs`, as 8 big-endian bytes), valued by the entry's BSON. Partitions hold
//! consecutive ranges of times, oldest first; entries go into the newest. The partition list
//! is one catalog entry (`$oplog` in `_catalog`, which no namespace can be). Trimming drops
//! the oldest partition, a catalog write and a file removal: writers never wait for it.
//!
//! **Atomicity.** A write puts its entry in the same engine batch (or transaction) as the
//! change it records ([`crate::Collection`]'s one document write): after any crash the data
//! and the oplog agree.
//!
//! **Times and visibility.** A write takes its time from the member's clock when it is about
//! to commit ([`Oplog::reserve`]) and holds it as *pending* until its batch is committed or
//! dropped. Writes commit in any order, so a reader must not pass a time that is still
//! pending: readers read up to the *visibility point*, just below the oldest pending time
//! (mongod's "all committed" point), and so never skip an entry that commits late.
//!
//! **Lock order.** The pending set's mutex is a leaf: it is taken with no engine lock held and
//! nothing is taken under it but the clock (an atomic) and the partition list's read lock.

mod apply;
mod clock;
mod diff;
mod entries;
mod entry;
pub(crate) mod proposal;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document, Timestamp};
use parking_lot::{Condvar, Mutex, RwLock};
use silt_storage::{Cursor, Dict, Env, WriteBatch};

pub use apply::apply;
pub(crate) use apply::apply_as;
pub use clock::{pack, unpack, Clock};
pub use diff::{apply_diff, describe, diff_docs, BadDiff, UpdateDescription};
pub(crate) use entries::{Command, Entries, Message, Stamps};
pub use entry::{Op, OpSession};
pub use proposal::{limit_wait, Refusal, Replicator, WaitLimit, DEFAULT_WAIT};
pub(crate) use proposal::{refused, Replication, POSITION_KEY};

use crate::{decode_doc, encode_doc, CollError, Result};

/// The namespace clients read the oplog under.
pub const OPLOG_NS: &str = "local.oplog.rs";

/// The oplog's catalog key (no namespace starts with `$`).
const META_KEY: &[u8] = b"$oplog";

/// How often a member with no writes logs a no-op, so that readers see time pass.
pub const NOOP_INTERVAL: Duration = Duration::from_secs(10);

/// How large the oplog may grow and how long entries are kept regardless.
#[derive(Debug, Clone, Copy)]
pub struct OplogOptions {
    /// `--oplogSize` (`replication.oplogSizeMB`) in bytes: past it, the oldest partition
    /// is dropped.
    pub max_bytes: u64,
    /// `storage.oplogMinRetentionHours`: a partition is dropped only once its newest entry
    /// is older than this.
    pub min_retention: Duration,
}

impl Default for OplogOptions {
    fn default() -> Self {
        OplogOptions {
            max_bytes: 990 << 20,
            min_retention: Duration::ZERO,
        }
    }
}

/// Whether writes to `ns` are logged: not the `local` database (the oplog itself among
/// them), not the retryable-write table (derived from the entries' session fields) and not
/// the profiler's collections, as in mongod.
pub fn is_logged(ns: &str) -> bool {
    !(ns.starts_with("local.") || ns == SESSION_TABLE_NS || ns.ends_with(".system.profile"))
}

/// The retryable-write table: not logged, but replicated with the writes it records.
pub const SESSION_TABLE_NS: &str = "config.transactions";

thread_local! {
    /// The newest time this thread reserved (0: none since the last `take_last_here`).
    static LAST_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// Whether this thread is applying the replicated log (`crate::replicated`): the writes it
    /// makes log nothing of their own, since the apply writes the entries it applies.
    static APPLYING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While held, the writes of this thread log no entries (see `APPLYING`).
pub(crate) struct ApplyScope(());

impl ApplyScope {
    pub(crate) fn enter() -> ApplyScope {
        APPLYING.with(|c| c.set(true));
        ApplyScope(())
    }
}

impl Drop for ApplyScope {
    fn drop(&mut self) {
        APPLYING.with(|c| c.set(false));
    }
}

/// Whether this thread is applying the replicated log.
pub(crate) fn applying() -> bool {
    APPLYING.with(std::cell::Cell::get)
}

/// Note `ts` as the newest time a write on this thread took.
pub(crate) fn note_here(ts: u64) {
    LAST_HERE.with(|c| c.set(ts));
}

/// The newest time a write on this thread took since the last call (a request's
/// `operationTime`), and forget it.
pub fn take_last_here() -> Option<Timestamp> {
    let v = LAST_HERE.with(|c| c.replace(0));
    (v != 0).then(|| unpack(v))
}

/// One partition: a dictionary of consecutive entries.
#[derive(Debug)]
struct Part {
    id: u64,
    dict: Dict,
    created: bson::DateTime,
    /// Entry bytes written to it (estimated from the tree at open).
    bytes: AtomicU64,
    /// Reservations whose entries go into it and are not committed yet: it is not dropped
    /// while any is.
    writing: AtomicU64,
}

struct Pending {
    times: BTreeSet<u64>,
    /// The partition new entries go into.
    current: Arc<Part>,
}

/// The oplog of one store (see the module's header).
pub struct Oplog {
    clock: Arc<Clock>,
    term: AtomicI64,
    pub(crate) catalog: Dict,
    parts: RwLock<Arc<Vec<Arc<Part>>>>,
    pending: Mutex<Pending>,
    /// Notified whenever the visibility point may have moved.
    advanced: Condvar,
    max_bytes: AtomicU64,
    min_retention_s: AtomicU64,
    next_id: AtomicU64,
    /// The oplog's collection UUID, as `listCollections` shows it.
    uuid: bson::Uuid,
    /// On a multi-member set: how commits reach the set's log (`crate::replicated`).
    pub(crate) repl: OnceLock<Arc<Replication>>,
    /// The time of the newest entry written (on a multi-member set, of the newest applied):
    /// the next replicated entry's time is after it.
    pub(crate) newest_ts: AtomicU64,
}

impl std::fmt::Debug for Oplog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oplog")
            .field("parts", &self.parts.read().len())
            .finish()
    }
}

fn key(ts: u64) -> [u8; 8] {
    ts.to_be_bytes()
}

/// The time of an entry's key, or of a pre-image's (the entry's key and 4 bytes more).
fn ts_of_key(k: &[u8]) -> Result<u64> {
    k.get(..8)
        .and_then(|k| <[u8; 8]>::try_from(k).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| CollError::BadStoredDocument {
            ns: OPLOG_NS.into(),
            detail: "an oplog key is not 8 bytes".into(),
        })
}

/// The partitions the catalog's oplog entry names (one new, empty one when it names none),
/// the next partition id and the oplog's UUID.
fn read_parts(
    env: &Env,
    catalog: &Dict,
    dict_name: &dyn Fn() -> String,
) -> Result<(Vec<Arc<Part>>, u64, bson::Uuid)> {
    let (parts, next_id, uuid) = match catalog.get(META_KEY)? {
        Some(bytes) => {
            let meta = decode_doc(OPLOG_NS, &bytes)?;
            let mut parts = Vec::new();
            for p in meta.get_array("parts").map_err(|_| bad("parts"))? {
                let Bson::Document(p) = p else {
                    return Err(bad("a partition"));
                };
                let dict = env.open_dict(p.get_str("dict").map_err(|_| bad("dict"))?)?;
                let bytes = dict.stats().data_bytes;
                parts.push(Arc::new(Part {
                    id: u64::try_from(p.get_i64("id").unwrap_or(0)).unwrap_or(0),
                    dict,
                    created: p
                        .get_datetime("created")
                        .copied()
                        .unwrap_or_else(|_| bson::DateTime::now()),
                    bytes: AtomicU64::new(bytes),
                    writing: AtomicU64::new(0),
                }));
            }
            let next = u64::try_from(meta.get_i64("nextId").unwrap_or(1)).unwrap_or(1);
            let uuid = match meta.get("uuid") {
                Some(Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice())
                    .map(bson::Uuid::from_bytes)
                    .unwrap_or_else(|_| bson::Uuid::new()),
                _ => bson::Uuid::new(),
            };
            (parts, next, uuid)
        }
        None => (Vec::new(), 0, bson::Uuid::new()),
    };
    let mut parts = parts;
    let mut next_id = next_id;
    if parts.is_empty() {
        parts.push(Arc::new(Part {
            id: next_id,
            dict: env.create_dict(&dict_name())?,
            created: bson::DateTime::now(),
            bytes: AtomicU64::new(0),
            writing: AtomicU64::new(0),
        }));
        next_id += 1;
    }
    Ok((parts, next_id, uuid))
}

/// The time of the newest entry in `parts` (0 when they are empty).
fn newest_of(parts: &[Arc<Part>]) -> Result<u64> {
    let mut newest = 0;
    for p in parts.iter().rev() {
        let mut c = p.dict.cursor(Bound::Unbounded, Bound::Unbounded);
        c.seek_last();
        if let Some((k, _)) = c.prev()? {
            newest = ts_of_key(&k)?;
            break;
        }
    }
    Ok(newest)
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Oplog {
    /// Open the oplog the catalog names, or create it (one empty partition) when it names
    /// none. `dict_name` gives fresh dictionary names; `known` collects the names in use.
    pub(crate) fn open(
        env: &Env,
        catalog: &Dict,
        opts: OplogOptions,
        dict_name: &dyn Fn() -> String,
    ) -> Result<Oplog> {
        let (parts, next_id, uuid) = read_parts(env, catalog, dict_name)?;
        // The clock resumes after the newest entry.
        let newest = newest_of(&parts)?;
        let current = parts.last().cloned().ok_or_else(|| bad("no partition"))?;
        let log = Oplog {
            clock: Arc::new(Clock::starting_after(newest)),
            term: AtomicI64::new(1),
            catalog: catalog.clone(),
            parts: RwLock::new(Arc::new(parts)),
            pending: Mutex::new(Pending {
                times: BTreeSet::new(),
                current,
            }),
            advanced: Condvar::new(),
            max_bytes: AtomicU64::new(opts.max_bytes.max(1)),
            min_retention_s: AtomicU64::new(opts.min_retention.as_secs()),
            next_id: AtomicU64::new(next_id),
            uuid,
            repl: OnceLock::new(),
            newest_ts: AtomicU64::new(newest),
        };
        log.persist()?;
        Ok(log)
    }

    /// The dictionary names the catalog entry at `bytes` uses (for the store's sweep of
    /// orphaned dictionaries).
    pub(crate) fn dicts_named(catalog: &Dict) -> Result<Vec<String>> {
        let Some(bytes) = catalog.get(META_KEY)? else {
            return Ok(Vec::new());
        };
        let meta = decode_doc(OPLOG_NS, &bytes)?;
        Ok(meta
            .get_array("parts")
            .map(|l| {
                l.iter()
                    .filter_map(|p| p.as_document()?.get_str("dict").ok().map(String::from))
                    .collect()
            })
            .unwrap_or_default())
    }

    pub(crate) fn is_meta_key(k: &[u8]) -> bool {
        k == META_KEY
    }

    fn persist(&self) -> Result<()> {
        let parts = self.parts.read().clone();
        let list: Vec<Bson> = parts
            .iter()
            .map(|p| {
                Bson::Document(doc! {
                    "id": i64_of(p.id),
                    "dict": p.dict.name(),
                    "created": p.created,
                })
            })
            .collect();
        let meta = doc! {
            "uuid": self.uuid,
            "parts": list,
            "nextId": i64_of(self.next_id.load(Ordering::Acquire)),
        };
        self.catalog.put(META_KEY, &encode_doc(&meta))?;
        Ok(())
    }

    /// The member's clock (shared with the server, which hands out cluster times from it).
    pub fn clock(&self) -> &Arc<Clock> {
        &self.clock
    }

    /// The current term (`t` of every entry).
    pub fn term(&self) -> i64 {
        self.term.load(Ordering::Acquire)
    }

    /// The oplog's collection UUID.
    pub fn uuid(&self) -> bson::Uuid {
        self.uuid
    }

    /// The size limit in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.load(Ordering::Acquire)
    }

    /// Change the size limit (`replSetResizeOplog`); trimming follows.
    pub fn set_max_bytes(&self, n: u64) {
        self.max_bytes.store(n.max(1), Ordering::Release);
    }

    /// Change the minimum retention (`replSetResizeOplog` `minRetentionHours`).
    pub fn set_min_retention(&self, d: Duration) {
        self.min_retention_s.store(d.as_secs(), Ordering::Release);
    }

    /// The minimum retention.
    pub fn min_retention(&self) -> Duration {
        Duration::from_secs(self.min_retention_s.load(Ordering::Acquire))
    }

    /// Take `n` times for entries about to be written; they are pending until the returned
    /// value is dropped (after the batch holding the entries committed or failed).
    pub(crate) fn reserve(&self, n: usize) -> Reservation<'_> {
        let mut p = self.pending.lock();
        let times: Vec<u64> = (0..n).map(|_| self.clock.tick_packed()).collect();
        p.times.extend(times.iter().copied());
        if let Some(last) = times.last() {
            LAST_HERE.with(|c| c.set(*last));
        }
        p.current.writing.fetch_add(1, Ordering::AcqRel);
        Reservation {
            log: self,
            stamps: Stamps {
                times,
                term: self.term(),
                wall: bson::DateTime::now(),
                part: p.current.clone(),
            },
        }
    }

    /// Take the `n` times after the newest entry's and not before `wall` (the times of a
    /// replicated entry, which every member computes alike), in `term`; pending until the
    /// returned value is dropped.
    pub(crate) fn reserve_replicated(
        &self,
        n: usize,
        term: i64,
        wall: bson::DateTime,
    ) -> Reservation<'_> {
        let mut p = self.pending.lock();
        let secs = u64::try_from(wall.timestamp_millis() / 1000).unwrap_or(0);
        let first = (self.newest_ts.load(Ordering::Acquire) + 1).max(secs << 32 | 1);
        let times: Vec<u64> = (0..n as u64).map(|i| first + i).collect();
        p.times.extend(times.iter().copied());
        if let Some(last) = times.last() {
            self.newest_ts.fetch_max(*last, Ordering::AcqRel);
            self.clock.advance_to(*last);
        }
        p.current.writing.fetch_add(1, Ordering::AcqRel);
        Reservation {
            log: self,
            stamps: Stamps {
                times,
                term,
                wall,
                part: p.current.clone(),
            },
        }
    }

    /// Commit `batch` (with `commit`, which may commit it into a transaction) with `entries`
    /// logged in it: the one place a change's entries are written. On a multi-member set the
    /// entries are first replicated, and the batch commits once the set's log holds them and
    /// this member's apply reaches them (`crate::replicated`); a thread that applies the
    /// replicated log logs nothing here, as it writes the entries it applies itself.
    pub(crate) fn commit_logged(
        &self,
        mut batch: WriteBatch,
        entries: Entries,
        commit: impl FnOnce(WriteBatch) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        if entries.is_empty() || applying() {
            return commit(batch);
        }
        if let Some(repl) = self.repl.get() {
            return repl.propose_and_commit(batch, entries.canonical(), Box::new(commit));
        }
        let r = self.reserve(entries.count());
        entries.put(&mut batch, &r.stamps)?;
        let res = commit(batch);
        if res.is_ok() {
            if let Some(last) = r.stamps.times.last() {
                self.newest_ts.fetch_max(*last, Ordering::AcqRel);
            }
        }
        drop(r);
        res
    }

    /// A new, empty partition (not yet in the list).
    fn new_part(&self, env: &Env, dict_name: &dyn Fn() -> String) -> Result<Arc<Part>> {
        Ok(Arc::new(Part {
            id: self.next_id.fetch_add(1, Ordering::AcqRel),
            dict: env.create_dict(&dict_name())?,
            created: bson::DateTime::now(),
            bytes: AtomicU64::new(0),
            writing: AtomicU64::new(0),
        }))
    }

    /// Drop every entry (a member joining a multi-member set: its oplog from then on is the
    /// set's, the same on every member, and its times start from the set's first entry).
    pub(crate) fn reset(&self, env: &Env, dict_name: &dyn Fn() -> String) -> Result<()> {
        let part = self.new_part(env, dict_name)?;
        let old = std::mem::replace(&mut *self.parts.write(), Arc::new(vec![part.clone()]));
        self.persist()?;
        self.pending.lock().current = part;
        self.newest_ts.store(0, Ordering::Release);
        for p in old.iter() {
            env.drop_dict(&p.dict.name())?;
        }
        Ok(())
    }

    /// Read the partitions again from the catalog, whose oplog entry was replaced (a store
    /// image installed in place of the data): entries from here on follow the image's.
    pub(crate) fn reload(&self, env: &Env, dict_name: &dyn Fn() -> String) -> Result<()> {
        let (parts, next_id, _) = read_parts(env, &self.catalog, dict_name)?;
        let newest = newest_of(&parts)?;
        let current = parts.last().cloned().ok_or_else(|| bad("no partition"))?;
        *self.parts.write() = Arc::new(parts);
        self.pending.lock().current = current;
        self.next_id.store(next_id, Ordering::Release);
        self.newest_ts.store(newest, Ordering::Release);
        self.clock.advance_to(newest);
        self.persist()?;
        self.advanced.notify_all();
        Ok(())
    }

    /// Whether commits are replicated (a multi-member set).
    pub fn is_replicated(&self) -> bool {
        self.repl.get().is_some()
    }

    fn release(&self, times: &[u64]) {
        let mut p = self.pending.lock();
        for t in times {
            p.times.remove(t);
        }
        drop(p);
        self.advanced.notify_all();
    }

    /// The visibility point: every entry at or below it is committed (or will never be).
    pub fn visible(&self) -> Timestamp {
        unpack(self.visible_packed())
    }

    fn visible_packed(&self) -> u64 {
        let p = self.pending.lock();
        self.visible_in(&p)
    }

    /// Below the oldest pending time; with none, the clock's last time, or on a multi-member
    /// set the newest applied entry's (the clock may run ahead of the log there, and the next
    /// entry's time is only known when it is applied).
    fn visible_in(&self, p: &Pending) -> u64 {
        match p.times.first() {
            Some(t) => t - 1,
            None if self.is_replicated() => self.newest_ts.load(Ordering::Acquire),
            None => self.clock.last_packed(),
        }
    }

    /// Wait until the visibility point passes `after`, at most until `deadline`; whether it
    /// did.
    pub fn wait_past(&self, after: Timestamp, deadline: Instant) -> bool {
        let after = pack(after);
        let mut p = self.pending.lock();
        loop {
            let vis = self.visible_in(&p);
            if vis > after {
                return true;
            }
            if self.advanced.wait_until(&mut p, deadline).timed_out() {
                return false;
            }
        }
    }

    /// The entries after `after` (from the oldest kept when `None`) up to the visibility
    /// point as of now, oldest first.
    pub fn read(&self, after: Option<Timestamp>) -> Scan {
        let hi = self.visible_packed();
        Scan {
            parts: self.parts.read().clone(),
            idx: 0,
            cursor: None,
            lo: after.map_or(Bound::Unbounded, |t| Bound::Excluded(pack(t))),
            hi,
            forward: true,
        }
    }

    /// The entries up to the visibility point, newest first.
    pub fn read_newest_first(&self) -> Scan {
        let hi = self.visible_packed();
        let parts = self.parts.read().clone();
        Scan {
            idx: parts.len(),
            parts,
            cursor: None,
            lo: Bound::Unbounded,
            hi,
            forward: false,
        }
    }

    /// The document as it was before operation `idx` of the entry at `ts`, when its
    /// collection keeps pre-images and the entry's partition is still there.
    pub fn pre_image(&self, ts: Timestamp, idx: u32) -> Result<Option<Document>> {
        let k = pre_image_key(pack(ts), idx);
        let parts = self.parts.read().clone();
        for p in parts.iter().rev() {
            match p.dict.get(&k) {
                Ok(Some(v)) => return Ok(Some(decode_doc(OPLOG_NS, &v)?)),
                Ok(None) | Err(silt_storage::Error::NoSuchDictionary(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// The time of the oldest entry kept, if any.
    pub fn oldest(&self) -> Result<Option<Timestamp>> {
        Ok(self.read(None).next_entry()?.map(|(t, _)| t))
    }

    /// The time of the newest visible entry, if any.
    pub fn newest(&self) -> Result<Option<Timestamp>> {
        Ok(self.read_newest_first().next_entry()?.map(|(t, _)| t))
    }

    /// Entry bytes kept and the number of partitions.
    pub fn size(&self) -> (u64, usize) {
        let parts = self.parts.read().clone();
        (
            parts.iter().map(|p| p.bytes.load(Ordering::Relaxed)).sum(),
            parts.len(),
        )
    }

    /// Rows kept (entries and pre-images; the engine's maintained estimate) and bytes on
    /// disk, for `collStats`.
    pub fn storage(&self) -> (u64, u64) {
        let parts = self.parts.read().clone();
        parts.iter().fold((0, 0), |(rows, disk), p| {
            let st = p.dict.stats();
            (rows + st.rows, disk + st.file_bytes)
        })
    }

    /// Log `op` on its own (a command or a no-op): its own batch, committed now.
    pub fn log(&self, op: &Op) -> Result<()> {
        self.commit_logged(WriteBatch::new(), Entries::each(vec![op.clone()]), |b| {
            Ok(b.commit()?)
        })
    }

    /// What the store runs once a second: a no-op when nothing was logged for
    /// [`NOOP_INTERVAL`], a new partition when the newest is past its share of the size
    /// limit, and the oldest partitions dropped while the oplog is over its size and they are
    /// past the minimum retention. Returns the partitions dropped.
    pub(crate) fn maintain(&self, env: &Env, dict_name: &dyn Fn() -> String) -> Result<usize> {
        let last = self.clock.last_packed() >> 32;
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        // On a multi-member set only the primary logs it (for every member, through the log).
        let idle = wall.saturating_sub(last) >= NOOP_INTERVAL.as_secs();
        if idle && self.repl.get().is_none_or(|r| r.is_leader()) {
            if let Err(e) = self.log(&Op::noop("periodic noop")) {
                if !self.is_replicated() {
                    return Err(e);
                }
                tracing::debug!(error = %e, "the periodic no-op was not replicated");
            }
        }
        // A partition holds an eighth of the limit, so trimming keeps 7/8 of it or more.
        let share = (self.max_bytes() / 8).max(64 << 10);
        let current = self.pending.lock().current.clone();
        if current.bytes.load(Ordering::Relaxed) >= share {
            let part = self.new_part(env, dict_name)?;
            {
                let mut parts = self.parts.write();
                let mut list = (**parts).clone();
                list.push(part.clone());
                *parts = Arc::new(list);
            }
            self.persist()?;
            // From here new entries go to the new partition; the times are increasing, so
            // every entry of the old one is older than every entry of the new one.
            self.pending.lock().current = part;
        }
        let mut dropped = 0;
        loop {
            let parts = self.parts.read().clone();
            let total: u64 = parts.iter().map(|p| p.bytes.load(Ordering::Relaxed)).sum();
            if parts.len() < 3 || total <= self.max_bytes() {
                break;
            }
            // The oldest partition's newest entry is older than the next one's creation.
            let next_created = parts[1].created.timestamp_millis();
            let age_ms = bson::DateTime::now()
                .timestamp_millis()
                .saturating_sub(next_created);
            let keep_ms = i64_of(
                self.min_retention()
                    .as_millis()
                    .try_into()
                    .unwrap_or(u64::MAX),
            );
            if age_ms < keep_ms {
                break;
            }
            // No write may still be pending into it (reservations are taken on the newest
            // partition, but one taken before a rotation may still be committing).
            let oldest = parts[0].clone();
            if oldest.writing.load(Ordering::Acquire) > 0 {
                break;
            }
            {
                let mut w = self.parts.write();
                let list: Vec<Arc<Part>> = w.iter().skip(1).cloned().collect();
                *w = Arc::new(list);
            }
            self.persist()?;
            env.drop_dict(&oldest.dict.name())?;
            tracing::debug!(partition = oldest.id, "trimmed the oplog");
            dropped += 1;
        }
        Ok(dropped)
    }
}

fn pre_image_key(ts: u64, idx: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&ts.to_be_bytes());
    k[8..].copy_from_slice(&idx.to_be_bytes());
    k
}

fn bad(what: &str) -> CollError {
    CollError::BadStoredDocument {
        ns: OPLOG_NS.into(),
        detail: format!("the oplog's catalog entry: {what}"),
    }
}

/// Times taken for entries about to be written: pending until dropped.
pub(crate) struct Reservation<'a> {
    log: &'a Oplog,
    pub(crate) stamps: Stamps,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.stamps.part.writing.fetch_sub(1, Ordering::AcqRel);
        self.log.release(&self.stamps.times);
    }
}

/// Entries in time order (either way), up to the visibility point of when the scan began.
pub struct Scan {
    parts: Arc<Vec<Arc<Part>>>,
    idx: usize,
    cursor: Option<Cursor>,
    lo: Bound<u64>,
    hi: u64,
    forward: bool,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan").field("hi", &self.hi).finish()
    }
}

impl Scan {
    /// The visibility point the scan reads up to.
    pub fn upto(&self) -> u64 {
        self.hi
    }

    /// The next entry and its time. A partition trimmed under the scan is
    /// [`CollError::PositionLost`].
    pub fn next_entry(&mut self) -> Result<Option<(Timestamp, Document)>> {
        loop {
            if self.cursor.is_none() {
                let part = if self.forward {
                    let p = self.parts.get(self.idx);
                    self.idx += 1;
                    p
                } else if self.idx == 0 {
                    None
                } else {
                    self.idx -= 1;
                    self.parts.get(self.idx)
                };
                let Some(part) = part else { return Ok(None) };
                let lo = self.lo.map(key);
                let hi = key(self.hi);
                let lo_b = match &lo {
                    Bound::Included(k) => Bound::Included(&k[..]),
                    Bound::Excluded(k) => Bound::Excluded(&k[..]),
                    Bound::Unbounded => Bound::Unbounded,
                };
                let mut c = part.dict.cursor(lo_b, Bound::Included(&hi[..]));
                if !self.forward {
                    c.seek_last();
                }
                self.cursor = Some(c);
            }
            let Some(c) = self.cursor.as_mut() else {
                continue;
            };
            let step = if self.forward { c.next() } else { c.prev() };
            match step {
                // A pre-image (`Reservation::put_pre_image`) sits beside its entry.
                Ok(Some((k, _))) if k.len() != 8 => {}
                Ok(Some((k, v))) => {
                    let ts = ts_of_key(&k)?;
                    return Ok(Some((unpack(ts), decode_doc(OPLOG_NS, &v)?)));
                }
                Ok(None) => self.cursor = None,
                Err(silt_storage::Error::NoSuchDictionary(_)) => {
                    return Err(CollError::PositionLost(
                        "the oplog was trimmed past the cursor's position".into(),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
