//! Databases and collections: create, drop, rename, list, statistics.

use bson::{doc, Bson, Document};
use silt_query::matcher::Matcher;
use silt_query::QueryError;

use super::{bool_arg, coll_arg, cursor_reply, doc_arg};
use crate::state::{coll_err, CmdResult, Server};

/// Options of `create` this server honours (the rest are refused clearly).
const CREATE_IGNORED: &[&str] = &[
    "create",
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "writeConcern",
    "comment",
    "idIndex",
    "maxTimeMS",
    "txnNumber",
    "autocommit",
    "startTransaction",
];

pub fn create(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "create")?;
    let mut options = Document::new();
    for (k, v) in cmd {
        if CREATE_IGNORED.contains(&k.as_str()) {
            continue;
        }
        match (k.as_str(), v) {
            ("capped", Bson::Boolean(false)) => {}
            _ => {
                return Err(QueryError::invalid_options(format!(
                    "siltd does not support the collection option '{k}' yet"
                )))
            }
        }
        options.insert(k.clone(), v.clone());
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

pub fn drop(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "drop")?;
    let ns = format!("{db}.{coll}");
    if s.store.drop_collection(&ns).map_err(coll_err)? {
        Ok(doc! { "nIndexesWas": 1, "ns": ns })
    } else {
        // MongoDB 7.0 reports success for a collection that does not exist.
        Ok(Document::new())
    }
}

pub fn drop_database(s: &Server, db: &str) -> CmdResult {
    s.store.drop_database(db).map_err(coll_err)?;
    Ok(doc! { "dropped": db })
}

fn split_ns(ns: &str) -> Result<(&str, &str), QueryError> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .ok_or_else(|| QueryError::invalid_namespace(format!("Invalid namespace specified '{ns}'")))
}

pub fn rename(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    if db != "admin" {
        return Err(QueryError {
            code: 13,
            code_name: "Unauthorized",
            msg: "renameCollection may only be run against the admin database.".into(),
        });
    }
    let from = cmd
        .get_str("renameCollection")
        .map_err(|_| QueryError::type_mismatch("'renameCollection' must be a string"))?;
    let to = cmd
        .get_str("to")
        .map_err(|_| QueryError::type_mismatch("'to' must be a string"))?;
    let (fdb, fc) = split_ns(from)?;
    let (tdb, tc) = split_ns(to)?;
    crate::state::check_db_name(fdb)?;
    crate::state::check_db_name(tdb)?;
    crate::state::check_coll_name(tdb, tc)?;
    let _ = fc;
    if from == to {
        return Err(QueryError::illegal_operation(
            "Can't rename a collection to itself",
        ));
    }
    let drop_target = bool_arg(cmd, "dropTarget")?.unwrap_or(false);
    s.store.rename(from, to, drop_target).map_err(|e| match e {
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

pub fn list_collections(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let filter = doc_arg(cmd, "filter")?.cloned().unwrap_or_default();
    let matcher = Matcher::new(&filter)?;
    let name_only = bool_arg(cmd, "nameOnly")?.unwrap_or(false);
    let mut out = Vec::new();
    for (name, c) in s.store.list_collections(db) {
        let full = doc! {
            "name": &name,
            "type": "collection",
            "options": c.options(),
            "info": { "readOnly": false },
            "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
        };
        if !matcher.matches(&full) {
            continue;
        }
        out.push(if name_only {
            doc! { "name": name, "type": "collection" }
        } else {
            full
        });
    }
    Ok(cursor_reply(
        &format!("{db}.$cmd.listCollections"),
        out,
        0,
        true,
    ))
}

pub fn list_indexes(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "listIndexes")?;
    let ns = format!("{db}.{coll}");
    if s.store.get(&ns).is_none() {
        return Err(QueryError::namespace_not_found(format!(
            "ns does not exist: {ns}"
        )));
    }
    let idx = doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" };
    Ok(cursor_reply(
        &format!("{db}.$cmd.listIndexes.{coll}"),
        vec![idx],
        0,
        true,
    ))
}

pub fn create_indexes(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "createIndexes")?;
    let ns = format!("{db}.{coll}");
    let specs = cmd
        .get_array("indexes")
        .map_err(|_| QueryError::type_mismatch("'indexes' must be an array"))?;
    let created = s.store.get(&ns).is_none();
    for spec in specs {
        let Bson::Document(spec) = spec else {
            return Err(QueryError::type_mismatch(
                "each index spec must be a document",
            ));
        };
        let key = spec
            .get_document("key")
            .map_err(|_| QueryError::failed_to_parse("index spec needs a 'key' document"))?;
        let only_id = key.len() == 1
            && key
                .get("_id")
                .is_some_and(|v| matches!(v, Bson::Int32(1) | Bson::Int64(1) | Bson::Double(_)));
        if !only_id {
            return Err(QueryError {
                code: 67,
                code_name: "CannotCreateIndex",
                msg: "siltd does not build secondary indexes yet".into(),
            });
        }
    }
    s.store.get_or_create(&ns).map_err(coll_err)?;
    Ok(doc! {
        "numIndexesBefore": 1,
        "numIndexesAfter": 1,
        "createdCollectionAutomatically": created,
        "note": "all indexes already exist",
    })
}

pub fn drop_indexes(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = if cmd.contains_key("dropIndexes") {
        "dropIndexes"
    } else {
        "deleteIndexes"
    };
    let coll = coll_arg(db, cmd, name)?;
    let ns = format!("{db}.{coll}");
    if s.store.get(&ns).is_none() {
        return Err(QueryError::namespace_not_found(format!(
            "ns not found {ns}"
        )));
    }
    match cmd.get("index") {
        Some(Bson::String(n)) if n == "*" => Ok(doc! { "nIndexesWas": 1 }),
        Some(Bson::String(n)) if n == "_id_" => {
            Err(QueryError::invalid_options("cannot drop _id index"))
        }
        Some(Bson::String(n)) => Err(QueryError::index_not_found(format!(
            "index not found with name [{n}]"
        ))),
        _ => Err(QueryError::index_not_found("can't find index with key")),
    }
}

fn scale_arg(cmd: &Document) -> Result<i64, QueryError> {
    let scale = super::int_arg(cmd, "scale")?.unwrap_or(1);
    if scale < 1 {
        return Err(QueryError::bad_value("scale has to be >= 1"));
    }
    Ok(scale)
}

pub fn db_stats(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let scale = scale_arg(cmd)?;
    let colls = s.store.list_collections(db);
    let t = silt_collection::sum_stats(colls.iter().map(|(_, c)| c));
    let avg = t.size.checked_div(t.count).unwrap_or(0);
    Ok(doc! {
        "db": db,
        "collections": colls.len() as i64,
        "views": 0,
        "objects": t.count as i64,
        "avgObjSize": avg as f64,
        "dataSize": (t.size as i64 / scale) as f64,
        "storageSize": (t.storage_size as i64 / scale) as f64,
        "indexes": colls.len() as i64,
        "indexSize": 0.0,
        "totalSize": (t.storage_size as i64 / scale) as f64,
        "scaleFactor": scale,
    })
}

/// The storage figures of one collection (for `collStats` and `$collStats`).
pub fn storage_stats(s: &Server, ns: &str, scale: i64) -> Result<Document, QueryError> {
    let c = s
        .store
        .get(ns)
        .ok_or_else(|| QueryError::namespace_not_found(format!("Collection [{ns}] not found.")))?;
    let st = c.stats();
    let avg = st.size.checked_div(st.count).unwrap_or(0);
    Ok(doc! {
        "ns": ns,
        "size": st.size as i64 / scale,
        "count": st.count as i64,
        "avgObjSize": avg as i64,
        "storageSize": st.storage_size as i64 / scale,
        "freeStorageSize": 0i64,
        "capped": false,
        "nindexes": 1,
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": 0i64,
        "totalSize": st.storage_size as i64 / scale,
        "indexSizes": { "_id_": 0i64 },
        "scaleFactor": scale,
        "silt": { "clusteredBy": "_id", "note": "the _id index is the collection's own tree" },
    })
}

pub fn coll_stats(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "collStats")?;
    let scale = scale_arg(cmd)?;
    storage_stats(s, &format!("{db}.{coll}"), scale)
}

pub fn list_databases(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    if db != "admin" {
        return Err(QueryError {
            code: 13,
            code_name: "Unauthorized",
            msg: "listDatabases may only be run against the admin database.".into(),
        });
    }
    let filter = doc_arg(cmd, "filter")?.cloned().unwrap_or_default();
    let matcher = Matcher::new(&filter)?;
    let name_only = bool_arg(cmd, "nameOnly")?.unwrap_or(false);
    let mut dbs = Vec::new();
    let mut total = 0i64;
    for name in s.store.list_databases() {
        let colls = s.store.list_collections(&name);
        let st = silt_collection::sum_stats(colls.iter().map(|(_, c)| c));
        let size = st.storage_size as i64;
        let d = if name_only {
            doc! { "name": &name }
        } else {
            doc! { "name": &name, "sizeOnDisk": size, "empty": st.count == 0 }
        };
        if !matcher.matches(&d) {
            continue;
        }
        total += size;
        dbs.push(d);
    }
    if name_only {
        return Ok(doc! { "databases": dbs });
    }
    Ok(doc! {
        "databases": dbs,
        "totalSize": total,
        "totalSizeMb": total >> 20,
    })
}
