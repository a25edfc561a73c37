//! `silt-bench fast-update --txn-updates N`: the TokuDB transaction experiment. Each client
//! runs sysbench-style OLTP transactions against the W1 collection, all statements inside one
//! multi-document transaction:
//! ten point queries by `_id`; a range query of 100 `_id`s; an indexed update (`$inc` of `k`);
//! `U` non-indexed `$inc` updates of `counter` by `_id` (one `update` command of `U` statements,
//! as a driver's bulk write sends them, so that what is measured is the server's cost per
//! update and not `U` network round trips; `--one-update-per-command` sends one command per
//! update, as sysbench does); a delete of one document (with
//! `findAndModify`, which returns it) and the insert of the same document back; commit.
//! Four cases, `U` = 1 and N with fast updates off and on (the `fastUpdate` flag of the update
//! command), run in slices: a warm-up round of all four that is not counted, then rounds
//! alternately forward and backward, so that drift (a shared machine, message buffers filling,
//! the cache settling) falls on every case alike. A transaction
//! that meets a write conflict is retried and counted once, when it commits.
//!
//! Afterwards the sum of `counter` must equal the committed increments: the reinsert keeps
//! the deleted document's counter, so nothing else moves it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::json;

use crate::client::{failure, Client, Server};
use crate::fast_update::{Args, COLL, DB, SLICES};

/// A failed statement: a conflict (retry the transaction) or an error (stop).
enum Fail {
    Conflict,
    Error(String),
}

impl From<String> for Fail {
    fn from(e: String) -> Fail {
        Fail::Error(e)
    }
}

/// One client's session.
struct Session {
    lsid: Document,
    number: i64,
    started: bool,
}

impl Session {
    /// Run `cmd` as the next statement of the current transaction.
    fn stmt(&mut self, c: &mut Client, db: &str, mut cmd: Document) -> Result<Document, Fail> {
        cmd.insert("lsid", self.lsid.clone());
        cmd.insert("txnNumber", self.number);
        cmd.insert("autocommit", false);
        if !self.started {
            cmd.insert("startTransaction", true);
            self.started = true;
        }
        let r = c.reply(db, cmd)?;
        match failure(&r) {
            None => Ok(r),
            Some((112 | 251 | 24, _)) => Err(Fail::Conflict),
            Some((_, m)) => Err(Fail::Error(m)),
        }
    }

    fn begin(&mut self) {
        self.number += 1;
        self.started = false;
    }
}

/// One transaction with `updates` non-indexed updates; returns the increments it committed.
fn transaction(
    c: &mut Client,
    s: &mut Session,
    rng: &mut SmallRng,
    docs: u64,
    updates: u32,
    fast: bool,
    one_per_command: bool,
) -> Result<u64, Fail> {
    s.begin();
    let id = |rng: &mut SmallRng| rng.gen_range(0..docs) as i64;
    for _ in 0..10 {
        let x = id(rng);
        s.stmt(
            c,
            DB,
            doc! { "find": COLL, "filter": { "_id": x }, "projection": { "c": 1 }, "singleBatch": true },
        )?;
    }
    let lo = id(rng);
    s.stmt(
        c,
        DB,
        doc! { "find": COLL, "filter": { "_id": { "$gte": lo, "$lt": lo + 100 } },
        "projection": { "c": 1 }, "batchSize": 100, "singleBatch": true },
    )?;
    let x = id(rng);
    s.stmt(
        c,
        DB,
        doc! { "update": COLL, "updates": [{ "q": { "_id": x }, "u": { "$inc": { "k": 1i64 } } }] },
    )?;
    let mut incs = 0;
    let per_command = if one_per_command { 1 } else { updates };
    let mut left = updates;
    while left > 0 {
        let k = per_command.min(left);
        left -= k;
        let stmts: Vec<Document> = (0..k)
            .map(|_| doc! { "q": { "_id": id(rng) }, "u": { "$inc": { "counter": 1i64 } } })
            .collect();
        let r = s.stmt(
            c,
            DB,
            doc! { "update": COLL, "updates": stmts, "fastUpdate": fast },
        )?;
        incs += match r.get("n") {
            Some(Bson::Int32(n)) => *n as u64,
            _ => 0,
        };
    }
    let x = id(rng);
    let r = s.stmt(
        c,
        DB,
        doc! { "findAndModify": COLL, "query": { "_id": x }, "remove": true },
    )?;
    if let Ok(d) = r.get_document("value") {
        s.stmt(c, DB, doc! { "insert": COLL, "documents": [d.clone()] })?;
    }
    s.stmt(c, "admin", doc! { "commitTransaction": 1 })?;
    Ok(incs)
}

/// One slice: `threads` clients for a quarter of the phase time. Returns (transactions/s,
/// increments committed, conflicts retried).
fn slice(port: u16, a: &Args, updates: u32, fast: bool) -> Result<(f64, u64, u64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let incs = Arc::new(AtomicU64::new(0));
    let conflicts = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..a.threads {
        let (stop, done, incs, conflicts) =
            (stop.clone(), done.clone(), incs.clone(), conflicts.clone());
        let (docs, one) = (a.docs, a.one_update_per_command);
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let mut c = Client::connect(port).map_err(|e| e.to_string())?;
            let mut rng = SmallRng::seed_from_u64(7000 + t as u64 + ((updates as u64) << 16));
            // A new session for every slice: its transaction numbers start again at 1.
            let mut id = vec![0u8; 16];
            rand::thread_rng().fill_bytes(&mut id);
            let mut s = Session {
                lsid: doc! { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: id } },
                number: 0,
                started: false,
            };
            while !stop.load(Ordering::Relaxed) {
                match transaction(&mut c, &mut s, &mut rng, docs, updates, fast, one) {
                    Ok(n) => {
                        done.fetch_add(1, Ordering::Relaxed);
                        incs.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(Fail::Conflict) => {
                        conflicts.fetch_add(1, Ordering::Relaxed);
                        // The server aborted it; make sure (a no-op if it is gone).
                        let _ = s.stmt(&mut c, "admin", doc! { "abortTransaction": 1 });
                    }
                    Err(Fail::Error(e)) => return Err(e),
                }
            }
            Ok(())
        }));
    }
    std::thread::sleep(Duration::from_millis(a.seconds * 1000 / SLICES as u64));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join()
            .map_err(|_| "client thread panicked".to_string())??;
    }
    Ok((
        done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64(),
        incs.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed),
    ))
}

pub(crate) fn run(
    a: &Args,
    server: &Server,
    c: &mut Client,
    raw: u64,
    n: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut results = serde_json::Map::new();
    let mut increments = 0u64;
    let mut conflicts = 0u64;
    let mut rates = [[0f64; 2]; 2];
    // The four cases run in rounds, forward then backward, so that drift (buffers filling,
    // the cache settling) falls on every case alike; one warm-up round is not counted.
    let cases = [(0, 1, false), (0, n, false), (1, 1, true), (1, n, true)]
        .map(|(slot, updates, fast)| (usize::from(updates != 1), slot, updates, fast));
    for round in 0..=SLICES {
        let mut order = cases.to_vec();
        if round % 2 == 0 {
            order.reverse();
        }
        for (row, slot, updates, fast) in order {
            let (rate, incs, conf) = slice(server.port, a, updates, fast)?;
            let what = if round == 0 { " (warm-up)" } else { "" };
            eprintln!(
                "[{updates} updates/txn] fast updates {}: {rate:.0} transactions/s{what}",
                if fast { "on" } else { "off" }
            );
            if round > 0 {
                rates[row][slot] += rate / SLICES as f64;
            }
            increments += incs;
            conflicts += conf;
        }
    }
    let docs = c.find_all(DB, COLL, doc! {}, doc! { "counter": 1 })?;
    let sum: i64 = docs.iter().map(|d| d.get_i64("counter").unwrap_or(0)).sum();
    let ok = sum as u64 == increments && docs.len() as u64 == a.docs;
    println!(
        "{:<32}{:>14}{:>14}{:>9}",
        "transactions/s", "fast off", "fast on", "on/off"
    );
    for (row, updates) in [1, n].into_iter().enumerate() {
        let [off, on] = rates[row];
        println!(
            "{:<32}{off:>14.0}{on:>14.0}{:>8.1}x",
            format!("{updates} $inc update(s) per txn"),
            on / off
        );
    }
    let cost = |slot: usize| 100.0 * (1.0 - rates[1][slot] / rates[0][slot]);
    println!(
        "going from 1 to {n} updates per transaction costs: fast off {:.1}%, fast on {:.1}% of throughput",
        cost(0),
        cost(1)
    );
    println!(
        "documents {}, raw {} MiB, cache {} MiB ({:.1}x), {} threads, {} s per case, {conflicts} conflicts retried",
        a.docs,
        raw >> 20,
        a.cache_mb,
        raw as f64 / (a.cache_mb << 20) as f64,
        a.threads,
        a.seconds
    );
    println!(
        "counter sum {sum}, committed increments {increments}: {}",
        if ok { "OK" } else { "MISMATCH" }
    );
    if let Some(p) = &a.json {
        results.insert("txn1_normal_per_s".into(), json!(rates[0][0]));
        results.insert("txn1_fast_per_s".into(), json!(rates[0][1]));
        results.insert(format!("txn{n}_normal_per_s"), json!(rates[1][0]));
        results.insert(format!("txn{n}_fast_per_s"), json!(rates[1][1]));
        results.insert("cost_normal_pct".into(), json!(cost(0)));
        results.insert("cost_fast_pct".into(), json!(cost(1)));
        results.insert("counter_sum_ok".into(), json!(ok));
        results.insert("write_conflicts".into(), json!(conflicts));
        results.insert("cache_bytes".into(), json!(a.cache_mb << 20));
        results.insert("data_bytes".into(), json!(raw));
        results.insert(
            "params".into(),
            json!({ "docs": a.docs, "blob_bytes": a.blob_bytes, "threads": a.threads,
                    "one_update_per_command": a.one_update_per_command,
                    "seconds": a.seconds, "cache_mb": a.cache_mb, "txn_updates": n,
                    "directio": !a.buffered }),
        );
        results.insert("workload".into(), json!("fast-update-transactions"));
        std::fs::write(p, serde_json::to_string_pretty(&results)?)?;
    }
    if !ok {
        return Err("the counter sum does not match the committed increments".into());
    }
    Ok(())
}
