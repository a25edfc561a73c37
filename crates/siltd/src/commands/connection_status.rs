//! The `connectionStatus` command.

use bson::doc;

use crate::state::CmdResult;

pub fn connection_status() -> CmdResult {
    Ok(doc! {
        "authInfo": { "authenticatedUsers": [], "authenticatedUserRoles": [] },
    })
}
