//! The `drop` command.

use bson::{doc, Document};

use super::common::coll_arg;
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};
use crate::views::SYSTEM_VIEWS;

pub(super) fn drop(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "drop")?;
    let ns = format!("{db}.{coll}");
    if s.views().is_view(&ns) {
        let sys = format!("{db}.{SYSTEM_VIEWS}");
        super::modify::delete_docs(s, op, &sys, &doc! { "_id": &ns }, None, false, None)?;
        s.views().remove(&ns);
        return Ok(doc! { "ns": ns });
    }
    let n = s
        .store()
        .get(&ns)
        .map(|c| c.indexes().len() + 1)
        .unwrap_or(1);
    if s.drop_collection(&ns).map_err(coll_err)? {
        Ok(doc! { "nIndexesWas": crate::num::int32(n), "ns": ns })
    } else {
        // MongoDB 7.0 reports success for a collection that does not exist.
        Ok(Document::new())
    }
}
