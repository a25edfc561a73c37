//! The `create` command.

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::state::{coll_err, CmdResult, Server};

/// Options of `create` this server honours (the rest are refused clearly).
const CREATE_IGNORED: &[&str] = &[
    "create",
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "writeConcern",
    "comment",
    "idIndex",
    "maxTimeMS",
    "txnNumber",
    "autocommit",
    "startTransaction",
];

pub fn create(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "create")?;
    let mut options = Document::new();
    for (k, v) in cmd {
        if CREATE_IGNORED.contains(&k.as_str()) {
            continue;
        }
        match (k.as_str(), v) {
            ("capped", Bson::Boolean(false)) => {}
            _ => {
                return Err(QueryError::invalid_options(format!(
                    "siltd does not support the collection option '{k}' yet"
                )))
            }
        }
        options.insert(k.clone(), v.clone());
    }
    let ns = format!("{db}.{coll}");
    s.store.create(&ns, options).map_err(|e| match e {
        silt_collection::CollError::NamespaceExists(_) => {
            QueryError::namespace_exists(format!("Collection {ns} already exists."))
        }
        other => coll_err(other),
    })?;
    Ok(Document::new())
}
