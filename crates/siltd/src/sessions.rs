//! Logical sessions and what hangs off them: the transaction number, an open multi-document
//! transaction, and the retained snapshots of snapshot reads.
//!
//! A session is found by its `lsid` and *checked out* for the whole of one command (its
//! mutex is held), so two commands of one session never run at once, as in mongod. The
//! reaper (`Sessions::reap`, once a second) never waits for a checked-out session.
//!
//! **Lock order**: a session's `state` before anything a command takes (the engine's lock
//! manager, document stripes, ...); the `map` mutex is never held while a session is locked
//! by the same thread except in `reap`, which only `try_lock`s sessions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Document, Timestamp};
use parking_lot::{ArcMutexGuard, Mutex, RawMutex};
use silt_collection::{Snapshot, Transaction};
use silt_query::QueryError;

/// How long an unused session lives (MongoDB's `logicalSessionTimeoutMinutes`, 30).
pub(crate) const SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How long the snapshot of a snapshot read stays readable at its `atClusterTime` (MongoDB's
/// `minSnapshotHistoryWindowInSeconds`, 300), and how many are kept at most.
pub(crate) const SNAPSHOT_WINDOW: Duration = Duration::from_secs(300);
const MAX_SNAPSHOTS: usize = 1024;

/// The transaction side of a session.
pub(crate) enum TxnState {
    /// No multi-document transaction has the current number (a retryable write may).
    None,
    /// Open, with its engine transaction.
    Active(Box<Active>),
    /// Committed; `commitTransaction` may be retried.
    Committed,
    /// Aborted (by the client, an error, or the reaper); `why` says which.
    Aborted { why: &'static str },
}

/// An open multi-document transaction.
pub(crate) struct Active {
    pub txn: Transaction,
    pub started: Instant,
}

/// What one session holds between commands.
pub(crate) struct SessionState {
    /// The highest `txnNumber` used on this session (-1: none yet).
    pub number: i64,
    pub txn: TxnState,
    last_use: Instant,
}

impl SessionState {
    /// Abort the open transaction, if any, for reason `why`.
    pub(crate) fn abort(&mut self, why: &'static str) {
        if let TxnState::Active(a) = std::mem::replace(&mut self.txn, TxnState::Aborted { why }) {
            if let Err(e) = a.txn.abort() {
                tracing::warn!(error = %e, "aborting a transaction failed");
            }
        }
    }
}

/// One logical session.
type Session = Mutex<SessionState>;

/// Every session the server knows, by the bytes of its `lsid`.
pub(crate) struct Sessions {
    map: Mutex<HashMap<Vec<u8>, Arc<Session>>>,
    /// `maxSessions`: at most this many sessions at once (MongoDB's default, 1,000,000).
    pub max: std::sync::atomic::AtomicUsize,
    /// Snapshots of snapshot reads, by the cluster time they were given.
    snapshots: Mutex<BTreeMap<(u32, u32), (Snapshot, Instant)>>,
}

/// The key of a session: its `lsid` document's bytes.
pub(crate) fn lsid_key(lsid: &Document) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = lsid.to_writer(&mut v);
    v
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            map: Mutex::default(),
            max: std::sync::atomic::AtomicUsize::new(1_000_000),
            snapshots: Mutex::default(),
        }
    }
}

impl Sessions {
    /// Check out the session `lsid` (created on first use) for one command; a new session
    /// beyond `maxSessions` is refused with TooManyLogicalSessions (261), as MongoDB does.
    pub(crate) fn checkout(&self, lsid: &Document) -> Result<SessionGuard, QueryError> {
        let key = lsid_key(lsid);
        let mut map = self.map.lock();
        if !map.contains_key(&key)
            && map.len() >= self.max.load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err(QueryError::coded(
                261,
                "TooManyLogicalSessions",
                format!(
                    "Unable to add session into the cache because the number of active sessions is too high (maxSessions {})",
                    self.max.load(std::sync::atomic::Ordering::Relaxed)
                ),
            ));
        }
        let sess = map
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Mutex::new(SessionState {
                    number: -1,
                    txn: TxnState::None,
                    last_use: Instant::now(),
                }))
            })
            .clone();
        drop(map);
        Ok(SessionGuard::new(sess))
    }

    /// Note a use of session `lsid` outside a transaction or retryable write (created on first
    /// use, as MongoDB's session cache does), so `$listLocalSessions` shows it.
    pub(crate) fn touch(&self, lsid: &Document) -> Result<(), QueryError> {
        let key = lsid_key(lsid);
        let sess = self.map.lock().get(&key).cloned();
        match sess {
            Some(sess) => {
                if let Some(mut st) = sess.try_lock() {
                    st.last_use = Instant::now();
                }
            }
            None => drop(self.checkout(lsid)?),
        }
        Ok(())
    }

    /// Every session, copied out of the map (so that no session is locked under its mutex).
    fn all(&self) -> Vec<(Vec<u8>, Arc<Session>)> {
        self.map
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Every session's `lsid` and when it was last used (a session in use now: now), for
    /// `$listLocalSessions`.
    pub(crate) fn list(&self) -> Vec<(Document, std::time::SystemTime)> {
        let sessions = self.all();
        let now = std::time::SystemTime::now();
        sessions
            .into_iter()
            .filter_map(|(k, sess)| {
                let lsid = Document::from_reader(&mut k.as_slice()).ok()?;
                let idle = sess.try_lock().map(|st| st.last_use.elapsed());
                Some((lsid, now - idle.unwrap_or_default()))
            })
            .collect()
    }

    /// End the sessions `lsids` (`endSessions`, `killSessions`): abort their transactions.
    pub(crate) fn end(&self, lsids: &[Document]) {
        for l in lsids {
            let sess = self.map.lock().remove(&lsid_key(l));
            if let Some(sess) = sess {
                sess.lock().abort("the session ended");
            }
        }
    }

    /// Abort transactions older than `lifetime` and forget sessions unused for
    /// [`SESSION_TIMEOUT`] (aborting theirs); drop expired snapshots. Returns the number of
    /// transactions aborted.
    pub(crate) fn reap(&self, lifetime: Duration) -> usize {
        let mut aborted = 0;
        let sessions = self.all();
        let mut gone = Vec::new();
        for (k, sess) in sessions {
            // A session in use is neither expired nor idle.
            let Some(mut st) = sess.try_lock() else {
                continue;
            };
            if let TxnState::Active(a) = &st.txn {
                if a.started.elapsed() > lifetime {
                    st.abort("it exceeded transactionLifetimeLimitSeconds");
                    aborted += 1;
                }
            }
            if st.last_use.elapsed() > SESSION_TIMEOUT {
                if matches!(st.txn, TxnState::Active(_)) {
                    aborted += 1;
                }
                st.abort("its session expired");
                gone.push(k);
            }
        }
        if !gone.is_empty() {
            let mut m = self.map.lock();
            for k in gone {
                m.remove(&k);
            }
        }
        self.snapshots
            .lock()
            .retain(|_, (_, at)| at.elapsed() < SNAPSHOT_WINDOW);
        aborted
    }

    /// Abort every open transaction (at shutdown, before the store closes).
    pub(crate) fn abort_all(&self) {
        let sessions: Vec<Arc<Session>> = self.map.lock().drain().map(|(_, v)| v).collect();
        for s in sessions {
            s.lock().abort("the server is shutting down");
        }
        self.snapshots.lock().clear();
    }

    /// Sessions known and transactions open, for `serverStatus`. A session running a command
    /// is not waited for: it counts as having a transaction open.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let m = self.map.lock();
        let open = m
            .values()
            .filter(|s| {
                s.try_lock()
                    .is_none_or(|st| matches!(st.txn, TxnState::Active(_)))
            })
            .count();
        (m.len(), open)
    }

    /// Keep `snap` readable at cluster time `t` for [`SNAPSHOT_WINDOW`].
    pub(crate) fn keep_snapshot(&self, t: Timestamp, snap: Snapshot) {
        let mut m = self.snapshots.lock();
        while m.len() >= MAX_SNAPSHOTS {
            m.pop_first();
        }
        m.insert((t.time, t.increment), (snap, Instant::now()));
    }

    /// The snapshot handed out at cluster time `t`, if it is still kept.
    pub(crate) fn snapshot_at(&self, t: Timestamp) -> Option<Snapshot> {
        let m = self.snapshots.lock();
        m.get(&(t.time, t.increment))
            .filter(|(_, at)| at.elapsed() < SNAPSHOT_WINDOW)
            .map(|(s, _)| s.clone())
    }
}

/// A checked-out session: its state is locked for as long as the guard lives.
pub(crate) struct SessionGuard(ArcMutexGuard<RawMutex, SessionState>);

impl SessionGuard {
    fn new(sess: Arc<Session>) -> SessionGuard {
        let mut g = SessionGuard(sess.lock_arc());
        g.0.last_use = Instant::now();
        g
    }
}

impl std::ops::Deref for SessionGuard {
    type Target = SessionState;
    fn deref(&self) -> &SessionState {
        &self.0
    }
}

impl std::ops::DerefMut for SessionGuard {
    fn deref_mut(&mut self) -> &mut SessionState {
        &mut self.0
    }
}

/// The session a `commitTransaction` or `abortTransaction` ends, lent to the command's
/// handler through its `Ctx` (`transactions::commit_transaction`), with the error labels
/// its outcome carries back.
pub(crate) struct TxnEnd<'a> {
    pub sess: std::cell::RefCell<&'a mut SessionGuard>,
    pub labels: std::cell::RefCell<Vec<&'static str>>,
}
