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
        return Err(QueryError::coded(
            17266,
            "Location17266",
            "cannot create a capped partitioned collection",
        ));
    }
    if let Some(pk) = cmd.get("primaryKey") {
        // The key documents are stored, ordered and partitioned by: ascending fields ending
        // in `_id` (TokuMX's rules and codes).
        let parsed = silt_collection::PrimaryKey::parse(pk).map_err(coll_err)?;
        if !parsed.is_id() && cmd.get("capped").is_some_and(|c| c == &Bson::Boolean(true)) {
            return Err(QueryError::bad_value(
                "a capped collection cannot have a primaryKey other than {_id: 1}",
            ));
        }
        options.insert("primaryKey", parsed.pattern());
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
    match cmd.get("clusteredIndex") {
        None | Some(Bson::Null) => {}
        Some(Bson::Document(ci)) => {
            // Every siltd collection is clustered on `_id`: the option only says so.
            let on_id = ci.get_document("key").ok() == Some(&bson::doc! {"_id": 1});
            let unique = ci.get("unique") == Some(&Bson::Boolean(true));
            if !on_id || !unique {
                return Err(QueryError::invalid_options(
                    "The clusteredIndex option is only supported for key: {_id: 1} with \
                     unique: true",
                ));
            }
            if let Some(k) = ci
                .keys()
                .find(|k| !matches!(k.as_str(), "key" | "unique" | "name" | "v"))
            {
                return Err(super::args::unknown_field(&format!(
                    "create.clusteredIndex.{k}"
                )));
            }
            options.insert("clusteredIndex", ci.clone());
        }
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'create.clusteredIndex' is the wrong type '{}', expected type \
                 'object'",
                silt_bson::compare::type_name(other)
            )))
        }
    }
    let ns = format!("{db}.{coll}");
    match s.store.create(&ns, options.clone()) {
        Ok(_) => Ok(Document::new()),
        // MongoDB 7.0: creating an existing collection with the same options succeeds.
        Err(silt_collection::CollError::NamespaceExists(_))
            if s.store
                .get(&ns)
                .is_some_and(|c| same_options(&c.options(), &options)) =>
        {
            Ok(Document::new())
        }
        Err(silt_collection::CollError::NamespaceExists(_)) => Err(QueryError::namespace_exists(
            format!("Collection {ns} already exists."),
        )),
        Err(other) => Err(coll_err(other)),
    }
}

/// Whether two collections' options are the same (field order and `capped: false` aside).
fn same_options(a: &Document, b: &Document) -> bool {
    let norm = |d: &Document| -> Vec<(String, Bson)> {
        let mut v: Vec<(String, Bson)> = d
            .iter()
            .filter(|(k, v)| !(k.as_str() == "capped" && **v == Bson::Boolean(false)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        v.sort_by(|x, y| x.0.cmp(&y.0));
        v
    };
    norm(a) == norm(b)
}
