//! Bounds in value space: what the top-level conjunction of a filter says about `_id`
//! ([`Access`]) and about the fields of an index ([`IndexScan`]).
//!
//! For each index, walking its fields in order: an equality (`$eq` or implicit) or `$in` (no
//! regexes, no null) on the field adds points and moves on to the next field; otherwise a
//! `$gt/$gte/$lt/$lte` on the field gives an interval **within the operand's type bracket**
//! (`$gt: 5` stops at the end of the numbers, so NaN and other types are never crossed), and
//! stops; otherwise stop. Equality on null, arrays or regexes is never a bound (the matcher's
//! semantics for them differ from index keys). On a multikey index only one operator per field
//! is used (`{$gt: 5, $lt: 10}` matches `[3, 12]`). The points of the equality fields multiply
//! out to at most [`MAX_RANGES`] combinations.

use std::cmp::Ordering;
use std::ops::Bound;

use bson::{Bson, Document};
use silt_bson::compare::{cmp_values, type_rank};

use super::IndexInfo;
use crate::collation::{has_string, Collation};
use crate::matcher::{CmpOp, LeafOp, MatchExpr};

/// How documents are found in the primary tree (`_id` order).
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

/// One end of a range predicate's interval, kept inside the value's type bracket.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueBound {
    Incl(Bson),
    Excl(Bson),
    /// The start (lower end) or the end (upper end) of the bracket of values whose canonical
    /// type rank (`silt_bson::compare::type_rank`) is this.
    Type(u8),
}

/// The values of one index field between two bounds (in value order, whatever the field's
/// direction).
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub lo: ValueBound,
    pub hi: ValueBound,
}

/// What the filter says about one index field.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
enum FieldPred {
    Points(Vec<Bson>),
    Range(Interval),
}

/// One scan of a secondary index, bounded in value space: the product of the points of its
/// leading equality fields, then an interval of the next field (if any). Fields after the
/// bounded ones take every value.
#[derive(Debug, Clone)]
pub struct IndexScan {
    /// The index's position in the slice given to the planner.
    pub index: usize,
    /// The values of each leading equality field, in index order.
    pub points: Vec<Vec<Bson>>,
    /// The interval of the field after them.
    pub range: Option<Interval>,
    /// Read in reverse index order (for a sort).
    pub reverse: bool,
}

impl IndexScan {
    /// Fields bounded by equality.
    pub fn n_eq(&self) -> usize {
        self.points.len()
    }

    /// Whether the field after the equality fields is bounded by an interval.
    pub fn has_range(&self) -> bool {
        self.range.is_some()
    }

    /// For explain: field -> interval strings, as MongoDB prints `indexBounds`.
    pub fn bounds_doc(&self, ix: &IndexInfo<'_>) -> Document {
        let mut bounds = Document::new();
        let n_eq = self.n_eq();
        for (i, (path, desc)) in ix.fields.iter().enumerate() {
            let p = if i < n_eq {
                Some(FieldPred::Points(self.points[i].clone()))
            } else if i == n_eq {
                self.range.clone().map(FieldPred::Range)
            } else {
                None
            };
            bounds.insert(path.clone(), fmt_pred(p.as_ref(), *desc));
        }
        bounds
    }

    /// How many leading equality fields have a single point (a sort may skip them).
    pub(super) fn single_points(&self) -> usize {
        self.points.iter().take_while(|p| p.len() == 1).count()
    }
}

/// A value an equality bound can use: the index holds exactly the keys equal to it.
fn point_ok(v: &Bson) -> bool {
    is_plain(v) || matches!(v, Bson::Document(_))
}

/// The leaves of the top-level AND, nested ANDs flattened.
pub fn conjuncts<'a>(e: &'a MatchExpr, out: &mut Vec<&'a MatchExpr>) {
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
    let mut lo: Option<ValueBound> = None;
    let mut hi: Option<ValueBound> = None;
    let mut rank: Option<u8> = None;
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
                let t = type_rank(v);
                if rank.is_some_and(|x| x != t) || (multikey && (lo.is_some() || hi.is_some())) {
                    continue;
                }
                rank = Some(t);
                match op {
                    CmpOp::Gt => lo = tighter(lo, ValueBound::Excl(v.clone()), true),
                    CmpOp::Gte => lo = tighter(lo, ValueBound::Incl(v.clone()), true),
                    CmpOp::Lt => hi = tighter(hi, ValueBound::Excl(v.clone()), false),
                    CmpOp::Lte => hi = tighter(hi, ValueBound::Incl(v.clone()), false),
                    CmpOp::Eq => {}
                }
            }
            _ => {}
        }
    }
    if let Some(p) = points {
        return Some(FieldPred::Points(p));
    }
    let t = rank?;
    Some(FieldPred::Range(Interval {
        lo: lo.unwrap_or(ValueBound::Type(t)),
        hi: hi.unwrap_or(ValueBound::Type(t)),
    }))
}

fn tighter(cur: Option<ValueBound>, new: ValueBound, lower: bool) -> Option<ValueBound> {
    let Some(c) = cur else { return Some(new) };
    let val = |b: &ValueBound| match b {
        ValueBound::Incl(v) | ValueBound::Excl(v) => Some(v.clone()),
        ValueBound::Type(_) => None,
    };
    let (Some(a), Some(b)) = (val(&c), val(&new)) else {
        return Some(c);
    };
    let o = cmp_values(&b, &a);
    let take_new = match o {
        Ordering::Equal => matches!(new, ValueBound::Excl(_)),
        Ordering::Greater => lower,
        Ordering::Less => !lower,
    };
    Some(if take_new { new } else { c })
}

fn fmt_vb(b: &ValueBound, lower: bool) -> (bool, String) {
    match b {
        ValueBound::Incl(v) => (true, v.to_string()),
        ValueBound::Excl(v) => (false, v.to_string()),
        ValueBound::Type(t) => {
            let num = type_rank(&Bson::Int32(0));
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
        Some(FieldPred::Range(Interval { lo, hi })) => {
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
pub const MAX_RANGES: usize = 4096;

/// Bounds for the index at position `pos` from the conjunction `leaves`; `None` if no field is
/// constrained (unless `force`, for a hint or a sort: then a full index scan).
pub(super) fn scan_for(
    pos: usize,
    ix: &IndexInfo<'_>,
    leaves: &[&MatchExpr],
    force: bool,
) -> Option<IndexScan> {
    let same = ix.collation_matches_query();
    if same && ix.collation.is_none() {
        return scan_for_leaves(pos, ix, leaves, force);
    }
    // Bounds from the predicates this index can answer: under the index's own collation,
    // those on strings with their constants turned into the keys the index holds; under
    // another, only those that compare no strings. A collated index holds no raw strings,
    // so regexes never bound it.
    let owned: Vec<MatchExpr> = match (same, ix.collation) {
        (true, Some(c)) => leaves.iter().filter_map(|l| keyed(l, c)).collect(),
        _ => leaves
            .iter()
            .filter(|l| !collation_sensitive(l) && (ix.collation.is_none() || !has_regex(l)))
            .map(|l| (*l).clone())
            .collect(),
    };
    let refs: Vec<&MatchExpr> = owned.iter().collect();
    scan_for_leaves(pos, ix, &refs, force)
}

/// Does this predicate hold a regex (which bounds raw strings)?
fn has_regex(e: &MatchExpr) -> bool {
    match e {
        MatchExpr::And(k) | MatchExpr::Or(k) | MatchExpr::Nor(k) => k.iter().any(has_regex),
        MatchExpr::Not(k) => has_regex(k),
        MatchExpr::Leaf { op, .. } => match op {
            LeafOp::Regex(_) => true,
            LeafOp::In(list) => !list.regexes.is_empty(),
            LeafOp::ElemMatchObject(_) | LeafOp::ElemMatchValue(_) => true,
            _ => false,
        },
        _ => false,
    }
}

/// A top-level predicate in the key space of an index collated by `c`: string constants
/// replaced by their collation keys; `None` for predicates such an index cannot bound.
fn keyed(e: &MatchExpr, c: &Collation) -> Option<MatchExpr> {
    if has_regex(e) {
        return None;
    }
    match e {
        MatchExpr::Leaf { path, op } => {
            let op = match op {
                LeafOp::Cmp(o, v) => LeafOp::Cmp(*o, c.key(v)),
                LeafOp::In(list) => {
                    let mut values: Vec<Bson> = list.values.iter().map(|v| c.key(v)).collect();
                    values.sort_by(cmp_values);
                    values.dedup_by(|a, b| cmp_values(a, b) == Ordering::Equal);
                    LeafOp::In(crate::matcher::InList {
                        values,
                        regexes: Vec::new(),
                        has_null: list.has_null,
                    })
                }
                other => other.clone(),
            };
            Some(MatchExpr::Leaf {
                path: path.clone(),
                op,
            })
        }
        MatchExpr::Expr(_) => None,
        other if collation_sensitive(other) => None,
        other => Some(other.clone()),
    }
}

fn scan_for_leaves(
    pos: usize,
    ix: &IndexInfo<'_>,
    leaves: &[&MatchExpr],
    force: bool,
) -> Option<IndexScan> {
    let mk = ix.multikey;
    let mut preds: Vec<Option<FieldPred>> = Vec::new();
    let mut n_eq = 0;
    let mut has_range = false;
    for (path, _) in ix.fields {
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
    // The equality prefixes multiply out: keep the fields whose product stays within
    // MAX_RANGES; the matcher does the rest.
    let mut points = Vec::new();
    let mut product = 1usize;
    for p in preds.iter().take(n_eq) {
        let Some(FieldPred::Points(vs)) = p else {
            break;
        };
        if product * vs.len() > MAX_RANGES {
            break;
        }
        product *= vs.len();
        points.push(vs.clone());
    }
    let n_eq = points.len();
    let range = match preds.get(n_eq) {
        Some(Some(FieldPred::Range(iv))) if n_eq < ix.fields.len() => Some(iv.clone()),
        _ => None,
    };
    Some(IndexScan {
        index: pos,
        points,
        range,
        reverse: false,
    })
}

/// Whether every leaf of the filter's conjunction is answered exactly by `scan`'s bounds (on
/// an index with these `fields`), so that the index entries in its ranges are exactly the
/// matching documents.
pub(super) fn bounds_are_exact(
    scan: &IndexScan,
    fields: &[(String, bool)],
    leaves: &[&MatchExpr],
) -> bool {
    let n_eq = scan.n_eq();
    let has_range = scan.has_range();
    let mut eq_leaves = vec![0usize; n_eq];
    for l in leaves {
        let MatchExpr::Leaf { path, op } = l else {
            return false;
        };
        let Some(i) = fields.iter().position(|(f, _)| f == path.as_str()) else {
            return false;
        };
        if i < n_eq {
            match op {
                LeafOp::Cmp(CmpOp::Eq, _) | LeafOp::In(_) => eq_leaves[i] += 1,
                _ => return false,
            }
        } else if i == n_eq && has_range {
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
    if has_range {
        // All range leaves must share one type bracket (field_pred skips the others).
        let path = &fields[n_eq].0;
        let mut ranks = leaves.iter().filter_map(|l| match l {
            MatchExpr::Leaf {
                path: p,
                op: LeafOp::Cmp(_, v),
            } if p.as_str() == path => Some(type_rank(v)),
            _ => None,
        });
        if let Some(first) = ranks.next() {
            if ranks.any(|t| t != first) {
                return false;
            }
        }
    }
    true
}

/// Does this predicate compare strings (which a collation orders differently from keys)?
pub fn collation_sensitive(e: &MatchExpr) -> bool {
    match e {
        MatchExpr::And(k) | MatchExpr::Or(k) | MatchExpr::Nor(k) => {
            k.iter().any(collation_sensitive)
        }
        MatchExpr::Not(k) => collation_sensitive(k),
        MatchExpr::Expr(_) => true,
        MatchExpr::AlwaysTrue | MatchExpr::AlwaysFalse | MatchExpr::Schema(_) => false,
        MatchExpr::Text(_) => false,
        MatchExpr::Leaf { op, .. } => match op {
            LeafOp::Cmp(_, v) => has_string(v),
            LeafOp::In(list) => list.values.iter().any(has_string),
            LeafOp::ElemMatchObject(sub) => collation_sensitive(sub),
            LeafOp::ElemMatchValue(kids) => kids.iter().any(collation_sensitive),
            _ => false,
        },
    }
}
