//! `_siltRaft`: a request from another member of this server's Raft group
//! (`crate::raft_transport` sends it), answered by `silt_raft`.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn silt_raft(s: &Server, cmd: &Document) -> CmdResult {
    let Some(raft) = s.raft() else {
        return Err(QueryError::no_replication_enabled(
            "not running with --replSet",
        ));
    };
    crate::cluster_auth::check(s.cfg().cluster_key.as_deref(), s.cfg().auth, cmd)?;
    let set = cmd.get_str("setName").unwrap_or_default();
    let to = match cmd.get("to") {
        Some(Bson::Int64(i)) if *i > 0 => i.unsigned_abs(),
        Some(Bson::Int32(i)) if *i > 0 => u64::from(i.unsigned_abs()),
        _ => return Err(QueryError::bad_value("_siltRaft needs the member id 'to'")),
    };
    let Ok(body) = cmd.get_binary_generic("body") else {
        return Err(QueryError::bad_value("_siltRaft needs a binary 'body'"));
    };
    let answer = raft
        .handle(set, to, body)
        .map_err(|e| QueryError::coded(8, "UnknownError", e.to_string()))?;
    Ok(doc! {
        "body": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: answer },
    })
}
