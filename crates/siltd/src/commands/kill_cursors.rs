//! The `killCursors` command.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

pub(super) fn kill_cursors(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let ids = cmd.get_array("cursors").map_err(|_| {
        QueryError::type_mismatch("BSON field 'killCursors.cursors' must be an array")
    })?;
    let mut wanted = Vec::with_capacity(ids.len());
    for v in ids {
        wanted.push(match v {
            Bson::Int64(i) => *i,
            Bson::Int32(i) => i64::from(*i),
            _ => return Err(QueryError::type_mismatch("cursor ids must be longs")),
        });
    }
    let ns = format!("{db}.{}", coll_arg(db, cmd, "killCursors")?);
    let (killed, missing) = s.cursors().kill_as(&op.cursor_owner(), &ns, &wanted)?;
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": missing,
        "cursorsAlive": [],
        "cursorsUnknown": [],
    })
}
