//! The free-space red zone (TokuMX's `fsRedzone`): while the data directory's filesystem has
//! less than `--fsRedzone` percent (default 5) or `--fsRedzoneBytes` (default 64 MiB) free,
//! commands that write are refused with OutOfDiskSpace (14031) and reads go on. Dropping a
//! collection, an index, a partition or a database is still allowed (it gives space back),
//! and so is aborting a transaction. Writes resume by themselves once space returns.
//!
//! The reading is `statvfs` of the data directory, taken again at most every 250 ms by the
//! write path; the `siltDiskFreeSpace` fail point replaces it with given figures for tests.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use bson::{doc, Document};
use parking_lot::Mutex;
use silt_query::QueryError;

/// Commands allowed in the red zone although they write: they free space or end work.
const ALLOWED: &[&str] = &[
    "drop",
    "dropDatabase",
    "dropIndexes",
    "dropPartition",
    "abortTransaction",
];

const RECHECK_MS: u64 = 250;

#[derive(Debug)]
pub(crate) struct RedZone {
    dir: PathBuf,
    percent: u64,
    floor: u64,
    started: Instant,
    /// Milliseconds since `started` of the last reading.
    checked_ms: AtomicU64,
    in_zone: AtomicBool,
    /// The last reading: `(free, total)` bytes.
    last: Mutex<(u64, u64)>,
    /// The `siltDiskFreeSpace` fail point's figures.
    simulated: Mutex<Option<(u64, u64)>>,
}

fn statvfs(dir: &Path) -> Option<(u64, u64)> {
    let st = rustix::fs::statvfs(dir).ok()?;
    Some((
        st.f_bavail.saturating_mul(st.f_frsize),
        st.f_blocks.saturating_mul(st.f_frsize),
    ))
}

impl RedZone {
    pub(crate) fn new(dir: &Path, percent: u64, floor: u64) -> RedZone {
        let z = RedZone {
            dir: dir.to_path_buf(),
            percent,
            floor,
            started: Instant::now(),
            checked_ms: AtomicU64::new(0),
            in_zone: AtomicBool::new(false),
            last: Mutex::new((0, 0)),
            simulated: Mutex::new(None),
        };
        z.check_now();
        z
    }

    /// Read the free space now and update the state; whether writes are refused.
    pub(crate) fn check_now(&self) -> bool {
        let reading = (*self.simulated.lock()).or_else(|| statvfs(&self.dir));
        self.checked_ms.store(
            u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let Some((free, total)) = reading else {
            return self.in_zone.load(Ordering::Relaxed);
        };
        *self.last.lock() = (free, total);
        let zone = free < self.floor
            || (total > 0 && free.saturating_mul(100) < total.saturating_mul(self.percent));
        let was = self.in_zone.swap(zone, Ordering::Relaxed);
        if zone && !was {
            tracing::warn!(
                dbpath = %self.dir.display(),
                free_bytes = free,
                total_bytes = total,
                "entering the free-space red zone: writes are refused until space is freed"
            );
        } else if was && !zone {
            tracing::info!(
                free_bytes = free,
                "left the free-space red zone: writes resume"
            );
        }
        zone
    }

    /// Simulate a reading (`None`: read the filesystem again), and apply it at once.
    pub(crate) fn simulate(&self, reading: Option<(u64, u64)>) {
        *self.simulated.lock() = reading;
        self.check_now();
    }

    /// OutOfDiskSpace if command `name` writes and the filesystem is in the red zone.
    pub(crate) fn refuse(&self, name: &str) -> Result<(), QueryError> {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let due = now.saturating_sub(self.checked_ms.load(Ordering::Relaxed)) >= RECHECK_MS;
        // Every command passes here: outside the zone with a fresh reading, nothing else is
        // looked at (not even the command table).
        if !due && !self.in_zone.load(Ordering::Relaxed) {
            return Ok(());
        }
        if ALLOWED.contains(&name) || !crate::commands::is_write(name) {
            return Ok(());
        }
        if due && !self.check_now() {
            return Ok(());
        }
        let (free, total) = *self.last.lock();
        Err(QueryError::coded(
            14031,
            "OutOfDiskSpace",
            format!(
                "writes are refused: the filesystem of {} has {free} of {total} bytes free, inside the red zone (fsRedzone {}%, fsRedzoneBytes {}); reads go on, and writes resume once space is freed (dropping collections or indexes is allowed)",
                self.dir.display(),
                self.percent,
                self.floor
            ),
        ))
    }

    /// `serverStatus.silt.redZone`.
    pub(crate) fn status(&self) -> Document {
        let (free, total) = *self.last.lock();
        doc! {
            "inRedZone": self.in_zone.load(Ordering::Relaxed),
            "freeBytes": free as i64,
            "totalBytes": total as i64,
            "fsRedzonePercent": self.percent as i64,
            "fsRedzoneBytes": self.floor as i64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentage_and_floor() {
        let dir = std::env::temp_dir();
        let z = RedZone::new(&dir, 5, 1000);
        z.simulate(Some((10_000, 100_000)));
        assert!(z.refuse("insert").is_ok());
        z.simulate(Some((4_000, 100_000)));
        assert_eq!(z.refuse("insert").unwrap_err().code, 14031);
        assert!(z.refuse("find").is_ok());
        assert!(z.refuse("drop").is_ok());
        z.simulate(Some((900, 10_000)));
        assert!(z.refuse("update").is_err());
        z.simulate(Some((50_000, 100_000)));
        assert!(z.refuse("update").is_ok());
    }
}
