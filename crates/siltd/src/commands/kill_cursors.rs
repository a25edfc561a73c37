//! The `killCursors` command.

use bson::{doc, Bson, Document};

use super::common::{coll_arg, missing_field, wrong_type};
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

pub(super) fn kill_cursors(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let ids = match cmd.get("cursors") {
        Some(Bson::Array(a)) => a,
        None => return Err(missing_field("killCursors.cursors")),
        other => return Err(wrong_type("killCursors.cursors", other, "array")),
    };
    let mut wanted = Vec::with_capacity(ids.len());
    for (i, v) in ids.iter().enumerate() {
        wanted.push(match v {
            Bson::Int64(id) => *id,
            other => {
                return Err(wrong_type(
                    &format!("killCursors.cursors.{i}"),
                    Some(other),
                    "long",
                ))
            }
        });
    }
    // A database-wide cursor (a change stream or `aggregate: 1`) is under `$cmd.aggregate`.
    let coll = match cmd.get("killCursors") {
        Some(Bson::String(c)) if c == "$cmd.aggregate" => c.clone(),
        _ => coll_arg(db, cmd, "killCursors")?,
    };
    let ns = format!("{db}.{coll}");
    let (killed, missing) = s.cursors().kill_as(&op.cursor_owner(), &ns, &wanted)?;
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": missing,
        "cursorsAlive": [],
        "cursorsUnknown": [],
    })
}
