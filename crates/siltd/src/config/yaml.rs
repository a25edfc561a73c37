//! The YAML `mongod.conf` layout (`net.port`, `storage.dbPath`, `security.authorization`,
//! ...), with siltd's own settings under `silt:`. A key siltd does not know, or a value it
//! cannot honour (`storage.directoryPerDB: true`, `processManagement.fork: true`), stops the
//! start with the key named.

use std::path::PathBuf;

use yaml_rust2::{Yaml, YamlLoader};

use super::Flags;

/// The sections of `mongod.conf` siltd reads; a file whose top level has one of them is read
/// as YAML.
pub(super) const SECTIONS: &[&str] = &[
    "net",
    "storage",
    "security",
    "systemLog",
    "operationProfiling",
    "replication",
    "setParameter",
    "processManagement",
    "silt",
];

/// The YAML document if `text` is a `mongod.conf`-style file (one with an indented line or a
/// known section at the top level); `None` for the older `name = value` lines.
pub(super) fn parse(text: &str) -> Option<Result<Yaml, String>> {
    let is_yaml = text.lines().any(|l| {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            return false;
        }
        l.starts_with([' ', '\t'])
            || SECTIONS.contains(&t.trim_end_matches(':').trim())
            || t.starts_with("---")
    });
    if !is_yaml {
        return None;
    }
    Some(match YamlLoader::load_from_str(text) {
        Ok(docs) => match docs.into_iter().next() {
            Some(d @ Yaml::Hash(_)) => Ok(d),
            _ => Err("expected a YAML mapping of sections (net:, storage:, ...)".into()),
        },
        Err(e) => Err(format!("not valid YAML: {e}")),
    })
}

/// Every leaf as `(dotted.path, value)`, in file order.
fn leaves(prefix: &str, y: &Yaml, out: &mut Vec<(String, Yaml)>) -> Result<(), String> {
    match y {
        Yaml::Hash(h) => {
            for (k, v) in h {
                let k = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    other => return Err(format!("{prefix}: key {other:?} is not a name")),
                };
                let path = if prefix.is_empty() {
                    k
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, v, out)?;
            }
            Ok(())
        }
        Yaml::Array(_) => Err(format!("{prefix}: a list is not a value siltd reads")),
        Yaml::Null => Ok(()),
        _ => {
            out.push((prefix.to_string(), y.clone()));
            Ok(())
        }
    }
}

fn text(key: &str, v: &Yaml) -> Result<String, String> {
    match v {
        Yaml::String(s) | Yaml::Real(s) => Ok(s.clone()),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Boolean(b) => Ok(b.to_string()),
        _ => Err(format!("{key}: expected a value")),
    }
}

fn number(key: &str, v: &Yaml) -> Result<u64, String> {
    match v {
        Yaml::Integer(i) if *i >= 0 => Ok(*i as u64),
        Yaml::String(s) => s
            .parse()
            .map_err(|_| format!("{key}: `{s}` is not a whole number")),
        _ => Err(format!("{key}: expected a whole number")),
    }
}

fn boolean(key: &str, v: &Yaml) -> Result<bool, String> {
    match v {
        Yaml::Boolean(b) => Ok(*b),
        Yaml::String(s) if s == "true" => Ok(true),
        Yaml::String(s) if s == "false" => Ok(false),
        _ => Err(format!("{key}: expected true or false")),
    }
}

fn unsupported(key: &str, why: &str) -> String {
    format!("{key}: {why} (not supported by siltd)")
}

impl Flags {
    /// Fill unset flags from a parsed `mongod.conf`.
    pub(super) fn merge_yaml(&mut self, doc: &Yaml) -> Result<(), String> {
        let mut all = Vec::new();
        leaves("", doc, &mut all)?;
        for (key, v) in &all {
            let k = key.as_str();
            if let Some(name) = k.strip_prefix("setParameter.") {
                self.set_parameter.push(format!("{name}={}", text(k, v)?));
                continue;
            }
            match k {
                "net.port" => {
                    let p = u16::try_from(number(k, v)?).map_err(|_| format!("{k}: bad port"))?;
                    self.port.get_or_insert(p);
                }
                "net.bindIp" => {
                    let ip = text(k, v)?;
                    if ip.contains(',') {
                        return Err(unsupported(k, "siltd listens on one address"));
                    }
                    self.bind.get_or_insert(ip.trim().to_string());
                }
                "net.bindIpAll" => {
                    if boolean(k, v)? {
                        self.bind.get_or_insert("0.0.0.0".into());
                    }
                }
                "net.maxIncomingConnections" => {
                    let n = number(k, v)?;
                    self.max_conns.get_or_insert(n);
                }
                // IPv6 is always on: an IPv6 address in net.bindIp is listened on.
                "net.ipv6" => {
                    boolean(k, v)?;
                }
                "net.unixDomainSocket.enabled" => {
                    if boolean(k, v)? {
                        return Err(unsupported(k, "siltd listens on TCP only"));
                    }
                }
                "net.tls.mode" => {
                    let m = text(k, v)?;
                    self.tls_mode.get_or_insert(m);
                }
                "net.tls.certificateKeyFile" => {
                    let p = PathBuf::from(text(k, v)?);
                    self.tls_cert_key_file.get_or_insert(p);
                }
                "net.tls.CAFile" => {
                    let p = PathBuf::from(text(k, v)?);
                    self.tls_ca_file.get_or_insert(p);
                }
                "net.tls.allowConnectionsWithoutCertificates" => {
                    self.tls_allow_without_certs |= boolean(k, v)?;
                }
                "storage.dbPath" => {
                    let p = PathBuf::from(text(k, v)?);
                    self.dbpath.get_or_insert(p);
                }
                "storage.directoryPerDB" => {
                    if boolean(k, v)? {
                        return Err(unsupported(
                            k,
                            "every database shares the data directory's files",
                        ));
                    }
                }
                "storage.journal.enabled" => {
                    if !boolean(k, v)? {
                        return Err(unsupported(k, "the log cannot be turned off"));
                    }
                }
                "storage.journal.commitIntervalMs" => {
                    let n = number(k, v)?;
                    self.journal_commit_interval_ms.get_or_insert(n);
                }
                "storage.syncPeriodSecs" => {
                    let n = number(k, v)?;
                    self.checkpoint_interval_s.get_or_insert(n);
                }
                "storage.engine" => {
                    let e = text(k, v)?;
                    if e != "silt" {
                        return Err(unsupported(k, &format!("the engine is silt, not {e}")));
                    }
                }
                "security.keyFile" => {
                    let p = PathBuf::from(text(k, v)?);
                    self.key_file.get_or_insert(p);
                }
                "security.authorization" => match text(k, v)?.as_str() {
                    "enabled" => self.auth = true,
                    "disabled" => {}
                    other => {
                        return Err(format!("{k}: `{other}` is not enabled or disabled"));
                    }
                },
                "systemLog.destination" => match text(k, v)?.as_str() {
                    "file" => {
                        if !all.iter().any(|(p, _)| p == "systemLog.path") {
                            return Err(format!("{k}: file needs systemLog.path"));
                        }
                    }
                    "syslog" => return Err(unsupported(k, "syslog")),
                    other => return Err(format!("{k}: `{other}` is not file")),
                },
                "systemLog.path" => {
                    let p = PathBuf::from(text(k, v)?);
                    self.logpath.get_or_insert(p);
                }
                "systemLog.logAppend" => self.logappend |= boolean(k, v)?,
                "systemLog.verbosity" => {
                    let level = match number(k, v)? {
                        0 => "info",
                        1 => "debug",
                        _ => "trace",
                    };
                    self.log_level.get_or_insert(level.into());
                }
                "systemLog.quiet" => {
                    if boolean(k, v)? {
                        self.log_level.get_or_insert("warn".into());
                    }
                }
                "systemLog.format" => {
                    let f = text(k, v)?;
                    self.log_format.get_or_insert(f);
                }
                "operationProfiling.slowOpThresholdMs" => {
                    let n = number(k, v)?;
                    self.slow_ms.get_or_insert(n);
                }
                "operationProfiling.mode" => {
                    let level = match text(k, v)?.as_str() {
                        "off" => 0,
                        "slowOp" => 1,
                        "all" => 2,
                        other => return Err(format!("{k}: `{other}` is not off, slowOp or all")),
                    };
                    self.profile.get_or_insert(level);
                }
                "replication.replSetName" => {
                    let n = text(k, v)?;
                    self.repl_set.get_or_insert(n);
                }
                "replication.raftSnapshotEntries" => {
                    let n = number(k, v)?;
                    self.raft_snapshot_entries.get_or_insert(n);
                }
                "replication.oplogSizeMB" => {
                    let n = number(k, v)?;
                    self.oplog_size_mb.get_or_insert(n);
                }
                "storage.oplogMinRetentionHours" => {
                    let h = match v {
                        Yaml::Integer(i) if *i >= 0 => *i as f64,
                        Yaml::Real(r) => r
                            .parse::<f64>()
                            .ok()
                            .filter(|h| *h >= 0.0)
                            .ok_or_else(|| format!("{k}: `{r}` is not a number of hours"))?,
                        _ => return Err(format!("{k}: expected a number of hours")),
                    };
                    self.oplog_min_retention_hours.get_or_insert(h);
                }
                "processManagement.fork" => {
                    if boolean(k, v)? {
                        return Err(unsupported(k, "run siltd under a service manager instead"));
                    }
                }
                "processManagement.pidFilePath" => {
                    let p = PathBuf::from(text(k, v)?);
                    self.pidfilepath.get_or_insert(p);
                }
                "silt.cacheSize" => {
                    let c = text(k, v)?;
                    self.cache_size.get_or_insert(c);
                }
                "silt.checkpointIntervalSecs" => {
                    let n = number(k, v)?;
                    self.checkpoint_interval_s.get_or_insert(n);
                }
                "silt.cursorTimeoutSecs" => {
                    let n = number(k, v)?;
                    self.cursor_timeout_s.get_or_insert(n);
                }
                "silt.transactionLifetimeLimitSecs" => {
                    let n = number(k, v)?;
                    self.transaction_lifetime_limit_s.get_or_insert(n);
                }
                "silt.fastUpdates" => self.fast_updates |= boolean(k, v)?,
                "silt.directio" => self.directio |= boolean(k, v)?,
                "silt.compression" => {
                    let c = text(k, v)?;
                    self.compression.get_or_insert(c);
                }
                "silt.enableTestCommands" => self.enable_test_commands |= boolean(k, v)?,
                "silt.logLevel" => {
                    let l = text(k, v)?;
                    self.log_level.get_or_insert(l);
                }
                "silt.metricsAddr" => {
                    let a = text(k, v)?;
                    self.metrics_addr.get_or_insert(a);
                }
                "silt.fsRedzone" => {
                    let n = number(k, v)?;
                    self.fs_redzone.get_or_insert(n);
                }
                "silt.fsRedzoneBytes" => {
                    let n = number(k, v)?;
                    self.fs_redzone_bytes.get_or_insert(n);
                }
                // Settings that change no answer here, found in packaged and common mongod.conf
                // files: the zone database's path (siltd carries its own), another engine's
                // tuning, server-side JavaScript (which siltd never runs; `$where` and
                // `$function` are refused), wire compressors (negotiated per connection) and the
                // log's time format.
                "processManagement.timeZoneInfo"
                | "security.javascriptEnabled"
                | "net.compression.compressors"
                | "systemLog.timeStampFormat" => {
                    tracing::debug!(setting = k, "accepted; it changes nothing in siltd");
                }
                _ if k.starts_with("storage.wiredTiger.") => {
                    tracing::debug!(setting = k, "another engine's setting, accepted");
                }
                _ => return Err(format!("unknown setting `{k}`")),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mongod_conf() {
        let y = parse(
            "# a mongod.conf\nnet:\n  port: 27018\n  bindIp: 0.0.0.0\n  tls:\n    mode: preferTLS\nstorage:\n  dbPath: /tmp/x\n  directoryPerDB: false\nsecurity:\n  authorization: enabled\nsetParameter:\n  ttlMonitorSleepSecs: 1\nsilt:\n  cacheSize: 64MB\n",
        )
        .unwrap()
        .unwrap();
        let mut f = Flags::default();
        f.merge_yaml(&y).unwrap();
        assert_eq!(f.port, Some(27018));
        assert_eq!(f.bind.as_deref(), Some("0.0.0.0"));
        assert_eq!(f.tls_mode.as_deref(), Some("preferTLS"));
        assert!(f.auth);
        assert_eq!(f.set_parameter, vec!["ttlMonitorSleepSecs=1".to_string()]);
        assert_eq!(f.cache_size.as_deref(), Some("64MB"));
        for (bad, named) in [
            ("net:\n  prot: 1\n", "net.prot"),
            (
                "storage:\n  directoryPerDB: true\n",
                "storage.directoryPerDB",
            ),
            ("net:\n  bindIp: [a, b]\n", "net.bindIp"),
        ] {
            let e = Flags::default()
                .merge_yaml(&parse(bad).unwrap().unwrap())
                .unwrap_err();
            assert!(e.contains(named), "{e}");
        }
        assert!(parse("port = 1\n").is_none());
    }
}
