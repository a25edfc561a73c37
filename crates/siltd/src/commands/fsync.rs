//! `fsync` (a checkpoint: everything acknowledged is in the data files) and, with `lock:
//! true`, a lock that makes writes wait until `fsyncUnlock`, as mongod's fsyncLock does for
//! file-level backups. Locks nest: each `fsync: 1, lock: true` needs one `fsyncUnlock`.

use bson::{doc, Document};
use silt_query::QueryError;

use super::common::{admin_only, bool_arg};
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn fsync(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    admin_only(db, "fsync")?;
    let lock = bool_arg(cmd, "lock")?.unwrap_or(false);
    s.store().checkpoint().map_err(coll_err)?;
    let mut r = doc! { "numFiles": 1 };
    if lock {
        let n = s.fsync_lock().lock_writes();
        tracing::info!(count = n, "fsync lock taken: writes wait until fsyncUnlock");
        r.insert("lockCount", n as i64);
        r.insert(
            "info",
            "now locked against writes, use db.fsyncUnlock() to unlock",
        );
        r.insert("seeAlso", "http://dochub.mongodb.org/core/fsynccommand");
    }
    Ok(r)
}

pub(super) fn fsync_unlock(s: &Server, db: &str) -> CmdResult {
    admin_only(db, "fsyncUnlock")?;
    match s.fsync_lock().unlock_writes() {
        Some(n) => {
            tracing::info!(count = n, "fsync lock released");
            Ok(doc! { "info": "fsyncUnlock completed", "lockCount": n as i64 })
        }
        None => Err(QueryError::illegal_operation(
            "fsyncUnlock called when not locked",
        )),
    }
}
