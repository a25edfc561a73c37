//! The versioned API (`apiVersion`, `apiStrict`, `apiDeprecationErrors`), checked before a
//! command runs: version "1" is the only one; with `apiStrict: true` a command or an
//! aggregation stage outside API version 1 fails with APIStrictError (323).

use bson::{Bson, Document};
use silt_query::QueryError;

/// Aggregation stages outside API version 1.
const NON_V1_STAGES: &[&str] = &[
    "$collStats",
    "$currentOp",
    "$indexStats",
    "$listLocalSessions",
    "$listSessions",
    "$planCacheStats",
    "$search",
    "$searchMeta",
    "$listSearchIndexes",
    "$changeStreamSplitLargeEvent",
];

fn api_error(msg: impl Into<String>) -> QueryError {
    QueryError::coded(322, "APIVersionError", msg)
}

fn strict_error(msg: impl Into<String>) -> QueryError {
    QueryError::coded(323, "APIStrictError", msg)
}

/// Check the API parameters of command `name` (its table name) in `cmd`.
pub(super) fn check(c: &super::Command, cmd: &Document) -> Result<(), QueryError> {
    let name = c.name;
    let version = cmd.get("apiVersion");
    let strict = cmd.get("apiStrict");
    let deprecation = cmd.get("apiDeprecationErrors");
    let Some(version) = version else {
        if strict.is_some() {
            return Err(api_error(
                "Provided apiStrict but no apiVersion; apiStrict requires apiVersion",
            ));
        }
        if deprecation.is_some() {
            return Err(api_error(
                "Provided apiDeprecationErrors but no apiVersion; apiDeprecationErrors \
                 requires apiVersion",
            ));
        }
        return Ok(());
    };
    match version {
        Bson::String(v) if v == "1" => {}
        Bson::String(v) => {
            return Err(api_error(format!("API version must be \"1\", not \"{v}\"")))
        }
        other => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'apiVersion' is the wrong type '{}', expected type 'string'",
                super::type_name(other)
            )))
        }
    }
    for (field, v) in [("apiStrict", strict), ("apiDeprecationErrors", deprecation)] {
        if let Some(v) = v.filter(|v| !matches!(v, Bson::Boolean(_))) {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{field}' is the wrong type '{}', expected type 'bool'",
                super::type_name(v)
            )));
        }
    }
    if strict != Some(&Bson::Boolean(true)) {
        return Ok(());
    }
    if !c.props.api_v1 {
        return Err(strict_error(format!(
            "Provided apiStrict:true, but the command {name} is not in API Version 1. \
             Information on supported commands and migrations in API Version 1 can be found at \
             https://dochub.mongodb.org/core/manual-versioned-api"
        )));
    }
    if name == "aggregate" {
        if let Some(Bson::Array(stages)) = cmd.get("pipeline") {
            for st in stages {
                if let Some(stage) = st
                    .as_document()
                    .and_then(|d| d.keys().next())
                    .filter(|s| NON_V1_STAGES.contains(&s.as_str()))
                {
                    return Err(strict_error(format!(
                        "{stage} is not allowed with 'apiStrict: true' in API Version 1"
                    )));
                }
            }
        }
    }
    Ok(())
}
