//! `replSetInitiate`: a server started with `--replSet` is initiated from the start as the
//! one-member set (itself, primary). A config naming more members makes it a member of a
//! multi-member set (`crate::raft_member`); a second initiate answers AlreadyInitialized.
//!
//! The first initiate of the one-member set itself (mongosh's `rs.initiate()` without a
//! config, or a config naming only this server), the usual first step of a set's setup
//! script, is answered as mongod answers it on a fresh server; `rs.add()` then grows the set
//! (`repl_set_reconfig.rs`).

use bson::{doc, Bson, Document};
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
    let config = cmd.get("replSetInitiate").and_then(|c| match c {
        Bson::Document(d) if !d.is_empty() => Some(d),
        _ => None,
    });
    let alone = match config {
        Some(config) => !raft.initiate(config, missing_member_auth(s))?,
        None => true,
    };
    if alone && !raft.initiate_alone() {
        return Err(QueryError::already_initialized("already initialized"));
    }
    Ok(match config {
        None => doc! {
            "info2": "no configuration specified. Using a default configuration for the set",
            "me": s.repl().map(|r| r.me.clone()).unwrap_or_default(),
        },
        Some(_) => Document::new(),
    })
}

/// Why a multi-member set cannot be made here: members authenticate one another with the
/// keyFile's key, so `--auth` without one cannot admit them.
pub(super) fn missing_member_auth(s: &Server) -> Option<&'static str> {
    (s.cfg().auth && s.cfg().cluster_key.is_none()).then_some(
        "a multi-member replica set with --auth needs member authentication: start every member with the same --keyFile",
    )
}
