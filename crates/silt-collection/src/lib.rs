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

pub mod index;
mod keyrange;
mod plan;
mod read;
pub mod sorter;
mod validate;
mod write;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bson::{doc, Bson, Document};
use parking_lot::{Mutex, RwLock};
use silt_storage::{Dict, Env};

/// What the server needs of the engine, so that it never names `silt_storage`: the options
/// it opens the store with, the registry of update functions (fast updates) and what they
/// return, the engine's statistics, its poison state and its fail points.
pub use silt_storage::{
    EnvOptions, EnvStats, FailPoints, PoisonCause, SyncPolicy, UpdateOutcome, UpdateRegistry,
};

pub use index::{Accesses, Index, IndexSpec, KeyError, SpecError};
pub use keyrange::{KeyRange, KeyScan};
pub use plan::Planned;
pub use read::{MatchSource, Stop};
pub use validate::ValidateReport;
pub use write::DocLock;

/// Name of the catalog dictionary inside the engine.
const CATALOG: &str = "_catalog";

/// Failures of the document layer.
#[derive(Debug, thiserror::Error)]
pub enum CollError {
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] silt_storage::Error),
    /// A unique index (`_id_` included) already holds this key for another document.
    #[error(
        "E11000 duplicate key error collection: {ns} index: {index} dup key: {}",
        fmt_key(key_value)
    )]
    DuplicateKey {
        /// Namespace.
        ns: String,
        /// The index name.
        index: String,
        /// The index's key pattern.
        key_pattern: Box<Document>,
        /// The duplicate key's values by field.
        key_value: Box<Document>,
    },
    /// A document that an index cannot hold (two indexed arrays).
    #[error("cannot index parallel arrays [{0}] [{1}]")]
    ParallelArrays(String, String),
    /// An index request that conflicts with an existing index (code 85 or 86).
    #[error("{msg}")]
    IndexConflict {
        /// 85 IndexOptionsConflict or 86 IndexKeySpecsConflict.
        code: i32,
        msg: String,
    },
    /// No such index.
    #[error("{0}")]
    IndexNotFound(String),
    /// The namespace exists already.
    #[error("Collection {0} already exists.")]
    NamespaceExists(String),
    /// The namespace does not exist.
    #[error("ns not found: {0}")]
    NamespaceNotFound(String),
    /// The operation was stopped on request (an index build whose [`BuildObserver`] said so,
    /// or a read whose [`Stop::interrupted`] did).
    #[error("operation was interrupted")]
    Interrupted,
    /// A read ran past its [`Stop::deadline`] (`maxTimeMS`).
    #[error("operation exceeded time limit")]
    TimeLimit,
    /// Stored bytes that are not a BSON document.
    #[error("stored document in {ns} is not valid BSON: {detail}")]
    BadStoredDocument {
        /// Namespace.
        ns: String,
        /// What the decoder said.
        detail: String,
    },
}

impl CollError {
    /// Whether the engine refused a key or value larger than it can store.
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            CollError::Storage(silt_storage::Error::TooLarge { .. })
        )
    }

    /// The data directory, when another process holds its lock.
    pub fn locked_dir(&self) -> Option<&Path> {
        match self {
            CollError::Storage(silt_storage::Error::Locked(p)) => Some(p),
            _ => None,
        }
    }
}

/// Shorthand.
pub type Result<T, E = CollError> = std::result::Result<T, E>;

/// `{ a: 1, b: "x" }`, as MongoDB prints a duplicate key.
pub fn fmt_key(d: &Document) -> String {
    if d.is_empty() {
        return "{}".into();
    }
    let parts: Vec<String> = d.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{ {} }}", parts.join(", "))
}

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
    /// Memory an index build may hold in keys before it spills sorted runs to disk.
    build_memory: usize,
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
    /// Each secondary index's file size (`_id_` is the collection's own tree).
    pub index_sizes: Vec<(String, u64)>,
    /// Their sum.
    pub total_index_size: u64,
}

/// What `create_indexes` did.
#[derive(Debug, Clone, Default)]
pub struct CreateIndexesOutcome {
    pub before: usize,
    pub after: usize,
    pub created_collection: bool,
    /// Specs already present (identical), skipped.
    pub existing: usize,
}

/// Keys between progress lines of an index build.
/// Where index builds spill sorted runs, under the data directory.
const SORT_TMP_DIR: &str = "_tmp";
const BUILD_PROGRESS_EVERY: u64 = 100_000;

/// Documents or keys between an index build's reports to its [`BuildObserver`].
const BUILD_REPORT_EVERY: u64 = 256;

/// Watches an index build (siltd shows it in `currentOp`) and may stop it.
pub trait BuildObserver: Sync {
    /// A phase begins: its description (MongoDB's, like `Index Build: scanning collection`)
    /// and how many units (documents, keys) it has, as far as known.
    fn phase(&self, msg: &str, total: u64);
    /// Units of the current phase done so far.
    fn progress(&self, done: u64);
    /// Whether to stop: the build then fails with [`CollError::Interrupted`] and leaves
    /// nothing behind.
    fn interrupted(&self) -> bool;
}

/// An observer that watches nothing and never interrupts.
pub struct Unobserved;

impl BuildObserver for Unobserved {
    fn phase(&self, _msg: &str, _total: u64) {}
    fn progress(&self, _done: u64) {}
    fn interrupted(&self) -> bool {
        false
    }
}

/// MongoDB's messages for the phases of an index build (`currentOp`'s `msg`).
pub const BUILD_SCANNING: &str = "Index Build: scanning collection";
/// The bulk load of the sorted keys.
pub const BUILD_INSERTING: &str = "Index Build: inserting keys from external sorter into index";

fn dict_number(name: &str) -> Option<u64> {
    name.strip_prefix("coll-")
        .or_else(|| name.strip_prefix("idx-"))
        .and_then(|s| s.parse::<u64>().ok())
}

impl Store {
    /// Open (creating if needed) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: EnvOptions, fns: UpdateRegistry) -> Result<Store> {
        // A quarter of the cache, within mongod's default of 200 MB for index builds.
        let build_memory = (opts.cache_bytes / 4).clamp(4 << 20, 200 << 20);
        let env = Env::open_with(dir, opts, fns)?;
        // Run files an index build left behind when the server stopped.
        let _ = std::fs::remove_dir_all(env.dir().join(SORT_TMP_DIR));
        let catalog = env.open_or_create(CATALOG)?;
        let mut colls = BTreeMap::new();
        let mut next = 1u64;
        let mut known: Vec<String> = Vec::new();
        for (k, v) in catalog.range(Bound::Unbounded, Bound::Unbounded)? {
            let ns = String::from_utf8_lossy(&k).into_owned();
            let meta = decode_doc(&ns, &v)?;
            let dict_name = meta.get_str("dict").unwrap_or_default().to_string();
            if let Some(n) = dict_number(&dict_name) {
                next = next.max(n + 1);
            }
            let dict = env.open_dict(&dict_name)?;
            known.push(dict_name);
            let options = meta.get_document("options").cloned().unwrap_or_default();
            let mut indexes = Vec::new();
            if let Ok(list) = meta.get_array("indexes") {
                for ix in list {
                    let Bson::Document(ix) = ix else { continue };
                    let spec = IndexSpec::parse(ix).map_err(|e| CollError::BadStoredDocument {
                        ns: ns.clone(),
                        detail: format!("index spec: {}", e.0),
                    })?;
                    let name = ix.get_str("dict").unwrap_or_default().to_string();
                    if let Some(n) = dict_number(&name) {
                        next = next.max(n + 1);
                    }
                    let idict = env.open_dict(&name)?;
                    known.push(name);
                    let mk = ix.get_bool("multikey").unwrap_or(true);
                    let coverable = ix.get_bool("coverable").unwrap_or(false);
                    indexes.push(Arc::new(Index::new(spec, idict, mk, coverable)));
                }
            }
            let c = Collection::new(ns.clone(), dict, options, indexes, catalog.clone());
            if meta.get_bool("countUncertain").unwrap_or(false) {
                c.count_uncertain.store(true, Ordering::Release);
            }
            colls.insert(ns, Arc::new(c));
        }
        // Dictionaries a crash left without a catalog entry (collections, or index builds).
        for name in env.list_dicts() {
            if (name.starts_with("coll-") || name.starts_with("idx-")) && !known.contains(&name) {
                tracing::info!(dict = %name, "dropping orphaned dictionary");
                env.drop_dict(&name)?;
            }
        }
        Ok(Store {
            env,
            catalog,
            colls: RwLock::new(colls),
            ddl: Mutex::new(()),
            next_dict: AtomicU64::new(next),
            build_memory,
        })
    }

    /// The engine environment.
    pub(crate) fn env(&self) -> &Env {
        &self.env
    }

    /// Write the log to disk and sync it (`writeConcern: {j: true}`).
    pub fn sync_log(&self) -> Result<()> {
        Ok(self.env.sync_log()?)
    }

    /// Take a checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        Ok(self.env.checkpoint()?)
    }

    /// The engine's statistics (cache, checkpoints, files).
    pub fn engine_stats(&self) -> EnvStats {
        self.env.stats()
    }

    /// Why the engine stopped writing, if it did (a failed write or sync, a worker that
    /// panicked).
    pub fn poison_cause(&self) -> Option<PoisonCause> {
        self.env.poison_cause()
    }

    /// The engine's test hooks.
    pub fn fail_points(&self) -> &FailPoints {
        self.env.fail_points()
    }

    /// Apply every pending message of collection `c` and checkpoint ([`Collection::compact`]).
    pub fn compact(&self, c: &Collection) -> Result<u64> {
        c.compact(&self.env)
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
        let c = Arc::new(Collection::new(
            ns.to_string(),
            dict,
            options,
            Vec::new(),
            self.catalog.clone(),
        ));
        c.persist_meta()?;
        self.colls.write().insert(ns.to_string(), c.clone());
        tracing::debug!(ns, dict = %dict_name, "created collection");
        Ok(c)
    }

    fn drop_dicts_of(&self, c: &Collection) -> Result<()> {
        c.live.store(false, Ordering::Release);
        self.env.drop_dict(&c.dict.name())?;
        for ix in c.indexes.read().iter() {
            self.env.drop_dict(&ix.dict().name())?;
        }
        Ok(())
    }

    /// Drop collection `ns`; false if it did not exist.
    pub fn drop_collection(&self, ns: &str) -> Result<bool> {
        let _g = self.ddl.lock();
        let Some(c) = self.colls.write().remove(ns) else {
            return Ok(false);
        };
        self.catalog.delete(ns.as_bytes())?;
        self.drop_dicts_of(&c)?;
        Ok(true)
    }

    /// Rename `from` to `to`; `drop_target` drops an existing `to` first.
    pub fn rename(&self, from: &str, to: &str, drop_target: bool) -> Result<()> {
        // Lock order everywhere: a collection's build lock, then `ddl`. Holding the build
        // lock means no writer of the old handle is in flight while the indexes move over.
        let Some(c) = self.get(from) else {
            return Err(CollError::NamespaceNotFound(from.to_string()));
        };
        let _b = c.build.write();
        let _g = self.ddl.lock();
        let mut colls = self.colls.write();
        if !colls.get(from).is_some_and(|x| Arc::ptr_eq(x, &c)) {
            return Err(CollError::NamespaceNotFound(from.to_string()));
        }
        if let Some(t) = colls.get(to).cloned() {
            if !drop_target {
                return Err(CollError::NamespaceExists(to.to_string()));
            }
            colls.remove(to);
            self.catalog.delete(to.as_bytes())?;
            self.drop_dicts_of(&t)?;
        }
        c.live.store(false, Ordering::Release);
        let options = c.options.read().clone();
        let indexes = c.indexes.read().clone();
        let nc = Arc::new(Collection::new(
            to.to_string(),
            c.dict.clone(),
            options,
            indexes,
            self.catalog.clone(),
        ));
        nc.count_uncertain
            .store(c.count_uncertain.load(Ordering::Acquire), Ordering::Release);
        nc.persist_meta()?;
        self.catalog.delete(from.as_bytes())?;
        colls.remove(from);
        colls.insert(to.to_string(), nc);
        Ok(())
    }

    /// Create indexes on `ns` (creating the collection if needed). Identical existing
    /// indexes are skipped; conflicting ones fail the whole request before anything is
    /// built. Writes to this collection wait during the build; other collections are not
    /// affected. A failed build (a unique violation) leaves no index behind.
    pub fn create_indexes(&self, ns: &str, specs: Vec<IndexSpec>) -> Result<CreateIndexesOutcome> {
        self.create_indexes_observed(ns, specs, &Unobserved)
    }

    /// [`Store::create_indexes`], reporting progress to `obs`, which may also interrupt the
    /// build (then nothing is built, and the half-built dictionaries are dropped).
    pub fn create_indexes_observed(
        &self,
        ns: &str,
        specs: Vec<IndexSpec>,
        obs: &dyn BuildObserver,
    ) -> Result<CreateIndexesOutcome> {
        let created_collection = self.get(ns).is_none();
        let c = self.get_or_create(ns)?;
        let _w = c.build.write();
        let existing = c.indexes.read().clone();
        let before = existing.len() + 1;
        let mut todo: Vec<IndexSpec> = Vec::new();
        let mut skipped = 0;
        for spec in specs {
            let id_only = spec.fields == [("_id".to_string(), false)]
                && !spec.sparse
                && spec.partial.is_none()
                && !spec.clustering;
            if spec.name == "_id_" || id_only {
                if id_only {
                    // The `_id` index always exists (it is the primary tree).
                    skipped += 1;
                    continue;
                }
                return Err(CollError::IndexConflict {
                    code: 86,
                    msg: format!(
                        "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {{ v: 2, key: {{ _id: 1 }}, name: \"_id_\" }}",
                        spec.to_doc()
                    ),
                });
            }
            let mut dup = false;
            for have in existing.iter().map(|i| &i.spec).chain(todo.iter()) {
                if have.name == spec.name {
                    if have.same_as(&spec) {
                        dup = true;
                        break;
                    }
                    let code = if have.same_key(&spec) { 85 } else { 86 };
                    return Err(CollError::IndexConflict {
                        code,
                        msg: format!(
                            "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                            spec.to_doc(),
                            have.to_doc()
                        ),
                    });
                }
                if have.same_key(&spec)
                    && have.partial.as_ref().map(|p| &p.0) == spec.partial.as_ref().map(|p| &p.0)
                {
                    if have.same_as(&spec) {
                        // Same index under another name.
                        return Err(CollError::IndexConflict {
                            code: 85,
                            msg: format!(
                                "Index already exists with a different name: {}",
                                have.name
                            ),
                        });
                    }
                    return Err(CollError::IndexConflict {
                        code: 85,
                        msg: format!(
                            "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                            spec.to_doc(),
                            have.to_doc()
                        ),
                    });
                }
            }
            if dup {
                skipped += 1;
            } else {
                todo.push(spec);
            }
        }
        let mut built: Vec<Arc<Index>> = Vec::new();
        for spec in todo {
            let name = format!("idx-{}", self.next_dict.fetch_add(1, Ordering::Relaxed));
            let r = self
                .env
                .create_dict(&name)
                .map_err(CollError::from)
                .and_then(|dict| {
                    let mk = c.build_index(
                        &spec,
                        &dict,
                        &self.env.dir().join(SORT_TMP_DIR),
                        self.build_memory,
                        obs,
                    )?;
                    Ok(Arc::new(Index::new(spec, dict, mk, true)))
                });
            match r {
                Ok(ix) => built.push(ix),
                Err(e) => {
                    let _ = self.env.drop_dict(&name);
                    for ix in built {
                        let _ = self.env.drop_dict(&ix.dict().name());
                    }
                    return Err(e);
                }
            }
        }
        let after = before + built.len();
        if !built.is_empty() {
            let _g = self.ddl.lock();
            let still = self.get(ns).is_some_and(|x| Arc::ptr_eq(&x, &c));
            if !still || !c.live.load(Ordering::Acquire) {
                for ix in built {
                    let _ = self.env.drop_dict(&ix.dict().name());
                }
                return Err(CollError::NamespaceNotFound(ns.to_string()));
            }
            c.indexes.write().extend(built);
            c.persist_meta()?;
        }
        Ok(CreateIndexesOutcome {
            before,
            after,
            created_collection,
            existing: skipped,
        })
    }

    /// Drop the named indexes of `ns` (all must exist; `_id_` is refused by the caller).
    /// Returns how many indexes there were (with `_id_`).
    pub fn drop_indexes(&self, ns: &str, names: &[String]) -> Result<usize> {
        let c = self
            .get(ns)
            .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string()))?;
        let _w = c.build.write();
        let was = c.indexes.read().len() + 1;
        for n in names {
            if !c.indexes.read().iter().any(|i| i.name() == n) {
                return Err(CollError::IndexNotFound(format!(
                    "index not found with name [{n}]"
                )));
            }
        }
        let _g = self.ddl.lock();
        let gone: Vec<Arc<Index>> = {
            let mut list = c.indexes.write();
            let (gone, keep): (Vec<_>, Vec<_>) = list
                .drain(..)
                .partition(|i| names.iter().any(|n| n == i.name()));
            *list = keep;
            gone
        };
        c.persist_meta()?;
        for ix in gone {
            self.env.drop_dict(&ix.dict().name())?;
        }
        Ok(was)
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

/// Largest index entry key (the engine's key limit): checked before anything is written.
const MAX_INDEX_KEY_BYTES: usize = silt_storage::MAX_KEY_BYTES;

fn stripe_of(parts: &[&[u8]]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    (h % STRIPES as u64) as usize
}

/// One collection: its primary dictionary, options and secondary indexes.
pub struct Collection {
    ns: String,
    dict: Dict,
    options: RwLock<Document>,
    locks: Vec<Mutex<()>>,
    /// Stripes for unique-index key prefixes (taken after the `_id` stripe, in index order).
    ukey_locks: Vec<Mutex<()>>,
    indexes: RwLock<Vec<Arc<Index>>>,
    /// Writers take it shared; an index build or drop takes it exclusively.
    build: RwLock<()>,
    catalog: Dict,
    /// False once dropped or renamed away (its catalog entry must not be written again).
    live: AtomicBool,
    meta_lock: Mutex<()>,
    /// Set while messages whose effect on the document count is unknown until they reach a
    /// leaf (fast upserts, insert-if-absent) may be pending; persisted in the catalog entry.
    count_uncertain: AtomicBool,
    /// Bumped by every such write, so `compact` clears the flag only if none came meanwhile.
    uncertain_writes: AtomicU64,
    /// Operations answered through the `_id_` index (the primary tree's `_id` order).
    id_accesses: Accesses,
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").field("ns", &self.ns).finish()
    }
}

/// The keys one index has for one version of a document.
type KeySet = Vec<(Vec<u8>, Vec<Bson>)>;

impl Collection {
    fn new(
        ns: String,
        dict: Dict,
        options: Document,
        indexes: Vec<Arc<Index>>,
        catalog: Dict,
    ) -> Collection {
        Collection {
            ns,
            dict,
            options: RwLock::new(options),
            locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            ukey_locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            indexes: RwLock::new(indexes),
            build: RwLock::new(()),
            catalog,
            live: AtomicBool::new(true),
            meta_lock: Mutex::new(()),
            count_uncertain: AtomicBool::new(false),
            uncertain_writes: AtomicU64::new(0),
            id_accesses: Accesses::default(),
        }
    }

    /// The catalog entry (the caller holds `meta_lock`).
    fn meta_doc(&self) -> Document {
        let idx: Vec<Bson> = self
            .indexes
            .read()
            .iter()
            .map(|i| Bson::Document(i.catalog_doc()))
            .collect();
        let mut meta = doc! {
            "dict": self.dict.name(),
            "options": self.options.read().clone(),
            "indexes": idx,
        };
        if self.count_uncertain.load(Ordering::Acquire) {
            meta.insert("countUncertain", true);
        }
        meta
    }

    /// Call before injecting a message whose effect on the document count is unknown: the
    /// maintained count stops being trusted until `compact` has applied every message.
    pub fn mark_count_uncertain(&self) -> Result<()> {
        self.uncertain_writes.fetch_add(1, Ordering::AcqRel);
        if !self.count_uncertain.swap(true, Ordering::AcqRel) {
            self.persist_meta()?;
        }
        Ok(())
    }

    /// Whether the engine's maintained row count is the exact document count.
    pub fn count_is_exact(&self) -> bool {
        !self.count_uncertain.load(Ordering::Acquire)
    }

    /// Write this collection's catalog entry (dictionary, options, index specs).
    fn persist_meta(&self) -> Result<()> {
        let _g = self.meta_lock.lock();
        if !self.live.load(Ordering::Acquire) {
            return Ok(());
        }
        self.catalog
            .put(self.ns.as_bytes(), &encode_doc(&self.meta_doc()))?;
        Ok(())
    }

    /// `db.coll`.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// Options given at creation.
    pub fn options(&self) -> Document {
        self.options.read().clone()
    }

    /// Operations answered through `_id_` (points or ranges of the primary tree).
    pub fn id_accesses(&self) -> &Accesses {
        &self.id_accesses
    }

    /// The primary dictionary (keys: encoded `_id`).
    pub fn dict(&self) -> &Dict {
        &self.dict
    }

    /// The secondary indexes (not `_id_`, which is the primary dictionary).
    pub fn indexes(&self) -> Vec<Arc<Index>> {
        self.indexes.read().clone()
    }

    /// The secondary index named `name`.
    pub fn index(&self, name: &str) -> Option<Arc<Index>> {
        self.indexes
            .read()
            .iter()
            .find(|i| i.name() == name)
            .cloned()
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

    /// Decode a stored document (as held by a clustering index entry).
    pub fn decode(&self, bytes: &[u8]) -> Result<Document> {
        decode_doc(&self.ns, bytes)
    }

    /// Build `spec` into the empty `dict` from the collection's documents (the caller holds
    /// `build` exclusively): generate every entry into an external sorter (spilling past
    /// `memory` bytes to run files under `tmp`), then stream the sorted entries into the bulk
    /// loader, checking uniqueness on the way. Returns whether the index is multikey.
    fn build_index(
        &self,
        spec: &IndexSpec,
        dict: &Dict,
        tmp: &Path,
        memory: usize,
        obs: &dyn BuildObserver,
    ) -> Result<bool> {
        let started = std::time::Instant::now();
        tracing::info!(ns = %self.ns, index = %spec.name, "index build: scanning collection");
        let interrupted = || {
            tracing::info!(ns = %self.ns, index = %spec.name, "index build interrupted");
            CollError::Interrupted
        };
        let io = |e: std::io::Error| {
            CollError::Storage(silt_storage::Error::Io {
                path: tmp.to_path_buf(),
                source: e,
            })
        };
        obs.phase(BUILD_SCANNING, self.estimated_count());
        let mut sorter = sorter::Sorter::new(tmp, memory).map_err(io)?;
        let mut multikey = false;
        let mut cur = self.dict.cursor(Bound::Unbounded, Bound::Unbounded);
        let mut docs = 0u64;
        let mut next_log = BUILD_PROGRESS_EVERY;
        while let Some((k, v)) = cur.next()? {
            let d = decode_doc(&self.ns, &v)?;
            let (keys, mk) = self.keys_of_spec(spec, &d)?;
            multikey |= mk;
            let val = if spec.clustering {
                v.clone()
            } else {
                spec.shape(&d)
            };
            for (p, _) in keys {
                let mut e = p;
                e.extend_from_slice(&k);
                sorter.push(e, val.clone()).map_err(io)?;
            }
            docs += 1;
            if docs.is_multiple_of(BUILD_REPORT_EVERY) {
                obs.progress(docs);
                if obs.interrupted() {
                    return Err(interrupted());
                }
            }
            if sorter.len() >= next_log {
                tracing::info!(ns = %self.ns, index = %spec.name, docs, keys = sorter.len(), runs = sorter.spilled_runs(), "index build: collecting keys");
                next_log += BUILD_PROGRESS_EVERY;
            }
        }
        obs.progress(docs);
        if obs.interrupted() {
            return Err(interrupted());
        }
        let n = sorter.len();
        tracing::info!(ns = %self.ns, index = %spec.name, docs, keys = n, runs = sorter.spilled_runs(), "index build: sorting");
        let merged = sorter.finish().map_err(io)?;
        obs.phase(BUILD_INSERTING, n);
        // The bulk loader pulls from a plain iterator: a read error, a duplicate or an
        // interruption ends the input early, and is reported once the loader returns (the
        // caller drops the half-built dictionary).
        let mut failure: Option<CollError> = None;
        let desc = spec.directions();
        let mut prev: Option<Vec<u8>> = None;
        let mut loaded = 0u64;
        let mut next_log = BUILD_PROGRESS_EVERY;
        let entries = merged.map_while(|r| {
            let (k, v) = match r {
                Ok(e) => e,
                Err(e) => {
                    failure = Some(io(e));
                    return None;
                }
            };
            if spec.unique {
                if let Some(lk) = index::prefix_len(&k, &desc) {
                    if prev.as_deref() == Some(&k[..lk]) {
                        let vals =
                            silt_bson::keyenc::decode_key(&k[..lk], &desc).unwrap_or_default();
                        failure = Some(CollError::DuplicateKey {
                            ns: self.ns.clone(),
                            index: spec.name.clone(),
                            key_pattern: Box::new(spec.key_pattern.clone()),
                            key_value: Box::new(spec.key_value_doc(&vals)),
                        });
                        return None;
                    }
                    prev = Some(k[..lk].to_vec());
                }
            }
            loaded += 1;
            if loaded.is_multiple_of(BUILD_REPORT_EVERY) {
                obs.progress(loaded);
                if obs.interrupted() {
                    failure = Some(interrupted());
                    return None;
                }
            }
            if loaded >= next_log {
                tracing::info!(ns = %self.ns, index = %spec.name, keys = loaded, of = n, "index build: inserting keys from the external sorter");
                next_log += BUILD_PROGRESS_EVERY;
            }
            Some((k, v))
        });
        let res = dict.bulk_load(entries);
        if let Some(e) = failure {
            if matches!(e, CollError::DuplicateKey { .. }) {
                tracing::info!(ns = %self.ns, index = %spec.name, "index build failed: duplicate key");
            }
            return Err(e);
        }
        res?;
        if obs.interrupted() {
            return Err(interrupted());
        }
        obs.progress(n);
        tracing::info!(ns = %self.ns, index = %spec.name, docs, keys = n, ms = started.elapsed().as_millis() as u64, "index build: done");
        Ok(multikey)
    }

    fn keys_of_spec(&self, spec: &IndexSpec, d: &Document) -> Result<(KeySet, bool)> {
        match spec.keys(d) {
            Ok(k) => Ok((k.keys, k.multikey)),
            Err(KeyError::ParallelArrays(a, b)) => Err(CollError::ParallelArrays(a, b)),
        }
    }

    /// A cursor over documents in `_id` order between encoded bounds.
    pub fn scan(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> DocCursor {
        DocCursor {
            ns: self.ns.clone(),
            inner: self.dict.cursor(lo, hi),
        }
    }

    /// Apply every pending message of the collection and its indexes to the leaves (the
    /// engine's optimize), so that reads meet no buffered work and the maintained count is
    /// exact. Returns the file bytes freed by the checkpoint that follows, if any.
    pub(crate) fn compact(&self, env: &Env) -> Result<u64> {
        let dicts: Vec<Dict> = std::iter::once(self.dict.clone())
            .chain(self.indexes.read().iter().map(|i| i.dict().clone()))
            .collect();
        let before: u64 = dicts.iter().map(|d| d.stats().file_allocated_bytes).sum();
        let marks = self.uncertain_writes.load(Ordering::Acquire);
        for d in &dicts {
            d.optimize()?;
        }
        // Every message injected before the optimize has reached a leaf: the maintained
        // count is exact again, unless an uncertain write came in meanwhile.
        if self.uncertain_writes.load(Ordering::Acquire) == marks
            && self.count_uncertain.swap(false, Ordering::AcqRel)
        {
            self.persist_meta()?;
            if self.uncertain_writes.load(Ordering::Acquire) != marks {
                self.count_uncertain.store(true, Ordering::Release);
                self.persist_meta()?;
            }
        }
        env.checkpoint()?;
        let after: u64 = dicts.iter().map(|d| d.stats().file_allocated_bytes).sum();
        Ok(before.saturating_sub(after))
    }

    /// Count of documents, maintained by the engine: O(1). Writes through [`Collection`]
    /// keep it exact; documents created by update messages (fast upserts) or skipped by
    /// insert-if-absent messages are accounted when their messages reach a leaf.
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
        let index_sizes: Vec<(String, u64)> = self
            .indexes
            .read()
            .iter()
            .map(|i| (i.name().to_string(), i.dict().stats().file_bytes))
            .collect();
        CollStats {
            count: s.rows,
            size: s.data_bytes,
            storage_size: s.file_bytes,
            total_index_size: index_sizes.iter().map(|(_, n)| n).sum(),
            index_sizes,
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
        t.total_index_size += s.total_index_size;
        t.index_sizes.extend(s.index_sizes);
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

    fn spec(d: Document) -> IndexSpec {
        IndexSpec::parse(&d).unwrap()
    }

    fn vals(s: &IndexSpec, d: Document) -> Vec<Vec<Bson>> {
        s.keys(&d)
            .unwrap()
            .keys
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    #[test]
    fn key_generation_follows_mongodb() {
        let a = spec(doc! {"key": {"a": 1}});
        assert_eq!(a.name, "a_1");
        assert_eq!(vals(&a, doc! {"a": 5}), vec![vec![Bson::Int32(5)]]);
        assert_eq!(vals(&a, doc! {"b": 5}), vec![vec![Bson::Null]]);
        // Multikey: one key per distinct element; an empty array is undefined.
        let k = a.keys(&doc! {"a": [1, 2, 2, 1.0]}).unwrap();
        assert!(k.multikey);
        assert_eq!(k.keys.len(), 2);
        assert_eq!(vals(&a, doc! {"a": []}), vec![vec![Bson::Undefined]]);
        // Dotted paths through arrays of documents.
        let ab = spec(doc! {"key": {"a.b": 1}});
        let mut got = vals(&ab, doc! {"a": [{"b": 1}, {"b": [2, 3]}, {"c": 1}]});
        got.sort_by(|x, y| silt_bson::cmp_values(&x[0], &y[0]));
        assert_eq!(got.len(), 4);
        // Compound with one array: the product; with two: parallel arrays.
        let c = spec(doc! {"key": {"a": 1, "b": -1}});
        assert_eq!(c.name, "a_1_b_-1");
        assert_eq!(vals(&c, doc! {"a": [1, 2], "b": "x"}).len(), 2);
        assert!(matches!(
            c.keys(&doc! {"a": [1], "b": [2]}),
            Err(KeyError::ParallelArrays(x, y)) if x == "a" && y == "b"
        ));
        // Descending components order in reverse.
        let (k1, k2) = (
            c.keys(&doc! {"a": 1, "b": 1}).unwrap().keys[0].0.clone(),
            c.keys(&doc! {"a": 1, "b": 2}).unwrap().keys[0].0.clone(),
        );
        assert!(k1 > k2);
        // Sparse: skipped only when every field is missing.
        let sp = spec(doc! {"key": {"a": 1, "b": 1}, "sparse": true});
        assert!(sp.keys(&doc! {"c": 1}).unwrap().keys.is_empty());
        assert_eq!(
            vals(&sp, doc! {"b": 1}),
            vec![vec![Bson::Null, Bson::Int32(1)]]
        );
        // Partial: only documents matching the filter.
        let p = spec(doc! {"key": {"a": 1}, "partialFilterExpression": {"x": {"$gt": 5}}});
        assert!(p.keys(&doc! {"a": 1, "x": 1}).unwrap().keys.is_empty());
        assert_eq!(p.keys(&doc! {"a": 1, "x": 9}).unwrap().keys.len(), 1);
        assert!(IndexSpec::parse(&doc! {"key": {"a": "text"}}).is_err());
        assert!(IndexSpec::parse(&doc! {"key": {"a": 0}}).is_err());
    }

    fn entries(c: &Collection, name: &str) -> Vec<(Vec<Bson>, Bson)> {
        let ix = c.index(name).unwrap();
        let mut cur = ix.dict().cursor(Bound::Unbounded, Bound::Unbounded);
        let mut out = Vec::new();
        while let Some((k, _)) = cur.next().unwrap() {
            let id = silt_bson::keyenc::decode_value(ix.entry_id_key(&k).unwrap())
                .unwrap()
                .0;
            out.push((ix.entry_values(&k).unwrap(), id));
        }
        out
    }

    #[test]
    fn builds_larger_than_their_memory_spill_and_merge() {
        let dir = tempfile::tempdir().unwrap();
        // An 8 MiB cache gives index builds 4 MiB: 120,000 entries of a clustering index
        // (each holding its document) need several runs.
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let c = s.get_or_create("db.big").unwrap();
        let n = 120_000i64;
        for i in 0..n {
            let a = (i * 7919) % n;
            c.insert(&doc! {"_id": i, "a": a, "u": i, "pad": "p".repeat(40)})
                .unwrap();
        }
        s.create_indexes(
            "db.big",
            vec![
                spec(doc! {"key": {"a": 1}, "name": "a_1", "clustering": true}),
                spec(doc! {"key": {"u": -1}, "name": "u_-1", "unique": true}),
            ],
        )
        .unwrap();
        // Index keys hold numbers by value (an int64 that fits comes back as an int32).
        let num = |b: &Bson| match b {
            Bson::Int32(x) => i64::from(*x),
            Bson::Int64(x) => *x,
            other => panic!("{other:?}"),
        };
        let a = entries(&c, "a_1");
        assert_eq!(a.len(), n as usize);
        for (j, (vals, id)) in a.iter().enumerate() {
            assert_eq!(num(&vals[0]), j as i64);
            assert_eq!(num(id) * 7919 % n, j as i64);
        }
        let u = entries(&c, "u_-1");
        let us: Vec<i64> = u.iter().map(|(v, _)| num(&v[0])).collect();
        assert_eq!(us, (0..n).rev().collect::<Vec<_>>());
        // A duplicate far from its twin is found in the merge, and nothing is left behind.
        c.insert(&doc! {"_id": n, "a": 5i64, "u": n}).unwrap();
        let e = s
            .create_indexes(
                "db.big",
                vec![spec(
                    doc! {"key": {"a": -1}, "name": "a_-1", "unique": true},
                )],
            )
            .unwrap_err();
        assert!(matches!(e, CollError::DuplicateKey { .. }), "{e:?}");
        assert!(c.index("a_-1").is_none());
        let tmp = dir.path().join(SORT_TMP_DIR);
        assert_eq!(std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0), 0);
    }

    #[test]
    fn maintenance_unique_build_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
            let c = s.get_or_create("db.c").unwrap();
            for i in 0..100 {
                c.insert(&doc! {"_id": i, "a": i % 10, "u": i}).unwrap();
            }
            // Build on existing data.
            let out = s
                .create_indexes(
                    "db.c",
                    vec![
                        spec(doc! {"key": {"a": 1}}),
                        spec(doc! {"key": {"u": 1}, "unique": true}),
                        spec(doc! {"key": {"t": 1}, "clustering": true}),
                    ],
                )
                .unwrap();
            assert_eq!((out.before, out.after), (1, 4));
            assert_eq!(entries(&c, "a_1").len(), 100);
            // A unique build over duplicates fails and leaves nothing.
            let e = s.create_indexes(
                "db.c",
                vec![spec(doc! {"key": {"a": -1}, "unique": true, "name": "ua"})],
            );
            assert!(matches!(e, Err(CollError::DuplicateKey { .. })));
            assert!(c.index("ua").is_none());
            // Insert: a unique violation writes nothing anywhere.
            let e = c.insert(&doc! {"_id": 500, "a": 77, "u": 5});
            assert!(matches!(e, Err(CollError::DuplicateKey { ref index, .. }) if index == "u_1"));
            assert!(c.get(&Bson::Int32(500)).unwrap().is_none());
            assert!(!entries(&c, "a_1")
                .iter()
                .any(|(v, _)| v[0] == Bson::Int32(77)));
            // Update moves keys; delete removes them.
            let key = id_key(&Bson::Int32(3));
            let old = c.get_by_key(&key).unwrap().unwrap();
            let new = doc! {"_id": 3, "a": [40, 41], "u": 3, "t": "x"};
            c.replace(&c.lock_doc(key.clone()), &old, &new).unwrap();
            let a = entries(&c, "a_1");
            assert_eq!(a.iter().filter(|(_, id)| *id == Bson::Int32(3)).count(), 2);
            assert!(c.index("a_1").unwrap().is_multikey());
            let t = entries(&c, "t_1");
            assert!(t.contains(&(vec![Bson::String("x".into())], Bson::Int32(3))));
            let old = c.get_by_key(&key).unwrap().unwrap();
            let moved = doc! {"_id": 3, "a": 1, "u": 4};
            assert!(matches!(
                c.replace(&c.lock_doc(key.clone()), &old, &moved),
                Err(CollError::DuplicateKey { .. })
            ));
            assert_eq!(c.get_by_key(&key).unwrap().unwrap(), old);
            c.delete(&c.lock_doc(key.clone()), &old).unwrap();
            assert!(!entries(&c, "a_1")
                .iter()
                .any(|(_, id)| *id == Bson::Int32(3)));
            assert_eq!(entries(&c, "t_1").len(), 99);
            // Drop one index.
            assert_eq!(s.drop_indexes("db.c", &["t_1".to_string()]).unwrap(), 4);
            s.close().unwrap();
        }
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let c = s.get("db.c").unwrap();
        let names: Vec<String> = c.indexes().iter().map(|i| i.name().to_string()).collect();
        assert_eq!(names, vec!["a_1".to_string(), "u_1".to_string()]);
        assert!(c.index("a_1").unwrap().is_multikey());
        assert!(!c.index("u_1").unwrap().is_multikey());
        assert_eq!(entries(&c, "u_1").len(), 99);
        assert!(matches!(
            c.insert(&doc! {"_id": 1000, "u": 7}),
            Err(CollError::DuplicateKey { .. })
        ));
        s.rename("db.c", "db.d", false).unwrap();
        let d = s.get("db.d").unwrap();
        assert_eq!(d.indexes().len(), 2);
        assert!(s.drop_collection("db.d").unwrap());
        assert!(!s.env().list_dicts().iter().any(|n| n.starts_with("idx-")));
    }

    /// The document with every sub-document's fields sorted (covered documents follow the
    /// key pattern's order, projections the document's), as BSON bytes: equal when the
    /// values and their types are.
    fn canonical(d: &Document) -> Vec<u8> {
        fn sort(v: &Bson) -> Bson {
            match v {
                Bson::Document(d) => {
                    let mut kv: Vec<(String, Bson)> =
                        d.iter().map(|(k, v)| (k.clone(), sort(v))).collect();
                    kv.sort_by(|a, b| a.0.cmp(&b.0));
                    Bson::Document(kv.into_iter().collect())
                }
                Bson::Array(a) => Bson::Array(a.iter().map(sort).collect()),
                other => other.clone(),
            }
        }
        let mut out = Vec::new();
        if let Bson::Document(d) = sort(&Bson::Document(d.clone())) {
            d.to_writer(&mut out).unwrap();
        }
        out
    }

    /// Each entry rebuilt by `covered_doc` is the document projected on the index's fields
    /// (types, nulls and missing fields included), or `None` for the documents an entry
    /// cannot stand for; shapes follow updates that keep the key.
    fn check_covered(c: &Collection, name: &str, docs: &[Document]) {
        let ix = c.index(name).unwrap();
        let mut spec = doc! {};
        for (f, _) in &ix.spec.fields {
            // {n: 1, "n.y": 1} is a path collision: `n` holds `n.y`.
            if !ix
                .spec
                .fields
                .iter()
                .any(|(g, _)| g != f && silt_bson::path::path_covers(g, f))
            {
                spec.insert(f.clone(), 1);
            }
        }
        let proj = silt_query::projection::Projection::new(&spec).unwrap();
        let mut cur = ix.dict().cursor(Bound::Unbounded, Bound::Unbounded);
        let mut seen = 0;
        while let Some((k, v)) = cur.next().unwrap() {
            let id = silt_bson::keyenc::decode_value(ix.entry_id_key(&k).unwrap())
                .unwrap()
                .0;
            let d = docs
                .iter()
                .find(|d| silt_bson::compare::values_equal(d.get("_id").unwrap(), &id))
                .unwrap();
            let want = proj.apply(d, None).unwrap();
            match ix.covered_doc(&k, &v) {
                Some(got) => assert_eq!(canonical(&got), canonical(&want), "{d}: {got}"),
                None => {
                    let dotted_missing = ix
                        .spec
                        .fields
                        .iter()
                        .any(|(f, _)| f.contains('.') && index::tests_value_at(d, f).is_none());
                    let arrays = ix.spec.keys(d).unwrap().multikey;
                    assert!(dotted_missing || arrays, "{d} not covered");
                }
            }
            seen += 1;
        }
        assert!(seen >= docs.len() || ix.is_multikey());
    }

    fn mixed_value() -> impl proptest::strategy::Strategy<Value = Option<Bson>> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            (-1i32..2).prop_map(Bson::Int32),
            (-1i64..2).prop_map(Bson::Int64),
            Just(Bson::Int64(1 << 40)),
            (-2i32..4).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
            Just(Bson::Double(-0.0)),
            Just(Bson::Double(f64::NAN)),
            Just(Bson::Decimal128("2.50".parse().unwrap())),
            "[ab]{0,2}".prop_map(Bson::String),
            "[ab]{0,1}".prop_map(Bson::Symbol),
            Just(Bson::Null),
            any::<bool>().prop_map(Bson::Boolean),
        ];
        let nested =
            (leaf.clone(), leaf.clone()).prop_map(|(x, y)| Bson::Document(doc! {"x": x, "y": y}));
        prop_oneof![
            3 => leaf.prop_map(Some),
            1 => nested.prop_map(Some),
            1 => Just(Some(Bson::Int32(7))).prop_map(|_| Some(Bson::Document(doc! {"y": 1}))),
            1 => Just(None),
        ]
    }

    #[test]
    fn shapes_follow_updates_that_keep_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        s.create_indexes("db.c", vec![spec(doc! {"key": {"a": 1}})])
            .unwrap();
        let c = s.get("db.c").unwrap();
        let mut d = doc! {"_id": 1, "a": 1};
        c.insert(&d).unwrap();
        for v in [Bson::Int64(1), Bson::Double(1.0), Bson::Int32(1)] {
            let old = d.clone();
            d.insert("a", v);
            c.replace(&c.lock_doc(id_key(&Bson::Int32(1))), &old, &d)
                .unwrap();
            check_covered(&c, "a_1", std::slice::from_ref(&d));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        #[test]
        fn covered_docs_equal_projections(
            rows in proptest::collection::vec(
                (mixed_value(), mixed_value(), mixed_value()), 1..20),
            retype in proptest::collection::vec(mixed_value(), 20),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
            let c = s.get_or_create("db.c").unwrap();
            let mut docs = Vec::new();
            for (i, (a, b, n)) in rows.into_iter().enumerate() {
                let id = if i % 3 == 0 { Bson::Int64(i as i64) } else { Bson::Int32(i as i32) };
                let mut d = doc! {"_id": id};
                for (k, v) in [("a", a), ("b", b), ("n", n)] {
                    if let Some(v) = v {
                        d.insert(k, v);
                    }
                }
                c.insert(&d).unwrap();
                docs.push(d);
            }
            s.create_indexes("db.c", vec![
                spec(doc! {"key": {"a": 1}}),
                spec(doc! {"key": {"a": -1, "b": 1}}),
                spec(doc! {"key": {"n.x": 1, "b": -1}}),
                spec(doc! {"key": {"n": 1, "n.y": 1}}),
            ]).unwrap();
            // Updates after the build: new values (often equal as keys, of another type).
            for (d, v) in docs.iter_mut().zip(retype) {
                let key = id_key(d.get("_id").unwrap());
                let old = d.clone();
                match v {
                    Some(v) => { d.insert("a", v); }
                    None => { d.remove("a"); }
                }
                c.replace(&c.lock_doc(key.clone()), &old, d).unwrap();
            }
            for name in ["a_1", "a_-1_b_1", "n.x_1_b_-1", "n_1_n.y_1"] {
                check_covered(&c, name, &docs);
            }
        }
    }

    #[test]
    fn concurrent_unique_inserts_admit_one() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        s.create_indexes("db.c", vec![spec(doc! {"key": {"u": 1}, "unique": true})])
            .unwrap();
        let c = s.get("db.c").unwrap();
        for round in 0..20 {
            let ok = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|sc| {
                for t in 0..4 {
                    let (c, ok) = (&c, &ok);
                    sc.spawn(move || {
                        if c.insert(&doc! {"_id": round * 10 + t, "u": round}).is_ok() {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            });
            assert_eq!(ok.load(Ordering::Relaxed), 1);
        }
        assert_eq!(entries(&c, "u_1").len(), 20);
        assert_eq!(c.count().unwrap(), 20);
    }

    /// Records phases and progress; interrupts once `stop_at` units of phase `stop_phase`
    /// are done.
    struct Watch {
        seen: Mutex<Vec<(String, u64, u64)>>,
        stop: Option<(&'static str, u64)>,
    }

    impl BuildObserver for Watch {
        fn phase(&self, msg: &str, total: u64) {
            self.seen.lock().push((msg.to_string(), total, 0));
        }
        fn progress(&self, done: u64) {
            if let Some(last) = self.seen.lock().last_mut() {
                last.2 = done;
            }
        }
        fn interrupted(&self) -> bool {
            let seen = self.seen.lock();
            let last = seen.last();
            self.stop
                .is_some_and(|(p, n)| last.is_some_and(|l| l.0 == p && l.2 >= n))
        }
    }

    #[test]
    fn builds_report_progress_and_stop_when_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let c = s.get_or_create("db.c").unwrap();
        for i in 0..3000 {
            c.insert(&doc! {"_id": i, "a": i % 17}).unwrap();
        }
        let dicts = s.env().list_dicts().len();
        for stop in [BUILD_SCANNING, BUILD_INSERTING] {
            let w = Watch {
                seen: Mutex::new(Vec::new()),
                stop: Some((stop, 1000)),
            };
            let r = s.create_indexes_observed("db.c", vec![spec(doc! {"key": {"a": 1}})], &w);
            assert!(matches!(r, Err(CollError::Interrupted)), "{stop}");
            assert!(c.index("a_1").is_none());
            assert_eq!(
                s.env().list_dicts().len(),
                dicts,
                "half-built index dropped"
            );
        }
        let w = Watch {
            seen: Mutex::new(Vec::new()),
            stop: None,
        };
        s.create_indexes_observed("db.c", vec![spec(doc! {"key": {"a": 1}})], &w)
            .unwrap();
        let seen = w.seen.lock().clone();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0, BUILD_SCANNING);
        assert_eq!(seen[0].2, 3000);
        assert_eq!(
            (seen[1].0.as_str(), seen[1].1, seen[1].2),
            (BUILD_INSERTING, 3000, 3000)
        );
        assert_eq!(entries(&c, "a_1").len(), 3000);
    }

    #[test]
    fn a_build_blocks_only_its_own_collection() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let a = s.get_or_create("db.a").unwrap();
        let b = s.get_or_create("db.b").unwrap();
        // What an index build holds for its whole duration.
        let held = a.build.write();
        b.insert(&doc! {"_id": 1}).unwrap();
        s.get_or_create("db.new")
            .unwrap()
            .insert(&doc! {"_id": 1})
            .unwrap();
        assert!(a.get(&Bson::Int32(1)).unwrap().is_none()); // reads go on
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                a.insert(&doc! {"_id": 1}).unwrap();
                done.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(
                !done.load(Ordering::SeqCst),
                "a write to the building collection waits"
            );
            drop(held);
        });
        assert!(done.load(Ordering::SeqCst));
    }
}
