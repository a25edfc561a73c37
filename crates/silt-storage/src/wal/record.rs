//! The log's records and their codec.

use crate::format::bytes::{Dec, DecResult, Enc};
use crate::ids::{DictId, Xid};
use crate::width::len_u32;

/// Every record type the log holds. Fields: the dictionary, the key, the value, the update
/// function id and its argument.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum LogRecord {
    /// `put(key, val)`.
    Put {
        dict: DictId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    /// `put_if_absent(key, val)`.
    PutIfAbsent {
        dict: DictId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    /// `delete(key)`.
    Delete { dict: DictId, key: Vec<u8> },
    /// `update(key, func, arg)`.
    Update {
        dict: DictId,
        key: Vec<u8>,
        func: u32,
        arg: Vec<u8>,
    },
    /// `update_all(func, arg)`.
    UpdateAll {
        dict: DictId,
        func: u32,
        arg: Vec<u8>,
    },
    /// `replace(key, val)`: a put over a key the writer knows exists.
    Replace {
        dict: DictId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    /// Several writes, possibly to several dictionaries, logged as one record so that
    /// recovery replays all of them or none. Never nested.
    Batch(Vec<LogRecord>),
    /// Writes (one, or a batch) of transaction `xid`: provisional until its `Commit`.
    Txn { xid: Xid, rec: Box<LogRecord> },
    /// Transaction `xid` committed: its provisional writes become committed.
    Commit { xid: Xid },
    /// Transaction `xid` aborted: its provisional writes are dropped.
    Abort { xid: Xid },
}

impl LogRecord {
    /// The dictionary the record belongs to (for a batch, its first write's).
    pub fn dict(&self) -> DictId {
        match self {
            LogRecord::Put { dict, .. }
            | LogRecord::PutIfAbsent { dict, .. }
            | LogRecord::Delete { dict, .. }
            | LogRecord::Update { dict, .. }
            | LogRecord::UpdateAll { dict, .. }
            | LogRecord::Replace { dict, .. } => *dict,
            LogRecord::Batch(v) => v.first().map(|r| r.dict()).unwrap_or(DictId(0)),
            LogRecord::Txn { rec, .. } => rec.dict(),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } => DictId(0),
        }
    }

    /// Call `f` with each single write of the record, in order (by reference).
    pub(crate) fn for_each_write(&self, f: &mut dyn FnMut(&LogRecord)) {
        match self {
            LogRecord::Batch(v) => v.iter().for_each(&mut *f),
            LogRecord::Txn { rec, .. } => rec.for_each_write(f),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } => {}
            r => f(r),
        }
    }

    /// The single writes this record stands for (none for a commit or abort; a transaction's
    /// writes without their transaction).
    pub fn writes(self) -> Vec<LogRecord> {
        match self {
            LogRecord::Batch(v) => v,
            LogRecord::Txn { rec, .. } => rec.writes(),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } => Vec::new(),
            r => vec![r],
        }
    }

    pub(super) fn encode_body(&self, e: &mut Enc) {
        match self {
            LogRecord::Put { dict, key, val } => {
                e.u8(1);
                e.u64(dict.0);
                e.lp(key);
                e.lp(val);
            }
            LogRecord::PutIfAbsent { dict, key, val } => {
                e.u8(2);
                e.u64(dict.0);
                e.lp(key);
                e.lp(val);
            }
            LogRecord::Delete { dict, key } => {
                e.u8(3);
                e.u64(dict.0);
                e.lp(key);
            }
            LogRecord::Update {
                dict,
                key,
                func,
                arg,
            } => {
                e.u8(4);
                e.u64(dict.0);
                e.lp(key);
                e.u32(*func);
                e.lp(arg);
            }
            LogRecord::UpdateAll { dict, func, arg } => {
                e.u8(5);
                e.u64(dict.0);
                e.u32(*func);
                e.lp(arg);
            }
            LogRecord::Replace { dict, key, val } => {
                e.u8(6);
                e.u64(dict.0);
                e.lp(key);
                e.lp(val);
            }
            LogRecord::Batch(v) => {
                e.u8(7);
                e.u32(len_u32(v.len()));
                for r in v {
                    let mut sub = Enc::default();
                    r.encode_body(&mut sub);
                    e.lp(&sub.buf);
                }
            }
            LogRecord::Txn { xid, rec } => {
                e.u8(8);
                e.u64(xid.0);
                let mut sub = Enc::default();
                rec.encode_body(&mut sub);
                e.lp(&sub.buf);
            }
            LogRecord::Commit { xid } => {
                e.u8(9);
                e.u64(xid.0);
            }
            LogRecord::Abort { xid } => {
                e.u8(10);
                e.u64(xid.0);
            }
        }
    }

    pub(super) fn decode_body(b: &[u8]) -> DecResult<LogRecord> {
        let mut d = Dec::new(b);
        let t = d.u8()?;
        if t == 7 {
            let n = d.u32()? as usize;
            let mut v = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                let sub = d.lp()?;
                if matches!(sub.first(), Some(7..=10)) {
                    return Err("nested batch or transaction record in a batch".into());
                }
                v.push(LogRecord::decode_body(sub)?);
            }
            if d.remaining() != 0 {
                return Err("trailing bytes in log record".into());
            }
            return Ok(LogRecord::Batch(v));
        }
        if t == 8 {
            let xid = Xid(d.u64()?);
            let sub = d.lp()?;
            if matches!(sub.first(), Some(8..=10)) || xid.0 == 0 {
                return Err("malformed transaction record".into());
            }
            let rec = Box::new(LogRecord::decode_body(sub)?);
            if d.remaining() != 0 {
                return Err("trailing bytes in log record".into());
            }
            return Ok(LogRecord::Txn { xid, rec });
        }
        let dict = DictId(d.u64()?);
        if t == 9 || t == 10 {
            // The field in the dictionary's place is the xid.
            let xid = Xid(dict.0);
            if d.remaining() != 0 || xid.0 == 0 {
                return Err("malformed commit or abort record".into());
            }
            return Ok(if t == 9 {
                LogRecord::Commit { xid }
            } else {
                LogRecord::Abort { xid }
            });
        }
        let r = match t {
            1 => LogRecord::Put {
                dict,
                key: d.lp()?.to_vec(),
                val: d.lp()?.to_vec(),
            },
            2 => LogRecord::PutIfAbsent {
                dict,
                key: d.lp()?.to_vec(),
                val: d.lp()?.to_vec(),
            },
            3 => LogRecord::Delete {
                dict,
                key: d.lp()?.to_vec(),
            },
            4 => LogRecord::Update {
                dict,
                key: d.lp()?.to_vec(),
                func: d.u32()?,
                arg: d.lp()?.to_vec(),
            },
            5 => LogRecord::UpdateAll {
                dict,
                func: d.u32()?,
                arg: d.lp()?.to_vec(),
            },
            6 => LogRecord::Replace {
                dict,
                key: d.lp()?.to_vec(),
                val: d.lp()?.to_vec(),
            },
            t => return Err(format!("unknown log record type {t}")),
        };
        if d.remaining() != 0 {
            return Err("trailing bytes in log record".into());
        }
        Ok(r)
    }
}
