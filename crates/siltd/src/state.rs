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

/// Connection counters for `serverStatus.connections` and the `--maxConns` check.
#[derive(Default, Debug)]
pub(crate) struct Connections {
    current: AtomicU64,
    total: AtomicU64,
}

impl Connections {
    /// A connection was accepted: counts it and returns its id (1, 2, ...).
    pub(crate) fn opened(&self) -> u64 {
        self.current.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A counted connection ended.
    pub(crate) fn closed(&self) {
        self.current.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections open now.
    pub(crate) fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    /// Connections accepted since the start.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// The process-wide server state.
pub(crate) struct Server {
    cfg: Config,
    /// Shared only weakly with what outlives a request (a change stream's cursor looks up
    /// documents through it).
    store: Arc<Store>,
    cursors: Cursors,
    fast: Arc<FastUpdates>,
    started: Instant,
    /// Identifies this process in `hello`'s topologyVersion.
    process_id: bson::oid::ObjectId,
    conns: Connections,
    ops: OpCounters,
    net: NetCounters,
    /// Recent log lines for `getLog` (the last 1,024).
    recent_log: Mutex<VecDeque<String>>,
    /// Operations in flight and open connections, for `currentOp` and `killOp`.
    inprog: Ops,
    /// `--replSet`: the one-member replica set this server is the primary of.
    repl: Option<ReplSet>,
    /// `--replSet`: this server's Raft state, a member of a multi-member set once one is
    /// initiated.
    raft: Option<crate::raft_member::RaftMember>,
    /// Logical sessions, their transactions and retained snapshots.
    sessions: Sessions,
    /// `maxTransactionLockRequestTimeoutMillis` (MongoDB's default, 5).
    txn_lock_wait_ms: AtomicU64,
    /// `transactionLifetimeLimitSeconds` (`--transaction-lifetime-limit-s`, default 60).
    txn_lifetime_s: AtomicU64,
    /// Every view, as `system.views` records them.
    views: crate::views::Views,
    /// The TTL monitor's settings and counters.
    ttl: crate::ttl::TtlState,
    /// Set once the server stops accepting work; background threads end.
    stopping: std::sync::atomic::AtomicBool,
    /// Notified by the `shutdown` command.
    shutdown: tokio::sync::Notify,
    /// `fsync` with `lock: true`.
    fsync_lock: crate::monitor::FsyncLock,
    /// Profiling levels (`profile`).
    profiler: crate::monitor::Profiler,
    /// `top` counters.
    top: crate::monitor::Top,
    /// Users, and whether `--auth` checks commands against their roles.
    auth: crate::auth::Auth,
    /// `--tlsMode` and the loaded certificate.
    tls: crate::tls::Tls,
    /// The free-space red zone.
    redzone: crate::redzone::RedZone,
    /// The `failCommand` fail point (`--enable-test-commands`).
    fail_command: crate::fail_command::FailCommand,
    /// The `onPrimaryTransactionalWrite` fail point (`--enable-test-commands`).
    on_txn_write: crate::fail_command::OnTxnWrite,
    /// The `failGetMoreAfterCursorCheckout` fail point (`--enable-test-commands`).
    get_more_failure: crate::fail_command::GetMoreFailure,
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
            .zip(store.oplog())
            .map(|(n, log)| ReplSet::new(n, &cfg.bind, cfg.port, log.clock().clone()));
        let store = Arc::new(store);
        let raft = repl.as_ref().and_then(|rs| {
            crate::raft_member::RaftMember::open(
                &rs.name,
                &rs.me,
                &cfg.dbpath,
                store.clone(),
                cfg.cluster_key.clone(),
                cfg.raft_snapshot_entries,
                tls.member_client(),
            )
                .map_err(|e| tracing::error!(error = %e, "cannot start this replica-set member's Raft state"))
                .ok()
        });
        Server {
            repl,
            raft,
            sessions: Sessions::default(),
            txn_lock_wait_ms: AtomicU64::new(5),
            txn_lifetime_s: AtomicU64::new(cfg.txn_lifetime.as_secs()),
            cfg,
            store,
            cursors,
            fast,
            started: Instant::now(),
            process_id: bson::oid::ObjectId::new(),
            conns: Connections::default(),
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
            fail_command: crate::fail_command::FailCommand::default(),
            on_txn_write: crate::fail_command::OnTxnWrite::default(),
            get_more_failure: crate::fail_command::GetMoreFailure::default(),
        }
    }

    /// The command line and configuration file, as loaded.
    pub(crate) fn cfg(&self) -> &Config {
        &self.cfg
    }

    /// The document store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// A handle on the store for what outlives a request.
    pub(crate) fn store_weak(&self) -> std::sync::Weak<Store> {
        Arc::downgrade(&self.store)
    }

    /// The store, once nothing else holds the server (to close it); `None` if a cursor's
    /// lookup holds it at this moment.
    pub(crate) fn into_store(self) -> Option<Store> {
        Arc::try_unwrap(self.store).ok()
    }

    /// Open cursors.
    pub(crate) fn cursors(&self) -> &Cursors {
        &self.cursors
    }

    /// The fast-update registry.
    pub(crate) fn fast(&self) -> &Arc<FastUpdates> {
        &self.fast
    }

    /// How long the server has run.
    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// This process's id in `hello`'s topologyVersion.
    pub(crate) fn process_id(&self) -> bson::oid::ObjectId {
        self.process_id
    }

    /// Connection counters.
    pub(crate) fn conns(&self) -> &Connections {
        &self.conns
    }

    /// `serverStatus.opcounters`.
    pub(crate) fn ops(&self) -> &OpCounters {
        &self.ops
    }

    /// Network traffic counters.
    pub(crate) fn net(&self) -> &NetCounters {
        &self.net
    }

    /// The last 1,024 log lines, oldest first, for `getLog`.
    pub(crate) fn recent_log(&self) -> Vec<String> {
        self.recent_log.lock().iter().cloned().collect()
    }

    /// Operations in flight and open connections.
    pub(crate) fn inprog(&self) -> &Ops {
        &self.inprog
    }

    /// The replica set, under `--replSet`.
    pub(crate) fn repl(&self) -> Option<&ReplSet> {
        self.repl.as_ref()
    }

    /// The replica-set fields of `hello` (and `serverStatus.repl`) into `d`, and whether this
    /// server is the writable primary: a member of a multi-member set reports what Raft makes
    /// it; otherwise the one-member set (or standalone server) always is.
    pub(crate) fn repl_hello_fields(&self, d: &mut Document) -> bool {
        if let Some(w) = self.raft().and_then(|r| r.hello_fields(d)) {
            return w;
        }
        if let Some(rs) = self.repl() {
            rs.hello_fields(d);
        }
        true
    }

    /// This server's membership of a multi-member set, with `--replSet`
    /// (`crate::raft_member`).
    pub(crate) fn raft(&self) -> Option<&crate::raft_member::RaftMember> {
        self.raft.as_ref()
    }

    /// Logical sessions and their transactions.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Every view.
    pub(crate) fn views(&self) -> &crate::views::Views {
        &self.views
    }

    /// The TTL monitor's settings and counters.
    pub(crate) fn ttl(&self) -> &crate::ttl::TtlState {
        &self.ttl
    }

    /// The `fsync` write lock.
    pub(crate) fn fsync_lock(&self) -> &crate::monitor::FsyncLock {
        &self.fsync_lock
    }

    /// Profiling levels.
    pub(crate) fn profiler(&self) -> &crate::monitor::Profiler {
        &self.profiler
    }

    /// `top` counters.
    pub(crate) fn top(&self) -> &crate::monitor::Top {
        &self.top
    }

    /// Users and roles.
    pub(crate) fn auth(&self) -> &crate::auth::Auth {
        if self
            .raft
            .as_ref()
            .is_some_and(crate::raft_member::RaftMember::take_auth_changed)
        {
            self.auth.reload(&self.store);
        }
        &self.auth
    }

    /// The TLS mode and certificate.
    pub(crate) fn tls(&self) -> &crate::tls::Tls {
        &self.tls
    }

    /// The free-space red zone.
    pub(crate) fn fail_command(&self) -> &crate::fail_command::FailCommand {
        &self.fail_command
    }

    pub(crate) fn on_txn_write(&self) -> &crate::fail_command::OnTxnWrite {
        &self.on_txn_write
    }

    pub(crate) fn get_more_failure(&self) -> &crate::fail_command::GetMoreFailure {
        &self.get_more_failure
    }

    pub(crate) fn redzone(&self) -> &crate::redzone::RedZone {
        &self.redzone
    }

    /// Stop accepting work: background threads end.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        if let Some(r) = &self.raft {
            r.shutdown();
        }
    }

    /// The `shutdown` command: wakes whoever waits in `shutdown_requested`.
    pub(crate) fn request_shutdown(&self) {
        self.shutdown.notify_one();
    }

    /// Resolves when the `shutdown` command has run.
    pub(crate) async fn shutdown_requested(&self) {
        self.shutdown.notified().await;
    }

    /// Sets `transactionLifetimeLimitSeconds`; returns the old value.
    pub(crate) fn set_txn_lifetime_s(&self, secs: u64) -> u64 {
        self.txn_lifetime_s.swap(secs, Ordering::Relaxed)
    }

    /// Sets `maxTransactionLockRequestTimeoutMillis`; returns the old value.
    pub(crate) fn set_txn_lock_wait_ms(&self, ms: u64) -> u64 {
        self.txn_lock_wait_ms.swap(ms, Ordering::Relaxed)
    }

    /// Drop collection `ns` (false: there was none) and kill the cursors over it. Every drop a
    /// client asks for goes through here, so no cursor outlives its collection.
    pub(crate) fn drop_collection(&self, ns: &str) -> Result<bool, silt_collection::CollError> {
        let uuid = self.store.get(ns).map(|c| c.uuid());
        let dropped = self.store.drop_collection(ns)?;
        if let (true, Some(uuid)) = (dropped, uuid) {
            self.cursors
                .kill_namespace(|c| c == ns, |_| format!("collection dropped. UUID {uuid}"));
        }
        Ok(dropped)
    }

    /// Drop database `db` and kill the cursors over its collections.
    pub(crate) fn drop_database(&self, db: &str) -> Result<(), silt_collection::CollError> {
        let uuids: std::collections::HashMap<String, bson::Uuid> = self
            .store
            .list_collections(db)
            .into_iter()
            .map(|(name, c)| (format!("{db}.{name}"), c.uuid()))
            .collect();
        self.store.drop_database(db)?;
        self.cursors.kill_namespace(
            |c| uuids.contains_key(c),
            |c| match uuids.get(c) {
                Some(u) => format!("collection dropped. UUID {u}"),
                None => "collection dropped".into(),
            },
        );
        Ok(())
    }

    /// Rename collection `from` to `to` (dropping `to` first if `drop_target`) and kill the
    /// cursors over both.
    pub(crate) fn rename_collection(
        &self,
        from: &str,
        to: &str,
        drop_target: bool,
    ) -> Result<(), silt_collection::CollError> {
        let uuid = |ns: &str| {
            self.store
                .get(ns)
                .map(|c| c.uuid().to_string())
                .unwrap_or_default()
        };
        let (moved, replaced) = (uuid(from), uuid(to));
        self.store.rename(from, to, drop_target)?;
        self.cursors.kill_namespace(
            |c| c == from,
            |_| format!("collection renamed from '{from}' to '{to}'. UUID {moved}"),
        );
        self.cursors.kill_namespace(
            |c| c == to,
            |_| format!("collection dropped. UUID {replaced}"),
        );
        Ok(())
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
