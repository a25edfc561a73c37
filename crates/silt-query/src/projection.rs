//! `find` projections: inclusion (`{a: 1, "b.c": 1}`), exclusion (`{a: 0}`), `$slice`,
//! `$elemMatch` and the positional `field.$`, with MongoDB 4.4+ semantics.
//!
//! The spec is parsed into a tree of path components. An inclusion projection rebuilds each
//! document from the included paths (keeping the document's field order, `_id` included unless
//! excluded); through arrays it keeps only the documents (and nested arrays) inside them. An
//! exclusion projection copies the document without the excluded paths. `$slice` cuts arrays
//! in either mode; `$elemMatch` (top-level fields only) replaces an array by its first matching
//! element and is appended after the other fields, as MongoDB 4.4+ does; `a.$` keeps the
//! element of the first array along `a` that the query matched (MongoDB's "elemMatchKey").
//! A projection with computed fields (aggregation expressions or literal values, MongoDB
//! 4.4+) is run as `$project` (`agg`'s projection), with `$$NOW` fixed for the projection;
//! mixing computed fields with `$slice`, `$elemMatch` or `.$` is refused.

use bson::{Bson, Document};
use silt_bson::compare::{as_num, Num};

use crate::error::{QResult, QueryError};
use crate::expr::path_parts;
use crate::matcher::Matcher;

#[derive(Clone, Debug)]
enum Node {
    Include,
    Exclude,
    /// `$slice: n` (`skip: None`) or `$slice: [skip, limit]`.
    Slice {
        skip: Option<i64>,
        limit: i64,
    },
    /// `$elemMatch` on a top-level field: the matcher is `{field: {$elemMatch: spec}}`.
    ElemMatch(Box<Matcher>),
    /// `field.rest.$` at the top level: the path below `field`.
    Positional(Vec<String>),
    Children(Vec<(String, Node)>),
}

type Nodes = Vec<(String, Node)>;

fn find<'n>(nodes: &'n [(String, Node)], k: &str) -> Option<&'n Node> {
    nodes.iter().find(|(n, _)| n == k).map(|(_, node)| node)
}

/// A parsed projection.
#[derive(Clone, Debug)]
pub struct Projection {
    root: Nodes,
    inclusion: bool,
    /// The path of a positional `path.$` (top-level key).
    positional: Option<Vec<String>>,
    /// A projection with computed fields, run as `$project`.
    computed: Option<Box<crate::agg::AggProjection>>,
}

/// Whether `spec` computes a field (an expression or a literal value), and whether it uses a
/// find-only operator (`$slice`, `$elemMatch`, `$meta`, `.$`).
fn scan_spec(spec: &Document) -> (bool, bool) {
    let (mut computed, mut find_only) = (false, false);
    for (k, v) in spec {
        if k.ends_with(".$") {
            find_only = true;
        }
        match v {
            Bson::Document(d) => match d.keys().next() {
                Some(op) if matches!(op.as_str(), "$slice" | "$elemMatch" | "$meta") => {
                    find_only = true
                }
                Some(op) if op.starts_with('$') => computed = true,
                _ => {
                    let (c, f) = scan_spec(d);
                    computed |= c;
                    find_only |= f;
                }
            },
            v if is_bool_or_number(v) => {}
            _ => computed = true,
        }
    }
    (computed, find_only)
}

#[derive(Default)]
struct ParseCtx {
    inclusion: Option<bool>,
    positional: Option<Vec<String>>,
    has_elem_match: bool,
    has_slice: bool,
    id_included: bool,
    id_excluded: bool,
}

/// mongod's words for a positional `.$` that is not at the end of its path.
const POSITIONAL_MIDDLE: &str = "As of 4.4, it's illegal to specify positional operator in the \
     middle of a path.Positional projection may only be used at the end, for example: a.b.$. If \
     the query previously used a form like a.b.$.d, remove the parts following the '$' and the \
     results will be equivalent.";

/// Whether a projection key ends in the positional `.$`, with mongod 7's refusals, in its
/// order: any positional projection in an aggregation stage (31324), a `.$.` in the middle of
/// the path (31394). (`$` alone is no positional projection but a field path mongod refuses.)
pub(crate) fn positional_in_key(key: &str, in_agg: bool) -> QResult<bool> {
    let at_end = key.ends_with(".$");
    if at_end && in_agg {
        return Err(QueryError::located(
            31324,
            "Cannot use positional projection in aggregation projection",
        ));
    }
    if key.contains(".$.") {
        return Err(QueryError::located(31394, POSITIONAL_MIDDLE));
    }
    Ok(at_end)
}

/// `{field: {}}` in a projection (mongod 7 names no path).
pub(crate) fn empty_sub_projection() -> QueryError {
    QueryError::located(
        51270,
        "An empty sub-projection is not a valid value. Found empty object at path",
    )
}

fn is_bool_or_number(v: &Bson) -> bool {
    matches!(v, Bson::Boolean(_)) || as_num(v).is_some()
}

fn true_value(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        _ => match as_num(v) {
            Some(Num::Int(i)) => i != 0,
            Some(Num::Float(f)) => f != 0.0,
            None => true,
        },
    }
}

/// MongoDB's `numberInt()` of a number, saturating.
#[expect(
    clippy::cast_possible_truncation,
    reason = "clamped to the i32 range first (NaN handled): exact after dropping the fraction"
)]
fn number_int(v: &Bson) -> i64 {
    match as_num(v) {
        Some(Num::Int(i)) => i.clamp(i64::from(i32::MIN), i64::from(i32::MAX)),
        Some(Num::Float(f)) if f.is_nan() => 0,
        Some(Num::Float(f)) => f.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i64,
        None => 0,
    }
}

/// Add `node` at `parts` under `nodes`, creating interior levels; MongoDB's path-collision
/// errors when a prefix or the path itself is already taken.
fn add_node<'n>(
    nodes: &'n mut Nodes,
    parts: &[&str],
    node: Node,
    full: &str,
) -> QResult<&'n mut Node> {
    let (first, rest) = parts
        .split_first()
        .ok_or_else(|| QueryError::bad_value("empty projection path"))?;
    let idx = nodes.iter().position(|(k, _)| k == first);
    if rest.is_empty() {
        if idx.is_some() {
            return Err(QueryError::located(
                31250,
                format!("Path collision at {full}"),
            ));
        }
        nodes.push((first.to_string(), node));
        let last = nodes.len() - 1;
        return Ok(&mut nodes[last].1);
    }
    let i = match idx {
        Some(i) => i,
        None => {
            nodes.push((first.to_string(), Node::Children(Vec::new())));
            nodes.len() - 1
        }
    };
    match &mut nodes[i].1 {
        Node::Children(kids) => add_node(kids, rest, node, full),
        _ => Err(QueryError::located(
            31249,
            format!(
                "Path collision at {full} remaining portion {}",
                rest.join(".")
            ),
        )),
    }
}

/// The children list at `parts`, created (or shared with an earlier sub-projection) as needed.
fn child_dir<'n>(nodes: &'n mut Nodes, parts: &[&str], full: &str) -> QResult<&'n mut Nodes> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(nodes);
    };
    let i = match nodes.iter().position(|(k, _)| k == first) {
        Some(i) => i,
        None => {
            nodes.push((first.to_string(), Node::Children(Vec::new())));
            nodes.len() - 1
        }
    };
    match &mut nodes[i].1 {
        Node::Children(kids) => child_dir(kids, rest, full),
        _ => Err(QueryError::located(
            31250,
            format!("Path collision at {full}"),
        )),
    }
}

impl Projection {
    pub fn new(spec: &Document) -> QResult<Projection> {
        // A positional key's own refusals come first, whatever else the spec holds.
        for (k, v) in spec {
            if positional_in_key(k, false)? {
                if let Bson::Document(_) = v {
                    return Err(QueryError::located(
                        31271,
                        "positional projection cannot be used with an expression or sub object",
                    ));
                }
                if !is_bool_or_number(v) {
                    return Err(QueryError::located(
                        31308,
                        "positional projection cannot be used with a literal",
                    ));
                }
            }
        }
        let (computed, find_only) = scan_spec(spec);
        if computed {
            if find_only {
                return Err(QueryError::not_implemented(
                    "a find projection mixing computed fields with $slice, $elemMatch, $meta or \
                     a positional .$ is not supported",
                ));
            }
            if let Some((k, v)) = spec
                .iter()
                .find(|(k, v)| k.as_str() != "_id" && is_bool_or_number(v) && !true_value(v))
            {
                return Err(QueryError::located(
                    31310,
                    format!("Cannot use an expression in an exclusion projection ({k}: {v})"),
                ));
            }
            let p = crate::agg::AggProjection::project(&Bson::Document(spec.clone()))?;
            return Ok(Projection {
                root: Vec::new(),
                inclusion: true,
                positional: None,
                computed: Some(Box::new(p)),
            });
        }
        let mut ctx = ParseCtx::default();
        let mut root = Vec::new();
        parse_level(&mut ctx, spec, None, &mut root)?;
        let id_specified = spec.keys().any(|k| k == "_id" || k.starts_with("_id."));
        let inclusion = ctx.inclusion.unwrap_or(if ctx.has_slice {
            ctx.id_included
        } else {
            ctx.has_elem_match || ctx.id_included
        });
        if inclusion && !id_specified {
            root.push(("_id".to_string(), Node::Include));
        }
        if !inclusion && ctx.id_included {
            root.retain(|(k, _)| k != "_id");
        }
        Ok(Projection {
            root,
            inclusion,
            positional: ctx.positional,
            computed: None,
        })
    }

    /// Whether this is an inclusion projection (only named fields survive).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Whether the projection uses the positional `field.$` (and so needs the query's
    /// matcher in [`Projection::apply`]).
    pub fn has_positional(&self) -> bool {
        self.positional.is_some()
    }

    /// The dotted paths a plain inclusion projection keeps (`_id` among them unless
    /// excluded): `None` for an exclusion projection or one with `$slice`, `$elemMatch` or a
    /// positional `.$`. Such a projection of a document depends only on the values at these
    /// paths, which is what lets a query be answered from index keys.
    pub fn included_paths(&self) -> Option<Vec<String>> {
        fn walk(nodes: &Nodes, prefix: &str, out: &mut Vec<String>) -> bool {
            for (k, node) in nodes {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match node {
                    Node::Include => out.push(path),
                    // Only `_id: 0` excludes in an inclusion projection.
                    Node::Exclude => {}
                    Node::Children(kids) => {
                        if !walk(kids, &path, out) {
                            return false;
                        }
                    }
                    _ => return false,
                }
            }
            true
        }
        if !self.inclusion || self.computed.is_some() {
            return None;
        }
        let mut out = Vec::new();
        walk(&self.root, "", &mut out).then_some(out)
    }

    /// Project `doc`. `matcher` is the query's filter, needed by a positional projection.
    pub fn apply(&self, doc: &Document, matcher: Option<&Matcher>) -> QResult<Document> {
        if let Some(p) = &self.computed {
            let mut vars = crate::expr::Vars::new();
            vars.bind("NOW", Bson::DateTime(bson::DateTime::now()));
            return p.apply(doc, &vars);
        }
        let mut ctx = ApplyCtx {
            doc,
            matcher,
            key: None,
        };
        let mut out = if self.inclusion {
            include_doc(&self.root, doc, &mut ctx)?
        } else {
            exclude_doc(&self.root, doc)
        };
        if let Some(path) = &self.positional {
            apply_positional(&mut out, path, &mut ctx)?;
        }
        for (k, node) in &self.root {
            let Node::ElemMatch(m) = node else {
                continue;
            };
            out.remove(k);
            if let Some(Bson::Array(arr)) = doc.get(k) {
                if let (true, Some(i)) = m.matches_with_key(doc)? {
                    if let Some(e) = arr.get(i) {
                        out.insert(k.clone(), Bson::Array(vec![e.clone()]));
                    }
                }
            }
        }
        Ok(out)
    }
}

fn parse_level(
    ctx: &mut ParseCtx,
    spec: &Document,
    prefix: Option<&str>,
    nodes: &mut Nodes,
) -> QResult<()> {
    for (k, v) in spec {
        let full = match prefix {
            Some(p) => format!("{p}.{k}"),
            None => k.clone(),
        };
        let positional = positional_in_key(k, false)?;
        match v {
            Bson::Document(_) if positional => {
                return Err(QueryError::located(
                    31271,
                    "positional projection cannot be used with an expression or sub object",
                ))
            }
            Bson::Document(sub) => {
                let parts = path_parts(k)?;
                let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                if sub.is_empty() {
                    return Err(empty_sub_projection());
                }
                if sub.len() == 1 && sub.keys().all(|s| s.starts_with('$')) {
                    let (op, arg) = sub.iter().next().expect("one field");
                    parse_operator(ctx, &full, &parts, prefix.is_none(), op, arg, nodes)?;
                } else {
                    let dir = child_dir(nodes, &parts, &full)?;
                    parse_level(ctx, sub, Some(&full), dir)?;
                }
            }
            _ if !is_bool_or_number(v) => {
                if positional {
                    return Err(QueryError::located(
                        31308,
                        "positional projection cannot be used with a literal",
                    ));
                }
                if ctx.inclusion == Some(false) {
                    return Err(QueryError::located(
                        31310,
                        format!("Cannot use an expression {k}: {v} in an exclusion projection"),
                    ));
                }
                return Err(QueryError::not_implemented(format!(
                    "projection of literal values is not supported yet ({full}: {v})"
                )));
            }
            _ if true_value(v) => {
                let top_id = prefix.is_none() && k == "_id";
                if positional {
                    if ctx.positional.is_some() {
                        return Err(QueryError::located(
                            31276,
                            "Cannot specify more than one positional projection per query.",
                        ));
                    }
                    if ctx.has_elem_match {
                        return Err(QueryError::located(
                            31256,
                            "Cannot specify positional operator and $elemMatch.",
                        ));
                    }
                    let path = path_parts(&k[..k.len() - 2])?;
                    if prefix.is_some() {
                        return Err(QueryError::not_implemented(format!(
                            "positional projection '{full}' inside a sub-projection is not \
                             supported; write it as a dotted path at the top level"
                        )));
                    }
                    let rest = path[1..].to_vec();
                    add_node(nodes, &[path[0].as_str()], Node::Positional(rest), &full)?;
                    ctx.positional = Some(path);
                } else {
                    let parts = path_parts(k)?;
                    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                    add_node(nodes, &parts, Node::Include, &full)?;
                    ctx.id_included |= top_id;
                }
                if !top_id {
                    if ctx.inclusion == Some(false) {
                        return Err(QueryError::located(
                            31253,
                            format!("Cannot do inclusion on field {full} in exclusion projection"),
                        ));
                    }
                    ctx.inclusion = Some(true);
                }
            }
            _ => {
                if positional {
                    return Err(QueryError::located(
                        31395,
                        "positional projection cannot be used with exclusion",
                    ));
                }
                let parts = path_parts(k)?;
                let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                add_node(nodes, &parts, Node::Exclude, &full)?;
                if prefix.is_none() && k == "_id" {
                    ctx.id_excluded = true;
                } else {
                    if ctx.inclusion == Some(true) {
                        return Err(QueryError::located(
                            31254,
                            format!("Cannot do exclusion on field {full} in inclusion projection"),
                        ));
                    }
                    ctx.inclusion = Some(false);
                }
            }
        }
    }
    Ok(())
}

fn parse_operator(
    ctx: &mut ParseCtx,
    full: &str,
    parts: &[&str],
    at_root: bool,
    op: &str,
    arg: &Bson,
    nodes: &mut Nodes,
) -> QResult<()> {
    match op {
        "$slice" => {
            let node = match arg {
                _ if as_num(arg).is_some() => Node::Slice {
                    skip: None,
                    limit: number_int(arg),
                },
                Bson::Array(a) => {
                    if a.len() != 2 {
                        return Err(QueryError::located(
                            31272,
                            "$slice array argument should be of form [skip, limit]",
                        ));
                    }
                    if as_num(&a[0]).is_none() {
                        return Err(QueryError::located(
                            31257,
                            "$slice expects the skip argument to be a number",
                        ));
                    }
                    if as_num(&a[1]).is_none() {
                        return Err(QueryError::located(
                            31258,
                            "$slice expects the limit argument to be a number",
                        ));
                    }
                    let limit = number_int(&a[1]);
                    if limit <= 0 {
                        return Err(QueryError::located(
                            31259,
                            format!("$slice limit must be positive, got {limit}"),
                        ));
                    }
                    Node::Slice {
                        skip: Some(number_int(&a[0])),
                        limit,
                    }
                }
                _ => {
                    return Err(QueryError::located(
                        31273,
                        "$slice only supports numbers and [skip, limit] arrays",
                    ))
                }
            };
            add_node(nodes, parts, node, full)?;
            ctx.has_slice = true;
        }
        "$elemMatch" => {
            let Bson::Document(_) = arg else {
                return Err(QueryError::located(
                    31274,
                    "elemMatch: Invalid argument, object required",
                ));
            };
            if ctx.positional.is_some() {
                return Err(QueryError::located(
                    31255,
                    "Cannot specify positional operator and $elemMatch.",
                ));
            }
            if parts.len() != 1 || !at_root {
                return Err(QueryError::located(
                    31275,
                    "Cannot use $elemMatch projection on a nested field.",
                ));
            }
            let mut filter = Document::new();
            let mut inner = Document::new();
            inner.insert("$elemMatch", arg.clone());
            filter.insert(parts[0], inner);
            let m = Matcher::new(&filter)?;
            add_node(nodes, parts, Node::ElemMatch(Box::new(m)), full)?;
            ctx.has_elem_match = true;
        }
        _ => {
            return Err(QueryError::not_implemented(format!(
                "projection expression {op} is not supported yet ({full})"
            )))
        }
    }
    Ok(())
}

struct ApplyCtx<'a> {
    doc: &'a Document,
    matcher: Option<&'a Matcher>,
    key: Option<usize>,
}

impl ApplyCtx<'_> {
    /// The array index the query matched (computed once per document): mongod's
    /// "elemMatchKey".
    fn key(&mut self) -> QResult<usize> {
        if let Some(k) = self.key {
            return Ok(k);
        }
        let m = self.matcher.ok_or_else(|| {
            QueryError::located(
                51050,
                "Projections with a positional operator require a matcher",
            )
        })?;
        match m.matches_with_key(self.doc)? {
            (true, Some(k)) => {
                self.key = Some(k);
                Ok(k)
            }
            _ => Err(QueryError::located(
                51246,
                "positional operator '.$' couldn't find a matching element in the array",
            )),
        }
    }
}

/// The positional step, run on the projected document as mongod runs it: the first array
/// met along `path` keeps only the element at the query's matched index (51247 when the
/// projected array has no such element); no array on the path leaves the document as it is.
fn apply_positional(out: &mut Document, path: &[String], ctx: &mut ApplyCtx) -> QResult<()> {
    let mut cur = out;
    for name in path {
        match cur.get_mut(name) {
            Some(Bson::Array(a)) => {
                let i = ctx.key()?;
                let e = a.get(i).cloned().ok_or_else(|| {
                    QueryError::located(51247, "positional operator '.$' element mismatch")
                })?;
                *a = vec![e];
                return Ok(());
            }
            Some(Bson::Document(d)) => cur = d,
            _ => return Ok(()),
        }
    }
    Ok(())
}

fn include_doc(nodes: &[(String, Node)], doc: &Document, ctx: &mut ApplyCtx) -> QResult<Document> {
    let mut out = Document::new();
    for (k, v) in doc {
        let Some(node) = find(nodes, k) else {
            continue;
        };
        let projected = match node {
            Node::Include => Some(v.clone()),
            Node::Exclude | Node::ElemMatch(_) => None,
            Node::Slice { skip, limit } => Some(slice(v, *skip, *limit)),
            Node::Children(kids) => include_value(kids, v, ctx)?,
            Node::Positional(rest) => positional_include(v, rest, ctx)?,
        };
        if let Some(p) = projected {
            out.insert(k.clone(), p);
        }
    }
    Ok(out)
}

/// A value under an interior inclusion node: documents are projected, arrays keep their
/// projected documents and nested arrays, scalars disappear.
fn include_value(nodes: &[(String, Node)], v: &Bson, ctx: &mut ApplyCtx) -> QResult<Option<Bson>> {
    Ok(match v {
        Bson::Document(d) => Some(Bson::Document(include_doc(nodes, d, ctx)?)),
        Bson::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for e in a {
                if let Some(p) = include_value(nodes, e, ctx)? {
                    out.push(p);
                }
            }
            Some(Bson::Array(out))
        }
        _ => None,
    })
}

fn exclude_doc(nodes: &[(String, Node)], doc: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        let projected = match find(nodes, k) {
            None | Some(Node::Include) | Some(Node::Positional(_)) => Some(v.clone()),
            Some(Node::Exclude) | Some(Node::ElemMatch(_)) => None,
            Some(Node::Slice { skip, limit }) => Some(slice(v, *skip, *limit)),
            Some(Node::Children(kids)) => Some(exclude_value(kids, v)),
        };
        if let Some(p) = projected {
            out.insert(k.clone(), p);
        }
    }
    out
}

fn exclude_value(nodes: &[(String, Node)], v: &Bson) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(exclude_doc(nodes, d)),
        Bson::Array(a) => Bson::Array(a.iter().map(|e| exclude_value(nodes, e)).collect()),
        _ => v.clone(),
    }
}

/// `$slice`: `n` first elements, `-n` last ones, or `[skip, limit]` (negative skip counts from
/// the end). Non-arrays pass through.
fn slice(v: &Bson, skip: Option<i64>, limit: i64) -> Bson {
    let Bson::Array(a) = v else {
        return v.clone();
    };
    let len = a.len() as i64;
    let (start, n) = match skip {
        None if limit >= 0 => (0, limit),
        None => ((len + limit).max(0), len),
        Some(s) if s < 0 => ((len + s).max(0), limit),
        Some(s) => (s.min(len), limit),
    };
    let end = start.saturating_add(n).min(len);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "0 <= start <= end <= len, an array length"
    )]
    let (start, end) = (start as usize, end as usize);
    Bson::Array(a[start..end].to_vec())
}

/// The value a positional `field.rest.$` includes before its positional step: `rest` under
/// `field`, as an inclusion would.
fn positional_include(v: &Bson, rest: &[String], ctx: &mut ApplyCtx) -> QResult<Option<Bson>> {
    let Some((last, above)) = rest.split_last() else {
        return Ok(Some(v.clone()));
    };
    let mut node = Node::Children(vec![(last.clone(), Node::Include)]);
    for p in above.iter().rev() {
        node = Node::Children(vec![(p.clone(), node)]);
    }
    let Node::Children(kids) = node else {
        unreachable!("built as children")
    };
    include_value(&kids, v, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn p(spec: Document) -> Projection {
        Projection::new(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
    }

    fn apply(spec: Document, d: Document) -> Document {
        p(spec).apply(&d, None).unwrap()
    }

    fn apply_q(spec: Document, filter: Document, d: Document) -> QResult<Document> {
        let m = Matcher::new(&filter).unwrap();
        p(spec).apply(&d, Some(&m))
    }

    fn err(spec: Document) -> QueryError {
        Projection::new(&spec).expect_err("should fail")
    }

    #[test]
    fn inclusion() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": 4};
        assert_eq!(apply(doc! {"a": 1}, d.clone()), doc! {"_id": 1, "a": 1});
        assert_eq!(
            apply(doc! {"e": true, "a": 1}, d.clone()),
            doc! {"_id": 1, "a": 1, "e": 4}
        );
        assert_eq!(apply(doc! {"a": 1, "_id": 0}, d.clone()), doc! {"a": 1});
        assert_eq!(
            apply(doc! {"b.c": 1}, d.clone()),
            doc! {"_id": 1, "b": {"c": 2}}
        );
        assert_eq!(
            apply(doc! {"b": {"d": 1}}, d.clone()),
            doc! {"_id": 1, "b": {"d": 3}}
        );
        assert_eq!(apply(doc! {"_id": 1}, d.clone()), doc! {"_id": 1});
        assert_eq!(apply(doc! {"zz": 1}, d.clone()), doc! {"_id": 1});
        assert_eq!(apply(doc! {"a.x": 1}, d.clone()), doc! {"_id": 1});
        assert_eq!(apply(doc! {"b.x": 1}, d), doc! {"_id": 1, "b": {}});
    }

    #[test]
    fn inclusion_through_arrays() {
        let d = doc! {"a": [{"b": 1, "c": 2}, 5, {"c": 3}, [{"b": 4, "c": 5}]]};
        assert_eq!(
            apply(doc! {"a.b": 1, "_id": 0}, d),
            doc! {"a": [{"b": 1}, {}, [{"b": 4}]]}
        );
    }

    #[test]
    fn exclusion() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, 7]};
        assert_eq!(
            apply(doc! {"a": 0}, d.clone()),
            doc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, 7]}
        );
        assert_eq!(
            apply(doc! {"_id": 0, "b.c": 0, "e.f": false}, d.clone()),
            doc! {"a": 1, "b": {"d": 3}, "e": [{"g": 2}, 7]}
        );
        assert_eq!(
            apply(doc! {"_id": 1, "a": 0}, d.clone()),
            doc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, 7]}
        );
        assert_eq!(apply(doc! {}, d.clone()), d);
        assert!(!p(doc! {"_id": 0}).is_inclusion());
    }

    #[test]
    fn included_paths() {
        let paths = |spec: Document| p(spec).included_paths();
        let v = |xs: &[&str]| Some(xs.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(paths(doc! {"a": 1}), v(&["a", "_id"]));
        assert_eq!(paths(doc! {"a": 1, "_id": 0}), v(&["a"]));
        assert_eq!(
            paths(doc! {"b.c": 1, "b": {"d": 1}}),
            v(&["b.c", "b.d", "_id"])
        );
        assert_eq!(paths(doc! {"_id": 1}), v(&["_id"]));
        assert_eq!(paths(doc! {"_id": 0}), None);
        assert_eq!(paths(doc! {"a": 0}), None);
        assert_eq!(paths(doc! {"a": {"$slice": 1}, "b": 1}), None);
        assert_eq!(paths(doc! {"a": {"$elemMatch": {"x": 1}}}), None);
        assert_eq!(paths(doc! {"a.$": 1}), None);
    }

    #[test]
    fn mixing_is_an_error() {
        let e = err(doc! {"a": 1, "b": 0});
        assert_eq!(e.code, 31254);
        assert!(e
            .msg
            .contains("Cannot do exclusion on field b in inclusion projection"));
        let e = err(doc! {"a": 0, "b": 1});
        assert_eq!(e.code, 31253);
        assert!(e
            .msg
            .contains("Cannot do inclusion on field b in exclusion projection"));
        assert_eq!(err(doc! {"a": 0, "b": {"c": 1}}).code, 31253);
        assert!(Projection::new(&doc! {"a": 1, "_id": 0}).is_ok());
        assert!(Projection::new(&doc! {"a": 0, "_id": 1}).is_ok());
    }

    #[test]
    fn spec_errors() {
        assert_eq!(err(doc! {"a": 1, "a.b": 1}).code, 31249);
        assert_eq!(err(doc! {"a.b": 1, "a": 1}).code, 31250);
        assert_eq!(err(doc! {"a": {}}).code, 51270);
        assert_eq!(err(doc! {"a": 0, "b": "x"}).code, 31310);
        assert_eq!(err(doc! {"a": {"$slice": 1}, "b": "x"}).code, 238);
        // Computed fields (MongoDB 4.4+): expressions and literals.
        let d = doc! {"_id": 1, "a": 2};
        assert_eq!(apply(doc! {"a": "x"}, d.clone()), doc! {"_id": 1, "a": "x"});
        assert_eq!(
            apply(doc! {"b": {"$add": ["$a", 1]}, "_id": 0}, d.clone()),
            doc! {"b": 3}
        );
        assert!(p(doc! {"b": "$a"}).included_paths().is_none());
        assert_eq!(err(doc! {"a.$": 1, "b.$": 1}).code, 31276);
        assert_eq!(err(doc! {"a.$": {"x": 1}}).code, 31271);
        assert_eq!(err(doc! {"a": {"$slice": "x"}}).code, 31273);
        assert_eq!(err(doc! {"a": {"$slice": [1]}}).code, 31272);
        assert_eq!(err(doc! {"a": {"$slice": [1, 0]}}).code, 31259);
        assert_eq!(err(doc! {"a": {"$slice": ["x", 1]}}).code, 31257);
        assert_eq!(err(doc! {"a": {"$elemMatch": 1}}).code, 31274);
        assert_eq!(err(doc! {"a.b": {"$elemMatch": {"x": 1}}}).code, 31275);
        assert_eq!(err(doc! {"a": {"b": {"$elemMatch": {"x": 1}}}}).code, 31275);
        assert_eq!(
            err(doc! {"a.$": 1, "b": {"$elemMatch": {"x": 1}}}).code,
            31255
        );
        assert_eq!(
            err(doc! {"b": {"$elemMatch": {"x": 1}}, "a.$": 1}).code,
            31256
        );
        assert_eq!(err(doc! {"a": {"$elemMatch": {"$foo": 1}}}).code, 2);
        assert_eq!(err(doc! {"a..b": 1}).code, 15998);
    }

    #[test]
    fn slice() {
        let d = doc! {"_id": 1, "a": [1, 2, 3, 4, 5], "b": "x", "c": {"d": [1, 2, 3]}};
        assert_eq!(
            apply(doc! {"a": {"$slice": 2}}, d.clone()),
            doc! {"_id": 1, "a": [1, 2], "b": "x", "c": {"d": [1, 2, 3]}}
        );
        let a = |spec: Bson| apply(doc! {"_id": 0, "a": {"$slice": spec}, "b": 1}, d.clone());
        assert_eq!(a(Bson::Int32(-2)), doc! {"a": [4, 5], "b": "x"});
        assert_eq!(a(Bson::Int32(0)), doc! {"a": [], "b": "x"});
        assert_eq!(a(Bson::Int32(10)), doc! {"a": [1, 2, 3, 4, 5], "b": "x"});
        assert_eq!(a(Bson::Int32(-10)), doc! {"a": [1, 2, 3, 4, 5], "b": "x"});
        assert_eq!(a(bson::bson!([1, 2])), doc! {"a": [2, 3], "b": "x"});
        assert_eq!(a(bson::bson!([-2, 5])), doc! {"a": [4, 5], "b": "x"});
        assert_eq!(a(bson::bson!([-9, 2])), doc! {"a": [1, 2], "b": "x"});
        assert_eq!(a(bson::bson!([7, 2])), doc! {"a": [], "b": "x"});
        // Non-arrays pass through.
        assert_eq!(
            apply(doc! {"b": {"$slice": 1}, "_id": 0, "a": 0}, d.clone()),
            doc! {"b": "x", "c": {"d": [1, 2, 3]}}
        );
        // Through a sub-document, in an inclusion projection with _id: 1.
        assert_eq!(
            apply(doc! {"_id": 1, "c.d": {"$slice": -1}}, d.clone()),
            doc! {"_id": 1, "c": {"d": [3]}}
        );
        assert!(!p(doc! {"a": {"$slice": 1}}).is_inclusion());
        // Through arrays of documents.
        let d2 = doc! {"a": [{"b": [1, 2, 3]}, {"b": [4]}]};
        assert_eq!(
            apply(doc! {"a.b": {"$slice": 1}}, d2),
            doc! {"a": [{"b": [1]}, {"b": [4]}]}
        );
    }

    #[test]
    fn elem_match_projection() {
        let d = doc! {
            "_id": 1,
            "games": [{"game": "abc", "score": 8}, {"game": "xyz", "score": 5}],
            "joined": 2020,
            "lastLogin": 2021,
        };
        let spec =
            doc! {"games": {"$elemMatch": {"score": {"$gt": 5}}}, "joined": 1, "lastLogin": 1};
        assert!(p(spec.clone()).is_inclusion());
        // 4.4+: the $elemMatch field comes after the other included fields.
        assert_eq!(
            apply(spec, d.clone()),
            doc! {"_id": 1, "joined": 2020, "lastLogin": 2021, "games": [{"game": "abc", "score": 8}]}
        );
        assert_eq!(
            apply(
                doc! {"games": {"$elemMatch": {"score": {"$lt": 6}}}},
                d.clone()
            ),
            doc! {"_id": 1, "games": [{"game": "xyz", "score": 5}]}
        );
        // No match: the field is left out.
        assert_eq!(
            apply(doc! {"games": {"$elemMatch": {"score": 100}}}, d.clone()),
            doc! {"_id": 1}
        );
        assert_eq!(
            apply(doc! {"joined": {"$elemMatch": {"x": 1}}}, d.clone()),
            doc! {"_id": 1}
        );
        // With a $slice the projection is an exclusion one.
        assert_eq!(
            apply(
                doc! {"games": {"$elemMatch": {"score": 5}}, "x": {"$slice": 1}},
                d.clone()
            ),
            doc! {"_id": 1, "joined": 2020, "lastLogin": 2021, "games": [{"game": "xyz", "score": 5}]}
        );
        let nums = doc! {"_id": 2, "a": [1, 5, 9]};
        assert_eq!(
            apply(doc! {"a": {"$elemMatch": {"$gt": 4}}}, nums),
            doc! {"_id": 2, "a": [5]}
        );
    }

    #[test]
    fn positional() {
        let d = doc! {"_id": 1, "grades": [80, 85, 90], "other": 1};
        assert_eq!(
            apply_q(
                doc! {"grades.$": 1},
                doc! {"grades": {"$gte": 85}},
                d.clone()
            )
            .unwrap(),
            doc! {"_id": 1, "grades": [85]}
        );
        assert!(p(doc! {"grades.$": 1}).has_positional());
        let d2 = doc! {"_id": 1, "s": [{"n": "a", "v": 1}, {"n": "b", "v": 2}]};
        assert_eq!(
            apply_q(doc! {"s.$": 1, "_id": 0}, doc! {"s.n": "b"}, d2.clone()).unwrap(),
            doc! {"s": [{"n": "b", "v": 2}]}
        );
        assert_eq!(
            apply_q(doc! {"s.v.$": 1}, doc! {"s.v": 2}, d2.clone()).unwrap(),
            doc! {"_id": 1, "s": [{"v": 2}]}
        );
        assert_eq!(
            apply_q(
                doc! {"s.$": 1},
                doc! {"s": {"$elemMatch": {"n": "b", "v": {"$gt": 1}}}},
                d2.clone()
            )
            .unwrap(),
            doc! {"_id": 1, "s": [{"n": "b", "v": 2}]}
        );
        // A nested array reached through a sub-document.
        let d3 = doc! {"a": {"b": [1, 2, 3]}};
        assert_eq!(
            apply_q(doc! {"a.b.$": 1, "_id": 0}, doc! {"a.b": 3}, d3).unwrap(),
            doc! {"a": {"b": [3]}}
        );
        // Errors: no matcher, query not on the field (mongod 7 finds no matched element),
        // no element matched; the projected array has no element at the matched index.
        let pr = p(doc! {"grades.$": 1});
        assert_eq!(pr.apply(&d, None).unwrap_err().code, 51050);
        assert_eq!(
            apply_q(doc! {"grades.$": 1}, doc! {"other": 1}, d.clone())
                .unwrap_err()
                .code,
            51246
        );
        assert_eq!(
            apply_q(doc! {"grades.x.$": 1}, doc! {"grades": 85}, d.clone())
                .unwrap_err()
                .code,
            51247
        );
        // No array on the path: the document is left as included.
        assert_eq!(
            apply_q(doc! {"other.$": 1}, doc! {"other": 1}, d.clone()).unwrap(),
            doc! {"_id": 1, "other": 1}
        );
        // Parse-time rules, in mongod 7's order.
        for (spec, code) in [
            (doc! {"": 1}, 40352),
            (doc! {"v..d": 1}, 15998),
            (doc! {"v..$": 1}, 40353),
            (doc! {"$": 1}, 16410),
            (doc! {"$.foo.$": 1}, 16410),
            (doc! {"v.$foo": 1}, 16410),
            (doc! {"v.$.foo": 1}, 31394),
            (doc! {"v.$.foo.$": 1}, 31394),
            (doc! {"v.$": 0}, 31395),
            (doc! {"v.$": "x"}, 31308),
            (doc! {"v.$": {"a": 1}}, 31271),
            (doc! {"v": {}}, 51270),
        ] {
            assert_eq!(err(spec.clone()).code, code, "{spec}");
        }
        assert_eq!(
            apply_q(doc! {"grades.$": 1}, doc! {"grades": 1000}, d.clone())
                .unwrap_err()
                .code,
            51246
        );
        // Mixed with other inclusions, in document order.
        assert_eq!(
            apply_q(doc! {"other": 1, "grades.$": 1}, doc! {"grades": 90}, d).unwrap(),
            doc! {"_id": 1, "grades": [90], "other": 1}
        );
    }
}
