//! `explain` of a `find`.

use std::time::Instant;

use bson::{doc, Document};
use silt_collection::{MatchSource, Planned};
use silt_query::QueryError;

use super::args;
use super::common::{coll_arg, doc_arg};
use super::query::parse_query;
use crate::ops::read_stop;
use crate::state::{coll_err, CmdResult, Server};

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
        args::check("find", find.fields, inner)?;
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
