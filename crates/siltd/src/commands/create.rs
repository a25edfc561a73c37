//! The `create` command.

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::state::{coll_err, CmdResult, Server};

pub fn create(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "create")?;
    // The command table checked every field: what is left to decide is the values.
    let mut options = Document::new();
    match cmd.get("capped") {
        None | Some(Bson::Null) | Some(Bson::Boolean(false)) => {}
        Some(_) => return Err(super::args::not_implemented("create.capped")),
    }
    if cmd.contains_key("capped") {
        options.insert("capped", false);
    }
    if let Some(Bson::Document(id)) = cmd.get("idIndex") {
        // mongorestore sends the `_id` index it dumped; any other `_id` index is refused.
        let plain = id.get_document("key").ok() == Some(&bson::doc! {"_id": 1})
            && id
                .keys()
                .all(|k| matches!(k.as_str(), "key" | "name" | "v" | "ns"));
        if !plain {
            return Err(super::args::not_implemented("create.idIndex"));
        }
    }
    let ns = format!("{db}.{coll}");
    s.store.create(&ns, options).map_err(|e| match e {
        silt_collection::CollError::NamespaceExists(_) => {
            QueryError::namespace_exists(format!("Collection {ns} already exists."))
        }
        other => coll_err(other),
    })?;
    Ok(Document::new())
}
