//! `explain` of `find`, `count`, `distinct`, `aggregate` (its leading `$match`), `update`,
//! `delete` and `findAndModify` (their first statement's filter): the plan the command's
//! filter gets and, unless `verbosity` is `queryPlanner`, the figures of running that plan. A
//! write is never performed by its explain.

use std::time::Instant;

use bson::{doc, Bson, Document};
use silt_collection::{MatchSource, Planned};
use silt_query::{QResult, QueryError};

use super::args;
use super::common::{coll_arg, doc_arg};
use super::query::{parse_query, Query};
use crate::errors::coll_err;
use crate::ops::read_stop;
use crate::state::{CmdResult, Server};

/// The query an explained command runs: its filter and what shapes the result.
fn query_of(name: &str, inner: &Document) -> QResult<Query> {
    let first = |field: &str| -> QResult<Document> {
        match inner.get(field) {
            Some(Bson::Array(a)) => match a.first() {
                Some(Bson::Document(d)) => Ok(d.clone()),
                _ => Err(QueryError::failed_to_parse(format!(
                    "explain of {name} needs one statement in '{field}'"
                ))),
            },
            _ => Err(QueryError::failed_to_parse(format!(
                "BSON field '{name}.{field}' is missing but a required field"
            ))),
        }
    };
    Ok(match name {
        "find" => parse_query(inner, "filter")?,
        "count" | "distinct" => {
            let mut d = doc! {};
            if let Some(q) = inner.get("query") {
                d.insert("query", q.clone());
            }
            for k in ["hint", "skip", "limit"] {
                if let Some(v) = inner.get(k).filter(|_| name == "count") {
                    d.insert(k, v.clone());
                }
            }
            let mut q = parse_query(&d, "query")?;
            q.limit = q.limit.map(|l| l.max(1));
            q
        }
        "aggregate" => {
            let stages = match inner.get("pipeline") {
                Some(Bson::Array(a)) => a.clone(),
                _ => Vec::new(),
            };
            let mut d = doc! {};
            if let Some(Bson::Document(m)) = stages.first().and_then(|s| match s {
                Bson::Document(sd) => sd.get("$match"),
                _ => None,
            }) {
                d.insert("filter", m.clone());
            }
            if let Some(h) = inner.get("hint") {
                d.insert("hint", h.clone());
            }
            parse_query(&d, "filter")?
        }
        "delete" => parse_query(&first("deletes")?, "q")?,
        "update" => {
            let st = first("updates")?;
            let mut q = parse_query(
                &doc! { "q": st.get("q").cloned().unwrap_or(Bson::Null), "hint": st.get("hint").cloned().unwrap_or(Bson::Null), "sort": st.get("sort").cloned().unwrap_or(Bson::Null) },
                "q",
            )?;
            if st.get("multi") != Some(&Bson::Boolean(true)) {
                q.limit = Some(1);
            }
            q
        }
        _ => {
            let mut q = parse_query(
                &doc! {
                    "query": inner.get("query").cloned().unwrap_or(Bson::Null),
                    "sort": inner.get("sort").cloned().unwrap_or(Bson::Null),
                    "hint": inner.get("hint").cloned().unwrap_or(Bson::Null),
                },
                "query",
            )?;
            q.limit = Some(1);
            q
        }
    })
}

/// Whether an aggregation is countDocuments' or `$count`'s shape (what `aggregate` counts
/// from subtree counts).
fn count_pipeline(inner: &Document) -> bool {
    match inner.get("pipeline") {
        Some(Bson::Array(p)) => {
            let stages: Vec<Document> = p.iter().filter_map(|s| s.as_document().cloned()).collect();
            stages.len() == p.len() && super::aggregate::count_shape(&stages).is_some()
        }
        _ => false,
    }
}

/// The plan of a count answered from subtree counts: MongoDB's COUNT over a COUNT_SCAN of
/// the tree counted, with what the walk read (`nodesRead`, and `rangesScanned`: parts of the
/// range that had to be counted key by key).
fn count_scan(c: &silt_collection::Collection, f: &silt_collection::FastCount) -> Document {
    let mut scan = match &f.index {
        Some(ix) => doc! {
            "stage": "COUNT_SCAN",
            "keyPattern": ix.spec.key_pattern.clone(),
            "indexName": ix.name(),
            "isMultiKey": false,
            "isUnique": ix.spec.unique,
            "isSparse": false,
            "isPartial": false,
            "indexVersion": 2,
        },
        None => doc! {
            "stage": "COUNT_SCAN",
            "keyPattern": { "_id": 1 },
            "indexName": c.primary_index_name(),
            "isMultiKey": false,
            "isUnique": true,
            "isSparse": false,
            "isPartial": false,
            "indexVersion": 2,
        },
    };
    scan.insert("keyRanges", f.ranges as i64);
    scan.insert("nodesRead", f.stats.nodes as i64);
    scan.insert("rangesScanned", f.stats.scanned_ranges as i64);
    doc! { "stage": "COUNT", "inputStage": scan }
}

/// `explain` of a command: the chosen plan and, unless `verbosity` is `queryPlanner`, the
/// figures of running it.
pub(super) fn explain(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let inner = doc_arg(cmd, "explain")?
        .ok_or_else(|| QueryError::failed_to_parse("explain needs a command document"))?;
    let verbosity = match cmd.get("verbosity") {
        None => "allPlansExecution",
        Some(Bson::String(v))
            if matches!(
                v.as_str(),
                "queryPlanner" | "executionStats" | "allPlansExecution"
            ) =>
        {
            v.as_str()
        }
        Some(other) => {
            return Err(QueryError::bad_value(format!(
                "verbosity must be one of queryPlanner, executionStats, allPlansExecution, not \
                 {other}"
            )))
        }
    };
    explain_command(s, db, inner, verbosity)
}

/// Explain `inner` (a command document) at `verbosity`.
pub(super) fn explain_command(
    s: &Server,
    db: &str,
    inner: &Document,
    verbosity: &str,
) -> CmdResult {
    let name = inner.keys().next().map(String::as_str).unwrap_or("");
    if !super::lookup(name).is_some_and(|c| c.props.explainable) {
        return Err(QueryError::not_implemented(format!(
            "explain of '{name}' is not supported by siltd (it explains find, count, distinct, \
             aggregate, update, delete and findAndModify)"
        )));
    }
    if let Some(c) = super::lookup(name) {
        let mut checked = inner.clone();
        checked.remove("explain");
        args::check(name, c.fields, &checked)?;
    }
    let coll = coll_arg(db, inner, name)?;
    let ns = format!("{db}.{coll}");
    // The explained command's collation (an update's or delete's: its first statement's).
    let collation = match inner.get("updates").or(inner.get("deletes")) {
        Some(Bson::Array(st)) => match st.first() {
            Some(Bson::Document(st)) => super::common::effective_collation(s, Some(&ns), st)?,
            _ => None,
        },
        _ => super::common::effective_collation(s, Some(&ns), inner)?,
    };
    let _collation = silt_query::collation::Collation::scope(collation.as_ref());
    let mut q = query_of(name, inner)?;
    let started = Instant::now();
    let c = s.store().get(&ns);
    if let Some(c) = &c {
        q.resolve_natural(c);
    }
    let planned = match &c {
        Some(c) => q.choose(c)?,
        None => Planned::full_scan(),
    };
    let mut winning = planned.explain(&q.filter, q.sort.as_ref(), q.projection_spec.as_ref());
    // A count answered from subtree counts (`count`, or an aggregation of countDocuments'
    // or `$count`'s shape) reads no document: its plan is a COUNT_SCAN.
    let counted = match (&c, name) {
        (Some(c), "count" | "aggregate")
            if q.hint.is_none()
                && (name == "count" || count_pipeline(inner))
                && q.matcher.text().is_none() =>
        {
            c.fast_count(&q.matcher, None).map_err(coll_err)?
        }
        _ => None,
    };
    if let (Some(f), Some(c)) = (&counted, &c) {
        winning = count_scan(c, f);
    }
    let planner = doc! {
        "namespace": &ns,
        "indexFilterSet": false,
        "parsedQuery": q.filter.clone(),
        "winningPlan": winning.clone(),
        "rejectedPlans": [],
    };
    let exec = if verbosity == "queryPlanner" {
        None
    } else if let Some(f) = &counted {
        let mut stages = winning.clone();
        stages.insert("nCounted", f.n as i64);
        Some(doc! {
            "executionSuccess": true,
            "nReturned": 0_i64,
            "executionTimeMillis": crate::num::millis(started.elapsed()),
            "totalKeysExamined": 0_i64,
            "totalDocsExamined": 0_i64,
            "executionStages": stages,
        })
    } else {
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
        Some(doc! {
            "executionSuccess": true,
            "nReturned": n as i64,
            "executionTimeMillis": crate::num::millis(started.elapsed()),
            "totalKeysExamined": keys as i64,
            "totalDocsExamined": docs as i64,
            "executionStages": winning,
        })
    };
    let mut r = doc! { "explainVersion": "1" };
    let stages = match (name, inner.get("pipeline")) {
        ("aggregate", Some(Bson::Array(p))) if !p.is_empty() => Some(p.clone()),
        _ => None,
    };
    match &stages {
        // An aggregation: the cursor stage carries the plan, the other stages follow.
        Some(p) => {
            let mut cursor = doc! { "queryPlanner": planner };
            if let Some(e) = exec {
                cursor.insert("executionStats", e);
            }
            let mut out = vec![Bson::Document(doc! { "$cursor": cursor })];
            out.extend(p.iter().cloned());
            r.insert("stages", out);
        }
        None => {
            r.insert("queryPlanner", planner);
            if let Some(e) = exec {
                r.insert("executionStats", e);
            }
        }
    }
    // The command as mongod echoes it: with its `$db`.
    let mut command = inner.clone();
    if !command.contains_key("$db") {
        command.insert("$db", db);
    }
    r.insert("command", command);
    r.insert(
        "serverInfo",
        doc! {
            "host": super::common::hostname(),
            "port": i32::from(s.cfg().port),
            "version": super::common::MONGO_VERSION,
            "gitVersion": "siltdb",
        },
    );
    Ok(r)
}
