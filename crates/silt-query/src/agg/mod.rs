//! Aggregation pipelines: parsing a list of stages once ([`parse_pipeline`]) and running it over
//! a stream of documents ([`Pipeline::run`]).
//!
//! Stages that look at one document at a time (`$match`, `$project`, `$addFields`/`$set`,
//! `$unset`, `$unwind`, `$lookup`, `$replaceRoot`/`$replaceWith`, `$redact`, `$skip`,
//! `$limit`, `$unionWith`) stream, so a `$limit` stops reading the input early; the others
//! (`$group`, `$sort`, `$count`, `$sortByCount`, `$bucket`, `$facet`, `$sample`) gather their
//! input first. `$sort` immediately followed by `$limit` keeps only the documents that can
//! still make the cut.
//!
//! The server drives a pipeline with the help of [`Pipeline::leading_match`] (a filter to push
//! into the collection scan; the pipeline still applies it) and
//! [`Pipeline::first_stage_name`]: a leading `$collStats` or `$indexStats` is the server's to
//! produce, and [`Pipeline::run`] passes its input through in its place. `$lookup` and
//! `$unionWith` read other collections of the database through [`AggContext`].
//!
//! Expressions in stages follow [`crate::expr`]; `$$NOW` is fixed for a whole run.

mod bind;
mod fill;
mod granularity;
mod graph;
mod group;
mod nacc;
mod project;
mod sort;
mod stages;
#[cfg(test)]
mod tests;
mod window;
mod window_fns;

use std::collections::HashMap;

use bson::{Bson, Document};

use crate::error::{QResult, QueryError};
use crate::expr::{eval_expr, type_name, Expr, Vars};
use crate::matcher::Matcher;

use group::{Accumulator, Bucket, Group};
use project::Projection;
use sort::SortSpec;
use stages::{Facet, Lookup, Unwind};

pub use bind::LetVars;
pub(crate) use nacc::eval_n;
pub(crate) use project::Projection as AggProjection;

/// What a pipeline may read besides its input: the other collections of the database.
pub trait AggContext {
    /// Every document of collection `coll` (none when it does not exist).
    fn scan_collection(&self, coll: &str) -> QResult<Vec<Document>>;
}

/// Collections held in memory, by name (tests, `$documents`-like uses).
impl AggContext for HashMap<String, Vec<Document>> {
    fn scan_collection(&self, coll: &str) -> QResult<Vec<Document>> {
        Ok(self.get(coll).cloned().unwrap_or_default())
    }
}

/// A context with no collections: `$lookup` finds nothing, `$unionWith` adds nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCollections;

impl AggContext for NoCollections {
    fn scan_collection(&self, _coll: &str) -> QResult<Vec<Document>> {
        Ok(Vec::new())
    }
}

/// A stream of documents between stages.
pub type DocStream<'a> = Box<dyn Iterator<Item = QResult<Document>> + 'a>;

/// Stages that only the server can produce, as the first stage.
const SERVER_STAGES: &[&str] = &[
    "$collStats",
    "$indexStats",
    "$listLocalSessions",
    "$planCacheStats",
];

/// Stages MongoDB has that SiltDB does not implement.
const UNSUPPORTED_STAGES: &[&str] = &[
    "$out",
    "$merge",
    "$geoNear",
    "$search",
    "$searchMeta",
    "$vectorSearch",
    "$currentOp",
    "$listSessions",
    "$listSearchIndexes",
    "$changeStreamSplitLargeEvent",
    "$shardedDataDistribution",
];

#[derive(Clone, Debug)]
enum Stage {
    Match {
        filter: Document,
        matcher: Matcher,
        /// The expression of a filter that is only `{$expr: ...}`, evaluated directly (parsed
        /// once, with the run's variables).
        expr: Option<Expr>,
    },
    Project(Projection),
    Group(Group),
    Sort {
        spec: SortSpec,
        /// A `$limit` that immediately follows.
        limit: Option<usize>,
    },
    Limit(usize),
    Skip(usize),
    Unwind(Unwind),
    Count(String),
    Lookup(Box<Lookup>),
    ReplaceRoot {
        expr: Expr,
        what: &'static str,
    },
    SortByCount(Group),
    Facet(Facet),
    Sample(usize),
    Bucket(Bucket),
    UnionWith {
        coll: String,
        pipeline: Pipeline,
    },
    Redact(Expr),
    /// `$documents`: the documents of an expression instead of the input (first stage only).
    Documents(Expr),
    SetWindowFields(window::SetWindowFields),
    GraphLookup(Box<graph::GraphLookup>),
    BucketAuto(graph::BucketAuto),
    Fill(Box<fill::Fill>),
    Densify(fill::Densify),
    /// `$collStats` / `$indexStats`: produced by the server.
    Server(Bson),
}

/// A parsed aggregation pipeline.
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    stages: Vec<(String, Stage)>,
}

/// Parse a pipeline.
pub fn parse_pipeline(stages: &[Document]) -> QResult<Pipeline> {
    let mut out: Vec<(String, Stage)> = Vec::with_capacity(stages.len());
    for (i, st) in stages.iter().enumerate() {
        let mut fields = st.iter();
        let (Some((name, spec)), None) = (fields.next(), fields.next()) else {
            return Err(QueryError::located(
                40323,
                "A pipeline stage specification object must contain exactly one field.",
            ));
        };
        let stage = parse_stage(name, spec, i == 0)?;
        if let (Stage::Limit(n), Some((_, Stage::Sort { limit, .. }))) = (&stage, out.last_mut()) {
            *limit = Some(limit.map_or(*n, |l: usize| l.min(*n)));
        }
        out.push((name.clone(), stage));
    }
    Ok(Pipeline { stages: out })
}

/// mongod's context on what goes wrong parsing a projection stage's specification: "Invalid
/// $project :: caused by :: ...". Errors in the stage's own shape (not an object, an empty or
/// non-string `$unset`) are not wrapped.
fn invalid(stage: &str, e: QueryError) -> QueryError {
    const SHAPE: [i32; 5] = [15969, 40272, 31002, 31119, 31120];
    if SHAPE.contains(&e.code) {
        e
    } else {
        e.context(&format!("Invalid {stage}"))
    }
}

fn parse_stage(name: &str, spec: &Bson, first: bool) -> QResult<Stage> {
    Ok(match name {
        "$match" => {
            let Bson::Document(filter) = spec else {
                return Err(QueryError::located(
                    15959,
                    "the match filter must be an expression in an object",
                ));
            };
            check_exprs(filter)?;
            let expr = match (filter.len(), filter.get("$expr")) {
                (1, Some(e)) => Some(Expr::parse(e)?),
                _ => None,
            };
            let matcher = Matcher::new_with_expr(filter, eval_expr)?;
            if !first && matcher.text().is_some() {
                return Err(QueryError::located(
                    17313,
                    "$match with $text is only allowed as the first pipeline stage",
                ));
            }
            Stage::Match {
                matcher,
                filter: filter.clone(),
                expr,
            }
        }
        "$project" => Stage::Project(Projection::project(spec).map_err(|e| invalid(name, e))?),
        "$addFields" | "$set" => {
            Stage::Project(Projection::add_fields(name, spec).map_err(|e| invalid(name, e))?)
        }
        "$unset" => Stage::Project(Projection::unset(spec).map_err(|e| invalid(name, e))?),
        "$group" => Stage::Group(Group::parse(spec)?),
        "$sort" => Stage::Sort {
            spec: SortSpec::parse(spec)?,
            limit: None,
        },
        "$limit" => Stage::Limit(parse_limit(spec)?),
        "$skip" => Stage::Skip(parse_skip(spec)?),
        "$unwind" => Stage::Unwind(Unwind::parse(spec)?),
        "$count" => Stage::Count(parse_count(spec)?),
        "$lookup" => Stage::Lookup(Box::new(Lookup::parse(spec)?)),
        "$replaceRoot" => {
            let Bson::Document(d) = spec else {
                return Err(QueryError::located(
                    40229,
                    format!(
                        "expected an object as specification for $replaceRoot stage, got {}",
                        type_name(Some(spec))
                    ),
                ));
            };
            let mut new_root = None;
            for (k, v) in d {
                if k != "newRoot" {
                    return Err(QueryError::located(
                        40415,
                        format!("BSON field '$replaceRoot.{k}' is an unknown field."),
                    ));
                }
                new_root = Some(v);
            }
            let new_root = new_root.ok_or_else(|| {
                QueryError::located(40231, "no newRoot specified for the $replaceRoot stage")
            })?;
            Stage::ReplaceRoot {
                expr: Expr::parse(new_root)?,
                what: "'newRoot' expression ",
            }
        }
        "$replaceWith" => Stage::ReplaceRoot {
            expr: Expr::parse(spec)?,
            what: "'replacement document' ",
        },
        "$sortByCount" => {
            let ok = match spec {
                Bson::String(s) => s.starts_with('$'),
                Bson::Document(d) => d.len() == 1 && d.keys().all(|k| k.starts_with('$')),
                _ => false,
            };
            if !ok {
                return Err(QueryError::located(
                    40147,
                    "the sortByCount field must be defined as a $-prefixed path or an expression",
                ));
            }
            Stage::SortByCount(Group::new(
                Expr::parse(spec)?,
                vec![Accumulator::count("count")],
            ))
        }
        "$facet" => Stage::Facet(Facet::parse(spec)?),
        "$sample" => Stage::Sample(stages::parse_sample(spec)?),
        "$bucket" => Stage::Bucket(Bucket::parse(spec)?),
        "$unionWith" => {
            let (coll, pipeline) = stages::parse_union_with(spec)?;
            Stage::UnionWith { coll, pipeline }
        }
        "$redact" => Stage::Redact(Expr::parse(spec)?),
        "$setWindowFields" => Stage::SetWindowFields(window::SetWindowFields::parse(spec)?),
        "$graphLookup" => Stage::GraphLookup(Box::new(graph::GraphLookup::parse(spec)?)),
        "$bucketAuto" => Stage::BucketAuto(graph::BucketAuto::parse(spec)?),
        "$fill" => Stage::Fill(Box::new(fill::Fill::parse(spec)?)),
        "$densify" => Stage::Densify(fill::Densify::parse(spec)?),
        "$documents" => {
            if !first {
                return Err(QueryError::located(
                    40602,
                    "$documents is only valid as the first stage in a pipeline",
                ));
            }
            Stage::Documents(Expr::parse(spec)?)
        }
        _ if SERVER_STAGES.contains(&name) => {
            if !first {
                return Err(QueryError::located(
                    40602,
                    format!("{name} is only valid as the first stage in a pipeline."),
                ));
            }
            Stage::Server(spec.clone())
        }
        _ if UNSUPPORTED_STAGES.contains(&name) => {
            return Err(QueryError::not_implemented(format!(
                "{name} is not supported"
            )))
        }
        _ => {
            return Err(QueryError::located(
                40324,
                format!("Unrecognized pipeline stage name: '{name}'"),
            ))
        }
    })
}

/// Parse the `$expr` expressions of a filter, so their errors are reported before any
/// document is read.
pub fn check_exprs(filter: &Document) -> QResult<()> {
    for (k, v) in filter {
        match (k.as_str(), v) {
            ("$expr", e) => {
                Expr::parse(e)?;
            }
            ("$and" | "$or" | "$nor", Bson::Array(items)) => {
                for item in items {
                    if let Bson::Document(d) = item {
                        check_exprs(d)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// An integral stage argument (`$limit`, `$skip`), `None` if not a whole number.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is checked to be integral and within +-9.2e18: exact"
)]
fn whole_number(v: &Bson) -> Option<i64> {
    match silt_bson::compare::as_num(v)? {
        silt_bson::compare::Num::Int(i) => Some(i),
        silt_bson::compare::Num::Float(f) if f.fract() == 0.0 && (-9.2e18..9.2e18).contains(&f) => {
            Some(f as i64)
        }
        silt_bson::compare::Num::Float(_) => None,
    }
}

fn parse_limit(spec: &Bson) -> QResult<usize> {
    if silt_bson::compare::as_num(spec).is_none() {
        return Err(QueryError::located(
            15957,
            "the limit must be specified as a number",
        ));
    }
    let n = whole_number(spec).ok_or_else(|| {
        QueryError::bad_value(format!(
            "invalid argument to $limit stage: Cannot represent as a 64-bit integer: $limit: {}",
            crate::expr::fmt_value(spec)
        ))
    })?;
    if n <= 0 {
        return Err(QueryError::located(15958, "the limit must be positive"));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

fn parse_skip(spec: &Bson) -> QResult<usize> {
    if silt_bson::compare::as_num(spec).is_none() {
        return Err(QueryError::located(
            15972,
            "Argument to $skip must be a number",
        ));
    }
    let n = whole_number(spec).ok_or_else(|| {
        QueryError::bad_value(format!(
            "invalid argument to $skip stage: Cannot represent as a 64-bit integer: $skip: {}",
            crate::expr::fmt_value(spec)
        ))
    })?;
    if n < 0 {
        return Err(QueryError::located(
            15956,
            "Argument to $skip cannot be negative",
        ));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

fn parse_count(spec: &Bson) -> QResult<String> {
    match spec {
        Bson::String(s) if !s.is_empty() => {
            if s.starts_with('$') {
                return Err(QueryError::located(
                    40158,
                    "the count field cannot be a $-prefixed path",
                ));
            }
            if s.contains('.') {
                return Err(QueryError::located(
                    40160,
                    "the count field cannot contain '.'",
                ));
            }
            Ok(s.clone())
        }
        _ => Err(QueryError::located(
            40156,
            "the count field must be a non-empty string",
        )),
    }
}

/// Collect a stream, stopping at the first error.
fn gather(input: DocStream<'_>) -> QResult<Vec<Document>> {
    input.collect()
}

fn from_vec<'a>(docs: Vec<Document>) -> DocStream<'a> {
    Box::new(docs.into_iter().map(Ok))
}

impl Pipeline {
    /// Run the pipeline over `input`; the output is materialised.
    pub fn run(
        &self,
        input: Box<dyn Iterator<Item = QResult<Document>> + '_>,
        ctx: &dyn AggContext,
    ) -> QResult<Vec<Document>> {
        let mut vars = Vars::new();
        vars.bind("NOW", Bson::DateTime(bson::DateTime::now()));
        self.stream(input, ctx, &vars).and_then(gather)
    }

    /// Run the pipeline over the one document `doc` with `$$NOW` = `now` (a pipeline-style
    /// update): its single output. A pipeline that drops the document is an error.
    pub fn run_one(&self, doc: Document, now: bson::DateTime) -> QResult<Document> {
        let mut vars = Vars::new();
        vars.bind("NOW", Bson::DateTime(now));
        let mut out = self.stream(from_vec(vec![doc]), &NoCollections, &vars)?;
        match out.next() {
            Some(d) => d,
            None => Err(QueryError::internal(
                "the update pipeline produced no document",
            )),
        }
    }

    /// The pipeline as a stream over `input`, evaluating with `vars`.
    fn stream<'a>(
        &'a self,
        input: DocStream<'a>,
        ctx: &'a dyn AggContext,
        vars: &'a Vars<'a>,
    ) -> QResult<DocStream<'a>> {
        let mut stream = input;
        for (_, stage) in &self.stages {
            stream = stage.apply(stream, ctx, vars)?;
        }
        Ok(stream)
    }

    /// The filter of a leading `$match`, which the caller may use to narrow the collection
    /// scan (the pipeline applies it regardless).
    /// The matcher of the leading `$match` (the one the planner binds a `$text` to).
    pub fn leading_matcher(&self) -> Option<&Matcher> {
        match self.stages.first() {
            Some((_, Stage::Match { matcher, .. })) => Some(matcher),
            _ => None,
        }
    }

    pub fn leading_match(&self) -> Option<&Document> {
        match self.stages.first() {
            Some((_, Stage::Match { filter, .. })) => Some(filter),
            _ => None,
        }
    }

    /// The name of the first stage (`""` for an empty pipeline). When it is `$collStats` or
    /// `$indexStats` the server must produce that stage's output and feed it as the input of
    /// [`Pipeline::run`], which passes it through.
    pub fn first_stage_name(&self) -> &str {
        self.stages.first().map_or("", |(n, _)| n.as_str())
    }

    /// The specification of a leading server-produced stage (`$collStats`, `$indexStats`).
    pub fn server_stage(&self) -> Option<(&str, &Bson)> {
        match self.stages.first() {
            Some((name, Stage::Server(spec))) => Some((name, spec)),
            _ => None,
        }
    }

    /// The stage names, in order.
    pub fn stage_names(&self) -> impl Iterator<Item = &str> {
        self.stages.iter().map(|(n, _)| n.as_str())
    }

    pub fn len(&self) -> usize {
        self.stages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }
}

impl Stage {
    fn apply<'a>(
        &'a self,
        input: DocStream<'a>,
        ctx: &'a dyn AggContext,
        vars: &'a Vars<'a>,
    ) -> QResult<DocStream<'a>> {
        Ok(match self {
            Stage::Match { expr: Some(e), .. } => Box::new(input.filter_map(move |r| match r {
                Ok(d) => match e.evaluate(&d, vars) {
                    Ok(v) if crate::expr::truthy(v.as_ref()) => Some(Ok(d)),
                    Ok(_) => None,
                    Err(err) => Some(Err(err)),
                },
                Err(e) => Some(Err(e)),
            })),
            Stage::Match { matcher, .. } => Box::new(input.filter_map(move |r| match r {
                Ok(d) => match matcher.try_matches(&d) {
                    Ok(true) => Some(Ok(d)),
                    Ok(false) => None,
                    Err(e) => Some(Err(e)),
                },
                Err(e) => Some(Err(e)),
            })),
            Stage::Project(p) => Box::new(input.map(move |r| r.and_then(|d| p.apply(&d, vars)))),
            Stage::Limit(n) => Box::new(input.take(*n)),
            Stage::Skip(n) => {
                let mut left = *n;
                Box::new(input.filter(move |r| {
                    if r.is_err() || left == 0 {
                        return true;
                    }
                    left -= 1;
                    false
                }))
            }
            Stage::Unwind(u) => Box::new(input.flat_map(move |r| match r {
                Ok(d) => u.apply(d),
                Err(e) => vec![Err(e)],
            })),
            Stage::Lookup(l) => l.apply(input, ctx, vars)?,
            Stage::ReplaceRoot { expr, what } => Box::new(
                input.map(move |r| r.and_then(|d| stages::replace_root(expr, what, &d, vars))),
            ),
            Stage::Redact(e) => Box::new(input.filter_map(move |r| match r {
                Ok(d) => stages::redact(e, &d, vars).transpose(),
                Err(e) => Some(Err(e)),
            })),
            Stage::UnionWith { coll, pipeline } => {
                let extra = std::iter::once(()).flat_map(move |()| {
                    let docs = ctx.scan_collection(coll).and_then(|docs| {
                        let mut sub_vars = Vars::new();
                        if let Some(now) = vars.get("NOW") {
                            sub_vars.bind("NOW", now.clone());
                        }
                        let s = pipeline.stream(from_vec(docs), ctx, &sub_vars)?;
                        gather(s)
                    });
                    match docs {
                        Ok(docs) => docs.into_iter().map(Ok).collect::<Vec<_>>(),
                        Err(e) => vec![Err(e)],
                    }
                });
                Box::new(input.chain(extra))
            }
            Stage::Server(_) => input,
            Stage::Documents(e) => {
                drop(input);
                from_vec(stages::documents(e, vars)?)
            }
            Stage::Group(g) => from_vec(g.run(input, vars)?),
            Stage::Sort { spec, limit } => from_vec(sort_limited(spec, *limit, input)?),
            Stage::Count(field) => {
                let mut n: i64 = 0;
                for r in input {
                    r?;
                    n += 1;
                }
                if n == 0 {
                    from_vec(Vec::new())
                } else {
                    let mut d = Document::new();
                    d.insert(
                        field.clone(),
                        i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32),
                    );
                    from_vec(vec![d])
                }
            }
            Stage::SortByCount(g) => {
                let groups = g.run(input, vars)?;
                from_vec(SortSpec::single("count", false).sort(groups))
            }
            Stage::Facet(f) => from_vec(vec![f.run(gather(input)?, ctx, vars)?]),
            Stage::Sample(n) => from_vec(stages::sample(gather(input)?, *n)),
            Stage::Bucket(b) => from_vec(b.run(input, vars)?),
            Stage::SetWindowFields(w) => from_vec(w.run(gather(input)?, vars)?),
            Stage::GraphLookup(g) => g.apply(input, ctx, vars)?,
            Stage::BucketAuto(b) => from_vec(b.run(input, vars)?),
            Stage::Fill(f) => from_vec(f.run(gather(input)?, vars)?),
            Stage::Densify(d) => from_vec(d.run(gather(input)?)?),
        })
    }
}

/// Sort a stream; with a limit, keep only the best `limit` documents as they arrive.
fn sort_limited(
    spec: &SortSpec,
    limit: Option<usize>,
    input: DocStream<'_>,
) -> QResult<Vec<Document>> {
    let mut keyed: Vec<(Vec<Bson>, Document, usize)> = Vec::new();
    let cap = limit.map(|l| l.max(1));
    let mut budget = crate::memory::Budget::new(crate::memory::Use::Sort);
    for r in input {
        let d = r?;
        let size = crate::memory::doc_size(&d);
        budget.charge(size)?;
        keyed.push((spec.key(&d), d, size));
        if let Some(cap) = cap {
            if keyed.len() > cap
                && (keyed.len() >= cap.saturating_mul(2).max(1024)
                    || (budget.past_half() && keyed.len() > cap + cap / 4))
            {
                keyed.sort_by(|a, b| spec.compare_keys(&a.0, &b.0));
                for (_, _, n) in keyed.drain(cap..) {
                    budget.release(n);
                }
            }
        }
    }
    keyed.sort_by(|a, b| spec.compare_keys(&a.0, &b.0));
    if let Some(cap) = cap {
        keyed.truncate(cap);
    }
    Ok(keyed.into_iter().map(|(_, d, _)| d).collect())
}
