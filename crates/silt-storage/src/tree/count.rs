//! Subtree counts: every child pointer of an internal node carries the number of live keys
//! below it, so a range count reads only the nodes on the range's two boundary paths
//! (`Tree::count_range`).
//!
//! What a pointer's count means. For child `i` of node `N`, [`SubCount::live`] is the number
//! of keys in child `i`'s subtree whose newest committed version exists, once every message
//! waiting in that subtree's buffers and in `N`'s own buffer `i` is applied, counting the
//! messages whose effect on existence is known when they are injected ([`effect`]).
//! [`SubCount::unsure`] is how many messages of unknown effect wait there: when one reaches
//! its leaf, the flush measures what it did and adds that to every pointer on the flush's
//! path. [`SubCount::max_xid`] is at least the xid of every committed version below the
//! pointer that may differ in existence from the one before it: a snapshot that sees every
//! xid below it sees, for every key below the pointer, the same existence as the latest
//! state (`mvcc.rs`).
//!
//! Known effects, in a counted tree ([`Tree::counted`](super::Tree)), whose writers promise
//! to insert only absent keys and delete only present ones: insert +1, delete -1, replace 0,
//! a provisional write 0 (its commit carries the effect), a sure commit its `rows`, an abort
//! 0, an update by a keeping function ([`UpdateRegistry::register_keeping`]) 0. Unknown: a
//! put-if-absent, any other update, a commit that is not sure, a broadcast. A writer that
//! breaks the promise makes counts wrong only until its message reaches the leaf, where the
//! difference is measured and repaired like an unknown effect's (and counted in
//! `Tree::count_repairs`).
//!
//! A leaf basement's count is derived from its entries ([`basement_count`]). It is stored in
//! the node's info section when the node is written, and kept in [`Part`](super::node::Part)
//! while the basement is not resident, which is the only time it is used.

use crate::msg::{tag, MsgKind, UpdateRegistry};
use crate::mvcc::View;
use crate::tree::le::{self, LE_CLEAN};
use crate::tree::node::{Basement, ChildBuf, MsgRef};
pub(crate) use crate::tree::subcount::SubCount;

/// The change a message makes to whether its key exists, if known at injection (see the
/// module).
pub(crate) fn effect(kind: &MsgKind, prov: bool, fns: &UpdateRegistry) -> Option<i64> {
    if prov {
        return Some(0);
    }
    match kind {
        MsgKind::Insert(_) => Some(1),
        MsgKind::Delete => Some(-1),
        MsgKind::Replace(_) | MsgKind::Abort => Some(0),
        MsgKind::Commit { rows, sure } => sure.then_some(i64::from(*rows)),
        MsgKind::Update { func, .. } => fns.keeps(*func).then_some(0),
        MsgKind::InsertNoOverwrite(_) => None,
    }
}

/// [`effect`] of a message as stored in a buffer.
pub(crate) fn stored_effect(m: &MsgRef<'_>, fns: &UpdateRegistry) -> Option<i64> {
    let (base, prov) = tag::split(m.tag);
    if prov {
        return Some(0);
    }
    match base {
        tag::INSERT => Some(1),
        tag::DELETE => Some(-1),
        tag::REPLACE | tag::ABORT => Some(0),
        tag::COMMIT => {
            (m.body.len() < 2).then(|| i64::from(m.body.first().map_or(0, |b| *b as i8)))
        }
        tag::UPDATE => {
            let func = m
                .body
                .get(..4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4")));
            func.is_some_and(|f| fns.keeps(f)).then_some(0)
        }
        _ => None,
    }
}

/// What the keyed messages `range` of a buffer add to a count.
pub(crate) fn buffer_count(
    buf: &ChildBuf,
    range: std::ops::Range<usize>,
    fns: &UpdateRegistry,
) -> SubCount {
    let mut c = SubCount::default();
    for i in range {
        let m = buf.msg(i);
        c.note(stored_effect(&m, fns), m.xid, tag::split(m.tag).1);
    }
    c
}

/// Whether a stored leaf entry's newest committed version exists.
#[inline]
pub(crate) fn live(t: u8, raw: &[u8]) -> bool {
    t == LE_CLEAN || le::visible(t, raw, View::Latest).is_some()
}

/// Live entries of a basement between positions `s` and `e`.
pub(crate) fn live_between(bm: &Basement, s: usize, e: usize) -> u64 {
    if bm.all_clean() {
        return e.saturating_sub(s) as u64;
    }
    (s..e)
        .filter(|&i| {
            let (_, t, v) = bm.entry(i);
            live(t, v)
        })
        .count() as u64
}

/// A basement's count: its live entries, and the newest xid of its versioned entries.
pub(crate) fn basement_count(bm: &Basement) -> SubCount {
    let mut c = SubCount::default();
    if bm.all_clean() {
        c.live = bm.len() as i64;
        return c;
    }
    for i in 0..bm.len() {
        let (_, t, v) = bm.entry(i);
        if t == LE_CLEAN {
            c.live += 1;
            continue;
        }
        if live(t, v) {
            c.live += 1;
        }
        c.max_xid = c.max_xid.max(le::newest_xid(v));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Xid;

    #[test]
    fn an_empty_buffer_is_known_by_its_length() {
        use crate::format::node::{encode_buffer, EMPTY_BUFFER_RAW_LEN};
        let raw = encode_buffer(&ChildBuf::default());
        assert_eq!(raw.len(), EMPTY_BUFFER_RAW_LEN as usize);
    }

    #[test]
    fn counts_add_and_know_what_they_do_not_know() {
        let mut c = SubCount::default();
        c.note(Some(1), Xid(5), false);
        c.note(Some(0), Xid(9), false);
        assert_eq!(c.exact_below(Xid(6)), Some(1));
        assert_eq!(c.exact_below(Xid(5)), None);
        c.note(None, Xid(7), false);
        assert_eq!(c.exact_below(Xid(u64::MAX)), None);
        let fns = UpdateRegistry::new();
        assert_eq!(effect(&MsgKind::Delete, false, &fns), Some(-1));
        assert_eq!(effect(&MsgKind::Delete, true, &fns), Some(0));
        assert_eq!(
            effect(
                &MsgKind::Commit {
                    rows: 1,
                    sure: false
                },
                false,
                &fns
            ),
            None
        );
    }
}
