//! The cache's memory budget. Nodes live in their dictionary's tree map; this module only
//! keeps the shared count of bytes they hold and the figures the evictor steers by. The
//! eviction policy itself (clock, partial eviction, write-back) is in `dict.rs`, next to the
//! tree lock it needs.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Memory accounting shared by every dictionary of an environment.
#[derive(Debug)]
pub(crate) struct CacheCtl {
    /// Budget in bytes.
    pub budget: i64,
    /// Bytes currently charged by resident nodes.
    pub used: AtomicI64,
    /// Highest `used` observed.
    pub peak: AtomicI64,
    pub evictions: AtomicU64,
    pub partial_evictions: AtomicU64,
    pub writebacks: AtomicU64,
    pub misses: AtomicU64,
}

impl CacheCtl {
    pub(crate) fn new(budget: usize) -> CacheCtl {
        CacheCtl {
            budget: budget as i64,
            used: AtomicI64::new(0),
            peak: AtomicI64::new(0),
            evictions: AtomicU64::new(0),
            partial_evictions: AtomicU64::new(0),
            writebacks: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub(crate) fn used(&self) -> i64 {
        let u = self.used.load(Ordering::Relaxed);
        self.peak.fetch_max(u, Ordering::Relaxed);
        u
    }

    /// Bytes above the level the background evictor keeps (90% of the budget).
    pub(crate) fn excess_soft(&self) -> i64 {
        self.used() - self.budget * 9 / 10
    }

    /// Bytes above the budget itself: a writer that sees this evicts before it continues.
    pub(crate) fn excess_hard(&self) -> i64 {
        self.used() - self.budget
    }
}
