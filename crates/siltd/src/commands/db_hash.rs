//! The `dbHash` command: an MD5 of each collection's documents in `_id` order, and of the
//! database as a whole (for comparing two copies of a database).

use bson::{doc, Bson, Document};
use md5::{Digest, Md5};
use silt_query::QueryError;

use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn db_hash(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let started = std::time::Instant::now();
    let only: Option<Vec<String>> = match cmd.get("collections") {
        None | Some(Bson::Null) => None,
        Some(Bson::Array(a)) => Some(
            a.iter()
                .map(|x| match x {
                    Bson::String(s) => Ok(s.clone()),
                    _ => Err(QueryError::type_mismatch("collections must be strings")),
                })
                .collect::<Result<_, _>>()?,
        ),
        Some(_) => return Err(QueryError::type_mismatch("collections must be an array")),
    };
    let mut colls = Document::new();
    let mut total = Md5::new();
    let mut list = s.store().list_collections(db);
    list.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, c) in list {
        if name.starts_with("system.") || only.as_ref().is_some_and(|o| !o.contains(&name)) {
            continue;
        }
        let mut h = Md5::new();
        let mut cur = c.scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
        while let Some((_, d)) = cur.next_doc().map_err(coll_err)? {
            let mut bytes = Vec::new();
            d.to_writer(&mut bytes)
                .map_err(|e| QueryError::internal(e.to_string()))?;
            h.update(&bytes);
        }
        let digest = hex(&h.finalize());
        total.update(name.as_bytes());
        total.update(digest.as_bytes());
        colls.insert(name, digest);
    }
    Ok(doc! {
        "host": super::common::host(s),
        "collections": colls,
        "capped": [],
        "uuids": {},
        "md5": hex(&total.finalize()),
        "timeMillis": crate::num::millis(started.elapsed()),
    })
}
