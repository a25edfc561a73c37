//! Fast updates: `$`-operator updates by `_id` applied without reading the document.
//!
//! An eligible update becomes one engine update message (function [`FAST_UPDATE_FN`]) whose
//! argument carries the update document, the `_id`, whether to upsert, and the time the
//! server accepted it (so `$currentDate` is deterministic when the message is re-applied during
//! recovery). The engine applies it when a read meets it or when buffers flush to the leaf.
//!
//! Updates whose filter is answered exactly by one secondary index's bounds (no other
//! matching needed) take the same path per document: the `_id`s come from the index alone and
//! each message carries the filter, re-checked when it is applied (W1b of the workloads).
//!
//! Eligibility (all must hold): fast updates are on (server-wide `--fast-updates` /
//! `setParameter fastUpdates`, or `fastUpdate: true` on the command or statement, which also
//! turns them off per operation with `false`); the filter is exactly `{_id: <value>}` with a
//! plain value; the update uses `$` operators only, none positional (`$`), and modifies no
//! indexed field and not `_id`. Anything else takes the normal read-modify-write path.
//!
//! The reply cannot know whether the document exists: each fast statement is reported as
//! `n: 1, nModified: 1` (as TokuMX did), and the reply carries
//! `fastUpdates: {count: k, countsAreUnknown: true}` so clients can tell. An upsert on the fast
//! path reports no `upserted` entry for the same reason.
//!
//! An operator that fails when the message is applied (`$inc` on a string, a document grown past
//! 16 MiB) leaves the document unchanged; the failure is counted in
//! `serverStatus().metrics.fastUpdates.errors` and logged at most once every 5 seconds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bson::{doc, Bson, Document, RawBson, RawDocumentBuf};
use parking_lot::Mutex;
use silt_collection::{UpdateOutcome, UpdateRegistry};
use silt_query::update::{UpdateCtx, UpdateSpec};
use silt_query::QueryError;

/// The engine update-function id of fast updates that may create the document (upserts).
/// Stored in messages and log records: never reuse it for anything else.
pub(crate) const FAST_UPDATE_FN: u32 = 1;
/// The same function for fast updates that never create or remove the document (registered
/// as keeping, so their messages leave subtree counts exact while they wait).
pub(crate) const FAST_UPDATE_KEEPING_FN: u32 = 2;

/// The function id of a fast update, by whether it may create the document.
pub(crate) fn fast_update_fn(upsert: bool) -> u32 {
    if upsert {
        FAST_UPDATE_FN
    } else {
        FAST_UPDATE_KEEPING_FN
    }
}

/// Counters and the switch.
#[derive(Debug, Default)]
pub(crate) struct FastUpdates {
    pub enabled: AtomicBool,
    pub errors: AtomicU64,
    pub eligible: AtomicU64,
    pub performed: AtomicU64,
    pub eligible_secondary: AtomicU64,
    pub performed_secondary: AtomicU64,
    /// Test hook (`configureFailPoint siltFastUpdatePanic`): the update function panics.
    pub fail_panic: AtomicBool,
    last_log: Mutex<Option<Instant>>,
}

impl FastUpdates {
    pub(crate) fn metrics(&self) -> Document {
        doc! {
            "errors": self.errors.load(Ordering::Relaxed) as i64,
            "eligible": {
                "primaryKey": self.eligible.load(Ordering::Relaxed) as i64,
                "secondaryKey": self.eligible_secondary.load(Ordering::Relaxed) as i64,
            },
            "performed": {
                "primaryKey": self.performed.load(Ordering::Relaxed) as i64,
                "secondaryKey": self.performed_secondary.load(Ordering::Relaxed) as i64,
            },
        }
    }

    fn failed(&self, msg: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_log.lock();
        if last.is_none_or(|t| t.elapsed().as_secs() >= 5) {
            *last = Some(Instant::now());
            tracing::warn!(error = %msg, "a fast update failed when applied; the document is unchanged");
        }
    }
}

/// Register the fast-update function; `stats` receives its error counts.
pub(crate) fn register(reg: &mut UpdateRegistry, stats: Arc<FastUpdates>) {
    // A panicking update function leaves the document unchanged (the engine catches it) and
    // counts as a deferred failure.
    let on_panic = stats.clone();
    reg.on_panic(move |_func, msg| {
        on_panic.failed(&format!("the update function panicked: {msg}"))
    });
    let run = move |old: Option<&[u8]>, arg: &[u8]| {
        if stats.fail_panic.load(Ordering::Relaxed) {
            panic!("fail point siltFastUpdatePanic");
        }
        match apply(old, arg) {
            Ok(o) => o,
            Err(e) => {
                stats.failed(&e);
                UpdateOutcome::NoChange
            }
        }
    };
    let keeping = run.clone();
    reg.register(FAST_UPDATE_FN, move |_key, old, arg| run(old, arg));
    reg.register_keeping(FAST_UPDATE_KEEPING_FN, move |_key, old, arg| {
        keeping(old, arg)
    });
}

/// The message argument. `recheck` is a filter the document must still match when the
/// message is applied (updates selected through a secondary index carry their filter, so a
/// document changed in between is left alone).
pub(crate) fn message_arg(
    id: &Bson,
    update: &Document,
    upsert: bool,
    recheck: Option<&Document>,
    array_filters: Option<&[Document]>,
) -> Result<Vec<u8>, QueryError> {
    // Serialized straight from the caller's documents: no deep copy on the fast path.
    let bad = |e: &dyn std::fmt::Display| {
        QueryError::bad_value(format!("cannot encode the fast update: {e}"))
    };
    let raw = |d: &Document| RawDocumentBuf::from_document(d).map_err(|e| bad(&e));
    let mut d = RawDocumentBuf::new();
    d.append("id", RawBson::try_from(id.clone()).map_err(|e| bad(&e))?);
    d.append("u", raw(update)?);
    d.append("up", upsert);
    d.append("now", bson::DateTime::now());
    if let Some(q) = recheck {
        d.append("q", raw(q)?);
    }
    if let Some(af) = array_filters {
        let mut arr = bson::RawArrayBuf::new();
        for f in af {
            arr.push(raw(f)?);
        }
        d.append("af", arr);
    }
    Ok(d.into_bytes())
}

fn apply(old: Option<&[u8]>, arg: &[u8]) -> Result<UpdateOutcome, String> {
    let arg = Document::from_reader(arg).map_err(|e| format!("bad fast-update message: {e}"))?;
    let u = arg.get_document("u").map_err(|e| e.to_string())?;
    let af: Option<Vec<Document>> = match arg.get_array("af") {
        Ok(a) => Some(
            a.iter()
                .map(|f| {
                    f.as_document()
                        .cloned()
                        .ok_or("bad arrayFilters in the message")
                })
                .collect::<Result<_, _>>()?,
        ),
        Err(_) => None,
    };
    let spec = UpdateSpec::parse(u, af.as_deref()).map_err(|e| e.msg)?;
    let now = arg
        .get_datetime("now")
        .copied()
        .unwrap_or_else(|_| bson::DateTime::now());
    let new = match old {
        Some(bytes) => {
            let doc = Document::from_reader(bytes).map_err(|e| e.to_string())?;
            if let Ok(q) = arg.get_document("q") {
                let m = silt_query::matcher::Matcher::new_with_expr(q, silt_query::expr::eval_expr)
                    .map_err(|e| e.msg)?;
                if !m.matches(&doc) {
                    return Ok(UpdateOutcome::NoChange);
                }
            }
            let ctx = UpdateCtx {
                is_insert: false,
                ..UpdateCtx::new(now)
            };
            let (new, changed) = spec.apply(&doc, &ctx).map_err(|e| e.msg)?;
            if !changed {
                return Ok(UpdateOutcome::NoChange);
            }
            new
        }
        None if arg.get_bool("up").unwrap_or(false) => {
            let id = arg.get("id").cloned().unwrap_or(Bson::Null);
            let ctx = UpdateCtx {
                is_insert: true,
                ..UpdateCtx::new(now)
            };
            spec.apply_to_new(doc! { "_id": id }, &ctx)
                .map_err(|e| e.msg)?
        }
        None => return Ok(UpdateOutcome::NoChange),
    };
    let mut out = Vec::new();
    new.to_writer(&mut out).map_err(|e| e.to_string())?;
    if out.len() > silt_wire::MAX_BSON_OBJECT_BYTES {
        return Err(format!(
            "document would grow to {} bytes, over the 16 MiB limit",
            out.len()
        ));
    }
    Ok(UpdateOutcome::Set(out))
}

/// The `_id` of a filter that is exactly `{_id: <plain value>}`.
pub(crate) fn id_only_filter(filter: &Document) -> Option<&Bson> {
    if filter.len() != 1 {
        return None;
    }
    match filter.get("_id")? {
        Bson::Document(_)
        | Bson::Array(_)
        | Bson::RegularExpression(_)
        | Bson::Null
        | Bson::Undefined
        | Bson::MinKey
        | Bson::MaxKey => None,
        v => Some(v),
    }
}

/// Whether an operator update may take the fast path given the collection's indexed paths.
pub(crate) fn update_is_eligible(spec: &UpdateSpec, indexed: &[String]) -> bool {
    if spec.is_replacement() || spec.uses_positional() {
        return false;
    }
    // `a` touches `b` when one is the other or a path inside it.
    fn inside(p: &str, f: &str) -> bool {
        p.len() > f.len() && p.starts_with(f) && p.as_bytes()[f.len()] == b'.'
    }
    let touches = |p: &str, f: &str| p == f || inside(p, f) || inside(f, p);
    spec.touched_paths()
        .iter()
        .all(|p| !touches(p, "_id") && !indexed.iter().any(|f| touches(p, f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(old: Option<Document>, u: Document, upsert: bool) -> UpdateOutcome {
        let stats = Arc::new(FastUpdates::default());
        let mut reg = UpdateRegistry::new();
        register(&mut reg, stats);
        let arg = message_arg(&Bson::Int32(7), &u, upsert, None, None).unwrap();
        let old = old.map(|d| {
            let mut v = Vec::new();
            d.to_writer(&mut v).unwrap();
            v
        });
        apply(old.as_deref(), &arg).unwrap_or(UpdateOutcome::NoChange)
    }

    fn doc_of(o: UpdateOutcome) -> Document {
        match o {
            UpdateOutcome::Set(v) => Document::from_reader(&v[..]).unwrap(),
            other => panic!("expected a new value, got {other:?}"),
        }
    }

    #[test]
    fn applies_upserts_and_fails_safely() {
        let d = doc_of(run(
            Some(doc! {"_id": 7, "n": 1}),
            doc! {"$inc": {"n": 2}},
            false,
        ));
        assert_eq!(d, doc! {"_id": 7, "n": 3});
        assert_eq!(
            run(None, doc! {"$inc": {"n": 2}}, false),
            UpdateOutcome::NoChange
        );
        let d = doc_of(run(
            None,
            doc! {"$inc": {"n": 2}, "$setOnInsert": {"s": "new"}},
            true,
        ));
        assert_eq!(d, doc! {"_id": 7, "n": 2, "s": "new"});
        // $inc on a string: the document stays as it was.
        assert_eq!(
            run(
                Some(doc! {"_id": 7, "n": "x"}),
                doc! {"$inc": {"n": 1}},
                false
            ),
            UpdateOutcome::NoChange
        );
    }

    #[test]
    fn eligibility() {
        let spec = |u: Document| UpdateSpec::parse(&u, None).unwrap();
        assert!(update_is_eligible(
            &spec(doc! {"$inc": {"c": 1}}),
            &["k".into()]
        ));
        assert!(!update_is_eligible(
            &spec(doc! {"$inc": {"k": 1}}),
            &["k".into()]
        ));
        assert!(!update_is_eligible(
            &spec(doc! {"$set": {"k.x": 1}}),
            &["k".into()]
        ));
        assert!(!update_is_eligible(
            &spec(doc! {"$set": {"a": 1}}),
            &["a.b".into()]
        ));
        assert!(!update_is_eligible(&spec(doc! {"x": 1}), &[]));
        assert!(!update_is_eligible(&spec(doc! {"$set": {"_id": 1}}), &[]));
        assert!(id_only_filter(&doc! {"_id": 5}).is_some());
        assert!(id_only_filter(&doc! {"_id": {"$gt": 5}}).is_none());
        assert!(id_only_filter(&doc! {"_id": 5, "x": 1}).is_none());
    }
}
