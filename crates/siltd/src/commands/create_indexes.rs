//! The `createIndexes` command.

use std::ops::Bound;

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::common::{coll_arg, missing_field, wrong_type};
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

/// Index options siltd honours (`clustering` is siltd's; `background`, `v`, `ns` and
/// `dropDups` are accepted and ignored, as MongoDB ignores them).
const INDEX_HONOURED: &[&str] = &[
    "key",
    "name",
    "unique",
    "sparse",
    "partialFilterExpression",
    "clustering",
    "expireAfterSeconds",
    "hidden",
    "background",
    "collation",
    "weights",
    "default_language",
    "language_override",
    "textIndexVersion",
    "v",
    "ns",
];

/// Options of older servers that mongod accepts and drops: not kept in the spec.
const INDEX_DROPPED: &[&str] = &["dropDups"];

/// Index options MongoDB knows and siltd does not implement: refused unless default.
const INDEX_REFUSED: &[&str] = &[
    "2dsphereIndexVersion",
    "bits",
    "min",
    "max",
    "bucketSize",
    "wildcardProjection",
    "columnstoreProjection",
    "coarsestIndexedLevel",
    "finestIndexedLevel",
    "clustered",
    "prepareUnique",
];

/// `commitQuorum`: how many members must be ready before a build commits. A standalone
/// refuses it as mongod does; a one-member set meets every quorum of one member.
fn commit_quorum(s: &Server, cmd: &Document) -> Result<(), QueryError> {
    let Some(q) = cmd.get("commitQuorum") else {
        return Ok(());
    };
    if s.repl().is_none() {
        return Err(QueryError::bad_value(
            "Standalones can't specify commitQuorum",
        ));
    }
    match q {
        Bson::String(m) if m == "votingMembers" || m == "majority" => Ok(()),
        Bson::String(m) => Err(QueryError::coded(
            79,
            "UnknownReplWriteConcern",
            format!("No write concern mode named '{m}' found in replica set configuration"),
        )),
        v => match silt_bson::compare::as_num(v) {
            Some(silt_bson::compare::Num::Int(0 | 1)) => Ok(()),
            Some(silt_bson::compare::Num::Int(n)) if n > 1 => Err(QueryError::coded(
                100,
                "UnsatisfiableCommitQuorum",
                format!("Not enough data-bearing nodes to satisfy commit quorum of {n}"),
            )),
            _ => Err(QueryError::failed_to_parse(
                "commitQuorum must be a non-negative number or a string",
            )),
        },
    }
}

/// Lower this thread's CPU priority (nice 10; on Linux the nice value is per thread). An
/// unprivileged thread cannot raise it again, so only a thread that ends with its work does
/// this.
fn lower_cpu_priority() {
    let me = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(me), 10) {
        tracing::debug!(error = %e, "could not lower the index build's priority");
    }
}

/// mongod's context on a spec its validation refuses: "Error in specification { ... } ::
/// caused by :: ...", the spec printed as mongod prints documents.
fn in_spec(spec: &Document, e: QueryError) -> QueryError {
    e.context(&format!(
        "Error in specification {}",
        silt_query::expr::fmt_doc(spec)
    ))
}

/// The checks mongod's spec validation makes before anything else, in its order: boolean
/// options must be bools or numbers; `key` and `name` are required.
fn check_spec(spec: &Document) -> Result<(), QueryError> {
    for (k, v) in spec {
        let boolean = matches!(k.as_str(), "unique" | "sparse" | "hidden" | "background");
        let bool_like = matches!(
            v,
            Bson::Boolean(_)
                | Bson::Int32(_)
                | Bson::Int64(_)
                | Bson::Double(_)
                | Bson::Decimal128(_)
        );
        if boolean && !bool_like {
            let shown = silt_query::expr::fmt_doc(&doc! { k: v.clone() });
            let shown = shown.trim_start_matches("{ ").trim_end_matches(" }");
            return Err(QueryError::type_mismatch(format!(
                "The field '{k} has value {shown}, which is not convertible to bool"
            )));
        }
    }
    if !spec.contains_key("key") {
        return Err(QueryError::failed_to_parse(
            "The 'key' field is a required property of an index specification",
        ));
    }
    if !spec.contains_key("name") {
        return Err(QueryError::failed_to_parse(
            "The 'name' field is a required property of an index specification",
        ));
    }
    Ok(())
}

/// An `_id` index (`key: {_id: 1}`) takes only `key`, `name`, `v`, `ns` and `collation`
/// (mongod's words, its spec printed with the `v` it adds).
fn check_id_spec(spec: &Document) -> Result<(), QueryError> {
    let id_key = spec.get_document("key").is_ok_and(|k| {
        k.len() == 1
            && match k.get("_id").and_then(silt_bson::compare::as_num) {
                Some(silt_bson::compare::Num::Int(n)) => n == 1,
                Some(silt_bson::compare::Num::Float(f)) => f == 1.0,
                None => false,
            }
    });
    if !id_key {
        return Ok(());
    }
    let allowed = ["key", "name", "v", "ns", "collation"];
    if let Some(k) = spec.keys().find(|k| !allowed.contains(&k.as_str())) {
        let mut normal = spec.clone();
        if !normal.contains_key("v") {
            normal.insert("v", 2);
        }
        return Err(QueryError::invalid_index_specification_option(format!(
            "The field '{k}' is not valid for an _id index specification. Specification: {}",
            silt_query::expr::fmt_doc(&normal)
        )));
    }
    Ok(())
}

pub(super) fn create_indexes(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "createIndexes")?;
    let ns = format!("{db}.{coll}");
    s.views().refuse_write(&ns)?;
    let mut created_in_txn = false;
    if let Some(t) = op.txn {
        // MongoDB 4.4: a transaction may index a collection it creates (here, or earlier in
        // it), not one that existed before it.
        match s.store().get(&ns) {
            Some(_) if !t.created(&ns) => {
                return Err(QueryError::operation_not_supported_in_transaction(format!(
                    "Cannot create new indexes on existing collection {ns} in a multi-document transaction."
                )))
            }
            Some(c) => {
                // The build reads committed documents: the transaction's own would be missed.
                let mut cur = c.scan_at(Bound::Unbounded, Bound::Unbounded, t.snapshot());
                if cur.next_doc().map_err(coll_err)?.is_some() {
                    return Err(QueryError::operation_not_supported_in_transaction(format!(
                        "siltd cannot index {ns} in the transaction that created it once the transaction has written documents to it; create the indexes first"
                    )));
                }
            }
            None => {
                s.store()
                    .create_for(&ns, Document::new(), op.writer())
                    .map_err(coll_err)?;
                created_in_txn = true;
            }
        }
    }
    let specs = match cmd.get("indexes") {
        Some(Bson::Array(a)) => a,
        None => return Err(missing_field("createIndexes.indexes")),
        Some(Bson::Null) => {
            return Err(QueryError::located(
                10065,
                "invalid parameter: expected an object (indexes)",
            ))
        }
        other => return Err(wrong_type("createIndexes.indexes", other, "array")),
    };
    if specs.is_empty() {
        return Err(QueryError::bad_value(
            "Must specify at least one index to create",
        ));
    }
    // mongorestore sends `ignoreUnknownIndexOptions: true` (as does any tool restoring specs
    // from another server): options no version of MongoDB knows are then dropped, as mongod
    // drops them. Known options siltd does not implement are still refused.
    let ignore_unknown = match cmd.get("ignoreUnknownIndexOptions") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'createIndexes.ignoreUnknownIndexOptions' is the wrong type '{}', \
                 expected type 'bool'",
                silt_bson::compare::type_name(other)
            )))
        }
    };
    commit_quorum(s, cmd)?;
    let mut parsed = Vec::new();
    // An index that names no collation takes the collection's default.
    let default = s
        .store()
        .get(&ns)
        .and_then(|c| c.default_collation().cloned());
    for (i, spec) in specs.iter().enumerate() {
        let Bson::Document(spec) = spec else {
            return Err(wrong_type(
                &format!("createIndexes.indexes.{i}"),
                Some(spec),
                "object",
            ));
        };
        check_spec(spec).map_err(|e| in_spec(spec, e))?;
        check_id_spec(spec)?;
        let mut with_default;
        let spec = match &default {
            Some(d) if !spec.contains_key("collation") => {
                with_default = spec.clone();
                with_default.insert("collation", d.resolved().clone());
                &with_default
            }
            _ => spec,
        };
        let mut kept = Document::new();
        for (k, v) in spec {
            let k = k.as_str();
            if INDEX_HONOURED.contains(&k) {
                kept.insert(k, v.clone());
                continue;
            }
            if INDEX_DROPPED.contains(&k) {
                continue;
            }
            if k == "storageEngine" {
                // Another engine's tuning: mongod validates it only for the engine it runs.
                super::create::check_engine_options(v)?;
                continue;
            }
            if INDEX_REFUSED.contains(&k) {
                if matches!(v, Bson::Null | Bson::Boolean(false)) {
                    continue;
                }
                return Err(super::args::not_implemented(&format!(
                    "createIndexes.indexes.{k}"
                )));
            }
            if ignore_unknown {
                continue;
            }
            return Err(QueryError::invalid_index_specification_option(format!(
                "The field '{k}' is not valid for an index specification. Specification: {spec}"
            )));
        }
        let spec = &kept;
        if let Some(c) = spec.get("collation") {
            // MongoDB's codes for a bad collation, before the spec's own checks.
            let c = silt_query::collation::Collation::parse(c)?;
            let on_id =
                matches!(spec.get_document("key"), Ok(k) if k.len() == 1 && k.contains_key("_id"));
            if on_id && !silt_query::collation::same(c.as_ref(), default.as_ref()) {
                return Err(QueryError::bad_value(
                    "The _id index must have the same collation as the collection",
                ));
            }
        }
        let p = silt_collection::IndexSpec::parse(spec).map_err(|e| {
            let mut normal = spec.clone();
            if !normal.contains_key("v") {
                normal.insert("v", 2);
            }
            in_spec(&normal, QueryError::cannot_create_index(e.0))
        })?;
        if parsed
            .iter()
            .any(|q: &silt_collection::IndexSpec| q.name == p.name && q.same_as(&p))
        {
            return Err(QueryError::coded(
                68,
                "IndexAlreadyExists",
                format!("Identical index already exists: {}", p.name),
            ));
        }
        if p.text.is_none() {
            let text_only = [
                "weights",
                "default_language",
                "language_override",
                "textIndexVersion",
            ];
            if let Some(k) = text_only.iter().find(|k| spec.contains_key(**k)) {
                return Err(QueryError::invalid_index_specification_option(format!(
                    "The field '{k}' is only valid for a text index. Specification: {spec}"
                )));
            }
        }
        parsed.push(p);
    }
    // The build reports its phases to this command's operation (`currentOp`), which
    // `killOp` can interrupt. It runs on a thread of its own at a lower CPU priority, so that
    // on a busy machine the other clients' reads and writes go first.
    let op = crate::ops::current();
    let out = std::thread::scope(|sc| {
        std::thread::Builder::new()
            .name("index-build".into())
            .stack_size(16 << 20)
            .spawn_scoped(sc, || {
                lower_cpu_priority();
                match &op {
                    Some(op) => s.store().create_indexes_observed(&ns, parsed, &**op),
                    None => s.store().create_indexes(&ns, parsed),
                }
            })
            .map_err(|e| QueryError::internal(format!("cannot start an index build: {e}")))?
            .join()
            .map_err(|_| QueryError::internal("the index build panicked"))
    })?
    .map_err(coll_err)?;
    let mut r = doc! {
        "numIndexesBefore": crate::num::int32(out.before),
        "numIndexesAfter": crate::num::int32(out.after),
        "createdCollectionAutomatically": out.created_collection || created_in_txn,
    };
    if out.after == out.before {
        r.insert("note", "all indexes already exist");
    }
    Ok(r)
}
