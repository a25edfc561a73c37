//! The parts of a `find` that shape its result, shared by `find` and `explain`.

use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document};
use silt_collection::{Collection, Planned};
use silt_query::agg::LetVars;
use silt_query::matcher::Matcher;
use silt_query::plan::{self, SortSpec};
use silt_query::projection::Projection;
use silt_query::{QResult, QueryError};

use super::common::{check_hint, deadline, doc_arg, new_matcher, non_negative};

/// The parts of a query that shape its result.
pub(super) struct Query {
    pub(super) filter: Document,
    pub(super) matcher: Arc<Matcher>,
    pub(super) sort: Option<SortSpec>,
    pub(super) skip: u64,
    pub(super) limit: Option<u64>,
    pub(super) projection: Option<Projection>,
    /// The projection as given (for explain).
    pub(super) projection_spec: Option<Document>,
    pub(super) deadline: Option<Instant>,
    pub(super) hint: Option<Bson>,
    /// `sort` or `hint` `{$natural: ±1}`: the collection's storage order (ascending or not),
    /// turned into a sort on its primary key by [`Query::resolve_natural`].
    pub(super) natural: Option<bool>,
    /// A capped collection read in reverse insertion order: the results are reversed.
    pub(super) reverse: bool,
    /// Projected fields that take the `$text` score (`{$meta: "textScore"}`).
    pub(super) text_meta: Vec<String>,
}

impl Query {
    /// Make a `$natural` order a sort on `coll`'s primary key (its storage order).
    pub(super) fn resolve_natural(&mut self, coll: &Collection) {
        if let (Some(asc), true) = (self.natural, coll.primary_key().is_natural()) {
            // Insertion order is the primary tree's order: a full scan, reversed if asked.
            self.hint = Some(Bson::Document(bson::doc! { "$natural": 1 }));
            self.sort = None;
            self.reverse = !asc;
            return;
        }
        if let Some(asc) = self.natural {
            self.sort = Some(SortSpec(
                coll.primary_key()
                    .fields()
                    .iter()
                    .map(|f| (f.clone(), asc))
                    .collect(),
            ));
        }
    }

    /// The plan for this query over `coll` (covered when an index holds all it reads).
    pub(super) fn choose(&self, coll: &Collection) -> QResult<Planned> {
        let output = self
            .projection
            .as_ref()
            .and_then(Projection::included_paths);
        let needs = plan::needed_paths(&self.matcher, self.sort.as_ref(), output);
        coll.plan(
            &self.filter,
            &self.matcher,
            self.sort.as_ref(),
            self.hint.as_ref(),
            needs.as_deref(),
        )
    }
}

/// `find`'s `filter`, `sort` and `projection` (mongod's words for another type); other
/// commands name the field as their parser does.
fn object_arg<'a>(cmd: &'a Document, name: &str) -> QResult<Option<&'a Document>> {
    let is_find = cmd.keys().next().is_some_and(|k| k == "find");
    match cmd.get(name) {
        Some(v) if is_find && !matches!(v, Bson::Document(_) | Bson::Null) => Err(
            QueryError::type_mismatch(format!("Expected field {name}to be of type object")),
        ),
        _ => doc_arg(cmd, name),
    }
}

pub(super) fn parse_query(cmd: &Document, filter_field: &str) -> QResult<Query> {
    let lets = LetVars::parse(cmd.get("let"), "find", bson::DateTime::now())?;
    let filter = lets.filter(&object_arg(cmd, filter_field)?.cloned().unwrap_or_default());
    let matcher = Arc::new(new_matcher(&filter)?);
    let natural_dir = |v: &Bson| -> QResult<bool> {
        match silt_bson::compare::as_num(v) {
            Some(silt_bson::compare::Num::Int(1)) => Ok(true),
            Some(silt_bson::compare::Num::Int(-1)) => Ok(false),
            Some(silt_bson::compare::Num::Float(f)) if f == 1.0 || f == -1.0 => Ok(f > 0.0),
            _ => Err(QueryError::bad_value("$natural must be 1 or -1")),
        }
    };
    let mut natural = None;
    let sort = match object_arg(cmd, "sort")? {
        Some(s) if s.contains_key("$natural") => {
            if s.len() > 1 {
                return Err(QueryError::bad_value(
                    "$natural sort cannot be combined with other sort fields",
                ));
            }
            natural = Some(natural_dir(s.get("$natural").unwrap_or(&Bson::Null))?);
            None
        }
        Some(s) if !s.is_empty() => Some(SortSpec::parse(s)?),
        _ => None,
    };
    if let (None, None, Some(Bson::Document(h))) = (&sort, natural, cmd.get("hint")) {
        if let Some(d) = h.get("$natural") {
            natural = Some(natural_dir(d)?);
        }
    }
    let projection_spec = object_arg(cmd, "projection")?
        .filter(|p| !p.is_empty())
        .cloned();
    // `{$meta: "textScore"}` fields are added after projecting (they neither include nor
    // exclude); the rest is an ordinary projection.
    let mut text_meta = Vec::new();
    let mut rest = Document::new();
    for (k, v) in projection_spec.iter().flatten() {
        match v {
            Bson::Document(m) if m.len() == 1 && m.contains_key("$meta") => {
                if m.get_str("$meta") != Ok("textScore") {
                    return Err(QueryError::not_implemented(format!(
                        "$meta {} in a find projection is not supported (only textScore)",
                        m.get("$meta").cloned().unwrap_or(Bson::Null)
                    )));
                }
                text_meta.push(k.clone());
            }
            _ => {
                rest.insert(k.clone(), v.clone());
            }
        }
    }
    let wants_score = !text_meta.is_empty()
        || sort
            .as_ref()
            .is_some_and(|s| s.0.iter().any(|(p, _)| p == silt_query::text::SCORE_FIELD));
    if wants_score && matcher.text().is_none() {
        return Err(QueryError::located(
            40218,
            "query requires text score metadata, but it is not available",
        ));
    }
    let projection = (!rest.is_empty())
        .then(|| Projection::new(&rest))
        .transpose()?;
    check_hint(cmd)?;
    Ok(Query {
        filter,
        matcher,
        sort,
        skip: non_negative(cmd, "skip")?.unwrap_or(0),
        limit: non_negative(cmd, "limit")?.filter(|l| *l > 0),
        projection,
        projection_spec,
        deadline: deadline(cmd)?,
        hint: cmd
            .get("hint")
            .filter(|h| !matches!(h, Bson::Null))
            .cloned(),
        natural,
        reverse: false,
        text_meta,
    })
}
