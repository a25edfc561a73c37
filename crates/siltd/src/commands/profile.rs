//! The `profile` command (mongosh's `db.setProfilingLevel`/`getProfilingStatus`): the
//! database profiler's level (0 off, 1 operations slower than `slowms`, 2 all; -1 reads the
//! settings). Profiled operations are written to `<db>.system.profile`.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::int_arg;
use crate::monitor::ProfileLevel;
use crate::state::{CmdResult, Server};

pub fn profile(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let level = int_arg(cmd, "profile")?.ok_or_else(|| {
        QueryError::type_mismatch("BSON field 'profile' is the wrong type, expected a number")
    })?;
    if !(-1..=2).contains(&level) {
        return Err(QueryError::bad_value(format!(
            "Invalid profiling level: {level}; use 0, 1 or 2 (-1 reads the settings)"
        )));
    }
    match cmd.get("sampleRate") {
        None | Some(Bson::Null) => {}
        Some(v)
            if silt_bson::compare::as_num(v).is_some_and(|n| {
                matches!(n, silt_bson::compare::Num::Int(1))
                    || matches!(n, silt_bson::compare::Num::Float(f) if f == 1.0)
            }) => {}
        Some(_) => return Err(super::args::not_implemented("profile.sampleRate")),
    }
    if cmd.get("filter").is_some_and(|f| !matches!(f, Bson::Null)) {
        return Err(super::args::not_implemented("profile.filter"));
    }
    let default_slow = s.cfg.slow.as_millis() as i64;
    let was = s.profiler.get(db, default_slow);
    if level >= 0 {
        let slow_ms = int_arg(cmd, "slowms")?.unwrap_or(was.slow_ms);
        s.profiler.set(
            db,
            ProfileLevel {
                level: level as i32,
                slow_ms,
            },
        );
    }
    Ok(doc! { "was": was.level, "slowms": was.slow_ms as i32, "sampleRate": 1.0 })
}
