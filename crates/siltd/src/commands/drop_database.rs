//! The `dropDatabase` command.

use bson::Document;

use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn drop_database(s: &Server, db: &str) -> CmdResult {
    s.drop_database(db).map_err(coll_err)?;
    s.views().remove_db(db);
    Ok(Document::new())
}
