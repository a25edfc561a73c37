//! How this member reaches the other members of its Raft group: the requests of
//! `silt_raft` as `_siltRaft` commands on the other member's own port (`commands/
//! silt_raft.rs` answers them), over connections kept in a pool per address: TLS under
//! `preferTLS` and `requireTLS` (`crate::tls::Tls::member_client`: this member's certificate,
//! the other's checked against the CA file), plain TCP otherwise.
//!
//! With a `--keyFile`, every request is sealed with the key (`crate::cluster_auth`), and the
//! receiver refuses one that is not.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use silt_raft::{NodeId, Transport};
use silt_wire::{MsgHeader, OpMsg, Request};

/// Connections kept per address.
const POOL: usize = 4;

/// The transport of one member.
#[derive(Debug)]
pub(crate) struct MemberTransport {
    /// The set's name, checked by the receiver.
    set: String,
    /// This member's id in the group.
    me: NodeId,
    /// The `--keyFile` key requests are sealed with.
    key: Option<Vec<u8>>,
    idle: Mutex<HashMap<String, Vec<Conn>>>,
    next_id: AtomicI32,
    /// TLS to the other members, when it is on.
    tls: Option<Arc<ClientConfig>>,
}

/// A connection to another member.
enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Conn::Plain(_) => "Conn::Plain",
            Conn::Tls(_) => "Conn::Tls",
        })
    }
}

impl Conn {
    fn socket(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl MemberTransport {
    pub(crate) fn new(
        set: &str,
        me: NodeId,
        key: Option<Vec<u8>>,
        tls: Option<Arc<ClientConfig>>,
    ) -> MemberTransport {
        MemberTransport {
            set: set.to_string(),
            me,
            key,
            idle: Mutex::new(HashMap::new()),
            next_id: AtomicI32::new(1),
            tls,
        }
    }

    /// A new connection to `addr`, TLS when it is on (the handshake done within `timeout`).
    fn connect(&self, addr: &str, timeout: Duration) -> io::Result<Conn> {
        let sock = Self::connect_tcp(addr, timeout)?;
        let Some(cfg) = &self.tls else {
            return Ok(Conn::Plain(sock));
        };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| bad(format!("{host} is not a TLS server name: {e}")))?;
        let conn = ClientConnection::new(cfg.clone(), name)
            .map_err(|e| io::Error::other(format!("TLS to {addr}: {e}")))?;
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        let mut s = StreamOwned::new(conn, sock);
        while s.conn.is_handshaking() {
            s.conn
                .complete_io(&mut s.sock)
                .map_err(|e| io::Error::other(format!("TLS handshake with {addr}: {e}")))?;
        }
        Ok(Conn::Tls(Box::new(s)))
    }

    fn connect_tcp(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
        let mut last = io::Error::new(
            io::ErrorKind::NotFound,
            format!("{addr} resolves to nothing"),
        );
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Send `cmd` on `conn` and read its reply document.
    fn exchange(&self, conn: &mut Conn, cmd: Document, timeout: Duration) -> io::Result<Document> {
        conn.socket().set_read_timeout(Some(timeout))?;
        conn.socket().set_write_timeout(Some(timeout))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let msg = OpMsg::new(cmd)
            .to_message(id, 0)
            .map_err(|e| bad(e.to_string()))?;
        conn.write_all(&msg)?;
        conn.flush()?;
        let mut head = [0u8; 16];
        conn.read_exact(&mut head)?;
        let header = MsgHeader::parse(&head).map_err(|e| bad(e.to_string()))?;
        let mut body = vec![0u8; header.body_len()];
        conn.read_exact(&mut body)?;
        match silt_wire::parse_message(&header, &body).map_err(|e| bad(e.to_string()))? {
            Request::Msg(m) => Ok(m.into_command()),
            _ => Err(bad("the member did not answer with OP_MSG")),
        }
    }
}

impl Transport for MemberTransport {
    fn call(
        &self,
        target: NodeId,
        addr: &str,
        request: &[u8],
        timeout: Duration,
    ) -> io::Result<Vec<u8>> {
        let pooled = self.idle.lock().get_mut(addr).and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect(addr, timeout)?,
        };
        let (from, to) = (
            i64::try_from(self.me).unwrap_or(i64::MAX),
            i64::try_from(target).unwrap_or(i64::MAX),
        );
        let mut cmd = doc! {
            "_siltRaft": 1,
            "setName": self.set.clone(),
            "from": from,
            "to": to,
            "body": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: request.to_vec() },
            "$db": "admin",
        };
        if let Some(key) = &self.key {
            let (at, mac) = crate::cluster_auth::seal(key, &self.set, from, to, request);
            cmd.insert("at", at);
            cmd.insert(
                "mac",
                bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: mac,
                },
            );
        }
        // A connection that fails is dropped, not pooled.
        let reply = self.exchange(&mut conn, cmd, timeout)?;
        let mut idle = self.idle.lock();
        let list = idle.entry(addr.to_string()).or_default();
        if list.len() < POOL {
            list.push(conn);
        }
        drop(idle);
        match reply.get("body") {
            Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
            _ => Err(io::Error::other(format!(
                "member {target} at {addr} refused: {}",
                reply.get_str("errmsg").unwrap_or("no reason given")
            ))),
        }
    }
}
