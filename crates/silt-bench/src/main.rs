//! `silt-bench`: SiltDB's benchmark harness. One subcommand per workload; each prints a table
//! and, with `--json FILE`, writes every figure it printed plus its parameters. Benchmarks are
//! programs, not timed tests: nothing here asserts on speed.

mod all;
mod client;
mod concurrency;
mod count;
mod engine;
mod engine_peers;
mod fast_update;
mod iibench;
mod kv;
mod oplog;
#[cfg(feature = "postgres")]
mod pg;
mod plot;
mod progress;
mod replset;
mod size;
mod target;
mod txn_oltp;
mod w1_peers;
mod w2_peers;

use clap::{Parser, Subcommand};

/// The same allocator as `siltd`'s (with the same settings, `.cargo/config.toml`). Client
/// workloads run up to 64 threads on the machine's few cores beside the server, and glibc's
/// malloc made those threads queue on its arenas' locks: at 64 threads the client's share of
/// the CPU grew with the thread count and took it from the server being measured. The engine
/// workloads run in this process, so they also allocate as `siltd` does.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "silt-bench", about = "SiltDB benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Every workload at the small scale (W1-W5 and the engine comparison), each writing its
    /// JSON and plot into `--out`, then `results.json` with the headline figures.
    All(all::Args),
    /// The oplog's cost on random inserts, W1a fast updates on `--replSet`, and a change
    /// stream following inserts at a fixed rate.
    Oplog(oplog::Args),
    /// Storage-engine micro-workloads on data larger than the cache.
    Engine(engine::Args),
    /// The engine against RocksDB and SQLite (when built with `--features peers`): random
    /// inserts beyond the cache, blind increments against merges, point reads, bytes on disk.
    EnginePeers(engine_peers::Args),
    /// W1: fast updates by _id and by secondary key against a siltd child process.
    FastUpdate(fast_update::Args),
    /// W2: iiBench ingest with three secondary indexes, then retention by deleting the oldest
    /// documents against dropping the oldest partition.
    Iibench(iibench::Args),
    /// W3: insert, point and range queries, transactional updates with a sum invariant, and
    /// deletes at 1 to 64 client threads, against a siltd child process.
    Concurrency(concurrency::Args),
    /// A three-member replica set: majority inserts against a standalone, W1a on the primary
    /// with the secondaries' lag, and failover times after SIGKILL of the primary.
    Replset(replset::Args),
    /// W4: counts over index ranges with and without a matcher, against reading the documents.
    Count(count::Args),
    /// W5: bytes on disk of the W3 and W4 documents for each compression setting, against
    /// the raw BSON bytes (and against FerretDB and PostgreSQL with `--peer`).
    Size(size::Args),
}

/// What every workload's final check adds to the figure it expects: 0, or 1 when
/// `SILT_BENCH_BREAK_CHECKS=1`, so that a test can see each check fail loudly on a wrong
/// answer (`bench/smoke.sh`).
pub(crate) fn skew() -> i64 {
    i64::from(std::env::var_os("SILT_BENCH_BREAK_CHECKS").is_some_and(|v| v == "1"))
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::All(a) => all::run(a),
        Cmd::Engine(a) => engine::run(a).map_err(Into::into),
        Cmd::EnginePeers(a) => engine_peers::run(a).map_err(Into::into),
        Cmd::FastUpdate(a) => fast_update::run(a),
        Cmd::Oplog(a) => oplog::run(a),
        Cmd::Count(a) => count::run(a),
        Cmd::Replset(a) => replset::run(a),
        Cmd::Size(a) => size::run(a),
        Cmd::Iibench(a) => iibench::run(a),
        Cmd::Concurrency(a) => concurrency::run(a),
    };
    if let Err(e) = r {
        eprintln!("silt-bench: {e}");
        std::process::exit(1);
    }
}
