//! The `collStats` command, and the storage figures `$collStats` shares.

use bson::{doc, Document};
use silt_query::QueryError;

use super::common::{coll_arg, scale_arg};
use crate::num::number;
use crate::state::{CmdResult, Server};

/// The storage figures of one collection (for `collStats` and `$collStats`).
#[expect(
    clippy::cast_possible_truncation,
    reason = "a whole-number double option saturates as mongod reads it"
)]
pub(super) fn storage_stats(s: &Server, ns: &str, scale: i64) -> Result<Document, QueryError> {
    if let Some(log) = s
        .store()
        .oplog()
        .filter(|_| ns == silt_collection::oplog::OPLOG_NS)
    {
        return Ok(oplog_stats(log, scale));
    }
    let c = s
        .store()
        .get(ns)
        .ok_or_else(|| QueryError::namespace_not_found(format!("Collection [{ns}] not found.")))?;
    let st = c.stats();
    let avg = st.size.checked_div(st.count).unwrap_or(0);
    let options = c.options();
    let capped = options.get_bool("capped").unwrap_or(false);
    let scaled = |n: u64| number(i64::try_from(n).unwrap_or(i64::MAX) / scale);
    let mut sizes = doc! { c.primary_index_name(): 0 };
    for (n, b) in &st.index_sizes {
        sizes.insert(n.clone(), scaled(*b));
    }
    let mut out = doc! {
        "ns": ns,
        "size": scaled(st.size),
        "count": number(st.count),
        "avgObjSize": number(avg),
        "storageSize": scaled(st.storage_size),
        "freeStorageSize": 0,
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
        out.insert("max", number(num("max")));
        out.insert("maxSize", number(num("size") / scale));
    }
    out.extend(doc! {
        "nindexes": crate::num::int32(st.index_sizes.len() + 1),
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": scaled(st.total_index_size),
        "totalSize": scaled(st.storage_size + st.total_index_size),
        "indexSizes": sizes,
        "scaleFactor": number(scale),
        "silt": { "clusteredBy": "_id", "note": "the _id index is the collection's own tree" },
    });
    // TokuMX's shape for a partitioned collection: the totals above, and each partition.
    if c.is_partitioned() {
        out.insert("partitioned", true);
        out.insert("partitions", super::get_partition_info::partitions_doc(&c)?);
    }
    Ok(out)
}

/// The oplog's figures, as mongod shows a capped collection without indexes (what
/// `rs.printReplicationInfo()` reads: `size`, `maxSize`, `count`).
fn oplog_stats(log: &silt_collection::oplog::Oplog, scale: i64) -> Document {
    let (bytes, _) = log.size();
    let (rows, disk) = log.storage();
    let scaled = |n: u64| number(i64::try_from(n).unwrap_or(i64::MAX) / scale);
    doc! {
        "ns": silt_collection::oplog::OPLOG_NS,
        "size": scaled(bytes),
        "count": number(rows),
        "avgObjSize": number(bytes.checked_div(rows).unwrap_or(0)),
        "storageSize": scaled(disk),
        "freeStorageSize": 0,
        "capped": true,
        "max": 0,
        "maxSize": scaled(log.max_bytes()),
        "nindexes": 0,
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": 0,
        "totalSize": scaled(disk),
        "indexSizes": {},
        "scaleFactor": number(scale),
    }
}

/// mongod 7's `collStats` of a collection that does not exist: zeros, no indexes.
fn missing_stats(ns: &str, scale: i64) -> Document {
    doc! {
        "ns": ns,
        "size": 0,
        "count": 0,
        "storageSize": 0,
        "totalSize": 0,
        "nindexes": 0,
        "totalIndexSize": 0,
        "indexDetails": {},
        "indexSizes": {},
        "scaleFactor": number(scale),
    }
}

pub(super) fn coll_stats(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = if cmd.contains_key("collStats") {
        "collStats"
    } else {
        "collstats"
    };
    let coll = coll_arg(db, cmd, name)?;
    let scale = scale_arg(cmd)?;
    let ns = format!("{db}.{coll}");
    let oplog = s.store().oplog().is_some() && ns == silt_collection::oplog::OPLOG_NS;
    if s.store().get(&ns).is_none() && !s.views().is_view(&ns) && !oplog {
        return Ok(missing_stats(&ns, scale));
    }
    storage_stats(s, &ns, scale)
}
