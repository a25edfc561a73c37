//! The `dropIndexes` command (`deleteIndexes`).

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn drop_indexes(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = if cmd.contains_key("dropIndexes") {
        "dropIndexes"
    } else {
        "deleteIndexes"
    };
    let coll = coll_arg(db, cmd, name)?;
    let ns = format!("{db}.{coll}");
    let Some(c) = s.store().get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "ns not found {ns}"
        )));
    };
    let idxs = c.indexes();
    let cant_id = || QueryError::invalid_options("cannot drop _id index");
    let names: Vec<String> = match cmd.get("index") {
        // `_id_` is a secondary index under a `primaryKey` other than `_id`, and stays.
        Some(Bson::String(n)) if n == "*" => idxs
            .iter()
            .map(|i| i.name().to_string())
            .filter(|n| n != "_id_")
            .collect(),
        Some(Bson::String(n)) if n == "_id_" => return Err(cant_id()),
        Some(Bson::String(n)) => vec![n.clone()],
        Some(Bson::Array(a)) => {
            let mut v = Vec::new();
            for x in a {
                match x {
                    Bson::String(n) if n == "_id_" => return Err(cant_id()),
                    Bson::String(n) if n == "*" => {
                        return Err(QueryError::bad_value(
                            "'*' cannot be used in a list of index names",
                        ))
                    }
                    Bson::String(n) => v.push(n.clone()),
                    _ => return Err(QueryError::type_mismatch("index names must be strings")),
                }
            }
            v
        }
        Some(Bson::Document(k)) => {
            let want = silt_collection::IndexSpec::parse(&doc! { "key": k.clone(), "name": "x" })
                .map_err(|e| QueryError::bad_value(e.0))?;
            if want.fields == [("_id".to_string(), false)] {
                return Err(cant_id());
            }
            let found: Vec<String> = idxs
                .iter()
                .filter(|i| i.spec.same_key(&want))
                .map(|i| i.name().to_string())
                .collect();
            match found.len() {
                0 => {
                    return Err(QueryError::index_not_found(format!(
                        "can't find index with key: {k}"
                    )))
                }
                1 => found,
                _ => {
                    return Err(QueryError::located(
                        3,
                        "index key pattern matches several indexes; drop by name",
                    ))
                }
            }
        }
        _ => {
            return Err(QueryError::type_mismatch(
                "BSON field 'dropIndexes.index' must be a string, an array or an object",
            ))
        }
    };
    let was = s.store().drop_indexes(&ns, &names).map_err(coll_err)?;
    Ok(doc! { "nIndexesWas": crate::num::int32(was) })
}
