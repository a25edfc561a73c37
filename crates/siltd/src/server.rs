//! The network side: accept connections, frame messages, run commands, write replies. Each
//! connection has its own thread that reads a message, runs the command and writes the reply
//! (mongod's synchronous model), so a request costs no hand-off between threads. Bad input
//! gets an error reply, or a closed connection with a log line when the stream can no longer
//! be framed; it never takes the server down.
//!
//! Two other models were measured against this one on a 2-core machine (W3's insert, point,
//! range and ping phases, `silt-bench concurrency`, 2 and 64 client threads, throwaway builds
//! not kept): a tokio runtime with 2 workers, and a pool of 4 or 8 threads taking ready
//! connections from one epoll set. At 64 clients all three served about the same (ping 56k to
//! 98k/s, point reads 35k to 51k/s, range 284k to 411k documents/s, random inserts 30k to
//! 38k/s); at 2 clients this model's ping was 1.25 to 2.1 times theirs in the same run (90k to
//! 128k/s against 53k to 80k/s), because each client thread and its connection's thread keep
//! handing a core to each other, which a pool cannot arrange.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use parking_lot::{Condvar, Mutex};
use silt_wire::{MsgHeader, OpReply, Request, HEADER_LEN, MAX_MESSAGE_BYTES};

use crate::conn::ConnInfo;
use crate::state::Server;
use crate::tls::Transport;

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

fn request_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed)
}

/// Stack of a connection thread. Commands recurse over nested documents and expressions; the
/// stack is reserved address space, and only the pages a command touches become resident.
const CONN_STACK_BYTES: usize = 16 << 20;
/// A connection reads through a buffer of this size, so that a request's header and a body
/// that fits arrive in one `recv` instead of two; a larger body is read straight into its
/// own allocation.
const READ_BUFFER_BYTES: usize = 16 << 10;

/// An open connection: a handle on its socket and its thread.
type OpenConn = (TcpStream, Option<JoinHandle<()>>);

/// The open connections, so that shutdown can close their sockets and wait for their threads.
#[derive(Default)]
struct Conns {
    open: Mutex<HashMap<u64, OpenConn>>,
    stopping: Mutex<bool>,
    wake: Condvar,
}

impl Conns {
    /// Sleep for `d`, or less if the server starts shutting down.
    fn sleep(&self, d: Duration) {
        let deadline = Instant::now() + d;
        let mut g = self.stopping.lock();
        while !*g {
            if self.wake.wait_until(&mut g, deadline).timed_out() {
                break;
            }
        }
    }

    fn stopping(&self) -> bool {
        *self.stopping.lock()
    }
}

/// Run until SIGINT or SIGTERM, then close every connection and return.
pub(crate) async fn serve(s: Arc<Server>, addr: &str) -> Result<(), String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "waiting for connections");
    s.remember_log(format!("waiting for connections on {addr}"));

    let reaper = s.clone();
    tokio::spawn(async move {
        let period = (reaper.cursors().timeout / 2)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let n = reaper.cursors().reap();
            if n > 0 {
                tracing::info!(cursors = n, "closed idle cursors");
            }
        }
    });
    // Transactions past their lifetime and sessions idle for 30 minutes; aborting writes
    // messages, so it runs on a blocking thread.
    let sessions = s.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let s = sessions.clone();
            let n = tokio::task::spawn_blocking(move || s.sessions().reap(s.txn_lifetime()))
                .await
                .unwrap_or(0);
            if n > 0 {
                tracing::info!(transactions = n, "aborted expired transactions");
            }
        }
    });

    // Partitioned collections with `partitionRetention` rotate by themselves (a catalog
    // change and file removals: a blocking thread).
    let retention = s.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let s = retention.clone();
            let _ = tokio::task::spawn_blocking(move || {
                s.store().run_retention();
                if let Err(e) = s.store().maintain_oplog() {
                    tracing::warn!(error = %e, "oplog maintenance failed");
                }
                if let Err(e) = s.record_replset_config() {
                    tracing::debug!(error = %e, "cannot record the set's configuration");
                }
                if let Err(e) = s.store().drop_abandoned() {
                    tracing::warn!(error = %e, "cannot drop a collection an aborted transaction created");
                }
            })
            .await;
        }
    });

    let conns = Arc::new(Conns::default());
    let local = listener.local_addr().ok();
    let acceptor = {
        let s = s.clone();
        let conns = conns.clone();
        std::thread::Builder::new()
            .name("siltd-accept".into())
            .spawn(move || accept_loop(s, listener, conns))
            .map_err(|e| format!("cannot start the accept thread: {e}"))?
    };

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot install SIGTERM handler: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = s.shutdown_requested() => tracing::info!("shutdown command received"),
    }
    *conns.stopping.lock() = true;
    conns.wake.notify_all();
    // Wake the accept thread so that it sees the flag, and wait for it: after that no
    // connection can be added.
    if let Some(a) = local {
        let _ = TcpStream::connect_timeout(&a, Duration::from_millis(200));
    }
    let _ = acceptor.join();
    let open: Vec<_> = conns.open.lock().drain().collect();
    let mut threads = Vec::new();
    for (_, (stream, handle)) in open {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        threads.extend(handle);
    }
    // A connection in the middle of a command finishes it; wait a while for them.
    let deadline = Instant::now() + Duration::from_secs(5);
    for t in threads {
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.is_finished() {
            let _ = t.join();
        }
    }
    Ok(())
}

fn accept_loop(s: Arc<Server>, listener: TcpListener, conns: Arc<Conns>) {
    for r in listener.incoming() {
        if conns.stopping() {
            break;
        }
        let stream = match r {
            Ok(st) => st,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "unknown".into());
        let open_now = s.conns().current();
        if open_now >= s.cfg().max_conns {
            // mongod's behaviour: the new socket is closed at once, and the log says why.
            tracing::warn!(
                remote = %peer,
                open = open_now,
                max = s.cfg().max_conns,
                "connection refused because there are too many open connections"
            );
            let _ = stream.shutdown(std::net::Shutdown::Both);
            continue;
        }
        // Counted here rather than in the thread, so that serverStatus sees every accepted
        // connection at once.
        let id = s.conns().opened();
        let Ok(registered) = stream.try_clone() else {
            tracing::warn!(remote = %peer, "cannot register the connection; closing it");
            s.conns().closed();
            continue;
        };
        // Hold the table's lock while spawning so the thread's own removal comes after this
        // insertion.
        let mut open = conns.open.lock();
        let (s2, c2) = (s.clone(), conns.clone());
        match std::thread::Builder::new()
            .name(format!("conn{id}"))
            .stack_size(CONN_STACK_BYTES)
            .spawn(move || connection(s2, c2, stream, id, peer))
        {
            Ok(h) => {
                open.insert(id, (registered, Some(h)));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a connection thread; closing it");
                s.conns().closed();
            }
        }
    }
}

/// Undoes a connection's registration however its thread ends (a panic included), so the
/// socket is closed and the counters stay right.
struct ConnGuard<'a> {
    s: &'a Server,
    conns: &'a Conns,
    id: u64,
}

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.s.inprog().disconnected(self.id);
        self.s.conns().closed();
        if let Some((stream, _)) = self.conns.open.lock().remove(&self.id) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn connection(s: Arc<Server>, conns: Arc<Conns>, stream: TcpStream, id: u64, peer: String) {
    let _ = stream.set_nodelay(true);
    tracing::info!(conn = id, remote = %peer, "connection accepted");
    let info = ConnInfo::new(id, peer);
    s.inprog().connected(&info);
    let _guard = ConnGuard {
        s: &s,
        conns: &conns,
        id,
    };
    let mut stream = match s.tls().accept(stream) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(conn = id, remote = %info.peer, error = %e, "connection ended");
            return;
        }
    };
    if stream.is_tls() {
        tracing::debug!(conn = id, "TLS session established");
    }
    let why = match serve_connection(&s, &conns, &mut stream, &info) {
        Ok(()) => "client closed".to_string(),
        Err(e) => e,
    };
    tracing::info!(conn = id, remote = %info.peer, reason = %why, "connection ended");
}

fn error_doc(code: i32, name: &str, msg: &str) -> Document {
    doc! { "ok": 0.0, "errmsg": msg, "code": code, "codeName": name }
}

fn serve_connection(
    s: &Arc<Server>,
    conns: &Conns,
    stream: &mut Transport,
    info: &ConnInfo,
) -> Result<(), String> {
    let mut head = [0u8; HEADER_LEN];
    // Replies go straight to the stream under the buffer (`reader.get_mut()`).
    let mut reader = std::io::BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    loop {
        match reader.read_exact(&mut head) {
            Ok(_) => {}
            Err(_) if conns.stopping() => return Err("server shutting down".into()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("read error: {e}")),
        }
        let header = match MsgHeader::parse(&head) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(conn = info.id, error = %e, "bad message header; closing");
                return Err(format!("bad message header: {e}"));
            }
        };
        let len = header.body_len();
        if len + HEADER_LEN > MAX_MESSAGE_BYTES {
            return Err("message too large".into());
        }
        let mut body = vec![0u8; len];
        if let Err(e) = reader.read_exact(&mut body) {
            return Err(format!("truncated message: {e}"));
        }
        s.net().received(HEADER_LEN + len);
        let parsed = silt_wire::parse_message_with_compressor(&header, &body);
        drop(body);
        let (req, compressor) = match parsed {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(conn = info.id, error = %e, "malformed message");
                if e.closes_connection() {
                    return Err(format!("malformed message: {e}"));
                }
                let (code, name) = e.code();
                let reply = error_doc(code, name, &e.to_string());
                let bytes = silt_wire::op_msg_reply(&reply, request_id(), header.request_id)
                    .map_err(|e| e.to_string())?;
                write_all(reader.get_mut(), &bytes)?;
                s.net().sent(bytes.len());
                continue;
            }
        };
        let reply_bytes = match req {
            Request::Msg(m) => {
                let quiet = m.more_to_come();
                let (cmd, repeated) = m.into_command_noting();
                if let Some((wait, counter)) = awaitable_hello_wait(s, &cmd) {
                    // Drivers' monitors ask "tell me when the topology changes, or after
                    // maxAwaitTimeMS". A standalone's topology never changes: wait, then
                    // answer. A member of a multi-member set answers as soon as its role,
                    // term or writability changes.
                    match s.raft().filter(|r| r.member().is_some()) {
                        None => conns.sleep(wait),
                        Some(r) => {
                            let until = Instant::now() + wait;
                            while !conns.stopping() && r.topology_counter_now() == counter {
                                let left = until.saturating_duration_since(Instant::now());
                                if left.is_zero() {
                                    break;
                                }
                                conns.sleep(left.min(TOPOLOGY_POLL));
                            }
                        }
                    }
                }
                let reply = crate::request::run(s, cmd, &repeated, info);
                if info.close.load(std::sync::atomic::Ordering::Acquire) {
                    return Err("closed by the failCommand fail point".into());
                }
                if quiet {
                    continue;
                }
                silt_wire::op_msg_reply(&reply, request_id(), header.request_id)
                    .or_else(|e| {
                        let (code, name) = e.code();
                        silt_wire::op_msg_reply(
                            &error_doc(code, name, &format!("reply could not be sent: {e}")),
                            request_id(),
                            header.request_id,
                        )
                    })
                    .map_err(|e| e.to_string())?
            }
            Request::Query(q) => {
                let reply = match q.command_database() {
                    Some(db) => {
                        let mut cmd = match q.query.get("$query") {
                            Some(Bson::Document(inner)) => inner.clone(),
                            _ => q.query.clone(),
                        };
                        cmd.insert("$db", db.to_string());
                        let r = crate::request::run(s, cmd, &[], info);
                        OpReply::single(r)
                    }
                    None => OpReply {
                        response_flags: OpReply::QUERY_FAILURE,
                        documents: vec![doc! {
                            "$err": "OP_QUERY is no longer supported except for commands on admin.$cmd",
                            "code": 5739101,
                            "ok": 0.0,
                        }],
                        ..OpReply::default()
                    },
                };
                reply
                    .to_message(request_id(), header.request_id)
                    .map_err(|e| e.to_string())?
            }
            Request::Legacy { op_code } => {
                tracing::warn!(
                    conn = info.id,
                    op_code,
                    "unsupported legacy opcode; closing"
                );
                return Err(format!("unsupported legacy opcode {op_code}"));
            }
        };
        let out = match compressor {
            Some(c) => silt_wire::compress_message(&reply_bytes, c).unwrap_or(reply_bytes),
            None => reply_bytes,
        };
        write_all(reader.get_mut(), &out)?;
        s.net().sent(out.len());
    }
}

/// How often an awaitable `hello` on a member of a multi-member set looks for a change.
const TOPOLOGY_POLL: Duration = Duration::from_millis(50);

/// For an awaitable `hello` (one carrying our current `topologyVersion` and `maxAwaitTimeMS`),
/// how long to hold the reply, and the counter it was sent with. A client whose counter is
/// not ours has missed a change: it is answered at once.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the wait saturates into i64 and is clamped to 0..=60,000 ms"
)]
fn awaitable_hello_wait(s: &Server, cmd: &Document) -> Option<(Duration, i64)> {
    let name = cmd.keys().next()?;
    if !matches!(name.as_str(), "hello" | "isMaster" | "ismaster") {
        return None;
    }
    let tv = cmd.get_document("topologyVersion").ok()?;
    if tv.get_object_id("processId").ok()? != s.process_id() {
        return None;
    }
    let counter = match tv.get("counter")? {
        Bson::Int32(v) => i64::from(*v),
        Bson::Int64(v) => *v,
        _ => return None,
    };
    if s.raft().map_or(0, |r| r.topology_counter_now()) != counter {
        return None;
    }
    let ms = match cmd.get("maxAwaitTimeMS")? {
        Bson::Int32(v) => i64::from(*v),
        Bson::Int64(v) => *v,
        Bson::Double(v) => *v as i64,
        _ => return None,
    };
    Some((Duration::from_millis(ms.clamp(0, 60_000) as u64), counter))
}

fn write_all(stream: &mut Transport, bytes: &[u8]) -> Result<(), String> {
    stream
        .write_all(bytes)
        .and_then(|()| stream.flush())
        .map_err(|e| format!("write error: {e}"))
}
