//! The Raft log, in an engine environment of its own (`<dir>`), one dictionary `raftlog`:
//!
//! | key | value |
//! | --- | --- |
//! | `E` + index (8 bytes, big-endian) | the entry (`types::encode`) |
//! | `V` | the vote |
//! | `C` | the committed log id (openraft's `save_committed`) |
//! | `P` | the last purged log id |
//!
//! **Order and durability.** Every change is committed to the engine inline, in the order
//! openraft asks for it (all of them come from its one core task), so a reader sees an
//! appended entry as soon as `append` returns. The environment never syncs by itself: a
//! writer thread syncs its log, in request order, and only then reports an append flushed
//! or lets a vote, truncation or purge return. One sync of the engine's log covers
//! everything committed before it, so the order of durability is the order of the calls,
//! and the requests that queued up during one sync share the next (group commit).

use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader};
use silt_storage::{Cursor, Dict, Env, EnvOptions, SyncPolicy, WriteBatch};

use crate::types::{decode, encode, Entry, LogId, TypeConfig, Vote};

const VOTE: &[u8] = b"V";
const COMMITTED: &[u8] = b"C";
const PURGED: &[u8] = b"P";

fn entry_key(index: u64) -> [u8; 9] {
    let mut k = [b'E'; 9];
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

fn io_err(e: silt_storage::Error) -> io::Error {
    io::Error::other(e)
}

/// A request to the writer thread: sync the engine's log, then report.
enum Sync {
    Flushed(IOFlushed<TypeConfig>),
    Done(tokio::sync::oneshot::Sender<io::Result<()>>),
}

/// The Raft log of one member (cheap to clone: the reader openraft asks for is a clone).
#[derive(Clone)]
pub struct LogStore {
    env: Arc<Env>,
    dict: Dict,
    syncs: mpsc::Sender<Sync>,
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").finish_non_exhaustive()
    }
}

impl LogStore {
    /// Open (or create) the log kept in `dir`, with a node cache of `cache_bytes`.
    pub fn open(dir: &Path, cache_bytes: usize) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let opts = EnvOptions {
            cache_bytes,
            node_bytes: 1 << 20,
            sync: SyncPolicy::Never,
            checkpoint_period: Some(Duration::from_secs(60)),
            ..EnvOptions::default()
        };
        let env = Arc::new(Env::open(dir, opts).map_err(io_err)?);
        let dict = env.open_or_create("raftlog").map_err(io_err)?;
        let (syncs, rx) = mpsc::channel::<Sync>();
        let worker = env.clone();
        std::thread::Builder::new()
            .name("raft-log-sync".into())
            .spawn(move || {
                // Group commit: every request waiting when a sync starts was sent after its
                // change was committed, so that one sync covers them all.
                let mut waiting = Vec::new();
                while let Ok(req) = rx.recv() {
                    waiting.push(req);
                    waiting.extend(rx.try_iter());
                    let r = worker.sync_log().map_err(io_err);
                    for req in waiting.drain(..) {
                        let r = match &r {
                            Ok(()) => Ok(()),
                            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                        };
                        match req {
                            Sync::Flushed(cb) => cb.io_completed(r),
                            Sync::Done(tx) => {
                                let _ = tx.send(r);
                            }
                        }
                    }
                }
            })?;
        Ok(LogStore { env, dict, syncs })
    }

    /// Wait until everything committed so far is durable.
    async fn synced(&self) -> io::Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.syncs
            .send(Sync::Done(tx))
            .map_err(|_| io::Error::other("the Raft log's sync thread is gone"))?;
        rx.await
            .map_err(|_| io::Error::other("the Raft log's sync thread is gone"))?
    }

    fn get<T: for<'de> serde::Deserialize<'de>>(&self, key: &[u8]) -> io::Result<Option<T>> {
        match self.dict.get(key).map_err(io_err)? {
            Some(v) => decode(&v).map(Some),
            None => Ok(None),
        }
    }

    fn put<T: serde::Serialize>(&self, key: &[u8], v: &T) -> io::Result<()> {
        self.dict.put(key, &encode(v)?).map_err(io_err)
    }

    /// A cursor over the entries with indexes `lo..=hi` (`None`: to the last).
    fn entries(&self, lo: u64, hi: Option<u64>) -> Cursor {
        let lo = entry_key(lo);
        match hi.map(entry_key) {
            Some(hi) => self
                .dict
                .cursor(Bound::Included(&lo[..]), Bound::Included(&hi[..])),
            None => self
                .dict
                .cursor(Bound::Included(&lo[..]), Bound::Excluded(&b"F"[..])),
        }
    }

    /// Delete the entries with indexes `lo..=hi` (`None`: to the last) in one batch, with
    /// `also` put in it.
    fn delete_entries(
        &self,
        lo: u64,
        hi: Option<u64>,
        also: Option<(&[u8], Vec<u8>)>,
    ) -> io::Result<()> {
        let mut cur = self.entries(lo, hi);
        let mut batch = WriteBatch::new();
        while let Some((k, _)) = cur.next().map_err(io_err)? {
            batch.delete(&self.dict, &k).map_err(io_err)?;
        }
        if let Some((k, v)) = also {
            batch.put(&self.dict, k, &v).map_err(io_err)?;
        }
        batch.commit().map_err(io_err)
    }

    fn last_entry_id(&self) -> io::Result<Option<LogId>> {
        let mut cur = self
            .dict
            .cursor(Bound::Included(&b"E"[..]), Bound::Excluded(&b"F"[..]));
        cur.seek_last();
        match cur.prev().map_err(io_err)? {
            Some((_, v)) => Ok(Some(decode::<Entry>(&v)?.log_id)),
            None => Ok(None),
        }
    }

    /// The engine environment's figures (for status pages).
    pub fn log_bytes(&self) -> u64 {
        self.env.stats().log_bytes
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let lo = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(i) => Some(*i),
            Bound::Excluded(0) => return Ok(Vec::new()),
            Bound::Excluded(i) => Some(i - 1),
            Bound::Unbounded => None,
        };
        let mut cur = self.entries(lo, hi);
        let mut out = Vec::new();
        while let Some((_, v)) = cur.next().map_err(io_err)? {
            out.push(decode::<Entry>(&v)?);
        }
        Ok(out)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.get(VOTE)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let purged: Option<LogId> = self.get::<Option<LogId>>(PURGED)?.flatten();
        let last = self.last_entry_id()?.or(purged);
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.put(VOTE, vote)?;
        self.synced().await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        // Made durable by the next sync: a committed id that is lost only delays reads after
        // a restart until the leader tells it again.
        self.put(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.get::<Option<LogId>>(COMMITTED)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::new();
        for e in entries {
            batch
                .put(&self.dict, &entry_key(e.log_id.index), &encode(&e)?)
                .map_err(io_err)?;
        }
        batch.commit().map_err(io_err)?;
        self.syncs
            .send(Sync::Flushed(callback))
            .map_err(|_| io::Error::other("the Raft log's sync thread is gone"))
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |l| l.index + 1);
        self.delete_entries(from, None, None)?;
        self.synced().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let upto = log_id.index;
        self.delete_entries(0, Some(upto), Some((PURGED, encode(&Some(log_id))?)))?;
        self.synced().await
    }
}
