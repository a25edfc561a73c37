//! Handshake and administrative commands: what drivers and shells ask on connect.

use std::sync::atomic::Ordering;

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::state::{CmdResult, ConnInfo, Server};

/// The MongoDB release whose protocol and behaviour we follow.
pub const MONGO_VERSION: &str = "7.0.0";
/// Wire version of MongoDB 7.0.
pub const MAX_WIRE_VERSION: i32 = 21;

pub fn hello(s: &Server, name: &str, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    if let Ok(meta) = cmd.get_document("client") {
        s.inprog.set_client_metadata(conn.id, meta);
    }
    let mut d = Document::new();
    if name == "hello" || cmd.get_bool("helloOk").unwrap_or(false) {
        d.insert("helloOk", true);
    }
    if name == "hello" {
        d.insert("isWritablePrimary", true);
    } else {
        d.insert("ismaster", true);
    }
    d.insert(
        "topologyVersion",
        doc! { "processId": s.process_id, "counter": 0i64 },
    );
    d.insert("maxBsonObjectSize", silt_wire::MAX_BSON_OBJECT_BYTES as i32);
    d.insert("maxMessageSizeBytes", silt_wire::MAX_MESSAGE_BYTES as i32);
    d.insert("maxWriteBatchSize", silt_wire::MAX_WRITE_BATCH as i32);
    d.insert("localTime", bson::DateTime::now());
    d.insert("logicalSessionTimeoutMinutes", 30);
    d.insert("connectionId", conn.id as i64);
    d.insert("minWireVersion", 0);
    d.insert("maxWireVersion", MAX_WIRE_VERSION);
    d.insert("readOnly", false);
    if let Some(Bson::Array(wanted)) = cmd.get("compression") {
        let agreed: Vec<Bson> = wanted
            .iter()
            .filter(|c| matches!(c, Bson::String(n) if n == "zstd" || n == "snappy"))
            .cloned()
            .collect();
        d.insert("compression", agreed);
    }
    Ok(d)
}

pub fn build_info() -> CmdResult {
    Ok(doc! {
        "version": MONGO_VERSION,
        "gitVersion": "siltdb",
        "versionArray": [7, 0, 0, 0],
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": silt_wire::MAX_BSON_OBJECT_BYTES as i32,
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "storageEngines": ["silt"],
        "openssl": { "running": "disabled" },
        "silt": { "version": env!("CARGO_PKG_VERSION"), "engine": "fractal tree" },
    })
}

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

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `host:port`, as MongoDB names itself in `serverStatus` and `currentOp`.
pub fn host(s: &Server) -> String {
    format!("{}:{}", hostname(), s.cfg.port)
}

pub fn server_status(s: &Server) -> CmdResult {
    let up = s.started.elapsed();
    let (rss, virt) = rss_mb();
    let es = s.store.engine_stats();
    let poisoned = s.store.poison_cause().map(|c| c.to_string());
    let o = &s.ops;
    Ok(doc! {
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
            "available": 1_000_000i64,
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
        },
        "storageEngine": {
            "name": "silt",
            "supportsCommittedReads": false,
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
            "bytesOnDisk": es.bytes_on_disk as i64,
            "writable": poisoned.is_none(),
            "poisoned": poisoned,
        },
    })
}

pub fn host_info() -> CmdResult {
    let mem_mb = crate::config::total_memory().unwrap_or(0) / (1 << 20);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    Ok(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": hostname(),
            "cpuAddrSize": 64,
            "memSizeMB": mem_mb as i64,
            "memLimitMB": mem_mb as i64,
            "numCores": cores as i32,
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": false,
        },
        "os": { "type": std::env::consts::OS, "name": std::env::consts::OS },
        "extra": {},
    })
}

pub fn get_parameter(s: &Server, cmd: &Document) -> CmdResult {
    let fast = s.fast.enabled.load(Ordering::Relaxed);
    let all = matches!(cmd.get("getParameter"), Some(Bson::String(s)) if s == "*")
        || matches!(cmd.get("getParameter"), Some(Bson::Document(d)) if d.get_bool("allParameters").unwrap_or(false));
    let known = |name: &str| -> Option<Bson> {
        match name {
            "featureCompatibilityVersion" => Some(Bson::Document(doc! { "version": "7.0" })),
            "quiet" => Some(Bson::Boolean(false)),
            "logLevel" => Some(Bson::Int32(0)),
            "maxBSONDepth" => Some(Bson::Int32(100)),
            "cursorTimeoutMillis" => Some(Bson::Int64(600_000)),
            "fastUpdates" => Some(Bson::Boolean(fast)),
            _ => None,
        }
    };
    let names = [
        "featureCompatibilityVersion",
        "quiet",
        "logLevel",
        "maxBSONDepth",
        "cursorTimeoutMillis",
        "fastUpdates",
    ];
    let mut out = Document::new();
    if all {
        for n in names {
            if let Some(v) = known(n) {
                out.insert(n, v);
            }
        }
        return Ok(out);
    }
    for k in cmd.keys() {
        if k == "getParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        if let Some(v) = known(k) {
            out.insert(k.clone(), v);
        }
    }
    if out.is_empty() {
        return Err(QueryError::invalid_options("no option found to get"));
    }
    Ok(out)
}

pub fn cmd_line_opts(s: &Server) -> CmdResult {
    Ok(doc! {
        "argv": s.cfg.argv.clone(),
        "parsed": {
            "net": { "port": s.cfg.port as i32, "bindIp": s.cfg.bind.clone() },
            "storage": { "dbPath": s.cfg.dbpath.display().to_string() },
        },
    })
}

pub fn connection_status() -> CmdResult {
    Ok(doc! {
        "authInfo": { "authenticatedUsers": [], "authenticatedUserRoles": [] },
    })
}

pub fn get_log(s: &Server, cmd: &Document) -> CmdResult {
    match cmd.get("getLog") {
        Some(Bson::String(n)) if n == "*" => Ok(doc! { "names": ["global", "startupWarnings"] }),
        Some(Bson::String(n)) if n == "global" => {
            let lines: Vec<String> = s.recent_log.lock().iter().cloned().collect();
            Ok(doc! { "totalLinesWritten": lines.len() as i32, "log": lines })
        }
        Some(Bson::String(n)) if n == "startupWarnings" => {
            Ok(doc! { "totalLinesWritten": 0, "log": [] })
        }
        Some(Bson::String(n)) => Err(QueryError::bad_value(format!("No log named '{n}'"))),
        _ => Err(QueryError::type_mismatch(
            "Argument to getLog must be of type String",
        )),
    }
}

/// Arguments of `currentOp` that are not part of its filter: its own options and the generic
/// arguments drivers attach to every command.
const CURRENT_OP_ARGS: &[&str] = &[
    "currentOp",
    "$all",
    "$ownOps",
    "$truncateOps",
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "$client",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "readConcern",
    "writeConcern",
];

fn admin_only(db: &str, name: &str) -> Result<(), QueryError> {
    if db == "admin" {
        return Ok(());
    }
    Err(QueryError::unauthorized(format!(
        "{name} may only be run against the admin database."
    )))
}

/// `currentOp`: `{inprog: [...]}` with the operations in flight that match the filter (every
/// field but the options; `$all: true` adds idle connections; `$ownOps` is accepted and
/// ignored, as there are no users). Command documents are cut at 1 KB, as MongoDB does.
pub fn current_op(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    admin_only(db, "currentOp")?;
    let all = super::bool_arg(cmd, "$all")?.unwrap_or(false);
    let mut filter = Document::new();
    for (k, v) in cmd {
        if !CURRENT_OP_ARGS.contains(&k.as_str()) {
            filter.insert(k.clone(), v.clone());
        }
    }
    let opts = crate::ops::ReportOptions {
        idle_connections: all,
        truncate_ops: true,
    };
    let m = super::crud::new_matcher(&filter)?;
    let mut inprog = Vec::new();
    for d in s.inprog.report(&host(s), opts) {
        if m.try_matches(&d)? {
            inprog.push(Bson::Document(d));
        }
    }
    Ok(doc! { "inprog": inprog })
}

/// `killOp: 1, op: <opid>`: ask an operation to stop at its next interrupt point (index
/// builds and reads check often; see `ops`). Like MongoDB, succeeds whether or not the
/// operation exists.
pub fn kill_op(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    admin_only(db, "killOp")?;
    let opid = match cmd.get("op") {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) if d.fract() == 0.0 => *d as i64,
        _ => return Err(QueryError::bad_value("Did not provide \"op\" field")),
    };
    let found = u32::try_from(opid).is_ok_and(|id| s.inprog.kill(id));
    tracing::info!(opid, found, "killOp");
    Ok(doc! { "info": "attempting to kill op" })
}

pub fn list_commands() -> CmdResult {
    let mut cmds = Document::new();
    let mut table: Vec<&super::Command> = super::TABLE.iter().collect();
    table.sort_by_key(|c| c.name);
    for c in table {
        cmds.insert(
            c.name,
            doc! { "help": c.help, "requiresAuth": false, "adminOnly": c.admin_only, "secondaryOk": true },
        );
    }
    Ok(doc! { "commands": cmds })
}

pub fn start_session() -> CmdResult {
    let uuid = bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: bson::Uuid::new().bytes().to_vec(),
    };
    Ok(doc! { "id": { "id": uuid }, "timeoutMinutes": 30 })
}

pub fn set_parameter(s: &Server, cmd: &Document) -> CmdResult {
    let mut out = Document::new();
    for (k, v) in cmd {
        if k == "setParameter" || k.starts_with('$') || k == "lsid" || k == "comment" {
            continue;
        }
        match (k.as_str(), v) {
            ("fastUpdates", Bson::Boolean(b)) => {
                let was = s.fast.enabled.swap(*b, Ordering::Relaxed);
                out.insert("was", was);
            }
            ("fastUpdates", _) => {
                return Err(QueryError::bad_value("fastUpdates must be a boolean"))
            }
            _ => {
                return Err(QueryError::invalid_options(format!(
                    "attempted to set unrecognized parameter [{k}], use help:true to see options"
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(QueryError::invalid_options(
            "no option found to set, use help:true to see options",
        ));
    }
    Ok(out)
}
