//! The `find` command: a query's first batch, the rest left in a cursor.

use std::collections::VecDeque;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

use bson::Document;
use silt_collection::{Collection, MatchSource};
use silt_query::{QResult, QueryError};

use super::common::{batch_size_arg, bool_arg, coll_arg, cursor_reply};
use super::query::{parse_query, Query};
use crate::cursors::{DocSource, Shaped, VecSource};
use crate::ops::read_stop;
use crate::state::{CmdResult, Ctx, Server};

/// A stream of the query's results over `coll` (none if it does not exist).
fn run_query(coll: Option<Arc<Collection>>, q: Query, op: &Ctx) -> QResult<Box<dyn DocSource>> {
    let Some(coll) = coll else {
        return Ok(Box::new(VecSource(VecDeque::new())));
    };
    let planned = q.choose(&coll)?;
    let snap = op.snap(&coll);
    let mut src = MatchSource::new_at(
        coll,
        &planned,
        Some(q.matcher.clone()),
        read_stop(q.deadline),
        snap,
    );
    let inner: Box<dyn DocSource> = match &q.sort {
        Some(sort) if !planned.sorted() => {
            let mut all = Vec::new();
            while let Some(d) = src.next_doc()? {
                all.push(d);
            }
            Box::new(VecSource(sort.sort(all).into()))
        }
        _ => Box::new(src),
    };
    Ok(Box::new(Shaped {
        inner,
        skip: q.skip,
        limit: q.limit,
        returned: 0,
        projection: q.projection,
        matcher: Some(q.matcher),
    }))
}

pub fn find(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "find")?;
    let ns = format!("{db}.{coll}");
    s.ops.query.fetch_add(1, AtomicOrdering::Relaxed);
    if bool_arg(cmd, "tailable")?.unwrap_or(false) {
        return Err(QueryError::bad_value(
            "tailable cursors need a capped collection, which siltd does not support",
        ));
    }
    let q = parse_query(cmd, "filter")?;
    let single = bool_arg(cmd, "singleBatch")?.unwrap_or(false);
    let batch = batch_size_arg(cmd)?;
    let src = run_query(s.store.get(&ns), q, op)?;
    let (docs, id) = s.cursors.first_batch(&ns, src, batch, single)?;
    if id != 0 && bool_arg(cmd, "noCursorTimeout")?.unwrap_or(false) {
        s.cursors.keep_alive(id);
    }
    Ok(cursor_reply(&ns, docs, id, true))
}
