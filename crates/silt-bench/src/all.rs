//! `silt-bench all`: every workload (W1-W5 and the engine comparison) at the small scale, one
//! after another, each as a child `silt-bench` process writing its JSON (and plot) into
//! `--out`; then `results.json` there with the figures issue 15 names, and a summary table.
//!
//! With `--peers`, the server-level workloads also run against FerretDB and PostgreSQL and
//! the engine comparison against RocksDB and SQLite (build with `--features peers` and start
//! them with `bench/peers.sh`). `--quick` shrinks every size so that the whole suite runs in
//! about a minute: a smoke test of the harness and the peer adapters, not a measurement.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Map, Value};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Directory for every workload's JSON and plot, and `results.json`.
    #[arg(long, default_value = "bench/results/latest")]
    out: PathBuf,
    /// Run the peers too (FerretDB, PostgreSQL, RocksDB, SQLite).
    #[arg(long)]
    peers: bool,
    /// Tiny sizes: checks that everything runs and verifies, measures nothing.
    #[arg(long)]
    quick: bool,
    /// Only these workloads (engine, w1, w2, w3, w3_ferretdb, w4, w5).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run nothing: write `results.json` from the workloads' JSON files already in `--out`
    /// (for a suite run one workload at a time).
    #[arg(long)]
    summary_only: bool,
}

/// One workload: its name, the subcommand and its flags at the small and the quick scale,
/// and the flags that add the peers.
struct Step {
    name: &'static str,
    args: &'static [&'static str],
    quick: &'static [&'static str],
    /// Flags at the small scale besides the workload's defaults.
    small: &'static [&'static str],
    peers: &'static [&'static str],
    /// Runs only with `--peers` (a comparison step, not one of siltd's own figures).
    peers_only: bool,
}

/// W3 at its small scale (1M documents, 1 to 64 threads) cannot run against FerretDB 1.24 on
/// SQLite: it pushes a filter on `_id` down to SQLite only for strings and ObjectIds, so every
/// point read, range read, update and delete by W3's integer `_id` scans the collection
/// (seconds each at 1M documents), and one 64-thread run of a phase would wait minutes for
/// its operations in flight. The comparison therefore runs W3 again, for both servers, on
/// 100,000 documents at 1, 4 and 16 threads.
const W3_PEER_SCALE: &[&str] = &[
    "--documents",
    "100000",
    "--build-documents",
    "20000",
    "--threads",
    "1,4,16",
];

/// W3 at tiny sizes, for itself and for the comparison with FerretDB.
const W3_QUICK: &[&str] = &[
    "--documents",
    "3000",
    "--build-documents",
    "2000",
    "--threads",
    "1,4",
    "--seconds",
    "1",
    "--passes",
    "2",
];

const STEPS: [Step; 7] = [
    Step {
        name: "engine",
        args: &["engine-peers"],
        quick: &["--keys", "200000", "--updates", "20000", "--gets", "5000"],
        // Without `--stores`, engine-peers runs every store built in.
        peers: &[],
        small: &[],
        peers_only: false,
    },
    Step {
        name: "w1",
        args: &["fast-update"],
        quick: &["--docs", "3000", "--seconds", "2", "--threads", "4"],
        peers: &["--peer", "postgres", "--peer", "ferretdb"],
        small: &[],
        peers_only: false,
    },
    Step {
        name: "w2",
        args: &["iibench"],
        quick: &["--docs", "20000"],
        peers: &["--peer", "postgres", "--peer", "ferretdb"],
        small: &[],
        peers_only: false,
    },
    Step {
        name: "w3",
        args: &["concurrency"],
        quick: W3_QUICK,
        // The comparison with FerretDB is the next step, at a scale FerretDB can finish.
        peers: &[],
        small: &[],
        peers_only: false,
    },
    Step {
        name: "w3_ferretdb",
        args: &["concurrency"],
        quick: W3_QUICK,
        small: W3_PEER_SCALE,
        peers: &["--peer", "ferretdb"],
        peers_only: true,
    },
    Step {
        name: "w4",
        args: &["count", "--peer-reps", "1"],
        quick: &["--docs", "20000", "--reps", "2"],
        peers: &["--peer", "ferretdb"],
        small: &[],
        peers_only: false,
    },
    Step {
        name: "w5",
        args: &["size"],
        quick: &["--w3-docs", "5000", "--w4-docs", "5000"],
        peers: &["--peer", "postgres", "--peer", "ferretdb"],
        small: &[],
        peers_only: false,
    },
];

fn read(out: &Path, name: &str) -> Option<Map<String, Value>> {
    let text = std::fs::read_to_string(out.join(format!("{name}.json"))).ok()?;
    match serde_json::from_str(&text).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

fn put(r: &mut Map<String, Value>, k: &str, v: Option<f64>) {
    if let Some(v) = v {
        r.insert(k.into(), json!(v));
    }
}

fn num(m: &Option<Map<String, Value>>, k: &str) -> Option<f64> {
    m.as_ref()?.get(k)?.as_f64()
}

pub(crate) fn run(a: Args) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(&a.out)?;
    let me = std::env::current_exe()?;
    let started = Instant::now();
    let mut ran = Vec::new();
    for s in &STEPS {
        if a.summary_only {
            if a.out.join(format!("{}.json", s.name)).exists() {
                ran.push(s.name);
            }
            continue;
        }
        if !a.only.is_empty() && !a.only.iter().any(|o| o == s.name) {
            continue;
        }
        if s.peers_only && !a.peers {
            continue;
        }
        let json = a.out.join(format!("{}.json", s.name));
        let log = a.out.join(format!("{}.txt", s.name));
        let mut cmd = Command::new(&me);
        cmd.args(s.args).arg("--json").arg(&json);
        if a.quick {
            cmd.args(s.quick);
        } else {
            cmd.args(s.small);
        }
        if a.peers {
            cmd.args(s.peers);
        } else if s.name == "engine" {
            cmd.args(["--stores", "silt"]);
        }
        let shown: Vec<String> = cmd
            .get_args()
            .map(|x| x.to_string_lossy().into_owned())
            .collect();
        eprintln!(
            "== {} ({:.0} s so far): silt-bench {}",
            s.name,
            started.elapsed().as_secs_f64(),
            shown.join(" ")
        );
        // The table goes to the terminal and to `<name>.txt`; progress stays on stderr.
        let out = cmd.stderr(std::process::Stdio::inherit()).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        print!("{text}");
        std::fs::write(
            &log,
            format!("$ silt-bench {}\n{text}", shown.join(" ")).as_bytes(),
        )?;
        if !out.status.success() {
            return Err(format!(
                "{} failed ({}): its checks did not hold or it could not run; see above",
                s.name, out.status
            )
            .into());
        }
        ran.push(s.name);
    }

    // The summary: the figures issue 15 asks for, where the run produced them.
    let engine = read(&a.out, "engine");
    let w1 = read(&a.out, "w1");
    let w2 = read(&a.out, "w2");
    let w3 = read(&a.out, "w3");
    let w3_ferretdb = read(&a.out, "w3_ferretdb");
    let w4 = read(&a.out, "w4");
    let w5 = read(&a.out, "w5");
    let mut r = Map::new();
    put(
        &mut r,
        "w2_last_quarter_silt_per_s",
        num(&w2, "w2_last_quarter_silt_per_s"),
    );
    put(
        &mut r,
        "w2_last_quarter_postgres_per_s",
        num(&w2, "w2_last_quarter_postgres_per_s"),
    );
    put(&mut r, "w1a_silt_per_s", num(&w1, "w1a_silt_per_s"));
    put(&mut r, "w1a_postgres_per_s", num(&w1, "w1a_postgres_per_s"));
    put(&mut r, "w5_silt_bytes", num(&w5, "w5_silt_bytes"));
    put(&mut r, "w5_postgres_bytes", num(&w5, "w5_postgres_bytes"));
    for k in [
        "engine_insert_silt_per_s",
        "engine_insert_rocksdb_per_s",
        "engine_insert_sqlite_per_s",
        "engine_blind_silt_per_s",
        "engine_merge_rocksdb_per_s",
        "engine_blind_sqlite_per_s",
        "engine_point_get_silt_per_s",
        "engine_point_get_rocksdb_per_s",
        "engine_point_get_sqlite_per_s",
        "engine_bytes_silt",
        "engine_bytes_rocksdb",
        "engine_bytes_sqlite",
    ] {
        put(&mut r, k, num(&engine, k));
    }
    // SiltDB / FerretDB throughput per server-level workload, and the lowest.
    let ferret: Vec<(&str, Option<f64>)> = vec![
        (
            "w1a",
            num(&w1, "w1a_silt_per_s")
                .zip(num(&w1, "w1a_ferretdb_per_s"))
                .map(|(s, f)| s / f),
        ),
        (
            "w2a",
            num(&w2, "w2_last_quarter_silt_per_s")
                .zip(num(&w2, "w2_last_quarter_ferretdb_per_s"))
                .map(|(s, f)| s / f),
        ),
        ("w3", num(&w3_ferretdb, "ferretdb_ratio")),
        ("w4", num(&w4, "ferretdb_count_speedup")),
    ];
    let mut min: Option<f64> = None;
    let mut over = Vec::new();
    for (w, v) in &ferret {
        if let Some(v) = v {
            r.insert(format!("{w}_ferretdb_ratio"), json!(v));
            min = Some(min.map_or(*v, |m: f64| m.min(*v)));
            over.push(*w);
        }
    }
    put(&mut r, "ferretdb_min_ratio", min);
    // Which workloads the minimum is over: a run without some of them says so.
    r.insert("ferretdb_min_ratio_over".into(), json!(over));
    // W3's ratio is a geometric mean over phases and thread counts; its lowest single
    // phase and thread count is kept beside it.
    put(
        &mut r,
        "w3_ferretdb_lowest_ratio",
        num(&w3_ferretdb, "ferretdb_lowest_ratio"),
    );
    put(
        &mut r,
        "w3_worst_64t_to_best_ratio",
        num(&w3, "worst_64t_to_best_ratio"),
    );
    put(
        &mut r,
        "w4_count_10000_nomatcher_us",
        num(&w4, "count_10000_nomatcher_us"),
    );
    r.insert("workloads".into(), json!(ran));
    r.insert("quick".into(), json!(a.quick));
    r.insert("peers".into(), json!(a.peers));
    r.insert(
        "total_seconds".into(),
        json!(started.elapsed().as_secs_f64()),
    );
    let path = a.out.join("results.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&Value::Object(r.clone()))?,
    )?;
    println!("\n== summary ({})", path.display());
    for (k, v) in &r {
        if let Some(x) = v.as_f64() {
            println!("{k:<36} {x:>16.2}");
        }
    }
    Ok(())
}
