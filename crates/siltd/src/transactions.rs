//! How a command runs with respect to sessions: on its own, as a snapshot read, as a
//! retryable write, or as a statement of a multi-document transaction. Every command passes
//! through [`run`] before the command table's handler, which then only sees an [`Ctx`].
//!
//! - **Standalone** (no `--replSet`): transaction numbers are refused as a standalone mongod
//!   refuses them (20 `IllegalOperation`), and so is read concern `snapshot`.
//! - **Retryable writes** (`txnNumber` without `autocommit`, on `insert`, `update`, `delete`,
//!   `findAndModify`): the command runs in an engine transaction of its own together with the
//!   write of its reply to `config.transactions` (`_id`: the `lsid`), so that after a crash
//!   either both are there or neither is. A retry of the same `txnNumber` gets the stored reply
//!   and writes nothing; the record survives restarts. A write conflict aborts the attempt and
//!   runs it again, as mongod retries a `WriteConflict` outside transactions.
//! - **Transactions** (`autocommit: false`): `startTransaction` begins an engine transaction
//!   whose snapshot every statement reads and in which every write is provisional until
//!   `commitTransaction`. Any error aborts it (MongoDB's rule); a write conflict or lock
//!   timeout is reported as `WriteConflict` (112) with the `TransientTransactionError` label so
//!   that drivers' `with_transaction` retries. The reaper aborts transactions older than
//!   `transactionLifetimeLimitSeconds`.

use std::time::{Duration, Instant};

use bson::{doc, Bson, Document, Timestamp};
use silt_collection::oplog::OpSession;
use silt_collection::{id_key, TxnKind, Writer, NON_TXN_LOCK_WAIT};
use silt_query::{QResult, QueryError};

use crate::commands::type_name;
use crate::conn::ConnInfo;
use crate::ctx::Ctx;
use crate::errors::coll_err;
use crate::request::{self, Request};
use crate::sessions::{Active, SessionGuard, TxnEnd, TxnState};
use crate::state::{CmdResult, Server};

/// Where the replies of retryable writes are kept (MongoDB's collection of that name).
pub(crate) const RETRY_NS: &str = "config.transactions";

/// The error labels drivers act on.
pub(crate) const TRANSIENT: &str = "TransientTransactionError";
pub(crate) const UNKNOWN_COMMIT: &str = "UnknownTransactionCommitResult";

/// A command's result with what the reply adds around it.
pub(crate) struct Outcome {
    pub result: CmdResult,
    pub labels: Vec<&'static str>,
    /// Labels a fired `failCommand` fail point chose (its `errorLabels`, or mongod's rule).
    pub fail_labels: Vec<String>,
    /// The cluster time a snapshot read read at.
    pub at_cluster_time: Option<Timestamp>,
    /// The command wrote (its reply's `operationTime` is a new cluster time).
    pub wrote: bool,
}

impl Outcome {
    pub(crate) fn of(result: CmdResult, wrote: bool) -> Outcome {
        Outcome {
            result,
            labels: Vec::new(),
            fail_labels: Vec::new(),
            at_cluster_time: None,
            wrote,
        }
    }
    fn err(e: QueryError) -> Outcome {
        Outcome::of(Err(e), false)
    }
}

/// The session fields of a command.
struct SessionArgs<'a> {
    lsid: Option<&'a Document>,
    txn_number: Option<i64>,
    /// `autocommit: false` was given (a transaction statement).
    in_txn: bool,
    start: bool,
    read_concern: Option<&'a Document>,
}

fn parse_session(cmd: &Document) -> QResult<SessionArgs<'_>> {
    let lsid = match cmd.get("lsid") {
        None => None,
        Some(Bson::Document(d)) => Some(d),
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
            "BSON field 'OperationSessionInfo.lsid' is the wrong type '{}', expected type 'object'",
            type_name(other)
        )))
        }
    };
    let txn_number = match cmd.get("txnNumber") {
        None => None,
        Some(Bson::Int64(n)) => Some(*n),
        Some(t) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '{}', expected type 'long'",
                type_name(t)
            )))
        }
    };
    if txn_number.is_some() && lsid.is_none() {
        return Err(QueryError::invalid_options(
            "Transaction number requires a session ID to also be specified",
        ));
    }
    let in_txn = match cmd.get("autocommit") {
        None => false,
        Some(Bson::Boolean(false)) => true,
        Some(Bson::Boolean(true)) => {
            return Err(QueryError::invalid_options(
                "Specifying autocommit=true is not allowed.",
            ))
        }
        Some(t) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'OperationSessionInfo.autocommit' is the wrong type '{}', expected type 'bool'",
                type_name(t)
            )))
        }
    };
    if in_txn && txn_number.is_none() {
        return Err(QueryError::invalid_options(
            "'autocommit' field requires a transaction number to also be specified",
        ));
    }
    let start = match cmd.get("startTransaction") {
        None => false,
        Some(Bson::Boolean(true)) => true,
        Some(Bson::Boolean(false)) => {
            return Err(QueryError::invalid_options(
                "Specifying startTransaction=false is not allowed.",
            ))
        }
        Some(t) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'OperationSessionInfo.startTransaction' is the wrong type '{}', expected type 'bool'",
                type_name(t)
            )))
        }
    };
    if start && !in_txn {
        return Err(QueryError::invalid_options(
            "'startTransaction' field requires 'autocommit' field to also be specified",
        ));
    }
    let read_concern = match cmd.get("readConcern") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(d)) => Some(d),
        Some(t) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field 'readConcern' is the wrong type '{}', expected type 'object'",
                type_name(t)
            )))
        }
    };
    Ok(SessionArgs {
        lsid,
        txn_number,
        in_txn,
        start,
        read_concern,
    })
}

/// A read concern: its level and `atClusterTime`.
struct ReadConcern {
    level: Option<String>,
    at: Option<Timestamp>,
    /// `afterClusterTime`.
    after: Option<Timestamp>,
}

/// Read concern levels and fields: on one node every level is met by reading committed data
/// (the only member is the primary, so `linearizable` is too); `snapshot` and
/// `linearizable` need a replica set (123 NotAReplicaSet, as in mongod). `now` is the
/// current cluster time of a replica set (`None`: standalone): every acknowledged write is
/// visible to every read, so `afterClusterTime` up to it is met at once, and one past it is
/// refused as mongod refuses it.
fn parse_read_concern(rc: Option<&Document>, now: Option<Timestamp>) -> QResult<ReadConcern> {
    let repl = now.is_some();
    let mut out = ReadConcern {
        level: None,
        at: None,
        after: None,
    };
    let Some(rc) = rc else { return Ok(out) };
    for (k, v) in rc {
        match (k.as_str(), v) {
            ("level", Bson::String(l)) => match l.as_str() {
                "local" | "available" | "majority" => out.level = Some(l.clone()),
                "snapshot" | "linearizable" if repl => out.level = Some(l.clone()),
                "snapshot" | "linearizable" => {
                    return Err(QueryError::coded(
                        123,
                        "NotAReplicaSet",
                        format!("node needs to be a replica set member to use readConcern: {l}"),
                    ))
                }
                other => {
                    return Err(QueryError::failed_to_parse(format!(
                        "Enumeration value '{other}' for field 'readConcern.level' is not a valid value."
                    )))
                }
            },
            ("atClusterTime", Bson::Timestamp(t)) => out.at = Some(*t),
            ("afterClusterTime", Bson::Timestamp(t)) if now.is_some_and(|n| n == FOLLOWS) => {
                out.after = Some(*t);
            }
            ("afterClusterTime", Bson::Timestamp(t))
                if now.is_some_and(|n| (t.time, t.increment) > (n.time, n.increment)) =>
            {
                let n = now.unwrap_or(*t);
                return Err(QueryError::invalid_options(format!(
                    "readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: Timestamp({}, {}); current clusterTime: Timestamp({}, {})",
                    t.time, t.increment, n.time, n.increment
                )));
            }
            // Every read sees every write acknowledged before it.
            ("afterClusterTime" | "afterOpTime" | "provenance", _) => {}
            (other, _) => {
                return Err(QueryError::not_implemented(format!(
                    "readConcern field '{other}' is not supported by siltd"
                )))
            }
        }
    }
    if out.at.is_some() && out.level.as_deref() != Some("snapshot") {
        return Err(QueryError::invalid_options(
            "readConcern atClusterTime value is only allowed with level snapshot",
        ));
    }
    Ok(out)
}

/// The current cluster time of a replica set; `None` on a standalone. On a member of a
/// multi-member set, [`FOLLOWS`]: a time past the member's is waited for, not refused
/// ([`settle_read`]).
fn cluster_now(s: &Server) -> Option<Timestamp> {
    if s.raft().is_some_and(|r| r.member().is_some()) {
        return Some(FOLLOWS);
    }
    s.repl().map(|r| r.now())
}

/// The "current cluster time" of a member of a multi-member set, for
/// [`parse_read_concern`]: it follows the set's log.
const FOLLOWS: Timestamp = Timestamp {
    time: u32::MAX,
    increment: u32::MAX,
};

/// What a read concern needs before the read on a multi-member set: `afterClusterTime`
/// waits until this member has applied the log up to that time; `linearizable` runs on the
/// primary only, once a quorum confirmed it is still primary and it applied what it had
/// committed then.
fn settle_read(s: &Server, rc: &ReadConcern, max_time: Option<Duration>) -> QResult<()> {
    let Some(raft) = s.raft().filter(|r| r.member().is_some()) else {
        return Ok(());
    };
    let limit = max_time.unwrap_or(Duration::from_secs(60));
    if let (Some(t), Some(log)) = (rc.after, s.store().oplog()) {
        let below =
            silt_collection::oplog::unpack(silt_collection::oplog::pack(t).saturating_sub(1));
        if !log.wait_past(below, Instant::now() + limit) {
            return Err(QueryError::max_time_ms_expired(format!(
                "this member had not applied the log to afterClusterTime Timestamp({}, {}) within {} ms",
                t.time,
                t.increment,
                limit.as_millis()
            )));
        }
    }
    if rc.level.as_deref() == Some("linearizable") {
        raft.linearize(limit)?;
    }
    Ok(())
}

/// Run `req` in the session mode its fields ask for (step 7 of `crate::request`): the
/// handler runs through `request::invoke` with the command's [`Ctx`].
pub(crate) fn run(s: &Server, req: &Request<'_>, conn: &ConnInfo) -> Outcome {
    let (name, cmd) = (req.name.as_str(), req.cmd);
    let props = req.entry.props;
    // A write waits for replication at most its `wtimeout` (then answers 64).
    let _wait = wtimeout(cmd).map(silt_collection::limit_wait);
    let args = match parse_session(cmd) {
        Ok(a) => a,
        Err(e) => return Outcome::err(e),
    };
    if s.repl().is_none() && args.txn_number.is_some() {
        return Outcome::err(QueryError::illegal_operation(
            "Transaction numbers are only allowed on a replica set member or mongos",
        ));
    }
    let (Some(lsid), Some(number)) = (args.lsid, args.txn_number) else {
        if matches!(req.entry.name, "commitTransaction" | "abortTransaction") {
            return Outcome::err(QueryError::command_failed(format!(
                "{name} must be run within a transaction"
            )));
        }
        if let Some(lsid) = args.lsid {
            if let Err(e) = s.sessions().touch(lsid) {
                return Outcome::err(e);
            }
        }
        return plain(s, req, conn, args.read_concern);
    };
    let mut sess = match s.sessions().checkout(lsid) {
        Ok(g) => g,
        Err(e) => return Outcome::err(e),
    };
    if args.in_txn {
        statement(s, req, conn, &args, number, &mut sess)
    } else if props.retryable {
        if let Err(e) = parse_read_concern(args.read_concern, cluster_now(s)) {
            return Outcome::err(e);
        }
        let mut out = retryable(s, req, conn, lsid, number, &mut sess);
        // mongod's label on a retryable write that failed with a retryable code.
        if let Err(e) = &out.result {
            out.labels.extend(crate::error_labels::labels_for(
                crate::error_labels::Session::RetryableWrite,
                e.code,
                false,
            ));
        }
        out
    } else {
        Outcome::err(QueryError::located(
            50768,
            format!(
                "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and {name} is not a retryable write command."
            ),
        ))
    }
}

/// A command outside any transaction (a snapshot read included).
fn plain(s: &Server, req: &Request<'_>, conn: &ConnInfo, rc: Option<&Document>) -> Outcome {
    let (name, cmd) = (req.name.as_str(), req.cmd);
    let rc = match parse_read_concern(rc, cluster_now(s)) {
        Ok(rc) => rc,
        Err(e) => return Outcome::err(e),
    };
    if let Err(e) = settle_read(s, &rc, max_time_of(cmd)) {
        return Outcome::err(e);
    }
    let mut op = Ctx::for_request(conn, req);
    let mut at = None;
    if rc.level.as_deref() == Some("snapshot") {
        if !req.entry.props.snapshot_read {
            return Outcome::err(QueryError::invalid_options(format!(
                "Command {name} does not support {{ readConcern: {{ level: \"snapshot\" }} }} outside a transaction"
            )));
        }
        let Some(rs) = &s.repl() else {
            return Outcome::err(QueryError::internal("snapshot read without a replica set"));
        };
        let (snap, t) = match rc.at {
            Some(t) => match s.sessions().snapshot_at(t) {
                Some(snap) => (snap, t),
                None => {
                    return Outcome::err(QueryError::snapshot_too_old(format!(
                        "Read timestamp {{ ts: Timestamp({}, {}) }} is not available: siltd keeps the snapshot of a cluster time it handed out to a snapshot read for 300 seconds",
                        t.time, t.increment
                    )))
                }
            },
            None => {
                let snap = s.store().snapshot();
                let t = rs.tick();
                s.sessions().keep_snapshot(t, snap.clone());
                (snap, t)
            }
        };
        op.snap = Some(snap);
        at = Some(t);
    }
    let writes = req.entry.props.writes;
    let result = request::invoke(s, req, &op).and_then(|b| after_write(s, writes, cmd, b));
    let mut o = Outcome::of(result, writes);
    o.at_cluster_time = at;
    o
}

/// After a write outside a multi-document transaction: make the log durable when the write
/// concern asks (`j`, `fsync`, or `w: "majority"`, which on one member means durable), and
/// report what cannot be met.
fn after_write(s: &Server, writes: bool, cmd: &Document, mut body: Document) -> CmdResult {
    if !writes {
        return Ok(body);
    }
    let wc = write_concern(s, cmd)?;
    if let Some(e) = not_primary(&body) {
        return Err(e);
    }
    if wc.durable {
        s.store().sync_log().map_err(coll_err)?;
    }
    wc.settle(s, &mut body);
    Ok(body)
}

/// The first write error of `body` that says this member is not (or no longer) primary, as
/// the command's error: mongod raises those rather than reporting them per document, so that
/// drivers retry the command and rediscover the primary.
fn not_primary(body: &Document) -> Option<QueryError> {
    let errs = body.get_array("writeErrors").ok()?;
    errs.iter().find_map(|e| {
        let Bson::Document(d) = e else { return None };
        let code = d.get_i32("code").ok()?;
        crate::error_labels::not_primary(code).then(|| {
            QueryError::coded(
                code,
                if code == 10107 {
                    "NotWritablePrimary"
                } else {
                    "InterruptedDueToReplStateChange"
                },
                d.get_str("errmsg").unwrap_or("not primary").to_string(),
            )
        })
    })
}

/// What a command's write concern asks for.
struct WriteConcern {
    durable: bool,
    /// The `writeConcernError` of a `w` the set's members cannot satisfy.
    unsatisfiable: Option<Document>,
    /// On a multi-member set: how many members must hold the write (more than the majority
    /// that every write waits for).
    members: Option<usize>,
    /// `wtimeout`.
    timeout: Option<Duration>,
    spec: Document,
}

impl WriteConcern {
    /// After the write: wait for the members `w` names, and report what was not met (a
    /// write that timed out waiting for replication, 64, is a `writeConcernError`: it may
    /// still be applied, as with mongod).
    fn settle(self, s: &Server, body: &mut Document) {
        let timed_out = |msg: &str| {
            doc! {
                "code": 64,
                "codeName": "WriteConcernTimeout",
                "errmsg": msg,
                "errInfo": { "writeConcern": self.spec.clone() },
            }
        };
        if let Ok(errs) = body.get_array_mut("writeErrors") {
            let before = errs.len();
            let mut msg = None;
            errs.retain(|e| match e {
                Bson::Document(d) if d.get_i32("code") == Ok(64) => {
                    msg = d.get_str("errmsg").ok().map(String::from);
                    false
                }
                _ => true,
            });
            let emptied = errs.is_empty() && before > 0;
            if let Some(m) = msg {
                if emptied {
                    body.remove("writeErrors");
                }
                body.insert("writeConcernError", timed_out(&m));
                return;
            }
        }
        if let Some(e) = self.unsatisfiable.clone() {
            body.insert("writeConcernError", e);
            return;
        }
        if let (Some(n), Some(raft)) = (self.members, s.raft()) {
            let deadline = Instant::now() + self.timeout.unwrap_or(Duration::from_secs(3600));
            if !raft.wait_members(n, deadline) {
                body.insert(
                    "writeConcernError",
                    timed_out("waiting for replication timed out"),
                );
            }
        }
    }
}

/// `maxTimeMS` of `cmd`, if it sets one above zero.
fn max_time_of(cmd: &Document) -> Option<Duration> {
    let ms = match cmd.get("maxTimeMS")? {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(f) => whole(*f)?,
        _ => return None,
    };
    (ms > 0).then(|| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// A double's whole part as an integer, when it has one in range.
#[expect(
    clippy::cast_possible_truncation,
    reason = "checked to be finite and within i64's range first"
)]
fn whole(f: f64) -> Option<i64> {
    (f.is_finite() && f.abs() < 9.0e18).then(|| f.trunc() as i64)
}

/// `writeConcern.wtimeout` of `cmd`, if it sets one above zero.
pub(crate) fn wtimeout(cmd: &Document) -> Option<Duration> {
    let ms = match cmd.get_document("writeConcern").ok()?.get("wtimeout")? {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(f) => whole(*f)?,
        _ => return None,
    };
    (ms > 0).then(|| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

fn write_concern(s: &Server, cmd: &Document) -> QResult<WriteConcern> {
    let mut wc = WriteConcern {
        durable: false,
        unsatisfiable: None,
        members: None,
        timeout: wtimeout(cmd),
        spec: Document::new(),
    };
    let Some(v) = cmd.get("writeConcern") else {
        return Ok(wc);
    };
    let Bson::Document(d) = v else {
        return Err(QueryError::type_mismatch(format!(
            "BSON field 'writeConcern' is the wrong type '{}', expected type 'object'",
            type_name(v)
        )));
    };
    let truthy = |k: &str| match d.get(k) {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(n)) => *n != 0,
        Some(Bson::Int64(n)) => *n != 0,
        Some(Bson::Double(n)) => *n != 0.0,
        _ => false,
    };
    wc.durable = truthy("j") || truthy("fsync");
    wc.spec = d.clone();
    // Every write on a multi-member set is held by a majority once it is acknowledged; `w`
    // above that waits for more members.
    let members = s.raft().and_then(|r| r.member_count());
    let unsatisfiable = |w: String| {
        doc! {
            "code": 100,
            "codeName": "UnsatisfiableWriteConcern",
            "errmsg": format!(
                "Not enough data-bearing nodes to satisfy write concern {w}: this replica set has {} member{}",
                members.unwrap_or(1),
                if members.unwrap_or(1) == 1 { "" } else { "s" }
            ),
            "errInfo": { "writeConcern": d.clone() },
        }
    };
    let count = match d.get("w") {
        Some(Bson::String(m)) if m == "majority" => {
            wc.durable = members.is_none();
            None
        }
        Some(Bson::String(tag)) => {
            wc.unsatisfiable = Some(unsatisfiable(format!("'{tag}'")));
            None
        }
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        Some(Bson::Double(n)) => whole(*n),
        _ => None,
    };
    if members.is_some() {
        // On a multi-member set a write is acknowledged once committed, that is once a
        // majority holds it in a synced log: that is `j`'s promise, and more.
        wc.durable = false;
    }
    if let Some(n) = count.filter(|n| *n > 1) {
        match members {
            Some(m) if usize::try_from(n).is_ok_and(|n| n <= m) => {
                wc.members = usize::try_from(n).ok();
            }
            _ => wc.unsatisfiable = Some(unsatisfiable(n.to_string())),
        }
    }
    Ok(wc)
}

/// The first write error of a reply, if it is a write conflict.
fn has_conflict(body: &Document) -> bool {
    body.get_array("writeErrors").is_ok_and(|errs| {
        errs.iter()
            .any(|e| matches!(e, Bson::Document(d) if d.get_i32("code") == Ok(112)))
    })
}

/// A retryable write: run once (a retry gets the first reply), in a transaction of its own
/// with the record of its reply.
fn retryable(
    s: &Server,
    req: &Request<'_>,
    conn: &ConnInfo,
    lsid: &Document,
    number: i64,
    sess: &mut SessionGuard,
) -> Outcome {
    let cmd = req.cmd;
    if number < sess.number {
        return Outcome::err(QueryError::transaction_too_old(format!(
            "Retryable write with txnNumber {number} is prohibited on session {} because a newer retryable write with txnNumber {} has already started on this session.",
            lsid_text(lsid),
            sess.number
        )));
    }
    if number > sess.number {
        sess.abort("a newer transaction number was used");
        sess.txn = TxnState::None;
    } else if !matches!(sess.txn, TxnState::None) {
        return Outcome::err(QueryError::conflicting_operation_in_progress(format!(
            "txnNumber {number} on session {} belongs to a multi-document transaction",
            lsid_text(lsid)
        )));
    }
    sess.number = number;
    let record = match s.store().get_or_create(RETRY_NS) {
        Ok(c) => c,
        Err(e) => return Outcome::err(coll_err(e)),
    };
    let rid = Bson::Document(lsid.clone());
    // A retry: the reply of the first execution, nothing written. Asked again before every
    // attempt: the first execution may commit meanwhile (its entry applied from the log
    // after its writer gave up), and an attempt that then conflicts with it must not run
    // the statement a second time.
    let executed = || -> Option<Outcome> {
        match record.get(&rid) {
            Ok(Some(r)) => match r.get_i64("txnNum") {
                Ok(n) if n == number => {
                    let mut reply = r.get_document("reply").cloned().unwrap_or_default();
                    reply.insert("retriedStmtIds", Vec::<Bson>::new());
                    Some(Outcome::of(Ok(reply), false))
                }
                Ok(n) if n > number => Some(Outcome::err(QueryError::transaction_too_old(format!(
                    "Retryable write with txnNumber {number} is prohibited on session {} because a newer retryable write with txnNumber {n} has already started on this session.",
                    lsid_text(lsid)
                )))),
                _ => None,
            },
            Ok(None) => None,
            Err(e) => Some(Outcome::err(coll_err(e))),
        }
    };
    let wc = match write_concern(s, cmd) {
        Ok(wc) => wc,
        Err(e) => return Outcome::err(e),
    };
    let deadline = Instant::now() + NON_TXN_LOCK_WAIT;
    let mut pause = Duration::from_micros(100);
    loop {
        let txn = match s.store().begin(TxnKind::Retryable, NON_TXN_LOCK_WAIT) {
            Ok(t) => t,
            Err(e) => return Outcome::err(coll_err(e)),
        };
        // After the transaction's snapshot is taken: a first execution that commits later
        // wrote the session's record too, so this attempt's write of it conflicts (112) and
        // the next attempt finds it here.
        if let Some(done) = executed() {
            let _ = txn.abort();
            return done;
        }
        txn.set_session(OpSession {
            lsid: lsid.clone(),
            txn_number: number,
        });
        let op = Ctx {
            snap: Some(txn.snapshot().clone()),
            txn: Some(&txn),
            ..Ctx::for_request(conn, req)
        };
        let r = request::invoke(s, req, &op);
        drop(op);
        let conflict = match &r {
            Err(e) => e.code == 112,
            Ok(body) => has_conflict(body),
        };
        if conflict && Instant::now() < deadline {
            // Nothing of this attempt stays; run it again on a new snapshot.
            let _ = txn.abort();
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
            continue;
        }
        let mut body = match r {
            Ok(b) => b,
            Err(e) => {
                let _ = txn.abort();
                return Outcome::err(e);
            }
        };
        if let Some(e) = not_primary(&body) {
            let _ = txn.abort();
            return Outcome::err(e);
        }
        let rec = doc! {
            "_id": rid.clone(),
            "txnNum": number,
            "lastWriteDate": bson::DateTime::now(),
            "reply": body.clone(),
        };
        let saved = (|| {
            let lock = record.lock_doc_as(id_key(&rid), Writer::new(Some(&txn)))?;
            match lock.read()? {
                Some(old) => record.replace(&lock, &old, &rec),
                None => record.insert_under(&lock, &rec),
            }
        })();
        if let Err(e) = saved {
            let _ = txn.abort();
            return Outcome::err(coll_err(e));
        }
        // Drivers' tests: fail just before the commit, or lose the reply just after it.
        let test_hook = if s.cfg().test_commands {
            s.on_txn_write().check()
        } else {
            None
        };
        if let Some(code) = test_hook.and_then(|a| a.fail_before_commit) {
            let _ = txn.abort();
            // With `closeConnection` (the default) the client sees a network error, as from
            // mongod: the write did not happen, and the driver retries it.
            if test_hook.is_some_and(|a| a.close_after_commit) {
                conn.close.store(true, std::sync::atomic::Ordering::Release);
            }
            return Outcome::err(crate::fail_command::error_saying(
                code,
                "Failing write before commit via 'onPrimaryTransactionalWrite' failpoint",
            ));
        }
        if let Err(e) = txn.commit(wc.durable) {
            let e = coll_err(e);
            if e.code == 64 {
                // Not known to be replicated in time; it may still be applied.
                body.insert(
                    "writeErrors",
                    vec![Bson::Document(
                        doc! { "index": 0, "code": 64, "errmsg": e.msg.clone() },
                    )],
                );
                wc.settle(s, &mut body);
                return Outcome::of(Ok(body), true);
            }
            return Outcome::err(e);
        }
        if test_hook.is_some_and(|a| a.close_after_commit) {
            conn.close.store(true, std::sync::atomic::Ordering::Release);
        }
        wc.settle(s, &mut body);
        return Outcome::of(Ok(body), true);
    }
}

fn lsid_text(lsid: &Document) -> String {
    match lsid.get("id") {
        Some(Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice())
            .map(|u| bson::Uuid::from_bytes(u).to_string())
            .unwrap_or_else(|_| format!("{lsid}")),
        _ => format!("{lsid}"),
    }
}

/// One statement of a multi-document transaction (its start, commit and abort included).
fn statement(
    s: &Server,
    req: &Request<'_>,
    conn: &ConnInfo,
    args: &SessionArgs<'_>,
    number: i64,
    sess: &mut SessionGuard,
) -> Outcome {
    let (name, cmd) = (req.entry.name, req.cmd);
    // For error messages only.
    let session = || args.lsid.map(lsid_text).unwrap_or_default();
    let too_old = |cur: i64| {
        QueryError::transaction_too_old(format!(
            "Cannot start transaction {number} on session {} because a newer transaction with txnNumber {cur} has started.",
            session()
        ))
    };
    let transient = |e: QueryError| Outcome {
        labels: vec![TRANSIENT],
        ..Outcome::err(e)
    };
    if number < sess.number {
        return Outcome::err(too_old(sess.number));
    }
    if args.start {
        if number == sess.number {
            return Outcome::err(QueryError::conflicting_operation_in_progress(format!(
                "Cannot start transaction {number} on session {} because a transaction with the same number has already started.",
                session()
            )));
        }
        let rc = match parse_read_concern(args.read_concern, cluster_now(s)) {
            Ok(rc) => rc,
            Err(e) => return Outcome::err(e),
        };
        if let Err(e) = settle_read(s, &rc, max_time_of(req.cmd)) {
            return Outcome::err(e);
        }
        if rc.at.is_some() {
            return Outcome::err(QueryError::not_implemented(
                "readConcern atClusterTime in a transaction is not supported by siltd",
            ));
        }
        if matches!(rc.level.as_deref(), Some("available" | "linearizable")) {
            return Outcome::err(QueryError::invalid_options(
                "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction",
            ));
        }
        sess.abort("a newer transaction started");
        sess.number = number;
        match s.store().begin(TxnKind::Multi, s.txn_lock_wait()) {
            Ok(txn) => {
                if let Some(lsid) = args.lsid {
                    txn.set_session(OpSession {
                        lsid: lsid.clone(),
                        txn_number: number,
                    });
                }
                sess.txn = TxnState::Active(Box::new(Active {
                    txn,
                    started: Instant::now(),
                }))
            }
            Err(e) => {
                sess.txn = TxnState::None;
                return Outcome::err(coll_err(e));
            }
        }
    } else {
        if number > sess.number {
            return transient(QueryError::no_such_transaction(format!(
                "Given transaction number {number} does not match any in-progress transactions. The active transaction number is {}",
                sess.number
            )));
        }
        if args.read_concern.is_some() {
            sess.abort("a statement was refused");
            return Outcome::err(QueryError::invalid_options(
                "Only the first command in a transaction may specify a readConcern",
            ));
        }
        let lifetime = s.txn_lifetime();
        if let TxnState::Active(a) = &sess.txn {
            if a.started.elapsed() > lifetime {
                sess.abort("it exceeded transactionLifetimeLimitSeconds");
            }
        }
        match &sess.txn {
            TxnState::Active(_) => {}
            TxnState::Committed => {
                return match name {
                    "commitTransaction" => {
                        Outcome::of(after_write(s, true, cmd, Document::new()), true)
                    }
                    _ => Outcome::err(QueryError::transaction_committed(format!(
                        "Transaction with {{ txnNumber: {number} }} has been committed."
                    ))),
                }
            }
            TxnState::Aborted { why } => {
                return transient(QueryError::no_such_transaction(format!(
                    "Transaction with {{ txnNumber: {number} }} has been aborted: {why}."
                )))
            }
            TxnState::None => {
                return transient(QueryError::no_such_transaction(format!(
                    "Given transaction number {number} does not match any in-progress transactions."
                )))
            }
        }
    }
    if matches!(name, "commitTransaction" | "abortTransaction") {
        // Their handlers end the transaction through the session lent to them.
        let end = TxnEnd {
            sess: std::cell::RefCell::new(sess),
            labels: std::cell::RefCell::new(Vec::new()),
        };
        let op = Ctx {
            txn_end: Some(&end),
            ..Ctx::for_request(conn, req)
        };
        let r = request::invoke(s, req, &op);
        drop(op);
        return Outcome {
            labels: end.labels.take(),
            ..Outcome::of(r, true)
        };
    }
    let refuse = |sess: &mut SessionGuard, e: QueryError| {
        sess.abort("a statement was refused");
        Outcome::err(e)
    };
    if !req.entry.props.in_txn {
        let e = if name == "count" {
            QueryError::operation_not_supported_in_transaction(
                "Cannot run 'count' in a multi-document transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended alternative.",
            )
        } else {
            QueryError::operation_not_supported_in_transaction(format!(
                "Cannot run '{name}' in a multi-document transaction."
            ))
        };
        return refuse(sess, e);
    }
    if cmd.contains_key("writeConcern") {
        return refuse(
            sess,
            QueryError::invalid_options("Cannot set write concern after starting a transaction."),
        );
    }
    let TxnState::Active(active) = &sess.txn else {
        return Outcome::err(QueryError::internal("no active transaction"));
    };
    let op = Ctx {
        snap: Some(active.txn.snapshot().clone()),
        txn: Some(&active.txn),
        ..Ctx::for_request(conn, req)
    };
    let r = request::invoke(s, req, &op);
    drop(op);
    match r {
        Err(e) => {
            sess.abort("a statement failed");
            if matches!(e.code, 112 | 24) {
                transient(e)
            } else {
                Outcome::err(e)
            }
        }
        Ok(body) if has_conflict(&body) => {
            sess.abort("a statement met a write conflict");
            transient(QueryError::write_conflict(
                "Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.",
            ))
        }
        Ok(body) => {
            if body.contains_key("writeErrors") {
                sess.abort("a write failed");
            }
            Outcome::of(Ok(body), req.entry.props.writes)
        }
    }
}

/// The `commitTransaction` command: commit the session's open transaction.
pub(crate) fn commit_transaction(s: &Server, cmd: &Document, op: &Ctx) -> CmdResult {
    let end = op.txn_end.ok_or_else(|| {
        QueryError::command_failed("commitTransaction must be run within a transaction")
    })?;
    let out = commit(s, cmd, &mut end.sess.borrow_mut());
    *end.labels.borrow_mut() = out.labels;
    out.result
}

/// The `abortTransaction` command: abort the session's open transaction.
pub(crate) fn abort_transaction(op: &Ctx) -> CmdResult {
    let end = op.txn_end.ok_or_else(|| {
        QueryError::command_failed("abortTransaction must be run within a transaction")
    })?;
    end.sess.borrow_mut().abort("abortTransaction");
    Ok(Document::new())
}

/// Commit the session's open transaction.
fn commit(s: &Server, cmd: &Document, sess: &mut SessionGuard) -> Outcome {
    let wc = match write_concern(s, cmd) {
        Ok(wc) => wc,
        Err(e) => return Outcome::err(e),
    };
    let TxnState::Active(a) = std::mem::replace(&mut sess.txn, TxnState::Committed) else {
        return Outcome::err(QueryError::internal("no active transaction"));
    };
    if let Err(e) = a.txn.commit(wc.durable) {
        // Whether the commit record reached the log is not known.
        sess.txn = TxnState::Aborted {
            why: "its commit failed",
        };
        return Outcome {
            labels: vec![UNKNOWN_COMMIT],
            ..Outcome::err(coll_err(e))
        };
    }
    let mut body = Document::new();
    wc.settle(s, &mut body);
    Outcome::of(Ok(body), true)
}
