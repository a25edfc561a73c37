//! `usersInfo`: the users of a database (`1`), some of them (a name, `{user, db}`, or an
//! array of these), or every database's (`{forAllDBs: true}`); with `filter` (a query over
//! the reply's user documents), `showCredentials`, `showPrivileges` (the roles they inherit
//! and the privileges they grant) and `showAuthenticationRestrictions` (always empty: siltd
//! stores none).

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::bool_arg;

use crate::auth::User;
use crate::state::{CmdResult, Server};

fn describe(s: &Server, u: &User, opts: Show) -> Document {
    let mut d = doc! {
        "_id": u.id(),
        "userId": u.user_id.clone(),
        "user": &u.user,
        "db": &u.db,
        "roles": u.roles.iter().map(|r| r.to_doc()).collect::<Vec<_>>(),
        "mechanisms": u.mechanisms(),
    };
    if let Some(c) = &u.custom_data {
        d.insert("customData", c.clone());
    }
    if opts.credentials {
        if let Ok(c) = u.to_doc().get_document("credentials") {
            d.insert("credentials", c.clone());
        }
    }
    if opts.privileges {
        let inherited: Vec<Bson> = s
            .auth()
            .roles
            .closure(&u.roles)
            .iter()
            .map(|r| Bson::Document(r.to_doc()))
            .collect();
        d.insert("inheritedRoles", inherited);
        let privs: Vec<Bson> = s
            .auth()
            .roles
            .privileges(&u.roles)
            .iter()
            .map(|p| Bson::Document(p.to_doc()))
            .collect();
        d.insert("inheritedPrivileges", privs);
    }
    if opts.restrictions {
        d.insert("authenticationRestrictions", Vec::<Bson>::new());
        if opts.privileges {
            d.insert("inheritedAuthenticationRestrictions", Vec::<Bson>::new());
        }
    }
    d
}

/// What `usersInfo` adds to each user.
#[derive(Clone, Copy)]
struct Show {
    credentials: bool,
    privileges: bool,
    restrictions: bool,
}

/// One name of `usersInfo`: `(db, user)`, refused in mongod's `UserName` words.
fn named(v: &Bson, db: &str) -> Result<(String, String), QueryError> {
    match v {
        Bson::String(u) => Ok((db.to_string(), u.clone())),
        Bson::Document(d) => {
            if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "user" | "db")) {
                // mongod's message lacks the closing quote.
                return Err(QueryError::bad_value(format!(
                    "UserName contains an unknown field named: '{k}"
                )));
            }
            let field = |name: &str| match d.get(name) {
                Some(Bson::String(s)) => Ok(s.clone()),
                None => Err(QueryError::bad_value(format!(
                    "UserName must contain a field named: {name}"
                ))),
                Some(other) => Err(QueryError::bad_value(format!(
                    "UserName must contain a string field named: {name}. But, has type {}",
                    silt_bson::compare::type_name(other)
                ))),
            };
            let user = field("user")?;
            Ok((field("db")?, user))
        }
        _ => Err(not_a_user_name()),
    }
}

fn not_a_user_name() -> QueryError {
    QueryError::bad_value("UserName must be either a string or an object")
}

pub(super) fn users_info(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let opts = Show {
        credentials: bool_arg(cmd, "showCredentials")?.unwrap_or(false),
        privileges: bool_arg(cmd, "showPrivileges")?.unwrap_or(false),
        restrictions: bool_arg(cmd, "showAuthenticationRestrictions")?.unwrap_or(false),
    };
    let filter = match cmd.get("filter") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(f)) => Some(silt_query::matcher::Matcher::new(f)?),
        Some(v) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'usersInfo.filter' is the wrong type '{}', expected type 'object'",
                silt_bson::compare::type_name(v)
            )))
        }
    };
    let users: Vec<User> = match cmd.get("usersInfo") {
        Some(Bson::Document(d)) if d.get_bool("forAllDBs") == Ok(true) => s.auth().users.list(None),
        Some(Bson::Array(names)) => {
            let mut out = Vec::new();
            for n in names {
                let (b, u) = named(n, db)?;
                out.extend(s.auth().users.get(&b, &u));
            }
            out
        }
        Some(v @ (Bson::String(_) | Bson::Document(_))) => {
            let (b, u) = named(v, db)?;
            s.auth().users.get(&b, &u).into_iter().collect()
        }
        Some(Bson::Int32(1) | Bson::Int64(1)) => s.auth().users.list(Some(db)),
        Some(Bson::Double(x)) if *x == 1.0 => s.auth().users.list(Some(db)),
        _ => return Err(not_a_user_name()),
    };
    let users: Vec<Document> = users
        .iter()
        .map(|u| describe(s, u, opts))
        .filter(|d| filter.as_ref().is_none_or(|m| m.matches(d)))
        .collect();
    Ok(doc! { "users": users })
}
