//! `addPartition` (TokuMX's): cap the last partition of a partitioned collection and open a
//! new one. `{addPartition: "<coll>", newMax: {_id: <value>}}` (every field of the
//! collection's `primaryKey`, in order); without `newMax` the cap is the largest key the last
//! partition holds. The reply is `{ok: 1}`, as TokuMX's.

use bson::Document;

use super::common::{coll_arg, doc_arg};
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn add_partition(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "addPartition")?;
    // A key document of the collection's primary key, checked by the store.
    let new_max = doc_arg(cmd, "newMax")?.cloned();
    s.store()
        .add_partition(&format!("{db}.{coll}"), new_max)
        .map_err(coll_err)?;
    Ok(Document::new())
}
