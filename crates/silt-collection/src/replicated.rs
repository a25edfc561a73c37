//! The store as the state machine of a multi-member replica set (`docs/replset-plan.md`,
//! decisions 3 and 4): writes are evaluated on the primary and committed by the apply of the
//! set's replicated log, on every member alike.
//!
//! **Proposing.** On a multi-member set, a commit that logs entries (`Oplog::commit_logged`:
//! every document write, transaction, fast update and DDL command) does not commit at once.
//! It encodes its entries as one command ([`crate::oplog::Entries::to_command`]), hands it
//! to the [`Replicator`] (siltd's Raft member), parks in a registry of *slots* under the
//! command's proposal number with what the apply needs to commit it (its batch, its entries,
//! and how it commits: a plain batch or its transaction), and waits. Its document locks stay
//! held, so no conflicting write is evaluated before it commits.
//!
//! **Applying.** The Raft member applies committed entries in log order on one thread
//! ([`Store::apply_replicated`]). Each entry's oplog times are computed from the previous
//! entry's time and the proposer's wall clock (`Oplog::reserve_replicated`), the same on
//! every member. If the entry is this process's own proposal and its writer is still
//! waiting, the apply thread commits what the writer prepared, with the entries at those
//! times and the applied position, and wakes the writer: one switch between threads per
//! write, and the commits stay in log order without the apply waiting for another thread.
//! Otherwise (a secondary; a writer that gave up; a commit that failed) the entry is applied
//! from its bytes in one transaction with its oplog rows and the position. Either way an entry's changes, its oplog rows and the applied position commit
//! together, so after any crash the store holds exactly the applied prefix of the log.
//!
//! **Giving up.** A writer stops waiting when the member cannot propose (not primary), when
//! the server abandons the waiting proposals (the member stopped being a writable primary),
//! or at its wait limit, unless the apply is committing its batch already (then it waits
//! for that commit's outcome). Its batch is dropped (its transaction aborted) and its locks
//! released. Its entry may still commit later; then it is applied from its bytes, like any
//! other member's.
//!
//! The writer's half (the registry of waiting writers) is `oplog/proposal.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use silt_storage::WriteBatch;

use crate::oplog::{
    apply_as, refused, ApplyScope, Command, Entries, Op, Replication, Replicator, Stamps,
    POSITION_KEY,
};
use crate::{Result, Store, TxnKind, Writer};

/// How long the apply of an entry waits for a document lock a writer that gave up still
/// holds.
const APPLY_LOCK_WAIT: Duration = Duration::from_secs(120);

/// What a replicated log entry carries, for [`Store::apply_replicated`].
#[derive(Debug, Clone, Copy)]
pub enum Replicated<'a> {
    /// A command proposed by a write (`Entries::to_command`).
    Command(&'a [u8]),
    /// The first entry of a new primary's term: logged as mongod's "new primary" no-op.
    NewTerm,
    /// An entry that changes no data and logs nothing (a change of membership).
    Quiet,
}

impl Store {
    /// The position stored with the newest applied entry, if any.
    pub fn replication_position(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.catalog.get(POSITION_KEY)?)
    }

    /// Record that an entry at `position` (opaque bytes) that changes no data was applied.
    pub fn record_position(&self, position: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(&self.catalog, POSITION_KEY, position)?;
        batch.commit()?;
        Ok(())
    }

    /// Make this store's commits replicated through `replicator` (a member of a multi-member
    /// set). It needs an oplog; it is set once.
    pub fn start_replication(&self, replicator: Arc<dyn Replicator>) -> Result<()> {
        let Some(log) = &self.oplog else {
            return Err(refused(
                2,
                "replication needs a replica-set member's oplog".into(),
            ));
        };
        if self.replication_position()?.is_none() {
            // A member joining a set: its oplog from here on is the set's.
            log.reset(&self.env, &|| self.new_dict_name("oplog"))?;
        }
        // Random, and below 2^63: the command carries it as a BSON int64.
        let me =
            u64::from_le_bytes(bson::Uuid::new().bytes()[..8].try_into().unwrap_or([1; 8])) >> 1;
        let _ = log.repl.set(Arc::new(Replication::new(replicator, me)));
        Ok(())
    }

    /// Fail every write waiting for replication (the member stopped being a writable
    /// primary, `why`): they answer 11602 and release their locks.
    pub fn abandon_proposals(&self, why: &str) {
        if let Some(r) = self.oplog.as_ref().and_then(|l| l.repl.get()) {
            r.abandon(why);
        }
    }

    /// Apply the committed log entry at `position` (opaque bytes), of Raft term `term`.
    /// Called in log order, from one thread.
    pub fn apply_replicated(&self, term: u64, position: &[u8], what: Replicated<'_>) -> Result<()> {
        let (Some(log), bytes) = (self.oplog.as_ref(), what) else {
            return self.record_position(position);
        };
        let term = i64::try_from(term).unwrap_or(i64::MAX);
        let (entries, wall, own) = match bytes {
            Replicated::Quiet => return self.record_position(position),
            Replicated::NewTerm => {
                // The time of the previous entry, so every member stamps it alike. The first
                // term of a new set has none (its log starts empty on every member): its
                // no-op is not logged, and the set's first entry is the initiate's, as on
                // mongod, rather than one at time 0.
                let newest = log.newest_ts.load(Ordering::Acquire);
                if newest == 0 {
                    return self.record_position(position);
                }
                let secs = newest >> 32;
                let wall = bson::DateTime::from_millis(
                    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX),
                );
                (Entries::each(vec![Op::noop("new primary")]), wall, None)
            }
            Replicated::Command(b) => {
                let c = Command::decode(b)?;
                let own = log
                    .repl
                    .get()
                    .filter(|r| r.me == c.proposer)
                    .map(|r| (r.clone(), c.seq));
                (c.entries, c.wall, own)
            }
        };
        let reserved = log.reserve_replicated(entries.count(), term, wall);
        if let Some((repl, seq)) = own {
            if repl.hand_over(log, seq, &reserved.stamps, position) == Some(true) {
                return Ok(());
            }
        }
        self.apply_entries(&entries, &reserved.stamps, position)
    }

    /// Apply `entries` from their values, in one transaction with their oplog rows at
    /// `stamps` and the position. Commands run first on their own (they are idempotent: a
    /// crash before the transaction commits runs them again).
    fn apply_entries(&self, entries: &Entries, stamps: &Stamps, position: &[u8]) -> Result<()> {
        let _scope = ApplyScope::enter();
        let txn = self.begin(TxnKind::Apply, APPLY_LOCK_WAIT)?;
        let w = Writer::new(Some(&txn));
        for op in entries.ops.iter().chain(&entries.side) {
            let r = if op.0.get_str("op") == Ok("c") {
                apply_as(self, &op.0, Writer::plain())
            } else {
                apply_as(self, &op.0, w)
            };
            if let Err(e) = r {
                tracing::error!(error = %e, entry = %op.0, "cannot apply a replicated entry");
                let _ = txn.abort();
                return Err(e);
            }
        }
        let mut batch = WriteBatch::new();
        entries.put(&mut batch, stamps)?;
        batch.put(&self.catalog, POSITION_KEY, position)?;
        txn.commit_applied(batch)
    }
}
