//! Applying messages to values: used when a buffer is flushed into a leaf (the result is
//! stored) and when a read meets pending messages (the result is only returned).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::msg::{run_update, tag, Broadcast, MsgKind, Pending, UpdateOutcome, UpdateRegistry};
use crate::tree::node::{Basement, ChildBuf, Key, LeafBuilder, MsgRef, Val};

/// Change in the estimated row count and data bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Delta {
    pub rows: i64,
    pub bytes: i64,
}

impl Delta {
    pub fn add(&mut self, o: Delta) {
        self.rows += o.rows;
        self.bytes += o.bytes;
    }
}

/// The estimate charged when a message is injected (before its effect is known).
pub(crate) fn injected_delta(key: &[u8], kind: &MsgKind) -> Delta {
    match kind {
        MsgKind::Insert(v) | MsgKind::InsertNoOverwrite(v) => Delta {
            rows: 1,
            bytes: (key.len() + v.len()) as i64,
        },
        MsgKind::Delete => Delta { rows: -1, bytes: 0 },
        // The old value's size is not known at injection; the application corrects it.
        MsgKind::Replace(_) | MsgKind::Update { .. } => Delta::default(),
    }
}

fn size_of(key: &[u8], v: &Option<Val>) -> (i64, i64) {
    match v {
        Some(v) => (1, (key.len() + v.len()) as i64),
        None => (0, 0),
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
        let before = size_of(key, &v);
        let (nv, est) = match m {
            Ok(p) => (p.kind.apply(fns, key, v), injected_delta(key, &p.kind)),
            // A broadcast reaches only keys that exist when it is applied.
            Err(_) if v.is_none() => (None, Delta::default()),
            Err(b) => (run_update(fns, b.func, key, v, &b.arg), Delta::default()),
        };
        if let Some(f) = fix.as_deref_mut() {
            let after = size_of(key, &nv);
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
    match m.tag {
        tag::INSERT | tag::INSERT_NO_OVERWRITE => Delta {
            rows: 1,
            bytes: (key.len() + m.body.len()) as i64,
        },
        tag::DELETE => Delta { rows: -1, bytes: 0 },
        _ => Delta::default(),
    }
}

fn size_cow(key: &[u8], v: &Option<Cow<'_, [u8]>>) -> (i64, i64) {
    match v {
        Some(v) => (1, (key.len() + v.len()) as i64),
        None => (0, 0),
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
    let before = size_cow(key, &v);
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
    let after = size_cow(key, &v);
    fix.rows += after.0 - before.0 - est.rows;
    fix.bytes += after.1 - before.1 - est.bytes;
    v
}

/// Merge the entries of `old` (a leaf's basements, in order) with the buffered messages of
/// `buf`, writing the resulting entries to `out`.
pub(crate) fn apply_buffer_to_leaf(
    fns: &UpdateRegistry,
    old: &[Basement],
    buf: &ChildBuf,
    fix: &mut Delta,
    out: &mut LeafBuilder,
) {
    let bcasts = &buf.bcasts[..];
    let mut entries = old
        .iter()
        .flat_map(|b| (0..b.len()).map(move |i| b.entry(i)))
        .peekable();
    let plain = |out: &mut LeafBuilder, k: &[u8], v: &[u8], fix: &mut Delta| {
        if bcasts.is_empty() {
            out.push(k, v);
        } else if let Some(nv) = resolve_refs(fns, k, Some(v), std::iter::empty(), bcasts, fix) {
            out.push(k, &nv);
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
        while let Some(&(ok, ov)) = entries.peek() {
            if ok >= key {
                break;
            }
            plain(out, ok, ov, fix);
            entries.next();
        }
        let base = match entries.peek() {
            Some(&(ok, ov)) if ok == key => {
                entries.next();
                Some(ov)
            }
            _ => None,
        };
        if let Some(nv) = resolve_refs(fns, key, base, (i..j).map(|p| buf.msg(p)), bcasts, fix) {
            out.push(key, &nv);
        }
        i = j;
    }
    for (ok, ov) in entries {
        plain(out, ok, ov, fix);
    }
}

/// Walk the merge of entries `s..e` of basement `bm` and `msgs` (sorted, already limited to the range
/// of interest) in key order or reverse, calling `f` with each resulting live key and value
/// until it returns `false`. Entries untouched by any message are passed borrowed.
pub(crate) fn merge_walk<'a>(
    fns: &UpdateRegistry,
    (bm, s, e): (&'a Basement, usize, usize),
    msgs: &BTreeMap<Key, Vec<Pending>>,
    bcasts: &[Broadcast],
    reverse: bool,
    mut f: impl FnMut(&[u8], Cow<'a, [u8]>) -> bool,
) {
    let mut emit = |k: &[u8], base: Option<&'a [u8]>, list: &[Pending]| -> bool {
        if list.is_empty() && bcasts.is_empty() {
            return match base {
                Some(v) => f(k, Cow::Borrowed(v)),
                None => true,
            };
        }
        match resolve(fns, k, base.map(Box::from), list, bcasts, None) {
            Some(v) => f(k, Cow::Owned(v.into_vec())),
            None => true,
        }
    };
    if !reverse {
        let mut ei = s;
        for (k, list) in msgs {
            while ei < e && bm.key(ei) < k.as_ref() {
                let (ek, ev) = bm.entry(ei);
                if !emit(ek, Some(ev), &[]) {
                    return;
                }
                ei += 1;
            }
            let base = if ei < e && bm.key(ei) == k.as_ref() {
                ei += 1;
                Some(bm.entry(ei - 1).1)
            } else {
                None
            };
            if !emit(k, base, list) {
                return;
            }
        }
        while ei < e {
            let (ek, ev) = bm.entry(ei);
            if !emit(ek, Some(ev), &[]) {
                return;
            }
            ei += 1;
        }
    } else {
        let mut ei = e;
        for (k, list) in msgs.iter().rev() {
            while ei > s && bm.key(ei - 1) > k.as_ref() {
                let (ek, ev) = bm.entry(ei - 1);
                if !emit(ek, Some(ev), &[]) {
                    return;
                }
                ei -= 1;
            }
            let base = if ei > s && bm.key(ei - 1) == k.as_ref() {
                ei -= 1;
                Some(bm.entry(ei).1)
            } else {
                None
            };
            if !emit(k, base, list) {
                return;
            }
        }
        while ei > s {
            let (ek, ev) = bm.entry(ei - 1);
            if !emit(ek, Some(ev), &[]) {
                return;
            }
            ei -= 1;
        }
    }
}
