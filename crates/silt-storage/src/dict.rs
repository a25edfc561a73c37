//! Dictionaries: the public handle ([`Dict`]), its reads and writes, cursors and range locks.
//! The tree's I/O side (loading nodes and partitions, write-back, eviction, flushing) is
//! `tree_io.rs`.
//!
//! Lock order: environment checkpoint lock (writers: shared) -> tree lock -> file state / log
//! mutex. The tree lock is never held across I/O: an operation that misses returns
//! [`Need`], everything is released, the read happens, the result is installed under the
//! tree lock after checking it is still current, and the operation restarts.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::env::EnvInner;
use crate::error::{Error, Result};
use crate::ids::{DictId, Xid};
use crate::locks::{LockMode, LockOwner};
use crate::msg::{MsgKind, UpdateRegistry};
use crate::mvcc::{Snapshot, View};
use crate::options::{MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::tree::node::Key;
use crate::tree::{bound_ref, Need, Ready, Step, Tree};
use crate::txn::Txn;
use crate::wal::LogRecord;

pub(crate) use crate::tree_io::DictCore;

/// A handle to one dictionary. Cheap to clone; usable from many threads at once.
#[derive(Clone)]
pub struct Dict {
    pub(crate) env: Arc<EnvInner>,
    pub(crate) core: Arc<DictCore>,
}

impl std::fmt::Debug for Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dict")
            .field("id", &self.core.id)
            .field("name", &*self.core.name.lock())
            .finish()
    }
}

/// Statistics of one dictionary, maintained incrementally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DictStats {
    /// Estimated number of live keys.
    pub rows: u64,
    /// Estimated key plus value bytes of live keys.
    pub data_bytes: u64,
    /// Size of the dictionary's file.
    pub file_bytes: u64,
    /// Space the filesystem has allocated to the dictionary's file (holes excluded).
    pub file_allocated_bytes: u64,
    /// Height of the tree (0: the root is a leaf).
    pub height: u32,
    /// Nodes resident in the cache.
    pub resident_nodes: usize,
    /// The tree keeps subtree counts ([`Env::create_counted_dict`](crate::Env::create_counted_dict)).
    pub counted: bool,
    /// Writes that broke the counting promise, found (and the counts repaired) when they
    /// reached their leaf since the dictionary was opened.
    pub count_repairs: u64,
    /// Messages of unknown effect on the key count waiting in the tree's buffers (a count
    /// scans the subtrees that hold them; 0 in a tree that keeps no counts).
    pub unsure: u64,
}

/// How a count was answered ([`Dict::count_range_explained`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountStats {
    /// Nodes the walk over subtree counts visited (all of its tries).
    pub nodes: u64,
    /// Ranges that had to be counted by a scan (none in a counted tree whose messages all
    /// have a known effect and whose versions the reader sees).
    pub scanned_ranges: u64,
}

fn check_key(k: &[u8]) -> Result<()> {
    if k.len() > MAX_KEY_BYTES {
        return Err(Error::TooLarge {
            what: "key",
            len: k.len(),
            limit: MAX_KEY_BYTES,
        });
    }
    Ok(())
}

fn check_val(v: &[u8]) -> Result<()> {
    if v.len() > MAX_VALUE_BYTES {
        return Err(Error::TooLarge {
            what: "value",
            len: v.len(),
            limit: MAX_VALUE_BYTES,
        });
    }
    Ok(())
}

fn own(b: Bound<&[u8]>) -> Bound<Key> {
    match b {
        Bound::Included(k) => Bound::Included(k.into()),
        Bound::Excluded(k) => Bound::Excluded(k.into()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Dict {
    /// The dictionary's id.
    pub fn id(&self) -> DictId {
        self.core.id
    }

    /// The dictionary's current name.
    pub fn name(&self) -> String {
        self.core.name.lock().clone()
    }

    /// Writable: not dropped, the environment open and not poisoned.
    pub(crate) fn live(&self) -> Result<()> {
        self.readable()?;
        self.env.poison.check()
    }

    /// Readable: not dropped and the environment open (a poisoned environment still serves
    /// reads of what it holds).
    pub(crate) fn readable(&self) -> Result<()> {
        if self.core.dropped.load(Ordering::Acquire) {
            return Err(Error::NoSuchDictionary(self.name()));
        }
        if self.env.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Log and inject one write; return once the log record is written.
    pub(crate) fn write(&self, rec: LogRecord) -> Result<()> {
        crate::write::commit_one(self, rec)
    }

    /// Keep buffers and memory in bounds: wake the background workers, and help them when
    /// the writer is far ahead. `pressure` is the root's ([`Ready::root_pressure`]), measured
    /// by the writer before it let the tree go: taking the tree's lock again only to read it
    /// queued every writer behind the next one at 64 clients.
    pub(crate) fn after_write(&self, pressure: f64) -> Result<()> {
        if pressure > 1.0 {
            self.env.wake_flusher(&self.core);
            if pressure > 2.0 {
                self.core.flush_until(&self.env, 1.0)?;
            }
        }
        self.env.relieve_memory(true)
    }

    /// The checked log record of a write that sets a value (`make` picks the kind).
    pub(crate) fn value_record(
        &self,
        key: &[u8],
        val: &[u8],
        make: impl FnOnce(DictId, Vec<u8>, Vec<u8>) -> LogRecord,
    ) -> Result<LogRecord> {
        check_key(key)?;
        check_val(val)?;
        Ok(make(self.core.id, key.to_vec(), val.to_vec()))
    }

    /// The checked log record of `delete(key)`.
    pub(crate) fn delete_record(&self, key: &[u8]) -> Result<LogRecord> {
        check_key(key)?;
        Ok(LogRecord::Delete {
            dict: self.core.id,
            key: key.to_vec(),
        })
    }

    /// The checked log record of `update(key, func, arg)`.
    pub(crate) fn update_record(&self, key: &[u8], func: u32, arg: &[u8]) -> Result<LogRecord> {
        check_key(key)?;
        check_val(arg)?;
        self.env.fns.check(func)?;
        Ok(LogRecord::Update {
            dict: self.core.id,
            key: key.to_vec(),
            func,
            arg: arg.to_vec(),
        })
    }

    /// Set `key` to `val`.
    pub fn put(&self, key: &[u8], val: &[u8]) -> Result<()> {
        self.write(self.value_record(key, val, |dict, key, val| LogRecord::Put { dict, key, val })?)
    }

    /// Set `key`, which the caller knows holds a value, to `val`. The effect is that of
    /// [`Dict::put`]; the difference is in the maintained row count, which does not grow.
    pub fn replace(&self, key: &[u8], val: &[u8]) -> Result<()> {
        self.write(
            self.value_record(key, val, |dict, key, val| LogRecord::Replace {
                dict,
                key,
                val,
            })?,
        )
    }

    /// Set `key` to `val` unless it already has a value (no read is done: the check happens
    /// when the message reaches the leaf or a reader).
    pub fn put_if_absent(&self, key: &[u8], val: &[u8]) -> Result<()> {
        self.write(
            self.value_record(key, val, |dict, key, val| LogRecord::PutIfAbsent {
                dict,
                key,
                val,
            })?,
        )
    }

    /// Remove `key` (a no-op if absent).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.write(self.delete_record(key)?)
    }

    /// Apply registered update function `func` with `arg` to `key`, without reading it now.
    pub fn update(&self, key: &[u8], func: u32, arg: &[u8]) -> Result<()> {
        self.write(self.update_record(key, func, arg)?)
    }

    /// Apply update function `func` with `arg` to every key. Refused in a counted dictionary
    /// (a broadcast's effect on each key is unknown until it reaches the leaves).
    pub fn update_all(&self, func: u32, arg: &[u8]) -> Result<()> {
        if self.core.tree.read().counted {
            return Err(Error::InvalidArgument(
                "update_all on a dictionary that keeps subtree counts".into(),
            ));
        }
        check_val(arg)?;
        self.env.fns.check(func)?;
        self.write(LogRecord::UpdateAll {
            dict: self.core.id,
            func,
            arg: arg.to_vec(),
        })
    }

    /// Lock `[lo, hi]` in `mode` for one write outside a transaction: it waits (at most
    /// `timeout`) for transactions holding conflicting locks, and holds off theirs until the
    /// returned guard drops (see `locks.rs`).
    pub fn lock_range(
        &self,
        range: (&[u8], &[u8]),
        mode: LockMode,
        timeout: Duration,
    ) -> Result<RangeLock> {
        let owner = self.env.locks.temp_owner();
        self.env
            .locks
            .acquire(self.core.id, range, owner, mode, timeout)?;
        Ok(RangeLock {
            env: self.env.clone(),
            owner,
        })
    }

    /// A snapshot of the environment this dictionary belongs to (see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        self.env.txns.snapshot(None)
    }

    /// The newest committed value of `key`, with every pending message applied.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_view(key, View::Latest)
    }

    /// The value of `key` that `snap` sees.
    pub fn get_at(&self, key: &[u8], snap: &Snapshot) -> Result<Option<Vec<u8>>> {
        self.get_view(key, snap.view())
    }

    /// Whether a write of `key` by `txn` (or, without one, by a write outside any
    /// transaction) would conflict with another writer: another transaction holds a
    /// provisional version of it, or (for `txn`) a version was committed that `txn`'s
    /// snapshot does not see (first committer wins).
    pub fn write_conflict(&self, key: &[u8], txn: Option<&Txn>) -> Result<bool> {
        let le = self.read_key(|t| t.versions(&self.env.fns, key))?;
        let own = txn.map(|t| t.xid());
        if le.prov.as_ref().is_some_and(|p| Some(p.xid) != own) {
            return Ok(true);
        }
        Ok(match (txn, le.newest_xid()) {
            (Some(t), Some(x)) => !t.snapshot().view().sees(x),
            _ => false,
        })
    }

    fn get_view(&self, key: &[u8], view: View<'_>) -> Result<Option<Vec<u8>>> {
        let v = self.read_key(|t| t.get(&self.env.fns, key, view))?;
        Ok(v.map(|v| v.into_vec()))
    }

    /// Run a point read `f` under the tree's read lock, reading what it needs first (without
    /// the lock) until it completes, then keep memory in bounds.
    fn read_key<R>(&self, f: impl Fn(&Tree) -> Result<R, Need>) -> Result<R> {
        self.readable()?;
        loop {
            let r = f(&self.core.tree.read());
            match r {
                Ok(v) => {
                    self.env.relieve_memory(true)?;
                    return Ok(v);
                }
                Err(n) => self.core.do_io(&self.env, n)?,
            }
        }
    }

    /// Read `keys`, which must be in ascending order, calling `f` with each one's index in
    /// `keys` and the value `snap` sees (the latest without one). The keys of one basement
    /// share one descent from the root, which is what makes this cheaper than a `get` per
    /// key. `f` runs under the tree's read lock: it must not touch the dictionary.
    pub fn get_sorted(
        &self,
        keys: &[&[u8]],
        snap: Option<&Snapshot>,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.readable()?;
        debug_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        let view = snap.map_or(View::Latest, Snapshot::view);
        let mut from = 0;
        while from < keys.len() {
            let r = self
                .core
                .tree
                .read()
                .get_run(&self.env.fns, keys, from, view, f);
            match r {
                Ok(next) => from = next,
                Err(n) => self.core.do_io(&self.env, n)?,
            }
        }
        self.env.relieve_memory(true)
    }

    /// Visit live entries in `[lo, hi]` from `from` in one direction, one basement at a time.
    /// A `cold` scan gives back what it reads from disk once it has read it
    /// (`DictCore::release_cold`).
    #[allow(clippy::too_many_arguments)]
    fn scan(
        &self,
        mut from: Bound<Key>,
        range: (&Bound<Key>, &Bound<Key>),
        reverse: bool,
        view: View<'_>,
        cold: bool,
        until: &mut dyn FnMut(usize) -> bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let mut seen = 0usize;
        let mut loaded = Vec::new();
        loop {
            let r = {
                let t = self.core.tree.read();
                t.scan_basement(&self.env.fns, &from, range, reverse, view, &mut |k, v| {
                    seen += 1;
                    f(k, v)
                })
            };
            if r.is_ok() && cold {
                self.core.release_cold(&self.env, &loaded);
                loaded.clear();
            }
            match r {
                Err(n @ Need::Parts(..)) if cold => {
                    self.core.do_io(&self.env, n.clone())?;
                    loaded.push(n);
                }
                Ok(Some(next)) => {
                    if until(seen) {
                        return self.env.relieve_memory(true);
                    }
                    from = next;
                }
                Ok(None) => return self.env.relieve_memory(true),
                Err(n) => self.core.do_io(&self.env, n)?,
            }
        }
    }

    /// Number of live keys in `[lo, hi]`. In a counted dictionary this reads the nodes on
    /// the range's two boundary paths (`tree/count_read.rs`); otherwise it scans the range.
    pub fn count_range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        Ok(self.count_range_explained(lo, hi, None)?.0)
    }

    /// [`Dict::count_range`] of what `snap` sees.
    pub fn count_range_at(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: &Snapshot,
    ) -> Result<u64> {
        Ok(self.count_range_explained(lo, hi, Some(snap))?.0)
    }

    /// [`Dict::count_range`] (of what `snap` sees, if given), and how it was answered.
    pub fn count_range_explained(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: Option<&Snapshot>,
    ) -> Result<(u64, CountStats)> {
        self.readable()?;
        let view = snap.map_or(View::Latest, Snapshot::view);
        let mut stats = CountStats::default();
        let plan = loop {
            let r = self
                .core
                .tree
                .read()
                .count_range(&self.env.fns, (lo, hi), view);
            match r {
                Ok(p) => break p,
                Err(n) => {
                    stats.nodes += 1;
                    self.core.do_io(&self.env, n)?
                }
            }
        };
        stats.nodes += plan.nodes;
        stats.scanned_ranges = plan.scan.len() as u64;
        let mut n = plan.live;
        for (a, z) in &plan.scan {
            n += self.count_view(bound_ref(a), bound_ref(z), view)? as i64;
        }
        self.env.relieve_memory(true)?;
        Ok((n.max(0) as u64, stats))
    }

    /// [`Dict::count_range`] by visiting every key of the range (what subtree counts are
    /// checked against).
    pub fn count_range_by_scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: Option<&Snapshot>,
    ) -> Result<u64> {
        self.count_view(lo, hi, snap.map_or(View::Latest, Snapshot::view))
    }

    fn count_view(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, view: View<'_>) -> Result<u64> {
        self.readable()?;
        let (lo, hi) = (own(lo), own(hi));
        let mut n = 0u64;
        self.scan(
            lo.clone(),
            (&lo, &hi),
            false,
            view,
            false,
            &mut |_| false,
            &mut |_, _| {
                n += 1;
                true
            },
        )?;
        Ok(n)
    }

    /// A cursor over `[lo, hi]` of the newest committed values, positioned before the first
    /// key. It sees writes that land between its refills.
    pub fn cursor(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Cursor {
        Cursor {
            dict: self.clone(),
            lo: own(lo),
            hi: own(hi),
            pos: Pos::Start,
            batch: VecDeque::new(),
            batch_forward: true,
            snap: None,
            cold: false,
        }
    }

    /// A cursor over `[lo, hi]` of what `snap` sees, from its first entry to its last.
    pub fn cursor_at(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, snap: &Snapshot) -> Cursor {
        let mut c = self.cursor(lo, hi);
        c.snap = Some(snap.clone());
        c
    }

    /// All live entries in `[lo, hi]`, in key order.
    pub fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range_view(lo, hi, View::Latest)
    }

    /// [`Dict::range`] of what `snap` sees.
    pub fn range_at(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: &Snapshot,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.range_view(lo, hi, snap.view())
    }

    fn range_view(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        view: View<'_>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.readable()?;
        let (lo, hi) = (own(lo), own(hi));
        let mut out = Vec::new();
        self.scan(
            lo.clone(),
            (&lo, &hi),
            false,
            view,
            false,
            &mut |_| false,
            &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            },
        )?;
        Ok(out)
    }

    /// Incrementally maintained statistics.
    pub fn stats(&self) -> DictStats {
        let t = self.core.tree.read();
        DictStats {
            rows: t.stats.rows.max(0) as u64,
            data_bytes: t.stats.bytes.max(0) as u64,
            file_bytes: self.core.file.len_on_disk(),
            file_allocated_bytes: self.core.file.allocated_on_disk(),
            height: t.node(t.root).height,
            resident_nodes: t.nodes.len(),
            counted: t.counted,
            count_repairs: t.count_repairs,
            unsure: t
                .node(t.root)
                .parts
                .iter()
                .filter(|_| t.counted && !t.node(t.root).is_leaf())
                .filter_map(|p| p.count.map(|c| c.unsure))
                .sum(),
        }
    }

    /// Flush every buffer down to the leaves (the "hot optimize" of the original engine).
    pub fn optimize(&self) -> Result<()> {
        self.live()?;
        loop {
            let step = {
                let mut t = self.core.tree.write();
                t.flush_any(&self.env.fns)
            };
            match step {
                Step::Idle => return Ok(()),
                Step::Progress => self.env.relieve_memory(false)?,
                Step::Need(n) => self.core.do_io(&self.env, n)?,
            }
        }
    }

    /// Build the dictionary from `entries`, which must be in strictly increasing key order.
    /// The dictionary must be empty. Leaves are written directly, bypassing buffers and the
    /// log; the result is durable (a checkpoint runs) when this returns.
    pub fn bulk_load<I, K, V>(&self, entries: I) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.live()?;
        crate::bulk::bulk_load(self, entries)
    }
}

/// Apply one logged write to the tree (used both live and during recovery), stamped with
/// `xid`, provisional when `prov`.
pub(crate) fn apply_record(
    t: &mut Ready<'_>,
    fns: &UpdateRegistry,
    rec: LogRecord,
    xid: Xid,
    prov: bool,
) {
    let kind = match rec {
        LogRecord::Put { key, val, .. } => (key, MsgKind::Insert(val.into())),
        LogRecord::Replace { key, val, .. } => (key, MsgKind::Replace(val.into())),
        LogRecord::PutIfAbsent { key, val, .. } => (key, MsgKind::InsertNoOverwrite(val.into())),
        LogRecord::Delete { key, .. } => (key, MsgKind::Delete),
        LogRecord::Update { key, func, arg, .. } => (
            key,
            MsgKind::Update {
                func,
                arg: arg.into(),
            },
        ),
        LogRecord::UpdateAll { func, arg, .. } => {
            t.inject_broadcast(fns, func, &arg, xid);
            return;
        }
        LogRecord::Batch(v) => {
            // Batches are split by the writer and by recovery; this is only reached if one
            // holds a single dictionary's writes.
            for r in v {
                apply_record(t, fns, r, xid, prov);
            }
            return;
        }
        LogRecord::Txn { rec, .. } => {
            apply_record(t, fns, *rec, xid, true);
            return;
        }
        // Ends of transactions are injected by `write::finish` and recovery.
        LogRecord::Commit { .. } | LogRecord::Abort { .. } => return,
    };
    t.inject(fns, &kind.0, kind.1, xid, prov);
}

/// Locks of one write outside a transaction, released when dropped ([`Dict::lock_range`]).
pub struct RangeLock {
    env: Arc<EnvInner>,
    owner: LockOwner,
}

impl std::fmt::Debug for RangeLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeLock")
            .field("owner", &self.owner)
            .finish()
    }
}

impl RangeLock {
    /// Add `[lo, hi]` of `d` (same environment) to the locks this guard holds.
    pub fn also(
        &self,
        d: &Dict,
        range: (&[u8], &[u8]),
        mode: LockMode,
        timeout: Duration,
    ) -> Result<()> {
        self.env
            .locks
            .acquire(d.core.id, range, self.owner, mode, timeout)
    }
}

impl Drop for RangeLock {
    fn drop(&mut self) {
        self.env.locks.release_all(self.owner);
    }
}

#[derive(Debug, Clone)]
enum Pos {
    Start,
    End,
    At(Key),
    Before(Key),
}

/// A cursor over a bounded range. It holds no lock between calls: each refill reads one
/// basement's worth under the tree's read lock. Without a snapshot it sees writes that land
/// between refills; with one ([`Dict::cursor_at`]) it reads that snapshot throughout.
pub struct Cursor {
    dict: Dict,
    lo: Bound<Key>,
    hi: Bound<Key>,
    pos: Pos,
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
    batch_forward: bool,
    snap: Option<Snapshot>,
    /// Reads from disk are given back once read ([`Cursor::cold`]).
    cold: bool,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor").field("pos", &self.pos).finish()
    }
}

impl Cursor {
    /// This cursor as a cold one: what it reads from disk leaves the cache once read, so one
    /// pass over a dictionary larger than the cache (a replica's snapshot) does not evict
    /// what others are using.
    pub fn cold(mut self) -> Cursor {
        self.cold = true;
        self
    }

    /// Position so that `next` returns the first key `>= key` and `prev` the last key `< key`.
    pub fn seek(&mut self, key: &[u8]) {
        self.pos = Pos::Before(key.into());
        self.batch.clear();
    }

    /// Position before the first key of the range.
    pub fn seek_first(&mut self) {
        self.pos = Pos::Start;
        self.batch.clear();
    }

    /// Position after the last key of the range.
    pub fn seek_last(&mut self) {
        self.pos = Pos::End;
        self.batch.clear();
    }

    fn refill(&mut self, forward: bool) -> Result<()> {
        self.batch.clear();
        self.batch_forward = forward;
        let from = match (&self.pos, forward) {
            (Pos::Start, true) => self.lo.clone(),
            (Pos::Start, false) | (Pos::End, true) => return Ok(()),
            (Pos::End, false) => self.hi.clone(),
            (Pos::At(k), _) => Bound::Excluded(k.clone()),
            (Pos::Before(k), true) => Bound::Included(k.clone()),
            (Pos::Before(k), false) => Bound::Excluded(k.clone()),
        };
        let batch = &mut self.batch;
        let view = self.snap.as_ref().map_or(View::Latest, Snapshot::view);
        self.dict.scan(
            from,
            (&self.lo, &self.hi),
            !forward,
            view,
            self.cold,
            &mut |n| n >= 64,
            &mut |k, v| {
                batch.push_back((k.to_vec(), v.to_vec()));
                true
            },
        )
    }

    fn step(&mut self, forward: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.dict.readable()?;
        if self.batch.is_empty() || self.batch_forward != forward {
            self.refill(forward)?;
        }
        match self.batch.pop_front() {
            Some((k, v)) => {
                self.pos = Pos::At(k.clone().into());
                Ok(Some((k, v)))
            }
            None => {
                self.pos = if forward { Pos::End } else { Pos::Start };
                Ok(None)
            }
        }
    }

    /// The next entry in key order.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.step(true)
    }

    /// The previous entry in key order.
    pub fn prev(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.step(false)
    }
}
