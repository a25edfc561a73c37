//! In-memory nodes. A node is a list of partitions: for a leaf, basements of sorted entries;
//! for an internal node, one message buffer per child. Each partition may be resident or
//! only on disk (partial eviction); a node that is dirty always has every partition resident.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::format::bytes::DecResult;
use crate::ids::{BlockNum, Msn, Xid};
use crate::msg::{Broadcast, MsgKind, Pending, MSG_HEADER_BYTES};
use crate::tree::subcount::SubCount;
use crate::width::len_u32;

/// 4 bytes of a key from byte `from` on (zero-padded) as a big-endian number. For keys that
/// share their first `from` bytes, comparing these orders the keys when they differ, so a
/// search compares them in a compact array before it touches the keys themselves, scattered
/// through the arena.
#[inline]
fn prefix(k: &[u8], from: usize) -> u32 {
    let k = k.get(from..).unwrap_or_default();
    let mut b = [0u8; 4];
    let n = k.len().min(4);
    b[..n].copy_from_slice(&k[..n]);
    u32::from_be_bytes(b)
}

/// The length of the common prefix of `a` and `b`.
fn common_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
/// Memory one buffered message costs besides its serialized bytes: its `u32` offset in the
/// buffer's sorted index.
pub(crate) const MSG_MEM_OVERHEAD: usize = std::mem::size_of::<u32>();
/// Serialized bytes of a leaf entry besides key and value: two lengths and a type byte.
pub(crate) const ENTRY_HEADER_BYTES: usize = 9;
/// Fixed memory of a partition's structure (vectors' headers, allocator slack).
const PART_MEM_FIXED: usize = 96;

pub(crate) type Key = Box<[u8]>;
pub(crate) type Val = Box<[u8]>;

#[inline]
fn rd32(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

#[inline]
fn rd64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Leaf entry type of a clean value (`tree::le` describes the entry types).
pub(crate) const LE_CLEAN: u8 = 0;
/// Leaf entry type of a versioned entry.
pub(crate) const LE_MVCC: u8 = 1;

/// A leaf partition: entries sorted by key, packed. `arena` holds the entries back to back in
/// their serialized form (`key_len u32 | val_len u32 | type u8 | key | value`, the stored
/// basement payload after its tag and count), so loading is a decompression plus one pass
/// to build `offs`, and storing is a copy. `offs[i]` is where entry `i` starts, and `pfx[i]`
/// its key's [`prefix`] after the bytes every key begins with, `head` (the bytes after it tell
/// neighbouring keys apart; for an `_id` they are its last ones).
#[derive(Clone, Debug, Default)]
pub(crate) struct Basement {
    arena: Vec<u8>,
    offs: Vec<u32>,
    pfx: Vec<u32>,
    /// Bytes every key begins with.
    head: Box<[u8]>,
    /// Entries that are not of the clean type (`tree::le`): with none, every entry is live and
    /// a count of the basement is its length.
    versioned: u32,
}

impl Basement {
    pub(crate) fn with_capacity(bytes: usize) -> Basement {
        Basement {
            arena: Vec::with_capacity(bytes),
            offs: Vec::new(),
            pfx: Vec::new(),
            head: Box::default(),
            versioned: 0,
        }
    }
    /// From a checked arena and its entry offsets (the decoder validates both).
    pub(crate) fn from_parts(arena: Vec<u8>, offs: Vec<u32>) -> Basement {
        let versioned = offs
            .iter()
            .filter(|&&o| arena[o as usize + 8] != LE_CLEAN)
            .count();
        let mut b = Basement {
            arena,
            offs,
            pfx: Vec::new(),
            head: Box::default(),
            versioned: len_u32(versioned),
        };
        if !b.is_empty() {
            let (first, last) = (b.key(0), b.key(b.len() - 1));
            b.head = first[..common_len(first, last)].into();
        }
        b.reprefix();
        b
    }
    /// Whether every entry is clean (so live).
    pub(crate) fn all_clean(&self) -> bool {
        self.versioned == 0
    }
    pub(crate) fn len(&self) -> usize {
        self.offs.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }
    /// Serialized size of the entries.
    pub(crate) fn bytes(&self) -> usize {
        self.arena.len()
    }
    pub(crate) fn arena(&self) -> &[u8] {
        &self.arena
    }
    /// Memory held: the arena, and per entry its `u32` offset and `u32` key prefix (all by
    /// capacity, so growth slack counts).
    pub(crate) fn mem(&self) -> usize {
        self.arena.capacity()
            + self.offs.capacity() * std::mem::size_of::<u32>()
            + self.pfx.capacity() * std::mem::size_of::<u32>()
            + self.head.len()
            + PART_MEM_FIXED
    }
    #[inline]
    fn key_at(&self, o: u32) -> &[u8] {
        let o = o as usize;
        let kl = rd32(&self.arena, o);
        &self.arena[o + ENTRY_HEADER_BYTES..o + ENTRY_HEADER_BYTES + kl]
    }
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.key_at(self.offs[i])
    }
    /// Entry `i`: its key, type (`tree::le`) and stored value bytes.
    #[inline]
    pub(crate) fn entry(&self, i: usize) -> (&[u8], u8, &[u8]) {
        let o = self.offs[i] as usize;
        let kl = rd32(&self.arena, o);
        let vl = rd32(&self.arena, o + 4);
        let k = o + ENTRY_HEADER_BYTES;
        (
            &self.arena[k..k + kl],
            self.arena[o + 8],
            &self.arena[k + kl..k + kl + vl],
        )
    }
    fn entry_end(&self, i: usize) -> usize {
        let o = self.offs[i] as usize;
        o + ENTRY_HEADER_BYTES + rd32(&self.arena, o) + rd32(&self.arena, o + 4)
    }
    /// Recompute every prefix (after `head` shrank).
    fn reprefix(&mut self) {
        let from = self.head.len();
        self.pfx = (0..self.len()).map(|i| prefix(self.key(i), from)).collect();
    }
    /// The first entry whose prefix is at least `p`. The prefixes of a basement's keys are
    /// often spread evenly (consecutive `_id`s), so the search guesses the position by
    /// interpolation and checks a few entries around the guess, each guess narrowing the
    /// range, before it falls back to a binary search: a lookup in a basement not in the CPU
    /// cache then touches one or two cache lines of the array instead of ten.
    fn first_prefix_at_least(&self, p: u32) -> usize {
        const WINDOW: usize = 8;
        let pfx = &self.pfx;
        // The answer lies in lo..=hi.
        let (mut lo, mut hi) = (0, pfx.len());
        for _ in 0..4 {
            if hi - lo <= 2 * WINDOW {
                break;
            }
            let (a, b) = (pfx[lo], pfx[hi - 1]);
            if p <= a {
                return lo;
            }
            if p > b {
                return hi;
            }
            let span = (hi - 1 - lo) as u128;
            let guess = lo + ((u128::from(p - a) * span) / u128::from(b - a)) as usize;
            let wlo = guess.saturating_sub(WINDOW).max(lo);
            let whi = (guess + WINDOW).min(hi - 1);
            if pfx[wlo] >= p {
                hi = wlo;
            } else if pfx[whi] < p {
                lo = whi + 1;
            } else {
                return wlo + pfx[wlo..=whi].partition_point(|&x| x < p);
            }
        }
        lo + pfx[lo..hi].partition_point(|&x| x < p)
    }
    /// Keep `head` a prefix of a key `k` about to be added, and `k`'s prefix.
    fn admit(&mut self, k: &[u8]) -> u32 {
        if self.is_empty() {
            self.head = k.into();
        } else {
            let c = common_len(&self.head, k);
            if c < self.head.len() {
                self.head = self.head[..c].into();
                self.reprefix();
            }
        }
        prefix(k, self.head.len())
    }
    pub(crate) fn search(&self, key: &[u8]) -> Result<usize, usize> {
        if self.is_empty() {
            return Err(0);
        }
        let shared = self.head.len();
        if key.get(..shared) != Some(&self.head[..]) {
            // Outside the basement's keys: before them all or after them all.
            return if key < &self.head[..] {
                Err(0)
            } else {
                Err(self.len())
            };
        }
        // The run of entries whose prefix equals the key's, found in the prefix array; only
        // the keys in that run are compared whole.
        let p = prefix(key, shared);
        let lo = self.first_prefix_at_least(p);
        let rest = &self.pfx[lo..];
        let mut run = rest.iter().take(4).take_while(|&&x| x == p).count();
        if run == 4 {
            run = rest.partition_point(|&x| x == p);
        }
        self.offs[lo..lo + run]
            .binary_search_by(|&o| self.key_at(o).cmp(key))
            .map(|i| lo + i)
            .map_err(|i| lo + i)
    }
    /// The positions `s..e` of the entries within the bounds `(a, z)`.
    pub(crate) fn positions(&self, a: Bound<&[u8]>, z: Bound<&[u8]>) -> (usize, usize) {
        let s = match a {
            Bound::Unbounded => 0,
            Bound::Included(k) => self.partition_point(|x| x < k),
            Bound::Excluded(k) => self.partition_point(|x| x <= k),
        };
        let e = match z {
            Bound::Unbounded => self.len(),
            Bound::Included(k) => self.partition_point(|x| x <= k),
            Bound::Excluded(k) => self.partition_point(|x| x < k),
        };
        (s, e.max(s))
    }
    /// Number of leading entries whose key satisfies `pred` (which must be monotone).
    pub(crate) fn partition_point(&self, pred: impl Fn(&[u8]) -> bool) -> usize {
        self.offs.partition_point(|&o| pred(self.key_at(o)))
    }
    /// The stored type and bytes of `key`'s entry.
    pub(crate) fn get(&self, key: &[u8]) -> Option<(u8, &[u8])> {
        self.search(key).ok().map(|i| {
            let (_, t, v) = self.entry(i);
            (t, v)
        })
    }
    /// Append an entry whose key is greater than every key present.
    pub(crate) fn push(&mut self, k: &[u8], t: u8, v: &[u8]) {
        debug_assert!(self.is_empty() || self.key(self.len() - 1) < k);
        let p = self.admit(k);
        self.offs.push(len_u32(self.arena.len()));
        self.pfx.push(p);
        write_entry(&mut self.arena, k, t, v);
        self.versioned += u32::from(t != LE_CLEAN);
    }
    /// Replace entry `i` (if `replace`) or insert before it, with `new` (or nothing).
    pub(crate) fn splice(&mut self, i: usize, replace: bool, new: Option<(&[u8], u8, &[u8])>) {
        let start = if i < self.len() {
            self.offs[i] as usize
        } else {
            self.arena.len()
        };
        let end = if replace { self.entry_end(i) } else { start };
        let p = new.map(|(k, _, _)| self.admit(k));
        if replace {
            self.versioned -= u32::from(self.arena[start + 8] != LE_CLEAN);
        }
        let mut enc = Vec::new();
        if let Some((k, t, v)) = new {
            write_entry(&mut enc, k, t, v);
            self.versioned += u32::from(t != LE_CLEAN);
        }
        let (grown, shrunk) = (len_u32(enc.len()), len_u32(end - start));
        self.arena.splice(start..end, enc);
        // Every offset is below the arena's new length, so if that fits a u32 the arithmetic
        // below cannot overflow (and an offset moved is at or after `end`: no underflow).
        len_u32(self.arena.len());
        let tail = if replace { i + 1 } else { i };
        for o in &mut self.offs[tail..] {
            *o = *o - shrunk + grown;
        }
        match (replace, new) {
            (true, None) => {
                self.offs.remove(i);
                self.pfx.remove(i);
            }
            (false, Some(_)) => {
                self.offs.insert(i, len_u32(start));
                self.pfx.insert(i, p.unwrap_or_default());
            }
            (true, Some(_)) => self.pfx[i] = p.unwrap_or_default(),
            (false, None) => {}
        }
    }
    pub(crate) fn shrink(&mut self) {
        self.arena.shrink_to_fit();
        self.shrink_index();
    }
    /// Drop the growth slack of the per-entry arrays (the arena was reserved at its size).
    fn shrink_index(&mut self) {
        self.offs.shrink_to_fit();
        self.pfx.shrink_to_fit();
    }
}

fn write_entry(out: &mut Vec<u8>, k: &[u8], t: u8, v: &[u8]) {
    out.extend_from_slice(&len_u32(k.len()).to_le_bytes());
    out.extend_from_slice(&len_u32(v.len()).to_le_bytes());
    out.push(t);
    out.extend_from_slice(k);
    out.extend_from_slice(v);
}

pub(crate) fn entry_bytes(k: &[u8], v: &[u8]) -> usize {
    ENTRY_HEADER_BYTES + k.len() + v.len()
}

/// Builds a leaf's basements from entries in ascending key order, cutting a new basement
/// whenever the current one would exceed `target` bytes.
pub(crate) struct LeafBuilder {
    target: usize,
    done: Vec<Basement>,
    pivots: Vec<Key>,
    cur: Basement,
}

impl LeafBuilder {
    pub(crate) fn new(target: usize) -> LeafBuilder {
        LeafBuilder {
            target,
            done: Vec::new(),
            pivots: Vec::new(),
            cur: Basement::default(),
        }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.done.is_empty() && self.cur.is_empty()
    }
    pub(crate) fn push(&mut self, k: &[u8], t: u8, v: &[u8]) {
        let eb = entry_bytes(k, v);
        if self.cur.bytes() + eb > self.target && !self.cur.is_empty() {
            self.pivots.push(k.into());
            let mut full = std::mem::replace(&mut self.cur, Basement::with_capacity(self.target));
            full.shrink_index();
            self.done.push(full);
        } else if self.cur.arena.capacity() == 0 {
            self.cur.arena.reserve(self.target);
        }
        self.cur.push(k, t, v);
    }
    /// The basements (at least one, possibly empty) and the pivots between them.
    pub(crate) fn finish(mut self) -> (Vec<Basement>, Vec<Key>) {
        self.cur.shrink();
        self.done.push(self.cur);
        (self.done, self.pivots)
    }
}

/// A buffered keyed message, borrowed from a buffer's arena.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MsgRef<'a> {
    pub tag: u8,
    pub msn: Msn,
    pub xid: Xid,
    pub key: &'a [u8],
    /// The message body without its length prefix: the value, nothing, or `func` + argument.
    pub body: &'a [u8],
}

impl MsgRef<'_> {
    pub(crate) fn to_pending(self) -> Pending {
        Pending {
            msn: self.msn,
            xid: self.xid,
            kind: MsgKind::from_body(self.tag, self.body).unwrap_or(MsgKind::Delete),
            prov: crate::msg::tag::split(self.tag).1,
        }
    }
    /// Whether this is a committed data message (not provisional, not a commit or abort).
    #[inline]
    pub(crate) fn is_committed_data(&self) -> bool {
        use crate::msg::tag;
        self.tag & tag::PROVISIONAL == 0 && self.tag != tag::COMMIT && self.tag != tag::ABORT
    }
}

/// Serialized size of a keyed message in a buffer.
fn rec_len(key_len: usize, body_len: usize) -> usize {
    MSG_HEADER_BYTES + key_len + 4 + body_len
}

/// An internal partition: messages waiting for one child, packed. `arena` holds keyed
/// messages in their serialized form (`type u8 | msn u64 | xid u64 | key lp | body lp`) in
/// arrival order; `idx` holds their offsets sorted by key, then MSN. Because a child's buffer
/// only ever receives messages newer than those it already holds, a new message goes after
/// every message for its key. Broadcasts are kept apart, in MSN order.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChildBuf {
    arena: Vec<u8>,
    idx: Vec<u32>,
    pub bcasts: Vec<Broadcast>,
    /// Serialized size (keyed messages and broadcasts).
    pub bytes: usize,
    /// Messages held (keyed and broadcasts).
    pub count: usize,
}

pub(crate) fn msg_bytes(key: &[u8], p: &Pending) -> usize {
    MSG_HEADER_BYTES + key.len() + p.kind.payload_len()
}

pub(crate) fn bcast_bytes(b: &Broadcast) -> usize {
    MSG_HEADER_BYTES + 8 + b.arg.len()
}

impl ChildBuf {
    /// From an arena and the offsets of its messages in (key, MSN) order, both checked by the
    /// decoder.
    pub(crate) fn from_parts(arena: Vec<u8>, idx: Vec<u32>, bcasts: Vec<Broadcast>) -> ChildBuf {
        let mut b = ChildBuf {
            arena,
            idx,
            bcasts,
            bytes: 0,
            count: 0,
        };
        b.recount();
        b
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Keyed messages held.
    pub(crate) fn len(&self) -> usize {
        self.idx.len()
    }
    pub(crate) fn mem(&self) -> usize {
        self.arena.capacity()
            + self.idx.capacity() * MSG_MEM_OVERHEAD
            + self.bcasts.iter().map(|b| b.arg.len() + 64).sum::<usize>()
            + PART_MEM_FIXED
    }
    #[inline]
    fn key_at(&self, o: u32) -> &[u8] {
        let o = o as usize;
        let kl = rd32(&self.arena, o + 17);
        &self.arena[o + MSG_HEADER_BYTES..o + MSG_HEADER_BYTES + kl]
    }
    #[inline]
    fn msg_at(&self, o: u32) -> MsgRef<'_> {
        let o = o as usize;
        let a = &self.arena;
        let kl = rd32(a, o + 17);
        let k = o + MSG_HEADER_BYTES;
        let bl = rd32(a, k + kl);
        MsgRef {
            tag: a[o],
            msn: Msn(rd64(a, o + 1)),
            xid: Xid(rd64(a, o + 9)),
            key: &a[k..k + kl],
            body: &a[k + kl + 4..k + kl + 4 + bl],
        }
    }
    fn raw_at(&self, o: u32) -> &[u8] {
        let o = o as usize;
        let kl = rd32(&self.arena, o + 17);
        let bl = rd32(&self.arena, o + MSG_HEADER_BYTES + kl);
        &self.arena[o..o + rec_len(kl, bl)]
    }
    /// The key of the `i`-th message in (key, MSN) order.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.key_at(self.idx[i])
    }
    /// The `i`-th message in (key, MSN) order.
    #[inline]
    pub(crate) fn msg(&self, i: usize) -> MsgRef<'_> {
        self.msg_at(self.idx[i])
    }
    /// Append every keyed message, serialized, in (key, MSN) order.
    pub(crate) fn write_keyed(&self, out: &mut Vec<u8>) {
        // Every message in the arena is indexed, so when arrival order is key order (a
        // buffer as loaded, or filled in key order) the arena from the first message on is
        // the serialized form.
        if let Some(&first) = self.idx.first() {
            if self.idx.windows(2).all(|w| w[0] < w[1]) {
                out.extend_from_slice(&self.arena[first as usize..]);
                return;
            }
        }
        for &o in &self.idx {
            out.extend_from_slice(self.raw_at(o));
        }
    }
    /// Number of distinct keys.
    pub(crate) fn distinct_keys(&self) -> usize {
        (0..self.len())
            .filter(|&i| i == 0 || self.key(i - 1) != self.key(i))
            .count()
    }
    /// Positions (in key order) of the messages whose keys are in the range.
    pub(crate) fn positions(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> std::ops::Range<usize> {
        let s = match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) => self.idx.partition_point(|&o| self.key_at(o) < k),
            Bound::Excluded(k) => self.idx.partition_point(|&o| self.key_at(o) <= k),
        };
        let e = match hi {
            Bound::Unbounded => self.idx.len(),
            Bound::Included(k) => self.idx.partition_point(|&o| self.key_at(o) <= k),
            Bound::Excluded(k) => self.idx.partition_point(|&o| self.key_at(o) < k),
        };
        s..e.max(s)
    }
    /// First position at or after `from` whose key is not below `pivot`.
    pub(crate) fn first_at_or_above(&self, from: usize, pivot: &[u8]) -> usize {
        from + self.idx[from..].partition_point(|&o| self.key_at(o) < pivot)
    }
    fn append_raw(&mut self, key_len: usize, rec: impl FnOnce(&mut Vec<u8>)) -> u32 {
        let o = self.arena.len();
        rec(&mut self.arena);
        debug_assert_eq!(rd32(&self.arena, o + 17), key_len);
        len_u32(o)
    }
    pub(crate) fn push(&mut self, key: &[u8], p: &Pending) {
        self.bytes += msg_bytes(key, p);
        self.count += 1;
        let o = self.append_raw(key.len(), |a| {
            a.push(p.stored_tag());
            a.extend_from_slice(&p.msn.0.to_le_bytes());
            a.extend_from_slice(&p.xid.0.to_le_bytes());
            a.extend_from_slice(&len_u32(key.len()).to_le_bytes());
            a.extend_from_slice(key);
            p.kind.write_payload(a);
        });
        let pos = self.idx.partition_point(|&x| self.key_at(x) <= key);
        self.idx.insert(pos, o);
    }
    pub(crate) fn push_bcast(&mut self, b: Broadcast) {
        self.bytes += bcast_bytes(&b);
        self.count += 1;
        self.bcasts.push(b);
    }
    /// Add the messages at positions `range` of `src` (newer than any held here for the
    /// same keys), merging them into the key order.
    pub(crate) fn append_sorted(&mut self, src: &ChildBuf, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let mut new = Vec::with_capacity(range.len());
        for i in range {
            let raw = src.raw_at(src.idx[i]);
            new.push(len_u32(self.arena.len()));
            self.arena.extend_from_slice(raw);
            self.bytes += raw.len();
            self.count += 1;
        }
        if self.idx.is_empty() {
            self.idx = new;
            return;
        }
        let old = std::mem::take(&mut self.idx);
        let mut out = Vec::with_capacity(old.len() + new.len());
        let (mut a, mut b) = (0, 0);
        while a < old.len() && b < new.len() {
            // On equal keys the held message is older, so it goes first.
            if self.key_at(old[a]) <= self.key_at(new[b]) {
                out.push(old[a]);
                a += 1;
            } else {
                out.push(new[b]);
                b += 1;
            }
        }
        out.extend_from_slice(&old[a..]);
        out.extend_from_slice(&new[b..]);
        self.idx = out;
    }
    fn recount(&mut self) {
        self.count = self.bcasts.len() + self.idx.len();
        self.bytes = self.bcasts.iter().map(bcast_bytes).sum::<usize>()
            + self
                .idx
                .iter()
                .map(|&o| self.raw_at(o).len())
                .sum::<usize>();
    }
    /// A compact copy of the messages at positions `range`, with the given broadcasts.
    fn copy_range(&self, range: std::ops::Range<usize>, bcasts: Vec<Broadcast>) -> ChildBuf {
        let mut arena = Vec::new();
        let mut idx = Vec::with_capacity(range.len());
        for i in range {
            idx.push(len_u32(arena.len()));
            arena.extend_from_slice(self.raw_at(self.idx[i]));
        }
        ChildBuf::from_parts(arena, idx, bcasts)
    }
    /// Move keys `>= pivot` into a new buffer; broadcasts apply to both halves.
    pub(crate) fn split_off(&mut self, pivot: &[u8]) -> ChildBuf {
        let p = self.idx.partition_point(|&o| self.key_at(o) < pivot);
        let right = self.copy_range(p..self.idx.len(), self.bcasts.clone());
        let bcasts = std::mem::take(&mut self.bcasts);
        let left = self.copy_range(0..p, bcasts);
        *self = left;
        right
    }
    pub(crate) fn max_msn(&self) -> Msn {
        let k = self
            .idx
            .iter()
            .map(|&o| Msn(rd64(&self.arena, o as usize + 1)))
            .max()
            .unwrap_or_default();
        let b = self.bcasts.last().map(|b| b.msn).unwrap_or_default();
        k.max(b)
    }
}

/// Check a serialized keyed-message section and index it: `arena[start..end]` must hold whole
/// messages with valid types, keys in ascending order and, within a key, strictly ascending
/// MSNs.
pub(crate) fn index_messages(arena: &[u8], start: usize, n: usize) -> DecResult<(Vec<u32>, usize)> {
    let mut idx = Vec::with_capacity(n);
    let mut o = start;
    let mut prev: Option<(usize, usize, u64)> = None;
    for _ in 0..n {
        if arena.len() < o + MSG_HEADER_BYTES {
            return Err("truncated buffered message".into());
        }
        let t = arena[o];
        let msn = rd64(arena, o + 1);
        let kl = rd32(arena, o + 17);
        let k = o + MSG_HEADER_BYTES;
        if arena.len() < k + kl + 4 {
            return Err("truncated buffered message".into());
        }
        let bl = rd32(arena, k + kl);
        let end = k + kl + 4 + bl;
        if arena.len() < end {
            return Err("truncated buffered message".into());
        }
        MsgKind::check_body(t, &arena[k + kl + 4..end])?;
        if let Some((pk, pkl, pmsn)) = prev {
            let (a, b) = (&arena[pk..pk + pkl], &arena[k..k + kl]);
            if a > b {
                return Err("buffer keys out of order".into());
            }
            if a == b && pmsn >= msn {
                return Err("buffer messages out of MSN order".into());
            }
        }
        let Ok(at) = u32::try_from(o) else {
            return Err("buffer too large".into());
        };
        prev = Some((k, kl, msn));
        idx.push(at);
        o = end;
    }
    Ok((idx, o))
}

/// Where a partition's stored bytes are in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PartLoc {
    pub offset: u64,
    pub disk_len: u32,
    pub raw_len: u32,
    pub crc: u32,
}

#[derive(Debug)]
pub(crate) enum PartData {
    Leaf(Basement),
    Buf(ChildBuf),
}

impl PartData {
    pub(crate) fn mem(&self) -> usize {
        match self {
            PartData::Leaf(b) => b.mem(),
            PartData::Buf(b) => b.mem(),
        }
    }
    pub(crate) fn bytes(&self) -> usize {
        match self {
            PartData::Leaf(b) => b.bytes(),
            PartData::Buf(b) => b.bytes,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Part {
    /// Child block (internal nodes only).
    pub child: BlockNum,
    /// Resident contents, or `None` when only on disk.
    pub data: Option<PartData>,
    /// Stored copy on disk, if the node's current on-disk image has this partition unchanged.
    pub loc: Option<PartLoc>,
    /// Clock bit for partial eviction.
    pub touched: AtomicBool,
    /// Internal nodes: what the pointer knows of the child's subtree; leaves: the basement's
    /// count, used only while `data` is `None` (`tree/count.rs`). `None`: not known (a node
    /// of an older layout, or a tree that keeps no counts).
    pub count: Option<SubCount>,
}

impl Part {
    pub(crate) fn new(child: BlockNum, data: PartData) -> Part {
        Part {
            child,
            data: Some(data),
            loc: None,
            touched: AtomicBool::new(true),
            count: None,
        }
    }
}

/// Generations are unique across the process, not per node: a node evicted and read back
/// must never reuse a generation that an in-flight write-back captured before the eviction.
static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(crate) fn next_gen() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// A node as held in the cache.
#[derive(Debug)]
pub(crate) struct Node {
    pub blocknum: BlockNum,
    /// 0 for leaves.
    pub height: u32,
    /// `pivots[i]` is the smallest key of partition `i + 1`.
    pub pivots: Vec<Key>,
    pub parts: Vec<Part>,
    /// Highest MSN applied to (leaf) or held in (internal) this node.
    pub max_msn: Msn,
    pub dirty: bool,
    /// Bumped on every modification; a write-back only marks the node clean if unchanged.
    pub gen: u64,
    /// Dirty when a checkpoint began and not yet captured by it.
    pub ckpt_pending: bool,
    /// Clock count for eviction.
    pub clock: AtomicU8,
    /// Memory this node has charged to the cache.
    pub charged: usize,
}

impl Node {
    pub(crate) fn new_leaf(blocknum: BlockNum, basements: Vec<Basement>, pivots: Vec<Key>) -> Node {
        Node {
            blocknum,
            height: 0,
            pivots,
            parts: basements
                .into_iter()
                .map(|b| Part::new(BlockNum(0), PartData::Leaf(b)))
                .collect(),
            max_msn: Msn(0),
            dirty: true,
            gen: next_gen(),
            ckpt_pending: false,
            clock: AtomicU8::new(3),
            charged: 0,
        }
    }

    pub(crate) fn new_internal(
        blocknum: BlockNum,
        height: u32,
        children: Vec<(BlockNum, ChildBuf)>,
        pivots: Vec<Key>,
    ) -> Node {
        Node {
            blocknum,
            height,
            pivots,
            parts: children
                .into_iter()
                .map(|(c, b)| Part::new(c, PartData::Buf(b)))
                .collect(),
            max_msn: Msn(0),
            dirty: true,
            gen: next_gen(),
            ckpt_pending: false,
            clock: AtomicU8::new(3),
            charged: 0,
        }
    }

    pub(crate) fn is_leaf(&self) -> bool {
        self.height == 0
    }

    /// Partition holding `key`: the number of pivots `<= key`.
    pub(crate) fn child_for(&self, key: &[u8]) -> usize {
        self.pivots.partition_point(|p| p.as_ref() <= key)
    }

    /// Partition holding the greatest key `< key`.
    pub(crate) fn child_before(&self, key: &[u8]) -> usize {
        self.pivots.partition_point(|p| p.as_ref() < key)
    }

    pub(crate) fn fully_loaded(&self) -> bool {
        self.parts.iter().all(|p| p.data.is_some())
    }

    pub(crate) fn missing_parts(&self) -> Vec<usize> {
        (0..self.parts.len())
            .filter(|&i| self.parts[i].data.is_none())
            .collect()
    }

    /// Serialized size: what the node-size limit is measured against.
    pub(crate) fn bytes(&self) -> usize {
        let parts: usize = self
            .parts
            .iter()
            .map(|p| match &p.data {
                Some(d) => d.bytes(),
                None => p.loc.map(|l| l.raw_len as usize).unwrap_or(0),
            })
            .sum();
        parts + self.pivots.iter().map(|p| p.len() + 4).sum::<usize>() + self.parts.len() * 12 + 64
    }

    /// Memory held by the resident parts of this node.
    pub(crate) fn mem(&self) -> usize {
        let parts: usize = self
            .parts
            .iter()
            .map(|p| p.data.as_ref().map(PartData::mem).unwrap_or(0) + 64)
            .sum();
        parts + self.pivots.iter().map(|p| p.len() + 32).sum::<usize>() + 256
    }

    pub(crate) fn basement(&self, i: usize) -> Option<&Basement> {
        match &self.parts[i].data {
            Some(PartData::Leaf(b)) => Some(b),
            _ => None,
        }
    }

    pub(crate) fn buf(&self, i: usize) -> Option<&ChildBuf> {
        match &self.parts[i].data {
            Some(PartData::Buf(b)) => Some(b),
            _ => None,
        }
    }

    pub(crate) fn buf_mut(&mut self, i: usize) -> &mut ChildBuf {
        match &mut self.parts[i].data {
            Some(PartData::Buf(b)) => b,
            _ => unreachable!("buf_mut on a non-resident or leaf partition"),
        }
    }

    pub(crate) fn touch(&self) {
        let c = self.clock.load(Ordering::Relaxed);
        if c < 15 {
            self.clock.store(c + 1, Ordering::Relaxed);
        }
    }

    /// Mark as modified: dirty, newer generation, on-disk copies of partitions stale.
    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
        self.gen = next_gen();
        for p in &mut self.parts {
            p.loc = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::node::{decode_basement, decode_buffer, encode_basement, encode_buffer};

    fn ins(msn: u64, v: &[u8]) -> Pending {
        Pending {
            msn: Msn(msn),
            xid: Xid(0),
            kind: MsgKind::Insert(v.into()),
            prov: false,
        }
    }

    #[test]
    fn basement_splice_keeps_order_and_roundtrips() {
        let mut b = Basement::default();
        for k in [b"b", b"d", b"f"] {
            b.push(k, 0, b"1");
        }
        b.splice(0, false, Some((b"a", 0, b"0")));
        b.splice(4, false, Some((b"g", 0, b"7")));
        b.splice(2, true, Some((b"b", 0, b"longer value")));
        b.splice(3, true, None);
        let got: Vec<_> = (0..b.len())
            .map(|i| {
                let (k, _, v) = b.entry(i);
                (k, v)
            })
            .collect();
        let want: Vec<(&[u8], &[u8])> = vec![
            (b"a", b"0"),
            (b"b", b"1"),
            (b"b", b"longer value"),
            (b"g", b"7"),
        ];
        // Entry 2 was "d": replaced by a "b" entry only to test the splice mechanics.
        assert_eq!(got.len(), want.len());
        assert_eq!(b.entry(3), (&b"g"[..], 0, &b"7"[..]));
        assert_eq!(
            b.bytes(),
            got.iter().map(|(k, v)| entry_bytes(k, v)).sum::<usize>()
        );
        let mut c = Basement::default();
        for k in [b"a", b"c", b"e"] {
            c.push(k, 0, b"xyz");
        }
        let d = decode_basement(encode_basement(&c)).unwrap();
        assert_eq!(d.get(b"c"), Some((0, &b"xyz"[..])));
        assert_eq!(d.get(b"d"), None);
        assert_eq!(d.bytes(), c.bytes());
    }

    #[test]
    fn child_buffer_orders_by_key_then_msn() {
        let mut a = ChildBuf::default();
        a.push(b"m", &ins(1, b"1"));
        a.push(b"c", &ins(2, b"2"));
        a.push(b"m", &ins(3, b"3"));
        let mut src = ChildBuf::default();
        src.push(b"a", &ins(4, b"4"));
        src.push(b"m", &ins(5, b"5"));
        src.push(b"z", &ins(6, b"6"));
        a.append_sorted(&src, 0..src.len());
        let order: Vec<(Vec<u8>, u64)> = (0..a.len())
            .map(|i| (a.msg(i).key.to_vec(), a.msg(i).msn.0))
            .collect();
        let want: Vec<(Vec<u8>, u64)> =
            [("a", 4), ("c", 2), ("m", 1), ("m", 3), ("m", 5), ("z", 6)]
                .iter()
                .map(|(k, m)| (k.as_bytes().to_vec(), *m))
                .collect();
        assert_eq!(order, want);
        assert_eq!(a.max_msn(), Msn(6));
        assert_eq!(a.distinct_keys(), 4);
        let round = decode_buffer(encode_buffer(&a)).unwrap();
        assert_eq!(round.bytes, a.bytes);
        assert_eq!(encode_buffer(&round), encode_buffer(&a));
        let mut left = round;
        let right = left.split_off(b"m");
        assert_eq!((left.len(), right.len()), (2, 4));
        assert_eq!(left.bytes + right.bytes, a.bytes);
        assert_eq!(
            right.positions(Bound::Included(b"m"), Bound::Included(b"m")),
            0..3
        );
    }
}

#[cfg(test)]
mod search_tests {
    use super::*;

    /// `search` through the prefix array finds what a binary search over the keys finds,
    /// while inserts, replaces and removals change which bytes all keys share.
    #[test]
    #[expect(clippy::cast_possible_truncation, reason = "small random numbers")]
    fn prefix_search_matches_the_keys() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..40 {
            let mut bm = Basement::default();
            let mut model: Vec<Vec<u8>> = Vec::new();
            let base: &[u8] = if round % 2 == 0 {
                b"shared/prefix/"
            } else {
                b""
            };
            for _ in 0..400 {
                let mut k = base.to_vec();
                let len = rnd(10) as usize;
                k.extend((0..len).map(|_| [0u8, 1, 7, 200, 255][rnd(5) as usize]));
                if rnd(7) == 0 {
                    k = vec![rnd(256) as u8];
                }
                match model.binary_search(&k) {
                    Ok(i) if rnd(2) == 0 => {
                        bm.splice(i, true, None);
                        model.remove(i);
                    }
                    Ok(i) => bm.splice(i, true, Some((&k, LE_CLEAN, b"v"))),
                    Err(i) => {
                        bm.splice(i, false, Some((&k, LE_CLEAN, b"v")));
                        model.insert(i, k);
                    }
                }
                for _ in 0..3 {
                    let mut q = base.to_vec();
                    q.extend((0..rnd(10)).map(|_| [0u8, 1, 7, 200, 255][rnd(5) as usize]));
                    assert_eq!(bm.search(&q), model.binary_search(&q), "{q:?}");
                }
                for (i, k) in model.iter().enumerate() {
                    assert_eq!(bm.search(k), Ok(i));
                }
            }
            let again = Basement::from_parts(bm.arena.clone(), bm.offs.clone());
            for (i, k) in model.iter().enumerate() {
                assert_eq!(again.search(k), Ok(i));
            }
        }
    }
}
