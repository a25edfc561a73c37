//! This server as a member of a multi-member replica set, on `silt_raft` (issue 36, first
//! wiring; `docs/replset-plan.md`).
//!
//! A server started with `--replSet` is the one-member set of `replset.rs` until
//! `replSetInitiate` names more than one member. Then it becomes member `_id` of a Raft
//! group: its id is stored in `<dbpath>/raft/id` (with the Raft log beside it), so a
//! restarted member rejoins from its own log. A member the initiator named learns its id from
//! the first `_siltRaft` request addressed to it. Raft ids are member `_id`s plus one.
//!
//! **Writes** are replicated by the store (`silt_collection`'s `replicated.rs`): the primary
//! evaluates a write, proposes its oplog entries through [`MemberReplicator`] and commits when
//! its apply reaches them; every other member applies them from the log. A secondary refuses
//! writes with NotWritablePrimary (10107), as mongod.
//!
//! Members authenticate one another with `--keyFile` (`crate::cluster_auth`); `--auth`
//! without one refuses a multi-member `replSetInitiate`.
//!
//! **Snapshots** are images of the store (`silt_collection`'s `image.rs`), written every
//! `--raftSnapshotEntries` entries; the log before one is purged, and a member behind it
//! (new, wiped, or long away) installs another member's image, then follows the log.
//!
//! Members talk TLS to one another under `preferTLS` and `requireTLS`
//! (`crate::raft_transport`).
//!
//! This file holds the member's lifecycle (start, restart, requests from other members,
//! shutdown) and the checks commands make of it; `machine.rs` joins the store to Raft,
//! `membership.rs` changes who is in the set, `primacy.rs` who is primary, and `report.rs`
//! answers what the member reports.

mod machine;
mod membership;
mod primacy;
mod report;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use silt_collection::Store;
use silt_query::{QResult, QueryError};
use silt_raft::{Member, MemberOptions, NodeId, Role, Status};

use crate::optimes::Optimes;
use crate::raft_transport::MemberTransport;

use machine::{io_err, ready, Abandoned, MemberReplicator, StoreMachine};
use primacy::watch_primacy;

/// This process's place in a multi-member set.
pub(crate) struct RaftMember {
    set: String,
    /// This member's `host:port`.
    me: String,
    dir: PathBuf,
    store: Arc<Store>,
    member: Arc<OnceLock<Member>>,
    starting: Mutex<()>,
    /// `hello.topologyVersion.counter`, moved on every change of what `hello` reports.
    topology: AtomicI64,
    /// What `hello` reported when `topology` last moved: the term, the role, whether
    /// writable, and the membership (its log index).
    seen: Mutex<(u64, Option<Role>, bool, Option<u64>)>,
    /// The newest freeze (`replSetFreeze`, `replSetStepDown`); an older one's end is ignored.
    freezes: Arc<AtomicU64>,
    /// Whether a freeze is in force (`watch_primacy` keeps this member from campaigning).
    frozen: Arc<AtomicBool>,
    /// `--keyFile`'s key: requests to other members are sealed with it.
    key: Option<Vec<u8>>,
    auth_changed: Arc<AtomicBool>,
    /// `--raftSnapshotEntries`.
    snapshot_every: u64,
    /// The optime of each applied entry (`replSetGetStatus`).
    optimes: Arc<Optimes>,
    /// When this server started (`replSetGetStatus.members[].uptime` of itself).
    started: Instant,
    /// Proposals abandoned in the current term whose entries may still commit: no writes
    /// until they are applied (`machine.rs::Abandoned`).
    abandoned: Arc<Abandoned>,
    /// Whether `replSetInitiate` of the one-member set this server already is ran (in this
    /// process: a restarted server accepts the first one again).
    initiated_alone: AtomicBool,
    /// TLS to the other members, when it is on (`crate::tls::Tls::member_client`).
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for RaftMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftMember").field("me", &self.me).finish()
    }
}

fn id_file(dir: &Path) -> PathBuf {
    dir.join("id")
}

fn not_primary(what: &str) -> QueryError {
    QueryError::coded(
        10107,
        "NotWritablePrimary",
        format!("not primary so can't {what}"),
    )
}

fn replication_error(e: silt_raft::ProposeError) -> QueryError {
    match e {
        silt_raft::ProposeError::NotLeader { .. } => not_primary("change the configuration"),
        e => QueryError::coded(8, "UnknownError", e.to_string()),
    }
}

impl RaftMember {
    /// The member of set `set` at `me`, its Raft state under `<dbpath>/raft`; started now if
    /// it was a member before this restart.
    pub(crate) fn open(
        set: &str,
        me: &str,
        dbpath: &Path,
        store: Arc<Store>,
        key: Option<Vec<u8>>,
        snapshot_every: u64,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> io::Result<RaftMember> {
        let m = RaftMember {
            set: set.to_string(),
            me: me.to_string(),
            dir: dbpath.join("raft"),
            store,
            member: Arc::new(OnceLock::new()),
            starting: Mutex::new(()),
            topology: AtomicI64::new(0),
            seen: Mutex::new((0, None, false, None)),
            freezes: Arc::new(AtomicU64::new(0)),
            frozen: Arc::new(AtomicBool::new(false)),
            key,
            auth_changed: Arc::new(AtomicBool::new(false)),
            snapshot_every,
            optimes: Arc::default(),
            started: Instant::now(),
            abandoned: Arc::default(),
            initiated_alone: AtomicBool::new(false),
            tls,
        };
        if let Ok(s) = std::fs::read_to_string(id_file(&m.dir)) {
            let id = s
                .trim()
                .parse()
                .map_err(|_| io::Error::other("a bad raft/id file"))?;
            m.start(id)?;
        }
        Ok(m)
    }

    /// The running member, once this server is in a multi-member set.
    pub(crate) fn member(&self) -> Option<&Member> {
        self.member.get()
    }

    fn start(&self, id: NodeId) -> io::Result<&Member> {
        let _g = self.starting.lock();
        if let Some(m) = self.member.get() {
            if m.id() != id {
                return Err(io::Error::other(format!(
                    "this member is {} in its set, not {id}",
                    m.id()
                )));
            }
            return Ok(m);
        }
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(id_file(&self.dir), format!("{id}\n"))?;
        let sm = Arc::new(StoreMachine {
            store: self.store.clone(),
            auth_changed: self.auth_changed.clone(),
            optimes: self.optimes.clone(),
        });
        let transport = Arc::new(MemberTransport::new(
            &self.set,
            id,
            self.key.clone(),
            self.tls.clone(),
        ));
        // Writes are replicated from here on: before the member starts applying its log.
        self.store
            .start_replication(Arc::new(MemberReplicator {
                member: self.member.clone(),
                abandoned: self.abandoned.clone(),
            }))
            .map_err(io_err)?;
        // A snapshot is an image of the store (`silt_collection`'s `image.rs`); the log
        // before it is purged, and a member behind that catches up by the image.
        let opts = MemberOptions {
            snapshot_every: self.snapshot_every,
            keep_behind_snapshot: (self.snapshot_every / 10).max(100),
            ..MemberOptions::default()
        };
        let m = Member::start(id, &self.dir, &opts, sm, transport)?;
        watch_primacy(
            self.member.clone(),
            self.store.clone(),
            self.frozen.clone(),
            self.abandoned.clone(),
        );
        tracing::info!(id, me = %self.me, "started as a member of a multi-member replica set");
        Ok(self.member.get_or_init(|| m))
    }

    /// Answer a `_siltRaft` request addressed to member `to` of set `set`.
    pub(crate) fn handle(&self, set: &str, to: NodeId, body: &[u8]) -> io::Result<Vec<u8>> {
        if set != self.set {
            return Err(io::Error::other(format!(
                "this member is in set {}, not {set}",
                self.set
            )));
        }
        self.start(to)?.handle(body)
    }

    fn status(&self) -> Option<Status> {
        let s = ready(self.member()?.status(), &self.abandoned);
        let mut seen = self.seen.lock();
        let now = (s.term, Some(s.role), s.writable, s.membership_index);
        if *seen != now {
            *seen = now;
            self.topology.fetch_add(1, Ordering::Relaxed);
        }
        Some(s)
    }

    /// NotWritablePrimary on a secondary, and on the primary the refusal of a replicated
    /// write (not built yet), for a command that writes.
    pub(crate) fn refuse_write(&self, name: &str) -> QResult<()> {
        let Some(m) = self.member() else {
            return Ok(());
        };
        if !crate::commands::is_write(name) {
            return Ok(());
        }
        if !ready(m.status(), &self.abandoned).writable {
            return Err(QueryError::coded(
                10107,
                "NotWritablePrimary",
                "not primary",
            ));
        }
        Ok(())
    }

    /// For a command that reads data (`Props::reads_data`) in database `db`, on a member
    /// that is not the writable primary, mongod's refusals: a member still catching up
    /// (`STARTUP2`) serves no such read (13436), and a secondary serves one only to a client
    /// that allows it (`secondary_ok`: a `$readPreference` other than `primary`; 13435
    /// otherwise, and the driver then looks for the primary). The `local` database, which is
    /// each member's own, is read anywhere.
    pub(crate) fn refuse_read(&self, db: &str, secondary_ok: bool) -> QResult<()> {
        let Some(m) = self.member() else {
            return Ok(());
        };
        let s = ready(m.status(), &self.abandoned);
        if s.writable || db == "local" {
            return Ok(());
        }
        if !report::synced(&s) {
            return Err(QueryError::coded(
                13436,
                "NotPrimaryOrSecondary",
                "node is not in primary or recovering state",
            ));
        }
        if !secondary_ok {
            return Err(QueryError::coded(
                13435,
                "NotPrimaryNoSecondaryOk",
                "not primary and secondaryOk=false",
            ));
        }
        Ok(())
    }

    /// Note that `replSetInitiate` of the one-member set ran: true the first time.
    pub(crate) fn initiate_alone(&self) -> bool {
        !self.initiated_alone.swap(true, Ordering::AcqRel)
    }

    /// Whether an applied entry changed the users or roles since the last call (the server
    /// then reads them again).
    pub(crate) fn take_auth_changed(&self) -> bool {
        self.auth_changed.load(Ordering::Acquire) && self.auth_changed.swap(false, Ordering::AcqRel)
    }

    /// Whether this server is a member of a multi-member set that is not its writable
    /// primary (it takes no writes of its own).
    pub(crate) fn follows(&self) -> bool {
        self.member()
            .is_some_and(|m| !ready(m.status(), &self.abandoned).writable)
    }

    /// A linearizable read's condition: this member is primary, a quorum confirmed it
    /// within `limit`, and it applied what it had committed then.
    pub(crate) fn linearize(&self, limit: Duration) -> QResult<()> {
        let Some(m) = self.member() else {
            return Ok(());
        };
        if !ready(m.status(), &self.abandoned).writable {
            return Err(QueryError::coded(
                10107,
                "NotWritablePrimary",
                "cannot satisfy linearizable read concern on non-primary node",
            ));
        }
        let index = m.read_index(limit).map_err(|e| match e {
            silt_raft::ProposeError::NotLeader { .. } => QueryError::coded(
                10107,
                "NotWritablePrimary",
                "cannot satisfy linearizable read concern on non-primary node",
            ),
            e => QueryError::coded(
                11602,
                "InterruptedDueToReplStateChange",
                format!("no quorum confirmed this primary for a linearizable read: {e}"),
            ),
        })?;
        if !m.wait_applied(index, limit) {
            return Err(QueryError::max_time_ms_expired(
                "the linearizable read's position was not applied in time",
            ));
        }
        Ok(())
    }

    /// How many members the set has (voters and learners), while this server is in a
    /// multi-member set.
    pub(crate) fn member_count(&self) -> Option<usize> {
        Some(self.member()?.status().members.len())
    }

    /// Wait until `n` members (this one included) hold this member's log up to what it has
    /// applied now (`w: n` above the majority every write waits for); whether they did by
    /// `deadline`.
    pub(crate) fn wait_members(&self, n: usize, deadline: Instant) -> bool {
        let Some(m) = self.member() else {
            return true;
        };
        let Some(target) = m.status().applied else {
            return true;
        };
        loop {
            let s = m.status();
            let have = s
                .members
                .iter()
                .filter(|p| p.id == s.id || p.matched.is_some_and(|i| i >= target))
                .count();
            if have >= n {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stop Raft on this member.
    pub(crate) fn shutdown(&self) {
        if let Some(m) = self.member() {
            m.shutdown();
        }
    }
}
