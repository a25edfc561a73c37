//! Proposals on a multi-member replica set: how a commit that logs entries reaches the
//! set's log and waits for its turn (`crate::replicated` has the whole design: this is the
//! writer's half, the registry of waiting writers that the apply hands turns to).
//!
//! **Lock order.** The registry's mutex is taken before a slot's; neither is held while
//! waiting for anything but the slot's condition variable.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use silt_storage::WriteBatch;

use super::{note_here, Entries, Oplog, Stamps};
use crate::{CollError, Result};

/// The catalog key of the position.
pub(crate) const POSITION_KEY: &[u8] = b"$raft";

/// How long a write waits for its entry to be applied, unless the request says otherwise
/// ([`limit_wait`]).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// Why a proposal did not reach the set's log.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// This member is not the primary: nothing was logged.
    NotPrimary(String),
    /// It may or may not be logged and applied later (the primary changed).
    Unknown(String),
}

/// How a store's commits reach the set's log: siltd's Raft member.
pub trait Replicator: Send + Sync {
    /// Put `command` in the set's log. When it cannot be, or this member no longer knows
    /// whether it will be, call `failed` (once, from any thread). Success is seen by the
    /// apply of the entry, not reported here.
    fn submit(&self, command: Vec<u8>, failed: Box<dyn FnOnce(Refusal) + Send>);

    /// Whether this member is the primary now (it proposes the periodic no-op).
    fn is_leader(&self) -> bool;
}

thread_local! {
    static WAIT: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// While held, writes of this thread wait at most `d` (a write concern's `wtimeout`) for
/// their entries to be applied.
pub struct WaitLimit(Option<Duration>);

/// Limit how long this thread's writes wait for replication, until the guard is dropped.
pub fn limit_wait(d: Duration) -> WaitLimit {
    WaitLimit(WAIT.with(|w| w.replace(Some(d))))
}

impl Drop for WaitLimit {
    fn drop(&mut self) {
        WAIT.with(|w| w.set(self.0));
    }
}

/// How a proposal's batch commits once its entries are given their times: a plain
/// `WriteBatch::commit`, or a commit into the writer's transaction. It runs on the apply's
/// thread, so it owns what it needs.
pub(crate) type CommitFn = Box<dyn FnOnce(WriteBatch) -> Result<()> + Send>;

/// What a waiting writer leaves for the apply to commit at its turn.
struct Prepared {
    batch: WriteBatch,
    entries: Entries,
    commit: CommitFn,
}

/// Where a waiting writer's proposal stands.
enum SlotState {
    /// The writer waits; the apply commits this at the entry's turn.
    Waiting(Box<Prepared>),
    /// The writer gave up (or was told to): the apply applies the entry from its bytes.
    Failed(CollError),
    /// The apply is committing the prepared batch.
    Committing,
    /// The apply committed it (with the newest of the entries' times) or failed to.
    Done(Result<Option<u64>>),
    /// The writer took the outcome.
    Taken,
}

struct Slot {
    state: Mutex<SlotState>,
    cv: Condvar,
}

impl Slot {
    fn fail(&self, e: CollError) {
        let mut st = self.state.lock();
        if matches!(*st, SlotState::Waiting(_)) {
            *st = SlotState::Failed(e);
            self.cv.notify_all();
        }
    }
}

pub(crate) fn refused(code: i32, msg: String) -> CollError {
    CollError::Refused { code, msg }
}

impl From<Refusal> for CollError {
    fn from(r: Refusal) -> CollError {
        match r {
            Refusal::NotPrimary(m) => refused(10107, m),
            Refusal::Unknown(m) => refused(11602, m),
        }
    }
}

/// A store's side of replication: the replicator and the registry of waiting writers.
pub(crate) struct Replication {
    pub(crate) replicator: Arc<dyn Replicator>,
    /// This process's proposer id: random, so that an entry proposed before a restart never
    /// matches a slot after it.
    pub(crate) me: u64,
    seq: AtomicU64,
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
}

impl Replication {
    /// The registry of a member whose proposer id is `me`.
    pub(crate) fn new(replicator: Arc<dyn Replicator>, me: u64) -> Replication {
        Replication {
            replicator,
            me,
            seq: AtomicU64::new(0),
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.replicator.is_leader()
    }

    /// Propose `entries`, and wait while this member's apply reaches them and commits
    /// `batch` with them, at the times it gives, with `commit` (see the module's header).
    pub(crate) fn propose_and_commit(
        &self,
        batch: WriteBatch,
        entries: Entries,
        commit: CommitFn,
    ) -> Result<()> {
        let seq = self.seq.fetch_add(1, Ordering::AcqRel);
        let command = entries.to_command(self.me, seq, bson::DateTime::now());
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState::Waiting(Box::new(Prepared {
                batch,
                entries,
                commit,
            }))),
            cv: Condvar::new(),
        });
        self.slots.lock().insert(seq, slot.clone());
        let waiting = slot.clone();
        self.replicator
            .submit(command, Box::new(move |r| waiting.fail(r.into())));
        let wait = WAIT.with(Cell::get).unwrap_or(DEFAULT_WAIT);
        let deadline = Instant::now() + wait;
        let mut st = slot.state.lock();
        loop {
            match &*st {
                SlotState::Waiting(_) => {
                    if slot.cv.wait_until(&mut st, deadline).timed_out()
                        && matches!(*st, SlotState::Waiting(_))
                    {
                        // Dropping the prepared commit aborts the writer's transaction.
                        *st = SlotState::Failed(refused(64, "timed out".into()));
                        drop(st);
                        self.slots.lock().remove(&seq);
                        return Err(refused(
                            64,
                            format!(
                                "waiting for replication timed out after {} ms; the write may still be applied",
                                wait.as_millis()
                            ),
                        ));
                    }
                }
                // A commit under way is waited for, whatever the limit: it is quick, and its
                // outcome is the write's.
                SlotState::Committing => slot.cv.wait(&mut st),
                SlotState::Failed(_) | SlotState::Done(_) | SlotState::Taken => break,
            }
        }
        match std::mem::replace(&mut *st, SlotState::Taken) {
            SlotState::Done(r) => {
                drop(st);
                if let Ok(Some(last)) = r {
                    note_here(last);
                }
                r.map(|_| ())
            }
            SlotState::Failed(e) => {
                drop(st);
                self.slots.lock().remove(&seq);
                Err(e)
            }
            _ => Err(refused(
                1,
                "a replication slot in an unexpected state".into(),
            )),
        }
    }

    /// At the turn of proposal `seq` (its times `stamps`, the log `position`): commit what
    /// its writer prepared, with the entries and the position, on this (the apply's) thread,
    /// and wake the writer. Whether it committed (`None`: no writer waits for it).
    pub(crate) fn hand_over(
        &self,
        log: &Oplog,
        seq: u64,
        stamps: &Stamps,
        position: &[u8],
    ) -> Option<bool> {
        let slot = self.slots.lock().remove(&seq)?;
        let mut st = slot.state.lock();
        let p = match std::mem::replace(&mut *st, SlotState::Committing) {
            SlotState::Waiting(p) => p,
            // The writer gave up.
            other => {
                *st = other;
                return None;
            }
        };
        drop(st);
        let Prepared {
            mut batch,
            entries,
            commit,
        } = *p;
        // A commit that panics fails this write; the entry is then applied from its bytes.
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<Option<u64>> {
                entries.put(&mut batch, stamps)?;
                batch.put(&log.catalog, POSITION_KEY, position)?;
                commit(batch)?;
                Ok(stamps.times.last().copied())
            }))
            .unwrap_or_else(|_| {
                Err(refused(
                    1,
                    "the commit of a replicated write panicked".into(),
                ))
            });
        let ok = r.is_ok();
        *slot.state.lock() = SlotState::Done(r);
        slot.cv.notify_all();
        Some(ok)
    }

    /// Fail every waiting proposal (this member stopped being a writable primary).
    pub(crate) fn abandon(&self, why: &str) {
        let slots: Vec<Arc<Slot>> = self.slots.lock().values().cloned().collect();
        for s in slots {
            s.fail(refused(
                11602,
                format!("operation was interrupted because the member {why}"),
            ));
        }
    }
}
