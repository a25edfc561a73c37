//! The optime (`{ts, t}`) of each recently applied entry of the set's log, by log index: what
//! `replSetGetStatus` reports for a member whose log position is known (this member's applied
//! index, each member's matched index on the primary, the commit index). Entries older than
//! the window, or before a snapshot this member installed, have no known optime and report
//! `Timestamp(0, 0)`, as mongod does for a member it has not heard from.

use std::collections::VecDeque;

use bson::{doc, Document, Timestamp};
use parking_lot::Mutex;

/// Entries remembered.
const KEEP: usize = 1 << 16;

/// Optimes of the newest applied entries, by index.
#[derive(Default)]
pub(crate) struct Optimes {
    ring: Mutex<VecDeque<(u64, u64, Timestamp)>>,
}

/// An optime: the entry's oplog time and the term it was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpTime {
    pub ts: Timestamp,
    pub term: u64,
}

impl OpTime {
    /// No entry known.
    pub(crate) const NONE: OpTime = OpTime {
        ts: Timestamp {
            time: 0,
            increment: 0,
        },
        term: 0,
    };

    /// `{ts, t}`.
    pub(crate) fn doc(self) -> Document {
        doc! { "ts": self.ts, "t": i64::try_from(self.term).unwrap_or(i64::MAX) }
    }

    /// The wall time of `ts`.
    pub(crate) fn date(self) -> bson::DateTime {
        bson::DateTime::from_millis(i64::from(self.ts.time) * 1000)
    }
}

impl Optimes {
    /// Entry `index` of `term` was applied; the oplog's newest time is then `ts`.
    pub(crate) fn record(&self, index: u64, term: u64, ts: Timestamp) {
        let mut r = self.ring.lock();
        if r.back().is_some_and(|(i, _, _)| *i >= index) {
            // A snapshot installed moved the log back or forth: start again.
            r.clear();
        }
        r.push_back((index, term, ts));
        if r.len() > KEEP {
            r.pop_front();
        }
    }

    /// Forget every entry (a snapshot was installed in place of the data).
    pub(crate) fn clear(&self) {
        self.ring.lock().clear();
    }

    /// The optime of the newest entry at or below `index`, when it is in the window.
    pub(crate) fn at(&self, index: Option<u64>) -> OpTime {
        let Some(index) = index else {
            return OpTime::NONE;
        };
        let r = self.ring.lock();
        let n = r.partition_point(|(i, _, _)| *i <= index);
        // Every applied entry is recorded, so the newest at or below `index` is its optime
        // (or, past the newest applied, the newest known); below the window nothing is known.
        match n.checked_sub(1).and_then(|k| r.get(k)) {
            Some((_, term, ts)) => OpTime {
                ts: *ts,
                term: *term,
            },
            None => OpTime::NONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(time: u32) -> Timestamp {
        Timestamp { time, increment: 1 }
    }

    fn op(time: u32, term: u64) -> OpTime {
        OpTime { ts: ts(time), term }
    }

    #[test]
    fn the_optime_of_an_index_is_the_newest_entry_at_or_below_it() {
        let o = Optimes::default();
        o.record(5, 1, ts(100));
        o.record(6, 1, ts(101));
        o.record(9, 2, ts(105));
        assert_eq!(o.at(Some(6)), op(101, 1));
        assert_eq!(o.at(Some(8)), op(101, 1));
        assert_eq!(o.at(Some(40)), op(105, 2));
        assert_eq!(o.at(Some(5)), op(100, 1));
        assert_eq!(o.at(Some(4)), OpTime::NONE);
        assert_eq!(o.at(None), OpTime::NONE);
        // An install moves the log: the window starts again.
        o.record(3, 3, ts(200));
        assert_eq!(o.at(Some(9)), op(200, 3));
    }
}
