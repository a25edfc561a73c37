//! Node blocks: the byte layout of one node on disk (see `docs/format.md`).
//!
//! ```text
//! fixed header (40 bytes)
//!   magic "SILTNODE" | layout u16 | flags u16 | blocknum u64 | height u32 | n_parts u32
//!   | max_msn u64 | info_len u32
//! directory: n_parts x { disk_len u32 | raw_len u32 | crc32c u32 }
//! header crc32c u32 (over fixed header and directory)
//! info (info_len bytes): pivots (n_parts-1, each u32 length + bytes); internal nodes: child
//!   block numbers (n_parts x u64); layout 4 on: n_parts counts, each
//!   known u8 | (known = 1) live i64 | unsure u64 | max_xid u64
//!   (a child pointer's subtree count, or a basement's count: `tree/count.rs`)
//! info crc32c u32
//! partitions, back to back: [compression tag u8][compressed payload]
//! ```
//! A partition's crc32c covers its stored (compressed) bytes, so a partial read of one
//! basement is verified on its own.

use crate::format::bytes::{Dec, DecResult, Enc};
use crate::format::compress;
use crate::ids::{BlockNum, Msn, Xid};
use crate::msg::{tag, Broadcast};
use crate::options::Compression;
use crate::tree::count::{basement_count, SubCount};
use crate::tree::node::{index_messages, Basement, ChildBuf, Key, Node, PartData, PartLoc};
use crate::width::len_u32;

pub(crate) const NODE_MAGIC: &[u8; 8] = b"SILTNODE";
/// Layout written now. Version 2 added message type 3 (REPLACE); version 3 added versioned
/// leaf entries (type 1), provisional messages and COMMIT/ABORT messages. Blocks of versions
/// 1 and 2 hold a subset and are still read. Version 4 added the counts to the info section
/// and the unsure COMMIT (a second body byte); blocks of versions 1 to 3 are read with their
/// counts unknown.
pub(crate) const NODE_LAYOUT: u16 = 4;
pub(crate) const FIXED_HEADER: usize = 40;
pub(crate) const DIR_ENTRY: usize = 12;
const BASEMENT_TAG: u8 = 0xAA;
const BUFFER_TAG: u8 = 0xBB;

/// A node's contents captured under the tree lock, uncompressed. Compression and I/O happen
/// later without the lock.
#[derive(Debug)]
pub(crate) struct NodeImage {
    pub blocknum: BlockNum,
    pub height: u32,
    pub max_msn: Msn,
    pub pivots: Vec<Key>,
    pub children: Vec<BlockNum>,
    pub parts: Vec<Vec<u8>>,
    /// Per partition: the child pointer's count (internal) or the basement's (leaf).
    pub counts: Vec<Option<SubCount>>,
    pub gen: u64,
}

pub(crate) fn encode_basement(b: &Basement) -> Vec<u8> {
    let mut e = Enc::with_capacity(b.bytes() + 5);
    e.u8(BASEMENT_TAG);
    e.u32(len_u32(b.len()));
    // The in-memory arena is the serialized entries.
    e.bytes(b.arena());
    e.buf
}

/// Check and index a basement payload, reusing its buffer as the arena.
pub(crate) fn decode_basement(mut raw: Vec<u8>) -> DecResult<Basement> {
    let mut d = Dec::new(&raw);
    if d.u8()? != BASEMENT_TAG {
        return Err("basement tag mismatch".into());
    }
    let n = d.u32()? as usize;
    let mut offs = Vec::with_capacity(n.min(raw.len() / 9 + 1));
    let mut prev: Option<&[u8]> = None;
    for _ in 0..n {
        let at = d.pos() - 5;
        let kl = d.u32()? as usize;
        let vl = d.u32()? as usize;
        let le = d.u8()?;
        let k = d.take(kl)?;
        crate::tree::le::check(le, d.take(vl)?)?;
        if prev.is_some_and(|p| p >= k) {
            return Err("basement keys out of order".into());
        }
        prev = Some(k);
        offs.push(u32::try_from(at).map_err(|_| "basement too large")?);
    }
    if d.remaining() != 0 {
        return Err("trailing bytes in basement".into());
    }
    let len = raw.len();
    raw.copy_within(5.., 0);
    raw.truncate(len - 5);
    Ok(Basement::from_parts(raw, offs))
}

/// The uncompressed length of an empty buffer's payload (its tag and two zero counts): a
/// partition of this length holds no message, which a reader can tell without reading it.
pub(crate) const EMPTY_BUFFER_RAW_LEN: u32 = 9;

pub(crate) fn encode_buffer(b: &ChildBuf) -> Vec<u8> {
    let mut e = Enc::with_capacity(b.bytes + 16);
    e.u8(BUFFER_TAG);
    e.u32(len_u32(b.len()));
    e.u32(len_u32(b.bcasts.len()));
    b.write_keyed(&mut e.buf);
    for bc in &b.bcasts {
        e.u8(tag::UPDATE_BROADCAST);
        e.u64(bc.msn.0);
        e.u64(bc.xid.0);
        e.u32(bc.func);
        e.lp(&bc.arg);
    }
    e.buf
}

/// Check and index a buffer payload, reusing its buffer as the arena.
pub(crate) fn decode_buffer(mut raw: Vec<u8>) -> DecResult<ChildBuf> {
    let mut d = Dec::new(&raw);
    if d.u8()? != BUFFER_TAG {
        return Err("buffer tag mismatch".into());
    }
    let nk = d.u32()? as usize;
    let nb = d.u32()? as usize;
    if nk > raw.len() / 25 {
        return Err(format!("implausible message count {nk}"));
    }
    let (idx, end) = index_messages(&raw, 9, nk)?;
    let mut d = Dec::new(&raw[end..]);
    let mut bcasts = Vec::with_capacity(nb.min(raw.len() / 25));
    for _ in 0..nb {
        let t = d.u8()?;
        if t != tag::UPDATE_BROADCAST {
            return Err(format!("unknown broadcast type {t}"));
        }
        let msn = Msn(d.u64()?);
        let xid = Xid(d.u64()?);
        let func = d.u32()?;
        let arg = d.lp()?;
        bcasts.push(Broadcast {
            msn,
            xid,
            func,
            arg: arg.into(),
        });
    }
    if d.remaining() != 0 {
        return Err("trailing bytes in buffer".into());
    }
    raw.truncate(end);
    Ok(ChildBuf::from_parts(raw, idx, bcasts))
}

/// Capture a fully resident node.
pub(crate) fn image_of(n: &Node) -> NodeImage {
    let parts = n
        .parts
        .iter()
        .map(|p| match &p.data {
            Some(PartData::Leaf(b)) => encode_basement(b),
            Some(PartData::Buf(b)) => encode_buffer(b),
            None => unreachable!("image_of requires a fully resident node"),
        })
        .collect();
    NodeImage {
        blocknum: n.blocknum,
        height: n.height,
        max_msn: n.max_msn,
        pivots: n.pivots.clone(),
        children: if n.is_leaf() {
            Vec::new()
        } else {
            n.parts.iter().map(|p| p.child).collect()
        },
        parts,
        counts: n
            .parts
            .iter()
            .map(|p| match &p.data {
                Some(PartData::Leaf(b)) => Some(basement_count(b)),
                _ => p.count,
            })
            .collect(),
        gen: n.gen,
    }
}

/// Compress and lay out a block. Returns the block bytes (a buffer of `crate::bufpool`: give
/// it back once written) and, per partition, its location relative to the block start.
pub(crate) fn encode_block(img: &NodeImage, c: Compression) -> (Vec<u8>, Vec<PartLoc>) {
    let stored: Vec<Vec<u8>> = img.parts.iter().map(|r| compress::compress(c, r)).collect();
    let mut info = Enc::default();
    for p in &img.pivots {
        info.lp(p);
    }
    for ch in &img.children {
        info.u64(ch.0);
    }
    for c in &img.counts {
        match c {
            None => info.u8(0),
            Some(c) => {
                info.u8(1);
                info.u64(c.live as u64);
                info.u64(c.unsure);
                info.u64(c.max_xid);
            }
        }
    }
    let mut e = Enc {
        buf: crate::bufpool::take(),
    };
    e.buf.reserve(
        FIXED_HEADER
            + 8
            + img.parts.len() * DIR_ENTRY
            + info.buf.len()
            + stored.iter().map(Vec::len).sum::<usize>(),
    );
    e.bytes(NODE_MAGIC);
    e.u16(NODE_LAYOUT);
    e.u16(0);
    e.u64(img.blocknum.0);
    e.u32(img.height);
    e.u32(len_u32(img.parts.len()));
    e.u64(img.max_msn.0);
    e.u32(len_u32(info.buf.len()));
    let mut crcs = Vec::with_capacity(stored.len());
    for (s, r) in stored.iter().zip(&img.parts) {
        let crc = crc32c::crc32c(s);
        crcs.push(crc);
        e.u32(len_u32(s.len()));
        e.u32(len_u32(r.len()));
        e.u32(crc);
    }
    let hcrc = crc32c::crc32c(&e.buf);
    e.u32(hcrc);
    let icrc = crc32c::crc32c(&info.buf);
    e.bytes(&info.buf);
    e.u32(icrc);
    let mut locs = Vec::with_capacity(stored.len());
    for ((s, r), crc) in stored.iter().zip(&img.parts).zip(crcs) {
        locs.push(PartLoc {
            offset: e.buf.len() as u64,
            disk_len: len_u32(s.len()),
            raw_len: len_u32(r.len()),
            crc,
        });
        e.bytes(s);
    }
    stored.into_iter().for_each(crate::bufpool::give);
    (e.buf, locs)
}

/// The decoded header and info of a node block.
#[derive(Debug, Clone)]
pub(crate) struct BlockHeader {
    pub blocknum: BlockNum,
    pub height: u32,
    pub max_msn: Msn,
    pub pivots: Vec<Key>,
    pub children: Vec<BlockNum>,
    /// Partition locations relative to the block start.
    pub parts: Vec<PartLoc>,
    /// Per partition, as in [`NodeImage::counts`] (all unknown before layout 4).
    pub counts: Vec<Option<SubCount>>,
}

/// Bytes of the block needed before the info can be parsed, from the fixed header alone.
pub(crate) fn header_len_from_fixed(fixed: &[u8]) -> DecResult<usize> {
    let mut d = Dec::new(fixed);
    if d.take(8)? != NODE_MAGIC {
        return Err("bad node magic".into());
    }
    d.take(12)?;
    d.u32()?;
    let n = d.u32()? as usize;
    d.u64()?;
    let info_len = d.u32()? as usize;
    if n == 0 || n > 1 << 20 {
        return Err(format!("implausible partition count {n}"));
    }
    Ok(FIXED_HEADER + n * DIR_ENTRY + 4 + info_len + 4)
}

/// Parse the header, directory and info from the first `header_len` bytes of a block.
pub(crate) fn decode_header(buf: &[u8]) -> DecResult<BlockHeader> {
    let header_len = header_len_from_fixed(buf)?;
    if buf.len() < header_len {
        return Err("block shorter than its header".into());
    }
    let mut d = Dec::new(buf);
    d.take(8)?;
    let layout = d.u16()?;
    if !(1..=NODE_LAYOUT).contains(&layout) {
        return Err(format!("unsupported node layout {layout}"));
    }
    let _flags = d.u16()?;
    let blocknum = BlockNum(d.u64()?);
    let height = d.u32()?;
    let n = d.u32()? as usize;
    let max_msn = Msn(d.u64()?);
    let info_len = d.u32()? as usize;
    let mut dir = Vec::with_capacity(n);
    for _ in 0..n {
        dir.push((d.u32()?, d.u32()?, d.u32()?));
    }
    let hpos = d.pos();
    let hcrc = d.u32()?;
    if crc32c::crc32c(&buf[..hpos]) != hcrc {
        return Err("node header checksum mismatch".into());
    }
    let info = d.take(info_len)?;
    let icrc = d.u32()?;
    if crc32c::crc32c(info) != icrc {
        return Err("node info checksum mismatch".into());
    }
    let mut id = Dec::new(info);
    let mut pivots = Vec::with_capacity(n.saturating_sub(1));
    for _ in 1..n {
        pivots.push(Key::from(id.lp()?));
    }
    let mut children = Vec::new();
    if height > 0 {
        for _ in 0..n {
            children.push(BlockNum(id.u64()?));
        }
    }
    let mut counts = vec![None; n];
    if layout >= 4 {
        for c in &mut counts {
            *c = match id.u8()? {
                0 => None,
                1 => Some(SubCount {
                    live: id.u64()? as i64,
                    unsure: id.u64()?,
                    max_xid: id.u64()?,
                }),
                f => return Err(format!("bad count flag {f}")),
            };
        }
    }
    if id.remaining() != 0 {
        return Err("trailing bytes in node info".into());
    }
    let mut off = header_len as u64;
    let parts = dir
        .into_iter()
        .map(|(disk_len, raw_len, crc)| {
            let l = PartLoc {
                offset: off,
                disk_len,
                raw_len,
                crc,
            };
            off += u64::from(disk_len);
            l
        })
        .collect();
    Ok(BlockHeader {
        blocknum,
        height,
        max_msn,
        pivots,
        children,
        parts,
        counts,
    })
}

/// Verify and decode one stored partition.
pub(crate) fn decode_part(stored: &[u8], loc: &PartLoc, leaf: bool) -> DecResult<PartData> {
    if stored.len() != loc.disk_len as usize {
        return Err("partition truncated".into());
    }
    if crc32c::crc32c(stored) != loc.crc {
        return Err("partition checksum mismatch".into());
    }
    let raw = compress::decompress(stored, loc.raw_len as usize)?;
    if leaf {
        decode_basement(raw).map(PartData::Leaf)
    } else {
        decode_buffer(raw).map(PartData::Buf)
    }
}
