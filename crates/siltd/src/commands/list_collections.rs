//! The `listCollections` command.

use bson::{doc, Document};
use silt_query::matcher::Matcher;

use super::common::{bool_arg, clustered_index, cursor_reply, doc_arg};
use crate::state::{CmdResult, Server};

pub(super) fn list_collections(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let filter = doc_arg(cmd, "filter")?.cloned().unwrap_or_default();
    let matcher = Matcher::new(&filter)?;
    let name_only = bool_arg(cmd, "nameOnly")?.unwrap_or(false);
    let mut out = Vec::new();
    // The oplog, as mongod shows it: capped at its size, without an `_id` index.
    if let Some(log) = s.store().oplog().filter(|_| db == "local") {
        let size = i64::try_from(log.max_bytes()).unwrap_or(i64::MAX);
        let full = doc! {
            "name": "oplog.rs",
            "type": "collection",
            "options": { "capped": true, "size": size, "autoIndexId": false },
            "info": { "readOnly": false, "uuid": log.uuid() },
        };
        if matcher.matches(&full) {
            out.push(if name_only {
                doc! { "name": "oplog.rs", "type": "collection" }
            } else {
                full
            });
        }
    }
    for (name, c) in s.store().list_collections(db) {
        let mut options = c.options();
        let clustered = clustered_index(&options);
        let mut full = doc! { "name": &name, "type": "collection" };
        // A clustered collection has no separate `_id` index: mongod shows the clustered
        // index in full among the options, and no `idIndex`.
        if let Some(ci) = clustered {
            options.insert("clusteredIndex", ci);
            full.insert("options", options);
            full.insert("info", doc! { "readOnly": false, "uuid": c.uuid() });
        } else {
            full.insert("options", options);
            full.insert("info", doc! { "readOnly": false, "uuid": c.uuid() });
            full.insert(
                "idIndex",
                doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            );
        }
        if !matcher.matches(&full) {
            continue;
        }
        out.push(if name_only {
            doc! { "name": name, "type": "collection" }
        } else {
            full
        });
    }
    for (name, v) in s.views().of_db(db) {
        let pipeline: Vec<bson::Bson> = v.pipeline.into_iter().map(bson::Bson::Document).collect();
        let mut options = doc! { "viewOn": v.view_on, "pipeline": pipeline };
        if let Some(c) = v.collation {
            options.insert("collation", c);
        }
        let full = doc! {
            "name": &name,
            "type": "view",
            "options": options,
            "info": { "readOnly": true },
        };
        if !matcher.matches(&full) {
            continue;
        }
        out.push(if name_only {
            doc! { "name": name, "type": "view" }
        } else {
            full
        });
    }
    Ok(cursor_reply(
        &format!("{db}.$cmd.listCollections"),
        out,
        0,
        true,
    ))
}
