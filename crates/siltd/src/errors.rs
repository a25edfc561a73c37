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
        CollError::PositionLost(m) => QueryError::coded(136, "CappedPositionLost", m),
        _ if e.is_corruption() => QueryError::data_corruption_detected(e.to_string()),
        _ if e.is_too_large() => QueryError::bson_object_too_large(e.to_string()),
        other => QueryError::internal(other.to_string()),
    }
}

/// The code name MongoDB gives an assertion without a name of its own (`Location<code>`),
/// for TokuMX's partition codes.
fn location_name(code: i32) -> &'static str {
    match code {
        64 => "WriteConcernTimeout",
        10107 => "NotWritablePrimary",
        11602 => "InterruptedDueToReplStateChange",
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
/// `coll`: the collection the command names, for the messages that print the namespace.
pub(crate) fn check_db_name(db: &str, coll: Option<&str>) -> Result<(), QueryError> {
    let ns = match coll {
        Some(c) => format!("{db}.{c}"),
        None => db.to_string(),
    };
    let msg = if db.is_empty() {
        format!("Invalid database name: '{db}'")
    } else if db.len() > 63 {
        format!("db name must be at most 63 characters, found: {}", db.len())
    } else if db.contains('.') {
        format!("'.' is an invalid character in a db name: {db}")
    } else if db.contains('\0') {
        "namespaces cannot have embedded null characters".into()
    } else if db.contains('$') {
        format!("Invalid namespace: {ns}")
    } else if db.contains(['/', '\\', ' ', '"']) {
        format!("Invalid namespace specified '{ns}'")
    } else {
        return Ok(());
    };
    Err(QueryError::invalid_namespace(msg))
}

/// Collection names MongoDB accepts.
pub(crate) fn check_coll_name(db: &str, coll: &str) -> Result<(), QueryError> {
    let msg = if coll.is_empty() {
        format!("Invalid namespace specified '{db}.'")
    } else if coll.contains('\0') {
        "namespaces cannot have embedded null characters".into()
    } else if coll.starts_with('.') {
        format!("Collection names cannot start with '.': {coll}")
    } else if coll.contains('$') {
        format!("Invalid collection name: {coll}")
    } else if db.len() + 1 + coll.len() > 255 {
        format!("Fully qualified namespace is too long. Namespace: {db}.{coll} Max: 255")
    } else {
        return Ok(());
    };
    Err(QueryError::invalid_namespace(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mongod 7.0's texts (drivers refuse most of these names before sending them, so the
    /// corpus cannot reach them).
    #[test]
    fn namespace_texts() {
        let msg = |r: Result<(), QueryError>| r.unwrap_err().msg;
        assert_eq!(
            msg(check_db_name("database.test", Some("c"))),
            "'.' is an invalid character in a db name: database.test"
        );
        assert_eq!(
            msg(check_db_name("name_with_a-$", Some("c"))),
            "Invalid namespace: name_with_a-$.c"
        );
        assert_eq!(
            msg(check_db_name("data base", Some("c"))),
            "Invalid namespace specified 'data base.c'"
        );
        assert_eq!(
            msg(check_db_name(&"a".repeat(64), None)),
            "db name must be at most 63 characters, found: 64"
        );
        assert!(check_db_name("ok_db-1", Some("c")).is_ok());
        assert_eq!(
            msg(check_coll_name("d", &"x".repeat(300))),
            format!(
                "Fully qualified namespace is too long. Namespace: d.{} Max: 255",
                "x".repeat(300)
            )
        );
    }
}
