//! Query planning in value space: which access path answers a filter, the bounds it reads,
//! whether it yields the requested order or covers the query, and `explain`'s description of
//! it.
//!
//! The planner sees a collection's secondary indexes as [`IndexInfo`]s (field names and
//! directions, unique, sparse, partial and clustering, plus the two flags that change with the
//! data: multikey and coverable) and answers with a [`Choice`] whose bounds are values and
//! intervals of values ([`IndexScan`], [`Access`]). It knows nothing of storage or of how keys
//! are laid out in bytes: `silt-collection` turns a choice into key ranges and reads them.
//!
//! - `bounds.rs`: the bounds a filter's top-level conjunction puts on an index's fields
//!   ([`IndexScan`]), on `_id` ([`Access`]), and whether they answer the whole filter.
//! - `choose.rs`: the fixed rules that pick a plan ([`choose`]), what a query reads
//!   ([`needed_paths`]) and whether an index holds it ([`covers`]), the exact scans of fast
//!   counts and fast updates ([`exact_scan`]).
//! - `explain.rs`: the `winningPlan` document, with MongoDB's stage names.
//! - `sort.rs`: sort specifications of `find` and `findAndModify` ([`SortSpec`]).

mod bounds;
mod choose;
mod explain;
pub(crate) mod sort;

use bson::{Bson, Document};

pub use bounds::collation_sensitive;
pub use bounds::{access_for, conjuncts, Access, IndexScan, Interval, ValueBound, MAX_RANGES};
pub use choose::{choose, choose_over, covers, exact_scan, needed_paths};
pub use explain::explain_plan;
pub use sort::{sort_value, SortSpec};

/// A secondary index as the planner sees it: its spec, and the flags that change with the
/// data. Plans name indexes by their position in the slice the planner was given.
#[derive(Debug, Clone, Copy)]
pub struct IndexInfo<'a> {
    pub name: &'a str,
    /// The key pattern as given.
    pub key_pattern: &'a Document,
    /// Fields and directions (`true` = descending).
    pub fields: &'a [(String, bool)],
    pub unique: bool,
    pub sparse: bool,
    /// `partialFilterExpression`, if the index is partial.
    pub partial: Option<&'a Document>,
    /// Entries carry the whole document.
    pub clustering: bool,
    /// Some document had an array along an indexed path: an entry may stand for one element.
    pub multikey: bool,
    /// An entry can stand in for its document (see `covers`).
    pub coverable: bool,
    /// The index's collation: its entries hold `Collation::key` of each string.
    pub collation: Option<&'a std::sync::Arc<crate::collation::Collation>>,
}

impl IndexInfo<'_> {
    /// Does this index order strings as the command running now compares them?
    pub fn collation_matches_query(&self) -> bool {
        let query = silt_bson::compare::current_collation();
        match (self.collation, &query) {
            (None, None) => true,
            (Some(c), Some(q)) => c.resolved() == q.spec(),
            _ => false,
        }
    }
}

/// The fields and directions (`true` = descending) of an index key pattern, or why it is
/// refused (the message `createIndexes` reports).
pub fn parse_key_pattern(key: &Document) -> Result<Vec<(String, bool)>, String> {
    if key.is_empty() {
        return Err("Index keys cannot be empty.".into());
    }
    let mut fields: Vec<(String, bool)> = Vec::new();
    for (k, v) in key {
        if k.is_empty() || k.starts_with('$') || k.split('.').any(str::is_empty) {
            return Err(format!("Index key contains an illegal field name: '{k}'"));
        }
        let desc = match v {
            Bson::Int32(i) if *i != 0 => *i < 0,
            Bson::Int64(i) if *i != 0 => *i < 0,
            Bson::Double(d) if *d != 0.0 && d.is_finite() => *d < 0.0,
            Bson::String(s) => {
                return Err(format!(
                    "siltd does not support '{s}' indexes (field '{k}')"
                ))
            }
            other => {
                return Err(format!(
                    "Values in the index key pattern can't be 0 or non-numbers: {k}: {other}"
                ))
            }
        };
        if fields.iter().any(|(f, _)| f == k) {
            return Err(format!("duplicate field in index key: {k}"));
        }
        fields.push((k.clone(), desc));
    }
    Ok(fields)
}

/// The chosen access path for a query.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Plan {
    /// `_id` points, `_id` range or full scan.
    Primary(Access),
    /// One index scan, or a union of several (`$or`), fetching by `_id`.
    Index(Vec<IndexScan>),
}

/// A plan, whether it already yields the requested sort order, and whether it is covered.
#[derive(Debug, Clone)]
pub struct Choice {
    pub plan: Plan,
    pub sorted: bool,
    pub covered: Option<Covered>,
}

impl Choice {
    /// Read everything, in `_id` order.
    pub fn full_scan() -> Choice {
        Choice {
            plan: Plan::Primary(Access::FullScan),
            sorted: false,
            covered: None,
        }
    }
}

/// A plan answered from index entries alone (one scan of an index that [`covers`] what the
/// query reads).
#[derive(Debug, Clone, Copy)]
pub struct Covered {
    /// The bounds answer the whole filter: no predicate is re-checked.
    pub exact: bool,
}

#[cfg(test)]
mod tests;
