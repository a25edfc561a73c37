//! Reading along a plan: [`MatchSource`] yields the documents of a collection that match a
//! filter, from `_id` points, a range or all of the primary tree, or from index entries
//! (fetched by `_id`, decoded from a clustering index's entry, or made from the entry alone
//! when the plan is covered). The filter's matcher is always re-applied, so a plan only has to
//! read a superset of the matching documents.
//!
//! A source reads one snapshot from its first document to its last: the one it is given, or
//! one taken when it is made. Writes that land while a cursor is open (between its batches)
//! are not seen by it, and index entries and the documents fetched for them agree.

use std::collections::{HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document};
use silt_query::matcher::Matcher;
use silt_query::plan::{Access, Covered, Plan};

use crate::decode_fields;
use crate::keyrange::{as_ref, KeyRange, KeyScan};
use crate::parts::PartsCursor;
use crate::plan::Planned;
use crate::{id_key, CollError, Collection, DocCursor, Index, Result, Snapshot};

/// When a read must stop early. Checked before every document.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stop {
    /// Past this instant (`maxTimeMS`) the read fails with [`CollError::TimeLimit`].
    pub deadline: Option<Instant>,
    /// Whether the operation was asked to stop (siltd: `killOp`); the read then fails with
    /// [`CollError::Interrupted`].
    pub interrupted: Option<fn() -> bool>,
}

fn enc_bound(b: &Bound<Bson>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(v) => Bound::Included(id_key(v)),
        Bound::Excluded(v) => Bound::Excluded(id_key(v)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[allow(clippy::large_enum_variant)]
enum Feed {
    Points(VecDeque<Bson>),
    Scan(DocCursor),
    Ix(IxFeed),
}

/// Documents of one collection that match a filter, each with its primary key.
///
/// A covered plan yields, instead of each document, the one its index entry stands for
/// (`Index::covered_doc`: `_id` and the indexed fields, exactly as stored), and fetches only
/// the documents an entry cannot stand for.
pub struct MatchSource {
    coll: Arc<Collection>,
    snap: Snapshot,
    feed: Feed,
    matcher: Option<Arc<Matcher>>,
    stop: Stop,
    covered: Option<Covered>,
    /// Only these top-level fields of each fetched document are decoded (a count's: the
    /// documents matched are counted, never returned whole); `None` decodes them whole.
    fields: Option<Vec<String>>,
    /// Documents examined (read from the primary tree or a clustering index), for explain
    /// and slow-operation logs.
    pub examined: u64,
    /// Index keys examined.
    pub keys: u64,
}

impl std::fmt::Debug for MatchSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatchSource")
            .field("ns", &self.coll.ns())
            .finish()
    }
}

impl MatchSource {
    /// Decode only what the matcher reads of each document fetched through an index:
    /// `paths` are its filter's paths ([`silt_query::plan::needed_paths`] with no output),
    /// and the documents this source returns then hold only their top-level fields. For a
    /// count, which never returns them.
    pub fn decode_only(&mut self, paths: &[String]) {
        let mut top: Vec<String> = paths
            .iter()
            .map(|p| p.split('.').next().unwrap_or_default().to_string())
            .collect();
        top.sort();
        top.dedup();
        self.fields = Some(top);
    }

    /// Move the read's deadline (`maxTimeMS`): a cursor's time is spent only while a batch is
    /// being produced, so each batch gets what remains.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.stop.deadline = deadline;
    }
}

impl MatchSource {
    /// Read along a plan, covered when the choice is, at a snapshot taken now.
    pub fn new(
        coll: Arc<Collection>,
        planned: &Planned,
        matcher: Option<Arc<Matcher>>,
        stop: Stop,
    ) -> MatchSource {
        let snap = coll.snapshot();
        MatchSource::new_at(coll, planned, matcher, stop, snap)
    }

    /// [`MatchSource::new`] at the given snapshot (a transaction's).
    pub fn new_at(
        coll: Arc<Collection>,
        planned: &Planned,
        matcher: Option<Arc<Matcher>>,
        stop: Stop,
        snap: Snapshot,
    ) -> MatchSource {
        let mut src = MatchSource::uncovered_at(coll, planned, matcher, stop, snap);
        src.covered = planned.choice.covered;
        src
    }

    /// Read along a plan, every document whole (never covered), at a snapshot taken now.
    pub fn uncovered(
        coll: Arc<Collection>,
        planned: &Planned,
        matcher: Option<Arc<Matcher>>,
        stop: Stop,
    ) -> MatchSource {
        let snap = coll.snapshot();
        MatchSource::uncovered_at(coll, planned, matcher, stop, snap)
    }

    /// [`MatchSource::uncovered`] at the given snapshot.
    pub fn uncovered_at(
        coll: Arc<Collection>,
        planned: &Planned,
        matcher: Option<Arc<Matcher>>,
        stop: Stop,
        snap: Snapshot,
    ) -> MatchSource {
        let feed = match &planned.choice.plan {
            Plan::Primary(Access::Points(p)) => Feed::Points(p.clone().into()),
            Plan::Primary(Access::IdRange(lo, hi)) => {
                let (lo, hi) = (enc_bound(lo), enc_bound(hi));
                Feed::Scan(coll.scan_at(as_ref(&lo), as_ref(&hi), &snap))
            }
            Plan::Primary(Access::FullScan) => {
                Feed::Scan(coll.scan_at(Bound::Unbounded, Bound::Unbounded, &snap))
            }
            Plan::Index(_) => Feed::Ix(IxFeed::new(planned.key_scans())),
        };
        MatchSource {
            coll,
            snap,
            feed,
            matcher,
            stop,
            covered: None,
            fields: None,
            examined: 0,
            keys: 0,
        }
    }

    /// Read the whole collection in `_id` order.
    pub fn full_scan(
        coll: Arc<Collection>,
        matcher: Option<Arc<Matcher>>,
        stop: Stop,
    ) -> MatchSource {
        MatchSource::uncovered(coll, &Planned::full_scan(), matcher, stop)
    }

    /// The next matching document and its key.
    pub fn next_match(&mut self) -> Result<Option<(Vec<u8>, Document)>> {
        loop {
            self.check_stop()?;
            let next = match &mut self.feed {
                Feed::Points(p) => match p.pop_front() {
                    Some(id) => {
                        let k = id_key(&id);
                        self.coll.get_by_key_at(&k, &self.snap)?.map(|d| (k, d))
                    }
                    None => return Ok(None),
                },
                Feed::Scan(c) => match c.next_doc()? {
                    Some(x) => Some(x),
                    None => return Ok(None),
                },
                Feed::Ix(f) => {
                    let Some(e) = f.next_entry(&mut self.keys, &self.snap)? else {
                        return Ok(None);
                    };
                    let id = e.key[e.id_at..].to_vec();
                    let covered = self
                        .covered
                        .and_then(|c| Some((c, e.index.covered_doc(&e.key, &e.value)?)));
                    if let Some((c, d)) = covered {
                        // Built from the entry alone: nothing examined.
                        if c.exact || self.matcher.as_ref().is_none_or(|m| m.matches(&d)) {
                            return Ok(Some((id, d)));
                        }
                        continue;
                    }
                    match (&self.fields, e.index.spec.clustering) {
                        (Some(f), true) => Some((id, decode_fields(self.coll.ns(), &e.value, f)?)),
                        (None, true) => Some((id, self.coll.decode(&e.value)?)),
                        (Some(f), false) => self
                            .coll
                            .get_raw_by_key_at(&id, &self.snap)?
                            .map(|v| decode_fields(self.coll.ns(), &v, f).map(|d| (id, d)))
                            .transpose()?,
                        (None, false) => match self.coll.get_raw_by_key_at(&id, &self.snap)? {
                            // A document the matcher refuses from its bytes is not decoded.
                            Some(v) if self.refused_raw(&v) => {
                                self.examined += 1;
                                continue;
                            }
                            Some(v) => Some((id, self.coll.decode(&v)?)),
                            None => None,
                        },
                    }
                }
            };
            let Some((k, d)) = next else { continue };
            self.examined += 1;
            if self.matcher.as_ref().is_none_or(|m| m.matches(&d)) {
                return Ok(Some((k, d)));
            }
        }
    }
}

/// Documents fetched together by [`MatchSource::count_matches`]: sorted by `_id`, so that the
/// ones in one basement share one descent of the primary tree. An index range's documents are
/// spread over the whole primary tree, so a batch must be much larger than a basement's
/// documents to put several of them in one basement: 16,384 `_id`s of a 2,000,000-document
/// collection put about 8 in each of its basements.
const COUNT_BATCH: usize = 16384;

impl MatchSource {
    /// The number of matching documents left, the same as calling
    /// [`MatchSource::next_match`] until it ends. Through a (non-clustering, uncovered)
    /// index, the documents of each batch of entries are fetched in `_id` order, and only
    /// the fields set by [`MatchSource::decode_only`] are decoded.
    pub fn count_matches(&mut self) -> Result<u64> {
        let (Feed::Ix(_), None, Some(fields)) = (&self.feed, self.covered, self.fields.clone())
        else {
            let mut n = 0;
            while self.next_match()?.is_some() {
                n += 1;
            }
            return Ok(n);
        };
        let mut n = 0u64;
        let mut ids: Vec<Vec<u8>> = Vec::with_capacity(COUNT_BATCH);
        loop {
            ids.clear();
            while ids.len() < COUNT_BATCH {
                self.check_stop()?;
                let Feed::Ix(f) = &mut self.feed else {
                    unreachable!("checked above")
                };
                let Some(e) = f.next_entry(&mut self.keys, &self.snap)? else {
                    break;
                };
                if e.index.spec.clustering {
                    // The entry holds the document.
                    self.examined += 1;
                    let m = self.matcher.as_deref();
                    n += u64::from(stored_matches(self.coll.ns(), m, &fields, &e.value)?);
                    continue;
                }
                ids.push(e.key[e.id_at..].to_vec());
            }
            if ids.is_empty() {
                return Ok(n);
            }
            ids.sort_unstable();
            let refs: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            let (ns, matcher) = (self.coll.ns(), self.matcher.as_deref());
            let (mut examined, mut bad) = (0u64, None);
            self.coll
                .get_raw_sorted_at(&refs, &self.snap, &mut |_, v| {
                    let Some(v) = v else { return };
                    examined += 1;
                    match stored_matches(ns, matcher, &fields, v) {
                        Ok(hit) => n += u64::from(hit),
                        Err(e) => bad = bad.take().or(Some(e)),
                    }
                })?;
            self.examined += examined;
            if let Some(e) = bad {
                return Err(e);
            }
        }
    }

    /// Whether the matcher refuses the stored document `bytes` without decoding it
    /// ([`Matcher::matches_raw`]).
    fn refused_raw(&self, bytes: &[u8]) -> bool {
        self.matcher
            .as_ref()
            .is_some_and(|m| raw_verdict(m, bytes) == Some(false))
    }

    fn check_stop(&self) -> Result<()> {
        if self.stop.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(CollError::TimeLimit);
        }
        if self.stop.interrupted.is_some_and(|f| f()) {
            return Err(CollError::Interrupted);
        }
        Ok(())
    }
}

/// Whether the stored document `bytes` matches: from its bytes when the matcher can tell
/// ([`Matcher::matches_raw`]), else decoding only `fields` (all the matcher reads).
fn stored_matches(
    ns: &str,
    matcher: Option<&Matcher>,
    fields: &[String],
    bytes: &[u8],
) -> Result<bool> {
    let Some(m) = matcher else { return Ok(true) };
    if let Some(hit) = raw_verdict(m, bytes) {
        return Ok(hit);
    }
    Ok(m.matches(&decode_fields(ns, bytes, fields)?))
}

/// The matcher's answer for the stored document `bytes` from its bytes alone, if it has one
/// ([`Matcher::matches_raw`]).
fn raw_verdict(m: &Matcher, bytes: &[u8]) -> Option<bool> {
    bson::RawDocument::from_bytes(bytes)
        .ok()
        .and_then(|r| m.matches_raw(r))
}

/// An index entry as read: its index, key and value.
struct IxEntry {
    index: Arc<Index>,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Where the encoded `_id` starts in `key`.
    id_at: usize,
}

/// Index entries read in plan order, de-duplicated by `_id` (for a union, or a multikey
/// index).
struct IxFeed {
    scans: VecDeque<KeyScan>,
    cur: Option<(KeyScan, VecDeque<KeyRange>, Option<PartsCursor>)>,
    seen: Option<HashSet<Vec<u8>>>,
}

impl IxFeed {
    fn new(scans: Vec<KeyScan>) -> IxFeed {
        let dedup = scans.len() > 1 || scans.iter().any(|s| s.index.is_multikey());
        IxFeed {
            scans: scans.into(),
            cur: None,
            seen: dedup.then(HashSet::new),
        }
    }

    /// The next entry (the first for its `_id` when de-duplicating). Counts keys examined.
    fn next_entry(&mut self, keys: &mut u64, snap: &Snapshot) -> Result<Option<IxEntry>> {
        loop {
            if self.cur.is_none() {
                let Some(s) = self.scans.pop_front() else {
                    return Ok(None);
                };
                let mut r: VecDeque<KeyRange> = s.ranges.clone().into();
                if s.reverse {
                    r = r.into_iter().rev().collect();
                }
                self.cur = Some((s, r, None));
            }
            let Some((s, ranges, cursor)) = self.cur.as_mut() else {
                continue;
            };
            if cursor.is_none() {
                let Some((lo, hi)) = ranges.pop_front() else {
                    self.cur = None;
                    continue;
                };
                let mut c =
                    s.index
                        .parts()
                        .cursor(as_ref(&lo), as_ref(&hi), Some(snap.engine()), false);
                if s.reverse {
                    c.seek_last();
                }
                *cursor = Some(c);
            }
            let Some(c) = cursor.as_mut() else { continue };
            let next = if s.reverse { c.prev() } else { c.next() };
            let Some((k, v)) = next? else {
                *cursor = None;
                continue;
            };
            *keys += 1;
            let Some(id) = s.index.entry_id_key(&k) else {
                continue;
            };
            let id_at = k.len() - id.len();
            if let Some(seen) = &mut self.seen {
                if !seen.insert(id.to_vec()) {
                    continue;
                }
            }
            return Ok(Some(IxEntry {
                index: s.index.clone(),
                key: k,
                value: v,
                id_at,
            }));
        }
    }
}
