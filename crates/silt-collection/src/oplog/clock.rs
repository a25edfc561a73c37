//! The cluster clock of a replica-set member: `Timestamp(seconds, increment)` values, strictly
//! increasing, handed out to every oplog entry (and to the server for snapshot reads). It
//! starts after the newest entry of the oplog, so the times stay increasing across restarts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bson::Timestamp;

/// A timestamp packed as `seconds << 32 | increment`: the order of the packed values is the
/// order of the timestamps, and the oplog's keys are their big-endian bytes.
pub fn pack(t: Timestamp) -> u64 {
    u64::from(t.time) << 32 | u64::from(t.increment)
}

/// The timestamp `v` packs.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a packed timestamp: the high 32 bits are the seconds, the low 32 the increment"
)]
pub fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The member's clock: the last time handed out.
#[derive(Debug)]
pub struct Clock {
    last: AtomicU64,
}

impl Clock {
    /// A clock whose next time is after `after` (packed) and not before now.
    pub fn starting_after(after: u64) -> Clock {
        Clock {
            last: AtomicU64::new(after.max(unix_secs() << 32)),
        }
    }

    /// The last time handed out.
    pub fn now(&self) -> Timestamp {
        unpack(self.last_packed())
    }

    pub(crate) fn last_packed(&self) -> u64 {
        self.last.load(Ordering::Acquire)
    }

    /// Move the clock to `packed` if it is behind (a replicated entry's time).
    pub(crate) fn advance_to(&self, packed: u64) {
        self.last.fetch_max(packed, Ordering::AcqRel);
    }

    /// A new time, after every earlier one: the time of a write (or of a snapshot read that
    /// may later be repeated at it).
    pub fn tick(&self) -> Timestamp {
        unpack(self.tick_packed())
    }

    pub(crate) fn tick_packed(&self) -> u64 {
        // Increments start at 1 in every second, as mongod's.
        let wall = unix_secs() << 32 | 1;
        let mut cur = self.last.load(Ordering::Acquire);
        loop {
            let next = (cur + 1).max(wall);
            match self
                .last
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return next,
                Err(v) => cur = v,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_increase_and_pack_in_order() {
        let c = Clock::starting_after(0);
        let a = c.tick_packed();
        let b = c.tick_packed();
        assert!(b > a);
        assert_eq!(pack(unpack(b)), b);
        let later = Clock::starting_after(u64::from(u32::MAX) << 32 | 5);
        assert_eq!(later.tick_packed(), u64::from(u32::MAX) << 32 | 6);
    }
}
