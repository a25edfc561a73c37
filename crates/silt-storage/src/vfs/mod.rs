//! The storage interface: every byte the engine reads or writes, and every file it creates,
//! renames, removes or syncs, goes through a [`Vfs`]. [`RealFs`] is the real-file backend;
//! [`sim`] holds the test backends: an in-memory file system that keeps written-but-unsynced
//! bytes apart from durable ones and can lose power ([`sim::SimFs`]), and a wrapper that
//! fails every call after the first N ([`sim::FaultFs`]).
//!
//! The rules the engine relies on, which every backend keeps:
//! - `write_at` makes bytes visible to later reads at once; they are durable only after the
//!   file's `sync`.
//! - A file's creation, a rename and a removal are durable only after `sync_dir` of the
//!   directory.
//! - A power loss keeps what was durable; of the rest, any write may be lost or torn.

pub mod sim;

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::width::usize_of;

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create it; it must not exist.
    CreateNew,
    /// Open it; it must exist.
    Existing,
    /// Open it, creating it if missing (the directory's lock file).
    CreateOrOpen,
}

/// One open file.
pub trait VFile: Send + Sync + Debug {
    /// Fill `buf` from `offset`; reading past the end is an `UnexpectedEof` error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Make every write so far, and the length, durable.
    fn sync(&self) -> io::Result<()>;
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncate or extend the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Give the space of a range back to the file system (best effort; the bytes read as
    /// zeros afterwards).
    fn punch_hole(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Bytes the file system allocated to the file (holes excluded).
    fn allocated(&self) -> u64 {
        self.len().unwrap_or(0)
    }
    /// Read `len` bytes at `offset` bypassing the OS page cache, where the backend can
    /// (`None`: use [`VFile::read_exact_at`]).
    fn read_direct(&self, _offset: u64, _len: usize) -> Option<io::Result<Vec<u8>>> {
        None
    }
}

/// A file system the engine runs on.
pub trait Vfs: Send + Sync + Debug {
    /// Open `path` (see [`OpenMode`]); `direct` asks for direct reads where supported.
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Box<dyn VFile>>;
    /// The whole contents of `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let f = self.open(path, OpenMode::Existing, false)?;
        let mut buf = vec![0u8; usize_of(f.len()?)];
        f.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
    /// Remove `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Rename `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// The names of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Create `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Make creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Take the exclusive lock of a directory through its lock file: `Ok(None)` if another
    /// process holds it. The returned guard holds the lock until dropped.
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn Send + Sync + Debug>>>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// A real file, with a second `O_DIRECT` descriptor when direct reads were asked for.
#[derive(Debug)]
struct RealFile {
    file: File,
    direct: Option<File>,
    /// Cleared for good if the filesystem accepted `O_DIRECT` but refuses our reads.
    direct_ok: AtomicBool,
}

impl VFile for RealFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    #[cfg(target_os = "linux")]
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::{fallocate, FallocateFlags};
        fallocate(
            &self.file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            offset,
            len,
        )
        .map_err(io::Error::from)
    }

    fn allocated(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        // `st_blocks` is in 512-byte units.
        self.file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
    }

    fn read_direct(&self, offset: u64, len: usize) -> Option<io::Result<Vec<u8>>> {
        let d = self.direct.as_ref()?;
        if !self.direct_ok.load(Ordering::Relaxed) {
            return None;
        }
        match read_direct(d, offset, len) {
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                // An alignment the device wants and 4 KiB does not meet: read buffered from
                // now on.
                tracing::warn!(error = %e, "direct reads refused; using buffered reads");
                self.direct_ok.store(false, Ordering::Relaxed);
                None
            }
            r => Some(r),
        }
    }
}

impl Vfs for RealFs {
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Box<dyn VFile>> {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        match mode {
            OpenMode::CreateNew => o.create_new(true),
            OpenMode::Existing => &mut o,
            OpenMode::CreateOrOpen => o.create(true).truncate(false),
        };
        let file = o.open(path)?;
        Ok(Box::new(RealFile {
            file,
            direct: open_direct(path, direct),
            direct_ok: AtomicBool::new(true),
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(dir)? {
            v.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(v)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir).and_then(|f| f.sync_all())
    }

    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn Send + Sync + Debug>>> {
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        match f.try_lock() {
            Ok(()) => Ok(Some(Box::new(f))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// `O_DIRECT` needs buffers, offsets and lengths aligned to the device's logical block size;
/// 4 KiB covers every common device.
const DIRECT_ALIGN: usize = 4096;

fn open_direct(path: &Path, on: bool) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    if !on {
        return None;
    }
    match OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path)
    {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "direct I/O refused; using buffered reads");
            None
        }
    }
}

/// Read `len` bytes at `offset` through an `O_DIRECT` descriptor: read the aligned span that
/// covers them into an aligned buffer and copy the wanted bytes out.
fn read_direct(f: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let start = offset & !(DIRECT_ALIGN as u64 - 1);
    let lead = usize_of(offset - start);
    let span = (lead + len).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
    let mut raw = vec![0u8; span + DIRECT_ALIGN];
    let shift = raw.as_ptr().align_offset(DIRECT_ALIGN);
    let buf = &mut raw[shift..shift + span];
    let mut done = 0;
    while done < lead + len {
        match f.read_at(&mut buf[done..], start + done as u64) {
            // A short read at the end of the file: the rest of the span lies beyond it.
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if done < lead + len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "block extends beyond the end of the file",
        ));
    }
    Ok(buf[lead..lead + len].to_vec())
}

/// `path`'s parent directory (`.` for a bare name).
pub(crate) fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
