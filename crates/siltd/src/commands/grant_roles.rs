//! `grantRolesToUser` and `revokeRolesFromUser`.

use bson::Document;

use super::create_user::user_name;
use crate::auth::roles::{grant_or_revoke, parse_roles};
use crate::auth::users::not_found;
use crate::state::{CmdResult, Server};

/// Grant (`grant`) or revoke the command's `roles` of the user it names.
pub(super) fn change_roles(s: &Server, db: &str, cmd: &Document, grant: bool) -> CmdResult {
    let command = if grant {
        "grantRolesToUser"
    } else {
        "revokeRolesFromUser"
    };
    let name = user_name(cmd, command)?;
    let roles = parse_roles(cmd.get("roles"), db, command, &s.auth().roles)?;
    let Some(mut u) = s.auth().users.get(db, name) else {
        return Err(not_found(name, db));
    };
    grant_or_revoke(&mut u.roles, roles, grant);
    s.auth().users.put(s.store(), u, false)?;
    Ok(Document::new())
}
