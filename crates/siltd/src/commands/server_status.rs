//! The `serverStatus` command.

use std::sync::atomic::Ordering;

use bson::{doc, Document};

use super::common::{host, MONGO_VERSION};
use crate::state::{CmdResult, OpCounters, Server};

/// A number field of `/proc/self/status` (`VmRSS:  1234 kB` gives 1234).
fn status_field(status: &str, name: &str) -> i64 {
    status
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
}

/// `extra_info` as mongod reports it on Linux (from `/proc`, as `getrusage` would give it).
fn extra_info(status: &str) -> Document {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest: Vec<i64> = stat
        .rsplit_once(')')
        .map(|(_, r)| {
            r.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    let at = |i: usize| rest.get(i).copied().unwrap_or(0);
    // After ')': state(0) ppid pgrp session tty tpgid flags minflt(7) cminflt majflt(9)
    // cmajflt utime(11) stime(12), in clock ticks of 10 ms.
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let io_field = |name: &str| status_field(&io, name);
    doc! {
        "note": "fields vary by platform",
        "user_time_us": at(11) * 10_000,
        "system_time_us": at(12) * 10_000,
        "maximum_resident_set_kb": status_field(status, "VmHWM:"),
        "input_blocks": io_field("read_bytes:") / 512,
        "output_blocks": io_field("write_bytes:") / 512,
        "page_reclaims": at(7),
        "page_faults": at(9),
        "voluntary_context_switches": status_field(status, "voluntary_ctxt_switches:"),
        "involuntary_context_switches": status_field(status, "nonvoluntary_ctxt_switches:"),
    }
}

/// The operation counters' shape, for `opcounters` and `opcountersRepl`.
fn opcounters(o: &OpCounters) -> Document {
    doc! {
        "insert": o.insert.load(Ordering::Relaxed) as i64,
        "query": o.query.load(Ordering::Relaxed) as i64,
        "update": o.update.load(Ordering::Relaxed) as i64,
        "delete": o.delete.load(Ordering::Relaxed) as i64,
        "getmore": o.getmore.load(Ordering::Relaxed) as i64,
        "command": o.command.load(Ordering::Relaxed) as i64,
    }
}

/// mongod's `catalogStats`: collections and views over every database, the system ones
/// (`admin`, `config`, `local`, `system.*`) counted apart.
fn catalog_stats(s: &Server) -> Document {
    let (mut colls, mut internal, mut capped, mut views, mut internal_views) = (0, 0, 0, 0, 0);
    for db in s.store().list_databases() {
        let system_db = matches!(db.as_str(), "admin" | "config" | "local");
        for (name, c) in s.store().list_collections(&db) {
            if system_db || name.starts_with("system.") {
                internal += 1;
            } else {
                colls += 1;
            }
            if c.options().get_bool("capped").unwrap_or(false) {
                capped += 1;
            }
        }
        let n = s.views().of_db(&db).len();
        if system_db {
            internal_views += n;
        } else {
            views += n;
        }
    }
    doc! {
        "collections": crate::num::int32(colls),
        "capped": crate::num::int32(capped),
        "clustered": 0,
        "timeseries": 0,
        "views": crate::num::int32(views),
        "internalCollections": crate::num::int32(internal),
        "internalViews": crate::num::int32(internal_views),
        "csfle": 0,
        "queryableEncryption": 0,
    }
}

pub(crate) fn server_status(s: &Server) -> CmdResult {
    let o = &s.ops();
    let up = s.uptime();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let (rss, virt) = (
        status_field(&status, "VmRSS:") / 1024,
        status_field(&status, "VmSize:") / 1024,
    );
    let (readers, writers) = s.inprog().active();
    let reads = o.query.load(Ordering::Relaxed)
        + o.getmore.load(Ordering::Relaxed)
        + o.command.load(Ordering::Relaxed);
    let writes = o.insert.load(Ordering::Relaxed)
        + o.update.load(Ordering::Relaxed)
        + o.delete.load(Ordering::Relaxed);
    let net = &s.net();
    let es = s.store().engine_stats();
    let poisoned = s.store().poison_cause().map(|c| c.to_string());
    let (sessions, open_txns) = s.sessions().counts();
    let mut d = doc! {
        "host": host(s),
        "version": MONGO_VERSION,
        "process": "siltd",
        "pid": std::process::id() as i64,
        "uptime": up.as_secs_f64().floor(),
        "uptimeMillis": crate::num::millis(up),
        "uptimeEstimate": up.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "connections": {
            "current": s.conns().current() as i64,
            "available": s.cfg().max_conns.saturating_sub(s.conns().current()) as i64,
            "totalCreated": s.conns().total() as i64,
        },
        "asserts": {
            "regular": 0,
            "warning": 0,
            "msg": 0,
            "user": crate::num::int32(net.user_asserts.load(Ordering::Relaxed)),
            "tripwire": 0,
            "rollovers": 0,
        },
        "network": {
            "bytesIn": net.bytes_in.load(Ordering::Relaxed) as i64,
            "bytesOut": net.bytes_out.load(Ordering::Relaxed) as i64,
            "physicalBytesIn": net.bytes_in.load(Ordering::Relaxed) as i64,
            "physicalBytesOut": net.bytes_out.load(Ordering::Relaxed) as i64,
            "numSlowDNSOperations": 0i64,
            "numSlowSSLOperations": 0i64,
            "numRequests": net.requests.load(Ordering::Relaxed) as i64,
        },
        "opcounters": opcounters(o),
        // No member replicates to this one: every counter stays 0, as on a standalone mongod.
        "opcountersRepl": opcounters(&OpCounters::default()),
        // siltd has no global lock: its writers take per-document and per-key locks (see
        // `silt.transactions`). mongod's shapes are kept so that tools read them: nothing ever
        // queues for a global lock, the clients running now are the active ones, and each
        // operation counts as one intent acquisition, as each takes mongod's global lock
        // once in an intent mode.
        "globalLock": {
            "totalTime": crate::num::micros(up),
            "currentQueue": { "total": 0, "readers": 0, "writers": 0 },
            "activeClients": {
                "total": crate::num::int32(readers + writers),
                "readers": crate::num::int32(readers),
                "writers": crate::num::int32(writers),
            },
        },
        "locks": {
            "Global": { "acquireCount": { "r": reads as i64, "w": writes as i64 } },
        },
        "extra_info": extra_info(&status),
        "mem": { "bits": 64, "resident": crate::num::int32(rss), "virtual": crate::num::int32(virt), "supported": true },
        "metrics": {
            "cursor": { "open": { "total": s.cursors().len() as i64 } },
            "fastUpdates": s.fast().metrics(),
            "ttl": s.ttl().metrics(),
        },
        "catalogStats": catalog_stats(s),
        "storageEngine": {
            "name": "silt",
            "supportsCommittedReads": true,
            "supportsSnapshotReadConcern": s.repl().is_some(),
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
            "redZone": s.redzone().status(),
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
        "logicalSessionRecordCache": { "activeSessionsCount": crate::num::int32(sessions) },
        "transactions": { "currentOpen": open_txns as i64 },
    };
    if s.repl().is_some() {
        let mut fields = Document::new();
        let mut r = doc! { "isWritablePrimary": s.repl_hello_fields(&mut fields) };
        r.extend(fields);
        if let Some(positions) = s.raft().and_then(|r| r.positions()) {
            r.insert("raft", positions);
        }
        d.insert("repl", r);
    }
    Ok(d)
}
