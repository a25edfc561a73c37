//! The `setParameter` command.

use std::sync::atomic::Ordering;

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::int_arg;
use crate::state::{CmdResult, Server};

pub(super) fn set_parameter(s: &Server, cmd: &Document) -> CmdResult {
    let mut out = Document::new();
    for (k, v) in cmd {
        if k == "setParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        match (k.as_str(), v) {
            ("logLevel", _) => {
                let n = match int_arg(cmd, k)? {
                    Some(n) if (0..=5).contains(&n) => crate::num::int32(n),
                    _ => return Err(QueryError::bad_value("logLevel must be between 0 and 5")),
                };
                let was = crate::logging::set_level(n).map_err(QueryError::internal)?;
                out.insert("was", was);
            }
            // mongosh's `db.setLogLevel(n)`: the top-level verbosity is siltd's one level; a
            // component's own verbosity is accepted (logging changes no answer), and siltd
            // logs every component at the top level.
            ("logComponentVerbosity", Bson::Document(d)) => {
                let was = crate::logging::level();
                if let Some(v) = d.get("verbosity") {
                    match silt_bson::compare::as_num(v) {
                        Some(silt_bson::compare::Num::Int(n)) if (-1..=5).contains(&n) => {
                            crate::logging::set_level(crate::num::int32(n.max(0)))
                                .map_err(QueryError::internal)?;
                        }
                        _ => {
                            return Err(QueryError::bad_value(
                                "verbosity must be a number between -1 and 5",
                            ))
                        }
                    }
                }
                out.insert("was", bson::doc! { "verbosity": was });
            }
            // Full-time diagnostic data capture: siltd keeps none (serverStatus and the metrics
            // endpoint are its diagnostics), so turning it on or off changes nothing.
            ("diagnosticDataCollectionEnabled", Bson::Boolean(_)) => {
                out.insert("was", false);
            }
            ("enableLocalhostAuthBypass", Bson::Boolean(b)) => {
                let was = s.auth().localhost_bypass.swap(*b, Ordering::Relaxed);
                out.insert("was", was);
            }
            ("fastUpdates", Bson::Boolean(b)) => {
                let was = s.fast().enabled.swap(*b, Ordering::Relaxed);
                out.insert("was", was);
            }
            ("fastUpdates", _) => {
                return Err(QueryError::bad_value("fastUpdates must be a boolean"))
            }
            ("ttlMonitorSleepSecs", _) => {
                let n = match int_arg(cmd, k)? {
                    Some(n) if n >= 1 => n as u64,
                    _ => return Err(QueryError::bad_value(format!("{k} must be at least 1"))),
                };
                let was = s.ttl().sleep_secs.swap(n, Ordering::Relaxed);
                out.insert("was", crate::num::int32(was));
            }
            ("ttlMonitorEnabled", Bson::Boolean(b)) => {
                let was = s.ttl().enabled.swap(*b, Ordering::Relaxed);
                out.insert("was", was);
            }
            ("ttlMonitorEnabled", _) => {
                return Err(QueryError::bad_value("ttlMonitorEnabled must be a boolean"))
            }
            ("transactionLifetimeLimitSeconds", _) => {
                let n = match int_arg(cmd, k)? {
                    Some(n) if n >= 1 => n as u64,
                    _ => return Err(QueryError::bad_value(format!("{k} must be at least 1"))),
                };
                let was = s.set_txn_lifetime_s(n);
                out.insert("was", crate::num::int32(was));
            }
            (
                "internalQueryMaxBlockingSortMemoryUsageBytes"
                | "internalDocumentSourceGroupMaxMemoryBytes",
                _,
            ) => {
                let n = match int_arg(cmd, k)? {
                    Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                    _ => return Err(QueryError::bad_value(format!("{k} must be at least 1"))),
                };
                let cap = if k.starts_with("internalQuery") {
                    &silt_query::memory::SORT_LIMIT
                } else {
                    &silt_query::memory::GROUP_LIMIT
                };
                let was = cap.swap(n, Ordering::Relaxed);
                out.insert("was", was as i64);
            }
            ("maxSessions", _) => {
                let n = match int_arg(cmd, k)? {
                    Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                    _ => return Err(QueryError::bad_value(format!("{k} must be at least 1"))),
                };
                let was = s.sessions().max.swap(n, Ordering::Relaxed);
                out.insert("was", was as i64);
            }
            ("maxTransactionLockRequestTimeoutMillis", _) => {
                // MongoDB: a negative value waits without limit; a week stands for it here.
                let n = match int_arg(cmd, k)? {
                    Some(n) if n < 0 => 7 * 24 * 3_600_000,
                    Some(n) => n as u64,
                    None => return Err(QueryError::bad_value(format!("{k} must be a number"))),
                };
                let was = s.set_txn_lock_wait_ms(n);
                out.insert("was", crate::num::int32(was));
            }
            _ => {
                return Err(QueryError::invalid_options(format!(
                    "attempted to set unrecognized parameter [{k}], use help:true to see options"
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(QueryError::invalid_options(
            "no option found to set, use help:true to see options",
        ));
    }
    Ok(out)
}
