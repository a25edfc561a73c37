//! Errors. Callers match on [`Error`]; corruption carries the file and block it was found in,
//! and a poisoned environment its [`PoisonCause`] (the state that holds it is `poison.rs`'s).

use std::fmt;
use std::path::PathBuf;

/// Every error the engine returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error, with the file it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File or directory being accessed.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A checksum or structural check failed: the bytes on disk are not what was written.
    #[error("corruption in {path} at {what}: {detail}")]
    Corruption {
        /// File that holds the bad bytes.
        path: PathBuf,
        /// Which structure (for example `block 17 partition 3`, `header slot 1`).
        what: String,
        /// What check failed.
        detail: String,
    },
    /// No dictionary with this name exists.
    #[error("dictionary not found: {0}")]
    NoSuchDictionary(String),
    /// A dictionary with this name already exists.
    #[error("dictionary already exists: {0}")]
    DictionaryExists(String),
    /// An update message names a function that was never registered.
    #[error("update function {0} is not registered")]
    UnknownUpdateFn(u32),
    /// A key or value is larger than the engine accepts.
    #[error("{what} of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// `key` or `value`.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Options that cannot work together.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// Another process holds the environment's lock file.
    #[error("environment {0} is in use by another process")]
    Locked(PathBuf),
    /// A bulk load was given keys out of order.
    #[error("bulk load keys must be strictly increasing")]
    UnsortedBulkLoad,
    /// An earlier failure poisoned the environment; it refuses writes until reopened.
    #[error("the storage environment refuses writes until it is reopened, because {0}")]
    Poisoned(PoisonCause),
    /// The environment has been closed.
    #[error("environment is closed")]
    Closed,

    /// A lock request waited its whole timeout (`locks.rs`).
    #[error("a lock request timed out waiting for another transaction")]
    LockTimeout,

    /// A lock request would have closed a cycle of waiters; the requester is the victim.
    #[error("a lock request would deadlock; this transaction is the victim")]
    Deadlock,

    /// A call that cannot be carried out as asked (a batch spanning two environments).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Shorthand used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attach a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

pub(crate) fn corruption(
    path: &std::path::Path,
    what: impl Into<String>,
    detail: impl Into<String>,
) -> Error {
    Error::Corruption {
        path: path.to_path_buf(),
        what: what.into(),
        detail: detail.into(),
    }
}

/// Why an environment stopped accepting writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoisonCause {
    /// Writing or syncing the log failed.
    LogWrite(String),
    /// Background work (flushing, eviction write-back, a checkpoint) returned an error.
    Background {
        /// Which work: `flush`, `evict`, `log sync`, `checkpoint`.
        task: &'static str,
        /// The error.
        error: String,
    },
    /// A thread panicked while it held a tree for writing, or an engine worker died.
    Panic {
        /// The thread's name.
        thread: String,
        /// The panic message.
        message: String,
    },
}

impl fmt::Display for PoisonCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoisonCause::LogWrite(e) => write!(f, "a log write failed: {e}"),
            PoisonCause::Background { task, error } => {
                write!(f, "background {task} failed: {error}")
            }
            PoisonCause::Panic { thread, message } => {
                write!(f, "thread '{thread}' panicked: {message}")
            }
        }
    }
}
