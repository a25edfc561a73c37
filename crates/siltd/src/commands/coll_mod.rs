//! The `collMod` command: change an index's `expireAfterSeconds` or `hidden`.

use bson::{Bson, Document};
use silt_query::QueryError;

use super::common::coll_arg;
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};
use crate::views::{View, SYSTEM_VIEWS};

pub(super) fn coll_mod(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "collMod")?;
    let ns = format!("{db}.{coll}");
    if s.views().is_view(&ns) {
        return modify_view(s, db, &ns, cmd, op);
    }
    if cmd.contains_key("viewOn") || cmd.contains_key("pipeline") {
        return Err(QueryError::invalid_options(format!(
            "{ns} is a collection, not a view: 'viewOn' and 'pipeline' only apply to views"
        )));
    }
    let Some(c) = s.store().get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "ns does not exist: {ns}"
        )));
    };
    let mut reply = Document::new();
    if [
        "validator",
        "validationLevel",
        "validationAction",
        "changeStreamPreAndPostImages",
    ]
    .iter()
    .any(|k| cmd.contains_key(*k))
        // A `collMod` that changes nothing is still a catalog change mongod logs (a
        // `modify` change event).
        || !cmd.contains_key("index")
    {
        let mut options = c.options();
        super::create::add_validation_options(cmd, &mut options)?;
        super::create::pre_and_post_images(cmd, "collMod", &mut options)?;
        s.store().set_options(&ns, options).map_err(coll_err)?;
    }
    if let Some(ix) = cmd.get("index") {
        let Bson::Document(ix) = ix else {
            return Err(QueryError::type_mismatch(
                "BSON field 'collMod.index' is the wrong type, expected type 'object'",
            ));
        };
        let mut name = None;
        let mut expire = None;
        let mut hidden = None;
        for (k, v) in ix {
            match (k.as_str(), v) {
                ("name", Bson::String(n)) => name = Some(n.clone()),
                ("keyPattern", Bson::Document(kp)) => {
                    let found: Vec<String> = c
                        .indexes()
                        .iter()
                        .filter(|i| &i.spec.key_pattern == kp)
                        .map(|i| i.name().to_string())
                        .collect();
                    match found.as_slice() {
                        [one] => name = Some(one.clone()),
                        [] => {
                            return Err(QueryError::index_not_found(format!(
                                "cannot find index {} for ns {ns}",
                                silt_query::expr::fmt_doc(kp)
                            )))
                        }
                        _ => {
                            return Err(QueryError::ambiguous_index_key_pattern(format!(
                                "{} indexes found for key: {}, identify by name instead.",
                                found.len(),
                                silt_query::expr::fmt_doc(kp)
                            )))
                        }
                    }
                }
                ("expireAfterSeconds", v) => {
                    expire = Some(
                        silt_collection::parse_expire_after(v)
                            .map_err(|e| QueryError::invalid_options(e.0))?,
                    )
                }
                ("hidden", Bson::Boolean(b)) => hidden = Some(*b),
                ("unique" | "prepareUnique" | "forceNonUnique", _) => {
                    return Err(super::args::not_implemented(&format!("collMod.index.{k}")))
                }
                _ => {
                    return Err(QueryError::located(
                        40415,
                        format!("BSON field 'collMod.index.{k}' is an unknown field."),
                    ))
                }
            }
        }
        let name = name.ok_or_else(|| {
            QueryError::invalid_options("must specify either index name or key pattern")
        })?;
        if name == "_id_" && !c.indexes().iter().any(|i| i.name() == "_id_") {
            return Err(QueryError::invalid_options(
                "cannot modify hidden field or expireAfterSeconds of the _id_ index",
            ));
        }
        if expire.is_none() && hidden.is_none() {
            return Err(QueryError::invalid_options(
                "no expireAfterSeconds or hidden field",
            ));
        }
        let (old, new) = s
            .store()
            .modify_index(&ns, &name, |spec| {
                if let Some(e) = expire {
                    if spec.fields.len() != 1 || spec.fields[0].0 == "_id" {
                        return Err("TTL indexes are single-field indexes, compound indexes \
                                    do not support TTL"
                            .into());
                    }
                    spec.expire_after_secs = Some(e);
                }
                if let Some(h) = hidden {
                    if spec.name == "_id_" {
                        return Err("cannot modify hidden field of the _id_ index".into());
                    }
                    spec.hidden = h;
                }
                Ok(())
            })
            .map_err(|e| match e {
                silt_collection::CollError::Partition { msg, .. } => {
                    QueryError::invalid_options(msg)
                }
                other => coll_err(other),
            })?;
        let secs = |v: Option<i64>| v.map(|n| i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32));
        if expire.is_some() {
            if let Some(o) = secs(old.expire_after_secs) {
                reply.insert("expireAfterSeconds_old", o);
            }
            if let Some(n) = secs(new.expire_after_secs) {
                reply.insert("expireAfterSeconds_new", n);
            }
        }
        if hidden.is_some() {
            reply.insert("hidden_old", old.hidden);
            reply.insert("hidden_new", new.hidden);
        }
    }
    Ok(reply)
}

/// `collMod` of a view: a new `viewOn` and `pipeline` (both must be given).
fn modify_view(s: &Server, db: &str, ns: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    if let Some(k) = cmd.keys().skip(1).find(|k| {
        matches!(
            k.as_str(),
            "index" | "validator" | "validationLevel" | "validationAction"
        )
    }) {
        return Err(QueryError::invalid_options(format!(
            "option '{k}' is not supported on a view"
        )));
    }
    let (Some(Bson::String(view_on)), Some(p)) = (cmd.get("viewOn"), cmd.get("pipeline")) else {
        return Err(QueryError::invalid_options(
            "must specify both 'viewOn' and 'pipeline' when modifying a view",
        ));
    };
    let pipeline = super::create::view_pipeline(Some(p))?;
    if s.views().would_cycle(db, ns, view_on) {
        return Err(QueryError::coded(
            5,
            "GraphContainsCycle",
            format!("View cycle detected: {ns} would be defined on itself"),
        ));
    }
    let view = View {
        view_on: view_on.clone(),
        pipeline,
        collation: s.views().get(ns).and_then(|v| v.collation),
    };
    let spec = silt_query::update::UpdateSpec::Replacement(view.to_doc(ns));
    super::modify::update_docs(
        s,
        op,
        &format!("{db}.{SYSTEM_VIEWS}"),
        &bson::doc! { "_id": ns },
        None,
        &spec,
        false,
        true,
        None,
    )
    .map_err(|f| f.into_error())?;
    s.views().put(ns, view);
    Ok(Document::new())
}
