//! `silt-bench fast-update`: workload W1 of `shared/workloads.md` (sysbench-style updates)
//! against a `siltd` child process, each phase with fast updates off, then on.
//!
//! W1a: `$inc` of an unindexed field by `_id`; W1b: the same through a secondary index on `k`
//! (`multi: true`); W1c (control): `$inc` on the indexed `k`, which must not take the fast path.
//! Afterwards the sum of `counter` must equal the increments the server acknowledged.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::json;

use crate::client::{Client, Server};
use crate::progress::Bar;
use crate::target::PeerName;

#[derive(clap::Args, Clone)]
pub(crate) struct Args {
    /// Documents in the collection.
    #[arg(long, default_value_t = 150_000)]
    pub(crate) docs: u64,
    /// Incompressible filler per document, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub(crate) blob_bytes: usize,
    /// Documents per distinct `k` value (on average).
    #[arg(long, default_value_t = 4)]
    pub(crate) docs_per_k: u64,
    /// The server's cache, in MiB.
    #[arg(long, default_value_t = 16)]
    pub(crate) cache_mb: u64,
    /// Client threads.
    #[arg(long, default_value_t = 16)]
    pub(crate) threads: usize,
    /// Seconds per phase and mode (run as quarters: off, on, on, off, off, on, on, off).
    #[arg(long, default_value_t = 10)]
    pub(crate) seconds: u64,
    /// Run siltd with buffered reads instead of `--directio`. By default the server reads
    /// with O_DIRECT, so that data larger than the cache is really out of memory; buffered,
    /// the OS page cache of a machine with more RAM than data holds the whole collection and
    /// a "miss" costs a memory copy instead of a disk read.
    #[arg(long)]
    pub(crate) buffered: bool,
    /// Instead of W1a-c, run the TokuDB transaction experiment: sysbench-style OLTP
    /// transactions with 1 and then this many non-indexed `$inc` updates each, fast updates
    /// off and on (siltd runs as a one-member replica set).
    #[arg(long)]
    pub(crate) txn_updates: Option<u32>,
    /// With `--txn-updates`: send each non-indexed update as its own `update` command (as
    /// sysbench does) instead of one command with all of them.
    #[arg(long)]
    pub(crate) one_update_per_command: bool,
    /// Also run against this peer after siltd, with the same documents, threads and time:
    /// `ferretdb` (W1a-c) or `postgres` (W1a); see `bench/peers.sh`.
    #[arg(long)]
    pub(crate) peer: Vec<PeerName>,
    /// Write the figures as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}

impl Args {
    /// W1a's documents (1 KiB of filler, four per `k`) for a workload that runs W1a's phases
    /// itself (`oplog`, `replset`).
    pub(crate) fn w1a(
        docs: u64,
        cache_mb: u64,
        threads: usize,
        seconds: u64,
        buffered: bool,
    ) -> Args {
        Args {
            docs,
            blob_bytes: 1024,
            docs_per_k: 4,
            cache_mb,
            threads,
            seconds,
            buffered,
            txn_updates: None,
            one_update_per_command: false,
            peer: Vec::new(),
            json: None,
        }
    }
}

/// Slices each mode's time is cut into (see the off/on/on/off order in `run`).
pub(crate) const SLICES: usize = 4;

pub(crate) const DB: &str = "sbtest";
pub(crate) const COLL: &str = "sbtest1";

fn text(rng: &mut SmallRng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'a' + (rng.next_u32() % 26) as u8))
        .collect()
}

/// Generate the collection's documents in batches of 1,000 for `sink`; returns the raw BSON
/// bytes generated.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a batch holds at most 1000 documents"
)]
pub(crate) fn generate(
    a: &Args,
    label: &str,
    mut sink: impl FnMut(Vec<Document>) -> Result<(), String>,
) -> Result<u64, String> {
    let mut rng = SmallRng::seed_from_u64(1);
    let kmax = (a.docs / a.docs_per_k).max(1);
    let mut raw = 0u64;
    let mut bar = Bar::new(label, a.docs);
    let mut i = 0u64;
    while i < a.docs {
        let n = 1000.min(a.docs - i);
        let mut batch = Vec::with_capacity(n as usize);
        for j in i..i + n {
            let mut blob = vec![0u8; a.blob_bytes];
            rng.fill_bytes(&mut blob);
            let d = doc! {
                "_id": j as i64,
                "k": rng.gen_range(0..kmax) as i64,
                "c": text(&mut rng, 120),
                "pad": text(&mut rng, 60),
                "counter": 0i64,
                "blob": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: blob },
            };
            let mut v = Vec::new();
            let _ = d.to_writer(&mut v);
            raw += v.len() as u64;
            batch.push(d);
        }
        sink(batch)?;
        i += n;
        bar.set(i);
    }
    bar.done();
    Ok(raw)
}

/// Load the collection through the wire and index `k`.
pub(crate) fn load(c: &mut Client, a: &Args, label: &str) -> Result<u64, String> {
    let raw = generate(a, label, |batch| {
        c.command(
            DB,
            doc! { "insert": COLL, "documents": batch, "ordered": false },
        )
        .map(|_| ())
    })?;
    c.command(
        DB,
        doc! { "createIndexes": COLL, "indexes": [ { "key": { "k": 1 }, "name": "k_1" } ] },
    )?;
    Ok(raw)
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum W {
    A,
    B,
    C,
}

/// What one phase measured.
pub(crate) struct PhaseOut {
    /// Updates/s over the phase.
    pub rate: f64,
    /// Counter increments acknowledged.
    pub incs: u64,
    /// Statements the server says took the fast path.
    pub fast_seen: u64,
    /// Updates/s in each `SAMPLE` of the phase, in order.
    pub samples: Vec<f64>,
    /// Retries of updates a peer refused as busy (not counted as updates).
    pub busy_retries: u64,
    /// Increments that refused updates may have applied before they failed: a peer's
    /// multi-document update can stop part way (FerretDB writes each document on its own), so
    /// the counter sum lies between `incs` and `incs + uncertain`. Zero on siltd.
    pub uncertain: u64,
}

/// The spacing of [`PhaseOut::samples`].
pub(crate) const SAMPLE: Duration = Duration::from_millis(500);

/// Sleep `len` in steps of [`SAMPLE`], recording the rate of `ops` in each step.
pub(crate) fn sample_for(len: Duration, ops: &AtomicU64) -> Vec<f64> {
    let end = Instant::now() + len;
    let mut out = Vec::new();
    let (mut last_n, mut last_t) = (ops.load(Ordering::Relaxed), Instant::now());
    while Instant::now() < end {
        std::thread::sleep(SAMPLE.min(end.saturating_duration_since(Instant::now())));
        let (n, t) = (ops.load(Ordering::Relaxed), Instant::now());
        let dt = (t - last_t).as_secs_f64();
        if dt > 0.05 {
            out.push((n - last_n) as f64 / dt);
        }
        (last_n, last_t) = (n, t);
    }
    out
}

/// Run one phase for a quarter of `--seconds`. `fast: None` sends no `fastUpdate` field (a
/// peer).
pub(crate) fn phase(port: u16, a: &Args, w: W, fast: Option<bool>) -> Result<PhaseOut, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let incs = Arc::new(AtomicU64::new(0));
    let fast_seen = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicU64::new(0));
    let uncertain = Arc::new(AtomicU64::new(0));
    let kmax = (a.docs / a.docs_per_k).max(1);
    let mut handles = Vec::new();
    let started = Instant::now();
    for t in 0..a.threads {
        let (stop, ops, incs, fast_seen, busy, uncertain) = (
            stop.clone(),
            ops.clone(),
            incs.clone(),
            fast_seen.clone(),
            busy.clone(),
            uncertain.clone(),
        );
        let docs = a.docs;
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let mut c = Client::connect(port).map_err(|e| e.to_string())?;
            let mut rng = SmallRng::seed_from_u64(1000 + t as u64);
            while !stop.load(Ordering::Relaxed) {
                let q = match w {
                    W::B => doc! { "k": rng.gen_range(0..kmax) as i64 },
                    W::A | W::C => doc! { "_id": rng.gen_range(0..docs) as i64 },
                };
                let stmt = match w {
                    W::A => doc! { "q": q.clone(), "u": { "$inc": { "counter": 1i64 } } },
                    W::B => {
                        doc! { "q": q.clone(), "u": { "$inc": { "counter": 1i64 } }, "multi": true }
                    }
                    W::C => doc! { "q": q.clone(), "u": { "$inc": { "k": 1i64 } } },
                };
                let mut cmd = doc! { "update": COLL, "updates": [stmt] };
                if let Some(f) = fast {
                    cmd.insert("fastUpdate", f);
                }
                let r = if fast.is_some() {
                    c.command(DB, cmd)?
                } else {
                    let (r, n) = c.command_retrying_busy(DB, cmd)?;
                    if n > 0 {
                        busy.fetch_add(n, Ordering::Relaxed);
                        // Each refused attempt may have incremented some of the documents it
                        // matches (W1c's updates touch no counter).
                        let matched = match w {
                            W::A => 1,
                            W::B => c.count(DB, COLL, q)?,
                            W::C => 0,
                        };
                        uncertain.fetch_add(n * matched, Ordering::Relaxed);
                    }
                    r
                };
                let n = match r.get("n") {
                    Some(Bson::Int32(n)) => *n as u64,
                    Some(Bson::Int64(n)) => *n as u64,
                    _ => 0,
                };
                if w != W::C {
                    incs.fetch_add(n, Ordering::Relaxed);
                }
                if r.contains_key("fastUpdates") {
                    fast_seen.fetch_add(1, Ordering::Relaxed);
                }
                ops.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    let samples = sample_for(
        Duration::from_millis(a.seconds * 1000 / SLICES as u64),
        &ops,
    );
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join()
            .map_err(|_| "client thread panicked".to_string())??;
    }
    let rate = ops.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    Ok(PhaseOut {
        rate,
        incs: incs.load(Ordering::Relaxed),
        fast_seen: fast_seen.load(Ordering::Relaxed),
        samples,
        busy_retries: busy.load(Ordering::Relaxed),
        uncertain: uncertain.load(Ordering::Relaxed),
    })
}

/// A rate for the table: whole numbers, and two decimals below 10 (a peer that scans for
/// every update runs at a fraction of one per second).
pub(crate) fn rate(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.0}")
    }
}

/// Append a phase's samples to its series, on a clock that runs over every phase.
pub(crate) fn add_samples(
    timeline: &mut Vec<(String, Vec<(f64, f64)>)>,
    label: &str,
    clock: &mut f64,
    samples: &[f64],
) {
    let step = SAMPLE.as_secs_f64();
    let pts: Vec<(f64, f64)> = samples
        .iter()
        .enumerate()
        .map(|(i, r)| (*clock + step * (i + 1) as f64, *r))
        .collect();
    *clock += step * samples.len() as f64;
    match timeline.iter_mut().find(|(n, _)| n == label) {
        Some((_, v)) => {
            // A gap (NaN) between slices keeps the line from joining across other phases.
            v.push((pts.first().map_or(*clock, |p| p.0), f64::NAN));
            v.extend(pts);
        }
        None => timeline.push((label.to_string(), pts)),
    }
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.txn_updates.is_some_and(|n| n < 2) {
        return Err("--txn-updates must be at least 2: it is compared with 1 update".into());
    }
    let cache = format!("{}MB", a.cache_mb);
    let mut flags = vec!["--cache-size", &cache];
    if !a.buffered {
        flags.push("--directio");
    }
    if a.txn_updates.is_some() {
        flags.extend(["--replSet", "bench"]);
    }
    let server = Server::start(None, &flags)?;
    let mut c = Client::connect(server.port)?;
    eprintln!(
        "[load] {} documents with {} B of filler, cache {cache}",
        a.docs, a.blob_bytes
    );
    let raw = load(&mut c, &a, "silt load")?;
    if let Some(n) = a.txn_updates {
        return crate::txn_oltp::run(&a, &server, &mut c, raw, n);
    }
    let mut rows = Vec::new();
    let mut increments = 0u64;
    // Throughput over the run for the plot: (series, [(seconds into the phases, updates/s)]).
    let mut timeline: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut clock = 0f64;
    let mut results = serde_json::Map::new();
    for (w, name) in [(W::A, "w1a"), (W::B, "w1b"), (W::C, "w1c")] {
        let mut pair = [0f64; 2];
        let mut fast_counts = [0u64; 2];
        // Off, on, on, off, twice (each a quarter of the phase time): drift on a shared
        // machine cancels.
        let order = [(0, false), (1, true), (1, true), (0, false)];
        for (slot, fast) in order.into_iter().cycle().take(2 * SLICES) {
            eprintln!("[{name}] fast updates {}", if fast { "on" } else { "off" });
            let PhaseOut {
                rate,
                incs,
                fast_seen,
                samples,
                ..
            } = phase(server.port, &a, w, Some(fast))?;
            let label = format!(
                "siltd {}, fast updates {}",
                name.to_uppercase(),
                if fast { "on" } else { "off" }
            );
            add_samples(&mut timeline, &label, &mut clock, &samples);
            increments += incs;
            pair[slot] += rate / SLICES as f64;
            fast_counts[slot] += fast_seen;
            eprintln!("[{name}] {rate:.0} updates/s, {fast_seen} took the fast path");
        }
        results.insert(format!("{name}_normal_per_s"), json!(pair[0]));
        results.insert(format!("{name}_fast_per_s"), json!(pair[1]));
        results.insert(
            format!("{name}_fast_path_statements"),
            json!(fast_counts[1]),
        );
        rows.push((name, pair[0], pair[1], fast_counts[1]));
    }
    let docs = c.find_all(DB, COLL, doc! {}, doc! { "counter": 1 })?;
    let sum: i64 = docs
        .iter()
        .map(|d: &Document| d.get_i64("counter").unwrap_or(0))
        .sum();
    let ok = sum == increments as i64 + crate::skew() && docs.len() as u64 == a.docs;
    let peak_rss = server.peak_rss();
    println!(
        "{:<34}{:>14}{:>14}{:>9}",
        "workload", "off (/s)", "on (/s)", "on/off"
    );
    for (name, off, on, fast_n) in &rows {
        let label = match *name {
            "w1a" => "W1a $inc by _id",
            "w1b" => "W1b $inc by secondary key",
            _ => "W1c $inc of indexed k (control)",
        };
        println!(
            "{label:<34}{off:>14.0}{on:>14.0}{:>8.1}x   fast-path statements: {fast_n}",
            on / off
        );
    }
    println!(
        "documents {}, raw {} MiB, cache {} MiB ({:.1}x), {} threads, {} s per phase",
        a.docs,
        raw >> 20,
        a.cache_mb,
        raw as f64 / (a.cache_mb << 20) as f64,
        a.threads,
        a.seconds
    );
    println!(
        "node reads: {}",
        if a.buffered {
            "buffered (the OS page cache may hold the data)"
        } else {
            "O_DIRECT (siltd --directio: only the cache holds data)"
        }
    );
    println!(
        "counter sum {sum}, acknowledged increments {increments}: {}",
        if ok { "OK" } else { "MISMATCH" }
    );
    drop(server);
    let mut peers_ok = true;
    for p in &a.peer {
        let r = crate::w1_peers::run_peer(*p, &a)?;
        let mut pclock = 0f64;
        for (label, samples) in &r.samples {
            add_samples(&mut timeline, label, &mut pclock, samples);
        }
        let n = r.name;
        let silt_a = rows[0].2;
        println!(
            "{n}: W1a {} updates/s (siltd with fast updates {:.2}x){}{}; counter sum {}",
            rate(r.w1a),
            silt_a / r.w1a,
            r.w1b.map_or(String::new(), |b| format!(
                ", W1b {} (siltd {:.2}x)",
                rate(b),
                rows[1].2 / b
            )),
            r.w1c.map_or(String::new(), |c| format!(
                ", W1c {} (siltd {:.2}x)",
                rate(c),
                rows[2].2 / c
            )),
            if r.sum_ok { "OK" } else { "MISMATCH" }
        );
        peers_ok &= r.sum_ok;
        results.insert(format!("w1a_{n}_per_s"), json!(r.w1a));
        if let Some(b) = r.w1b {
            results.insert(format!("w1b_{n}_per_s"), json!(b));
        }
        if let Some(c) = r.w1c {
            results.insert(format!("w1c_{n}_per_s"), json!(c));
        }
        results.insert(format!("{n}_counter_sum_ok"), json!(r.sum_ok));
    }
    results.insert("w1a_silt_per_s".into(), json!(rows[0].2));
    let series: serde_json::Map<String, serde_json::Value> = timeline
        .iter()
        .map(|(n, p)| {
            let pts: Vec<serde_json::Value> = p
                .iter()
                .filter(|q| q.1.is_finite())
                .map(|q| json!([q.0, q.1]))
                .collect();
            (n.clone(), json!(pts))
        })
        .collect();
    results.insert("updates_per_s_over_run".into(), json!(series));
    if let Some(path) = a.json.as_ref().map(|j| j.with_extension("svg")) {
        let refs: Vec<(&str, &[(f64, f64)])> = timeline
            .iter()
            .map(|(n, p)| (n.as_str(), p.as_slice()))
            .collect();
        crate::plot::over_run(
            &path,
            &format!(
                "W1: updates/s over the run ({} documents, {} threads)",
                a.docs, a.threads
            ),
            "seconds of update phases (each server's own clock)",
            "updates/s",
            &refs,
        )?;
        println!("plot: {}", path.display());
    }
    if let Some(p) = &a.json {
        results.insert("cache_bytes".into(), json!(a.cache_mb << 20));
        results.insert("data_bytes".into(), json!(raw));
        results.insert("counter_sum_ok".into(), json!(ok));
        results.insert("counter_sum".into(), json!(sum));
        results.insert("acknowledged_increments".into(), json!(increments));
        results.insert("server_peak_rss_bytes".into(), json!(peak_rss));
        results.insert(
            "params".into(),
            json!({ "docs": a.docs, "blob_bytes": a.blob_bytes, "docs_per_k": a.docs_per_k,
                    "threads": a.threads, "seconds": a.seconds, "cache_mb": a.cache_mb,
                    "directio": !a.buffered,
                    "peers": PeerName::names(&a.peer) }),
        );
        results.insert("workload".into(), json!("fast-update"));
        std::fs::write(p, serde_json::to_string_pretty(&results)?)?;
    }
    if !ok || !peers_ok {
        return Err("the counter sum does not match the acknowledged increments".into());
    }
    Ok(())
}
