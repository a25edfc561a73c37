//! The `getMore` command: the next batch of an open cursor.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::{batch_size_arg, cursor_reply, missing_field, wrong_type};
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

pub(super) fn get_more(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    // mongod's IDL: the cursor id is a long, the collection a non-empty string.
    let id = match cmd.get("getMore") {
        Some(Bson::Int64(i)) => *i,
        other => return Err(wrong_type("getMore.getMore", other, "long")),
    };
    let coll = match cmd.get("collection") {
        Some(Bson::String(c)) => c.as_str(),
        None => return Err(missing_field("getMore.collection")),
        other => return Err(wrong_type("getMore.collection", other, "string")),
    };
    if coll.is_empty() {
        return Err(QueryError::invalid_namespace(
            "Collection names cannot be empty",
        ));
    }
    s.ops().getmore.fetch_add(1, AtomicOrdering::Relaxed);
    let ns = format!("{db}.{coll}");
    let max_time = super::max_time::parse("getMore", cmd)?
        .map(|ms| std::time::Duration::from_millis(u64::from(ms)));
    let ask = crate::cursors::GetMore {
        id,
        ns: &ns,
        batch_size: batch_size_arg(cmd)?,
        max_time,
        test_failure: s.cfg().test_commands.then(|| s.get_more_failure()),
    };
    let (docs, id, token) = s
        .cursors()
        .get_more(&op.cursor_owner(), s.auth().enabled, ask)?;
    Ok(match token {
        Some(t) => super::common::cursor_reply_with_token(&ns, docs, id, false, t),
        None => cursor_reply(&ns, docs, id, false),
    })
}
