//! The `insert` command.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Document};

use super::common::{bool_arg, coll_arg};
use super::write::{docs_arg, prepare_insert, WriteFail};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn insert(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "insert")?;
    let docs = docs_arg(cmd, "documents")?;
    let ordered = bool_arg(cmd, "ordered")?.unwrap_or(true);
    // Insert-or-ignore: documents whose `_id` exists are skipped without an error.
    let ignore_dups = bool_arg(cmd, "ignoreDuplicates")?.unwrap_or(false);
    let ns = format!("{db}.{coll}");
    s.views().refuse_write(&ns)?;
    let c = s
        .store()
        .get_or_create_for(&ns, op.writer())
        .map_err(coll_err)?;
    if ignore_dups && op.repeated.is_empty() {
        // The fast path: one insert-if-absent message per document, no read. Taken only when
        // every document keeps the write rules, the collection has no secondary index and
        // the writer is outside a transaction (see `Collection::insert_if_absent`);
        // otherwise each document is inserted below and reported on its own.
        let all: Option<Vec<Document>> = docs
            .iter()
            .map(|d| prepare_insert((*d).clone()).ok())
            .collect();
        if let Some(all) = all {
            if let Ok(true) = c.insert_if_absent(&all, op.writer()) {
                s.ops()
                    .insert
                    .fetch_add(all.len() as u64, AtomicOrdering::Relaxed);
                return Ok(doc! {
                    "n": crate::num::int32(all.len()),
                    "fastInserts": { "count": crate::num::int32(all.len()), "countsAreUnknown": true },
                });
            }
        }
    }
    let mut n = 0i32;
    let mut errors = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        s.ops().insert.fetch_add(1, AtomicOrdering::Relaxed);
        let r = crate::repeated::insert_error(op.repeated, i)
            .map_or(Ok(()), Err)
            .and_then(|()| prepare_insert(d.clone()))
            .map_err(WriteFail::Other)
            .and_then(|d| op.insert(&c, &d).map_err(WriteFail::from));
        match r {
            Ok(()) => n += 1,
            // Skipped: a duplicate `_id` or unique-index key.
            Err(WriteFail::Dup(_)) if ignore_dups => {}
            Err(f) => {
                errors.push(f.into_write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut r = doc! { "n": n };
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(r)
}
