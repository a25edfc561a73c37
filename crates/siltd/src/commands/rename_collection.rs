//! The `renameCollection` command.

use bson::Document;
use silt_query::QueryError;

use super::common::bool_arg;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

fn split_ns(ns: &str) -> Result<(&str, &str), QueryError> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .ok_or_else(|| QueryError::invalid_namespace(format!("Invalid namespace specified '{ns}'")))
}

pub(super) fn rename_collection(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    if db != "admin" {
        return Err(QueryError::unauthorized(
            "renameCollection may only be run against the admin database.",
        ));
    }
    let from = cmd
        .get_str("renameCollection")
        .map_err(|_| QueryError::type_mismatch("'renameCollection' must be a string"))?;
    let to = cmd
        .get_str("to")
        .map_err(|_| QueryError::type_mismatch("'to' must be a string"))?;
    let (fdb, fc) = split_ns(from)?;
    let (tdb, tc) = split_ns(to)?;
    crate::errors::check_db_name(fdb, Some(fc))?;
    crate::errors::check_db_name(tdb, Some(tc))?;
    crate::errors::check_coll_name(tdb, tc)?;
    if from == to {
        return Err(QueryError::illegal_operation(
            "Can't rename a collection to itself",
        ));
    }
    let drop_target = bool_arg(cmd, "dropTarget")?.unwrap_or(false);
    s.rename_collection(from, to, drop_target)
        .map_err(|e| match e {
            silt_collection::CollError::NamespaceNotFound(_) => {
                QueryError::namespace_not_found("Source collection does not exist")
            }
            silt_collection::CollError::NamespaceExists(_) => {
                QueryError::namespace_exists("target namespace exists")
            }
            other => coll_err(other),
        })?;
    Ok(Document::new())
}
