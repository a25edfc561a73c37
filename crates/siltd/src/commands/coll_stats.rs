//! The `collStats` command, and the storage figures `$collStats` shares.

use bson::{doc, Document};
use silt_query::QueryError;

use super::common::{coll_arg, scale_arg};
use crate::state::{CmdResult, Server};

/// The storage figures of one collection (for `collStats` and `$collStats`).
#[expect(
    clippy::cast_possible_truncation,
    reason = "a whole-number double option saturates as mongod reads it"
)]
pub(super) fn storage_stats(s: &Server, ns: &str, scale: i64) -> Result<Document, QueryError> {
    let c = s
        .store()
        .get(ns)
        .ok_or_else(|| QueryError::namespace_not_found(format!("Collection [{ns}] not found.")))?;
    let st = c.stats();
    let avg = st.size.checked_div(st.count).unwrap_or(0);
    let options = c.options();
    let capped = options.get_bool("capped").unwrap_or(false);
    let mut sizes = doc! { c.primary_index_name(): 0i64 };
    for (n, b) in &st.index_sizes {
        sizes.insert(n.clone(), *b as i64 / scale);
    }
    let mut out = doc! {
        "ns": ns,
        "size": st.size as i64 / scale,
        "count": st.count as i64,
        "avgObjSize": avg as i64,
        "storageSize": st.storage_size as i64 / scale,
        "freeStorageSize": 0i64,
        "capped": capped,
    };
    if capped {
        // mongod's capped figures: the document limit (0 when there is none) and the size
        // limit, scaled.
        let num = |k: &str| match options.get(k) {
            Some(v) => match silt_bson::compare::as_num(v) {
                Some(silt_bson::compare::Num::Int(n)) => n,
                Some(silt_bson::compare::Num::Float(f)) => f as i64,
                None => 0,
            },
            None => 0,
        };
        out.insert("max", num("max"));
        out.insert("maxSize", num("size") / scale);
    }
    out.extend(doc! {
        "nindexes": crate::num::int32(st.index_sizes.len() + 1),
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": st.total_index_size as i64 / scale,
        "totalSize": (st.storage_size + st.total_index_size) as i64 / scale,
        "indexSizes": sizes,
        "scaleFactor": scale,
        "silt": { "clusteredBy": "_id", "note": "the _id index is the collection's own tree" },
    });
    // TokuMX's shape for a partitioned collection: the totals above, and each partition.
    if c.is_partitioned() {
        out.insert("partitioned", true);
        out.insert("partitions", super::get_partition_info::partitions_doc(&c)?);
    }
    Ok(out)
}

pub(super) fn coll_stats(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = if cmd.contains_key("collStats") {
        "collStats"
    } else {
        "collstats"
    };
    let coll = coll_arg(db, cmd, name)?;
    let scale = scale_arg(cmd)?;
    storage_stats(s, &format!("{db}.{coll}"), scale)
}
