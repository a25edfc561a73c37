//! The engine-level stores that `silt-bench engine-peers` runs side by side: our fractal tree,
//! and (behind cargo features, so that `make test` never builds them) RocksDB and SQLite.
//!
//! Every store holds 8-byte keys and values whose first 8 bytes are a little-endian counter.
//! `blind_inc` adds one to that counter: an update message in the fractal tree, a merge with an
//! associative add operator in RocksDB, and a read-modify-write in SQLite (a B-tree has no
//! blind update). Each store is opened with the same cache budget and the same compression
//! where the store has one; `describe` says what was set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use silt_storage::{Compression, Dict, Env, EnvOptions, SyncPolicy, UpdateOutcome, UpdateRegistry};

/// What a store failed with.
pub(crate) type KvResult<T> = Result<T, String>;

/// One key-value store under test.
pub(crate) trait Kv {
    /// Short name for tables and JSON (`silt`, `rocksdb`, `sqlite`).
    fn name(&self) -> &'static str;
    /// The settings that matter for fairness, in one line.
    fn describe(&self) -> String;
    /// Insert or overwrite.
    fn put(&mut self, k: &[u8], v: &[u8]) -> KvResult<()>;
    /// Add one to the counter in the first 8 bytes of `k`'s value.
    fn blind_inc(&mut self, k: &[u8]) -> KvResult<()>;
    /// Read one value.
    fn get(&mut self, k: &[u8]) -> KvResult<Option<Vec<u8>>>;
    /// Make everything written durable and settled (a checkpoint, a flush, a WAL checkpoint).
    fn settle(&mut self) -> KvResult<()>;
    /// Bytes the store's files take on disk.
    fn bytes_on_disk(&self) -> u64;
}

/// Parameters shared by every store.
#[derive(Clone)]
pub(crate) struct KvConfig {
    pub dir: PathBuf,
    pub cache_bytes: usize,
    /// `none`, `lz4` or `zstd`.
    pub compression: String,
    /// Read data files with O_DIRECT where the store can (so that reads beyond the cache go to
    /// the disk, not to the OS page cache).
    pub direct_io: bool,
    /// Fractal-tree node and basement sizes in bytes (0: siltd's rule, the default node size
    /// capped at a sixteenth of the cache).
    pub node_bytes: usize,
    pub basement_bytes: usize,
}

const INC: u32 = 1;

/// Add the little-endian u64 `arg` to the counter in the first 8 bytes of `old`.
pub(crate) fn add_counter(old: &[u8], add: u64) -> Option<Vec<u8>> {
    if old.len() < 8 {
        return None;
    }
    let mut v = old.to_vec();
    let cur = u64::from_le_bytes(v[..8].try_into().ok()?);
    v[..8].copy_from_slice(&cur.wrapping_add(add).to_le_bytes());
    Some(v)
}

fn inc(_k: &[u8], old: Option<&[u8]>, arg: &[u8]) -> UpdateOutcome {
    let add = u64::from_le_bytes(arg.try_into().unwrap_or([0; 8]));
    match old.and_then(|o| add_counter(o, add)) {
        Some(v) => UpdateOutcome::Set(v),
        None => UpdateOutcome::NoChange,
    }
}

/// Bytes allocated on disk by the files under `dir` (recursively).
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_bytes(&e.path()),
                Ok(m) => total += m.blocks() * 512,
                Err(_) => {}
            }
        }
    }
    total
}

/// The fractal tree.
pub(crate) struct Silt {
    node_bytes: usize,
    basement_bytes: usize,
    env: Option<Env>,
    dict: Option<Dict>,
    cfg: KvConfig,
}

impl Silt {
    pub(crate) fn open(cfg: &KvConfig) -> KvResult<Silt> {
        let compression = Compression::parse(&cfg.compression)
            .ok_or_else(|| format!("unknown compression {}", cfg.compression))?;
        let d = EnvOptions::default();
        let node_bytes = match cfg.node_bytes {
            0 => d.node_bytes.min(cfg.cache_bytes / 16).max(64 << 10),
            n => n,
        };
        let basement_bytes = match cfg.basement_bytes {
            0 => d.basement_bytes.min(node_bytes),
            n => n,
        };
        let opts = EnvOptions {
            cache_bytes: cfg.cache_bytes,
            node_bytes,
            basement_bytes,
            compression,
            direct_io: cfg.direct_io,
            sync: SyncPolicy::Periodic(Duration::from_millis(100)),
            checkpoint_period: Some(Duration::from_secs(60)),
            ..EnvOptions::default()
        };
        let mut fns = UpdateRegistry::new();
        fns.register(INC, inc);
        let env = Env::open_with(&cfg.dir, opts, fns).map_err(|e| e.to_string())?;
        let dict = env.create_dict("kv").map_err(|e| e.to_string())?;
        Ok(Silt {
            node_bytes,
            basement_bytes,
            env: Some(env),
            dict: Some(dict),
            cfg: cfg.clone(),
        })
    }

    fn d(&self) -> &Dict {
        self.dict.as_ref().expect("open until dropped")
    }
}

impl Drop for Silt {
    fn drop(&mut self) {
        self.dict.take();
        if let Some(env) = self.env.take() {
            let _ = env.close();
        }
    }
}

impl Kv for Silt {
    fn name(&self) -> &'static str {
        "silt"
    }
    fn describe(&self) -> String {
        format!(
            "fractal tree: cache {} MiB, nodes {} KiB, basements {} KiB, {} compression, log synced every 100 ms, O_DIRECT {}",
            self.cfg.cache_bytes >> 20,
            self.node_bytes >> 10,
            self.basement_bytes >> 10,
            self.cfg.compression,
            if self.cfg.direct_io { "on" } else { "off" }
        )
    }
    fn put(&mut self, k: &[u8], v: &[u8]) -> KvResult<()> {
        self.d().put(k, v).map_err(|e| e.to_string())
    }
    fn blind_inc(&mut self, k: &[u8]) -> KvResult<()> {
        self.d()
            .update(k, INC, &1u64.to_le_bytes())
            .map_err(|e| e.to_string())
    }
    fn get(&mut self, k: &[u8]) -> KvResult<Option<Vec<u8>>> {
        self.d().get(k).map_err(|e| e.to_string())
    }
    fn settle(&mut self) -> KvResult<()> {
        let env = self.env.as_ref().expect("open until dropped");
        env.checkpoint().map_err(|e| e.to_string())
    }
    fn bytes_on_disk(&self) -> u64 {
        dir_bytes(&self.cfg.dir)
    }
}

#[cfg(feature = "rocksdb")]
pub use self::rocks::Rocks;

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::*;
    use rocksdb::{
        BlockBasedOptions, Cache, DBCompressionType, MergeOperands, Options, WriteOptions, DB,
    };

    /// RocksDB with an associative add merge operator.
    pub struct Rocks {
        db: DB,
        wo: WriteOptions,
        cfg: KvConfig,
    }

    fn add_merge(_k: &[u8], existing: Option<&[u8]>, ops: &MergeOperands) -> Option<Vec<u8>> {
        let n: u64 = ops
            .iter()
            .map(|o| u64::from_le_bytes(o.try_into().unwrap_or([0; 8])))
            .sum();
        match existing {
            Some(v) => add_counter(v, n).or_else(|| Some(v.to_vec())),
            // A merge onto a missing key leaves the bare sum (never read back by the workload).
            None => Some(n.to_le_bytes().to_vec()),
        }
    }

    impl Rocks {
        pub fn open(cfg: &KvConfig) -> KvResult<Rocks> {
            let mut o = Options::default();
            o.create_if_missing(true);
            o.set_merge_operator_associative("add", add_merge);
            o.set_compression_type(match cfg.compression.as_str() {
                "none" => DBCompressionType::None,
                "lz4" => DBCompressionType::Lz4,
                _ => DBCompressionType::Zstd,
            });
            o.set_use_direct_reads(cfg.direct_io);
            o.set_use_direct_io_for_flush_and_compaction(cfg.direct_io);
            // The memtables count against the same budget: a quarter, the block cache the rest.
            let memtable = (cfg.cache_bytes / 4).max(1 << 20);
            o.set_write_buffer_size(memtable / 2);
            o.set_max_write_buffer_number(2);
            o.increase_parallelism(2);
            let mut b = BlockBasedOptions::default();
            let cache = Cache::new_lru_cache(cfg.cache_bytes - memtable);
            b.set_block_cache(&cache);
            b.set_cache_index_and_filter_blocks(true);
            b.set_bloom_filter(10.0, false);
            o.set_block_based_table_factory(&b);
            let db = DB::open(&o, &cfg.dir).map_err(|e| e.to_string())?;
            let mut wo = WriteOptions::default();
            // The WAL is written on every write and synced by the OS, as siltd's log is
            // written on every write and synced every 100 ms.
            wo.set_sync(false);
            Ok(Rocks {
                db,
                wo,
                cfg: cfg.clone(),
            })
        }
    }

    impl Kv for Rocks {
        fn name(&self) -> &'static str {
            "rocksdb"
        }
        fn describe(&self) -> String {
            format!(
                "RocksDB {} (rocksdb crate 0.23): block cache {} MiB + memtables {} MiB, {} compression, bloom 10 bits/key, WAL on, sync off, direct reads {}",
                "10.4.2",
                (self.cfg.cache_bytes - (self.cfg.cache_bytes / 4).max(1 << 20)) >> 20,
                (self.cfg.cache_bytes / 4).max(1 << 20) >> 20,
                self.cfg.compression,
                if self.cfg.direct_io { "on" } else { "off" }
            )
        }
        fn put(&mut self, k: &[u8], v: &[u8]) -> KvResult<()> {
            self.db.put_opt(k, v, &self.wo).map_err(|e| e.to_string())
        }
        fn blind_inc(&mut self, k: &[u8]) -> KvResult<()> {
            self.db
                .merge_opt(k, 1u64.to_le_bytes(), &self.wo)
                .map_err(|e| e.to_string())
        }
        fn get(&mut self, k: &[u8]) -> KvResult<Option<Vec<u8>>> {
            self.db.get(k).map_err(|e| e.to_string())
        }
        fn settle(&mut self) -> KvResult<()> {
            self.db.flush().map_err(|e| e.to_string())?;
            self.db.flush_wal(true).map_err(|e| e.to_string())
        }
        fn bytes_on_disk(&self) -> u64 {
            dir_bytes(&self.cfg.dir)
        }
    }
}

#[cfg(feature = "sqlite")]
pub use self::lite::Sqlite;

#[cfg(feature = "sqlite")]
mod lite {
    use super::*;
    use rusqlite::{params, Connection, OptionalExtension};

    /// SQLite: a `WITHOUT ROWID` table, so that the rows live in the primary-key B-tree.
    pub struct Sqlite {
        conn: Connection,
        cfg: KvConfig,
        in_txn: u32,
    }

    /// Writes per transaction: SQLite commits are expensive, so writes are batched, as siltd's
    /// log batches its syncs.
    const BATCH: u32 = 1000;

    impl Sqlite {
        pub fn open(cfg: &KvConfig) -> KvResult<Sqlite> {
            std::fs::create_dir_all(&cfg.dir).map_err(|e| e.to_string())?;
            let conn = Connection::open(cfg.dir.join("kv.sqlite")).map_err(|e| e.to_string())?;
            let kib = cfg.cache_bytes / 1024;
            conn.execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -{kib};
                 CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;"
            ))
            .map_err(|e| e.to_string())?;
            Ok(Sqlite {
                conn,
                cfg: cfg.clone(),
                in_txn: 0,
            })
        }

        fn write(&mut self) -> KvResult<()> {
            if self.in_txn == 0 {
                self.conn
                    .execute_batch("BEGIN")
                    .map_err(|e| e.to_string())?;
            }
            self.in_txn += 1;
            if self.in_txn >= BATCH {
                self.commit()?;
            }
            Ok(())
        }

        fn commit(&mut self) -> KvResult<()> {
            if self.in_txn > 0 {
                self.in_txn = 0;
                self.conn
                    .execute_batch("COMMIT")
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    }

    impl Kv for Sqlite {
        fn name(&self) -> &'static str {
            "sqlite"
        }
        fn describe(&self) -> String {
            format!(
                "SQLite {} (bundled): page cache {} MiB, WAL journal, synchronous=NORMAL, {} writes per transaction, no compression, reads through the OS page cache",
                rusqlite::version(),
                self.cfg.cache_bytes >> 20,
                BATCH
            )
        }
        fn put(&mut self, k: &[u8], v: &[u8]) -> KvResult<()> {
            self.conn
                .prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![k, v]))
                .map_err(|e| e.to_string())?;
            self.write()
        }
        fn blind_inc(&mut self, k: &[u8]) -> KvResult<()> {
            let old: Option<Vec<u8>> = self
                .conn
                .prepare_cached("SELECT v FROM kv WHERE k = ?1")
                .and_then(|mut s| s.query_row(params![k], |r| r.get(0)).optional())
                .map_err(|e| e.to_string())?;
            if let Some(v) = old.and_then(|o| add_counter(&o, 1)) {
                self.conn
                    .prepare_cached("UPDATE kv SET v = ?2 WHERE k = ?1")
                    .and_then(|mut s| s.execute(params![k, v]))
                    .map_err(|e| e.to_string())?;
            }
            self.write()
        }
        fn get(&mut self, k: &[u8]) -> KvResult<Option<Vec<u8>>> {
            self.commit()?;
            self.conn
                .prepare_cached("SELECT v FROM kv WHERE k = ?1")
                .and_then(|mut s| s.query_row(params![k], |r| r.get(0)).optional())
                .map_err(|e| e.to_string())
        }
        fn settle(&mut self) -> KvResult<()> {
            self.commit()?;
            self.conn
                .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .map_err(|e| e.to_string())
        }
        fn bytes_on_disk(&self) -> u64 {
            dir_bytes(&self.cfg.dir)
        }
    }
}

#[allow(dead_code)] // used only when a peer is not built in
fn not_built(name: &str) -> String {
    format!(
        "silt-bench was built without the {name} peer: build with `--features {name}` (or `--features peers`)"
    )
}

/// Open the store `name` (`silt`, `rocksdb`, `sqlite`), or say why it is not built in.
pub(crate) fn open(name: &str, cfg: &KvConfig) -> KvResult<Box<dyn Kv>> {
    match name {
        "silt" => Ok(Box::new(Silt::open(cfg)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(Rocks::open(cfg)?)),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(Sqlite::open(cfg)?)),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => Err(not_built(name)),
        #[cfg(not(feature = "sqlite"))]
        "sqlite" => Err(not_built(name)),
        other => Err(format!("unknown store {other}: silt, rocksdb or sqlite")),
    }
}
