//! Dictionary file header: two 4 KiB slots at offsets 0 and 4096. Checkpoint number `n` is
//! written to slot `n % 2`, so the previous checkpoint's header survives a torn write. On open
//! the valid slot with the higher checkpoint count wins.
//!
//! ```text
//! magic "SILTDICT" | layout u32 | dict_id u64 | ckpt_count u64 | ckpt_lsn u64
//! | btt_offset u64 | btt_len u64 | root u64 | next_block u64 | max_msn u64
//! | node_bytes u64 | basement_bytes u64 | fanout u32 | compression u8 | level i32
//! | rows i64 | data_bytes i64 | next_xid u64 (layout 2 on) | flags u32 (layout 3 on)
//! | crc32c u32 (over everything before it)
//! ```
//!
//! Layout 2 added `next_xid`; layout 1 headers are still read (as `next_xid` 0). Layout 3
//! added `flags` (bit 0: the tree keeps subtree counts, `tree/count.rs`); older headers are
//! read as flags 0.

use crate::format::bytes::{Dec, DecResult, Enc};
use crate::ids::{BlockNum, DictId, Lsn, Msn};
use crate::options::Compression;
use crate::width::usize_of;

pub(crate) const HEADER_MAGIC: &[u8; 8] = b"SILTDICT";
pub(crate) const FILE_LAYOUT: u32 = 3;
const FLAG_COUNTED: u32 = 1;
pub(crate) const HEADER_SLOT_BYTES: u64 = 4096;
/// First byte after the two header slots; blocks live from here on.
pub(crate) const DATA_START: u64 = 2 * HEADER_SLOT_BYTES;

/// The decoded contents of a header slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Owning dictionary.
    pub dict_id: DictId,
    /// Number of checkpoints this file has completed.
    pub ckpt_count: u64,
    /// Every log record at or below this LSN is reflected in the checkpointed tree.
    pub ckpt_lsn: Lsn,
    /// Offset of the block translation table.
    pub btt_offset: u64,
    /// Length of the block translation table.
    pub btt_len: u64,
    /// Root node.
    pub root: BlockNum,
    /// Next unused block number.
    pub next_block: u64,
    /// Highest MSN injected before the checkpoint.
    pub max_msn: Msn,
    /// Node size the tree was built with.
    pub node_bytes: u64,
    /// Basement size the tree was built with.
    pub basement_bytes: u64,
    /// Fanout the tree was built with.
    pub fanout: u32,
    /// Compression of new partitions.
    pub compression: Compression,
    /// Estimated live rows.
    pub rows: i64,
    /// Estimated key and value bytes of live rows.
    pub data_bytes: i64,
    /// The environment's next transaction id when the checkpoint began: every xid stamped in
    /// the file is below it.
    pub next_xid: u64,
    /// The tree keeps subtree counts: its writers insert only absent keys and delete only
    /// present ones (`tree/count.rs`).
    pub counted: bool,
}

impl FileHeader {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::with_capacity(usize_of(HEADER_SLOT_BYTES));
        e.bytes(HEADER_MAGIC);
        e.u32(FILE_LAYOUT);
        e.u64(self.dict_id.0);
        e.u64(self.ckpt_count);
        e.u64(self.ckpt_lsn.0);
        e.u64(self.btt_offset);
        e.u64(self.btt_len);
        e.u64(self.root.0);
        e.u64(self.next_block);
        e.u64(self.max_msn.0);
        e.u64(self.node_bytes);
        e.u64(self.basement_bytes);
        e.u32(self.fanout);
        e.u8(self.compression.tag());
        e.u32(match self.compression {
            Compression::Zstd(l) => l as u32,
            _ => 0,
        });
        e.i64(self.rows);
        e.i64(self.data_bytes);
        e.u64(self.next_xid);
        e.u32(if self.counted { FLAG_COUNTED } else { 0 });
        let crc = crc32c::crc32c(&e.buf);
        e.u32(crc);
        e.buf.resize(usize_of(HEADER_SLOT_BYTES), 0);
        e.buf
    }

    pub(crate) fn decode(buf: &[u8]) -> DecResult<FileHeader> {
        let mut d = Dec::new(buf);
        if d.take(8)? != HEADER_MAGIC {
            return Err("bad header magic".into());
        }
        let layout = d.u32()?;
        if !(1..=FILE_LAYOUT).contains(&layout) {
            return Err(format!("unsupported file layout {layout}"));
        }
        let h = FileHeader {
            dict_id: DictId(d.u64()?),
            ckpt_count: d.u64()?,
            ckpt_lsn: Lsn(d.u64()?),
            btt_offset: d.u64()?,
            btt_len: d.u64()?,
            root: BlockNum(d.u64()?),
            next_block: d.u64()?,
            max_msn: Msn(d.u64()?),
            node_bytes: d.u64()?,
            basement_bytes: d.u64()?,
            fanout: d.u32()?,
            compression: {
                let t = d.u8()?;
                let level = d.u32()? as i32;
                match t {
                    0 => Compression::None,
                    1 => Compression::Lz4,
                    2 => Compression::Zstd(level),
                    t => return Err(format!("unknown compression {t}")),
                }
            },
            rows: d.i64()?,
            data_bytes: d.i64()?,
            next_xid: if layout >= 2 { d.u64()? } else { 0 },
            counted: layout >= 3 && d.u32()? & FLAG_COUNTED != 0,
        };
        let pos = d.pos();
        let crc = d.u32()?;
        if crc32c::crc32c(&buf[..pos]) != crc {
            return Err("header checksum mismatch".into());
        }
        Ok(h)
    }
}
