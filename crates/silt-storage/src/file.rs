//! One dictionary's file: header slots, block translation tables, allocation and block I/O.
//!
//! Locking: `state` is a leaf lock. It is taken after a tree lock when both are needed and is
//! never held across I/O; reads and writes of blocks happen with no lock held.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::{corruption, IoContext, Result};
use crate::format::btt::{self, Allocator, Extent, Table, PUNCH_ALIGN};
use crate::format::header::{FileHeader, HEADER_SLOT_BYTES};
use crate::ids::BlockNum;
use crate::vfs::{OpenMode, VFile, Vfs};
use crate::width::usize_of;

#[derive(Debug)]
pub(crate) struct FileState {
    pub current: Table,
    pub inprogress: Option<Table>,
    pub checkpointed: Table,
    pub ckpt_btt: Option<Extent>,
    pub alloc: Allocator,
    pub header: FileHeader,
}

impl FileState {
    fn referenced_elsewhere(&self, b: BlockNum, x: Extent, skip_current: bool) -> bool {
        (!skip_current && self.current.get(&b) == Some(&x))
            || self.inprogress.as_ref().and_then(|t| t.get(&b)) == Some(&x)
            || self.checkpointed.get(&b) == Some(&x)
    }

    /// Point the current table at a new extent for `b`, freeing the old one if unreferenced.
    pub(crate) fn set_current(&mut self, b: BlockNum, x: Extent) {
        if let Some(old) = self.current.insert(b, x) {
            if old != x && !self.referenced_elsewhere(b, old, true) {
                self.alloc.free(old);
            }
        }
    }

    pub(crate) fn remove_current(&mut self, b: BlockNum) {
        if let Some(old) = self.current.remove(&b) {
            if !self.referenced_elsewhere(b, old, true) {
                self.alloc.free(old);
            }
        }
    }

    pub(crate) fn set_inprogress(&mut self, b: BlockNum, x: Extent) {
        let Some(ip) = self.inprogress.as_mut() else {
            return;
        };
        if let Some(old) = ip.insert(b, x) {
            if old != x
                && self.current.get(&b) != Some(&old)
                && self.checkpointed.get(&b) != Some(&old)
            {
                self.alloc.free(old);
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct DictFile {
    pub path: PathBuf,
    /// The file (with direct reads inside when direct I/O is on).
    file: Box<dyn VFile>,
    pub state: Mutex<FileState>,
}

impl DictFile {
    /// Create a new file holding an empty tree described by `header` whose root block is
    /// written from `root_block`. The file is durable when this returns.
    pub(crate) fn create(
        vfs: &dyn Vfs,
        path: &Path,
        mut header: FileHeader,
        root_block: &[u8],
        direct_io: bool,
    ) -> Result<DictFile> {
        let file = vfs.open(path, OpenMode::CreateNew, direct_io).ctx(path)?;
        let mut alloc = Allocator::from_used([]);
        let rx = alloc.alloc(root_block.len() as u64);
        file.write_all_at(root_block, rx.offset).ctx(path)?;
        let mut table = Table::new();
        table.insert(header.root, rx);
        let tb = btt::encode_table(&table);
        let tx = alloc.alloc(tb.len() as u64);
        file.write_all_at(&tb, tx.offset).ctx(path)?;
        header.ckpt_count = 1;
        header.btt_offset = tx.offset;
        header.btt_len = tx.len;
        file.write_all_at(&header.encode(), HEADER_SLOT_BYTES)
            .ctx(path)?;
        file.sync().ctx(path)?;
        // The new name must be durable before anything refers to it.
        vfs.sync_dir(&crate::vfs::parent(path)).ctx(path)?;
        Ok(DictFile::assemble(path, file, table, tx, alloc, header))
    }

    /// The handle over an open file whose checkpointed table is `table`, stored at `tx`.
    fn assemble(
        path: &Path,
        file: Box<dyn VFile>,
        table: Table,
        tx: Extent,
        alloc: Allocator,
        header: FileHeader,
    ) -> DictFile {
        DictFile {
            path: path.to_path_buf(),
            file,
            state: Mutex::new(FileState {
                current: table.clone(),
                inprogress: None,
                checkpointed: table,
                ckpt_btt: Some(tx),
                alloc,
                header,
            }),
        }
    }

    /// Open an existing file at its last complete checkpoint.
    pub(crate) fn open(vfs: &dyn Vfs, path: &Path, direct_io: bool) -> Result<DictFile> {
        let file = vfs.open(path, OpenMode::Existing, direct_io).ctx(path)?;
        let header = read_best_header(&*file, path)?;
        let table = read_table(&*file, path, &header)?;
        let tx = Extent {
            offset: header.btt_offset,
            len: header.btt_len,
        };
        let alloc = Allocator::from_used(table.values().copied().chain([tx]));
        Ok(DictFile::assemble(path, file, table, tx, alloc, header))
    }

    /// Read `len` bytes at `offset` and hand them to `f` (which decodes what it needs out of
    /// them). The bytes land in a reused buffer (`crate::bufpool`).
    pub(crate) fn read_with<R>(
        &self,
        offset: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        if let Some(r) = self.file.read_direct(offset, len) {
            return r.ctx(&self.path).map(|b| f(&b));
        }
        let mut buf = crate::bufpool::zeroed(len);
        let out = self
            .file
            .read_exact_at(&mut buf, offset)
            .ctx(&self.path)
            .map(|()| f(&buf));
        crate::bufpool::give(buf);
        out
    }

    /// Allocate an extent and write `bytes` there. The caller publishes it in a table or frees it.
    pub(crate) fn write_block(&self, bytes: &[u8]) -> Result<Extent> {
        let x = self.state.lock().alloc.alloc(bytes.len() as u64);
        if let Err(e) = self.file.write_all_at(bytes, x.offset) {
            self.state.lock().alloc.free(x);
            return Err(e).ctx(&self.path);
        }
        Ok(x)
    }

    pub(crate) fn sync(&self) -> Result<()> {
        self.file.sync().ctx(&self.path)
    }

    /// Write `header` into its slot (`ckpt_count % 2`) and sync.
    pub(crate) fn write_header(&self, header: &FileHeader) -> Result<()> {
        let slot = header.ckpt_count % 2;
        self.file
            .write_all_at(&header.encode(), slot * HEADER_SLOT_BYTES)
            .ctx(&self.path)?;
        self.sync()
    }

    /// Shrink the file to the end of the allocated area.
    pub(crate) fn trim(&self) -> Result<()> {
        // Held across the truncation so that no extent can be allocated past `end` (and
        // written) between reading it and cutting the file.
        let st = self.state.lock();
        let end = st.alloc.end();
        let len = self.file.len().ctx(&self.path)?;
        if len > end {
            self.file.set_len(end).ctx(&self.path)?;
        }
        drop(st);
        Ok(())
    }

    pub(crate) fn len_on_disk(&self) -> u64 {
        self.file.len().unwrap_or(0)
    }

    /// Bytes the filesystem has allocated to the file (holes excluded).
    pub(crate) fn allocated_on_disk(&self) -> u64 {
        self.file.allocated()
    }

    /// Return the space of free extents to the filesystem: punch holes in the 4 KiB-aligned
    /// inner part of every free range of at least `PUNCH_MIN` bytes freed since the last call.
    /// The ranges are held out of the allocator while the holes are punched, with no lock
    /// held, so nothing is written there meanwhile. Best effort: a filesystem that cannot
    /// punch holes just keeps the space.
    pub(crate) fn punch_free(&self) {
        let ranges = self.state.lock().alloc.take_punchable(PUNCH_MIN);
        if ranges.is_empty() {
            return;
        }
        for &(off, span) in &ranges {
            let a = off.next_multiple_of(PUNCH_ALIGN);
            let z = (off + span) / PUNCH_ALIGN * PUNCH_ALIGN;
            if let Err(e) = self.file.punch_hole(a, z - a) {
                tracing::debug!(file = %self.path.display(), error = %e, "punching a hole failed");
            }
        }
        let mut st = self.state.lock();
        for (off, span) in ranges {
            st.alloc.restore(off, span);
        }
    }
}

/// Free ranges smaller than this are left as they are.
pub(crate) const PUNCH_MIN: u64 = 64 << 10;

/// Read both header slots and return the valid one with the higher checkpoint count.
pub(crate) fn read_best_header(file: &dyn VFile, path: &Path) -> Result<FileHeader> {
    let mut best: Option<FileHeader> = None;
    let mut errors = Vec::new();
    for slot in 0..2u64 {
        let mut buf = vec![0u8; usize_of(HEADER_SLOT_BYTES)];
        match file.read_exact_at(&mut buf, slot * HEADER_SLOT_BYTES) {
            Ok(()) => match FileHeader::decode(&buf) {
                Ok(h) => {
                    if best.as_ref().is_none_or(|b| h.ckpt_count > b.ckpt_count) {
                        best = Some(h);
                    }
                }
                Err(e) => errors.push(format!("slot {slot}: {e}")),
            },
            Err(e) => errors.push(format!("slot {slot}: {e}")),
        }
    }
    best.ok_or_else(|| {
        corruption(
            path,
            "header",
            format!("no valid header slot ({})", errors.join("; ")),
        )
    })
}

pub(crate) fn read_table(file: &dyn VFile, path: &Path, h: &FileHeader) -> Result<Table> {
    let mut buf = vec![0u8; usize_of(h.btt_len)];
    file.read_exact_at(&mut buf, h.btt_offset).ctx(path)?;
    btt::decode_table(&buf)
        .map_err(|e| corruption(path, format!("block table at offset {}", h.btt_offset), e))
}
