//! Repeated field names in a command (`silt_wire::RepeatedKey`: a key that appears twice in
//! one document, which the decoded command holds only once, with its last value). mongod
//! sees every element, so this is where siltd answers as it does:
//!
//! - A filter's repeated conditions all apply (`{a: 1, a: 2}` is `a == 1 AND a == 2`): the
//!   filter is rewritten as an `$and` of every element, before the handler runs ([`apply`]).
//! - Refused for the whole command: a repeated field in `findAndModify`'s update operators
//!   (40) or its replacement's `_id` (2), an index key pattern (2), `$project` (31250) and
//!   `$addFields`/`$set` (40176) stages, a find projection (31250), and any expression object
//!   (16406).
//! - Refused for one statement, by its handler through [`insert_error`] and
//!   [`update_error`]: an inserted document's two `_id`s (2) and an update statement's
//!   repeated operator paths (40) or replacement `_id` (2).
//!
//! - An update operator given twice (`{$set: {a: 1}, $set: {b: 1}}`) is applied whole, as
//!   mongod applies every element: the occurrences are merged ([`apply`]); a path both set is
//!   40, for the statement or (findAndModify) the command.
//!
//! Other repeats (a stored document's own repeated fields, a sort) are accepted; siltd keeps
//! the last value where mongod would store both (listed in `docs/compat.md`).

use bson::raw::RawDocument;
use bson::{Bson, Document};
use silt_query::expr::fmt_value;
use silt_query::{QResult, QueryError};
use silt_wire::RepeatedKey;

/// The elements of a raw document in wire order (repeats included), decoded one by one.
fn elements(raw: &[u8]) -> Vec<(String, Bson)> {
    let Ok(doc) = RawDocument::from_bytes(raw) else {
        return Vec::new();
    };
    doc.iter()
        .filter_map(Result::ok)
        .filter_map(|(k, v)| Some((k.to_string(), Bson::try_from(v.to_raw_bson()).ok()?)))
        .collect()
}

/// A raw document as mongod prints one (`{ a: 1, a: "x" }`), repeats included.
fn render(raw: &[u8]) -> String {
    let fields: Vec<String> = elements(raw)
        .iter()
        .map(|(k, v)| format!("{k}: {}", fmt_value(v)))
        .collect();
    if fields.is_empty() {
        "{}".into()
    } else {
        format!("{{ {} }}", fields.join(", "))
    }
}

fn conflict(path: &str) -> QueryError {
    QueryError::conflicting_update_operators(format!(
        "Updating the path '{path}' would create a conflict at '{path}'"
    ))
}

/// The document of path `at` in `doc`, for rewriting.
fn doc_at<'d>(doc: &'d mut Document, at: &[String]) -> Option<&'d mut Document> {
    let mut cur = doc;
    for (i, part) in at.iter().enumerate() {
        let next = cur.get_mut(part)?;
        let next = match next {
            Bson::Document(d) => d,
            Bson::Array(a) => return array_doc(a, &at[i + 1..]),
            _ => return None,
        };
        cur = next;
    }
    Some(cur)
}

fn array_doc<'d>(a: &'d mut [Bson], at: &[String]) -> Option<&'d mut Document> {
    let (first, rest) = at.split_first()?;
    match a.get_mut(first.parse::<usize>().ok()?)? {
        Bson::Document(d) => doc_at(d, rest),
        Bson::Array(inner) => array_doc(inner, rest),
        _ => None,
    }
}

/// Where a command keeps its filters (`N`: any statement or stage).
fn filter_roots(name: &str) -> &'static [&'static [&'static str]] {
    match name {
        "find" => &[&["filter"]],
        "count" | "distinct" | "findAndModify" | "findandmodify" => &[&["query"]],
        "delete" => &[&["deletes", "N", "q"]],
        "update" => &[&["updates", "N", "q"]],
        "aggregate" => &[&["pipeline", "N", "$match"]],
        _ => &[],
    }
}

/// The length of the filter root `path` starts with, if any.
fn under_filter(name: &str, path: &[String]) -> Option<usize> {
    filter_roots(name).iter().find_map(|root| {
        let hit = root.len() <= path.len()
            && root
                .iter()
                .zip(path)
                .all(|(r, p)| *r == "N" && p.parse::<usize>().is_ok() || r == p);
        hit.then_some(root.len())
    })
}

/// Before the handler: refuse what mongod refuses for the whole command, and rewrite
/// filters whose conditions repeat as the `$and` they mean.
pub(crate) fn apply(name: &str, cmd: &mut Document, repeats: &[RepeatedKey]) -> QResult<()> {
    // Deepest first, so that rewriting a document never moves one still to rewrite.
    let mut order: Vec<&RepeatedKey> = repeats.iter().collect();
    order.sort_by_key(|r| std::cmp::Reverse(r.path.len()));
    for r in order {
        if let Some(root) = under_filter(name, &r.path) {
            rewrite_filter(cmd, r, root);
            continue;
        }
        if is_update_doc(name, &r.path) && r.key.starts_with('$') {
            // An operator given twice (`{$set: {a: 1}, $set: {b: 1}}`): mongod applies every
            // element, so the occurrences are merged. A path set by both is a conflict: the
            // statement's (`update_error`) or the command's (findAndModify).
            match merged_operators(&r.raw) {
                Ok(Some(merged)) => {
                    if let Some(d) = doc_at(cmd, &r.path) {
                        *d = merged;
                    }
                }
                Ok(None) => {}
                Err(e) if name != "update" => return Err(e),
                Err(_) => {}
            }
            continue;
        }
        refuse(name, cmd, r)?;
    }
    Ok(())
}

/// Whether `path` is an update document: an update statement's `u` or findAndModify's
/// `update`.
fn is_update_doc(name: &str, path: &[String]) -> bool {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match (name, p.as_slice()) {
        ("update", ["updates", n, "u"]) => n.parse::<usize>().is_ok(),
        ("findAndModify" | "findandmodify", ["update"]) => true,
        _ => false,
    }
}

/// An update document whose operators repeat, with each operator's fields gathered in wire
/// order; 40 when a path appears twice. An operator whose value is not a document is left
/// as it was decoded, for the update parser to refuse.
fn merged_operators(raw: &[u8]) -> QResult<Option<Document>> {
    let mut out = Document::new();
    for (op, v) in elements(raw) {
        let Bson::Document(fields) = v else {
            return Ok(None);
        };
        let into = out
            .entry(op)
            .or_insert_with(|| Bson::Document(Document::new()));
        let Bson::Document(into) = into else {
            return Ok(None);
        };
        for (k, x) in fields {
            if into.contains_key(&k) {
                return Err(conflict(&k));
            }
            into.insert(k, x);
        }
    }
    Ok(Some(out))
}

/// `r` is a filter (or a member of `$and`/`$or`/`$nor`), or a field's operator object, whose
/// conditions repeat: make every one of them a conjunct.
fn rewrite_filter(cmd: &mut Document, r: &RepeatedKey, root: usize) {
    let rel = &r.path[root..];
    let all = elements(&r.raw);
    let is_filter = rel.is_empty()
        || rel.len() >= 2
            && matches!(rel[rel.len() - 2].as_str(), "$and" | "$or" | "$nor")
            && rel[rel.len() - 1].parse::<usize>().is_ok();
    if is_filter {
        let conjuncts: Vec<Bson> = all
            .into_iter()
            .map(|(k, v)| Bson::Document(Document::from_iter([(k, v)])))
            .collect();
        if let Some(d) = doc_at(cmd, &r.path) {
            *d = Document::from_iter([("$and".to_string(), Bson::Array(conjuncts))]);
        }
        return;
    }
    // A field's operators (`{a: {$gt: 1, $gt: 5}}`): each becomes `{a: {$op: v}}`, added to
    // the enclosing filter's `$and`.
    let Some((field, parent)) = r.path.split_last() else {
        return;
    };
    if !all.iter().all(|(k, _)| k.starts_with('$')) {
        return; // an equality to an embedded document: its repeated fields stay merged
    }
    if let Some(p) = doc_at(cmd, parent) {
        p.remove(field);
        let mut conjuncts = match p.remove("$and") {
            Some(Bson::Array(a)) => a,
            Some(other) => vec![other],
            None => Vec::new(),
        };
        for (op, v) in all {
            let cond = Document::from_iter([(op, v)]);
            conjuncts.push(Bson::Document(Document::from_iter([(
                field.clone(),
                Bson::Document(cond),
            )])));
        }
        p.insert("$and", conjuncts);
    }
}

/// The refusals that fail the whole command.
fn refuse(name: &str, cmd: &Document, r: &RepeatedKey) -> QResult<()> {
    let p: Vec<&str> = r.path.iter().map(String::as_str).collect();
    let key = r.key.as_str();
    match (name, p.as_slice()) {
        ("findAndModify" | "findandmodify", ["update"]) if key == "_id" => Err(
            QueryError::bad_value("Can't have multiple _id fields in one document"),
        ),
        ("findAndModify" | "findandmodify", ["update", op]) if op.starts_with('$') => {
            Err(conflict(key))
        }
        ("createIndexes", ["indexes", i, "key"]) => {
            let spec = cmd
                .get_array("indexes")
                .ok()
                .and_then(|a| a.get(i.parse::<usize>().ok()?))
                .and_then(Bson::as_document)
                .map(|spec| {
                    let fields: Vec<String> = spec
                        .iter()
                        .map(|(k, v)| match k.as_str() {
                            "key" => format!("key: {}", render(&r.raw)),
                            _ => format!("{k}: {}", fmt_value(v)),
                        })
                        .collect();
                    format!("{{ {} }}", fields.join(", "))
                })
                .unwrap_or_default();
            Err(QueryError::bad_value(format!(
                "Error in specification {spec} :: caused by :: The field '{key}' appears multiple times in the index key pattern {}",
                render(&r.raw)
            )))
        }
        ("find", ["projection"]) => Err(QueryError::located(
            31250,
            format!("Path collision at {key}"),
        )),
        ("find", ["projection", ..]) => Err(object_literal(&r.raw)),
        ("aggregate", ["pipeline", _, "$project"]) => Err(QueryError::located(
            31250,
            format!("Invalid $project :: caused by :: Path collision at {key}"),
        )),
        ("aggregate", ["pipeline", _, "$project", ..]) => {
            let e = object_literal(&r.raw);
            Err(QueryError::located(
                16406,
                format!("Invalid $project :: caused by :: {}", e.msg),
            ))
        }
        ("aggregate", ["pipeline", _, "$addFields" | "$set"]) => Err(QueryError::located(
            40176,
            format!(
                "Invalid $addFields :: caused by :: specification contains two conflicting paths. Cannot specify both '{key}' and '{key}': {}",
                render(&r.raw)
            ),
        )),
        ("aggregate", ["pipeline", _, "$addFields" | "$set" | "$group" | "$replaceRoot" | "$replaceWith" | "$bucket" | "$facet", ..]) => {
            Err(object_literal(&r.raw))
        }
        _ => Ok(()),
    }
}

/// 16406: an expression object with a repeated field.
fn object_literal(raw: &[u8]) -> QueryError {
    QueryError::located(
        16406,
        format!(
            "duplicate field name specified in object literal: {}",
            render(raw)
        ),
    )
}

/// An inserted document `i` of `documents` with two `_id`s: its write error (2).
pub(crate) fn insert_error(repeats: &[RepeatedKey], i: usize) -> Option<QueryError> {
    let at = i.to_string();
    repeats
        .iter()
        .any(|r| r.key == "_id" && r.is_at(&["documents", &at]))
        .then(|| QueryError::bad_value("can't have multiple _id fields in one document"))
}

/// Update statement `i`: a repeated path in its operators (40) or a replacement's two `_id`s.
pub(crate) fn update_error(repeats: &[RepeatedKey], i: usize) -> Option<QueryError> {
    let at = i.to_string();
    repeats.iter().find_map(|r| {
        let p: Vec<&str> = r.path.iter().map(String::as_str).collect();
        match p.as_slice() {
            ["updates", n, "u"] if *n == at && r.key == "_id" => Some(QueryError::bad_value(
                "Can't have multiple _id fields in one document",
            )),
            // An operator given twice whose occurrences set one path twice (`apply` merged
            // the others).
            ["updates", n, "u"] if *n == at && r.key.starts_with('$') => {
                merged_operators(&r.raw).err()
            }
            ["updates", n, "u", op] if *n == at && op.starts_with('$') => Some(conflict(&r.key)),
            _ => None,
        }
    })
}
