//! `_mergeAuthzCollections`: how mongorestore restores users and roles. It loads the dumped
//! `admin.system.users` and `admin.system.roles` into temporary collections of `admin` and
//! asks the server to merge them: the users (and roles) of `db` (every database's when `db`
//! is empty) in the temporary collection are added; with `drop: true` they replace the
//! existing ones, and existing ones absent from the dump are removed. Without `drop`, a user
//! or role that already exists is left as it is, as mongod leaves it.

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::auth::system_docs;
use crate::auth::{RoleDef, User};
use crate::state::{CmdResult, Server};

/// The documents of a temporary collection named by `field` (`"admin.<coll>"`), if given.
fn temp_docs(s: &Server, cmd: &Document, field: &str) -> Result<Option<Vec<Document>>, QueryError> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(ns)) if ns.starts_with("admin.") => {
            Ok(Some(system_docs::load(s.store(), ns)))
        }
        Some(Bson::String(ns)) => Err(QueryError::bad_value(format!(
            "{field} must name a collection of the admin database, not {ns}"
        ))),
        Some(_) => Err(QueryError::type_mismatch(format!(
            "{field} must be a string"
        ))),
    }
}

/// A user or role restricted to some client or server addresses: siltd enforces no
/// restriction, and restoring one unrestricted would let in clients mongod turns away.
fn refuse_restrictions(d: &Document) -> Result<(), QueryError> {
    match d.get("authenticationRestrictions") {
        None | Some(Bson::Null) => Ok(()),
        Some(Bson::Array(a)) if a.is_empty() => Ok(()),
        Some(_) => Err(QueryError::not_implemented(format!(
            "authenticationRestrictions (of {}) are not supported by siltd",
            d.get("_id").cloned().unwrap_or(Bson::Null)
        ))),
    }
}

pub(super) fn merge_authz_collections(s: &Server, cmd: &Document) -> CmdResult {
    let drop = match cmd.get("drop") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(_) => return Err(QueryError::type_mismatch("drop must be a boolean")),
    };
    let db = match cmd.get("db") {
        None | Some(Bson::Null) => String::new(),
        Some(Bson::String(d)) => d.clone(),
        Some(_) => return Err(QueryError::type_mismatch("db must be a string")),
    };
    let users = temp_docs(s, cmd, "tempUsersCollection")?;
    let roles = temp_docs(s, cmd, "tempRolesCollection")?;
    if users.is_none() && roles.is_none() {
        return Err(QueryError::bad_value(
            "_mergeAuthzCollections needs tempUsersCollection or tempRolesCollection",
        ));
    }
    // Checked before anything is merged, so a refusal changes nothing.
    for d in users.iter().chain(roles.iter()).flatten() {
        refuse_restrictions(d)?;
    }
    let in_scope = |d: &str| db.is_empty() || d == db;
    // Roles first: the users restored next may hold them.
    if let Some(docs) = roles {
        let mut restored = Vec::new();
        for d in &docs {
            let def = RoleDef::from_doc(d)?;
            if !in_scope(&def.db) {
                continue;
            }
            restored.push(def.name());
            let exists = s.auth().roles.get(&def.name()).is_some();
            if !exists || drop {
                s.auth().roles.put(s.store(), def, !exists)?;
            }
        }
        if drop {
            for d in s.auth().roles.list(None) {
                if in_scope(&d.db) && !restored.contains(&d.name()) {
                    s.auth()
                        .roles
                        .remove(s.store(), &d.db, |r| r.role == d.role)?;
                }
            }
        }
    }
    if let Some(docs) = users {
        let mut restored = Vec::new();
        for d in &docs {
            let u = User::from_doc(d).ok_or_else(|| {
                QueryError::bad_value(format!(
                    "malformed user document {}",
                    d.get("_id").cloned().unwrap_or(Bson::Null)
                ))
            })?;
            if !in_scope(&u.db) {
                continue;
            }
            restored.push((u.db.clone(), u.user.clone()));
            let exists = s.auth().users.get(&u.db, &u.user).is_some();
            if !exists || drop {
                s.auth().users.put(s.store(), u, !exists)?;
            }
        }
        if drop {
            for u in s.auth().users.list(None) {
                if in_scope(&u.db) && !restored.contains(&(u.db.clone(), u.user.clone())) {
                    s.auth()
                        .users
                        .remove(s.store(), &u.db, |x| x.user == u.user)?;
                }
            }
        }
    }
    Ok(Document::new())
}
