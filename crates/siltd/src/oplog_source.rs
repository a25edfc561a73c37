//! Reading `local.oplog.rs`: the entries as stored, oldest first (or newest first for
//! `{$natural: -1}`), up to the oplog's visibility point, and for a tailable cursor the
//! entries committed since on later `getMore`s. A tailing reader never skips an entry that
//! commits late: it reads only up to the visibility point (`silt_collection::oplog`).
//!
//! A filter on `ts` (`$gt`, `$gte`, `$eq` at the top level or in a top-level `$and`), as
//! Meteor's oplog driver, `mongodump --oplog` and change-stream resumption send it, starts
//! the scan at that time instead of the oldest entry.

use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document, Timestamp};
use silt_collection::oplog::{pack, unpack, Oplog, Scan};
use silt_query::matcher::Matcher;
use silt_query::QResult;

use crate::cursors::DocSource;
use crate::errors::coll_err;

/// A stream of oplog entries.
pub(crate) struct OplogSource {
    pub log: Arc<Oplog>,
    pub matcher: Arc<Matcher>,
    scan: Option<Scan>,
    /// The time of the last entry read (returned or not).
    last: Option<Timestamp>,
    newest_first: bool,
    tailable: bool,
    await_data: bool,
}

impl OplogSource {
    /// Entries matching `filter` (compiled as `matcher`), oldest first unless `newest_first`.
    pub(crate) fn new(
        log: Arc<Oplog>,
        filter: &Document,
        matcher: Arc<Matcher>,
        newest_first: bool,
    ) -> OplogSource {
        let last = if newest_first { None } else { ts_floor(filter) };
        OplogSource {
            log,
            matcher,
            scan: None,
            last,
            newest_first,
            tailable: false,
            await_data: false,
        }
    }

    /// The same source, tailable (and waiting for entries when `await_data`).
    pub(crate) fn tailing(self, await_data: bool) -> OplogSource {
        OplogSource {
            tailable: true,
            await_data,
            ..self
        }
    }
}

impl DocSource for OplogSource {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        loop {
            let scan = match &mut self.scan {
                Some(s) => s,
                None => self.scan.insert(if self.newest_first {
                    self.log.read_newest_first()
                } else {
                    self.log.read(self.last)
                }),
            };
            match scan.next_entry().map_err(coll_err)? {
                Some((ts, d)) => {
                    self.last = Some(ts);
                    if self.matcher.try_matches(&d)? {
                        return Ok(Some(d));
                    }
                }
                None => {
                    // Everything up to the scan's visibility point has been read: the next
                    // call starts a fresh scan past it (and a wait waits for more than it).
                    if !self.newest_first {
                        let upto = unpack(scan.upto());
                        self.last = Some(self.last.map_or(upto, |l| l.max(upto)));
                    }
                    self.scan = None;
                    return Ok(None);
                }
            }
        }
    }

    fn tailable(&self) -> bool {
        self.tailable
    }

    fn await_data(&self) -> bool {
        self.await_data
    }

    fn wait(&self, until: Instant) {
        let after = self.last.unwrap_or(Timestamp {
            time: 0,
            increment: 0,
        });
        self.log.wait_past(after, until);
    }
}

/// The time a filter's `ts` condition starts after: the scan begins past it (the matcher
/// still checks every entry).
fn ts_floor(filter: &Document) -> Option<Timestamp> {
    let mut best: Option<u64> = None;
    let mut consider = |cond: &Bson| {
        let floor = match cond {
            Bson::Timestamp(t) => pack(*t).checked_sub(1),
            Bson::Document(ops) => ops
                .iter()
                .filter_map(|(op, v)| match (op.as_str(), v) {
                    ("$gt", Bson::Timestamp(t)) => Some(pack(*t)),
                    ("$gte" | "$eq", Bson::Timestamp(t)) => pack(*t).checked_sub(1),
                    _ => None,
                })
                .max(),
            _ => None,
        };
        if let Some(f) = floor {
            best = Some(best.map_or(f, |b| b.max(f)));
        }
    };
    if let Some(c) = filter.get("ts") {
        consider(c);
    }
    if let Ok(list) = filter.get_array("$and") {
        for c in list.iter().filter_map(Bson::as_document) {
            if let Some(v) = c.get("ts") {
                consider(v);
            }
        }
    }
    best.map(unpack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn ts_conditions_start_the_scan() {
        let t = Timestamp {
            time: 10,
            increment: 2,
        };
        let before = Timestamp {
            time: 10,
            increment: 1,
        };
        assert_eq!(ts_floor(&doc! {"ts": {"$gt": t}}), Some(t));
        assert_eq!(ts_floor(&doc! {"ts": {"$gte": t}}), Some(before));
        assert_eq!(
            ts_floor(&doc! {"$and": [{"ts": {"$gt": t}}, {"op": "i"}]}),
            Some(t)
        );
        assert_eq!(ts_floor(&doc! {"ts": {"$lt": t}}), None);
        assert_eq!(ts_floor(&doc! {"op": "i"}), None);
    }
}
