//! The `getParameter` command: named parameters (`{getParameter: 1, quiet: 1}`), every one
//! (`'*'` or `{allParameters: true}`), and `{showDetails: true}`, which gives each as
//! `{value, settableAtRuntime, settableAtStartup}`, as mongod does.

use std::sync::atomic::Ordering;

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

/// A `showDetails`/`allParameters` flag: a bool or a number (nonzero is true), null false.
fn flag(opts: &Document, name: &str) -> Result<bool, QueryError> {
    Ok(match opts.get(name) {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(Bson::Decimal128(d)) => d.to_string().parse::<f64>().is_ok_and(|f| f != 0.0),
        Some(other) => {
            let t = super::common::type_name(other);
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'getParameter.{name}' is the wrong type '{t}', expected types '[bool, long, int, decimal, double']"
            )));
        }
    })
}

/// Whether a parameter can be set by `setParameter` and at start-up (`--setParameter`).
fn settable(name: &str) -> (bool, bool) {
    match name {
        "featureCompatibilityVersion" => (false, false),
        "maxBSONDepth"
        | "authSchemaVersion"
        | "authenticationMechanisms"
        | "enableTestCommands" => (false, true),
        _ => (true, true),
    }
}

pub(super) fn get_parameter(s: &Server, cmd: &Document) -> CmdResult {
    let fast = s.fast().enabled.load(Ordering::Relaxed);
    let (all, details) = match cmd.get("getParameter") {
        Some(Bson::String(s)) if s == "*" => (true, false),
        Some(Bson::Document(d)) => (flag(d, "allParameters")?, flag(d, "showDetails")?),
        _ => (false, false),
    };
    let known = |name: &str| -> Option<Bson> {
        match name {
            "featureCompatibilityVersion" => {
                Some(Bson::Document(doc! { "version": super::common::FCV }))
            }
            "quiet" => Some(Bson::Boolean(false)),
            "authenticationMechanisms" => Some(Bson::Array(
                crate::auth::scram::Mech::ALL
                    .iter()
                    .map(|m| Bson::String(m.name().to_string()))
                    .collect(),
            )),
            "logLevel" => Some(Bson::Int32(crate::logging::level())),
            "logComponentVerbosity" => Some(Bson::Document(
                doc! { "verbosity": crate::logging::level() },
            )),
            "authSchemaVersion" => Some(Bson::Int32(crate::auth::system_docs::AUTH_SCHEMA_VERSION)),
            "maxBSONDepth" => Some(Bson::Int32(100)),
            // `--enable-test-commands` (drivers' test suites read it to use fail points).
            "enableTestCommands" => Some(Bson::Boolean(s.cfg().test_commands)),
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
        "authenticationMechanisms",
        "logLevel",
        "logComponentVerbosity",
        "authSchemaVersion",
        "maxBSONDepth",
        "enableTestCommands",
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
    let shown = |name: &str, v: Bson| -> Bson {
        if !details {
            return v;
        }
        let (runtime, startup) = settable(name);
        Bson::Document(doc! {
            "value": v,
            "settableAtRuntime": runtime,
            "settableAtStartup": startup,
        })
    };
    let mut out = Document::new();
    if all {
        for n in names {
            if let Some(v) = known(n) {
                out.insert(n, shown(n, v));
            }
        }
        return Ok(out);
    }
    for k in cmd.keys() {
        if k == "getParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        if let Some(v) = known(k) {
            out.insert(k.clone(), shown(k, v));
        }
    }
    if out.is_empty() {
        return Err(QueryError::invalid_options("no option found to get"));
    }
    Ok(out)
}
