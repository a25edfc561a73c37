//! The server's shared state and command dispatch: one `Server` per process, shared by every
//! connection. A command is a BSON document; its reply is a BSON document (`ok: 1` or the
//! MongoDB error shape `ok: 0, errmsg, code, codeName`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use silt_collection::{CollError, Collection, DocLock, Snapshot, Store, Txn};
use silt_query::QueryError;

use crate::config::Config;
use crate::cursors::Cursors;
use crate::fast::FastUpdates;
use crate::ops::Ops;
use crate::replset::ReplSet;
use crate::sessions::Sessions;
use crate::transactions::{self, Outcome};

/// Result of a command: the reply body without `ok`, or an error.
pub type CmdResult = Result<Document, QueryError>;

/// Per-connection facts commands may need.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub id: u64,
    pub peer: String,
    /// Who the connection authenticated as, and its SCRAM conversation.
    pub auth: Arc<crate::auth::ConnAuth>,
}

impl ConnInfo {
    pub fn new(id: u64, peer: String) -> ConnInfo {
        ConnInfo {
            id,
            peer,
            auth: crate::auth::new_conn(),
        }
    }
}

/// What one command runs in: its connection, and (when it runs in a session's transaction,
/// or is a retryable write, or a snapshot read) the transaction it writes in and the snapshot
/// it reads. Handlers read and write only through it, so that a command in a transaction
/// cannot read past its snapshot or write outside it.
pub struct Ctx<'a> {
    pub conn: &'a ConnInfo,
    /// The transaction writes go into; `None`: each write commits on its own.
    pub txn: Option<&'a Txn>,
    /// The snapshot reads use; `None`: each read takes a new one.
    pub snap: Option<Snapshot>,
    /// How long a write in `txn` waits for a document another transaction holds.
    pub lock_wait: Duration,
    /// A statement of a multi-document transaction (not a retryable write's own
    /// transaction): what it reads must come from its snapshot, so shortcuts that read the
    /// latest state (index-only fast updates) are off.
    pub multi: bool,
    /// The command's `bypassDocumentValidation` (set by the dispatcher).
    pub bypass_validation: std::cell::Cell<bool>,
}

impl<'a> Ctx<'a> {
    /// A command outside any transaction.
    pub fn new(conn: &'a ConnInfo) -> Ctx<'a> {
        Ctx {
            conn,
            txn: None,
            snap: None,
            lock_wait: Duration::ZERO,
            multi: false,
            bypass_validation: std::cell::Cell::new(false),
        }
    }

    /// Check `new` (replacing `old`, if any) against `coll`'s validator, unless this command
    /// bypasses validation: refused under action `error`, logged under `warn`.
    pub fn validate(
        &self,
        coll: &Collection,
        old: Option<&Document>,
        new: &Document,
    ) -> Result<(), CollError> {
        if self.bypass_validation.get() {
            return Ok(());
        }
        let Some(v) = coll.validator() else {
            return Ok(());
        };
        // A validator compares under the collection's default collation (as it was
        // compiled), whatever the writing command's collation is.
        let _collation = silt_query::collation::Collation::scope(coll.default_collation());
        match v.check(old, new) {
            Ok(None) => Ok(()),
            Ok(Some(info)) => {
                tracing::warn!(
                    ns = coll.ns(),
                    id = %new.get("_id").cloned().unwrap_or(bson::Bson::Null),
                    details = %info,
                    "Document would fail validation"
                );
                Ok(())
            }
            Err(info) => Err(CollError::Validation(Box::new(info))),
        }
    }

    /// The snapshot a read of `coll` uses.
    pub fn snap(&self, coll: &Collection) -> Snapshot {
        match &self.snap {
            Some(s) => s.clone(),
            None => coll.snapshot(),
        }
    }

    /// Lock the document with encoded `_id` `key` of `coll` for a write in this operation.
    pub fn lock_doc<'c>(
        &'c self,
        coll: &'c Collection,
        key: Vec<u8>,
    ) -> Result<DocLock<'c>, CollError> {
        match self.txn {
            Some(t) => coll.lock_doc_in(key, t, self.lock_wait),
            None => coll.lock_doc(key),
        }
    }

    /// Insert `d` into `coll` in this operation.
    pub fn insert(&self, coll: &Collection, d: &Document) -> Result<(), CollError> {
        self.validate(coll, None, d)?;
        match self.txn {
            Some(t) => coll.insert_in(d, t, self.lock_wait),
            None => coll.insert(d),
        }
    }
}

impl std::ops::Deref for Ctx<'_> {
    type Target = ConnInfo;
    fn deref(&self) -> &ConnInfo {
        self.conn
    }
}

/// Traffic counters for `serverStatus.network` (bytes as sent on the wire, compressed or
/// not) and the user-error count of `serverStatus.asserts`.
#[derive(Default, Debug)]
pub struct NetCounters {
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub requests: AtomicU64,
    pub user_asserts: AtomicU64,
}

impl NetCounters {
    /// A request of `n` bytes arrived.
    pub fn received(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A reply of `n` bytes went out.
    pub fn sent(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Operation counters for `serverStatus.opcounters`.
#[derive(Default, Debug)]
pub struct OpCounters {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

/// The process-wide server state.
pub struct Server {
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
    pub fn new(cfg: Config, store: Store, fast: Arc<FastUpdates>, tls: crate::tls::Tls) -> Server {
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
    pub fn shutting_down(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// How long a transaction's write waits for a document lock.
    pub fn txn_lock_wait(&self) -> Duration {
        Duration::from_millis(self.txn_lock_wait_ms.load(Ordering::Relaxed))
    }

    /// How long a multi-document transaction may run before the reaper aborts it.
    pub fn txn_lifetime(&self) -> Duration {
        Duration::from_secs(self.txn_lifetime_s.load(Ordering::Relaxed))
    }

    /// Remember a log line for `getLog`.
    pub fn remember_log(&self, line: String) {
        let mut l = self.recent_log.lock();
        if l.len() >= 1024 {
            l.pop_front();
        }
        l.push_back(line);
    }

    /// Record a profiled operation in `<db>.system.profile` when the database's level asks
    /// for it (level 2: every operation; level 1: those slower than `slowms`).
    #[allow(clippy::too_many_arguments)]
    fn profile(
        &self,
        db: &str,
        ns: &str,
        name: &str,
        cmd: &Document,
        elapsed: Duration,
        ok: bool,
        conn: &ConnInfo,
    ) {
        let p = self.profiler.get(db, self.cfg.slow.as_millis() as i64);
        let millis = elapsed.as_millis() as i64;
        if p.level == 0 || ns.ends_with(".system.profile") {
            return;
        }
        let op = match name {
            "find" | "aggregate" | "count" | "distinct" => "query",
            "insert" => "insert",
            "update" | "findAndModify" => "update",
            "delete" => "remove",
            "getMore" => "getmore",
            _ => "command",
        };
        let mut command = cmd.clone();
        command.remove("lsid");
        command.remove("$clusterTime");
        let entry = doc! {
            "_id": bson::oid::ObjectId::new(),
            "op": op,
            "ns": ns,
            "command": command,
            "millis": millis,
            "ok": if ok { 1.0 } else { 0.0 },
            "ts": bson::DateTime::now(),
            "client": conn.peer.clone(),
            "user": "",
        };
        if !p.wants(millis, &entry) {
            return;
        }
        // As in MongoDB, `system.profile` is a capped collection of 1 MiB.
        let ns = format!("{db}.system.profile");
        let coll = match self.store.get(&ns) {
            Some(c) => Ok(c),
            None => match self
                .store
                .create(&ns, doc! { "capped": true, "size": 1_048_576i64 })
            {
                Err(silt_collection::CollError::NamespaceExists(_)) => {
                    self.store.get_or_create(&ns)
                }
                other => other,
            },
        };
        let stored = coll.and_then(|c| c.insert(&entry));
        if let Err(e) = stored {
            tracing::warn!(db, error = %e, "cannot record a profiled operation");
        }
    }

    /// Run one command and build its reply (always a document; errors become `ok: 0`).
    pub fn run_command(&self, cmd: Document, conn: &ConnInfo) -> Document {
        self.ops.command.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let name = cmd.keys().next().cloned().unwrap_or_default();
        let db = match cmd.get("$db") {
            Some(Bson::String(s)) => s.clone(),
            Some(_) => {
                return error_reply(&QueryError::type_mismatch("$db must be a string"));
            }
            None => "admin".to_string(),
        };
        let mut profiled = None;
        let out = if name.is_empty() {
            Outcome::of(
                Err(QueryError::failed_to_parse("empty command document")),
                false,
            )
        } else if let Err(e) = check_db_name(&db) {
            Outcome::of(Err(e), false)
        } else {
            // In `currentOp` while it runs; the document is shared, not copied.
            let cmd = Arc::new(cmd);
            let _running = self.inprog.start(conn, &db, &name, cmd.clone());
            let allowed = crate::auth::authorize(self, conn, &db, &name, &cmd)
                .and_then(|()| self.redzone.refuse(&name));
            let out = match allowed {
                Ok(()) => transactions::run(self, &db, &name, &cmd, conn),
                Err(e) => Outcome::of(Err(e), false),
            };
            profiled = Some(cmd);
            out
        };
        let elapsed = started.elapsed();
        if let Some(cmd) = &profiled {
            let ns = match cmd.get(&name) {
                // These commands name a whole namespace, whatever database they run on.
                Some(Bson::String(full))
                    if matches!(name.as_str(), "renameCollection" | "dataSize") =>
                {
                    full.clone()
                }
                Some(Bson::String(c)) => format!("{db}.{c}"),
                _ => format!("{db}.$cmd"),
            };
            self.top.record(&ns, &name, elapsed.as_micros() as u64);
            if self.profiler.any() {
                self.profile(&db, &ns, &name, cmd, elapsed, out.result.is_ok(), conn);
            }
        }
        if elapsed >= self.cfg.slow {
            let line = format!(
                "slow operation: {name} on {db} took {} ms",
                elapsed.as_millis()
            );
            tracing::info!(command = %name, db = %db, ms = elapsed.as_millis() as u64, conn = conn.id, "slow operation");
            self.remember_log(line);
        }
        let mut reply = match out.result {
            Ok(mut body) => {
                if let Some(t) = out.at_cluster_time {
                    match body.get_mut("cursor") {
                        Some(Bson::Document(c)) => {
                            c.insert("atClusterTime", t);
                        }
                        _ => {
                            body.insert("atClusterTime", t);
                        }
                    }
                }
                body.insert("ok", 1.0);
                body
            }
            Err(e) => {
                tracing::debug!(command = %name, code = e.code, err = %e.msg, "command failed");
                self.net.user_asserts.fetch_add(1, Ordering::Relaxed);
                error_reply(&e)
            }
        };
        if !out.labels.is_empty() {
            reply.insert("errorLabels", out.labels);
        }
        if let Some(rs) = &self.repl {
            let t = if out.wrote { rs.tick() } else { rs.now() };
            reply.insert("$clusterTime", rs.cluster_time());
            reply.insert("operationTime", t);
        }
        reply
    }
}

/// MongoDB's error reply shape.
pub fn error_reply(e: &QueryError) -> Document {
    let mut d = doc! { "ok": 0.0, "errmsg": e.msg.clone(), "code": e.code, "codeName": e.name().into_owned() };
    if let Some(info) = &e.info {
        d.extend((**info).clone());
    }
    d
}

/// Map a document-layer error to MongoDB's vocabulary.
pub fn coll_err(e: CollError) -> QueryError {
    match e {
        CollError::DuplicateKey {
            ref key_pattern,
            ref key_value,
            ..
        } => QueryError::duplicate_key(e.to_string()).with_info(doc! {
            "keyPattern": (**key_pattern).clone(),
            "keyValue": (**key_value).clone(),
        }),
        CollError::NamespaceExists(_) => QueryError::namespace_exists(e.to_string()),
        CollError::Validation(info) => {
            QueryError::document_validation_failure("Document failed validation")
                .with_info(doc! { "errInfo": *info })
        }
        CollError::NamespaceNotFound(_) => QueryError::namespace_not_found(e.to_string()),
        CollError::ParallelArrays(..) => QueryError::cannot_index_parallel_arrays(e.to_string()),
        CollError::IndexConflict { code: 86, msg } => QueryError::index_key_specs_conflict(msg),
        CollError::IndexConflict { msg, .. } => QueryError::index_options_conflict(msg),
        CollError::IndexNotFound(m) => QueryError::index_not_found(m),
        CollError::Partition { code: 2, msg } => QueryError::bad_value(msg),
        CollError::Partition { code, msg } | CollError::BadDocument { code, msg } => {
            QueryError::coded(code, location_name(code), msg)
        }
        CollError::Interrupted => QueryError::interrupted(e.to_string()),
        CollError::TimeLimit => QueryError::max_time_ms_expired(e.to_string()),
        CollError::WriteConflict(_) => QueryError::write_conflict(e.to_string()),
        _ if e.is_corruption() => QueryError::data_corruption_detected(e.to_string()),
        _ if e.is_too_large() => QueryError::bson_object_too_large(e.to_string()),
        other => QueryError::internal(other.to_string()),
    }
}

/// The code name MongoDB gives an assertion without a name of its own (`Location<code>`),
/// for TokuMX's partition codes.
fn location_name(code: i32) -> &'static str {
    match code {
        20 => "IllegalOperation",
        17248 => "Location17248",
        17249 => "Location17249",
        17250 => "Location17250",
        66 => "ImmutableField",
        17203 => "Location17203",
        17205 => "Location17205",
        17208 => "Location17208",
        17209 => "Location17209",
        17210 => "Location17210",
        17252 => "Location17252",
        17266 => "Location17266",
        17351 => "Location17351",
        17261 => "Location17261",
        17262 => "Location17262",
        _ => "UnknownError",
    }
}

/// Database names MongoDB accepts.
pub fn check_db_name(db: &str) -> Result<(), QueryError> {
    if db.is_empty() || db.len() > 63 || db.contains(['/', '\\', '.', ' ', '"', '$', '\0']) {
        return Err(QueryError::invalid_namespace(format!(
            "Invalid database name: '{db}'"
        )));
    }
    Ok(())
}

/// Collection names MongoDB accepts.
pub fn check_coll_name(db: &str, coll: &str) -> Result<(), QueryError> {
    if coll.is_empty() || coll.contains('\0') || coll.starts_with('.') || coll.contains('$') {
        return Err(QueryError::invalid_namespace(format!(
            "Invalid collection name: {db}.{coll}"
        )));
    }
    if db.len() + 1 + coll.len() > 255 {
        return Err(QueryError::invalid_namespace(format!(
            "Fully qualified namespace is too long: {db}.{coll}"
        )));
    }
    Ok(())
}
