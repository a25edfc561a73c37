//! The `delete` command.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Document};
use silt_query::agg::LetVars;
use silt_query::collation::Collation;
use silt_query::{QResult, QueryError};

use super::args;
use super::common::{bool_arg, check_hint, coll_arg, doc_arg, effective_collation, int_arg};
use super::modify::delete_docs;
use super::write::{docs_arg, write_error};
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

/// The fields of one `delete` statement siltd honours (`sampleId`, a sampled query's id, only
/// records the query).
const DELETE_STATEMENT: &[&str] = &["q", "limit", "hint", "collation", "sampleId"];

/// MongoDB's delete statement fields siltd does not implement.
const DELETE_REFUSED: &[&str] = &[];

pub(super) fn delete(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "delete")?;
    let stmts = docs_arg(cmd, "deletes")?;
    for st in &stmts {
        args::check_statement("delete.deletes", DELETE_STATEMENT, DELETE_REFUSED, st)?;
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
            let limit = int_arg(st, "limit")?.ok_or_else(|| {
                QueryError::failed_to_parse("BSON field 'delete.deletes.limit' is missing")
            })?;
            if limit != 0 && limit != 1 {
                return Err(QueryError::failed_to_parse(format!(
                    "The limit field in delete objects must be 0 or 1. Got {limit}"
                )));
            }
            check_hint(st)?;
            Ok(delete_docs(s, op, &ns, &q, None, limit == 0, st.get("hint"))?.len())
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
