//! Reading and writing the documents of the authorization collections (`admin.system.users`,
//! `admin.system.roles`) by `_id`. The collections are the truth: the in-memory maps of
//! users and roles are filled from them at start and follow each write.

use std::ops::Bound;

use bson::{Bson, Document};
use silt_collection::Store;
use silt_query::QueryError;

use crate::errors::coll_err;

/// Every document of `ns` (none if it does not exist); a read error is logged and ends the
/// list.
pub(crate) fn load(store: &Store, ns: &str) -> Vec<Document> {
    let mut out = Vec::new();
    if let Some(c) = store.get(ns) {
        let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
        loop {
            match cur.next_doc() {
                Ok(Some((_, d))) => out.push(d),
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, ns, "cannot read an authorization collection");
                    break;
                }
            }
        }
    }
    out
}

/// Write `doc` as the document with `_id: id` in `ns` (created if need be), or remove that
/// document when `doc` is `None`.
pub(crate) fn put(
    store: &Store,
    ns: &str,
    id: &str,
    doc: Option<&Document>,
) -> Result<(), QueryError> {
    let coll = match (doc, store.get(ns)) {
        (None, None) => return Ok(()),
        (_, Some(c)) => c,
        (Some(_), None) => store.get_or_create(ns).map_err(coll_err)?,
    };
    let lock = coll
        .lock_doc(silt_collection::id_key(&Bson::String(id.into())))
        .map_err(coll_err)?;
    match (lock.read().map_err(coll_err)?, doc) {
        (Some(old), Some(new)) => coll.replace(&lock, &old, new),
        (None, Some(new)) => coll.insert_under(&lock, new),
        (Some(old), None) => coll.delete(&lock, &old),
        (None, None) => Ok(()),
    }
    .map_err(coll_err)
}

/// `admin.system.version`: the feature compatibility version and, once a user or role exists,
/// the authorization schema version, as mongod keeps them (mongodump and mongorestore read
/// them to check that users can be dumped and restored).
pub(crate) const VERSION_NS: &str = "admin.system.version";

/// The authorization schema of MongoDB 3.0 to 8.0 (SCRAM credentials), which siltd stores.
pub(crate) const AUTH_SCHEMA_VERSION: i32 = 5;

/// Write the documents of `admin.system.version` that are missing: the feature
/// compatibility version always, `authSchema` when `with_auth_schema`.
pub(crate) fn ensure_version_docs(store: &Store, with_auth_schema: bool) -> Result<(), QueryError> {
    let mut want = vec![(
        "featureCompatibilityVersion",
        bson::doc! { "_id": "featureCompatibilityVersion", "version": crate::commands::FCV },
    )];
    if with_auth_schema {
        want.push((
            "authSchema",
            bson::doc! { "_id": "authSchema", "currentVersion": AUTH_SCHEMA_VERSION },
        ));
    }
    let present: Vec<Bson> = load(store, VERSION_NS)
        .into_iter()
        .filter_map(|d| d.get("_id").cloned())
        .collect();
    for (id, d) in want {
        if !present.contains(&Bson::String(id.into())) {
            put(store, VERSION_NS, id, Some(&d))?;
        }
    }
    Ok(())
}
