//! `silt-bench concurrency`: workload W3 of `shared/workloads.md` (cortisol-style) against a
//! `siltd --replSet` child process.
//!
//! One collection of `--documents` documents `{_id, v: 100, f0.., pad}`. Phases, each at every
//! thread count of `--threads`: insert with sequential keys, insert with random keys, point
//! query by `_id`, range query, update, delete. The update phase moves an amount of `v` between
//! two random documents inside one multi-document transaction (retrying on write conflicts),
//! so the sum of `v` over the collection never changes; it is checked after the update and
//! delete phases, and the run fails when it moved. Inserted documents carry `v: 0` and only
//! they are deleted. Each phase goes over the thread counts `--passes` times, alternately in
//! ascending and descending order (the collection grows or shrinks during a phase; the
//! mirrored order cancels that drift), after a warm-up at the most threads, until its rate is
//! steady, that is not counted. A thread count's figure is the median of its runs: one slice
//! that another tenant of the machine or a checkpoint slowed (or that ran alone) does not
//! decide a phase's ratio, and every run is in the JSON. The
//! delete phase removes the inserted keys in random order, so that every run deletes the same
//! mix. Last, point reads at 4 threads are timed with and without index
//! builds running on another collection.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::json;

use crate::client::{failure, Client, Server};
use crate::target::{PeerName, Target};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Documents loaded before the phases.
    #[arg(long, default_value_t = 1_000_000)]
    documents: u64,
    /// Integer fields per document besides `_id` and `v`.
    #[arg(long, default_value_t = 2)]
    fields: usize,
    /// Bytes of padding per document.
    #[arg(long, default_value_t = 100)]
    padding: usize,
    /// Fraction of the padding that is random (the rest repeats).
    #[arg(long, default_value_t = 0.5)]
    compressibility: f64,
    /// Secondary indexes on `f0`, `f1`, ... (at most `--fields`).
    #[arg(long, default_value_t = 0)]
    indexes: usize,
    /// Phases to run (all by default). `ping`, a round trip that does no work, is not part of
    /// the workload: it shows what the machine itself allows at each thread count (clients and
    /// server share its cores), and it is left out of the worst 64-thread ratio.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "insert_seq,insert_rand,point,range,update,delete,ping"
    )]
    phases: Vec<String>,
    /// Client thread counts, each phase runs at every one.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    threads: Vec<usize>,
    /// Seconds per run of a phase at one thread count (each runs `--passes` times).
    #[arg(long, default_value_t = 2)]
    seconds: u64,
    /// Passes over the thread counts per phase, alternately ascending and descending; each
    /// thread count's figure is the median of its runs.
    #[arg(long, default_value_t = 4)]
    passes: usize,
    /// Documents per insert command (1: every insert is one operation, as an application's).
    #[arg(long, default_value_t = 1)]
    insert_batch: usize,
    /// Documents in the other collection whose index is built during the read-latency test.
    #[arg(long, default_value_t = 200_000)]
    build_documents: u64,
    /// The server's cache, in MiB.
    #[arg(long, default_value_t = 256)]
    cache_mb: u64,
    /// Also run every phase on this peer after siltd (`ferretdb`). A peer without
    /// transactions moves the value with two separate updates; the sum is checked once the
    /// phase is over, when every pair has been applied.
    #[arg(long)]
    peer: Vec<PeerName>,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw throughput per thread count as SVG here (by default next to `--json`, with the
    /// extension `.svg`).
    #[arg(long)]
    plot: Option<PathBuf>,
}

const DB: &str = "w3";
const COLL: &str = "c";
const OTHER: &str = "other";
/// The value of `v` in every loaded document.
const V0: i64 = 100;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    InsertSeq,
    InsertRand,
    Point,
    Range,
    Update,
    Delete,
    Ping,
}

impl Phase {
    const ALL: [Phase; 7] = [
        Phase::InsertSeq,
        Phase::InsertRand,
        Phase::Point,
        Phase::Range,
        Phase::Update,
        Phase::Delete,
        Phase::Ping,
    ];
    fn name(self) -> &'static str {
        match self {
            Phase::InsertSeq => "insert_seq",
            Phase::InsertRand => "insert_rand",
            Phase::Point => "point",
            Phase::Range => "range",
            Phase::Update => "update",
            Phase::Delete => "delete",
            Phase::Ping => "ping",
        }
    }
}

/// What the phases share.
struct Shared {
    port: u16,
    /// Whether the server runs transactions (siltd as a one-member replica set).
    txn: bool,
    /// The next sequential key.
    next_seq: AtomicI64,
    /// Keys inserted by the insert phases: what the delete phase removes.
    inserted: Mutex<Vec<i64>>,
    /// Write conflicts met (and retried) by update transactions.
    conflicts: AtomicU64,
    documents: u64,
}

fn document(rng: &mut SmallRng, a: &Args, id: i64, v: i64) -> Document {
    w3_document(rng, a.fields, a.padding, a.compressibility, id, v)
}

/// One W3 document: `_id`, the transfer value `v`, `fields` random integers and `padding`
/// bytes of which the fraction `compressibility` is random letters (the rest repeats).
#[expect(
    clippy::cast_possible_truncation,
    reason = "the random part is at most `padding` (fraction clamped to 0..=1)"
)]
pub(crate) fn w3_document(
    rng: &mut SmallRng,
    fields: usize,
    padding: usize,
    compressibility: f64,
    id: i64,
    v: i64,
) -> Document {
    let mut d = doc! { "_id": id, "v": v };
    for f in 0..fields {
        d.insert(format!("f{f}"), rng.gen_range(0..1_000_000i64));
    }
    let random = ((padding as f64) * compressibility.clamp(0.0, 1.0)) as usize;
    let mut pad: String = (0..random)
        .map(|_| char::from(b'a' + (rng.next_u32() % 26) as u8))
        .collect();
    pad.extend(std::iter::repeat_n('x', padding - random));
    d.insert("pad", pad);
    d
}

fn load(c: &mut Client, a: &Args, coll: &str, n: u64) -> Result<(), String> {
    let mut rng = SmallRng::seed_from_u64(coll.len() as u64);
    let started = Instant::now();
    let mut i = 0u64;
    let mut next_report = n / 5;
    while i < n {
        let k = 1000.min(n - i);
        let batch: Vec<Document> = (i..i + k)
            .map(|j| document(&mut rng, a, j as i64, V0))
            .collect();
        c.command(DB, doc! { "insert": coll, "documents": batch })?;
        i += k;
        if i >= next_report {
            eprintln!(
                "[load {coll}] {}% {i} documents, {:.0} docs/s",
                i * 100 / n,
                i as f64 / started.elapsed().as_secs_f64()
            );
            next_report += n / 5;
        }
    }
    Ok(())
}

/// A session of one client thread: its `lsid` and transaction numbers.
struct Session {
    lsid: Document,
    number: i64,
    /// Keys this thread inserted, or took from the pool to delete, not yet handed back to
    /// [`Shared::inserted`]: the pool's lock is taken once per [`POOL_CHUNK`] operations and
    /// at the end of a run, so that 64 client threads do not queue on it.
    keys: Vec<i64>,
}

/// Keys a client thread moves between its own list and the shared pool at a time.
const POOL_CHUNK: usize = 64;

impl Session {
    fn new() -> Session {
        // Random, not from the seeded generator: a thread count runs twice per phase, and a
        // reused `lsid` would restart its transaction numbers below the server's.
        let mut id = vec![0u8; 16];
        rand::thread_rng().fill_bytes(&mut id);
        Session {
            lsid: doc! { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: id } },
            number: 0,
            keys: Vec::new(),
        }
    }

    /// Hand the keys this thread holds back to the pool (at the end of a run).
    fn return_keys(&mut self, sh: &Shared) {
        if !self.keys.is_empty() {
            sh.inserted.lock().expect("pool").append(&mut self.keys);
        }
    }
}

/// Move `x` of `v` from document `from` to `to` in one transaction; `Ok(false)` on a write
/// conflict (the transaction was aborted by the server and nothing of it stays).
fn transfer(c: &mut Client, s: &mut Session, from: i64, to: i64, x: i64) -> Result<bool, String> {
    s.number += 1;
    let fields = |start: bool| {
        let mut d = doc! { "lsid": s.lsid.clone(), "txnNumber": s.number, "autocommit": false };
        if start {
            d.insert("startTransaction", true);
        }
        d
    };
    for (i, (id, dx)) in [(from, -x), (to, x)].into_iter().enumerate() {
        let mut cmd = doc! {
            "update": COLL,
            "updates": [{ "q": { "_id": id }, "u": { "$inc": { "v": dx } } }],
        };
        cmd.extend(fields(i == 0));
        let r = c.reply(DB, cmd)?;
        match failure(&r) {
            None => {}
            Some((112 | 251, _)) => return Ok(false),
            Some((_, m)) => return Err(m),
        }
    }
    let mut cmd = doc! { "commitTransaction": 1 };
    cmd.extend(fields(false));
    let r = c.reply("admin", cmd)?;
    match failure(&r) {
        None => Ok(true),
        Some((112 | 251, _)) => Ok(false),
        Some((_, m)) => Err(m),
    }
}

/// Move `x` of `v` from `from` to `to` with two plain updates (a peer without transactions).
fn transfer_plain(c: &mut Client, from: i64, to: i64, x: i64) -> Result<(), String> {
    for (id, dx) in [(from, -x), (to, x)] {
        c.command_retrying_busy(
            DB,
            doc! { "update": COLL, "updates": [{ "q": { "_id": id }, "u": { "$inc": { "v": dx } } }] },
        )?;
    }
    Ok(())
}

/// One operation of `phase`; returns the documents it handled.
fn one_op(
    c: &mut Client,
    sh: &Shared,
    a: &Args,
    phase: Phase,
    rng: &mut SmallRng,
    sess: &mut Session,
) -> Result<u64, String> {
    let n = sh.documents as i64;
    match phase {
        Phase::InsertSeq | Phase::InsertRand => {
            let ids: Vec<i64> = if phase == Phase::InsertSeq {
                let first = sh
                    .next_seq
                    .fetch_add(a.insert_batch as i64, Ordering::Relaxed);
                (first..first + a.insert_batch as i64).collect()
            } else {
                (0..a.insert_batch)
                    .map(|_| rng.gen_range(1i64 << 40..1i64 << 62))
                    .collect()
            };
            let docs: Vec<Document> = ids.iter().map(|id| document(rng, a, *id, 0)).collect();
            loop {
                let r = c.reply(
                    DB,
                    doc! { "insert": COLL, "documents": docs.clone(), "ordered": false },
                )?;
                // A random key met twice is a duplicate; it changes nothing. A peer that
                // answers busy (FerretDB on SQLite) gets the batch again: what it did write
                // comes back as duplicates.
                match failure(&r) {
                    None => break,
                    Some((_, m)) if m.contains("SQLITE_BUSY") => continue,
                    Some((11000, _)) => break,
                    Some((_, m)) => return Err(m),
                }
            }
            sess.keys.extend(&ids);
            if sess.keys.len() >= POOL_CHUNK {
                sess.return_keys(sh);
            }
            Ok(ids.len() as u64)
        }
        Phase::Point => {
            let id = rng.gen_range(0..n);
            let r = c.command(
                DB,
                doc! { "find": COLL, "filter": { "_id": id }, "limit": 1, "singleBatch": true },
            )?;
            let got = r
                .get_document("cursor")
                .and_then(|c| c.get_array("firstBatch"))
                .map(|b| b.len())
                .unwrap_or(0);
            if got != 1 {
                return Err(format!("document {id} not found"));
            }
            Ok(1)
        }
        Phase::Range => {
            let lo = rng.gen_range(0..n);
            let r = c.command(
                DB,
                doc! { "find": COLL, "filter": { "_id": { "$gte": lo, "$lt": lo + 100 } },
                "batchSize": 100, "singleBatch": true },
            )?;
            let got = r
                .get_document("cursor")
                .and_then(|c| c.get_array("firstBatch"))
                .map(|b| b.len() as u64)
                .unwrap_or(0);
            Ok(got)
        }
        Phase::Update => loop {
            let from = rng.gen_range(0..n);
            let mut to = rng.gen_range(0..n);
            if to == from {
                to = (to + 1) % n;
            }
            let x = rng.gen_range(1..10);
            if !sh.txn {
                transfer_plain(c, from, to, x)?;
                return Ok(1);
            }
            if transfer(c, sess, from, to, x)? {
                return Ok(1);
            }
            sh.conflicts.fetch_add(1, Ordering::Relaxed);
        },
        Phase::Ping => {
            c.command("admin", doc! { "ping": 1 })?;
            Ok(1)
        }
        Phase::Delete => {
            if sess.keys.is_empty() {
                let mut pool = sh.inserted.lock().expect("pool");
                let from = pool.len().saturating_sub(POOL_CHUNK);
                sess.keys.extend(pool.drain(from..));
            }
            let Some(id) = sess.keys.pop() else {
                return Ok(0);
            };
            c.command_retrying_busy(
                DB,
                doc! { "delete": COLL, "deletes": [{ "q": { "_id": id }, "limit": 1 }] },
            )?;
            Ok(1)
        }
    }
}

/// Run `phase` with `threads` clients for `len`; returns operations per second and the
/// latencies (µs) of every operation when `timed`.
fn run_for(
    sh: &Arc<Shared>,
    a: &Arc<Args>,
    phase: Phase,
    threads: usize,
    timed: bool,
    len: Duration,
) -> Result<(f64, Vec<u32>), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    let started = Instant::now();
    for t in 0..threads {
        let (sh, a, stop, done) = (sh.clone(), a.clone(), stop.clone(), done.clone());
        handles.push(std::thread::spawn(move || -> Result<Vec<u32>, String> {
            let mut c = Client::connect(sh.port).map_err(|e| e.to_string())?;
            let mut rng = SmallRng::seed_from_u64(
                (t as u64) << 32 ^ phase as u64 ^ (threads as u64) << 8 ^ 0x5eed,
            );
            let mut sess = Session::new();
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                let k = one_op(&mut c, &sh, &a, phase, &mut rng, &mut sess)?;
                if timed {
                    lat.push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                }
                done.fetch_add(k, Ordering::Relaxed);
            }
            sess.return_keys(&sh);
            Ok(lat)
        }));
    }
    std::thread::sleep(len);
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(
            h.join()
                .map_err(|_| "client thread panicked".to_string())??,
        );
    }
    let rate = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    Ok((rate, lat))
}

/// [`run_for`] the phase time.
fn run_phase(
    sh: &Arc<Shared>,
    a: &Arc<Args>,
    phase: Phase,
    threads: usize,
    timed: bool,
) -> Result<(f64, Vec<u32>), String> {
    run_for(sh, a, phase, threads, timed, Duration::from_secs(a.seconds))
}

/// Run `phase` at `threads` in one-second slices until three slices in a row are within 5%
/// of their mean (at most ten times the phase time): what the previous phase left (a cache
/// holding other data, buffers to flush) must not fall on the first thread counts measured.
/// Returns the last slice's rate and the seconds it took.
fn warm_up(
    sh: &Arc<Shared>,
    a: &Arc<Args>,
    phase: Phase,
    threads: usize,
) -> Result<(f64, u64), String> {
    let mut last: Vec<f64> = Vec::new();
    let most = (10 * a.seconds).max(3);
    for n in 1..=most {
        let (rate, _) = run_for(sh, a, phase, threads, false, Duration::from_secs(1))?;
        last.push(rate);
        if let [.., x, y, z] = last[..] {
            let mean = (x + y + z) / 3.0;
            if [x, y, z].iter().all(|r| (r - mean).abs() <= 0.05 * mean) {
                return Ok((rate, n));
            }
        }
    }
    Ok((last.last().copied().unwrap_or(0.0), most))
}

/// The sum of `v` over the collection.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a double sum is read as an integer: the saturating cast is the intended reading"
)]
fn sum_v(c: &mut Client) -> Result<i64, String> {
    let r = c.command(
        DB,
        doc! { "aggregate": COLL, "pipeline": [{ "$group": { "_id": null, "s": { "$sum": "$v" } } }],
               "cursor": {} },
    )?;
    let first = r
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map_err(|e| e.to_string())?
        .first()
        .and_then(|d| d.as_document())
        .cloned()
        .unwrap_or_default();
    Ok(match first.get("s") {
        Some(Bson::Int32(n)) => *n as i64,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    })
}

fn p99(mut v: Vec<u32>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    v[(v.len() * 99 / 100).min(v.len() - 1)] as f64
}

/// Point reads at 4 threads, with index builds on the other collection running throughout
/// (`build`) or not; returns the p99 latency in µs and the builds completed.
fn read_latency(sh: &Arc<Shared>, a: &Arc<Args>, build: bool) -> Result<(f64, u64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let builds = Arc::new(AtomicU64::new(0));
    let builder = build.then(|| {
        let (stop, builds, port) = (stop.clone(), builds.clone(), sh.port);
        std::thread::spawn(move || -> Result<(), String> {
            let mut c = Client::connect(port).map_err(|e| e.to_string())?;
            // A new name each time: FerretDB 1.24 cannot re-create a dropped index's name.
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let name = format!("f0_build{n}");
                c.command(
                    DB,
                    doc! { "createIndexes": OTHER, "indexes": [{ "key": { "f0": 1 }, "name": &name }] },
                )?;
                builds.fetch_add(1, Ordering::Relaxed);
                c.command(DB, doc! { "dropIndexes": OTHER, "index": &name })?;
            }
            Ok(())
        })
    });
    // Let the first build get going.
    if build {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, lat) = run_phase(sh, a, Phase::Point, 4, true)?;
    stop.store(true, Ordering::Relaxed);
    if let Some(b) = builder {
        b.join().map_err(|_| "builder panicked".to_string())??;
    }
    Ok((p99(lat), builds.load(Ordering::Relaxed)))
}

/// What one server measured.
struct W3Run {
    name: &'static str,
    /// Per phase, the figure (median of the runs) of each thread count.
    table: Vec<(Phase, Vec<f64>)>,
    /// Per phase, every run of each thread count, in the order they ran.
    runs: Vec<(Phase, Vec<Vec<f64>>)>,
    invariant_ok: bool,
    p99_base: f64,
    p99_build: f64,
    builds: u64,
    conflicts: u64,
}

fn measure(target: &Target, a: &Arc<Args>) -> Result<W3Run, Box<dyn std::error::Error>> {
    let mut c = target.connect()?;
    eprintln!("[{} load] {} documents", target.name(), a.documents);
    load(&mut c, a, COLL, a.documents)?;
    for f in 0..a.indexes.min(a.fields) {
        c.command(
            DB,
            doc! { "createIndexes": COLL, "indexes": [{ "key": { format!("f{f}"): 1 }, "name": format!("f{f}_1") }] },
        )?;
    }
    load(&mut c, a, OTHER, a.build_documents)?;
    let want = V0 * a.documents as i64 + crate::skew();
    let sh = Arc::new(Shared {
        port: target.port(),
        txn: matches!(target, Target::Silt(_)),
        next_seq: AtomicI64::new(a.documents as i64),
        inserted: Mutex::new(Vec::new()),
        conflicts: AtomicU64::new(0),
        documents: a.documents,
    });
    let mut table: Vec<(Phase, Vec<f64>)> = Vec::new();
    let mut all_runs: Vec<(Phase, Vec<Vec<f64>>)> = Vec::new();
    let mut invariant_ok = true;
    for phase in Phase::ALL {
        if !a.phases.iter().any(|p| p == phase.name()) {
            continue;
        }
        // Every thread count runs once per pass, the passes alternately ascending and
        // descending, and its figure is the median of its runs: the collection grows (or
        // shrinks) during a phase and the machine drifts, and the mirrored order cancels what
        // is linear in time; the median keeps one disturbed slice from deciding the figure.
        if phase == Phase::Delete {
            // Each run deletes the same mix of keys from both insert phases, not the random
            // ones first and the sequential ones last.
            let mut rng = SmallRng::seed_from_u64(0xde1);
            sh.inserted.lock().expect("pool").shuffle(&mut rng);
        }
        // Warm up at the most threads, not counted (see `warm_up`).
        let most = *a.threads.iter().max().expect("a thread count");
        // A peer whose operations scan the collection (FerretDB on SQLite: seconds each at
        // 1M documents) never settles within 5%: one slice warms it.
        let (rate, secs) = if sh.txn {
            warm_up(&sh, a, phase, most)?
        } else {
            let (r, _) = run_for(&sh, a, phase, most, false, Duration::from_secs(1))?;
            (r, 1)
        };
        eprintln!(
            "[{}] {most} threads: {rate:.0} ops/s (warm-up, steady after {secs} s)",
            phase.name()
        );
        let n = a.threads.len();
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); n];
        let order = (0..a.passes.max(1))
            .flat_map(|p| (0..n).map(move |i| if p % 2 == 0 { i } else { n - 1 - i }));
        for i in order {
            let t = a.threads[i];
            let (rate, _) = run_phase(&sh, a, phase, t, false)?;
            eprintln!(
                "[{} {}] {t} threads: {rate:.0} ops/s",
                target.name(),
                phase.name()
            );
            runs[i].push(rate);
        }
        let rates: Vec<f64> = runs.iter().map(|r| median(r)).collect();
        if matches!(phase, Phase::Update | Phase::Delete) {
            let s = sum_v(&mut c)?;
            let ok = s == want;
            invariant_ok &= ok;
            eprintln!(
                "[{}] sum of v {s}, expected {want}: {}",
                phase.name(),
                if ok { "OK" } else { "BROKEN" }
            );
        }
        table.push((phase, rates));
        all_runs.push((phase, runs));
    }
    eprintln!("[reads] point-read latency without, then with, index builds on another collection");
    let (p99_base, _) = read_latency(&sh, a, false)?;
    let (p99_build, builds) = read_latency(&sh, a, true)?;

    Ok(W3Run {
        name: target.name(),
        table,
        runs: all_runs,
        invariant_ok,
        p99_base,
        p99_build,
        builds,
        conflicts: sh.conflicts.load(Ordering::Relaxed),
    })
}

/// siltd's throughput divided by the peer's for every phase and thread count both ran
/// (`ping` left out): their geometric mean, and the lowest with its phase and thread count.
/// A phase the peer finished no operation of counts as a ratio of infinity for the lowest,
/// and is left out of the mean (it has no finite logarithm).
fn w3_ratio(silt: &W3Run, peer: &W3Run, threads: &[usize]) -> (f64, Option<(f64, Phase, usize)>) {
    let mut logs = Vec::new();
    let mut lowest: Option<(f64, Phase, usize)> = None;
    for (phase, s) in &silt.table {
        if *phase == Phase::Ping {
            continue;
        }
        if let Some((_, p)) = peer.table.iter().find(|(q, _)| q == phase) {
            for ((x, y), t) in s.iter().zip(p).zip(threads) {
                if *x > 0.0 && *y > 0.0 {
                    logs.push((x / y).ln());
                    if lowest.is_none_or(|(r, _, _)| x / y < r) {
                        lowest = Some((x / y, *phase, *t));
                    }
                }
            }
        }
    }
    if logs.is_empty() {
        return (f64::NAN, None);
    }
    ((logs.iter().sum::<f64>() / logs.len() as f64).exp(), lowest)
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `{"1": rate, "2": rate, ...}` for the JSON (a rate, or the list of a count's runs).
fn per_thread<T: Into<serde_json::Value>>(
    threads: &[usize],
    rates: impl IntoIterator<Item = T>,
) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> = threads
        .iter()
        .zip(rates)
        .map(|(t, r)| (t.to_string(), r.into()))
        .collect();
    serde_json::Value::Object(m)
}

fn print_table(a: &Args, run: &W3Run) {
    println!("== {}", run.name);
    print!("{:<12}", "threads");
    for t in &a.threads {
        print!("{t:>10}");
    }
    println!();
    for (phase, rates) in &run.table {
        print!("{:<12}", phase.name());
        for r in rates {
            print!("{r:>10.0}");
        }
        println!();
    }
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let a = Arc::new(a);
    if a.threads.is_empty() || a.documents < 2 {
        return Err("need at least one thread count and two documents".into());
    }
    let cache = format!("{}MB", a.cache_mb);
    let silt = {
        let t = Target::Silt(Server::start(
            None,
            &["--cache-size", &cache, "--replSet", "w3"],
        )?);
        measure(&t, &a)?
    };
    let mut peers = Vec::new();
    for p in &a.peer {
        let t = Target::peer(*p, DB)?;
        peers.push(measure(&t, &a)?);
    }
    let W3Run {
        ref table,
        ref runs,
        invariant_ok,
        p99_base,
        p99_build,
        builds,
        conflicts,
        ..
    } = silt;
    print!("{:<12}", "threads");
    for t in &a.threads {
        print!("{t:>10}");
    }
    println!(
        "{:>12}",
        format!("{}t/best", a.threads.last().expect("a thread count"))
    );
    let mut results = serde_json::Map::new();
    let mut worst = f64::INFINITY;
    let at = |rates: &[f64], t: usize| {
        a.threads
            .iter()
            .position(|&x| x == t)
            .map(|i| rates[i])
            .unwrap_or(f64::NAN)
    };
    for (phase, rates) in table {
        print!("{:<12}", phase.name());
        for r in rates {
            print!("{r:>10.0}");
        }
        let best = rates.iter().cloned().fold(0.0, f64::max);
        let last = *rates.last().expect("a thread count");
        let ratio = if best > 0.0 { last / best } else { 0.0 };
        // `ping` is the machine's reference, not a phase of the workload.
        if *phase == Phase::Ping {
            results.insert("ping_64t_to_best_ratio".into(), json!(ratio));
        } else {
            worst = worst.min(ratio);
        }
        println!("{ratio:>12.2}");
        results.insert(
            format!("{}_per_s", phase.name()),
            per_thread(&a.threads, rates.iter().copied()),
        );
    }
    for (phase, runs) in runs {
        results.insert(
            format!("{}_runs_per_s", phase.name()),
            per_thread(&a.threads, runs.iter().cloned()),
        );
    }
    let none = vec![f64::NAN; a.threads.len()];
    let rates_of = |p: Phase| {
        table
            .iter()
            .find(|(q, _)| *q == p)
            .map_or(&none, |(_, r)| r)
    };
    let ins = rates_of(Phase::InsertSeq);
    let upd = rates_of(Phase::Update);
    println!(
        "insert 4t/1t {:.2}x, update 4t/1t {:.2}x, worst {}t/best {worst:.2}",
        at(ins, 4) / at(ins, 1),
        at(upd, 4) / at(upd, 1),
        a.threads.last().expect("a thread count")
    );
    println!(
        "point-read p99: {p99_base:.0} µs alone, {p99_build:.0} µs during index builds ({builds} builds of {} documents), {:.2}x",
        a.build_documents,
        p99_build / p99_base.max(1.0)
    );
    println!(
        "sum invariant over every update transaction ({} write conflicts retried): {}",
        conflicts,
        if invariant_ok { "held" } else { "BROKEN" }
    );
    let mut peers_ok = true;
    for p in &peers {
        print_table(&a, p);
        let (ratio, lowest) = w3_ratio(&silt, p, &a.threads);
        println!(
            "silt/{}: {ratio:.2}x (geometric mean over phases and thread counts){}; sum invariant {}",
            p.name,
            lowest.map_or(String::new(), |(r, ph, t)| format!(
                ", lowest {r:.2}x ({} at {t} threads)",
                ph.name()
            )),
            if p.invariant_ok { "held" } else { "BROKEN" }
        );
        if let Some((r, ph, t)) = lowest {
            results.insert(format!("{}_lowest_ratio", p.name), json!(r));
            results.insert(
                format!("{}_lowest_ratio_at", p.name),
                json!(format!("{} at {t} threads", ph.name())),
            );
        }
        peers_ok &= p.invariant_ok;
        results.insert(format!("{}_ratio", p.name), json!(ratio));
        for (phase, rates) in &p.table {
            results.insert(
                format!("{}_{}_per_s", p.name, phase.name()),
                per_thread(&a.threads, rates.iter().copied()),
            );
        }
        results.insert(format!("{}_invariant_ok", p.name), json!(p.invariant_ok));
    }
    if let Some(p) = &a.json {
        results.insert("invariant_ok".into(), json!(invariant_ok));
        results.insert("insert_1t_per_s".into(), json!(at(ins, 1)));
        results.insert("insert_4t_per_s".into(), json!(at(ins, 4)));
        results.insert("update_1t_per_s".into(), json!(at(upd, 1)));
        results.insert("update_4t_per_s".into(), json!(at(upd, 4)));
        results.insert("worst_64t_to_best_ratio".into(), json!(worst));
        results.insert("p99_read_us_baseline".into(), json!(p99_base));
        results.insert("p99_read_us_during_index_build".into(), json!(p99_build));
        results.insert("index_builds_during_reads".into(), json!(builds));
        results.insert("write_conflicts".into(), json!(conflicts));
        results.insert(
            "params".into(),
            json!({ "documents": a.documents, "fields": a.fields, "padding": a.padding,
                    "compressibility": a.compressibility, "indexes": a.indexes,
                    "threads": a.threads, "seconds": a.seconds, "passes": a.passes, "insert_batch": a.insert_batch,
                    "build_documents": a.build_documents, "cache_mb": a.cache_mb,
                    "peers": PeerName::names(&a.peer) }),
        );
        results.insert("workload".into(), json!("concurrency"));
        std::fs::write(p, serde_json::to_string_pretty(&results)?)?;
    }
    let plot = a
        .plot
        .clone()
        .or_else(|| a.json.as_ref().map(|j| j.with_extension("svg")));
    if let Some(p) = plot {
        let series: Vec<(&str, &[f64])> = table
            .iter()
            .map(|(phase, rates)| (phase.name(), rates.as_slice()))
            .collect();
        crate::plot::per_thread_count(
            &p,
            &format!(
                "W3: throughput per client thread count ({} documents)",
                a.documents
            ),
            &a.threads,
            &series,
            0.8,
        )?;
        eprintln!("plot written to {}", p.display());
    }
    if !invariant_ok {
        return Err("the sum of v moved: an update transaction was not atomic".into());
    }
    if !peers_ok {
        return Err("the sum of v moved on a peer".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_runs() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        // One slice far off either way does not move the figure much.
        assert_eq!(median(&[10.0, 1.0, 11.0, 12.0]), 10.5);
        assert_eq!(median(&[10.0, 100.0, 11.0, 12.0]), 11.5);
        assert!(median(&[]).is_nan());
    }
}
