//! W1 on the peers, after siltd's run with the same documents, threads and time per phase:
//! FerretDB runs W1a, W1b and W1c through the wire (it has no fast path, so one mode);
//! PostgreSQL runs W1a as `UPDATE ... SET doc = jsonb_set(...) WHERE id = $1`, one statement
//! per update from each client thread, like the wire clients. Both end with the same check as
//! siltd: the sum of `counter` equals the increments acknowledged.

use bson::{doc, Document};

use crate::fast_update::{load, phase, Args, PhaseOut, COLL, DB, SLICES, W};
use crate::target::{PeerName, Target};

/// What a peer measured: updates/s for W1a, W1b and W1c (where it ran them).
pub(crate) struct PeerW1 {
    pub name: &'static str,
    pub w1a: f64,
    pub w1b: Option<f64>,
    pub w1c: Option<f64>,
    pub sum_ok: bool,
    /// (series label, updates/s every half second) for the W1 plot.
    pub samples: Vec<(String, Vec<f64>)>,
}

pub(crate) fn run_peer(p: PeerName, a: &Args) -> Result<PeerW1, String> {
    match p {
        PeerName::Postgres => postgres(a),
        _ => wire(p, a),
    }
}

fn wire(p: PeerName, a: &Args) -> Result<PeerW1, String> {
    let t = Target::peer(p, DB)?;
    let mut c = t.connect()?;
    load(&mut c, a, &format!("{} load", t.name()))?;
    let mut rates = [0f64; 3];
    let mut increments = 0u64;
    let mut samples = Vec::new();
    let mut busy = 0u64;
    let mut uncertain = 0u64;
    for (i, w) in [W::A, W::B, W::C].into_iter().enumerate() {
        for _ in 0..SLICES {
            let PhaseOut {
                rate,
                incs,
                samples: s,
                busy_retries,
                uncertain: u,
                ..
            } = phase(t.port(), a, w, None)?;
            busy += busy_retries;
            uncertain += u;
            rates[i] += rate / SLICES as f64;
            increments += incs;
            samples.push((format!("{} W1{}", t.name(), ["A", "B", "C"][i]), s));
        }
        eprintln!(
            "[{} w1{}] {} updates/s",
            t.name(),
            ["a", "b", "c"][i],
            crate::fast_update::rate(rates[i])
        );
    }
    if busy > 0 {
        eprintln!(
            "[{}] {busy} updates refused as busy (SQLITE_BUSY) and retried; they may have \
             applied up to {uncertain} increments before failing",
            t.name()
        );
    }
    let docs = c.find_all(DB, COLL, doc! {}, doc! { "counter": 1 })?;
    let sum: i64 = docs
        .iter()
        .map(|d: &Document| d.get_i64("counter").unwrap_or(0))
        .sum();
    Ok(PeerW1 {
        name: t.name(),
        w1a: rates[0],
        w1b: Some(rates[1]),
        w1c: Some(rates[2]),
        // The refused attempts make the expected sum a range (see `PhaseOut::uncertain`).
        sum_ok: docs.len() as u64 == a.docs
            && (increments as i64 + crate::skew()
                ..=(increments + uncertain) as i64 + crate::skew())
                .contains(&sum),
        samples,
    })
}

#[cfg(not(feature = "postgres"))]
fn postgres(_: &Args) -> Result<PeerW1, String> {
    Err("silt-bench was built without the postgres peer: build with `--features postgres` (bench/peers.sh install does)".into())
}

#[cfg(feature = "postgres")]
fn postgres(a: &Args) -> Result<PeerW1, String> {
    use crate::fast_update::generate;
    use crate::pg::Pg;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let mut pg = Pg::connect()?;
    eprintln!("[postgres] server {}", pg.version());
    pg.create(COLL, &[&[("k", "bigint")]])?;
    generate(a, "postgres load", |b| pg.insert(COLL, &b).map(|_| ()))?;
    pg.analyze(COLL)?;
    let stop = Arc::new(AtomicBool::new(false));
    let incs = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..a.threads {
        let (stop, incs) = (stop.clone(), incs.clone());
        let docs = a.docs;
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let mut pg = Pg::connect()?;
            let mut rng = SmallRng::seed_from_u64(1000 + t as u64);
            while !stop.load(Ordering::Relaxed) {
                let n = pg.inc_by_id(COLL, "counter", rng.gen_range(0..docs) as i64)?;
                incs.fetch_add(n, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    let samples = crate::fast_update::sample_for(Duration::from_secs(a.seconds), &incs);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join()
            .map_err(|_| "client thread panicked".to_string())??;
    }
    let n = incs.load(Ordering::Relaxed);
    let rate = n as f64 / started.elapsed().as_secs_f64();
    eprintln!("[postgres w1a] {rate:.0} updates/s");
    let sum = pg.sum(COLL, "counter")?;
    let rows = pg.count(COLL)?;
    pg.drop_table(COLL)?;
    Ok(PeerW1 {
        name: "postgres",
        w1a: rate,
        w1b: None,
        w1c: None,
        sum_ok: sum == n as i64 + crate::skew() && rows as u64 == a.docs,
        samples: vec![("postgres W1A".into(), samples)],
    })
}
