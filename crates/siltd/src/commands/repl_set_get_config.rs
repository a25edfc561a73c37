//! `replSetGetConfig`: the one-member set's configuration (see `crate::replset`).

use bson::doc;
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_get_config(s: &Server) -> CmdResult {
    match &s.repl() {
        Some(rs) => Ok(doc! { "config": rs.config() }),
        None => Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        )),
    }
}
