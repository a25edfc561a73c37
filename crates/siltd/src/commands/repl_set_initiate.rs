//! `replSetInitiate`: a server started with `--replSet` is initiated from the start (one
//! member, itself, primary), so this answers as mongod does for an initiated set.

use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_initiate(s: &Server) -> CmdResult {
    match &s.repl() {
        Some(_) => Err(QueryError::already_initialized("already initialized")),
        None => Err(QueryError::no_replication_enabled(
            "This node was not started with replication enabled.",
        )),
    }
}
