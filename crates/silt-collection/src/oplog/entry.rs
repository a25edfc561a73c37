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

/// The `prevOpTime` of a session's first write of its transaction number.
const NO_PREV: (Timestamp, i64) = (
    Timestamp {
        time: 0,
        increment: 0,
    },
    -1,
);

/// The entry of `op` at `stamp`, of a session's write when `session` is given, encoded:
/// `{lsid?, txnNumber?, <op's fields>, stmtId?, ts, t, v: 2, wall, prevOpTime?}`, the field
/// order of mongod 7. `op` is given encoded (`op_bytes`) and spliced in whole, so an entry costs
/// one encoding of the change and no copy of its document.
pub(crate) fn encode(op_bytes: &[u8], stamp: Stamp, session: Option<SessionStmt<'_>>) -> Vec<u8> {
    let mut out = Out::new(op_bytes.len() + 64);
    if let Some(s) = session {
        let head = doc! { "lsid": s.session.lsid.clone(), "txnNumber": s.session.txn_number };
        out.splice(&crate::encode_doc(&head));
    }
    out.splice(op_bytes);
    if let Some(stmt) = session.and_then(|s| s.stmt) {
        out.i32("stmtId", stmt);
    }
    out.stamp(stamp);
    if let Some(s) = session {
        let (ts, t) = s.prev.unwrap_or(NO_PREV);
        let at = out.open("prevOpTime");
        out.ts("ts", ts);
        out.i64("t", t);
        out.close(at);
    }
    out.finish()
}

/// The entry of a fast update ([`Op::message`]) at `stamp`, written in one pass from the
/// message's bytes, without decoding its argument (the same bytes as [`encode`] of the `Op`).
pub(crate) fn encode_message(
    ns: &str,
    ui: bson::Uuid,
    id: &Bson,
    func: u32,
    arg: &[u8],
    stamp: Stamp,
) -> Vec<u8> {
    let Ok(id) = RawBson::try_from(id.clone()) else {
        let op = Op::message(ns, ui, id.clone(), func, arg);
        return encode(&crate::encode_doc(&op.0), stamp, None);
    };
    let mut out = Out::new(arg.len() + ns.len() + 160);
    out.str("op", "u");
    out.str("ns", ns);
    out.binary("ui", bson::spec::BinarySubtype::Uuid, &ui.bytes());
    let o = out.open("o");
    out.i32("$silt", 1);
    out.i64("fn", i64::from(func));
    match RawDocument::from_bytes(arg) {
        Ok(a) if valid(a) => out.doc("arg", arg),
        _ => out.binary("arg", bson::spec::BinarySubtype::Generic, arg),
    }
    out.close(o);
    let mut o2 = RawDocumentBuf::new();
    o2.append("_id", id);
    out.doc("o2", o2.as_bytes());
    out.stamp(stamp);
    out.finish()
}

/// A BSON document written field by field into one buffer (an entry is built without a
/// `Document` per level and copied once).
struct Out(Vec<u8>);

impl Out {
    fn new(capacity: usize) -> Out {
        let mut v = Vec::with_capacity(capacity);
        v.extend_from_slice(&[0; 4]);
        Out(v)
    }

    fn key(&mut self, kind: u8, key: &str) {
        self.0.push(kind);
        self.0.extend_from_slice(key.as_bytes());
        self.0.push(0);
    }

    fn str(&mut self, key: &str, v: &str) {
        self.key(0x02, key);
        self.len(v.len() + 1);
        self.0.extend_from_slice(v.as_bytes());
        self.0.push(0);
    }

    fn i32(&mut self, key: &str, v: i32) {
        self.key(0x10, key);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn i64(&mut self, key: &str, v: i64) {
        self.key(0x12, key);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn ts(&mut self, key: &str, v: Timestamp) {
        self.key(0x11, key);
        self.0.extend_from_slice(&v.increment.to_le_bytes());
        self.0.extend_from_slice(&v.time.to_le_bytes());
    }

    fn binary(&mut self, key: &str, subtype: bson::spec::BinarySubtype, bytes: &[u8]) {
        self.key(0x05, key);
        self.len(bytes.len());
        self.0.push(u8::from(subtype));
        self.0.extend_from_slice(bytes);
    }

    /// A field whose value is `doc`, one whole encoded document.
    fn doc(&mut self, key: &str, doc: &[u8]) {
        self.key(0x03, key);
        self.0.extend_from_slice(doc);
    }

    /// The fields of `doc`, one whole encoded document.
    fn splice(&mut self, doc: &[u8]) {
        if doc.len() > 5 {
            self.0.extend_from_slice(&doc[4..doc.len() - 1]);
        }
    }

    /// `ts, t, v: 2, wall`: the time part of every entry.
    fn stamp(&mut self, stamp: Stamp) {
        self.ts("ts", stamp.ts);
        self.i64("t", stamp.term);
        self.i64("v", 2);
        self.key(0x09, "wall");
        self.0
            .extend_from_slice(&stamp.wall.timestamp_millis().to_le_bytes());
    }

    /// Begin a subdocument field; [`Out::close`] it with what this returns.
    fn open(&mut self, key: &str) -> usize {
        self.key(0x03, key);
        let at = self.0.len();
        self.0.extend_from_slice(&[0; 4]);
        at
    }

    fn close(&mut self, at: usize) {
        self.0.push(0);
        let len = self.0.len() - at;
        self.0[at..at + 4].copy_from_slice(&i32::try_from(len).unwrap_or(i32::MAX).to_le_bytes());
    }

    fn len(&mut self, n: usize) {
        self.0
            .extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_le_bytes());
    }

    fn finish(mut self) -> Vec<u8> {
        self.close(0);
        self.0
    }
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
            let (ts, t) = s.prev.unwrap_or(NO_PREV);
            d.insert("prevOpTime", doc! { "ts": ts, "t": t });
        }
        d
    }

    fn stamp_at(time: u32, increment: u32) -> Stamp {
        Stamp {
            ts: Timestamp { time, increment },
            term: 3,
            wall: bson::DateTime::from_millis(i64::from(time) * 1000 + 123),
        }
    }

    #[test]
    fn encoded_entries_are_the_documents_bytes() {
        let ui = bson::Uuid::new();
        let stamp = stamp_at(1_700_000_000, 7);
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
        let stamp = stamp_at(1_700_000_001, 1);
        let arg = crate::encode_doc(&doc! { "id": 5, "u": { "$inc": { "n": 1 } }, "up": false });
        let ids = [
            Bson::Int32(5),
            Bson::String("k".into()),
            Bson::Document(doc! { "a": [1, 2] }),
            Bson::ObjectId(bson::oid::ObjectId::new()),
            Bson::Null,
        ];
        let mut bad = arg.clone();
        let at = bad.len() - 3;
        bad[at] = 0x7f;
        for id in ids {
            for a in [&arg[..], b"not bson", &[5, 0, 0, 0, 0][..], &[], &bad] {
                let op = Op::message("db.c", ui, id.clone(), 9, a);
                let want = encode(&crate::encode_doc(&op.0), stamp, None);
                assert_eq!(
                    encode_message("db.c", ui, &id, 9, a, stamp),
                    want,
                    "{id:?} {a:?}"
                );
            }
        }
    }
}
