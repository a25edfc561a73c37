//! Changing the documents a filter selects, shared by update, delete and findAndModify: the
//! keys are chosen first (so that a changed document is not met again), then each document is
//! re-read and re-checked under its lock and written.

use std::sync::Arc;

use bson::{Bson, Document};
use silt_collection::{Collection, DocLock, MatchSource};
use silt_query::agg::LetVars;
use silt_query::matcher::Matcher;
use silt_query::plan::SortSpec;
use silt_query::update::{UpdateCtx, UpdateSpec};
use silt_query::{QResult, QueryError};

use super::common::{new_matcher, type_name};
use super::write::{prepare_insert, WriteFail};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::ops::read_stop;
use crate::state::Server;

/// The document an upsert starts from: the filter's equality predicates (`_id` among them).
pub(super) fn upsert_seed(filter: &Document) -> QResult<Document> {
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
/// (the first in `sort` order when one is given); at most `cap` of them. They are chosen
/// before anything is written so that written documents are not met again.
#[allow(clippy::too_many_arguments)]
fn select_keys(
    op: &Ctx,
    coll: &Arc<Collection>,
    filter: &Document,
    matcher: &Arc<Matcher>,
    sort: Option<&SortSpec>,
    multi: bool,
    hint: Option<&Bson>,
    cap: usize,
) -> QResult<Vec<Vec<u8>>> {
    let planned = coll.plan(filter, matcher, None, hint, None)?;
    let src = &mut MatchSource::uncovered_at(
        coll.clone(),
        &planned,
        Some(matcher.clone()),
        read_stop(None),
        op.snap(coll),
    );
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
        if !multi || keys.len() >= cap {
            break;
        }
    }
    Ok(keys)
}

/// Outcome of one update statement.
#[derive(Default)]
pub(super) struct UpdateResult {
    pub(super) matched: u64,
    pub(super) modified: u64,
    pub(super) upserted: Option<Bson>,
    /// Applied as a fast update (counts are assumed, not known).
    pub(super) fast: bool,
    /// The document before and after the last change (for findAndModify).
    pub(super) before: Option<Document>,
    pub(super) after: Option<Document>,
}

/// The normal read-modify-write of the document `lock` holds: re-read it under the lock
/// (another writer may have changed or removed it), re-check the filter, apply, write.
pub(super) fn update_locked(
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
        if matches!(spec, UpdateSpec::Replacement(_)) {
            coll.replace(lock, &old, &new)
        } else {
            coll.update(lock, &old, &new)
        }
        .map_err(WriteFail::from)?;
        res.modified += 1;
    }
    res.before = Some(old);
    res.after = Some(new);
    Ok(())
}

/// Apply `spec` to the documents `q` selects (one unless `multi`).
#[allow(clippy::too_many_arguments)]
pub(super) fn update_docs(
    s: &Server,
    op: &Ctx,
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
    if let Some(coll) = s.store().get(ns) {
        // The keys to update, chosen first so that updated documents are not seen again.
        let keys = select_keys(op, &coll, filter, &matcher, sort, multi, hint, usize::MAX)?;
        for key in keys {
            let lock = op.lock_doc(&coll, key).map_err(WriteFail::from)?;
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
            .store()
            .get_or_create_for(ns, op.writer())
            .map_err(|e| WriteFail::Other(coll_err(e)))?;
        op.insert(&coll, &new).map_err(WriteFail::from)?;
        res.upserted = new.get("_id").cloned();
        res.after = Some(new);
    }
    Ok(res)
}

/// The update `u` of a statement: an update document or a pipeline (with the command's
/// `let` variables bound into it).
pub(super) fn update_spec(
    u: &Bson,
    array_filters: Option<&[Document]>,
    lets: &LetVars,
) -> QResult<UpdateSpec> {
    match u {
        Bson::Document(d) => UpdateSpec::parse(d, array_filters),
        Bson::Array(stages) => {
            let bound: Vec<Bson> = stages
                .iter()
                .map(|st| match st {
                    Bson::Document(d) => {
                        Bson::Document(lets.stages(std::slice::from_ref(d)).remove(0))
                    }
                    other => other.clone(),
                })
                .collect();
            UpdateSpec::parse_pipeline(&bound, array_filters)
        }
        other => Err(QueryError::failed_to_parse(format!(
            "Update argument must be either an object or an array, not {}",
            type_name(other)
        ))),
    }
}

pub(super) fn array_filters_arg(d: &Document) -> QResult<Option<Vec<Document>>> {
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

/// Documents a batched delete removes per commit (mongod's `batchedDeletesTargetBatchDocs`).
const DELETE_BATCH: usize = 10;

/// A multi-document delete on a replica set, as mongod 7 runs it (batched deletes): the
/// documents go in batches of [`DELETE_BATCH`], each batch one atomic commit logged as one
/// `applyOps` entry. A batch that meets a write conflict is retried, then deleted one by one.
fn delete_batched(
    s: &Server,
    coll: &Collection,
    matcher: &Matcher,
    keys: Vec<Vec<u8>>,
    op: &Ctx,
) -> QResult<Vec<Document>> {
    let mut out = Vec::new();
    for chunk in keys.chunks(DELETE_BATCH) {
        let mut done = None;
        for _ in 0..3 {
            match delete_batch(s, coll, matcher, chunk, op) {
                Ok(d) => {
                    done = Some(d);
                    break;
                }
                Err(silt_collection::CollError::WriteConflict(_)) => continue,
                Err(e) => return Err(coll_err(e)),
            }
        }
        match done {
            Some(d) => out.extend(d),
            None => {
                for key in chunk {
                    let lock = op.lock_doc(coll, key.clone()).map_err(coll_err)?;
                    let Some(old) = lock.read().map_err(coll_err)? else {
                        continue;
                    };
                    if matcher.matches(&old) {
                        coll.delete(&lock, &old).map_err(coll_err)?;
                        out.push(old);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// One batch of [`delete_batched`]: its documents deleted in one transaction.
fn delete_batch(
    s: &Server,
    coll: &Collection,
    matcher: &Matcher,
    keys: &[Vec<u8>],
    op: &Ctx,
) -> Result<Vec<Document>, silt_collection::CollError> {
    let store_txn = s.store().begin(
        silt_collection::TxnKind::Multi,
        silt_collection::NON_TXN_LOCK_WAIT,
    )?;
    let w = silt_collection::Writer::new(Some(&store_txn))
        .bypassing_validation(op.bypass_validation.get());
    let mut out = Vec::new();
    for key in keys {
        let lock = coll.lock_doc_as(key.clone(), w)?;
        let Some(old) = lock.read()? else { continue };
        if !matcher.matches(&old) {
            continue;
        }
        coll.delete(&lock, &old)?;
        out.push(old);
    }
    store_txn.commit(false)?;
    Ok(out)
}

/// Delete what `filter` selects (at most one unless `multi`); returns the deleted documents.
pub(super) fn delete_docs(
    s: &Server,
    op: &Ctx,
    ns: &str,
    filter: &Document,
    sort: Option<&SortSpec>,
    multi: bool,
    hint: Option<&Bson>,
) -> QResult<Vec<Document>> {
    delete_some(s, op, ns, filter, sort, multi, hint, usize::MAX)
}

/// [`delete_docs`] of at most `cap` documents (the TTL monitor's batches).
#[allow(clippy::too_many_arguments)]
pub(super) fn delete_some(
    s: &Server,
    op: &Ctx,
    ns: &str,
    filter: &Document,
    sort: Option<&SortSpec>,
    multi: bool,
    hint: Option<&Bson>,
    cap: usize,
) -> QResult<Vec<Document>> {
    let Some(coll) = s.store().get(ns) else {
        return Ok(Vec::new());
    };
    let matcher = Arc::new(new_matcher(filter)?);
    let keys = select_keys(op, &coll, filter, &matcher, sort, multi, hint, cap)?;
    if multi && op.txn.is_none() && s.store().oplog().is_some() && !coll.is_capped() {
        return delete_batched(s, &coll, &matcher, keys, op);
    }
    let mut out = Vec::new();
    for key in keys {
        let lock = op.lock_doc(&coll, key).map_err(coll_err)?;
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
