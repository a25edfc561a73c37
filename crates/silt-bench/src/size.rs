//! `silt-bench size`: workload W5 of `shared/workloads.md`. The documents of W3 (padding half
//! random) and of W4 (with its index on `a`) are loaded into a new siltd for each compression
//! setting, and the bytes on disk are read after the load and after a checkpoint (`fsync`),
//! against the raw BSON bytes inserted. With `--peer`, the same documents go to FerretDB (its
//! data directory's bytes) and PostgreSQL (`pg_total_relation_size` of a jsonb table with the
//! same index, after `CHECKPOINT`).

use std::path::PathBuf;

use bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

use crate::client::{Client, Server};
use crate::concurrency::w3_document;
use crate::count::w4_document;
use crate::progress::Bar;
use crate::target::{PeerName, Target};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// W3 documents (2 integer fields, 100 bytes of padding, half random).
    #[arg(long, default_value_t = 1_000_000)]
    w3_docs: u64,
    /// W4 documents (`a`, `x`, 100 bytes of padding, half random; an index on `a`).
    #[arg(long, default_value_t = 1_000_000)]
    w4_docs: u64,
    /// siltd's cache, in MiB.
    #[arg(long, default_value_t = 64)]
    cache_mb: u64,
    /// siltd compression settings to measure, in order.
    #[arg(long, value_delimiter = ',', default_value = "none,lz4,zstd")]
    compressions: Vec<String>,
    /// Also load the documents into these peers (`ferretdb`, `postgres`).
    #[arg(long)]
    peer: Vec<PeerName>,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

const DB: &str = "w5";

#[derive(Clone, Copy)]
enum Set {
    W3,
    W4,
}

impl Set {
    fn name(self) -> &'static str {
        match self {
            Set::W3 => "w3",
            Set::W4 => "w4",
        }
    }
}

fn docs_of(set: Set, a: &Args) -> u64 {
    match set {
        Set::W3 => a.w3_docs,
        Set::W4 => a.w4_docs,
    }
}

/// Generate the set's documents in batches of 1,000 and hand each batch to `sink`; returns
/// the raw BSON bytes generated.
fn generate(
    set: Set,
    n: u64,
    label: &str,
    mut sink: impl FnMut(Vec<Document>) -> Result<(), String>,
) -> Result<u64, String> {
    let mut rng = SmallRng::seed_from_u64(5);
    let mut bar = Bar::new(label, n);
    let mut raw = 0u64;
    let mut i = 0u64;
    while i < n {
        let k = 1000.min(n - i);
        let batch: Vec<Document> = (i..i + k)
            .map(|j| match set {
                Set::W3 => w3_document(&mut rng, 2, 100, 0.5, j as i64, 0),
                Set::W4 => w4_document(&mut rng, j as i64, 100),
            })
            .collect();
        for d in &batch {
            let mut v = Vec::new();
            let _ = d.to_writer(&mut v);
            raw += v.len() as u64;
        }
        sink(batch)?;
        i += k;
        bar.set(i);
    }
    bar.done();
    Ok(raw)
}

/// One measurement: a dataset in one store under one setting.
struct Row {
    set: &'static str,
    store: String,
    raw: u64,
    after_load: u64,
    after_checkpoint: u64,
}

fn load_wire(t: &Target, set: Set, a: &Args) -> Result<(u64, u64, u64), String> {
    let mut c: Client = t.connect()?;
    let coll = set.name();
    if let Set::W4 = set {
        c.command(
            DB,
            doc! { "createIndexes": coll, "indexes": [ { "key": { "a": 1 }, "name": "a_1" } ] },
        )?;
    }
    let label = format!("{} {coll}", t.name());
    let raw = generate(set, docs_of(set, a), &label, |batch| {
        c.command(DB, doc! { "insert": coll, "documents": batch })
            .map(|_| ())
    })?;
    let after_load = t.bytes_on_disk(&mut c);
    // FerretDB has no `fsync`: its figure after the load is also its figure "after checkpoint".
    if matches!(t, Target::Silt(_)) {
        c.command("admin", doc! { "fsync": 1 })?;
    }
    let after_checkpoint = t.bytes_on_disk(&mut c);
    let n = c.command(DB, doc! { "count": coll })?;
    let got = n.get_i32("n").map(i64::from).or_else(|_| n.get_i64("n"));
    if got != Ok(docs_of(set, a) as i64 + crate::skew()) {
        return Err(format!(
            "{}: {coll} holds {got:?} documents, {} were inserted",
            t.name(),
            docs_of(set, a)
        ));
    }
    Ok((raw, after_load, after_checkpoint))
}

#[cfg(feature = "postgres")]
fn load_postgres(set: Set, a: &Args) -> Result<(u64, u64, u64), String> {
    let mut pg = crate::pg::Pg::connect()?;
    let table = format!("w5_{}", set.name());
    match set {
        Set::W3 => pg.create(&table, &[])?,
        Set::W4 => pg.create(&table, &[&[("a", "bigint")]])?,
    }
    let raw = generate(set, docs_of(set, a), &format!("postgres {table}"), |b| {
        pg.insert(&table, &b).map(|_| ())
    })?;
    let n = pg.count(&table)?;
    if n != docs_of(set, a) as i64 {
        return Err(format!("postgres: {table} holds {n} rows"));
    }
    let bytes = pg.table_bytes(&table)?;
    pg.drop_table(&table)?;
    Ok((raw, bytes, bytes))
}

#[cfg(not(feature = "postgres"))]
fn load_postgres(_: Set, _: &Args) -> Result<(u64, u64, u64), String> {
    Err("silt-bench was built without the postgres peer: build with `--features postgres` (bench/peers.sh install does)".into())
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    let cache = format!("{}MB", a.cache_mb);
    let mut rows = Vec::new();
    for set in [Set::W3, Set::W4] {
        for comp in &a.compressions {
            let t = Target::Silt(Server::start(
                None,
                &["--cache-size", &cache, "--compression", comp],
            )?);
            let (raw, l, c) = load_wire(&t, set, &a)?;
            rows.push(Row {
                set: set.name(),
                store: format!("silt {comp}"),
                raw,
                after_load: l,
                after_checkpoint: c,
            });
        }
        for p in &a.peer {
            let (store, (raw, l, c)) = match p {
                PeerName::Postgres => ("postgres".to_string(), load_postgres(set, &a)?),
                _ => {
                    let t = Target::peer(*p, DB)?;
                    (t.name().to_string(), load_wire(&t, set, &a)?)
                }
            };
            rows.push(Row {
                set: set.name(),
                store,
                raw,
                after_load: l,
                after_checkpoint: c,
            });
        }
    }
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "{:<6}{:<16}{:>12}{:>18}{:>24}{:>10}",
        "set", "store", "raw MiB", "after load MiB", "after checkpoint MiB", "of raw"
    );
    for r in &rows {
        println!(
            "{:<6}{:<16}{:>12.1}{:>18.1}{:>24.1}{:>9.0}%",
            r.set,
            r.store,
            mib(r.raw),
            mib(r.after_load),
            mib(r.after_checkpoint),
            r.after_checkpoint as f64 * 100.0 / r.raw as f64
        );
    }
    let total = |store: &str| -> Option<u64> {
        let v: Vec<u64> = rows
            .iter()
            .filter(|r| r.store == store)
            .map(|r| r.after_checkpoint)
            .collect();
        (v.len() == 2).then(|| v.iter().sum())
    };
    let silt = total("silt zstd");
    for p in ["postgres", "ferretdb"] {
        if let (Some(s), Some(o)) = (silt, total(p)) {
            println!(
                "silt zstd / {p}: {:.2} of the bytes (both sets)",
                s as f64 / o as f64
            );
        }
    }
    if let Some(path) = a.json.as_ref().map(|j| j.with_extension("svg")) {
        let groups = vec!["W3 documents".to_string(), "W4 documents".to_string()];
        let mut stores: Vec<String> = vec!["raw BSON".into()];
        for r in &rows {
            if !stores.contains(&r.store) {
                stores.push(r.store.clone());
            }
        }
        let series: Vec<(&str, Vec<f64>)> = stores
            .iter()
            .map(|st| {
                let v = ["w3", "w4"]
                    .iter()
                    .map(|set| {
                        rows.iter()
                            .find(|r| r.set == *set && (r.store == *st || st == "raw BSON"))
                            .map_or(f64::NAN, |r| {
                                let b = if st == "raw BSON" {
                                    r.raw
                                } else {
                                    r.after_checkpoint
                                };
                                mib(b)
                            })
                    })
                    .collect();
                (st.as_str(), v)
            })
            .collect();
        crate::plot::bars(
            &path,
            &format!(
                "W5: bytes on disk after a checkpoint ({} W3 and {} W4 documents)",
                a.w3_docs, a.w4_docs
            ),
            "MiB",
            &groups,
            &series,
            false,
        )?;
        println!("plot: {}", path.display());
    }
    if let Some(path) = &a.json {
        let mut j = Map::new();
        j.insert("workload".into(), json!("size"));
        let peers = PeerName::names(&a.peer);
        j.insert(
            "params".into(),
            json!({ "w3_docs": a.w3_docs, "w4_docs": a.w4_docs, "cache_mb": a.cache_mb,
                    "compressions": a.compressions, "peers": peers }),
        );
        j.insert(
            "rows".into(),
            Value::Array(
                rows.iter()
                    .map(|r| {
                        json!({ "set": r.set, "store": r.store, "raw_bytes": r.raw,
                                "after_load_bytes": r.after_load,
                                "after_checkpoint_bytes": r.after_checkpoint })
                    })
                    .collect(),
            ),
        );
        if let Some(s) = silt {
            j.insert("w5_silt_bytes".into(), json!(s));
        }
        for p in ["postgres", "ferretdb"] {
            if let Some(o) = total(p) {
                j.insert(format!("w5_{p}_bytes"), json!(o));
            }
        }
        std::fs::write(path, serde_json::to_string_pretty(&Value::Object(j))?)?;
    }
    Ok(())
}
