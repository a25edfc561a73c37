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
    // mongod's IDL: `index` is required, a string, an object or an array of strings.
    match cmd.get("index") {
        None => return Err(super::common::missing_field(&format!("{name}.index"))),
        Some(Bson::String(_) | Bson::Document(_)) => {}
        Some(Bson::Array(a)) if a.iter().all(|x| matches!(x, Bson::String(_))) => {}
        Some(Bson::Array(_)) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{name}.index' is the wrong type 'array', expected types '[string']"
            )))
        }
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{name}.index' is the wrong type '{}', expected types '[string, \
                 object']",
                super::common::type_name(other)
            )))
        }
    }
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
                    _ => unreachable!("checked: an array of strings"),
                }
            }
            v
        }
        Some(Bson::Document(k)) => {
            // A pattern no index could have (`{a: "nope"}`) is simply not found.
            let want =
                silt_collection::IndexSpec::parse(&doc! { "key": k.clone(), "name": "x" }).ok();
            if want
                .as_ref()
                .is_some_and(|w| w.fields == [("_id".to_string(), false)])
            {
                return Err(cant_id());
            }
            let found: Vec<String> = idxs
                .iter()
                .filter(|i| want.as_ref().is_some_and(|w| i.spec.same_key(w)))
                .map(|i| i.name().to_string())
                .collect();
            match found.len() {
                0 => {
                    return Err(QueryError::index_not_found(format!(
                        "can't find index with key: {}",
                        silt_query::expr::fmt_doc(k)
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
        _ => unreachable!("checked: a string, an object or an array"),
    };
    let was = s.store().drop_indexes(&ns, &names).map_err(coll_err)?;
    Ok(doc! { "nIndexesWas": crate::num::int32(was) })
}
