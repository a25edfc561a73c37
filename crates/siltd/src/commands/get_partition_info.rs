//! `getPartitionInfo` (TokuMX's): `{numPartitions: NumberLong, partitions: [{_id:
//! NumberLong, max: {_id: <value>}, createTime: Date}]}`, the last partition's `max` being
//! `{_id: MaxKey}`. siltd adds to each partition its document `count` and `size` (document
//! bytes) and `storageSize`/`indexSize` (file bytes).

use bson::{doc, Bson, Document};

use super::common::coll_arg;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

/// Each partition as `getPartitionInfo` and `collStats` show it.
pub(super) fn partitions_doc(
    c: &silt_collection::Collection,
) -> Result<Vec<Bson>, silt_query::QueryError> {
    Ok(c.partition_stats()
        .map_err(coll_err)?
        .into_iter()
        .map(|p| {
            Bson::Document(doc! {
                "_id": p.info.id as i64,
                "max": silt_collection::max_doc(&p.info, c.primary_key()),
                "createTime": p.info.created,
                "count": p.count as i64,
                "size": p.size as i64,
                "storageSize": p.storage_size as i64,
                "indexSize": p.index_size as i64,
            })
        })
        .collect())
}

pub(super) fn get_partition_info(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "getPartitionInfo")?;
    let ns = format!("{db}.{coll}");
    let c = s
        .store()
        .get(&ns)
        .ok_or_else(|| coll_err(silt_collection::CollError::NamespaceNotFound(ns.clone())))?;
    let parts = partitions_doc(&c)?;
    Ok(doc! { "numPartitions": parts.len() as i64, "partitions": parts })
}
