//! The servers a server-level workload (W1-W4) runs against: a `siltd` child process, and the
//! MongoDB-compatible peer FerretDB (started by `bench/peers.sh`, on its SQLite backend), both
//! driven through the same wire client (`client.rs`) with the same documents and threads.

use std::path::PathBuf;

use bson::doc;

use crate::client::{Client, Server};
use crate::kv::dir_bytes;

/// Where a workload sends its commands.
pub(crate) enum Target {
    Silt(Server),
    /// A server this harness did not start (FerretDB): its port, and the directory whose size
    /// is its bytes on disk.
    Peer {
        name: &'static str,
        port: u16,
        data: Option<PathBuf>,
    },
}

/// `--peer` values a server-level workload takes.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PeerName {
    /// FerretDB at `$SILT_FERRETDB` (host:port, from `bench/peers.sh env`).
    Ferretdb,
    /// PostgreSQL at `$SILT_PG` (documents in a jsonb column; not a wire peer, so only the
    /// workloads that say so take it: W1a, W2 ingest, W5).
    Postgres,
}

impl PeerName {
    /// The peers' names as the JSON records them (`["ferretdb", "postgres"]`).
    pub(crate) fn names(peers: &[PeerName]) -> Vec<&'static str> {
        peers
            .iter()
            .map(|p| match p {
                PeerName::Ferretdb => "ferretdb",
                PeerName::Postgres => "postgres",
            })
            .collect()
    }
}

impl Target {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Target::Silt(_) => "silt",
            Target::Peer { name, .. } => name,
        }
    }

    pub(crate) fn port(&self) -> u16 {
        match self {
            Target::Silt(s) => s.port,
            Target::Peer { port, .. } => *port,
        }
    }

    pub(crate) fn connect(&self) -> Result<Client, String> {
        Client::connect(self.port()).map_err(|e| format!("{}: {e}", self.name()))
    }

    /// The peer named, reached through the address `bench/peers.sh env` exports, emptied (and
    /// `db` dropped) so that the workload starts from nothing, as it does on a new siltd.
    pub(crate) fn peer(p: PeerName, db: &str) -> Result<Target, String> {
        let (name, var, data_var) = match p {
            PeerName::Ferretdb => ("ferretdb", "SILT_FERRETDB", "SILT_FERRETDB_DATA"),
            PeerName::Postgres => {
                return Err("postgres does not speak the MongoDB wire protocol: this workload runs against FerretDB only".into())
            }
        };
        let addr = std::env::var(var).map_err(|_| {
            format!("{var} is not set: run `bash bench/peers.sh start` and `eval \"$(bash bench/peers.sh env)\"`")
        })?;
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("{var}={addr}: expected host:port"))?;
        let t = Target::Peer {
            name,
            port,
            data: std::env::var(data_var).ok().map(PathBuf::from),
        };
        // Every database goes, so that the peer starts as empty as a new siltd does and its
        // data directory holds only what this workload writes.
        let mut c = t.connect()?;
        let list = c
            .command("admin", doc! { "listDatabases": 1, "nameOnly": true })
            .map_err(|e| format!("{name}: listDatabases: {e}"))?;
        let mut names: Vec<String> = list
            .get_array("databases")
            .map(|a| {
                a.iter()
                    .filter_map(|d| d.as_document()?.get_str("name").ok().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        names.push(db.to_string());
        for n in names {
            if !matches!(n.as_str(), "admin" | "local" | "config") {
                c.command(&n, doc! { "dropDatabase": 1 })
                    .map_err(|e| format!("{name}: dropDatabase {n}: {e}"))?;
            }
        }
        Ok(t)
    }

    /// Bytes the server's files take on disk: siltd's own figure, or the peer's data directory.
    pub(crate) fn bytes_on_disk(&self, c: &mut Client) -> u64 {
        match self {
            Target::Silt(_) => c
                .command("admin", doc! { "serverStatus": 1 })
                .ok()
                .and_then(|s| {
                    s.get_document("silt")
                        .ok()
                        .and_then(|s| s.get_i64("bytesOnDisk").ok())
                })
                .map_or(0, |b| b.max(0) as u64),
            Target::Peer { data, .. } => data.as_deref().map_or(0, dir_bytes),
        }
    }

    /// Resident memory of the server now (0 for a peer this harness did not start).
    pub(crate) fn rss(&self) -> u64 {
        match self {
            Target::Silt(s) => s.rss(),
            Target::Peer { .. } => 0,
        }
    }

    /// Peak resident memory (0 for a peer).
    pub(crate) fn peak_rss(&self) -> u64 {
        match self {
            Target::Silt(s) => s.peak_rss(),
            Target::Peer { .. } => 0,
        }
    }
}
