//! `silt-bench engine`: random and sequential inserts, blind updates against
//! read-modify-write, point gets, range count against cursor scan, bytes on disk and peak
//! resident memory, with the data at least ten times the cache.

use std::ops::Bound::{Excluded, Included, Unbounded};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::json;
use silt_storage::{Compression, Dict, Env, EnvOptions, SyncPolicy, UpdateOutcome, UpdateRegistry};

const INC: u32 = 1;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Cache budget in MiB.
    #[arg(long, default_value_t = 32)]
    cache_mb: usize,
    /// Keys for the out-of-cache random-insert phase (default: enough for 11x the cache).
    #[arg(long)]
    keys: Option<u64>,
    /// Value size in bytes (half random, half repeated).
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Node size in KiB.
    #[arg(long, default_value_t = 1024)]
    node_kb: usize,
    /// Basement size in KiB.
    #[arg(long, default_value_t = 64)]
    basement_kb: usize,
    /// Fanout of internal nodes.
    #[arg(long, default_value_t = 16)]
    fanout: usize,
    /// none, lz4, zstd or zstd:LEVEL.
    #[arg(long, default_value = "zstd")]
    compression: String,
    /// Blind updates to run (read-modify-write runs a tenth as many).
    #[arg(long, default_value_t = 300_000)]
    updates: u64,
    /// Point gets to run.
    #[arg(long, default_value_t = 30_000)]
    gets: u64,
    /// Data directory (default: a temporary directory, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub(crate) fn key_of(i: u64) -> [u8; 8] {
    // A bijective mix: distinct i give distinct keys, in an order unrelated to i.
    let mut x = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)).to_be_bytes()
}

fn value(rng: &mut SmallRng, n: usize) -> Vec<u8> {
    let mut v = vec![b'a'; n];
    rng.fill_bytes(&mut v[..n / 2]);
    v
}

/// Peak resident memory of a process (`VmHWM` in `/proc/<pid>/status`); 0 where unknown.
pub(crate) fn peak_rss_of(pid: &str) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// Current resident memory of a process (`VmRSS`); 0 where unknown.
pub(crate) fn rss_of(pid: &str) -> u64 {
    status_kib(pid, "VmRSS:")
}

fn status_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|k| k.parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn peak_rss() -> u64 {
    peak_rss_of("self")
}

struct Progress {
    name: &'static str,
    total: u64,
    next: u64,
    start: Instant,
}

impl Progress {
    fn new(name: &'static str, total: u64) -> Progress {
        eprintln!("[{name}] starting: {total} operations");
        Progress {
            name,
            total,
            next: total / 10,
            start: Instant::now(),
        }
    }
    fn tick(&mut self, done: u64) {
        if done >= self.next && self.total >= 10 {
            let el = self.start.elapsed().as_secs_f64();
            eprintln!(
                "[{}] {:>3}% {done} ops, {:.0} ops/s, rss {} MiB",
                self.name,
                done * 100 / self.total,
                done as f64 / el,
                peak_rss() >> 20
            );
            self.next += self.total / 10;
        }
    }
    fn rate(&self, n: u64) -> f64 {
        n as f64 / self.start.elapsed().as_secs_f64()
    }
}

fn inc(_k: &[u8], old: Option<&[u8]>, arg: &[u8]) -> UpdateOutcome {
    let Some(old) = old else {
        return UpdateOutcome::NoChange;
    };
    if old.len() < 8 {
        return UpdateOutcome::NoChange;
    }
    let mut v = old.to_vec();
    let cur = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
    let add = u64::from_le_bytes(arg.try_into().unwrap_or([0; 8]));
    v[..8].copy_from_slice(&cur.wrapping_add(add).to_le_bytes());
    UpdateOutcome::Set(v)
}

fn insert_random(
    d: &Dict,
    name: &'static str,
    n: u64,
    vb: usize,
    seed: u64,
) -> silt_storage::Result<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut p = Progress::new(name, n);
    for i in 0..n {
        d.put(&key_of(i), &value(&mut rng, vb))?;
        p.tick(i + 1);
    }
    Ok(p.rate(n))
}

pub(crate) fn run(a: Args) -> silt_storage::Result<()> {
    let compression = Compression::parse(&a.compression).ok_or_else(|| {
        silt_storage::Error::InvalidOptions(format!("unknown compression {}", a.compression))
    })?;
    let cache = a.cache_mb << 20;
    let entry = (8 + a.value_bytes) as u64;
    let keys = a.keys.unwrap_or(11 * cache as u64 / entry + 1);
    let in_cache_keys = (cache as u64 / 2) / entry;
    let seq_keys = keys / 4;
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("silt-bench-engine-{}", std::process::id()));
            tmp.clone()
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let opts = EnvOptions {
        cache_bytes: cache,
        node_bytes: a.node_kb << 10,
        basement_bytes: a.basement_kb << 10,
        fanout: a.fanout,
        compression,
        sync: SyncPolicy::Periodic(Duration::from_millis(100)),
        checkpoint_period: Some(Duration::from_secs(60)),
        ..EnvOptions::default()
    };
    let mut fns = UpdateRegistry::new();
    fns.register(INC, inc);
    let env = Env::open_with(&dir, opts, fns)?;
    let started = Instant::now();

    // 1. Random inserts with everything in cache (raw data half the cache).
    let small = env.create_dict("in-cache")?;
    let in_cache_rate = insert_random(&small, "insert-in-cache", in_cache_keys, a.value_bytes, 1)?;
    drop(small);
    env.drop_dict("in-cache")?;

    // 2. Random inserts to 11x the cache.
    let d = env.create_dict("random")?;
    let random_rate = insert_random(&d, "insert-random", keys, a.value_bytes, 2)?;

    // 3. Sequential inserts.
    let seq = env.create_dict("sequential")?;
    let mut rng = SmallRng::seed_from_u64(3);
    let mut p = Progress::new("insert-sequential", seq_keys);
    for i in 0..seq_keys {
        seq.put(&i.to_be_bytes(), &value(&mut rng, a.value_bytes))?;
        p.tick(i + 1);
    }
    let seq_rate = p.rate(seq_keys);

    // 4. Blind updates vs read-modify-write on the same keys.
    let one = 1u64.to_le_bytes();
    let mut rng = SmallRng::seed_from_u64(4);
    let mut p = Progress::new("update-blind", a.updates);
    for i in 0..a.updates {
        d.update(&key_of(rng.gen_range(0..keys)), INC, &one)?;
        p.tick(i + 1);
    }
    let blind_rate = p.rate(a.updates);
    let rmw_n = (a.updates / 10).max(1);
    let mut rng = SmallRng::seed_from_u64(4);
    let mut p = Progress::new("update-rmw", rmw_n);
    for i in 0..rmw_n {
        let k = key_of(rng.gen_range(0..keys));
        if let Some(v) = d.get(&k)? {
            if let UpdateOutcome::Set(nv) = inc(&k, Some(&v), &one) {
                d.put(&k, &nv)?;
            }
        }
        p.tick(i + 1);
    }
    let rmw_rate = p.rate(rmw_n);

    // 5. Point gets.
    let mut rng = SmallRng::seed_from_u64(5);
    let mut p = Progress::new("point-get", a.gets);
    let mut found = 0u64;
    for i in 0..a.gets {
        found += u64::from(d.get(&key_of(rng.gen_range(0..keys)))?.is_some());
        p.tick(i + 1);
    }
    let get_rate = p.rate(a.gets);
    assert_eq!(found, a.gets, "every key inserted is found");

    // 6. 10,000-key range: count in the tree vs a cursor scan, 10 ranges each.
    let (mut count_us, mut scan_us) = (0f64, 0f64);
    let reps = 10;
    let mut rng = SmallRng::seed_from_u64(6);
    for _ in 0..reps {
        let lo = key_of(rng.gen_range(0..keys));
        // Find the key 10,000 places on (outside the timing).
        let mut c = d.cursor(Included(&lo[..]), Unbounded);
        let mut hi = None;
        for _ in 0..=10_000 {
            hi = c.next()?.map(|(k, _)| k);
        }
        let hi_b = hi.as_deref().map_or(Unbounded, Excluded);
        let t = Instant::now();
        let n = d.count_range(Included(&lo[..]), hi_b)?;
        count_us += t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let mut c = d.cursor(Included(&lo[..]), hi_b);
        let mut m = 0u64;
        while c.next()?.is_some() {
            m += 1;
        }
        scan_us += t.elapsed().as_secs_f64() * 1e6;
        assert_eq!(n, m, "count and scan agree");
    }
    let (count_us, scan_us) = (count_us / reps as f64, scan_us / reps as f64);

    env.checkpoint()?;
    let st = env.stats();
    let data_bytes = (keys + seq_keys) * entry;
    let rss = peak_rss();
    let total_s = started.elapsed().as_secs_f64();

    let rows = [
        (
            "random inserts, in cache",
            format!("{in_cache_rate:.0} /s"),
            format!("{in_cache_keys} keys"),
        ),
        (
            "random inserts, 11x cache",
            format!("{random_rate:.0} /s"),
            format!("{keys} keys"),
        ),
        (
            "sequential inserts",
            format!("{seq_rate:.0} /s"),
            format!("{seq_keys} keys"),
        ),
        (
            "blind updates (update msg)",
            format!("{blind_rate:.0} /s"),
            format!("{} ops", a.updates),
        ),
        (
            "read-modify-write updates",
            format!("{rmw_rate:.0} /s"),
            format!("{rmw_n} ops"),
        ),
        (
            "point gets",
            format!("{get_rate:.0} /s"),
            format!("{} ops", a.gets),
        ),
        (
            "10,000-key range count",
            format!("{count_us:.0} us"),
            format!("mean of {reps}"),
        ),
        (
            "10,000-key cursor scan",
            format!("{scan_us:.0} us"),
            format!("mean of {reps}"),
        ),
        (
            "cache budget",
            format!("{} MiB", cache >> 20),
            String::new(),
        ),
        (
            "raw key+value bytes",
            format!("{} MiB", data_bytes >> 20),
            format!("{:.1}x cache", data_bytes as f64 / cache as f64),
        ),
        (
            "bytes on disk (allocated)",
            format!("{} MiB", st.bytes_on_disk >> 20),
            format!(
                "{:.0}% of raw",
                st.bytes_on_disk as f64 * 100.0 / data_bytes as f64
            ),
        ),
        (
            "apparent file sizes",
            format!("{} MiB", st.apparent_bytes >> 20),
            format!(
                "{:.0}% of raw (holes included)",
                st.apparent_bytes as f64 * 100.0 / data_bytes as f64
            ),
        ),
        (
            "peak RSS",
            format!("{} MiB", rss >> 20),
            format!(
                "limit 1.5x cache + 64 MiB = {} MiB",
                (cache * 3 / 2 + (64 << 20)) >> 20
            ),
        ),
    ];
    println!("{:<30} {:>14}  note", "workload", "result");
    for (w, r, n) in rows {
        println!("{w:<30} {r:>14}  {n}");
    }
    println!(
        "blind/rmw {:.1}x, random-out/in-cache {:.0}%, total {:.0} s",
        blind_rate / rmw_rate,
        random_rate * 100.0 / in_cache_rate,
        total_s
    );
    if let Some(path) = &a.json {
        let j = json!({
            "workload": "engine",
            "params": {
                "cache_mb": a.cache_mb, "keys": keys, "sequential_keys": seq_keys,
                "in_cache_keys": in_cache_keys, "value_bytes": a.value_bytes,
                "node_kb": a.node_kb, "basement_kb": a.basement_kb, "fanout": a.fanout,
                "compression": a.compression, "updates": a.updates, "rmw_updates": rmw_n,
                "gets": a.gets,
            },
            "blind_update_per_s": blind_rate,
            "rmw_update_per_s": rmw_rate,
            "random_insert_per_s": random_rate,
            "random_insert_in_cache_per_s": in_cache_rate,
            "sequential_insert_per_s": seq_rate,
            "point_get_per_s": get_rate,
            "range_count_us": count_us,
            "range_scan_us": scan_us,
            "cache_bytes": cache,
            "data_bytes": data_bytes,
            "bytes_on_disk": st.bytes_on_disk,
            "apparent_bytes": st.apparent_bytes,
            "log_files": st.log_files,
            "peak_rss_bytes": rss,
            "cache_peak_charged_bytes": st.cache_peak,
            "evictions": st.evictions,
            "partial_evictions": st.partial_evictions,
            "writebacks": st.writebacks,
            "misses": st.misses,
            "total_s": total_s,
        });
        std::fs::write(path, serde_json::to_string_pretty(&j).unwrap_or_default()).map_err(
            |e| silt_storage::Error::InvalidOptions(format!("writing {}: {e}", path.display())),
        )?;
    }
    drop(d);
    drop(seq);
    env.close()?;
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
