//! The `applyOps` command: apply oplog entries in order (mongorestore's `--oplogReplay` sends
//! them so), through the one apply function of the document layer
//! (`silt_collection::oplog::apply`), which applies every kind of entry idempotently.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn apply_ops(s: &Server, cmd: &Document) -> CmdResult {
    let ops = match cmd.get("applyOps") {
        Some(Bson::Array(a)) => a,
        _ => {
            return Err(QueryError::failed_to_parse(
                "ApplyOps must be an array of operations",
            ))
        }
    };
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        let Bson::Document(op) = op else {
            return Err(QueryError::failed_to_parse(
                "ApplyOps operations must be documents",
            ));
        };
        silt_collection::oplog::apply(s.store(), op).map_err(coll_err)?;
        results.push(Bson::Boolean(true));
    }
    Ok(doc! { "applied": i32::try_from(results.len()).unwrap_or(i32::MAX), "results": results })
}
