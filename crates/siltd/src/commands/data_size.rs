//! The `dataSize` command: the bytes and documents of a collection (or of a range of it,
//! counted exactly).

use std::sync::Arc;

use bson::{doc, Bson, Document};
use silt_collection::MatchSource;
use silt_query::QueryError;

use super::common::{doc_arg, new_matcher};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::ops::read_stop;
use crate::state::{CmdResult, Server};

pub(super) fn data_size(s: &Server, cmd: &Document, op: &Ctx) -> CmdResult {
    let started = std::time::Instant::now();
    let ns = match cmd.get("dataSize") {
        Some(Bson::String(ns)) if ns.contains('.') => ns.clone(),
        Some(Bson::String(ns)) => {
            return Err(QueryError::invalid_namespace(format!(
                "Namespace {ns} is not a valid collection name"
            )))
        }
        None => return Err(super::common::missing_field("dataSize.dataSize")),
        other => {
            return Err(super::common::wrong_type(
                "dataSize.dataSize",
                other,
                "string",
            ))
        }
    };
    let Some(c) = s.store().get(&ns) else {
        return Ok(doc! { "size": 0i64, "numObjects": 0i64, "millis": 0i64 });
    };
    let min = doc_arg(cmd, "min")?.cloned();
    let max = doc_arg(cmd, "max")?.cloned();
    let (size, n) = if min.is_none() && max.is_none() {
        let st = c.stats();
        (st.size, st.count)
    } else {
        // A range over the key pattern's field: [min, max).
        let mut filter = Document::new();
        for (bound, op_name) in [(min, "$gte"), (max, "$lt")] {
            if let Some(b) = bound {
                for (k, v) in b {
                    let mut cond = filter.get_document(&k).cloned().unwrap_or_default();
                    cond.insert(op_name, v);
                    filter.insert(k, cond);
                }
            }
        }
        let matcher = Arc::new(new_matcher(&filter)?);
        let planned = c.plan(&filter, &matcher, None, None, None)?;
        let snap = op.snap(&c);
        let mut src = MatchSource::uncovered_at(c, &planned, Some(matcher), read_stop(None), snap);
        let (mut size, mut n) = (0u64, 0u64);
        while let Some((_, d)) = src.next_match().map_err(coll_err)? {
            size += super::write::doc_size(&d) as u64;
            n += 1;
        }
        (size, n)
    };
    Ok(doc! {
        "size": size as i64,
        "numObjects": n as i64,
        "millis": crate::num::millis(started.elapsed()),
    })
}
