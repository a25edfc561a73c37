//! The `aggregate` command: pipelines over a collection, `$collStats`, and `$lookup`'s access
//! to the other collections of the database.

use std::sync::Arc;
use std::time::Instant;

use bson::{doc, Bson, Document};
use silt_query::agg::LetVars;
use silt_query::{QResult, QueryError};

use silt_collection::{MatchSource, Planned, Snapshot};

use super::common::{bool_arg, coll_arg, cursor_reply, deadline, host, new_matcher};
use crate::ctx::Ctx;
use crate::cursors::{DocSource, VecSource};
use crate::errors::coll_err;
use crate::ops::read_stop;
use crate::state::{CmdResult, Server};

/// `$lookup`'s view of the other collections of the database.
struct DbContext<'a> {
    s: &'a Server,
    db: &'a str,
    deadline: Option<Instant>,
    /// The snapshot of the command's transaction or snapshot read.
    snap: Option<Snapshot>,
}

impl silt_query::agg::AggContext for DbContext<'_> {
    fn scan_collection(&self, coll: &str) -> QResult<Vec<Document>> {
        let Some(c) = self.s.store().get(&format!("{}.{coll}", self.db)) else {
            return Ok(Vec::new());
        };
        let snap = self.snap.clone().unwrap_or_else(|| c.snapshot());
        let mut src = MatchSource::uncovered_at(
            c,
            &Planned::full_scan(),
            None,
            read_stop(self.deadline),
            snap,
        );
        let mut out = Vec::new();
        while let Some(d) = src.next_doc()? {
            out.push(d);
        }
        Ok(out)
    }
}

pub(super) fn aggregate(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    if bool_arg(cmd, "explain")?.unwrap_or(false) {
        return super::explain::explain_command(s, db, cmd, "queryPlanner");
    }
    let lets = LetVars::parse(cmd.get("let"), "aggregate", bson::DateTime::now())?;
    let mut stages = lets.stages(&pipeline_arg(cmd)?);
    let writer = super::agg_write::split(&mut stages, db)?;
    let first = stages.first().and_then(|d| d.keys().next().cloned());
    if first.as_deref() == Some("$changeStream") {
        return change_stream(s, db, cmd, &stages, op);
    }
    for first_only in [
        "$currentOp",
        "$indexStats",
        "$collStats",
        "$planCacheStats",
        "$changeStream",
    ] {
        if stages.iter().skip(1).any(|st| st.contains_key(first_only)) {
            return Err(QueryError::located(
                40602,
                format!("{first_only} is only valid as the first stage in a pipeline"),
            ));
        }
    }
    let collectionless = matches!(
        cmd.get("aggregate"),
        Some(Bson::Int32(1)) | Some(Bson::Int64(1))
    ) || matches!(cmd.get("aggregate"), Some(Bson::Double(d)) if *d == 1.0);
    if first.as_deref() == Some("$currentOp") {
        if db != "admin" || !collectionless {
            return Err(QueryError::invalid_namespace(
                "$currentOp must be run against the 'admin' database with {aggregate: 1}",
            ));
        }
        return current_op_stage(s, cmd, &stages, op);
    }
    let coll = match cmd.get("aggregate") {
        Some(Bson::String(_)) => coll_arg(db, cmd, "aggregate")?,
        _ if collectionless => return db_aggregate(s, db, cmd, &stages, op, writer),
        _ => {
            return Err(QueryError::type_mismatch(
                "The 'aggregate' field must be a string or 1",
            ))
        }
    };
    aggregate_collection(s, db, format!("{db}.{coll}"), cmd, stages, op, writer)
}

/// `[{$changeStream: {...}}, ...]`: a change stream (`change_stream.rs`) on a collection, a
/// database (`aggregate: 1`) or the whole deployment (`aggregate: 1` on `admin` with
/// `allChangesForCluster`). A replica set's only: it reads the oplog.
fn change_stream(s: &Server, db: &str, cmd: &Document, stages: &[Document], op: &Ctx) -> CmdResult {
    use crate::change_stream::{ChangeSource, Options, Scope};
    let (opts, cluster) = Options::parse(stages[0].get("$changeStream").unwrap_or(&Bson::Null))?;
    // A change stream reads majority-committed changes; another level asked for explicitly
    // is refused, as by mongod.
    if let Some(level) = cmd
        .get_document("readConcern")
        .ok()
        .and_then(|rc| rc.get_str("level").ok())
        .filter(|l| *l != "majority")
    {
        return Err(QueryError::invalid_options(format!(
            "Aggregation stage $changeStream cannot run with a readConcern other than 'majority', or in a multi-document transaction. Current readConcern: {{ level: \"{level}\" }}"
        )));
    }
    let Some(log) = s.store().oplog() else {
        return Err(QueryError::located(
            40573,
            "The $changeStream stage is only supported on replica sets",
        ));
    };
    let (scope, ns) = match cmd.get("aggregate") {
        Some(Bson::String(_)) => {
            let coll = coll_arg(db, cmd, "aggregate")?;
            if cluster {
                return Err(QueryError::invalid_namespace(
                    "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name",
                ));
            }
            let ns = format!("{db}.{coll}");
            (
                Scope::Collection {
                    db: db.to_string(),
                    coll,
                },
                ns,
            )
        }
        _ if cluster && db == "admin" => (Scope::Cluster, "admin.$cmd.aggregate".to_string()),
        _ if cluster => {
            return Err(QueryError::invalid_namespace(
                "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name",
            ))
        }
        _ if matches!(db, "admin" | "config" | "local") => {
            return Err(QueryError::invalid_namespace(format!(
                "$changeStream may not be opened on the internal {db} database"
            )))
        }
        _ => (Scope::Database(db.to_string()), format!("{db}.$cmd.aggregate")),
    };
    let source = ChangeSource::open(log.clone(), s.store_weak(), scope, opts, &stages[1..])?;
    let cursor_opts = cursor_arg(cmd)?;
    let batch = super::common::batch_size(&cursor_opts, "cursor.batchSize")?;
    let (docs, id, token) = s
        .cursors()
        .first_events(op.cursor_owner(), &ns, Box::new(source), batch)
        .map_err(|e| crate::cursors::resumable_label(e, true))?;
    Ok(match token {
        Some(t) => super::common::cursor_reply_with_token(&ns, docs, id, true, t),
        None => cursor_reply(&ns, docs, id, true),
    })
}

/// mongod's context on what goes wrong while a pipeline runs (not while it is parsed):
/// "PlanExecutor error during aggregation :: caused by :: ...", code and name unchanged.
fn executor_error(e: QueryError) -> QueryError {
    e.context("PlanExecutor error during aggregation")
}

/// The `pipeline` argument.
fn pipeline_arg(cmd: &Document) -> QResult<Vec<Document>> {
    Ok(match cmd.get("pipeline") {
        Some(Bson::Array(a)) => super::common::stage_docs(a)?,
        _ => {
            return Err(QueryError::type_mismatch(
                "'pipeline' option must be specified as an array",
            ))
        }
    })
}

/// The `cursor` option (required).
fn cursor_arg(cmd: &Document) -> QResult<Document> {
    match cmd.get("cursor") {
        Some(Bson::Document(c)) => {
            // Checked before the pipeline runs, as mongod parses it.
            super::common::batch_size(c, "cursor.batchSize")?;
            Ok(c.clone())
        }
        None => Err(QueryError::failed_to_parse(
            "The 'cursor' option is required, except for aggregate with the explain argument",
        )),
        Some(_) => Err(QueryError::type_mismatch(
            "cursor field must be missing or an object",
        )),
    }
}

/// The results as a cursor's first batch.
fn reply(s: &Server, op: &Ctx, ns: &str, cursor_opts: &Document, out: Vec<Document>) -> CmdResult {
    let batch = super::common::batch_size(cursor_opts, "cursor.batchSize")?;
    let (docs, id) = s.cursors().first_batch(
        op.cursor_owner(),
        ns,
        Box::new(VecSource(out.into())),
        batch,
        false,
        None,
    )?;
    Ok(cursor_reply(ns, docs, id, true))
}

/// `[{$currentOp: {...}}, ...]` on `admin` with `aggregate: 1`: the operations in flight (see
/// `ops`), then the rest of the pipeline. Options: `idleConnections` (default false) adds
/// idle connections, `truncateOps` (default false) cuts command documents at 1 KB;
/// without `allUsers` under `--auth` only the caller's own operations are shown;
/// `idleCursors`, `idleSessions`, `localOps` and `backtrace` are accepted (there are no
/// sessions or shards to tell apart).
fn current_op_stage(s: &Server, cmd: &Document, stages: &[Document], op: &Ctx) -> CmdResult {
    let spec = match stages[0].get("$currentOp") {
        Some(Bson::Document(d)) => d,
        _ => {
            return Err(QueryError::failed_to_parse(
                "$currentOp options must be specified in an object",
            ))
        }
    };
    let mut opts = crate::ops::ReportOptions {
        idle_connections: false,
        truncate_ops: false,
        only_user: None,
    };
    let mut all_users = false;
    for (k, v) in spec {
        let Bson::Boolean(b) = v else {
            return Err(QueryError::failed_to_parse(format!(
                "The field '{k}' must be a boolean"
            )));
        };
        match k.as_str() {
            "idleConnections" => opts.idle_connections = *b,
            "truncateOps" => opts.truncate_ops = *b,
            "allUsers" => all_users = *b,
            "idleCursors" | "idleSessions" | "localOps" | "backtrace" => {}
            _ => {
                return Err(QueryError::located(
                    40415,
                    format!("BSON field '$currentOp.{k}' is an unknown field."),
                ))
            }
        }
    }
    if s.auth().enabled && !all_users {
        opts.only_user = op.auth.user();
    }
    let cursor_opts = cursor_arg(cmd)?;
    let pipeline = silt_query::agg::parse_pipeline(&stages[1..])?;
    let ops = s.inprog().report(&host(s), opts);
    let ctx = DbContext {
        s,
        db: "admin",
        deadline: deadline(cmd)?,
        snap: None,
    };
    let out = pipeline
        .run(Box::new(ops.into_iter().map(Ok)), &ctx)
        .map_err(executor_error)?;
    reply(s, op, "admin.$cmd.aggregate", &cursor_opts, out)
}

/// The sha256 of the empty user name: the `uid` of every session on a server without users.
const NO_USER_UID: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// `{aggregate: 1}` beginning with `$documents` or `$listLocalSessions`.
fn db_aggregate(
    s: &Server,
    db: &str,
    cmd: &Document,
    stages: &[Document],
    op: &Ctx,
    writer: Option<super::agg_write::WriteStage>,
) -> CmdResult {
    let cursor_opts = cursor_arg(cmd)?;
    let first = stages.first().and_then(|d| d.keys().next().cloned());
    let input = match first.as_deref() {
        Some("$documents") => Vec::new(),
        Some("$listLocalSessions") => {
            let spec = match stages[0].get("$listLocalSessions") {
                Some(Bson::Document(d)) => d.clone(),
                _ => {
                    return Err(QueryError::type_mismatch(
                        "$listLocalSessions options must be specified in an object",
                    ))
                }
            };
            for (k, v) in &spec {
                match (k.as_str(), v) {
                    ("allUsers", Bson::Boolean(_)) | ("users", Bson::Array(_)) => {}
                    _ => {
                        return Err(QueryError::located(
                            40415,
                            format!("BSON field '$listLocalSessions.{k}' is an unknown field."),
                        ))
                    }
                }
            }
            // Without users every session belongs to the empty user; naming users selects
            // none of them.
            let named = matches!(spec.get("users"), Some(Bson::Array(a)) if !a.is_empty());
            if named {
                Vec::new()
            } else {
                s.sessions()
                    .list()
                    .into_iter()
                    .map(|(lsid, used)| {
                        let mut id = lsid;
                        id.insert(
                            "uid",
                            bson::Binary {
                                subtype: bson::spec::BinarySubtype::Generic,
                                bytes: NO_USER_UID.to_vec(),
                            },
                        );
                        doc! { "_id": id, "lastUse": bson::DateTime::from_system_time(used) }
                    })
                    .collect()
            }
        }
        _ => {
            return Err(QueryError::invalid_namespace(format!(
                "{{aggregate: 1}} is not valid for '{}'; a collection-less aggregate must begin \
                 with $documents, $currentOp or $listLocalSessions",
                first.as_deref().unwrap_or("an empty pipeline")
            )))
        }
    };
    let pipeline = silt_query::agg::parse_pipeline(stages)?;
    let ctx = DbContext {
        s,
        db,
        deadline: deadline(cmd)?,
        snap: op.snap.clone(),
    };
    let out = pipeline
        .run(Box::new(input.into_iter().map(Ok)), &ctx)
        .map_err(executor_error)?;
    let ns = format!("{db}.$cmd.aggregate");
    if let Some(w) = writer {
        w.write(s, op, out)?;
        return reply(s, op, &ns, &cursor_opts, Vec::new());
    }
    reply(s, op, &ns, &cursor_opts, out)
}

fn aggregate_collection(
    s: &Server,
    db: &str,
    ns: String,
    cmd: &Document,
    stages: Vec<Document>,
    op: &Ctx,
    writer: Option<super::agg_write::WriteStage>,
) -> CmdResult {
    let cursor_opts = cursor_arg(cmd)?;
    // A view: its pipeline over its source, the cursor under the view's name.
    let (coll, reply_ns) = match ns.split_once('.') {
        Some((_, c)) => (c.to_string(), ns.clone()),
        None => (ns.clone(), ns.clone()),
    };
    let (ns, stages) = match s.views().resolve(db, &coll)? {
        Some((source, mut pre)) => {
            pre.extend(stages);
            (format!("{db}.{source}"), pre)
        }
        None => (ns, stages),
    };
    let out = pipeline_docs(s, db, &ns, cmd, stages, op)?;
    if let Some(w) = writer {
        w.write(s, op, out)?;
        return reply(s, op, &reply_ns, &cursor_opts, Vec::new());
    }
    reply(s, op, &reply_ns, &cursor_opts, out)
}

/// The documents of a read of view `db.coll` through `stages` (after the view's own
/// pipeline): what `count` and `distinct` on a view read.
pub(super) fn view_docs(
    s: &Server,
    db: &str,
    coll: &str,
    cmd: &Document,
    stages: Vec<Document>,
    op: &Ctx,
) -> QResult<Vec<Document>> {
    let (source, mut all) = s
        .views()
        .resolve(db, coll)?
        .ok_or_else(|| QueryError::internal(format!("{db}.{coll} is not a view")))?;
    all.extend(stages);
    pipeline_docs(s, db, &format!("{db}.{source}"), cmd, all, op)
}

/// `$collStats.storageStats.scale`: a number of at least 1 (mongod's IDL words).
fn coll_stats_scale(ss: &Document) -> QResult<i64> {
    let scale = match ss.get("scale") {
        None | Some(Bson::Null) => return Ok(1),
        Some(v) => match silt_bson::compare::as_num(v) {
            Some(silt_bson::compare::Num::Int(n)) => n,
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a double scale saturates, as mongod reads it"
            )]
            Some(silt_bson::compare::Num::Float(f)) => f as i64,
            None => {
                return Err(super::common::wrong_number_type(
                    "$collStats.storageStats.scale",
                    v,
                ))
            }
        },
    };
    if scale < 1 {
        return Err(QueryError::located(
            51024,
            format!("BSON field 'scale' value must be >= 1, actual value '{scale}'"),
        ));
    }
    Ok(scale)
}

/// Run `stages` over collection `ns` (`hint` and `maxTimeMS` come from `cmd`).
fn pipeline_docs(
    s: &Server,
    db: &str,
    ns: &str,
    cmd: &Document,
    stages: Vec<Document>,
    op: &Ctx,
) -> QResult<Vec<Document>> {
    let ns = ns.to_string();
    if let Some(name) = stages
        .first()
        .and_then(|d| d.keys().next())
        .filter(|n| matches!(n.as_str(), "$documents" | "$listLocalSessions"))
    {
        return Err(QueryError::invalid_namespace(format!(
            "{name} must be run against a database with {{aggregate: 1}}, not a collection"
        )));
    }
    let dl = deadline(cmd)?;
    let first = stages.first().and_then(|d| d.keys().next().cloned());
    let (input_stages, input): (&[Document], Vec<Document>) =
        if first.as_deref() == Some("$collStats") {
            let spec = match stages[0].get("$collStats") {
                Some(Bson::Document(d)) => d.clone(),
                other => {
                    let shown = silt_query::expr::fmt_doc(
                        &doc! { "$collStats": other.cloned().unwrap_or(Bson::Null) },
                    );
                    return Err(QueryError::located(
                        5447000,
                        format!(
                            "$collStats must take a nested object but found: {}",
                            shown.trim_start_matches("{ ").trim_end_matches(" }")
                        ),
                    ));
                }
            };
            let mut d = doc! { "ns": &ns, "localTime": bson::DateTime::now() };
            if spec.contains_key("storageStats") {
                let scale = match spec.get_document("storageStats") {
                    Ok(ss) => coll_stats_scale(ss)?,
                    Err(_) => 1,
                };
                let stats = super::coll_stats::storage_stats(s, &ns, scale).map_err(|e| {
                    executor_error(e.context("Unable to retrieve storageStats in $collStats stage"))
                })?;
                d.insert("storageStats", stats);
            }
            if spec.contains_key("count") {
                let n = match s.store().get(&ns) {
                    Some(c) => c.count().map_err(coll_err)?,
                    None => {
                        return Err(QueryError::namespace_not_found(format!(
                            "Unable to retrieve count in $collStats stage: ns {ns} does not exist"
                        )))
                    }
                };
                d.insert("count", n as i64);
            }
            (&stages[1..], vec![d])
        } else if first.as_deref() == Some("$indexStats") {
            let spec = stages[0].get("$indexStats").cloned().unwrap_or(Bson::Null);
            (
                &stages[1..],
                super::index_stats::index_stats(s, &ns, &spec)?,
            )
        } else if first.as_deref() == Some("$planCacheStats") {
            // siltd chooses plans by a fixed rule and caches none: the cache is empty.
            match stages[0].get("$planCacheStats") {
                Some(Bson::Document(d)) if d.keys().all(|k| k == "allHosts") => {}
                _ => {
                    return Err(QueryError::failed_to_parse(
                        "$planCacheStats takes an object with at most 'allHosts'",
                    ))
                }
            }
            (&stages[1..], Vec::new())
        } else {
            (&stages[..], Vec::new())
        };
    let pipeline = silt_query::agg::parse_pipeline(input_stages)?;
    let ctx = DbContext {
        s,
        db,
        deadline: dl,
        snap: op.snap.clone(),
    };
    let out = if matches!(
        first.as_deref(),
        Some("$collStats" | "$indexStats" | "$planCacheStats")
    ) {
        pipeline
            .run(Box::new(input.into_iter().map(Ok)), &ctx)
            .map_err(executor_error)?
    } else {
        let filter = pipeline.leading_match().cloned().unwrap_or_default();
        let oplog = s
            .store()
            .oplog()
            .filter(|_| ns == silt_collection::oplog::OPLOG_NS);
        match s.store().get(&ns) {
            // The oplog: its entries, from the leading `$match`'s `ts` on (`oplog_source.rs`).
            None if let Some(log) = oplog => {
                let matcher = Arc::new(new_matcher(&filter)?);
                let mut src =
                    crate::oplog_source::OplogSource::new(log.clone(), &filter, matcher, false);
                let iter = std::iter::from_fn(move || {
                    crate::cursors::DocSource::next_doc(&mut src).transpose()
                });
                pipeline.run(Box::new(iter), &ctx).map_err(executor_error)?
            }
            Some(c) => {
                let matcher = Arc::new(new_matcher(&filter)?);
                match count_shape(&stages) {
                    // countDocuments, `$count`: answered inside the storage layer when it can
                    // be, of what the operation's snapshot (a transaction's) sees.
                    Some((id, field))
                        if cmd.get("hint").is_none()
                            && matcher.text().is_none()
                            && let Some(f) =
                                c.fast_count(&matcher, op.snap.as_ref()).map_err(coll_err)? =>
                    {
                        if f.n == 0 {
                            Vec::new()
                        } else {
                            // `$count` has no `_id`.
                            let mut d = match id {
                                Some(id) => doc! { "_id": id },
                                None => Document::new(),
                            };
                            // As `$sum` of int32s: an int32 while it fits.
                            match i32::try_from(f.n) {
                                Ok(n) => d.insert(field, n),
                                Err(_) => d.insert(field, f.n as i64),
                            };
                            vec![d]
                        }
                    }
                    _ => {
                        // The access path comes from the leading $match (index bounds or
                        // _id); the pipeline applies the full filter itself.
                        // A `$text` is bound to the text index on the pipeline's own matcher,
                        // and each document carries its score to `{$meta: "textScore"}`.
                        let text = pipeline.leading_matcher().filter(|m| m.text().is_some());
                        if text.is_none() && stages.iter().any(mentions_text_score) {
                            return Err(QueryError::located(
                                40218,
                                "query requires text score metadata, but it is not available",
                            ));
                        }
                        let planned = c.plan(
                            &filter,
                            text.unwrap_or(&matcher),
                            None,
                            cmd.get("hint"),
                            None,
                        )?;
                        let bound = text.and_then(|m| m.text()).and_then(|t| t.bound()).cloned();
                        let snap = op.snap(&c);
                        let mut src =
                            MatchSource::uncovered_at(c, &planned, None, read_stop(dl), snap);
                        let iter = std::iter::from_fn(move || {
                            src.next_doc().transpose().map(|r| {
                                r.map(|mut d| {
                                    if let Some(b) = &bound {
                                        let score = b.score(&d);
                                        d.insert(silt_query::text::SCORE_FIELD, score);
                                    }
                                    d
                                })
                            })
                        });
                        let mut out = pipeline.run(Box::new(iter), &ctx).map_err(executor_error)?;
                        for d in &mut out {
                            d.remove(silt_query::text::SCORE_FIELD);
                        }
                        out
                    }
                }
            }
            None => pipeline
                .run(Box::new(std::iter::empty()), &ctx)
                .map_err(executor_error)?,
        }
    };
    Ok(out)
}

/// `[{$match: F}?, {$group: {_id: <constant>, n: {$sum: 1}}}]`, the pipeline drivers send for
/// `countDocuments`, or `[{$match: F}?, {$count: "n"}]`: the constant `_id` (none for
/// `$count`) and the count field's name.
pub(super) fn count_shape(stages: &[Document]) -> Option<(Option<Bson>, String)> {
    let group = match stages {
        [m, g] if m.keys().next().map(String::as_str) == Some("$match") => g,
        [g] => g,
        _ => return None,
    };
    if group.len() == 1 {
        // `{$count: "n"}`, with a name `$count` itself accepts.
        if let Ok(name) = group.get_str("$count") {
            if !name.is_empty()
                && !name.starts_with('$')
                && !name.contains('.')
                && !name.contains('\0')
            {
                return Some((None, name.to_string()));
            }
        }
    }
    let spec = group.get_document("$group").ok()?;
    if group.len() != 1 || spec.len() != 2 {
        return None;
    }
    let id = spec.get("_id")?;
    if !matches!(
        id,
        Bson::Null | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::String(_)
    ) || matches!(id, Bson::String(s) if s.starts_with('$'))
    {
        return None;
    }
    let (field, acc) = spec.iter().find(|(k, _)| k.as_str() != "_id")?;
    let acc = acc.as_document()?;
    match acc.get("$sum")? {
        Bson::Int32(1) | Bson::Int64(1) if acc.len() == 1 => {
            Some((Some(id.clone()), field.clone()))
        }
        Bson::Double(d) if *d == 1.0 && acc.len() == 1 => Some((Some(id.clone()), field.clone())),
        _ => None,
    }
}

/// Does a stage read `{$meta: "textScore"}` anywhere?
fn mentions_text_score(d: &Document) -> bool {
    fn any(v: &Bson) -> bool {
        match v {
            Bson::Document(d) => mentions_text_score(d),
            Bson::Array(a) => a.iter().any(any),
            _ => false,
        }
    }
    d.get_str("$meta") == Ok("textScore") || d.values().any(any)
}
