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

use bson::raw::RawBinaryRef;
use bson::{doc, Bson, Document, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};

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

/// The entry of `op` at `stamp`, of a session's write when `session` is given, encoded:
/// `{lsid?, txnNumber?, <op's fields>, stmtId?, ts, t, v: 2, wall, prevOpTime?}`, the field
/// order of mongod 7. `op` is given encoded (`op_bytes`) and spliced in whole, so an entry costs
/// one encoding of the change and no copy of its document.
pub(crate) fn encode(op_bytes: &[u8], stamp: Stamp, session: Option<SessionStmt<'_>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(op_bytes.len() + 64);
    out.extend_from_slice(&[0; 4]);
    if let Some(s) = session {
        let head = doc! { "lsid": s.session.lsid.clone(), "txnNumber": s.session.txn_number };
        splice(&mut out, &crate::encode_doc(&head));
    }
    splice(&mut out, op_bytes);
    let mut tail = RawDocumentBuf::new();
    if let Some(stmt) = session.and_then(|s| s.stmt) {
        tail.append("stmtId", stmt);
    }
    tail.append("ts", stamp.ts);
    tail.append("t", stamp.term);
    tail.append("v", 2i64);
    tail.append("wall", stamp.wall);
    if let Some(s) = session {
        let (ts, t) = s.prev.unwrap_or((
            Timestamp {
                time: 0,
                increment: 0,
            },
            -1,
        ));
        let mut prev = RawDocumentBuf::new();
        prev.append("ts", ts);
        prev.append("t", t);
        tail.append("prevOpTime", prev);
    }
    splice(&mut out, tail.as_bytes());
    out.push(0);
    let len = i32::try_from(out.len()).unwrap_or(i32::MAX);
    out[..4].copy_from_slice(&len.to_le_bytes());
    out
}

/// Append the elements of `doc` (one whole encoded document) to `out`.
fn splice(out: &mut Vec<u8>, doc: &[u8]) {
    if doc.len() > 5 {
        out.extend_from_slice(&doc[4..doc.len() - 1]);
    }
}

/// [`Op::message`], encoded straight from the message's bytes: a fast update's entry is built
/// without decoding its argument into a document (the same bytes as encoding the `Op`).
pub(crate) fn encode_message(
    ns: &str,
    ui: bson::Uuid,
    id: &Bson,
    func: u32,
    arg: &[u8],
) -> Vec<u8> {
    let mut d = RawDocumentBuf::new();
    d.append("op", "u");
    d.append("ns", ns);
    d.append("ui", bson::Binary::from_uuid(ui));
    let mut o = RawDocumentBuf::new();
    o.append("$silt", 1i32);
    o.append("fn", i64::from(func));
    match RawDocument::from_bytes(arg) {
        Ok(a) if valid(a) => o.append_ref("arg", a),
        _ => o.append_ref(
            "arg",
            RawBinaryRef {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: arg,
            },
        ),
    }
    d.append("o", o);
    let mut o2 = RawDocumentBuf::new();
    match RawBson::try_from(id.clone()) {
        Ok(v) => o2.append("_id", v),
        Err(_) => return crate::encode_doc(&Op::message(ns, ui, id.clone(), func, arg).0),
    }
    d.append("o2", o2);
    d.into_bytes()
}

/// Whether `doc` is well-formed BSON all the way down (what decoding it would accept).
fn valid(doc: &RawDocument) -> bool {
    doc.iter().all(|e| e.is_ok_and(|(_, v)| valid_value(v)))
}

fn valid_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Document(d) => valid(d),
        RawBsonRef::Array(a) => a.into_iter().all(|v| v.is_ok_and(valid_value)),
        _ => true,
    }
}

/// The change of a multi-document transaction: one `applyOps` command with its operations
/// in the order they were made (its entry carries the session, without a statement id).
pub(crate) fn transaction(ops: &[Op]) -> Op {
    let list: Vec<Bson> = ops.iter().map(|o| Bson::Document(o.0.clone())).collect();
    Op(doc! {
        "op": "c",
        "ns": "admin.$cmd",
        "o": { "applyOps": list },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry as a document, field by field: what [`encode`] must give byte for byte.
    fn reference(op: &Op, stamp: Stamp, session: Option<SessionStmt<'_>>) -> Document {
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
            let (ts, t) = s.prev.unwrap_or((
                Timestamp {
                    time: 0,
                    increment: 0,
                },
                -1,
            ));
            d.insert("prevOpTime", doc! { "ts": ts, "t": t });
        }
        d
    }

    #[test]
    fn encoded_entries_are_the_documents_bytes() {
        let ui = bson::Uuid::new();
        let stamp = Stamp {
            ts: Timestamp {
                time: 1_700_000_000,
                increment: 7,
            },
            term: 3,
            wall: bson::DateTime::from_millis(1_700_000_000_123),
        };
        let session = OpSession {
            lsid: doc! { "id": bson::Uuid::new(), "uid": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1; 32] } },
            txn_number: 42,
        };
        let old = doc! { "_id": 1, "a": [1, { "b": "x" }], "c": 2.5 };
        let new = doc! { "_id": 1, "a": [1], "d": null };
        let ops = [
            Op::insert("db.c", ui, &old),
            Op::update("db.c", ui, &old, &new),
            Op::replace("db.c", ui, &new),
            Op::delete("db.c", ui, &old),
            Op::command("db", Some(ui), doc! { "create": "c" }),
            Op::noop("periodic noop"),
            transaction(&[Op::insert("db.c", ui, &old), Op::delete("db.c", ui, &new)]),
        ];
        let sessions = [
            None,
            Some(SessionStmt {
                session: &session,
                stmt: Some(0),
                prev: None,
            }),
            Some(SessionStmt {
                session: &session,
                stmt: Some(3),
                prev: Some((stamp.ts, 2)),
            }),
            Some(SessionStmt {
                session: &session,
                stmt: None,
                prev: None,
            }),
        ];
        for op in &ops {
            for s in sessions {
                let want = crate::encode_doc(&reference(op, stamp, s));
                assert_eq!(encode(&crate::encode_doc(&op.0), stamp, s), want, "{op:?}");
            }
        }
    }

    #[test]
    fn encoded_messages_are_the_ops_bytes() {
        let ui = bson::Uuid::new();
        let arg = crate::encode_doc(&doc! { "id": 5, "u": { "$inc": { "n": 1 } }, "up": false });
        let ids = [
            Bson::Int32(5),
            Bson::String("k".into()),
            Bson::Document(doc! { "a": [1, 2] }),
            Bson::ObjectId(bson::oid::ObjectId::new()),
            Bson::Null,
        ];
        for id in ids {
            for a in [&arg[..], b"not bson", &[5, 0, 0, 0, 0][..], &[]] {
                let want = crate::encode_doc(&Op::message("db.c", ui, id.clone(), 9, a).0);
                assert_eq!(encode_message("db.c", ui, &id, 9, a), want, "{id:?} {a:?}");
            }
        }
        // A truncated document inside the argument is shown as a binary, as decoding shows it.
        let mut bad = arg.clone();
        let at = bad.len() - 3;
        bad[at] = 0x7f;
        let want = crate::encode_doc(&Op::message("db.c", ui, Bson::Int32(1), 9, &bad).0);
        assert_eq!(encode_message("db.c", ui, &Bson::Int32(1), 9, &bad), want);
    }
}
