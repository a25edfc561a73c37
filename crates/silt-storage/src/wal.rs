//! Write-ahead log of logical operations, with group commit.
//!
//! File `wal-NNNNNNNNNN.log`: header `magic "SILTWAL1" | seq u64 | first_lsn u64 | crc32c u32`,
//! then records `len u32 | crc32c u32 | lsn u64 | body` where `len` is the body length and the
//! crc covers `lsn` and body. Body: `type u8 | dict u64 | fields`, fields being
//! length-prefixed keys, values and arguments and `u32` update-function ids.
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

use crate::error::{corruption, IoContext, Result};
use crate::format::bytes::{Dec, DecResult, Enc};
use crate::ids::{DictId, Lsn, Xid};
use crate::poison::{PoisonCause, PoisonState};
use crate::vfs::{OpenMode, RealFs, VFile, Vfs};

/// Magic of the log files written now. Version 2 added record types 6 (Replace) and 7
/// (Batch); version 3 added 8 (a transaction's provisional writes), 9 (Commit) and 10
/// (Abort). Files of versions 1 and 2 hold a subset and are still read.
const WAL_MAGIC: &[u8; 8] = b"SILTWAL3";
const WAL_MAGIC_OLD: [&[u8; 8]; 2] = [b"SILTWAL1", b"SILTWAL2"];
const WAL_HEADER: usize = 28;

/// Every record type the log holds. Fields: the dictionary, the key, the value, the update
/// function id and its argument.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum LogRecord {
    /// `put(key, val)`.
    Put {
        dict: DictId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    /// `put_if_absent(key, val)`.
    PutIfAbsent {
        dict: DictId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    /// `delete(key)`.
    Delete { dict: DictId, key: Vec<u8> },
    /// `update(key, func, arg)`.
    Update {
        dict: DictId,
        key: Vec<u8>,
        func: u32,
        arg: Vec<u8>,
    },
    /// `update_all(func, arg)`.
    UpdateAll {
        dict: DictId,
        func: u32,
        arg: Vec<u8>,
    },
    /// `replace(key, val)`: a put over a key the writer knows exists.
    Replace {
        dict: DictId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    /// Several writes, possibly to several dictionaries, logged as one record so that
    /// recovery replays all of them or none. Never nested.
    Batch(Vec<LogRecord>),
    /// Writes (one, or a batch) of transaction `xid`: provisional until its `Commit`.
    Txn { xid: Xid, rec: Box<LogRecord> },
    /// Transaction `xid` committed: its provisional writes become committed.
    Commit { xid: Xid },
    /// Transaction `xid` aborted: its provisional writes are dropped.
    Abort { xid: Xid },
}

impl LogRecord {
    /// The dictionary the record belongs to (for a batch, its first write's).
    pub fn dict(&self) -> DictId {
        match self {
            LogRecord::Put { dict, .. }
            | LogRecord::PutIfAbsent { dict, .. }
            | LogRecord::Delete { dict, .. }
            | LogRecord::Update { dict, .. }
            | LogRecord::UpdateAll { dict, .. }
            | LogRecord::Replace { dict, .. } => *dict,
            LogRecord::Batch(v) => v.first().map(|r| r.dict()).unwrap_or(DictId(0)),
            LogRecord::Txn { rec, .. } => rec.dict(),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } => DictId(0),
        }
    }

    /// Call `f` with each single write of the record, in order (by reference).
    pub(crate) fn for_each_write(&self, f: &mut dyn FnMut(&LogRecord)) {
        match self {
            LogRecord::Batch(v) => v.iter().for_each(&mut *f),
            LogRecord::Txn { rec, .. } => rec.for_each_write(f),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } => {}
            r => f(r),
        }
    }

    /// The single writes this record stands for (none for a commit or abort; a transaction's
    /// writes without their transaction).
    pub fn writes(self) -> Vec<LogRecord> {
        match self {
            LogRecord::Batch(v) => v,
            LogRecord::Txn { rec, .. } => rec.writes(),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } => Vec::new(),
            r => vec![r],
        }
    }

    fn encode_body(&self, e: &mut Enc) {
        match self {
            LogRecord::Put { dict, key, val } => {
                e.u8(1);
                e.u64(dict.0);
                e.lp(key);
                e.lp(val);
            }
            LogRecord::PutIfAbsent { dict, key, val } => {
                e.u8(2);
                e.u64(dict.0);
                e.lp(key);
                e.lp(val);
            }
            LogRecord::Delete { dict, key } => {
                e.u8(3);
                e.u64(dict.0);
                e.lp(key);
            }
            LogRecord::Update {
                dict,
                key,
                func,
                arg,
            } => {
                e.u8(4);
                e.u64(dict.0);
                e.lp(key);
                e.u32(*func);
                e.lp(arg);
            }
            LogRecord::UpdateAll { dict, func, arg } => {
                e.u8(5);
                e.u64(dict.0);
                e.u32(*func);
                e.lp(arg);
            }
            LogRecord::Replace { dict, key, val } => {
                e.u8(6);
                e.u64(dict.0);
                e.lp(key);
                e.lp(val);
            }
            LogRecord::Batch(v) => {
                e.u8(7);
                e.u32(v.len() as u32);
                for r in v {
                    let mut sub = Enc::default();
                    r.encode_body(&mut sub);
                    e.lp(&sub.buf);
                }
            }
            LogRecord::Txn { xid, rec } => {
                e.u8(8);
                e.u64(xid.0);
                let mut sub = Enc::default();
                rec.encode_body(&mut sub);
                e.lp(&sub.buf);
            }
            LogRecord::Commit { xid } => {
                e.u8(9);
                e.u64(xid.0);
            }
            LogRecord::Abort { xid } => {
                e.u8(10);
                e.u64(xid.0);
            }
        }
    }

    fn decode_body(b: &[u8]) -> DecResult<LogRecord> {
        let mut d = Dec::new(b);
        let t = d.u8()?;
        if t == 7 {
            let n = d.u32()? as usize;
            let mut v = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                let sub = d.lp()?;
                if matches!(sub.first(), Some(7..=10)) {
                    return Err("nested batch or transaction record in a batch".into());
                }
                v.push(LogRecord::decode_body(sub)?);
            }
            if d.remaining() != 0 {
                return Err("trailing bytes in log record".into());
            }
            return Ok(LogRecord::Batch(v));
        }
        if t == 8 {
            let xid = Xid(d.u64()?);
            let sub = d.lp()?;
            if matches!(sub.first(), Some(8..=10)) || xid.0 == 0 {
                return Err("malformed transaction record".into());
            }
            let rec = Box::new(LogRecord::decode_body(sub)?);
            if d.remaining() != 0 {
                return Err("trailing bytes in log record".into());
            }
            return Ok(LogRecord::Txn { xid, rec });
        }
        let dict = DictId(d.u64()?);
        if t == 9 || t == 10 {
            // The field in the dictionary's place is the xid.
            let xid = Xid(dict.0);
            if d.remaining() != 0 || xid.0 == 0 {
                return Err("malformed commit or abort record".into());
            }
            return Ok(if t == 9 {
                LogRecord::Commit { xid }
            } else {
                LogRecord::Abort { xid }
            });
        }
        let r = match t {
            1 => LogRecord::Put {
                dict,
                key: d.lp()?.to_vec(),
                val: d.lp()?.to_vec(),
            },
            2 => LogRecord::PutIfAbsent {
                dict,
                key: d.lp()?.to_vec(),
                val: d.lp()?.to_vec(),
            },
            3 => LogRecord::Delete {
                dict,
                key: d.lp()?.to_vec(),
            },
            4 => LogRecord::Update {
                dict,
                key: d.lp()?.to_vec(),
                func: d.u32()?,
                arg: d.lp()?.to_vec(),
            },
            5 => LogRecord::UpdateAll {
                dict,
                func: d.u32()?,
                arg: d.lp()?.to_vec(),
            },
            6 => LogRecord::Replace {
                dict,
                key: d.lp()?.to_vec(),
                val: d.lp()?.to_vec(),
            },
            t => return Err(format!("unknown log record type {t}")),
        };
        if d.remaining() != 0 {
            return Err("trailing bytes in log record".into());
        }
        Ok(r)
    }
}

pub(crate) fn file_name(seq: u64) -> String {
    format!("wal-{seq:010}.log")
}

fn parse_seq(name: &str) -> Option<u64> {
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
        let lsn = u64::from_le_bytes(covered[..8].try_into().expect("8 bytes"));
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

fn create_file(vfs: &dyn Vfs, dir: &Path, seq: u64, first_lsn: u64) -> Result<Box<dyn VFile>> {
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

impl Wal {
    /// Start a new log file after the existing ones. `last_lsn` is the highest LSN in use.
    pub fn open(
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
    pub fn append(&self, r: &LogRecord) -> Result<Lsn> {
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
        let len = (g.buf.len() - start - 16) as u32;
        let crc = crc32c::crc32c(&g.buf[start + 8..]);
        g.buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
        g.buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        g.buffered_last = lsn;
        Ok(Lsn(lsn))
    }

    /// Highest LSN handed out.
    pub fn last_lsn(&self) -> Lsn {
        Lsn(self.inner.lock().next_lsn - 1)
    }

    /// Return once the record at `lsn` is in the file (and on stable storage if `sync`).
    pub fn wait(&self, lsn: Lsn, sync: bool) -> Result<()> {
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
            let mut path = self.dir.join(file_name(seq));
            let mut rest = &data[..];
            let mut res = Ok(());
            let mut new_file = None;
            if let Some((c, first)) = cut {
                // Everything up to the checkpoint's LSN goes to the old file, which is then
                // complete; the rest starts the new one.
                res = file
                    .write_all_at(&data[..c], offset)
                    .and_then(|()| file.sync())
                    .ctx(&path);
                if res.is_ok() {
                    match create_file(&*self.vfs, &self.dir, seq + 1, first) {
                        Ok(f) => {
                            seq += 1;
                            file = Arc::from(f);
                            offset = WAL_HEADER as u64;
                            path = self.dir.join(file_name(seq));
                            new_file = Some((file.clone(), seq, first));
                            rest = &data[c..];
                        }
                        Err(e) => res = Err(e),
                    }
                }
            }
            if res.is_ok() {
                res = file.write_all_at(rest, offset).ctx(&path);
            }
            if res.is_ok() && sync {
                res = file.sync().ctx(&path);
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
    pub fn rotate_at_last(&self) {
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
    pub fn sync(&self) -> Result<()> {
        let last = self.last_lsn();
        self.wait(last, true)
    }

    /// Delete log files whose every record is at or below `ckpt_lsn`.
    pub fn trim(&self, ckpt_lsn: Lsn) -> Result<()> {
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
    pub fn file_count(&self) -> usize {
        self.inner.lock().files.len()
    }

    /// Bytes written to the log and fsyncs of it since open.
    pub fn io_counts(&self) -> (u64, u64) {
        let g = self.inner.lock();
        (g.bytes_written, g.syncs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
