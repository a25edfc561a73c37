//! The network side: accept connections, frame messages, hand commands to the blocking
//! command layer, write replies. Bad input gets an error reply, or a closed connection with a
//! log line when the stream can no longer be framed; it never takes the server down.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};
use silt_wire::{MsgHeader, OpReply, Request, HEADER_LEN, MAX_MESSAGE_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::state::{ConnInfo, Server};

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

fn request_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed)
}

/// Run until SIGINT or SIGTERM.
pub async fn serve(s: Arc<Server>, addr: &str) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "waiting for connections");
    s.remember_log(format!("waiting for connections on {addr}"));

    let reaper = s.clone();
    tokio::spawn(async move {
        let period =
            (reaper.cursors.timeout / 2).clamp(Duration::from_millis(100), Duration::from_secs(10));
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let n = reaper.cursors.reap();
            if n > 0 {
                tracing::info!(cursors = n, "closed idle cursors");
            }
        }
    });

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot install SIGTERM handler: {e}"))?;
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    let s = s.clone();
                    tokio::spawn(async move { connection(s, stream, peer.to_string()).await });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("SIGINT received");
                break;
            }
            _ = term.recv() => {
                tracing::info!("SIGTERM received");
                break;
            }
        }
    }
    Ok(())
}

async fn connection(s: Arc<Server>, mut stream: TcpStream, peer: String) {
    let id = s.conns_total.fetch_add(1, Ordering::Relaxed) + 1;
    s.conns_current.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    tracing::info!(conn = id, remote = %peer, "connection accepted");
    let info = ConnInfo { id, peer };
    s.inprog.connected(&info);
    let why = match serve_connection(&s, &mut stream, &info).await {
        Ok(()) => "client closed".to_string(),
        Err(e) => e,
    };
    s.inprog.disconnected(id);
    s.conns_current.fetch_sub(1, Ordering::Relaxed);
    tracing::info!(conn = id, remote = %info.peer, reason = %why, "connection ended");
}

fn error_doc(code: i32, name: &str, msg: &str) -> Document {
    doc! { "ok": 0.0, "errmsg": msg, "code": code, "codeName": name }
}

async fn serve_connection(
    s: &Arc<Server>,
    stream: &mut TcpStream,
    info: &ConnInfo,
) -> Result<(), String> {
    let mut head = [0u8; HEADER_LEN];
    loop {
        match stream.read_exact(&mut head).await {
            Ok(_) => {}
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
        if let Err(e) = stream.read_exact(&mut body).await {
            return Err(format!("truncated message: {e}"));
        }
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
                write_all(stream, &bytes).await?;
                continue;
            }
        };
        let reply_bytes = match req {
            Request::Msg(m) => {
                let quiet = m.more_to_come();
                let cmd = m.into_command();
                if let Some(wait) = awaitable_hello_wait(s, &cmd) {
                    // Drivers' monitors ask "tell me when the topology changes, or after
                    // maxAwaitTimeMS". A standalone's topology never changes: wait, then answer.
                    tokio::time::sleep(wait).await;
                }
                let reply = run_blocking(s, cmd, info).await;
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
                        let r = run_blocking(s, cmd, info).await;
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
        write_all(stream, &out).await?;
    }
}

/// For an awaitable `hello` (one carrying our current `topologyVersion` and `maxAwaitTimeMS`),
/// how long to hold the reply.
fn awaitable_hello_wait(s: &Server, cmd: &Document) -> Option<Duration> {
    let name = cmd.keys().next()?;
    if !matches!(name.as_str(), "hello" | "isMaster" | "ismaster") {
        return None;
    }
    let tv = cmd.get_document("topologyVersion").ok()?;
    if tv.get_object_id("processId").ok()? != s.process_id {
        return None;
    }
    let ms = match cmd.get("maxAwaitTimeMS")? {
        Bson::Int32(v) => i64::from(*v),
        Bson::Int64(v) => *v,
        Bson::Double(v) => *v as i64,
        _ => return None,
    };
    Some(Duration::from_millis(ms.clamp(0, 60_000) as u64))
}

async fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> Result<(), String> {
    stream
        .write_all(bytes)
        .await
        .map_err(|e| format!("write error: {e}"))
}

/// Run a command on the blocking pool (commands read and write the engine, which may do I/O).
async fn run_blocking(s: &Arc<Server>, cmd: Document, info: &ConnInfo) -> Document {
    let s = s.clone();
    let info = info.clone();
    match tokio::task::spawn_blocking(move || s.run_command(cmd, &info)).await {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "command panicked");
            error_doc(
                1,
                "InternalError",
                "internal error while running the command",
            )
        }
    }
}
