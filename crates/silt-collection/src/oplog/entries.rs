//! What one commit logs: its [`Entries`], without their times, and how they are put into the
//! commit's batch once times are known ([`Stamps`]).
//!
//! A commit's entries are described once and written by one function, whoever gives the times:
//! the member's clock on a standalone or a one-member set (`Oplog::reserve`), or the apply of
//! the set's replicated log on a multi-member set (`crate::replicated`). On a multi-member set
//! the entries also travel in the replicated command ([`Entries::to_command`]); every member
//! writes them from the same values at the same times, so their oplogs are equal byte for byte.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bson::{doc, Bson, Document, Timestamp};
use silt_storage::WriteBatch;

use super::entry::{self, Op, OpSession, SessionStmt, Stamp};
use super::{key, pre_image_key, unpack, Part};
use crate::{encode_doc, CollError, Result};

/// A fast update's message, logged without reading the document (`Op::message`).
#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub ns: String,
    pub ui: bson::Uuid,
    pub id: Bson,
    pub func: u32,
    pub arg: Vec<u8>,
}

/// The entries of one commit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Entries {
    /// One `applyOps` entry for all of `ops` (a multi-document transaction), rather than one
    /// entry each.
    pub txn: bool,
    pub ops: Vec<Op>,
    /// The session of a retryable write or transaction: its entries carry it (statements
    /// chained by `prevOpTime` when there is one entry each).
    pub session: Option<OpSession>,
    /// Pre-images: the operation's index and the document before it.
    pub pre_images: Vec<(usize, Document)>,
    /// Writes to a collection that is replicated but not logged (the session table,
    /// `config.transactions`, as mongod keeps it beside the oplog): they travel with the
    /// command and change no oplog.
    pub side: Vec<Op>,
    /// A fast update's message, written straight from its bytes on a standalone member.
    pub message: Option<Message>,
}

impl Entries {
    /// The entries of single changes, one entry each.
    pub(crate) fn each(ops: Vec<Op>) -> Entries {
        Entries {
            ops,
            ..Entries::default()
        }
    }

    /// Whether the commit logs nothing and replicates nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.side.is_empty() && self.message.is_none()
    }

    /// How many entries (times) it takes.
    pub(crate) fn count(&self) -> usize {
        if self.message.is_some() {
            1
        } else if self.txn {
            usize::from(!self.ops.is_empty())
        } else {
            self.ops.len()
        }
    }

    /// The same entries with a message as its `Op` (what is replicated, and what every member
    /// of a multi-member set writes).
    pub(crate) fn canonical(mut self) -> Entries {
        if let Some(m) = self.message.take() {
            self.ops = vec![Op::message(&m.ns, m.ui, m.id, m.func, &m.arg)];
        }
        self
    }

    /// Put the entries (and pre-images) into `batch` at `stamps`' times.
    pub(crate) fn put(&self, batch: &mut WriteBatch, stamps: &Stamps) -> Result<()> {
        if let Some(m) = &self.message {
            let e = entry::encode_message(&m.ns, m.ui, &m.id, m.func, &m.arg, stamps.stamp(0));
            return stamps.put_bytes(batch, 0, &e);
        }
        if self.ops.is_empty() {
            return Ok(());
        }
        if self.txn {
            let op = encode_doc(&entry::transaction(&self.ops).0);
            let session = self.session.as_ref().map(|session| SessionStmt {
                session,
                stmt: None,
                prev: None,
            });
            stamps.put_bytes(batch, 0, &entry::encode(&op, stamps.stamp(0), session))?;
            for (idx, doc) in &self.pre_images {
                let idx = u32::try_from(*idx).unwrap_or(u32::MAX - 1);
                stamps.put_pre_image(batch, 0, idx, doc)?;
            }
            return Ok(());
        }
        let mut prev = None;
        for (n, op) in self.ops.iter().enumerate() {
            let session = self.session.as_ref().map(|session| SessionStmt {
                session,
                stmt: Some(i32::try_from(n).unwrap_or(i32::MAX)),
                prev,
            });
            let bytes = entry::encode(&encode_doc(&op.0), stamps.stamp(n), session);
            stamps.put_bytes(batch, n, &bytes)?;
            prev = Some((stamps.ts(n), stamps.term));
        }
        for (n, doc) in &self.pre_images {
            stamps.put_pre_image(batch, *n, 0, doc)?;
        }
        Ok(())
    }

    /// The replicated command carrying these entries, proposed by member `me` as its `seq`th
    /// proposal at wall time `wall`.
    pub(crate) fn to_command(&self, me: u64, seq: u64, wall: bson::DateTime) -> Vec<u8> {
        let docs =
            |ops: &[Op]| -> Vec<Bson> { ops.iter().map(|o| Bson::Document(o.0.clone())).collect() };
        let mut d = doc! {
            "p": i64::try_from(me).unwrap_or(i64::MAX),
            "s": i64::try_from(seq).unwrap_or(i64::MAX),
            "w": wall,
            "txn": self.txn,
            "ops": docs(&self.ops),
        };
        if let Some(s) = &self.session {
            d.insert("lsid", s.lsid.clone());
            d.insert("txnNumber", s.txn_number);
        }
        if !self.pre_images.is_empty() {
            let pre: Vec<Bson> = self
                .pre_images
                .iter()
                .map(|(n, doc)| {
                    Bson::Document(
                        doc! { "n": i64::try_from(*n).unwrap_or(i64::MAX), "d": doc.clone() },
                    )
                })
                .collect();
            d.insert("pre", pre);
        }
        if !self.side.is_empty() {
            d.insert("side", docs(&self.side));
        }
        encode_doc(&d)
    }
}

/// A replicated command, decoded: who proposed it, when, and its entries.
#[derive(Debug)]
pub(crate) struct Command {
    pub proposer: u64,
    pub seq: u64,
    pub wall: bson::DateTime,
    pub entries: Entries,
}

impl Command {
    pub(crate) fn decode(bytes: &[u8]) -> Result<Command> {
        let bad = |what: &str| CollError::BadStoredDocument {
            ns: "a replicated command".into(),
            detail: what.into(),
        };
        let d = crate::decode_doc("a replicated command", bytes)?;
        let num = |k: &str| -> Result<u64> {
            d.get_i64(k)
                .ok()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| bad(k))
        };
        let ops = |k: &str| -> Result<Vec<Op>> {
            match d.get(k) {
                None => Ok(Vec::new()),
                Some(Bson::Array(a)) => a
                    .iter()
                    .map(|v| match v {
                        Bson::Document(o) => Ok(Op(o.clone())),
                        _ => Err(bad(k)),
                    })
                    .collect(),
                Some(_) => Err(bad(k)),
            }
        };
        let session = match (d.get_document("lsid"), d.get_i64("txnNumber")) {
            (Ok(lsid), Ok(n)) => Some(OpSession {
                lsid: lsid.clone(),
                txn_number: n,
            }),
            _ => None,
        };
        let mut pre_images = Vec::new();
        if let Ok(list) = d.get_array("pre") {
            for p in list {
                let Bson::Document(p) = p else {
                    return Err(bad("pre"));
                };
                let n = p
                    .get_i64("n")
                    .ok()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| bad("pre.n"))?;
                pre_images.push((n, p.get_document("d").map_err(|_| bad("pre.d"))?.clone()));
            }
        }
        Ok(Command {
            proposer: num("p")?,
            seq: num("s")?,
            wall: *d.get_datetime("w").map_err(|_| bad("w"))?,
            entries: Entries {
                txn: d.get_bool("txn").unwrap_or(false),
                ops: ops("ops")?,
                session,
                pre_images,
                side: ops("side")?,
                message: None,
            },
        })
    }
}

/// The times (and term and wall clock) a commit's entries are written at, and the partition
/// they go into.
#[derive(Debug, Clone)]
pub(crate) struct Stamps {
    pub times: Vec<u64>,
    pub term: i64,
    pub wall: bson::DateTime,
    pub(super) part: Arc<Part>,
}

impl Stamps {
    /// The `n`th time.
    pub(crate) fn ts(&self, n: usize) -> Timestamp {
        unpack(self.times[n])
    }

    fn stamp(&self, n: usize) -> Stamp {
        Stamp {
            ts: self.ts(n),
            term: self.term,
            wall: self.wall,
        }
    }

    /// Keep `doc`, the document as it was before operation `idx` of the entry at the `n`th
    /// time changed it (a collection with `changeStreamPreAndPostImages`): beside the entry,
    /// in the same partition, so it is trimmed with it.
    pub(crate) fn put_pre_image(
        &self,
        batch: &mut WriteBatch,
        n: usize,
        idx: u32,
        doc: &Document,
    ) -> Result<()> {
        let bytes = encode_doc(doc);
        self.part.bytes.fetch_add(
            u64::try_from(bytes.len() + 12).unwrap_or(0),
            Ordering::Relaxed,
        );
        batch.put(&self.part.dict, &pre_image_key(self.times[n], idx), &bytes)?;
        Ok(())
    }

    fn put_bytes(&self, batch: &mut WriteBatch, n: usize, bytes: &[u8]) -> Result<()> {
        self.part.bytes.fetch_add(
            u64::try_from(bytes.len() + 8).unwrap_or(0),
            Ordering::Relaxed,
        );
        batch.put(&self.part.dict, &key(self.times[n]), bytes)?;
        Ok(())
    }
}
