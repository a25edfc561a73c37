//! The `getCmdLineOpts` command.

use bson::doc;

use crate::state::{CmdResult, Server};

pub(super) fn get_cmd_line_opts(s: &Server) -> CmdResult {
    let mut parsed = doc! {
        "net": { "port": s.cfg().port as i32, "bindIp": s.cfg().bind.clone() },
        "storage": { "dbPath": s.cfg().dbpath.display().to_string() },
    };
    if let Some(name) = &s.cfg().repl_set {
        parsed.insert("replication", doc! { "replSetName": name.clone() });
    }
    Ok(doc! { "argv": s.cfg().argv.clone(), "parsed": parsed })
}
