//! Write-result plumbing shared by insert, update, delete and findAndModify: the
//! statement list, per-document failures (`writeErrors`, duplicate keys with their key),
//! and the `_id` of a document to insert. (The write concern is met after the command, by
//! `crate::transactions`.)

use bson::{doc, oid::ObjectId, Bson, Document};
use silt_collection::CollError;
use silt_query::{QResult, QueryError};

use super::common::type_name;
use crate::errors::coll_err;

pub(super) fn write_error(index: usize, e: &QueryError) -> Document {
    let mut w = doc! { "index": crate::num::int32(index), "code": e.code, "errmsg": e.msg.clone() };
    if let Some(info) = &e.info {
        w.extend((**info).clone());
    }
    w
}

/// A duplicate key: the index, its key pattern and the duplicate values.
pub(super) struct DupKey {
    pub(super) msg: String,
    pub(super) key_pattern: Document,
    pub(super) key_value: Document,
}

pub(super) fn dup_write_error(index: usize, d: DupKey) -> Document {
    let e = QueryError::duplicate_key(d.msg);
    let mut w = write_error(index, &e);
    w.insert("keyPattern", d.key_pattern);
    w.insert("keyValue", d.key_value);
    w
}

pub(super) fn doc_size(d: &Document) -> usize {
    let mut v = Vec::new();
    let _ = d.to_writer(&mut v);
    v.len()
}

/// Give a document to insert an `_id` (first) if it has none, and check that `_id`. Field
/// names with dots and `$`-prefixed names are stored as given (MongoDB 5.0+), except inside
/// `_id`. (Size and nesting limits are the document layer's write rules.)
pub(super) fn prepare_insert(mut d: Document) -> QResult<Document> {
    match d.get("_id") {
        None => {
            let mut nd = Document::new();
            nd.insert("_id", ObjectId::new());
            nd.extend(d);
            d = nd;
        }
        Some(v @ (Bson::Array(_) | Bson::RegularExpression(_) | Bson::Undefined)) => {
            return Err(QueryError::invalid_id_field(format!(
                "The '_id' value cannot be of type {}",
                type_name(v)
            )))
        }
        Some(Bson::Document(sub)) if sub.keys().any(|k| k.starts_with('$')) => {
            return Err(QueryError::dollar_prefixed_field_name(
                "_id fields may not contain '$'-prefixed fields",
            ))
        }
        Some(_) => {
            if d.keys().next().map(String::as_str) != Some("_id") {
                // MongoDB stores _id first.
                let id = d.remove("_id").unwrap_or(Bson::Null);
                let mut nd = doc! { "_id": id };
                nd.extend(d);
                d = nd;
            }
        }
    }
    Ok(d)
}

/// A failed write of one document: a duplicate key (reported with the key) or another error.
pub(super) enum WriteFail {
    Dup(Box<DupKey>),
    Other(QueryError),
}

impl From<QueryError> for WriteFail {
    fn from(e: QueryError) -> Self {
        WriteFail::Other(e)
    }
}

impl From<CollError> for WriteFail {
    fn from(e: CollError) -> Self {
        match e {
            CollError::DuplicateKey {
                ref key_pattern,
                ref key_value,
                ..
            } => WriteFail::Dup(Box::new(DupKey {
                key_pattern: (**key_pattern).clone(),
                key_value: (**key_value).clone(),
                msg: e.to_string(),
            })),
            other => WriteFail::Other(coll_err(other)),
        }
    }
}

impl WriteFail {
    pub(super) fn into_write_error(self, index: usize) -> Document {
        match self {
            WriteFail::Dup(d) => dup_write_error(index, *d),
            WriteFail::Other(e) => write_error(index, &e),
        }
    }
    pub(super) fn into_error(self) -> QueryError {
        match self {
            WriteFail::Dup(d) => QueryError::duplicate_key(d.msg)
                .with_info(doc! { "keyPattern": d.key_pattern, "keyValue": d.key_value }),
            WriteFail::Other(e) => e,
        }
    }
}

pub(super) fn docs_arg<'a>(cmd: &'a Document, name: &str) -> QResult<Vec<&'a Document>> {
    let command = cmd.keys().next().map_or("", String::as_str);
    let arr = match cmd.get(name) {
        Some(Bson::Array(a)) => a,
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{command}.{name}' is the wrong type '{}', expected type 'array'",
                type_name(other)
            )))
        }
        None => {
            return Err(QueryError::located(
                40414,
                format!("BSON field '{command}.{name}' is missing but a required field"),
            ))
        }
    };
    if arr.is_empty() || arr.len() > silt_wire::MAX_WRITE_BATCH {
        return Err(QueryError::invalid_length(format!(
            "Write batch sizes must be between 1 and {}. Got {} operations.",
            silt_wire::MAX_WRITE_BATCH,
            arr.len()
        )));
    }
    arr.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Bson::Document(d) => Ok(d),
            other => Err(QueryError::type_mismatch(format!(
                "BSON field '{command}.{name}.{i}' is the wrong type '{}', expected type 'object'",
                type_name(other)
            ))),
        })
        .collect()
}
