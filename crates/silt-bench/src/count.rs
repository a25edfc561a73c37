//! `silt-bench count`: workload W4 of `shared/workloads.md` against a `siltd` child process.
//!
//! Loads `{a: uniform int in [0, 1e5), x: uniform int in [0, 100), pad}` with an index on
//! `{a: 1}`, then times: the full collection count; counts of 10-, 100-, 1,000- and
//! 10,000-key ranges on `a` without a matcher (`{a: {$gte: L, $lt: L+K}}`) and with one (plus
//! `x: 7`); and reading the same documents with a cursor (`itcount`).

use std::path::PathBuf;
use std::time::Instant;

use bson::{doc, Bson, Document};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::json;

use crate::client::{Client, Server};
use crate::progress::Bar;
use crate::target::{PeerName, Target};

#[derive(clap::Args, Clone)]
pub(crate) struct Args {
    /// Documents to load.
    #[arg(long, alias = "documents", default_value_t = 1_000_000)]
    docs: u64,
    /// Padding bytes per document (half random).
    #[arg(long, default_value_t = 100)]
    pad_bytes: usize,
    /// The server's cache, in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mb: u64,
    /// Timed repetitions per figure (each at a random range start).
    #[arg(long, default_value_t = 20)]
    reps: u32,
    /// Timed repetitions per figure on a peer (a peer that scans for every count takes
    /// seconds per figure at the default size).
    #[arg(long, default_value_t = 3)]
    peer_reps: u32,
    /// Also run against this peer (started by `bench/peers.sh`), with the same documents.
    #[arg(long)]
    peer: Vec<PeerName>,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What one server measured.
struct W4Run {
    name: &'static str,
    results: serde_json::Map<String, serde_json::Value>,
    /// (keys, count us, count with matcher us, itcount us)
    rows: Vec<(u64, f64, f64, f64)>,
    full_us: f64,
    est_us: f64,
    load_per_s: f64,
    ok: bool,
}

const DB: &str = "w4";
const COLL: &str = "c";
const A_VALUES: i64 = 100_000;

/// One W4 document: `a` uniform in [0, 1e5), `x` uniform in [0, 100), and `pad_bytes` of
/// padding, half random letters.
pub(crate) fn w4_document(rng: &mut SmallRng, id: i64, pad_bytes: usize) -> Document {
    let mut pad = vec![b'p'; pad_bytes];
    for b in pad.iter_mut().take(pad_bytes / 2) {
        *b = b'a' + (rng.next_u32() % 26) as u8;
    }
    doc! {
        "_id": id,
        "a": rng.gen_range(0..A_VALUES),
        "x": rng.gen_range(0..100i64),
        "pad": String::from_utf8(pad).unwrap_or_default(),
    }
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "a double `n` is read as an integer count: the saturating cast is the intended reading"
)]
fn count(c: &mut Client, query: Document) -> Result<i64, String> {
    let r = c.command(DB, doc! { "count": COLL, "query": query })?;
    Ok(match r.get("n") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => -1,
    })
}

fn itcount(c: &mut Client, filter: Document) -> Result<i64, String> {
    Ok(c.find_all(DB, COLL, filter, doc! {})?.len() as i64)
}

/// Mean microseconds of `f` over `reps` runs, and the last result.
fn time_us(reps: u32, mut f: impl FnMut(u32) -> Result<i64, String>) -> Result<(f64, i64), String> {
    let mut total = 0f64;
    let mut last = 0;
    for i in 0..reps {
        let t = Instant::now();
        last = f(i)?;
        total += t.elapsed().as_secs_f64() * 1e6;
    }
    Ok((total / f64::from(reps), last))
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "a batch holds at most 1000 documents; a range width is a rounded ratio of small \
              counts"
)]
fn measure(t: &Target, a: &Args) -> Result<W4Run, Box<dyn std::error::Error>> {
    let mut c = t.connect()?;
    let mut rng = SmallRng::seed_from_u64(4);
    let mut bar = Bar::new(&format!("{} load", t.name()), a.docs);
    let started = Instant::now();
    let mut raw = 0u64;
    let mut i = 0u64;
    while i < a.docs {
        let n = 1000.min(a.docs - i);
        let mut batch = Vec::with_capacity(n as usize);
        for j in i..i + n {
            let d = w4_document(&mut rng, j as i64, a.pad_bytes);
            let mut v = Vec::new();
            let _ = d.to_writer(&mut v);
            raw += v.len() as u64;
            batch.push(d);
        }
        c.command(
            DB,
            doc! { "insert": COLL, "documents": batch, "ordered": false },
        )?;
        i += n;
        bar.set(i);
    }
    bar.done();
    let load_per_s = a.docs as f64 / started.elapsed().as_secs_f64();
    c.command(
        DB,
        doc! { "createIndexes": COLL, "indexes": [ { "key": { "a": 1 }, "name": "a_1" } ] },
    )?;
    // A checkpoint first, so that no timed figure shares the machine with writing back the
    // load (FerretDB has no `fsync`; it is skipped there), then a warm-up: one pass over the
    // index and the documents.
    let _ = c.command("admin", doc! { "fsync": 1 });
    let _ = itcount(&mut c, doc! { "a": { "$gte": 0 } })?;
    let warm_rss = t.rss();

    let mut results = serde_json::Map::new();
    let mut rows = Vec::new();
    let (full_us, full_n) = time_us(a.reps.min(5), |_| {
        let r = c.command(
            DB,
            doc! { "aggregate": COLL, "pipeline": [ { "$match": {} }, { "$group": { "_id": 1, "n": { "$sum": 1 } } } ], "cursor": {} },
        )?;
        Ok(r.get_document("cursor")
            .ok()
            .and_then(|c| c.get_array("firstBatch").ok())
            .and_then(|b| b.first())
            .and_then(|d| d.as_document())
            .and_then(|d| d.get("n"))
            .map(|n| match n {
                Bson::Int32(v) => i64::from(*v),
                Bson::Int64(v) => *v,
                _ => -1,
            })
            .unwrap_or(-1))
    })?;
    results.insert("full_count_us".into(), json!(full_us));
    // estimatedDocumentCount: `count` without a query, answered from the maintained count.
    let (est_us, est_n) = time_us(a.reps.min(5), |_| {
        let r = c.command(DB, doc! { "count": COLL })?;
        Ok(match r.get("n") {
            Some(Bson::Int32(v)) => i64::from(*v),
            Some(Bson::Int64(v)) => *v,
            _ => -1,
        })
    })?;
    results.insert("estimated_count_us".into(), json!(est_us));
    let mut ok = full_n == a.docs as i64 && est_n == a.docs as i64;
    let per_value = a.docs as f64 / A_VALUES as f64;
    for keys in [10u64, 100, 1000, 10_000] {
        let width = ((keys as f64 / per_value).round() as i64).max(1);
        let starts: Vec<i64> = (0..a.reps)
            .map(|_| rng.gen_range(0..A_VALUES - width))
            .collect();
        let range = |l: i64| doc! { "a": { "$gte": l, "$lt": l + width } };
        let (nm_us, _) = time_us(a.reps, |r| count(&mut c, range(starts[r as usize])))?;
        let (m_us, _) = time_us(a.reps, |r| {
            let mut q = range(starts[r as usize]);
            q.insert("x", 7i64);
            count(&mut c, q)
        })?;
        let (it_us, _) = time_us(a.reps, |r| itcount(&mut c, range(starts[r as usize])))?;
        // Counts must agree with reading the documents.
        for &l in starts.iter().take(3) {
            ok &= count(&mut c, range(l))? + crate::skew() == itcount(&mut c, range(l))?;
        }
        results.insert(format!("count_{keys}_nomatcher_us"), json!(nm_us));
        results.insert(format!("count_{keys}_matcher_us"), json!(m_us));
        results.insert(format!("itcount_{keys}_us"), json!(it_us));
        rows.push((keys, nm_us, m_us, it_us));
    }
    // Issue 35's figures: counting a range that holds a given number of index entries,
    // without a matcher, whatever the number of distinct values (10 up to 1,000,000 entries;
    // a size larger than the collection is left out).
    let mut by_entries = Vec::new();
    for entries in [10u64, 1000, 100_000, 1_000_000] {
        if entries > a.docs {
            continue;
        }
        let width = ((entries as f64 / per_value).round() as i64).clamp(1, A_VALUES);
        let starts: Vec<i64> = (0..a.reps)
            .map(|_| rng.gen_range(0..=A_VALUES - width))
            .collect();
        let range = |l: i64| doc! { "a": { "$gte": l, "$lt": l + width } };
        let (us, _) = time_us(a.reps, |r| count(&mut c, range(starts[r as usize])))?;
        results.insert(format!("count_entries_{entries}_us"), json!(us));
        by_entries.push((entries, us));
    }
    let disk = t.bytes_on_disk(&mut c);
    results.insert("cache_bytes".into(), json!(a.cache_mb << 20));
    results.insert("data_bytes".into(), json!(raw));
    results.insert("bytes_on_disk".into(), json!(disk));
    results.insert("server_peak_rss_bytes".into(), json!(t.peak_rss()));
    results.insert("server_rss_after_warmup_bytes".into(), json!(warm_rss));
    results.insert("load_per_s".into(), json!(load_per_s));
    results.insert("counts_agree".into(), json!(ok));
    println!("== {}", t.name());
    print_run(&rows, full_us, full_n, est_us, est_n);
    for (entries, us) in &by_entries {
        println!("count_entries_{entries}_us: {us:.0}");
    }
    println!(
        "documents {}, raw {} MiB, on disk {} MiB, cache {} MiB, server RSS after warm-up {} MiB (peak {} MiB); load {load_per_s:.0} docs/s; counts agree: {}",
        a.docs,
        raw >> 20,
        disk >> 20,
        a.cache_mb,
        warm_rss >> 20,
        t.peak_rss() >> 20,
        if ok { "yes" } else { "NO" }
    );
    Ok(W4Run {
        name: t.name(),
        results,
        rows,
        full_us,
        est_us,
        load_per_s,
        ok,
    })
}

fn print_run(rows: &[(u64, f64, f64, f64)], full_us: f64, full_n: i64, est_us: f64, est_n: i64) {
    println!(
        "{:<26}{:>16}{:>16}{:>16}{:>10}",
        "range (keys)", "count (us)", "count+x:7 (us)", "itcount (us)", "it/count"
    );
    for (keys, nm, m, it) in rows {
        println!("{keys:<26}{nm:>16.0}{m:>16.0}{it:>16.0}{:>9.1}x", it / nm);
    }
    println!("full collection count: {full_us:.0} us ({full_n} documents, countDocuments)");
    println!("estimatedDocumentCount: {est_us:.0} us ({est_n} documents)");
}

/// The geometric mean of `peer time / silt time` over every count figure (range counts with
/// and without the matcher, the full count): how many times faster siltd answers counts.
fn count_speedup(silt: &W4Run, peer: &W4Run) -> f64 {
    let mut logs = Vec::new();
    for (s, p) in silt.rows.iter().zip(&peer.rows) {
        logs.push((p.1 / s.1).ln());
        logs.push((p.2 / s.2).ln());
    }
    logs.push((peer.full_us / silt.full_us).ln());
    (logs.iter().sum::<f64>() / logs.len() as f64).exp()
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.docs <= 10_000 {
        return Err("--docs must be above 10,000: the widest range counts 10,000 keys".into());
    }
    let cache = format!("{}MB", a.cache_mb);
    let mut runs = Vec::new();
    {
        let t = Target::Silt(Server::start(None, &["--cache-size", &cache])?);
        runs.push(measure(&t, &a)?);
    }
    for p in &a.peer {
        let t = Target::peer(*p, DB)?;
        let pa = Args {
            reps: a.peer_reps.min(a.reps),
            peer: Vec::new(),
            json: None,
            ..a.clone()
        };
        runs.push(measure(&t, &pa)?);
    }
    let mut results = serde_json::Map::new();
    let silt = &runs[0];
    for (k, v) in &silt.results {
        results.insert(k.clone(), v.clone());
    }
    for peer in &runs[1..] {
        let n = peer.name;
        let speedup = count_speedup(silt, peer);
        println!(
            "silt/{n}: counts {speedup:.2}x faster (geometric mean over the count figures), estimatedDocumentCount {:.2}x, load {:.2}x",
            peer.est_us / silt.est_us,
            silt.load_per_s / peer.load_per_s
        );
        results.insert(format!("{n}_count_speedup"), json!(speedup));
        results.insert(
            format!("{n}_load_ratio"),
            json!(silt.load_per_s / peer.load_per_s),
        );
        results.insert(n.into(), serde_json::Value::Object(peer.results.clone()));
    }
    let ok = runs.iter().all(|r| r.ok);
    if let Some(path) = a.json.as_ref().map(|j| j.with_extension("svg")) {
        // Mean latency of every figure, siltd's counts and reads beside each peer's counts.
        let mut groups: Vec<String> = silt
            .rows
            .iter()
            .map(|r| format!("{}-key range", r.0))
            .collect();
        groups.push("full count".into());
        let mut series: Vec<(String, Vec<f64>)> = Vec::new();
        for r in &runs {
            let mut v: Vec<f64> = r.rows.iter().map(|x| x.1).collect();
            v.push(r.full_us);
            series.push((format!("{} count", r.name), v));
            let mut m: Vec<f64> = r.rows.iter().map(|x| x.2).collect();
            m.push(f64::NAN);
            series.push((format!("{} count with x: 7", r.name), m));
        }
        let mut it: Vec<f64> = silt.rows.iter().map(|x| x.3).collect();
        it.push(f64::NAN);
        series.push(("silt reading the documents".into(), it));
        let refs: Vec<(&str, Vec<f64>)> = series
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone()))
            .collect();
        crate::plot::bars(
            &path,
            &format!("W4: mean latency of counts ({} documents)", a.docs),
            "microseconds (log scale)",
            &groups,
            &refs,
            true,
        )?;
        println!("plot: {}", path.display());
    }
    if let Some(p) = &a.json {
        let peers = PeerName::names(&a.peer);
        results.insert(
            "params".into(),
            json!({ "docs": a.docs, "pad_bytes": a.pad_bytes, "reps": a.reps, "cache_mb": a.cache_mb, "peers": peers }),
        );
        results.insert("workload".into(), json!("count"));
        std::fs::write(p, serde_json::to_string_pretty(&results)?)?;
    }
    if !ok {
        return Err("counts disagree with the documents read".into());
    }
    Ok(())
}
