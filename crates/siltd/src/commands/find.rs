//! The `find` command: a query's first batch, the rest left in a cursor.

use std::collections::VecDeque;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use silt_collection::{Collection, MatchSource};
use silt_query::{QResult, QueryError};

use super::common::{
    batch_size_arg, bool_arg, coll_arg, cursor_reply, doc_arg, non_negative, optional_bool,
};
use super::query::{parse_query, Query};
use crate::ctx::Ctx;
use crate::cursors::{DocSource, Scored, Shaped, VecSource};
use crate::oplog_source::OplogSource;
use crate::ops::read_stop;
use crate::state::{CmdResult, Server};
use silt_collection::oplog::OPLOG_NS;

/// `inner` with the query's skip, limit and projection applied.
fn shaped(inner: Box<dyn DocSource>, q: Query) -> Shaped {
    Shaped {
        inner,
        skip: q.skip,
        limit: q.limit,
        returned: 0,
        projection: q.projection,
        matcher: Some(q.matcher),
        text_meta: q.text_meta,
    }
}

/// mongod's context on what goes wrong while the query runs (not while it is parsed or
/// planned): "Executor error during find command :: caused by :: ...".
fn executor_error(e: QueryError) -> QueryError {
    e.context("Executor error during find command")
}

/// A stream of the query's results over `coll` (none if it does not exist).
fn run_query(coll: Option<Arc<Collection>>, q: Query, op: &Ctx) -> QResult<Box<dyn DocSource>> {
    let Some(coll) = coll else {
        return Ok(Box::new(VecSource(VecDeque::new())));
    };
    let mut q = q;
    q.resolve_natural(&coll);
    let planned = q.choose(&coll)?;
    let snap = op.snap(&coll);
    let src = MatchSource::new_at(
        coll,
        &planned,
        Some(q.matcher.clone()),
        read_stop(q.deadline),
        snap,
    );
    // A `$text` query (bound to the text index by the plan) carries each document's score.
    let mut src: Box<dyn DocSource> = match q.matcher.text().and_then(|t| t.bound()) {
        Some(b) => Box::new(Scored {
            inner: Box::new(src),
            text: b.clone(),
        }),
        None => Box::new(src),
    };
    let inner: Box<dyn DocSource> = match &q.sort {
        _ if q.reverse => {
            let mut all = Vec::new();
            while let Some(d) = src.next_doc().map_err(executor_error)? {
                all.push(d);
            }
            all.reverse();
            Box::new(VecSource(all.into()))
        }
        Some(sort) if !planned.sorted() => {
            // With a limit only the best `skip + limit` are kept as documents arrive (a
            // stable sort keeps scan order among equals); the rest count against the sort's
            // memory cap.
            let keep = q.limit.map(|l| {
                usize::try_from(l.saturating_add(q.skip))
                    .unwrap_or(usize::MAX)
                    .max(1)
            });
            let mut all = Vec::new();
            let mut budget = silt_query::memory::Budget::new(silt_query::memory::Use::Sort);
            while let Some(d) = src.next_doc().map_err(executor_error)? {
                budget
                    .charge(silt_query::memory::doc_size(&d))
                    .map_err(executor_error)?;
                all.push(d);
                if let Some(k) = keep {
                    if all.len() > k
                        && (all.len() >= k.saturating_mul(2).max(1024)
                            || (budget.past_half() && all.len() > k + k / 4))
                    {
                        all = sort.sort(all);
                        for d in all.drain(k..) {
                            budget.release(silt_query::memory::doc_size(&d));
                        }
                    }
                }
            }
            Box::new(VecSource(sort.sort(all).into()))
        }
        _ => src,
    };
    Ok(Box::new(shaped(inner, q)))
}

/// `find`'s flags are mongod's `optionalBool`s: a bool or nothing (14 otherwise, `null`
/// included). `returnKey` and `showRecordId` change what is returned and are not implemented.
fn check_flags(cmd: &Document) -> QResult<()> {
    const FLAGS: [&str; 10] = [
        "singleBatch",
        "allowDiskUse",
        "allowPartialResults",
        "oplogReplay",
        "tailable",
        "awaitData",
        "noCursorTimeout",
        "readOnce",
        "returnKey",
        "showRecordId",
    ];
    for flag in FLAGS {
        let set = optional_bool(cmd, flag)?.unwrap_or(false);
        if set && matches!(flag, "returnKey" | "showRecordId") {
            return Err(super::args::not_implemented(&format!(
                "FindCommandRequest.{flag}"
            )));
        }
    }
    Ok(())
}

pub(super) fn find(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "find")?;
    let ns = format!("{db}.{coll}");
    s.ops().query.fetch_add(1, AtomicOrdering::Relaxed);
    check_flags(cmd)?;
    let tailable = bool_arg(cmd, "tailable")?.unwrap_or(false);
    if bool_arg(cmd, "awaitData")?.unwrap_or(false) && !tailable {
        return Err(QueryError::failed_to_parse(
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    if s.views().is_view(&ns) {
        return find_on_view(s, db, &coll, cmd, op);
    }
    let q = parse_query(cmd, "filter")?;
    if let Some(log) = s.store().oplog().filter(|_| ns == OPLOG_NS) {
        return find_oplog(s, log.clone(), q, cmd, op);
    }
    if tailable {
        return tail(s, &ns, q, cmd, op);
    }
    let single = bool_arg(cmd, "singleBatch")?.unwrap_or(false);
    let batch = batch_size_arg(cmd)?;
    let deadline = q.deadline;
    let src = run_query(s.store().get(&ns), q, op)?;
    let (docs, id) = s
        .cursors()
        .first_batch(op.cursor_owner(), &ns, src, batch, single, deadline)
        .map_err(executor_error)?;
    if id != 0 && bool_arg(cmd, "noCursorTimeout")?.unwrap_or(false) {
        s.cursors().keep_alive(id);
    }
    Ok(cursor_reply(&ns, docs, id, true))
}

/// A find on a view runs as an aggregation of the view: `$match`, `$sort`, `$skip`,
/// `$limit`, `$project`, after the view's own pipeline.
fn find_on_view(s: &Server, db: &str, coll: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    for refused in ["tailable", "awaitData", "noCursorTimeout"] {
        if bool_arg(cmd, refused)?.unwrap_or(false) {
            return Err(QueryError::invalid_pipeline_operator(format!(
                "{refused} is not supported on a view"
            )));
        }
    }
    let mut stages = Vec::new();
    if let Some(f) = doc_arg(cmd, "filter")?.filter(|f| !f.is_empty()) {
        stages.push(Bson::Document(doc! { "$match": f.clone() }));
    }
    if let Some(sort) = doc_arg(cmd, "sort")?.filter(|d| !d.is_empty()) {
        stages.push(Bson::Document(doc! { "$sort": sort.clone() }));
    }
    if let Some(n) = non_negative(cmd, "skip")?.filter(|n| *n > 0) {
        stages.push(Bson::Document(doc! { "$skip": n as i64 }));
    }
    if let Some(n) = non_negative(cmd, "limit")?.filter(|n| *n > 0) {
        stages.push(Bson::Document(doc! { "$limit": n as i64 }));
    }
    if let Some(p) = doc_arg(cmd, "projection")?.filter(|p| !p.is_empty()) {
        stages.push(Bson::Document(doc! { "$project": p.clone() }));
    }
    let mut cursor = Document::new();
    if let Some(b) = batch_size_arg(cmd)? {
        cursor.insert("batchSize", b as i64);
    }
    let mut agg = doc! { "aggregate": coll, "pipeline": stages, "cursor": cursor };
    for k in ["hint", "let", "maxTimeMS", "allowDiskUse"] {
        if let Some(v) = cmd.get(k) {
            agg.insert(k, v.clone());
        }
    }
    let mut reply = super::aggregate::aggregate(s, db, &agg, op)?;
    // `singleBatch`: the first batch is all the client gets, so no cursor stays open.
    if bool_arg(cmd, "singleBatch")?.unwrap_or(false) {
        if let Ok(c) = reply.get_document_mut("cursor") {
            if let Some(id) = c.get_i64("id").ok().filter(|id| *id != 0) {
                s.cursors().kill(id);
                c.insert("id", 0i64);
            }
        }
    }
    Ok(reply)
}

/// A find on the oplog (`oplog_source.rs`): in time order, or newest first for
/// `{$natural: -1}`; tailable too, as a capped collection. Another sort sorts in memory.
fn find_oplog(
    s: &Server,
    log: Arc<silt_collection::oplog::Oplog>,
    q: Query,
    cmd: &Document,
    op: &Ctx,
) -> CmdResult {
    let tailable = bool_arg(cmd, "tailable")?.unwrap_or(false);
    let newest_first = q.natural == Some(false);
    if tailable && (q.sort.is_some() || newest_first) {
        return Err(QueryError::bad_value(
            "cannot use tailable option with a sort other than {$natural: 1}",
        ));
    }
    let src = OplogSource::new(log, &q.filter, q.matcher.clone(), newest_first);
    let inner: Box<dyn DocSource> = match &q.sort {
        Some(sort) if q.natural.is_none() => {
            let mut src = src;
            let mut all = Vec::new();
            while let Some(d) = src.next_doc().map_err(executor_error)? {
                all.push(d);
            }
            Box::new(VecSource(sort.sort(all).into()))
        }
        _ if tailable => Box::new(src.tailing(bool_arg(cmd, "awaitData")?.unwrap_or(false))),
        _ => Box::new(src),
    };
    let deadline = q.deadline;
    let shaped = shaped(inner, q);
    let (docs, id) = s
        .cursors()
        .first_batch(
            op.cursor_owner(),
            OPLOG_NS,
            Box::new(shaped),
            batch_size_arg(cmd)?,
            bool_arg(cmd, "singleBatch")?.unwrap_or(false),
            deadline,
        )
        .map_err(executor_error)?;
    Ok(cursor_reply(OPLOG_NS, docs, id, true))
}

/// A tailable cursor (capped collections only): the matching documents in insertion order,
/// and later ones on later `getMore`s.
fn tail(s: &Server, ns: &str, q: Query, cmd: &Document, op: &Ctx) -> CmdResult {
    let Some(coll) = s.store().get(ns).filter(|c| c.primary_key().is_natural()) else {
        return Err(QueryError::bad_value(format!(
            "error processing query: ns={ns}: tailable cursor requested on non capped collection"
        )));
    };
    if q.sort.is_some() || q.natural == Some(false) {
        return Err(QueryError::bad_value(
            "cannot use tailable option with a sort other than {$natural: 1}",
        ));
    }
    let source = crate::cursors::TailSource {
        coll,
        matcher: q.matcher.clone(),
        last_key: None,
        await_data: bool_arg(cmd, "awaitData")?.unwrap_or(false),
    };
    let shaped = shaped(Box::new(source), q);
    let single = bool_arg(cmd, "singleBatch")?.unwrap_or(false);
    let (docs, id) = s.cursors().first_batch(
        op.cursor_owner(),
        ns,
        Box::new(shaped),
        batch_size_arg(cmd)?,
        single,
        None,
    )?;
    Ok(cursor_reply(ns, docs, id, true))
}
