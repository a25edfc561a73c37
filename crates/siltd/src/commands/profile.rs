//! The `profile` command (mongosh's `db.setProfilingLevel`/`getProfilingStatus`): the
//! database profiler's level (0 off, 1 operations slower than `slowms`, 2 all; -1 reads the
//! settings). Profiled operations are written to `<db>.system.profile`.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::int_arg;
use crate::monitor::ProfileLevel;
use crate::state::{CmdResult, Server};

pub(super) fn profile(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let level = int_arg(cmd, "profile")?.ok_or_else(|| {
        QueryError::type_mismatch("BSON field 'profile' is the wrong type, expected a number")
    })?;
    if !(-1..=2).contains(&level) {
        return Err(QueryError::bad_value(format!(
            "Invalid profiling level: {level}; use 0, 1 or 2 (-1 reads the settings)"
        )));
    }
    let sample_rate = match cmd.get("sampleRate") {
        None | Some(Bson::Null) => None,
        Some(v) => match silt_bson::compare::as_num(v) {
            Some(silt_bson::compare::Num::Int(i)) if (0..=1).contains(&i) => Some(i as f64),
            Some(silt_bson::compare::Num::Float(f)) if (0.0..=1.0).contains(&f) => Some(f),
            _ => {
                return Err(QueryError::bad_value(
                    "'sampleRate' must be between 0.0 and 1.0 inclusive",
                ))
            }
        },
    };
    // `filter`: a query over the profile entry; "unset" clears it.
    let filter = match cmd.get("filter") {
        None | Some(Bson::Null) => None,
        Some(Bson::String(u)) if u == "unset" => Some(None),
        Some(Bson::Document(f)) => Some(Some((
            f.clone(),
            std::sync::Arc::new(super::common::new_matcher(f)?),
        ))),
        Some(_) => {
            return Err(QueryError::bad_value(
                "'filter' must be an object or the string 'unset'",
            ))
        }
    };
    let default_slow = crate::num::millis(s.cfg().slow);
    let was = s.profiler().get(db, default_slow);
    if level >= 0 {
        let slow_ms = int_arg(cmd, "slowms")?.unwrap_or(was.slow_ms);
        s.profiler().set(
            db,
            ProfileLevel {
                level: crate::num::int32(level),
                slow_ms,
                sample_rate: sample_rate.unwrap_or(was.sample_rate),
                filter: filter.unwrap_or_else(|| was.filter.clone()),
            },
        );
    }
    let mut r = doc! { "was": was.level, "slowms": crate::num::int32(was.slow_ms), "sampleRate": was.sample_rate };
    if let Some((f, _)) = &was.filter {
        r.insert("filter", f.clone());
    }
    Ok(r)
}
