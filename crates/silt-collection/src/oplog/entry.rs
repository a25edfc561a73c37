//! Oplog entries in MongoDB's format.
//!
//! An entry is `{op, ns, ui, o, o2?, ts, t, v: 2, wall}`, with `lsid`, `txnNumber`, `stmtId`
//! and `prevOpTime` around it for a write of a session (retryable writes), as mongod 7 writes
//! them:
//! - `i`: `o` the document, `o2` its `{_id}`;
//! - `u`: `o` the `$v: 2` diff (`diff.rs`) or, for a replacement, the new document; `o2` the
//!   `{_id}`;
//! - `d`: `o` the `{_id}`;
//! - `c`: `ns` is `<db>.$cmd` and `o` the command (`create`, `drop`, `applyOps`, ...);
//! - `n`: a no-op (`o: {msg}`), written by an idle member so readers see time pass.
//!
//! [`Op`] is what a write knows (the part of the entry without its time); a transaction
//! keeps its writes' `Op`s and logs them as one `applyOps` entry when it commits.

use bson::{doc, Bson, Document, Timestamp};

/// One change, as a write describes it: an entry without its time (and, inside an
/// `applyOps`, exactly one of its operations).
#[derive(Debug, Clone, PartialEq)]
pub struct Op(pub Document);

impl Op {
    /// The insert of `doc` into `ns`.
    pub fn insert(ns: &str, ui: bson::Uuid, doc: &Document) -> Op {
        Op(doc! {
            "op": "i",
            "ns": ns,
            "ui": ui,
            "o": doc.clone(),
            "o2": id_of(doc),
        })
    }

    /// An update of the document with `old` as it was and `new` as it is: a `$v: 2` diff.
    pub fn update(ns: &str, ui: bson::Uuid, old: &Document, new: &Document) -> Op {
        Op(doc! {
            "op": "u",
            "ns": ns,
            "ui": ui,
            "o": { "$v": 2, "diff": super::diff::diff_docs(old, new) },
            "o2": id_of(new),
        })
    }

    /// A replacement of the document by `new` (mongod logs the whole new document).
    pub fn replace(ns: &str, ui: bson::Uuid, new: &Document) -> Op {
        Op(doc! {
            "op": "u",
            "ns": ns,
            "ui": ui,
            "o": new.clone(),
            "o2": id_of(new),
        })
    }

    /// A fast update: the engine's update message (function `func`, argument `arg`) of the
    /// document with `_id` `id`, logged without reading the document. `arg` is shown as the
    /// document it encodes (a binary when it is not one).
    pub fn message(ns: &str, ui: bson::Uuid, id: Bson, func: u32, arg: &[u8]) -> Op {
        let arg = match Document::from_reader(arg) {
            Ok(d) => Bson::Document(d),
            Err(_) => Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: arg.to_vec(),
            }),
        };
        Op(doc! {
            "op": "u",
            "ns": ns,
            "ui": ui,
            "o": { "$silt": 1, "fn": i64::from(func), "arg": arg },
            "o2": { "_id": id },
        })
    }

    /// The delete of `old`.
    pub fn delete(ns: &str, ui: bson::Uuid, old: &Document) -> Op {
        Op(doc! {
            "op": "d",
            "ns": ns,
            "ui": ui,
            "o": id_of(old),
        })
    }

    /// A command on database `db` (`o` the command document); `ui` for one that names a
    /// collection.
    pub fn command(db: &str, ui: Option<bson::Uuid>, o: Document) -> Op {
        let mut d = doc! { "op": "c", "ns": format!("{db}.$cmd") };
        if let Some(u) = ui {
            d.insert("ui", u);
        }
        d.insert("o", o);
        Op(d)
    }

    /// A no-op carrying `msg`.
    pub fn noop(msg: &str) -> Op {
        Op(doc! { "op": "n", "ns": "", "o": { "msg": msg } })
    }
}

fn id_of(d: &Document) -> Document {
    doc! { "_id": d.get("_id").cloned().unwrap_or(Bson::Null) }
}

/// The session a write belongs to, as its entry names it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSession {
    /// `lsid`: the logical session id (`{id, uid?}`).
    pub lsid: Document,
    /// `txnNumber`.
    pub txn_number: i64,
}

/// A session's write as its entry names it: the session, the statement's id (none inside
/// an `applyOps`) and the previous entry of the same transaction number (`None` for the
/// first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionStmt<'a> {
    pub session: &'a OpSession,
    pub stmt: Option<i32>,
    pub prev: Option<(Timestamp, i64)>,
}

/// The time part of an entry: when, in which term, and the wall clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp {
    pub ts: Timestamp,
    pub term: i64,
    pub wall: bson::DateTime,
}

/// The optime before the first write of a session's transaction number.
fn null_optime() -> Document {
    doc! { "ts": Timestamp { time: 0, increment: 0 }, "t": -1i64 }
}

/// The entry of `op` at `stamp`, of a session's write when `session` is given.
pub(crate) fn entry(op: &Op, stamp: Stamp, session: Option<SessionStmt<'_>>) -> Document {
    let mut d = Document::new();
    if let Some(s) = session {
        d.insert("lsid", s.session.lsid.clone());
        d.insert("txnNumber", s.session.txn_number);
    }
    for (k, v) in &op.0 {
        d.insert(k.clone(), v.clone());
    }
    if let Some(stmt) = session.and_then(|s| s.stmt) {
        d.insert("stmtId", stmt);
    }
    d.insert("ts", stamp.ts);
    d.insert("t", stamp.term);
    d.insert("v", 2i64);
    d.insert("wall", stamp.wall);
    if let Some(s) = session {
        d.insert(
            "prevOpTime",
            s.prev
                .map_or_else(null_optime, |(ts, t)| doc! { "ts": ts, "t": t }),
        );
    }
    d
}

/// The entry of a multi-document transaction: one `applyOps` command with its operations in
/// the order they were made.
pub(crate) fn transaction(ops: &[Op], stamp: Stamp, session: Option<&OpSession>) -> Document {
    let list: Vec<Bson> = ops.iter().map(|o| Bson::Document(o.0.clone())).collect();
    let op = Op(doc! {
        "op": "c",
        "ns": "admin.$cmd",
        "o": { "applyOps": list },
    });
    entry(
        &op,
        stamp,
        session.map(|session| SessionStmt {
            session,
            stmt: None,
            prev: None,
        }),
    )
}
