//! What the request pipeline does around a command's handler, as properties of its table
//! entry (`table.rs`): whether it writes, runs under a collation, may be retried or run in a
//! transaction or read at a snapshot, belongs to the versioned API, can be explained, and
//! what kind of operation the profiler and `top` count it as. Every step that differs between
//! commands reads these, and nothing else decides them. The named sets below are what the
//! table's entries use.

/// What kind of operation a command is, for the profiler's `op` and `top`'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Query,
    GetMore,
    Insert,
    Update,
    Remove,
    Command,
}

impl OpKind {
    /// The profiler's `op` field.
    pub(crate) fn profile_name(self) -> &'static str {
        match self {
            OpKind::Query => "query",
            OpKind::GetMore => "getmore",
            OpKind::Insert => "insert",
            OpKind::Update => "update",
            OpKind::Remove => "remove",
            OpKind::Command => "command",
        }
    }

    /// `top`'s counter for it, and the lock it is counted under.
    pub(crate) fn top(self) -> (&'static str, &'static str) {
        match self {
            OpKind::Query => ("queries", "readLock"),
            OpKind::GetMore => ("getmore", "readLock"),
            OpKind::Insert => ("insert", "writeLock"),
            OpKind::Update => ("update", "writeLock"),
            OpKind::Remove => ("remove", "writeLock"),
            OpKind::Command => ("commands", "writeLock"),
        }
    }
}

/// A command's properties: every step of the request pipeline that differs between commands
/// reads them here, and nowhere else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Props {
    /// It writes documents, indexes, users or the catalog: it waits while `fsync` holds its
    /// lock, and write concern `j`/`majority` makes the log durable after it.
    pub writes: bool,
    /// It runs under the command's `collation` (update and delete statements carry their
    /// own; `getMore` its cursor's).
    pub collation: bool,
    /// It may carry a `txnNumber` outside a transaction (a retryable write).
    pub retryable: bool,
    /// A multi-document transaction may run it.
    pub in_txn: bool,
    /// It may read at read concern `snapshot` outside a transaction.
    pub snapshot_read: bool,
    /// It is part of the versioned API's version 1.
    pub api_v1: bool,
    /// `explain` accepts it.
    pub explainable: bool,
    /// It reads documents or the catalog: a member that is not the writable primary serves
    /// it only to a client that allows reading from a secondary (13435 otherwise), and a
    /// member still catching up not at all (13436), as mongod's commands that are
    /// `AllowedOnSecondary::kOptIn`.
    pub reads_data: bool,
    /// The profiler's and `top`'s kind.
    pub op: OpKind,
}

impl Props {
    /// A command that none of the properties applies to.
    pub(crate) const NONE: Props = Props {
        writes: false,
        collation: false,
        retryable: false,
        in_txn: false,
        snapshot_read: false,
        api_v1: false,
        explainable: false,
        reads_data: false,
        op: OpKind::Command,
    };
}

/// Administrative commands, and every command none of the properties applies to.
pub(super) const NONE: Props = Props::NONE;

/// A command that writes and is outside the versioned API (user and role management,
/// `renameCollection`, partitions, ...).
pub(super) const WRITE: Props = Props {
    writes: true,
    ..Props::NONE
};

/// A command of API version 1 that neither writes nor reads documents.
pub(super) const V1: Props = Props {
    api_v1: true,
    ..Props::NONE
};

/// A command that reads the catalog or statistics of data, outside the versioned API
/// (`collStats`, `dbStats`, `dataSize`).
pub(super) const READ: Props = Props {
    reads_data: true,
    ..Props::NONE
};

/// A command of API version 1 that reads the catalog (`listCollections`, `listIndexes`,
/// `listDatabases`) or explains a read.
pub(super) const V1_READ: Props = Props {
    reads_data: true,
    ..V1
};

/// A catalog change of API version 1 (`create`, `drop`, `createIndexes`, ...).
pub(super) const V1_WRITE: Props = Props {
    writes: true,
    api_v1: true,
    ..Props::NONE
};

/// `create` and `createIndexes`: catalog changes a multi-document transaction may make on a
/// collection it creates (MongoDB 4.4), hidden from others until it commits.
pub(super) const V1_WRITE_IN_TXN: Props = Props {
    in_txn: true,
    ..V1_WRITE
};

/// `commitTransaction` and `abortTransaction`.
pub(super) const TXN_END: Props = Props {
    writes: true,
    in_txn: true,
    api_v1: true,
    ..Props::NONE
};

/// `find` and `aggregate`.
pub(super) const FIND: Props = Props {
    collation: true,
    in_txn: true,
    snapshot_read: true,
    api_v1: true,
    explainable: true,
    reads_data: true,
    op: OpKind::Query,
    ..Props::NONE
};

/// `distinct` (outside API version 1).
pub(super) const DISTINCT: Props = Props {
    api_v1: false,
    ..FIND
};

/// `count` (not in a transaction, not a snapshot read).
pub(super) const COUNT: Props = Props {
    in_txn: false,
    snapshot_read: false,
    ..FIND
};

/// `getMore`.
pub(super) const GET_MORE: Props = Props {
    in_txn: true,
    api_v1: true,
    op: OpKind::GetMore,
    ..Props::NONE
};

/// `killCursors`.
pub(super) const KILL_CURSORS: Props = Props {
    in_txn: true,
    api_v1: true,
    ..Props::NONE
};

/// `insert`.
pub(super) const INSERT: Props = Props {
    writes: true,
    retryable: true,
    in_txn: true,
    api_v1: true,
    op: OpKind::Insert,
    ..Props::NONE
};

/// `update`.
pub(super) const UPDATE: Props = Props {
    explainable: true,
    op: OpKind::Update,
    ..INSERT
};

/// `delete`.
pub(super) const DELETE: Props = Props {
    explainable: true,
    op: OpKind::Remove,
    ..INSERT
};

/// `findAndModify`.
pub(super) const FIND_AND_MODIFY: Props = Props {
    collation: true,
    ..UPDATE
};
