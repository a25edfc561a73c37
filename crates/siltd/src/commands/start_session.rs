//! The `startSession` command.

use bson::doc;

use crate::state::CmdResult;

pub(super) fn start_session() -> CmdResult {
    let uuid = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: bson::Uuid::new().bytes().to_vec(),
    };
    Ok(doc! { "id": { "id": uuid }, "timeoutMinutes": 30 })
}
