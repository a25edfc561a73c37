//! The `killCursors` command.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::state::{CmdResult, Server};

pub(super) fn kill_cursors(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let _ = coll_arg(db, cmd, "killCursors")?;
    let ids = cmd.get_array("cursors").map_err(|_| {
        QueryError::type_mismatch("BSON field 'killCursors.cursors' must be an array")
    })?;
    let (mut killed, mut missing) = (Vec::new(), Vec::new());
    for v in ids {
        let id = match v {
            Bson::Int64(i) => *i,
            Bson::Int32(i) => i64::from(*i),
            _ => return Err(QueryError::type_mismatch("cursor ids must be longs")),
        };
        if s.cursors().kill(id) {
            killed.push(id);
        } else {
            missing.push(id);
        }
    }
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": missing,
        "cursorsAlive": [],
        "cursorsUnknown": [],
    })
}
