//! Block translation table and space allocator.
//!
//! A node is named by a block number; the table maps it to the extent (offset, length) that
//! holds its newest image. Blocks are never overwritten in place: every write goes to a fresh
//! extent. Three tables exist, as in the original engine: *current* (what readers use),
//! *in-progress* (the tree as of the checkpoint being written) and *checkpointed* (the tree the
//! header on disk points at). An extent is freed only when no table refers to it.
//!
//! On disk: `magic "SILTBTT1" | count u64 | count x {blocknum u64 | offset u64 | len u64}
//! | crc32c u32`.

use std::collections::{BTreeMap, HashMap};

use crate::format::bytes::{Dec, DecResult, Enc};
use crate::format::header::DATA_START;
use crate::ids::BlockNum;

pub(crate) const BTT_MAGIC: &[u8; 8] = b"SILTBTT1";
/// Extents are aligned to this many bytes.
pub(crate) const ALIGN: u64 = 512;

/// A byte range of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    /// Start offset.
    pub offset: u64,
    /// Length in bytes (not rounded).
    pub len: u64,
}

impl Extent {
    fn span(&self) -> u64 {
        self.len.div_ceil(ALIGN) * ALIGN
    }
}

pub(crate) type Table = HashMap<BlockNum, Extent>;

pub(crate) fn encode_table(t: &Table) -> Vec<u8> {
    let mut e = Enc::with_capacity(20 + t.len() * 24);
    e.bytes(BTT_MAGIC);
    e.u64(t.len() as u64);
    let mut entries: Vec<_> = t.iter().collect();
    entries.sort_by_key(|(b, _)| **b);
    for (b, x) in entries {
        e.u64(b.0);
        e.u64(x.offset);
        e.u64(x.len);
    }
    let crc = crc32c::crc32c(&e.buf);
    e.u32(crc);
    e.buf
}

pub(crate) fn decode_table(buf: &[u8]) -> DecResult<Table> {
    let mut d = Dec::new(buf);
    if d.take(8)? != BTT_MAGIC {
        return Err("bad block table magic".into());
    }
    let n = usize::try_from(d.u64()?).map_err(|_| "implausible block table size")?;
    if n > buf.len() / 24 {
        return Err("implausible block table size".into());
    }
    let mut t = Table::with_capacity(n);
    for _ in 0..n {
        let b = BlockNum(d.u64()?);
        let offset = d.u64()?;
        let len = d.u64()?;
        if offset < DATA_START || offset % ALIGN != 0 {
            return Err(format!("block {b} has invalid offset {offset}"));
        }
        t.insert(b, Extent { offset, len });
    }
    let pos = d.pos();
    let crc = d.u32()?;
    if crc32c::crc32c(&buf[..pos]) != crc {
        return Err("block table checksum mismatch".into());
    }
    Ok(t)
}

/// First-fit allocator over the file's free extents.
#[derive(Debug, Default)]
pub(crate) struct Allocator {
    /// offset -> span of free, aligned ranges; adjacent ranges are coalesced.
    free: BTreeMap<u64, u64>,
    /// End of the allocated area.
    end: u64,
    /// Ranges freed since the last `take_punchable`: their space may be returned to the
    /// filesystem (hole punching) while they stay free.
    released: Vec<(u64, u64)>,
}

/// Holes are punched only at this granularity (the filesystem block size on common setups).
pub(crate) const PUNCH_ALIGN: u64 = 4096;

impl Allocator {
    /// Build from the extents in use.
    pub(crate) fn from_used(used: impl IntoIterator<Item = Extent>) -> Allocator {
        let mut v: Vec<Extent> = used.into_iter().collect();
        v.sort_by_key(|x| x.offset);
        let mut a = Allocator {
            free: BTreeMap::new(),
            end: DATA_START,
            released: Vec::new(),
        };
        for x in v {
            if x.offset > a.end {
                a.free.insert(a.end, x.offset - a.end);
                // Free space in a reopened file may still hold old data: punch it again.
                a.released.push((a.end, x.offset - a.end));
            }
            a.end = a.end.max(x.offset + x.span());
        }
        a
    }

    pub(crate) fn alloc(&mut self, len: u64) -> Extent {
        let span = len.max(1).div_ceil(ALIGN) * ALIGN;
        let hit = self
            .free
            .iter()
            .find(|(_, &s)| s >= span)
            .map(|(&o, &s)| (o, s));
        let offset = match hit {
            Some((o, s)) => {
                self.free.remove(&o);
                if s > span {
                    self.free.insert(o + span, s - span);
                }
                o
            }
            None => {
                let o = self.end;
                self.end += span;
                o
            }
        };
        Extent { offset, len }
    }

    pub(crate) fn free(&mut self, x: Extent) {
        self.released.push((x.offset, x.span()));
        self.put_back(x.offset, x.span());
    }

    /// Remove from the free map every free range that holds something freed since the last
    /// call and whose 4 KiB-aligned inner part is at least `min` bytes, and return them (the
    /// caller punches holes in them with no lock held, then hands each back with
    /// [`Allocator::restore`]; while out, nothing can be allocated there).
    pub(crate) fn take_punchable(&mut self, min: u64) -> Vec<(u64, u64)> {
        let released = std::mem::take(&mut self.released);
        let mut starts = std::collections::BTreeSet::new();
        for (o, s) in released {
            for (&fo, &fs) in self.free.range(..o + s).rev() {
                if fo + fs <= o {
                    break;
                }
                starts.insert(fo);
            }
        }
        let mut out = Vec::new();
        for fo in starts {
            let Some(&fs) = self.free.get(&fo) else {
                continue;
            };
            let a = fo.next_multiple_of(PUNCH_ALIGN);
            let z = (fo + fs) / PUNCH_ALIGN * PUNCH_ALIGN;
            if z > a && z - a >= min {
                self.free.remove(&fo);
                out.push((fo, fs));
            }
        }
        out
    }

    /// Return a range taken by [`Allocator::take_punchable`].
    pub(crate) fn restore(&mut self, off: u64, span: u64) {
        self.put_back(off, span);
    }

    fn put_back(&mut self, off: u64, span: u64) {
        let mut off = off;
        let mut span = span;
        if let Some((&po, &ps)) = self.free.range(..off).next_back() {
            if po + ps == off {
                self.free.remove(&po);
                off = po;
                span += ps;
            }
        }
        if let Some(&ns) = self.free.get(&(off + span)) {
            self.free.remove(&(off + span));
            span += ns;
        }
        if off + span == self.end {
            self.end = off;
        } else {
            self.free.insert(off, span);
        }
    }

    /// End of the allocated area: the file need not be longer.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Free bytes inside the allocated area.
    #[cfg(test)]
    pub(crate) fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_reuses_and_coalesces() {
        let mut a = Allocator::from_used([]);
        let x = a.alloc(100);
        let y = a.alloc(1000);
        let z = a.alloc(10);
        assert_eq!(x.offset, DATA_START);
        assert_eq!(y.offset, DATA_START + 512);
        a.free(x);
        a.free(y);
        assert_eq!(a.free_bytes(), 512 + 1024);
        let w = a.alloc(1500);
        assert_eq!(w.offset, DATA_START);
        a.free(z);
        a.free(w);
        assert_eq!(a.end(), DATA_START);
        assert_eq!(a.free_bytes(), 0);
    }

    #[test]
    fn punchable_ranges_are_held_out_until_restored() {
        let mut a = Allocator::from_used([]);
        let x = a.alloc(200_000);
        let y = a.alloc(1000);
        let z = a.alloc(100);
        a.free(x);
        a.free(z);
        let p = a.take_punchable(64 << 10);
        assert_eq!(p, vec![(x.offset, x.span())]);
        // Held out: a new allocation does not land there.
        let w = a.alloc(100);
        assert!(w.offset >= y.offset + 1024);
        assert!(a.take_punchable(64 << 10).is_empty());
        a.restore(p[0].0, p[0].1);
        a.free(w);
        a.free(y);
        assert_eq!(a.end(), DATA_START);
        assert_eq!(a.free_bytes(), 0);
    }

    #[test]
    fn table_roundtrip_and_checksum() {
        let mut t = Table::new();
        t.insert(
            BlockNum(3),
            Extent {
                offset: 8192,
                len: 77,
            },
        );
        let mut b = encode_table(&t);
        assert_eq!(decode_table(&b).unwrap(), t);
        b[20] ^= 1;
        assert!(decode_table(&b).is_err());
    }
}
