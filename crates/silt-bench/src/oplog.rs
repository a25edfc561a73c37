//! `silt-bench oplog`: what the oplog costs and what change streams deliver (issue 34).
//!
//! 1. Random inserts into a standalone `siltd` and into a `siltd --replSet` (which logs each
//!    insert in the same engine batch), side by side: slices alternate between the two
//!    servers (a, b, b, a, ...), so drift on a shared machine cancels.
//! 2. W1a (`$inc` by `_id`) on both servers, fast updates off and on, on data larger than
//!    the cache, the phases interleaved across the two: on the `--replSet` server a fast
//!    update is logged as its message, without a read, and the standalone figures beside it
//!    show what the oplog costs each path.
//! 3. A change stream following inserts at a fixed rate (default 10,000 per second): every
//!    insert must arrive once, and the delay from the insert's send time to its event's
//!    arrival is measured.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bson::{doc, Bson, Document};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::client::{Client, Server};
use crate::fast_update::{self, W};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// W1a's documents (with 1 KiB of filler each: larger than the cache by default).
    #[arg(long, default_value_t = 150_000)]
    pub(crate) docs: u64,
    /// The servers' cache, in MiB.
    #[arg(long, default_value_t = 16)]
    pub(crate) cache_mb: u64,
    /// Client threads of the insert and W1a phases.
    #[arg(long, default_value_t = 16)]
    pub(crate) threads: usize,
    /// Seconds per phase and server (or mode), cut into quarters that alternate.
    #[arg(long, default_value_t = 16)]
    pub(crate) seconds: u64,
    /// Seconds of W1a, fast updates off and then on, that each server runs after its load
    /// and before the measured phases (not measured). Right after a bulk load the internal
    /// nodes' message buffers are empty; as they fill, the normal path falls from about
    /// 2,700 to about 1,300 updates/s over the first 20 s or so, and phases inside that
    /// transient measure the load, not W1a's steady state.
    #[arg(long, default_value_t = 8)]
    pub(crate) warmup_seconds: u64,
    /// Inserts per second the change stream follows.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) stream_rate: u64,
    /// Seconds of the change-stream phase.
    #[arg(long, default_value_t = 5)]
    pub(crate) stream_seconds: u64,
    /// Buffered reads instead of `--directio`.
    #[arg(long)]
    pub(crate) buffered: bool,
    /// Run only W1a (for profiling the fast path on a replica set).
    #[arg(long)]
    pub(crate) only_w1a: bool,
    /// Write the figures as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}

const DB: &str = "oplogbench";

fn micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Random inserts (one document per command, random `_id`) into `port` for `len`, with
/// `write_concern` when given: inserts per second.
pub(crate) fn insert_phase(
    port: u16,
    threads: usize,
    len: Duration,
    seed: u64,
    write_concern: Option<Document>,
) -> Result<f64, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..threads {
        let (stop, ops, wc) = (stop.clone(), ops.clone(), write_concern.clone());
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let mut c = Client::connect(port).map_err(|e| e.to_string())?;
            let mut rng = SmallRng::seed_from_u64(seed * 1000 + t as u64);
            while !stop.load(Ordering::Relaxed) {
                let d = doc! {
                    "_id": rng.gen::<i64>(),
                    "a": rng.gen_range(0..1_000_000i64),
                    "s": "x".repeat(100),
                };
                let mut cmd = doc! { "insert": "ins", "documents": [d] };
                if let Some(wc) = &wc {
                    cmd.insert("writeConcern", wc.clone());
                }
                c.command(DB, cmd)?;
                ops.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    std::thread::sleep(len);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join()
            .map_err(|_| "client thread panicked".to_string())??;
    }
    Ok(ops.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// Follow a change stream on `port` while inserting `rate` documents per second for `len`:
/// (inserts sent, events received, p99 delay in ms).
fn stream_phase(port: u16, rate: u64, len: Duration) -> Result<(u64, u64, f64), String> {
    let mut c = Client::connect(port).map_err(|e| e.to_string())?;
    let r = c.command(
        DB,
        doc! { "aggregate": "cs", "pipeline": [ { "$changeStream": {} } ], "cursor": {} },
    )?;
    let cursor = r.get_document("cursor").map_err(|e| e.to_string())?;
    let id = cursor.get_i64("id").map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let writer = {
        let (done, sent) = (done.clone(), sent.clone());
        std::thread::spawn(move || -> Result<(), String> {
            let mut w = Client::connect(port).map_err(|e| e.to_string())?;
            // Batches of 1% of the rate every 10 ms.
            let per = (rate / 100).max(1);
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed() < len {
                let docs: Vec<Document> = (0..per)
                    .map(|i| doc! { "_id": i64::try_from(n + i).unwrap_or(0), "t": micros_now() })
                    .collect();
                w.command(
                    DB,
                    doc! { "insert": "cs", "documents": docs, "ordered": false },
                )?;
                n += per;
                sent.store(n, Ordering::Relaxed);
                let due = Duration::from_micros(n * 1_000_000 / rate.max(1));
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            done.store(true, Ordering::Relaxed);
            Ok(())
        })
    };
    let mut delays: Vec<i64> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut idle_after_done = 0;
    loop {
        let r = c.command(
            DB,
            doc! { "getMore": id, "collection": "cs", "maxTimeMS": 100i64 },
        )?;
        let batch = r
            .get_document("cursor")
            .and_then(|c| c.get_array("nextBatch"))
            .map_err(|e| e.to_string())?;
        let now = micros_now();
        for ev in batch {
            let Bson::Document(ev) = ev else { continue };
            if let Ok(fd) = ev.get_document("fullDocument") {
                if let (Ok(t), Ok(i)) = (fd.get_i64("t"), fd.get_i64("_id")) {
                    if seen.insert(i) {
                        delays.push(now - t);
                    }
                }
            }
        }
        if done.load(Ordering::Relaxed) {
            if seen.len() as u64 >= sent.load(Ordering::Relaxed) || idle_after_done > 20 {
                break;
            }
            if batch.is_empty() {
                idle_after_done += 1;
            }
        }
    }
    writer
        .join()
        .map_err(|_| "writer thread panicked".to_string())??;
    delays.sort_unstable();
    let p99 = delays
        .get((delays.len() * 99 / 100).min(delays.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0) as f64
        / 1000.0;
    Ok((sent.load(Ordering::Relaxed), seen.len() as u64, p99))
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let cache = format!("{}MB", a.cache_mb);
    let mut flags = vec!["--cache-size", cache.as_str()];
    if !a.buffered {
        flags.push("--directio");
    }
    let mut rs_flags = flags.clone();
    rs_flags.extend(["--replSet", "bench"]);
    let standalone = Server::start(None, &flags)?;
    let replset = Server::start(None, &rs_flags)?;

    // 1. Inserts, side by side.
    let quarter = Duration::from_millis(a.seconds * 1000 / 4);
    let mut rates = [0f64; 2];
    let slices = if a.only_w1a { 0 } else { 8 };
    for (n, which) in [0, 1, 1, 0, 0, 1, 1, 0]
        .into_iter()
        .take(slices)
        .enumerate()
    {
        let port = if which == 0 {
            standalone.port
        } else {
            replset.port
        };
        let r = insert_phase(port, a.threads, quarter, n as u64, None)?;
        eprintln!(
            "[insert] {} {r:.0}/s",
            if which == 0 { "standalone" } else { "replset" }
        );
        rates[which] += r / 4.0;
    }

    // 2. W1a on both servers, fast updates off and on, phases interleaved across the two.
    let w1 = fast_update::Args::w1a(a.docs, a.cache_mb, a.threads, a.seconds, a.buffered);
    let mut raw = 0;
    for (label, port) in [("standalone", standalone.port), ("replset", replset.port)] {
        eprintln!("[w1a] loading {} documents into the {label} server", a.docs);
        let mut c = Client::connect(port)?;
        raw = fast_update::load(&mut c, &w1, &format!("{label} load"))?;
    }
    // A checkpoint on each server, so that neither phase pays for the inserts' or the load's
    // dirty nodes (the replica set's include its oplog's).
    for port in [standalone.port, replset.port] {
        Client::connect(port)?.command("admin", doc! { "fsync": 1 })?;
    }
    let warm = fast_update::Args {
        seconds: a.warmup_seconds * fast_update::SLICES as u64,
        ..w1.clone()
    };
    for (label, port) in [("standalone", standalone.port), ("replset", replset.port)] {
        for fast in [false, true] {
            let out = fast_update::phase(port, &warm, W::A, Some(fast))?;
            eprintln!(
                "[w1a] warm-up, {label} fast updates {}: {:.0} updates/s",
                if fast { "on" } else { "off" },
                out.rate
            );
        }
    }
    // [server][fast]: server 0 the standalone one, 1 the replica set.
    let mut w1a = [[0f64; 2]; 2];
    let mut fast_path = 0u64;
    for (server, fast) in [
        (1, false),
        (0, false),
        (1, true),
        (0, true),
        (0, true),
        (1, true),
        (0, false),
        (1, false),
    ]
    .into_iter()
    .cycle()
    .take(16)
    {
        let port = [standalone.port, replset.port][server];
        let out = fast_update::phase(port, &w1, W::A, Some(fast))?;
        eprintln!(
            "[w1a] {} fast updates {}: {:.0} updates/s",
            ["standalone", "replset"][server],
            if fast { "on" } else { "off" },
            out.rate
        );
        w1a[server][usize::from(fast)] += out.rate / 4.0;
        if fast && server == 1 {
            fast_path += out.fast_seen;
        }
    }
    drop(standalone);

    // 3. A change stream following inserts.
    let (inserts, events, p99) = if a.only_w1a {
        (0, 0, 0.0)
    } else {
        stream_phase(
            replset.port,
            a.stream_rate,
            Duration::from_secs(a.stream_seconds),
        )?
    };
    drop(replset);

    println!("{:<44}{:>14}", "figure", "value");
    println!("{:<44}{:>14.0}", "insert_standalone_per_s", rates[0]);
    println!("{:<44}{:>14.0}", "insert_oplog_per_s", rates[1]);
    println!(
        "{:<44}{:>13.2}x",
        "insert oplog / standalone",
        rates[1] / rates[0]
    );
    for (server, label) in [(1, "replset"), (0, "standalone")] {
        let [normal, fast] = w1a[server];
        println!(
            "{:<44}{:>14.0}",
            format!("w1a_{label}_normal_per_s"),
            normal
        );
        println!("{:<44}{:>14.0}", format!("w1a_{label}_fast_per_s"), fast);
        println!(
            "{:<44}{:>13.1}x",
            format!("w1a fast / normal ({label})"),
            fast / normal
        );
    }
    println!("{:<44}{:>14}", "changestream_inserts", inserts);
    println!("{:<44}{:>14}", "changestream_events", events);
    println!("{:<44}{:>14.1}", "changestream_p99_delay_ms", p99);
    println!(
        "W1a data {} MiB raw, cache {} MiB ({:.1}x), {} threads, {} s per phase, node reads {}",
        raw >> 20,
        a.cache_mb,
        raw as f64 / (a.cache_mb << 20) as f64,
        a.threads,
        a.seconds,
        if a.buffered { "buffered" } else { "O_DIRECT" }
    );
    if let Some(p) = &a.json {
        let out = json!({
            "workload": "oplog",
            "insert_standalone_per_s": rates[0],
            "insert_oplog_per_s": rates[1],
            "insert_oplog_ratio": rates[1] / rates[0],
            "w1a_replset_normal_per_s": w1a[1][0],
            "w1a_replset_fast_per_s": w1a[1][1],
            "w1a_replset_ratio": w1a[1][1] / w1a[1][0],
            "w1a_standalone_normal_per_s": w1a[0][0],
            "w1a_standalone_fast_per_s": w1a[0][1],
            "w1a_standalone_ratio": w1a[0][1] / w1a[0][0],
            "w1a_replset_fast_path_statements": fast_path,
            "changestream_inserts": inserts,
            "changestream_events": events,
            "changestream_p99_delay_ms": p99,
            "data_bytes": raw,
            "cache_bytes": a.cache_mb << 20,
            "params": { "docs": a.docs, "threads": a.threads, "seconds": a.seconds,
                        "warmup_seconds": a.warmup_seconds,
                        "stream_rate": a.stream_rate, "stream_seconds": a.stream_seconds,
                        "directio": !a.buffered },
        });
        std::fs::write(p, serde_json::to_string_pretty(&out)?)?;
    }
    if events + crate::skew().unsigned_abs() != inserts {
        return Err(format!("the change stream received {events} of {inserts} inserts").into());
    }
    Ok(())
}
