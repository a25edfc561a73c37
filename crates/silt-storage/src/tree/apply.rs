//! Applying messages to values: used when a buffer is flushed into a leaf (the result is
//! stored) and when a read meets pending messages (the result is only returned).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::ids::Xid;
use crate::msg::{run_update, tag, Broadcast, MsgKind, Pending, UpdateOutcome, UpdateRegistry};
use crate::mvcc::View;
use crate::tree::le::{self, Le, LE_CLEAN};
use crate::tree::node::{Basement, ChildBuf, Key, LeafBuilder, MsgRef, Val};

/// Change in the estimated row count and data bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    pub rows: i64,
    pub bytes: i64,
}

impl Delta {
    pub(crate) fn add(&mut self, o: Delta) {
        self.rows += o.rows;
        self.bytes += o.bytes;
    }
}

/// The estimate charged when a message is injected (before its effect is known). A
/// provisional write changes no count until its commit, which carries the estimate.
pub(crate) fn injected_delta(key: &[u8], kind: &MsgKind, prov: bool) -> Delta {
    if prov {
        return Delta::default();
    }
    match kind {
        MsgKind::Commit { rows, .. } => Delta {
            rows: i64::from(*rows),
            bytes: 0,
        },
        MsgKind::Abort => Delta::default(),
        MsgKind::Insert(v) | MsgKind::InsertNoOverwrite(v) => Delta {
            rows: 1,
            bytes: (key.len() + v.len()) as i64,
        },
        MsgKind::Delete => Delta { rows: -1, bytes: 0 },
        // The old value's size is not known at injection; the application corrects it.
        MsgKind::Replace(_) | MsgKind::Update { .. } => Delta::default(),
    }
}

/// Apply `list` (one key's messages, MSN order) and `bcasts` (MSN order) to `base`,
/// interleaving by MSN. `fix`, if given, receives the correction between each message's
/// real effect and the estimate charged at injection.
pub(crate) fn resolve(
    fns: &UpdateRegistry,
    key: &[u8],
    base: Option<Val>,
    list: &[Pending],
    bcasts: &[Broadcast],
    mut fix: Option<&mut Delta>,
) -> Option<Val> {
    let mut v = base;
    let mut bi = 0;
    let mut step = |v: Option<Val>, m: Result<&Pending, &Broadcast>| -> Option<Val> {
        let before = size_opt(key, v.as_deref());
        let (nv, est) = match m {
            Ok(p) => (
                p.kind.apply(fns, key, v),
                injected_delta(key, &p.kind, p.prov),
            ),
            // A broadcast reaches only keys that exist when it is applied.
            Err(_) if v.is_none() => (None, Delta::default()),
            Err(b) => (run_update(fns, b.func, key, v, &b.arg), Delta::default()),
        };
        if let Some(f) = fix.as_deref_mut() {
            let after = size_opt(key, nv.as_deref());
            f.rows += after.0 - before.0 - est.rows;
            f.bytes += after.1 - before.1 - est.bytes;
        }
        nv
    };
    for p in list {
        while bi < bcasts.len() && bcasts[bi].msn < p.msn {
            v = step(v, Err(&bcasts[bi]));
            bi += 1;
        }
        v = step(v, Ok(p));
    }
    while bi < bcasts.len() {
        v = step(v, Err(&bcasts[bi]));
        bi += 1;
    }
    v
}

/// The size of a message's effect as estimated at injection, from its stored form.
fn injected_of(m: &MsgRef<'_>, key: &[u8]) -> Delta {
    if m.tag & tag::PROVISIONAL != 0 {
        return Delta::default();
    }
    match m.tag {
        tag::COMMIT => Delta {
            rows: i64::from(m.body.first().map_or(0, |b| *b as i8)),
            bytes: 0,
        },
        tag::INSERT | tag::INSERT_NO_OVERWRITE => Delta {
            rows: 1,
            bytes: (key.len() + m.body.len()) as i64,
        },
        tag::DELETE => Delta { rows: -1, bytes: 0 },
        _ => Delta::default(),
    }
}

fn run_update_cow<'a>(
    fns: &UpdateRegistry,
    func: u32,
    key: &[u8],
    old: Option<Cow<'a, [u8]>>,
    arg: &[u8],
) -> Option<Cow<'a, [u8]>> {
    match fns.run(func, key, old.as_deref(), arg) {
        UpdateOutcome::Set(v) => Some(Cow::Owned(v)),
        UpdateOutcome::Delete => None,
        UpdateOutcome::NoChange => old,
    }
}

/// Like [`resolve`], for messages borrowed from a buffer: the result borrows the base or a
/// message body when no update function ran. The correction between the real effect and the
/// estimate charged at injection is added to `fix` (it telescopes: the change in size of the
/// key minus the sum of the estimates).
pub(crate) fn resolve_refs<'a>(
    fns: &UpdateRegistry,
    key: &[u8],
    base: Option<&'a [u8]>,
    msgs: impl Iterator<Item = MsgRef<'a>>,
    bcasts: &[Broadcast],
    fix: &mut Delta,
) -> Option<Cow<'a, [u8]>> {
    let mut v: Option<Cow<'a, [u8]>> = base.map(Cow::Borrowed);
    let before = size_opt(key, v.as_deref());
    let mut est = Delta::default();
    let mut bi = 0;
    let bcast = |v: Option<Cow<'a, [u8]>>, b: &Broadcast| match v {
        // A broadcast reaches only keys that exist when it is applied.
        None => None,
        Some(x) => run_update_cow(fns, b.func, key, Some(x), &b.arg),
    };
    for m in msgs {
        while bi < bcasts.len() && bcasts[bi].msn < m.msn {
            v = bcast(v, &bcasts[bi]);
            bi += 1;
        }
        est.add(injected_of(&m, key));
        v = match m.tag {
            tag::INSERT | tag::REPLACE => Some(Cow::Borrowed(m.body)),
            tag::INSERT_NO_OVERWRITE => v.or(Some(Cow::Borrowed(m.body))),
            tag::DELETE => None,
            _ => match m.body.split_first_chunk::<4>() {
                Some((f, arg)) => run_update_cow(fns, u32::from_le_bytes(*f), key, v, arg),
                None => v,
            },
        };
    }
    while bi < bcasts.len() {
        v = bcast(v, &bcasts[bi]);
        bi += 1;
    }
    let after = size_opt(key, v.as_deref());
    fix.rows += after.0 - before.0 - est.rows;
    fix.bytes += after.1 - before.1 - est.bytes;
    v
}

/// The size a stored or resolved committed value counts for.
fn size_opt(key: &[u8], v: Option<&[u8]>) -> (i64, i64) {
    match v {
        Some(v) => (1, (key.len() + v.len()) as i64),
        None => (0, 0),
    }
}

/// Apply `msgs` (one key's, MSN order) and `bcasts` (MSN order) to the versions of `base`,
/// interleaving by MSN. `fix` receives the correction between the change in the newest
/// committed value and the estimates charged at injection.
pub(crate) fn resolve_le<'m>(
    fns: &UpdateRegistry,
    key: &[u8],
    base: Option<(u8, &[u8])>,
    msgs: impl Iterator<Item = Cow<'m, Pending>>,
    bcasts: &[Broadcast],
    fix: Option<&mut Delta>,
) -> Le {
    let mut le = Le::of(base);
    let before = size_opt(key, le.committed_val());
    let mut est = Delta::default();
    let mut bi = 0;
    for p in msgs {
        while bi < bcasts.len() && bcasts[bi].msn < p.msn {
            le.apply_broadcast(fns, key, &bcasts[bi]);
            bi += 1;
        }
        est.add(injected_delta(key, &p.kind, p.prov));
        le.apply(fns, key, &p);
    }
    while bi < bcasts.len() {
        le.apply_broadcast(fns, key, &bcasts[bi]);
        bi += 1;
    }
    if let Some(f) = fix {
        let after = size_opt(key, le.committed_val());
        f.rows += after.0 - before.0 - est.rows;
        f.bytes += after.1 - before.1 - est.bytes;
    }
    le
}

/// What `view` sees of `key` after `list` and `bcasts` (MSN order) are applied to `base`.
pub(crate) fn read_value(
    fns: &UpdateRegistry,
    key: &[u8],
    base: Option<(u8, &[u8])>,
    list: &[Pending],
    bcasts: &[Broadcast],
    view: View<'_>,
) -> Option<Val> {
    let plain = base.is_none_or(|(t, _)| t == LE_CLEAN)
        && list
            .iter()
            .all(|p| !p.prov && p.kind.is_data() && view.sees(p.xid))
        && bcasts.iter().all(|b| view.sees(b.xid));
    if plain {
        // Every version is visible: the newest one is the answer.
        return resolve(
            fns,
            key,
            base.map(|(_, v)| Val::from(v)),
            list,
            bcasts,
            None,
        );
    }
    let le = resolve_le(fns, key, base, list.iter().map(Cow::Borrowed), bcasts, None);
    le.visible(view).map(Val::from)
}

/// Merge the entries of `old` (a leaf's basements, in order) with the buffered messages of
/// `buf`, writing the resulting entries to `out`. Versions no snapshot can see (below
/// `horizon`) are dropped on the way, from every entry of the leaf.
pub(crate) fn apply_buffer_to_leaf(
    fns: &UpdateRegistry,
    old: &[Basement],
    buf: &ChildBuf,
    fix: &mut Delta,
    out: &mut LeafBuilder,
    horizon: Xid,
) {
    let bcasts = &buf.bcasts[..];
    let bcasts_old = bcasts.iter().all(|b| b.xid < horizon);
    let mut entries = old
        .iter()
        .flat_map(|b| (0..b.len()).map(move |i| b.entry(i)))
        .peekable();
    let plain = |out: &mut LeafBuilder, k: &[u8], t: u8, v: &[u8], fix: &mut Delta| {
        if t == LE_CLEAN && bcasts.is_empty() {
            out.push(k, t, v);
        } else if t == LE_CLEAN && bcasts_old {
            if let Some(nv) = resolve_refs(fns, k, Some(v), std::iter::empty(), bcasts, fix) {
                out.push(k, LE_CLEAN, &nv);
            }
        } else {
            let le = resolve_le(fns, k, Some((t, v)), std::iter::empty(), bcasts, Some(fix));
            if let Some((t, v)) = le.settle(horizon) {
                out.push(k, t, &v);
            }
        }
    };
    let n = buf.len();
    let mut i = 0;
    while i < n {
        let key = buf.key(i);
        let mut j = i + 1;
        while j < n && buf.key(j) == key {
            j += 1;
        }
        while let Some(&(ok, ot, ov)) = entries.peek() {
            if ok >= key {
                break;
            }
            plain(out, ok, ot, ov, fix);
            entries.next();
        }
        let base = match entries.peek() {
            Some(&(ok, ot, ov)) if ok == key => {
                entries.next();
                Some((ot, ov))
            }
            _ => None,
        };
        let simple = bcasts_old
            && base.is_none_or(|(t, _)| t == LE_CLEAN)
            && (i..j).all(|p| {
                let m = buf.msg(p);
                m.is_committed_data() && m.xid < horizon
            });
        if simple {
            let base = base.map(|(_, v)| v);
            if let Some(nv) = resolve_refs(fns, key, base, (i..j).map(|p| buf.msg(p)), bcasts, fix)
            {
                out.push(key, LE_CLEAN, &nv);
            }
        } else {
            let msgs = (i..j).map(|p| Cow::Owned(buf.msg(p).to_pending()));
            let le = resolve_le(fns, key, base, msgs, bcasts, Some(fix));
            if let Some((t, v)) = le.settle(horizon) {
                out.push(key, t, &v);
            }
        }
        i = j;
    }
    for (ok, ot, ov) in entries {
        plain(out, ok, ot, ov, fix);
    }
}

/// Walk the merge of entries `s..e` of basement `bm` and `msgs` (sorted, already limited to the range
/// of interest) in key order or reverse, calling `f` with each key and the value `view` sees
/// of it, until it returns `false`. Values untouched by any message are passed borrowed.
pub(crate) fn merge_walk<'a>(
    fns: &UpdateRegistry,
    (bm, s, e): (&'a Basement, usize, usize),
    msgs: &BTreeMap<Key, Vec<Pending>>,
    bcasts: &[Broadcast],
    reverse: bool,
    view: View<'_>,
    mut f: impl FnMut(&[u8], Cow<'a, [u8]>) -> bool,
) {
    let mut emit = |k: &[u8], base: Option<(u8, &'a [u8])>, list: &[Pending]| -> bool {
        if list.is_empty() && bcasts.is_empty() {
            return match base.and_then(|(t, v)| le::visible(t, v, view)) {
                Some(v) => f(k, Cow::Borrowed(v)),
                None => true,
            };
        }
        match read_value(fns, k, base, list, bcasts, view) {
            Some(v) => f(k, Cow::Owned(v.into_vec())),
            None => true,
        }
    };
    let at = |i: usize| {
        let (k, t, v) = bm.entry(i);
        (k, Some((t, v)))
    };
    if !reverse {
        let mut ei = s;
        for (k, list) in msgs {
            while ei < e && bm.key(ei) < k.as_ref() {
                let (ek, b) = at(ei);
                if !emit(ek, b, &[]) {
                    return;
                }
                ei += 1;
            }
            let base = if ei < e && bm.key(ei) == k.as_ref() {
                ei += 1;
                at(ei - 1).1
            } else {
                None
            };
            if !emit(k, base, list) {
                return;
            }
        }
        while ei < e {
            let (ek, b) = at(ei);
            if !emit(ek, b, &[]) {
                return;
            }
            ei += 1;
        }
    } else {
        let mut ei = e;
        for (k, list) in msgs.iter().rev() {
            while ei > s && bm.key(ei - 1) > k.as_ref() {
                let (ek, b) = at(ei - 1);
                if !emit(ek, b, &[]) {
                    return;
                }
                ei -= 1;
            }
            let base = if ei > s && bm.key(ei - 1) == k.as_ref() {
                ei -= 1;
                at(ei).1
            } else {
                None
            };
            if !emit(k, base, list) {
                return;
            }
        }
        while ei > s {
            let (ek, b) = at(ei - 1);
            if !emit(ek, b, &[]) {
                return;
            }
            ei -= 1;
        }
    }
}
