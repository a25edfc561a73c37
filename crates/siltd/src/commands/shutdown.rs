//! The `shutdown` command: stop the server cleanly (the same path as SIGTERM).

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::admin_only;
use crate::state::{CmdResult, Server};

pub(super) fn shutdown(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    admin_only(db, "shutdown")?;
    for (k, v) in cmd.iter().skip(1) {
        match (k.as_str(), v) {
            ("force", Bson::Boolean(_)) | ("timeoutSecs", _) | ("comment", _) => {}
            (k, _) if k.starts_with('$') || k == "lsid" => {}
            _ => {
                return Err(QueryError::located(
                    40415,
                    format!("BSON field 'shutdown.{k}' is an unknown field."),
                ))
            }
        }
    }
    tracing::info!("shutdown requested by a client");
    s.request_shutdown();
    Ok(Document::new())
}
