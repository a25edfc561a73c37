//! `replSetGetConfig`: the members of a multi-member set (`crate::raft_member`), or the
//! one-member set's configuration (see `crate::replset`).

use bson::doc;
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_get_config(s: &Server) -> CmdResult {
    match s.replset_config() {
        Some(config) => Ok(doc! { "config": config }),
        None => Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        )),
    }
}
