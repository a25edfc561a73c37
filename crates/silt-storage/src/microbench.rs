//! Entry points for the criterion micro-benchmarks in `crates/silt-bench/benches/` (not an
//! API): the engine's hot paths that no public call reaches on their own. Applying a buffer
//! of messages to a leaf, and laying a node out as a block (compressing its partitions) and
//! reading it back. Each case is built once, outside the timed loop, from a fixed seed. The
//! timed call does exactly what the engine does on that path.

use crate::format::node::{self, NodeImage};
use crate::ids::{BlockNum, Msn, Xid};
use crate::msg::{MsgKind, Pending, UpdateOutcome, UpdateRegistry};
use crate::options::Compression;
use crate::tree::apply::{apply_buffer_to_leaf, Delta};
use crate::tree::le::LE_CLEAN;
use crate::tree::node::{Basement, ChildBuf, LeafBuilder, Node, PartData};
use crate::width::usize_of;

/// The update function the leaf case's blind updates run: add a little-endian u64.
const ADD: u32 = 1;

fn registry() -> UpdateRegistry {
    let mut fns = UpdateRegistry::new();
    fns.register(ADD, |_, old, arg| {
        let cur = old
            .and_then(|o| o.get(..8))
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let add = arg
            .get(..8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let mut v = old.map_or_else(|| vec![0u8; 8], <[u8]>::to_vec);
        if v.len() < 8 {
            v.resize(8, 0);
        }
        v[..8].copy_from_slice(&(cur.wrapping_add(add)).to_le_bytes());
        UpdateOutcome::Set(v)
    });
    fns
}

/// A small deterministic generator (xorshift), so that cases need no dependency.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// `len` bytes of which the fraction `random` is random and the rest repeats.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the random prefix is at most `len` (fraction clamped to 0..=1); a byte is the \
                  low 8 bits of a random word, truncated on purpose"
    )]
    fn value(&mut self, len: usize, random: f64) -> Vec<u8> {
        let r = ((len as f64) * random.clamp(0.0, 1.0)) as usize;
        let mut v: Vec<u8> = (0..r).map(|_| self.next() as u8).collect();
        v.resize(len, b'x');
        v
    }
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// Build the basements of a leaf holding keys `0, 2, 4, ...` (`entries` of them).
fn basements(entries: u64, value_len: usize, random: f64, basement_bytes: usize) -> LeafBuilder {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let mut b = LeafBuilder::new(basement_bytes);
    for i in 0..entries {
        b.push(&key(2 * i), LE_CLEAN, &g.value(value_len, random));
    }
    b
}

/// A leaf and a buffer of messages bound for it, as a flush finds them.
pub struct LeafApply {
    fns: UpdateRegistry,
    old: Vec<Basement>,
    buf: ChildBuf,
    basement_bytes: usize,
    /// Entries the leaf must hold after the apply, from a set model of the messages.
    expected: usize,
}

impl LeafApply {
    /// A leaf of `entries` entries (8-byte keys, `value_len`-byte values, a basement every
    /// `basement_bytes`) and a buffer of `msgs` messages in MSN order: a third inserts of new
    /// keys (between the leaf's), a third blind updates of existing keys, a third deletes.
    pub fn new(entries: u64, msgs: u64, value_len: usize, basement_bytes: usize) -> LeafApply {
        let (old, _) = basements(entries, value_len, 0.5, basement_bytes).finish();
        let mut g = Gen(0xd1b5_4a32_d192_ed03);
        // Messages go into a buffer in key order, each key's in MSN order.
        let mut list: Vec<(u64, Pending)> = (0..msgs)
            .map(|m| {
                let slot = g.next() % entries.max(1);
                let (k, kind) = match m % 3 {
                    0 => (
                        2 * slot + 1,
                        MsgKind::Insert(g.value(value_len, 0.5).into()),
                    ),
                    1 => (
                        2 * slot,
                        MsgKind::Update {
                            func: ADD,
                            arg: 1u64.to_le_bytes().into(),
                        },
                    ),
                    _ => (2 * slot, MsgKind::Delete),
                };
                let p = Pending {
                    msn: Msn(m + 1),
                    xid: Xid::AUTOCOMMIT,
                    kind,
                    prov: false,
                };
                (k, p)
            })
            .collect();
        // The model: a blind update of a missing key creates it (ADD starts from 0).
        let mut model: std::collections::BTreeSet<u64> = (0..entries).map(|i| 2 * i).collect();
        for (k, p) in &list {
            match p.kind {
                MsgKind::Delete => model.remove(k),
                _ => model.insert(*k),
            };
        }
        list.sort_by_key(|(k, p)| (*k, p.msn));
        let mut buf = ChildBuf::default();
        for (k, p) in &list {
            buf.push(&key(*k), p);
        }
        LeafApply {
            fns: registry(),
            old,
            buf,
            basement_bytes,
            expected: model.len(),
        }
    }

    /// The entries [`LeafApply::apply`] must return.
    pub fn expected(&self) -> usize {
        self.expected
    }

    /// Apply the buffer to the leaf as a flush does; returns the entries of the new leaf.
    pub fn apply(&self) -> usize {
        let mut fix = Delta::default();
        let mut out = LeafBuilder::new(self.basement_bytes);
        apply_buffer_to_leaf(
            &self.fns,
            &self.old,
            &self.buf,
            &mut fix,
            &mut out,
            Xid(u64::MAX),
        );
        let (b, _) = out.finish();
        b.iter().map(Basement::len).sum()
    }
}

/// A resident leaf node, ready to be written as a block.
pub struct LeafNode {
    img: NodeImage,
}

impl LeafNode {
    /// A leaf of `entries` entries (8-byte keys, `value_len`-byte values of which the
    /// fraction `random` is random), a basement every `basement_bytes`.
    pub fn new(entries: u64, value_len: usize, random: f64, basement_bytes: usize) -> LeafNode {
        let (b, pivots) = basements(entries, value_len, random, basement_bytes).finish();
        let n = Node::new_leaf(BlockNum(7), b, pivots);
        LeafNode {
            img: node::image_of(&n),
        }
    }

    /// Bytes of the node's partitions before compression.
    pub fn raw_bytes(&self) -> usize {
        self.img.parts.iter().map(Vec::len).sum()
    }

    /// Serialize: compress every partition with `c` and lay out the block, as a write-back
    /// does (checksums included).
    pub fn encode(&self, c: Compression) -> Vec<u8> {
        node::encode_block(&self.img, c).0
    }

    /// Deserialize a block made by [`LeafNode::encode`] as a cache miss does: the header,
    /// then every partition (checksum, decompression, basement index). Returns the entries.
    pub fn decode(block: &[u8]) -> usize {
        let h = node::decode_header(block).expect("a block made by encode");
        (0..h.parts.len())
            .map(|i| decode_part_at(block, &h, i))
            .sum()
    }

    /// Deserialize only basement `basement` (what a point read on a partial node reads):
    /// the header, then that one partition. Returns its entries.
    pub fn decode_one(block: &[u8], basement: usize) -> usize {
        let h = node::decode_header(block).expect("a block made by encode");
        decode_part_at(block, &h, basement.min(h.parts.len() - 1))
    }

    /// The basements of the node.
    pub fn basements(&self) -> usize {
        self.img.parts.len()
    }
}

/// Verify, decompress and decode partition `i` of `block`; returns its entries.
fn decode_part_at(block: &[u8], h: &node::BlockHeader, i: usize) -> usize {
    let loc = &h.parts[i];
    let at = usize_of(loc.offset);
    let stored = &block[at..at + loc.disk_len as usize];
    match node::decode_part(stored, loc, true).expect("a block made by encode") {
        PartData::Leaf(b) => b.len(),
        PartData::Buf(b) => b.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_apply_matches_its_model() {
        for msgs in [0, 1, 2, 3, 500, 5_000] {
            let case = LeafApply::new(2_000, msgs, 100, 16 << 10);
            assert_eq!(case.apply(), case.expected(), "{msgs} messages");
        }
    }

    #[test]
    fn node_blocks_round_trip_with_each_compressor() {
        let leaf = LeafNode::new(3_000, 100, 0.5, 16 << 10);
        assert!(leaf.basements() > 1);
        for c in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
            let block = leaf.encode(c);
            assert_eq!(LeafNode::decode(&block), 3_000);
            let one = LeafNode::decode_one(&block, leaf.basements() / 2);
            assert!(one > 0 && one < 3_000);
        }
    }
}
