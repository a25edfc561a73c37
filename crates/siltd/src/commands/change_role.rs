//! `grantRolesToRole`, `revokeRolesFromRole`, `grantPrivilegesToRole` and
//! `revokePrivilegesFromRole`.

use bson::Document;

use super::create_role::{defined, parse_privileges, role_name};
use crate::auth::privileges;
use crate::auth::roles::{grant_or_revoke, parse_roles};
use crate::state::{CmdResult, Server};

/// Grant (`grant`) or revoke the command's `roles` of the role it names.
pub(super) fn change_roles(s: &Server, db: &str, cmd: &Document, grant: bool) -> CmdResult {
    let command = if grant {
        "grantRolesToRole"
    } else {
        "revokeRolesFromRole"
    };
    let mut def = defined(s, db, role_name(cmd, command)?)?;
    let roles = parse_roles(cmd.get("roles"), db, command, &s.auth().roles)?;
    grant_or_revoke(&mut def.roles, roles, grant);
    s.auth().roles.put(s.store(), def, false)?;
    Ok(Document::new())
}

/// Grant (`grant`) or revoke the command's `privileges` of the role it names.
pub(super) fn change_privileges(s: &Server, db: &str, cmd: &Document, grant: bool) -> CmdResult {
    let command = if grant {
        "grantPrivilegesToRole"
    } else {
        "revokePrivilegesFromRole"
    };
    let mut def = defined(s, db, role_name(cmd, command)?)?;
    let given = parse_privileges(cmd.get("privileges"), db, command)?;
    if grant {
        def.privileges = privileges::merge(def.privileges.into_iter().chain(given));
    } else {
        privileges::subtract(&mut def.privileges, &given);
    }
    s.auth().roles.put(s.store(), def, false)?;
    Ok(Document::new())
}
