//! The parts of a `find` that shape its result, shared by `find` and `explain`.

use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document};
use silt_collection::{Collection, Planned};
use silt_query::agg::LetVars;
use silt_query::matcher::Matcher;
use silt_query::plan::{self, SortSpec};
use silt_query::projection::Projection;
use silt_query::QResult;

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
}

impl Query {
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

pub(super) fn parse_query(cmd: &Document, filter_field: &str) -> QResult<Query> {
    let lets = LetVars::parse(cmd.get("let"), "find", bson::DateTime::now())?;
    let filter = lets.filter(&doc_arg(cmd, filter_field)?.cloned().unwrap_or_default());
    let matcher = Arc::new(new_matcher(&filter)?);
    let sort = match doc_arg(cmd, "sort")? {
        Some(s) if !s.is_empty() => Some(SortSpec::parse(s)?),
        _ => None,
    };
    let projection_spec = doc_arg(cmd, "projection")?
        .filter(|p| !p.is_empty())
        .cloned();
    let projection = projection_spec.as_ref().map(Projection::new).transpose()?;
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
    })
}
