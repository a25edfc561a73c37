//! The store as the Raft group's state machine, and the store's proposals as Raft entries:
//! what joins `silt_collection` to `silt_raft`.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use silt_collection::{Refusal, Replicated, Replicator, Store};
use silt_raft::{Applied, Member, SnapshotView, StateMachine, Status};

use crate::optimes::Optimes;

/// The store as the group's state machine: every entry is applied by the store, with the
/// position (see the module's header).
pub(super) struct StoreMachine {
    pub(super) store: Arc<Store>,
    /// Set when an applied entry changed the users or roles (`RaftMember::take_auth_changed`).
    pub(super) auth_changed: Arc<AtomicBool>,
    /// The optime of each applied entry, by index.
    pub(super) optimes: Arc<Optimes>,
}

pub(super) fn io_err(e: silt_collection::CollError) -> io::Error {
    io::Error::other(e.to_string())
}

impl StateMachine for StoreMachine {
    fn position(&self) -> io::Result<Option<Vec<u8>>> {
        self.store.replication_position().map_err(io_err)
    }

    fn apply(&self, entry: Applied<'_>, position: &[u8]) -> io::Result<Vec<u8>> {
        let what = match entry.command {
            Some(c) => Replicated::Command(c),
            None if entry.new_term => Replicated::NewTerm,
            None => Replicated::Quiet,
        };
        self.store
            .apply_replicated(entry.term, position, what)
            .map_err(io_err)?;
        if let Some(log) = self.store.oplog() {
            self.optimes.record(entry.index, entry.term, log.visible());
        }
        // Once applied: the server reads the users and roles again.
        if entry.command.is_some_and(|c| {
            [b"admin.system.users".as_slice(), b"admin.system.roles"]
                .iter()
                .any(|ns| c.windows(ns.len()).any(|w| w == *ns))
        }) {
            self.auth_changed.store(true, Ordering::Release);
        }
        Ok(Vec::new())
    }

    fn view(&self) -> io::Result<Box<dyn SnapshotView>> {
        Ok(Box::new(StoreView(
            self.store.image_view().map_err(io_err)?,
        )))
    }

    fn install(&self, position: &[u8], data: &Path) -> io::Result<()> {
        self.store.install_image(position, data).map_err(io_err)?;
        self.optimes.clear();
        // The users and roles came with the image.
        self.auth_changed.store(true, Ordering::Release);
        Ok(())
    }
}

/// A snapshot of this member: an image of its store.
struct StoreView(silt_collection::ImageView);

impl SnapshotView for StoreView {
    fn position(&self) -> &[u8] {
        self.0.position()
    }

    fn write_to(self: Box<Self>, out: &mut dyn io::Write) -> io::Result<()> {
        self.0.write_to(out).map_err(io_err)?;
        Ok(())
    }
}

/// When a leader is the writable primary: once it applied an entry of its own term (its
/// first is openraft's blank entry, logged as mongod's "new primary" no-op), and so every
/// entry an earlier primary committed: a read on a new primary never misses a write the old
/// one acknowledged. A leader restarted into the term it led (openraft re-establishes it
/// without a new entry) is ready once its applied entries reach that term.
///
/// Nor is it while proposals it abandoned in this term may still commit
/// ([`Abandoned`]).
pub(super) fn ready(mut s: Status, abandoned: &Abandoned) -> Status {
    s.writable = s.writable && s.applied_term == Some(s.term) && !abandoned.pending(&s);
    s
}

/// The proposals this member abandoned while leader (it stopped being a writable primary:
/// its lease lapsed, or it stepped down). In a new term, readiness covers them (every entry
/// before the new term's first is applied first). But a lease can come back in the same
/// term, and then their entries may still commit after the member takes new writes: a retry
/// of one of them would find no record of it and run a second time, and a write to one of
/// their documents would hold the lock their apply needs while it waits for its own later
/// entry. So until this member has applied its log as far as it reached when it abandoned
/// them (or the term changes), it takes no writes.
#[derive(Debug, Default)]
pub(super) struct Abandoned(parking_lot::Mutex<Option<(u64, u64)>>);

impl Abandoned {
    /// Note that proposals were abandoned as of `s` (the member's status then).
    pub(super) fn note(&self, s: &Status) {
        if let Some(last) = s.last_log_index {
            *self.0.lock() = Some((s.term, last));
        }
    }

    /// Whether entries abandoned in `s`'s term are not all applied yet.
    fn pending(&self, s: &Status) -> bool {
        matches!(*self.0.lock(), Some((term, last)) if term == s.term && s.applied.is_none_or(|a| a < last))
    }
}

/// How the store's commits reach the set's log: proposals to this member's Raft.
pub(super) struct MemberReplicator {
    pub(super) member: Arc<OnceLock<Member>>,
    pub(super) abandoned: Arc<Abandoned>,
}

impl Replicator for MemberReplicator {
    fn submit(&self, command: Vec<u8>, failed: Box<dyn FnOnce(Refusal) + Send>) {
        let Some(m) = self.member.get() else {
            failed(Refusal::NotPrimary("not primary".into()));
            return;
        };
        m.submit(command, move |e| {
            failed(match e {
                silt_raft::ProposeError::NotLeader { .. } => {
                    Refusal::NotPrimary("not primary".into())
                }
                e => Refusal::Unknown(format!(
                    "the primary changed before the write was replicated: {e}"
                )),
            })
        });
    }

    fn is_leader(&self) -> bool {
        self.member
            .get()
            .is_some_and(|m| ready(m.status(), &self.abandoned).writable)
    }
}

#[cfg(test)]
mod tests {
    use super::{ready, Abandoned};
    use silt_raft::{Role, Status};

    fn leader(term: u64, last: u64, applied: u64) -> Status {
        Status {
            id: 1,
            role: Role::Leader,
            term,
            leader: Some(1),
            writable: true,
            last_log_index: Some(last),
            committed: Some(applied),
            applied: Some(applied),
            applied_term: Some(term),
            snapshot: None,
            purged: None,
            receiving_snapshot: None,
            members: Vec::new(),
            joint: false,
            membership_index: Some(1),
        }
    }

    #[test]
    fn abandoned_proposals_hold_writes_until_applied_or_a_new_term() {
        let a = Abandoned::default();
        assert!(ready(leader(3, 10, 10), &a).writable);
        // The lease lapsed with entries up to 12 in the log, then came back in term 3.
        a.note(&leader(3, 12, 10));
        assert!(!ready(leader(3, 12, 10), &a).writable);
        assert!(!ready(leader(3, 12, 11), &a).writable);
        assert!(ready(leader(3, 13, 12), &a).writable);
        // In a later term readiness covers them.
        a.note(&leader(3, 20, 12));
        assert!(ready(leader(4, 21, 21), &a).writable);
        // A leader that has not applied an entry of its term is not ready either way.
        let mut s = leader(5, 30, 29);
        s.applied_term = Some(4);
        assert!(!ready(s, &Abandoned::default()).writable);
    }
}
