//! The Prometheus endpoint (`--metricsAddr HOST:PORT`, off by default): `GET /metrics`
//! answers every number `serverStatus` shows (opcounters, connections, cache, checkpoints,
//! the log, fast updates, transactions, TTL) in the text exposition format, named after its
//! `serverStatus` path: `opcounters.insert` is `silt_opcounters_insert`, and
//! `silt.cache.usedBytes` (siltd's own section) is `silt_cache_used_bytes`. One thread serves
//! it, one request at a time, with short socket timeouts so that a stuck scraper cannot hold
//! it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use bson::{Bson, Document};

use crate::state::Server;

/// `serverStatus` paths (or prefixes, ending in `.`) that only grow: exported as counters.
const COUNTERS: &[&str] = &[
    "opcounters.",
    "connections.totalCreated",
    "silt.cache.evictions",
    "silt.cache.partialEvictions",
    "silt.cache.writebacks",
    "silt.cache.misses",
    "silt.checkpoints",
    "silt.log.bytesWritten",
    "silt.log.syncs",
    "silt.transactions.lockWaits",
    "silt.transactions.lockTimeouts",
    "silt.transactions.deadlocks",
    "metrics.fastUpdates.",
    "metrics.ttl.",
];

/// Paths that are not figures worth a series.
const SKIPPED: &[&str] = &[
    "pid",
    "uptimeEstimate",
    "uptimeMillis",
    "mem.bits",
    "silt.logFiles",
];

fn metric_name(path: &str) -> String {
    // siltd's own section needs no second prefix.
    let path = path.strip_prefix("silt.").unwrap_or(path);
    let mut out = String::from("silt_");
    let mut prev = '.';
    for c in path.chars() {
        match c {
            '.' => out.push('_'),
            c if c.is_ascii_uppercase() => {
                if prev != '.' {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            }
            c if c.is_ascii_alphanumeric() => out.push(c),
            _ => out.push('_'),
        }
        prev = c;
    }
    out
}

fn flatten(prefix: &str, d: &Document, out: &mut Vec<(String, f64)>) {
    for (k, v) in d {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let x = match v {
            Bson::Document(inner) => {
                flatten(&path, inner, out);
                continue;
            }
            Bson::Int32(i) => f64::from(*i),
            Bson::Int64(i) => *i as f64,
            Bson::Double(f) => *f,
            Bson::Boolean(b) => f64::from(u8::from(*b)),
            _ => continue,
        };
        if !SKIPPED.contains(&path.as_str()) {
            out.push((path, x));
        }
    }
}

/// The exposition text of `status` (a `serverStatus` reply).
pub(crate) fn render(status: &Document) -> String {
    let mut figures = Vec::new();
    flatten("", status, &mut figures);
    let mut text = String::new();
    for (path, x) in figures {
        if path == "ok" {
            continue;
        }
        let name = metric_name(&path);
        let kind = if COUNTERS
            .iter()
            .any(|c| path == *c || (c.ends_with('.') && path.starts_with(c)))
        {
            "counter"
        } else {
            "gauge"
        };
        text.push_str(&format!(
            "# HELP {name} serverStatus {path}\n# TYPE {name} {kind}\n{name} {x}\n"
        ));
    }
    text
}

/// Start serving `addr`; an address that cannot be bound stops the start.
pub(crate) fn spawn(s: &Arc<Server>, addr: &str) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| format!("--metricsAddr: cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "serving Prometheus metrics at /metrics");
    let s = s.clone();
    std::thread::Builder::new()
        .name("siltd-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if s.shutting_down() {
                    break;
                }
                if let Ok(c) = conn {
                    if let Err(e) = answer(&s, c) {
                        tracing::debug!(error = %e, "metrics request failed");
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    Ok(())
}

fn answer(s: &Server, mut c: TcpStream) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = if method != "GET" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        )
    } else if path == "/metrics" || path.starts_with("/metrics?") {
        match crate::commands::server_status(s) {
            Ok(d) => ("200 OK", "text/plain; version=0.0.4", render(&d)),
            Err(e) => (
                "500 Internal Server Error",
                "text/plain",
                format!("{}\n", e.msg),
            ),
        }
    } else {
        ("404 Not Found", "text/plain", "try /metrics\n".to_string())
    };
    write!(
        c,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_kinds() {
        assert_eq!(metric_name("opcounters.insert"), "silt_opcounters_insert");
        assert_eq!(metric_name("silt.cache.usedBytes"), "silt_cache_used_bytes");
        let d = bson::doc! { "opcounters": { "insert": 3i64 }, "connections": { "current": 2 }, "host": "h" };
        let t = render(&d);
        assert!(t.contains("# TYPE silt_opcounters_insert counter\nsilt_opcounters_insert 3\n"));
        assert!(t.contains("# TYPE silt_connections_current gauge\nsilt_connections_current 2\n"));
        assert!(!t.contains("host"));
    }
}
