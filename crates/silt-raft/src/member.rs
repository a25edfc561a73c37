//! A member of the group: openraft on a private runtime, behind blocking methods the
//! server's threads call.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::error::{ClientWriteError, ForwardToLeader, LinearizableReadError, RaftError};
use openraft::{ChangeMembers, Config, Instant, ServerState, SnapshotPolicy};

use crate::log_store::LogStore;
use crate::network::{self, Network, Transport};
use crate::snapshots::Snapshots;
use crate::state::{Sm, StateMachine};
use crate::types::{Command, MemberInfo, NodeId, TypeConfig};

/// How a member keeps time.
#[derive(Debug, Clone)]
pub struct MemberOptions {
    /// How often a leader sends to each member; also how long a message to a member may
    /// take.
    pub heartbeat: Duration,
    /// The upper end is the lease: a follower that heard from a leader within it refuses to
    /// vote, and a leader that has not heard from a quorum for that long takes no proposals.
    /// A follower campaigns once it has heard no leader for the lease plus a random time in
    /// this range (openraft counts the timeout from the lease's end), so a dead leader is
    /// replaced after 1.5 to 2 times the upper end, plus a second round's timeout when the
    /// first round splits.
    pub election_timeout: (Duration, Duration),
    /// A snapshot is built after this many entries since the last one (and the log before it
    /// purged).
    pub snapshot_every: u64,
    /// Entries kept in the log behind the newest snapshot, for members a little behind.
    pub keep_behind_snapshot: u64,
    /// The node cache of the Raft log's engine environment.
    pub log_cache_bytes: usize,
}

impl Default for MemberOptions {
    fn default() -> Self {
        MemberOptions {
            heartbeat: Duration::from_millis(200),
            election_timeout: (Duration::from_millis(1000), Duration::from_millis(2000)),
            snapshot_every: 50_000,
            keep_behind_snapshot: 10_000,
            log_cache_bytes: 32 << 20,
        }
    }
}

/// What a member is to the group now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    /// Receives the log but does not vote (a member being added, or one without votes).
    Learner,
    Shutdown,
}

/// One member of the group as a member sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub id: NodeId,
    pub addr: String,
    pub voter: bool,
    /// Its replica-set options (and `addr` again).
    pub info: MemberInfo,
    /// On the leader: the newest log index known to be in that member's log.
    pub matched: Option<u64>,
}

/// A member's view of the group.
#[derive(Debug, Clone)]
pub struct Status {
    pub id: NodeId,
    pub role: Role,
    pub term: u64,
    pub leader: Option<NodeId>,
    /// The leader, and a quorum acknowledged it within its lease: it takes proposals.
    pub writable: bool,
    pub last_log_index: Option<u64>,
    /// The newest index known committed.
    pub committed: Option<u64>,
    pub applied: Option<u64>,
    /// The term of the newest entry applied: a leader that applied an entry of its own term
    /// has applied every entry an earlier leader committed.
    pub applied_term: Option<u64>,
    pub snapshot: Option<u64>,
    pub purged: Option<u64>,
    /// Bytes of a snapshot this member is receiving (catching up), if it is.
    pub receiving_snapshot: Option<u64>,
    pub members: Vec<Peer>,
    /// The membership is changing (joint consensus).
    pub joint: bool,
    /// The log index of the membership in effect (each change of the membership logs a new
    /// one, so it only grows).
    pub membership_index: Option<u64>,
}

/// A command the group committed and this member applied.
#[derive(Debug, Clone)]
pub struct Proposed {
    pub index: u64,
    pub term: u64,
    /// What the state machine's `apply` returned for it.
    pub reply: Vec<u8>,
}

/// Why a proposal was not applied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    /// This member is not the leader (or its lease lapsed): nothing was logged.
    #[error("not the leader")]
    NotLeader {
        /// The leader, if this member knows one.
        leader: Option<(NodeId, String)>,
    },
    /// The command may or may not be committed later (the leader changed after logging it,
    /// or the wait timed out).
    #[error("the outcome is unknown: {0}")]
    Unknown(String),
    /// The request itself was refused (a membership change that is not allowed now).
    #[error("{0}")]
    Refused(String),
    /// Raft stopped on this member (a storage error, or shutdown).
    #[error("replication stopped: {0}")]
    Stopped(String),
}

/// A member of the group.
pub struct Member {
    id: NodeId,
    rt: tokio::runtime::Runtime,
    raft: openraft::Raft<TypeConfig, Sm>,
    snapshots: Arc<Snapshots>,
    /// The Raft as its clients reach it (`network::RaftCell`).
    cell: network::RaftCell,
    lease: Duration,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member").field("id", &self.id).finish()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn forward(f: &ForwardToLeader<TypeConfig>) -> ProposeError {
    ProposeError::NotLeader {
        leader: f.leader_id.map(|id| {
            let addr = f
                .leader_node
                .as_ref()
                .map(|n| n.addr.clone())
                .unwrap_or_default();
            (id, addr)
        }),
    }
}

fn write_error(e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => forward(&f),
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(f)) => {
            ProposeError::Unknown(format!("the entry was discarded ({f})"))
        }
        RaftError::APIError(e) => ProposeError::Refused(e.to_string()),
        RaftError::Fatal(f) => ProposeError::Stopped(f.to_string()),
    }
}

/// Log every change of this member's role, term or leader, and of its snapshot (a catch-up),
/// as openraft reports them.
fn log_role_changes(
    rt: &tokio::runtime::Runtime,
    raft: &openraft::Raft<TypeConfig, Sm>,
    id: NodeId,
) {
    let mut rx = raft.metrics();
    rt.spawn(async move {
        let mut last = None;
        loop {
            let now = {
                let m = rx.borrow_watched();
                (
                    m.state,
                    m.current_term,
                    m.current_leader,
                    m.snapshot.map(|l| l.index),
                )
            };
            if last != Some(now) {
                let (state, term, leader, snapshot) = now;
                tracing::info!(
                    member = id,
                    ?state,
                    term,
                    ?leader,
                    ?snapshot,
                    "replica-set member state"
                );
                last = Some(now);
            }
            if rx.changed().await.is_err() {
                break;
            }
        }
    });
}

impl Member {
    /// Start member `id`, its Raft log in `dir/log` and its snapshot in `dir/snapshots`, applying to `sm`, reaching the others
    /// through `transport`. A member whose log is empty waits for [`Member::initialize`] (on
    /// it or another member) or for a leader to add it.
    pub fn start(
        id: NodeId,
        dir: &Path,
        opts: &MemberOptions,
        sm: Arc<dyn StateMachine>,
        transport: Arc<dyn Transport>,
    ) -> io::Result<Member> {
        let config = Config {
            cluster_name: "silt".into(),
            heartbeat_interval: millis(opts.heartbeat),
            election_timeout_min: millis(opts.election_timeout.0),
            election_timeout_max: millis(opts.election_timeout.1),
            // Per chunk of a snapshot; the last includes installing it.
            install_snapshot_timeout: 600_000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(opts.snapshot_every),
            max_in_snapshot_log_to_keep: opts.keep_behind_snapshot,
            enable_pre_vote: Some(true),
            ..Default::default()
        }
        .validate()
        .map_err(io::Error::other)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("raft-{id}"))
            .enable_all()
            .build()?;
        let log = LogStore::open(&dir.join("log"), opts.log_cache_bytes)?;
        let snapshots = Arc::new(Snapshots::open(&dir.join("snapshots"))?);
        let cell = network::RaftCell::default();
        let network = Network {
            me: id,
            transport,
            raft: cell.clone(),
        };
        let raft = rt
            .block_on(openraft::Raft::new(
                id,
                Arc::new(config),
                network,
                log,
                Sm::new(sm, snapshots.clone()),
            ))
            .map_err(io::Error::other)?;
        *cell.lock() = Some(raft.clone());
        log_role_changes(&rt, &raft, id);
        Ok(Member {
            id,
            rt,
            raft,
            snapshots,
            cell,
            lease: opts.election_timeout.1,
        })
    }

    /// This member's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Make the group: `voters` (id → `host:port`, this member among them) become its
    /// first membership. Refused once this member has a log.
    pub fn initialize(&self, voters: &BTreeMap<NodeId, String>) -> Result<(), ProposeError> {
        let nodes: BTreeMap<NodeId, MemberInfo> = voters
            .iter()
            .map(|(id, addr)| (*id, MemberInfo::at(addr)))
            .collect();
        self.rt
            .block_on(self.raft.initialize(nodes))
            .map_err(|e| match e {
                RaftError::APIError(e) => ProposeError::Refused(e.to_string()),
                RaftError::Fatal(f) => ProposeError::Stopped(f.to_string()),
            })
    }

    /// Log `command`, wait until the group committed it and this member applied it (at most
    /// `timeout`), and return what applying it answered.
    pub fn propose(&self, command: Vec<u8>, timeout: Duration) -> Result<Proposed, ProposeError> {
        let fut = self.raft.client_write(Command(command));
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, fut).await })
        {
            Err(_) => Err(ProposeError::Unknown(format!(
                "not committed within {} ms",
                timeout.as_millis()
            ))),
            Ok(Err(e)) => Err(write_error(e)),
            Ok(Ok(r)) => Ok(Proposed {
                index: r.log_id.index,
                term: r.log_id.leader_id.term,
                reply: r.data.0,
            }),
        }
    }

    /// Log `command` without waiting: `failed` is called if it cannot be logged here, or
    /// if this member stops knowing whether it will be committed (the leader changed). A
    /// command that commits is seen by the state machine's apply; nothing else reports it.
    pub fn submit(&self, command: Vec<u8>, failed: impl FnOnce(ProposeError) + Send + 'static) {
        let raft = self.raft.clone();
        self.rt.spawn(async move {
            if let Err(e) = raft.client_write(Command(command)).await {
                failed(write_error(e));
            }
        });
    }

    /// Answer a request another member sent through its [`Transport`].
    pub fn handle(&self, request: &[u8]) -> io::Result<Vec<u8>> {
        network::handle(&self.raft, self.rt.handle(), &self.snapshots, request)
    }

    /// This member's view of the group now.
    pub fn status(&self) -> Status {
        let m = self.raft.metrics().borrow_watched().clone();
        let role = match m.state {
            ServerState::Leader => Role::Leader,
            ServerState::Follower => Role::Follower,
            ServerState::Candidate => Role::Candidate,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Shutdown,
        };
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let matched = m.replication.clone().unwrap_or_default();
        let members = membership
            .nodes()
            .map(|(id, node)| Peer {
                id: *id,
                addr: node.addr.clone(),
                voter: voters.contains(id),
                info: node.clone(),
                matched: if *id == self.id {
                    m.last_log_index
                } else {
                    matched.get(id).copied().flatten().map(|l| l.index)
                },
            })
            .collect();
        let lease_ok = voters.len() <= 1
            || m.last_quorum_acked
                .as_ref()
                .is_some_and(|t| t.elapsed() < self.lease);
        Status {
            id: self.id,
            role,
            term: m.current_term,
            leader: m.current_leader,
            writable: role == Role::Leader && lease_ok,
            last_log_index: m.last_log_index,
            committed: m.local_committed.map(|l| l.index),
            applied: m.last_applied.map(|l| l.index),
            applied_term: m.last_applied.map(|l| l.leader_id.term),
            snapshot: m.snapshot.map(|l| l.index),
            receiving_snapshot: self.snapshots.receiving(),
            purged: m.purged.map(|l| l.index),
            members,
            joint: membership.get_joint_config().len() > 1,
            membership_index: m.membership_config.log_id().as_ref().map(|l| l.index),
        }
    }

    /// Add `id` as a learner (it receives the log, by snapshot first if the log it needs is
    /// purged), waiting until it has caught up when `wait`.
    pub fn add_learner(
        &self,
        id: NodeId,
        info: MemberInfo,
        wait: bool,
    ) -> Result<(), ProposeError> {
        self.rt
            .block_on(self.raft.add_learner(id, info, wait))
            .map(|_| ())
            .map_err(write_error)
    }

    /// Record new options of members already in the group (their addresses unchanged).
    pub fn set_infos(&self, infos: BTreeMap<NodeId, MemberInfo>) -> Result<(), ProposeError> {
        self.rt
            .block_on(
                self.raft
                    .change_membership(ChangeMembers::SetNodes(infos), true),
            )
            .map(|_| ())
            .map_err(write_error)
    }

    /// Make `voters` the voting members (through joint consensus); the other members stay
    /// learners.
    pub fn change_voters(&self, voters: BTreeSet<NodeId>) -> Result<(), ProposeError> {
        self.rt
            .block_on(
                self.raft
                    .change_membership(ChangeMembers::ReplaceAllVoters(voters), true),
            )
            .map(|_| ())
            .map_err(write_error)
    }

    /// Remove members altogether (they must not be voters).
    pub fn remove(&self, ids: BTreeSet<NodeId>) -> Result<(), ProposeError> {
        self.rt
            .block_on(
                self.raft
                    .change_membership(ChangeMembers::RemoveNodes(ids), false),
            )
            .map(|_| ())
            .map_err(write_error)
    }

    /// Hand leadership to `to` (a leader only).
    pub fn transfer_leadership(&self, to: NodeId) -> Result<(), ProposeError> {
        self.rt
            .block_on(self.raft.trigger().transfer_leader(to))
            .map_err(|f| ProposeError::Stopped(f.to_string()))
    }

    /// Stop (or resume) campaigning: a member that must not become leader for a while.
    pub fn set_electable(&self, electable: bool) {
        self.raft.runtime_config().elect(electable);
    }

    /// On the leader: the log index a linearizable read must see applied, confirmed by a
    /// quorum (a deposed or isolated leader gets `NotLeader` or `Unknown`).
    pub fn read_index(&self, timeout: Duration) -> Result<u64, ProposeError> {
        let fut = self
            .raft
            .ensure_linearizable(openraft::ReadPolicy::ReadIndex);
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, fut).await })
        {
            Err(_) => Err(ProposeError::Unknown("no quorum confirmed the read".into())),
            Ok(Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(f)))) => {
                Err(forward(&f))
            }
            Ok(Err(RaftError::APIError(e))) => Err(ProposeError::Unknown(e.to_string())),
            Ok(Err(RaftError::Fatal(f))) => Err(ProposeError::Stopped(f.to_string())),
            Ok(Ok(r)) => Ok(r.log_id().index),
        }
    }

    /// Wait until this member applied `index` (at most `timeout`); whether it did.
    pub fn wait_applied(&self, index: u64, timeout: Duration) -> bool {
        let waiter = self.raft.wait(Some(timeout));
        let w = waiter.applied_index_at_least(Some(index), "applied");
        self.rt.block_on(w).is_ok()
    }

    /// Build a snapshot now (and purge the log behind it, as the policy allows).
    pub fn snapshot_now(&self) -> Result<(), ProposeError> {
        self.rt
            .block_on(self.raft.trigger().snapshot())
            .map_err(|f| ProposeError::Stopped(f.to_string()))
    }

    /// On a group this member leads alone, just initialized: once it applied its first
    /// entries, snapshot its data and purge the whole log, so that every member added later
    /// starts from the snapshot, and so holds what this member held before the group began
    /// (which no log entry carries). Waits at most `timeout` for each step.
    pub fn seed(&self, timeout: Duration) -> Result<(), ProposeError> {
        let wait = |what: &str, done: &dyn Fn(&Status) -> bool| -> Result<Status, ProposeError> {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let s = self.status();
                if done(&s) {
                    return Ok(s);
                }
                if std::time::Instant::now() > deadline {
                    return Err(ProposeError::Unknown(format!(
                        "{what} within {} ms",
                        timeout.as_millis()
                    )));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let s = wait("not leading", &|s| {
            s.writable && s.applied.is_some() && s.applied_term == Some(s.term)
        })?;
        let applied = s.applied.unwrap_or_default();
        self.snapshot_now()?;
        wait("no snapshot", &|s| s.snapshot >= Some(applied))?;
        self.rt
            .block_on(self.raft.trigger().purge_log(applied))
            .map_err(|f| ProposeError::Stopped(f.to_string()))?;
        wait("the log not purged", &|s| s.purged >= Some(applied))?;
        Ok(())
    }

    /// Stop Raft on this member (its requests and proposals fail from now on).
    pub fn shutdown(&self) {
        self.cell.lock().take();
        let _ = self.rt.block_on(self.raft.shutdown());
    }
}
