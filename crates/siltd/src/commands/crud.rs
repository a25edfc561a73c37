//! Reads and writes: insert, find, getMore, killCursors, update, delete, findAndModify,
//! count, distinct, aggregate.

use std::collections::VecDeque;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, oid::ObjectId, Bson, Document};
use silt_bson::compare::values_equal;
use silt_collection::{CollError, Collection, DocLock, Index, MatchSource, Planned};
use silt_query::matcher::Matcher;
use silt_query::projection::Projection;
use silt_query::update::{UpdateCtx, UpdateSpec};
use silt_query::{QResult, QueryError};

use super::{bool_arg, coll_arg, cursor_reply, doc_arg, int_arg, type_name};
use crate::cursors::{DocSource, Shaped, VecSource};
use crate::ops::read_stop;
use crate::state::{coll_err, CmdResult, Server};
use silt_query::plan::{self, SortSpec};

/// The fields of one `update` statement siltd honours (`fastUpdate` is siltd's own).
const UPDATE_STATEMENT: &[&str] = &[
    "q",
    "u",
    "multi",
    "upsert",
    "arrayFilters",
    "hint",
    "fastUpdate",
];
/// MongoDB's update statement fields siltd does not implement.
const UPDATE_REFUSED: &[&str] = &[
    "c",
    "collation",
    "upsertSupplied",
    "sampleId",
    "sort",
    "$_allowShardKeyUpdatesWithoutFullShardKeyInQuery",
];
/// The fields of one `delete` statement siltd honours.
const DELETE_STATEMENT: &[&str] = &["q", "limit", "hint"];
/// MongoDB's delete statement fields siltd does not implement.
const DELETE_REFUSED: &[&str] = &["collation", "sampleId"];

/// Largest document accepted (MongoDB's 16 MiB).
const MAX_DOC: usize = 16 * 1024 * 1024;

pub(super) fn deadline(cmd: &Document) -> QResult<Option<Instant>> {
    Ok(match int_arg(cmd, "maxTimeMS")? {
        Some(ms) if ms < 0 => return Err(QueryError::bad_value("maxTimeMS must be non-negative")),
        Some(0) | None => None,
        Some(ms) => Some(Instant::now() + Duration::from_millis(ms as u64)),
    })
}

/// After writes: honour `writeConcern: {j: true}` (and `fsync: true`) by syncing the log.
fn write_concern(s: &Server, cmd: &Document) -> QResult<()> {
    if let Some(wc) = doc_arg(cmd, "writeConcern")? {
        let j = bool_arg(wc, "j")?.unwrap_or(false) || bool_arg(wc, "fsync")?.unwrap_or(false);
        if j {
            s.store
                .sync_log()
                .map_err(|e| QueryError::internal(e.to_string()))?;
        }
    }
    Ok(())
}

fn write_error(index: usize, e: &QueryError) -> Document {
    doc! { "index": index as i32, "code": e.code, "errmsg": e.msg.clone() }
}

/// A duplicate key: the index, its key pattern and the duplicate values.
struct DupKey {
    msg: String,
    key_pattern: Document,
    key_value: Document,
}

fn dup_write_error(index: usize, d: DupKey) -> Document {
    let e = QueryError::duplicate_key(d.msg);
    let mut w = write_error(index, &e);
    w.insert("keyPattern", d.key_pattern);
    w.insert("keyValue", d.key_value);
    w
}

fn doc_size(d: &Document) -> usize {
    let mut v = Vec::new();
    let _ = d.to_writer(&mut v);
    v.len()
}

/// Check a document for storage and give it an `_id` (first) if it has none.
pub fn prepare_insert(mut d: Document) -> QResult<Document> {
    for k in d.keys() {
        if k.starts_with('$') {
            return Err(QueryError::dollar_prefixed_field_name(format!(
                "Document can't have $ prefixed field names: {k}"
            )));
        }
    }
    match d.get("_id") {
        None => {
            let mut nd = Document::new();
            nd.insert("_id", ObjectId::new());
            nd.extend(d);
            d = nd;
        }
        Some(Bson::Array(_)) => return Err(QueryError::bad_value("can't use an array for _id")),
        Some(Bson::RegularExpression(_)) => {
            return Err(QueryError::bad_value("can't use a regex for _id"))
        }
        Some(Bson::Undefined) => {
            return Err(QueryError::bad_value("can't use a undefined for _id"))
        }
        Some(Bson::Document(sub)) if sub.keys().any(|k| k.starts_with('$')) => {
            return Err(QueryError::dollar_prefixed_field_name(
                "_id fields may not contain '$'-prefixed fields",
            ))
        }
        Some(_) => {
            if d.keys().next().map(String::as_str) != Some("_id") {
                // MongoDB stores _id first.
                let id = d.remove("_id").unwrap_or(Bson::Null);
                let mut nd = doc! { "_id": id };
                nd.extend(d);
                d = nd;
            }
        }
    }
    let n = doc_size(&d);
    if n > MAX_DOC {
        return Err(QueryError::bson_object_too_large(format!(
            "object to insert too large. size in bytes: {n}, max size: {MAX_DOC}"
        )));
    }
    Ok(d)
}

/// A failed write of one document: a duplicate key (reported with the key) or another error.
enum WriteFail {
    Dup(Box<DupKey>),
    Other(QueryError),
}

impl From<QueryError> for WriteFail {
    fn from(e: QueryError) -> Self {
        WriteFail::Other(e)
    }
}

impl From<CollError> for WriteFail {
    fn from(e: CollError) -> Self {
        match e {
            CollError::DuplicateKey {
                ref key_pattern,
                ref key_value,
                ..
            } => WriteFail::Dup(Box::new(DupKey {
                key_pattern: (**key_pattern).clone(),
                key_value: (**key_value).clone(),
                msg: e.to_string(),
            })),
            other => WriteFail::Other(coll_err(other)),
        }
    }
}

impl WriteFail {
    fn into_write_error(self, index: usize) -> Document {
        match self {
            WriteFail::Dup(d) => dup_write_error(index, *d),
            WriteFail::Other(e) => write_error(index, &e),
        }
    }
    fn into_error(self) -> QueryError {
        match self {
            WriteFail::Dup(d) => QueryError::duplicate_key(d.msg),
            WriteFail::Other(e) => e,
        }
    }
}

fn insert_one(coll: &Collection, d: &Document) -> Result<(), WriteFail> {
    coll.insert(d).map_err(WriteFail::from)
}

fn docs_arg<'a>(cmd: &'a Document, name: &str) -> QResult<Vec<&'a Document>> {
    let arr = match cmd.get(name) {
        Some(Bson::Array(a)) => a,
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{name}' is the wrong type '{}', expected type 'array'",
                type_name(other)
            )))
        }
        None => {
            return Err(QueryError::failed_to_parse(format!(
                "BSON field '{name}' is missing but a required field"
            )))
        }
    };
    if arr.is_empty() || arr.len() > silt_wire::MAX_WRITE_BATCH {
        return Err(QueryError::invalid_length(format!(
            "Write batch sizes must be between 1 and {}. Got {} operations.",
            silt_wire::MAX_WRITE_BATCH,
            arr.len()
        )));
    }
    arr.iter()
        .map(|v| match v {
            Bson::Document(d) => Ok(d),
            other => Err(QueryError::type_mismatch(format!(
                "BSON field '{name}' items must be objects, not '{}'",
                type_name(other)
            ))),
        })
        .collect()
}

pub fn insert(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "insert")?;
    let docs = docs_arg(cmd, "documents")?;
    let ordered = bool_arg(cmd, "ordered")?.unwrap_or(true);
    // Insert-or-ignore: documents whose `_id` exists are skipped without an error.
    let ignore_dups = bool_arg(cmd, "ignoreDuplicates")?.unwrap_or(false);
    let ns = format!("{db}.{coll}");
    let c = s.store.get_or_create(&ns).map_err(coll_err)?;
    if ignore_dups {
        // The fast path: one insert-if-absent message per document, no read. Taken only when
        // every document is valid and the collection has no secondary index; otherwise (or
        // if the engine refuses the batch, which then wrote nothing) each document is
        // inserted below and reported on its own.
        let all: Option<Vec<Document>> = docs
            .iter()
            .map(|d| prepare_insert((*d).clone()).ok())
            .collect();
        if let Some(all) = all {
            if let Ok(true) = c.insert_if_absent(&all) {
                s.ops
                    .insert
                    .fetch_add(all.len() as u64, AtomicOrdering::Relaxed);
                write_concern(s, cmd)?;
                return Ok(doc! {
                    "n": all.len() as i32,
                    "fastInserts": { "count": all.len() as i32, "countsAreUnknown": true },
                });
            }
        }
    }
    let mut n = 0i32;
    let mut errors = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        s.ops.insert.fetch_add(1, AtomicOrdering::Relaxed);
        let r = prepare_insert(d.clone())
            .map_err(WriteFail::Other)
            .and_then(|d| insert_one(&c, &d));
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
    write_concern(s, cmd)?;
    let mut r = doc! { "n": n };
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(r)
}

/// The parts of a query that shape its result.
struct Query {
    filter: Document,
    matcher: Arc<Matcher>,
    sort: Option<SortSpec>,
    skip: u64,
    limit: Option<u64>,
    projection: Option<Projection>,
    /// The projection as given (for explain).
    projection_spec: Option<Document>,
    deadline: Option<Instant>,
    hint: Option<Bson>,
}

impl Query {
    /// The plan for this query over `coll` (covered when an index holds all it reads).
    fn choose(&self, coll: &Collection) -> QResult<Planned> {
        let output = self
            .projection
            .as_ref()
            .and_then(Projection::included_paths);
        let needs = plan::needed_paths(&self.matcher, self.sort.as_ref(), output);
        coll.plan(
            &self.filter,
            &self.matcher,
            self.sort.as_ref(),
            self.hint.as_ref(),
            needs.as_deref(),
        )
    }
}

/// The hint's shape (whether it names an existing index is checked when planning).
fn check_hint(cmd: &Document) -> QResult<()> {
    match cmd.get("hint") {
        None | Some(Bson::Null) | Some(Bson::String(_)) | Some(Bson::Document(_)) => Ok(()),
        Some(_) => Err(QueryError::bad_value(
            "hint must be a string (an index name) or an object (a key pattern)",
        )),
    }
}

fn non_negative(cmd: &Document, name: &str) -> QResult<Option<u64>> {
    match int_arg(cmd, name)? {
        Some(v) if v < 0 => Err(QueryError::located(
            51024,
            format!("BSON field '{name}' value must be >= 0, actual value '{v}'"),
        )),
        Some(v) => Ok(Some(v as u64)),
        None => Ok(None),
    }
}

fn parse_query(cmd: &Document, filter_field: &str) -> QResult<Query> {
    let filter = doc_arg(cmd, filter_field)?.cloned().unwrap_or_default();
    let matcher = Arc::new(new_matcher(&filter)?);
    let sort = match doc_arg(cmd, "sort")? {
        Some(s) if !s.is_empty() => Some(SortSpec::parse(s)?),
        _ => None,
    };
    let projection_spec = doc_arg(cmd, "projection")?
        .filter(|p| !p.is_empty())
        .cloned();
    let projection = projection_spec.as_ref().map(Projection::new).transpose()?;
    check_hint(cmd)?;
    Ok(Query {
        filter,
        matcher,
        sort,
        skip: non_negative(cmd, "skip")?.unwrap_or(0),
        limit: non_negative(cmd, "limit")?.filter(|l| *l > 0),
        projection,
        projection_spec,
        deadline: deadline(cmd)?,
        hint: cmd
            .get("hint")
            .filter(|h| !matches!(h, Bson::Null))
            .cloned(),
    })
}

/// A stream of the query's results over `coll` (none if it does not exist).
fn run_query(coll: Option<Arc<Collection>>, q: Query) -> QResult<Box<dyn DocSource>> {
    let Some(coll) = coll else {
        return Ok(Box::new(VecSource(VecDeque::new())));
    };
    let planned = q.choose(&coll)?;
    let mut src = MatchSource::new(
        coll,
        &planned,
        Some(q.matcher.clone()),
        read_stop(q.deadline),
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

/// `explain` of a `find`: the chosen plan and, unless `verbosity` is `queryPlanner`, the
/// figures of running it.
pub fn explain(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let inner = doc_arg(cmd, "explain")?
        .ok_or_else(|| QueryError::failed_to_parse("explain needs a command document"))?;
    let verbosity = cmd.get_str("verbosity").unwrap_or("allPlansExecution");
    if !inner.contains_key("find") {
        return Err(QueryError::not_implemented(
            "siltd explains find commands only",
        ));
    }
    if let Some(find) = super::lookup("find") {
        super::args::check("find", find.fields, inner)?;
    }
    let coll = coll_arg(db, inner, "find")?;
    let ns = format!("{db}.{coll}");
    let q = parse_query(inner, "filter")?;
    let started = Instant::now();
    let c = s.store.get(&ns);
    let planned = match &c {
        Some(c) => q.choose(c)?,
        None => Planned::full_scan(),
    };
    let winning = planned.explain(&q.filter, q.sort.as_ref(), q.projection_spec.as_ref());
    let mut r = doc! {
        "explainVersion": "1",
        "queryPlanner": {
            "namespace": &ns,
            "indexFilterSet": false,
            "parsedQuery": q.filter.clone(),
            "winningPlan": winning.clone(),
            "rejectedPlans": [],
        },
    };
    if verbosity != "queryPlanner" {
        let (mut n, mut keys, mut docs) = (0u64, 0u64, 0u64);
        if let Some(c) = c {
            let mut src =
                MatchSource::new(c, &planned, Some(q.matcher.clone()), read_stop(q.deadline));
            let want = q.limit.map(|l| l + q.skip);
            let mut got = 0u64;
            while let Some((_, _)) = src.next_match().map_err(coll_err)? {
                got += 1;
                if (planned.sorted() || q.sort.is_none()) && want.is_some_and(|w| got >= w) {
                    break;
                }
            }
            let after_skip = got.saturating_sub(q.skip);
            n = q.limit.map_or(after_skip, |l| after_skip.min(l));
            keys = src.keys;
            docs = src.examined;
        }
        r.insert(
            "executionStats",
            doc! {
                "executionSuccess": true,
                "nReturned": n as i64,
                "executionTimeMillis": started.elapsed().as_millis() as i64,
                "totalKeysExamined": keys as i64,
                "totalDocsExamined": docs as i64,
                "executionStages": winning,
            },
        );
    }
    r.insert("command", inner.clone());
    r.insert(
        "serverInfo",
        doc! { "host": "siltd", "version": "7.0.0-silt" },
    );
    Ok(r)
}

fn batch_size_arg(cmd: &Document) -> QResult<Option<usize>> {
    Ok(non_negative(cmd, "batchSize")?.map(|b| b as usize))
}

pub fn find(s: &Server, db: &str, cmd: &Document) -> CmdResult {
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
    let src = run_query(s.store.get(&ns), q)?;
    let (docs, id) = s.cursors.first_batch(&ns, src, batch, single)?;
    Ok(cursor_reply(&ns, docs, id, true))
}

pub fn get_more(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let id = match cmd.get("getMore") {
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Int32(i)) => i64::from(*i),
        _ => {
            return Err(QueryError::type_mismatch(
                "BSON field 'getMore.getMore' is the wrong type, expected type 'long'",
            ))
        }
    };
    let coll = cmd.get_str("collection").map_err(|_| {
        QueryError::type_mismatch("BSON field 'getMore.collection' must be a string")
    })?;
    s.ops.getmore.fetch_add(1, AtomicOrdering::Relaxed);
    let ns = format!("{db}.{coll}");
    let (docs, id) = s.cursors.get_more(id, &ns, batch_size_arg(cmd)?)?;
    Ok(cursor_reply(&ns, docs, id, false))
}

pub fn kill_cursors(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let _ = coll_arg(db, cmd, "killCursors")?;
    let ids = cmd.get_array("cursors").map_err(|_| {
        QueryError::type_mismatch("BSON field 'killCursors.cursors' must be an array")
    })?;
    let (mut killed, mut missing) = (Vec::new(), Vec::new());
    for v in ids {
        let id = match v {
            Bson::Int64(i) => *i,
            Bson::Int32(i) => i64::from(*i),
            _ => return Err(QueryError::type_mismatch("cursor ids must be longs")),
        };
        if s.cursors.kill(id) {
            killed.push(id);
        } else {
            missing.push(id);
        }
    }
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": missing,
        "cursorsAlive": [],
        "cursorsUnknown": [],
    })
}

// ---- updates ----

/// The paths a fast update must not touch: every secondary index's key fields and the fields
/// its partial filter reads. `None` when no fast update may run at all: a clustering index
/// (its entries carry the whole document), a partial filter with operators at the top level,
/// or an upsert while a non-sparse or partial index exists (the new document would need
/// index entries, which a blind message cannot write).
fn fast_index_paths(indexes: &[Arc<Index>], upsert: bool) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for ix in indexes {
        let sp = &ix.spec;
        let on_id = sp
            .fields
            .iter()
            .any(|(f, _)| f == "_id" || f.starts_with("_id."));
        if sp.clustering || (upsert && (!sp.sparse || sp.partial.is_some() || on_id)) {
            return None;
        }
        out.extend(sp.fields.iter().map(|(f, _)| f.clone()));
        if let Some((pfe, _)) = &sp.partial {
            for k in pfe.keys() {
                if k.starts_with('$') {
                    return None;
                }
                out.push(k.clone());
            }
        }
    }
    Some(out)
}

/// The fast path through a secondary index (W1b): when one index's bounds answer the filter
/// exactly and the update touches no indexed field, read the matching `_id`s from the index
/// alone and inject one message per document, carrying the filter to re-check at apply time.
/// `Some(n)`: done, `n` documents were selected by the index. `None`: not eligible.
///
/// Each document's message is injected under the same collection guard that judged it
/// eligible ([`Collection::fast_update`]); if an index on an updated field appeared since the
/// scan, that document gets the normal read-modify-write instead.
fn fast_by_index(
    s: &Server,
    c: &Arc<Collection>,
    q: &Document,
    u: &Document,
    spec: &UpdateSpec,
    array_filters: Option<&[Document]>,
    multi: bool,
) -> Result<Option<u64>, WriteFail> {
    let eligible = |ixs: &[Arc<Index>]| {
        fast_index_paths(ixs, false).is_some_and(|p| crate::fast::update_is_eligible(spec, &p))
    };
    if !eligible(&c.indexes()) {
        return Ok(None);
    }
    let matcher = new_matcher(q)?;
    let Some(scan) = c.exact_scan(&matcher) else {
        return Ok(None);
    };
    s.fast
        .eligible_secondary
        .fetch_add(1, AtomicOrdering::Relaxed);
    let keys = scan
        .id_keys(if multi { None } else { Some(1) })
        .map_err(coll_err)?;
    let arg = crate::fast::message_arg(&Bson::Null, u, false, Some(q), array_filters)?;
    let now = bson::DateTime::now();
    let mut normal = UpdateResult::default();
    for key in &keys {
        let lock = c.lock_doc(key.clone());
        let fast = c
            .fast_update(&lock, eligible, false, crate::fast::FAST_UPDATE_FN, &arg)
            .map_err(|e| WriteFail::Other(coll_err(e)))?;
        if fast {
            s.fast
                .performed_secondary
                .fetch_add(1, AtomicOrdering::Relaxed);
        } else {
            update_locked(c, &lock, &matcher, spec, now, &mut normal)?;
        }
    }
    Ok(Some(keys.len() as u64))
}

/// A matcher that can evaluate `$expr`.
pub fn new_matcher(filter: &Document) -> QResult<Matcher> {
    Matcher::new_with_expr(filter, silt_query::expr::eval_expr)
}

/// The document an upsert starts from: the filter's equality predicates (`_id` among them).
fn upsert_seed(filter: &Document) -> QResult<Document> {
    fn add(seed: &mut Document, path: &str, v: &Bson) -> QResult<()> {
        let mut parts = path.split('.').peekable();
        let mut cur = seed;
        while let Some(p) = parts.next() {
            if parts.peek().is_none() {
                cur.insert(p, v.clone());
                return Ok(());
            }
            if !matches!(cur.get(p), Some(Bson::Document(_))) {
                cur.insert(p, Document::new());
            }
            cur = match cur.get_mut(p) {
                Some(Bson::Document(d)) => d,
                _ => return Err(QueryError::internal("upsert seed")),
            };
        }
        Ok(())
    }
    fn walk(seed: &mut Document, filter: &Document) -> QResult<()> {
        for (k, v) in filter {
            if k == "$and" {
                if let Bson::Array(a) = v {
                    for x in a {
                        if let Bson::Document(d) = x {
                            walk(seed, d)?;
                        }
                    }
                }
                continue;
            }
            if k.starts_with('$') {
                continue;
            }
            match v {
                Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                    if let Some(eq) = d.get("$eq") {
                        add(seed, k, eq)?;
                    } else if let Some(Bson::Array(a)) = d.get("$in") {
                        if a.len() == 1 {
                            add(seed, k, &a[0])?;
                        }
                    }
                }
                Bson::RegularExpression(_) => {}
                other => add(seed, k, other)?,
            }
        }
        Ok(())
    }
    let mut seed = Document::new();
    walk(&mut seed, filter)?;
    Ok(seed)
}

/// The keys of the documents a write selects: every match when `multi`, else the first match
/// (the first in `sort` order when one is given). They are chosen before anything is written
/// so that written documents are not met again.
fn select_keys(
    src: &mut MatchSource,
    sort: Option<&SortSpec>,
    multi: bool,
) -> QResult<Vec<Vec<u8>>> {
    if let (Some(sort), false) = (sort, multi) {
        let mut best: Option<(Vec<u8>, Document)> = None;
        while let Some((k, d)) = src.next_match().map_err(coll_err)? {
            if best
                .as_ref()
                .is_none_or(|(_, b)| sort.compare(&d, b) == std::cmp::Ordering::Less)
            {
                best = Some((k, d));
            }
        }
        return Ok(best.map(|(k, _)| k).into_iter().collect());
    }
    let mut keys = Vec::new();
    while let Some((k, _)) = src.next_match().map_err(coll_err)? {
        keys.push(k);
        if !multi {
            break;
        }
    }
    Ok(keys)
}

/// Outcome of one update statement.
#[derive(Default)]
struct UpdateResult {
    matched: u64,
    modified: u64,
    upserted: Option<Bson>,
    /// Applied as a fast update (counts are assumed, not known).
    fast: bool,
    /// The document before and after the last change (for findAndModify).
    before: Option<Document>,
    after: Option<Document>,
}

/// The normal read-modify-write of the document `lock` holds: re-read it under the lock
/// (another writer may have changed or removed it), re-check the filter, apply, write.
fn update_locked(
    coll: &Collection,
    lock: &DocLock<'_>,
    matcher: &Matcher,
    spec: &UpdateSpec,
    now: bson::DateTime,
    res: &mut UpdateResult,
) -> Result<(), WriteFail> {
    let Some(old) = lock.read().map_err(|e| WriteFail::Other(coll_err(e)))? else {
        return Ok(());
    };
    let (hit, positional) = matcher.matches_with_key(&old)?;
    if !hit {
        return Ok(());
    }
    res.matched += 1;
    if spec.uses_positional() && positional.is_none() {
        return Err(WriteFail::Other(QueryError::bad_value(
            "The positional operator did not find the match needed from the query.",
        )));
    }
    let ctx = UpdateCtx {
        is_insert: false,
        positional,
        ..UpdateCtx::new(now)
    };
    let (new, changed) = spec.apply(&old, &ctx)?;
    if changed {
        if doc_size(&new) > MAX_DOC {
            return Err(WriteFail::Other(QueryError::bson_object_too_large(
                "Resulting document after update is larger than 16777216",
            )));
        }
        coll.replace(lock, &old, &new).map_err(WriteFail::from)?;
        res.modified += 1;
    }
    res.before = Some(old);
    res.after = Some(new);
    Ok(())
}

/// Apply `spec` to the documents `q` selects (one unless `multi`).
#[allow(clippy::too_many_arguments)]
fn update_docs(
    s: &Server,
    ns: &str,
    filter: &Document,
    sort: Option<&SortSpec>,
    spec: &UpdateSpec,
    multi: bool,
    upsert: bool,
    hint: Option<&Bson>,
) -> Result<UpdateResult, WriteFail> {
    if multi && spec.is_replacement() {
        return Err(WriteFail::Other(QueryError::failed_to_parse(
            "multi update is not supported for replacement-style update",
        )));
    }
    let matcher = Arc::new(new_matcher(filter)?);
    let mut res = UpdateResult::default();
    let now = bson::DateTime::now();
    if let Some(coll) = s.store.get(ns) {
        // The keys to update, chosen first so that updated documents are not seen again.
        let planned = coll.plan(filter, &matcher, None, hint, None)?;
        let mut src = MatchSource::uncovered(
            coll.clone(),
            &planned,
            Some(matcher.clone()),
            read_stop(None),
        );
        let keys = select_keys(&mut src, sort, multi)?;
        for key in keys {
            let lock = coll.lock_doc(key);
            update_locked(&coll, &lock, &matcher, spec, now, &mut res)?;
        }
    }
    if res.matched == 0 && upsert {
        let seed = upsert_seed(filter)?;
        let ctx = UpdateCtx {
            is_insert: true,
            positional: None,
            ..UpdateCtx::new(now)
        };
        let new = if spec.is_replacement() {
            let (mut d, _) = spec.apply(&seed, &ctx)?;
            if let (Some(id), false) = (seed.get("_id"), d.contains_key("_id")) {
                d.insert("_id", id.clone());
            }
            d
        } else {
            spec.apply_to_new(seed, &ctx)?
        };
        let new = prepare_insert(new)?;
        let coll = s
            .store
            .get_or_create(ns)
            .map_err(|e| WriteFail::Other(coll_err(e)))?;
        insert_one(&coll, &new)?;
        res.upserted = new.get("_id").cloned();
        res.after = Some(new);
    }
    Ok(res)
}

fn update_spec(u: &Bson, array_filters: Option<&[Document]>) -> QResult<UpdateSpec> {
    match u {
        Bson::Document(d) => UpdateSpec::parse(d, array_filters),
        Bson::Array(_) => Err(QueryError::not_implemented(
            "pipeline-style updates are not supported yet",
        )),
        other => Err(QueryError::failed_to_parse(format!(
            "Update argument must be either an object or an array, not {}",
            type_name(other)
        ))),
    }
}

fn array_filters_arg(d: &Document) -> QResult<Option<Vec<Document>>> {
    match d.get("arrayFilters") {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Array(a)) => a
            .iter()
            .map(|x| match x {
                Bson::Document(f) => Ok(f.clone()),
                _ => Err(QueryError::type_mismatch("arrayFilters must be objects")),
            })
            .collect::<QResult<Vec<_>>>()
            .map(Some),
        Some(_) => Err(QueryError::type_mismatch("arrayFilters must be an array")),
    }
}

pub fn update(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "update")?;
    let stmts = docs_arg(cmd, "updates")?;
    for st in &stmts {
        super::args::check_statement("update.updates", UPDATE_STATEMENT, UPDATE_REFUSED, st)?;
    }
    let ordered = bool_arg(cmd, "ordered")?.unwrap_or(true);
    let ns = format!("{db}.{coll}");
    let (mut n, mut modified, mut fast) = (0i64, 0i64, 0i64);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    for (i, st) in stmts.iter().enumerate() {
        s.ops.update.fetch_add(1, AtomicOrdering::Relaxed);
        let r = (|| -> Result<UpdateResult, WriteFail> {
            let q = doc_arg(st, "q")?.cloned().unwrap_or_default();
            let u = st
                .get("u")
                .ok_or_else(|| QueryError::failed_to_parse("BSON field 'u' is missing"))?;
            let af = array_filters_arg(st)?;
            check_hint(st)?;
            let spec = update_spec(u, af.as_deref())?;
            let multi = bool_arg(st, "multi")?.unwrap_or(false);
            let upsert = bool_arg(st, "upsert")?.unwrap_or(false);
            let want_fast = match bool_arg(st, "fastUpdate")? {
                Some(b) => b,
                None => bool_arg(cmd, "fastUpdate")?
                    .unwrap_or_else(|| s.fast.enabled.load(AtomicOrdering::Relaxed)),
            };
            if let (Some(id), Bson::Document(u)) = (crate::fast::id_only_filter(&q), u) {
                // The collection decides eligibility against its current indexes and injects
                // under one guard, with the document's lock held first (the documented
                // order): a normal read-modify-write of this document then sees the message
                // or comes before it, never straddles it.
                let eligible = |ixs: &[Arc<Index>]| {
                    fast_index_paths(ixs, upsert)
                        .is_some_and(|p| crate::fast::update_is_eligible(&spec, &p))
                };
                let existing = s.store.get(&ns);
                let judged = match &existing {
                    Some(c) => eligible(&c.indexes()),
                    None => eligible(&[]),
                };
                if judged {
                    s.fast.eligible.fetch_add(1, AtomicOrdering::Relaxed);
                }
                if want_fast && judged {
                    let coll = match existing {
                        Some(c) => c,
                        None => s
                            .store
                            .get_or_create(&ns)
                            .map_err(|e| WriteFail::Other(coll_err(e)))?,
                    };
                    let arg = crate::fast::message_arg(id, u, upsert, None, af.as_deref())?;
                    let lock = coll.lock_doc(silt_collection::id_key(id));
                    // A fast upsert may create the document: the count is unknown until
                    // its message reaches a leaf.
                    let injected = coll
                        .fast_update(&lock, eligible, upsert, crate::fast::FAST_UPDATE_FN, &arg)
                        .map_err(|e| WriteFail::Other(coll_err(e)))?;
                    if injected {
                        s.fast.performed.fetch_add(1, AtomicOrdering::Relaxed);
                        return Ok(UpdateResult {
                            matched: 1,
                            modified: 1,
                            fast: true,
                            ..UpdateResult::default()
                        });
                    }
                }
            }
            if want_fast && !upsert && !q.is_empty() {
                if let (Some(c), Bson::Document(u)) = (s.store.get(&ns), u) {
                    if let Some(n) = fast_by_index(s, &c, &q, u, &spec, af.as_deref(), multi)? {
                        return Ok(UpdateResult {
                            matched: n,
                            modified: n,
                            fast: true,
                            ..UpdateResult::default()
                        });
                    }
                }
            }
            update_docs(s, &ns, &q, None, &spec, multi, upsert, st.get("hint"))
        })();
        match r {
            Ok(r) => {
                if let Some(id) = r.upserted {
                    n += 1;
                    upserted.push(doc! { "index": i as i32, "_id": id });
                } else {
                    n += r.matched as i64;
                    modified += r.modified as i64;
                    fast += i64::from(r.fast);
                }
            }
            Err(f) => {
                errors.push(f.into_write_error(i));
                if ordered {
                    break;
                }
            }
        }
    }
    write_concern(s, cmd)?;
    let mut r = doc! { "n": n as i32, "nModified": modified as i32 };
    if fast > 0 {
        r.insert(
            "fastUpdates",
            doc! { "count": fast as i32, "countsAreUnknown": true },
        );
    }
    if !upserted.is_empty() {
        r.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(r)
}

/// Delete what `filter` selects (at most one unless `multi`); returns the deleted documents.
fn delete_docs(
    s: &Server,
    ns: &str,
    filter: &Document,
    sort: Option<&SortSpec>,
    multi: bool,
    hint: Option<&Bson>,
) -> QResult<Vec<Document>> {
    let Some(coll) = s.store.get(ns) else {
        return Ok(Vec::new());
    };
    let matcher = Arc::new(new_matcher(filter)?);
    let planned = coll.plan(filter, &matcher, None, hint, None)?;
    let mut src = MatchSource::uncovered(
        coll.clone(),
        &planned,
        Some(matcher.clone()),
        read_stop(None),
    );
    let keys = select_keys(&mut src, sort, multi)?;
    let mut out = Vec::new();
    for key in keys {
        let lock = coll.lock_doc(key);
        let Some(old) = lock.read().map_err(coll_err)? else {
            continue;
        };
        if !matcher.matches(&old) {
            continue;
        }
        coll.delete(&lock, &old).map_err(coll_err)?;
        out.push(old);
    }
    Ok(out)
}

pub fn delete(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "delete")?;
    let stmts = docs_arg(cmd, "deletes")?;
    for st in &stmts {
        super::args::check_statement("delete.deletes", DELETE_STATEMENT, DELETE_REFUSED, st)?;
    }
    let ordered = bool_arg(cmd, "ordered")?.unwrap_or(true);
    let ns = format!("{db}.{coll}");
    let mut n = 0i64;
    let mut errors = Vec::new();
    for (i, st) in stmts.iter().enumerate() {
        s.ops.delete.fetch_add(1, AtomicOrdering::Relaxed);
        let r = (|| -> QResult<usize> {
            let q = doc_arg(st, "q")?.cloned().unwrap_or_default();
            let limit = int_arg(st, "limit")?.ok_or_else(|| {
                QueryError::failed_to_parse("BSON field 'delete.deletes.limit' is missing")
            })?;
            if limit != 0 && limit != 1 {
                return Err(QueryError::failed_to_parse(format!(
                    "The limit field in delete objects must be 0 or 1. Got {limit}"
                )));
            }
            check_hint(st)?;
            Ok(delete_docs(s, &ns, &q, None, limit == 0, st.get("hint"))?.len())
        })();
        match r {
            Ok(k) => n += k as i64,
            Err(e) => {
                errors.push(write_error(i, &e));
                if ordered {
                    break;
                }
            }
        }
    }
    write_concern(s, cmd)?;
    let mut r = doc! { "n": n as i32 };
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(r)
}

pub fn find_and_modify(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = if cmd.contains_key("findAndModify") {
        "findAndModify"
    } else {
        "findandmodify"
    };
    let coll = coll_arg(db, cmd, name)?;
    let ns = format!("{db}.{coll}");
    let query = doc_arg(cmd, "query")?.cloned().unwrap_or_default();
    let sort = match doc_arg(cmd, "sort")? {
        Some(sd) if !sd.is_empty() => Some(SortSpec::parse(sd)?),
        _ => None,
    };
    let remove = bool_arg(cmd, "remove")?.unwrap_or(false);
    let return_new = bool_arg(cmd, "new")?.unwrap_or(false);
    let upsert = bool_arg(cmd, "upsert")?.unwrap_or(false);
    let fields = match doc_arg(cmd, "fields")? {
        Some(f) if !f.is_empty() => Some(Projection::new(f)?),
        _ => None,
    };
    let update = cmd.get("update");
    let shape = |d: Option<Document>| -> QResult<Bson> {
        Ok(match (d, &fields) {
            (Some(d), Some(p)) => Bson::Document(p.apply(&d, None)?),
            (Some(d), None) => Bson::Document(d),
            (None, _) => Bson::Null,
        })
    };
    let reply = if remove {
        if update.is_some() {
            return Err(QueryError::failed_to_parse(
                "Cannot specify both an update and remove=true",
            ));
        }
        if upsert || return_new {
            return Err(QueryError::failed_to_parse(
                "Cannot specify either new=true or upsert=true with remove=true",
            ));
        }
        s.ops.delete.fetch_add(1, AtomicOrdering::Relaxed);
        let gone = delete_docs(s, &ns, &query, sort.as_ref(), false, cmd.get("hint"))?;
        let n = gone.len() as i32;
        doc! {
            "lastErrorObject": { "n": n },
            "value": shape(gone.into_iter().next())?,
        }
    } else {
        let Some(u) = update else {
            return Err(QueryError::failed_to_parse(
                "Either an update or remove=true must be specified",
            ));
        };
        s.ops.update.fetch_add(1, AtomicOrdering::Relaxed);
        let af = array_filters_arg(cmd)?;
        let spec = update_spec(u, af.as_deref())?;
        let r = update_docs(
            s,
            &ns,
            &query,
            sort.as_ref(),
            &spec,
            false,
            upsert,
            cmd.get("hint"),
        )
        .map_err(|f| f.into_error())?;
        let mut leo = doc! {
            "n": if r.matched > 0 || r.upserted.is_some() { 1 } else { 0 },
            "updatedExisting": r.matched > 0,
        };
        if let Some(id) = &r.upserted {
            leo.insert("upserted", id.clone());
        }
        let value = if return_new {
            r.after
        } else if r.upserted.is_some() {
            None
        } else {
            r.before
        };
        doc! { "lastErrorObject": leo, "value": shape(value)? }
    };
    write_concern(s, cmd)?;
    Ok(reply)
}

pub fn count(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "count")?;
    let ns = format!("{db}.{coll}");
    s.ops.query.fetch_add(1, AtomicOrdering::Relaxed);
    let filter = doc_arg(cmd, "query")?.cloned().unwrap_or_default();
    let skip = int_arg(cmd, "skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(QueryError::bad_value(
            "skip value is negative in count query",
        ));
    }
    let limit = int_arg(cmd, "limit")?.unwrap_or(0).unsigned_abs();
    check_hint(cmd)?;
    let Some(c) = s.store.get(&ns) else {
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
        c.fast_count(&matcher).map_err(coll_err)?
    };
    let total = if let Some(n) = fast {
        n
    } else {
        // Counted from index entries alone when an index holds the filter's fields.
        let needs = plan::needed_paths(&matcher, None, Some(Vec::new()));
        let planned = c.plan(&filter, &matcher, None, cmd.get("hint"), needs.as_deref())?;
        let mut src = MatchSource::new(c, &planned, Some(matcher), read_stop(deadline(cmd)?));
        let mut n = 0u64;
        while src.next_match().map_err(coll_err)?.is_some() {
            n += 1;
        }
        n
    };
    let mut n = total.saturating_sub(skip as u64);
    if limit > 0 {
        n = n.min(limit);
    }
    Ok(doc! { "n": n as i64 })
}

pub fn distinct(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "distinct")?;
    let ns = format!("{db}.{coll}");
    let key = match cmd.get("key") {
        Some(Bson::String(k)) => k.clone(),
        _ => {
            return Err(QueryError::type_mismatch(
                "BSON field 'distinct.key' is missing or not a string",
            ))
        }
    };
    let filter = doc_arg(cmd, "query")?.cloned().unwrap_or_default();
    let mut values: Vec<Bson> = Vec::new();
    if let Some(c) = s.store.get(&ns) {
        let matcher = Arc::new(new_matcher(&filter)?);
        // Read from index entries alone when an index holds the key and the filter's fields.
        let needs = plan::needed_paths(&matcher, None, Some(vec![key.clone()]));
        let planned = c.plan(&filter, &matcher, None, None, needs.as_deref())?;
        let mut src = MatchSource::new(c, &planned, Some(matcher), read_stop(deadline(cmd)?));
        while let Some(d) = src.next_doc()? {
            let mut found = Vec::new();
            distinct_values(
                &Bson::Document(d),
                &key.split('.').collect::<Vec<_>>(),
                &mut found,
            );
            for v in found {
                if !values.iter().any(|x| {
                    values_equal(x, &v) && silt_bson::type_rank(x) == silt_bson::type_rank(&v)
                }) {
                    values.push(v);
                }
            }
        }
    }
    values.sort_by(silt_bson::cmp_values);
    Ok(doc! { "values": values })
}

/// Values at `parts` with arrays unwound (one level at the leaf, every level on the way).
fn distinct_values(v: &Bson, parts: &[&str], out: &mut Vec<Bson>) {
    match (v, parts.first()) {
        (Bson::Array(a), _) => {
            for x in a {
                if parts.is_empty() {
                    out.push(x.clone());
                } else {
                    distinct_values(x, parts, out);
                }
            }
        }
        (other, None) => out.push(other.clone()),
        (Bson::Document(d), Some(p)) => {
            if let Some(x) = d.get(*p) {
                distinct_values(x, &parts[1..], out);
            }
        }
        _ => {}
    }
}
