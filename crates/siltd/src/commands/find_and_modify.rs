//! The `findAndModify` command: update or remove one document and return it.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Bson, Document};
use silt_query::agg::LetVars;
use silt_query::plan::SortSpec;
use silt_query::projection::Projection;
use silt_query::{QResult, QueryError};

use super::common::{coll_arg, doc_arg, safe_bool};
use super::modify::{array_filters_arg, delete_docs, update_docs, update_spec};
use crate::ctx::Ctx;
use crate::state::{CmdResult, Server};

pub(super) fn find_and_modify(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let name = if cmd.contains_key("findAndModify") {
        "findAndModify"
    } else {
        "findandmodify"
    };
    let coll = coll_arg(db, cmd, name)?;
    let ns = format!("{db}.{coll}");
    s.views().refuse_write(&ns)?;
    let lets = LetVars::parse(cmd.get("let"), name, bson::DateTime::now())?;
    let query = lets.filter(&doc_arg(cmd, "query")?.cloned().unwrap_or_default());
    let sort = match doc_arg(cmd, "sort")? {
        Some(sd) if !sd.is_empty() => Some(SortSpec::parse(sd)?),
        _ => None,
    };
    let remove = safe_bool(cmd, "remove")?.unwrap_or(false);
    let return_new = safe_bool(cmd, "new")?.unwrap_or(false);
    let upsert = safe_bool(cmd, "upsert")?.unwrap_or(false);
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
        if upsert {
            return Err(QueryError::failed_to_parse(
                "Cannot specify both upsert=true and remove=true ",
            ));
        }
        if return_new {
            return Err(QueryError::failed_to_parse(
                "Cannot specify both new=true and remove=true; 'remove' always returns the \
                 deleted document",
            ));
        }
        s.ops().delete.fetch_add(1, AtomicOrdering::Relaxed);
        let gone = delete_docs(s, op, &ns, &query, sort.as_ref(), false, cmd.get("hint"))?;
        let n = crate::num::int32(gone.len());
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
        s.ops().update.fetch_add(1, AtomicOrdering::Relaxed);
        let af = array_filters_arg(cmd)?;
        let spec = update_spec(u, af.as_deref(), &lets)?;
        let r = update_docs(
            s,
            op,
            &ns,
            &query,
            sort.as_ref(),
            &spec,
            false,
            upsert,
            cmd.get("hint"),
        )
        .map_err(|f| executor_error(f.into_error()))?;
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
    Ok(reply)
}

/// mongod adds this context to what goes wrong while its plan executor updates a document
/// (a bad value for an operator, an immutable field, a path that cannot be created, a
/// duplicate key); a write conflict is retried, not reported, and keeps its own text.
fn executor_error(mut e: QueryError) -> QueryError {
    if e.code != 112 {
        e.msg = format!(
            "Plan executor error during findAndModify :: caused by :: {}",
            e.msg
        );
    }
    e
}
