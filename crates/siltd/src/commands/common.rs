//! Argument helpers and facts shared by the command handlers.

use std::time::Instant;

use bson::{Bson, Document};
use std::sync::Arc;

use silt_query::collation::Collation;
use silt_query::matcher::Matcher;
use silt_query::{QResult, QueryError};

use crate::state::Server;

/// The collection name a command names in its first field.
pub(super) fn coll_arg(db: &str, cmd: &Document, name: &str) -> QResult<String> {
    match cmd.get(name) {
        Some(Bson::String(c)) => {
            crate::errors::check_coll_name(db, c)?;
            Ok(c.clone())
        }
        // mongod's namespace parser; createIndexes and dropIndexes read the name themselves.
        Some(other) if matches!(name, "createIndexes" | "dropIndexes") => {
            Err(QueryError::bad_value(format!(
                "collection name has invalid type {}",
                type_name(other)
            )))
        }
        Some(_) => Err(QueryError::invalid_namespace(
            "Failed to parse namespace element",
        )),
        None => Err(QueryError::failed_to_parse(format!("missing '{name}'"))),
    }
}

/// An optional sub-document argument.
/// The `collation` argument of a command or statement; `None` is the simple collation.
pub(super) fn collation_arg(d: &Document) -> QResult<Option<Arc<Collation>>> {
    match d.get("collation") {
        None => Ok(None),
        Some(v) => Collation::parse(v),
    }
}

/// The collation a command or statement `d` on collection `ns` runs under: its own
/// `collation` (`{locale: "simple"}` being the simple one), else the collection's default.
pub(crate) fn effective_collation(
    s: &Server,
    ns: Option<&str>,
    d: &Document,
) -> QResult<Option<Arc<Collation>>> {
    // A view reads under its own collation, and a command may only repeat it.
    if let Some(v) = ns.and_then(|ns| s.views().get(ns)) {
        let own = match &v.collation {
            Some(c) => Collation::parse(&bson::Bson::Document(c.clone()))?,
            None => None,
        };
        if d.contains_key("collation") {
            let asked = collation_arg(d)?;
            if !silt_query::collation::same(asked.as_ref(), own.as_ref()) {
                return Err(QueryError::coded(
                    167,
                    "OptionNotSupportedOnView",
                    "Cannot override a view's default collation",
                ));
            }
        }
        return Ok(own);
    }
    if d.contains_key("collation") {
        return collation_arg(d);
    }
    Ok(ns
        .and_then(|ns| s.store().get(ns))
        .and_then(|c| c.default_collation().cloned()))
}

pub(super) fn doc_arg<'a>(cmd: &'a Document, name: &str) -> QResult<Option<&'a Document>> {
    match cmd.get(name) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => Err(QueryError::type_mismatch(format!(
            "BSON field '{}' is the wrong type '{}', expected type 'object'",
            field_path(cmd, name),
            type_name(other)
        ))),
    }
}

/// An optional boolean argument (numbers are accepted as MongoDB does).
/// A field as mongod's parser names it in errors: `insert.ordered` for a field of the command
/// itself (the document with `$db`), the bare name inside a nested document.
pub(super) fn field_path(cmd: &Document, name: &str) -> String {
    match cmd.keys().next() {
        // `find` (explain's too) is parsed as a `FindCommandRequest`.
        Some(command) if command == "find" => format!("FindCommandRequest.{name}"),
        Some(command) if cmd.contains_key("$db") => format!("{command}.{name}"),
        _ => name.to_string(),
    }
}

pub(super) fn bool_arg(cmd: &Document, name: &str) -> QResult<Option<bool>> {
    match cmd.get(name) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(Bson::Int32(i)) => Ok(Some(*i != 0)),
        Some(Bson::Int64(i)) => Ok(Some(*i != 0)),
        Some(Bson::Double(d)) => Ok(Some(*d != 0.0)),
        Some(other) => Err(QueryError::type_mismatch(format!(
            "BSON field '{}' is the wrong type '{}', expected type 'bool'",
            field_path(cmd, name),
            type_name(other)
        ))),
    }
}

/// An optional non-negative integer argument.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is whole and finite; out of range it saturates, as mongod clamps"
)]
pub(super) fn int_arg(cmd: &Document, name: &str) -> QResult<Option<i64>> {
    let v = match cmd.get(name) {
        None | Some(Bson::Null) => return Ok(None),
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.is_finite() => *d as i64,
        Some(other) => return Err(wrong_number_type(&field_path(cmd, name), other)),
    };
    Ok(Some(v))
}

/// 14: field `path` (`cmd.field`) is `other` where mongod's parser wants type `expected`.
pub(super) fn wrong_type(path: &str, other: Option<&Bson>, expected: &str) -> QueryError {
    let t = other.map_or("missing", type_name);
    QueryError::type_mismatch(format!(
        "BSON field '{path}' is the wrong type '{t}', expected type '{expected}'"
    ))
}

/// 40414: required field `path` (`cmd.field`) is absent.
pub(super) fn missing_field(path: &str) -> QueryError {
    QueryError::located(
        40414,
        format!("BSON field '{path}' is missing but a required field"),
    )
}

/// A boolean of mongod's `optionalBool` type (`find`'s flags): a bool or absent; anything
/// else, `null` included, is 14.
pub(super) fn optional_bool(cmd: &Document, name: &str) -> QResult<Option<bool>> {
    match cmd.get(name) {
        None => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(other) => Err(QueryError::type_mismatch(format!(
            "Field '{name}' should be a boolean value, but found: {}",
            type_name(other)
        ))),
    }
}

/// A boolean of mongod's `safeBool` type: a bool or a number (non-zero is true); another type
/// is 14 naming the five accepted.
pub(super) fn safe_bool(cmd: &Document, name: &str) -> QResult<Option<bool>> {
    match cmd.get(name) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_))) => {
            Ok(Some(silt_query::matcher::is_truthy(v)))
        }
        Some(other) => Err(QueryError::type_mismatch(format!(
            "BSON field '{}' is the wrong type '{}', expected types '[bool, long, int, decimal, \
             double']",
            field_path(cmd, name),
            type_name(other)
        ))),
    }
}

/// 14: a field that must be a number is `other` (mongod's message, its quotes included).
pub(super) fn wrong_number_type(path: &str, other: &Bson) -> QueryError {
    let t = type_name(other);
    QueryError::type_mismatch(format!(
        "BSON field '{path}' is the wrong type '{t}', expected types '[long, int, decimal, double']"
    ))
}

pub(crate) use silt_bson::compare::type_name;

/// `{cursor: {firstBatch, id, ns}}`.
pub(super) fn cursor_reply(ns: &str, batch: Vec<Document>, id: i64, first: bool) -> Document {
    let field = if first { "firstBatch" } else { "nextBatch" };
    let mut c = Document::new();
    c.insert(field, batch);
    c.insert("id", id);
    c.insert("ns", ns);
    bson::doc! { "cursor": c }
}

/// A change stream's batch: [`cursor_reply`] with `postBatchResumeToken`, in mongod's order.
pub(super) fn cursor_reply_with_token(
    ns: &str,
    batch: Vec<Document>,
    id: i64,
    first: bool,
    token: Document,
) -> Document {
    let field = if first { "firstBatch" } else { "nextBatch" };
    let mut c = Document::new();
    c.insert(field, batch);
    c.insert("postBatchResumeToken", token);
    c.insert("id", id);
    c.insert("ns", ns);
    bson::doc! { "cursor": c }
}

/// When the command must stop, from its `maxTimeMS` (validated by `max_time::parse` before
/// the handler ran).
pub(super) fn deadline(cmd: &Document) -> QResult<Option<Instant>> {
    Ok(super::max_time::deadline(cmd))
}

pub(super) fn non_negative(cmd: &Document, name: &str) -> QResult<Option<u64>> {
    match int_arg(cmd, name)? {
        Some(v) if v < 0 => Err(QueryError::located(
            51024,
            format!("BSON field '{name}' value must be >= 0, actual value '{v}'"),
        )),
        Some(v) => Ok(Some(v as u64)),
        None => Ok(None),
    }
}

/// The hint's shape (whether it names an existing index is checked when planning).
pub(super) fn check_hint(cmd: &Document) -> QResult<()> {
    match cmd.get("hint") {
        None | Some(Bson::Null) | Some(Bson::String(_)) | Some(Bson::Document(_)) => Ok(()),
        Some(_) => Err(QueryError::bad_value(
            "hint must be a string (an index name) or an object (a key pattern)",
        )),
    }
}

/// A matcher that can evaluate `$expr`.
/// Its `$expr`s are parsed first, so an error in one (an undefined variable) is reported
/// whether or not a document is read.
pub(super) fn new_matcher(filter: &Document) -> QResult<Matcher> {
    silt_query::agg::check_exprs(filter)?;
    Matcher::new_with_expr(filter, silt_query::expr::eval_expr)
}

/// The command's `batchSize` (`find`, `getMore`); see [`batch_size`].
pub(super) fn batch_size_arg(cmd: &Document) -> QResult<Option<usize>> {
    batch_size(cmd, &field_path(cmd, "batchSize"))
}

/// A `batchSize` as mongod reads it: a number, a fraction truncated (1.9 is 1); negative is
/// 51024; another type is 14 naming `path` (`find.batchSize`, `cursor.batchSize`).
#[expect(
    clippy::cast_possible_truncation,
    reason = "a double batch size is truncated toward zero and saturates, as mongod reads it"
)]
pub(super) fn batch_size(doc: &Document, path: &str) -> QResult<Option<usize>> {
    let n = match doc.get("batchSize") {
        None | Some(Bson::Null) => return Ok(None),
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) => d.trunc() as i64,
        Some(Bson::Decimal128(d)) => d.to_string().parse::<f64>().map_or(0, |f| f.trunc() as i64),
        Some(other) => return Err(wrong_number_type(path, other)),
    };
    if n < 0 {
        return Err(QueryError::located(
            51024,
            format!("BSON field 'batchSize' value must be >= 0, actual value '{n}'"),
        ));
    }
    Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)))
}

pub(super) fn scale_arg(cmd: &Document) -> Result<i64, QueryError> {
    let scale = int_arg(cmd, "scale")?.unwrap_or(1);
    if scale < 1 {
        return Err(QueryError::bad_value("scale has to be >= 1"));
    }
    Ok(scale)
}

/// The MongoDB release whose protocol and behaviour we follow.
pub(super) const MONGO_VERSION: &str = "7.0.0";

/// The feature compatibility version siltd reports (`getParameter`, `admin.system.version`).
pub(crate) const FCV: &str = "7.0";

/// Wire version of MongoDB 7.0.
pub(super) const MAX_WIRE_VERSION: i32 = 21;

pub(super) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `host:port`, as MongoDB names itself in `serverStatus` and `currentOp`.
pub(super) fn host(s: &Server) -> String {
    format!("{}:{}", hostname(), s.cfg().port)
}

pub(super) fn admin_only(db: &str, name: &str) -> Result<(), QueryError> {
    if db == "admin" {
        return Ok(());
    }
    Err(QueryError::unauthorized(format!(
        "{name} may only be run against the admin database."
    )))
}

/// The stages of a `pipeline` array (each must be an object).
pub(super) fn stage_docs(a: &[Bson]) -> QResult<Vec<Document>> {
    a.iter()
        .map(|x| match x {
            Bson::Document(d) => Ok(d.clone()),
            _ => Err(QueryError::type_mismatch(
                "Each element of the 'pipeline' array must be an object",
            )),
        })
        .collect()
}

/// A clustered collection's `clusteredIndex` as mongod shows it (`v`, `key`, `name`,
/// `unique`), from the option as `create` stored it; `None` for another collection.
pub(super) fn clustered_index(options: &Document) -> Option<Document> {
    let ci = options.get_document("clusteredIndex").ok()?;
    Some(bson::doc! {
        "v": ci.get("v").cloned().unwrap_or(Bson::Int32(2)),
        "key": ci.get_document("key").cloned().unwrap_or_else(|_| bson::doc! { "_id": 1 }),
        "name": ci.get_str("name").unwrap_or("_id_"),
        "unique": true,
    })
}
