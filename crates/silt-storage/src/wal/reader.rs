//! Reading a log file back: its records, in LSN order, up to a torn or damaged tail.

use std::path::Path;

use super::files::{parse_seq, WAL_HEADER, WAL_MAGIC, WAL_MAGIC_OLD};
use super::record::LogRecord;
use crate::error::{corruption, IoContext, Result};
use crate::format::bytes::Dec;
use crate::ids::Lsn;
use crate::vfs::{RealFs, Vfs};

/// One log file read back.
#[derive(Debug)]
pub struct LogFile {
    /// Sequence number from the file name.
    pub seq: u64,
    /// First LSN the file was opened with.
    pub first_lsn: Lsn,
    /// Records that passed their checksum, in order.
    pub records: Vec<(Lsn, LogRecord)>,
    /// Offset of the first byte that is not a valid record (the file length if none).
    pub valid_len: u64,
    /// Why reading stopped early, if it did.
    pub torn: Option<String>,
}

/// Read one log file, stopping at the first record that is incomplete or fails its checksum.
pub fn read_file(path: &Path) -> Result<LogFile> {
    read_file_on(&RealFs, path)
}

/// [`read_file`] on the given storage.
pub(crate) fn read_file_on(vfs: &dyn Vfs, path: &Path) -> Result<LogFile> {
    let data = vfs.read(path).ctx(path)?;
    let seq = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_seq)
        .unwrap_or(0);
    if data.len() < WAL_HEADER
        || (&data[..8] != WAL_MAGIC && !WAL_MAGIC_OLD.iter().any(|m| &data[..8] == *m))
        || crc32c::crc32c(&data[..24])
            != u32::from_le_bytes([data[24], data[25], data[26], data[27]])
    {
        return Ok(LogFile {
            seq,
            first_lsn: Lsn(0),
            records: Vec::new(),
            valid_len: 0,
            torn: Some("missing or damaged file header".into()),
        });
    }
    let mut h = Dec::new(&data[8..24]);
    let _seq = h.u64().map_err(|e| corruption(path, "log header", e))?;
    let first_lsn = Lsn(h.u64().map_err(|e| corruption(path, "log header", e))?);
    let mut pos = WAL_HEADER;
    let mut records = Vec::new();
    let mut torn = None;
    let mut prev = first_lsn.0.saturating_sub(1);
    while pos < data.len() {
        let rest = &data[pos..];
        if rest.len() < 16 {
            torn = Some(format!("partial record header at offset {pos}"));
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if rest.len() < 16 + len {
            torn = Some(format!("partial record at offset {pos}"));
            break;
        }
        let covered = &rest[8..16 + len];
        if crc32c::crc32c(covered) != crc {
            torn = Some(format!("record checksum mismatch at offset {pos}"));
            break;
        }
        let lsn = covered
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes);
        if lsn <= prev {
            torn = Some(format!("LSN {lsn} out of order at offset {pos}"));
            break;
        }
        match LogRecord::decode_body(&covered[8..]) {
            Ok(r) => records.push((Lsn(lsn), r)),
            Err(e) => {
                torn = Some(format!("undecodable record at offset {pos}: {e}"));
                break;
            }
        }
        prev = lsn;
        pos += 16 + len;
    }
    Ok(LogFile {
        seq,
        first_lsn,
        records,
        valid_len: pos as u64,
        torn,
    })
}
