//! `replSetGetStatus`: the one member, primary (see `crate::replset`).

use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_get_status(s: &Server) -> CmdResult {
    match &s.repl() {
        Some(rs) => Ok(rs.status(s.uptime().as_secs())),
        None => Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        )),
    }
}
