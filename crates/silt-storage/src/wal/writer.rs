//! Appending to the log, with group commit.
//!
//! A record is copied into the shared buffer under the log mutex (while the caller holds its
//! tree lock, so log order equals message order per dictionary); the first waiter to find no
//! writer in progress becomes the leader and writes everything buffered with one `write(2)`
//! (and one fsync when asked), so concurrent commits share the cost. Waiters queue with their
//! LSN, and a leader that finishes wakes exactly the waiters its write satisfied, plus the
//! first one left, which leads the next write: a waiter sleeps once, and the waiters of the
//! next write are not woken by this one (a condition variable woke all of them, and at 64
//! clients on two cores most went back to sleep).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::files::{create_file, file_name, WAL_HEADER};
use super::record::LogRecord;
use crate::error::{Error, IoContext, PoisonCause, Result};
use crate::format::bytes::Enc;
use crate::ids::Lsn;
use crate::poison::PoisonState;
use crate::vfs::{VFile, Vfs};

struct Inner {
    buf: Vec<u8>,
    next_lsn: u64,
    buffered_last: u64,
    written: u64,
    synced: u64,
    writing: bool,
    file: Arc<dyn VFile>,
    seq: u64,
    file_bytes: u64,
    /// (seq, first lsn) of every live file, oldest first.
    files: Vec<(u64, u64)>,
    /// Bytes of records written to log files since open, and the fsyncs that made them
    /// durable (figures for `serverStatus` and the metrics endpoint).
    bytes_written: u64,
    syncs: u64,
    /// A requested rotation: the offset in `buf` where the new file must begin (the end of
    /// the record a checkpoint covers). The leader that writes `buf` splits it there.
    cut: Option<usize>,
    /// The LSN of the last record before `cut`.
    cut_last: u64,
    /// Committers waiting for a write in progress (in no order: `wake` picks by LSN).
    waiters: Vec<Waiter>,
}

/// A committer asleep in [`Wal::wait`] until a leader's write covers its record.
struct Waiter {
    lsn: u64,
    sync: bool,
    thread: std::thread::Thread,
}

impl Inner {
    fn cut_lsn(&self) -> u64 {
        self.cut_last + 1
    }

    /// Whether the record at `lsn` is written (synced when `sync`) and no rotation is pending.
    fn covers(&self, lsn: u64, sync: bool) -> bool {
        self.written >= lsn && (!sync || self.synced >= lsn) && self.cut.is_none()
    }

    /// Take this thread off the queue, if it is on it.
    fn forget_me(&mut self) {
        if !self.waiters.is_empty() {
            let me = std::thread::current().id();
            self.waiters.retain(|w| w.thread.id() != me);
        }
    }

    /// After a write: wake the waiters it covered (every waiter once the log is poisoned, to
    /// see the error), and the first one left, to lead the next write.
    fn wake(&mut self, poisoned: bool) {
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &self.waiters[i];
            if poisoned || self.covers(w.lsn, w.sync) {
                self.waiters.swap_remove(i).thread.unpark();
            } else {
                i += 1;
            }
        }
        if !self.waiters.is_empty() {
            // The earliest record left: its waiter has waited longest.
            let first = (0..self.waiters.len())
                .min_by_key(|&i| self.waiters[i].lsn)
                .expect("a waiter");
            self.waiters.swap_remove(first).thread.unpark();
        }
    }
}

/// The log writer.
pub(crate) struct Wal {
    dir: PathBuf,
    rotate_bytes: u64,
    vfs: Arc<dyn Vfs>,
    inner: Mutex<Inner>,
    /// The environment's poison state: a failed log write sets it, and once set no record is
    /// appended and no waiter is told its record is written.
    poison: Arc<PoisonState>,
}

impl Wal {
    /// Start a new log file after the existing ones. `last_lsn` is the highest LSN in use.
    pub(crate) fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        rotate_bytes: u64,
        last_lsn: Lsn,
        existing: &[(u64, u64)],
        poison: Arc<PoisonState>,
    ) -> Result<Wal> {
        let seq = existing.last().map(|f| f.0 + 1).unwrap_or(1);
        let next = last_lsn.0 + 1;
        let file = create_file(&*vfs, dir, seq, next)?;
        let mut files = existing.to_vec();
        files.push((seq, next));
        Ok(Wal {
            dir: dir.to_path_buf(),
            rotate_bytes,
            vfs,
            inner: Mutex::new(Inner {
                buf: Vec::with_capacity(1 << 20),
                next_lsn: next,
                buffered_last: last_lsn.0,
                written: last_lsn.0,
                synced: last_lsn.0,
                writing: false,
                file: Arc::from(file),
                seq,
                file_bytes: WAL_HEADER as u64,
                files,
                cut: None,
                cut_last: 0,
                bytes_written: 0,
                syncs: 0,
                waiters: Vec::new(),
            }),
            poison,
        })
    }

    /// Buffer a record and return its LSN. Does no I/O. Refused once the environment is
    /// poisoned (checked under the log's mutex, which a failing log write holds while it
    /// poisons): a writer whose append fails must not apply its write.
    pub(crate) fn append(&self, r: &LogRecord) -> Result<Lsn> {
        let mut g = self.inner.lock();
        self.poison.check()?;
        let lsn = g.next_lsn;
        g.next_lsn += 1;
        let start = g.buf.len();
        g.buf.extend_from_slice(&[0u8; 8]);
        g.buf.extend_from_slice(&lsn.to_le_bytes());
        let mut e = Enc {
            buf: std::mem::take(&mut g.buf),
        };
        r.encode_body(&mut e);
        g.buf = e.buf;
        // A record's length field is a u32. Only a batch can outgrow it (a key or value is far
        // smaller): refuse it whole, undoing the buffering, rather than log a truncated length.
        let Ok(len) = u32::try_from(g.buf.len() - start - 16) else {
            let len = g.buf.len() - start - 16;
            g.buf.truncate(start);
            g.next_lsn -= 1;
            return Err(Error::TooLarge {
                what: "log record",
                len,
                limit: u32::MAX as usize,
            });
        };
        let crc = crc32c::crc32c(&g.buf[start + 8..]);
        g.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
        g.buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        g.buffered_last = lsn;
        Ok(Lsn(lsn))
    }

    /// Highest LSN handed out.
    pub(crate) fn last_lsn(&self) -> Lsn {
        Lsn(self.inner.lock().next_lsn - 1)
    }

    /// Return once the record at `lsn` is in the file (and on stable storage if `sync`).
    pub(crate) fn wait(&self, lsn: Lsn, sync: bool) -> Result<()> {
        let mut g = self.inner.lock();
        loop {
            if let Err(e) = self.poison.check() {
                g.forget_me();
                return Err(e);
            }
            if g.covers(lsn.0, sync) {
                // Normally the leader that woke this thread took it off the queue; after a
                // spurious wake-up it is still there, and a stale entry could be picked to
                // lead the next write.
                g.forget_me();
                return Ok(());
            }
            if g.writing {
                // Queue (once: a wake-up may be spurious) and sleep until the leader wakes
                // this thread; then look again.
                let me = std::thread::current();
                if !g.waiters.iter().any(|w| w.thread.id() == me.id()) {
                    g.waiters.push(Waiter {
                        lsn: lsn.0,
                        sync,
                        thread: me,
                    });
                }
                drop(g);
                std::thread::park();
                g = self.inner.lock();
                continue;
            }
            g.writing = true;
            let data = std::mem::take(&mut g.buf);
            let cut = g.cut.take().map(|c| (c, g.cut_lsn()));
            let upto = g.buffered_last;
            let mut file = g.file.clone();
            let mut seq = g.seq;
            let mut offset = g.file_bytes;
            drop(g);
            // A file's path is only needed to name it in an error.
            let io = |seq: u64| {
                let dir = &self.dir;
                move |source| Error::Io {
                    path: dir.join(file_name(seq)),
                    source,
                }
            };
            let mut rest = &data[..];
            let mut res = Ok(());
            let mut new_file = None;
            if let Some((c, first)) = cut {
                // Everything up to the checkpoint's LSN goes to the old file, which is then
                // complete; the rest starts the new one.
                res = file
                    .write_all_at(&data[..c], offset)
                    .and_then(|()| file.sync())
                    .map_err(io(seq));
                if res.is_ok() {
                    match create_file(&*self.vfs, &self.dir, seq + 1, first) {
                        Ok(f) => {
                            seq += 1;
                            file = Arc::from(f);
                            offset = WAL_HEADER as u64;
                            new_file = Some((file.clone(), seq, first));
                            rest = &data[c..];
                        }
                        Err(e) => res = Err(e),
                    }
                }
            }
            if res.is_ok() {
                res = file.write_all_at(rest, offset).map_err(io(seq));
            }
            if res.is_ok() && sync {
                res = file.sync().map_err(io(seq));
            }
            g = self.inner.lock();
            g.writing = false;
            if let Some((f, s, first)) = new_file {
                g.file = f;
                g.seq = s;
                g.file_bytes = WAL_HEADER as u64;
                g.files.push((s, first));
                if g.synced < first - 1 {
                    g.synced = first - 1;
                }
            }
            match res {
                Ok(()) => {
                    g.written = upto;
                    g.bytes_written += data.len() as u64;
                    if sync {
                        g.synced = upto;
                        g.syncs += 1;
                    }
                    g.file_bytes += rest.len() as u64;
                    if g.file_bytes >= self.rotate_bytes {
                        if let Err(e) = self.rotate(&mut g) {
                            self.poison.poison(PoisonCause::LogWrite(e.to_string()));
                        }
                    }
                }
                Err(e) => self.poison.poison(PoisonCause::LogWrite(e.to_string())),
            }
            let mut data = data;
            data.clear();
            if g.buf.is_empty() && data.capacity() <= 4 << 20 {
                g.buf = data;
            }
            let poisoned = self.poison.check().is_err();
            g.wake(poisoned);
        }
    }

    fn rotate(&self, g: &mut Inner) -> Result<()> {
        let old = self.dir.join(file_name(g.seq));
        g.file.sync().ctx(&old)?;
        g.synced = g.written;
        let seq = g.seq + 1;
        let first = g.written + 1;
        g.file = Arc::from(create_file(&*self.vfs, &self.dir, seq, first)?);
        g.seq = seq;
        g.file_bytes = WAL_HEADER as u64;
        g.files.push((seq, first));
        Ok(())
    }

    /// Arrange for the log to start a new file after the last LSN handed out so far, so that
    /// once a checkpoint covering that LSN completes, every older file can be deleted. The
    /// split happens when the buffer is next written (`sync` or a commit). The caller must
    /// exclude concurrent `append`s (the checkpoint holds its lock exclusively). Nothing is
    /// done if the current file holds no record yet.
    pub(crate) fn rotate_at_last(&self) {
        let mut g = self.inner.lock();
        let last = g.next_lsn - 1;
        let current_first = g.files.last().map(|f| f.1).unwrap_or(0);
        if current_first > last {
            return;
        }
        if g.cut.is_none() {
            g.cut = Some(g.buf.len());
            g.cut_last = last;
        }
    }

    /// Write everything buffered and fsync it.
    pub(crate) fn sync(&self) -> Result<()> {
        let last = self.last_lsn();
        self.wait(last, true)
    }

    /// Delete log files whose every record is at or below `ckpt_lsn`.
    pub(crate) fn trim(&self, ckpt_lsn: Lsn) -> Result<()> {
        let doomed: Vec<u64> = {
            let mut g = self.inner.lock();
            let mut doomed = Vec::new();
            while g.files.len() > 1 && g.files[1].1 <= ckpt_lsn.0 + 1 {
                doomed.push(g.files.remove(0).0);
            }
            doomed
        };
        for seq in doomed {
            let p = self.dir.join(file_name(seq));
            match self.vfs.remove(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx(&p),
            }
        }
        Ok(())
    }

    /// Number of live log files.
    pub(crate) fn file_count(&self) -> usize {
        self.inner.lock().files.len()
    }

    /// Bytes written to the log and fsyncs of it since open.
    pub(crate) fn io_counts(&self) -> (u64, u64) {
        let g = self.inner.lock();
        (g.bytes_written, g.syncs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{list_files, read_file};
    use super::*;
    use crate::ids::DictId;
    use crate::vfs::RealFs;

    /// Many committers at once, with rotations requested in between and every fifth one asking
    /// for a sync: each `wait` returns (none is left asleep in the queue), every record is in
    /// the files once, in LSN order, and the queue is empty at the end.
    #[test]
    fn group_commit_wakes_every_waiter() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = Arc::new(
            Wal::open(
                Arc::new(RealFs),
                dir.path(),
                64 << 10,
                Lsn(0),
                &[],
                Arc::new(PoisonState::default()),
            )
            .expect("open"),
        );
        let threads = 16;
        let per_thread = 300u64;
        let (done, finished) = std::sync::mpsc::channel();
        for t in 0..threads {
            let (wal, done) = (wal.clone(), done.clone());
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let rec = LogRecord::Put {
                        dict: DictId(1),
                        key: format!("{t}-{i}").into_bytes(),
                        val: vec![7; 40],
                    };
                    let lsn = wal.append(&rec).expect("append");
                    if i % 50 == 0 {
                        wal.rotate_at_last();
                    }
                    wal.wait(lsn, i % 5 == 0).expect("wait");
                }
                let _ = done.send(());
            });
        }
        for _ in 0..threads {
            // A committer left asleep would hang the test: fail it instead.
            finished
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("every committer returns");
        }
        wal.sync().expect("sync");
        assert!(wal.inner.lock().waiters.is_empty());
        let mut lsns = Vec::new();
        for (_, path) in list_files(&RealFs, dir.path()).expect("list") {
            let f = read_file(&path).expect("read");
            assert!(f.torn.is_none(), "{:?}", f.torn);
            lsns.extend(f.records.iter().map(|(l, _)| l.0));
        }
        let want: Vec<u64> = (1..=threads * per_thread).collect();
        assert_eq!(lsns, want);
    }
}
