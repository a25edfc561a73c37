//! `rolesInfo`: the user-defined roles of a database (`1`), some roles by name (a name,
//! `{role, db}`, or an array of these; built-in ones included), with `showBuiltinRoles`,
//! `showPrivileges` (`true` or `"asUserFragment"`) and `showAuthenticationRestrictions`, in
//! mongod's reply shape. mongosh's `db.getRoles()` and `show roles` send it.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::bool_arg;

use crate::auth::privileges::Privilege;
use crate::auth::Role;
use crate::state::{CmdResult, Server};

fn docs<'a>(it: impl IntoIterator<Item = &'a Role>) -> Vec<Bson> {
    it.into_iter().map(|r| Bson::Document(r.to_doc())).collect()
}

fn privs(p: &[Privilege]) -> Vec<Bson> {
    p.iter().map(|p| Bson::Document(p.to_doc())).collect()
}

/// One role as `rolesInfo` shows it; `None` if it does not exist.
fn describe(s: &Server, r: &Role, privileges: bool, restrictions: bool) -> Option<Document> {
    let def = s.auth().roles.get(r);
    if def.is_none() && !r.is_built_in() {
        return None;
    }
    let direct: Vec<Role> = def.as_ref().map(|d| d.roles.clone()).unwrap_or_default();
    let inherited: Vec<Role> = s
        .auth()
        .roles
        .closure(&direct)
        .into_iter()
        .filter(|x| x != r)
        .collect();
    let mut d = Document::new();
    if def.is_some() {
        d.insert("_id", format!("{}.{}", r.db, r.role));
    }
    d.insert("role", &r.role);
    d.insert("db", &r.db);
    d.insert("isBuiltin", def.is_none());
    d.insert("roles", docs(&direct));
    d.insert("inheritedRoles", docs(&inherited));
    if privileges {
        let own = match &def {
            Some(d) => d.privileges.clone(),
            None => r.built_in_privileges().unwrap_or_default(),
        };
        d.insert("privileges", privs(&own));
        d.insert(
            "inheritedPrivileges",
            privs(&s.auth().roles.privileges(std::slice::from_ref(r))),
        );
    }
    if restrictions {
        let own = def.map(|d| d.restrictions).unwrap_or_default();
        d.insert("authenticationRestrictions", vec![Bson::Array(own.clone())]);
        d.insert(
            "inheritedAuthenticationRestrictions",
            vec![Bson::Array(own)],
        );
    }
    Some(d)
}

pub(super) fn roles_info(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let (privileges, fragment) = match cmd.get("showPrivileges") {
        Some(Bson::String(m)) if m == "asUserFragment" => (true, true),
        Some(Bson::String(m)) => {
            return Err(QueryError::failed_to_parse(format!(
                "showPrivileges must be a boolean or 'asUserFragment', not '{m}'"
            )))
        }
        _ => (bool_arg(cmd, "showPrivileges")?.unwrap_or(false), false),
    };
    let restrictions = bool_arg(cmd, "showAuthenticationRestrictions")?.unwrap_or(false);
    let builtin = bool_arg(cmd, "showBuiltinRoles")?.unwrap_or(false);
    let names: Vec<Role> = match cmd.get("rolesInfo") {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| Role::parse(v, db))
            .collect::<Result<_, _>>()?,
        Some(v @ (Bson::String(_) | Bson::Document(_))) => vec![Role::parse(v, db)?],
        Some(v) if silt_bson::compare::as_num(v).is_some() => {
            let mut all: Vec<Role> = Vec::new();
            if builtin {
                all.extend(Role::built_in_names(db).map(|n| Role {
                    role: n.into(),
                    db: db.into(),
                }));
            }
            all.extend(s.auth().roles.list(Some(db)).iter().map(|d| d.name()));
            all
        }
        _ => {
            return Err(QueryError::bad_value(
                "rolesInfo must be 1, a role name, a {role, db} document, or an array of these",
            ))
        }
    };
    if fragment {
        let closure = s.auth().roles.closure(&names);
        return Ok(doc! { "userFragment": {
            "roles": docs(&names),
            "inheritedRoles": docs(&closure),
            "inheritedPrivileges": privs(&s.auth().roles.privileges(&names)),
        }});
    }
    let roles: Vec<Bson> = names
        .iter()
        .filter_map(|r| describe(s, r, privileges, restrictions))
        .map(Bson::Document)
        .collect();
    Ok(doc! { "roles": roles })
}
