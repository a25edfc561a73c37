//! The older `name = value` config file (one setting per line, `#` starting a comment, names
//! being the long flag names: `port`, `bind`, `dbpath`, `cache-size`, ...), read when the
//! file is not the YAML `mongod.conf` layout.

use std::path::PathBuf;

use super::Flags;

impl Flags {
    /// Fill unset flags from the config file.
    pub(super) fn merge_file(&mut self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let Some((k, v)) = line.split_once('=').or_else(|| line.split_once(':')) else {
                return Err(format!("line {}: expected `name = value`", n + 1));
            };
            let (k, v) = (
                k.trim().replace('_', "-"),
                v.trim().trim_matches('"').to_string(),
            );
            let num = |v: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("line {}: {k} must be a number", n + 1))
            };
            match k.as_str() {
                "port" => {
                    let p = num(&v)?;
                    let p = u16::try_from(p).map_err(|_| format!("line {}: bad port", n + 1))?;
                    self.port.get_or_insert(p);
                }
                "bind" | "bind-ip" => {
                    self.bind.get_or_insert(v);
                }
                "dbpath" => {
                    self.dbpath.get_or_insert(PathBuf::from(v));
                }
                "cache-size" => {
                    self.cache_size.get_or_insert(v);
                }
                "journal-commit-interval-ms" => {
                    let x = num(&v)?;
                    self.journal_commit_interval_ms.get_or_insert(x);
                }
                "checkpoint-interval-s" => {
                    let x = num(&v)?;
                    self.checkpoint_interval_s.get_or_insert(x);
                }
                "slow-ms" => {
                    let x = num(&v)?;
                    self.slow_ms.get_or_insert(x);
                }
                "log-level" => {
                    self.log_level.get_or_insert(v);
                }
                "fast-updates" => {
                    self.fast_updates =
                        self.fast_updates || matches!(v.as_str(), "true" | "1" | "yes");
                }
                "enable-test-commands" => {
                    self.enable_test_commands =
                        self.enable_test_commands || matches!(v.as_str(), "true" | "1" | "yes");
                }
                "auth" => {
                    self.auth = self.auth || matches!(v.as_str(), "true" | "1" | "yes");
                }
                "keyFile" => {
                    self.key_file.get_or_insert_with(|| v.into());
                }
                "directio" => {
                    self.directio = self.directio || matches!(v.as_str(), "true" | "1" | "yes");
                }
                "compression" => {
                    self.compression.get_or_insert(v.clone());
                }
                "maxConns" | "max-conns" | "maxIncomingConnections" => {
                    let x = num(&v)?;
                    self.max_conns.get_or_insert(x);
                }
                "cursor-timeout-s" => {
                    let x = num(&v)?;
                    self.cursor_timeout_s.get_or_insert(x);
                }
                "replSet" | "repl-set" => {
                    self.repl_set.get_or_insert(v);
                }
                "oplogSize" | "oplog-size" => {
                    let x = num(&v)?;
                    self.oplog_size_mb.get_or_insert(x);
                }
                "transaction-lifetime-limit-s" => {
                    let x = num(&v)?;
                    self.transaction_lifetime_limit_s.get_or_insert(x);
                }
                "setParameter" | "set-parameter" => self.set_parameter.push(v),
                _ => return Err(format!("line {}: unknown setting `{k}`", n + 1)),
            }
        }
        Ok(())
    }
}
