//! `replSetReconfig`: add and remove members of a set, or change whether they vote
//! (`crate::raft_member`; what siltd cannot honour is refused by name). On the one-member set
//! a config naming more members makes it a multi-member set, as `replSetInitiate` with that
//! config would.

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_reconfig(s: &Server, cmd: &Document) -> CmdResult {
    let (Some(_), Some(raft)) = (s.repl(), s.raft()) else {
        return Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        ));
    };
    let Some(Bson::Document(config)) = cmd.get("replSetReconfig") else {
        return Err(QueryError::type_mismatch(
            "replSetReconfig takes a config document",
        ));
    };
    raft.reconfig(
        config,
        cmd.get_bool("force").unwrap_or(false),
        super::repl_set_initiate::missing_member_auth(s),
    )?;
    Ok(Document::new())
}
