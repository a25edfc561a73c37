//! The `compact` command.

use bson::{doc, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

/// `compact`: apply every buffered message of the collection and its indexes to the leaves,
/// then checkpoint. Reads afterwards meet no pending work, and the maintained count is exact.
pub(super) fn compact(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "compact")?;
    let ns = format!("{db}.{coll}");
    let Some(c) = s.store().get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "collection does not exist: {ns}"
        )));
    };
    let freed = s.store().compact(&c).map_err(coll_err)?;
    Ok(doc! { "bytesFreed": freed as i64 })
}
