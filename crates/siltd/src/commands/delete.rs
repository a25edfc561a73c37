//! The `delete` command.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Bson, Document};
use silt_query::agg::LetVars;
use silt_query::collation::Collation;
use silt_query::{QResult, QueryError};

use super::args;
use super::common::{bool_arg, check_hint, coll_arg, doc_arg, effective_collation};
use super::modify::delete_docs;
use super::write::{docs_arg, write_error};
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

/// The fields of one `delete` statement siltd honours (`sampleId`, a sampled query's id, only
/// records the query).
const DELETE_STATEMENT: &[&str] = &["q", "limit", "hint", "collation", "sampleId"];

/// MongoDB's delete statement fields siltd does not implement.
const DELETE_REFUSED: &[&str] = &[];

/// A delete statement's required `q` and `limit`, checked before any statement runs (mongod
/// parses the whole command first): the limit is read as mongod reads it, as a double (a
/// string reads as 0), and must be 0 (all) or 1.
fn statement_limit(st: &Document) -> QResult<u8> {
    match st.get("q") {
        Some(Bson::Document(_)) => {}
        None => return Err(super::common::missing_field("delete.deletes.q")),
        other => {
            return Err(super::common::wrong_type(
                "delete.deletes.q",
                other,
                "object",
            ))
        }
    }
    let limit = match st.get("limit") {
        None => return Err(super::common::missing_field("delete.deletes.limit")),
        Some(v) => match silt_bson::compare::as_num(v) {
            Some(silt_bson::compare::Num::Int(i)) => i as f64,
            Some(silt_bson::compare::Num::Float(f)) => f,
            None => 0.0,
        },
    };
    if limit == 0.0 {
        Ok(0)
    } else if limit == 1.0 {
        Ok(1)
    } else {
        Err(QueryError::failed_to_parse(format!(
            "The limit field in delete objects must be 0 or 1. Got {limit}"
        )))
    }
}

pub(super) fn delete(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "delete")?;
    let stmts = docs_arg(cmd, "deletes")?;
    let mut limits = Vec::with_capacity(stmts.len());
    for st in &stmts {
        args::check_statement("delete.deletes", DELETE_STATEMENT, DELETE_REFUSED, st)?;
        limits.push(statement_limit(st)?);
    }
    let ordered = bool_arg(cmd, "ordered")?.unwrap_or(true);
    let ns = format!("{db}.{coll}");
    s.views().refuse_write(&ns)?;
    let lets = LetVars::parse(cmd.get("let"), "delete", bson::DateTime::now())?;
    let mut n = 0i64;
    let mut errors = Vec::new();
    for (i, st) in stmts.iter().enumerate() {
        s.ops().delete.fetch_add(1, AtomicOrdering::Relaxed);
        let r = (|| -> QResult<usize> {
            let collation = effective_collation(s, Some(&ns), st)?;
            let _collation = Collation::scope(collation.as_ref());
            let q = lets.filter(&doc_arg(st, "q")?.cloned().unwrap_or_default());
            check_hint(st)?;
            Ok(delete_docs(s, op, &ns, &q, None, limits[i] == 0, st.get("hint"))?.len())
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
    let mut r = doc! { "n": crate::num::int32(n) };
    if !errors.is_empty() {
        r.insert("writeErrors", errors);
    }
    Ok(r)
}
