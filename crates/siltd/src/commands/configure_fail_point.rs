//! `configureFailPoint`: test hooks that make parts of the server fail on purpose, answered
//! only with `--enable-test-commands` (mongod's `enableTestCommands`).
//!
//! - `siltFastUpdatePanic`: the fast-update function panics when applied (the engine catches
//!   it; the document stays as it was and the failure is counted).
//! - `siltEngineWorkerPanic`: the next iteration of an engine worker thread panics, which
//!   poisons the storage environment (writes refused, `serverStatus` shows the cause) until
//!   the server restarts.
//! - `siltPartitionAddCrash`, `siltPartitionDropCrash`: the process ends (as in a crash, with
//!   no clean-up) in the middle of `addPartition` (after its catalog write) or `dropPartition`
//!   (after its catalog write, before its files are dropped).
//! - `failCommand`, `onPrimaryTransactionalWrite` and `failGetMoreAfterCursorCheckout`, as
//!   drivers' tests use them
//!   (`fail_command.rs`).
//! - `siltDiskFreeSpace` with `data: {freeBytes, totalBytes}`: the free-space red zone reads
//!   these figures instead of the filesystem's until the fail point is turned off.

use std::sync::atomic::Ordering;

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

#[expect(
    clippy::cast_possible_truncation,
    reason = "a simulated disk reading; a double saturates into u64"
)]
pub(super) fn configure_fail_point(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    if !s.cfg().test_commands {
        return Err(QueryError::command_not_found(
            "no such command: 'configureFailPoint'",
        ));
    }
    if db != "admin" {
        return Err(QueryError::unauthorized(
            "configureFailPoint may only be run against the admin database.",
        ));
    }
    let name = cmd.get_str("configureFailPoint").map_err(|_| {
        QueryError::type_mismatch("BSON field 'configureFailPoint' must be a string")
    })?;
    if matches!(
        name,
        "failCommand" | "onPrimaryTransactionalWrite" | "failGetMoreAfterCursorCheckout"
    ) {
        let mode = cmd
            .get("mode")
            .ok_or_else(|| QueryError::bad_value("missing 'mode'"))?;
        let data = match cmd.get("data") {
            None => None,
            Some(Bson::Document(d)) => Some(d),
            Some(_) => return Err(QueryError::bad_value("'data' must be an object")),
        };
        let count = match name {
            "failCommand" => s.fail_command().configure(mode, data)?,
            "onPrimaryTransactionalWrite" => s.on_txn_write().configure(mode, data)?,
            _ => s.get_more_failure().configure(mode, data)?,
        };
        return Ok(doc! { "count": count });
    }
    let on = match cmd.get("mode") {
        Some(Bson::String(m)) if m == "alwaysOn" => true,
        Some(Bson::String(m)) if m == "off" => false,
        Some(Bson::Document(d)) if d.contains_key("times") => true,
        Some(other) => {
            return Err(QueryError::bad_value(format!(
                "unsupported fail point mode {other}: use \"alwaysOn\", \"off\" or {{times: n}}"
            )))
        }
        None => return Err(QueryError::bad_value("missing 'mode'")),
    };
    if name == "siltDiskFreeSpace" {
        let reading = match cmd.get_document("data") {
            Ok(d) if on => {
                let n = |k: &str| match d.get(k) {
                    Some(Bson::Int32(v)) => Ok(*v as u64),
                    Some(Bson::Int64(v)) => Ok(*v as u64),
                    Some(Bson::Double(v)) => Ok(*v as u64),
                    _ => Err(QueryError::bad_value(format!(
                        "siltDiskFreeSpace needs data.{k}"
                    ))),
                };
                Some((n("freeBytes")?, n("totalBytes")?))
            }
            _ if on => {
                return Err(QueryError::bad_value(
                    "siltDiskFreeSpace needs data: {freeBytes, totalBytes}",
                ))
            }
            _ => None,
        };
        s.redzone().simulate(reading);
        return Ok(doc! { "count": 0 });
    }
    let was = match name {
        "siltFastUpdatePanic" => s.fast().fail_panic.swap(on, Ordering::AcqRel),
        "siltEngineWorkerPanic" => s
            .store()
            .fail_points()
            .worker_panic
            .swap(on, Ordering::AcqRel),
        "siltPartitionAddCrash" => s
            .store()
            .crash_points()
            .partition_add
            .swap(on, Ordering::AcqRel),
        "siltPartitionDropCrash" => s
            .store()
            .crash_points()
            .partition_drop
            .swap(on, Ordering::AcqRel),
        other => {
            return Err(QueryError::bad_value(format!(
                "Cannot find fail point named {other}"
            )))
        }
    };
    Ok(doc! { "count": i32::from(was) })
}
