//! The server's shared state: one `Server` per process, shared by every connection (the
//! store, cursors, sessions, counters, the replica-set face, the monitors), and the result
//! type of a command. Running a command is `crate::request`'s; what one command runs in is
//! `crate::ctx`'s; errors as clients see them are `crate::errors`'.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;
use parking_lot::Mutex;
use silt_collection::Store;
use silt_query::QueryError;

use crate::config::Config;
use crate::cursors::Cursors;
use crate::fast::FastUpdates;
use crate::ops::Ops;
use crate::replset::ReplSet;
use crate::sessions::Sessions;

/// Result of a command: the reply body without `ok`, or an error.
pub(crate) type CmdResult = Result<Document, QueryError>;

/// Traffic counters for `serverStatus.network` (bytes as sent on the wire, compressed or
/// not) and the user-error count of `serverStatus.asserts`.
#[derive(Default, Debug)]
pub(crate) struct NetCounters {
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub requests: AtomicU64,
    pub user_asserts: AtomicU64,
}

impl NetCounters {
    /// A request of `n` bytes arrived.
    pub(crate) fn received(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A reply of `n` bytes went out.
    pub(crate) fn sent(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Operation counters for `serverStatus.opcounters`.
#[derive(Default, Debug)]
pub(crate) struct OpCounters {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

/// The process-wide server state.
pub(crate) struct Server {
    pub cfg: Config,
    pub store: Store,
    pub cursors: Cursors,
    pub fast: Arc<FastUpdates>,
    pub started: Instant,
    /// Identifies this process in `hello`'s topologyVersion.
    pub process_id: bson::oid::ObjectId,
    pub conns_current: AtomicU64,
    pub conns_total: AtomicU64,
    pub ops: OpCounters,
    pub net: NetCounters,
    /// Recent log lines for `getLog` (the last 1,024).
    pub recent_log: Mutex<VecDeque<String>>,
    /// Operations in flight and open connections, for `currentOp` and `killOp`.
    pub inprog: Ops,
    /// `--replSet`: the one-member replica set this server is the primary of.
    pub repl: Option<ReplSet>,
    /// Logical sessions, their transactions and retained snapshots.
    pub sessions: Sessions,
    /// `maxTransactionLockRequestTimeoutMillis` (MongoDB's default, 5).
    pub txn_lock_wait_ms: AtomicU64,
    /// `transactionLifetimeLimitSeconds` (`--transaction-lifetime-limit-s`, default 60).
    pub txn_lifetime_s: AtomicU64,
    /// Every view, as `system.views` records them.
    pub views: crate::views::Views,
    /// The TTL monitor's settings and counters.
    pub ttl: crate::ttl::TtlState,
    /// Set once the server stops accepting work; background threads end.
    pub stopping: std::sync::atomic::AtomicBool,
    /// Notified by the `shutdown` command.
    pub shutdown: tokio::sync::Notify,
    /// `fsync` with `lock: true`.
    pub fsync_lock: crate::monitor::FsyncLock,
    /// Profiling levels (`profile`).
    pub profiler: crate::monitor::Profiler,
    /// `top` counters.
    pub top: crate::monitor::Top,
    /// Users, and whether `--auth` checks commands against their roles.
    pub auth: crate::auth::Auth,
    /// `--tlsMode` and the loaded certificate.
    pub tls: crate::tls::Tls,
    /// The free-space red zone.
    pub redzone: crate::redzone::RedZone,
}

impl Server {
    pub(crate) fn new(
        cfg: Config,
        store: Store,
        fast: Arc<FastUpdates>,
        tls: crate::tls::Tls,
    ) -> Server {
        let cursors = Cursors::new(cfg.cursor_timeout);
        let views = crate::views::Views::load(&store);
        let auth = crate::auth::Auth::load(cfg.auth, &store);
        let redzone =
            crate::redzone::RedZone::new(&cfg.dbpath, cfg.fs_redzone_percent, cfg.fs_redzone_bytes);
        let repl = cfg
            .repl_set
            .as_ref()
            .map(|n| ReplSet::new(n, &cfg.bind, cfg.port));
        Server {
            repl,
            sessions: Sessions::default(),
            txn_lock_wait_ms: AtomicU64::new(5),
            txn_lifetime_s: AtomicU64::new(cfg.txn_lifetime.as_secs()),
            cfg,
            store,
            cursors,
            fast,
            started: Instant::now(),
            process_id: bson::oid::ObjectId::new(),
            conns_current: AtomicU64::new(0),
            conns_total: AtomicU64::new(0),
            ops: OpCounters::default(),
            net: NetCounters::default(),
            recent_log: Mutex::new(VecDeque::new()),
            inprog: Ops::default(),
            ttl: crate::ttl::TtlState::default(),
            views,
            stopping: std::sync::atomic::AtomicBool::new(false),
            shutdown: tokio::sync::Notify::new(),
            fsync_lock: Default::default(),
            profiler: Default::default(),
            top: Default::default(),
            auth,
            tls,
            redzone,
        }
    }

    /// Whether the server is shutting down.
    pub(crate) fn shutting_down(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// How long a transaction's write waits for a document lock.
    pub(crate) fn txn_lock_wait(&self) -> Duration {
        Duration::from_millis(self.txn_lock_wait_ms.load(Ordering::Relaxed))
    }

    /// How long a multi-document transaction may run before the reaper aborts it.
    pub(crate) fn txn_lifetime(&self) -> Duration {
        Duration::from_secs(self.txn_lifetime_s.load(Ordering::Relaxed))
    }

    /// Remember a log line for `getLog`.
    pub(crate) fn remember_log(&self, line: String) {
        let mut l = self.recent_log.lock();
        if l.len() >= 1024 {
            l.pop_front();
        }
        l.push_back(line);
    }
}
