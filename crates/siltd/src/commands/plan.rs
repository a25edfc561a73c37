//! Choosing how to read a collection for a filter, and the streams that read it.
//!
//! Until secondary indexes exist (issue 4) there are two access paths: the `_id` tree read
//! at points or over a range when the filter constrains `_id`, and a full scan otherwise. The
//! filter's matcher is always applied to what the access path yields, so a path only has to
//! return a superset of the matching documents.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document};
use silt_bson::compare::cmp_values;
use silt_collection::{id_key, Collection, DocCursor};
use silt_query::matcher::Matcher;
use silt_query::projection::Projection;
use silt_query::{QResult, QueryError};

use crate::cursors::DocSource;
use crate::state::coll_err;

/// How documents are found.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Access {
    /// Read these `_id`s.
    Points(Vec<Bson>),
    /// Scan `_id` order between these values.
    IdRange(Bound<Bson>, Bound<Bson>),
    /// Read everything.
    FullScan,
}

fn is_plain(v: &Bson) -> bool {
    !matches!(
        v,
        Bson::Document(_)
            | Bson::Array(_)
            | Bson::RegularExpression(_)
            | Bson::Null
            | Bson::Undefined
    )
}

/// Derive the access path from a filter's `_id` predicate.
pub fn access_for(filter: &Document) -> Access {
    let Some(v) = filter.get("_id") else {
        return Access::FullScan;
    };
    if is_plain(v) {
        return Access::Points(vec![v.clone()]);
    }
    let Bson::Document(ops) = v else {
        return Access::FullScan;
    };
    if ops.keys().any(|k| !k.starts_with('$')) {
        // An embedded-document _id compared whole.
        return Access::Points(vec![v.clone()]);
    }
    let mut lo: Bound<Bson> = Bound::Unbounded;
    let mut hi: Bound<Bson> = Bound::Unbounded;
    for (op, arg) in ops {
        match op.as_str() {
            "$eq" if is_plain(arg) || matches!(arg, Bson::Document(_)) => {
                return Access::Points(vec![arg.clone()])
            }
            "$in" => {
                if let Bson::Array(a) = arg {
                    if a.iter()
                        .all(|x| is_plain(x) || matches!(x, Bson::Document(_)))
                    {
                        let mut pts = a.clone();
                        pts.sort_by(cmp_values);
                        pts.dedup_by(|a, b| cmp_values(a, b) == Ordering::Equal);
                        return Access::Points(pts);
                    }
                }
                return Access::FullScan;
            }
            "$gt" if is_plain(arg) => lo = Bound::Excluded(arg.clone()),
            "$gte" if is_plain(arg) => lo = Bound::Included(arg.clone()),
            "$lt" if is_plain(arg) => hi = Bound::Excluded(arg.clone()),
            "$lte" if is_plain(arg) => hi = Bound::Included(arg.clone()),
            _ => {}
        }
    }
    if matches!((&lo, &hi), (Bound::Unbounded, Bound::Unbounded)) {
        Access::FullScan
    } else {
        Access::IdRange(lo, hi)
    }
}

fn enc_bound(b: &Bound<Bson>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(v) => Bound::Included(id_key(v)),
        Bound::Excluded(v) => Bound::Excluded(id_key(v)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

enum Feed {
    Points(VecDeque<Bson>),
    Scan(DocCursor),
}

/// Documents of one collection that match a filter, each with its primary key.
pub struct MatchSource {
    coll: Arc<Collection>,
    feed: Feed,
    matcher: Option<Arc<Matcher>>,
    deadline: Option<Instant>,
    /// Documents examined, for explain and slow-operation logs.
    pub examined: u64,
}

impl MatchSource {
    pub fn new(
        coll: Arc<Collection>,
        filter: &Document,
        matcher: Option<Arc<Matcher>>,
        deadline: Option<Instant>,
    ) -> MatchSource {
        let feed = match access_for(filter) {
            Access::Points(p) => Feed::Points(p.into()),
            Access::IdRange(lo, hi) => {
                let (lo, hi) = (enc_bound(&lo), enc_bound(&hi));
                Feed::Scan(coll.scan(as_ref(&lo), as_ref(&hi)))
            }
            Access::FullScan => Feed::Scan(coll.scan(Bound::Unbounded, Bound::Unbounded)),
        };
        MatchSource {
            coll,
            feed,
            matcher,
            deadline,
            examined: 0,
        }
    }

    /// The next matching document and its key.
    pub fn next_match(&mut self) -> QResult<Option<(Vec<u8>, Document)>> {
        loop {
            if let Some(d) = self.deadline {
                if Instant::now() >= d {
                    return Err(QueryError::max_time_ms_expired(
                        "operation exceeded time limit",
                    ));
                }
            }
            let next = match &mut self.feed {
                Feed::Points(p) => match p.pop_front() {
                    Some(id) => {
                        let k = id_key(&id);
                        self.coll.get_by_key(&k).map_err(coll_err)?.map(|d| (k, d))
                    }
                    None => return Ok(None),
                },
                Feed::Scan(c) => match c.next_doc().map_err(coll_err)? {
                    Some(x) => Some(x),
                    None => return Ok(None),
                },
            };
            let Some((k, d)) = next else { continue };
            self.examined += 1;
            if self.matcher.as_ref().is_none_or(|m| m.matches(&d)) {
                return Ok(Some((k, d)));
            }
        }
    }
}

impl DocSource for MatchSource {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        Ok(self.next_match()?.map(|(_, d)| d))
    }
}

/// Skip, limit and projection over another source.
pub struct Shaped {
    pub inner: Box<dyn DocSource>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub returned: u64,
    pub projection: Option<Projection>,
    pub matcher: Option<Arc<Matcher>>,
}

impl DocSource for Shaped {
    fn next_doc(&mut self) -> QResult<Option<Document>> {
        while self.skip > 0 {
            if self.inner.next_doc()?.is_none() {
                return Ok(None);
            }
            self.skip -= 1;
        }
        if self.limit.is_some_and(|l| self.returned >= l) {
            return Ok(None);
        }
        let Some(d) = self.inner.next_doc()? else {
            return Ok(None);
        };
        self.returned += 1;
        match &self.projection {
            Some(p) => Ok(Some(p.apply(&d, self.matcher.as_deref())?)),
            None => Ok(Some(d)),
        }
    }
}

/// A parsed sort specification.
#[derive(Debug, Clone)]
pub struct SortSpec(pub Vec<(String, bool)>);

impl SortSpec {
    pub fn parse(spec: &Document) -> QResult<SortSpec> {
        let mut keys = Vec::new();
        for (k, v) in spec {
            if k.is_empty() {
                return Err(QueryError::bad_value("empty sort field name"));
            }
            let asc = match v {
                Bson::Int32(1) | Bson::Int64(1) => true,
                Bson::Int32(-1) | Bson::Int64(-1) => false,
                Bson::Double(d) if *d == 1.0 => true,
                Bson::Double(d) if *d == -1.0 => false,
                Bson::Document(m) if m.contains_key("$meta") => {
                    return Err(QueryError::bad_value(
                        "$meta sort is not supported (no text or search indexes)",
                    ))
                }
                _ => {
                    return Err(QueryError::located(
                        15975,
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ))
                }
            };
            keys.push((k.clone(), asc));
        }
        Ok(SortSpec(keys))
    }

    /// Compare two documents in this order.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        for (path, asc) in &self.0 {
            let va = sort_value(a, path, *asc);
            let vb = sort_value(b, path, *asc);
            let o = cmp_values(&va, &vb);
            let o = if *asc { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Sort documents; precomputes each document's keys once.
    pub fn sort(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut keyed: Vec<(Vec<Bson>, Document)> = docs
            .into_iter()
            .map(|d| {
                let ks = self
                    .0
                    .iter()
                    .map(|(p, asc)| sort_value(&d, p, *asc))
                    .collect();
                (ks, d)
            })
            .collect();
        keyed.sort_by(|(ka, _), (kb, _)| {
            for ((x, y), (_, asc)) in ka.iter().zip(kb.iter()).zip(self.0.iter()) {
                let o = cmp_values(x, y);
                let o = if *asc { o } else { o.reverse() };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
        keyed.into_iter().map(|(_, d)| d).collect()
    }
}

/// Collect every value a sort on `path` considers (arrays fan out).
fn collect_values(v: &Bson, parts: &[&str], out: &mut Vec<Bson>) {
    if parts.is_empty() {
        match v {
            Bson::Array(a) if a.is_empty() => out.push(Bson::Undefined),
            Bson::Array(a) => out.extend(a.iter().cloned()),
            other => out.push(other.clone()),
        }
        return;
    }
    match v {
        Bson::Document(d) => match d.get(parts[0]) {
            Some(x) => collect_values(x, &parts[1..], out),
            None => out.push(Bson::Null),
        },
        Bson::Array(a) => {
            if let Ok(i) = parts[0].parse::<usize>() {
                if let Some(x) = a.get(i) {
                    collect_values(x, &parts[1..], out);
                    return;
                }
            }
            for x in a {
                if let Bson::Document(_) = x {
                    collect_values(x, parts, out);
                }
            }
            if out.is_empty() {
                out.push(Bson::Null);
            }
        }
        _ => out.push(Bson::Null),
    }
}

/// The value a document sorts by on `path`: the smallest element of arrays when ascending,
/// the largest when descending; missing is null.
pub fn sort_value(doc: &Document, path: &str, asc: bool) -> Bson {
    let parts: Vec<&str> = path.split('.').collect();
    let mut vals = Vec::new();
    match doc.get(parts[0]) {
        Some(v) => collect_values(v, &parts[1..], &mut vals),
        None => return Bson::Null,
    }
    // An empty array sorts before null, as in MongoDB (undefined stands in for it).
    let pick = if asc {
        vals.into_iter().min_by(cmp_values)
    } else {
        vals.into_iter().max_by(cmp_values)
    };
    match pick {
        Some(Bson::Undefined) => Bson::MinKey,
        Some(v) => v,
        None => Bson::Null,
    }
}
