//! Errors as clients see them: MongoDB's error reply shape, the document layer's errors in
//! MongoDB's vocabulary, and the names MongoDB accepts for databases and collections.

use bson::{doc, Document};
use silt_collection::CollError;
use silt_query::QueryError;

/// MongoDB's error reply shape.
pub(crate) fn error_reply(e: &QueryError) -> Document {
    let mut d = doc! { "ok": 0.0, "errmsg": e.msg.clone(), "code": e.code, "codeName": e.name().into_owned() };
    if let Some(info) = &e.info {
        d.extend((**info).clone());
    }
    d
}

/// Map a document-layer error to MongoDB's vocabulary.
pub(crate) fn coll_err(e: CollError) -> QueryError {
    match e {
        CollError::DuplicateKey {
            ref key_pattern,
            ref key_value,
            ..
        } => QueryError::duplicate_key(e.to_string()).with_info(doc! {
            "keyPattern": (**key_pattern).clone(),
            "keyValue": (**key_value).clone(),
        }),
        CollError::NamespaceExists(_) => QueryError::namespace_exists(e.to_string()),
        CollError::Validation(info) => {
            QueryError::document_validation_failure("Document failed validation")
                .with_info(doc! { "errInfo": *info })
        }
        CollError::NamespaceNotFound(_) => QueryError::namespace_not_found(e.to_string()),
        CollError::ParallelArrays(..) => QueryError::cannot_index_parallel_arrays(e.to_string()),
        CollError::IndexConflict { code: 86, msg } => QueryError::index_key_specs_conflict(msg),
        CollError::IndexConflict { msg, .. } => QueryError::index_options_conflict(msg),
        CollError::IndexNotFound(m) => QueryError::index_not_found(m),
        CollError::Partition { code: 2, msg } => QueryError::bad_value(msg),
        CollError::Partition { code, msg }
        | CollError::BadDocument { code, msg }
        | CollError::Refused { code, msg } => QueryError::coded(code, location_name(code), msg),
        CollError::Interrupted => QueryError::interrupted(e.to_string()),
        CollError::TimeLimit => QueryError::max_time_ms_expired(e.to_string()),
        CollError::WriteConflict(_) => QueryError::write_conflict(e.to_string()),
        _ if e.is_corruption() => QueryError::data_corruption_detected(e.to_string()),
        _ if e.is_too_large() => QueryError::bson_object_too_large(e.to_string()),
        other => QueryError::internal(other.to_string()),
    }
}

/// The code name MongoDB gives an assertion without a name of its own (`Location<code>`),
/// for TokuMX's partition codes.
fn location_name(code: i32) -> &'static str {
    match code {
        15 => "Overflow",
        20 => "IllegalOperation",
        263 => "OperationNotSupportedInTransaction",
        10334 => "BSONObjectTooLarge",
        17248 => "Location17248",
        17249 => "Location17249",
        17250 => "Location17250",
        66 => "ImmutableField",
        17203 => "Location17203",
        17205 => "Location17205",
        17208 => "Location17208",
        17209 => "Location17209",
        17210 => "Location17210",
        17252 => "Location17252",
        17266 => "Location17266",
        17351 => "Location17351",
        17261 => "Location17261",
        17262 => "Location17262",
        _ => "UnknownError",
    }
}

/// Database names MongoDB accepts.
pub(crate) fn check_db_name(db: &str) -> Result<(), QueryError> {
    if db.is_empty() || db.len() > 63 || db.contains(['/', '\\', '.', ' ', '"', '$', '\0']) {
        return Err(QueryError::invalid_namespace(format!(
            "Invalid database name: '{db}'"
        )));
    }
    Ok(())
}

/// Collection names MongoDB accepts.
pub(crate) fn check_coll_name(db: &str, coll: &str) -> Result<(), QueryError> {
    if coll.is_empty() || coll.contains('\0') || coll.starts_with('.') || coll.contains('$') {
        return Err(QueryError::invalid_namespace(format!(
            "Invalid collection name: {db}.{coll}"
        )));
    }
    if db.len() + 1 + coll.len() > 255 {
        return Err(QueryError::invalid_namespace(format!(
            "Fully qualified namespace is too long: {db}.{coll}"
        )));
    }
    Ok(())
}
