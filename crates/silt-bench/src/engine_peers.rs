//! `silt-bench engine-peers`: the engine-level comparison of issue 15. The same keys, values,
//! cache budget and compression go through each store in turn (`kv.rs`): random inserts until
//! the data is several times the cache, blind increments (fractal-tree update messages against
//! RocksDB's merge operator and SQLite's read-modify-write), point reads of the out-of-cache
//! data, and bytes on disk after each store has settled.
//!
//! Every run verifies itself: every inserted key is found by the point reads, and a sample of
//! keys read back after the increments carries exactly the increments sent to it.

use std::path::PathBuf;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::{json, Map, Value};

use crate::engine::key_of;
use crate::kv::{self, Kv, KvConfig};
use crate::progress::Bar;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Stores to run, in order (silt, rocksdb, sqlite). Default: silt and every peer built in.
    #[arg(long, value_delimiter = ',')]
    stores: Vec<String>,
    /// Cache budget of every store, in MiB.
    #[arg(long, default_value_t = 32)]
    cache_mb: usize,
    /// Keys to insert (default: enough raw data for 8x the cache).
    #[arg(long)]
    keys: Option<u64>,
    /// Value size in bytes (the first 8 are a counter; half of the rest random).
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Fractal-tree node size in KiB (default: siltd's rule, 4 MiB capped at a sixteenth of
    /// the cache).
    #[arg(long)]
    node_kb: Option<usize>,
    /// Fractal-tree basement size in KiB (default: 128, at most the node size).
    #[arg(long)]
    basement_kb: Option<usize>,
    /// Blind increments.
    #[arg(long, default_value_t = 500_000)]
    updates: u64,
    /// Point reads.
    #[arg(long, default_value_t = 50_000)]
    gets: u64,
    /// none, lz4 or zstd, for every store that compresses.
    #[arg(long, default_value = "zstd")]
    compression: String,
    /// Read through the OS page cache instead of O_DIRECT (SQLite always does).
    #[arg(long)]
    buffered: bool,
    /// Where the stores' directories go (default: the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What one store measured.
pub(crate) struct StoreRun {
    pub name: &'static str,
    pub describe: String,
    pub insert_per_s: f64,
    pub insert_last_quarter_per_s: f64,
    pub blind_per_s: f64,
    pub get_per_s: f64,
    pub bytes_on_disk: u64,
}

fn value(rng: &mut SmallRng, n: usize) -> Vec<u8> {
    let mut v = vec![b'a'; n.max(8)];
    let half = 8 + (n.saturating_sub(8)) / 2;
    rng.fill_bytes(&mut v[8..half]);
    v[..8].fill(0);
    v
}

/// Run every phase on one store; `Err` if a phase fails or a check does not hold.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the sample holds at most 1000 keys and `k` is below it"
)]
pub(crate) fn run_store(s: &mut dyn Kv, keys: u64, a: &Args) -> Result<StoreRun, String> {
    let name = s.name();
    // Inserts, with the rate of the last quarter kept apart.
    let mut rng = SmallRng::seed_from_u64(2);
    let mut bar = Bar::new(&format!("{name} insert"), keys);
    let t = Instant::now();
    let mut q3 = None;
    for i in 0..keys {
        s.put(&key_of(i), &value(&mut rng, a.value_bytes))?;
        if i + 1 == keys * 3 / 4 {
            q3 = Some(Instant::now());
        }
        bar.set(i + 1);
    }
    let insert_per_s = keys as f64 / t.elapsed().as_secs_f64();
    let last_q = keys - keys * 3 / 4;
    let insert_last_quarter_per_s =
        q3.map_or(insert_per_s, |q| last_q as f64 / q.elapsed().as_secs_f64());
    bar.done();

    // Blind increments; a sample of keys remembers what it was sent.
    let sample = 1000.min(keys);
    let mut sent = vec![0u64; sample as usize];
    let mut rng = SmallRng::seed_from_u64(4);
    let mut bar = Bar::new(&format!("{name} blind increment"), a.updates);
    let t = Instant::now();
    for i in 0..a.updates {
        let k = rng.gen_range(0..keys);
        s.blind_inc(&key_of(k))?;
        if k < sample {
            sent[k as usize] += 1;
        }
        bar.set(i + 1);
    }
    let blind_per_s = a.updates as f64 / t.elapsed().as_secs_f64();
    bar.done();

    // Point reads of random keys.
    let mut rng = SmallRng::seed_from_u64(5);
    let mut bar = Bar::new(&format!("{name} point get"), a.gets);
    let t = Instant::now();
    let mut found = 0u64;
    for i in 0..a.gets {
        found += u64::from(s.get(&key_of(rng.gen_range(0..keys)))?.is_some());
        bar.set(i + 1);
    }
    let get_per_s = a.gets as f64 / t.elapsed().as_secs_f64();
    bar.done();
    if found as i64 != a.gets as i64 + crate::skew() {
        return Err(format!(
            "{name}: {} of {} point reads found nothing",
            a.gets - found,
            a.gets
        ));
    }
    for (k, want) in sent.iter().enumerate() {
        let v = s
            .get(&key_of(k as u64))?
            .ok_or_else(|| format!("{name}: key {k} is gone"))?;
        let got = u64::from_le_bytes(v[..8].try_into().map_err(|_| "short value")?);
        if got as i64 != *want as i64 + crate::skew() {
            return Err(format!(
                "{name}: key {k} counts {got} increments, {want} were sent"
            ));
        }
    }
    s.settle()?;
    Ok(StoreRun {
        name,
        describe: s.describe(),
        insert_per_s,
        insert_last_quarter_per_s,
        blind_per_s,
        get_per_s,
        bytes_on_disk: s.bytes_on_disk(),
    })
}

fn default_stores() -> Vec<String> {
    let mut v = vec!["silt".to_string()];
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb".into());
    }
    if cfg!(feature = "sqlite") {
        v.push("sqlite".into());
    }
    v
}

pub(crate) fn run(mut a: Args) -> Result<(), String> {
    if a.stores.is_empty() {
        a.stores = default_stores();
    }
    let cache = a.cache_mb << 20;
    let entry = (8 + a.value_bytes.max(8)) as u64;
    let keys = a.keys.unwrap_or(8 * cache as u64 / entry + 1);
    let base = a
        .dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("silt-bench-engine-peers-{}", std::process::id()));
    let mut runs = Vec::new();
    for name in &a.stores {
        let dir = base.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cfg = KvConfig {
            dir: dir.clone(),
            cache_bytes: cache,
            compression: a.compression.clone(),
            direct_io: !a.buffered,
            node_bytes: a.node_kb.unwrap_or(0) << 10,
            basement_bytes: a.basement_kb.unwrap_or(0) << 10,
        };
        let mut s = kv::open(name, &cfg)?;
        eprintln!("[{name}] {}", s.describe());
        let r = run_store(&mut *s, keys, &a);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
        runs.push(r?);
    }
    let _ = std::fs::remove_dir_all(&base);
    let raw = keys * entry;
    println!(
        "engine-peers: {keys} keys of {} bytes ({} MiB raw, {:.1}x the {} MiB cache), {} compression",
        entry,
        raw >> 20,
        raw as f64 / cache as f64,
        a.cache_mb,
        a.compression
    );
    println!(
        "{:<10} {:>12} {:>14} {:>14} {:>12} {:>12}",
        "store", "insert/s", "last 25% /s", "blind inc/s", "get/s", "MiB on disk"
    );
    for r in &runs {
        println!(
            "{:<10} {:>12.0} {:>14.0} {:>14.0} {:>12.0} {:>12.1}",
            r.name,
            r.insert_per_s,
            r.insert_last_quarter_per_s,
            r.blind_per_s,
            r.get_per_s,
            r.bytes_on_disk as f64 / (1 << 20) as f64
        );
    }
    if let Some(silt) = runs.iter().find(|r| r.name == "silt") {
        for r in runs.iter().filter(|r| r.name != "silt") {
            println!(
                "silt/{}: insert {:.2}x, blind increment {:.2}x, point get {:.2}x, bytes {:.2}x",
                r.name,
                silt.insert_per_s / r.insert_per_s,
                silt.blind_per_s / r.blind_per_s,
                silt.get_per_s / r.get_per_s,
                silt.bytes_on_disk as f64 / r.bytes_on_disk as f64
            );
        }
    }
    if let Some(path) = &a.json {
        let mut j = Map::new();
        j.insert("workload".into(), json!("engine-peers"));
        j.insert(
            "params".into(),
            json!({
                "cache_mb": a.cache_mb, "keys": keys, "value_bytes": a.value_bytes,
                "raw_bytes": raw, "updates": a.updates, "gets": a.gets,
                "compression": a.compression, "direct_io": !a.buffered, "stores": a.stores,
            }),
        );
        for r in &runs {
            let n = r.name;
            j.insert(format!("engine_insert_{n}_per_s"), json!(r.insert_per_s));
            j.insert(
                format!("engine_insert_last_quarter_{n}_per_s"),
                json!(r.insert_last_quarter_per_s),
            );
            let blind = if n == "rocksdb" { "merge" } else { "blind" };
            j.insert(format!("engine_{blind}_{n}_per_s"), json!(r.blind_per_s));
            j.insert(format!("engine_point_get_{n}_per_s"), json!(r.get_per_s));
            j.insert(format!("engine_bytes_{n}"), json!(r.bytes_on_disk));
            j.insert(format!("settings_{n}"), json!(r.describe));
        }
        std::fs::write(
            path,
            serde_json::to_string_pretty(&Value::Object(j)).unwrap_or_default(),
        )
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}
