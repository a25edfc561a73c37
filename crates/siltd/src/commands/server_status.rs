//! The `serverStatus` command.

use std::sync::atomic::Ordering;

use bson::doc;

use super::common::{host, MONGO_VERSION};
use crate::state::{CmdResult, Server};

fn rss_mb() -> (i64, i64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmSize:"))
}

pub fn server_status(s: &Server) -> CmdResult {
    let up = s.started.elapsed();
    let (rss, virt) = rss_mb();
    let es = s.store.engine_stats();
    let poisoned = s.store.poison_cause().map(|c| c.to_string());
    let o = &s.ops;
    let (sessions, open_txns) = s.sessions.counts();
    let mut d = doc! {
        "host": host(s),
        "version": MONGO_VERSION,
        "process": "siltd",
        "pid": std::process::id() as i64,
        "uptime": up.as_secs_f64().floor(),
        "uptimeMillis": up.as_millis() as i64,
        "uptimeEstimate": up.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "connections": {
            "current": s.conns_current.load(Ordering::Relaxed) as i64,
            "available": s.cfg.max_conns.saturating_sub(s.conns_current.load(Ordering::Relaxed)) as i64,
            "totalCreated": s.conns_total.load(Ordering::Relaxed) as i64,
        },
        "opcounters": {
            "insert": o.insert.load(Ordering::Relaxed) as i64,
            "query": o.query.load(Ordering::Relaxed) as i64,
            "update": o.update.load(Ordering::Relaxed) as i64,
            "delete": o.delete.load(Ordering::Relaxed) as i64,
            "getmore": o.getmore.load(Ordering::Relaxed) as i64,
            "command": o.command.load(Ordering::Relaxed) as i64,
        },
        "mem": { "bits": 64, "resident": rss, "virtual": virt, "supported": true },
        "metrics": {
            "cursor": { "open": { "total": s.cursors.len() as i64 } },
            "fastUpdates": s.fast.metrics(),
            "ttl": s.ttl.metrics(),
        },
        "storageEngine": {
            "name": "silt",
            "supportsCommittedReads": true,
            "supportsSnapshotReadConcern": s.repl.is_some(),
            "persistent": true,
        },
        "silt": {
            "cache": {
                "budgetBytes": es.cache_budget as i64,
                "usedBytes": es.cache_used as i64,
                "peakBytes": es.cache_peak as i64,
                "evictions": es.evictions as i64,
                "partialEvictions": es.partial_evictions as i64,
                "writebacks": es.writebacks as i64,
                "misses": es.misses as i64,
            },
            "checkpoints": es.checkpoints as i64,
            "logFiles": es.log_files as i64,
            "log": {
                "files": es.log_files as i64,
                "bytesWritten": es.log_bytes as i64,
                "syncs": es.log_syncs as i64,
            },
            "bytesOnDisk": es.bytes_on_disk as i64,
            "writable": poisoned.is_none(),
            "redZone": s.redzone.status(),
            "poisoned": poisoned,
            "transactions": {
                "live": es.live_txns as i64,
                "snapshots": es.snapshots as i64,
                "locksHeld": es.locks_held as i64,
                "lockWaits": es.lock_waits as i64,
                "lockTimeouts": es.lock_timeouts as i64,
                "deadlocks": es.deadlocks as i64,
            },
        },
        "logicalSessionRecordCache": { "activeSessionsCount": sessions as i32 },
        "transactions": { "currentOpen": open_txns as i64 },
    };
    if let Some(rs) = &s.repl {
        let mut r = doc! { "isWritablePrimary": true };
        rs.hello_fields(&mut r);
        d.insert("repl", r);
    }
    Ok(d)
}
