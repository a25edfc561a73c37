//! The `listIndexes` command.

use bson::Document;
use silt_query::QueryError;

use super::common::{clustered_index, coll_arg, cursor_reply};
use crate::state::{CmdResult, Server};

pub(super) fn list_indexes(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "listIndexes")?;
    let ns = format!("{db}.{coll}");
    // A collection a transaction is creating does not exist for others yet.
    let Some(c) = s.store().get(&ns).filter(|_| !s.store().is_hidden(&ns)) else {
        return Err(QueryError::namespace_not_found(format!(
            "ns does not exist: {ns}"
        )));
    };
    // A capped collection's primary tree is in insertion order, and a collated collection's
    // `_id`s are checked under its collation: their `_id_` index is listed alone.
    let mut out =
        if c.primary_key().is_natural() || (c.primary_key().is_id() && c.index("_id_").is_some()) {
            Vec::new()
        } else if let Some(mut ci) = clustered_index(&c.options()) {
            // mongod lists a clustered collection's index with `clustered: true`.
            ci.insert("clustered", true);
            vec![ci]
        } else {
            vec![c.primary_index_doc()]
        };
    out.extend(c.indexes().iter().map(|i| {
        let mut d = i.spec.to_doc();
        // mongod never shows `unique` on `_id_` (it is implied), and mongorestore sends the
        // spec back as `create`'s `idIndex`, where `unique` is not a valid field.
        if i.spec.name == "_id_" {
            d.remove("unique");
        }
        d
    }));
    Ok(cursor_reply(
        &format!("{db}.$cmd.listIndexes.{coll}"),
        out,
        0,
        true,
    ))
}
