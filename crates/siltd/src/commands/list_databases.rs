//! The `listDatabases` command.

use bson::{doc, Document};
use silt_query::matcher::Matcher;
use silt_query::QueryError;

use super::common::{bool_arg, doc_arg};
use crate::conn::ConnInfo;
use crate::state::{CmdResult, Server};

pub(super) fn list_databases(s: &Server, db: &str, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    if db != "admin" {
        return Err(QueryError::unauthorized(
            "listDatabases may only be run against the admin database.",
        ));
    }
    let filter = doc_arg(cmd, "filter")?.cloned().unwrap_or_default();
    let matcher = Matcher::new(&filter)?;
    let name_only = bool_arg(cmd, "nameOnly")?.unwrap_or(false);
    // A user without an any-database role sees the databases it holds roles on (MongoDB's
    // `authorizedDatabases`).
    let visible =
        (!crate::auth::sees_every_database(s, conn)).then(|| crate::auth::role_databases(s, conn));
    let mut dbs = Vec::new();
    let mut total = 0i64;
    let mut names = s.store().list_databases();
    // A replica-set member's oplog is in `local`.
    let oplog_bytes = s.store().oplog().map(|l| l.size().0);
    if oplog_bytes.is_some() && !names.iter().any(|n| n == "local") {
        names.push("local".into());
        names.sort();
    }
    for name in names {
        if visible.as_ref().is_some_and(|v| !v.contains(&name)) {
            continue;
        }
        let colls = s.store().list_collections(&name);
        let mut st = silt_collection::sum_stats(colls.iter().map(|(_, c)| c));
        if name == "local" {
            if let Some(b) = oplog_bytes {
                st.storage_size += b;
                st.count += 1;
            }
        }
        let size = st.storage_size as i64;
        let d = if name_only {
            doc! { "name": &name }
        } else {
            doc! { "name": &name, "sizeOnDisk": size, "empty": st.count == 0 }
        };
        if !matcher.matches(&d) {
            continue;
        }
        total += size;
        dbs.push(d);
    }
    if name_only {
        return Ok(doc! { "databases": dbs });
    }
    Ok(doc! {
        "databases": dbs,
        "totalSize": total,
        "totalSizeMb": total >> 20,
    })
}
