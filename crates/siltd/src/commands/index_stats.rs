//! The `$indexStats` stage: one document per index of a collection, in MongoDB's shape
//! (`name, key, host, accesses: {ops, since}, spec`). `accesses.ops` counts the operations
//! whose chosen plan used the index (finds, aggregations, counts, distincts, and the query
//! part of updates, deletes and findAndModify; `_id` lookups count for `_id_`), since the
//! server loaded the collection.

use bson::{doc, Bson, Document};
use silt_collection::Accesses;
use silt_query::{QResult, QueryError};

use crate::state::Server;

fn entry(host: &str, spec: Document, a: &Accesses) -> Document {
    let name = spec.get_str("name").unwrap_or_default().to_string();
    let key = spec.get_document("key").cloned().unwrap_or_default();
    doc! {
        "name": name,
        "key": key,
        "host": host,
        "accesses": {
            "ops": a.ops() as i64,
            "since": bson::DateTime::from_system_time(a.since()),
        },
        "spec": spec,
    }
}

/// The documents `{$indexStats: spec}` yields for `ns` (none for a missing collection).
pub(super) fn index_stats(s: &Server, ns: &str, spec: &Bson) -> QResult<Vec<Document>> {
    if !matches!(spec, Bson::Document(d) if d.is_empty()) {
        return Err(QueryError::located(
            28803,
            "The $indexStats stage specification must be an empty object",
        ));
    }
    let Some(c) = s.store().get(ns) else {
        return Ok(Vec::new());
    };
    let host = super::common::host(s);
    let mut out = vec![entry(&host, c.primary_index_doc(), c.id_accesses())];
    for ix in c.indexes() {
        out.push(entry(&host, ix.spec.to_doc(), &ix.accesses));
    }
    Ok(out)
}
