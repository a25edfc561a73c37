//! The fail points drivers' tests use. `failGetMoreAfterCursorCheckout`
//! ([`GetMoreFailure`]) fails the next `getMore`s with `errorCode` (the cursor is gone, as
//! after any `getMore` error). `onPrimaryTransactionalWrite` ([`OnTxnWrite`]) fails
//! a retryable write just before its commit (`failBeforeCommitExceptionCode`) or closes the
//! connection just after it (`closeConnection`, the default), so that the driver retries a
//! write that did or did not happen. The rest of this file is `failCommand`, as drivers'
//! tests use it (`configureFailPoint` under
//! `--enable-test-commands`): commands named in `data.failCommands` fail with `errorCode`,
//! close the connection, wait `blockTimeMS` first, or succeed with a `writeConcernError`;
//! `appName` limits it to the connections that gave that application name in their
//! handshake. Modes: `alwaysOn`, `{times: n}` (the next n matching commands), `{skip: n}`
//! (all but the next n), `off`.
//!
//! It is checked in the request pipeline (`request.rs`, before the command runs; the
//! `writeConcernError` after); the reply's labels are the ones mongod adds
//! (`error_labels.rs`) unless `errorLabels` names them.

use std::time::Duration;

use bson::{Bson, Document};
use parking_lot::Mutex;
use silt_query::{QResult, QueryError};

/// How often the fail point fires.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Mode {
    #[default]
    Off,
    AlwaysOn,
    /// Fires this many more times.
    Times(i64),
    /// Lets this many more matching commands through, then fires on every one.
    Skip(i64),
}

/// What `data` asks for.
#[derive(Clone, Debug, Default)]
struct Spec {
    commands: Vec<String>,
    error_code: Option<i32>,
    error_labels: Option<Vec<String>>,
    close_connection: bool,
    block: Option<Duration>,
    write_concern_error: Option<Document>,
    app_name: Option<String>,
}

/// What a matching command does.
#[derive(Clone, Debug, Default)]
pub(crate) struct Action {
    /// Close the connection without a reply.
    pub close: bool,
    /// Wait this long before going on.
    pub block: Option<Duration>,
    /// Fail with this code (and these labels, when the fail point names them).
    pub error: Option<(i32, Option<Vec<String>>)>,
    /// Run the command, then add this `writeConcernError` to its reply.
    pub write_concern_error: Option<Document>,
}

/// The fail point's state (one per server).
#[derive(Default)]
pub(crate) struct FailCommand {
    armed: Armed<Spec>,
}

impl FailCommand {
    /// `configureFailPoint: "failCommand"`: set the mode and data; returns how many times the
    /// fail point fired since it was last configured (mongod's `count`).
    pub(crate) fn configure(&self, mode: &Bson, data: Option<&Document>) -> QResult<i64> {
        let mode = parse_mode(mode)?;
        let spec = match (mode, data) {
            (Mode::Off, _) => Spec::default(),
            (_, Some(d)) => parse_data(d)?,
            (_, None) => {
                return Err(QueryError::bad_value(
                    "'data' must be an object for the failCommand fail point",
                ))
            }
        };
        Ok(self.armed.arm(mode, spec))
    }

    /// What the fail point does to command `name` from a connection whose application name is
    /// `app`; `None` when it lets it through.
    pub(crate) fn check(&self, name: &str, app: Option<&str>) -> Option<Action> {
        let spec = self.armed.fire_if(|spec| {
            spec.commands.iter().any(|c| c == name)
                && spec
                    .app_name
                    .as_deref()
                    .is_none_or(|want| app == Some(want))
        })?;
        Some(Action {
            close: spec.close_connection,
            block: spec.block,
            error: spec.error_code.map(|c| (c, spec.error_labels.clone())),
            write_concern_error: spec.write_concern_error,
        })
    }
}

/// `failGetMoreAfterCursorCheckout`: the code the next `getMore`s fail with.
#[derive(Default)]
pub(crate) struct GetMoreFailure {
    armed: Armed<i32>,
}

impl GetMoreFailure {
    /// Set the mode and `data.errorCode`; returns how many times it fired since last set.
    pub(crate) fn configure(&self, mode: &Bson, data: Option<&Document>) -> QResult<i64> {
        let mode = parse_mode(mode)?;
        let code = match data.and_then(|d| d.get("errorCode")) {
            Some(v) => {
                int32(v).ok_or_else(|| QueryError::bad_value("'errorCode' must be a number"))?
            }
            None if mode == Mode::Off => 0,
            None => {
                return Err(QueryError::bad_value(
                    "failGetMoreAfterCursorCheckout needs data: {errorCode}",
                ))
            }
        };
        Ok(self.armed.arm(mode, code))
    }

    /// The error for the `getMore` that just checked its cursor out, if it fires.
    pub(crate) fn check(&self) -> Option<QueryError> {
        let code = self.armed.fire_if(|_| true)?;
        Some(error_saying(
            code,
            "Hit the 'failGetMoreAfterCursorCheckout' failpoint",
        ))
    }
}

/// Whether a fail point in `mode` fires now (counting `times` and `skip` down).
fn fire(mode: &mut Mode) -> bool {
    match mode {
        Mode::Off => false,
        Mode::AlwaysOn => true,
        Mode::Times(n) => {
            *n -= 1;
            if *n <= 0 {
                *mode = Mode::Off;
            }
            true
        }
        Mode::Skip(n) if *n > 0 => {
            *n -= 1;
            false
        }
        Mode::Skip(_) => true,
    }
}

/// A fail point's mode and data, and how often it fired: the state every fail point here
/// keeps. Its one lock is a leaf: nothing else is taken while it is held.
struct Armed<T> {
    state: Mutex<(Mode, T, i64)>,
}

impl<T: Clone + Default> Default for Armed<T> {
    fn default() -> Armed<T> {
        Armed {
            state: Mutex::new((Mode::Off, T::default(), 0)),
        }
    }
}

impl<T: Clone + Default> Armed<T> {
    /// Set the mode and data; returns how many times it fired since it was last set.
    fn arm(&self, mode: Mode, data: T) -> i64 {
        let mut st = self.state.lock();
        let fired = st.2;
        *st = (mode, data, 0);
        fired
    }

    /// The data, if the fail point fires now for a command `applies` accepts (a command it
    /// does not apply to leaves `times` and `skip` as they are).
    fn fire_if(&self, applies: impl FnOnce(&T) -> bool) -> Option<T> {
        let mut st = self.state.lock();
        let (mode, data, fired) = &mut *st;
        if *mode == Mode::Off || !applies(data) || !fire(mode) {
            return None;
        }
        *fired += 1;
        Some(data.clone())
    }
}

/// `onPrimaryTransactionalWrite`: what happens around a retryable write's commit.
#[derive(Default)]
pub(crate) struct OnTxnWrite {
    armed: Armed<TxnWriteAction>,
}

/// What a fired `onPrimaryTransactionalWrite` does.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TxnWriteAction {
    /// Close the connection after the write commits (no reply; the write happened).
    pub close_after_commit: bool,
    /// Fail before the commit with this code (nothing written).
    pub fail_before_commit: Option<i32>,
}

impl OnTxnWrite {
    /// Set the mode and data; returns how many times it fired since last configured.
    pub(crate) fn configure(&self, mode: &Bson, data: Option<&Document>) -> QResult<i64> {
        let mode = parse_mode(mode)?;
        let mut action = TxnWriteAction {
            close_after_commit: true,
            fail_before_commit: None,
        };
        for (k, v) in data.into_iter().flatten() {
            match k.as_str() {
                "closeConnection" => {
                    action.close_after_commit = silt_query::matcher::is_truthy(v);
                }
                "failBeforeCommitExceptionCode" => {
                    action.fail_before_commit = Some(int32(v).ok_or_else(|| {
                        QueryError::bad_value("'failBeforeCommitExceptionCode' must be a number")
                    })?);
                }
                other => {
                    return Err(QueryError::bad_value(format!(
                        "unknown onPrimaryTransactionalWrite data field '{other}'"
                    )))
                }
            }
        }
        Ok(self.armed.arm(mode, action))
    }

    /// Whether it fires for the retryable write about to commit.
    pub(crate) fn check(&self) -> Option<TxnWriteAction> {
        self.armed.fire_if(|_| true)
    }
}

fn parse_mode(mode: &Bson) -> QResult<Mode> {
    let count = |d: &Document, k: &str| -> QResult<i64> {
        match d.get(k).and_then(silt_bson::compare::as_num) {
            Some(silt_bson::compare::Num::Int(n)) if n >= 0 => Ok(n),
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a whole non-negative count; larger ones saturate"
            )]
            Some(silt_bson::compare::Num::Float(f)) if f >= 0.0 && f.fract() == 0.0 => Ok(f as i64),
            _ => Err(QueryError::bad_value(format!(
                "'{k}' option to 'mode' must be a non-negative integer"
            ))),
        }
    };
    match mode {
        Bson::String(m) if m == "off" => Ok(Mode::Off),
        Bson::String(m) if m == "alwaysOn" => Ok(Mode::AlwaysOn),
        Bson::Document(d) if d.contains_key("times") => match count(d, "times")? {
            0 => Ok(Mode::Off),
            n => Ok(Mode::Times(n)),
        },
        Bson::Document(d) if d.contains_key("skip") => Ok(Mode::Skip(count(d, "skip")?)),
        Bson::Document(d) if d.contains_key("activationProbability") => {
            Err(QueryError::not_implemented(
                "the failCommand mode activationProbability is not implemented",
            ))
        }
        other => Err(QueryError::bad_value(format!(
            "'mode' must be one of 'off', 'alwaysOn', 'times' and 'skip', not {other}"
        ))),
    }
}

fn parse_data(d: &Document) -> QResult<Spec> {
    let mut spec = Spec::default();
    for (k, v) in d {
        match (k.as_str(), v) {
            ("failCommands", Bson::Array(a)) => {
                for c in a {
                    let Bson::String(c) = c else {
                        return Err(QueryError::bad_value(
                            "'failCommands' must be an array of command names",
                        ));
                    };
                    spec.commands.push(c.clone());
                }
            }
            ("errorCode", v) => {
                spec.error_code = Some(
                    int32(v)
                        .ok_or_else(|| QueryError::bad_value("'errorCode' must be a number"))?,
                );
            }
            ("errorLabels", Bson::Array(a)) => {
                let labels = a
                    .iter()
                    .map(|l| match l {
                        Bson::String(s) => Ok(s.clone()),
                        _ => Err(QueryError::bad_value("'errorLabels' must be strings")),
                    })
                    .collect::<QResult<Vec<_>>>()?;
                spec.error_labels = Some(labels);
            }
            ("closeConnection", v) => spec.close_connection = silt_query::matcher::is_truthy(v),
            ("blockConnection", v) => {
                if silt_query::matcher::is_truthy(v) {
                    spec.block.get_or_insert(Duration::ZERO);
                }
            }
            ("blockTimeMS", v) => {
                let ms = int32(v)
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| QueryError::bad_value("'blockTimeMS' must be a number"))?;
                if spec.block.is_some() || d.get_bool("blockConnection") == Ok(true) {
                    spec.block = Some(Duration::from_millis(ms));
                }
            }
            ("writeConcernError", Bson::Document(w)) => spec.write_concern_error = Some(w.clone()),
            ("appName", Bson::String(a)) => spec.app_name = Some(a.clone()),
            // Whether internal (server-to-server) commands fail too: siltd has none yet.
            ("failInternalCommands", _) | ("threadName", _) | ("namespace", _) => {}
            (k, _) => {
                return Err(QueryError::bad_value(format!(
                    "unknown or malformed failCommand data field '{k}'"
                )))
            }
        }
    }
    if spec.commands.is_empty() {
        return Err(QueryError::bad_value(
            "'failCommands' must be a non-empty array of command names",
        ));
    }
    Ok(spec)
}

fn int32(v: &Bson) -> Option<i32> {
    match silt_bson::compare::as_num(v)? {
        silt_bson::compare::Num::Int(n) => i32::try_from(n).ok(),
        silt_bson::compare::Num::Float(f) if f.fract() == 0.0 && f.abs() <= f64::from(i32::MAX) =>
        {
            #[expect(clippy::cast_possible_truncation, reason = "whole and within i32")]
            Some(f as i32)
        }
        silt_bson::compare::Num::Float(_) => None,
    }
}

/// The error a fired `failCommand` answers with: mongod's message, the code's name.
pub(crate) fn error(code: i32) -> QueryError {
    error_saying(code, "Failing command via 'failCommand' failpoint")
}

/// An error with `code` (and its name, when known) and `msg`.
pub(crate) fn error_saying(code: i32, msg: &str) -> QueryError {
    match code_name(code) {
        Some(name) => QueryError::coded(code, name, msg),
        None => QueryError::located(code, msg),
    }
}

/// Names of the codes drivers' tests make the fail point answer with.
fn code_name(code: i32) -> Option<&'static str> {
    Some(match code {
        1 => "InternalError",
        2 => "BadValue",
        6 => "HostUnreachable",
        7 => "HostNotFound",
        8 => "UnknownError",
        11 => "UserNotFound",
        13 => "Unauthorized",
        18 => "AuthenticationFailed",
        20 => "IllegalOperation",
        24 => "LockTimeout",
        43 => "CursorNotFound",
        50 => "MaxTimeMSExpired",
        59 => "CommandNotFound",
        63 => "StaleShardVersion",
        64 => "WriteConcernFailed",
        89 => "NetworkTimeout",
        91 => "ShutdownInProgress",
        96 => "OperationFailed",
        100 => "UnsatisfiableWriteConcern",
        112 => "WriteConflict",
        133 => "FailedToSatisfyReadPreference",
        134 => "ReadConcernMajorityNotAvailableYet",
        150 => "StaleEpoch",
        175 => "QueryPlanKilled",
        189 => "PrimarySteppedDown",
        211 => "KeyNotFound",
        234 => "RetryChangeStream",
        237 => "CursorKilled",
        239 => "SnapshotTooOld",
        246 => "SnapshotUnavailable",
        251 => "NoSuchTransaction",
        262 => "ExceededTimeLimit",
        267 => "PreparedTransactionInProgress",
        280 => "ChangeStreamFatalError",
        286 => "ChangeStreamHistoryLost",
        9001 => "SocketException",
        10058 => "LegacyNotPrimary",
        10107 => "NotWritablePrimary",
        11600 => "InterruptedAtShutdown",
        11601 => "Interrupted",
        11602 => "InterruptedDueToReplStateChange",
        13435 => "NotPrimaryNoSecondaryOk",
        13436 => "NotPrimaryOrSecondary",
        13388 => "StaleConfig",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn modes_count_down_and_match_names_and_apps() {
        let f = FailCommand::default();
        let data = doc! { "failCommands": ["insert"], "errorCode": 91 };
        assert_eq!(f.configure(&bson!({"times": 2}), Some(&data)).unwrap(), 0);
        assert!(f.check("find", None).is_none());
        assert_eq!(f.check("insert", None).unwrap().error.unwrap().0, 91);
        assert!(f.check("insert", None).is_some());
        assert!(f.check("insert", None).is_none());
        assert_eq!(f.configure(&bson!("off"), None).unwrap(), 2);

        let data = doc! { "failCommands": ["ping"], "closeConnection": true, "appName": "a" };
        f.configure(&bson!({"skip": 1}), Some(&data)).unwrap();
        assert!(f.check("ping", Some("b")).is_none());
        assert!(f.check("ping", Some("a")).is_none(), "skipped once");
        assert!(f.check("ping", Some("a")).unwrap().close);
        assert!(f.check("ping", None).is_none());
    }

    #[test]
    fn bad_data_is_refused() {
        let f = FailCommand::default();
        assert!(f.configure(&bson!("alwaysOn"), None).is_err());
        assert!(f
            .configure(&bson!("alwaysOn"), Some(&doc! {"errorCode": 2}))
            .is_err());
        assert!(f.configure(&bson!("sometimes"), Some(&doc! {})).is_err());
    }
}
