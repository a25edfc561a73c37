//! MVCC: transaction ids, snapshots and what they see, and the horizon below which old
//! versions are garbage. The tree (`tree/le.rs`, `tree/apply.rs`) reads through [`View`]s;
//! the [`crate::Txn`] handle (`txn.rs`) and the write path draw xids from [`TxnMgr`].
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::ids::{Lsn, Xid};

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
    pub(crate) fn sees(&self, x: Xid) -> bool {
        x.0 == 0 || Some(x) == self.own || (x < self.hi && self.live.binary_search(&x).is_err())
    }

    /// The smallest xid this snapshot might not see.
    pub(crate) fn bound(&self) -> u64 {
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
    pub(crate) fn sees(&self, x: Xid) -> bool {
        match self {
            View::Latest => true,
            View::At(s) => s.sees(x),
        }
    }

    /// The transaction whose provisional versions are visible.
    #[inline]
    pub(crate) fn own(&self) -> Option<Xid> {
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
    pub(crate) fn new(next: u64) -> TxnMgr {
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
    pub(crate) fn horizon_cell(&self) -> Arc<AtomicU64> {
        self.horizon.clone()
    }

    /// The current horizon.
    #[cfg(test)]
    pub(crate) fn horizon(&self) -> Xid {
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
    pub(crate) fn begin(&self) -> Xid {
        let mut s = self.state.lock();
        let x = Xid(s.next);
        s.next += 1;
        s.live.insert(x, None);
        self.publish(&s);
        x
    }

    /// Mark `x` finished (committed or aborted).
    pub(crate) fn finish(&self, x: Xid) {
        let mut s = self.state.lock();
        s.live.remove(&x);
        self.publish(&s);
    }

    /// Record that `x` logged a record at `lsn` (only its first one is kept).
    pub(crate) fn logged(&self, x: Xid, lsn: Lsn) {
        let mut s = self.state.lock();
        if let Some(first @ None) = s.live.get_mut(&x) {
            *first = Some(lsn);
        }
    }

    /// The LSN of the oldest log record of a live transaction: the log from there on is needed
    /// to finish it after a crash.
    pub(crate) fn oldest_lsn(&self) -> Option<Lsn> {
        self.state.lock().live.values().flatten().min().copied()
    }

    /// The next xid (persisted by checkpoints, so that xids stay increasing across restarts).
    pub(crate) fn next_xid(&self) -> u64 {
        self.state.lock().next
    }

    /// Raise the counter above `x` (recovery, after reading stamped versions or records).
    pub(crate) fn observe(&self, x: Xid) {
        let mut s = self.state.lock();
        if s.next <= x.0 {
            s.next = x.0 + 1;
            self.publish(&s);
        }
    }

    /// Live transactions and snapshots, for statistics.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.live.len(), s.snaps.values().sum())
    }

    /// Take a snapshot, seeing `own`'s provisional versions.
    pub(crate) fn snapshot(self: &Arc<Self>, own: Option<Xid>) -> Snapshot {
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
