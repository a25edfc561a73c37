//! A minimal synchronous MongoDB client over `silt-wire` (OP_MSG commands), and a `siltd`
//! child process for workloads that measure the server. Enough for benchmarks; tests use
//! real drivers.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use silt_wire::{MsgHeader, OpMsg, Request, HEADER_LEN};

/// One connection. Replies are read through a buffer (a reply's header and a body that fits
/// in one `recv`); requests are written to the socket under it.
pub(crate) struct Client {
    stream: BufReader<TcpStream>,
    next_id: i32,
}

/// A command error: the server's reply.
pub(crate) type CmdErr = String;

impl Client {
    pub(crate) fn connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: BufReader::with_capacity(16 << 10, stream),
            next_id: 1,
        })
    }

    /// Run `cmd` on `db`; `Err` carries `errmsg` of an `ok: 0` reply, or an I/O problem.
    pub(crate) fn command(&mut self, db: &str, cmd: Document) -> Result<Document, CmdErr> {
        let reply = self.reply(db, cmd)?;
        if let Some((_, msg)) = failure(&reply) {
            return Err(msg);
        }
        Ok(reply)
    }

    /// [`Client::command`], retried while a peer answers that its database is busy (FerretDB
    /// on SQLite answers `database is locked (SQLITE_BUSY)` to concurrent writers, and the
    /// write did not happen); returns the reply and the retries it took.
    pub(crate) fn command_retrying_busy(
        &mut self,
        db: &str,
        cmd: Document,
    ) -> Result<(Document, u64), CmdErr> {
        let mut retries = 0u64;
        loop {
            match self.command(db, cmd.clone()) {
                Err(e) if e.contains("SQLITE_BUSY") && retries < 100_000 => {
                    retries += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                r => return r.map(|d| (d, retries)),
            }
        }
    }

    /// The `count` command's `n` for `query` on `db.coll`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a double `n` is read as an integer count: the saturating cast is the intended \
                  reading"
    )]
    pub(crate) fn count(&mut self, db: &str, coll: &str, query: Document) -> Result<u64, CmdErr> {
        let r = self.command(db, bson::doc! { "count": coll, "query": query })?;
        match r.get("n") {
            Some(bson::Bson::Int32(n)) => Ok(*n as u64),
            Some(bson::Bson::Int64(n)) => Ok(*n as u64),
            Some(bson::Bson::Double(n)) => Ok(*n as u64),
            other => Err(format!("count answered n = {other:?}")),
        }
    }

    /// Run `cmd` on `db` and return the reply as it is (`ok: 0` included); `Err` only for an
    /// I/O or protocol problem.
    pub(crate) fn reply(&mut self, db: &str, mut cmd: Document) -> Result<Document, CmdErr> {
        cmd.insert("$db", db);
        self.next_id += 1;
        let bytes = OpMsg::new(cmd)
            .to_message(self.next_id, 0)
            .map_err(|e| e.to_string())?;
        self.stream
            .get_mut()
            .write_all(&bytes)
            .map_err(|e| e.to_string())?;
        let mut head = [0u8; HEADER_LEN];
        self.stream
            .read_exact(&mut head)
            .map_err(|e| e.to_string())?;
        let h = MsgHeader::parse(&head).map_err(|e| e.to_string())?;
        let mut body = vec![0u8; h.body_len()];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| e.to_string())?;
        match silt_wire::parse_message(&h, &body).map_err(|e| e.to_string())? {
            Request::Msg(m) => Ok(m.body),
            _ => Err("unexpected reply opcode".into()),
        }
    }

    /// All documents of a query (following getMore).
    pub(crate) fn find_all(
        &mut self,
        db: &str,
        coll: &str,
        filter: Document,
        projection: Document,
    ) -> Result<Vec<Document>, CmdErr> {
        let r = self.command(
            db,
            doc! { "find": coll, "filter": filter, "projection": projection, "batchSize": 10_000 },
        )?;
        let c = r.get_document("cursor").map_err(|e| e.to_string())?;
        let mut out: Vec<Document> = c
            .get_array("firstBatch")
            .map_err(|e| e.to_string())?
            .iter()
            .filter_map(|b| b.as_document().cloned())
            .collect();
        let mut id = c.get_i64("id").unwrap_or(0);
        while id != 0 {
            let r = self.command(
                db,
                doc! { "getMore": id, "collection": coll, "batchSize": 10_000 },
            )?;
            let c = r.get_document("cursor").map_err(|e| e.to_string())?;
            out.extend(
                c.get_array("nextBatch")
                    .map_err(|e| e.to_string())?
                    .iter()
                    .filter_map(|b| b.as_document().cloned()),
            );
            id = c.get_i64("id").unwrap_or(0);
        }
        Ok(out)
    }
}

/// The code and message of a failed reply: `ok: 0`, or its first write error.
pub(crate) fn failure(reply: &Document) -> Option<(i32, String)> {
    let ok = match reply.get("ok") {
        Some(bson::Bson::Double(d)) => *d == 1.0,
        Some(bson::Bson::Int32(i)) => *i == 1,
        _ => false,
    };
    if !ok {
        let msg = reply.get_str("errmsg").unwrap_or("command failed");
        return Some((reply.get_i32("code").unwrap_or(0), msg.to_string()));
    }
    let errs = reply.get_array("writeErrors").ok()?;
    let first = errs.first().and_then(|e| e.as_document());
    let code = first.and_then(|d| d.get_i32("code").ok()).unwrap_or(0);
    Some((code, format!("write errors: {errs:?}")))
}

/// A `siltd` child process on a free port with its own data directory.
pub(crate) struct Server {
    child: Child,
    pub port: u16,
    _dir: Option<tempfile::TempDir>,
}

/// The `siltd` binary: `$SILTD_BIN` if set (the peers build of `silt-bench` lives in its own
/// target directory), else the one next to this binary (both in `target/<profile>/`).
pub(crate) fn siltd_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SILTD_BIN") {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("siltd")))
        .unwrap_or_else(|| PathBuf::from("siltd"))
}

fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Server {
    pub(crate) fn start(dir: Option<&Path>, args: &[&str]) -> Result<Server, String> {
        let (tmp, dbpath): (_, PathBuf) = match dir {
            Some(d) => (None, d.to_path_buf()),
            None => {
                let t = tempfile::tempdir().map_err(|e| e.to_string())?;
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
        };
        let port = free_port().map_err(|e| e.to_string())?;
        let mut s = Server::start_at(&dbpath, port, args)?;
        s._dir = tmp;
        Ok(s)
    }

    /// A `siltd` on `port` over the data directory `dbpath` (kept by the caller): a member
    /// restarted where it was.
    pub(crate) fn start_at(dbpath: &Path, port: u16, args: &[&str]) -> Result<Server, String> {
        let tmp = None;
        let bin = siltd_path();
        let child = Command::new(&bin)
            .arg("--port")
            .arg(port.to_string())
            .arg("--dbpath")
            .arg(dbpath)
            .arg("--log-level")
            .arg("warn")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} (build it with `cargo build --release -p siltd`): {e}",
                    bin.display()
                )
            })?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Server {
                    child,
                    port,
                    _dir: tmp,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("siltd did not start".into())
    }

    /// Resident memory of the server process now.
    pub(crate) fn rss(&self) -> u64 {
        crate::engine::rss_of(&self.child.id().to_string())
    }

    /// Peak resident memory of the server process.
    pub(crate) fn peak_rss(&self) -> u64 {
        crate::engine::peak_rss_of(&self.child.id().to_string())
    }
}

/// A free loopback port.
pub(crate) fn pick_port() -> Result<u16, String> {
    free_port().map_err(|e| e.to_string())
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM-equivalent is not in std; kill and wait (benchmark data is disposable).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
