//! `endSessions` (and `killSessions`, `killAllSessions`, `refreshSessions`): forget the named
//! sessions, aborting their open transactions. `refreshSessions` and `killAllSessions` with
//! no names change nothing: idle sessions expire on their own after 30 minutes.

use bson::{Bson, Document};

use crate::state::{CmdResult, Server};

pub(super) fn end_sessions(s: &Server, cmd: &Document) -> CmdResult {
    let Some((name, v)) = cmd.iter().next() else {
        return Ok(Document::new());
    };
    if matches!(name.as_str(), "endSessions" | "killSessions") {
        if let Bson::Array(a) = v {
            let lsids: Vec<Document> = a
                .iter()
                .filter_map(|x| match x {
                    Bson::Document(d) => Some(d.clone()),
                    _ => None,
                })
                .collect();
            s.sessions().end(&lsids);
        }
    }
    Ok(Document::new())
}
