//! `createRole` and `updateRole`: a user-defined role of the command's database, with
//! privileges and inherited roles. A role outside `admin` may only hold privileges on its own
//! database, as in MongoDB.

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::auth::privileges::{Privilege, Resource};
use crate::auth::role_defs::{invalid_modification, role_not_found};
use crate::auth::roles::parse_roles;
use crate::auth::{Role, RoleDef};
use crate::state::{CmdResult, Server};

/// The role a role command names (its first field).
pub(super) fn role_name<'a>(cmd: &'a Document, command: &str) -> Result<&'a str, QueryError> {
    match cmd.get(command) {
        Some(Bson::String(n)) if !n.is_empty() => Ok(n),
        Some(Bson::String(_)) => Err(QueryError::bad_value("Role name must be non-empty")),
        _ => Err(QueryError::type_mismatch(format!(
            "\"{command}\" must be a string naming the role"
        ))),
    }
}

/// A command's `privileges` array, checked against the role's database.
pub(super) fn parse_privileges(
    v: Option<&Bson>,
    db: &str,
    cmd: &str,
) -> Result<Vec<Privilege>, QueryError> {
    let Some(Bson::Array(a)) = v else {
        return Err(QueryError::bad_value(format!(
            "\"{cmd}\" command requires a \"privileges\" array"
        )));
    };
    let privs = a
        .iter()
        .map(Privilege::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if db != "admin" {
        for p in &privs {
            let ok = matches!(&p.resource, Resource::Namespace { db: d, .. } if d == db);
            if !ok {
                return Err(invalid_modification(format!(
                    "Roles on the '{db}' database cannot be granted privileges that target \
                     other databases or the cluster"
                )));
            }
        }
    }
    Ok(crate::auth::privileges::merge(privs))
}

/// `authenticationRestrictions`: siltd enforces none, so only an empty list is accepted.
pub(super) fn restrictions(cmd: &Document, command: &str) -> Result<Option<Vec<Bson>>, QueryError> {
    match cmd.get("authenticationRestrictions") {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Array(a)) if a.is_empty() => Ok(Some(Vec::new())),
        Some(_) => Err(super::args::not_implemented(&format!(
            "{command}.authenticationRestrictions"
        ))),
    }
}

/// Refuse changing a built-in role (InvalidRoleModification) or one that does not exist.
pub(super) fn defined(s: &Server, db: &str, name: &str) -> Result<RoleDef, QueryError> {
    let r = Role {
        role: name.into(),
        db: db.into(),
    };
    if r.is_built_in() {
        return Err(invalid_modification(format!(
            "Cannot modify built-in role: {name}@{db}"
        )));
    }
    s.auth().roles.get(&r).ok_or_else(|| role_not_found(&r))
}

pub(super) fn create_role(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = role_name(cmd, "createRole")?;
    if name.contains('@') {
        return Err(QueryError::bad_value("Role name cannot contain '@'"));
    }
    let me = Role {
        role: name.into(),
        db: db.into(),
    };
    if me.is_built_in() || Role::built_in_names("admin").any(|n| n == name) {
        return Err(QueryError::bad_value(
            "Cannot create roles with the same name as a built-in role",
        ));
    }
    let def = RoleDef {
        role: name.into(),
        db: db.into(),
        privileges: parse_privileges(cmd.get("privileges"), db, "createRole")?,
        roles: parse_roles(cmd.get("roles"), db, "createRole", &s.auth().roles)?,
        restrictions: restrictions(cmd, "createRole")?.unwrap_or_default(),
    };
    s.auth().roles.put(s.store(), def, true)?;
    Ok(Document::new())
}

pub(super) fn update_role(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = role_name(cmd, "updateRole")?;
    let mut def = defined(s, db, name)?;
    let privileges = cmd.get("privileges");
    let roles = cmd.get("roles");
    let restr = restrictions(cmd, "updateRole")?;
    if privileges.is_none() && roles.is_none() && restr.is_none() {
        return Err(QueryError::bad_value(
            "Must specify at least one field to update in updateRole",
        ));
    }
    if privileges.is_some() {
        def.privileges = parse_privileges(privileges, db, "updateRole")?;
    }
    if roles.is_some() {
        def.roles = parse_roles(roles, db, "updateRole", &s.auth().roles)?;
    }
    if let Some(r) = restr {
        def.restrictions = r;
    }
    s.auth().roles.put(s.store(), def, false)?;
    Ok(Document::new())
}
