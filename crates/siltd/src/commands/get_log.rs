//! The `getLog` command.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub(super) fn get_log(s: &Server, cmd: &Document) -> CmdResult {
    match cmd.get("getLog") {
        Some(Bson::String(n)) if n == "*" => Ok(doc! { "names": ["global", "startupWarnings"] }),
        Some(Bson::String(n)) if n == "global" => {
            let lines: Vec<String> = s.recent_log();
            Ok(doc! { "totalLinesWritten": crate::num::int32(lines.len()), "log": lines })
        }
        Some(Bson::String(n)) if n == "startupWarnings" => {
            Ok(doc! { "totalLinesWritten": 0, "log": [] })
        }
        Some(Bson::String(n)) => Err(QueryError::operation_failed(format!("No log named '{n}'"))),
        None | Some(Bson::Null) => Err(super::common::missing_field("getLog.getLog")),
        other => Err(super::common::wrong_type("getLog.getLog", other, "string")),
    }
}
