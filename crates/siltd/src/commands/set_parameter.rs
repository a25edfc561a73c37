//! The `setParameter` command.

use std::sync::atomic::Ordering;

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, Server};

pub fn set_parameter(s: &Server, cmd: &Document) -> CmdResult {
    let mut out = Document::new();
    for (k, v) in cmd {
        if k == "setParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        match (k.as_str(), v) {
            ("fastUpdates", Bson::Boolean(b)) => {
                let was = s.fast.enabled.swap(*b, Ordering::Relaxed);
                out.insert("was", was);
            }
            ("fastUpdates", _) => {
                return Err(QueryError::bad_value("fastUpdates must be a boolean"))
            }
            _ => {
                return Err(QueryError::invalid_options(format!(
                    "attempted to set unrecognized parameter [{k}], use help:true to see options"
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(QueryError::invalid_options(
            "no option found to set, use help:true to see options",
        ));
    }
    Ok(out)
}
