//! The `getMore` command: the next batch of an open cursor.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::{batch_size_arg, cursor_reply};
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

pub(super) fn get_more(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let id = match cmd.get("getMore") {
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Int32(i)) => i64::from(*i),
        _ => {
            return Err(QueryError::type_mismatch(
                "BSON field 'getMore.getMore' is the wrong type, expected type 'long'",
            ))
        }
    };
    let coll = cmd.get_str("collection").map_err(|_| {
        QueryError::type_mismatch("BSON field 'getMore.collection' must be a string")
    })?;
    s.ops().getmore.fetch_add(1, AtomicOrdering::Relaxed);
    let ns = format!("{db}.{coll}");
    let max_time = super::max_time::parse("getMore", cmd)?
        .map(|ms| std::time::Duration::from_millis(u64::from(ms)));
    let (docs, id) = s.cursors().get_more(
        &op.cursor_owner(),
        s.auth().enabled,
        id,
        &ns,
        batch_size_arg(cmd)?,
        max_time,
    )?;
    Ok(cursor_reply(&ns, docs, id, false))
}
