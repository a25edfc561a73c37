//! The `update` command, fast updates included (see `crate::fast`).

use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use silt_collection::{Collection, Index};
use silt_query::agg::LetVars;
use silt_query::collation::{has_string, Collation};
use silt_query::plan::SortSpec;
use silt_query::update::UpdateSpec;
use silt_query::QueryError;

use super::args;
use super::common::{bool_arg, check_hint, coll_arg, doc_arg, effective_collation, new_matcher};
use super::modify::{array_filters_arg, update_docs, update_locked, update_spec, UpdateResult};
use super::write::{docs_arg, WriteFail};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

/// The fields of one `update` statement siltd honours (`fastUpdate` is siltd's own).
const UPDATE_STATEMENT: &[&str] = &[
    "q",
    "u",
    "multi",
    "upsert",
    "arrayFilters",
    "hint",
    "fastUpdate",
    "c",
    "sort",
    "collation",
    // A sampled query's id (analyzeShardKey): it only records the query.
    "sampleId",
];

/// MongoDB's update statement fields siltd does not implement.
const UPDATE_REFUSED: &[&str] = &[
    "upsertSupplied",
    "$_allowShardKeyUpdatesWithoutFullShardKeyInQuery",
];

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
#[allow(clippy::too_many_arguments)]
fn fast_by_index(
    s: &Server,
    op: &Ctx,
    c: &Arc<Collection>,
    q: &Document,
    u: &Document,
    spec: &UpdateSpec,
    array_filters: Option<&[Document]>,
    multi: bool,
) -> Result<Option<u64>, WriteFail> {
    let judge = |ixs: &[Arc<Index>]| {
        fast_index_paths(ixs, false).is_some_and(|p| crate::fast::update_is_eligible(spec, &p))
    };
    let judged = c.indexes();
    if !judge(&judged) {
        return Ok(None);
    }
    // Under each document's guard: the same indexes as judged above are still eligible;
    // any other set (an index created or dropped since) is judged again.
    let same = |ixs: &[Arc<Index>]| {
        ixs.len() == judged.len() && ixs.iter().zip(&judged).all(|(a, b)| Arc::ptr_eq(a, b))
    };
    let eligible = |ixs: &[Arc<Index>]| same(ixs) || judge(ixs);
    let matcher = new_matcher(q)?;
    let Some(scan) = c.exact_scan(&matcher) else {
        return Ok(None);
    };
    s.fast()
        .eligible_secondary
        .fetch_add(1, AtomicOrdering::Relaxed);
    let keys = scan
        .id_keys(if multi { None } else { Some(1) })
        .map_err(coll_err)?;
    let arg = crate::fast::message_arg(&Bson::Null, u, false, Some(q), array_filters)?;
    let now = bson::DateTime::now();
    let mut normal = UpdateResult::default();
    for key in &keys {
        let lock = op.lock_doc(c, key.clone()).map_err(WriteFail::from)?;
        let fast = c
            .fast_update(
                &lock,
                eligible,
                false,
                crate::fast::FAST_UPDATE_KEEPING_FN,
                &arg,
            )
            .map_err(|e| WriteFail::Other(coll_err(e)))?;
        if fast {
            s.fast()
                .performed_secondary
                .fetch_add(1, AtomicOrdering::Relaxed);
        } else {
            update_locked(c, &lock, &matcher, spec, now, &mut normal)?;
        }
    }
    Ok(Some(keys.len() as u64))
}

pub(super) fn update(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "update")?;
    let stmts = docs_arg(cmd, "updates")?;
    for st in &stmts {
        args::check_statement("update.updates", UPDATE_STATEMENT, UPDATE_REFUSED, st)?;
    }
    let ordered = bool_arg(cmd, "ordered")?.unwrap_or(true);
    let ns = format!("{db}.{coll}");
    s.views().refuse_write(&ns)?;
    let now = bson::DateTime::now();
    let lets = LetVars::parse(cmd.get("let"), "update", now)?;
    let (mut n, mut modified, mut fast) = (0i64, 0i64, 0i64);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    for (i, st) in stmts.iter().enumerate() {
        s.ops().update.fetch_add(1, AtomicOrdering::Relaxed);
        let r = (|| -> Result<UpdateResult, WriteFail> {
            if let Some(e) = crate::repeated::update_error(op.repeated, i) {
                return Err(WriteFail::Other(e));
            }
            let collation = effective_collation(s, Some(&ns), st)?;
            let _collation = Collation::scope(collation.as_ref());
            let mut lets = lets.clone();
            lets.add(st.get("c"), "update.updates", "c", now)?;
            let q = lets.filter(&doc_arg(st, "q")?.cloned().unwrap_or_default());
            let u = st
                .get("u")
                .ok_or_else(|| QueryError::failed_to_parse("BSON field 'u' is missing"))?;
            let af = array_filters_arg(st)?;
            check_hint(st)?;
            let spec = update_spec(u, af.as_deref(), &lets)?;
            let multi = bool_arg(st, "multi")?.unwrap_or(false);
            // `sort` picks which document a single update changes (MongoDB 8.0).
            let sort = match doc_arg(st, "sort")? {
                Some(sd) if !sd.is_empty() => {
                    if multi {
                        return Err(WriteFail::Other(QueryError::failed_to_parse(
                            "Cannot specify sort with multi=true",
                        )));
                    }
                    Some(SortSpec::parse(sd)?)
                }
                _ => None,
            };
            let upsert = bool_arg(st, "upsert")?.unwrap_or(false);
            let want_fast = match bool_arg(st, "fastUpdate")? {
                Some(b) => b,
                None => bool_arg(cmd, "fastUpdate")?
                    .unwrap_or_else(|| s.fast().enabled.load(AtomicOrdering::Relaxed)),
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
                let existing = s.store().get(&ns);
                // A validator must see the new document, which a blind message never reads.
                let validated = existing.as_ref().is_some_and(|c| c.validator().is_some());
                // Under a collation, a string `_id` may match documents other than its own key.
                let collated = collation.is_some() && has_string(id);
                // A blind message cannot see the depth of the document it lands in: deep
                // update documents take the normal path, which checks it.
                let shallow = silt_collection::nesting_depth(u) <= 50;
                if want_fast
                    && !validated
                    && !collated
                    && shallow
                    && (existing.is_some() || eligible(&[]))
                {
                    let coll = match existing {
                        Some(c) => c,
                        None => s
                            .store()
                            .get_or_create_for(&ns, op.writer())
                            .map_err(|e| WriteFail::Other(coll_err(e)))?,
                    };
                    let arg = crate::fast::message_arg(id, u, upsert, None, af.as_deref())?;
                    let lock = op
                        .lock_doc(&coll, silt_collection::id_key(id))
                        .map_err(WriteFail::from)?;
                    // A fast upsert may create the document: the count is unknown until
                    // its message reaches a leaf.
                    let injected = coll
                        .fast_update(
                            &lock,
                            eligible,
                            upsert,
                            crate::fast::fast_update_fn(upsert),
                            &arg,
                        )
                        .map_err(|e| WriteFail::Other(coll_err(e)))?;
                    if injected {
                        s.fast().eligible.fetch_add(1, AtomicOrdering::Relaxed);
                        s.fast().performed.fetch_add(1, AtomicOrdering::Relaxed);
                        return Ok(UpdateResult {
                            matched: 1,
                            modified: 1,
                            fast: true,
                            ..UpdateResult::default()
                        });
                    }
                } else if existing
                    .as_ref()
                    .map_or_else(|| eligible(&[]), |c| eligible(&c.indexes()))
                {
                    s.fast().eligible.fetch_add(1, AtomicOrdering::Relaxed);
                }
            }
            // Not in a multi-document transaction: the index is read as of now, not at its
            // snapshot. (A retryable write's own transaction takes this path.)
            if want_fast && !upsert && !q.is_empty() && !op.multi() && sort.is_none() {
                if let (Some(c), Bson::Document(u)) =
                    (s.store().get(&ns).filter(|c| c.validator().is_none()), u)
                {
                    if let Some(n) = fast_by_index(s, op, &c, &q, u, &spec, af.as_deref(), multi)? {
                        return Ok(UpdateResult {
                            matched: n,
                            modified: n,
                            fast: true,
                            ..UpdateResult::default()
                        });
                    }
                }
            }
            update_docs(
                s,
                op,
                &ns,
                &q,
                sort.as_ref(),
                &spec,
                multi,
                upsert,
                st.get("hint"),
            )
        })();
        match r {
            Ok(r) => {
                if let Some(id) = r.upserted {
                    n += 1;
                    upserted.push(doc! { "index": crate::num::int32(i), "_id": id });
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
    let mut r = doc! { "n": crate::num::int32(n), "nModified": crate::num::int32(modified) };
    if fast > 0 {
        r.insert(
            "fastUpdates",
            doc! { "count": crate::num::int32(fast), "countsAreUnknown": true },
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
