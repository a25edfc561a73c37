//! Evaluating a [`MatchExpr`] tree against a document.

use std::cmp::Ordering;

use bson::{Bson, Document};
use silt_bson::compare::{as_num, cmp_collated, type_rank, Num};
use silt_bson::path::any_value;

use super::*;
use crate::error::QueryError;

pub(super) struct Eval {
    pub(super) expr_eval: Option<ExprEval>,
    pub(super) error: Option<QueryError>,
}

impl Eval {
    /// Evaluate `e` against `doc`; `key` (when wanted) receives the array index recorded by
    /// the last matching path predicate that went through an array.
    pub(super) fn expr(
        &mut self,
        e: &MatchExpr,
        doc: &Document,
        mut key: Option<&mut Option<usize>>,
    ) -> bool {
        match e {
            MatchExpr::And(kids) => kids.iter().all(|k| self.expr(k, doc, key.as_deref_mut())),
            MatchExpr::Or(kids) => kids.iter().any(|k| self.expr(k, doc, key.as_deref_mut())),
            MatchExpr::Nor(kids) => !kids.iter().any(|k| self.expr(k, doc, None)),
            MatchExpr::Not(k) => !self.expr(k, doc, None),
            MatchExpr::AlwaysTrue => true,
            MatchExpr::AlwaysFalse => false,
            MatchExpr::Schema(s) => s.matches(doc),
            MatchExpr::Text(t) => match t.bound() {
                Some(b) => b.matches(doc),
                None => {
                    // Only a plan over a text index binds `$text` (a sub-pipeline's has none).
                    self.error.get_or_insert(QueryError::index_not_found(
                        "text index required for $text query",
                    ));
                    false
                }
            },
            MatchExpr::Expr(x) => match self.expr_eval.map(|f| f(x, doc)) {
                Some(Ok(v)) => is_truthy(&v),
                Some(Err(err)) => {
                    self.error.get_or_insert(err);
                    false
                }
                None => false,
            },
            MatchExpr::Leaf { path, op } => any_value(doc, path, op.leaf_arrays(), &mut |c| {
                let mut inner = None;
                if !self.single(op, c.value, &mut inner) {
                    return false;
                }
                if let (Some(k), Some(i)) = (key.as_deref_mut(), c.array_index.or(inner)) {
                    *k = Some(i);
                }
                true
            }),
        }
    }

    /// An expression applied to one value (the element of `$elemMatch`'s value form).
    fn single_expr(&mut self, e: &MatchExpr, v: &Bson) -> bool {
        match e {
            MatchExpr::Leaf { op, .. } => self.single(op, Some(v), &mut None),
            MatchExpr::And(kids) => kids.iter().all(|k| self.single_expr(k, v)),
            MatchExpr::Or(kids) => kids.iter().any(|k| self.single_expr(k, v)),
            MatchExpr::Nor(kids) => !kids.iter().any(|k| self.single_expr(k, v)),
            MatchExpr::Not(k) => !self.single_expr(k, v),
            MatchExpr::AlwaysTrue => true,
            MatchExpr::AlwaysFalse
            | MatchExpr::Expr(_)
            | MatchExpr::Schema(_)
            | MatchExpr::Text(_) => false,
        }
    }

    /// Does the op hold for one candidate (`None` = missing)? Array ops record the index of
    /// the matching element in `key`.
    pub(super) fn single(
        &mut self,
        op: &LeafOp,
        v: Option<&Bson>,
        key: &mut Option<usize>,
    ) -> bool {
        match op {
            LeafOp::Cmp(c, rhs) => compare(*c, rhs, v),
            LeafOp::In(list) => list.contains(v),
            LeafOp::Exists => v.is_some(),
            LeafOp::Regex(r) => v.is_some_and(|v| r.matches(v)),
            LeafOp::Type(t) => v.is_some_and(|v| t.matches(v)),
            LeafOp::Mod { divisor, remainder } => v
                .and_then(mod_dividend)
                .is_some_and(|d| d.checked_rem(*divisor).unwrap_or(0) == *remainder),
            LeafOp::Size(n) => matches!(v, Some(Bson::Array(a)) if a.len() == *n),
            LeafOp::Bits(b, mask) => v.is_some_and(|v| mask.test(*b, v)),
            LeafOp::ElemMatchObject(sub) => {
                let Some(Bson::Array(arr)) = v else {
                    return false;
                };
                for (i, e) in arr.iter().enumerate() {
                    let hit = match e {
                        Bson::Document(d) => self.expr(sub, d, None),
                        Bson::Array(inner) => self.expr(sub, &array_as_doc(inner), None),
                        _ => false,
                    };
                    if hit {
                        *key = Some(i);
                        return true;
                    }
                }
                false
            }
            LeafOp::ElemMatchValue(kids) => {
                let Some(Bson::Array(arr)) = v else {
                    return false;
                };
                for (i, e) in arr.iter().enumerate() {
                    if kids.iter().all(|k| self.single_expr(k, e)) {
                        *key = Some(i);
                        return true;
                    }
                }
                false
            }
        }
    }
}

/// An array seen as a document with fields "0", "1", ... (`$elemMatch` on nested arrays).
fn array_as_doc(a: &[Bson]) -> Document {
    a.iter()
        .enumerate()
        .map(|(i, v)| (i.to_string(), v.clone()))
        .collect()
}

/// The integer `$mod` divides: integers as-is, doubles truncated (NaN, infinities and values
/// beyond i64 never match).
#[expect(
    clippy::cast_possible_truncation,
    reason = "the truncated double is checked to be in [-2^63, 2^63): exact"
)]
fn mod_dividend(v: &Bson) -> Option<i64> {
    match as_num(v)? {
        Num::Int(i) => Some(i),
        Num::Float(f) => {
            let t = f.trunc();
            (-TWO63..TWO63).contains(&t).then_some(t as i64)
        }
    }
}

fn is_nan(v: &Bson) -> bool {
    matches!(as_num(v), Some(Num::Float(f)) if f.is_nan())
}

/// A comparison operator applied to one candidate, with MongoDB's cross-type rules.
fn compare(op: CmpOp, rhs: &Bson, v: Option<&Bson>) -> bool {
    // Missing and undefined share a canonical class (rank 1); null is rank 2.
    let lhs_rank = v.map_or(1, type_rank);
    let rhs_rank = type_rank(rhs);
    let inclusive = matches!(op, CmpOp::Eq | CmpOp::Lte | CmpOp::Gte);
    if lhs_rank != rhs_rank {
        if lhs_rank.min(rhs_rank) == 1 && lhs_rank.max(rhs_rank) == 2 {
            return inclusive; // null vs missing/undefined
        }
        return match rhs {
            Bson::MaxKey => matches!(op, CmpOp::Lt | CmpOp::Lte),
            Bson::MinKey => matches!(op, CmpOp::Gt | CmpOp::Gte),
            _ => false,
        };
    }
    let Some(v) = v else {
        return false;
    };
    if op != CmpOp::Eq && (is_nan(v) || is_nan(rhs)) {
        // NaN equals NaN but is otherwise unordered for range predicates.
        return matches!(op, CmpOp::Lte | CmpOp::Gte) && is_nan(v) && is_nan(rhs);
    }
    let o = cmp_collated(v, rhs);
    match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Lte => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Gte => o != Ordering::Less,
    }
}
