//! The command context: what one command runs in (its connection, the transaction it writes
//! in and the snapshot it reads), and the only way handlers read and write documents.

use bson::Document;
use silt_collection::{CollError, Collection, DocLock, Snapshot, Transaction, Writer};

use crate::conn::ConnInfo;
use crate::sessions::TxnEnd;

/// What one command runs in: its connection, and (when it runs in a session's transaction,
/// or is a retryable write, or a snapshot read) the transaction it writes in and the snapshot
/// it reads. Handlers read and write only through it, so that a command in a transaction
/// cannot read past its snapshot or write outside it; every write is made by its
/// [`Writer`], under the document layer's write rules.
pub(crate) struct Ctx<'a> {
    pub conn: &'a ConnInfo,
    /// The transaction writes go into; `None`: each write commits on its own.
    pub txn: Option<&'a Transaction>,
    /// The snapshot reads use; `None`: each read takes a new one.
    pub snap: Option<Snapshot>,
    /// The command's `bypassDocumentValidation` (set by `request::invoke`).
    pub bypass_validation: std::cell::Cell<bool>,
    /// For `commitTransaction` and `abortTransaction`: the session whose transaction they end.
    pub txn_end: Option<&'a TxnEnd<'a>>,
    /// The command's `lsid`, if it runs in a session.
    pub lsid: Option<&'a Document>,
    /// The command's repeated keys (`repeated.rs`).
    pub repeated: &'a [silt_wire::RepeatedKey],
}

impl<'a> Ctx<'a> {
    /// A command outside any transaction; `cmd` is the command (its `lsid` names the session).
    pub(crate) fn new(conn: &'a ConnInfo, cmd: &'a Document) -> Ctx<'a> {
        Ctx {
            conn,
            txn: None,
            snap: None,
            bypass_validation: std::cell::Cell::new(false),
            txn_end: None,
            lsid: cmd.get_document("lsid").ok(),
            repeated: &[],
        }
    }

    /// A command of a request outside any transaction.
    pub(crate) fn for_request(conn: &'a ConnInfo, req: &'a crate::request::Request<'a>) -> Ctx<'a> {
        Ctx {
            repeated: req.repeated,
            ..Ctx::new(conn, req.cmd)
        }
    }

    /// Who owns the cursors this command opens: its session and the connection's user.
    pub(crate) fn cursor_owner(&self) -> crate::cursors::Owner {
        crate::cursors::Owner {
            session: self.lsid.cloned(),
            user: self.conn.auth.user(),
        }
    }

    /// A statement of a multi-document transaction (not a retryable write's own
    /// transaction): what it reads must come from its snapshot, so shortcuts that read the
    /// latest state (index-only fast updates) are off.
    pub(crate) fn multi(&self) -> bool {
        self.txn.is_some_and(Transaction::is_multi)
    }

    /// Who this command's writes are made by.
    pub(crate) fn writer(&self) -> Writer<'a> {
        Writer::new(self.txn).bypassing_validation(self.bypass_validation.get())
    }

    /// The snapshot a read of `coll` uses.
    pub(crate) fn snap(&self, coll: &Collection) -> Snapshot {
        match &self.snap {
            Some(s) => s.clone(),
            None => coll.snapshot(),
        }
    }

    /// Lock the document with encoded `_id` `key` of `coll` for a write in this operation.
    pub(crate) fn lock_doc<'c>(
        &'c self,
        coll: &'c Collection,
        key: Vec<u8>,
    ) -> Result<DocLock<'c>, CollError> {
        coll.lock_doc_as(key, self.writer())
    }

    /// Insert `d` into `coll` in this operation.
    pub(crate) fn insert(&self, coll: &Collection, d: &Document) -> Result<(), CollError> {
        coll.insert_as(d, self.writer())
    }
}

impl std::ops::Deref for Ctx<'_> {
    type Target = ConnInfo;
    fn deref(&self) -> &ConnInfo {
        self.conn
    }
}
