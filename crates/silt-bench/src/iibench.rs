//! `silt-bench iibench`: workload W2 of `shared/workloads.md` (iiBench-style ingest with three
//! secondary indexes, then retention) against a `siltd` child process, once per retention
//! method, each on a fresh server:
//!
//! - **delete**: a second connection deletes the oldest documents by `_id`, 10,000 at a time,
//!   whenever the collection holds more than T;
//! - **partition**: the collection is partitioned; a second connection opens a new partition
//!   (`addPartition`) whenever the last one holds T/20 documents, and drops the oldest
//!   (`dropPartition`) whenever the collection holds more than T.
//!
//! One insert connection writes batches of 1,000 documents with increasing `_id`s until 2 T
//! have been inserted, and waits while the collection holds more than 1.1 T. The figures:
//! inserts/s for every 5% of the run, for the first and the second half, and after retention
//! began; deletes/s; the time of every partition drop. The run checks that the collection
//! ends with exactly the documents inserted and not removed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::client::{Client, Server};
use crate::target::PeerName;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// T: the documents the collection holds (2 T are inserted).
    #[arg(long, default_value_t = 2_000_000)]
    pub(crate) docs: u64,
    /// The server's cache, in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mb: u64,
    /// Bytes of the `data` string of each document.
    #[arg(long, default_value_t = 100)]
    pub(crate) data_bytes: usize,
    /// Run siltd with buffered reads instead of `--directio`.
    #[arg(long)]
    buffered: bool,
    /// Which methods to run: `delete`, `partition` or `both`.
    #[arg(long, default_value = "both")]
    method: String,
    /// Also run the ingest to T (W2a) on this peer after siltd: `ferretdb` or `postgres`.
    #[arg(long)]
    peer: Vec<PeerName>,
    /// Write the figures as JSON here (and the plot next to it, as `.svg`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the plot here.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub(crate) const DB: &str = "w2";
pub(crate) const COLL: &str = "purchases";
pub(crate) const BATCH: u64 = 1_000;
const DELETE_BATCH: i64 = 10_000;

/// What the retention side of one run did.
#[derive(Default)]
struct Retained {
    /// Documents removed (deleted, or in dropped partitions).
    removed: AtomicU64,
    /// When retention first removed something, in seconds since the start.
    began_s: Mutex<Option<f64>>,
    /// Milliseconds of each partition drop.
    drops_ms: Mutex<Vec<f64>>,
    /// Seconds spent in delete commands.
    delete_s: Mutex<f64>,
}

/// One method's run.
struct Run {
    method: &'static str,
    /// (documents inserted, seconds since the start) after every batch.
    marks: Vec<(u64, f64)>,
    retained: Arc<Retained>,
    total_s: f64,
    final_count: i64,
    expected: i64,
    partitions: Option<i64>,
    /// siltd's peak resident memory over the run (bytes).
    peak_rss: u64,
}

impl Run {
    /// Inserts/s between the marks where `from` and `to` documents had been inserted.
    fn rate(&self, from: u64, to: u64) -> f64 {
        rate_of(&self.marks, from, to)
    }

    /// Inserts/s from the moment retention began to the end.
    fn after_retention(&self) -> f64 {
        let Some(t0) = *self
            .retained
            .began_s
            .lock()
            .unwrap_or_else(|e| e.into_inner())
        else {
            return 0.0;
        };
        let first = self.marks.iter().find(|(_, t)| *t >= t0);
        let last = self.marks.last();
        match (first, last) {
            (Some(a), Some(b)) if b.1 > a.1 => (b.0 - a.0) as f64 / (b.1 - a.1),
            _ => 0.0,
        }
    }

    /// Documents removed per second of the retention phase.
    fn removed_per_s(&self) -> f64 {
        let t0 = self
            .retained
            .began_s
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(self.total_s);
        let span = self.total_s - t0;
        if span > 0.0 {
            self.retained.removed.load(Ordering::Relaxed) as f64 / span
        } else {
            0.0
        }
    }
}

/// Inserts/s between the marks where `from` and `to` documents had been inserted.
fn rate_of(marks: &[(u64, f64)], from: u64, to: u64) -> f64 {
    let at = |n: u64| {
        marks
            .iter()
            .find(|(d, _)| *d >= n)
            .map(|m| (m.0, m.1))
            .unwrap_or((0, 0.0))
    };
    let ((d0, t0), (d1, t1)) = (if from == 0 { (0, 0.0) } else { at(from) }, at(to));
    if t1 > t0 {
        (d1 - d0) as f64 / (t1 - t0)
    } else {
        0.0
    }
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "a double is read as an integer: the saturating cast is the intended reading"
)]
fn number(v: Option<&Bson>) -> i64 {
    match v {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => -1,
    }
}

pub(crate) fn purchase(rng: &mut SmallRng, id: i64, data: &str) -> Document {
    let price = f64::from(rng.gen_range(0u32..50_000)) / 100.0;
    doc! {
        "_id": id,
        "dateandtime": bson::DateTime::now(),
        "cashregisterid": rng.gen_range(0..1000i32),
        "customerid": rng.gen_range(0..100_000i32),
        "productid": rng.gen_range(0..10_000i32),
        "price": price,
        "data": data,
    }
}

/// W2's three secondary indexes.
pub(crate) fn create_indexes(c: &mut Client) -> Result<(), String> {
    c.command(
        DB,
        doc! { "createIndexes": COLL, "indexes": [
            { "key": { "price": 1, "customerid": 1 }, "name": "pc" },
            { "key": { "cashregisterid": 1, "price": 1, "customerid": 1 }, "name": "cpc" },
            { "key": { "price": 1, "dateandtime": 1, "customerid": 1 }, "name": "pdc" },
        ] },
    )
    .map(|_| ())
}

/// The partitions' ids and document counts.
fn partitions(c: &mut Client) -> Result<Vec<(i64, i64)>, String> {
    let r = c.command(DB, doc! { "getPartitionInfo": COLL })?;
    Ok(r.get_array("partitions")
        .map_err(|e| e.to_string())?
        .iter()
        .filter_map(|p| p.as_document())
        .map(|p| (number(p.get("_id")), number(p.get("count"))))
        .collect())
}

fn count(c: &mut Client) -> Result<i64, String> {
    let r = c.command(DB, doc! { "count": COLL })?;
    Ok(number(r.get("n")))
}

/// The retention side: remove the oldest documents whenever the collection holds more than
/// `t`, until `stop`.
fn retain(
    port: u16,
    partitioned: bool,
    t: u64,
    live: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    out: Arc<Retained>,
    started: Instant,
) -> Result<(), String> {
    let mut c = Client::connect(port).map_err(|e| e.to_string())?;
    let mut oldest: i64 = 0;
    let began = |out: &Retained| {
        let mut b = out.began_s.lock().unwrap_or_else(|e| e.into_inner());
        b.get_or_insert(started.elapsed().as_secs_f64());
    };
    while !stop.load(Ordering::Acquire) {
        if partitioned {
            let parts = partitions(&mut c)?;
            let last = parts.last().map_or(0, |p| p.1);
            if last as u64 >= t / 20 {
                c.command(DB, doc! { "addPartition": COLL })?;
                continue;
            }
            let total: i64 = parts.iter().map(|p| p.1).sum();
            if total as u64 > t && parts.len() > 1 {
                let (id, n) = parts[0];
                let s = Instant::now();
                c.command(DB, doc! { "dropPartition": COLL, "id": id })?;
                let ms = s.elapsed().as_secs_f64() * 1e3;
                out.drops_ms
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(ms);
                out.removed.fetch_add(n as u64, Ordering::Relaxed);
                live.fetch_sub(n as u64, Ordering::Relaxed);
                began(&out);
                continue;
            }
        } else if live.load(Ordering::Relaxed) > t {
            let s = Instant::now();
            let r = c.command(
                DB,
                doc! { "delete": COLL, "deletes": [ { "q": { "_id": { "$lt": oldest + DELETE_BATCH } }, "limit": 0 } ] },
            )?;
            *out.delete_s.lock().unwrap_or_else(|e| e.into_inner()) += s.elapsed().as_secs_f64();
            let n = number(r.get("n")).max(0) as u64;
            oldest += DELETE_BATCH;
            out.removed.fetch_add(n, Ordering::Relaxed);
            live.fetch_sub(n, Ordering::Relaxed);
            began(&out);
            continue;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn run_method(a: &Args, method: &'static str) -> Result<Run, Box<dyn std::error::Error>> {
    let partitioned = method == "partition";
    let cache = format!("{}MB", a.cache_mb);
    let mut flags = vec!["--cache-size", &cache];
    if !a.buffered {
        flags.push("--directio");
    }
    let server = Server::start(None, &flags)?;
    let mut c = Client::connect(server.port)?;
    let mut create = doc! { "create": COLL };
    if partitioned {
        create.insert("partitioned", true);
    }
    c.command(DB, create)?;
    create_indexes(&mut c)?;
    let t = a.docs;
    let total = 2 * t;
    let live = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let retained = Arc::new(Retained::default());
    let started = Instant::now();
    let keeper = {
        let (live, stop, out) = (live.clone(), stop.clone(), retained.clone());
        let port = server.port;
        std::thread::spawn(move || retain(port, partitioned, t, live, stop, out, started))
    };
    let mut rng = SmallRng::seed_from_u64(2);
    let data: String = "d".repeat(a.data_bytes);
    let mut marks = Vec::with_capacity((total / BATCH) as usize);
    let mut inserted = 0u64;
    let mut next_report = total / 20;
    let mut last_report = (0u64, 0.0f64);
    while inserted < total {
        // Hold the collection near T: wait while retention catches up.
        while live.load(Ordering::Relaxed) > t + t / 10 && !keeper.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let n = BATCH.min(total - inserted);
        let batch: Vec<Document> = (inserted..inserted + n)
            .map(|i| purchase(&mut rng, i as i64, &data))
            .collect();
        c.command(
            DB,
            doc! { "insert": COLL, "documents": batch, "ordered": false },
        )?;
        inserted += n;
        live.fetch_add(n, Ordering::Relaxed);
        let now = started.elapsed().as_secs_f64();
        marks.push((inserted, now));
        if inserted >= next_report {
            let rate = (inserted - last_report.0) as f64 / (now - last_report.1);
            eprintln!(
                "[{method}] {:>3}% {inserted} inserted, {rate:.0} inserts/s, {} held, {} removed",
                inserted * 100 / total,
                live.load(Ordering::Relaxed),
                retained.removed.load(Ordering::Relaxed)
            );
            last_report = (inserted, now);
            next_report += total / 20;
        }
    }
    let total_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Release);
    keeper
        .join()
        .map_err(|_| "the retention thread panicked")??;
    let removed = retained.removed.load(Ordering::Relaxed) as i64;
    let expected = total as i64 - removed + crate::skew();
    let final_count = count(&mut c)?;
    let by_scan = number(
        c.command(
            DB,
            doc! { "aggregate": COLL, "pipeline": [ { "$match": {} }, { "$group": { "_id": 1, "n": { "$sum": 1 } } } ], "cursor": {} },
        )?
        .get_document("cursor")
        .ok()
        .and_then(|c| c.get_array("firstBatch").ok())
        .and_then(|b| b.first())
        .and_then(|d| d.as_document())
        .and_then(|d| d.get("n")),
    );
    if final_count != expected || by_scan != expected {
        return Err(format!(
            "{method}: the collection holds {final_count} documents (counted: {by_scan}), but {total} were inserted and {removed} removed"
        )
        .into());
    }
    let parts = if partitioned {
        let p = partitions(&mut c)?;
        if p.iter().map(|x| x.1).sum::<i64>() != expected {
            return Err(
                format!("{method}: the partitions' counts do not add up to {expected}").into(),
            );
        }
        Some(p.len() as i64)
    } else {
        None
    };
    Ok(Run {
        method,
        marks,
        retained,
        total_s,
        final_count,
        expected,
        partitions: parts,
        peak_rss: server.peak_rss(),
    })
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let methods: Vec<&'static str> = match a.method.as_str() {
        "both" => vec!["delete", "partition"],
        "delete" => vec!["delete"],
        "partition" => vec!["partition"],
        other => return Err(format!("--method {other}: use delete, partition or both").into()),
    };
    if a.docs < 20 * BATCH {
        return Err(format!("--docs must be at least {}", 20 * BATCH).into());
    }
    let mut runs = Vec::new();
    for m in methods {
        runs.push(run_method(&a, m)?);
    }
    let mut peers = Vec::new();
    for p in &a.peer {
        peers.push(crate::w2_peers::run_peer(*p, &a)?);
    }
    let total = 2 * a.docs;
    println!(
        "{:<11}{:>14}{:>14}{:>16}{:>14}{:>12}{:>14}",
        "method", "1st half/s", "2nd half/s", "after retain/s", "removed/s", "drops", "max drop ms"
    );
    let mut results = serde_json::Map::new();
    for r in &runs {
        let drops = r
            .retained
            .drops_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let max_drop = drops.iter().cloned().fold(0.0, f64::max);
        let (h1, h2, after) = (
            r.rate(0, a.docs),
            r.rate(a.docs, total),
            r.after_retention(),
        );
        println!(
            "{:<11}{:>14.0}{:>14.0}{:>16.0}{:>14.0}{:>12}{:>14}",
            r.method,
            h1,
            h2,
            after,
            r.removed_per_s(),
            if r.partitions.is_some() {
                drops.len().to_string()
            } else {
                "-".into()
            },
            if r.partitions.is_some() {
                format!("{max_drop:.1}")
            } else {
                "-".into()
            },
        );
        let p = r.method;
        results.insert(format!("{p}_first_half_per_s"), json!(h1));
        results.insert(format!("{p}_second_half_per_s"), json!(h2));
        results.insert(format!("{p}_after_retention_per_s"), json!(after));
        results.insert(format!("{p}_removed_per_s"), json!(r.removed_per_s()));
        results.insert(format!("{p}_seconds"), json!(r.total_s));
        results.insert(format!("{p}_final_count"), json!(r.final_count));
        let curve: Vec<f64> = (1..=20)
            .map(|i| r.rate((i - 1) * total / 20, i * total / 20))
            .collect();
        results.insert(format!("{p}_per_5pct_per_s"), json!(curve));
        if r.method == "delete" {
            results.insert("deletes_per_s".into(), json!(r.removed_per_s()));
            let busy = *r
                .retained
                .delete_s
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            results.insert("delete_command_seconds".into(), json!(busy));
        } else {
            results.insert("max_partition_drop_ms".into(), json!(max_drop));
            results.insert("partition_drops_ms".into(), json!(drops));
            results.insert("partitions_at_end".into(), json!(r.partitions));
        }
        debug_assert_eq!(r.final_count, r.expected);
    }
    println!("inserts/s for every 5% of the run (2 T = {total} documents):");
    for r in &runs {
        let curve: Vec<String> = (1..=20)
            .map(|i| format!("{:.0}", r.rate((i - 1) * total / 20, i * total / 20)))
            .collect();
        println!("  {:<10} {}", r.method, curve.join(" "));
    }
    if let (Some(d), Some(p)) = (
        runs.iter().find(|r| r.method == "delete"),
        runs.iter().find(|r| r.method == "partition"),
    ) {
        let ratio = p.after_retention() / d.after_retention().max(1e-9);
        println!("after retention began, partition/delete inserts: {ratio:.2}x");
        results.insert("partition_to_delete_after_retention".into(), json!(ratio));
    }
    // W2a: the last quarter of the ingest to T (retention has not begun: both siltd runs
    // are the same ingest up to there; the first is quoted).
    let (q0, q1) = (a.docs * 3 / 4, a.docs);
    let silt_q = runs[0].rate(q0, q1);
    println!(
        "W2a ingest to T, last quarter: siltd {silt_q:.0} inserts/s ({} run)",
        runs[0].method
    );
    results.insert("w2_last_quarter_silt_per_s".into(), json!(silt_q));
    results.insert("silt_peak_rss_bytes".into(), json!(runs[0].peak_rss));
    // What bench/peers.sh capped PostgreSQL's memory at (its processes and the file pages
    // they read), if it did: without a cap its indexes stay in the OS page cache.
    let pg_cap_mb = std::env::var("SILT_PG_MEM_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    for (name, marks) in &peers {
        let q = rate_of(marks, q0, q1);
        let curve: Vec<f64> = (1..=20)
            .map(|i| rate_of(marks, (i - 1) * a.docs / 20, i * a.docs / 20))
            .collect();
        println!(
            "  {name:<10} {q:.0} inserts/s: siltd {:.2}x; every 5% of T: {}",
            silt_q / q,
            curve
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        results.insert(format!("w2_last_quarter_{name}_per_s"), json!(q));
        results.insert(format!("{name}_ingest_per_5pct_per_s"), json!(curve));
        results.insert(
            format!("{name}_ingest_seconds"),
            json!(marks.last().map_or(0.0, |m| m.1)),
        );
    }
    println!(
        "T = {} documents, cache {} MiB, {}, siltd peak RSS {} MiB; every count checked against the inserts and removals",
        a.docs,
        a.cache_mb,
        if a.buffered {
            "buffered reads"
        } else {
            "O_DIRECT (siltd --directio)"
        },
        runs[0].peak_rss >> 20
    );
    if a.peer.contains(&PeerName::Postgres) {
        println!(
            "PostgreSQL memory: {}",
            pg_cap_mb.map_or(
                "not capped (the OS page cache may hold its table and indexes)".to_string(),
                |m| format!("capped at {m} MiB for its processes and the file pages they read (a memory cgroup)")
            )
        );
    }
    let plot = a
        .plot
        .clone()
        .or_else(|| a.json.as_ref().map(|j| j.with_extension("svg")));
    if let Some(path) = &plot {
        let series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|r| {
                let pts = (1..=40u64)
                    .map(|i| {
                        let (lo, hi) = ((i - 1) * total / 40, i * total / 40);
                        (hi as f64 / a.docs as f64, r.rate(lo, hi))
                    })
                    .collect();
                (format!("siltd, {} retention", r.method), pts)
            })
            .chain(peers.iter().map(|(name, marks)| {
                let pts = (1..=20u64)
                    .map(|i| {
                        let (lo, hi) = ((i - 1) * a.docs / 20, i * a.docs / 20);
                        (hi as f64 / a.docs as f64, rate_of(marks, lo, hi))
                    })
                    .collect();
                (format!("{name}, ingest to T"), pts)
            }))
            .collect();
        let refs: Vec<(&str, &[(f64, f64)])> = series
            .iter()
            .map(|(n, p)| (n.as_str(), p.as_slice()))
            .collect();
        crate::plot::over_run(
            path,
            &format!("W2 iiBench: inserts/s with 3 indexes, T = {}", a.docs),
            "documents inserted (multiples of T; retention from 1 T on)",
            "inserts/s",
            &refs,
        )?;
        println!("plot: {}", path.display());
    }
    if let Some(p) = &a.json {
        results.insert(
            "params".into(),
            json!({ "docs": a.docs, "cache_mb": a.cache_mb, "data_bytes": a.data_bytes,
                    "directio": !a.buffered, "batch": BATCH, "delete_batch": DELETE_BATCH,
                    "peers": PeerName::names(&a.peer), "postgres_memory_cap_mb": pg_cap_mb }),
        );
        std::fs::write(p, serde_json::to_string_pretty(&results)?)?;
    }
    Ok(())
}
