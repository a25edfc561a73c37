//! `logRotate`: the log file is renamed aside with a timestamp and a new one opened, as
//! mongod's default `rename` mode does (`crate::logging::rotate`).

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::state::CmdResult;

pub(super) fn log_rotate(cmd: &Document) -> CmdResult {
    match cmd.get("logRotate") {
        Some(Bson::String(t)) if t != "server" && t != "audit" => {
            return Err(QueryError::no_such_key(format!("Unknown log type '{t}'")))
        }
        _ => {}
    }
    let rotated = crate::logging::rotate().map_err(QueryError::internal)?;
    if rotated {
        tracing::info!("log rotated");
    }
    Ok(Document::new())
}
