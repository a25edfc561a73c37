//! The document-shaping stages: `$unwind`, `$lookup`, `$facet`, `$sample`, `$unionWith`,
//! `$replaceRoot`/`$replaceWith` and `$redact`, with the nested-field helpers they share.

use bson::{doc, Bson, Document};
use silt_bson::path::{any_value, FieldPath, LeafArrays};

use super::bind::bind_stage;
use super::{from_vec, gather, parse_pipeline, AggContext, DocStream, Pipeline, Stage};
use crate::error::{QResult, QueryError};
use crate::expr::{fmt_doc, fmt_value, type_name, Expr, Vars};
use crate::matcher::Matcher;

/// The value at `parts` through documents only (no array traversal).
fn get_in_docs<'a>(d: &'a Document, parts: &[String]) -> Option<&'a Bson> {
    let (first, rest) = parts.split_first()?;
    let v = d.get(first)?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        Bson::Document(sub) => get_in_docs(sub, rest),
        _ => None,
    }
}

/// Set the field at `parts`, creating (or replacing non-documents with) sub-documents on the way.
pub(crate) fn set_path(d: &mut Document, parts: &[String], v: Bson) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        d.insert(first.clone(), v);
        return;
    }
    if let Some(Bson::Document(sub)) = d.get_mut(first) {
        set_path(sub, rest, v);
        return;
    }
    let mut sub = Document::new();
    set_path(&mut sub, rest, v);
    d.insert(first.clone(), sub);
}

fn remove_path(d: &mut Document, parts: &[String]) {
    match parts {
        [] => {}
        [last] => {
            d.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Bson::Document(sub)) = d.get_mut(first) {
                remove_path(sub, rest);
            }
        }
    }
}

/// A parsed `$unwind`.
#[derive(Clone, Debug)]
pub(crate) struct Unwind {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve: bool,
}

impl Unwind {
    pub(crate) fn parse(spec: &Bson) -> QResult<Unwind> {
        let (path, index, preserve) = match spec {
            Bson::String(s) => (s.clone(), None, false),
            Bson::Document(d) => {
                let (mut path, mut index, mut preserve) = (None, None, false);
                for (k, v) in d {
                    match (k.as_str(), v) {
                        ("path", Bson::String(s)) => path = Some(s.clone()),
                        ("path", other) => {
                            return Err(QueryError::located(
                                28808,
                                format!(
                                    "expected a string as the path for $unwind stage, got {}",
                                    type_name(Some(other))
                                ),
                            ))
                        }
                        ("includeArrayIndex", Bson::String(s)) if !s.is_empty() => {
                            index = Some(s.clone())
                        }
                        ("includeArrayIndex", other) => {
                            return Err(QueryError::located(
                                28810,
                                format!(
                                    "expected a non-empty string for the includeArrayIndex  \
                                     option to $unwind stage, got {}",
                                    type_name(Some(other))
                                ),
                            ))
                        }
                        ("preserveNullAndEmptyArrays", Bson::Boolean(b)) => preserve = *b,
                        ("preserveNullAndEmptyArrays", other) => {
                            return Err(QueryError::located(
                                28809,
                                format!(
                                    "expected a boolean for the preserveNullAndEmptyArrays \
                                     option to $unwind stage, got {}",
                                    type_name(Some(other))
                                ),
                            ))
                        }
                        (other, _) => {
                            return Err(QueryError::located(
                                28811,
                                format!("unrecognized option to $unwind stage: {other}"),
                            ))
                        }
                    }
                }
                let path = path.ok_or_else(|| {
                    QueryError::located(28812, "no path specified to $unwind stage")
                })?;
                (path, index, preserve)
            }
            other => {
                return Err(QueryError::located(
                    15981,
                    format!(
                        "expected either a string or an object as specification for $unwind \
                         stage, got {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        let Some(rest) = path.strip_prefix('$') else {
            return Err(QueryError::located(
                28818,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        let index_field = match index {
            Some(i) if i.starts_with('$') => {
                return Err(QueryError::located(
                    28822,
                    format!(
                        "includeArrayIndex option to $unwind stage should not be prefixed with a \
                         '$': {i}"
                    ),
                ))
            }
            Some(i) => Some(crate::expr::path_parts(&i)?),
            None => None,
        };
        Ok(Unwind {
            path: crate::expr::path_parts(rest)?,
            index_field,
            preserve,
        })
    }

    pub(crate) fn apply(&self, mut d: Document) -> Vec<QResult<Document>> {
        let with_index = |mut d: Document, i: Bson| {
            if let Some(f) = &self.index_field {
                set_path(&mut d, f, i);
            }
            Ok(d)
        };
        match get_in_docs(&d, &self.path) {
            Some(Bson::Array(a)) if !a.is_empty() => {
                let items = a.clone();
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let mut out = d.clone();
                        set_path(&mut out, &self.path, e);
                        with_index(out, Bson::Int64(i as i64))
                    })
                    .collect()
            }
            Some(Bson::Array(_)) => {
                if !self.preserve {
                    return Vec::new();
                }
                remove_path(&mut d, &self.path);
                vec![with_index(d, Bson::Null)]
            }
            None | Some(Bson::Null | Bson::Undefined) => {
                if self.preserve {
                    vec![with_index(d, Bson::Null)]
                } else {
                    Vec::new()
                }
            }
            Some(_) => vec![with_index(d, Bson::Null)],
        }
    }
}

/// A parsed `$lookup`.
#[derive(Clone, Debug)]
pub(crate) struct Lookup {
    from: String,
    fields: Option<(String, String)>,
    as_path: Vec<String>,
    /// The sub-pipeline, parsed (when it uses no `let` variables).
    pipeline: Option<Pipeline>,
    /// The `let` variables and the raw sub-pipeline they are substituted into.
    let_vars: Vec<(String, Expr)>,
    raw_pipeline: Vec<Document>,
}

fn pipeline_docs(v: &Bson, what: &str) -> QResult<Vec<Document>> {
    let Bson::Array(stages) = v else {
        return Err(QueryError::failed_to_parse(format!(
            "{what} must be an array, is type {}",
            type_name(Some(v))
        )));
    };
    stages
        .iter()
        .map(|s| match s {
            Bson::Document(sd) => Ok(sd.clone()),
            other => Err(QueryError::type_mismatch(format!(
                "Each element of the 'pipeline' array must be an object, but found {}",
                type_name(Some(other))
            ))),
        })
        .collect()
}

impl Lookup {
    pub(crate) fn parse(spec: &Bson) -> QResult<Lookup> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::failed_to_parse(format!(
                "the $lookup stage specification must be an object, but found {}",
                type_name(Some(spec))
            )));
        };
        let (mut from, mut local, mut foreign, mut as_, mut raw) = (None, None, None, None, None);
        let mut let_vars = Vec::new();
        for (k, v) in d {
            let string = || match v {
                Bson::String(s) => Ok(s.clone()),
                other => Err(QueryError::failed_to_parse(format!(
                    "$lookup argument '{k}: {}' must be a string, is type {}",
                    fmt_value(other),
                    type_name(Some(other))
                ))),
            };
            match k.as_str() {
                "from" => match v {
                    Bson::String(s) => from = Some(s.clone()),
                    other => {
                        return Err(QueryError::failed_to_parse(format!(
                            "$lookup 'from' field must be a string, but found {}",
                            type_name(Some(other))
                        )))
                    }
                },
                "localField" => local = Some(string()?),
                "foreignField" => foreign = Some(string()?),
                "as" => as_ = Some(string()?),
                "let" => match v {
                    Bson::Document(l) => {
                        for (name, e) in l {
                            crate::expr::check_var_name(name)?;
                            let_vars.push((name.clone(), Expr::parse(e)?));
                        }
                    }
                    other => {
                        return Err(QueryError::failed_to_parse(format!(
                            "$lookup argument 'let' must be an object, is type {}",
                            type_name(Some(other))
                        )))
                    }
                },
                "pipeline" => raw = Some(pipeline_docs(v, "$lookup argument 'pipeline'")?),
                other => {
                    return Err(QueryError::failed_to_parse(format!(
                        "unknown argument to $lookup: {other}"
                    )))
                }
            }
        }
        let as_ = as_
            .ok_or_else(|| QueryError::failed_to_parse("must specify 'as' field for a $lookup"))?;
        let documents_first = raw
            .as_ref()
            .and_then(|p: &Vec<Document>| p.first())
            .is_some_and(|st| st.contains_key("$documents"));
        let from = from
            .or_else(|| documents_first.then(String::new))
            .ok_or_else(|| {
                QueryError::failed_to_parse(format!(
                    "missing 'from' option to $lookup stage specification: {}",
                    fmt_doc(d)
                ))
            })?;
        let fields =
            match (local, foreign) {
                (Some(l), Some(f)) => Some((l, f)),
                (None, None) => None,
                _ => return Err(QueryError::failed_to_parse(
                    "$lookup requires both or neither of 'localField' and 'foreignField' to be \
                     specified",
                )),
            };
        if fields.is_none() && raw.is_none() {
            return Err(QueryError::failed_to_parse(
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to \
                 be specified",
            ));
        }
        let raw_pipeline = raw.unwrap_or_default();
        // With `let`, the sub-pipeline is parsed per document once the variables are known;
        // parse it now with placeholders to report errors early.
        let bound = if let_vars.is_empty() {
            raw_pipeline.clone()
        } else {
            let placeholders: Vec<(String, Option<Bson>)> = let_vars
                .iter()
                .map(|(n, _)| (n.clone(), Some(Bson::Null)))
                .collect();
            raw_pipeline
                .iter()
                .map(|s| bind_stage(s, &placeholders))
                .collect()
        };
        let parsed = parse_pipeline(&bound)?;
        if let Some(bad) = parsed
            .stage_names()
            .find(|n| matches!(*n, "$out" | "$merge"))
        {
            return Err(QueryError::located(
                51047,
                format!("{bad} is not allowed within a $lookup's sub-pipeline"),
            ));
        }
        let pipeline = (!raw_pipeline.is_empty() && let_vars.is_empty()).then_some(parsed);
        Ok(Lookup {
            from,
            fields,
            as_path: crate::expr::path_parts(&as_)?,
            pipeline,
            let_vars,
            raw_pipeline,
        })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocStream<'a>,
        ctx: &'a dyn AggContext,
        vars: &'a Vars<'a>,
    ) -> QResult<DocStream<'a>> {
        let foreign = ctx.scan_collection(&self.from)?;
        // Without a join condition or variables the result is the same for every document.
        let constant = match (&self.fields, &self.pipeline) {
            (None, Some(p)) => Some(Bson::Array(
                gather(p.stream(from_vec(foreign.clone()), ctx, vars)?)?
                    .into_iter()
                    .map(Bson::Document)
                    .collect(),
            )),
            (None, None) if self.let_vars.is_empty() => Some(Bson::Array(
                foreign.iter().cloned().map(Bson::Document).collect(),
            )),
            _ => None,
        };
        Ok(Box::new(input.map(move |r| {
            let mut d = r?;
            let joined = match &constant {
                Some(c) => c.clone(),
                None => Bson::Array(
                    self.join(&d, &foreign, ctx, vars)?
                        .into_iter()
                        .map(Bson::Document)
                        .collect(),
                ),
            };
            set_path(&mut d, &self.as_path, joined);
            Ok(d)
        })))
    }

    /// The foreign documents joined to `d`: those equal on the join fields, through the
    /// sub-pipeline if there is one.
    fn join(
        &self,
        d: &Document,
        foreign: &[Document],
        ctx: &dyn AggContext,
        vars: &Vars<'_>,
    ) -> QResult<Vec<Document>> {
        let candidates = match &self.fields {
            Some((local, foreign_field)) => equal_on(d, local, foreign_field, foreign)?,
            None => foreign.to_vec(),
        };
        if !self.let_vars.is_empty() {
            let mut values = Vec::with_capacity(self.let_vars.len());
            for (name, e) in &self.let_vars {
                values.push((name.clone(), e.evaluate(d, vars)?));
            }
            let bound: Vec<Document> = self
                .raw_pipeline
                .iter()
                .map(|s| bind_stage(s, &values))
                .collect();
            let p = parse_pipeline(&bound)?;
            return gather(p.stream(from_vec(candidates), ctx, vars)?);
        }
        match &self.pipeline {
            Some(p) => gather(p.stream(from_vec(candidates), ctx, vars)?),
            None => Ok(candidates),
        }
    }
}

/// The documents of `foreign` whose `foreign_field` equals a value of `local` in `d` (with
/// query semantics: arrays on either side match by element, missing matches null).
fn equal_on(
    d: &Document,
    local: &str,
    foreign_field: &str,
    foreign: &[Document],
) -> QResult<Vec<Document>> {
    let mut values = Vec::new();
    any_value(
        d,
        &FieldPath::new(local),
        LeafArrays::NoTraversal,
        &mut |c| {
            match c.value {
                Some(Bson::Array(a)) => values.extend(a.iter().cloned()),
                Some(v) => values.push(v.clone()),
                None => {}
            }
            false
        },
    );
    if values.is_empty() {
        values.push(Bson::Null);
    }
    // A regex joins by equality, not as a pattern: `$in` would match it as a pattern.
    let filter = if values
        .iter()
        .any(|v| matches!(v, Bson::RegularExpression(_)))
    {
        let ors: Vec<Bson> = values
            .into_iter()
            .map(|v| Bson::Document(doc! { foreign_field: { "$eq": v } }))
            .collect();
        doc! { "$or": ors }
    } else {
        doc! { foreign_field: { "$in": values } }
    };
    let m = Matcher::new(&filter)?;
    let mut out = Vec::new();
    for f in foreign {
        if m.try_matches(f)? {
            out.push(f.clone());
        }
    }
    Ok(out)
}

/// A parsed `$facet`.
#[derive(Clone, Debug)]
pub(crate) struct Facet {
    facets: Vec<(String, Pipeline)>,
}

impl Facet {
    pub(crate) fn parse(spec: &Bson) -> QResult<Facet> {
        let d = match spec {
            Bson::Document(d) if !d.is_empty() => d,
            _ => {
                return Err(QueryError::located(
                    40169,
                    format!(
                        "the $facet specification must be a non-empty object, but found: {}",
                        fmt_value(spec)
                    ),
                ))
            }
        };
        let mut facets = Vec::with_capacity(d.len());
        for (name, v) in d {
            crate::expr::path_parts(name)?;
            let Bson::Array(stages) = v else {
                return Err(QueryError::located(
                    40170,
                    format!(
                        "arguments to $facet must be arrays, {name} is type {}",
                        type_name(Some(v))
                    ),
                ));
            };
            if stages.is_empty() {
                return Err(QueryError::located(
                    40171,
                    format!("sub-pipeline in $facet stage cannot be empty: {name}"),
                ));
            }
            let docs = stages
                .iter()
                .map(|s| match s {
                    Bson::Document(sd) => Ok(sd.clone()),
                    other => Err(QueryError::located(
                        40171,
                        format!(
                            "elements of arrays in $facet spec must be non-empty objects, {name} \
                             argument contained an element of type {}: {}",
                            type_name(Some(other)),
                            fmt_value(other)
                        ),
                    )),
                })
                .collect::<QResult<Vec<_>>>()?;
            let p = parse_pipeline(&docs)?;
            if let Some((bad, _)) = p.stages.iter().find(|(n, s)| {
                matches!(s, Stage::Facet(_) | Stage::Server(_)) || n == "$out" || n == "$merge"
            }) {
                return Err(QueryError::located(
                    40600,
                    format!("{bad} is not allowed to be used within a $facet stage"),
                ));
            }
            facets.push((name.clone(), p));
        }
        Ok(Facet { facets })
    }

    pub(crate) fn run(
        &self,
        docs: Vec<Document>,
        ctx: &dyn AggContext,
        vars: &Vars<'_>,
    ) -> QResult<Document> {
        let mut out = Document::new();
        for (name, p) in &self.facets {
            let results = gather(p.stream(from_vec(docs.clone()), ctx, vars)?)?;
            out.insert(
                name.clone(),
                Bson::Array(results.into_iter().map(Bson::Document).collect()),
            );
        }
        Ok(out)
    }
}

pub(crate) fn parse_sample(spec: &Bson) -> QResult<usize> {
    let Bson::Document(d) = spec else {
        return Err(QueryError::located(
            28745,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for (k, v) in d {
        if k != "size" {
            return Err(QueryError::located(28748, "unrecognized option to $sample"));
        }
        let n = super::whole_number(v).ok_or_else(|| {
            QueryError::located(28746, "size argument to $sample must be a number")
        })?;
        if n < 0 {
            return Err(QueryError::located(
                28747,
                "size argument to $sample must not be negative",
            ));
        }
        size = Some(usize::try_from(n).unwrap_or(usize::MAX));
    }
    size.ok_or_else(|| QueryError::located(28749, "$sample stage must specify a size"))
}

/// `size` documents picked at random, in random order.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a remainder modulo `span`, which is a usize"
)]
pub(crate) fn sample(mut docs: Vec<Document>, size: usize) -> Vec<Document> {
    let n = size.min(docs.len());
    for i in 0..n {
        let span = (docs.len() - i) as u64;
        let j = i + (crate::expr::random_u64() % span) as usize;
        docs.swap(i, j);
    }
    docs.truncate(n);
    docs
}

pub(crate) fn parse_union_with(spec: &Bson) -> QResult<(String, Pipeline)> {
    match spec {
        Bson::String(s) => Ok((s.clone(), Pipeline::default())),
        Bson::Document(d) => {
            let (mut coll, mut pipeline) = (None, Pipeline::default());
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("coll", Bson::String(s)) => coll = Some(s.clone()),
                    ("pipeline", Bson::Array(stages)) => {
                        let docs = stages
                            .iter()
                            .map(|s| match s {
                                Bson::Document(sd) => Ok(sd.clone()),
                                other => Err(QueryError::type_mismatch(format!(
                                    "Each element of the 'pipeline' array must be an object, \
                                     but found {}",
                                    type_name(Some(other))
                                ))),
                            })
                            .collect::<QResult<Vec<_>>>()?;
                        pipeline = parse_pipeline(&docs)?;
                    }
                    (k, other) => {
                        return Err(QueryError::failed_to_parse(format!(
                            "$unionWith: unexpected argument '{k}' of type {}",
                            type_name(Some(other))
                        )))
                    }
                }
            }
            // Without `coll`, the sub-pipeline makes its own documents (`$documents`).
            let coll = match coll {
                Some(c) => c,
                None if pipeline.first_stage_name() == "$documents" => String::new(),
                None => {
                    return Err(QueryError::failed_to_parse(
                        "$unionWith requires a 'coll' argument",
                    ))
                }
            };
            Ok((coll, pipeline))
        }
        other => Err(QueryError::failed_to_parse(format!(
            "the $unionWith stage specification must be an object or string, but found {}",
            type_name(Some(other))
        ))),
    }
}

pub(crate) fn replace_root(
    expr: &Expr,
    what: &str,
    d: &Document,
    vars: &Vars<'_>,
) -> QResult<Document> {
    match expr.evaluate(d, vars)? {
        Some(Bson::Document(out)) => Ok(out),
        v => Err(QueryError::located(
            40228,
            format!(
                "{what} must evaluate to an object, but resulting value was: {}. Type of \
                 resulting value: '{}'. Input document: {}",
                v.as_ref().map_or_else(|| "MISSING".to_owned(), fmt_value),
                type_name(v.as_ref()),
                fmt_doc(d)
            ),
        )),
    }
}

/// `$redact`: `None` when the document is pruned.
pub(crate) fn redact(e: &Expr, root: &Document, vars: &Vars<'_>) -> QResult<Option<Document>> {
    redact_level(e, root, root, vars)
}

fn redact_level(
    e: &Expr,
    current: &Document,
    root: &Document,
    vars: &Vars<'_>,
) -> QResult<Option<Document>> {
    let mut scope = vars.child();
    scope.bind("CURRENT", Bson::Document(current.clone()));
    match e.evaluate(root, &scope)? {
        Some(Bson::String(s)) if s == "keep" => Ok(Some(current.clone())),
        Some(Bson::String(s)) if s == "prune" => Ok(None),
        Some(Bson::String(s)) if s == "descend" => {
            let mut out = Document::new();
            for (k, v) in current {
                match v {
                    Bson::Document(sub) => {
                        if let Some(kept) = redact_level(e, sub, root, vars)? {
                            out.insert(k.clone(), kept);
                        }
                    }
                    Bson::Array(items) => {
                        let mut kept = Vec::with_capacity(items.len());
                        for item in items {
                            match item {
                                Bson::Document(sub) => {
                                    if let Some(x) = redact_level(e, sub, root, vars)? {
                                        kept.push(Bson::Document(x));
                                    }
                                }
                                other => kept.push(other.clone()),
                            }
                        }
                        out.insert(k.clone(), kept);
                    }
                    other => {
                        out.insert(k.clone(), other.clone());
                    }
                }
            }
            Ok(Some(out))
        }
        v => Err(QueryError::located(
            17053,
            format!(
                "$redact's expression should not return anything aside from the variables \
                 $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                v.as_ref().map_or_else(|| "MISSING".to_owned(), fmt_value)
            ),
        )),
    }
}

/// `$documents`: the array its expression evaluates to (each element an object).
pub(crate) fn documents(e: &Expr, vars: &Vars<'_>) -> QResult<Vec<Document>> {
    match e.evaluate(&Document::new(), vars)? {
        Some(Bson::Array(items)) => items
            .into_iter()
            .map(|x| match x {
                Bson::Document(d) => Ok(d),
                other => Err(QueryError::located(
                    40228,
                    format!(
                        "'replacement document' must evaluate to an object, but resulting value \
                         was: {}. Type of resulting value: '{}'.",
                        fmt_value(&other),
                        type_name(Some(&other))
                    ),
                )),
            })
            .collect(),
        other => Err(QueryError::located(
            5858203,
            format!(
                "error during $documents: an array is expected, got {}",
                type_name(other.as_ref())
            ),
        )),
    }
}
