//! `saslStart` and `saslContinue`: a SCRAM conversation (the work is `crate::auth`'s), and
//! `logout`.

use bson::Document;

use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

pub(super) fn sasl_start(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    crate::auth::sasl_start(s, op.conn, db, cmd)
}

pub(super) fn sasl_continue(s: &Server, cmd: &Document, op: &Ctx) -> CmdResult {
    crate::auth::sasl_continue(s, op.conn, cmd)
}

pub(super) fn logout(op: &Ctx) -> CmdResult {
    op.conn.auth.logout();
    Ok(Document::new())
}
