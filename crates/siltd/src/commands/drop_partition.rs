//! `dropPartition` (TokuMX's): drop partitions of a partitioned collection, freeing their
//! files at once. `{dropPartition: "<coll>", id: <n>}` drops one partition (any position);
//! `{dropPartition: "<coll>", max: {_id: <value>}}` drops, from the first, every partition
//! whose `max` is at or below it (the shell's `dropPartitionsLEQ`), always keeping the last.
//! The reply is `{ok: 1}`.

use bson::{Bson, Document};
use silt_collection::DropPartitions;
use silt_query::QueryError;

use super::common::{coll_arg, doc_arg};
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is whole and below 9e15, so it is exact"
)]
pub(super) fn drop_partition(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "dropPartition")?;
    let id = match cmd.get("id") {
        None | Some(Bson::Null) => None,
        Some(Bson::Int32(n)) if *n >= 0 => Some(*n as u64),
        Some(Bson::Int64(n)) if *n >= 0 => Some(*n as u64),
        Some(Bson::Double(f)) if *f >= 0.0 && f.fract() == 0.0 && *f < 9.0e15 => Some(*f as u64),
        Some(other) => {
            return Err(QueryError::bad_value(format!(
                "id must be a non-negative whole number, not {other}"
            )))
        }
    };
    let max = doc_arg(cmd, "max")?;
    let which = match (id, max) {
        (Some(id), None) => DropPartitions::Id(id),
        (None, Some(m)) => DropPartitions::UpTo(m.clone()),
        _ => {
            return Err(QueryError::bad_value(
                "must provide either an id or a max key of data to be dropped",
            ))
        }
    };
    s.store()
        .drop_partition(&format!("{db}.{coll}"), which)
        .map_err(coll_err)?;
    Ok(Document::new())
}
