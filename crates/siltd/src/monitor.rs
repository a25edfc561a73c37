//! Server-wide operational state that commands read and the dispatcher feeds: the fsync write
//! lock, the database profiler's levels, and the `top` counters per namespace.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bson::{doc, Bson, Document};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex, RwLock};

/// `fsync: 1, lock: true`: while held, write commands wait. Lock order: taken alone, never
/// while holding another lock of the server or the store.
#[derive(Debug, Default)]
pub(crate) struct FsyncLock {
    count: Mutex<u32>,
    released: Condvar,
}

impl FsyncLock {
    /// Take one more level of the lock: the new count.
    pub(crate) fn lock_writes(&self) -> u32 {
        let mut n = self.count.lock();
        *n += 1;
        *n
    }

    /// Release one level: the count left, `None` when it was not locked.
    pub(crate) fn unlock_writes(&self) -> Option<u32> {
        let mut n = self.count.lock();
        if *n == 0 {
            return None;
        }
        *n -= 1;
        if *n == 0 {
            self.released.notify_all();
        }
        Some(*n)
    }

    pub(crate) fn is_locked(&self) -> bool {
        *self.count.lock() > 0
    }

    /// Wait until writes are allowed (or `stop` says to give up).
    pub(crate) fn wait_for_writes(&self, stop: impl Fn() -> bool) {
        let mut n = self.count.lock();
        while *n > 0 && !stop() {
            self.released.wait_for(&mut n, Duration::from_millis(200));
        }
    }
}

/// The profiler's settings of one database (`profile` command).
#[derive(Clone, Debug)]
pub(crate) struct ProfileLevel {
    /// 0 off, 1 slow operations, 2 all.
    pub level: i32,
    pub slow_ms: i64,
    /// The fraction of the selected operations recorded (1: all).
    pub sample_rate: f64,
    /// `filter`: at level 1 it replaces `slowms`: an operation is recorded when its profile
    /// entry matches (the filter as given, and compiled).
    pub filter: Option<(Document, std::sync::Arc<silt_query::matcher::Matcher>)>,
}

impl ProfileLevel {
    /// Is an operation that took `millis`, described by `entry`, recorded?
    pub(crate) fn wants(&self, millis: i64, entry: &Document) -> bool {
        let selected = match (self.level, &self.filter) {
            (0, _) => false,
            (2, _) => true,
            (_, Some((_, m))) => m.matches(entry),
            _ => millis >= self.slow_ms,
        };
        selected && (self.sample_rate >= 1.0 || sample() < self.sample_rate)
    }
}

/// A uniform draw in [0, 1) for sampling (std's randomly keyed hasher over a counter).
fn sample() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Profiling levels by database. Every command reads them ([`Profiler::any`]), so they sit
/// behind a reader-writer lock: only `profile` writes.
#[derive(Debug, Default)]
pub(crate) struct Profiler {
    levels: RwLock<HashMap<String, ProfileLevel>>,
    /// The level of a database `profile` has not set (`--profile`).
    default_level: std::sync::atomic::AtomicI32,
}

impl Profiler {
    pub(crate) fn set_default(&self, level: i32) {
        self.default_level
            .store(level, std::sync::atomic::Ordering::Relaxed);
    }

    fn default_level(&self) -> i32 {
        self.default_level
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn get(&self, db: &str, default_slow_ms: i64) -> ProfileLevel {
        self.levels.read().get(db).cloned().unwrap_or(ProfileLevel {
            level: self.default_level(),
            slow_ms: default_slow_ms,
            sample_rate: 1.0,
            filter: None,
        })
    }

    pub(crate) fn set(&self, db: &str, p: ProfileLevel) {
        self.levels.write().insert(db.to_string(), p);
    }

    /// Whether any database profiles (a cheap check for every command).
    pub(crate) fn any(&self) -> bool {
        self.default_level() > 0 || self.levels.read().values().any(|p| p.level > 0)
    }
}

/// The kinds of operation `top` reports, in its order.
const TOP_KINDS: [&str; 9] = [
    "total",
    "readLock",
    "writeLock",
    "queries",
    "getmore",
    "insert",
    "update",
    "remove",
    "commands",
];

/// One namespace's `top` counters: (microseconds, count) per kind of [`TOP_KINDS`].
#[derive(Debug, Default)]
struct TopEntry {
    kinds: [[AtomicU64; 2]; TOP_KINDS.len()],
}

impl TopEntry {
    fn add(&self, kind: &str, micros: u64) {
        if let Some(i) = TOP_KINDS.iter().position(|k| *k == kind) {
            self.kinds[i][0].fetch_add(micros, Ordering::Relaxed);
            self.kinds[i][1].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `top`: time and counts per namespace and kind of operation, since the server started.
/// Every command records itself, so the counters are atomics under a reader-writer lock that
/// only a namespace's first command takes for writing: a mutex, even striped by namespace,
/// put every command on one collection on one lock.
#[derive(Debug, Default)]
pub(crate) struct Top {
    entries: RwLock<HashMap<String, TopEntry>>,
}

impl Top {
    pub(crate) fn record(&self, ns: &str, op: crate::commands::OpKind, micros: u64) {
        // `top` answers with the namespaces as field names: one a command was refused for
        // (an embedded NUL) cannot be one, and must not make every later `top` fail.
        if ns.contains('\0') {
            return;
        }
        let (kind, lock) = op.top();
        let add = |e: &TopEntry| {
            for k in ["total", kind, lock] {
                e.add(k, micros);
            }
        };
        if let Some(e) = self.entries.read().get(ns) {
            add(e);
            return;
        }
        add(self.entries.write().entry(ns.to_string()).or_default());
    }

    /// The `top` reply's `totals`.
    pub(crate) fn totals(&self) -> Document {
        let entries = self.entries.read();
        let sorted: BTreeMap<&String, &TopEntry> = entries.iter().collect();
        let mut out = doc! { "note": "all times in microseconds" };
        for (ns, e) in sorted {
            let mut d = Document::new();
            for (k, [t, c]) in TOP_KINDS.iter().zip(&e.kinds) {
                let (t, c) = (t.load(Ordering::Relaxed), c.load(Ordering::Relaxed));
                d.insert(*k, doc! { "time": t as i64, "count": c as i64 });
            }
            out.insert(ns.clone(), Bson::Document(d));
        }
        out
    }
}
