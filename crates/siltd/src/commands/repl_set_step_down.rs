//! `replSetStepDown`: the primary of a multi-member set hands its role to a caught-up
//! secondary and does not campaign for `replSetStepDown` seconds (`crate::raft_member`).

use std::time::Duration;

use bson::{Bson, Document};
use silt_query::{QResult, QueryError};

use crate::state::{CmdResult, Server};

fn seconds(cmd: &Document, key: &str, default: u64) -> QResult<u64> {
    match cmd.get(key) {
        None => Ok(default),
        Some(Bson::Int32(i)) if *i >= 0 => Ok(u64::from(i.unsigned_abs())),
        Some(Bson::Int64(i)) if *i >= 0 => Ok(i.unsigned_abs()),
        Some(Bson::Double(f)) if *f >= 0.0 && *f < 1e9 => {
            Ok(format!("{:.0}", f.trunc()).parse().unwrap_or(0))
        }
        Some(_) => Err(QueryError::bad_value(format!(
            "{key} must be a non-negative number of seconds"
        ))),
    }
}

pub(super) fn repl_set_step_down(s: &Server, cmd: &Document) -> CmdResult {
    let (Some(_), Some(raft)) = (s.repl(), s.raft()) else {
        return Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        ));
    };
    let secs = seconds(cmd, "replSetStepDown", 60)?;
    let catch_up = seconds(cmd, "secondaryCatchUpPeriodSecs", 10)?;
    if catch_up > secs {
        return Err(QueryError::bad_value(
            "stepdown period must be longer than secondaryCatchUpPeriodSecs",
        ));
    }
    let force = cmd.get_bool("force").unwrap_or(false);
    raft.step_down(secs, Duration::from_secs(catch_up), force)?;
    Ok(Document::new())
}

pub(super) fn repl_set_freeze(s: &Server, cmd: &Document) -> CmdResult {
    let (Some(_), Some(raft)) = (s.repl(), s.raft()) else {
        return Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        ));
    };
    raft.freeze(seconds(cmd, "replSetFreeze", 0)?)
}
