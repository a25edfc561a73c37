//! Conditions evaluated during an update: `$pull` conditions and `arrayFilters`.
//!
//! Both are reduced to "does this filter match this document" so one hook serves them: the
//! caller's [`ConditionMatcher`](super::ConditionMatcher) when there is one, otherwise a small
//! built-in evaluator that knows field paths (with MongoDB's implicit array traversal),
//! equality, `$eq $ne $gt $gte $lt $lte $in $nin $exists` and `$and $or $nor`.

use std::cmp::Ordering;

use bson::{Bson, Document};
use silt_bson::compare::{cmp_values, type_rank, values_equal};

use super::ConditionMatcher;
use crate::error::{QResult, QueryError};

/// Operators that may start a `$pull` condition applied to the element itself
/// (`MatchExpressionParser::parsePathAcceptingKeyword`).
const PATH_ACCEPTING: &[&str] = &[
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$all",
    "$exists",
    "$mod",
    "$type",
    "$regex",
    "$options",
    "$elemMatch",
    "$size",
    "$not",
    "$near",
    "$nearSphere",
    "$geoWithin",
    "$within",
    "$geoIntersects",
    "$bitsAllSet",
    "$bitsAllClear",
    "$bitsAnySet",
    "$bitsAnyClear",
];

/// Operators MongoDB knows but the built-in evaluator leaves to the caller's matcher.
const NEEDS_MATCHER: &[&str] = &[
    "$all",
    "$mod",
    "$type",
    "$regex",
    "$options",
    "$elemMatch",
    "$size",
    "$not",
    "$near",
    "$nearSphere",
    "$geoWithin",
    "$within",
    "$geoIntersects",
    "$bitsAllSet",
    "$bitsAllClear",
    "$bitsAnySet",
    "$bitsAnyClear",
    "$expr",
    "$where",
    "$text",
    "$jsonSchema",
    "$comment",
];

/// How a `$pull` decides which elements to remove (MongoDB's `PullNode` matchers).
#[derive(Clone, Debug)]
pub(crate) enum PullCond {
    /// A plain value: elements equal to it.
    Equal(Bson),
    /// A document whose first field is not an operator: a query run against elements that
    /// are documents.
    Query(Document),
    /// An operator document (`{$gte: 6}`) or a regex: applied to the element itself.
    Wrapped(Bson),
}

impl PullCond {
    pub(crate) fn new(v: &Bson) -> PullCond {
        match v {
            Bson::Document(d) => match d.keys().next() {
                Some(k) if PATH_ACCEPTING.contains(&k.as_str()) => PullCond::Wrapped(v.clone()),
                _ => PullCond::Query(d.clone()),
            },
            Bson::RegularExpression(_) => PullCond::Wrapped(v.clone()),
            _ => PullCond::Equal(v.clone()),
        }
    }

    pub(crate) fn matches(
        &self,
        elem: &Bson,
        hook: Option<&dyn ConditionMatcher>,
    ) -> QResult<bool> {
        match self {
            PullCond::Equal(v) => Ok(values_equal(elem, v)),
            PullCond::Query(q) => match elem {
                Bson::Document(d) => query(q, d, hook),
                _ => Ok(false),
            },
            PullCond::Wrapped(c) => {
                let mut q = Document::new();
                q.insert("v", c.clone());
                let mut d = Document::new();
                d.insert("v", elem.clone());
                query(&q, &d, hook)
            }
        }
    }
}

/// Does the array filter `filter` (whose top-level fields start with `ident`) match `elem`?
pub(crate) fn array_filter(
    filter: &Document,
    ident: &str,
    elem: &Bson,
    hook: Option<&dyn ConditionMatcher>,
) -> QResult<bool> {
    let mut d = Document::new();
    d.insert(ident, elem.clone());
    query(filter, &d, hook)
}

fn query(q: &Document, d: &Document, hook: Option<&dyn ConditionMatcher>) -> QResult<bool> {
    match hook {
        Some(m) => m.matches(q, d),
        None => builtin(q, d),
    }
}

/// The built-in evaluator: `q` as a filter on `d`.
pub(crate) fn builtin(q: &Document, d: &Document) -> QResult<bool> {
    for (k, v) in q {
        let ok = match k.as_str() {
            "$and" | "$or" | "$nor" => {
                let Bson::Array(items) = v else {
                    return Err(QueryError::bad_value(format!("{k} must be an array")));
                };
                let mut results = Vec::with_capacity(items.len());
                for item in items {
                    let Bson::Document(sub) = item else {
                        return Err(QueryError::bad_value(format!(
                            "{k} argument's entries must be objects"
                        )));
                    };
                    results.push(builtin(sub, d)?);
                }
                match k.as_str() {
                    "$and" => results.iter().all(|&r| r),
                    "$or" => results.iter().any(|&r| r),
                    _ => !results.iter().any(|&r| r),
                }
            }
            op if op.starts_with('$') => return Err(unsupported_or_unknown(op, true)),
            path => field(d, path, v)?,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn unsupported_or_unknown(op: &str, top: bool) -> QueryError {
    if NEEDS_MATCHER.contains(&op) {
        QueryError::not_implemented(format!(
            "{op} in a $pull condition or an array filter needs the query matcher"
        ))
    } else if top {
        QueryError::bad_value(format!("unknown top level operator: {op}"))
    } else {
        QueryError::bad_value(format!("unknown operator: {op}"))
    }
}

/// The values a dotted path reaches in `d`, with arrays traversed as MongoDB's matcher does;
/// `missing` is set when some branch of the path does not exist.
fn candidates<'a>(cur: &'a Bson, parts: &[&str], out: &mut Vec<&'a Bson>, missing: &mut bool) {
    let Some((first, rest)) = parts.split_first() else {
        out.push(cur);
        if let Bson::Array(items) = cur {
            out.extend(items.iter());
        }
        return;
    };
    match cur {
        Bson::Document(d) => match d.get(*first) {
            Some(next) => candidates(next, rest, out, missing),
            None => *missing = true,
        },
        Bson::Array(items) => {
            let before = out.len();
            if let Some(next) = first.parse::<usize>().ok().and_then(|i| items.get(i)) {
                candidates(next, rest, out, missing);
            }
            for item in items.iter().filter(|i| matches!(i, Bson::Document(_))) {
                candidates(item, parts, out, missing);
            }
            if out.len() == before {
                *missing = true;
            }
        }
        _ => *missing = true,
    }
}

fn field(d: &Document, path: &str, cond: &Bson) -> QResult<bool> {
    let mut parts = path.split('.');
    let first = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let mut found = Vec::new();
    let mut missing = false;
    match d.get(first) {
        Some(v) => candidates(v, &rest, &mut found, &mut missing),
        None => missing = true,
    }
    let operators = match cond {
        Bson::Document(c) => c.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !operators {
        if let Bson::RegularExpression(_) = cond {
            return Err(unsupported_or_unknown("$regex", false));
        }
        return Ok(eq(&found, missing, cond));
    }
    let Bson::Document(c) = cond else {
        unreachable!("operators implies a document")
    };
    for (op, arg) in c {
        let ok = match op.as_str() {
            "$eq" => eq(&found, missing, arg),
            "$ne" => !eq(&found, missing, arg),
            "$gt" => compare(&found, arg, |o| o == Ordering::Greater),
            "$gte" => compare(&found, arg, |o| o != Ordering::Less) || null_eq(missing, arg),
            "$lt" => compare(&found, arg, |o| o == Ordering::Less),
            "$lte" => compare(&found, arg, |o| o != Ordering::Greater) || null_eq(missing, arg),
            "$in" | "$nin" => {
                let Bson::Array(list) = arg else {
                    return Err(QueryError::bad_value(format!("{op} needs an array")));
                };
                if list.iter().any(|v| matches!(v, Bson::RegularExpression(_))) {
                    return Err(unsupported_or_unknown("$regex", false));
                }
                let any = list.iter().any(|v| eq(&found, missing, v));
                any == (op == "$in")
            }
            "$exists" => {
                let want = match arg {
                    Bson::Boolean(b) => *b,
                    Bson::Null | Bson::Undefined => false,
                    v => silt_bson::compare::as_num(v).is_none_or(|n| !num_is_zero(n)),
                };
                found.is_empty() != want
            }
            other => return Err(unsupported_or_unknown(other, false)),
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn num_is_zero(n: silt_bson::compare::Num) -> bool {
    match n {
        silt_bson::compare::Num::Int(i) => i == 0,
        silt_bson::compare::Num::Float(f) => f == 0.0,
    }
}

fn null_eq(missing: bool, arg: &Bson) -> bool {
    missing && matches!(arg, Bson::Null)
}

fn eq(found: &[&Bson], missing: bool, v: &Bson) -> bool {
    if matches!(v, Bson::Null) && (missing || found.is_empty()) {
        return true;
    }
    found.iter().any(|f| values_equal(f, v))
}

/// Range comparisons only match values of the same canonical type, as in MongoDB.
fn compare(found: &[&Bson], v: &Bson, ok: impl Fn(Ordering) -> bool) -> bool {
    found
        .iter()
        .any(|f| type_rank(f) == type_rank(v) && ok(cmp_values(f, v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn builtin_evaluator() {
        let d = doc! {"a": 5, "b": [1, 9], "c": [{"x": 1}, {"x": 7}], "s": "str"};
        let t = |q: Document| builtin(&q, &d).unwrap();
        assert!(t(doc! {"a": 5}));
        assert!(t(doc! {"a": {"$gte": 5, "$lt": 6}}));
        assert!(!t(doc! {"a": {"$gt": 5}}));
        assert!(t(doc! {"b": 9}));
        assert!(t(doc! {"b": {"$gt": 8}}));
        assert!(t(doc! {"c.x": {"$gt": 6}}));
        assert!(t(doc! {"c.1.x": 7}));
        assert!(!t(doc! {"s": {"$gt": 1}}));
        assert!(t(doc! {"zz": null}));
        assert!(t(doc! {"zz": {"$exists": false}, "a": {"$exists": true}}));
        assert!(t(doc! {"a": {"$in": [1, 5]}, "s": {"$nin": ["x"]}}));
        assert!(t(doc! {"$or": [{"a": 1}, {"s": "str"}]}));
        assert!(!t(doc! {"$nor": [{"a": 5}]}));
        assert!(t(doc! {"a": {"$ne": 4}}));
        let e = builtin(&doc! {"a": {"$elemMatch": {"x": 1}}}, &d).unwrap_err();
        assert_eq!(e.code, 238);
        let e = builtin(&doc! {"a": {"$foo": 1}}, &d).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (2, "unknown operator: $foo"));
    }

    #[test]
    fn pull_condition_kinds() {
        let m = |c: Bson, e: Bson| PullCond::new(&c).matches(&e, None).unwrap();
        assert!(m(bson!(3), bson!(3.0)));
        assert!(m(bson!({"$gte": 6}), bson!(7)));
        assert!(!m(bson!({"$gte": 6}), bson!(5)));
        assert!(m(bson!({"x": 1}), bson!({"x": 1, "y": 2})));
        assert!(!m(bson!({"x": 1}), bson!(1)));
        assert!(m(bson!([1, 2]), bson!([1, 2])));
        assert!(!m(bson!({"x": 1}), bson!({"x": 2})));
    }
}
