//! The `top` command: time spent and operations counted per namespace since start-up.

use bson::doc;

use super::common::admin_only;
use crate::state::{CmdResult, Server};

pub(super) fn top(s: &Server, db: &str) -> CmdResult {
    admin_only(db, "top")?;
    Ok(doc! { "totals": s.top().totals() })
}
