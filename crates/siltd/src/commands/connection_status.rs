//! The `connectionStatus` command: the connection's user, its roles and, with
//! `showPrivileges` (which Compass sends on connect), the privileges they grant.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::conn::ConnInfo;
use crate::state::{CmdResult, Server};

pub(super) fn connection_status(s: &Server, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    let show = match cmd.get("showPrivileges") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(v) => match silt_bson::compare::as_num(v) {
            Some(_) => silt_query::expr::truthy(Some(v)),
            None => {
                return Err(QueryError::type_mismatch(format!(
                    "BSON field 'connectionStatus.showPrivileges' is the wrong type '{}', \
                     expected type 'bool'",
                    silt_bson::compare::type_name(v)
                )))
            }
        },
    };
    Ok(doc! { "authInfo": crate::auth::auth_info(s, conn, show) })
}
