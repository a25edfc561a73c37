//! Command-line flags, the config file, and their defaults.
//!
//! `--config FILE` reads the YAML `mongod.conf` layout (`yaml.rs`: `net.port`,
//! `storage.dbPath`, ..., siltd's own settings under `silt:`), or the older `name = value`
//! lines (`legacy.rs`). Flags given on the command line win over the file.

mod legacy;
mod yaml;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// siltd: a MongoDB-compatible document database over a fractal tree.
#[derive(Parser, Debug, Default)]
#[command(version, about)]
pub(crate) struct Flags {
    /// Read settings from this file: the YAML `mongod.conf` layout (or `name = value` lines).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// TCP port to listen on [default: 27017].
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to bind [default: 127.0.0.1].
    #[arg(long)]
    pub bind: Option<String>,
    /// Data directory, created if missing [default: ./silt-data].
    #[arg(long)]
    pub dbpath: Option<PathBuf>,
    /// Cache budget with a unit (`64MB`, `2GB`) [default: half the memory the process may use].
    #[arg(long)]
    pub cache_size: Option<String>,
    /// Journal (log) fsync period in milliseconds; 0 syncs every commit [default: 100].
    #[arg(long)]
    pub journal_commit_interval_ms: Option<u64>,
    /// Checkpoint period in seconds [default: 60].
    #[arg(long)]
    pub checkpoint_interval_s: Option<u64>,
    /// Operations slower than this are logged [default: 100].
    #[arg(long)]
    pub slow_ms: Option<u64>,
    /// Log level or filter (`warn`, `info`, `debug`, `siltd=debug`) [default: info].
    #[arg(long)]
    pub log_level: Option<String>,
    /// Idle cursors are closed after this many seconds [default: 600].
    #[arg(long)]
    pub cursor_timeout_s: Option<u64>,
    /// Most connections open at once (mongod's `--maxConns`, `net.maxIncomingConnections`);
    /// one more is closed at once with a log line [default: 1000000].
    #[arg(long = "maxConns", alias = "max-conns")]
    pub max_conns: Option<u64>,
    /// Apply eligible `$`-operator updates by `_id` without reading the document (see the
    /// README); can also be switched at runtime with `setParameter fastUpdates`.
    #[arg(long)]
    pub fast_updates: bool,
    /// Read tree nodes with O_DIRECT, bypassing the OS page cache, so that `--cache-size` is
    /// the only memory holding data (TokuMX's `directio`). Off by default.
    #[arg(long)]
    pub directio: bool,
    /// How tree nodes are compressed on disk: `none`, `lz4`, `zstd` or `zstd:LEVEL`
    /// [default: zstd]. Nodes written earlier keep their own compression and stay readable.
    #[arg(long)]
    pub compression: Option<String>,
    /// Enable commands meant for tests only (`configureFailPoint`), as mongod's
    /// `enableTestCommands`. Off by default.
    #[arg(long)]
    pub enable_test_commands: bool,
    /// Require clients to authenticate (SCRAM-SHA-256 or SCRAM-SHA-1) and check every command
    /// against the user's roles (mongod's `--auth`, `security.authorization: enabled`). With
    /// no user yet, a client on localhost may create the first one. Off by default.
    #[arg(long)]
    pub auth: bool,
    /// The shared secret the members of a replica set authenticate one another with
    /// (mongod's `--keyFile`, `security.keyFile`): 6 to 1024 base64 characters, readable by
    /// its owner only. Turns `--auth` on.
    #[arg(long = "keyFile", alias = "key-file")]
    pub key_file: Option<PathBuf>,
    /// `disabled`, `allowTLS`, `preferTLS` or `requireTLS` [default: requireTLS with a
    /// certificate, disabled without].
    #[arg(long = "tlsMode", alias = "tls-mode")]
    pub tls_mode: Option<String>,
    /// PEM file with the server's certificate chain and private key.
    #[arg(long = "tlsCertificateKeyFile", alias = "tls-certificate-key-file")]
    pub tls_cert_key_file: Option<PathBuf>,
    /// PEM file of the authority that client certificates must chain to; clients must then
    /// present one (unless `--tlsAllowConnectionsWithoutCertificates`).
    #[arg(long = "tlsCAFile", alias = "tls-ca-file")]
    pub tls_ca_file: Option<PathBuf>,
    /// With `--tlsCAFile`: a client without a certificate is still accepted.
    #[arg(
        long = "tlsAllowConnectionsWithoutCertificates",
        alias = "tls-allow-connections-without-certificates"
    )]
    pub tls_allow_without_certs: bool,
    /// Run as the primary of a one-member replica set of this name, so that drivers use
    /// sessions, transactions and retryable writes (`replicaSet=NAME` in the connection
    /// string). Without it siltd is a standalone server, which refuses them.
    #[arg(long = "replSet", alias = "repl-set")]
    pub repl_set: Option<String>,
    /// With `--replSet`: the oplog's size in megabytes, past which its oldest partition is
    /// dropped (`replication.oplogSizeMB`) [default: 990].
    #[arg(long = "oplogSize", alias = "oplog-size")]
    pub oplog_size_mb: Option<u64>,
    /// With `--replSet`: hours an oplog entry is kept even past the oplog's size
    /// (`storage.oplogMinRetentionHours`) [default: 0].
    #[arg(long = "oplogMinRetentionHours", alias = "oplog-min-retention-hours")]
    pub oplog_min_retention_hours: Option<f64>,
    /// On a multi-member set: a member writes a snapshot of its data after this many Raft
    /// log entries since its last, and purges the log before it; a member behind the purged
    /// log catches up by a snapshot (`replication.raftSnapshotEntries`) [default: 1000000]. A
    /// snapshot reads the whole store through the cache, so fewer are cheaper.
    #[arg(long = "raftSnapshotEntries", alias = "raft-snapshot-entries")]
    pub raft_snapshot_entries: Option<u64>,
    /// Seconds a multi-document transaction may run before it is aborted (MongoDB's
    /// `transactionLifetimeLimitSeconds`) [default: 60].
    #[arg(long)]
    pub transaction_lifetime_limit_s: Option<u64>,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (e.g. `127.0.0.1:9216`). Off by
    /// default.
    #[arg(long = "metricsAddr", alias = "metrics-addr")]
    pub metrics_addr: Option<String>,
    /// Write the log to this file instead of standard error (mongod's `--logpath`).
    #[arg(long)]
    pub logpath: Option<PathBuf>,
    /// With `--logpath`: append to an existing file instead of renaming it aside first.
    #[arg(long)]
    pub logappend: bool,
    /// `text` (default) or `json`: MongoDB's structured log lines
    /// (`{"t":{"$date":..},"s":"I","c":"NETWORK","id":..,"ctx":"conn1","msg":..,"attr":{..}}`).
    #[arg(long = "logFormat", alias = "log-format")]
    pub log_format: Option<String>,
    /// The profiling level every database starts with: 0 off, 1 slow operations, 2 all
    /// (mongod's `--profile`, `operationProfiling.mode`).
    #[arg(long)]
    pub profile: Option<i32>,
    /// Write the process id to this file while running (`processManagement.pidFilePath`).
    #[arg(long)]
    pub pidfilepath: Option<PathBuf>,
    /// Writes are refused while the data directory's filesystem has less than this percent
    /// free (TokuMX's `fsRedzone`) [default: 5].
    #[arg(long = "fsRedzone", alias = "fs-redzone")]
    pub fs_redzone: Option<u64>,
    /// ... or less than this many bytes free [default: 64MB].
    #[arg(long = "fsRedzoneBytes", alias = "fs-redzone-bytes")]
    pub fs_redzone_bytes: Option<u64>,
    /// A server parameter at start-up, `NAME=VALUE` (MongoDB's `--setParameter`), e.g.
    /// `ttlMonitorSleepSecs=1`; repeatable. The names are those `setParameter` accepts.
    #[arg(
        long = "setParameter",
        alias = "set-parameter",
        value_name = "NAME=VALUE"
    )]
    pub set_parameter: Vec<String>,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub port: u16,
    pub bind: String,
    pub dbpath: PathBuf,
    pub cache_bytes: usize,
    pub journal_interval: Duration,
    pub checkpoint_interval: Duration,
    pub slow: Duration,
    pub log_level: String,
    pub cursor_timeout: Duration,
    /// `--maxConns`: connections beyond this many are refused.
    pub max_conns: u64,
    pub fast_updates: bool,
    pub directio: bool,
    /// `--compression`, checked at start (`none`, `lz4`, `zstd`, `zstd:LEVEL`).
    pub compression: String,
    /// `--enable-test-commands`: `configureFailPoint` is answered.
    pub test_commands: bool,
    /// `--auth`: commands need an authenticated user holding the right roles.
    pub auth: bool,
    /// `--keyFile`'s key (whitespace removed): members of a set authenticate one another
    /// with it (`crate::raft_transport`).
    pub cluster_key: Option<Vec<u8>>,
    /// `--tlsMode` and its files.
    pub tls: crate::tls::Settings,
    /// `--metricsAddr`.
    pub metrics_addr: Option<String>,
    /// `--logpath` and `--logappend`.
    pub logpath: Option<PathBuf>,
    pub logappend: bool,
    /// `--logFormat json`.
    pub log_json: bool,
    /// `--profile`: every database's starting profiling level.
    pub profile: i32,
    /// `--pidfilepath`.
    pub pidfilepath: Option<PathBuf>,
    /// The free-space red zone: a percentage and a byte floor.
    pub fs_redzone_percent: u64,
    pub fs_redzone_bytes: u64,
    /// `--replSet NAME`: the one-member replica set this server is the primary of.
    pub repl_set: Option<String>,
    /// The oplog's size limit and minimum retention.
    pub oplog: silt_collection::oplog::OplogOptions,
    /// `--raftSnapshotEntries`.
    pub raft_snapshot_entries: u64,
    /// `transactionLifetimeLimitSeconds`.
    pub txn_lifetime: Duration,
    /// The arguments as given, for `getCmdLineOpts`.
    pub argv: Vec<String>,
    /// `--setParameter` pairs, applied once the server is up.
    pub set_parameters: Vec<(String, String)>,
}

/// The key of a `--keyFile`, as mongod reads it: whitespace is ignored, the rest must be 6
/// to 1024 base64 characters, and the file must not be readable by group or others.
fn read_key_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let shown = path.display();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta =
            std::fs::metadata(path).map_err(|e| format!("error getting file {shown}: {e}"))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(format!("permissions on {shown} are too open"));
        }
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("error reading file {shown}: {e}"))?;
    let key: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if key.len() < 6 || key.len() > 1024 {
        return Err(format!(
            "security key in {shown} must be between 6 and 1024 characters"
        ));
    }
    if let Some(b) = key
        .iter()
        .find(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')))
    {
        return Err(format!(
            "invalid char in key file {shown}: {}",
            char::from(*b)
        ));
    }
    Ok(key)
}

/// The compressions the engine writes (`silt_storage::Compression::parse` reads the same).
fn valid_compression(c: &str) -> bool {
    matches!(c, "none" | "lz4" | "zstd")
        || c.strip_prefix("zstd:")
            .and_then(|l| l.parse::<i32>().ok())
            .is_some_and(|l| (1..=22).contains(&l))
}

impl Flags {
    /// Resolve flags, the config file and defaults.
    pub(crate) fn resolve(mut self, argv: Vec<String>) -> Result<Config, String> {
        if let Some(path) = self.config.clone() {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            match yaml::parse(&text) {
                Some(doc) => doc.and_then(|d| self.merge_yaml(&d)),
                None => self.merge_file(&text),
            }
            .map_err(|e| format!("config file {}: {e}", path.display()))?;
        }
        let cache_bytes = match &self.cache_size {
            Some(s) => parse_size(s).ok_or_else(|| {
                format!("--cache-size: cannot parse `{s}` (use a number with a unit: 64MB, 2GB)")
            })?,
            None => default_cache_bytes(),
        };
        if cache_bytes < 16 << 20 {
            return Err("--cache-size must be at least 16MB".into());
        }
        Ok(Config {
            port: self.port.unwrap_or(27017),
            bind: self.bind.unwrap_or_else(|| "127.0.0.1".into()),
            dbpath: self.dbpath.unwrap_or_else(|| PathBuf::from("./silt-data")),
            cache_bytes,
            journal_interval: Duration::from_millis(self.journal_commit_interval_ms.unwrap_or(100)),
            checkpoint_interval: Duration::from_secs(self.checkpoint_interval_s.unwrap_or(60)),
            slow: Duration::from_millis(self.slow_ms.unwrap_or(100)),
            log_level: self.log_level.unwrap_or_else(|| "info".into()),
            cursor_timeout: Duration::from_secs(self.cursor_timeout_s.unwrap_or(600)),
            max_conns: self.max_conns.unwrap_or(1_000_000).max(1),
            fast_updates: self.fast_updates,
            directio: self.directio,
            compression: match self.compression {
                None => "zstd".into(),
                Some(c) if valid_compression(&c) => c,
                Some(c) => {
                    return Err(format!(
                        "--compression: `{c}` is not none, lz4, zstd or zstd:LEVEL (1-22)"
                    ))
                }
            },
            test_commands: self.enable_test_commands,
            auth: self.auth || self.key_file.is_some(),
            cluster_key: match &self.key_file {
                Some(p) => Some(read_key_file(p)?),
                None => None,
            },
            tls: crate::tls::Settings {
                mode: self.tls_mode,
                cert_key_file: self.tls_cert_key_file,
                ca_file: self.tls_ca_file,
                allow_without_certs: self.tls_allow_without_certs,
            },
            repl_set: self.repl_set.filter(|n| !n.is_empty()),
            raft_snapshot_entries: self.raft_snapshot_entries.unwrap_or(1_000_000).max(1),
            oplog: silt_collection::oplog::OplogOptions {
                max_bytes: self.oplog_size_mb.unwrap_or(990).max(1) << 20,
                min_retention: Duration::from_secs_f64(
                    (self.oplog_min_retention_hours.unwrap_or(0.0) * 3600.0).clamp(0.0, 1e12),
                ),
            },
            txn_lifetime: Duration::from_secs(
                self.transaction_lifetime_limit_s.unwrap_or(60).max(1),
            ),
            metrics_addr: self.metrics_addr.filter(|a| !a.is_empty()),
            logpath: self.logpath,
            logappend: self.logappend,
            log_json: match self.log_format.as_deref() {
                None | Some("text") => false,
                Some("json") => true,
                Some(other) => return Err(format!("--logFormat: `{other}` is not text or json")),
            },
            profile: match self.profile.unwrap_or(0) {
                p @ 0..=2 => p,
                p => return Err(format!("--profile: {p} is not 0, 1 or 2")),
            },
            pidfilepath: self.pidfilepath,
            fs_redzone_percent: match self.fs_redzone.unwrap_or(5) {
                p @ 0..=99 => p,
                p => return Err(format!("--fsRedzone: {p} is not a percentage below 100")),
            },
            fs_redzone_bytes: self.fs_redzone_bytes.unwrap_or(64 << 20),
            argv,
            set_parameters: self
                .set_parameter
                .iter()
                .map(|p| {
                    p.split_once('=')
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .ok_or_else(|| format!("--setParameter: expected NAME=VALUE, got `{p}`"))
                })
                .collect::<Result<_, _>>()?,
        })
    }
}

/// `64MB`, `2GB`, `512k`, `1048576` -> bytes (binary multiples, as mongod's cache sizes).
#[expect(
    clippy::cast_possible_truncation,
    reason = "the size is finite and non-negative; a size past usize saturates"
)]
pub(crate) fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let v = num * mult;
    (v.is_finite() && v >= 0.0).then_some(v as usize)
}

/// Half of the memory this process may use: the smaller of physical memory and the cgroup
/// limit (v2 `memory.max`, v1 `memory.limit_in_bytes`).
pub(crate) fn default_cache_bytes() -> usize {
    let mut limit = total_memory().unwrap_or(1 << 30);
    for p in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        if let Some(v) = std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            limit = limit.min(v);
        }
    }
    ((limit / 2) as usize).max(16 << 20)
}

/// Physical memory from /proc/meminfo.
pub(crate) fn total_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MB"), Some(64 << 20));
        assert_eq!(parse_size("2GB"), Some(2 << 30));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("12 parsecs"), None);
    }

    #[test]
    fn config_file_fills_unset_flags() {
        let mut f = Flags {
            port: Some(1),
            ..Flags::default()
        };
        f.merge_file("port = 2\n# comment\ncache-size: 64MB\nbind = \"0.0.0.0\"\n")
            .unwrap();
        let c = f.resolve(vec![]).unwrap();
        assert_eq!(c.port, 1);
        assert_eq!(c.bind, "0.0.0.0");
        assert_eq!(c.cache_bytes, 64 << 20);
        assert!(Flags::default().merge_file("nonsense = 1").is_err());
    }
}
