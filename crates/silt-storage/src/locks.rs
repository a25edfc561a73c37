//! The lock manager: shared and exclusive locks on key ranges of dictionaries, held by
//! transactions until they end and by writers outside transactions for one write.
//!
//! A lock covers the closed key range `[lo, hi]` of one dictionary (a point lock is a range
//! with `lo == hi`). Two locks conflict when their ranges overlap, their owners differ and at
//! least one is exclusive; an owner never conflicts with itself (so a shared lock is upgraded
//! by asking for an exclusive one). A request that conflicts waits, up to its timeout, for
//! the holders to release. Before waiting, the requester's edge in the wait-for graph is
//! added and checked: if a holder it would wait for is (transitively) waiting for the
//! requester, the request fails at once with [`Error::Deadlock`] and the requester is the
//! victim. A request still blocked at its deadline fails with [`Error::LockTimeout`]. Neither
//! failure changes what the requester already holds; its caller usually aborts.
//!
//! Lock order: lock-manager locks are requested before the write gate and any tree lock, and
//! never while holding one (a writer waiting here holds no engine lock). The manager's own
//! mutex is a leaf.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::ids::DictId;

/// Whether a lock admits other owners' shared locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Readers: any number of owners at once.
    Shared,
    /// A writer: one owner.
    Exclusive,
}

/// Who holds locks: a transaction (its xid) or a single write outside one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockOwner(pub u64);

#[derive(Clone, Debug)]
struct Held {
    owner: LockOwner,
    mode: LockMode,
    /// Times this owner asked for this exact lock (released together).
    count: u32,
}

/// A range lock: `[lo, hi]` and its holder.
type RangeHeld = (Box<[u8]>, Box<[u8]>, Held);

/// Locks on one dictionary: point locks by key, range locks in a list.
#[derive(Default)]
struct DictLocks {
    points: BTreeMap<Box<[u8]>, Vec<Held>>,
    ranges: Vec<RangeHeld>,
}

impl DictLocks {
    fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// Owners of locks overlapping `[lo, hi]` that conflict with `mode` for `me`.
    fn blockers(&self, lo: &[u8], hi: &[u8], me: LockOwner, mode: LockMode) -> Vec<LockOwner> {
        let conflicts = |h: &Held| {
            h.owner != me && (mode == LockMode::Exclusive || h.mode == LockMode::Exclusive)
        };
        let mut out = Vec::new();
        for (_, hs) in self
            .points
            .range::<[u8], _>((std::ops::Bound::Included(lo), std::ops::Bound::Included(hi)))
        {
            out.extend(hs.iter().filter(|h| conflicts(h)).map(|h| h.owner));
        }
        for (a, z, h) in &self.ranges {
            if a.as_ref() <= hi && z.as_ref() >= lo && conflicts(h) {
                out.push(h.owner);
            }
        }
        out.sort();
        out.dedup();
        out
    }

    fn grant(&mut self, lo: &[u8], hi: &[u8], owner: LockOwner, mode: LockMode) {
        let add = |hs: &mut Vec<Held>| match hs.iter_mut().find(|h| h.owner == owner) {
            Some(h) => {
                h.count += 1;
                if mode == LockMode::Exclusive {
                    h.mode = mode;
                }
            }
            None => hs.push(Held {
                owner,
                mode,
                count: 1,
            }),
        };
        if lo == hi {
            add(self.points.entry(lo.into()).or_default());
        } else {
            match self
                .ranges
                .iter_mut()
                .find(|(a, z, h)| a.as_ref() == lo && z.as_ref() == hi && h.owner == owner)
            {
                Some((_, _, h)) => {
                    h.count += 1;
                    if mode == LockMode::Exclusive {
                        h.mode = mode;
                    }
                }
                None => self.ranges.push((
                    lo.into(),
                    hi.into(),
                    Held {
                        owner,
                        mode,
                        count: 1,
                    },
                )),
            }
        }
    }

    fn release(&mut self, owner: LockOwner) {
        self.points.retain(|_, hs| {
            hs.retain(|h| h.owner != owner);
            !hs.is_empty()
        });
        self.ranges.retain(|(_, _, h)| h.owner != owner);
    }
}

#[derive(Default)]
struct State {
    dicts: HashMap<DictId, DictLocks>,
    /// Which dictionaries each owner holds locks in.
    owners: HashMap<LockOwner, HashSet<DictId>>,
    /// The wait-for graph: each waiting owner and the owners it waits for.
    waits: HashMap<LockOwner, Vec<LockOwner>>,
}

impl State {
    /// Whether `from` reaches `to` in the wait-for graph.
    fn reaches(&self, from: LockOwner, to: LockOwner) -> bool {
        let mut seen = HashSet::new();
        let mut stack = vec![from];
        while let Some(o) = stack.pop() {
            if o == to {
                return true;
            }
            if seen.insert(o) {
                if let Some(next) = self.waits.get(&o) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }
}

/// The lock table of one environment.
pub(crate) struct LockMgr {
    state: Mutex<State>,
    released: Condvar,
    /// Owner ids for writes outside transactions, above every xid.
    next_temp: AtomicU64,
    /// Lock requests that waited, timed out, and were deadlock victims.
    pub waited: AtomicU64,
    pub timeouts: AtomicU64,
    pub deadlocks: AtomicU64,
}

impl std::fmt::Debug for LockMgr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockMgr").finish_non_exhaustive()
    }
}

impl Default for LockMgr {
    fn default() -> LockMgr {
        LockMgr {
            state: Mutex::new(State::default()),
            released: Condvar::new(),
            next_temp: AtomicU64::new(1 << 63),
            waited: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            deadlocks: AtomicU64::new(0),
        }
    }
}

impl LockMgr {
    /// An owner id for a write outside a transaction.
    pub(crate) fn temp_owner(&self) -> LockOwner {
        LockOwner(self.next_temp.fetch_add(1, Ordering::Relaxed))
    }

    /// Lock `[lo, hi]` of `dict` for `owner` in `mode`, waiting at most `timeout`.
    pub(crate) fn acquire(
        &self,
        dict: DictId,
        (lo, hi): (&[u8], &[u8]),
        owner: LockOwner,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<()> {
        if lo > hi {
            return Err(Error::InvalidArgument("lock range with lo > hi".into()));
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.state.lock();
        let mut waited = false;
        loop {
            let blockers = st
                .dicts
                .get(&dict)
                .map(|d| d.blockers(lo, hi, owner, mode))
                .unwrap_or_default();
            if blockers.is_empty() {
                st.waits.remove(&owner);
                st.dicts.entry(dict).or_default().grant(lo, hi, owner, mode);
                st.owners.entry(owner).or_default().insert(dict);
                return Ok(());
            }
            if blockers.iter().any(|&b| st.reaches(b, owner)) {
                st.waits.remove(&owner);
                self.deadlocks.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Deadlock);
            }
            let expired = deadline.is_some_and(|d| Instant::now() >= d);
            if expired {
                st.waits.remove(&owner);
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                return Err(Error::LockTimeout);
            }
            st.waits.insert(owner, blockers);
            if !waited {
                waited = true;
                self.waited.fetch_add(1, Ordering::Relaxed);
            }
            match deadline {
                Some(d) => {
                    self.released.wait_until(&mut st, d);
                }
                None => self.released.wait(&mut st),
            }
        }
    }

    /// Release every lock `owner` holds, waking the waiters.
    pub(crate) fn release_all(&self, owner: LockOwner) {
        let mut st = self.state.lock();
        st.waits.remove(&owner);
        let Some(dicts) = st.owners.remove(&owner) else {
            return;
        };
        for id in dicts {
            if let Some(d) = st.dicts.get_mut(&id) {
                d.release(owner);
                if d.is_empty() {
                    st.dicts.remove(&id);
                }
            }
        }
        drop(st);
        self.released.notify_all();
    }

    /// Locks held now (points and ranges, every owner).
    pub(crate) fn held(&self) -> usize {
        let st = self.state.lock();
        st.dicts
            .values()
            .map(|d| d.points.values().map(Vec::len).sum::<usize>() + d.ranges.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const D: DictId = DictId(1);
    const SHORT: Duration = Duration::from_millis(20);

    fn pt(k: &[u8]) -> (&[u8], &[u8]) {
        (k, k)
    }

    #[test]
    fn shared_locks_share_and_exclusive_ones_conflict() {
        let m = LockMgr::default();
        let (a, b) = (LockOwner(1), LockOwner(2));
        m.acquire(D, pt(b"k"), a, LockMode::Shared, SHORT).unwrap();
        m.acquire(D, pt(b"k"), b, LockMode::Shared, SHORT).unwrap();
        assert!(matches!(
            m.acquire(D, pt(b"k"), a, LockMode::Exclusive, SHORT),
            Err(Error::LockTimeout)
        ));
        m.release_all(b);
        // Alone now: the shared lock upgrades.
        m.acquire(D, pt(b"k"), a, LockMode::Exclusive, SHORT)
            .unwrap();
        assert!(matches!(
            m.acquire(D, pt(b"k"), b, LockMode::Shared, SHORT),
            Err(Error::LockTimeout)
        ));
        // Other keys and other dictionaries are free.
        m.acquire(D, pt(b"l"), b, LockMode::Exclusive, SHORT)
            .unwrap();
        m.acquire(DictId(2), pt(b"k"), b, LockMode::Exclusive, SHORT)
            .unwrap();
        m.release_all(a);
        m.release_all(b);
        assert_eq!(m.held(), 0);
    }

    #[test]
    fn ranges_conflict_with_the_points_and_ranges_they_overlap() {
        let m = LockMgr::default();
        let (a, b) = (LockOwner(1), LockOwner(2));
        m.acquire(D, (b"b", b"d"), a, LockMode::Exclusive, SHORT)
            .unwrap();
        for k in [&b"b"[..], b"c", b"d"] {
            assert!(
                m.acquire(D, pt(k), b, LockMode::Shared, SHORT).is_err(),
                "{k:?}"
            );
        }
        m.acquire(D, pt(b"a"), b, LockMode::Exclusive, SHORT)
            .unwrap();
        m.acquire(D, pt(b"e"), b, LockMode::Exclusive, SHORT)
            .unwrap();
        assert!(m
            .acquire(D, (b"a", b"b"), b, LockMode::Shared, SHORT)
            .is_err());
        // And a range request conflicts with a point inside it.
        assert!(m
            .acquire(D, (b"0", b"z"), a, LockMode::Shared, SHORT)
            .is_err());
    }

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released() {
        let m = Arc::new(LockMgr::default());
        let (a, b) = (LockOwner(1), LockOwner(2));
        m.acquire(D, pt(b"k"), a, LockMode::Exclusive, SHORT)
            .unwrap();
        let m2 = m.clone();
        let t = std::thread::spawn(move || {
            m2.acquire(D, pt(b"k"), b, LockMode::Exclusive, Duration::from_secs(30))
        });
        while m.waited.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        m.release_all(a);
        t.join().unwrap().unwrap();
    }

    #[test]
    fn a_deadlock_makes_the_requester_the_victim() {
        let m = Arc::new(LockMgr::default());
        let (a, b) = (LockOwner(1), LockOwner(2));
        m.acquire(D, pt(b"x"), a, LockMode::Exclusive, SHORT)
            .unwrap();
        m.acquire(D, pt(b"y"), b, LockMode::Exclusive, SHORT)
            .unwrap();
        let m2 = m.clone();
        // a waits for y (held by b)...
        let t = std::thread::spawn(move || {
            m2.acquire(D, pt(b"y"), a, LockMode::Exclusive, Duration::from_secs(30))
        });
        while m.waited.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        // ...so b asking for x closes a cycle: b is the victim, at once.
        let r = m.acquire(D, pt(b"x"), b, LockMode::Exclusive, Duration::from_secs(30));
        assert!(matches!(r, Err(Error::Deadlock)));
        assert_eq!(m.deadlocks.load(Ordering::Relaxed), 1);
        // The victim aborts; the other goes on.
        m.release_all(b);
        t.join().unwrap().unwrap();
    }
}
