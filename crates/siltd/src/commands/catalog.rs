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
    let n = s.store.get(&ns).map(|c| c.indexes().len() + 1).unwrap_or(1);
    if s.store.drop_collection(&ns).map_err(coll_err)? {
        Ok(doc! { "nIndexesWas": n as i32, "ns": ns })
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
    let Some(c) = s.store.get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "ns does not exist: {ns}"
        )));
    };
    let mut out = vec![doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }];
    out.extend(c.indexes().iter().map(|i| i.spec.to_doc()));
    Ok(cursor_reply(
        &format!("{db}.$cmd.listIndexes.{coll}"),
        out,
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
    if specs.is_empty() {
        return Err(QueryError::bad_value("Must specify at least one index"));
    }
    let mut parsed = Vec::new();
    for spec in specs {
        let Bson::Document(spec) = spec else {
            return Err(QueryError::type_mismatch(
                "each index spec must be a document",
            ));
        };
        for k in spec.keys() {
            if !matches!(
                k.as_str(),
                "key"
                    | "name"
                    | "unique"
                    | "sparse"
                    | "partialFilterExpression"
                    | "clustering"
                    | "background"
                    | "v"
                    | "ns"
            ) {
                return Err(QueryError::invalid_options(format!(
                    "siltd does not support the index option '{k}'"
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
        let p = silt_collection::IndexSpec::parse(spec)
            .map_err(|e| QueryError::cannot_create_index(e.0))?;
        parsed.push(p);
    }
    // The build reports its phases to this command's operation (`currentOp`), which
    // `killOp` can interrupt.
    let out = match crate::ops::current() {
        Some(op) => s.store.create_indexes_observed(&ns, parsed, &*op),
        None => s.store.create_indexes(&ns, parsed),
    }
    .map_err(coll_err)?;
    let mut r = doc! {
        "numIndexesBefore": out.before as i32,
        "numIndexesAfter": out.after as i32,
        "createdCollectionAutomatically": out.created_collection,
    };
    if out.after == out.before {
        r.insert("note", "all indexes already exist");
    }
    Ok(r)
}

pub fn drop_indexes(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let name = if cmd.contains_key("dropIndexes") {
        "dropIndexes"
    } else {
        "deleteIndexes"
    };
    let coll = coll_arg(db, cmd, name)?;
    let ns = format!("{db}.{coll}");
    let Some(c) = s.store.get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "ns not found {ns}"
        )));
    };
    let idxs = c.indexes();
    let cant_id = || QueryError::invalid_options("cannot drop _id index");
    let names: Vec<String> = match cmd.get("index") {
        Some(Bson::String(n)) if n == "*" => idxs.iter().map(|i| i.name().to_string()).collect(),
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
    let was = s.store.drop_indexes(&ns, &names).map_err(coll_err)?;
    Ok(doc! { "nIndexesWas": was as i32 })
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
        "indexes": (colls.len() + t.index_sizes.len()) as i64,
        "indexSize": (t.total_index_size as i64 / scale) as f64,
        "totalSize": ((t.storage_size + t.total_index_size) as i64 / scale) as f64,
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
    let mut sizes = doc! { "_id_": 0i64 };
    for (n, b) in &st.index_sizes {
        sizes.insert(n.clone(), *b as i64 / scale);
    }
    Ok(doc! {
        "ns": ns,
        "size": st.size as i64 / scale,
        "count": st.count as i64,
        "avgObjSize": avg as i64,
        "storageSize": st.storage_size as i64 / scale,
        "freeStorageSize": 0i64,
        "capped": false,
        "nindexes": (st.index_sizes.len() + 1) as i32,
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": st.total_index_size as i64 / scale,
        "totalSize": (st.storage_size + st.total_index_size) as i64 / scale,
        "indexSizes": sizes,
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
        return Err(QueryError::unauthorized(
            "listDatabases may only be run against the admin database.",
        ));
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

/// `compact`: apply every buffered message of the collection and its indexes to the leaves,
/// then checkpoint. Reads afterwards meet no pending work, and the maintained count is exact.
pub fn compact(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "compact")?;
    let ns = format!("{db}.{coll}");
    let Some(c) = s.store.get(&ns) else {
        return Err(QueryError::namespace_not_found(format!(
            "collection does not exist: {ns}"
        )));
    };
    let freed = s.store.compact(&c).map_err(coll_err)?;
    Ok(doc! { "bytesFreed": freed as i64 })
}
