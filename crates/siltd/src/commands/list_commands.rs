//! The `listCommands` command: what the command table holds.

use bson::{doc, Document};

use crate::state::CmdResult;

pub(super) fn list_commands() -> CmdResult {
    let mut cmds = Document::new();
    let mut table: Vec<&super::Command> = super::TABLE.iter().collect();
    table.sort_by_key(|c| c.name);
    for c in table {
        cmds.insert(
            c.name,
            doc! { "help": c.help, "requiresAuth": false, "adminOnly": c.admin_only, "secondaryOk": true },
        );
    }
    Ok(doc! { "commands": cmds })
}
