//! `dropRole` and `dropAllRolesFromDatabase`: the role goes, and so does every grant of it to
//! a user or another role, as in MongoDB.

use bson::{doc, Document};
use silt_query::QueryError;

use super::create_role::{defined, role_name};
use crate::auth::{Role, RoleDef};
use crate::state::{CmdResult, Server};

/// Take the dropped roles out of every user and every remaining role.
fn forget(s: &Server, gone: &[RoleDef]) -> Result<(), QueryError> {
    for g in gone {
        let name = g.name();
        s.auth().roles.forget(s.store(), &name)?;
        for mut u in s.auth().users.list(None) {
            if u.roles.contains(&name) {
                u.roles.retain(|r: &Role| *r != name);
                s.auth().users.put(s.store(), u, false)?;
            }
        }
    }
    Ok(())
}

pub(super) fn drop_role(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let def = defined(s, db, role_name(cmd, "dropRole")?)?;
    let gone = s
        .auth()
        .roles
        .remove(s.store(), db, |r| r.role == def.role)?;
    forget(s, &gone)?;
    Ok(Document::new())
}

pub(super) fn drop_all_roles_from_database(s: &Server, db: &str) -> CmdResult {
    let gone = s.auth().roles.remove(s.store(), db, |_| true)?;
    forget(s, &gone)?;
    Ok(doc! { "n": crate::num::int32(gone.len()) })
}
