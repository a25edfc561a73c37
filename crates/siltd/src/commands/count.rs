//! The `count` command: fast counts inside the storage layer when an index answers the
//! filter, else counting what a plan reads.

use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use silt_collection::MatchSource;
use silt_query::plan::{self};
use silt_query::QueryError;

use super::common::{check_hint, coll_arg, deadline, doc_arg, int_arg, new_matcher};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::ops::read_stop;
use crate::state::{CmdResult, Server};

pub(super) fn count(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "count")?;
    let ns = format!("{db}.{coll}");
    s.ops().query.fetch_add(1, AtomicOrdering::Relaxed);
    let filter = doc_arg(cmd, "query")?.cloned().unwrap_or_default();
    let skip = int_arg(cmd, "skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(QueryError::bad_value(
            "skip value is negative in count query",
        ));
    }
    let limit = int_arg(cmd, "limit")?.unwrap_or(0).unsigned_abs();
    check_hint(cmd)?;
    if s.views().is_view(&ns) {
        // On a view: count what its pipeline and the filter yield.
        let mut stages = vec![doc! { "$match": filter }];
        if skip > 0 {
            stages.push(doc! { "$skip": skip });
        }
        if limit > 0 {
            stages.push(doc! { "$limit": limit as i64 });
        }
        let n = super::aggregate::view_docs(s, db, &coll, cmd, stages, op)?.len();
        return Ok(doc! { "n": i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32) });
    }
    if let Some(log) = s
        .store()
        .oplog()
        .filter(|_| ns == silt_collection::oplog::OPLOG_NS)
    {
        // The oplog: its entries that match, counted as read (`oplog_source.rs`).
        let matcher = Arc::new(new_matcher(&filter)?);
        let mut src = crate::oplog_source::OplogSource::new(log.clone(), &filter, matcher, false);
        let mut n = 0u64;
        while crate::cursors::DocSource::next_doc(&mut src)?.is_some() {
            n += 1;
        }
        let n = n.saturating_sub(skip as u64);
        let n = if limit > 0 { n.min(limit as u64) } else { n };
        return Ok(doc! { "n": i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32) });
    }
    let Some(c) = s.store().get(&ns) else {
        return Ok(doc! { "n": 0 });
    };
    let matcher = Arc::new(new_matcher(&filter)?);
    // A hint is validated and honoured by the planner; without one, count in the tree.
    let hinted = !matches!(cmd.get("hint"), None | Some(Bson::Null));
    let fast = if hinted {
        None
    } else if filter.is_empty() && c.count_is_exact() {
        // No predicate: the collection's maintained count, as MongoDB answers from its
        // metadata (this is what drivers' estimatedDocumentCount sends). O(1). While fast
        // upserts or insert-if-absent messages may be pending, the tree is counted instead.
        Some(c.estimated_count())
    } else {
        c.fast_count(&matcher, None).map_err(coll_err)?.map(|f| f.n)
    };
    let total = if let Some(n) = fast {
        n
    } else {
        // Counted from index entries alone when an index holds the filter's fields.
        let needs = plan::needed_paths(&matcher, None, Some(Vec::new()));
        let planned = c.plan(&filter, &matcher, None, cmd.get("hint"), needs.as_deref())?;
        let mut src = MatchSource::new(c, &planned, Some(matcher), read_stop(deadline(cmd)?));
        if let Some(paths) = &needs {
            // Only what the filter reads is decoded of each document counted.
            src.decode_only(paths);
        }
        src.count_matches().map_err(coll_err)?
    };
    let mut n = total.saturating_sub(skip as u64);
    if limit > 0 {
        n = n.min(limit);
    }
    // An int32 while it fits, as MongoDB replies.
    Ok(doc! { "n": i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32) })
}
