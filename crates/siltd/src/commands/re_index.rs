//! The `reIndex` command: rebuild every secondary index of a collection from its documents
//! (drop, then build again with the same specs).

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn re_index(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "reIndex")?;
    let ns = format!("{db}.{coll}");
    s.views().refuse_write(&ns)?;
    let Some(c) = s.store().get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "collection {ns} does not exist"
        )));
    };
    let keep: Vec<silt_collection::IndexSpec> = c
        .indexes()
        .iter()
        .filter(|i| i.name() != "_id_")
        .map(|i| i.spec.clone())
        .collect();
    let was = keep.len() + 1;
    let names: Vec<String> = keep.iter().map(|s| s.name.clone()).collect();
    if !names.is_empty() {
        s.store().drop_indexes(&ns, &names).map_err(coll_err)?;
        s.store().create_indexes(&ns, keep).map_err(coll_err)?;
    }
    let c = s.store().get(&ns).unwrap_or(c);
    let mut specs = if c.primary_key().is_natural() {
        Vec::new()
    } else {
        vec![Bson::Document(c.primary_index_doc())]
    };
    specs.extend(c.indexes().iter().map(|i| Bson::Document(i.spec.to_doc())));
    Ok(doc! {
        "nIndexesWas": crate::num::int32(was),
        "nIndexes": crate::num::int32(specs.len()),
        "indexes": specs,
    })
}
