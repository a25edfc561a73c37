//! `$sort` (and the ordering of `$sortByCount`, `$bucket`): MongoDB's sort keys.
//!
//! The key of a document for a path is chosen among the values the path reaches: through
//! arrays of documents, and into the elements of an array at the end of the path. Ascending
//! sorts use the smallest of them, descending the largest; a missing field (or a document in
//! an array without it) counts as `null`, and an empty array sorts below `null`. Keys compare
//! in MongoDB's cross-type order, and the sort is stable.

use std::cmp::Ordering;

use bson::{Bson, Document};
use silt_bson::compare::cmp_collated as cmp_values;
use silt_bson::path::{any_value, FieldPath, LeafArrays};

use crate::error::{QResult, QueryError};

/// A parsed sort specification.
#[derive(Clone, Debug)]
pub(crate) struct SortSpec {
    keys: Vec<(FieldPath, bool)>,
}

impl SortSpec {
    pub(crate) fn parse(spec: &Bson) -> QResult<SortSpec> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::located(
                15973,
                "the $sort key specification must be an object",
            ));
        };
        if d.is_empty() {
            return Err(QueryError::located(
                15976,
                "$sort stage must have at least one sort key",
            ));
        }
        let mut keys = Vec::with_capacity(d.len());
        for (k, v) in d {
            let asc = match v {
                // A `$text` match's score, highest first.
                Bson::Document(m) if m.len() == 1 && m.get_str("$meta") == Ok("textScore") => {
                    keys.push((FieldPath::new(crate::text::SCORE_FIELD), false));
                    continue;
                }
                Bson::Document(_) => {
                    return Err(QueryError::not_implemented(
                        "$meta sort keys other than textScore are not supported",
                    ))
                }
                _ => crate::plan::sort::key_direction(k, v)?,
            };
            if k.is_empty() || k.split('.').any(str::is_empty) {
                return Err(QueryError::located(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ));
            }
            keys.push((FieldPath::new(k), asc));
        }
        Ok(SortSpec { keys })
    }

    /// A sort on one path.
    pub(crate) fn single(path: &str, ascending: bool) -> SortSpec {
        SortSpec {
            keys: vec![(FieldPath::new(path), ascending)],
        }
    }

    /// The sort key of `doc`: one value per sort field.
    /// The number of sort fields.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(crate) fn key(&self, doc: &Document) -> Vec<Bson> {
        self.keys
            .iter()
            .map(|(path, asc)| key_for_path(doc, path, *asc))
            .collect()
    }

    pub(crate) fn compare_keys(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), (_, asc)) in a.iter().zip(b).zip(&self.keys) {
            let o = cmp_values(x, y);
            if o != Ordering::Equal {
                return if *asc { o } else { o.reverse() };
            }
        }
        Ordering::Equal
    }

    /// Sort `docs` stably.
    pub(crate) fn sort(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut keyed: Vec<(Vec<Bson>, Document)> =
            docs.into_iter().map(|d| (self.key(&d), d)).collect();
        keyed.sort_by(|a, b| self.compare_keys(&a.0, &b.0));
        keyed.into_iter().map(|(_, d)| d).collect()
    }
}

fn key_for_path(doc: &Document, path: &FieldPath, asc: bool) -> Bson {
    let mut best: Option<Bson> = None;
    let mut consider = |v: &Bson| {
        let better = match &best {
            None => true,
            Some(b) => {
                let o = cmp_values(v, b);
                if asc {
                    o == Ordering::Less
                } else {
                    o == Ordering::Greater
                }
            }
        };
        if better {
            best = Some(v.clone());
        }
    };
    any_value(doc, path, LeafArrays::NoTraversal, &mut |c| {
        match c.value {
            None => consider(&Bson::Null),
            Some(Bson::Array(a)) if a.is_empty() => consider(&Bson::Undefined),
            Some(Bson::Array(a)) => a.iter().for_each(&mut consider),
            Some(v) => consider(v),
        }
        false
    });
    best.unwrap_or(Bson::Null)
}
