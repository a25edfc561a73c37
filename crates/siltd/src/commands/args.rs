//! Which fields a command may carry, decided in one place before any handler runs.
//!
//! Every command document is checked against its entry in the command table
//! (`super::TABLE`) and MongoDB's generic arguments:
//! - a field siltd honours passes;
//! - a field MongoDB knows but siltd does not implement (`collation`, `let`, …) is refused
//!   with 238 `NotImplemented`, naming it, unless it carries its default (`false` or `null`);
//! - any other field is refused as MongoDB's strict parser refuses it: 40415, "BSON field
//!   '<cmd>.<field>' is an unknown field.";
//!
//! The session fields (`lsid`, `txnNumber`, `autocommit`, `startTransaction`, `readConcern`)
//! are checked and acted on before this, by `crate::transactions`.

use bson::{Bson, Document};
use silt_query::QueryError;

/// What a command accepts besides its own first field and the generic arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fields {
    /// Not strictly parsed (as in MongoDB): the handler reads what it knows.
    Any,
    /// Strictly parsed: `honoured` pass, `refused` are MongoDB's fields siltd does not
    /// implement.
    Only {
        honoured: &'static [&'static str],
        refused: &'static [&'static str],
    },
}

/// Generic arguments siltd accepts on every command (MongoDB's `generic_argument.idl`).
/// `maxTimeMS`, `writeConcern` and `readConcern` are read by the commands that use them; on
/// one node every read concern level siltd accepts is met by reading the latest data.
const GENERIC: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "comment",
    "maxTimeMS",
    "writeConcern",
    "readConcern",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "clientOperationKey",
    "$audit",
    "$client",
    "mayBypassWriteBlocking",
    // Sent by other cluster members; on one node they change no answer: `$queryOptions`
    // carries a read preference, the others ask for replication or sharding metadata.
    "$queryOptions",
    "$replData",
    "$oplogQueryData",
    "$configServerState",
    "$configTime",
    "$topologyTime",
    // Marks a mirrored read or a sampled query: the reply is the same.
    "mirrored",
    "sampleId",
];

/// Generic arguments of sessions that only replica sets and mongos honour.
const SESSION: &[&str] = &["txnNumber", "autocommit", "startTransaction", "stmtId"];

/// Internal generic arguments MongoDB accepts from other cluster members, none of which a
/// single siltd honours (those that change no answer are in [`GENERIC`]).
const INTERNAL: &[&str] = &[
    "allowImplicitCollectionCreation",
    "databaseVersion",
    "shardVersion",
    "tracking_info",
    "coordinator",
    "maxTimeMSOpOnly",
    "txnRetryCounter",
    "$tenant",
];

/// Refused fields whose default is `true` (so `true` is accepted and `false` refused).
const DEFAULT_TRUE: &[&str] = &["allowImplicitCollectionCreation"];

/// Whether field `k` carries its default: `false` or `null` for most refused fields, `true`
/// for those in [`DEFAULT_TRUE`], `{enabled: false}` for the change-stream image options.
fn is_default(k: &str, v: &Bson) -> bool {
    if DEFAULT_TRUE.contains(&k) {
        return matches!(v, Bson::Null | Bson::Undefined | Bson::Boolean(true));
    }
    match v {
        Bson::Null | Bson::Undefined | Bson::Boolean(false) => true,
        Bson::Document(d) => d.len() == 1 && d.get("enabled") == Some(&Bson::Boolean(false)),
        _ => false,
    }
}

/// 238 NotImplemented for a field MongoDB knows and siltd does not implement.
pub(super) fn not_implemented(path: &str) -> QueryError {
    QueryError::not_implemented(format!(
        "BSON field '{path}' is not supported by siltd: the option is not implemented"
    ))
}

/// 40415 for a field MongoDB's strict parser does not know.
pub(super) fn unknown_field(path: &str) -> QueryError {
    QueryError::located(40415, format!("BSON field '{path}' is an unknown field."))
}

/// The label MongoDB's parser puts before a field name in its errors.
fn label(cmd: &str) -> &str {
    match cmd {
        "find" => "FindCommandRequest",
        other => other,
    }
}

/// Check `cmd` (whose first field is the command `name`) against `fields`.
pub(super) fn check(name: &str, fields: Fields, cmd: &Document) -> Result<(), QueryError> {
    let Fields::Only { honoured, refused } = fields else {
        return Ok(());
    };
    for (k, v) in cmd.iter().skip(1) {
        let k = k.as_str();
        if GENERIC.contains(&k) || SESSION.contains(&k) || honoured.contains(&k) {
            continue;
        }
        if refused.contains(&k) || INTERNAL.contains(&k) {
            if is_default(k, v) {
                continue;
            }
            return Err(not_implemented(&format!("{}.{k}", label(name))));
        }
        return Err(unknown_field(&format!("{}.{k}", label(name))));
    }
    Ok(())
}

/// Check one statement of a write command (`update.updates.<i>`) against its fields.
pub(super) fn check_statement(
    path: &str,
    honoured: &[&str],
    refused: &[&str],
    st: &Document,
) -> Result<(), QueryError> {
    for (k, v) in st {
        let k = k.as_str();
        if honoured.contains(&k) {
            continue;
        }
        if refused.contains(&k) {
            if is_default(k, v) {
                continue;
            }
            return Err(not_implemented(&format!("{path}.{k}")));
        }
        return Err(unknown_field(&format!("{path}.{k}")));
    }
    Ok(())
}
