//! Matching a stored document from its raw bytes, without decoding it: the path a count with a
//! matcher takes for every document it reads. Only filters whose answer for a document is
//! decided by comparing top-level values one by one are taken: a conjunction of comparisons,
//! `$in`, `$exists` and `$type` on top-level fields. Everything else (a dotted path, an array
//! value, `$or`, `$expr`, ...) is left to [`Matcher::matches`] on the decoded document, so
//! the two always agree.

use bson::{Bson, RawBsonRef, RawDocument};

use super::eval::Eval;
use super::{LeafOp, MatchExpr, Matcher};

/// The most conjuncts the raw path takes (their values are held on the stack).
const MAX_LEAVES: usize = 8;

/// A conjunct the raw path can evaluate: a top-level field and its op.
fn raw_leaf(e: &MatchExpr) -> Option<(&str, &LeafOp)> {
    match e {
        MatchExpr::Leaf { path, op }
            if path.parts().len() == 1
                && matches!(
                    op,
                    LeafOp::Cmp(..) | LeafOp::In(_) | LeafOp::Exists | LeafOp::Type(_)
                ) =>
        {
            Some((path.as_str(), op))
        }
        _ => None,
    }
}

/// Whether the raw path can evaluate `e` (every conjunct is a [`raw_leaf`]), and then the
/// number of distinct fields it names; 0 when it cannot.
pub(super) fn raw_fields(e: &MatchExpr) -> usize {
    let kids = match e {
        MatchExpr::And(kids) if kids.len() <= MAX_LEAVES => kids.as_slice(),
        MatchExpr::And(_) => return 0,
        _ => std::slice::from_ref(e),
    };
    let Some(mut names) = kids
        .iter()
        .map(|k| raw_leaf(k).map(|(n, _)| n))
        .collect::<Option<Vec<&str>>>()
    else {
        return 0;
    };
    names.sort_unstable();
    names.dedup();
    names.len()
}

impl Matcher {
    /// Whether the stored document `doc` matches, decided from its bytes; `None` when it
    /// cannot be (the filter is not of the kind above, a field it reads holds an array, or the
    /// document is malformed), and the caller decodes it and asks [`Matcher::matches`].
    ///
    /// A field is read at its first occurrence, and the rest of the document is not read once
    /// every field the filter names is found. Stored documents never repeat a field (every
    /// write encodes a `Document`), so this is the value decoding gives.
    pub fn matches_raw(&self, doc: &RawDocument) -> Option<bool> {
        if self.raw_fields == 0 {
            return None;
        }
        let one = std::slice::from_ref(&self.expr);
        let kids = match &self.expr {
            MatchExpr::And(kids) => kids.as_slice(),
            _ => one,
        };
        let mut leaves: [Option<(&str, &LeafOp)>; MAX_LEAVES] = [None; MAX_LEAVES];
        for (slot, k) in leaves.iter_mut().zip(kids) {
            *slot = raw_leaf(k);
        }
        let mut values: [Option<RawBsonRef<'_>>; MAX_LEAVES] = [None; MAX_LEAVES];
        // The elements are read only until every field the filter names is found (the
        // leaves name at most `kids.len()` distinct fields).
        let mut missing = self.raw_fields;
        for e in doc {
            let (name, v) = e.ok()?;
            let mut found = false;
            for (l, slot) in leaves.iter().zip(values.iter_mut()) {
                if slot.is_none() && l.is_some_and(|(n, _)| n == name) {
                    *slot = Some(v);
                    found = true;
                }
            }
            missing -= usize::from(found);
            if missing == 0 {
                break;
            }
        }
        let mut ev = Eval {
            expr_eval: None,
            error: None,
        };
        for (l, v) in leaves.iter().zip(values) {
            let Some((_, op)) = l else { break };
            let v = match v {
                Some(RawBsonRef::Array(_)) => return None,
                Some(v) => Some(Bson::try_from(v).ok()?),
                None => None,
            };
            if !ev.single(op, v.as_ref(), &mut None) {
                return Some(false);
            }
        }
        Some(true)
    }
}
