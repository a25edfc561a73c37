//! Leaf entries with versions (MVCC).
//!
//! A leaf entry is stored with a type byte (`docs/format.md` 4.1):
//! - type 0, *clean*: one committed value that every snapshot sees. This is the common case
//!   and costs nothing over a plain key/value pair.
//! - type 1, *versioned*: committed versions, newest first, each stamped with the xid that
//!   wrote it (a deletion is a version with no value), and at most one provisional version
//!   of a live transaction (MongoDB transactions do not nest, so one level is enough).
//!
//! The versioned form's bytes:
//!
//! ```text
//! n_committed u32 | has_provisional u8 | [provisional record] | n_committed records
//! record: xid u64 | present u8 | (present = 1) len u32 | value
//! ```
//!
//! An entry is versioned only while a snapshot may need more than its newest committed value,
//! or while a transaction holds a provisional version; garbage collection ([`Le::settle`])
//! returns it to the clean form.

use std::borrow::Cow;

use crate::format::bytes::{Dec, DecResult};
use crate::ids::Xid;
use crate::msg::{run_update, Broadcast, MsgKind, Pending, UpdateRegistry};
use crate::mvcc::View;
use crate::tree::node::Val;
use crate::width::len_u32;

pub(crate) use crate::tree::node::{LE_CLEAN, LE_MVCC};

/// One version: the transaction that wrote it and the value (`None`: deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ver {
    pub xid: Xid,
    pub val: Option<Val>,
}

/// A leaf entry's versions, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Le {
    /// Committed versions, newest first.
    pub committed: Vec<Ver>,
    /// The provisional version of a live transaction.
    pub prov: Option<Ver>,
}

fn rd_record<'a>(d: &mut Dec<'a>) -> DecResult<(Xid, Option<&'a [u8]>)> {
    let xid = Xid(d.u64()?);
    let val = match d.u8()? {
        0 => None,
        1 => Some(d.lp()?),
        p => return Err(format!("bad version flag {p}")),
    };
    Ok((xid, val))
}

/// Walk a versioned entry's records: the provisional one first (flagged `true`), then the
/// committed ones newest first. Stops at the first `Some` `f` returns.
fn walk<'a, R>(
    raw: &'a [u8],
    mut f: impl FnMut(bool, Xid, Option<&'a [u8]>) -> Option<R>,
) -> DecResult<Option<R>> {
    let mut d = Dec::new(raw);
    let n = d.u32()? as usize;
    let has_prov = match d.u8()? {
        0 => false,
        1 => true,
        p => return Err(format!("bad provisional flag {p}")),
    };
    if has_prov {
        let (x, v) = rd_record(&mut d)?;
        if let Some(r) = f(true, x, v) {
            return Ok(Some(r));
        }
    }
    for _ in 0..n {
        let (x, v) = rd_record(&mut d)?;
        if let Some(r) = f(false, x, v) {
            return Ok(Some(r));
        }
    }
    if d.remaining() != 0 {
        return Err("trailing bytes in a versioned leaf entry".into());
    }
    Ok(None)
}

/// Check the bytes of a stored entry of type `t` (the decoder's validation).
pub(crate) fn check(t: u8, raw: &[u8]) -> DecResult<()> {
    match t {
        LE_CLEAN => Ok(()),
        LE_MVCC => {
            let mut n = 0usize;
            let mut prov = false;
            walk(raw, |p, _, _| -> Option<()> {
                prov |= p;
                n += 1;
                None
            })?;
            if n == 0 {
                return Err("a versioned leaf entry without versions".into());
            }
            Ok(())
        }
        t => Err(format!("unknown leaf entry type {t}")),
    }
}

/// The newest xid of a stored versioned entry's versions, the provisional one included.
pub(crate) fn newest_xid(raw: &[u8]) -> u64 {
    let mut m = 0;
    let _ = walk(raw, |_, x, _| -> Option<()> {
        m = m.max(x.0);
        None
    });
    m
}

/// The value `view` sees in a stored entry, borrowed from it.
#[inline]
pub(crate) fn visible<'a>(t: u8, raw: &'a [u8], view: View<'_>) -> Option<&'a [u8]> {
    if t == LE_CLEAN {
        return Some(raw);
    }
    let own = view.own();
    // Stored entries were checked when loaded.
    walk(raw, |prov, x, v| {
        if prov {
            (Some(x) == own).then_some(v)
        } else {
            view.sees(x).then_some(v)
        }
    })
    .ok()
    .flatten()
    .flatten()
}

impl Le {
    /// A clean value.
    pub(crate) fn clean(v: Val) -> Le {
        Le {
            committed: vec![Ver {
                xid: Xid(0),
                val: Some(v),
            }],
            prov: None,
        }
    }

    /// Decode a stored entry (checked when loaded).
    pub(crate) fn decode(t: u8, raw: &[u8]) -> Le {
        if t == LE_CLEAN {
            return Le::clean(raw.into());
        }
        let mut le = Le::default();
        let _ = walk(raw, |prov, xid, v| -> Option<()> {
            let ver = Ver {
                xid,
                val: v.map(Val::from),
            };
            if prov {
                le.prov = Some(ver);
            } else {
                le.committed.push(ver);
            }
            None
        });
        le
    }

    /// The entry for `base` (a stored entry, or none).
    pub(crate) fn of(base: Option<(u8, &[u8])>) -> Le {
        base.map(|(t, raw)| Le::decode(t, raw)).unwrap_or_default()
    }

    /// The newest committed value.
    pub(crate) fn committed_val(&self) -> Option<&[u8]> {
        self.committed.first().and_then(|v| v.val.as_deref())
    }

    /// The value `view` sees.
    pub(crate) fn visible(&self, view: View<'_>) -> Option<&[u8]> {
        if let Some(p) = &self.prov {
            if Some(p.xid) == view.own() {
                return p.val.as_deref();
            }
        }
        self.committed
            .iter()
            .find(|v| view.sees(v.xid))
            .and_then(|v| v.val.as_deref())
    }

    /// The xid of the newest committed version, if there is one.
    pub(crate) fn newest_xid(&self) -> Option<Xid> {
        self.committed.first().map(|v| v.xid)
    }

    /// Apply a keyed message. A data message of a transaction sets the provisional version
    /// from the latest value (its own provisional one included, so update functions see the
    /// transaction's earlier writes); any other data message adds a committed version over the
    /// newest committed one. A commit promotes, an abort drops, the provisional version of the
    /// message's transaction (and does nothing if there is none: both are idempotent).
    pub(crate) fn apply(&mut self, fns: &UpdateRegistry, key: &[u8], p: &Pending) {
        match &p.kind {
            MsgKind::Commit { .. } => {
                if self.prov.as_ref().is_some_and(|v| v.xid == p.xid) {
                    let v = self.prov.take().expect("checked");
                    self.committed.insert(0, v);
                }
            }
            MsgKind::Abort => {
                if self.prov.as_ref().is_some_and(|v| v.xid == p.xid) {
                    self.prov = None;
                }
            }
            kind if p.prov => {
                let base = match &self.prov {
                    Some(v) => v.val.clone(),
                    None => self.committed.first().and_then(|v| v.val.clone()),
                };
                let val = kind.apply(fns, key, base);
                self.prov = Some(Ver { xid: p.xid, val });
            }
            kind => {
                let base = self.committed.first().and_then(|v| v.val.clone());
                let val = kind.apply(fns, key, base.clone());
                self.push_committed(p.xid, base, val);
            }
        }
    }

    /// Apply a broadcast update: a committed write to a key that has a committed value.
    pub(crate) fn apply_broadcast(&mut self, fns: &UpdateRegistry, key: &[u8], b: &Broadcast) {
        let base = self.committed.first().and_then(|v| v.val.clone());
        if base.is_none() {
            return;
        }
        let val = run_update(fns, b.func, key, base.clone(), &b.arg);
        self.push_committed(b.xid, base, val);
    }

    fn push_committed(&mut self, xid: Xid, base: Option<Val>, val: Option<Val>) {
        if base == val {
            // Nothing changed (an update that left the key, an insert-if-absent over a
            // value, a delete of nothing): no version.
            return;
        }
        self.committed.insert(0, Ver { xid, val });
    }

    /// Drop what no snapshot can see: every committed version older than the newest one
    /// written below `horizon`, and that one too if it is a deletion.
    pub(crate) fn gc(&mut self, horizon: Xid) {
        if let Some(i) = self.committed.iter().position(|v| v.xid < horizon) {
            self.committed.truncate(i + 1);
            if self.committed[i].val.is_none() {
                self.committed.pop();
            }
        }
    }

    /// Collect garbage below `horizon` and return the stored form: `None` when nothing is
    /// left, else the entry type and its bytes.
    pub(crate) fn settle(mut self, horizon: Xid) -> Option<(u8, Cow<'static, [u8]>)> {
        self.gc(horizon);
        if self.prov.is_none() {
            match self.committed.as_slice() {
                [] => return None,
                [Ver { xid, val: Some(_) }] if *xid < horizon => {
                    let v = self.committed.pop().and_then(|v| v.val).expect("one value");
                    return Some((LE_CLEAN, Cow::Owned(v.into_vec())));
                }
                _ => {}
            }
        }
        Some((LE_MVCC, Cow::Owned(self.encode())))
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&len_u32(self.committed.len()).to_le_bytes());
        out.push(u8::from(self.prov.is_some()));
        let rec = |out: &mut Vec<u8>, v: &Ver| {
            out.extend_from_slice(&v.xid.0.to_le_bytes());
            match &v.val {
                None => out.push(0),
                Some(b) => {
                    out.push(1);
                    out.extend_from_slice(&len_u32(b.len()).to_le_bytes());
                    out.extend_from_slice(b);
                }
            }
        };
        if let Some(p) = &self.prov {
            rec(&mut out, p);
        }
        for v in &self.committed {
            rec(&mut out, v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Msn;
    use crate::mvcc::SnapView;

    fn msg(xid: u64, prov: bool, kind: MsgKind) -> Pending {
        Pending {
            msn: Msn(1),
            xid: Xid(xid),
            kind,
            prov,
        }
    }

    fn ins(v: &[u8]) -> MsgKind {
        MsgKind::Insert(v.into())
    }

    #[test]
    fn provisional_then_commit_and_abort() {
        let fns = UpdateRegistry::new();
        let mut le = Le::clean(b"a".as_slice().into());
        le.apply(&fns, b"k", &msg(5, true, ins(b"b")));
        assert_eq!(le.committed_val(), Some(&b"a"[..]));
        let snap = SnapView {
            hi: Xid(6),
            live: vec![],
            own: Some(Xid(5)),
        };
        assert_eq!(le.visible(View::At(&snap)), Some(&b"b"[..]));
        assert_eq!(le.visible(View::Latest), Some(&b"a"[..]));
        let mut aborted = le.clone();
        aborted.apply(&fns, b"k", &msg(5, false, MsgKind::Abort));
        assert_eq!(
            aborted.settle(Xid(9)),
            Some((LE_CLEAN, Cow::Owned(b"a".to_vec())))
        );
        le.apply(
            &fns,
            b"k",
            &msg(
                5,
                false,
                MsgKind::Commit {
                    rows: 0,
                    sure: true,
                },
            ),
        );
        assert_eq!(le.committed_val(), Some(&b"b"[..]));
        // A snapshot that was taken while 5 was live still sees the old value.
        let old = SnapView {
            hi: Xid(6),
            live: vec![Xid(5)],
            own: None,
        };
        assert_eq!(le.visible(View::At(&old)), Some(&b"a"[..]));
        // Stored and loaded, with 5 not yet below the horizon.
        let (t, raw) = le.clone().settle(Xid(5)).unwrap();
        assert_eq!(t, LE_MVCC);
        check(t, &raw).unwrap();
        assert_eq!(Le::decode(t, &raw), le);
        assert_eq!(visible(t, &raw, View::At(&old)), Some(&b"a"[..]));
        assert_eq!(visible(t, &raw, View::Latest), Some(&b"b"[..]));
        // Below the horizon it is clean again.
        assert_eq!(
            le.settle(Xid(6)),
            Some((LE_CLEAN, Cow::Owned(b"b".to_vec())))
        );
    }

    #[test]
    fn committed_deletes_are_versions_until_collected() {
        let fns = UpdateRegistry::new();
        let mut le = Le::clean(b"a".as_slice().into());
        le.apply(&fns, b"k", &msg(8, false, MsgKind::Delete));
        assert_eq!(le.committed_val(), None);
        let old = SnapView {
            hi: Xid(8),
            live: vec![],
            own: None,
        };
        assert_eq!(le.visible(View::At(&old)), Some(&b"a"[..]));
        assert_eq!(le.clone().settle(Xid(9)), None);
        assert!(le.settle(Xid(8)).is_some());
    }
}
