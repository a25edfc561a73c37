//! Transactions and snapshots (MVCC).
//!
//! Every write carries a transaction id ([`Xid`]), drawn from one counter per environment. A
//! write outside a transaction gets its own xid and is committed at once; a write inside a
//! [`Txn`] is *provisional*: the leaf entry holds it apart from the committed versions until a
//! COMMIT message (one per key the transaction wrote) promotes it or an ABORT message drops it.
//! Neither rewrites data: both are small keyed messages that sink like any other.
//!
//! A [`Snapshot`] records, when it is taken, the next xid to be handed out and the xids still
//! live (not finished). It sees a committed version written by `x` when `x` is 0 (a version
//! older than MVCC), `x` is the snapshot's own transaction, or `x` was below the next xid and
//! not live when the snapshot was taken (PerconaFT's rule). It sees only its own transaction's
//! provisional version.
//!
//! The *horizon* is an xid below which every committed version is visible to every live and
//! every future snapshot: the minimum of the next xid, the live xids, and what each live
//! snapshot could not see. Committed versions older than the newest one below the horizon are
//! garbage: leaves drop them when messages are applied and when they are written. The horizon
//! never decreases (a new snapshot's own bound is at least the horizon when it is taken), so
//! a stale read of it only collects less.
//!
//! Lock order: the manager's mutex is a leaf lock (nothing is taken while holding it).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::dict::Dict;
use crate::env::EnvInner;
use crate::error::{Error, Result};
use crate::ids::{DictId, Lsn, Xid};
use crate::locks::{LockMode, LockOwner};
use crate::wal::LogRecord;

/// What a reader sees, captured when its snapshot was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SnapView {
    /// The next xid when the snapshot was taken: every xid at or above it is invisible.
    pub hi: Xid,
    /// Xids live when the snapshot was taken, sorted (without `own`).
    pub live: Vec<Xid>,
    /// The reader's own transaction, whose provisional versions it sees.
    pub own: Option<Xid>,
}

impl SnapView {
    /// Whether a committed version written by `x` is visible.
    #[inline]
    pub fn sees(&self, x: Xid) -> bool {
        x.0 == 0 || Some(x) == self.own || (x < self.hi && self.live.binary_search(&x).is_err())
    }

    /// The smallest xid this snapshot might not see.
    fn bound(&self) -> u64 {
        self.live.first().map_or(self.hi.0, |x| x.0.min(self.hi.0))
    }
}

/// How a read picks among an entry's versions.
#[derive(Clone, Copy, Debug)]
pub(crate) enum View<'a> {
    /// The newest committed version (no snapshot).
    Latest,
    /// What a snapshot sees.
    At(&'a SnapView),
}

impl View<'_> {
    /// Whether a committed version written by `x` is visible.
    #[inline]
    pub fn sees(&self, x: Xid) -> bool {
        match self {
            View::Latest => true,
            View::At(s) => s.sees(x),
        }
    }

    /// The transaction whose provisional versions are visible.
    #[inline]
    pub fn own(&self) -> Option<Xid> {
        match self {
            View::Latest => None,
            View::At(s) => s.own,
        }
    }
}

#[derive(Default)]
struct State {
    /// The next xid to hand out (xid 0 is never handed out).
    next: u64,
    /// Live transactions (including auto-committed writes in flight), with the LSN of their
    /// first log record once they have one.
    live: BTreeMap<Xid, Option<Lsn>>,
    /// Live snapshots by their bound, with their number.
    snaps: BTreeMap<u64, usize>,
}

/// The xid counter, the live transactions and the live snapshots of one environment.
pub(crate) struct TxnMgr {
    state: Mutex<State>,
    horizon: Arc<AtomicU64>,
}

impl std::fmt::Debug for TxnMgr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        f.debug_struct("TxnMgr")
            .field("next", &s.next)
            .field("live", &s.live.len())
            .field("snapshots", &s.snaps.values().sum::<usize>())
            .finish()
    }
}

impl TxnMgr {
    /// A manager whose first xid is `next` (at least 1).
    pub fn new(next: u64) -> TxnMgr {
        let next = next.max(1);
        TxnMgr {
            state: Mutex::new(State {
                next,
                ..State::default()
            }),
            horizon: Arc::new(AtomicU64::new(next)),
        }
    }

    /// The shared cell trees read the horizon from.
    pub fn horizon_cell(&self) -> Arc<AtomicU64> {
        self.horizon.clone()
    }

    /// The current horizon.
    #[cfg(test)]
    pub fn horizon(&self) -> Xid {
        Xid(self.horizon.load(Ordering::Acquire))
    }

    fn publish(&self, s: &State) {
        let mut h = s.next;
        if let Some((x, _)) = s.live.first_key_value() {
            h = h.min(x.0);
        }
        if let Some((b, _)) = s.snaps.first_key_value() {
            h = h.min(*b);
        }
        self.horizon.store(h, Ordering::Release);
    }

    /// Hand out a new xid and mark it live.
    pub fn begin(&self) -> Xid {
        let mut s = self.state.lock();
        let x = Xid(s.next);
        s.next += 1;
        s.live.insert(x, None);
        self.publish(&s);
        x
    }

    /// Mark `x` finished (committed or aborted).
    pub fn finish(&self, x: Xid) {
        let mut s = self.state.lock();
        s.live.remove(&x);
        self.publish(&s);
    }

    /// Record that `x` logged a record at `lsn` (only its first one is kept).
    pub fn logged(&self, x: Xid, lsn: Lsn) {
        let mut s = self.state.lock();
        if let Some(first @ None) = s.live.get_mut(&x) {
            *first = Some(lsn);
        }
    }

    /// The LSN of the oldest log record of a live transaction: the log from there on is needed
    /// to finish it after a crash.
    pub fn oldest_lsn(&self) -> Option<Lsn> {
        self.state.lock().live.values().flatten().min().copied()
    }

    /// The next xid (persisted by checkpoints, so that xids stay increasing across restarts).
    pub fn next_xid(&self) -> u64 {
        self.state.lock().next
    }

    /// Raise the counter above `x` (recovery, after reading stamped versions or records).
    pub fn observe(&self, x: Xid) {
        let mut s = self.state.lock();
        if s.next <= x.0 {
            s.next = x.0 + 1;
            self.publish(&s);
        }
    }

    /// Live transactions and snapshots, for statistics.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.live.len(), s.snaps.values().sum())
    }

    /// Take a snapshot, seeing `own`'s provisional versions.
    pub fn snapshot(self: &Arc<Self>, own: Option<Xid>) -> Snapshot {
        let mut s = self.state.lock();
        let view = SnapView {
            hi: Xid(s.next),
            live: s.live.keys().copied().filter(|x| Some(*x) != own).collect(),
            own,
        };
        let bound = view.bound();
        *s.snaps.entry(bound).or_insert(0) += 1;
        self.publish(&s);
        Snapshot(Arc::new(SnapInner {
            view,
            bound,
            mgr: self.clone(),
        }))
    }

    fn release(&self, bound: u64) {
        let mut s = self.state.lock();
        if let Some(n) = s.snaps.get_mut(&bound) {
            *n -= 1;
            if *n == 0 {
                s.snaps.remove(&bound);
            }
        }
        self.publish(&s);
    }
}

struct SnapInner {
    view: SnapView,
    bound: u64,
    mgr: Arc<TxnMgr>,
}

impl Drop for SnapInner {
    fn drop(&mut self) {
        self.mgr.release(self.bound);
    }
}

/// A consistent view of every dictionary of an environment, as of when it was taken: reads
/// through it ([`Dict::get_at`], [`Dict::cursor_at`], [`Dict::count_range_at`]) see the
/// versions committed before it and, for a transaction's snapshot, the transaction's own
/// writes. While it lives, the versions it sees are kept. Cloning is cheap.
///
/// [`Dict::get_at`]: crate::Dict::get_at
/// [`Dict::cursor_at`]: crate::Dict::cursor_at
/// [`Dict::count_range_at`]: crate::Dict::count_range_at
#[derive(Clone)]
pub struct Snapshot(Arc<SnapInner>);

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("hi", &self.0.view.hi)
            .field("live", &self.0.view.live)
            .field("own", &self.0.view.own)
            .finish()
    }
}

impl Snapshot {
    pub(crate) fn view(&self) -> View<'_> {
        View::At(&self.0.view)
    }
}

/// The keys a transaction wrote, per dictionary, each with the change in the row count its
/// writes to the key add up to (-1, 0 or 1; charged when the commit is injected).
pub(crate) type WriteSet = BTreeMap<DictId, (Dict, BTreeMap<Box<[u8]>, i8>)>;

/// Add write `w` to the keys of its dictionary in a write set, with its row estimate: the
/// estimates a write outside a transaction would be charged (put +1, delete -1, replace and
/// update 0), summed per key and kept within -1..=1.
pub(crate) fn note_write(keys: &mut BTreeMap<Box<[u8]>, i8>, w: &LogRecord) {
    let (key, rows) = match w {
        LogRecord::Put { key, .. } | LogRecord::PutIfAbsent { key, .. } => (key, 1),
        LogRecord::Delete { key, .. } => (key, -1),
        LogRecord::Replace { key, .. } | LogRecord::Update { key, .. } => (key, 0),
        _ => return,
    };
    let e = keys.entry(key.as_slice().into()).or_insert(0);
    *e = (*e + rows).clamp(-1, 1);
}

/// What the write path needs of a transaction.
pub(crate) struct TxnCore {
    pub xid: Xid,
    writes: Mutex<WriteSet>,
    done: AtomicBool,
}

impl TxnCore {
    /// Refuse writes once the transaction has ended.
    pub fn check_open(&self) -> Result<()> {
        if self.done.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "transaction {} has ended",
                self.xid
            )));
        }
        Ok(())
    }

    /// Add the writes of `rec` (a `Txn` record over `handles`' dictionaries, in order) to the
    /// write set.
    pub fn note_writes(&self, handles: &[Dict], rec: &LogRecord) {
        let mut ws = self.writes.lock();
        let mut i = 0;
        rec.for_each_write(&mut |w| {
            let d = &handles[i];
            i += 1;
            let keys = &mut ws
                .entry(d.core.id)
                .or_insert_with(|| (d.clone(), BTreeMap::new()))
                .1;
            note_write(keys, w);
        });
    }

    /// Take the write set (the transaction is ending).
    pub fn take_writes(&self) -> WriteSet {
        self.done.store(true, Ordering::Release);
        std::mem::take(&mut *self.writes.lock())
    }
}

/// A transaction: writes through it are provisional (seen by its own reads, by nobody else's)
/// until [`Txn::commit`]; [`Txn::abort`], or dropping it unfinished, undoes them. Its snapshot
/// ([`Txn::snapshot`]) is taken when it begins. Writes are not checked for conflicts here:
/// the layer above locks what it writes and asks [`Dict::write_conflict`] first.
///
/// [`Dict::write_conflict`]: crate::Dict::write_conflict
pub struct Txn {
    pub(crate) env: Arc<EnvInner>,
    pub(crate) core: TxnCore,
    snap: Snapshot,
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn").field("xid", &self.core.xid).finish()
    }
}

impl Txn {
    pub(crate) fn begin(env: &Arc<EnvInner>) -> Txn {
        let xid = env.txns.begin();
        let snap = env.txns.snapshot(Some(xid));
        Txn {
            env: env.clone(),
            core: TxnCore {
                xid,
                writes: Mutex::new(BTreeMap::new()),
                done: AtomicBool::new(false),
            },
            snap,
        }
    }

    /// The transaction's id.
    pub fn xid(&self) -> Xid {
        self.core.xid
    }

    /// What the transaction reads: the state when it began, plus its own writes.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn write(&self, d: &Dict, rec: LogRecord) -> Result<()> {
        if !Arc::ptr_eq(&d.env, &self.env) {
            return Err(Error::InvalidArgument(
                "a transaction spans one environment".into(),
            ));
        }
        crate::write::commit(&self.env, vec![(d.clone(), rec)], Some(&self.core))
    }

    /// [`Dict::put`](crate::Dict::put), provisionally.
    pub fn put(&self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        self.write(
            d,
            d.value_record(key, val, |dict, key, val| LogRecord::Put { dict, key, val })?,
        )
    }

    /// [`Dict::replace`](crate::Dict::replace), provisionally.
    pub fn replace(&self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::Replace {
            dict,
            key,
            val,
        })?;
        self.write(d, rec)
    }

    /// [`Dict::put_if_absent`](crate::Dict::put_if_absent), provisionally.
    pub fn put_if_absent(&self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::PutIfAbsent {
            dict,
            key,
            val,
        })?;
        self.write(d, rec)
    }

    /// [`Dict::delete`](crate::Dict::delete), provisionally.
    pub fn delete(&self, d: &Dict, key: &[u8]) -> Result<()> {
        self.write(d, d.delete_record(key)?)
    }

    /// [`Dict::update`](crate::Dict::update), provisionally: the function sees the
    /// transaction's own earlier writes.
    pub fn update(&self, d: &Dict, key: &[u8], func: u32, arg: &[u8]) -> Result<()> {
        self.write(d, d.update_record(key, func, arg)?)
    }

    /// Lock `[lo, hi]` of `d` in `mode` until the transaction ends, waiting at most
    /// `timeout` for other owners (see `locks.rs`: [`Error::LockTimeout`], or
    /// [`Error::Deadlock`] when waiting would close a cycle).
    pub fn lock(
        &self,
        d: &Dict,
        range: (&[u8], &[u8]),
        mode: LockMode,
        timeout: Duration,
    ) -> Result<()> {
        self.core.check_open()?;
        self.env
            .locks
            .acquire(d.core.id, range, self.owner(), mode, timeout)
    }

    /// The transaction as a lock owner.
    pub fn owner(&self) -> LockOwner {
        LockOwner(self.core.xid.0)
    }

    /// Make every write of the transaction committed, atomically for every snapshot taken
    /// afterwards. Returns once the commit record is written; synced too when `durable` (or
    /// under [`SyncPolicy::EveryCommit`](crate::SyncPolicy::EveryCommit)).
    pub fn commit(self, durable: bool) -> Result<()> {
        self.core.check_open()?;
        let r = crate::write::finish(&self.env, &self.core, true, durable);
        self.env.locks.release_all(self.owner());
        r
    }

    /// Undo every write of the transaction.
    pub fn abort(self) -> Result<()> {
        self.core.check_open()?;
        let r = crate::write::finish(&self.env, &self.core, false, false);
        self.env.locks.release_all(self.owner());
        r
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if !self.core.done.load(Ordering::Acquire) {
            if let Err(e) = crate::write::finish(&self.env, &self.core, false, false) {
                tracing::warn!(xid = %self.core.xid, error = %e, "aborting a dropped transaction failed");
            }
            self.env.locks.release_all(self.owner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_follows_the_live_set() {
        let m = Arc::new(TxnMgr::new(1));
        let a = m.begin();
        let b = m.begin();
        m.finish(b);
        let s = m.snapshot(None);
        let c = m.begin();
        m.finish(c);
        let View::At(v) = s.view() else {
            unreachable!()
        };
        assert!(v.sees(Xid(0)));
        assert!(!v.sees(a), "live when taken");
        assert!(v.sees(b), "finished before");
        assert!(!v.sees(c), "began after");
        assert_eq!(m.horizon(), a, "the live xid bounds the horizon");
        m.finish(a);
        assert_eq!(m.horizon(), a, "the snapshot still cannot see a");
        drop(s);
        assert_eq!(m.horizon().0, m.next_xid());
    }

    #[test]
    fn own_writes_are_visible() {
        let m = Arc::new(TxnMgr::new(7));
        let t = m.begin();
        let s = m.snapshot(Some(t));
        let View::At(v) = s.view() else {
            unreachable!()
        };
        assert!(v.sees(t));
        assert!(v.live.is_empty());
    }
}
