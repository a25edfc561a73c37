//! `replSetResizeOplog`: change the oplog's size limit (`size`, in megabytes, at least 990
//! and at most 1 PB, as mongod) and its minimum retention (`minRetentionHours`, 0 for none).
//! Trimming follows within a second (`silt_collection::oplog`), by whole partitions.

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

fn number(cmd: &Document, field: &str) -> Result<Option<f64>, QueryError> {
    match cmd.get(field) {
        None => Ok(None),
        Some(Bson::Double(d)) => Ok(Some(*d)),
        Some(Bson::Int32(i)) => Ok(Some(f64::from(*i))),
        #[expect(clippy::cast_precision_loss, reason = "a size in MB, far below 2^53")]
        Some(Bson::Int64(i)) => Ok(Some(*i as f64)),
        Some(_) => Err(QueryError::type_mismatch(format!(
            "BSON field 'replSetResizeOplog.{field}' is the wrong type, expected a number"
        ))),
    }
}

pub(super) fn repl_set_resize_oplog(s: &Server, cmd: &Document) -> CmdResult {
    let Some(log) = s.store().oplog() else {
        return Err(QueryError::no_replication_enabled(
            "replSetResizeOplog is only supported when running with --replSet",
        ));
    };
    let size = number(cmd, "size")?;
    let hours = number(cmd, "minRetentionHours")?;
    if size.is_none() && hours.is_none() {
        return Err(QueryError::invalid_options(
            "replSetResizeOplog requires at least one of 'size' or 'minRetentionHours'",
        ));
    }
    if let Some(mb) = size {
        if !(990.0..=1_073_741_824.0).contains(&mb) {
            return Err(QueryError::located(
                51024,
                format!(
                    "BSON field 'size' value must be >= 990 and <= 1073741824, actual value '{mb}'"
                ),
            ));
        }
    }
    if let Some(h) = hours {
        if h.is_nan() || h < 0.0 {
            return Err(QueryError::located(
                51024,
                format!("BSON field 'minRetentionHours' value must be >= 0, actual value '{h}'"),
            ));
        }
    }
    if let Some(mb) = size {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked to lie in [990, 2^30] MB above"
        )]
        log.set_max_bytes((mb * 1024.0 * 1024.0) as u64);
    }
    if let Some(h) = hours {
        log.set_min_retention(std::time::Duration::from_secs_f64((h * 3600.0).min(1e15)));
    }
    Ok(Document::new())
}
