//! `features`: what mongod reports of its build's optional features. siltd runs no
//! server-side JavaScript, so only the ObjectId machine part is reported.

use bson::{doc, Document};

use crate::state::{CmdResult, Server};

pub(super) fn features(s: &Server, _cmd: &Document) -> CmdResult {
    // ObjectId's 5 random bytes of this process, as mongod reports their low bytes.
    let b = s.process_id().bytes();
    let machine = i32::from_be_bytes([0, b[4], b[5], b[6]]);
    Ok(doc! { "oidMachine": machine })
}
