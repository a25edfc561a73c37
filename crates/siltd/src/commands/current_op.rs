//! The `currentOp` command.

use bson::{doc, Bson, Document};

use super::common::{admin_only, bool_arg, host, new_matcher};
use crate::conn::ConnInfo;
use crate::state::{CmdResult, Server};

/// Arguments of `currentOp` that are not part of its filter: its own options and the generic
/// arguments drivers attach to every command.
const CURRENT_OP_ARGS: &[&str] = &[
    "currentOp",
    "$all",
    "$ownOps",
    "$truncateOps",
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "$client",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "readConcern",
    "writeConcern",
];

/// `currentOp`: `{inprog: [...]}` with the operations in flight that match the filter (every
/// field but the options; `$all: true` adds idle connections; `$ownOps: true` keeps only the
/// caller's own under `--auth`). Command documents are cut at 1 KB, as MongoDB does.
pub(super) fn current_op(s: &Server, db: &str, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    admin_only(db, "currentOp")?;
    let all = bool_arg(cmd, "$all")?.unwrap_or(false);
    let own = bool_arg(cmd, "$ownOps")?.unwrap_or(false);
    let mut filter = Document::new();
    for (k, v) in cmd {
        if !CURRENT_OP_ARGS.contains(&k.as_str()) {
            filter.insert(k.clone(), v.clone());
        }
    }
    let opts = crate::ops::ReportOptions {
        idle_connections: all,
        truncate_ops: true,
        only_user: if own && s.auth().enabled {
            conn.auth.user()
        } else {
            None
        },
    };
    let m = new_matcher(&filter)?;
    let mut inprog = Vec::new();
    for d in s.inprog().report(&host(s), opts) {
        if m.try_matches(&d)? {
            inprog.push(Bson::Document(d));
        }
    }
    Ok(doc! { "inprog": inprog })
}
