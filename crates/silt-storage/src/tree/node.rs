//! In-memory nodes. A node is a list of partitions: for a leaf, basements of sorted entries;
//! for an internal node, one message buffer per child. Each partition may be resident or
//! only on disk (partial eviction); a node that is dirty always has every partition resident.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::ids::{BlockNum, Msn};
use crate::msg::{Broadcast, Pending, MSG_HEADER_BYTES};

/// Estimated heap overhead of one leaf entry beyond its key and value bytes (two boxed slices
/// plus allocator headers). Used for the cache's memory accounting.
pub(crate) const ENTRY_MEM_OVERHEAD: usize = 64;
/// Estimated overhead of one buffered message (B-tree slot, boxed key, vector, allocator).
pub(crate) const MSG_MEM_OVERHEAD: usize = 112;
/// Serialized bytes of a leaf entry besides key and value: two lengths and a type byte.
pub(crate) const ENTRY_HEADER_BYTES: usize = 9;

pub(crate) type Key = Box<[u8]>;
pub(crate) type Val = Box<[u8]>;

/// A leaf partition: entries sorted by key.
#[derive(Clone, Debug, Default)]
pub(crate) struct Basement {
    pub entries: Vec<(Key, Val)>,
    /// Serialized size of the entries.
    pub bytes: usize,
}

impl Basement {
    pub fn from_entries(entries: Vec<(Key, Val)>) -> Basement {
        let bytes = entries.iter().map(|(k, v)| entry_bytes(k, v)).sum();
        Basement { entries, bytes }
    }
    pub fn mem(&self) -> usize {
        self.bytes + self.entries.len() * ENTRY_MEM_OVERHEAD
    }
    pub fn get(&self, key: &[u8]) -> Option<&Val> {
        self.entries
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| &self.entries[i].1)
    }
}

pub(crate) fn entry_bytes(k: &[u8], v: &[u8]) -> usize {
    ENTRY_HEADER_BYTES + k.len() + v.len()
}

/// An internal partition: messages waiting for one child. Keyed messages are grouped by key,
/// each key's list in MSN order; broadcasts are in MSN order. Because a child's buffer only
/// ever receives messages newer than those it already holds, appending keeps both orders.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChildBuf {
    pub keyed: BTreeMap<Key, Vec<Pending>>,
    pub bcasts: Vec<Broadcast>,
    pub bytes: usize,
    pub count: usize,
}

pub(crate) fn msg_bytes(key: &[u8], p: &Pending) -> usize {
    MSG_HEADER_BYTES + key.len() + p.kind.payload_len()
}

pub(crate) fn bcast_bytes(b: &Broadcast) -> usize {
    MSG_HEADER_BYTES + 8 + b.arg.len()
}

impl ChildBuf {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn mem(&self) -> usize {
        self.bytes + self.count * MSG_MEM_OVERHEAD
    }
    pub fn push(&mut self, key: &[u8], p: Pending) {
        self.bytes += msg_bytes(key, &p);
        self.count += 1;
        match self.keyed.get_mut(key) {
            Some(v) => v.push(p),
            None => {
                self.keyed.insert(key.into(), vec![p]);
            }
        }
    }
    pub fn push_bcast(&mut self, b: Broadcast) {
        self.bytes += bcast_bytes(&b);
        self.count += 1;
        self.bcasts.push(b);
    }
    fn recount(&mut self) {
        self.count = self.bcasts.len();
        self.bytes = self.bcasts.iter().map(bcast_bytes).sum();
        for (k, list) in &self.keyed {
            self.count += list.len();
            self.bytes += list.iter().map(|p| msg_bytes(k, p)).sum::<usize>();
        }
    }
    /// Move keys `>= pivot` into a new buffer; broadcasts apply to both halves.
    pub fn split_off(&mut self, pivot: &[u8]) -> ChildBuf {
        let right_keys = self.keyed.split_off(pivot);
        let mut right = ChildBuf {
            keyed: right_keys,
            bcasts: self.bcasts.clone(),
            bytes: 0,
            count: 0,
        };
        right.recount();
        self.recount();
        right
    }
    pub fn max_msn(&self) -> Msn {
        let k = self
            .keyed
            .values()
            .filter_map(|l| l.last().map(|p| p.msn))
            .max()
            .unwrap_or_default();
        let b = self.bcasts.last().map(|b| b.msn).unwrap_or_default();
        k.max(b)
    }
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
    pub fn mem(&self) -> usize {
        match self {
            PartData::Leaf(b) => b.mem(),
            PartData::Buf(b) => b.mem(),
        }
    }
    pub fn bytes(&self) -> usize {
        match self {
            PartData::Leaf(b) => b.bytes,
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
}

impl Part {
    pub fn new(child: BlockNum, data: PartData) -> Part {
        Part {
            child,
            data: Some(data),
            loc: None,
            touched: AtomicBool::new(true),
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
    pub fn new_leaf(blocknum: BlockNum, basements: Vec<Basement>, pivots: Vec<Key>) -> Node {
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

    pub fn new_internal(
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

    pub fn is_leaf(&self) -> bool {
        self.height == 0
    }

    /// Partition holding `key`: the number of pivots `<= key`.
    pub fn child_for(&self, key: &[u8]) -> usize {
        self.pivots.partition_point(|p| p.as_ref() <= key)
    }

    /// Partition holding the greatest key `< key`.
    pub fn child_before(&self, key: &[u8]) -> usize {
        self.pivots.partition_point(|p| p.as_ref() < key)
    }

    pub fn fully_loaded(&self) -> bool {
        self.parts.iter().all(|p| p.data.is_some())
    }

    pub fn missing_parts(&self) -> Vec<usize> {
        (0..self.parts.len())
            .filter(|&i| self.parts[i].data.is_none())
            .collect()
    }

    /// Serialized size: what the node-size limit is measured against.
    pub fn bytes(&self) -> usize {
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
    pub fn mem(&self) -> usize {
        let parts: usize = self
            .parts
            .iter()
            .map(|p| p.data.as_ref().map(PartData::mem).unwrap_or(0) + 64)
            .sum();
        parts + self.pivots.iter().map(|p| p.len() + 32).sum::<usize>() + 256
    }

    pub fn basement(&self, i: usize) -> Option<&Basement> {
        match &self.parts[i].data {
            Some(PartData::Leaf(b)) => Some(b),
            _ => None,
        }
    }

    pub fn buf(&self, i: usize) -> Option<&ChildBuf> {
        match &self.parts[i].data {
            Some(PartData::Buf(b)) => Some(b),
            _ => None,
        }
    }

    pub fn buf_mut(&mut self, i: usize) -> &mut ChildBuf {
        match &mut self.parts[i].data {
            Some(PartData::Buf(b)) => b,
            _ => unreachable!("buf_mut on a non-resident or leaf partition"),
        }
    }

    pub fn touch(&self) {
        let c = self.clock.load(Ordering::Relaxed);
        if c < 15 {
            self.clock.store(c + 1, Ordering::Relaxed);
        }
    }

    /// Mark as modified: dirty, newer generation, on-disk copies of partitions stale.
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
        self.gen = next_gen();
        for p in &mut self.parts {
            p.loc = None;
        }
    }
}
