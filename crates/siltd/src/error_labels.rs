//! The error labels mongod adds to a reply, which drivers act on: `RetryableWriteError` when a
//! retryable write (or a commit or abort) fails with a retryable code, or its write concern
//! does; `TransientTransactionError` when a statement of a transaction fails with a transient
//! one. (`transactions.rs` also labels what its own transaction machinery refuses.)

/// Codes a retryable write may be retried after (the retryable-writes specification's list).
fn retryable(code: i32) -> bool {
    matches!(
        code,
        6 | 7 | 89 | 91 | 189 | 262 | 9001 | 10107 | 11600 | 11602 | 13435 | 13436
    )
}

/// Codes that say this member is not, or stopped being, the primary (mongod's
/// `isNotPrimaryError`): a write that meets one fails as a whole command.
pub(crate) fn not_primary(code: i32) -> bool {
    matches!(code, 91 | 189 | 10107 | 11600 | 11602 | 13435 | 13436)
}

/// Codes that make a transaction statement's error transient: a conflict, a lock timeout,
/// a lost primary or a network failure.
fn transient(code: i32) -> bool {
    transient_at_commit(code) || retryable(code) || code == 10058
}

/// Codes that make a `commitTransaction` or `abortTransaction` error transient (mongod's
/// `isTransientTransactionError`): a conflict, a lock timeout, a prepared transaction in the
/// way, a snapshot error, or no such transaction (unless the write concern failed).
fn transient_at_commit(code: i32) -> bool {
    matches!(code, 24 | 112 | 239 | 246 | 251 | 267)
}

/// Codes after which a change stream resumes (the change-streams specification's list),
/// labelled `ResumableChangeStreamError` on a change stream's `getMore`.
pub(crate) fn resumable_change_stream(code: i32) -> bool {
    matches!(
        code,
        6 | 7
            | 63
            | 89
            | 91
            | 133
            | 150
            | 189
            | 234
            | 262
            | 9001
            | 10107
            | 11600
            | 11602
            | 13388
            | 13435
            | 13436
    )
}

/// The label of a change stream error the driver resumes after.
pub(crate) const RESUMABLE_CHANGE_STREAM: &str = "ResumableChangeStreamError";

/// The command's session: how mongod chooses the labels of its errors.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Session {
    /// No transaction number.
    Plain,
    /// A retryable write (a transaction number outside a transaction).
    RetryableWrite,
    /// A statement of a transaction, `commitTransaction` and `abortTransaction` excepted.
    InTransaction,
    /// `commitTransaction` or `abortTransaction`.
    CommitOrAbort,
}

/// The labels mongod adds to an error with `code` (or to a reply whose write concern failed
/// with `code`) in this kind of session.
pub(crate) fn labels_for(session: Session, code: i32, write_concern: bool) -> Vec<&'static str> {
    match session {
        Session::RetryableWrite | Session::CommitOrAbort if retryable(code) => {
            vec![RETRYABLE_WRITE]
        }
        Session::CommitOrAbort if !write_concern && transient_at_commit(code) => {
            vec![crate::transactions::TRANSIENT]
        }
        Session::InTransaction if !write_concern && transient(code) => {
            vec![crate::transactions::TRANSIENT]
        }
        _ => Vec::new(),
    }
}

/// The label of a retryable write that may be retried.
pub(crate) const RETRYABLE_WRITE: &str = "RetryableWriteError";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_the_session() {
        assert_eq!(
            labels_for(Session::RetryableWrite, 91, false),
            ["RetryableWriteError"]
        );
        assert!(labels_for(Session::RetryableWrite, 2, false).is_empty());
        assert!(labels_for(Session::Plain, 91, false).is_empty());
        assert_eq!(
            labels_for(Session::InTransaction, 112, false),
            ["TransientTransactionError"]
        );
        assert_eq!(
            labels_for(Session::CommitOrAbort, 189, true),
            ["RetryableWriteError"]
        );
    }
}
