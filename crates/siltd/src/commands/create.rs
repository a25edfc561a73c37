//! The `create` command.

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::state::{coll_err, CmdResult, Server};

pub fn create(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "create")?;
    // The command table checked every field: what is left to decide is the values.
    let mut options = Document::new();
    let partitioned = match cmd.get("partitioned") {
        None | Some(Bson::Null) | Some(Bson::Boolean(false)) => false,
        Some(Bson::Boolean(true)) => true,
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'create.partitioned' is the wrong type '{}', expected type 'bool'",
                silt_bson::compare::type_name(other)
            )))
        }
    };
    if partitioned && cmd.get("capped").is_some_and(|c| c == &Bson::Boolean(true)) {
        return Err(QueryError {
            code: 17266,
            code_name: "Location17266",
            msg: "cannot create a capped partitioned collection".into(),
        });
    }
    if let Some(pk) = cmd.get("primaryKey") {
        // Partitions are ranges of the primary key; siltd orders every collection by `_id`.
        let plain = matches!(pk, Bson::Document(d) if d.len() == 1
            && matches!(d.get("_id"), Some(Bson::Int32(1)) | Some(Bson::Int64(1)))
            || matches!(d.get("_id"), Some(Bson::Double(f)) if *f == 1.0));
        if !plain {
            return Err(QueryError::bad_value(format!(
                "primaryKey {pk} is not supported: siltd orders every collection, and partitions a partitioned one, by {{_id: 1}} only"
            )));
        }
        options.insert("primaryKey", pk.clone());
    }
    if partitioned {
        options.insert("partitioned", true);
    }
    match cmd.get("partitionRetention") {
        None | Some(Bson::Null) => {}
        Some(Bson::Document(r)) if partitioned => {
            silt_collection::Retention::parse(r).map_err(QueryError::bad_value)?;
            options.insert("partitionRetention", r.clone());
        }
        Some(Bson::Document(_)) => {
            return Err(QueryError::bad_value(
                "partitionRetention needs partitioned: true",
            ))
        }
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
            "BSON field 'create.partitionRetention' is the wrong type '{}', expected type 'object'",
            silt_bson::compare::type_name(other)
        )))
        }
    }
    match cmd.get("capped") {
        None | Some(Bson::Null) | Some(Bson::Boolean(false)) => {}
        Some(_) => return Err(super::args::not_implemented("create.capped")),
    }
    if cmd.contains_key("capped") {
        options.insert("capped", false);
    }
    if let Some(Bson::Document(id)) = cmd.get("idIndex") {
        // mongorestore sends the `_id` index it dumped; any other `_id` index is refused.
        let plain = id.get_document("key").ok() == Some(&bson::doc! {"_id": 1})
            && id
                .keys()
                .all(|k| matches!(k.as_str(), "key" | "name" | "v" | "ns"));
        if !plain {
            return Err(super::args::not_implemented("create.idIndex"));
        }
    }
    let ns = format!("{db}.{coll}");
    s.store.create(&ns, options).map_err(|e| match e {
        silt_collection::CollError::NamespaceExists(_) => {
            QueryError::namespace_exists(format!("Collection {ns} already exists."))
        }
        other => coll_err(other),
    })?;
    Ok(Document::new())
}
