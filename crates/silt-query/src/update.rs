//! MongoDB update documents: parsing and applying replacements and update operators.
//!
//! [`UpdateSpec::parse`] turns an update document into either a replacement or a set of
//! operators: `$set $unset $inc $mul $min $max $rename $setOnInsert $currentDate $push`
//! (`$each $slice $sort $position`) `$pull $pullAll $addToSet` (`$each`) `$pop $bit`, on
//! dotted paths with the positional `$`, `$[]` and `$[<identifier>]` (with `arrayFilters`).
//! Parsing reports MongoDB's errors (codes and messages): unknown modifiers, conflicting
//! paths, malformed arguments, unused or missing array filters.
//!
//! The operators form a tree in MongoDB's manner: one node per path component, children
//! applied in field-name order (array indexes numerically), so fields an update creates are
//! appended in that order whatever the order in the update document. [`UpdateSpec::apply`]
//! runs it on a copy of a document and says whether anything changed (a `$set` to the same
//! value of the same type is a no-op); [`UpdateSpec::apply_to_new`] builds the document an
//! upsert inserts from the seed the caller derived from the query's equalities.
//!
//! `$pull` conditions and array filters are compiled into the query matcher when the update is
//! parsed (`pull.rs`): one evaluator for every path that applies an update.
//! Pipeline-style updates ([`UpdateSpec::parse_pipeline`]) run the aggregation stages MongoDB
//! allows there and replace the document with the result, keeping its `_id`.

mod apply;
mod arith;
mod fmt;
mod parse;
mod pull;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use bson::{Bson, DateTime, Document, Timestamp};
use silt_bson::compare::values_equal;

use crate::error::{QResult, QueryError};

/// What an update needs to know besides the document.
#[derive(Clone, Copy, Debug)]
pub struct UpdateCtx {
    /// The document is being inserted by an upsert: `$setOnInsert` applies.
    pub is_insert: bool,
    /// The index of the first array element the query matched, for the positional `$`.
    pub positional: Option<usize>,
    /// The time `$currentDate` writes.
    pub now: DateTime,
    /// The timestamp `$currentDate: {$type: "timestamp"}` writes; by default `now` in
    /// seconds with increment 1.
    pub timestamp: Option<Timestamp>,
}

impl UpdateCtx {
    /// An update of an existing document at time `now`, with no positional match and no
    /// matcher.
    pub fn new(now: DateTime) -> Self {
        UpdateCtx {
            is_insert: false,
            positional: None,
            now,
            timestamp: None,
        }
    }
}

impl Default for UpdateCtx {
    fn default() -> Self {
        UpdateCtx::new(DateTime::now())
    }
}

/// A parsed update document.
#[derive(Clone, Debug)]
pub enum UpdateSpec {
    /// A whole new document (it keeps the original `_id`).
    Replacement(Document),
    /// Update operators.
    Operators(UpdateOps),
    /// An aggregation pipeline of `$addFields`/`$set`, `$project`, `$unset`,
    /// `$replaceRoot`/`$replaceWith`; its output replaces the document (keeping `_id`).
    Pipeline(crate::agg::Pipeline),
}

/// The stages a pipeline-style update may use.
const UPDATE_STAGES: &[&str] = &[
    "$addFields",
    "$set",
    "$project",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
];

/// Parsed update operators (see [`UpdateSpec::parse`]).
#[derive(Clone, Debug)]
pub struct UpdateOps {
    root: parse::ObjectNode,
    /// Array filters by identifier.
    filters: BTreeMap<String, pull::ArrayFilter>,
    positional: bool,
    touched: Vec<String>,
}

const DOLLAR_IN_REPLACEMENT: &str = "is not allowed in the context of an update's replacement \
                                     document. Consider using an aggregation pipeline with \
                                     $replaceWith.";

impl UpdateSpec {
    /// Parse an update document: operators when its first field starts with `$` (every field
    /// must then be a known operator), a replacement otherwise (with no `$`-prefixed
    /// top-level field). `array_filters` are the command's `arrayFilters`.
    pub fn parse(update: &Document, array_filters: Option<&[Document]>) -> QResult<UpdateSpec> {
        if update.keys().next().is_some_and(|k| k.starts_with('$')) {
            return parse::parse_operators(update, array_filters).map(UpdateSpec::Operators);
        }
        if array_filters.is_some_and(|f| !f.is_empty()) {
            return Err(QueryError::failed_to_parse(
                "arrayFilters may not be specified for replacement updates",
            ));
        }
        if let Some(k) = update.keys().find(|k| k.starts_with('$')) {
            return Err(QueryError::dollar_prefixed_field_name(format!(
                "The dollar ($) prefixed field '{k}' in '{k}' {DOLLAR_IN_REPLACEMENT}"
            )));
        }
        Ok(UpdateSpec::Replacement(update.clone()))
    }

    /// Parse a pipeline-style update (`u` given as an array of stages). Command `let`
    /// variables must already be bound into the stages (`agg::LetVars::stages`).
    pub fn parse_pipeline(
        stages: &[Bson],
        array_filters: Option<&[Document]>,
    ) -> QResult<UpdateSpec> {
        if array_filters.is_some_and(|f| !f.is_empty()) {
            return Err(QueryError::failed_to_parse(
                "arrayFilters may not be specified for pipeline-style updates",
            ));
        }
        let mut docs = Vec::with_capacity(stages.len());
        for st in stages {
            let Bson::Document(d) = st else {
                return Err(QueryError::type_mismatch(
                    "Each element of the 'pipeline' array must be an object",
                ));
            };
            docs.push(d.clone());
        }
        let pipeline = crate::agg::parse_pipeline(&docs)?;
        if let Some(bad) = pipeline.stage_names().find(|n| !UPDATE_STAGES.contains(n)) {
            return Err(QueryError::invalid_options(format!(
                "{bad} is not allowed to be used within an update"
            )));
        }
        Ok(UpdateSpec::Pipeline(pipeline))
    }

    pub fn is_replacement(&self) -> bool {
        matches!(self, UpdateSpec::Replacement(_))
    }

    /// Whether the update uses the positional `$` (so the caller must supply
    /// [`UpdateCtx::positional`]).
    pub fn uses_positional(&self) -> bool {
        matches!(self, UpdateSpec::Operators(ops) if ops.positional)
    }

    /// The paths the update may modify, as dotted paths cut before the first positional,
    /// array-filter or numeric component (so `a.$.b` and `a.0.b` give `a`, and a `$rename`
    /// gives both its paths). An index is affected when one of these paths and the indexed
    /// path are equal or one is a prefix of the other. A replacement may change every field:
    /// it lists its own top-level fields, and callers should treat it as touching all.
    pub fn touched_paths(&self) -> Vec<String> {
        match self {
            UpdateSpec::Replacement(d) => d.keys().cloned().collect(),
            UpdateSpec::Operators(ops) => ops.touched.clone(),
            UpdateSpec::Pipeline(_) => vec![String::new()],
        }
    }

    /// Apply the update to (a copy of) `doc`: the new document and whether it differs.
    pub fn apply(&self, doc: &Document, ctx: &UpdateCtx) -> QResult<(Document, bool)> {
        match self {
            UpdateSpec::Replacement(r) => {
                let new = replace(doc, r)?;
                let changed = !apply::identical_docs(doc, &new);
                Ok((new, changed))
            }
            UpdateSpec::Operators(ops) => apply::Applier::run(ops, ctx, doc.clone(), ctx.is_insert),
            UpdateSpec::Pipeline(p) => {
                let new = replace(doc, &p.run_one(doc.clone(), ctx.now)?)?;
                let changed = !apply::identical_docs(doc, &new);
                Ok((new, changed))
            }
        }
    }

    /// The document an upsert inserts: `seed` (the query's equality fields, built by the
    /// caller) updated as an insert (`$setOnInsert` applies whatever `ctx.is_insert` says).
    /// A replacement keeps only the seed's `_id`. `_id`, when present, comes first; the
    /// caller generates one when it is missing.
    pub fn apply_to_new(&self, seed: Document, ctx: &UpdateCtx) -> QResult<Document> {
        let doc = match self {
            UpdateSpec::Replacement(r) => {
                let mut base = Document::new();
                if let Some(id) = seed.get("_id") {
                    base.insert("_id", id.clone());
                }
                replace(&base, r)?
            }
            UpdateSpec::Operators(ops) => apply::Applier::run(ops, ctx, seed, true)?.0,
            UpdateSpec::Pipeline(p) => {
                let out = p.run_one(seed.clone(), ctx.now)?;
                replace(&seed, &out)?
            }
        };
        let doc = id_first(doc);
        check_id(&doc)?;
        Ok(doc)
    }
}

/// The replacement with the original `_id`, which it may not change.
fn replace(doc: &Document, replacement: &Document) -> QResult<Document> {
    let mut out = Document::new();
    match (doc.get("_id"), replacement.get("_id")) {
        (Some(old), Some(new)) if !values_equal(old, new) => {
            return Err(QueryError::immutable_field(format!(
                "After applying the update, the (immutable) field '_id' was found to have been \
                 altered to {}",
                fmt::elem("_id", new)
            )))
        }
        (_, Some(id)) | (Some(id), None) => {
            out.insert("_id", id.clone());
        }
        (None, None) => {}
    }
    for (k, v) in replacement {
        if k != "_id" {
            out.insert(k.clone(), v.clone());
        }
    }
    check_id(&out)?;
    Ok(out)
}

fn id_first(mut doc: Document) -> Document {
    if doc.keys().next().is_some_and(|k| k == "_id") {
        return doc;
    }
    let Some(id) = doc.remove("_id") else {
        return doc;
    };
    let mut out = Document::new();
    out.insert("_id", id);
    out.extend(doc);
    out
}

/// `_id` may not be an array, a regex or undefined.
fn check_id(doc: &Document) -> QResult<()> {
    match doc.get("_id") {
        Some(v @ (Bson::Array(_) | Bson::RegularExpression(_) | Bson::Undefined)) => {
            Err(QueryError::invalid_id_field(format!(
                "The '_id' value cannot be of type {}",
                fmt::type_name(v)
            )))
        }
        _ => Ok(()),
    }
}
