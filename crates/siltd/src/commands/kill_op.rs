//! The `killOp` command.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::admin_only;
use crate::state::{CmdResult, Server};

/// `killOp: 1, op: <opid>`: ask an operation to stop at its next interrupt point (index
/// builds and reads check often; see `ops`). Like MongoDB, succeeds whether or not the
/// operation exists.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a whole double opid saturates; out of u32 it names no operation"
)]
pub(super) fn kill_op(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    admin_only(db, "killOp")?;
    let opid = match cmd.get("op") {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) if d.fract() == 0.0 => *d as i64,
        _ => return Err(QueryError::bad_value("Did not provide \"op\" field")),
    };
    let found = u32::try_from(opid).is_ok_and(|id| s.inprog().kill(id));
    tracing::info!(opid, found, "killOp");
    Ok(doc! { "info": "attempting to kill op" })
}
