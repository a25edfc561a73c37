//! `replSetInitiate`: a server started with `--replSet` is initiated from the start as the
//! one-member set (itself, primary). A config naming more members makes it a member of a
//! multi-member set (`crate::raft_member`); a second initiate answers AlreadyInitialized.

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn repl_set_initiate(s: &Server, cmd: &Document) -> CmdResult {
    let (Some(_), Some(raft)) = (s.repl(), s.raft()) else {
        return Err(QueryError::no_replication_enabled(
            "This node was not started with replication enabled.",
        ));
    };
    if raft.member().is_some() {
        return Err(QueryError::already_initialized("already initialized"));
    }
    // Without a config (mongosh's `rs.initiate()`), the default one is the one-member set
    // this server already is.
    let Some(Bson::Document(config)) = cmd
        .get("replSetInitiate")
        .filter(|c| matches!(c, Bson::Document(d) if !d.is_empty()))
    else {
        return Err(QueryError::already_initialized("already initialized"));
    };
    // Members authenticate one another with the keyFile's key (and talk TLS when it is on).
    let unsupported = if s.cfg().auth && s.cfg().cluster_key.is_none() {
        Some("a multi-member replica set with --auth needs member authentication: start every member with the same --keyFile")
    } else {
        None
    };
    if raft.initiate(config, unsupported)? {
        Ok(Document::new())
    } else {
        Err(QueryError::already_initialized("already initialized"))
    }
}
