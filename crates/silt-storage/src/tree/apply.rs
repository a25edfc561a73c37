//! Applying messages to values: used when a buffer is flushed into a leaf (the result is
//! stored) and when a read meets pending messages (the result is only returned).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::msg::{run_update, Broadcast, MsgKind, Pending, UpdateRegistry};
use crate::tree::node::{Key, Val};

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
        MsgKind::Update { .. } => Delta::default(),
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

/// Merge sorted leaf entries with buffered messages, producing the new sorted entries.
pub(crate) fn apply_to_entries(
    fns: &UpdateRegistry,
    old: Vec<(Key, Val)>,
    keyed: BTreeMap<Key, Vec<Pending>>,
    bcasts: &[Broadcast],
    fix: &mut Delta,
) -> Vec<(Key, Val)> {
    let mut out = Vec::with_capacity(old.len() + keyed.len());
    let mut oi = old.into_iter().peekable();
    let plain = |out: &mut Vec<(Key, Val)>, k: Key, v: Val, fix: &mut Delta| {
        if bcasts.is_empty() {
            out.push((k, v));
        } else if let Some(nv) = resolve(fns, &k, Some(v), &[], bcasts, Some(fix)) {
            out.push((k, nv));
        }
    };
    for (k, list) in keyed {
        while let Some((ok, _)) = oi.peek() {
            if ok.as_ref() >= k.as_ref() {
                break;
            }
            if let Some((ok, ov)) = oi.next() {
                plain(&mut out, ok, ov, fix);
            }
        }
        let base = match oi.peek() {
            Some((ok, _)) if ok.as_ref() == k.as_ref() => oi.next().map(|(_, v)| v),
            _ => None,
        };
        if let Some(nv) = resolve(fns, &k, base, &list, bcasts, Some(fix)) {
            out.push((k, nv));
        }
    }
    for (ok, ov) in oi {
        plain(&mut out, ok, ov, fix);
    }
    out
}

/// Walk the merge of `entries` (sorted) and `msgs` (sorted, already limited to the range of
/// interest) in key order or reverse, calling `f` with each resulting live key and value until
/// it returns `false`. Entries untouched by any message are passed borrowed.
pub(crate) fn merge_walk<'a>(
    fns: &UpdateRegistry,
    entries: &'a [(Key, Val)],
    msgs: &BTreeMap<Key, Vec<Pending>>,
    bcasts: &[Broadcast],
    reverse: bool,
    mut f: impl FnMut(&[u8], Cow<'a, [u8]>) -> bool,
) {
    let mut emit = |k: &[u8], base: Option<&'a Val>, list: &[Pending]| -> bool {
        if list.is_empty() && bcasts.is_empty() {
            return match base {
                Some(v) => f(k, Cow::Borrowed(v)),
                None => true,
            };
        }
        match resolve(fns, k, base.cloned(), list, bcasts, None) {
            Some(v) => f(k, Cow::Owned(v.into_vec())),
            None => true,
        }
    };
    if !reverse {
        let mut ei = 0;
        for (k, list) in msgs {
            while ei < entries.len() && entries[ei].0.as_ref() < k.as_ref() {
                if !emit(&entries[ei].0, Some(&entries[ei].1), &[]) {
                    return;
                }
                ei += 1;
            }
            let base = if ei < entries.len() && entries[ei].0.as_ref() == k.as_ref() {
                ei += 1;
                Some(&entries[ei - 1].1)
            } else {
                None
            };
            if !emit(k, base, list) {
                return;
            }
        }
        while ei < entries.len() {
            if !emit(&entries[ei].0, Some(&entries[ei].1), &[]) {
                return;
            }
            ei += 1;
        }
    } else {
        let mut ei = entries.len();
        for (k, list) in msgs.iter().rev() {
            while ei > 0 && entries[ei - 1].0.as_ref() > k.as_ref() {
                if !emit(&entries[ei - 1].0, Some(&entries[ei - 1].1), &[]) {
                    return;
                }
                ei -= 1;
            }
            let base = if ei > 0 && entries[ei - 1].0.as_ref() == k.as_ref() {
                ei -= 1;
                Some(&entries[ei].1)
            } else {
                None
            };
            if !emit(k, base, list) {
                return;
            }
        }
        while ei > 0 {
            if !emit(&entries[ei - 1].0, Some(&entries[ei - 1].1), &[]) {
                return;
            }
            ei -= 1;
        }
    }
}
