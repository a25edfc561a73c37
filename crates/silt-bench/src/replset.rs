//! `silt-bench replset`: a three-member replica set on this machine (issue 36).
//!
//! 1. Random inserts with `w: "majority"` into the set's primary against a standalone
//!    `siltd`, side by side: slices alternate (a, b, b, a, ...), so drift on a shared machine
//!    cancels.
//! 2. W1a (`$inc` by `_id`) on the primary with data larger than every member's cache, fast
//!    updates on and off (quarters alternating), while a sampler reads every member's applied
//!    log index 20 times a second. A secondary's lag at a moment is how long ago the primary
//!    had applied what the secondary has applied then. Afterwards every member's counter sum
//!    must equal the increments the primary acknowledged.
//! 3. Failover: a writer inserts with `w: "majority"` into whichever member is primary; the
//!    primary is killed with SIGKILL, and the time to the first write acknowledged by a new
//!    primary is measured. The killed member restarts on its port and data and rejoins
//!    before the next kill.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use serde_json::json;

use crate::client::{pick_port, Client, Server};
use crate::fast_update::{self, W};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// W1a's documents (1 KiB of filler each: larger than the cache by default).
    #[arg(long, default_value_t = 150_000)]
    pub(crate) docs: u64,
    /// Every server's cache, in MiB.
    #[arg(long, default_value_t = 16)]
    pub(crate) cache_mb: u64,
    /// Client threads of the insert and W1a phases.
    #[arg(long, default_value_t = 16)]
    pub(crate) threads: usize,
    /// Seconds per phase and server (or mode), cut into quarters that alternate.
    #[arg(long, default_value_t = 16)]
    pub(crate) seconds: u64,
    /// Primaries killed with SIGKILL in the failover phase.
    #[arg(long, default_value_t = 5)]
    pub(crate) kills: usize,
    /// Buffered reads instead of `--directio`.
    #[arg(long)]
    pub(crate) buffered: bool,
    /// The members' `--raftSnapshotEntries` (their default when not given): a small value
    /// makes them write snapshots during the phases, to measure what one costs.
    #[arg(long)]
    pub(crate) snapshot_entries: Option<u64>,
    /// Run the insert phase only (to measure or profile the majority write path); the
    /// other figures are left out.
    #[arg(long)]
    pub(crate) inserts_only: bool,
    /// Write the figures as JSON here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}

const DB: &str = "rsbench";
const SET: &str = "bench";

/// Three members on loopback ports, each with its own data directory.
struct Set {
    dirs: Vec<tempfile::TempDir>,
    ports: Vec<u16>,
    servers: Vec<Option<Server>>,
    flags: Vec<String>,
}

impl Set {
    fn start(flags: &[&str]) -> Result<Set, String> {
        let mut flags: Vec<String> = flags.iter().map(|s| (*s).to_string()).collect();
        flags.extend([
            "--replSet".into(),
            SET.into(),
            "--bind".into(),
            "127.0.0.1".into(),
        ]);
        let mut set = Set {
            dirs: Vec::new(),
            ports: Vec::new(),
            servers: Vec::new(),
            flags,
        };
        for _ in 0..3 {
            set.dirs
                .push(tempfile::tempdir().map_err(|e| e.to_string())?);
            set.ports.push(pick_port()?);
            set.servers.push(None);
        }
        for i in 0..3 {
            set.restart(i)?;
        }
        let members: Vec<Document> = set
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| doc! { "_id": i64::try_from(i).unwrap_or(0), "host": format!("127.0.0.1:{p}") })
            .collect();
        Client::connect(set.ports[0])
            .map_err(|e| e.to_string())?
            .command(
                "admin",
                doc! { "replSetInitiate": { "_id": SET, "members": members } },
            )?;
        set.wait_settled(Duration::from_secs(30))?;
        Ok(set)
    }

    fn dir(&self, i: usize) -> &Path {
        self.dirs[i].path()
    }

    fn restart(&mut self, i: usize) -> Result<(), String> {
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        self.servers[i] = Some(Server::start_at(self.dir(i), self.ports[i], &flags)?);
        Ok(())
    }

    /// SIGKILL member `i` (`Server`'s drop kills and reaps it).
    fn kill9(&mut self, i: usize) {
        self.servers[i] = None;
    }

    /// Wait until one member is primary and the others secondaries.
    fn wait_settled(&self, limit: Duration) -> Result<usize, String> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let roles: Vec<(bool, bool)> = self
                .ports
                .iter()
                .map(|p| {
                    hello(*p).map_or((false, false), |h| {
                        (
                            h.get_bool("isWritablePrimary") == Ok(true),
                            h.get_bool("secondary") == Ok(true),
                        )
                    })
                })
                .collect();
            let primaries: Vec<usize> = (0..3).filter(|&i| roles[i].0).collect();
            if primaries.len() == 1 && roles.iter().filter(|r| r.1).count() == 2 {
                return Ok(primaries[0]);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err("the set did not settle on one primary and two secondaries".into())
    }

    /// Wait until every member has applied what the primary has.
    fn wait_caught_up(&self, limit: Duration) -> Result<(), String> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let applied: Vec<Option<i64>> = self.ports.iter().map(|p| applied_index(*p)).collect();
            if applied.iter().all(|a| a.is_some() && *a == applied[0]) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err("the secondaries did not catch up".into())
    }
}

fn hello(port: u16) -> Option<Document> {
    Client::connect(port)
        .ok()?
        .command("admin", doc! { "hello": 1 })
        .ok()
}

/// A member's applied Raft log index (`serverStatus.repl.raft.appliedIndex`).
fn applied_index(port: u16) -> Option<i64> {
    let st = Client::connect(port)
        .ok()?
        .command("admin", doc! { "serverStatus": 1, "repl": 1 })
        .ok()?;
    let raft = st.get_document("repl").ok()?.get_document("raft").ok()?;
    match raft.get("appliedIndex")? {
        bson::Bson::Int64(n) => Some(*n),
        bson::Bson::Int32(n) => Some(i64::from(*n)),
        _ => None,
    }
}

/// Load W1a's documents into `port` from `threads` clients, then index `k`: raw bytes.
fn load(port: u16, a: &fast_update::Args, threads: usize) -> Result<u64, String> {
    let (tx, rx) = mpsc::sync_channel::<Vec<Document>>(threads * 2);
    let rx = Arc::new(Mutex::new(rx));
    let mut handles = Vec::new();
    for _ in 0..threads {
        let rx = rx.clone();
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let mut c = Client::connect(port).map_err(|e| e.to_string())?;
            loop {
                let batch = match rx.lock() {
                    Ok(r) => r.recv(),
                    Err(_) => return Err("a loader's queue is poisoned".into()),
                };
                let Ok(batch) = batch else { return Ok(()) };
                for part in batch.chunks(100) {
                    c.command(
                        fast_update::DB,
                        doc! { "insert": fast_update::COLL, "documents": part.to_vec(), "ordered": false },
                    )?;
                }
            }
        }));
    }
    let raw = fast_update::generate(a, "load into the set", |batch| {
        tx.send(batch)
            .map_err(|_| "the loaders stopped".to_string())
    });
    drop(tx);
    for h in handles {
        h.join().map_err(|_| "loader panicked".to_string())??;
    }
    let raw = raw?;
    Client::connect(port).map_err(|e| e.to_string())?.command(
        fast_update::DB,
        doc! { "createIndexes": fast_update::COLL, "indexes": [ { "key": { "k": 1 }, "name": "k_1" } ] },
    )?;
    Ok(raw)
}

/// Sample every member's applied index until `stop`: the largest lag of a secondary, in
/// seconds (see the module's header).
fn sample_lag(ports: Vec<u16>, primary: usize, stop: Arc<AtomicBool>) -> f64 {
    let start = Instant::now();
    let mut history: Vec<(f64, i64)> = Vec::new();
    let mut worst = 0f64;
    while !stop.load(Ordering::Relaxed) {
        if let Some(p) = applied_index(ports[primary]) {
            history.push((start.elapsed().as_secs_f64(), p));
        }
        for (i, port) in ports.iter().enumerate() {
            if i == primary {
                continue;
            }
            let Some(s) = applied_index(*port) else {
                continue;
            };
            let now = start.elapsed().as_secs_f64();
            if let Some((t, _)) = history.iter().find(|(_, p)| *p >= s) {
                worst = worst.max(now - t);
            } else if let Some((t, _)) = history.last() {
                // Ahead of every primary sample: no lag beyond the sampling interval.
                worst = worst.max(now - t - 0.05).max(0.0);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    worst
}

fn counter_sum(port: u16) -> Result<i64, String> {
    let mut c = Client::connect(port).map_err(|e| e.to_string())?;
    let r = c.command(
        fast_update::DB,
        doc! {
            "aggregate": fast_update::COLL,
            "pipeline": [ { "$group": { "_id": null, "s": { "$sum": "$counter" } } } ],
            "cursor": {},
            "$readPreference": { "mode": "secondaryPreferred" },
        },
    )?;
    let batch = r
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map_err(|e| e.to_string())?;
    Ok(batch
        .first()
        .and_then(|d| d.as_document())
        .and_then(|d| d.get_i64("s").ok())
        .unwrap_or(0))
}

/// Kill the primary `kills` times: seconds from each SIGKILL to the first write a new
/// primary acknowledged.
fn failovers(set: &mut Set, kills: usize) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for k in 0..kills {
        let old = set.wait_settled(Duration::from_secs(60))?;
        let stop = Arc::new(AtomicBool::new(false));
        let last_ack = Arc::new(Mutex::new((Instant::now(), usize::MAX)));
        let ports = set.ports.clone();
        let writer = {
            let (stop, last_ack) = (stop.clone(), last_ack.clone());
            std::thread::spawn(move || {
                let mut n = 0i64;
                let mut conn: Option<(usize, Client)> = None;
                while !stop.load(Ordering::Relaxed) {
                    if conn.is_none() {
                        conn = (0..3)
                            .find(|&i| {
                                hello(ports[i])
                                    .is_some_and(|h| h.get_bool("isWritablePrimary") == Ok(true))
                            })
                            .and_then(|i| Client::connect(ports[i]).ok().map(|c| (i, c)));
                        if conn.is_none() {
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                    }
                    let Some((i, c)) = conn.as_mut() else {
                        continue;
                    };
                    n += 1;
                    let cmd = doc! {
                        "insert": "failover",
                        "documents": [ { "_id": format!("{k}-{n}") } ],
                        "writeConcern": { "w": "majority", "wtimeout": 2000 },
                    };
                    match c.command(DB, cmd) {
                        Ok(r) if !r.contains_key("writeConcernError") => {
                            if let Ok(mut g) = last_ack.lock() {
                                *g = (Instant::now(), *i);
                            }
                        }
                        _ => conn = None,
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(500));
        set.kill9(old);
        let killed = Instant::now();
        let end = killed + Duration::from_secs(60);
        let took = loop {
            let (t, who) = last_ack.lock().map(|g| *g).map_err(|_| "poisoned")?;
            if who != old && t > killed {
                break (t - killed).as_secs_f64();
            }
            if Instant::now() > end {
                stop.store(true, Ordering::Relaxed);
                let _ = writer.join();
                return Err("no new primary acknowledged a write within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        stop.store(true, Ordering::Relaxed);
        writer.join().map_err(|_| "writer panicked".to_string())?;
        eprintln!(
            "[failover] kill {}: first acknowledged write on a new primary after {took:.2} s",
            k + 1
        );
        out.push(took);
        set.restart(old)?;
    }
    set.wait_settled(Duration::from_secs(60))?;
    Ok(out)
}

/// The table's head and the insert figures: [standalone, majority] per second.
fn print_inserts(rates: [f64; 2]) {
    println!("{:<36}{:>14}", "figure", "value");
    println!("{:<36}{:>14.0}", "insert_standalone_per_s", rates[0]);
    println!("{:<36}{:>14.0}", "insert_majority_per_s", rates[1]);
    println!(
        "{:<36}{:>13.2}x",
        "majority / standalone",
        rates[1] / rates[0]
    );
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let cache = format!("{}MB", a.cache_mb);
    let mut flags = vec!["--cache-size", cache.as_str()];
    if !a.buffered {
        flags.push("--directio");
    }
    let standalone = Server::start(None, &flags)?;
    let snapshot_entries = a.snapshot_entries.map(|n| n.to_string());
    let mut member_flags = flags.clone();
    if let Some(n) = &snapshot_entries {
        member_flags.extend(["--raftSnapshotEntries", n.as_str()]);
    }
    let mut set = Set::start(&member_flags)?;
    let primary = set.wait_settled(Duration::from_secs(30))?;

    // 1. Inserts, side by side: [standalone, majority on the set].
    let quarter = Duration::from_millis(a.seconds * 1000 / 4);
    let mut rates = [0f64; 2];
    for (n, which) in [0usize, 1, 1, 0, 0, 1, 1, 0].into_iter().enumerate() {
        let port = if which == 0 {
            standalone.port
        } else {
            set.ports[primary]
        };
        let wc = (which == 1).then(|| doc! { "w": "majority" });
        let r = crate::oplog::insert_phase(port, a.threads, quarter, n as u64, wc)?;
        eprintln!("[insert] {} {r:.0}/s", ["standalone", "majority"][which]);
        rates[which] += r / 4.0;
    }
    drop(standalone);
    if a.inserts_only {
        print_inserts(rates);
        if let Some(p) = &a.json {
            let out = json!({
                "workload": "replset",
                "insert_standalone_per_s": rates[0],
                "insert_majority_per_s": rates[1],
                "params": { "threads": a.threads, "seconds": a.seconds,
                            "directio": !a.buffered, "inserts_only": true },
            });
            std::fs::write(p, serde_json::to_string_pretty(&out)?)?;
        }
        return Ok(());
    }

    // 2. W1a on the primary with the lag of the secondaries.
    let w1 = fast_update::Args::w1a(a.docs, a.cache_mb, a.threads, a.seconds, a.buffered);
    let raw = load(set.ports[primary], &w1, a.threads)?;
    set.wait_caught_up(Duration::from_secs(600))?;
    for p in &set.ports {
        Client::connect(*p)?.command("admin", doc! { "fsync": 1 })?;
    }
    // [normal, fast]: rate and worst lag.
    let mut w1a = [0f64; 2];
    let mut lag = [0f64; 2];
    let mut incs = 0u64;
    let phase = Duration::from_millis(a.seconds * 1000 / 4);
    for fast in [true, false, false, true, true, false, false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (ports, stop) = (set.ports.clone(), stop.clone());
            std::thread::spawn(move || sample_lag(ports, primary, stop))
        };
        let args = fast_update::Args {
            seconds: phase.as_secs().max(1) * fast_update::SLICES as u64,
            ..w1.clone()
        };
        let out = fast_update::phase(set.ports[primary], &args, W::A, Some(fast));
        // The lag counts until the secondaries have what the primary acknowledged.
        let _ = set.wait_caught_up(Duration::from_secs(120));
        stop.store(true, Ordering::Relaxed);
        let worst = sampler.join().map_err(|_| "sampler panicked")?;
        let out = out?;
        incs += out.incs;
        eprintln!(
            "[w1a] fast updates {}: {:.0} updates/s, secondaries' largest lag {worst:.2} s",
            if fast { "on" } else { "off" },
            out.rate
        );
        w1a[usize::from(fast)] += out.rate / 4.0;
        lag[usize::from(fast)] = lag[usize::from(fast)].max(worst);
    }
    set.wait_caught_up(Duration::from_secs(120))?;
    for p in &set.ports {
        let sum = counter_sum(*p)?;
        if sum + crate::skew() != i64::try_from(incs).unwrap_or(i64::MAX) {
            return Err(format!(
                "member 127.0.0.1:{p} holds counters summing to {sum}, not the {incs} increments acknowledged"
            )
            .into());
        }
    }

    // 3. Failover.
    let times = failovers(&mut set, a.kills)?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    let max = sorted.last().copied().unwrap_or(0.0);

    print_inserts(rates);
    println!("{:<36}{:>14.0}", "w1a_fast_primary_per_s", w1a[1]);
    println!("{:<36}{:>14.2}", "w1a_fast_lag_max_s", lag[1]);
    println!("{:<36}{:>14.0}", "w1a_normal_primary_per_s", w1a[0]);
    println!("{:<36}{:>14.2}", "w1a_normal_lag_max_s", lag[0]);
    println!("{:<36}{:>14.2}", "failover_p50_s", p50);
    println!("{:<36}{:>14.2}", "failover_max_s", max);
    println!(
        "three members and a standalone on this machine; W1a data {} MiB raw, cache {} MiB ({:.1}x) per member, {} threads, {} s per phase, {} kills, node reads {}; counters agree on every member: yes",
        raw >> 20,
        a.cache_mb,
        raw as f64 / (a.cache_mb << 20) as f64,
        a.threads,
        a.seconds,
        a.kills,
        if a.buffered { "buffered" } else { "O_DIRECT" }
    );
    if let Some(p) = &a.json {
        let out = json!({
            "workload": "replset",
            "insert_standalone_per_s": rates[0],
            "insert_majority_per_s": rates[1],
            "w1a_fast_primary_per_s": w1a[1],
            "w1a_fast_lag_max_s": lag[1],
            "w1a_normal_primary_per_s": w1a[0],
            "w1a_normal_lag_max_s": lag[0],
            "failover_p50_s": p50,
            "failover_max_s": max,
            "failover_s": times,
            "data_bytes": raw,
            "cache_bytes": a.cache_mb << 20,
            "params": { "docs": a.docs, "threads": a.threads, "seconds": a.seconds,
                        "kills": a.kills, "directio": !a.buffered,
                        "snapshot_entries": a.snapshot_entries },
        });
        std::fs::write(p, serde_json::to_string_pretty(&out)?)?;
    }
    Ok(())
}
