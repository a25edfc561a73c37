//! `usersInfo`: the users of a database (`1`), some of them (a name, `{user, db}`, or an
//! array of these), or every database's (`{forAllDBs: true}`).

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::auth::User;
use crate::state::{CmdResult, Server};

fn describe(u: &User, credentials: bool) -> Document {
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
    if credentials {
        if let Ok(c) = u.to_doc().get_document("credentials") {
            d.insert("credentials", c.clone());
        }
    }
    d
}

/// One name of `usersInfo`: `(db, user)`.
fn named(v: &Bson, db: &str) -> Result<(String, String), QueryError> {
    match v {
        Bson::String(u) => Ok((db.to_string(), u.clone())),
        Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
            (Ok(u), Ok(b)) => Ok((b.to_string(), u.to_string())),
            _ => Err(QueryError::bad_value(
                "User name must contain string fields 'user' and 'db'",
            )),
        },
        _ => Err(QueryError::bad_value(
            "User name must be either a string or an object",
        )),
    }
}

pub fn users_info(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    for (k, v) in cmd {
        let refused = match k.as_str() {
            "showPrivileges" | "showAuthenticationRestrictions" => {
                !matches!(v, Bson::Boolean(false))
            }
            "filter" => true,
            _ => false,
        };
        if refused {
            return Err(QueryError::bad_value(format!(
                "usersInfo's '{k}' is not supported by siltd"
            )));
        }
    }
    let creds = matches!(cmd.get("showCredentials"), Some(Bson::Boolean(true)));
    let users: Vec<User> = match cmd.get("usersInfo") {
        Some(Bson::Document(d)) if d.get_bool("forAllDBs") == Ok(true) => s.auth.users.list(None),
        Some(Bson::Array(names)) => {
            let mut out = Vec::new();
            for n in names {
                let (b, u) = named(n, db)?;
                out.extend(s.auth.users.get(&b, &u));
            }
            out
        }
        Some(v @ (Bson::String(_) | Bson::Document(_))) => {
            let (b, u) = named(v, db)?;
            s.auth.users.get(&b, &u).into_iter().collect()
        }
        Some(Bson::Int32(1) | Bson::Int64(1)) => s.auth.users.list(Some(db)),
        Some(Bson::Double(x)) if *x == 1.0 => s.auth.users.list(Some(db)),
        _ => {
            return Err(QueryError::bad_value(
                "usersInfo must be 1, a user name, a {user, db} document, an array of these, or {forAllDBs: true}",
            ))
        }
    };
    Ok(doc! { "users": users.iter().map(|u| describe(u, creds)).collect::<Vec<_>>() })
}
