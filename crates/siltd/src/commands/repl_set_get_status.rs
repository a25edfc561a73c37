//! `replSetGetStatus`: the members of a multi-member set (`crate::raft_member`), or the one
//! member, primary (see `crate::replset`).

use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_get_status(s: &Server) -> CmdResult {
    if let Some(d) = s.raft().and_then(|r| r.status_doc()) {
        return Ok(d);
    }
    match &s.repl() {
        Some(rs) => Ok(rs.status(s.uptime().as_secs())),
        None => Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        )),
    }
}
