//! `createUser`: a user of the command's database with a password (stored only as SCRAM
//! salted keys), roles and optional `customData`.

use bson::{Bson, Document};
use silt_query::QueryError;

use crate::auth::roles::parse_roles;
use crate::auth::scram::{Credential, Mech};
use crate::auth::users::new_user_id;
use crate::auth::User;
use crate::state::{CmdResult, Server};

/// The mechanisms a command asks for (`mechanisms`), or both SCRAM ones.
pub(super) fn mechanisms(cmd: &Document) -> Result<Option<Vec<Mech>>, QueryError> {
    match cmd.get("mechanisms") {
        None => Ok(None),
        Some(Bson::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|m| match m {
                Bson::String(n) => Mech::from_name(n)
                    .ok_or_else(|| QueryError::bad_value(format!("Unknown auth mechanism '{n}'"))),
                _ => Err(QueryError::bad_value(
                    "mechanisms field must be an array of strings",
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(QueryError::bad_value(
            "mechanisms field must be a non-empty array of strings",
        )),
    }
}

/// A user command's password: as typed, or digested by the client (`digestPassword: false`,
/// which mongosh sends with `passwordDigestor: "client"`).
#[derive(Clone, Copy)]
pub(super) struct Password<'a> {
    pub text: &'a str,
    pub client_digested: bool,
}

/// The password of a user command, checked as mongod checks it.
pub(super) fn password(cmd: &Document) -> Result<Option<Password<'_>>, QueryError> {
    let command = cmd.keys().next().map_or("", String::as_str);
    let client_digested = match cmd.get("digestPassword") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => !b,
        Some(_) => {
            return Err(QueryError::type_mismatch(
                "\"digestPassword\" must be a boolean",
            ))
        }
    };
    match cmd.get("pwd") {
        None => Ok(None),
        // mongod's words come from ICU, which it asks to prepare the password.
        Some(Bson::String(p)) if p.is_empty() => Err(QueryError::located(
            50687,
            "Error preflighting UTF-8 conversion: U_STRING_NOT_TERMINATED_WARNING",
        )),
        Some(Bson::String(p)) => Ok(Some(Password {
            text: p,
            client_digested,
        })),
        other => Err(super::common::wrong_type(
            &format!("{command}.pwd"),
            other,
            "string",
        )),
    }
}

/// The salted credentials of `user` for each mechanism.
pub(super) fn credentials(
    user: &str,
    pwd: Password<'_>,
    mechs: &[Mech],
) -> Result<Vec<(Mech, Credential)>, QueryError> {
    mechs
        .iter()
        .map(|m| {
            let c = if pwd.client_digested {
                Credential::from_client_digest(*m, pwd.text)
            } else {
                Credential::new(*m, user, pwd.text)
            };
            c.map(|c| (*m, c)).map_err(|e| saslprep_error(&e))
        })
        .collect()
}

/// mongod's error for a password SASLprep refuses (ICU's status names).
fn saslprep_error(why: &str) -> QueryError {
    let status = if why.contains("prohibited") {
        "U_STRINGPREP_PROHIBITED_ERROR"
    } else if why.contains("unassigned") {
        "U_STRINGPREP_UNASSIGNED_ERROR"
    } else if why.contains("bidi") || why.contains("RandALCat") {
        "U_STRINGPREP_CHECK_BIDI_ERROR"
    } else {
        return QueryError::bad_value(why.to_string());
    };
    QueryError::located(50692, format!("Error preflighting normalization: {status}"))
}

/// The user name a user command names (its first field).
pub(super) fn user_name<'a>(cmd: &'a Document, command: &str) -> Result<&'a str, QueryError> {
    match cmd.get(command) {
        Some(Bson::String(n)) if !n.is_empty() => Ok(n),
        Some(Bson::String(_)) => Err(QueryError::bad_value(
            "User document needs 'user' field to be non-empty",
        )),
        _ => Err(QueryError::type_mismatch(format!(
            "\"{command}\" must be a string naming the user"
        ))),
    }
}

pub(super) fn custom_data(cmd: &Document) -> Result<Option<Document>, QueryError> {
    match cmd.get("customData") {
        None => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d.clone())),
        Some(_) => Err(QueryError::type_mismatch(
            "\"customData\" must be an object",
        )),
    }
}

pub(super) fn create_user(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = user_name(cmd, "createUser")?;
    if db == "$external" || db == "local" {
        return Err(QueryError::bad_value(format!(
            "Cannot create users in the {db} database"
        )));
    }
    let Some(pwd) = password(cmd)? else {
        return Err(QueryError::bad_value("Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db"));
    };
    let roles = parse_roles(cmd.get("roles"), db, "createUser", &s.auth().roles)?;
    let mechs = mechanisms(cmd)?.unwrap_or(Mech::ALL.to_vec());
    let user = User {
        user: name.to_string(),
        db: db.to_string(),
        roles,
        creds: credentials(name, pwd, &mechs)?,
        custom_data: custom_data(cmd)?,
        user_id: new_user_id(),
    };
    s.auth().users.put(s.store(), user, true)?;
    tracing::info!(user = name, db, "created user");
    Ok(Document::new())
}
