//! The `connectionStatus` command: the connection's user and its roles.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, ConnInfo, Server};

pub fn connection_status(s: &Server, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    if !matches!(cmd.get("showPrivileges"), None | Some(Bson::Boolean(false))) {
        return Err(QueryError::bad_value(
            "connectionStatus's 'showPrivileges' is not supported by siltd",
        ));
    }
    Ok(doc! { "authInfo": crate::auth::auth_info(s, conn) })
}
