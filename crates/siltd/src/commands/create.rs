//! The `create` command.

use bson::{Bson, Document};
use silt_query::{QResult, QueryError};

use super::common::{coll_arg, collation_arg};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};
use crate::views::{View, SYSTEM_VIEWS};
use silt_query::collation::Collation;

#[expect(
    clippy::cast_possible_truncation,
    reason = "a double size or max saturates into i64, as mongod reads it"
)]
pub(super) fn create(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "create")?;
    if cmd.contains_key("viewOn") || cmd.contains_key("pipeline") {
        if op.txn.is_some() {
            return Err(QueryError::operation_not_supported_in_transaction(
                "Cannot create a view in a multi-document transaction.",
            ));
        }
        return create_view(s, db, &coll, cmd, op);
    }
    if s.views().is_view(&format!("{db}.{coll}")) {
        return Err(QueryError::namespace_exists(format!(
            "Namespace {db}.{coll} already exists as a view"
        )));
    }
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
    // `capped` is mongod's safeBool: a bool or a number.
    match super::common::safe_bool(cmd, "capped")? {
        None | Some(false) => {
            if cmd.contains_key("capped") {
                options.insert("capped", false);
            }
        }
        Some(true) => {
            // Documents kept in insertion order; the oldest go when `size` bytes or `max`
            // documents are exceeded (`Collection::enforce_cap`).
            let num = |k: &str| -> Result<Option<i64>, QueryError> {
                match cmd.get(k) {
                    None | Some(Bson::Null) => Ok(None),
                    Some(v) => match silt_bson::compare::as_num(v) {
                        Some(silt_bson::compare::Num::Int(n)) => Ok(Some(n)),
                        Some(silt_bson::compare::Num::Float(f)) => Ok(Some(f as i64)),
                        None => Err(super::common::wrong_number_type(&format!("create.{k}"), v)),
                    },
                }
            };
            let size = num("size")?.ok_or_else(|| {
                QueryError::invalid_options("the 'size' field is required when 'capped' is true")
            })?;
            if size <= 0 {
                return Err(QueryError::located(
                    51024,
                    format!("BSON field 'size' value must be >= 1, actual value '{size}'"),
                ));
            }
            // MongoDB rounds the size up to a multiple of 256 bytes, and at least 4096.
            let size = ((size.max(4096) + 255) / 256) * 256;
            options.insert("capped", true);
            options.insert("size", size);
            if let Some(max) = num("max")?.filter(|m| *m > 0) {
                options.insert("max", max);
            }
        }
    }
    // The default collation of the collection's commands and indexes (and of its `_id_`).
    let collation = collation_arg(cmd)?;
    if let Some(c) = &collation {
        options.insert("collation", c.resolved().clone());
    }
    if let Some(Bson::Document(id)) = cmd.get("idIndex") {
        // mongorestore sends the `_id` index it dumped (with the collection's collation);
        // any other `_id` index is refused, with mongod's errors.
        if let Some(k) = id
            .keys()
            .find(|k| !matches!(k.as_str(), "key" | "name" | "v" | "ns" | "collation"))
        {
            return Err(QueryError::invalid_index_specification_option(format!(
                "The field '{k}' is not valid for an _id index specification. Specification: {id}"
            )));
        }
        // `{_id: 1}` in any numeric type (`1.0`, `NumberLong(1)`), as mongod compares it.
        let ascending_id = id.get_document("key").is_ok_and(|k| {
            k.len() == 1
                && match k.get("_id").and_then(silt_bson::compare::as_num) {
                    Some(silt_bson::compare::Num::Int(1)) => true,
                    Some(silt_bson::compare::Num::Float(f)) => f == 1.0,
                    _ => false,
                }
        });
        if !ascending_id {
            return Err(QueryError::bad_value(format!(
                "The _id index must have key {{ _id: 1 }}, not {id}"
            )));
        }
        let same_collation = match id.get("collation") {
            None => collation.is_none(),
            Some(c) => {
                silt_query::collation::same(Collation::parse(c)?.as_ref(), collation.as_ref())
            }
        };
        if !same_collation {
            return Err(QueryError::bad_value(
                "'idIndex' must have the same collation as the collection.",
            ));
        }
    }
    legacy_options(db, &coll, cmd, &mut options)?;
    add_validation_options(cmd, &mut options)?;
    engine_options(cmd, &mut options)?;
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
    if op.txn.is_some() && options.get_bool("capped").unwrap_or(false) {
        return Err(QueryError::operation_not_supported_in_transaction(
            "Cannot create a capped collection in a multi-document transaction.",
        ));
    }
    match s.store().create_for(&ns, options.clone(), op.writer()) {
        Ok(_) => Ok(Document::new()),
        // MongoDB 7.0: creating an existing collection with the same options succeeds.
        Err(silt_collection::CollError::NamespaceExists(_))
            if s.store()
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

/// Options of older servers and of change streams that change no answer here:
/// `autoIndexId: true` (the default; mongorestore sends it), `flags` (an MMAPv1 setting mongod
/// ignores), and `changeStreamPreAndPostImages`.
fn legacy_options(db: &str, coll: &str, cmd: &Document, options: &mut Document) -> QResult<()> {
    match cmd.get("autoIndexId") {
        None | Some(Bson::Null) | Some(Bson::Boolean(true)) => {}
        Some(Bson::Boolean(false)) if db == "local" => {
            return Err(super::args::not_implemented("create.autoIndexId"))
        }
        Some(Bson::Boolean(false)) => {
            return Err(QueryError::located(
                50001,
                format!(
                    "autoIndexId:false is not allowed for collection {db}.{coll} because it can \
                     be replicated"
                ),
            ))
        }
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'create.autoIndexId' is the wrong type '{}', expected type 'bool'",
                silt_bson::compare::type_name(other)
            )))
        }
    }
    if let Some(v) = cmd.get("flags") {
        if silt_bson::compare::as_num(v).is_none() && !matches!(v, Bson::Null) {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'create.flags' is the wrong type '{}', expected a number",
                silt_bson::compare::type_name(v)
            )));
        }
    }
    pre_and_post_images(cmd, "create", options)
}

/// `changeStreamPreAndPostImages: {enabled}` of `create` and `collMod`: kept in the options
/// while enabled, as mongod keeps it (only change streams, which siltd refuses, read images).
pub(super) fn pre_and_post_images(
    cmd: &Document,
    command: &str,
    options: &mut Document,
) -> QResult<()> {
    match cmd.get("changeStreamPreAndPostImages") {
        None | Some(Bson::Null) => {}
        Some(Bson::Document(d)) => match (d.get("enabled"), d.len()) {
            (Some(Bson::Boolean(true)), 1) => {
                options.insert(
                    "changeStreamPreAndPostImages",
                    bson::doc! { "enabled": true },
                );
            }
            (Some(Bson::Boolean(false)), 1) => {
                options.remove("changeStreamPreAndPostImages");
            }
            _ => {
                return Err(QueryError::failed_to_parse(format!(
                    "changeStreamPreAndPostImages must be {{enabled: <bool>}}, not {d}"
                )))
            }
        },
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{command}.changeStreamPreAndPostImages' is the wrong type '{}', \
                 expected type 'object'",
                silt_bson::compare::type_name(other)
            )))
        }
    }
    Ok(())
}

/// A `storageEngine` document: one embedded document per engine name, as mongod checks it
/// (the settings inside are only read by the engine they name, and siltd is none of those).
pub(super) fn check_engine_options(v: &Bson) -> QResult<()> {
    let Bson::Document(d) = v else {
        return Err(QueryError::type_mismatch(format!(
            "'storageEngine' has to be an embedded document, not {}",
            silt_bson::compare::type_name(v)
        )));
    };
    match d.iter().find(|(_, e)| !matches!(e, Bson::Document(_))) {
        Some((name, _)) => Err(QueryError::bad_value(format!(
            "'storageEngine.{name}' has to be an embedded document."
        ))),
        None => Ok(()),
    }
}

/// `storageEngine` and `indexOptionDefaults: {storageEngine}`: another engine's tuning, which
/// changes no answer. Kept in the options, as mongod keeps them, so that `listCollections`
/// shows them and a dump restores them; siltd reads nothing in them.
fn engine_options(cmd: &Document, options: &mut Document) -> QResult<()> {
    for k in ["storageEngine", "indexOptionDefaults"] {
        match cmd.get(k) {
            None | Some(Bson::Null) => {}
            Some(v @ Bson::Document(d)) => {
                if k == "indexOptionDefaults" {
                    if let Some(f) = d.keys().find(|f| f.as_str() != "storageEngine") {
                        return Err(super::args::unknown_field(&format!(
                            "create.indexOptionDefaults.{f}"
                        )));
                    }
                    if let Some(se) = d.get("storageEngine") {
                        check_engine_options(se)?;
                    }
                } else {
                    check_engine_options(v)?;
                }
                options.insert(k, d.clone());
            }
            Some(other) => {
                return Err(QueryError::type_mismatch(format!(
                    "BSON field 'create.{k}' is the wrong type '{}', expected type 'object'",
                    silt_bson::compare::type_name(other)
                )))
            }
        }
    }
    Ok(())
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

/// `create` with `viewOn` and `pipeline`: a document in `system.views`.
fn create_view(s: &Server, db: &str, name: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let ns = format!("{db}.{name}");
    // The view's default collation; a view on a view must share it (MongoDB's rule).
    let collation = collation_arg(cmd)?.map(|c| c.resolved().clone());
    if let Some(k) = cmd.keys().skip(1).find(|k| {
        !matches!(k.as_str(), "viewOn" | "pipeline" | "collation")
            && !k.starts_with('$')
            && !GENERIC.contains(&k.as_str())
    }) {
        return Err(QueryError::invalid_options(format!(
            "option '{k}' is not supported when creating a view"
        )));
    }
    let view_on = match cmd.get("viewOn") {
        Some(Bson::String(v)) if !v.is_empty() => v.clone(),
        Some(Bson::String(_)) => {
            return Err(QueryError::bad_value("'viewOn' cannot be empty"));
        }
        None => {
            return Err(QueryError::bad_value(
                "'pipeline' requires 'viewOn' to also be specified",
            ))
        }
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'create.viewOn' is the wrong type '{}', expected type 'string'",
                silt_bson::compare::type_name(other)
            )))
        }
    };
    let pipeline = view_pipeline(cmd.get("pipeline"))?;
    if s.store().get(&ns).is_some() || s.views().is_view(&ns) {
        // The same definition again is fine, as for collections.
        if let Some(v) = s.views().get(&ns) {
            if v.view_on == view_on && v.pipeline == pipeline && v.collation == collation {
                return Ok(Document::new());
            }
        }
        return Err(QueryError::namespace_exists(format!(
            "Namespace {ns} already exists"
        )));
    }
    if s.views().would_cycle(db, &ns, &view_on) {
        return Err(QueryError::coded(
            5,
            "GraphContainsCycle",
            format!("View cycle detected: {ns} is defined on itself"),
        ));
    }
    if let Some(under) = s.views().get(&format!("{db}.{view_on}")) {
        if under.collation != collation {
            return Err(QueryError::coded(
                167,
                "OptionNotSupportedOnView",
                format!(
                    "View {ns} has a different default collation than the view it is defined on, {db}.{view_on}"
                ),
            ));
        }
    }
    let view = View {
        view_on,
        pipeline,
        collation,
    };
    let sys = s
        .store()
        .get_or_create(&format!("{db}.{SYSTEM_VIEWS}"))
        .map_err(coll_err)?;
    op.insert(&sys, &view.to_doc(&ns)).map_err(coll_err)?;
    s.views().put(&ns, view);
    Ok(Document::new())
}

/// Generic command arguments (the session, write concern, ...) a view's `create` may carry.
const GENERIC: &[&str] = &[
    "lsid",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "writeConcern",
    "readConcern",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
];

/// A view's pipeline: stages that may define a view (no `$out`, `$merge`).
pub(super) fn view_pipeline(v: Option<&Bson>) -> QResult<Vec<Document>> {
    let stages: Vec<Document> = match v {
        None | Some(Bson::Null) => Vec::new(),
        Some(Bson::Array(a)) => super::common::stage_docs(a)?,
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'pipeline' is the wrong type '{}', expected type 'array'",
                silt_bson::compare::type_name(other)
            )))
        }
    };
    for st in &stages {
        if let Some(name) = st
            .keys()
            .next()
            .filter(|n| matches!(n.as_str(), "$out" | "$merge"))
        {
            return Err(QueryError::coded(
                167,
                "OptionNotSupportedOnView",
                format!("{name} cannot be used in a view definition"),
            ));
        }
    }
    silt_query::agg::parse_pipeline(&stages)?;
    Ok(stages)
}

/// `validator`, `validationLevel` and `validationAction` of `cmd`, checked, into `options`.
pub(super) fn add_validation_options(cmd: &Document, options: &mut Document) -> QResult<()> {
    use silt_query::validator::{parse_filter, Action, Level};
    if let Some(v) = cmd.get("validator").filter(|v| !matches!(v, Bson::Null)) {
        options.insert("validator", parse_filter(v)?);
    }
    if let Some(v) = cmd
        .get("validationLevel")
        .filter(|v| !matches!(v, Bson::Null))
    {
        Level::parse(Some(v))?;
        options.insert("validationLevel", v.clone());
    }
    if let Some(v) = cmd
        .get("validationAction")
        .filter(|v| !matches!(v, Bson::Null))
    {
        Action::parse(Some(v))?;
        options.insert("validationAction", v.clone());
    }
    Ok(())
}
