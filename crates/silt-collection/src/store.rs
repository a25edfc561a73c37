//! The store: every collection of every database over one engine environment, and the
//! catalog that names them (one engine dictionary, `_catalog`, mapping each namespace
//! `db.coll` to its dictionary, options and index specs). Creating, dropping and renaming
//! collections; what the server needs of the engine (log sync, checkpoints, statistics,
//! poison state, fail points).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};
use parking_lot::{Mutex, RwLock};
use silt_storage::{Dict, Env, EnvOptions, EnvStats, FailPoints, PoisonCause, UpdateRegistry};

use crate::build::SORT_TMP_DIR;
use crate::catalog::{dict_number, load_collections, sweep_orphans, CATALOG};
use crate::collection::Layout;
use crate::oplog::{Entries, Oplog, OplogOptions, OPLOG_NS};
use crate::partition::CrashPoints;
use crate::{CollError, Collection, Index, IndexSpec, Result, Transaction, TxnKind};

/// Every collection of every database, over one engine environment.
pub struct Store {
    pub(crate) env: Env,
    pub(crate) catalog: Dict,
    pub(crate) colls: RwLock<BTreeMap<String, Arc<Collection>>>,
    /// Serialises catalog changes (create, drop, rename); data operations never take it.
    pub(crate) ddl: Mutex<()>,
    pub(crate) next_dict: AtomicU64,
    /// Memory an index build may hold in keys before it spills sorted runs to disk.
    pub(crate) build_memory: usize,
    /// Test hooks that end the process in the middle of a partition change.
    pub(crate) crash_points: CrashPoints,
    /// The oplog, on a replica-set member.
    pub(crate) oplog: Option<Arc<Oplog>>,
    /// Collections created inside transactions that have not committed (`created.rs`).
    pub(crate) pending: Arc<crate::created::Pending>,
    /// Held by what replaces or reshapes the store's dictionaries wholesale: installing an
    /// image (`image.rs`) and the oplog's maintenance. Taken before `ddl`.
    pub(crate) swap: Mutex<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.env.dir())
            .finish()
    }
}

impl Store {
    /// Open (creating if needed) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: EnvOptions, fns: UpdateRegistry) -> Result<Store> {
        Store::open_with_oplog(dir, opts, fns, None)
    }

    /// Open (creating if needed) the store in `dir`, keeping an oplog (`oplog.rs`) when
    /// `oplog` is given: a replica-set member's. Without it an existing oplog is left as it
    /// is (a member restarted standalone), and nothing is logged.
    pub fn open_with_oplog(
        dir: impl AsRef<Path>,
        opts: EnvOptions,
        fns: UpdateRegistry,
        oplog: Option<OplogOptions>,
    ) -> Result<Store> {
        let build_memory = build_memory(&opts);
        let env = Env::open_with(dir, opts, fns)?;
        Store::over(env, build_memory, oplog)
    }

    /// [`Store::open_with_oplog`] on a storage interface of the engine's own (its simulated
    /// disk, which can lose power): for crash tests.
    #[cfg(test)]
    pub(crate) fn open_on(
        vfs: Arc<dyn silt_storage::vfs::Vfs>,
        dir: impl AsRef<Path>,
        opts: EnvOptions,
        fns: UpdateRegistry,
        oplog: Option<OplogOptions>,
    ) -> Result<Store> {
        let build_memory = build_memory(&opts);
        let env = Env::open_on(vfs, dir, opts, fns)?;
        Store::over(env, build_memory, oplog)
    }

    /// Stop as a killed process would: no checkpoint, no final log sync (crash tests).
    #[cfg(test)]
    pub(crate) fn simulate_crash(self) {
        drop(self.colls);
        drop(self.catalog);
        drop(self.oplog);
        self.env.simulate_crash();
    }

    /// The store over the opened environment `env`.
    fn over(env: Env, build_memory: usize, oplog: Option<OplogOptions>) -> Result<Store> {
        // Run files an index build left behind when the server stopped.
        let _ = std::fs::remove_dir_all(env.dir().join(SORT_TMP_DIR));
        let catalog = env.open_or_create(CATALOG)?;
        crate::image::redo_install(&env, &catalog)?;
        // Above every dictionary number in use, so the oplog can take one before the
        // catalog's collections are read.
        let mut next = env
            .list_dicts()
            .iter()
            .filter_map(|n| dict_number(n))
            .max()
            .map_or(1, |n| n + 1);
        let mut known: Vec<String> = Oplog::dicts_named(&catalog)?;
        let oplog = match oplog {
            Some(o) => {
                let counter = AtomicU64::new(next);
                let name = || format!("oplog-{}", counter.fetch_add(1, Ordering::Relaxed));
                let log = Oplog::open(&env, &catalog, o, &name)?;
                next = counter.load(Ordering::Relaxed);
                known = Oplog::dicts_named(&catalog)?;
                Some(Arc::new(log))
            }
            None => None,
        };
        let colls = load_collections(&env, &catalog, oplog.as_ref(), &mut next, &mut known)?;
        sweep_orphans(&env, &known)?;
        Ok(Store {
            env,
            catalog,
            colls: RwLock::new(colls),
            ddl: Mutex::new(()),
            next_dict: AtomicU64::new(next),
            build_memory,
            crash_points: CrashPoints::default(),
            oplog,
            pending: Arc::default(),
            swap: Mutex::new(()),
        })
    }

    /// The collection `ns` for a write by `w`, created if missing. A multi-document
    /// transaction's creation is hidden from listings until it commits, and dropped if it
    /// does not (`created.rs`).
    pub fn get_or_create_for(&self, ns: &str, w: crate::Writer<'_>) -> Result<Arc<Collection>> {
        if let Some(c) = self.get(ns) {
            return Ok(c);
        }
        self.refuse_oplog_write(ns)?;
        match w.txn().filter(|t| t.is_multi()) {
            Some(t) => match self.create(ns, Document::new()) {
                Ok(c) => {
                    t.note_created(&self.pending, ns);
                    Ok(c)
                }
                Err(CollError::NamespaceExists(_)) => self
                    .get(ns)
                    .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string())),
                Err(e) => Err(e),
            },
            None => self.get_or_create(ns),
        }
    }

    /// [`Store::create`] for writer `w`: inside a multi-document transaction the collection
    /// is hidden from listings until it commits, and dropped if it does not.
    pub fn create_for(
        &self,
        ns: &str,
        options: Document,
        w: crate::Writer<'_>,
    ) -> Result<Arc<Collection>> {
        let c = self.create(ns, options)?;
        if let Some(t) = w.txn().filter(|t| t.is_multi()) {
            t.note_created(&self.pending, ns);
        }
        Ok(c)
    }

    /// Whether `ns` is a collection a transaction is creating (hidden from others until it
    /// commits).
    pub fn is_hidden(&self, ns: &str) -> bool {
        self.pending.hides(ns)
    }

    /// Drop the collections that transactions created and did not commit, unless another
    /// writer put a document in one meanwhile (then it stays). Run once a second.
    pub fn drop_abandoned(&self) -> Result<()> {
        for ns in self.pending.take_abandoned() {
            if let Some(c) = self.get(&ns) {
                if c.count()? == 0 {
                    self.drop_collection(&ns)?;
                }
            }
            self.pending.forget(&ns);
        }
        Ok(())
    }

    /// A client's write into the oplog (20 IllegalOperation): only the server writes it.
    fn refuse_oplog_write(&self, ns: &str) -> Result<()> {
        if ns == OPLOG_NS && self.oplog.is_some() {
            return Err(CollError::Refused {
                code: 20,
                msg: format!("cannot write to '{OPLOG_NS}': the oplog is written by the server"),
            });
        }
        Ok(())
    }

    /// The oplog, on a replica-set member.
    pub fn oplog(&self) -> Option<&Arc<Oplog>> {
        self.oplog.as_ref()
    }

    /// The oplog's periodic work (run once a second): a no-op entry when idle, a new
    /// partition when the newest is full, and trimming. Returns the partitions dropped.
    pub fn maintain_oplog(&self) -> Result<usize> {
        let Some(log) = &self.oplog else {
            return Ok(0);
        };
        let _swap = self.swap.lock();
        let name = || self.new_dict_name("oplog");
        log.maintain(&self.env, &name)
    }

    /// Begin a transaction of `kind` over every collection of the store, whose writes wait
    /// at most `wait` for a document another transaction holds (see [`Transaction`]: its
    /// writes go through a [`crate::Writer`] that names it, its reads through
    /// [`crate::MatchSource::new_at`] with its snapshot).
    pub fn begin(&self, kind: TxnKind, wait: Duration) -> Result<Transaction> {
        Ok(Transaction::new(
            self.env.begin()?,
            kind,
            wait,
            self.oplog.clone(),
        ))
    }

    /// A snapshot of every collection, as of now (a snapshot read's).
    pub fn snapshot(&self) -> crate::Snapshot {
        crate::Snapshot::new(self.env.snapshot())
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

    /// Test hooks that end the process in the middle of a partition change.
    pub fn crash_points(&self) -> &CrashPoints {
        &self.crash_points
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
        self.refuse_oplog_write(ns)?;
        match self.create(ns, Document::new()) {
            Ok(c) => Ok(c),
            Err(CollError::NamespaceExists(_)) => self
                .get(ns)
                .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Create collection `ns` with `options` (`partitioned: true` makes it a partitioned
    /// collection with one partition; the caller has checked the other options).
    pub fn create(&self, ns: &str, options: Document) -> Result<Arc<Collection>> {
        self.create_as(ns, options, bson::Uuid::new())
    }

    /// The collection whose UUID is `uuid`, under whatever name it has now.
    pub fn by_uuid(&self, uuid: bson::Uuid) -> Option<Arc<Collection>> {
        self.colls
            .read()
            .values()
            .find(|c| c.uuid() == uuid)
            .cloned()
    }

    /// [`Store::create`] with a given UUID (applying a `create` entry keeps its UUID, so the
    /// later entries that name it find it).
    pub(crate) fn create_as(
        &self,
        ns: &str,
        options: Document,
        uuid: bson::Uuid,
    ) -> Result<Arc<Collection>> {
        let _g = self.ddl.lock();
        if self.colls.read().contains_key(ns) {
            return Err(CollError::NamespaceExists(ns.to_string()));
        }
        if ns == OPLOG_NS && self.oplog.is_some() {
            // The oplog exists (the server writes it; it is no collection of this map).
            return Err(CollError::NamespaceExists(ns.to_string()));
        }
        let dict_name = self.new_dict_name("coll");
        let dict = self.env.create_counted_dict(&dict_name)?;
        let layout = if options.get_bool("partitioned").unwrap_or(false) {
            crate::partition::first_layout(dict)
        } else {
            Layout::single(dict)
        };
        // Under a primary key other than `_id`, `_id` is found through a unique `_id_` index.
        // Under a default collation too: that index holds collation keys, so `_id`s equal
        // under the collation collide, and string `_id`s are found as the collation says.
        let mut indexes = Vec::new();
        let collated = options.contains_key("collation");
        if !crate::PrimaryKey::of_options(&options)?.is_id() || collated {
            let mut id_spec = doc! {"key": {"_id": 1}, "name": "_id_", "unique": true};
            if let Some(c) = options.get("collation") {
                id_spec.insert("collation", c.clone());
            }
            let spec = IndexSpec::parse(&id_spec)
                .map_err(|e| CollError::Storage(silt_storage::Error::InvalidArgument(e.0)))?;
            let ixd = self.env.create_counted_dict(&self.new_dict_name("idx"))?;
            let first = &layout.primary.members()[0];
            let parts = crate::parts::Parts::new(vec![crate::parts::Member {
                id: first.id,
                max: first.max.clone(),
                dict: ixd,
            }])?;
            indexes.push(Arc::new(Index::new(spec, parts, false, true)));
        }
        let c = Collection::new(
            ns.to_string(),
            uuid,
            layout,
            options,
            indexes,
            self.catalog.clone(),
            self.oplog.as_ref(),
        );
        let mut o = c.options.read().clone();
        o.insert(
            "idIndex",
            doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
        );
        c.persist_meta_logged(&[c.ddl_op("create", o)])?;
        self.colls.write().insert(ns.to_string(), c.clone());
        tracing::debug!(ns, dict = %dict_name, "created collection");
        Ok(c)
    }

    /// A fresh engine dictionary name, `coll-N` or `idx-N`.
    pub(crate) fn new_dict_name(&self, kind: &str) -> String {
        format!("{kind}-{}", self.next_dict.fetch_add(1, Ordering::Relaxed))
    }

    fn drop_dicts_of(&self, c: &Collection) -> Result<()> {
        c.live.store(false, Ordering::Release);
        for d in c.layout().primary.dicts() {
            self.env.drop_dict(&d.name())?;
        }
        for ix in c.indexes.read().iter() {
            for d in ix.parts().dicts() {
                self.env.drop_dict(&d.name())?;
            }
        }
        Ok(())
    }

    /// Drop collection `ns`; false if it did not exist.
    pub fn drop_collection(&self, ns: &str) -> Result<bool> {
        let _g = self.ddl.lock();
        let Some(c) = self.colls.write().remove(ns) else {
            return Ok(false);
        };
        let mut batch = silt_storage::WriteBatch::new();
        batch.delete(&self.catalog, ns.as_bytes())?;
        let committed = match &c.oplog {
            Some(log) => {
                let mut op = c.ddl_op("drop", Document::new());
                op.0.insert(
                    "o2",
                    doc! { "numRecords": i64::try_from(c.estimated_count()).unwrap_or(i64::MAX) },
                );
                log.commit_logged(batch, Entries::each(vec![op]), |b| Ok(b.commit()?))
            }
            None => batch.commit().map_err(Into::into),
        };
        if let Err(e) = committed {
            // Not dropped (on a multi-member set: not replicated): the collection stays.
            self.colls.write().insert(ns.to_string(), c);
            return Err(e);
        }
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
        let target = colls.get(to).cloned();
        if target.is_some() && !drop_target {
            return Err(CollError::NamespaceExists(to.to_string()));
        }
        c.live.store(false, Ordering::Release);
        let options = c.options.read().clone();
        let indexes = c.indexes.read().clone();
        let nc = Collection::new(
            to.to_string(),
            c.uuid(),
            (*c.layout()).clone(),
            options,
            indexes,
            self.catalog.clone(),
            self.oplog.as_ref(),
        );
        nc.count_uncertain
            .store(c.count_uncertain.load(Ordering::Acquire), Ordering::Release);
        // One log record: after a crash the catalog names the collection under `from` or
        // under `to` (replacing the target), never both. The target's dictionaries are dropped
        // after; if that is cut short they are orphans, dropped at the next open.
        let mut batch = silt_storage::WriteBatch::new();
        batch.put(
            &self.catalog,
            to.as_bytes(),
            &crate::encode_doc(&nc.meta_doc()),
        )?;
        batch.delete(&self.catalog, from.as_bytes())?;
        match c.oplog.as_ref().or(nc.oplog.as_ref()) {
            Some(log) => {
                let mut o = doc! { "renameCollection": from, "to": to, "stayTemp": false };
                o.insert(
                    "dropTarget",
                    target
                        .as_ref()
                        .map_or(Bson::Boolean(false), |t| Bson::from(t.uuid())),
                );
                let db = from.split_once('.').map_or(from, |(d, _)| d);
                let op = crate::oplog::Op::command(db, Some(c.uuid()), o);
                log.commit_logged(batch, Entries::each(vec![op]), |b| Ok(b.commit()?))?;
            }
            None => batch.commit()?,
        }
        if let Some(t) = target {
            colls.remove(to);
            self.drop_dicts_of(&t)?;
        }
        colls.remove(from);
        colls.insert(to.to_string(), nc);
        Ok(())
    }
    /// Namespaces of database `db` (collection names without the database prefix).
    pub fn list_collections(&self, db: &str) -> Vec<(String, Arc<Collection>)> {
        let prefix = format!("{db}.");
        self.colls
            .read()
            .iter()
            .filter(|(ns, _)| !self.pending.hides(ns))
            .filter_map(|(ns, c)| ns.strip_prefix(&prefix).map(|n| (n.to_string(), c.clone())))
            .collect()
    }

    /// Databases that hold at least one collection.
    pub fn list_databases(&self) -> Vec<String> {
        let mut dbs: Vec<String> = self
            .colls
            .read()
            .keys()
            .filter(|ns| !self.pending.hides(ns))
            .filter_map(|ns| ns.split_once('.').map(|(d, _)| d.to_string()))
            .collect();
        dbs.dedup();
        dbs
    }

    /// Drop every collection of `db`.
    pub fn drop_database(&self, db: &str) -> Result<()> {
        let mut any = false;
        for (name, _) in self.list_collections(db) {
            any |= self.drop_collection(&format!("{db}.{name}"))?;
        }
        if let Some(log) = self
            .oplog
            .as_ref()
            .filter(|_| any && crate::oplog::is_logged(&format!("{db}.x")))
        {
            log.log(&crate::oplog::Op::command(
                db,
                None,
                doc! { "dropDatabase": 1 },
            ))?;
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

/// The memory an index build may use: a quarter of the cache, within mongod's default of
/// 200 MB for index builds.
fn build_memory(opts: &EnvOptions) -> usize {
    (opts.cache_bytes / 4).clamp(4 << 20, 200 << 20)
}
