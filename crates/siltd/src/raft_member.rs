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

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use silt_collection::{Refusal, Replicated, Replicator, Store};
use silt_query::{QResult, QueryError};
use silt_raft::{
    Applied, Member, MemberInfo, MemberOptions, NodeId, Role, SnapshotView, StateMachine, Status,
};

use crate::optimes::{OpTime, Optimes};
use crate::raft_transport::MemberTransport;

/// The store as the group's state machine: every entry is applied by the store, with the
/// position (see the module's header).
struct StoreMachine {
    store: Arc<Store>,
    /// Set when an applied entry changed the users or roles (`RaftMember::take_auth_changed`).
    auth_changed: Arc<AtomicBool>,
    /// The optime of each applied entry, by index.
    optimes: Arc<Optimes>,
}

fn io_err(e: silt_collection::CollError) -> io::Error {
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
fn ready(mut s: Status) -> Status {
    s.writable = s.writable && s.applied_term == Some(s.term);
    s
}

/// How the store's commits reach the set's log: proposals to this member's Raft.
struct MemberReplicator {
    member: Arc<OnceLock<Member>>,
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
            .is_some_and(|m| ready(m.status()).writable)
    }
}

/// Fail the writes waiting for replication whenever this member stops being a writable
/// primary, so they release their locks and answer at once (11602) rather than at their
/// wait limit; their entries, if committed later, are applied like any other member's.
fn watch_primacy(member: Arc<OnceLock<Member>>, store: Arc<Store>, frozen: Arc<AtomicBool>) {
    let spawned = std::thread::Builder::new()
        .name("silt-primacy".into())
        .spawn(move || {
            let mut was = false;
            let mut electable = None;
            let mut last_takeover: Option<Instant> = None;
            loop {
                std::thread::sleep(Duration::from_millis(50));
                let Some(m) = member.get() else { continue };
                let s = ready(m.status());
                if s.role == Role::Shutdown {
                    return;
                }
                if was && !s.writable {
                    tracing::info!(term = s.term, "no longer primary: waiting writes fail");
                    store.abandon_proposals("is no longer primary");
                }
                was = s.writable;
                // A member with priority 0 (hidden ones among them) never campaigns, nor does
                // a frozen one.
                let mine = s
                    .members
                    .iter()
                    .find(|p| p.id == s.id)
                    .map(|p| p.info.clone());
                let want = mine
                    .as_ref()
                    .is_none_or(|i| i.priority_milli > 0 && !i.hidden)
                    && !frozen.load(Ordering::Acquire);
                if electable != Some(want) {
                    m.set_electable(want);
                    electable = Some(want);
                }
                if s.writable {
                    priority_takeover(m, &s, mine.as_ref(), &mut last_takeover);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the primacy watcher");
    }
}

/// On the primary: hand the role to a voter of higher priority whose log has caught up with
/// this member's, as mongod's priority takeover does (at most every 5 s).
fn priority_takeover(
    m: &Member,
    s: &Status,
    mine: Option<&MemberInfo>,
    last: &mut Option<Instant>,
) {
    let my_priority = mine.map_or(1000, |i| i.priority_milli);
    if last.is_some_and(|t| t.elapsed() < Duration::from_secs(5)) {
        return;
    }
    let better = s
        .members
        .iter()
        .filter(|p| p.voter && p.id != s.id && !p.info.hidden)
        .filter(|p| p.info.priority_milli > my_priority && p.matched == s.last_log_index)
        .max_by_key(|p| p.info.priority_milli);
    if let Some(p) = better {
        *last = Some(Instant::now());
        tracing::info!(
            to = p.id,
            "priority takeover: a member of higher priority caught up"
        );
        if let Err(e) = m.transfer_leadership(p.id) {
            tracing::info!(error = %e, "priority takeover failed");
        }
    }
}

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
    seen: Mutex<(u64, Option<Role>, bool)>,
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

/// `electionId` of term `t`: `7fffffff` then the term, big-endian.
fn election_id(term: u64) -> ObjectId {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    b[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(b)
}

/// A member as a replica-set config describes it.
struct ConfigMember {
    host: String,
    voter: bool,
    priority_milli: u32,
    hidden: bool,
    tags: BTreeMap<String, String>,
}

impl ConfigMember {
    fn info(&self) -> MemberInfo {
        MemberInfo {
            addr: self.host.clone(),
            priority_milli: self.priority_milli,
            hidden: self.hidden,
            tags: self.tags.clone(),
        }
    }
}

/// The members of a replica-set config by Raft id (`_id` + 1), checked as mongod checks them.
/// What siltd cannot honour is refused by name: arbiters (a Raft voter holds the log) and
/// delayed members (their reads would be older than the set's).
fn parse_members(config: &Document) -> QResult<BTreeMap<NodeId, ConfigMember>> {
    let bad = |m: String| QueryError::coded(93, "InvalidReplicaSetConfig", m);
    let Ok(members) = config.get_array("members") else {
        return Err(bad("the config has no members array".into()));
    };
    let mut out = BTreeMap::new();
    for m in members {
        let Bson::Document(m) = m else {
            return Err(bad("a member is not a document".into()));
        };
        let id = match m.get("_id") {
            Some(Bson::Int32(i)) if *i >= 0 => u64::from(i.unsigned_abs()),
            Some(Bson::Int64(i)) if *i >= 0 => i.unsigned_abs(),
            Some(Bson::Double(f)) if *f >= 0.0 && f.fract() == 0.0 && *f < 1e9 => {
                format!("{f:.0}").parse().unwrap_or(0)
            }
            _ => return Err(bad("a member's _id must be a non-negative integer".into())),
        };
        let host = m
            .get_str("host")
            .map_err(|_| bad("a member has no host".into()))?;
        let num = |k: &str| match m.get(k) {
            None => Some(1.0),
            Some(Bson::Int32(i)) => Some(f64::from(*i)),
            Some(Bson::Int64(i)) => i32::try_from(*i).ok().map(f64::from),
            Some(Bson::Double(f)) => Some(*f),
            _ => None,
        };
        let votes = num("votes").ok_or_else(|| bad("votes must be a number".into()))?;
        let priority = num("priority").ok_or_else(|| bad("priority must be a number".into()))?;
        let refuse = |what: &str| {
            Err(QueryError::coded(
                238,
                "NotImplemented",
                format!("member {host}: {what} is not supported by siltd's replica sets yet"),
            ))
        };
        if m.get_bool("arbiterOnly").unwrap_or(false) {
            return refuse("arbiterOnly");
        }
        let delayed = ["secondaryDelaySecs", "slaveDelay"]
            .iter()
            .any(|k| match m.get(*k) {
                None | Some(Bson::Int32(0) | Bson::Int64(0)) => false,
                Some(Bson::Double(f)) => *f != 0.0,
                Some(_) => true,
            });
        if delayed {
            return refuse("secondaryDelaySecs");
        }
        let hidden = m.get_bool("hidden").unwrap_or(false);
        if !(0.0..=1000.0).contains(&priority) {
            return Err(bad(format!(
                "member {host}: priority must be between 0 and 1000"
            )));
        }
        if votes != 0.0 && votes != 1.0 {
            return Err(bad(format!("member {host}: votes must be 0 or 1")));
        }
        if hidden && priority != 0.0 {
            return Err(bad(format!(
                "member {host}: priority must be 0 when hidden=true"
            )));
        }
        if votes == 0.0 && priority != 0.0 {
            return Err(bad(format!(
                "member {host}: priority must be 0 when non-voting (votes:0)"
            )));
        }
        // In range, so the rounded thousandths fit.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "priority is within 0..=1000"
        )]
        let priority_milli = (priority * 1000.0).round() as u32;
        let mut tags = BTreeMap::new();
        match m.get("tags") {
            None | Some(Bson::Null) => {}
            Some(Bson::Document(t)) => {
                for (k, v) in t {
                    let Bson::String(v) = v else {
                        return Err(bad(format!(
                            "member {host}: tags must be strings, {k} is not"
                        )));
                    };
                    tags.insert(k.clone(), v.clone());
                }
            }
            Some(_) => return Err(bad(format!("member {host}: tags must be a document"))),
        }
        let member = ConfigMember {
            host: host.to_string(),
            voter: votes != 0.0,
            priority_milli,
            hidden,
            tags,
        };
        if out.insert(id + 1, member).is_some() {
            return Err(bad(format!("two members have _id {id}")));
        }
    }
    Ok(out)
}

/// A member's `tags` as a document.
fn tags_doc(info: &MemberInfo) -> Document {
    info.tags
        .iter()
        .map(|(k, v)| (k.clone(), Bson::String(v.clone())))
        .collect()
}

/// A log position as a reply shows it: an `int64`, or null when there is none.
fn index_bson(v: Option<u64>) -> Bson {
    v.map_or(Bson::Null, |i| {
        Bson::Int64(i64::try_from(i).unwrap_or(i64::MAX))
    })
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
            seen: Mutex::new((0, None, false)),
            freezes: Arc::new(AtomicU64::new(0)),
            frozen: Arc::new(AtomicBool::new(false)),
            key,
            auth_changed: Arc::new(AtomicBool::new(false)),
            snapshot_every,
            optimes: Arc::default(),
            started: Instant::now(),
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
        watch_primacy(self.member.clone(), self.store.clone(), self.frozen.clone());
        tracing::info!(id, me = %self.me, "started as a member of a multi-member replica set");
        Ok(self.member.get_or_init(|| m))
    }

    /// `replSetInitiate` with `config`: true when this server is now a member of a
    /// multi-member set; false when the config names only this member (the one-member set it
    /// already is). A multi-member config is refused with `unsupported`'s reason when set.
    pub(crate) fn initiate(&self, config: &Document, unsupported: Option<&str>) -> QResult<bool> {
        let bad = |m: String| QueryError::coded(93, "InvalidReplicaSetConfig", m);
        if config.get_str("_id").ok() != Some(self.set.as_str()) {
            return Err(bad(format!(
                "Attempting to initiate a replica set with name {}, but command line reports {}; rejecting",
                config.get_str("_id").unwrap_or(""),
                self.set
            )));
        }
        let members = parse_members(config)?;
        let mine = members
            .iter()
            .find(|(_, m)| m.host == self.me)
            .map(|(id, _)| *id);
        let Some(mine) = mine else {
            return Err(QueryError::coded(
                93,
                "InvalidReplicaSetConfig",
                format!("No host described in new configuration with {{version: 1, term: 0}} for replica set {} maps to this node", self.set),
            ));
        };
        if members.get(&mine).is_some_and(|m| !m.voter) {
            return Err(bad("the member that initiates the set must vote".into()));
        }
        if members.len() == 1 {
            return Ok(false);
        }
        if let Some(why) = unsupported {
            return Err(QueryError::coded(238, "NotImplemented", why.to_string()));
        }
        let m = self
            .start(mine)
            .map_err(|e| QueryError::coded(8, "UnknownError", e.to_string()))?;
        // The set begins as this member alone, whose data (from before the set: no log entry
        // carries it) becomes the set's first snapshot, with the log before it purged. The
        // others then join as a reconfig adds members: as learners that start from that
        // snapshot (replacing what they held, as mongod's initial sync does), then voters.
        let only_me = BTreeMap::from([(mine, self.me.clone())]);
        m.initialize(&only_me).map_err(|e| {
            QueryError::coded(
                23,
                "AlreadyInitialized",
                format!("already initialized: {e}"),
            )
        })?;
        m.seed(Duration::from_secs(30)).map_err(replication_error)?;
        // mongod's first entry of a set, stamped with the initiator's clock (so that
        // `hello.lastWrite` has a date before the first write).
        if let Some(log) = self.store.oplog() {
            log.log(&silt_collection::oplog::Op::noop("initiating set"))
                .map_err(|e| QueryError::coded(8, "UnknownError", e.to_string()))?;
        }
        for (id, member) in members.iter().filter(|(id, _)| **id != mine) {
            m.add_learner(*id, member.info(), false)
                .map_err(replication_error)?;
        }
        if let Some(me) = members
            .get(&mine)
            .filter(|me| me.info() != MemberInfo::at(&self.me))
        {
            m.set_infos(BTreeMap::from([(mine, me.info())]))
                .map_err(replication_error)?;
        }
        // The members vote once a majority of them answer (joint consensus). As mongod's
        // initiate, the reply waits for them; one that cannot be reached makes it fail
        // (the change goes on, and completes when they answer).
        let cell = self.member.clone();
        let all: BTreeSet<NodeId> = members
            .iter()
            .filter(|(_, m)| m.voter)
            .map(|(id, _)| *id)
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Some(m) = cell.get() {
                let r = m.change_voters(all);
                match &r {
                    Ok(()) => tracing::info!("every initiated member votes"),
                    Err(e) => tracing::error!(
                        error = %e,
                        "the initiated members do not vote: run replSetReconfig"
                    ),
                }
                let _ = tx.send(r);
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(r) => r.map_err(replication_error)?,
            Err(_) => {
                return Err(QueryError::coded(
                    74,
                    "NodeNotFound",
                    "replSetInitiate quorum check failed: a majority of the members did not \
                     answer within 30 s (they become voters when they do)",
                ))
            }
        }
        Ok(true)
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
        let s = ready(self.member()?.status());
        let mut seen = self.seen.lock();
        let now = (s.term, Some(s.role), s.writable);
        if *seen != now {
            *seen = now;
            self.topology.fetch_add(1, Ordering::Relaxed);
        }
        Some(s)
    }

    /// `hello`'s replica-set fields, and whether this member is the writable primary; `None`
    /// while this server is not in a multi-member set.
    pub(crate) fn hello_fields(&self, d: &mut Document) -> Option<bool> {
        let s = self.status()?;
        let addr = |id: NodeId| {
            s.members
                .iter()
                .find(|p| p.id == id)
                .map(|p| p.addr.clone())
        };
        // As mongod: `hosts` the members that may become primary, `passives` the others
        // (priority 0, or not voting yet), hidden members in neither.
        let electable = |p: &&silt_raft::Peer| p.voter && p.info.priority_milli > 0;
        let hosts: Vec<Bson> = s
            .members
            .iter()
            .filter(|p| !p.info.hidden && electable(p))
            .map(|p| Bson::String(p.addr.clone()))
            .collect();
        let passives: Vec<Bson> = s
            .members
            .iter()
            .filter(|p| !p.info.hidden && !electable(p))
            .map(|p| Bson::String(p.addr.clone()))
            .collect();
        if let Some(me) = s.members.iter().find(|p| p.id == s.id) {
            if me.info.hidden {
                d.insert("hidden", true);
            }
            if !electable(&me) {
                d.insert("passive", true);
            }
            if !me.info.tags.is_empty() {
                d.insert("tags", tags_doc(&me.info));
            }
        }
        d.insert("hosts", hosts);
        if !passives.is_empty() {
            d.insert("passives", passives);
        }
        d.insert("setName", self.set.clone());
        d.insert("setVersion", 1);
        d.insert(
            "secondary",
            !s.writable && matches!(s.role, Role::Follower | Role::Learner),
        );
        if let Some(p) = s.leader.and_then(addr) {
            d.insert("primary", p);
        }
        d.insert("me", self.me.clone());
        // The newest applied entry (drivers compute a secondary's staleness from it).
        if let Some(log) = self.store.oplog() {
            let ts = log.visible();
            let term = i64::try_from(s.term).unwrap_or(i64::MAX);
            let date = bson::DateTime::from_millis(i64::from(ts.time) * 1000);
            d.insert(
                "lastWrite",
                doc! {
                    "opTime": { "ts": ts, "t": term },
                    "lastWriteDate": date,
                    "majorityOpTime": { "ts": ts, "t": term },
                    "majorityWriteDate": date,
                },
            );
        }
        if s.writable {
            d.insert("electionId", election_id(s.term));
        }
        Some(s.writable)
    }

    /// `hello.topologyVersion.counter`, as of the last look at the member.
    pub(crate) fn topology_counter(&self) -> i64 {
        self.topology.load(Ordering::Relaxed)
    }

    /// `hello.topologyVersion.counter` now (looking at the member first).
    pub(crate) fn topology_counter_now(&self) -> i64 {
        let _ = self.status();
        self.topology_counter()
    }

    /// `replSetGetStatus` of a multi-member set, `None` while this server is not in one. Each
    /// member's optime is that of its log position as this member knows it: its own applied
    /// entry; on the primary, each member's matched entry; elsewhere the primary's commit
    /// point, and `Timestamp(0, 0)` for the members it does not hear from.
    pub(crate) fn status_doc(&self) -> Option<Document> {
        let s = self.status()?;
        let state = |role: Role, writable: bool| match (role, writable) {
            (Role::Leader, true) => (1, "PRIMARY"),
            (Role::Leader, false) | (Role::Candidate, _) | (Role::Follower, _) => (2, "SECONDARY"),
            (Role::Learner, _) => (5, "STARTUP2"),
            (Role::Shutdown, _) => (8, "(not reachable/healthy)"),
        };
        let (my_state, _) = state(s.role, s.writable);
        let mut raft = doc! {
            "lastLogIndex": index_bson(s.last_log_index),
            "committedIndex": index_bson(s.committed),
            "appliedIndex": index_bson(s.applied),
            "snapshotIndex": index_bson(s.snapshot),
            "purgedIndex": index_bson(s.purged),
        };
        if let Some(b) = s.receiving_snapshot {
            // Catching up by another member's snapshot: how much of it has arrived.
            raft.insert("receivingSnapshotBytes", index_bson(Some(b)));
        }
        let voters = s.members.iter().filter(|p| p.voter).count();
        let majority = voters / 2 + 1;
        let applied = self.optimes.at(s.applied);
        let committed = self.optimes.at(s.committed);
        let leader_addr = s
            .leader
            .and_then(|l| s.members.iter().find(|p| p.id == l))
            .map(|p| p.addr.clone());
        // Every member but the primary follows the primary's log.
        let from_leader = match (leader_addr, s.leader) {
            (Some(a), Some(l)) => (a, i64::try_from(l).unwrap_or(i64::MAX) - 1),
            _ => (String::new(), -1i64),
        };
        let none = (String::new(), -1i64);
        let now = bson::DateTime::now();
        let members: Vec<Bson> = s
            .members
            .iter()
            .map(|p| {
                let me = p.id == s.id;
                let (st, name) = if me {
                    state(s.role, s.writable)
                } else if s.leader == Some(p.id) {
                    (1, "PRIMARY")
                } else if p.voter {
                    (2, "SECONDARY")
                } else {
                    (5, "STARTUP2")
                };
                let optime = if me {
                    applied
                } else if s.role == Role::Leader {
                    self.optimes.at(p.matched)
                } else if s.leader == Some(p.id) {
                    committed
                } else {
                    OpTime::NONE
                };
                let (source, source_id) = if st == 1 {
                    none.clone()
                } else {
                    from_leader.clone()
                };
                let mut m = doc! {
                    "_id": i64::try_from(p.id).unwrap_or(i64::MAX) - 1,
                    "name": p.addr.clone(),
                    "health": 1.0,
                    "state": st,
                    "stateStr": name,
                    "uptime": if me {
                        i64::try_from(self.started.elapsed().as_secs()).unwrap_or(i64::MAX)
                    } else {
                        0
                    },
                    "optime": optime.doc(),
                    "optimeDate": optime.date(),
                    "optimeDurable": optime.doc(),
                    "optimeDurableDate": optime.date(),
                    "lastAppliedWallTime": optime.date(),
                    "lastDurableWallTime": optime.date(),
                    "syncSourceHost": source,
                    "syncSourceId": source_id,
                    "infoMessage": "",
                    "configVersion": 1,
                    "configTerm": i64::try_from(s.term).unwrap_or(i64::MAX),
                    "self": me,
                };
                if !me {
                    m.insert("lastHeartbeat", now);
                    m.insert("lastHeartbeatRecv", now);
                    m.insert("pingMs", 0i64);
                    m.insert("lastHeartbeatMessage", "");
                }
                if let Some(i) = p.matched {
                    m.insert("raftMatchedIndex", i64::try_from(i).unwrap_or(i64::MAX));
                }
                Bson::Document(m)
            })
            .collect();
        let (source, source_id) = if my_state == 1 { none } else { from_leader };
        Some(doc! {
            "set": self.set.clone(),
            "date": now,
            "myState": my_state,
            "term": i64::try_from(s.term).unwrap_or(i64::MAX),
            "syncSourceHost": source,
            "syncSourceId": source_id,
            "heartbeatIntervalMillis": 200i64,
            "majorityVoteCount": crate::num::int32(majority),
            "writeMajorityCount": crate::num::int32(majority),
            "votingMembersCount": crate::num::int32(voters),
            "writableVotingMembersCount": crate::num::int32(voters),
            "optimes": {
                "lastCommittedOpTime": committed.doc(),
                "lastCommittedWallTime": committed.date(),
                "readConcernMajorityOpTime": committed.doc(),
                "appliedOpTime": applied.doc(),
                "durableOpTime": applied.doc(),
                "lastAppliedWallTime": applied.date(),
                "lastDurableWallTime": applied.date(),
            },
            "raft": raft,
            "members": members,
        })
    }

    /// `serverStatus.repl.raft` (and so `/metrics`): the term, this member's log, commit and
    /// apply positions, and on the primary each member's matched position and lag in entries.
    pub(crate) fn positions(&self) -> Option<Document> {
        let s = self.status()?;
        let mut members = Document::new();
        if s.role == Role::Leader {
            for p in &s.members {
                let lag = match (s.last_log_index, p.matched) {
                    (Some(last), Some(m)) => Some(last.saturating_sub(m)),
                    _ => None,
                };
                members.insert(
                    format!("m{}", p.id - 1),
                    doc! { "matchedIndex": index_bson(p.matched), "lagEntries": index_bson(lag) },
                );
            }
        }
        Some(doc! {
            "term": index_bson(Some(s.term)),
            "lastLogIndex": index_bson(s.last_log_index),
            "committedIndex": index_bson(s.committed),
            "appliedIndex": index_bson(s.applied),
            "snapshotIndex": index_bson(s.snapshot),
            "purgedIndex": index_bson(s.purged),
            "members": members,
        })
    }

    /// `replSetGetConfig.config.members` of a multi-member set, `None` while this server is
    /// not in one. Learners (members being added, or `votes: 0`) show as non-voting.
    pub(crate) fn config_members(&self) -> Option<Vec<Bson>> {
        let s = self.member()?.status();
        Some(
            s.members
                .iter()
                .map(|p| {
                    Bson::Document(doc! {
                        "_id": i64::try_from(p.id).unwrap_or(i64::MAX) - 1,
                        "host": p.addr.clone(),
                        "arbiterOnly": false,
                        "buildIndexes": true,
                        "hidden": p.info.hidden,
                        "priority": f64::from(p.info.priority_milli) / 1000.0,
                        "tags": tags_doc(&p.info),
                        "secondaryDelaySecs": 0i64,
                        "votes": i32::from(p.voter),
                    })
                })
                .collect(),
        )
    }

    /// `replSetStepDown`: hand the primary's role to a secondary whose log has caught up
    /// (waiting up to `catch_up` for one, unless `force`), and do not campaign for `secs`.
    pub(crate) fn step_down(&self, secs: u64, catch_up: Duration, force: bool) -> QResult<()> {
        let Some(m) = self.member() else {
            return Err(QueryError::coded(
                262,
                "ExceededTimeLimit",
                "No electable secondaries caught up: this is the set's only member",
            ));
        };
        if !m.status().writable {
            return Err(not_primary("step down"));
        }
        let deadline = Instant::now() + if force { Duration::ZERO } else { catch_up };
        let target = loop {
            let s = m.status();
            let mut others: Vec<_> = s
                .members
                .iter()
                .filter(|p| {
                    p.voter
                        && p.id != s.id
                        && p.matched.is_some()
                        && p.info.priority_milli > 0
                        && !p.info.hidden
                })
                .collect();
            others.sort_by_key(|p| std::cmp::Reverse(p.matched));
            if let Some(p) = others.iter().find(|p| p.matched == s.last_log_index) {
                break p.id;
            }
            if Instant::now() >= deadline {
                match others.first() {
                    Some(p) if force => break p.id,
                    _ => {
                        return Err(QueryError::coded(
                            262,
                            "ExceededTimeLimit",
                            "No electable secondaries caught up as of the step-down deadline",
                        ))
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.freeze_for(m, secs);
        m.transfer_leadership(target).map_err(replication_error)?;
        let until = Instant::now() + Duration::from_secs(10);
        while m.status().role == Role::Leader && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::info!(to = target, "stepped down");
        Ok(())
    }

    /// Do not campaign for `secs` seconds (0: campaign again now, if this member's priority
    /// allows; `watch_primacy` turns campaigning back on). A later freeze replaces an earlier
    /// one.
    fn freeze_for(&self, m: &Member, secs: u64) {
        let generation = self.freezes.fetch_add(1, Ordering::AcqRel) + 1;
        self.frozen.store(secs > 0, Ordering::Release);
        if secs == 0 {
            return;
        }
        m.set_electable(false);
        let (freezes, frozen) = (self.freezes.clone(), self.frozen.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            if freezes.load(Ordering::Acquire) == generation {
                frozen.store(false, Ordering::Release);
            }
        });
    }

    /// `replSetFreeze`: a secondary does not campaign for `secs` seconds (0 ends it).
    pub(crate) fn freeze(&self, secs: u64) -> QResult<Document> {
        let primary = || {
            QueryError::coded(
                95,
                "NotSecondary",
                "cannot freeze node when primary or running for election. state: Primary",
            )
        };
        let Some(m) = self.member() else {
            return Err(primary());
        };
        if m.status().role == Role::Leader {
            return Err(primary());
        }
        self.freeze_for(m, secs);
        Ok(if secs == 0 {
            doc! { "info": "unfreezing" }
        } else {
            Document::new()
        })
    }

    /// `replSetReconfig` on the primary: members added join as learners and vote once they
    /// have caught up (joint consensus); members removed stop voting, then leave.
    pub(crate) fn reconfig(&self, config: &Document) -> QResult<()> {
        let Some(m) = self.member() else {
            return Err(QueryError::coded(
                238,
                "NotImplemented",
                "a one-member set gets its members with replSetInitiate",
            ));
        };
        if config.get_str("_id").ok() != Some(self.set.as_str()) {
            return Err(QueryError::coded(
                93,
                "InvalidReplicaSetConfig",
                format!("the config's _id must be {}", self.set),
            ));
        }
        let s = m.status();
        if !s.writable {
            return Err(not_primary("reconfig"));
        }
        let want = parse_members(config)?;
        for p in &s.members {
            if want.get(&p.id).is_some_and(|w| w.host != p.addr) {
                return Err(QueryError::coded(
                    103,
                    "NewReplicaSetConfigurationIncompatible",
                    format!("member {} cannot change its host", p.id - 1),
                ));
            }
        }
        for (id, w) in &want {
            if !s.members.iter().any(|p| p.id == *id) {
                m.add_learner(*id, w.info(), true)
                    .map_err(replication_error)?;
            }
        }
        // New options of members already in the set (priority, hidden).
        let changed: BTreeMap<NodeId, MemberInfo> = s
            .members
            .iter()
            .filter_map(|p| Some((p.id, want.get(&p.id)?.info())))
            .filter(|(id, info)| s.members.iter().any(|p| p.id == *id && p.info != *info))
            .collect();
        if !changed.is_empty() {
            m.set_infos(changed).map_err(replication_error)?;
        }
        let voters: BTreeSet<NodeId> = want
            .iter()
            .filter(|(_, w)| w.voter)
            .map(|(id, _)| *id)
            .collect();
        if voters.is_empty() {
            return Err(QueryError::coded(
                93,
                "InvalidReplicaSetConfig",
                "a set needs a voting member",
            ));
        }
        let current: BTreeSet<NodeId> =
            s.members.iter().filter(|p| p.voter).map(|p| p.id).collect();
        if voters != current {
            m.change_voters(voters).map_err(replication_error)?;
        }
        let gone: BTreeSet<NodeId> = s
            .members
            .iter()
            .map(|p| p.id)
            .filter(|id| !want.contains_key(id))
            .collect();
        if !gone.is_empty() {
            m.remove(gone).map_err(replication_error)?;
        }
        Ok(())
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
        if !ready(m.status()).writable {
            return Err(QueryError::coded(
                10107,
                "NotWritablePrimary",
                "not primary",
            ));
        }
        Ok(())
    }

    /// Whether an applied entry changed the users or roles since the last call (the server
    /// then reads them again).
    pub(crate) fn take_auth_changed(&self) -> bool {
        self.auth_changed.load(Ordering::Acquire) && self.auth_changed.swap(false, Ordering::AcqRel)
    }

    /// Whether this server is a member of a multi-member set that is not its writable
    /// primary (it takes no writes of its own).
    pub(crate) fn follows(&self) -> bool {
        self.member().is_some_and(|m| !ready(m.status()).writable)
    }

    /// A linearizable read's condition: this member is primary, a quorum confirmed it
    /// within `limit`, and it applied what it had committed then.
    pub(crate) fn linearize(&self, limit: Duration) -> QResult<()> {
        let Some(m) = self.member() else {
            return Ok(());
        };
        if !ready(m.status()).writable {
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

#[cfg(test)]
mod tests {
    use super::election_id;

    #[test]
    fn election_ids_order_by_term() {
        assert_eq!(election_id(1).to_hex(), "7fffffff0000000000000001");
        assert!(election_id(2).bytes() > election_id(1).bytes());
    }
}
