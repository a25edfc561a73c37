//! The `dbStats` command.

use bson::{doc, Document};

use super::common::scale_arg;
use crate::state::{CmdResult, Server};

pub(super) fn db_stats(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let scale = scale_arg(cmd)?;
    let colls = s.store().list_collections(db);
    let t = silt_collection::sum_stats(colls.iter().map(|(_, c)| c));
    let avg = t.size.checked_div(t.count).unwrap_or(0);
    let mut out = doc! {
        "db": db,
        "collections": colls.len() as i64,
        "views": s.views().of_db(db).len() as i64,
        "objects": t.count as i64,
        "avgObjSize": avg as f64,
        "dataSize": (t.size as i64 / scale) as f64,
        "storageSize": (t.storage_size as i64 / scale) as f64,
        "indexes": (colls.len() + t.index_sizes.len()) as i64,
        "indexSize": (t.total_index_size as i64 / scale) as f64,
        "totalSize": ((t.storage_size + t.total_index_size) as i64 / scale) as f64,
        "scaleFactor": scale,
    };
    // `freeStorage: 1` asks for the space the storage engine could reuse: the fractal tree
    // does not keep free lists to report, so it is 0.
    if super::common::safe_bool(cmd, "freeStorage")?.unwrap_or(false) {
        out.insert("freeStorageSize", 0i64);
        out.insert("totalFreeStorageSize", 0i64);
    }
    Ok(out)
}
