//! Operations in flight: the table `currentOp` and `$currentOp` read and `killOp` marks.
//!
//! `request::run` registers every command for as long as it runs ([`Ops::start`]),
//! with its connection, start time, namespace and command document (shared, not copied), and
//! makes it the thread's *current* operation. Long work reports progress on its operation
//! (index builds: MongoDB's `msg` and `progress: {done, total}`) and checks for a kill at its
//! interrupt points: every document a `MatchSource` reads ([`read_stop`]), every few
//! hundred documents or keys of an index build. A killed operation fails with 11601
//! `Interrupted`. Commands without an interrupt point run to completion; as in MongoDB,
//! `killOp` only asks.
//!
//! Connections are registered too (with the client metadata of their handshake), so that
//! `currentOp` with `$all: true` (`$currentOp` with `idleConnections: true`) lists idle ones.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use silt_collection::{BuildObserver, Stop};

use crate::conn::ConnInfo;

/// Largest command document `currentOp` shows whole (MongoDB's limit for `truncateOps`);
/// a larger one becomes `{$truncated: <its text, cut>}`.
pub(crate) const TRUNCATE_OPS_BYTES: usize = 1000;
/// The same limit without `truncateOps`, so a reply stays far below 16 MiB.
pub(crate) const MAX_OP_COMMAND_BYTES: usize = 64 * 1024;

/// One running command.
pub(crate) struct Op {
    pub opid: u32,
    conn: ConnInfo,
    started: Instant,
    /// MongoDB's operation type: `query`, `getmore`, `insert`, `update`, `remove`, `command`.
    op: &'static str,
    ns: String,
    command: Arc<Document>,
    killed: AtomicBool,
    /// The current phase's message (MongoDB's `msg`), with its counters.
    phase: Mutex<Option<String>>,
    done: AtomicU64,
    total: AtomicU64,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op")
            .field("opid", &self.opid)
            .field("ns", &self.ns)
            .finish()
    }
}

impl Op {
    /// Ask the operation to stop at its next interrupt point.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Release);
    }

    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// An index build reports to the operation running `createIndexes`.
impl BuildObserver for Op {
    fn phase(&self, msg: &str, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        *self.phase.lock() = Some(msg.to_string());
    }

    fn progress(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
        // The document count is an estimate: never show more done than total.
        self.total.fetch_max(done, Ordering::Relaxed);
    }

    fn interrupted(&self) -> bool {
        self.is_killed()
    }
}

/// A connection, for idle entries.
struct Conn {
    info: ConnInfo,
    /// The `client` document of the handshake (driver, application, platform).
    metadata: Option<Document>,
}

/// Shards of the running-operation table. Every command registers and unregisters itself, so
/// one lock over the table was the most contended lock of the server at 64 clients on two
/// cores (a holder descheduled inside it stalled every other command); by opid, consecutive
/// commands land on different shards.
const OP_SHARDS: usize = 16;

/// The operation table.
#[derive(Default)]
pub(crate) struct Ops {
    next: AtomicU32,
    running: [Mutex<BTreeMap<u32, Arc<Op>>>; OP_SHARDS],
    conns: Mutex<BTreeMap<u64, Conn>>,
}

thread_local! {
    /// The operation this thread is running.
    static CURRENT: RefCell<Option<Arc<Op>>> = const { RefCell::new(None) };
}

/// Registration of a running command: unregisters it when dropped.
pub(crate) struct Running<'a> {
    ops: &'a Ops,
    op: Arc<Op>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.ops.shard(self.op.opid).lock().remove(&self.op.opid);
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// The operation this thread is running, if any.
pub(crate) fn current() -> Option<Arc<Op>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread's operation was killed.
pub(crate) fn interrupted() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(|op| op.is_killed()))
}

/// When a read by this thread's operation stops: at `deadline` (`maxTimeMS`), or when the
/// operation is killed (the read then fails with 11601 `Interrupted`).
pub(crate) fn read_stop(deadline: Option<Instant>) -> Stop {
    Stop {
        deadline,
        interrupted: Some(interrupted),
    }
}

/// MongoDB's operation type and namespace of a command.
fn op_kind(db: &str, name: &str, cmd: &Document) -> (&'static str, String) {
    let op = match name {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        _ => "command",
    };
    let ns = match (name, cmd.get(name)) {
        ("getMore", _) => match cmd.get_str("collection") {
            Ok(c) => format!("{db}.{c}"),
            Err(_) => format!("{db}.$cmd"),
        },
        (_, Some(Bson::String(c))) => format!("{db}.{c}"),
        ("aggregate", _) => format!("{db}.$cmd.aggregate"),
        _ => format!("{db}.$cmd"),
    };
    (op, ns)
}

/// A `fmt::Write` that keeps the first `limit` bytes and then refuses (which stops
/// formatting early).
struct Capped {
    out: String,
    limit: usize,
}

impl std::fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.out.len() + s.len() > self.limit {
            let mut cut = self.limit - self.out.len();
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            self.out.push_str(&s[..cut]);
            return Err(std::fmt::Error);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// The command as `currentOp` shows it: whole, or `{$truncated: <its text, cut at limit>}`
/// when its text is longer than `limit` bytes.
fn shown_command(cmd: &Document, limit: usize) -> Document {
    let mut w = Capped {
        out: String::new(),
        limit,
    };
    if write!(w, "{cmd}").is_ok() {
        cmd.clone()
    } else {
        doc! { "$truncated": w.out }
    }
}

/// Which entries a report holds, and how.
#[derive(Debug, Clone)]
pub(crate) struct ReportOptions {
    /// Also connections that run nothing (`$all`, `idleConnections`).
    pub idle_connections: bool,
    /// Cut command documents above [`TRUNCATE_OPS_BYTES`] (else above
    /// [`MAX_OP_COMMAND_BYTES`]).
    pub truncate_ops: bool,
    /// Only the operations and connections of this user, `(db, user)` (`$ownOps`, or
    /// `$currentOp` without `allUsers` under `--auth`).
    pub only_user: Option<(String, String)>,
}

impl Ops {
    fn shard(&self, opid: u32) -> &Mutex<BTreeMap<u32, Arc<Op>>> {
        &self.running[opid as usize % OP_SHARDS]
    }

    /// A connection opened.
    pub(crate) fn connected(&self, info: &ConnInfo) {
        self.conns.lock().insert(
            info.id,
            Conn {
                info: info.clone(),
                metadata: None,
            },
        );
    }

    /// A connection closed.
    pub(crate) fn disconnected(&self, id: u64) {
        self.conns.lock().remove(&id);
    }

    /// The handshake's client metadata (only the first is kept, as MongoDB does).
    /// Keep connection `id`'s client metadata (from its first `hello`); false if it already
    /// had some (mongod refuses a second: 186).
    pub(crate) fn set_client_metadata(&self, id: u64, metadata: &Document) -> bool {
        match self.conns.lock().get_mut(&id) {
            Some(c) if c.metadata.is_some() => false,
            Some(c) => {
                c.metadata = Some(metadata.clone());
                true
            }
            None => true,
        }
    }

    /// The application name connection `id` gave in its handshake.
    pub(crate) fn app_name(&self, id: u64) -> Option<String> {
        let conns = self.conns.lock();
        let meta = conns.get(&id)?.metadata.as_ref()?;
        meta.get_document("application")
            .and_then(|a| a.get_str("name"))
            .ok()
            .map(str::to_string)
    }

    /// Register a command about to run on this thread; it is the thread's current operation
    /// until the returned guard drops.
    pub(crate) fn start(
        &self,
        conn: &ConnInfo,
        db: &str,
        name: &str,
        cmd: Arc<Document>,
    ) -> Running<'_> {
        let (op, ns) = op_kind(db, name, &cmd);
        // Op ids are positive 32-bit integers, as in MongoDB.
        let opid = (self.next.fetch_add(1, Ordering::Relaxed) % i32::MAX as u32) + 1;
        let op = Arc::new(Op {
            opid,
            conn: conn.clone(),
            started: Instant::now(),
            op,
            ns,
            command: cmd,
            killed: AtomicBool::new(false),
            phase: Mutex::new(None),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
        });
        self.shard(opid).lock().insert(opid, op.clone());
        CURRENT.with(|c| *c.borrow_mut() = Some(op.clone()));
        Running { ops: self, op }
    }

    /// Mark operation `opid` killed; false if no such operation runs.
    pub(crate) fn kill(&self, opid: u32) -> bool {
        match self.shard(opid).lock().get(&opid) {
            Some(op) => {
                op.kill();
                true
            }
            None => false,
        }
    }

    /// How many operations run now: `(readers, writers)`, by MongoDB's operation type
    /// (`serverStatus.globalLock.activeClients`). `serverStatus` itself is one of them.
    pub(crate) fn active(&self) -> (u64, u64) {
        let (mut r, mut w) = (0, 0);
        for shard in &self.running {
            for op in shard.lock().values() {
                match op.op {
                    "insert" | "update" | "remove" => w += 1,
                    _ => r += 1,
                }
            }
        }
        (r, w)
    }

    /// The `inprog` entries, in MongoDB's shape: running operations by opid, then (if asked)
    /// idle connections by connection id.
    pub(crate) fn report(&self, host: &str, opts: ReportOptions) -> Vec<Document> {
        let now = Instant::now();
        let wall = bson::DateTime::from_system_time(SystemTime::now());
        let wall = wall.try_to_rfc3339_string().unwrap_or_default();
        let mut ops: Vec<Arc<Op>> = self
            .running
            .iter()
            .flat_map(|s| s.lock().values().cloned().collect::<Vec<_>>())
            .collect();
        ops.sort_by_key(|op| op.opid);
        let conns = self.conns.lock();
        let limit = if opts.truncate_ops {
            TRUNCATE_OPS_BYTES
        } else {
            MAX_OP_COMMAND_BYTES
        };
        let mut out = Vec::with_capacity(ops.len());
        let mut busy = std::collections::HashSet::new();
        let mine = |info: &ConnInfo| {
            opts.only_user
                .as_ref()
                .is_none_or(|u| info.auth.user().as_ref() == Some(u))
        };
        for op in &ops {
            busy.insert(op.conn.id);
            if !mine(&op.conn) {
                continue;
            }
            let mut d = client_fields(host, &op.conn, conns.get(&op.conn.id), true, &wall);
            let running = now.saturating_duration_since(op.started);
            d.insert("opid", op.opid as i32);
            if let Some(lsid) = op.command.get("lsid") {
                d.insert("lsid", lsid.clone());
            }
            d.insert("secs_running", running.as_secs() as i64);
            d.insert("microsecs_running", crate::num::micros(running));
            d.insert("op", op.op);
            d.insert("ns", op.ns.clone());
            d.insert("redacted", false);
            d.insert("command", shown_command(&op.command, limit));
            d.insert("numYields", 0);
            if let Some(msg) = op.phase.lock().clone() {
                let done = op.done.load(Ordering::Relaxed);
                let total = op.total.load(Ordering::Relaxed).max(done);
                let pct = (done * 100).checked_div(total).unwrap_or(0);
                // MongoDB's CurOp: the phase, then its ProgressMeter ("<phase>: d/t p%").
                d.insert("msg", format!("{msg} {msg}: {done}/{total} {pct}%"));
                d.insert(
                    "progress",
                    doc! { "done": done as i64, "total": total as i64 },
                );
            }
            if op.is_killed() {
                d.insert("killPending", true);
            }
            d.insert("locks", Document::new());
            d.insert("waitingForLock", false);
            d.insert("lockStats", Document::new());
            d.insert("waitingForFlowControl", false);
            d.insert("flowControlStats", Document::new());
            out.push(d);
        }
        if opts.idle_connections {
            for c in conns
                .values()
                .filter(|c| !busy.contains(&c.info.id) && mine(&c.info))
            {
                out.push(client_fields(host, &c.info, Some(c), false, &wall));
            }
        }
        out
    }
}

/// The fields every entry has: who, and whether it is active.
fn client_fields(
    host: &str,
    info: &ConnInfo,
    conn: Option<&Conn>,
    active: bool,
    now: &str,
) -> Document {
    let mut d = doc! {
        "type": "op",
        "host": host,
        "desc": format!("conn{}", info.id),
        "connectionId": info.id as i64,
        "client": info.peer.clone(),
    };
    // The connection's user, as mongod shows it (its auth lock is a leaf: nothing is locked
    // while it is held).
    if let Some((db, user)) = info.auth.user() {
        d.insert("effectiveUsers", vec![doc! { "user": user, "db": db }]);
    }
    if let Some(meta) = conn.and_then(|c| c.metadata.as_ref()) {
        if let Ok(app) = meta
            .get_document("application")
            .and_then(|a| a.get_str("name"))
        {
            d.insert("appName", app);
        }
        d.insert("clientMetadata", meta.clone());
    }
    d.insert("active", active);
    d.insert("currentOpTime", now);
    d.insert("threaded", true);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(id: u64) -> ConnInfo {
        ConnInfo::new(id, format!("127.0.0.1:{}", 40000 + id))
    }

    #[test]
    fn registers_reports_and_kills() {
        let ops = Ops::default();
        ops.connected(&conn(1));
        ops.connected(&conn(2));
        ops.set_client_metadata(1, &doc! {"application": {"name": "app"}});
        let cmd = Arc::new(doc! {"createIndexes": "c", "indexes": [], "$db": "test"});
        {
            let run = ops.start(&conn(1), "test", "createIndexes", cmd);
            let op = current().expect("current op");
            assert_eq!(op.opid, run.op.opid);
            op.phase(silt_collection::BUILD_SCANNING, 10);
            op.progress(4);
            let opts = ReportOptions {
                idle_connections: false,
                truncate_ops: true,
                only_user: None,
            };
            let r = ops.report("h:1", opts.clone());
            assert_eq!(r.len(), 1);
            let d = &r[0];
            assert_eq!(d.get_str("op").unwrap(), "command");
            assert_eq!(d.get_str("ns").unwrap(), "test.c");
            assert_eq!(d.get_str("desc").unwrap(), "conn1");
            assert_eq!(d.get_str("appName").unwrap(), "app");
            assert_eq!(
                d.get_str("msg").unwrap(),
                "Index Build: scanning collection Index Build: scanning collection: 4/10 40%"
            );
            assert_eq!(
                d.get_document("progress").unwrap(),
                &doc! {"done": 4i64, "total": 10i64}
            );
            let all = ops.report(
                "h:1",
                ReportOptions {
                    idle_connections: true,
                    ..opts
                },
            );
            assert_eq!(all.len(), 2);
            assert!(!all[1].get_bool("active").unwrap());
            assert!(!interrupted());
            assert!(ops.kill(op.opid));
            assert!(interrupted());
            assert!(op.interrupted());
        }
        assert!(current().is_none());
        assert!(ops
            .report(
                "h",
                ReportOptions {
                    idle_connections: false,
                    truncate_ops: true,
                    only_user: None,
                }
            )
            .is_empty());
        assert!(!ops.kill(12345));
    }

    #[test]
    fn large_commands_are_truncated() {
        let big = doc! {"insert": "c", "documents": (0..500).map(|i| Bson::Document(doc! {"x": i})).collect::<Vec<_>>()};
        let t = shown_command(&big, TRUNCATE_OPS_BYTES);
        let s = t.get_str("$truncated").unwrap();
        assert!(s.len() <= TRUNCATE_OPS_BYTES && s.starts_with("{ \"insert\""));
        let small = doc! {"find": "c", "filter": {"a": 1}};
        assert_eq!(shown_command(&small, TRUNCATE_OPS_BYTES), small);
    }
}
