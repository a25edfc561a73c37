//! `dropUser` and `dropAllUsersFromDatabase`.

use bson::{doc, Document};

use super::create_user::user_name;
use crate::auth::users::not_found;
use crate::state::{CmdResult, Server};

pub(super) fn drop_user(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = user_name(cmd, "dropUser")?;
    match s.auth().users.remove(s.store(), db, |u| u.user == name)? {
        0 => Err(not_found(name, db)),
        _ => Ok(Document::new()),
    }
}

pub(super) fn drop_all_users_from_database(s: &Server, db: &str) -> CmdResult {
    let n = s.auth().users.remove(s.store(), db, |_| true)?;
    Ok(doc! { "n": crate::num::int32(n) })
}
