//! Plan choice: a fixed rule, no trial runs.
//!
//! 1. A hint (name or key pattern) wins; `_id_`/`{_id: 1}` means the primary tree, `$natural`
//!    a full scan. A hinted index with no bounds is scanned whole.
//! 2. `_id` equality or `$in` → `IDHACK` (primary-tree points).
//! 3. Among indexes with bounds: the most equality fields, then having a range, then unique,
//!    then yielding the requested sort, then covering the query, then the fewest fields. A
//!    sparse index is a candidate only when it has a bound (so documents it skips cannot
//!    match); a partial index only when the filter repeats every top-level predicate of its
//!    `partialFilterExpression` verbatim. An `_id` range beats an index that has no equality
//!    field.
//! 4. A top-level `$or` whose every branch has a (non-sparse, non-partial) index → a union of
//!    index scans.
//! 5. No bounds but a sort that an index yields → that index scanned whole (not sparse or
//!    partial; one that covers the query first).
//! 6. Otherwise a full scan.

use bson::{Bson, Document};
use silt_bson::compare::current_collation;
use silt_bson::path::path_covers;

use super::bounds::{bounds_are_exact, collation_sensitive, scan_for};
use super::{
    access_for, conjuncts, parse_key_pattern, Access, Choice, Covered, IndexInfo, IndexScan, Plan,
    SortSpec,
};
use crate::collation::has_string;
use crate::matcher::{MatchExpr, Matcher};
use crate::{QResult, QueryError};

/// Whether a sparse or partial index holds every document the conjunction can match.
fn complete_for(ix: &IndexInfo<'_>, filter: &Document, scan: &IndexScan) -> bool {
    if let Some(pfe) = ix.partial {
        // The query must repeat every top-level predicate of the partial filter verbatim.
        return pfe.iter().all(|(k, v)| filter.get(k) == Some(v));
    }
    if ix.sparse {
        // A bound on any field excludes documents missing it (null and undefined are never
        // bound values).
        return scan.n_eq() > 0 || scan.has_range();
    }
    true
}

/// Whether `scan` of `ix` yields documents in `sort` order: `Some(reverse)`.
fn sort_direction(ix: &IndexInfo<'_>, scan: &IndexScan, sort: &SortSpec) -> Option<bool> {
    if ix.multikey || sort.0.is_empty() || !ix.collation_matches_query() {
        return None;
    }
    let fields = ix.fields;
    // Single-point equality fields before the sort fields may be skipped.
    let single = scan.single_points();
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
            MatchExpr::Expr(_) | MatchExpr::Schema(_) | MatchExpr::Text(_) => false,
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

/// Whether `ix`'s entries hold every path in `needs` exactly: the index can stand in for
/// documents (`coverable`), is not multikey (an entry would hold one element of an array), has
/// no numeric path component (`a.0` keys an array element), and each path is `_id` or an
/// indexed field, or lies inside one. Sparse and partial indexes are fine: they are chosen
/// only when they hold every matching document (or by hint), and covering changes how each
/// entry's document is produced, not which entries are read.
pub fn covers(ix: &IndexInfo<'_>, needs: &[String]) -> bool {
    let fields = ix.fields;
    ix.coverable
        && !ix.multikey
        && !fields.iter().any(|(f, _)| {
            f.split('.')
                .any(|p| silt_bson::path::array_index(p).is_some())
        })
        && needs
            .iter()
            .all(|p| path_covers("_id", p) || fields.iter().any(|(f, _)| path_covers(f, p)))
}

fn score(
    ix: &IndexInfo<'_>,
    s: &IndexScan,
    sorted: bool,
    needs: Option<&[String]>,
) -> (usize, bool, bool, bool, bool, std::cmp::Reverse<usize>) {
    (
        s.n_eq(),
        s.has_range(),
        ix.unique,
        sorted,
        needs.is_some_and(|n| covers(ix, n)),
        std::cmp::Reverse(ix.fields.len()),
    )
}

/// The index a hint names: `Some(None)` for the `_id` index or `$natural`, `Some(Some(pos))`
/// for a secondary index, `None` for no hint.
/// `id_primary`: the primary tree is in `_id` order; otherwise `_id_` is among `indexes`.
fn hinted_index(
    indexes: &[IndexInfo<'_>],
    hint: &Bson,
    id_primary: bool,
) -> QResult<Option<Option<usize>>> {
    let bad = || QueryError::bad_value("hint provided does not correspond to an existing index");
    match hint {
        Bson::Null => Ok(None),
        Bson::String(n) if n.is_empty() => Ok(None),
        Bson::String(n) if n == "_id_" && id_primary => Ok(Some(None)),
        Bson::String(n) => indexes
            .iter()
            .position(|i| i.name == n)
            .map(|i| Some(Some(i)))
            .ok_or_else(bad),
        Bson::Document(k) if k.is_empty() => Ok(None),
        Bson::Document(k) if k.contains_key("$natural") => Ok(Some(None)),
        Bson::Document(k) if k.len() == 1 && k.contains_key("_id") && id_primary => Ok(Some(None)),
        Bson::Document(k) => {
            let want = parse_key_pattern(k).map_err(|_| bad())?;
            indexes
                .iter()
                .position(|i| i.fields == want.as_slice())
                .map(|i| Some(Some(i)))
                .ok_or_else(bad)
        }
        _ => Err(bad()),
    }
}

/// Choose the access path over a collection with these secondary `indexes` (rules in the
/// module header). `needs` is what the query reads ([`needed_paths`]); a single index scan
/// that [`covers`] it makes a covered choice.
pub fn choose(
    indexes: &[IndexInfo<'_>],
    filter: &Document,
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    hint: Option<&Bson>,
    needs: Option<&[String]>,
) -> QResult<Choice> {
    choose_over(indexes, true, filter, matcher, sort, hint, needs)
}

/// [`choose`] over a collection whose primary tree is in `_id` order (`id_primary`), or in
/// the order of another primary key: then the primary tree offers only a full scan, and
/// `_id` is found through the `_id_` index among `indexes`.
pub fn choose_over(
    indexes: &[IndexInfo<'_>],
    id_primary: bool,
    filter: &Document,
    matcher: &Matcher,
    sort: Option<&SortSpec>,
    hint: Option<&Bson>,
    needs: Option<&[String]>,
) -> QResult<Choice> {
    let mut leaves = Vec::new();
    conjuncts(matcher.expr(), &mut leaves);
    // Under a collation, keys order strings bytewise and the query does not: predicates on
    // strings get no bounds, an `_id` string is no point, and no index provides the sort.
    // (Each index takes the predicates it can answer: `bounds::scan_for`.)
    let collated = current_collation().is_some();
    let stripped;
    let filter = if collated {
        stripped = filter
            .iter()
            .filter(|(k, v)| k.as_str() != "_id" || !has_string(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Document>();
        &stripped
    } else {
        filter
    };
    let dropped = collated && leaves.iter().any(|l| collation_sensitive(l));
    let mut choice = choose_plan(indexes, id_primary, filter, &leaves, sort, hint, needs)?;
    if let (Plan::Index(scans), Some(needs)) = (&choice.plan, needs) {
        if let [scan] = scans.as_slice() {
            let ix = &indexes[scan.index];
            if covers(ix, needs) {
                choice.covered = Some(Covered {
                    exact: !dropped && bounds_are_exact(scan, ix.fields, &leaves),
                });
            }
        }
    }
    Ok(choice)
}

/// [`choose`] over the filter's top-level conjuncts `leaves`.
fn choose_plan(
    indexes: &[IndexInfo<'_>],
    id_primary: bool,
    filter: &Document,
    leaves: &[&MatchExpr],
    sort: Option<&SortSpec>,
    hint: Option<&Bson>,
    needs: Option<&[String]>,
) -> QResult<Choice> {
    let finish = |mut s: IndexScan| {
        let dir = sort.and_then(|so| sort_direction(&indexes[s.index], &s, so));
        s.reverse = dir.unwrap_or(false);
        Choice {
            sorted: dir.is_some(),
            plan: Plan::Index(vec![s]),
            covered: None,
        }
    };
    if let Some(h) = hint {
        match hinted_index(indexes, h, id_primary)? {
            Some(None) => {
                let natural = matches!(h, Bson::Document(k) if k.contains_key("$natural"));
                let a = if natural || !id_primary {
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
            Some(Some(pos)) => {
                let s = scan_for(pos, &indexes[pos], leaves, true).expect("forced scan");
                return Ok(finish(s));
            }
            None => {}
        }
    }
    let primary = if id_primary {
        access_for(filter)
    } else {
        Access::FullScan
    };
    if matches!(primary, Access::Points(_)) {
        return Ok(Choice {
            plan: Plan::Primary(primary),
            sorted: false,
            covered: None,
        });
    }
    let mut best: Option<(IndexScan, bool)> = None;
    for (pos, ix) in indexes.iter().enumerate() {
        let Some(mut s) = scan_for(pos, ix, leaves, false) else {
            continue;
        };
        if !complete_for(ix, filter, &s) {
            continue;
        }
        let dir = sort.and_then(|so| sort_direction(ix, &s, so));
        s.reverse = dir.unwrap_or(false);
        let sorted = dir.is_some();
        if best.as_ref().is_none_or(|(b, bs)| {
            score(ix, &s, sorted, needs) > score(&indexes[b.index], b, *bs, needs)
        }) {
            best = Some((s, sorted));
        }
    }
    if let Some((s, sorted)) = best {
        if s.n_eq() > 0 || !matches!(primary, Access::IdRange(..)) {
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
    let complete = |ix: &&IndexInfo<'_>| !ix.sparse && ix.partial.is_none();
    // $or: a union when every branch has an index.
    if let [MatchExpr::Or(branches)] = leaves {
        let mut scans = Vec::new();
        for b in branches {
            let mut bl = Vec::new();
            conjuncts(b, &mut bl);
            let pick = indexes
                .iter()
                .enumerate()
                .filter(|(_, ix)| complete(ix))
                .filter_map(|(pos, ix)| scan_for(pos, ix, &bl, false))
                .max_by(|a, b| {
                    score(&indexes[a.index], a, false, None).cmp(&score(
                        &indexes[b.index],
                        b,
                        false,
                        None,
                    ))
                });
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
        let yielding = indexes
            .iter()
            .enumerate()
            .filter(|(_, ix)| complete(ix))
            .filter_map(|(pos, ix)| scan_for(pos, ix, leaves, true))
            .filter(|s| sort_direction(&indexes[s.index], s, so).is_some());
        let covering = |s: &IndexScan| needs.is_some_and(|n| covers(&indexes[s.index], n));
        // `max_by_key` keeps the last of equals: reversed, that is the first index.
        if let Some(s) = yielding.rev().max_by_key(covering) {
            return Ok(finish(s));
        }
    }
    Ok(Choice::full_scan())
}

/// A scan of one complete (non-multikey, non-sparse, non-partial) index whose entries in its
/// ranges are exactly the documents matching `matcher`, if there is one.
pub fn exact_scan(indexes: &[IndexInfo<'_>], matcher: &Matcher) -> Option<IndexScan> {
    let mut leaves = Vec::new();
    conjuncts(matcher.expr(), &mut leaves);
    if leaves.is_empty()
        || (current_collation().is_some() && leaves.iter().any(|l| collation_sensitive(l)))
    {
        return None;
    }
    indexes
        .iter()
        .enumerate()
        .filter(|(_, ix)| {
            !ix.multikey && !ix.sparse && ix.partial.is_none() && ix.collation.is_none()
        })
        .filter_map(|(pos, ix)| scan_for(pos, ix, &leaves, false))
        .find(|scan| bounds_are_exact(scan, indexes[scan.index].fields, &leaves))
}
