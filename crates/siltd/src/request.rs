//! The request pipeline: every command a connection receives goes through [`run`], which
//! takes these steps in this order, and nothing else runs a command. A step that differs
//! between commands reads the command's table entry (`commands::table`, its `props`), resolved
//! once.
//!
//! 1. Count the command (`serverStatus.opcounters.command`) and start its clock.
//! 2. Resolve it: its name and database, and its table entry (59 for an unknown name); then
//!    answer repeated field names as mongod does (`repeated.rs`: refuse, or rewrite a
//!    filter's repeated conditions as the `$and` they mean).
//! 3. Register it for `currentOp`/`killOp` while it runs (`ops.rs`).
//! 4. Authorize it under `--auth` (`auth::authorize`).
//! 5. Refuse a write in the free-space red zone (`redzone.rs`), and on a member of a
//!    multi-member replica set that cannot take it (`raft_member/`); there, on a member that
//!    is not the primary, also refuse a read of data that does not allow a secondary (13435)
//!    or that comes while the member is still catching up (13436).
//! 6. Fire the `failCommand` fail point if it names this command (`fail_command.rs`; only
//!    with `--enable-test-commands`): wait, fail or close the connection; its
//!    `writeConcernError` is added at step 9. Then hold a write while `fsync` holds its lock
//!    (`monitor.rs`).
//! 7. Pick the session and transaction mode and build the command's [`Ctx`]: plain, snapshot
//!    read, retryable write or transaction statement (`transactions::run`), which calls back:
//! 8. [`invoke`]: the versioned API and the command's fields (`commands::api`,
//!    `commands::args`), `bypassDocumentValidation`, the collation scope, the handler.
//! 9. Shape the reply: `ok`, an error's fields, error labels, `$clusterTime` and
//!    `operationTime` on a replica set.
//! 10. Record it: `top`, the profiler, the slow-query log.
//!
//! A panic anywhere in them becomes an error reply: one bad command must not take the
//! connection, let alone the server, down.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use silt_query::collation::Collation;
use silt_query::QueryError;

use crate::commands::{self, Command};
use crate::conn::ConnInfo;
use crate::ctx::Ctx;
use crate::errors::{check_db_name, error_reply};
use crate::state::{CmdResult, Server};
use crate::transactions::{self, Outcome};

/// A command resolved once: its database, the name it was sent under and its table entry.
pub(crate) struct Request<'a> {
    pub db: String,
    pub name: String,
    pub entry: &'static Command,
    pub cmd: &'a Document,
    /// The command's repeated keys (`repeated.rs`), for the handlers that refuse one statement.
    pub repeated: &'a [silt_wire::RepeatedKey],
}

/// Run one command and build its reply (always a document; errors become `ok: 0`).
pub(crate) fn run(
    s: &Server,
    cmd: Document,
    repeated: &[silt_wire::RepeatedKey],
    conn: &ConnInfo,
) -> Document {
    // The request's writes note their oplog times on this thread (`operationTime`).
    let _ = silt_collection::oplog::take_last_here();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        steps(s, cmd, repeated, conn)
    })) {
        Ok(d) => d,
        Err(_) => {
            tracing::error!(conn = conn.id, "command panicked");
            error_reply(&QueryError::internal(
                "internal error while running the command",
            ))
        }
    }
}

fn steps(
    s: &Server,
    mut cmd: Document,
    repeated: &[silt_wire::RepeatedKey],
    conn: &ConnInfo,
) -> Document {
    // 1.
    s.ops().command.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    // 2.
    let name = cmd.keys().next().cloned().unwrap_or_default();
    let db = match cmd.get("$db") {
        Some(Bson::String(s)) => s.clone(),
        Some(_) => return error_reply(&QueryError::type_mismatch("$db must be a string")),
        None => "admin".to_string(),
    };
    let entry = if name.is_empty() {
        Err(QueryError::failed_to_parse("empty command document"))
    } else {
        let coll = match cmd.iter().next() {
            Some((_, Bson::String(c))) => Some(c.as_str()),
            _ => None,
        };
        check_db_name(&db, coll).and_then(|()| {
            commands::lookup(&name)
                .ok_or_else(|| QueryError::command_not_found(format!("no such command: '{name}'")))
        })
    };
    let entry = match entry.and_then(|e| {
        crate::repeated::apply(&name, &mut cmd, repeated)?;
        Ok(e)
    }) {
        Ok(e) => e,
        Err(e) => return reply(s, Outcome::of(Err(e), false)),
    };
    let cmd = Arc::new(cmd);
    let req = Request {
        db,
        name,
        entry,
        cmd: &cmd,
        repeated,
    };
    let (out, failing) = {
        // 3.
        let _running = s.inprog().start(conn, &req.db, &req.name, cmd.clone());
        // 4., 5.
        let allowed = crate::auth::authorize(s, conn, &req.db, &req.name, &cmd)
            .and_then(|()| s.redzone().refuse(&req.name))
            .and_then(|()| s.raft().map_or(Ok(()), |r| r.refuse_write(&req.name)))
            .and_then(|()| match s.raft() {
                Some(r) if entry.props.reads_data => r.refuse_read(&req.db, secondary_ok(&cmd)),
                _ => Ok(()),
            });
        let failing = match &allowed {
            Ok(()) => fail_point(s, &req, conn),
            Err(_) => None,
        };
        let out = match (allowed, &failing) {
            (Ok(()), Some((action, session))) if action.close || action.error.is_some() => {
                if action.close {
                    conn.close.store(true, Ordering::Release);
                }
                let (code, labels) = action.error.clone().unwrap_or((0, None));
                let labels = labels.unwrap_or_else(|| {
                    crate::error_labels::labels_for(*session, code, false)
                        .into_iter()
                        .map(String::from)
                        .collect()
                });
                let mut o = Outcome::of(Err(crate::fail_command::error(code)), false);
                o.fail_labels = labels;
                o
            }
            (Ok(()), _) => {
                // 6.
                if entry.props.writes && s.fsync_lock().is_locked() {
                    s.fsync_lock().wait_for_writes(|| s.shutting_down());
                }
                // 7. (and 8. through `invoke`)
                transactions::run(s, &req, conn)
            }
            (Err(e), _) => Outcome::of(Err(e), false),
        };
        (out, failing)
    };
    let elapsed = started.elapsed();
    let ok = out.result.is_ok();
    // 9.
    let mut reply = reply(s, out);
    if let Some((action, session)) = &failing {
        if let Some(w) = &action.write_concern_error {
            add_write_concern_error(&mut reply, w, *session);
        }
    }
    // 10.
    record(s, &req, elapsed, ok, conn);
    reply
}

/// Step 6 for `failCommand` (test commands only): whether the fail point fires for this
/// command; a block (`blockConnection`) is waited out here.
fn fail_point(
    s: &Server,
    req: &Request<'_>,
    conn: &ConnInfo,
) -> Option<(crate::fail_command::Action, crate::error_labels::Session)> {
    if !s.cfg().test_commands {
        return None;
    }
    // A handshake names its application before the connection has it on record.
    let app = s.inprog().app_name(conn.id).or_else(|| {
        req.cmd
            .get_document("client")
            .and_then(|c| c.get_document("application"))
            .and_then(|a| a.get_str("name"))
            .ok()
            .map(str::to_string)
    });
    let action = s.fail_command().check(&req.name, app.as_deref())?;
    if let Some(wait) = action.block {
        std::thread::sleep(wait);
    }
    use crate::error_labels::Session;
    let session = match (req.cmd.get("txnNumber"), req.cmd.get("autocommit")) {
        (Some(_), _) if matches!(req.entry.name, "commitTransaction" | "abortTransaction") => {
            Session::CommitOrAbort
        }
        (Some(_), Some(Bson::Boolean(false))) => Session::InTransaction,
        (Some(_), _) if req.entry.props.retryable => Session::RetryableWrite,
        _ => Session::Plain,
    };
    Some((action, session))
}

/// `failCommand`'s `writeConcernError` on a reply, with the labels mongod gives it.
fn add_write_concern_error(
    reply: &mut Document,
    w: &Document,
    session: crate::error_labels::Session,
) {
    if reply.get_f64("ok") != Ok(1.0) {
        return;
    }
    let code = w.get_i32("code").unwrap_or(64);
    reply.insert("writeConcernError", w.clone());
    let labels = crate::error_labels::labels_for(session, code, true);
    if !labels.is_empty() {
        let mut all = match reply.remove("errorLabels") {
            Some(Bson::Array(a)) => a,
            _ => Vec::new(),
        };
        all.extend(labels.into_iter().map(|l| Bson::String(l.to_string())));
        reply.insert("errorLabels", all);
    }
}

/// Step 8: check the command's fields and run its handler under its collation, in `op`.
pub(crate) fn invoke(s: &Server, req: &Request<'_>, op: &Ctx) -> CmdResult {
    let (c, cmd, db) = (req.entry, req.cmd, req.db.as_str());
    commands::check_fields(c, &req.name, cmd)?;
    op.bypass_validation.set(matches!(
        cmd.get("bypassDocumentValidation"),
        Some(Bson::Boolean(true))
    ));
    // The command's collation holds for everything it compares, until it returns; its
    // cursors take it along to their getMores. Update and delete statements carry their own.
    let collation = if c.props.collation {
        let ns = match cmd.iter().next() {
            Some((_, Bson::String(coll))) => Some(format!("{db}.{coll}")),
            _ => None,
        };
        commands::effective_collation(s, ns.as_deref(), cmd)?
    } else {
        None
    };
    let _collation = Collation::scope(collation.as_ref());
    (c.run)(s, db, cmd, op)
}

/// Step 9: the reply document of an outcome.
fn reply(s: &Server, out: Outcome) -> Document {
    let mut reply = match out.result {
        Ok(mut body) => {
            if let Some(t) = out.at_cluster_time {
                match body.get_mut("cursor") {
                    Some(Bson::Document(c)) => {
                        c.insert("atClusterTime", t);
                    }
                    _ => {
                        body.insert("atClusterTime", t);
                    }
                }
            }
            body.insert("ok", 1.0);
            body
        }
        Err(e) => {
            tracing::debug!(code = e.code, err = %e.msg, "command failed");
            s.net().user_asserts.fetch_add(1, Ordering::Relaxed);
            error_reply(&e)
        }
    };
    if !out.labels.is_empty() {
        reply.insert("errorLabels", out.labels);
    } else if !out.fail_labels.is_empty() {
        reply.insert("errorLabels", out.fail_labels);
    }
    if let Some(rs) = &s.repl() {
        // A write's operationTime is the time of its (last) oplog entry, as mongod's.
        let t = match silt_collection::oplog::take_last_here() {
            Some(t) => t,
            None if out.wrote => rs.tick(),
            None => rs.now(),
        };
        reply.insert("$clusterTime", rs.cluster_time());
        reply.insert("operationTime", t);
    }
    reply
}

/// Step 10: `top`, the profiler and the slow-query log.
fn record(s: &Server, req: &Request<'_>, elapsed: Duration, ok: bool, conn: &ConnInfo) {
    let (db, name) = (req.db.as_str(), req.name.as_str());
    let ns = match req.cmd.get(name) {
        // These commands name a whole namespace, whatever database they run on.
        Some(Bson::String(full)) if matches!(req.entry.name, "renameCollection" | "dataSize") => {
            full.clone()
        }
        Some(Bson::String(c)) => format!("{db}.{c}"),
        _ => format!("{db}.$cmd"),
    };
    s.top().record(
        &ns,
        req.entry.props.op,
        u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
    );
    if s.profiler().any() {
        profile(s, req, &ns, elapsed, ok, conn);
    }
    if elapsed >= s.cfg().slow {
        let line = format!(
            "slow operation: {name} on {db} took {} ms",
            elapsed.as_millis()
        );
        tracing::info!(command = %name, db = %db, ms = crate::num::millis(elapsed), conn = conn.id, "slow operation");
        s.remember_log(line);
    }
}

/// Record a profiled operation in `<db>.system.profile` when the database's level asks for
/// it (level 2: every operation; level 1: those slower than `slowms`).
fn profile(s: &Server, req: &Request<'_>, ns: &str, elapsed: Duration, ok: bool, conn: &ConnInfo) {
    let db = req.db.as_str();
    let p = s.profiler().get(db, crate::num::millis(s.cfg().slow));
    let millis = crate::num::millis(elapsed);
    if p.level == 0 || ns.ends_with(".system.profile") {
        return;
    }
    let mut command = req.cmd.clone();
    command.remove("lsid");
    command.remove("$clusterTime");
    let entry = doc! {
        "_id": bson::oid::ObjectId::new(),
        "op": req.entry.props.op.profile_name(),
        "ns": ns,
        "command": command,
        "millis": millis,
        "ok": if ok { 1.0 } else { 0.0 },
        "ts": bson::DateTime::now(),
        "client": conn.peer.clone(),
        "user": "",
    };
    if !p.wants(millis, &entry) {
        return;
    }
    // As in MongoDB, `system.profile` is a capped collection of 1 MiB.
    let ns = format!("{db}.system.profile");
    let coll = match s.store().get(&ns) {
        Some(c) => Ok(c),
        None => match s
            .store()
            .create(&ns, doc! { "capped": true, "size": 1_048_576i64 })
        {
            Err(silt_collection::CollError::NamespaceExists(_)) => s.store().get_or_create(&ns),
            other => other,
        },
    };
    let stored = coll.and_then(|c| c.insert(&entry));
    if let Err(e) = stored {
        tracing::warn!(db, error = %e, "cannot record a profiled operation");
    }
}

/// Whether a request allows a secondary to answer it: its `$readPreference` names a mode
/// other than `primary` (what drivers send to a secondary, `primaryPreferred` on a direct
/// connection).
fn secondary_ok(cmd: &Document) -> bool {
    cmd.get_document("$readPreference")
        .ok()
        .and_then(|r| r.get_str("mode").ok())
        .is_some_and(|m| m != "primary")
}
