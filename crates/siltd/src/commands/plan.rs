//! Choosing how to read a collection for a filter, and the streams that read it.
//!
//! Until secondary indexes exist (issue 4) there are two access paths: the `_id` tree read
//! at points or over a range when the filter constrains `_id`, and a full scan otherwise. The
//! filter's matcher is always applied to what the access path yields, so a path only has to
//! return a superset of the matching documents.

use std::cmp::Ordering;
use std::collections::{HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use bson::{doc, Bson, Document};
use silt_bson::compare::cmp_values;
use silt_bson::keyenc;
use silt_collection::index::{path_covers, prefix_end};
use silt_collection::{id_key, Collection, DocCursor, Index};
use silt_query::matcher::{CmpOp, LeafOp, MatchExpr, Matcher};
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
    feed: Feed,
    matcher: Option<Arc<Matcher>>,
    deadline: Option<Instant>,
    covered: Option<Covered>,
    /// Documents examined (read from the primary tree or a clustering index), for explain
    /// and slow-operation logs.
    pub examined: u64,
    /// Index keys examined.
    pub keys: u64,
}

impl MatchSource {
    /// Plan the filter (indexes included when a matcher is given) and read.
    pub fn new(
        coll: Arc<Collection>,
        filter: &Document,
        matcher: Option<Arc<Matcher>>,
        deadline: Option<Instant>,
    ) -> MatchSource {
        let choice = match &matcher {
            Some(m) => choose(&coll, filter, m, None, None, None).ok(),
            None => None,
        };
        let choice = choice.unwrap_or(Choice {
            plan: Plan::Primary(access_for(filter)),
            sorted: false,
            covered: None,
        });
        MatchSource::with_plan(coll, &choice.plan, matcher, deadline)
    }

    /// Read along a chosen plan, covered when the choice is.
    pub fn for_choice(
        coll: Arc<Collection>,
        choice: &Choice,
        matcher: Option<Arc<Matcher>>,
        deadline: Option<Instant>,
    ) -> MatchSource {
        let mut src = MatchSource::with_plan(coll, &choice.plan, matcher, deadline);
        src.covered = choice.covered;
        src
    }

    /// Read along a chosen plan (never covered: every document is read whole).
    pub fn with_plan(
        coll: Arc<Collection>,
        plan: &Plan,
        matcher: Option<Arc<Matcher>>,
        deadline: Option<Instant>,
    ) -> MatchSource {
        let feed = match plan {
            Plan::Primary(Access::Points(p)) => Feed::Points(p.clone().into()),
            Plan::Primary(Access::IdRange(lo, hi)) => {
                let (lo, hi) = (enc_bound(lo), enc_bound(hi));
                Feed::Scan(coll.scan(as_ref(&lo), as_ref(&hi)))
            }
            Plan::Primary(Access::FullScan) => {
                Feed::Scan(coll.scan(Bound::Unbounded, Bound::Unbounded))
            }
            Plan::Index(scans) => Feed::Ix(IxFeed::new(scans.clone())),
        };
        MatchSource {
            coll,
            feed,
            matcher,
            deadline,
            covered: None,
            examined: 0,
            keys: 0,
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
            crate::ops::check_interrupt()?;
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
                Feed::Ix(f) => {
                    let Some(e) = f.next_entry(&mut self.keys)? else {
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
                    if e.index.spec.clustering {
                        Some((id, self.coll.decode(&e.value).map_err(coll_err)?))
                    } else {
                        self.coll
                            .get_by_key(&id)
                            .map_err(coll_err)?
                            .map(|d| (id, d))
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

// ---- secondary-index planning ----

/// One end of a component interval, in the component's encoded (direction-adjusted) bytes:
/// just before every key starting with the bytes, or just after all of them.
#[derive(Debug, Clone)]
enum Pos {
    Before(Vec<u8>),
    After(Vec<u8>),
}

/// A value-level bound of a range predicate, kept inside the value's type bracket.
#[derive(Debug, Clone)]
enum VBound {
    Incl(Bson),
    Excl(Bson),
    /// The start (lower) or end (upper) of the type bracket with this key tag.
    Type(u8),
}

/// What the filter says about one index field.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
enum FieldPred {
    Points(Vec<Bson>),
    Range(VBound, VBound),
}

fn vb_pos_asc(b: &VBound, lower: bool) -> Pos {
    match (b, lower) {
        (VBound::Incl(v), true) => Pos::Before(keyenc::encode(v)),
        (VBound::Excl(v), true) => Pos::After(keyenc::encode(v)),
        (VBound::Incl(v), false) => Pos::After(keyenc::encode(v)),
        (VBound::Excl(v), false) => Pos::Before(keyenc::encode(v)),
        (VBound::Type(t), true) => Pos::Before(vec![*t]),
        (VBound::Type(t), false) => Pos::After(vec![*t]),
    }
}

fn desc_bytes(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    keyenc::encode_value_desc(v, &mut out);
    out
}

/// The interval in encoded bytes of one field predicate's range `[lo, hi]`.
fn interval(lo: &VBound, hi: &VBound, desc: bool) -> (Pos, Pos) {
    if !desc {
        return (vb_pos_asc(lo, true), vb_pos_asc(hi, false));
    }
    // Descending: the value range's upper end is the byte range's lower end.
    let l = match hi {
        VBound::Incl(v) => Pos::Before(desc_bytes(v)),
        VBound::Excl(v) => Pos::After(desc_bytes(v)),
        VBound::Type(t) => Pos::Before(vec![!*t]),
    };
    let h = match lo {
        VBound::Incl(v) => Pos::After(desc_bytes(v)),
        VBound::Excl(v) => Pos::Before(desc_bytes(v)),
        VBound::Type(t) => Pos::After(vec![!*t]),
    };
    (l, h)
}

fn cat(p: &[u8], s: &[u8]) -> Vec<u8> {
    let mut v = p.to_vec();
    v.extend_from_slice(s);
    v
}

type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

fn key_range(prefix: &[u8], iv: Option<&(Pos, Pos)>) -> Option<KeyRange> {
    let Some((l, h)) = iv else {
        let lo = if prefix.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(prefix.to_vec())
        };
        let hi = match prefix_end(prefix) {
            Some(e) if !prefix.is_empty() => Bound::Excluded(e),
            _ => Bound::Unbounded,
        };
        return Some((lo, hi));
    };
    let lo = match l {
        Pos::Before(s) => Bound::Included(cat(prefix, s)),
        Pos::After(s) => Bound::Included(prefix_end(&cat(prefix, s))?),
    };
    let hi = match h {
        Pos::Before(s) => Bound::Excluded(cat(prefix, s)),
        Pos::After(s) => match prefix_end(&cat(prefix, s)) {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        },
    };
    Some((lo, hi))
}

/// A value an equality bound can use: the index holds exactly the keys equal to it.
fn point_ok(v: &Bson) -> bool {
    is_plain(v) || matches!(v, Bson::Document(_))
}

/// The leaves of the top-level AND, nested ANDs flattened.
fn conjuncts<'a>(e: &'a MatchExpr, out: &mut Vec<&'a MatchExpr>) {
    match e {
        MatchExpr::And(kids) => {
            for k in kids {
                conjuncts(k, out);
            }
        }
        other => out.push(other),
    }
}

/// The predicate the conjunction puts on `path` (for a multikey index, one operator only:
/// intersecting two bounds on an array field would lose documents).
fn field_pred(leaves: &[&MatchExpr], path: &str, multikey: bool) -> Option<FieldPred> {
    // A numeric component ("a.0") means positions in arrays, which keys and the matcher
    // treat differently enough that such fields never get bounds.
    if path
        .split('.')
        .any(|p| silt_bson::path::array_index(p).is_some())
    {
        return None;
    }
    let mut points: Option<Vec<Bson>> = None;
    let mut lo: Option<VBound> = None;
    let mut hi: Option<VBound> = None;
    let mut tag: Option<u8> = None;
    for l in leaves {
        let MatchExpr::Leaf { path: p, op } = l else {
            continue;
        };
        if p.as_str() != path {
            continue;
        }
        match op {
            LeafOp::Cmp(CmpOp::Eq, v) if point_ok(v) && points.is_none() => {
                points = Some(vec![v.clone()]);
            }
            LeafOp::Cmp(CmpOp::Eq, _) => {}
            LeafOp::In(list)
                if list.regexes.is_empty()
                    && !list.has_null
                    && !list.values.is_empty()
                    && list.values.iter().all(point_ok)
                    && points.is_none() =>
            {
                points = Some(list.values.clone());
            }
            LeafOp::In(_) => {}
            LeafOp::Cmp(op, v)
                if (is_plain(v) || matches!(v, Bson::Document(_)))
                    && !matches!(v, Bson::MinKey | Bson::MaxKey) =>
            {
                let t = keyenc::tag(v);
                if tag.is_some_and(|x| x != t) || (multikey && (lo.is_some() || hi.is_some())) {
                    continue;
                }
                tag = Some(t);
                match op {
                    CmpOp::Gt => lo = tighter(lo, VBound::Excl(v.clone()), true),
                    CmpOp::Gte => lo = tighter(lo, VBound::Incl(v.clone()), true),
                    CmpOp::Lt => hi = tighter(hi, VBound::Excl(v.clone()), false),
                    CmpOp::Lte => hi = tighter(hi, VBound::Incl(v.clone()), false),
                    CmpOp::Eq => {}
                }
            }
            _ => {}
        }
    }
    if let Some(p) = points {
        return Some(FieldPred::Points(p));
    }
    let t = tag?;
    Some(FieldPred::Range(
        lo.unwrap_or(VBound::Type(t)),
        hi.unwrap_or(VBound::Type(t)),
    ))
}

fn tighter(cur: Option<VBound>, new: VBound, lower: bool) -> Option<VBound> {
    let Some(c) = cur else { return Some(new) };
    let val = |b: &VBound| match b {
        VBound::Incl(v) | VBound::Excl(v) => Some(v.clone()),
        VBound::Type(_) => None,
    };
    let (Some(a), Some(b)) = (val(&c), val(&new)) else {
        return Some(c);
    };
    let o = cmp_values(&b, &a);
    let take_new = match o {
        Ordering::Equal => matches!(new, VBound::Excl(_)),
        Ordering::Greater => lower,
        Ordering::Less => !lower,
    };
    Some(if take_new { new } else { c })
}

/// One scan of a secondary index over byte ranges.
#[derive(Debug, Clone)]
pub struct IxScan {
    pub index: Arc<Index>,
    /// Key ranges in index order (scanned last to first when `reverse`).
    pub ranges: Vec<KeyRange>,
    pub reverse: bool,
    /// For explain: field -> interval strings.
    pub bounds: Document,
    pub n_eq: usize,
    pub has_range: bool,
}

impl IxScan {
    fn explain(&self) -> Document {
        let s = &self.index.spec;
        doc! {
            "stage": "IXSCAN",
            "keyPattern": s.key_pattern.clone(),
            "indexName": s.name.clone(),
            "isMultiKey": self.index.is_multikey(),
            "isUnique": s.unique,
            "isSparse": s.sparse,
            "isPartial": s.partial.is_some(),
            "isClustering": s.clustering,
            "indexVersion": 2,
            "direction": if self.reverse { "backward" } else { "forward" },
            "indexBounds": self.bounds.clone(),
        }
    }
}

fn fmt_vb(b: &VBound, lower: bool) -> (bool, String) {
    match b {
        VBound::Incl(v) => (true, v.to_string()),
        VBound::Excl(v) => (false, v.to_string()),
        VBound::Type(t) => {
            let num = keyenc::tag(&Bson::Int32(0));
            let s = if *t == num {
                if lower {
                    "-inf.0".to_string()
                } else {
                    "inf.0".to_string()
                }
            } else if lower {
                "MinKey(type)".to_string()
            } else {
                "MaxKey(type)".to_string()
            };
            (true, s)
        }
    }
}

fn fmt_pred(p: Option<&FieldPred>, desc: bool) -> Vec<Bson> {
    match p {
        None => vec![Bson::String(if desc {
            "[MaxKey, MinKey]".into()
        } else {
            "[MinKey, MaxKey]".into()
        })],
        Some(FieldPred::Points(vs)) => vs
            .iter()
            .map(|v| Bson::String(format!("[{v}, {v}]")))
            .collect(),
        Some(FieldPred::Range(lo, hi)) => {
            let (li, ls) = fmt_vb(lo, true);
            let (hi_i, hs) = fmt_vb(hi, false);
            let s = if desc {
                format!(
                    "{}{hs}, {ls}{}",
                    if hi_i { "[" } else { "(" },
                    if li { "]" } else { ")" }
                )
            } else {
                format!(
                    "{}{ls}, {hs}{}",
                    if li { "[" } else { "(" },
                    if hi_i { "]" } else { ")" }
                )
            };
            vec![Bson::String(s)]
        }
    }
}

/// Most ranges a product of `$in` lists may expand to.
const MAX_RANGES: usize = 4096;

/// Bounds for `ix` from the conjunction `leaves`; `None` if no field is constrained (unless
/// `force`, for a hint or a sort: then a full index scan).
fn scan_for(ix: &Arc<Index>, leaves: &[&MatchExpr], force: bool) -> Option<IxScan> {
    let mk = ix.is_multikey();
    let mut preds: Vec<Option<FieldPred>> = Vec::new();
    let mut n_eq = 0;
    let mut has_range = false;
    for (path, _) in &ix.spec.fields {
        if has_range || preds.len() > n_eq {
            preds.push(None);
            continue;
        }
        match field_pred(leaves, path, mk) {
            Some(FieldPred::Points(p)) => {
                n_eq += 1;
                preds.push(Some(FieldPred::Points(p)));
            }
            Some(r) => {
                has_range = true;
                preds.push(Some(r));
            }
            None => preds.push(None),
        }
    }
    if n_eq == 0 && !has_range && !force {
        return None;
    }
    // Expand the equality prefixes.
    let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
    for (i, p) in preds.iter().enumerate().take(n_eq) {
        let Some(FieldPred::Points(vs)) = p else {
            break;
        };
        let desc = ix.spec.fields[i].1;
        if prefixes.len() * vs.len() > MAX_RANGES {
            // Too many: keep the prefix so far, the matcher does the rest.
            n_eq = i;
            break;
        }
        let mut next = Vec::with_capacity(prefixes.len() * vs.len());
        for pre in &prefixes {
            for v in vs {
                let mut k = pre.clone();
                if desc {
                    keyenc::encode_value_desc(v, &mut k);
                } else {
                    keyenc::encode_value(v, &mut k);
                }
                next.push(k);
            }
        }
        prefixes = next;
    }
    let iv = match preds.get(n_eq) {
        Some(Some(FieldPred::Range(lo, hi))) if n_eq < ix.spec.fields.len() => {
            Some(interval(lo, hi, ix.spec.fields[n_eq].1))
        }
        _ => None,
    };
    let has_range = iv.is_some();
    let mut ranges: Vec<KeyRange> = prefixes
        .iter()
        .filter_map(|p| key_range(p, iv.as_ref()))
        .collect();
    ranges.sort_by(|a, b| bound_cmp(&a.0, &b.0));
    let mut bounds = Document::new();
    for (i, (path, desc)) in ix.spec.fields.iter().enumerate() {
        let p = if i < n_eq || (i == n_eq && has_range) {
            preds[i].as_ref()
        } else {
            None
        };
        bounds.insert(path.clone(), fmt_pred(p, *desc));
    }
    Some(IxScan {
        index: ix.clone(),
        ranges,
        reverse: false,
        bounds,
        n_eq,
        has_range,
    })
}

fn bound_cmp(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y)
        }
    }
}

/// Whether a sparse or partial index holds every document the conjunction can match.
fn complete_for(ix: &Index, filter: &Document, scan: &IxScan) -> bool {
    if let Some((pfe, _)) = &ix.spec.partial {
        // The query must repeat every top-level predicate of the partial filter verbatim.
        return pfe.iter().all(|(k, v)| filter.get(k) == Some(v));
    }
    if ix.spec.sparse {
        // A bound on any field excludes documents missing it (null and undefined are never
        // bound values).
        return scan.n_eq > 0 || scan.has_range;
    }
    true
}

/// Whether `scan` yields documents in `sort` order (forward or backward).
fn sort_direction(scan: &IxScan, sort: &SortSpec) -> Option<bool> {
    if scan.index.is_multikey() || sort.0.is_empty() {
        return None;
    }
    let fields = &scan.index.spec.fields;
    // Single-point equality fields before the sort fields may be skipped.
    let mut single = 0;
    for (i, b) in scan.bounds.values().enumerate() {
        if i >= scan.n_eq {
            break;
        }
        match b {
            Bson::Array(a) if a.len() == 1 => single += 1,
            _ => break,
        }
    }
    'start: for k in 0..=single {
        if k + sort.0.len() > fields.len() {
            break;
        }
        let mut dir: Option<bool> = None;
        for (j, (path, asc)) in sort.0.iter().enumerate() {
            let (f, desc) = &fields[k + j];
            if f != path {
                continue 'start;
            }
            let same = *asc != *desc;
            if dir.is_some_and(|d| d != same) {
                continue 'start;
            }
            dir = Some(same);
        }
        return dir.map(|same| !same);
    }
    None
}

/// The chosen access path for a query.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Plan {
    /// `_id` points, `_id` range or full scan.
    Primary(Access),
    /// One index scan, or a union of several (`$or`), fetching by `_id`.
    Index(Vec<IxScan>),
}

/// A plan, whether it already yields the requested sort order, and whether it is covered.
#[derive(Debug, Clone)]
pub struct Choice {
    pub plan: Plan,
    pub sorted: bool,
    pub covered: Option<Covered>,
}

/// A plan answered from index entries alone (one scan of an index that
/// [`covers`] what the query reads).
#[derive(Debug, Clone, Copy)]
pub struct Covered {
    /// The bounds answer the whole filter: no predicate is re-checked.
    pub exact: bool,
}

/// What a query reads of each document: the paths of its filter and sort, and `output`, the
/// paths its result is made of (a find's projection, `[]` for a count, a distinct's key).
/// `None` when it needs whole documents: no `output` (a find without a plain inclusion
/// projection), or a filter with `$expr`.
pub fn needed_paths(
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    output: Option<Vec<String>>,
) -> Option<Vec<String>> {
    fn filter_paths(e: &MatchExpr, out: &mut Vec<String>) -> bool {
        match e {
            MatchExpr::And(kids) | MatchExpr::Or(kids) | MatchExpr::Nor(kids) => {
                kids.iter().all(|k| filter_paths(k, out))
            }
            MatchExpr::Not(k) => filter_paths(k, out),
            MatchExpr::AlwaysTrue | MatchExpr::AlwaysFalse => true,
            MatchExpr::Expr(_) => false,
            // `$elemMatch` reads below its path, which the path's value holds.
            MatchExpr::Leaf { path, .. } => {
                out.push(path.as_str().to_string());
                !path.as_str().is_empty()
            }
        }
    }
    let mut out = output?;
    if !filter_paths(matcher.expr(), &mut out) {
        return None;
    }
    if let Some(so) = sort {
        out.extend(so.0.iter().map(|(p, _)| p.clone()));
    }
    Some(out)
}

/// Whether `ix`'s entries hold every path in `needs` exactly (`Index::covered_doc`): the index
/// carries shapes, is not multikey (an entry would hold one element of an array), has no
/// numeric path component (`a.0` keys an array element), and each path is `_id` or an
/// indexed field, or lies inside one. Sparse and partial indexes are fine: they are chosen
/// only when they hold every matching document (or by hint), and covering changes how each
/// entry's document is produced, not which entries are read.
pub fn covers(ix: &Index, needs: &[String]) -> bool {
    let fields = &ix.spec.fields;
    ix.is_coverable()
        && !ix.is_multikey()
        && !fields.iter().any(|(f, _)| {
            f.split('.')
                .any(|p| silt_bson::path::array_index(p).is_some())
        })
        && needs
            .iter()
            .all(|p| path_covers("_id", p) || fields.iter().any(|(f, _)| path_covers(f, p)))
}

fn score(
    s: &IxScan,
    sorted: bool,
    needs: Option<&[String]>,
) -> (usize, bool, bool, bool, bool, std::cmp::Reverse<usize>) {
    (
        s.n_eq,
        s.has_range,
        s.index.spec.unique,
        sorted,
        needs.is_some_and(|n| covers(&s.index, n)),
        std::cmp::Reverse(s.index.spec.fields.len()),
    )
}

fn hinted_index(coll: &Collection, hint: &Bson) -> QResult<Option<Option<Arc<Index>>>> {
    // Some(None): the _id index or $natural; Some(Some(ix)): that index; None: no hint.
    let bad = || QueryError::bad_value("hint provided does not correspond to an existing index");
    match hint {
        Bson::Null => Ok(None),
        Bson::String(n) if n.is_empty() => Ok(None),
        Bson::String(n) if n == "_id_" => Ok(Some(None)),
        Bson::String(n) => coll.index(n).map(|i| Some(Some(i))).ok_or_else(bad),
        Bson::Document(k) if k.is_empty() => Ok(None),
        Bson::Document(k) if k.contains_key("$natural") => Ok(Some(None)),
        Bson::Document(k) if k.len() == 1 && k.contains_key("_id") => Ok(Some(None)),
        Bson::Document(k) => {
            let want = silt_collection::IndexSpec::parse(&doc! { "key": k.clone(), "name": "h" })
                .map_err(|_| bad())?;
            coll.indexes()
                .into_iter()
                .find(|i| i.spec.same_key(&want))
                .map(|i| Some(Some(i)))
                .ok_or_else(bad)
        }
        _ => Err(bad()),
    }
}

/// Choose the access path. Rules (documented in ARCHITECTURE.md): a hint wins; `_id`
/// equality or `$in` is IDHACK; otherwise among indexes with bounds the best is the one with
/// the most equality fields, then a range, then unique, then one that yields the sort, then
/// one that covers the query, then the fewest fields; an `_id` range beats an index with no
/// equality field; a top-level `$or` whose every branch has an index becomes a union; with no
/// bounds at all an index that yields the sort is scanned whole; else a full scan.
///
/// `needs` is what the query reads ([`needed_paths`]); a single index scan that [`covers`]
/// it makes a covered choice.
pub fn choose(
    coll: &Collection,
    filter: &Document,
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    hint: Option<&Bson>,
    needs: Option<&[String]>,
) -> QResult<Choice> {
    let mut choice = choose_plan(coll, filter, matcher, sort, hint, needs)?;
    match &choice.plan {
        Plan::Primary(Access::FullScan) => {}
        Plan::Primary(_) => coll.id_accesses().record(),
        Plan::Index(scans) => scans.iter().for_each(|s| s.index.accesses.record()),
    }
    if let (Plan::Index(scans), Some(needs)) = (&choice.plan, needs) {
        if let [scan] = scans.as_slice() {
            if covers(&scan.index, needs) {
                let mut leaves = Vec::new();
                conjuncts(matcher.expr(), &mut leaves);
                choice.covered = Some(Covered {
                    exact: bounds_are_exact(scan, &leaves),
                });
            }
        }
    }
    Ok(choice)
}

fn choose_plan(
    coll: &Collection,
    filter: &Document,
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    hint: Option<&Bson>,
    needs: Option<&[String]>,
) -> QResult<Choice> {
    let mut leaves = Vec::new();
    conjuncts(matcher.expr(), &mut leaves);
    let finish = |mut s: IxScan| {
        let dir = sort.and_then(|so| sort_direction(&s, so));
        s.reverse = dir.unwrap_or(false);
        Choice {
            sorted: dir.is_some(),
            plan: Plan::Index(vec![s]),
            covered: None,
        }
    };
    if let Some(h) = hint {
        match hinted_index(coll, h)? {
            Some(None) => {
                let natural = matches!(h, Bson::Document(k) if k.contains_key("$natural"));
                let a = if natural {
                    Access::FullScan
                } else {
                    access_for(filter)
                };
                return Ok(Choice {
                    plan: Plan::Primary(a),
                    sorted: false,
                    covered: None,
                });
            }
            Some(Some(ix)) => {
                let s = scan_for(&ix, &leaves, true).expect("forced scan");
                return Ok(finish(s));
            }
            None => {}
        }
    }
    let primary = access_for(filter);
    if matches!(primary, Access::Points(_)) {
        return Ok(Choice {
            plan: Plan::Primary(primary),
            sorted: false,
            covered: None,
        });
    }
    let idxs = coll.indexes();
    let mut best: Option<(IxScan, bool)> = None;
    for ix in &idxs {
        let Some(mut s) = scan_for(ix, &leaves, false) else {
            continue;
        };
        if !complete_for(ix, filter, &s) {
            continue;
        }
        let dir = sort.and_then(|so| sort_direction(&s, so));
        s.reverse = dir.unwrap_or(false);
        let sorted = dir.is_some();
        if best
            .as_ref()
            .is_none_or(|(b, bs)| score(&s, sorted, needs) > score(b, *bs, needs))
        {
            best = Some((s, sorted));
        }
    }
    if let Some((s, sorted)) = best {
        if s.n_eq > 0 || !matches!(primary, Access::IdRange(..)) {
            return Ok(Choice {
                plan: Plan::Index(vec![s]),
                sorted,
                covered: None,
            });
        }
    }
    if !matches!(primary, Access::FullScan) {
        return Ok(Choice {
            plan: Plan::Primary(primary),
            sorted: false,
            covered: None,
        });
    }
    // $or: a union when every branch has an index.
    if let [MatchExpr::Or(branches)] = leaves.as_slice() {
        let mut scans = Vec::new();
        for b in branches {
            let mut bl = Vec::new();
            conjuncts(b, &mut bl);
            let pick = idxs
                .iter()
                .filter(|ix| !ix.spec.sparse && ix.spec.partial.is_none())
                .filter_map(|ix| scan_for(ix, &bl, false))
                .max_by(|a, b| score(a, false, None).cmp(&score(b, false, None)));
            match pick {
                Some(s) => scans.push(s),
                None => {
                    scans.clear();
                    break;
                }
            }
        }
        if !scans.is_empty() {
            return Ok(Choice {
                plan: Plan::Index(scans),
                sorted: false,
                covered: None,
            });
        }
    }
    // No bounds: an index that yields the sort (one that covers the query first), scanned
    // whole.
    if let Some(so) = sort {
        let yielding = idxs
            .iter()
            .filter(|ix| !ix.spec.sparse && ix.spec.partial.is_none())
            .filter_map(|ix| scan_for(ix, &leaves, true))
            .filter(|s| sort_direction(s, so).is_some());
        let covering = |s: &IxScan| needs.is_some_and(|n| covers(&s.index, n));
        // `max_by_key` keeps the last of equals: reversed, that is the first index.
        if let Some(s) = yielding.rev().max_by_key(covering) {
            return Ok(finish(s));
        }
    }
    Ok(Choice {
        plan: Plan::Primary(Access::FullScan),
        sorted: false,
        covered: None,
    })
}

/// The `winningPlan` of explain for a choice, with MongoDB's stage names. A covered plan is
/// `PROJECTION_COVERED` over the `IXSCAN` (carrying the filter when the bounds do not answer
/// it), with no `FETCH`. A scan of a clustering index, whose entries hold the documents, is
/// `CLUSTERED_IXSCAN` (as MongoDB names a scan of a clustered collection), with no `FETCH`
/// either. Other projections are `PROJECTION_SIMPLE` (top-level fields only) or
/// `PROJECTION_DEFAULT` on top.
pub fn explain_plan(
    choice: &Choice,
    filter: &Document,
    sort: Option<&SortSpec>,
    projection: Option<&Document>,
) -> Document {
    let stage = match &choice.plan {
        Plan::Primary(Access::Points(_)) => doc! { "stage": "IDHACK" },
        Plan::Primary(Access::IdRange(lo, hi)) => {
            let f = |b: &Bound<Bson>, l: bool| match b {
                Bound::Included(v) => format!("{}{v}", if l { "[" } else { "" }),
                Bound::Excluded(v) => format!("{}{v}", if l { "(" } else { "" }),
                Bound::Unbounded => {
                    if l {
                        "[MinKey".into()
                    } else {
                        "MaxKey".into()
                    }
                }
            };
            let close = match hi {
                Bound::Excluded(_) => ")",
                _ => "]",
            };
            doc! {
                "stage": "CLUSTERED_IXSCAN",
                "filter": filter.clone(),
                "direction": "forward",
                "indexName": "_id_",
                "keyPattern": { "_id": 1 },
                "indexBounds": { "_id": [format!("{}, {}{close}", f(lo, true), f(hi, false))] },
            }
        }
        Plan::Primary(Access::FullScan) => doc! {
            "stage": "COLLSCAN",
            "filter": filter.clone(),
            "direction": "forward",
        },
        Plan::Index(scans) => match scans.as_slice() {
            [scan] if choice.covered.is_some() => {
                let mut ix = scan.explain();
                if choice.covered.is_some_and(|c| !c.exact) {
                    ix.insert("filter", filter.clone());
                }
                ix
            }
            [scan] if scan.index.spec.clustering => {
                let mut ix = scan.explain();
                ix.insert("stage", "CLUSTERED_IXSCAN");
                ix.insert("filter", filter.clone());
                ix
            }
            [scan] => {
                doc! { "stage": "FETCH", "filter": filter.clone(), "inputStage": scan.explain() }
            }
            _ => doc! {
                "stage": "FETCH",
                "filter": filter.clone(),
                "inputStage": {
                    "stage": "OR",
                    "inputStages": scans.iter().map(|s| Bson::Document(s.explain())).collect::<Vec<_>>(),
                },
            },
        },
    };
    let stage = match sort {
        Some(so) if !choice.sorted => {
            let mut pat = Document::new();
            for (p, asc) in &so.0 {
                pat.insert(p.clone(), if *asc { 1 } else { -1 });
            }
            doc! { "stage": "SORT", "sortPattern": pat, "inputStage": stage }
        }
        _ => stage,
    };
    let Some(p) = projection else {
        return stage;
    };
    let name = if choice.covered.is_some() {
        "PROJECTION_COVERED"
    } else if p
        .iter()
        .all(|(k, v)| !k.contains('.') && !matches!(v, Bson::Document(_)))
    {
        "PROJECTION_SIMPLE"
    } else {
        "PROJECTION_DEFAULT"
    };
    doc! { "stage": name, "transformBy": p.clone(), "inputStage": stage }
}

/// An index entry as read: its index, key and value.
struct IxEntry {
    index: Arc<Index>,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Where the encoded `_id` starts in `key`.
    id_at: usize,
}

/// Index entries read in plan order, de-duplicated by `_id`, fetched.
struct IxFeed {
    scans: VecDeque<IxScan>,
    cur: Option<(IxScan, VecDeque<KeyRange>, Option<silt_storage::Cursor>)>,
    seen: Option<HashSet<Vec<u8>>>,
}

impl IxFeed {
    fn new(scans: Vec<IxScan>) -> IxFeed {
        let dedup = scans.len() > 1 || scans.iter().any(|s| s.index.is_multikey());
        IxFeed {
            scans: scans.into(),
            cur: None,
            seen: dedup.then(HashSet::new),
        }
    }

    /// The next entry (the first for its `_id` when de-duplicating). Counts keys examined.
    fn next_entry(&mut self, keys: &mut u64) -> QResult<Option<IxEntry>> {
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
                let mut c = s.index.dict().cursor(as_ref(&lo), as_ref(&hi));
                if s.reverse {
                    c.seek_last();
                }
                *cursor = Some(c);
            }
            let Some(c) = cursor.as_mut() else { continue };
            let next = if s.reverse { c.prev() } else { c.next() };
            let next = next.map_err(|e| QueryError::internal(e.to_string()))?;
            let Some((k, v)) = next else {
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

// ---- fast counts ----

/// Whether every leaf of the filter's conjunction is answered exactly by `scan`'s bounds, so
/// that the number of index entries in its ranges is the number of matching documents.
fn bounds_are_exact(scan: &IxScan, leaves: &[&MatchExpr]) -> bool {
    let fields = &scan.index.spec.fields;
    let mut eq_leaves = vec![0usize; scan.n_eq];
    for l in leaves {
        let MatchExpr::Leaf { path, op } = l else {
            return false;
        };
        let Some(i) = fields.iter().position(|(f, _)| f == path.as_str()) else {
            return false;
        };
        if i < scan.n_eq {
            match op {
                LeafOp::Cmp(CmpOp::Eq, _) | LeafOp::In(_) => eq_leaves[i] += 1,
                _ => return false,
            }
        } else if i == scan.n_eq && scan.has_range {
            // field_pred folds every same-typed range operator into the interval; a
            // different type was skipped and is caught by the re-count below.
            if !matches!(
                op,
                LeafOp::Cmp(CmpOp::Gt | CmpOp::Gte | CmpOp::Lt | CmpOp::Lte, _)
            ) {
                return false;
            }
        } else {
            return false;
        }
    }
    if eq_leaves.iter().any(|&n| n != 1) {
        return false;
    }
    if scan.has_range {
        // All range leaves must share one type bracket (field_pred skips the others).
        let path = &fields[scan.n_eq].0;
        let mut tags = leaves.iter().filter_map(|l| match l {
            MatchExpr::Leaf {
                path: p,
                op: LeafOp::Cmp(_, v),
            } if p.as_str() == path => Some(keyenc::tag(v)),
            _ => None,
        });
        if let Some(first) = tags.next() {
            if tags.any(|t| t != first) {
                return false;
            }
        }
    }
    true
}

/// A scan of one complete (non-multikey, non-sparse, non-partial) index whose entries in its
/// ranges are exactly the documents matching `matcher`, if there is one.
pub fn exact_scan(coll: &Collection, matcher: &Matcher) -> Option<IxScan> {
    let mut leaves = Vec::new();
    conjuncts(matcher.expr(), &mut leaves);
    if leaves.is_empty() {
        return None;
    }
    coll.indexes()
        .into_iter()
        .filter(|ix| !ix.is_multikey() && !ix.spec.sparse && ix.spec.partial.is_none())
        .filter_map(|ix| scan_for(&ix, &leaves, false))
        .find(|scan| bounds_are_exact(scan, &leaves))
        .inspect(|scan| scan.index.accesses.record())
}

/// The `_id` keys of the entries in `scan`'s ranges (at most `limit`), read from the index
/// alone.
pub fn scan_id_keys(scan: &IxScan, limit: Option<usize>) -> QResult<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for (lo, hi) in &scan.ranges {
        let mut cur = scan.index.dict().cursor(as_ref(lo), as_ref(hi));
        while let Some((k, _)) = cur.next().map_err(|e| coll_err(e.into()))? {
            if let Some(id) = scan.index.entry_id_key(&k) {
                out.push(id.to_vec());
            }
            if limit.is_some_and(|l| out.len() >= l) {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// Count the documents matching `matcher` inside the storage layer, without reading or
/// decoding a document, when the filter is fully answered by one index's bounds (no matcher
/// needed): an empty filter counts the smallest complete tree; otherwise a non-multikey,
/// non-sparse, non-partial index whose bounds consume every predicate. `None` when no such
/// plan exists (the caller then counts by reading).
pub fn fast_count(coll: &Collection, matcher: &Matcher) -> QResult<Option<u64>> {
    let mut leaves = Vec::new();
    conjuncts(matcher.expr(), &mut leaves);
    let complete =
        |ix: &Arc<Index>| !ix.is_multikey() && !ix.spec.sparse && ix.spec.partial.is_none();
    if leaves.is_empty() || matches!(leaves.as_slice(), [MatchExpr::AlwaysTrue]) {
        // Every document has one entry in the primary tree and in each complete index;
        // count the smallest.
        let mut best: (u64, Option<Arc<Index>>) = (coll.stats().storage_size, None);
        for ix in coll.indexes().into_iter().filter(complete) {
            let size = ix.dict().stats().file_bytes;
            if size < best.0 {
                best = (size, Some(ix));
            }
        }
        let n = match best.1 {
            Some(ix) => ix.dict().count_range(Bound::Unbounded, Bound::Unbounded),
            None => coll.dict().count_range(Bound::Unbounded, Bound::Unbounded),
        }
        .map_err(|e| coll_err(e.into()))?;
        return Ok(Some(n));
    }
    if let Some(scan) = exact_scan(coll, matcher) {
        let ix = scan.index.clone();
        let mut n = 0u64;
        for (lo, hi) in &scan.ranges {
            n += ix
                .dict()
                .count_range(as_ref(lo), as_ref(hi))
                .map_err(|e| coll_err(e.into()))?;
        }
        return Ok(Some(n));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(r: &KeyRange, k: &[u8]) -> bool {
        let lo = match &r.0 {
            Bound::Included(b) => k >= b.as_slice(),
            Bound::Excluded(b) => k > b.as_slice(),
            Bound::Unbounded => true,
        };
        let hi = match &r.1 {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        };
        lo && hi
    }

    /// Every (prefix value, range value) key with an `_id` suffix lands in the range built
    /// for `x == 1 && lo op y op hi` exactly when the predicate holds, in both directions.
    #[test]
    fn ranges_hold_exactly_the_matching_keys() {
        let values = [
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-3),
            Bson::Int32(5),
            Bson::Double(5.5),
            Bson::Int64(10),
            Bson::String("a".into()),
            Bson::String("zz".into()),
            Bson::Boolean(true),
            Bson::MaxKey,
        ];
        let bounds = [
            (
                VBound::Excl(Bson::Int32(5)),
                VBound::Type(keyenc::tag(&Bson::Int32(0))),
            ),
            (
                VBound::Type(keyenc::tag(&Bson::Int32(0))),
                VBound::Incl(Bson::Int32(10)),
            ),
            (VBound::Incl(Bson::Int32(5)), VBound::Excl(Bson::Int32(10))),
            (
                VBound::Incl(Bson::String("a".into())),
                VBound::Type(keyenc::tag(&Bson::String(String::new()))),
            ),
        ];
        let holds = |v: &Bson, lo: &VBound, hi: &VBound| {
            let lo_ok = match lo {
                VBound::Incl(b) => keyenc::tag(v) == keyenc::tag(b) && cmp_values(v, b).is_ge(),
                VBound::Excl(b) => keyenc::tag(v) == keyenc::tag(b) && cmp_values(v, b).is_gt(),
                VBound::Type(t) => keyenc::tag(v) == *t,
            };
            let hi_ok = match hi {
                VBound::Incl(b) => keyenc::tag(v) == keyenc::tag(b) && cmp_values(v, b).is_le(),
                VBound::Excl(b) => keyenc::tag(v) == keyenc::tag(b) && cmp_values(v, b).is_lt(),
                VBound::Type(t) => keyenc::tag(v) == *t,
            };
            lo_ok && hi_ok && !matches!(v, Bson::Double(d) if d.is_nan())
        };
        for desc in [false, true] {
            for (lo, hi) in &bounds {
                let mut prefix = Vec::new();
                keyenc::encode_value(&Bson::Int32(1), &mut prefix);
                let iv = interval(lo, hi, desc);
                let r = key_range(&prefix, Some(&iv)).unwrap();
                for x in [Bson::Int32(0), Bson::Int32(1), Bson::Int32(2)] {
                    for v in &values {
                        let mut k = Vec::new();
                        keyenc::encode_value(&x, &mut k);
                        if desc {
                            keyenc::encode_value_desc(v, &mut k);
                        } else {
                            keyenc::encode_value(v, &mut k);
                        }
                        keyenc::encode_value(&Bson::Int32(42), &mut k);
                        let want = x == Bson::Int32(1) && holds(v, lo, hi);
                        // NaN sits at the bottom of the numbers: a range open at the bottom
                        // of the bracket may include it (the matcher decides).
                        if matches!(v, Bson::Double(d) if d.is_nan()) {
                            continue;
                        }
                        assert_eq!(within(&r, &k), want, "{x} {v} {lo:?} {hi:?} desc={desc}");
                    }
                }
            }
        }
        // Equality only: the prefix's own keys.
        let mut p = Vec::new();
        keyenc::encode_value(&Bson::Int32(7), &mut p);
        let r = key_range(&p, None).unwrap();
        let mut k = p.clone();
        keyenc::encode_value(&Bson::Int32(1), &mut k);
        assert!(within(&r, &k));
        let mut other = Vec::new();
        keyenc::encode_value(&Bson::Int32(8), &mut other);
        assert!(!within(&r, &other));
    }
}
