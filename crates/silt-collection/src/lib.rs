//! The document layer: databases and collections stored in the fractal-tree engine.
//!
//! Owns the catalog (one engine dictionary, `_catalog`, mapping each namespace `db.coll` to
//! its dictionary and options), and each collection's primary dictionary, whose keys are the
//! order-preserving encoding of `_id` (`silt_bson::keyenc`) and whose values are the
//! documents' BSON bytes. It serialises writers to the same `_id` (striped key locks) so that
//! an insert's duplicate check and its write are atomic, and nothing more: different
//! documents are written concurrently.
//!
//! It knows nothing of the wire protocol, commands or the query language.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bson::{doc, Bson, Document};
use parking_lot::{Mutex, MutexGuard, RwLock};
use silt_storage::{Dict, Env, EnvOptions, UpdateRegistry};

/// Name of the catalog dictionary inside the engine.
const CATALOG: &str = "_catalog";

/// Failures of the document layer.
#[derive(Debug, thiserror::Error)]
pub enum CollError {
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] silt_storage::Error),
    /// A document with this `_id` exists.
    #[error("E11000 duplicate key error collection: {ns} index: _id_ dup key: {{ _id: {id} }}")]
    DuplicateKey {
        /// Namespace.
        ns: String,
        /// The duplicate `_id`, printed.
        id: String,
    },
    /// The namespace exists already.
    #[error("Collection {0} already exists.")]
    NamespaceExists(String),
    /// The namespace does not exist.
    #[error("ns not found: {0}")]
    NamespaceNotFound(String),
    /// Stored bytes that are not a BSON document.
    #[error("stored document in {ns} is not valid BSON: {detail}")]
    BadStoredDocument {
        /// Namespace.
        ns: String,
        /// What the decoder said.
        detail: String,
    },
}

/// Shorthand.
pub type Result<T, E = CollError> = std::result::Result<T, E>;

/// The encoded primary key of a document with this `_id`.
pub fn id_key(id: &Bson) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    silt_bson::keyenc::encode_value(id, &mut k);
    k
}

/// Every collection of every database, over one engine environment.
pub struct Store {
    env: Env,
    catalog: Dict,
    colls: RwLock<BTreeMap<String, Arc<Collection>>>,
    /// Serialises catalog changes (create, drop, rename); data operations never take it.
    ddl: Mutex<()>,
    next_dict: AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.env.dir())
            .finish()
    }
}

/// Figures for `collStats`/`dbStats`.
#[derive(Clone, Debug, Default)]
pub struct CollStats {
    /// Documents (maintained incrementally, an estimate between checkpoints).
    pub count: u64,
    /// Uncompressed document bytes.
    pub size: u64,
    /// Bytes the collection's file takes on disk.
    pub storage_size: u64,
}

impl Store {
    /// Open (creating if needed) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: EnvOptions, fns: UpdateRegistry) -> Result<Store> {
        let env = Env::open_with(dir, opts, fns)?;
        let catalog = env.open_or_create(CATALOG)?;
        let mut colls = BTreeMap::new();
        let mut next = 1u64;
        for (k, v) in catalog.range(Bound::Unbounded, Bound::Unbounded)? {
            let ns = String::from_utf8_lossy(&k).into_owned();
            let meta = decode_doc(&ns, &v)?;
            let dict_name = meta.get_str("dict").unwrap_or_default().to_string();
            if let Some(n) = dict_name
                .strip_prefix("coll-")
                .and_then(|s| s.parse::<u64>().ok())
            {
                next = next.max(n + 1);
            }
            let dict = env.open_dict(&dict_name)?;
            let options = meta.get_document("options").cloned().unwrap_or_default();
            colls.insert(ns.clone(), Arc::new(Collection::new(ns, dict, options)));
        }
        // Dictionaries a crash left without a catalog entry.
        let known: Vec<String> = colls.values().map(|c| c.dict.name()).collect();
        for name in env.list_dicts() {
            if name.starts_with("coll-") && !known.contains(&name) {
                tracing::info!(dict = %name, "dropping orphaned collection dictionary");
                env.drop_dict(&name)?;
            }
        }
        Ok(Store {
            env,
            catalog,
            colls: RwLock::new(colls),
            ddl: Mutex::new(()),
            next_dict: AtomicU64::new(next),
        })
    }

    /// The engine environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The collection `ns`, if it exists.
    pub fn get(&self, ns: &str) -> Option<Arc<Collection>> {
        self.colls.read().get(ns).cloned()
    }

    /// The collection `ns`, created with default options if missing.
    pub fn get_or_create(&self, ns: &str) -> Result<Arc<Collection>> {
        if let Some(c) = self.get(ns) {
            return Ok(c);
        }
        match self.create(ns, Document::new()) {
            Ok(c) => Ok(c),
            Err(CollError::NamespaceExists(_)) => self
                .get(ns)
                .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Create collection `ns` with `options`.
    pub fn create(&self, ns: &str, options: Document) -> Result<Arc<Collection>> {
        let _g = self.ddl.lock();
        if self.colls.read().contains_key(ns) {
            return Err(CollError::NamespaceExists(ns.to_string()));
        }
        let dict_name = format!("coll-{}", self.next_dict.fetch_add(1, Ordering::Relaxed));
        let dict = self.env.create_dict(&dict_name)?;
        let meta = doc! { "dict": &dict_name, "options": options.clone() };
        self.catalog.put(ns.as_bytes(), &encode_doc(&meta))?;
        let c = Arc::new(Collection::new(ns.to_string(), dict, options));
        self.colls.write().insert(ns.to_string(), c.clone());
        tracing::debug!(ns, dict = %dict_name, "created collection");
        Ok(c)
    }

    /// Drop collection `ns`; false if it did not exist.
    pub fn drop_collection(&self, ns: &str) -> Result<bool> {
        let _g = self.ddl.lock();
        let Some(c) = self.colls.write().remove(ns) else {
            return Ok(false);
        };
        self.catalog.delete(ns.as_bytes())?;
        self.env.drop_dict(&c.dict.name())?;
        Ok(true)
    }

    /// Rename `from` to `to`; `drop_target` drops an existing `to` first.
    pub fn rename(&self, from: &str, to: &str, drop_target: bool) -> Result<()> {
        let _g = self.ddl.lock();
        let mut colls = self.colls.write();
        let Some(c) = colls.get(from).cloned() else {
            return Err(CollError::NamespaceNotFound(from.to_string()));
        };
        if let Some(t) = colls.get(to).cloned() {
            if !drop_target {
                return Err(CollError::NamespaceExists(to.to_string()));
            }
            colls.remove(to);
            self.catalog.delete(to.as_bytes())?;
            self.env.drop_dict(&t.dict.name())?;
        }
        let options = c.options.read().clone();
        let meta = doc! { "dict": c.dict.name(), "options": options.clone() };
        self.catalog.put(to.as_bytes(), &encode_doc(&meta))?;
        self.catalog.delete(from.as_bytes())?;
        colls.remove(from);
        colls.insert(
            to.to_string(),
            Arc::new(Collection::new(to.to_string(), c.dict.clone(), options)),
        );
        Ok(())
    }

    /// Namespaces of database `db` (collection names without the database prefix).
    pub fn list_collections(&self, db: &str) -> Vec<(String, Arc<Collection>)> {
        let prefix = format!("{db}.");
        self.colls
            .read()
            .iter()
            .filter_map(|(ns, c)| ns.strip_prefix(&prefix).map(|n| (n.to_string(), c.clone())))
            .collect()
    }

    /// Databases that hold at least one collection.
    pub fn list_databases(&self) -> Vec<String> {
        let mut dbs: Vec<String> = self
            .colls
            .read()
            .keys()
            .filter_map(|ns| ns.split_once('.').map(|(d, _)| d.to_string()))
            .collect();
        dbs.dedup();
        dbs
    }

    /// Drop every collection of `db`.
    pub fn drop_database(&self, db: &str) -> Result<()> {
        for (name, _) in self.list_collections(db) {
            self.drop_collection(&format!("{db}.{name}"))?;
        }
        Ok(())
    }

    /// Flush and close.
    pub fn close(self) -> Result<()> {
        drop(self.colls);
        drop(self.catalog);
        self.env.close()?;
        Ok(())
    }
}

fn encode_doc(d: &Document) -> Vec<u8> {
    let mut v = Vec::new();
    // Writing a document to a Vec cannot fail.
    let _ = d.to_writer(&mut v);
    v
}

fn decode_doc(ns: &str, bytes: &[u8]) -> Result<Document> {
    Document::from_reader(bytes).map_err(|e| CollError::BadStoredDocument {
        ns: ns.to_string(),
        detail: e.to_string(),
    })
}

const STRIPES: usize = 256;

/// One collection: its primary dictionary and options.
pub struct Collection {
    ns: String,
    dict: Dict,
    options: RwLock<Document>,
    locks: Vec<Mutex<()>>,
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").field("ns", &self.ns).finish()
    }
}

impl Collection {
    fn new(ns: String, dict: Dict, options: Document) -> Collection {
        Collection {
            ns,
            dict,
            options: RwLock::new(options),
            locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// `db.coll`.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// Options given at creation.
    pub fn options(&self) -> Document {
        self.options.read().clone()
    }

    /// The primary dictionary (keys: encoded `_id`).
    pub fn dict(&self) -> &Dict {
        &self.dict
    }

    /// Lock the stripe of one `_id` key: writers of the same document serialise here.
    pub fn lock_key(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.locks[(h % STRIPES as u64) as usize].lock()
    }

    /// The document with this encoded key.
    pub fn get_by_key(&self, key: &[u8]) -> Result<Option<Document>> {
        match self.dict.get(key)? {
            Some(v) => Ok(Some(decode_doc(&self.ns, &v)?)),
            None => Ok(None),
        }
    }

    /// The document with this `_id`.
    pub fn get(&self, id: &Bson) -> Result<Option<Document>> {
        self.get_by_key(&id_key(id))
    }

    /// Insert `doc` (which must carry `_id`); a document with the same `_id` is an error.
    pub fn insert(&self, doc: &Document) -> Result<()> {
        let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
        let key = id_key(&id);
        let _g = self.lock_key(&key);
        if self.dict.get(&key)?.is_some() {
            return Err(CollError::DuplicateKey {
                ns: self.ns.clone(),
                id: id.to_string(),
            });
        }
        self.dict.put(&key, &encode_doc(doc))?;
        Ok(())
    }

    /// Write `doc` under `key` (the caller holds the key's lock and has checked what it needs).
    pub fn put_locked(&self, key: &[u8], doc: &Document) -> Result<()> {
        self.dict.put(key, &encode_doc(doc))?;
        Ok(())
    }

    /// Delete the document under `key` (the caller holds the key's lock).
    pub fn delete_locked(&self, key: &[u8]) -> Result<()> {
        self.dict.delete(key)?;
        Ok(())
    }

    /// A cursor over documents in `_id` order between encoded bounds.
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> DocCursor {
        DocCursor {
            ns: self.ns.clone(),
            inner: self.dict.cursor(lo, hi),
        }
    }

    /// Count of documents (the engine's maintained estimate, exact after a flush).
    pub fn estimated_count(&self) -> u64 {
        self.dict.stats().rows
    }

    /// Exact count of documents, counted in the tree without decoding documents.
    pub fn count(&self) -> Result<u64> {
        Ok(self.dict.count_range(Bound::Unbounded, Bound::Unbounded)?)
    }

    /// Size figures.
    pub fn stats(&self) -> CollStats {
        let s = self.dict.stats();
        CollStats {
            count: s.rows,
            size: s.data_bytes,
            storage_size: s.file_bytes,
        }
    }
}

/// Documents in key order.
pub struct DocCursor {
    ns: String,
    inner: silt_storage::Cursor,
}

impl std::fmt::Debug for DocCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocCursor").field("ns", &self.ns).finish()
    }
}

impl DocCursor {
    /// The next document and its encoded key.
    pub fn next_doc(&mut self) -> Result<Option<(Vec<u8>, Document)>> {
        match self.inner.next()? {
            Some((k, v)) => Ok(Some((k, decode_doc(&self.ns, &v)?))),
            None => Ok(None),
        }
    }
}

/// Per-database figures summed over collections.
pub fn sum_stats<'a>(colls: impl Iterator<Item = &'a Arc<Collection>>) -> CollStats {
    let mut t = CollStats::default();
    for c in colls {
        let s = c.stats();
        t.count += s.count;
        t.size += s.size;
        t.storage_size += s.storage_size;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> EnvOptions {
        EnvOptions {
            cache_bytes: 8 << 20,
            node_bytes: 64 << 10,
            basement_bytes: 16 << 10,
            ..EnvOptions::default()
        }
    }

    #[test]
    fn catalog_survives_reopen_and_rename() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
            let c = s.get_or_create("db.a").unwrap();
            c.insert(&doc! {"_id": 1, "x": "one"}).unwrap();
            c.insert(&doc! {"_id": 2.0, "x": "two"}).unwrap();
            assert!(matches!(
                c.insert(&doc! {"_id": 1i64}),
                Err(CollError::DuplicateKey { .. })
            ));
            s.create("db.b", doc! {}).unwrap();
            assert!(matches!(
                s.create("db.b", doc! {}),
                Err(CollError::NamespaceExists(_))
            ));
            s.rename("db.a", "db.c", false).unwrap();
            assert!(s.drop_collection("db.b").unwrap());
            s.close().unwrap();
        }
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        assert!(s.get("db.a").is_none() && s.get("db.b").is_none());
        let c = s.get("db.c").unwrap();
        assert_eq!(
            c.get(&Bson::Int32(2))
                .unwrap()
                .unwrap()
                .get_str("x")
                .unwrap(),
            "two"
        );
        let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
        let mut n = 0;
        while cur.next_doc().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 2);
        assert_eq!(s.list_databases(), vec!["db".to_string()]);
        s.drop_database("db").unwrap();
        assert!(s.list_databases().is_empty());
    }
}
