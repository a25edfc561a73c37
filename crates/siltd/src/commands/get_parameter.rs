//! The `getParameter` command.

use std::sync::atomic::Ordering;

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn get_parameter(s: &Server, cmd: &Document) -> CmdResult {
    let fast = s.fast().enabled.load(Ordering::Relaxed);
    let all = matches!(cmd.get("getParameter"), Some(Bson::String(s)) if s == "*")
        || matches!(cmd.get("getParameter"), Some(Bson::Document(d)) if d.get_bool("allParameters").unwrap_or(false));
    let known = |name: &str| -> Option<Bson> {
        match name {
            "featureCompatibilityVersion" => {
                Some(Bson::Document(doc! { "version": super::common::FCV }))
            }
            "quiet" => Some(Bson::Boolean(false)),
            "logLevel" => Some(Bson::Int32(crate::logging::level())),
            "logComponentVerbosity" => Some(Bson::Document(
                doc! { "verbosity": crate::logging::level() },
            )),
            "authSchemaVersion" => Some(Bson::Int32(crate::auth::system_docs::AUTH_SCHEMA_VERSION)),
            "maxBSONDepth" => Some(Bson::Int32(100)),
            "cursorTimeoutMillis" => Some(Bson::Int64(600_000)),
            "fastUpdates" => Some(Bson::Boolean(fast)),
            "enableLocalhostAuthBypass" => Some(Bson::Boolean(
                s.auth().localhost_bypass.load(Ordering::Relaxed),
            )),
            "transactionLifetimeLimitSeconds" => {
                Some(Bson::Int32(crate::num::int32(s.txn_lifetime().as_secs())))
            }
            "maxTransactionLockRequestTimeoutMillis" => Some(Bson::Int32(crate::num::int32(
                s.txn_lock_wait().as_millis(),
            ))),
            "ttlMonitorSleepSecs" => Some(Bson::Int32(crate::num::int32(
                s.ttl().sleep_secs.load(Ordering::Relaxed),
            ))),
            "ttlMonitorEnabled" => Some(Bson::Boolean(s.ttl().enabled.load(Ordering::Relaxed))),
            "maxSessions" => Some(Bson::Int32(
                i32::try_from(s.sessions().max.load(Ordering::Relaxed)).unwrap_or(i32::MAX),
            )),
            "internalQueryMaxBlockingSortMemoryUsageBytes" => Some(Bson::Int64(
                silt_query::memory::SORT_LIMIT.load(Ordering::Relaxed) as i64,
            )),
            "internalDocumentSourceGroupMaxMemoryBytes" => Some(Bson::Int64(
                silt_query::memory::GROUP_LIMIT.load(Ordering::Relaxed) as i64,
            )),
            _ => None,
        }
    };
    let names = [
        "featureCompatibilityVersion",
        "quiet",
        "logLevel",
        "logComponentVerbosity",
        "authSchemaVersion",
        "maxBSONDepth",
        "cursorTimeoutMillis",
        "fastUpdates",
        "enableLocalhostAuthBypass",
        "transactionLifetimeLimitSeconds",
        "maxTransactionLockRequestTimeoutMillis",
        "ttlMonitorSleepSecs",
        "ttlMonitorEnabled",
        "internalQueryMaxBlockingSortMemoryUsageBytes",
        "internalDocumentSourceGroupMaxMemoryBytes",
        "maxSessions",
    ];
    let mut out = Document::new();
    if all {
        for n in names {
            if let Some(v) = known(n) {
                out.insert(n, v);
            }
        }
        return Ok(out);
    }
    for k in cmd.keys() {
        if k == "getParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        if let Some(v) = known(k) {
            out.insert(k.clone(), v);
        }
    }
    if out.is_empty() {
        return Err(QueryError::invalid_options("no option found to get"));
    }
    Ok(out)
}
