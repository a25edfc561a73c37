//! Test backends for the storage interface.
//!
//! [`SimFs`] is an in-memory file system that remembers, for every file, what is durable
//! (as of its last `sync`) apart from what was written since, and, for the directory, which
//! names are durable (as of the last `sync_dir`). [`SimFs::power_loss`] turns it into what a
//! disk could hold after the power failed: durable names and bytes stay; each write since the
//! file's last sync is kept, dropped or torn (a prefix kept) at random; a length change since
//! then is kept or dropped. [`FaultFs`] wraps a backend and fails every call after the first
//! N with an I/O error, to show that an error surfaces cleanly and corrupts nothing.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{OpenMode, VFile, Vfs};
use crate::width::usize_of;

/// One change to a file since it was last synced.
#[derive(Clone, Debug)]
enum Op {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct SimFile {
    /// What reads see.
    data: Vec<u8>,
    /// What survives a power loss for sure.
    durable: Vec<u8>,
    /// Changes since the last sync, in order.
    pending: Vec<Op>,
}

fn apply(data: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write(off, bytes) => {
            let end = usize_of(*off) + bytes.len();
            if data.len() < end {
                data.resize(end, 0);
            }
            data[usize_of(*off)..end].copy_from_slice(bytes);
        }
        Op::SetLen(n) => data.resize(usize_of(*n), 0),
    }
}

#[derive(Debug, Default)]
struct SimState {
    /// Current names.
    names: BTreeMap<PathBuf, Arc<Mutex<SimFile>>>,
    /// Names as of the last `sync_dir`.
    durable_names: BTreeMap<PathBuf, Arc<Mutex<SimFile>>>,
    locked: bool,
}

/// An in-memory file system that can lose power. Cheap to clone (clones share state).
#[derive(Clone, Debug, Default)]
pub struct SimFs {
    state: Arc<Mutex<SimState>>,
}

#[derive(Debug)]
struct SimHandle(Arc<Mutex<SimFile>>);

impl VFile for SimHandle {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let f = self.0.lock();
        let end = usize_of(offset) + buf.len();
        if end > f.data.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ));
        }
        buf.copy_from_slice(&f.data[usize_of(offset)..end]);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut f = self.0.lock();
        let op = Op::Write(offset, buf.to_vec());
        apply(&mut f.data, &op);
        f.pending.push(op);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut f = self.0.lock();
        f.durable = f.data.clone();
        f.pending.clear();
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.lock().data.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut f = self.0.lock();
        let op = Op::SetLen(len);
        apply(&mut f.data, &op);
        f.pending.push(op);
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = (offset + len).min(self.len()?);
        if end > offset {
            self.write_all_at(&vec![0u8; usize_of(end - offset)], offset)?;
        }
        Ok(())
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    /// Simulate a power failure: afterwards the file system holds only what a disk could
    /// hold (see the module docs). `seed` drives which unsynced writes survive.
    pub fn power_loss(&self, seed: u64) {
        let mut rng = seed | 1;
        let mut next = move || {
            // xorshift64
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut st = self.state.lock();
        let mut names = BTreeMap::new();
        for (path, file) in &st.durable_names {
            let f = file.lock();
            let mut data = f.durable.clone();
            for op in &f.pending {
                match (next() % 3, op) {
                    (0, _) => {}
                    (1, op) => apply(&mut data, op),
                    (_, Op::Write(off, bytes)) => {
                        let keep = usize_of(next() % (bytes.len() as u64 + 1));
                        apply(&mut data, &Op::Write(*off, bytes[..keep].to_vec()));
                    }
                    (_, op) => apply(&mut data, op),
                }
            }
            let survivor = SimFile {
                durable: data.clone(),
                data,
                pending: Vec::new(),
            };
            names.insert(path.clone(), Arc::new(Mutex::new(survivor)));
        }
        st.durable_names = names.clone();
        st.names = names;
        st.locked = false;
    }

    /// Forget the directory lock (a process that died without power loss: every write the
    /// OS accepted stays).
    pub fn process_crash(&self) {
        self.state.lock().locked = false;
    }

    /// Paths of the current files.
    pub fn files(&self) -> Vec<PathBuf> {
        self.state.lock().names.keys().cloned().collect()
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, mode: OpenMode, _direct: bool) -> io::Result<Box<dyn VFile>> {
        let mut st = self.state.lock();
        let f = match (st.names.get(path), mode) {
            (Some(_), OpenMode::CreateNew) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: exists", path.display()),
                ))
            }
            (Some(f), _) => f.clone(),
            (None, OpenMode::Existing) => return Err(not_found(path)),
            (None, _) => {
                let f = Arc::new(Mutex::new(SimFile::default()));
                st.names.insert(path.to_path_buf(), f.clone());
                f
            }
        };
        Ok(Box::new(SimHandle(f)))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match self.state.lock().names.remove(path) {
            Some(_) => Ok(()),
            None => Err(not_found(path)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let f = st.names.remove(from).ok_or_else(|| not_found(from))?;
        st.names.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self
            .state
            .lock()
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let SimState {
            names,
            durable_names,
            ..
        } = &mut *st;
        durable_names.retain(|p, _| p.parent() != Some(dir));
        for (p, f) in names.iter() {
            if p.parent() == Some(dir) {
                durable_names.insert(p.clone(), f.clone());
            }
        }
        Ok(())
    }

    fn lock(&self, _path: &Path) -> io::Result<Option<Box<dyn Send + Sync + Debug>>> {
        let mut st = self.state.lock();
        if st.locked {
            return Ok(None);
        }
        st.locked = true;
        Ok(Some(Box::new(SimLock(self.state.clone()))))
    }
}

#[derive(Debug)]
struct SimLock(Arc<Mutex<SimState>>);

impl Drop for SimLock {
    fn drop(&mut self) {
        self.0.lock().locked = false;
    }
}

/// A backend that fails every call after the first `budget` (reads included) with an I/O
/// error, until [`FaultFs::heal`].
#[derive(Clone, Debug)]
pub struct FaultFs {
    inner: Arc<dyn Vfs>,
    calls: Arc<AtomicU64>,
    budget: Arc<AtomicU64>,
}

impl FaultFs {
    /// Wrap `inner`; the first `budget` calls succeed.
    pub fn new(inner: Arc<dyn Vfs>, budget: u64) -> FaultFs {
        FaultFs {
            inner,
            calls: Arc::new(AtomicU64::new(0)),
            budget: Arc::new(AtomicU64::new(budget)),
        }
    }

    /// Fail every call after the next `n`.
    pub fn fail_after(&self, n: u64) {
        self.budget.store(self.calls() + n, Ordering::Relaxed);
    }

    /// Let every call through from now on.
    pub fn heal(&self) {
        self.budget.store(u64::MAX, Ordering::Relaxed);
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn charge(&self) -> io::Result<()> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        if n >= self.budget.load(Ordering::Relaxed) {
            return Err(io::Error::other("injected I/O error"));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct FaultFile {
    inner: Box<dyn VFile>,
    fs: FaultFs,
}

impl VFile for FaultFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.fs.charge()?;
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.fs.charge()?;
        self.inner.write_all_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.fs.charge()?;
        self.inner.sync()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.fs.charge()?;
        self.inner.set_len(len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        self.fs.charge()?;
        self.inner.punch_hole(offset, len)
    }
}

impl Vfs for FaultFs {
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Box<dyn VFile>> {
        self.charge()?;
        Ok(Box::new(FaultFile {
            inner: self.inner.open(path, mode, direct)?,
            fs: self.clone(),
        }))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.charge()?;
        self.inner.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.charge()?;
        self.inner.rename(from, to)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.charge()?;
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.charge()?;
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Option<Box<dyn Send + Sync + Debug>>> {
        self.inner.lock(path)
    }
}
