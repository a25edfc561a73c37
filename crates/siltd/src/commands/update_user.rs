//! `updateUser`: change a user's password, mechanisms, roles or `customData`.

use bson::Document;
use silt_query::QueryError;

use super::create_user::{credentials, custom_data, mechanisms, password, user_name};
use crate::auth::roles::parse_roles;
use crate::state::{CmdResult, Server};

pub(super) fn update_user(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    // The arguments' types first (mongod's IDL), then the user; an empty name is just a user
    // that does not exist.
    let name = match cmd.get("updateUser") {
        Some(bson::Bson::String(n)) if n.is_empty() => "",
        _ => user_name(cmd, "updateUser")?,
    };
    let pwd = password(cmd)?;
    let Some(mut u) = s.auth().users.get(db, name) else {
        // updateUser names the user without quotes (dropUser quotes it).
        return Err(QueryError::coded(
            11,
            "UserNotFound",
            format!("User {name}@{db} not found"),
        ));
    };
    let mechs = mechanisms(cmd)?;
    let roles = match cmd.get("roles") {
        Some(v) => Some(parse_roles(Some(v), db, "updateUser", &s.auth().roles)?),
        None => None,
    };
    let data = custom_data(cmd)?;
    if pwd.is_none() && mechs.is_none() && roles.is_none() && data.is_none() {
        return Err(QueryError::bad_value(
            "Must specify at least one field to update in updateUser",
        ));
    }
    match (pwd, mechs) {
        (Some(p), m) => {
            let m = m.unwrap_or_else(|| u.creds.iter().map(|(m, _)| *m).collect());
            u.creds = credentials(name, p, &m)?;
        }
        (None, Some(m)) => {
            // Without a new password, mechanisms can only be taken away.
            if let Some(missing) = m.iter().find(|m| u.credential(**m).is_none()) {
                return Err(QueryError::bad_value(format!(
                    "mechanisms field must be a subset of previously set mechanisms ({} is not set); give 'pwd' to add one",
                    missing.name()
                )));
            }
            u.creds.retain(|(x, _)| m.contains(x));
        }
        (None, None) => {}
    }
    if let Some(r) = roles {
        u.roles = r;
    }
    if let Some(d) = data {
        u.custom_data = Some(d);
    }
    s.auth().users.put(s.store(), u, false)?;
    Ok(Document::new())
}
