//! The log's files: their names, their header, listing them and creating the next one.

use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::format::bytes::Enc;
use crate::vfs::{OpenMode, VFile, Vfs};

/// Magic of the log files written now. Version 2 added record types 6 (Replace) and 7
/// (Batch); version 3 added 8 (a transaction's provisional writes), 9 (Commit) and 10
/// (Abort). Files of versions 1 and 2 hold a subset and are still read.
pub(super) const WAL_MAGIC: &[u8; 8] = b"SILTWAL3";
pub(super) const WAL_MAGIC_OLD: [&[u8; 8]; 2] = [b"SILTWAL1", b"SILTWAL2"];
pub(super) const WAL_HEADER: usize = 28;

pub(crate) fn file_name(seq: u64) -> String {
    format!("wal-{seq:010}.log")
}

pub(super) fn parse_seq(name: &str) -> Option<u64> {
    name.strip_prefix("wal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// Log files in `dir`, oldest first.
pub(crate) fn list_files(vfs: &dyn Vfs, dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut v = Vec::new();
    for name in vfs.list(dir).ctx(dir)? {
        if let Some(seq) = parse_seq(&name) {
            v.push((seq, dir.join(name)));
        }
    }
    v.sort();
    Ok(v)
}

pub(super) fn create_file(
    vfs: &dyn Vfs,
    dir: &Path,
    seq: u64,
    first_lsn: u64,
) -> Result<Box<dyn VFile>> {
    let path = dir.join(file_name(seq));
    let f = vfs.open(&path, OpenMode::CreateNew, false).ctx(&path)?;
    let mut e = Enc::default();
    e.bytes(WAL_MAGIC);
    e.u64(seq);
    e.u64(first_lsn);
    let crc = crc32c::crc32c(&e.buf);
    e.u32(crc);
    f.write_all_at(&e.buf, 0).ctx(&path)?;
    f.sync().ctx(&path)?;
    vfs.sync_dir(dir).ctx(dir)?;
    Ok(f)
}
