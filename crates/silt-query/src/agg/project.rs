//! `$project`, `$addFields`/`$set` and `$unset`: a tree of field paths whose leaves include,
//! exclude or compute a field.
//!
//! An *inclusion* projection copies the included fields in the input document's order
//! (`_id` unless excluded), descending into sub-documents and into arrays (scalars in arrays
//! are dropped), then adds computed fields in specification order. An *exclusion* projection
//! copies everything but the excluded paths. `$addFields` is a projection of computed fields
//! applied on top of the whole document. Computed fields are evaluated against the whole input
//! document; a computed sub-path through an array is set in every element, and a scalar on the
//! way is replaced by a document. A computed value that is missing (`$$REMOVE`) removes the
//! field.

use bson::{Bson, Document};

use crate::error::{QResult, QueryError};
use crate::expr::{Expr, Vars};

#[derive(Clone, Debug)]
enum Node {
    Include,
    Exclude,
    Computed(Expr),
    Sub(Vec<(String, Node)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Inclusion,
    Exclusion,
    AddFields,
}

/// A parsed `$project`, `$addFields`/`$set` or `$unset` specification.
#[derive(Clone, Debug)]
pub(crate) struct Projection {
    mode: Mode,
    fields: Vec<(String, Node)>,
}

/// Split and validate a field path used as a projection key (mongod's `FieldPath` rules).
fn key_parts(key: &str) -> QResult<Vec<String>> {
    crate::expr::path_parts(key)
}

/// mongod's error for `{field: {$name: ...}}` when `$name` is no expression: a
/// projection that meant an expression, not a sub-projection.
fn unknown_expression(d: &Document, e: QueryError) -> QueryError {
    match d.keys().next() {
        Some(op) if e.code == 168 && e.msg == format!("Unrecognized expression '{op}'") => {
            QueryError::located(31325, format!("Unknown expression {op}"))
        }
        _ => e,
    }
}

/// Whether a specification value is an operator expression (`{$op: ...}`).
fn is_operator(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

fn find<'a>(fields: &'a [(String, Node)], name: &str) -> Option<&'a Node> {
    fields.iter().find(|(k, _)| k == name).map(|(_, n)| n)
}

fn has_computed(fields: &[(String, Node)]) -> bool {
    fields.iter().any(|(_, n)| match n {
        Node::Computed(_) => true,
        Node::Sub(ch) => has_computed(ch),
        _ => false,
    })
}

/// Insert `node` at `parts`, rejecting paths that collide with one already present.
fn insert(
    fields: &mut Vec<(String, Node)>,
    parts: &[String],
    node: Node,
    full: &str,
) -> QResult<()> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(());
    };
    match fields.iter_mut().find(|(k, _)| k == first) {
        Some((_, Node::Sub(children))) if !rest.is_empty() => insert(children, rest, node, full),
        Some(_) if rest.is_empty() => Err(QueryError::located(
            31250,
            format!("Path collision at {full}"),
        )),
        Some(_) => Err(QueryError::located(
            31249,
            format!(
                "Path collision at {full} remaining portion {}",
                rest.join(".")
            ),
        )),
        None if rest.is_empty() => {
            fields.push((first.clone(), node));
            Ok(())
        }
        None => {
            let mut children = Vec::new();
            insert(&mut children, rest, node, full)?;
            fields.push((first.clone(), Node::Sub(children)));
            Ok(())
        }
    }
}

impl Projection {
    /// Parse a `$project` specification.
    pub(crate) fn project(spec: &Bson) -> QResult<Projection> {
        let Bson::Document(spec) = spec else {
            return Err(QueryError::located(
                15969,
                "$project specification must be an object",
            ));
        };
        if spec.is_empty() {
            return Err(QueryError::located(
                51272,
                "projection specification must have at least one field",
            ));
        }
        let mut leaves = Vec::new();
        collect_project(spec, &[], &mut leaves)?;
        let mut mode = None;
        for (parts, node) in &leaves {
            if parts.len() == 1 && parts[0] == "_id" {
                continue;
            }
            let path = parts.join(".");
            match node {
                Node::Include | Node::Computed(_) if mode == Some(Mode::Exclusion) => {
                    return Err(if matches!(node, Node::Include) {
                        QueryError::located(
                            31253,
                            format!("Cannot do inclusion on field {path} in exclusion projection"),
                        )
                    } else {
                        QueryError::located(
                            31252,
                            "Cannot use expression other than $meta in exclusion projection",
                        )
                    });
                }
                Node::Exclude if mode == Some(Mode::Inclusion) => {
                    return Err(QueryError::located(
                        31254,
                        format!("Cannot do exclusion on field {path} in inclusion projection"),
                    ));
                }
                Node::Exclude => mode = Some(Mode::Exclusion),
                _ => mode = Some(Mode::Inclusion),
            }
        }
        let id_node = leaves
            .iter()
            .find(|(p, _)| p.len() == 1 && p[0] == "_id")
            .map(|(_, n)| n);
        let mode = mode.unwrap_or(match id_node {
            Some(Node::Exclude) => Mode::Exclusion,
            _ => Mode::Inclusion,
        });
        if mode == Mode::Exclusion && matches!(id_node, Some(Node::Computed(_))) {
            return Err(QueryError::located(
                31252,
                "Cannot use expression other than $meta in exclusion projection",
            ));
        }
        let mentions_id = leaves.iter().any(|(p, _)| p[0] == "_id");
        let mut fields = Vec::new();
        if mode == Mode::Inclusion && !mentions_id {
            fields.push(("_id".to_string(), Node::Include));
        }
        for (parts, node) in leaves {
            if mode == Mode::Exclusion && matches!(node, Node::Include) {
                // `_id: 1` in an exclusion projection keeps what is kept anyway.
                continue;
            }
            let full = parts.join(".");
            insert(&mut fields, &parts, node, &full)?;
        }
        Ok(Projection { mode, fields })
    }

    /// Parse an `$addFields` / `$set` specification (`stage` names it in errors).
    pub(crate) fn add_fields(stage: &str, spec: &Bson) -> QResult<Projection> {
        let Bson::Document(spec) = spec else {
            return Err(QueryError::located(
                40272,
                format!(
                    "{stage} specification stage must be an object, got {}",
                    crate::expr::type_name(Some(spec))
                ),
            ));
        };
        let mut leaves = Vec::new();
        collect_add_fields(spec, &[], &mut leaves)?;
        let mut fields = Vec::new();
        for (parts, node) in leaves {
            let full = parts.join(".");
            insert(&mut fields, &parts, node, &full)?;
        }
        Ok(Projection {
            mode: Mode::AddFields,
            fields,
        })
    }

    /// Parse an `$unset` specification: a path or an array of paths.
    pub(crate) fn unset(spec: &Bson) -> QResult<Projection> {
        let paths: Vec<&str> = match spec {
            Bson::String(s) => vec![s.as_str()],
            Bson::Array(a) if a.is_empty() => {
                return Err(QueryError::located(
                    31119,
                    "$unset specification must be a string or an array with at least one field",
                ))
            }
            Bson::Array(a) => a
                .iter()
                .map(|v| match v {
                    Bson::String(s) => Ok(s.as_str()),
                    _ => Err(QueryError::located(
                        31120,
                        "$unset specification must be a string or an array containing only \
                         string values",
                    )),
                })
                .collect::<QResult<_>>()?,
            _ => {
                return Err(QueryError::located(
                    31002,
                    "$unset specification must be a string or an array",
                ))
            }
        };
        let mut fields = Vec::new();
        for p in paths {
            let parts = key_parts(p)?;
            insert(&mut fields, &parts, Node::Exclude, p)?;
        }
        Ok(Projection {
            mode: Mode::Exclusion,
            fields,
        })
    }

    /// Apply the projection to `doc`.
    pub(crate) fn apply(&self, doc: &Document, vars: &Vars<'_>) -> QResult<Document> {
        match self.mode {
            Mode::Exclusion => Ok(exclude_doc(doc, &self.fields)),
            Mode::Inclusion => {
                let mut out = include_doc(doc, &self.fields);
                compute_doc(&mut out, &self.fields, doc, vars)?;
                Ok(out)
            }
            Mode::AddFields => {
                let mut out = doc.clone();
                compute_doc(&mut out, &self.fields, doc, vars)?;
                Ok(out)
            }
        }
    }
}

/// The leaves of a `$project` specification, in order, with their full paths.
fn collect_project(
    spec: &Document,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Node)>,
) -> QResult<()> {
    for (k, v) in spec {
        crate::projection::positional_in_key(k, true)?;
        let mut parts = prefix.to_vec();
        parts.extend(key_parts(k)?);
        let node = match v {
            Bson::Boolean(b) => {
                if *b {
                    Node::Include
                } else {
                    Node::Exclude
                }
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                if crate::matcher::is_truthy(v) {
                    Node::Include
                } else {
                    Node::Exclude
                }
            }
            Bson::Document(d) if d.is_empty() => {
                return Err(crate::projection::empty_sub_projection());
            }
            // `{$op: ...}` is an expression; more fields than one make a sub-projection (whose
            // `$`-names are then refused as field paths).
            Bson::Document(d) if d.len() == 1 && is_operator(d) => {
                Node::Computed(Expr::parse(v).map_err(|e| unknown_expression(d, e))?)
            }
            Bson::Document(d) => {
                collect_project(d, &parts, out)?;
                continue;
            }
            other => Node::Computed(Expr::parse(other)?),
        };
        out.push((parts, node));
    }
    Ok(())
}

/// The leaves of an `$addFields` specification: every value is an expression, and a
/// sub-document without operators nests.
fn collect_add_fields(
    spec: &Document,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Node)>,
) -> QResult<()> {
    for (k, v) in spec {
        let mut parts = prefix.to_vec();
        parts.extend(key_parts(k)?);
        match v {
            Bson::Document(d) if !d.is_empty() && !is_operator(d) => {
                collect_add_fields(d, &parts, out)?;
            }
            other => out.push((parts, Node::Computed(Expr::parse(other)?))),
        }
    }
    Ok(())
}

/// Pass one of an inclusion projection: copy the included fields in document order.
fn include_doc(d: &Document, fields: &[(String, Node)]) -> Document {
    let mut out = Document::new();
    for (k, v) in d {
        match find(fields, k) {
            Some(Node::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(Node::Sub(children)) => match include_value(v, children) {
                Some(x) => {
                    out.insert(k.clone(), x);
                }
                // Keep the field's position for the computed sub-fields that replace it.
                None if has_computed(children) => {
                    out.insert(k.clone(), Bson::Null);
                }
                None => {}
            },
            _ => {}
        }
    }
    out
}

fn include_value(v: &Bson, children: &[(String, Node)]) -> Option<Bson> {
    match v {
        Bson::Document(d) => Some(Bson::Document(include_doc(d, children))),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter_map(|e| include_value(e, children))
                .collect(),
        )),
        _ => None,
    }
}

/// Copy `d` without the excluded paths.
fn exclude_doc(d: &Document, fields: &[(String, Node)]) -> Document {
    let mut out = Document::new();
    for (k, v) in d {
        match find(fields, k) {
            Some(Node::Exclude) => {}
            Some(Node::Sub(children)) => {
                out.insert(k.clone(), exclude_value(v, children));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

fn exclude_value(v: &Bson, children: &[(String, Node)]) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(exclude_doc(d, children)),
        Bson::Array(a) => Bson::Array(a.iter().map(|e| exclude_value(e, children)).collect()),
        other => other.clone(),
    }
}

/// Set the computed fields of `fields` in `out`, in specification order.
fn compute_doc(
    out: &mut Document,
    fields: &[(String, Node)],
    root: &Document,
    vars: &Vars<'_>,
) -> QResult<()> {
    for (k, node) in fields {
        match node {
            Node::Computed(e) => match e.evaluate(root, vars)? {
                Some(v) => {
                    out.insert(k.clone(), v);
                }
                None => {
                    out.remove(k);
                }
            },
            Node::Sub(children) if has_computed(children) => {
                // Taken out in place, so the field keeps its position.
                let cur = out.get_mut(k).map(|v| std::mem::replace(v, Bson::Null));
                let v = compute_value(cur, children, root, vars)?;
                out.insert(k.clone(), v);
            }
            _ => {}
        }
    }
    Ok(())
}

fn compute_value(
    cur: Option<Bson>,
    children: &[(String, Node)],
    root: &Document,
    vars: &Vars<'_>,
) -> QResult<Bson> {
    match cur {
        Some(Bson::Document(mut d)) => {
            compute_doc(&mut d, children, root, vars)?;
            Ok(Bson::Document(d))
        }
        Some(Bson::Array(a)) => a
            .into_iter()
            .map(|e| compute_value(Some(e), children, root, vars))
            .collect::<QResult<Vec<_>>>()
            .map(Bson::Array),
        _ => {
            let mut d = Document::new();
            compute_doc(&mut d, children, root, vars)?;
            Ok(Bson::Document(d))
        }
    }
}
