//! `siltd`, the SiltDB server: MongoDB's wire protocol over the fractal-tree engine.
//!
//! This crate owns the process (flags, config, logging, signals, the lock on the data
//! directory via the engine), the network (`server`: connections and message framing through
//! `silt-wire`), command dispatch, argument parsing and reply shapes (`commands`, one file per
//! command), fast updates (`fast`), open cursors (`cursors`), operations in flight (`ops`),
//! sessions and their transactions, retryable writes and snapshot reads (`sessions`,
//! `transactions`), and the one-member replica set face of `--replSet` (`replset`).
//! It must not know the engine, plan choice or the byte layout of keys: it does not depend on
//! `silt-storage`; documents, index scans and fast counts are reached through
//! `silt-collection` (which also re-exports what the server needs of the engine), filters,
//! plans and `explain` through `silt-query`.

mod auth;
mod change_stream;
mod cluster_auth;
mod commands;
mod config;
mod conn;
mod ctx;
mod cursors;
mod error_labels;
mod errors;
mod fail_command;
mod fast;
mod logging;
mod metrics;
mod monitor;
mod num;
mod oplog_source;
mod ops;
mod optimes;
mod raft_member;
mod raft_transport;
mod redzone;
mod repeated;
mod replset;
mod replset_doc;
mod request;
mod server;
mod sessions;
mod state;
mod tls;
mod transactions;
mod ttl;
mod views;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use silt_collection::{Compression, EnvOptions, Store, SyncPolicy, UpdateRegistry};

/// The global allocator is jemalloc, built with small thread caches (`.cargo/config.toml`).
/// With glibc's malloc, commands on many threads either held several times the cache budget in
/// per-thread arenas (W1 with a 16 MiB cache: 246 MiB resident with the default arenas) or,
/// limited to two arenas, queued on the arenas' locks: at 64 clients the server switched
/// context 1.6 to 2.9 times per range query (1.0 at 2 clients: the wait for the next request),
/// and `malloc_consolidate` under an arena lock took a tenth of its time. With jemalloc it
/// switches 0.9 times per range query at 64 clients. Measured the same day: W1's peak resident
/// memory 97 MiB (80 MiB with two glibc arenas; `silt-bench fast-update --seconds 4`), and
/// 2,700 idle connections add 68 MiB (40 MiB; `tests/compat/test_limits.py`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let flags = config::Flags::parse();
    let cfg = match flags.resolve(argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("siltd: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = logging::init(&cfg) {
        eprintln!("siltd: {e}");
        std::process::exit(2);
    }
    if let Err(e) = run(cfg) {
        tracing::error!("{e}");
        eprintln!("siltd: {e}");
        std::process::exit(1);
    }
}

fn engine_options(cfg: &config::Config) -> EnvOptions {
    let sync = if cfg.journal_interval.is_zero() {
        SyncPolicy::EveryCommit
    } else {
        SyncPolicy::Periodic(cfg.journal_interval)
    };
    let defaults = EnvOptions::default();
    // Small caches get smaller nodes so that the cache holds enough of them.
    let node_bytes = defaults.node_bytes.min(cfg.cache_bytes / 16).max(64 << 10);
    EnvOptions {
        cache_bytes: cfg.cache_bytes,
        node_bytes,
        basement_bytes: defaults.basement_bytes.min(node_bytes),
        sync,
        direct_io: cfg.directio,
        compression: Compression::parse(&cfg.compression).unwrap_or(defaults.compression),
        checkpoint_period: if cfg.checkpoint_interval.is_zero() {
            None
        } else {
            Some(cfg.checkpoint_interval)
        },
        ..defaults
    }
}

/// `--pidfilepath`: the process id, written at start and removed at a clean exit.
struct PidFile(std::path::PathBuf);

impl PidFile {
    fn write(p: &std::path::Path) -> Result<PidFile, String> {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| format!("cannot write the pid file {}: {e}", p.display()))?;
        Ok(PidFile(p.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run(cfg: config::Config) -> Result<(), String> {
    let tls = tls::Tls::load(&cfg.tls)?;
    let opts = engine_options(&cfg);
    tracing::info!(
        dbpath = %cfg.dbpath.display(),
        cache_mb = cfg.cache_bytes >> 20,
        "opening data directory"
    );
    let fast = Arc::new(fast::FastUpdates::default());
    fast.enabled
        .store(cfg.fast_updates, std::sync::atomic::Ordering::Relaxed);
    let mut fns = UpdateRegistry::new();
    fast::register(&mut fns, fast.clone());
    let oplog = cfg.repl_set.is_some().then_some(cfg.oplog);
    let store = Store::open_with_oplog(&cfg.dbpath, opts, fns, oplog).map_err(|e| match e.locked_dir() {
        Some(p) => format!(
            "the data directory {} is in use by another siltd (lock file {}/LOCK); stop it or choose another --dbpath",
            p.display(),
            p.display()
        ),
        None => format!("cannot open data directory {}: {e}", cfg.dbpath.display()),
    })?;
    let addr = format!("{}:{}", cfg.bind, cfg.port);
    let server = Arc::new(state::Server::new(cfg, store, fast, tls));
    for (name, value) in &server.cfg().set_parameters {
        commands::startup_parameter(&server, name, value)
            .map_err(|e| format!("--setParameter {name}={value}: {}", e.msg))?;
    }
    commands::drop_out_leftovers(&server);
    server.profiler().set_default(server.cfg().profile);
    if let Some(addr) = &server.cfg().metrics_addr {
        metrics::spawn(&server, addr)?;
    }
    let _pid_file = match &server.cfg().pidfilepath {
        Some(p) => Some(PidFile::write(p)?),
        None => None,
    };
    ttl::spawn(&server);
    // Connections have their own threads (see `server`); the runtime only waits for signals
    // and runs the cursor reaper.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let s2 = server.clone();
    rt.block_on(async move { server::serve(s2, &addr).await })?;
    server.stop();
    rt.shutdown_timeout(Duration::from_secs(5));
    // Open transactions end with their sessions: aborted, as a restart would.
    server.sessions().abort_all();
    tracing::info!("shutting down: checkpoint and close");
    match Arc::try_unwrap(server).map(state::Server::into_store) {
        Ok(Some(store)) => store
            .close()
            .map_err(|e| format!("error while closing: {e}"))?,
        Ok(None) => tracing::warn!("the store is still in use; the log replays at the next start"),
        Err(s) => {
            // A command still running holds the server: checkpoint (which also syncs the
            // log) without closing; recovery finds nothing to replay.
            tracing::warn!("a command is still running; checkpointing without close");
            s.store()
                .checkpoint()
                .map_err(|e| format!("error while checkpointing: {e}"))?;
        }
    }
    tracing::info!("bye");
    Ok(())
}
