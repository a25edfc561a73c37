//! The environment: a directory holding dictionaries, the catalog, the log and the lock file.
//! It owns the cache budget, the log, checkpoints, recovery and the background workers.
//!
//! Open (recovery), step by step:
//! 1. Take the directory's lock file; load the catalog; delete dictionary files it does not name.
//! 2. Open every dictionary at its last complete checkpoint (the valid header slot with the
//!    higher count), loading only the root.
//! 3. Read the log files in order. A torn or damaged record ends the newest file: it is
//!    truncated there. Damage in an older file is reported as corruption.
//! 4. Re-apply every record whose LSN is above its dictionary's checkpoint LSN through the
//!    normal injection path, start a new log file, and checkpoint.
//!
//! Checkpoint, step by step:
//! 1. Under the exclusive checkpoint lock (writers hold it shared from logging to injection,
//!    so no operation is half done): note the last LSN, mark every dirty node pending, copy
//!    each file's current block table to the in-progress table, snapshot each header.
//! 2. Release the lock; writers continue. A writer about to modify a pending node captures its
//!    image first (copy-before-write); the checkpointer writes every pending node and captured
//!    image to fresh extents, recording them in the in-progress table only.
//! 3. Per file: write the in-progress table, fsync, write the header into the other slot,
//!    fsync. Extents only the previous checkpoint used are freed.
//! 4. Delete log files whose every record is covered.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::cache::CacheCtl;
use crate::catalog::{dict_file_name, parse_dict_file, Catalog};
use crate::dict::{Dict, DictCore};
use crate::error::PoisonCause;
use crate::error::{corruption, Error, IoContext, Result};
use crate::file::DictFile;
use crate::format::btt::Extent;
use crate::format::header::FileHeader;
use crate::format::node::{encode_block, image_of};
use crate::ids::{BlockNum, DictId, Lsn, Msn, Xid};
use crate::locks::LockMgr;
use crate::msg::UpdateRegistry;
use crate::mvcc::{Snapshot, TxnMgr};
use crate::options::{EnvOptions, SyncPolicy};
use crate::poison::{spawn_worker, FailPoints, PoisonState, TreeLock};
use crate::tree::apply::Delta;
use crate::tree::node::{Basement, Node};
use crate::tree::{missing, Need, Tree, TreeCfg};
use crate::tree_io::load_node;
use crate::txn::Txn;
use crate::vfs::{OpenMode, RealFs, Vfs};
use crate::wal::{self, Wal};
use crate::width::usize_of;
use crate::write::WriteGate;

/// fsync a directory so that creations, renames and removals in it are durable.
pub(crate) fn sync_dir(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    vfs.sync_dir(dir).ctx(dir)
}

#[derive(Default)]
struct BgState {
    shutdown: bool,
    flush: HashSet<DictId>,
}

pub(crate) struct EnvInner {
    pub dir: PathBuf,
    pub opts: EnvOptions,
    pub fns: UpdateRegistry,
    pub cache: Arc<CacheCtl>,
    pub wal: Wal,
    pub(crate) gate: WriteGate,
    /// Where every file lives.
    pub(crate) vfs: Arc<dyn Vfs>,
    pub(crate) ckpt_mutex: Mutex<()>,
    catalog: Mutex<Catalog>,
    pub(crate) dicts: RwLock<BTreeMap<DictId, Arc<DictCore>>>,
    pub(crate) closed: AtomicBool,
    pub(crate) poison: Arc<PoisonState>,
    pub(crate) failpoints: FailPoints,
    /// Transaction ids, live transactions and snapshots.
    pub(crate) txns: Arc<TxnMgr>,
    /// Key-range locks of transactions and writers.
    pub(crate) locks: LockMgr,
    bg: Mutex<BgState>,
    bg_cond: Condvar,
    evict_rr: AtomicU64,
    pub checkpoints: AtomicU64,
    /// Drops held back while [`DropDeferral`]s are alive.
    deferred: Mutex<Deferred>,
    _lock: Box<dyn Send + Sync + std::fmt::Debug>,
}

/// Dictionary drops held back: how many deferrals are alive, and the names dropped meanwhile.
#[derive(Default)]
struct Deferred {
    holders: usize,
    names: Vec<String>,
}

/// While alive, [`Env::drop_dict`] only hides a dictionary (from [`Env::list_dicts`] and
/// [`Env::open_dict`]) and leaves its file, so handles opened earlier keep reading it: for a
/// reader that must see every dictionary of one moment to the end (a store's image being
/// written). The last one to go drops what was held back. A crash meanwhile leaves the
/// hidden dictionaries in the environment's catalog, nameless to its users, who sweep such
/// orphans when they open.
pub struct DropDeferral {
    env: Arc<EnvInner>,
}

impl Drop for DropDeferral {
    fn drop(&mut self) {
        let names = {
            let mut d = self.env.deferred.lock();
            d.holders -= 1;
            if d.holders > 0 {
                return;
            }
            std::mem::take(&mut d.names)
        };
        for name in names {
            if let Err(e) = self.env.drop_now(&name) {
                tracing::warn!(dict = %name, error = %e, "a deferred dictionary drop failed");
            }
        }
    }
}

/// Figures describing an environment at a moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvStats {
    /// Cache budget.
    pub cache_budget: u64,
    /// Bytes charged to the cache now.
    pub cache_used: u64,
    /// Highest charge observed.
    pub cache_peak: u64,
    /// Nodes evicted whole.
    pub evictions: u64,
    /// Partitions evicted from resident nodes.
    pub partial_evictions: u64,
    /// Node images written.
    pub writebacks: u64,
    /// Reads of nodes or partitions that were not resident.
    pub misses: u64,
    /// Completed checkpoints since open.
    pub checkpoints: u64,
    /// Live log files.
    pub log_files: u64,
    /// Bytes written to the log since open.
    pub log_bytes: u64,
    /// Fsyncs of the log since open.
    pub log_syncs: u64,
    /// Bytes the filesystem has allocated to the files in the directory (`st_blocks`, what
    /// `du` shows). Free extents inside dictionary files are returned as holes, so they do
    /// not count.
    pub bytes_on_disk: u64,
    /// Apparent size (length) of every file in the directory, holes included.
    pub apparent_bytes: u64,
    /// Transactions live now (including writes outside a transaction in flight).
    pub live_txns: u64,
    /// Snapshots live now (each transaction holds one).
    pub snapshots: u64,
    /// Locks held now.
    pub locks_held: u64,
    /// Lock requests that had to wait, since open.
    pub lock_waits: u64,
    /// Lock requests that timed out, since open.
    pub lock_timeouts: u64,
    /// Lock requests refused as deadlock victims, since open.
    pub deadlocks: u64,
}

/// An open environment. Dropping it stops the background workers and checkpoints, as
/// [`Env::close`] does, but ignores errors.
pub struct Env {
    inner: Arc<EnvInner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").field("dir", &self.inner.dir).finish()
    }
}

fn load_full(file: &DictFile, b: BlockNum, ext: Extent) -> Result<Node> {
    let mut n = load_node(file, b, ext)?;
    if let Need::Parts(_, list) = missing(&n) {
        if !list.is_empty() {
            for (i, _, d) in crate::tree_io::load_parts(file, b, n.is_leaf(), &list)? {
                n.parts[i].data = Some(d);
            }
        }
    }
    Ok(n)
}

fn open_core(
    id: DictId,
    name: String,
    file: DictFile,
    cache: &Arc<CacheCtl>,
    poison: &Arc<PoisonState>,
    txns: &TxnMgr,
) -> Result<DictCore> {
    let header = file.state.lock().header.clone();
    let root_ext = file
        .state
        .lock()
        .current
        .get(&header.root)
        .copied()
        .ok_or_else(|| {
            corruption(
                &file.path,
                "block table",
                format!("root block {} missing", header.root),
            )
        })?;
    let root = load_full(&file, header.root, root_ext)?;
    let file = Arc::new(file);
    let mut tree = Tree {
        cfg: TreeCfg {
            node_bytes: usize_of(header.node_bytes),
            basement_bytes: usize_of(header.basement_bytes),
            fanout: header.fanout as usize,
        },
        root: header.root,
        nodes: Default::default(),
        next_block: header.next_block,
        next_msn: header.max_msn.0,
        stats: Delta {
            rows: header.rows,
            bytes: header.data_bytes,
        },
        ckpt_images: Vec::new(),
        file: file.clone(),
        cache: cache.clone(),
        horizon: txns.horizon_cell(),
        evict_hand: (0, BlockNum(0)),
        counted: header.counted,
        count_repairs: 0,
    };
    txns.observe(Xid(header.next_xid.saturating_sub(1)));
    tree.insert_node(root);
    Ok(DictCore {
        id,
        name: Mutex::new(name),
        file,
        tree: TreeLock::new(tree, poison.clone()),
        dropped: AtomicBool::new(false),
    })
}

impl Env {
    /// Open (creating if needed) the environment in `dir`, with no update functions.
    pub fn open(dir: impl AsRef<Path>, opts: EnvOptions) -> Result<Env> {
        Env::open_with(dir, opts, UpdateRegistry::new())
    }

    /// Open (creating if needed) the environment in `dir`. `fns` must hold every update
    /// function that logged or buffered messages name.
    pub fn open_with(dir: impl AsRef<Path>, opts: EnvOptions, fns: UpdateRegistry) -> Result<Env> {
        Env::open_on(Arc::new(RealFs), dir, opts, fns)
    }

    /// [`Env::open_with`] on the given storage backend (tests run the engine on simulated
    /// disks that lose power or fail; see [`crate::vfs`]).
    pub fn open_on(
        vfs: Arc<dyn Vfs>,
        dir: impl AsRef<Path>,
        opts: EnvOptions,
        fns: UpdateRegistry,
    ) -> Result<Env> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        vfs.create_dir_all(&dir).ctx(&dir)?;
        let lock_path = dir.join("LOCK");
        let Some(lock) = vfs.lock(&lock_path).ctx(&lock_path)? else {
            return Err(Error::Locked(dir));
        };
        let catalog = Catalog::load(&*vfs, &dir)?;
        let known: HashSet<DictId> = catalog.by_name.values().copied().collect();
        for name in vfs.list(&dir).ctx(&dir)? {
            if parse_dict_file(&name).is_some_and(|id| !known.contains(&id))
                || name == "catalog.tmp"
            {
                let p = dir.join(&name);
                vfs.remove(&p).ctx(&p)?;
            }
        }
        let cache = Arc::new(CacheCtl::new(opts.cache_bytes));
        let poison = Arc::new(PoisonState::default());
        let txns = Arc::new(TxnMgr::new(1));
        let mut dicts = BTreeMap::new();
        for (name, &id) in &catalog.by_name {
            let file = DictFile::open(&*vfs, &dir.join(dict_file_name(id)), opts.direct_io)?;
            dicts.insert(
                id,
                Arc::new(open_core(id, name.clone(), file, &cache, &poison, &txns)?),
            );
        }

        // Read the log before starting a new file after it. Every record is covered by a
        // checkpoint at or below the smallest checkpoint LSN of the dictionaries.
        let covered = dicts
            .values()
            .map(|d| d.file.state.lock().header.ckpt_lsn.0)
            .min()
            .unwrap_or(u64::MAX);
        let mut logs: Vec<wal::LogFile> = Vec::new();
        for (_, path) in wal::list_files(&*vfs, &dir)? {
            logs.push(wal::read_file_on(&*vfs, &path)?);
        }
        let nfiles = logs.len();
        let firsts: Vec<u64> = logs.iter().map(|l| l.first_lsn.0).collect();
        for (i, lf) in logs.iter_mut().enumerate() {
            let path = dir.join(wal::file_name(lf.seq));
            let Some(why) = lf.torn.clone() else {
                // What recovery replays must be on disk before anything builds on it: the
                // records may still be only in the OS's cache after a process crash.
                let f = vfs.open(&path, OpenMode::Existing, false).ctx(&path)?;
                f.sync().ctx(&path)?;
                continue;
            };
            if i + 1 < nfiles && !lf.records.is_empty() {
                // Damage in an older file matters only if it can hold records a checkpoint
                // does not cover. A removed file whose removal was not yet durable can come
                // back after a power loss, with a torn tail: it is obsolete.
                let next_first = firsts[i + 1];
                if next_first == 0 || next_first - 1 > covered {
                    return Err(corruption(&path, "log", why));
                }
                tracing::warn!(file = %path.display(), reason = %why, "an obsolete log file is damaged; ignoring it");
                lf.records.clear();
                continue;
            }
            tracing::warn!(file = %path.display(), reason = %why, "log ends early; truncating the torn tail");
            let f = vfs.open(&path, OpenMode::Existing, false).ctx(&path)?;
            f.set_len(lf.valid_len).ctx(&path)?;
            f.sync().ctx(&path)?;
        }
        let mut last_lsn = 0u64;
        for d in dicts.values() {
            last_lsn = last_lsn.max(d.file.state.lock().header.ckpt_lsn.0);
        }
        for lf in &logs {
            last_lsn = last_lsn.max(lf.first_lsn.0.saturating_sub(1));
            if let Some((l, _)) = lf.records.last() {
                last_lsn = last_lsn.max(l.0);
            }
        }
        let existing: Vec<(u64, u64)> = logs
            .iter()
            .filter(|l| l.first_lsn.0 > 0)
            .map(|l| (l.seq, l.first_lsn.0))
            .collect();
        for lf in logs.iter().filter(|l| l.first_lsn.0 == 0) {
            let p = dir.join(format!("wal-{:010}.log", lf.seq));
            vfs.remove(&p).ctx(&p)?;
        }
        let wal = Wal::open(
            vfs.clone(),
            &dir,
            opts.log_file_bytes,
            Lsn(last_lsn),
            &existing,
            poison.clone(),
        )?;
        let inner = Arc::new(EnvInner {
            dir,
            opts,
            fns,
            cache,
            wal,
            gate: WriteGate::default(),
            vfs: vfs.clone(),
            ckpt_mutex: Mutex::new(()),
            catalog: Mutex::new(catalog),
            dicts: RwLock::new(dicts),
            closed: AtomicBool::new(false),
            poison,
            failpoints: FailPoints::default(),
            txns,
            locks: LockMgr::default(),
            bg: Mutex::new(BgState::default()),
            bg_cond: Condvar::new(),
            evict_rr: AtomicU64::new(0),
            deferred: Mutex::default(),
            checkpoints: AtomicU64::new(0),
            _lock: lock,
        });

        let replayed = inner.replay(logs)?;
        if replayed > 0 {
            tracing::info!(records = replayed, "recovery replayed the log");
        }
        inner.checkpoint()?;
        let threads = spawn_workers(&inner);
        Ok(Env { inner, threads })
    }

    /// Whether update function `id` never creates or removes a value (registered with
    /// `UpdateRegistry::register_keeping`).
    pub fn update_keeps(&self, id: u32) -> bool {
        self.inner.fns.keeps(id)
    }

    /// What update function `id` makes of `old` (the value of `key`) with `arg`: an update
    /// message applied by reading, as a reader of the key would see it.
    pub fn run_update(
        &self,
        id: u32,
        key: &[u8],
        old: Option<&[u8]>,
        arg: &[u8],
    ) -> Result<crate::UpdateOutcome> {
        self.inner.fns.check(id)?;
        Ok(self.inner.fns.run(id, key, old, arg))
    }

    /// Begin a transaction (see [`Txn`]).
    pub fn begin(&self) -> Result<Txn> {
        self.inner.check_open()?;
        Ok(Txn::begin(&self.inner))
    }

    /// A snapshot of every dictionary as of now (see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        self.inner.txns.snapshot(None)
    }

    /// Create a dictionary.
    pub fn create_dict(&self, name: &str) -> Result<Dict> {
        self.inner.create_dict(name, false)
    }

    /// Create a dictionary that keeps subtree counts, so that [`Dict::count_range`] reads
    /// only the nodes on the range's boundaries. Its writers promise that a put or batch put
    /// is of an absent key and a delete of a present one (use [`Dict::replace`] to overwrite,
    /// and [`Dict::put_if_absent`] when the key may exist). A broken promise makes counts
    /// wrong until the message reaches its leaf, where it is repaired.
    pub fn create_counted_dict(&self, name: &str) -> Result<Dict> {
        self.inner.create_dict(name, true)
    }

    /// Open an existing dictionary.
    pub fn open_dict(&self, name: &str) -> Result<Dict> {
        self.inner.check_open()?;
        if self.inner.deferred.lock().names.iter().any(|n| n == name) {
            return Err(Error::NoSuchDictionary(name.to_string()));
        }
        let id = *self
            .inner
            .catalog
            .lock()
            .by_name
            .get(name)
            .ok_or_else(|| Error::NoSuchDictionary(name.to_string()))?;
        let core = self
            .inner
            .dicts
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NoSuchDictionary(name.to_string()))?;
        Ok(Dict {
            env: self.inner.clone(),
            core,
        })
    }

    /// Open a dictionary, creating it if it does not exist.
    pub fn open_or_create(&self, name: &str) -> Result<Dict> {
        match self.open_dict(name) {
            Err(Error::NoSuchDictionary(_)) => match self.create_dict(name) {
                Err(Error::DictionaryExists(_)) => self.open_dict(name),
                r => r,
            },
            r => r,
        }
    }

    /// Names of every dictionary (not those dropped while drops are deferred).
    pub fn list_dicts(&self) -> Vec<String> {
        let hidden = self.inner.deferred.lock().names.clone();
        let cat = self.inner.catalog.lock();
        cat.by_name
            .keys()
            .filter(|n| !hidden.contains(n))
            .cloned()
            .collect()
    }

    /// Whether a [`DropDeferral`] is alive.
    pub fn drops_deferred(&self) -> bool {
        self.inner.deferred.lock().holders > 0
    }

    /// Hold back dictionary drops until the returned guard (and every other) is gone; see
    /// [`DropDeferral`].
    pub fn defer_drops(&self) -> DropDeferral {
        self.inner.deferred.lock().holders += 1;
        DropDeferral {
            env: self.inner.clone(),
        }
    }

    /// Rename a dictionary. Open handles keep working.
    pub fn rename_dict(&self, from: &str, to: &str) -> Result<()> {
        let inner = &self.inner;
        inner.check_open()?;
        let _g = inner.ckpt_mutex.lock();
        let mut cat = inner.catalog.lock();
        if cat.by_name.contains_key(to) {
            return Err(Error::DictionaryExists(to.to_string()));
        }
        let id = cat
            .by_name
            .remove(from)
            .ok_or_else(|| Error::NoSuchDictionary(from.to_string()))?;
        cat.by_name.insert(to.to_string(), id);
        if let Err(e) = cat.save(&*inner.vfs, &inner.dir) {
            cat.by_name.remove(to);
            cat.by_name.insert(from.to_string(), id);
            return Err(e);
        }
        if let Some(d) = inner.dicts.read().get(&id) {
            *d.name.lock() = to.to_string();
        }
        Ok(())
    }

    /// Drop a dictionary and delete its file (its space is returned at once), or, while a
    /// [`DropDeferral`] is alive, hide it and drop it when the last one goes.
    pub fn drop_dict(&self, name: &str) -> Result<()> {
        self.inner.check_open()?;
        {
            let mut d = self.inner.deferred.lock();
            if d.holders > 0 {
                if d.names.iter().any(|n| n == name)
                    || !self.inner.catalog.lock().by_name.contains_key(name)
                {
                    return Err(Error::NoSuchDictionary(name.to_string()));
                }
                d.names.push(name.to_string());
                return Ok(());
            }
        }
        self.inner.drop_now(name)
    }

    /// Why the environment refuses writes, if it does (see [`PoisonCause`]).
    pub fn poison_cause(&self) -> Option<PoisonCause> {
        self.inner.poison.cause()
    }

    /// Test hooks that make engine workers fail on purpose.
    pub fn fail_points(&self) -> &FailPoints {
        &self.inner.failpoints
    }

    /// Write a checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.checkpoint()
    }

    /// fsync the log now.
    pub fn sync_log(&self) -> Result<()> {
        self.inner.wal.sync()
    }

    /// Current figures.
    pub fn stats(&self) -> EnvStats {
        let c = &self.inner.cache;
        let (txns, snaps) = self.inner.txns.counts();
        let (log_bytes, log_syncs) = self.inner.wal.io_counts();
        let (mut bytes, mut apparent) = (0, 0);
        let vfs = &self.inner.vfs;
        for name in vfs.list(&self.inner.dir).unwrap_or_default() {
            if let Ok(f) = vfs.open(&self.inner.dir.join(name), OpenMode::Existing, false) {
                bytes += f.allocated();
                apparent += f.len().unwrap_or(0);
            }
        }
        EnvStats {
            cache_budget: c.budget as u64,
            cache_used: c.used().max(0) as u64,
            cache_peak: c.peak.load(Ordering::Relaxed).max(0) as u64,
            evictions: c.evictions.load(Ordering::Relaxed),
            partial_evictions: c.partial_evictions.load(Ordering::Relaxed),
            writebacks: c.writebacks.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            checkpoints: self.inner.checkpoints.load(Ordering::Relaxed),
            log_files: self.inner.wal.file_count() as u64,
            log_bytes,
            log_syncs,
            bytes_on_disk: bytes,
            apparent_bytes: apparent,
            live_txns: txns as u64,
            snapshots: snaps as u64,
            locks_held: self.inner.locks.held() as u64,
            lock_waits: self.inner.locks.waited.load(Ordering::Relaxed),
            lock_timeouts: self.inner.locks.timeouts.load(Ordering::Relaxed),
            deadlocks: self.inner.locks.deadlocks.load(Ordering::Relaxed),
        }
    }

    /// The directory this environment lives in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Stop the background workers, checkpoint, sync the log and close.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    /// Stop the background workers and release the environment *without* a checkpoint or a
    /// final log sync, leaving the files as a killed process would. For crash tests.
    pub fn simulate_crash(mut self) {
        {
            let mut g = self.inner.bg.lock();
            g.shutdown = true;
            self.inner.bg_cond.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.inner.closed.store(true, Ordering::Release);
    }

    fn shutdown(&mut self) -> Result<()> {
        {
            let mut g = self.inner.bg.lock();
            g.shutdown = true;
            self.inner.bg_cond.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if self.inner.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let r = self.inner.checkpoint().and_then(|()| self.inner.wal.sync());
        self.inner.closed.store(true, Ordering::Release);
        r
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "closing the environment failed");
        }
    }
}

impl Dict {
    /// Verify this dictionary's checkpointed file while the environment is open: both
    /// headers, the block table, every reachable node and partition (checksums and
    /// structure). Checkpoints wait meanwhile, so the blocks read stay allocated.
    pub fn verify(&self) -> crate::inspect::VerifyReport {
        let _g = self.env.ckpt_mutex.lock();
        let mut r = crate::inspect::VerifyReport::default();
        crate::inspect::verify_file_on(&*self.env.vfs, &self.core.file.path, &mut r);
        r
    }
}

impl EnvInner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.poison.check()
    }

    fn poison_with(&self, task: &'static str, e: &Error) {
        if matches!(e, Error::Poisoned(_)) {
            return;
        }
        self.poison.poison(PoisonCause::Background {
            task,
            error: e.to_string(),
        });
    }

    /// A test hook: panic here if asked to (see [`FailPoints`]).
    fn worker_failpoint(&self) {
        if self.failpoints.worker_panic.swap(false, Ordering::AcqRel) {
            panic!("fail point workerPanic: an engine worker was told to die");
        }
    }

    pub(crate) fn dict_list(&self) -> Vec<Arc<DictCore>> {
        self.dicts.read().values().cloned().collect()
    }

    fn drop_now(&self, name: &str) -> Result<()> {
        let inner = self;
        inner.check_open()?;
        let _g = inner.ckpt_mutex.lock();
        let id = {
            let mut cat = inner.catalog.lock();
            let id = cat
                .by_name
                .remove(name)
                .ok_or_else(|| Error::NoSuchDictionary(name.to_string()))?;
            if let Err(e) = cat.save(&*inner.vfs, &inner.dir) {
                cat.by_name.insert(name.to_string(), id);
                return Err(e);
            }
            id
        };
        if let Some(core) = inner.dicts.write().remove(&id) {
            core.dropped.store(true, Ordering::Release);
            let path = core.file.path.clone();
            drop(core);
            inner.vfs.remove(&path).ctx(&path)?;
            sync_dir(&*inner.vfs, &inner.dir)?;
        }
        Ok(())
    }

    fn create_dict(self: &Arc<Self>, name: &str, counted: bool) -> Result<Dict> {
        self.check_open()?;
        let _g = self.ckpt_mutex.lock();
        let mut cat = self.catalog.lock();
        if cat.by_name.contains_key(name) {
            return Err(Error::DictionaryExists(name.to_string()));
        }
        let id = DictId(cat.next_id);
        let o = &self.opts;
        let root = BlockNum(1);
        let leaf = Node::new_leaf(root, vec![Basement::default()], Vec::new());
        let (block, _) = encode_block(&image_of(&leaf), o.compression);
        let header = FileHeader {
            dict_id: id,
            ckpt_count: 0,
            ckpt_lsn: self.wal.last_lsn(),
            btt_offset: 0,
            btt_len: 0,
            root,
            next_block: 2,
            max_msn: Msn(0),
            node_bytes: o.node_bytes as u64,
            basement_bytes: o.basement_bytes as u64,
            // A fanout past u32::MAX is no limit at all (a node's child count is a u32 too):
            // saturating keeps that meaning when the file is reopened.
            fanout: u32::try_from(o.fanout).unwrap_or(u32::MAX),
            compression: o.compression,
            rows: 0,
            data_bytes: 0,
            next_xid: self.txns.next_xid(),
            counted,
        };
        let path = self.dir.join(dict_file_name(id));
        let _ = self.vfs.remove(&path);
        let file = DictFile::create(&*self.vfs, &path, header, &block, self.opts.direct_io)?;
        let core = Arc::new(open_core(
            id,
            name.to_string(),
            file,
            &self.cache,
            &self.poison,
            &self.txns,
        )?);
        cat.next_id += 1;
        cat.by_name.insert(name.to_string(), id);
        if let Err(e) = cat.save(&*self.vfs, &self.dir) {
            cat.by_name.remove(name);
            return Err(e);
        }
        self.dicts.write().insert(id, core.clone());
        Ok(Dict {
            env: self.clone(),
            core,
        })
    }

    pub(crate) fn wake_flusher(&self, d: &DictCore) {
        let mut g = self.bg.lock();
        if g.flush.insert(d.id) {
            self.bg_cond.notify_all();
        }
    }

    /// Evict until under budget. `inline`: called by a writer, which only helps above the
    /// hard limit; otherwise the background evictor is woken.
    pub(crate) fn relieve_memory(&self, inline: bool) -> Result<()> {
        if self.cache.excess_hard() > 0 || (!inline && self.cache.excess_soft() > 0) {
            self.evict_until_soft()?;
        } else if self.cache.excess_soft() > 0 {
            self.bg_cond.notify_all();
        }
        Ok(())
    }

    fn evict_until_soft(&self) -> Result<()> {
        let dicts = self.dict_list();
        if dicts.is_empty() {
            return Ok(());
        }
        let mut idle_rounds = 0;
        let mut rounds = 0;
        // Bounded: when everything resident is pinned or hot, the caller goes on over the
        // soft limit rather than spinning.
        while self.cache.excess_soft() > 0 && idle_rounds < 32 && rounds < 64 * dicts.len() {
            rounds += 1;
            let i = usize_of(self.evict_rr.fetch_add(1, Ordering::Relaxed)) % dicts.len();
            let freed = dicts[i].evict_pass(self, self.cache.excess_soft())?;
            if freed > 0 {
                idle_rounds = 0;
            } else {
                idle_rounds += 1;
            }
        }
        Ok(())
    }
}

fn spawn_workers(inner: &Arc<EnvInner>) -> Vec<JoinHandle<()>> {
    let mut v = Vec::new();
    // Flusher: drains root buffers that writers reported over budget.
    for i in 0..inner.opts.flusher_threads.max(1) {
        let env = inner.clone();
        let poison = env.poison.clone();
        v.push(spawn_worker(format!("silt-flush-{i}"), poison, move || {
            loop {
                let ids: Vec<DictId> = {
                    let mut g = env.bg.lock();
                    if g.shutdown {
                        return;
                    }
                    if g.flush.is_empty() {
                        env.bg_cond.wait_for(&mut g, Duration::from_millis(100));
                    }
                    if g.shutdown {
                        return;
                    }
                    g.flush.drain().collect()
                };
                env.worker_failpoint();
                let dicts = env.dicts.read().clone();
                for id in ids {
                    if let Some(d) = dicts.get(&id) {
                        if let Err(e) = d.flush_until(&env, 0.75) {
                            env.poison_with("flush", &e);
                        }
                    }
                }
                if env.cache.excess_soft() > 0 {
                    if let Err(e) = env.evict_until_soft() {
                        env.poison_with("evict", &e);
                    }
                }
            }
        }));
    }
    // Checkpointer and log syncer share one thread: both are timers.
    let env = inner.clone();
    let poison = env.poison.clone();
    v.push(spawn_worker("silt-timer".into(), poison, move || {
        let mut last_ckpt = Instant::now();
        let tick = match env.opts.sync {
            SyncPolicy::Periodic(d) => d,
            _ => Duration::from_millis(200),
        };
        loop {
            {
                let mut g = env.bg.lock();
                if g.shutdown {
                    return;
                }
                env.bg_cond.wait_for(&mut g, tick);
                if g.shutdown {
                    return;
                }
            }
            if let SyncPolicy::Periodic(_) = env.opts.sync {
                if let Err(e) = env.wal.sync() {
                    env.poison_with("log sync", &e);
                }
            }
            env.worker_failpoint();
            if env.cache.excess_soft() > 0 {
                if let Err(e) = env.evict_until_soft() {
                    env.poison_with("evict", &e);
                }
            }
            if let Some(p) = env.opts.checkpoint_period {
                if last_ckpt.elapsed() >= p {
                    if let Err(e) = env.checkpoint() {
                        env.poison_with("checkpoint", &e);
                    }
                    last_ckpt = Instant::now();
                }
            }
        }
    }));
    v
}
