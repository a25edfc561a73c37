//! The writing stages of an aggregation, `$out` and `$merge`: parsed here (they must be the
//! last stage) and applied to the pipeline's output by the `aggregate` command.
//!
//! `$out` builds the new contents aside, in `<db>.tmp.agg_out.<n>` with the target's options
//! and indexes, and then renames it over the target in one catalog write
//! (`Store::rename` with `dropTarget`): a reader sees the old target or the new one, and a
//! pipeline or an insert that fails leaves the old target as it was. Leftover temporary
//! collections (a crash mid-build) are dropped when the server starts.
//!
//! `$merge` writes each output document into the target through the normal write path:
//! matched on its `on` fields (backed by a unique index, as MongoDB requires), then
//! replaced, kept, merged, refused or updated by a pipeline (`whenMatched`), or inserted,
//! discarded or refused when nothing matches (`whenNotMatched`).

use std::sync::atomic::{AtomicU64, Ordering};

use bson::{doc, Bson, Document};
use silt_query::agg::LetVars;
use silt_query::update::UpdateSpec;
use silt_query::{QResult, QueryError};

use super::modify::update_docs;
use super::write::prepare_insert;
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::Server;

/// The prefix of `$out`'s temporary collections (after `<db>.`).
pub(super) const TMP_PREFIX: &str = "tmp.agg_out.";

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A writing last stage.
#[derive(Debug)]
pub(super) enum WriteStage {
    Out { db: String, coll: String },
    Merge(Box<Merge>),
}

#[derive(Debug)]
pub(super) struct Merge {
    db: String,
    coll: String,
    on: Vec<String>,
    matched: WhenMatched,
    not_matched: WhenNotMatched,
    /// `$merge`'s `let` (expressions over the source document); `new` is `$$ROOT` by default.
    lets: Vec<(String, Bson)>,
}

#[derive(Debug)]
enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    Pipeline(Vec<Document>),
}

#[derive(Debug, PartialEq)]
enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

/// Split a pipeline's writing last stage off. A `$out` or `$merge` anywhere else is refused as
/// MongoDB refuses it.
pub(super) fn split(stages: &mut Vec<Document>, db: &str) -> QResult<Option<WriteStage>> {
    let n = stages.len();
    for (i, st) in stages.iter().enumerate() {
        let Some(name) = st.keys().next() else {
            continue;
        };
        if (name == "$out" || name == "$merge") && i + 1 != n {
            return Err(QueryError::located(
                40601,
                format!("{name} can only be the final stage in the pipeline"),
            ));
        }
    }
    let Some(last) = stages.last() else {
        return Ok(None);
    };
    let stage = match last.iter().next() {
        Some((name, spec)) if name == "$out" => parse_out(spec, db)?,
        Some((name, spec)) if name == "$merge" => parse_merge(spec, db)?,
        _ => return Ok(None),
    };
    stages.pop();
    Ok(Some(stage))
}

fn ns_of(spec: &Bson, db: &str, stage: &str, coll_field: &str) -> QResult<(String, String)> {
    let (tdb, tcoll) = match spec {
        Bson::String(c) => (db.to_string(), c.clone()),
        Bson::Document(d) => {
            let mut tdb = db.to_string();
            let mut tcoll = None;
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("db", Bson::String(s)) => tdb = s.clone(),
                    (f, Bson::String(s)) if f == coll_field => tcoll = Some(s.clone()),
                    ("timeseries", _) if stage == "$out" => {
                        return Err(QueryError::not_implemented(
                            "$out to a time-series collection is not supported by siltd",
                        ))
                    }
                    _ if k == "db" || k == coll_field => {
                        return Err(QueryError::type_mismatch(format!(
                            "BSON field '{stage}.{k}' is the wrong type '{}', expected type \
                             'string'",
                            silt_query::expr::type_name(Some(v))
                        )))
                    }
                    _ => {
                        return Err(QueryError::located(
                            40415,
                            format!("BSON field '{stage}.{k}' is an unknown field."),
                        ))
                    }
                }
            }
            let tcoll = tcoll.ok_or_else(|| {
                QueryError::located(
                    40414,
                    format!("BSON field '{stage}.{coll_field}' is missing but a required field"),
                )
            })?;
            (tdb, tcoll)
        }
        other => {
            return Err(QueryError::located(
                if stage == "$out" { 16990 } else { 51178 },
                format!(
                    "{stage} only supports a string or object argument, not {}",
                    silt_query::expr::type_name(Some(other))
                ),
            ))
        }
    };
    crate::errors::check_db_name(&tdb, None)?;
    crate::errors::check_coll_name(&tdb, &tcoll)?;
    if tcoll.starts_with("system.") {
        return Err(QueryError::invalid_namespace(format!(
            "Invalid {stage} target namespace, {tdb}.{tcoll}"
        )));
    }
    Ok((tdb, tcoll))
}

fn parse_out(spec: &Bson, db: &str) -> QResult<WriteStage> {
    let (db, coll) = ns_of(spec, db, "$out", "coll")?;
    Ok(WriteStage::Out { db, coll })
}

fn parse_merge(spec: &Bson, db: &str) -> QResult<WriteStage> {
    let d = match spec {
        Bson::String(_) => doc! { "into": spec.clone() },
        Bson::Document(d) => d.clone(),
        other => {
            return Err(QueryError::located(
                51182,
                format!(
                    "$merge only supports a string or object argument, not {}",
                    silt_query::expr::type_name(Some(other))
                ),
            ))
        }
    };
    let mut into = None;
    let mut on = vec!["_id".to_string()];
    let mut matched = WhenMatched::Merge;
    let mut not_matched = WhenNotMatched::Insert;
    let mut lets = None;
    for (k, v) in &d {
        match k.as_str() {
            "into" => into = Some(ns_of(v, db, "$merge.into", "coll")?),
            "on" => {
                on =
                    match v {
                        Bson::String(s) => vec![s.clone()],
                        Bson::Array(a) if !a.is_empty() => a
                            .iter()
                            .map(|x| match x {
                                Bson::String(s) => Ok(s.clone()),
                                _ => Err(QueryError::located(
                                    51134,
                                    "$merge 'on' array elements must be strings",
                                )),
                            })
                            .collect::<QResult<_>>()?,
                        Bson::Array(_) => return Err(QueryError::located(
                            51187,
                            "If explicitly specifying $merge 'on', must include at least one field",
                        )),
                        _ => {
                            return Err(QueryError::located(
                                51186,
                                "$merge 'on' field  must be either a string or an array of strings",
                            ))
                        }
                    }
            }
            "whenMatched" => {
                matched = match v {
                    Bson::String(s) => match s.as_str() {
                        "replace" => WhenMatched::Replace,
                        "keepExisting" => WhenMatched::KeepExisting,
                        "merge" => WhenMatched::Merge,
                        "fail" => WhenMatched::Fail,
                        other => {
                            return Err(QueryError::bad_value(format!(
                                "Enumeration value '{other}' for field 'whenMatched' is not a \
                                 valid value."
                            )))
                        }
                    },
                    Bson::Array(a) => WhenMatched::Pipeline(
                        a.iter()
                            .map(|x| match x {
                                Bson::Document(d) => Ok(d.clone()),
                                _ => Err(QueryError::type_mismatch(
                                    "Each element of the 'whenMatched' pipeline must be an \
                                     object",
                                )),
                            })
                            .collect::<QResult<_>>()?,
                    ),
                    _ => {
                        return Err(QueryError::located(
                            51191,
                            "$merge 'whenMatched' field must be either a string or an array",
                        ))
                    }
                }
            }
            "whenNotMatched" => {
                not_matched = match v {
                    Bson::String(s) if s == "insert" => WhenNotMatched::Insert,
                    Bson::String(s) if s == "discard" => WhenNotMatched::Discard,
                    Bson::String(s) if s == "fail" => WhenNotMatched::Fail,
                    Bson::String(other) => {
                        return Err(QueryError::bad_value(format!(
                            "Enumeration value '{other}' for field 'whenNotMatched' is not a \
                             valid value."
                        )))
                    }
                    other => {
                        return Err(QueryError::type_mismatch(format!(
                            "BSON field '$merge.whenNotMatched' is the wrong type '{}', \
                             expected type 'string'",
                            silt_query::expr::type_name(Some(other))
                        )))
                    }
                }
            }
            "let" => match v {
                Bson::Document(l) => {
                    lets = Some(l.iter().map(|(n, e)| (n.clone(), e.clone())).collect())
                }
                Bson::Null => {}
                other => {
                    return Err(QueryError::type_mismatch(format!(
                        "BSON field '$merge.let' is the wrong type '{}', expected type 'object'",
                        silt_query::expr::type_name(Some(other))
                    )))
                }
            },
            other => {
                return Err(QueryError::located(
                    40415,
                    format!("BSON field '$merge.{other}' is an unknown field."),
                ))
            }
        }
    }
    let (db, coll) = into.ok_or_else(|| {
        QueryError::located(
            40414,
            "BSON field '$merge.into' is missing but a required field",
        )
    })?;
    if lets.is_some() && !matches!(matched, WhenMatched::Pipeline(_)) {
        return Err(QueryError::located(
            51199,
            "Cannot use 'let' variables with 'whenMatched: <string>' mode",
        ));
    }
    let mut lets: Vec<(String, Bson)> = lets.unwrap_or_default();
    if !lets.iter().any(|(n, _)| n == "new") {
        lets.push(("new".into(), Bson::String("$$ROOT".into())));
    }
    if let WhenMatched::Pipeline(p) = &matched {
        // Parse once with placeholder values, so a bad pipeline fails before any write.
        let placeholders = LetVars::parse(
            Some(&Bson::Document(
                lets.iter().map(|(n, _)| (n.clone(), Bson::Null)).collect(),
            )),
            "$merge",
            bson::DateTime::now(),
        )?;
        let bound: Vec<Bson> = placeholders
            .stages(p)
            .into_iter()
            .map(Bson::Document)
            .collect();
        UpdateSpec::parse_pipeline(&bound, None)?;
    }
    Ok(WriteStage::Merge(Box::new(Merge {
        db,
        coll,
        on,
        matched,
        not_matched,
        lets,
    })))
}

impl WriteStage {
    /// Write `docs` (the pipeline's output) where the stage says.
    pub(super) fn write(&self, s: &Server, op: &Ctx, docs: Vec<Document>) -> QResult<()> {
        if op.multi() {
            let name = match self {
                WriteStage::Out { .. } => "$out",
                WriteStage::Merge(_) => "$merge",
            };
            return Err(QueryError::coded(
                263,
                "OperationNotSupportedInTransaction",
                format!("{name} cannot be used in a transaction"),
            ));
        }
        let target = match self {
            WriteStage::Out { db, coll } => format!("{db}.{coll}"),
            WriteStage::Merge(m) => format!("{}.{}", m.db, m.coll),
        };
        s.views().refuse_write(&target)?;
        match self {
            WriteStage::Out { db, coll } => out(s, op, db, coll, docs),
            WriteStage::Merge(m) => m.write(s, op, docs),
        }
    }
}

/// `$out`: build aside, then rename over the target.
fn out(s: &Server, op: &Ctx, db: &str, coll: &str, docs: Vec<Document>) -> QResult<()> {
    let target = format!("{db}.{coll}");
    let tmp = format!(
        "{db}.{TMP_PREFIX}{}.{}",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let existing = s.store().get(&target);
    let options = existing.as_ref().map(|c| c.options()).unwrap_or_default();
    let result = (|| -> QResult<()> {
        let t = s.store().create(&tmp, options).map_err(coll_err)?;
        if let Some(c) = &existing {
            let keep: Vec<silt_collection::IndexSpec> = c
                .indexes()
                .iter()
                .filter(|ix| !t.indexes().iter().any(|x| x.name() == ix.name()))
                .map(|ix| ix.spec.clone())
                .collect();
            if !keep.is_empty() {
                s.store().create_indexes(&tmp, keep).map_err(coll_err)?;
            }
        }
        let t = s
            .store()
            .get(&tmp)
            .ok_or_else(|| QueryError::internal("the $out temporary collection vanished"))?;
        for d in docs {
            let d = prepare_insert(d)?;
            op.insert(&t, &d).map_err(coll_err)?;
        }
        s.rename_collection(&tmp, &target, true).map_err(coll_err)
    })();
    if result.is_err() {
        let _ = s.store().drop_collection(&tmp);
    }
    result
}

impl Merge {
    fn write(&self, s: &Server, op: &Ctx, docs: Vec<Document>) -> QResult<()> {
        let ns = format!("{}.{}", self.db, self.coll);
        let target = s.store().get(&ns);
        // The unique index that backs `on`: its name and key pattern name a duplicate.
        let backing: (String, Document) = if self.on == ["_id"] {
            ("_id_".into(), doc! { "_id": 1 })
        } else {
            let found = target.as_ref().and_then(|c| {
                c.indexes().iter().find_map(|ix| {
                    let sp = &ix.spec;
                    (sp.unique
                        && sp.partial.is_none()
                        && sp.fields.len() == self.on.len()
                        && sp.fields.iter().all(|(f, _)| self.on.contains(f)))
                    .then(|| (sp.name.clone(), sp.key_pattern.clone()))
                })
            });
            match found {
                Some(b) => b,
                None => {
                    return Err(QueryError::located(
                        51183,
                        "Cannot find index to verify that join fields will be unique",
                    ))
                }
            }
        };
        let now = bson::DateTime::now();
        for d in docs {
            let mut d = d;
            if self.on == ["_id"] && !d.contains_key("_id") {
                d = prepare_insert(d)?;
            }
            let mut filter = Document::new();
            for f in &self.on {
                match silt_bson::path::get_path(&d, f) {
                    Some(Bson::Array(_)) => {
                        return Err(QueryError::located(
                            51185,
                            format!(
                                "$merge write error: 'on' field '{f}' is an array in the document \
                                 '{}'",
                                silt_query::expr::fmt_doc(&d)
                            ),
                        ))
                    }
                    Some(Bson::Null | Bson::Undefined) | None => {
                        return Err(QueryError::located(
                            51132,
                            format!(
                                "$merge write error: 'on' field '{f}' cannot be missing, null, \
                                 undefined or an array"
                            ),
                        ))
                    }
                    Some(v) => {
                        filter.insert(f.clone(), doc! { "$eq": v.clone() });
                    }
                }
            }
            let spec = self.spec_for(&d, now)?;
            let r = update_docs(s, op, &ns, &filter, None, &spec, false, false, None)
                .map_err(|f| f.into_error())?;
            if r.matched > 0 {
                if matches!(self.matched, WhenMatched::Fail) {
                    // mongod inserts and its unique index refuses the document: its error.
                    let (name, pattern) = &backing;
                    let mut value = Document::new();
                    for f in pattern.keys() {
                        let v = silt_bson::path::get_path(&d, f)
                            .cloned()
                            .unwrap_or(Bson::Null);
                        value.insert(f.clone(), v);
                    }
                    return Err(QueryError::duplicate_key(format!(
                        "E11000 duplicate key error collection: {ns} index: {name} dup key: {}",
                        silt_query::expr::fmt_doc(&value)
                    ))
                    .with_info(doc! { "keyPattern": pattern.clone(), "keyValue": value }));
                }
                continue;
            }
            match self.not_matched {
                WhenNotMatched::Discard => {}
                WhenNotMatched::Fail => {
                    return Err(QueryError::located(
                        13113,
                        "$merge could not find a matching document in the target collection \
                         for at least one document in the source collection",
                    ))
                }
                WhenNotMatched::Insert => {
                    let d = prepare_insert(d)?;
                    let c = s.store().get_or_create(&ns).map_err(coll_err)?;
                    op.insert(&c, &d).map_err(coll_err)?;
                }
            }
        }
        Ok(())
    }

    /// What happens to a matched document, as an update.
    fn spec_for(&self, src: &Document, now: bson::DateTime) -> QResult<UpdateSpec> {
        Ok(match &self.matched {
            // Matched but untouched: an empty pipeline changes nothing.
            WhenMatched::KeepExisting | WhenMatched::Fail => UpdateSpec::parse_pipeline(&[], None)?,
            WhenMatched::Replace => {
                if src.keys().any(|k| k.starts_with('$')) {
                    return Err(QueryError::dollar_prefixed_field_name(
                        "$merge cannot replace with a document that has $-prefixed fields",
                    ));
                }
                UpdateSpec::Replacement(src.clone())
            }
            WhenMatched::Merge => UpdateSpec::parse_pipeline(
                &[Bson::Document(doc! {
                    "$replaceWith": { "$mergeObjects": ["$$ROOT", { "$literal": src.clone() }] }
                })],
                None,
            )?,
            WhenMatched::Pipeline(p) => {
                // The variables are evaluated against the source document.
                let mut values = Document::new();
                for (name, e) in &self.lets {
                    let v = silt_query::expr::Expr::parse(e)?
                        .evaluate(src, &silt_query::expr::Vars::new())?;
                    values.insert(name.clone(), doc! { "$literal": v.unwrap_or(Bson::Null) });
                }
                let lets = LetVars::parse(Some(&Bson::Document(values)), "$merge", now)?;
                let bound: Vec<Bson> = lets.stages(p).into_iter().map(Bson::Document).collect();
                UpdateSpec::parse_pipeline(&bound, None)?
            }
        })
    }
}

/// Drop `$out` temporary collections a crash left behind.
pub(crate) fn drop_leftovers(s: &Server) {
    for db in s.store().list_databases() {
        for (name, _) in s.store().list_collections(&db) {
            if name.starts_with(TMP_PREFIX) {
                let ns = format!("{db}.{name}");
                match s.store().drop_collection(&ns) {
                    Ok(_) => tracing::info!(ns, "dropped a leftover $out temporary collection"),
                    Err(e) => {
                        tracing::warn!(ns, error = %e, "cannot drop a leftover $out collection")
                    }
                }
            }
        }
    }
}
