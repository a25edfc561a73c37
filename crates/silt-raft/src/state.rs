//! The state machine: openraft's `RaftStateMachine` over the [`StateMachine`] the server
//! implements.
//!
//! The server's state machine sees committed entries in log order, each once, with an opaque
//! *position* (the entry's log id and the group's membership as of it) that it must store
//! atomically with the entry's effects; after a crash it reports the last position it stored
//! and openraft applies again from the entry after it. So an entry's effects are applied
//! exactly once, and no member ever shows an entry that is not committed.

use std::io;
use std::path::Path;
use std::sync::Arc;

use futures_util::{FutureExt, TryStreamExt};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use parking_lot::Mutex;

use crate::snapshots::Snapshots;
use crate::types::{
    decode, encode, LogId, Reply, Snapshot, SnapshotData, SnapshotMeta, StoredMembership,
    TypeConfig,
};

/// One committed entry, as the state machine sees it.
#[derive(Debug, Clone, Copy)]
pub struct Applied<'a> {
    /// Its place in the log (1 for the first entry).
    pub index: u64,
    /// The term of the leader that wrote it.
    pub term: u64,
    /// What it carries: `None` for the group's own entries (the first entry of a new leader,
    /// a change of membership), which change no data but still advance the position.
    pub command: Option<&'a [u8]>,
    /// Whether it is the first entry of a new leader's term (openraft's blank entry).
    pub new_term: bool,
}

/// What the server replicates. Every method is called from one thread at a time, in log
/// order; they may block.
pub trait StateMachine: Send + Sync + 'static {
    /// The position stored by the newest `apply` or `install`, or `None` before any.
    fn position(&self) -> io::Result<Option<Vec<u8>>>;

    /// Apply one committed entry, storing `position` with its effects (atomically: after a
    /// crash either both are there or neither). Returns what the proposer's
    /// [`crate::Member::propose`] answers.
    fn apply(&self, entry: Applied<'_>, position: &[u8]) -> io::Result<Vec<u8>>;

    /// A view of the data as of the last applied entry, with the position stored with it,
    /// made durable (the log before that position may be purged once the view is written).
    /// Called between applies; it should be cheap, since applying waits for it: the data is
    /// read when the view is written, on another thread, while applying goes on.
    fn view(&self) -> io::Result<Box<dyn SnapshotView>>;

    /// Replace all data with the snapshot in file `data` (a view another member wrote),
    /// storing `position` with it. The file stays until a newer snapshot replaces it, so an
    /// install a crash interrupted can be finished from it.
    fn install(&self, position: &[u8], data: &Path) -> io::Result<()>;
}

/// The data of a state machine as of one position ([`StateMachine::view`]).
pub trait SnapshotView: Send + Sync + 'static {
    /// The position stored with the viewed data (empty before any entry was applied).
    fn position(&self) -> &[u8];

    /// Write the data (blocking; it may take long).
    fn write_to(self: Box<Self>, out: &mut dyn io::Write) -> io::Result<()>;
}

/// A position's contents.
type Position = (Option<LogId>, StoredMembership);

/// A stored position (empty: nothing applied yet).
fn decode_position(bytes: &[u8]) -> io::Result<Position> {
    if bytes.is_empty() {
        return Ok((None, StoredMembership::default()));
    }
    decode(bytes)
}

fn position_of(meta: &SnapshotMeta) -> Position {
    (meta.last_log_id, meta.last_membership.clone())
}

/// The adapter openraft drives.
#[derive(Clone)]
pub(crate) struct Sm {
    inner: Arc<dyn StateMachine>,
    /// The newest snapshot built or installed, on disk.
    pub(crate) snapshots: Arc<Snapshots>,
    /// The membership as of the last entry applied or snapshot installed, read from the
    /// stored position once, then kept as entries change it (every position stores it).
    membership: Arc<Mutex<Option<StoredMembership>>>,
}

impl Sm {
    pub(crate) fn new(inner: Arc<dyn StateMachine>, snapshots: Arc<Snapshots>) -> Sm {
        Sm {
            inner,
            snapshots,
            membership: Arc::new(Mutex::new(None)),
        }
    }

    fn applied_position(&self) -> io::Result<Position> {
        let position = decode_position(&self.inner.position()?.unwrap_or_default())?;
        *self.membership.lock() = Some(position.1.clone());
        Ok(position)
    }

    /// The membership as of the last entry applied.
    fn membership(&self) -> io::Result<StoredMembership> {
        let known = self.membership.lock().clone();
        match known {
            Some(m) => Ok(m),
            None => Ok(self.applied_position()?.1),
        }
    }
}

impl Sm {
    /// Apply one entry (blocking).
    fn apply_one(&self, entry: &crate::types::Entry) -> io::Result<Vec<u8>> {
        let log_id = entry.log_id;
        let mut membership = self.membership()?;
        let command = match &entry.payload {
            EntryPayload::Normal(c) => Some(c.0.as_slice()),
            EntryPayload::Blank => None,
            EntryPayload::Membership(m) => {
                membership = StoredMembership::new(Some(log_id), m.clone());
                None
            }
        };
        let position = encode(&(Some(log_id), membership.clone()))?;
        let applied = Applied {
            index: log_id.index,
            term: log_id.leader_id.term,
            command,
            new_term: matches!(entry.payload, EntryPayload::Blank),
        };
        let reply = self.inner.apply(applied, &position)?;
        *self.membership.lock() = Some(membership);
        Ok(reply)
    }
}

/// The most entries applied in one stretch of blocking work.
const MAX_APPLY_BATCH: usize = 256;

/// Run blocking work of the state machine on a runtime worker without stalling the others.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Builds one snapshot from a view taken between applies.
pub(crate) struct Builder {
    view: Option<io::Result<Box<dyn SnapshotView>>>,
    snapshots: Arc<Snapshots>,
}

impl RaftSnapshotBuilder<TypeConfig> for Builder {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let view = self
            .view
            .take()
            .unwrap_or_else(|| Err(io::Error::other("a snapshot builder used twice")))?;
        let (last_log_id, last_membership) = decode_position(view.position())?;
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
        };
        let snapshots = self.snapshots.clone();
        tokio::task::spawn_blocking(move || snapshots.build(meta, view))
            .await
            .map_err(io::Error::other)?
    }
}

impl RaftStateMachine<TypeConfig> for Sm {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = Builder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        blocking(|| self.applied_position())
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: futures_util::Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>>
            + Unpin
            + OptionalSend,
    {
        // The entries ready now are applied in one stretch of blocking work: handing the
        // runtime's worker over to block costs a switch between threads, so it is paid once
        // a batch rather than once an entry.
        let mut batch = Vec::new();
        while let Some(first) = entries.try_next().await? {
            batch.push(first);
            while batch.len() < MAX_APPLY_BATCH {
                match entries.try_next().now_or_never() {
                    Some(Ok(Some(next))) => batch.push(next),
                    Some(Err(e)) => return Err(e),
                    Some(Ok(None)) | None => break,
                }
            }
            let replies = blocking(|| -> io::Result<Vec<Vec<u8>>> {
                batch
                    .iter()
                    .map(|(entry, _)| self.apply_one(entry))
                    .collect()
            })?;
            for ((_, responder), reply) in batch.drain(..).zip(replies) {
                if let Some(r) = responder {
                    r.send(Reply(reply));
                }
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        Builder {
            view: Some(blocking(|| self.inner.view())),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotData,
    ) -> Result<(), io::Error> {
        let position = encode(&position_of(meta))?;
        blocking(|| -> io::Result<()> {
            // Named first: an install a crash interrupts is finished from this file.
            self.snapshots.adopt(meta, &snapshot.path)?;
            self.inner.install(&position, &snapshot.path)
        })?;
        *self.membership.lock() = Some(meta.last_membership.clone());
        tracing::info!(
            index = meta.last_log_id.as_ref().map(|l| l.index),
            "installed a snapshot"
        );
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.snapshots.current())
    }
}
