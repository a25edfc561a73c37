//! `addPartition` (TokuMX's): cap the last partition of a partitioned collection and open a
//! new one. `{addPartition: "<coll>", newMax: {_id: <value>}}`; without `newMax` the cap is
//! the largest `_id` the last partition holds. The reply is `{ok: 1}`, as TokuMX's.

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::{coll_arg, doc_arg};
use crate::state::{coll_err, CmdResult, Server};

/// The `_id` of a partition bound given as `{_id: <value>}` (the collection's primary key).
pub fn pk_value(field: &str, d: &Document) -> Result<Bson, QueryError> {
    match (d.get("_id"), d.len()) {
        (Some(v), 1) => Ok(v.clone()),
        _ => Err(QueryError::bad_value(format!(
            "{field} must be a primary key document {{_id: <value>}} (the collection's primaryKey is {{_id: 1}}), not {d}"
        ))),
    }
}

pub fn add_partition(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "addPartition")?;
    let new_max = match doc_arg(cmd, "newMax")? {
        Some(d) => Some(pk_value("newMax", d)?),
        None => None,
    };
    s.store
        .add_partition(&format!("{db}.{coll}"), new_max)
        .map_err(coll_err)?;
    Ok(Document::new())
}
