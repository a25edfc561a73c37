//! A simulation of the group in one process: members on real Raft logs and real state
//! machines (engine environments in temporary directories), joined by an in-memory transport
//! that the test cuts, heals and delays. Faults are chosen by a seed (`SILT_RAFT_SEEDS`, a
//! count, default 3; `SILT_RAFT_SEED` runs one). At the end the invariants of Raft are
//! checked over our state machine: at most one leader per term, every member applied the
//! same entries at the same indexes, and every acknowledged proposal was applied exactly
//! once (a proposal whose outcome was unknown at most once).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use silt_raft::{
    Applied, Member, MemberInfo, MemberOptions, NodeId, ProposeError, Role, SnapshotView,
    StateMachine, Transport,
};
use silt_storage::{Dict, Env, EnvOptions, SyncPolicy, WriteBatch};

// ---------------------------------------------------------------------------------------
// A state machine that records what it applied: `a` + index -> command, and its position.

struct Recorder {
    env: Env,
    dict: Dict,
}

const POS: &[u8] = b"pos";

fn applied_key(index: u64) -> Vec<u8> {
    let mut k = b"a".to_vec();
    k.extend_from_slice(&index.to_be_bytes());
    k
}

fn storage(e: silt_storage::Error) -> io::Error {
    io::Error::other(e)
}

impl Recorder {
    fn open(dir: &Path) -> Recorder {
        let opts = EnvOptions {
            cache_bytes: 8 << 20,
            node_bytes: 256 << 10,
            sync: SyncPolicy::Never,
            ..EnvOptions::default()
        };
        let env = Env::open(dir, opts).expect("opens");
        let dict = env.open_or_create("sm").expect("dict");
        Recorder { env, dict }
    }

    /// Index -> command of every entry that carried one.
    fn applied(&self) -> BTreeMap<u64, Vec<u8>> {
        let mut cur = self
            .dict
            .cursor(Bound::Included(&b"a"[..]), Bound::Excluded(&b"b"[..]));
        let mut out = BTreeMap::new();
        while let Some((k, v)) = cur.next().expect("reads") {
            let i = u64::from_be_bytes(k[1..9].try_into().expect("8 bytes"));
            out.insert(i, v);
        }
        out
    }
}

impl StateMachine for Recorder {
    fn position(&self) -> io::Result<Option<Vec<u8>>> {
        self.dict.get(POS).map_err(storage)
    }

    fn apply(&self, entry: Applied<'_>, position: &[u8]) -> io::Result<Vec<u8>> {
        let mut b = WriteBatch::new();
        if let Some(c) = entry.command {
            b.put(&self.dict, &applied_key(entry.index), c)
                .map_err(storage)?;
        }
        b.put(&self.dict, POS, position).map_err(storage)?;
        b.commit().map_err(storage)?;
        Ok(entry.index.to_be_bytes().to_vec())
    }

    fn view(&self) -> io::Result<Box<dyn SnapshotView>> {
        let snap = self.dict.snapshot();
        let position = self
            .dict
            .get_at(POS, &snap)
            .map_err(storage)?
            .unwrap_or_default();
        self.env.sync_log().map_err(storage)?;
        Ok(Box::new(RecorderView {
            dict: self.dict.clone(),
            snap,
            position,
        }))
    }

    fn install(&self, position: &[u8], data: &Path) -> io::Result<()> {
        let data = std::fs::read(data)?;
        let mut b = WriteBatch::new();
        let mut cur = self
            .dict
            .cursor(Bound::Included(&b"a"[..]), Bound::Excluded(&b"b"[..]));
        while let Some((k, _)) = cur.next().map_err(storage)? {
            b.delete(&self.dict, &k).map_err(storage)?;
        }
        let mut parts = Vec::new();
        let mut rest = data.as_slice();
        while rest.len() >= 4 {
            let n = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            parts.push(&rest[4..4 + n]);
            rest = &rest[4 + n..];
        }
        for kv in parts.chunks(2) {
            b.put(&self.dict, kv[0], kv[1]).map_err(storage)?;
        }
        b.put(&self.dict, POS, position).map_err(storage)?;
        b.commit().map_err(storage)?;
        self.env.sync_log().map_err(storage)
    }
}

/// The recorder as of one position.
struct RecorderView {
    dict: Dict,
    snap: silt_storage::Snapshot,
    position: Vec<u8>,
}

impl SnapshotView for RecorderView {
    fn position(&self) -> &[u8] {
        &self.position
    }

    fn write_to(self: Box<Self>, out: &mut dyn io::Write) -> io::Result<()> {
        let mut cur = self.dict.cursor_at(
            Bound::Included(&b"a"[..]),
            Bound::Excluded(&b"b"[..]),
            &self.snap,
        );
        while let Some((k, v)) = cur.next().map_err(storage)? {
            for part in [&k, &v] {
                out.write_all(&u32::try_from(part.len()).expect("small").to_le_bytes())?;
                out.write_all(part)?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The in-memory network.

#[derive(Default)]
struct Net {
    members: RwLock<HashMap<NodeId, Arc<Member>>>,
    /// Links that drop every message (both directions are listed when cut both ways).
    cut: Mutex<HashSet<(NodeId, NodeId)>>,
}

struct Link {
    from: NodeId,
    net: Arc<Net>,
}

impl Transport for Link {
    fn call(
        &self,
        target: NodeId,
        _addr: &str,
        request: &[u8],
        timeout: Duration,
    ) -> io::Result<Vec<u8>> {
        if self.net.cut.lock().contains(&(self.from, target)) {
            std::thread::sleep(timeout.min(Duration::from_millis(20)));
            return Err(io::Error::new(io::ErrorKind::TimedOut, "cut"));
        }
        let m = self.net.members.read().get(&target).cloned();
        let Some(m) = m else {
            return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "down"));
        };
        let answer = m.handle(request)?;
        if self.net.cut.lock().contains(&(target, self.from)) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "cut on the way back",
            ));
        }
        Ok(answer)
    }
}

struct Cluster {
    net: Arc<Net>,
    root: PathBuf,
    opts: MemberOptions,
    recorders: Mutex<HashMap<NodeId, Arc<Recorder>>>,
    /// (term, leader) seen by any member's status.
    leaders: Mutex<BTreeMap<u64, BTreeSet<NodeId>>>,
}

impl Cluster {
    fn new(root: &Path) -> Cluster {
        Cluster {
            net: Arc::new(Net::default()),
            root: root.to_path_buf(),
            opts: MemberOptions {
                heartbeat: Duration::from_millis(50),
                election_timeout: (Duration::from_millis(300), Duration::from_millis(600)),
                snapshot_every: 60,
                keep_behind_snapshot: 10,
                log_cache_bytes: 8 << 20,
            },
            recorders: Mutex::new(HashMap::new()),
            leaders: Mutex::new(BTreeMap::new()),
        }
    }

    fn addr(id: NodeId) -> String {
        format!("sim:{id}")
    }

    fn start(&self, id: NodeId) {
        let rec = Arc::new(Recorder::open(&self.root.join(format!("sm{id}"))));
        let link = Arc::new(Link {
            from: id,
            net: self.net.clone(),
        });
        let m = Member::start(
            id,
            &self.root.join(format!("log{id}")),
            &self.opts,
            rec.clone(),
            link,
        )
        .expect("member starts");
        self.recorders.lock().insert(id, rec);
        self.net.members.write().insert(id, Arc::new(m));
    }

    fn stop(&self, id: NodeId) {
        let m = self.net.members.write().remove(&id);
        if let Some(m) = m {
            m.shutdown();
        }
        self.recorders.lock().remove(&id);
    }

    fn member(&self, id: NodeId) -> Option<Arc<Member>> {
        self.net.members.read().get(&id).cloned()
    }

    fn ids(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.net.members.read().keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Record who claims to lead in which term; return the writable leader, if one.
    fn observe(&self) -> Option<NodeId> {
        let mut writable = None;
        for id in self.ids() {
            let Some(m) = self.member(id) else { continue };
            let s = m.status();
            if s.role == Role::Leader {
                self.leaders.lock().entry(s.term).or_default().insert(id);
                if s.writable {
                    writable = Some(id);
                }
            }
        }
        writable
    }

    fn wait_leader(&self, within: Duration) -> NodeId {
        let start = Instant::now();
        loop {
            if let Some(l) = self.observe() {
                return l;
            }
            assert!(
                start.elapsed() < within,
                "no writable leader within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn isolate(&self, id: NodeId) {
        let mut cut = self.cut_all();
        for other in self.ids() {
            if other != id {
                cut.insert((id, other));
                cut.insert((other, id));
            }
        }
        *self.net.cut.lock() = cut;
    }

    fn cut_all(&self) -> HashSet<(NodeId, NodeId)> {
        self.net.cut.lock().clone()
    }

    fn heal(&self) {
        self.net.cut.lock().clear();
    }
}

/// What the client saw of each proposal.
#[derive(Default)]
struct Oracle {
    acked: Vec<Vec<u8>>,
    unknown: Vec<Vec<u8>>,
}

fn client(cluster: &Cluster, stop: &AtomicBool, oracle: &Mutex<Oracle>, seed: u64) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Some(leader) = cluster.observe() else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let Some(m) = cluster.member(leader) else {
            continue;
        };
        let cmd = format!("s{seed}-c{n}").into_bytes();
        n += 1;
        match m.propose(cmd.clone(), Duration::from_secs(2)) {
            Ok(_) => oracle.lock().acked.push(cmd),
            Err(ProposeError::NotLeader { .. }) => {}
            Err(_) => oracle.lock().unknown.push(cmd),
        }
    }
}

fn run_seed(seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::new(dir.path());
    let mut rng = SmallRng::seed_from_u64(seed);
    for id in 1..=3 {
        cluster.start(id);
    }
    let voters: BTreeMap<NodeId, String> = (1..=3).map(|i| (i, Cluster::addr(i))).collect();
    cluster
        .member(1)
        .expect("up")
        .initialize(&voters)
        .expect("initializes");
    cluster.wait_leader(Duration::from_secs(10));

    let stop = AtomicBool::new(false);
    let oracle = Mutex::new(Oracle::default());
    std::thread::scope(|s| {
        s.spawn(|| client(&cluster, &stop, &oracle, seed));
        for _round in 0..4 {
            std::thread::sleep(Duration::from_millis(rng.gen_range(200..600)));
            let leader = cluster.wait_leader(Duration::from_secs(10));
            let fault = rng.gen_range(0..3);
            eprintln!("  seed {seed}: leader {leader}, fault {fault}");
            match fault {
                // Isolate the leader: the others elect; it must stop taking proposals.
                0 => {
                    cluster.isolate(leader);
                    std::thread::sleep(Duration::from_millis(1500));
                    let s = cluster.member(leader).expect("up").status();
                    assert!(!s.writable, "an isolated leader stays writable: {s:?}");
                    cluster.heal();
                }
                // Stop the leader and start it again from its log.
                1 => {
                    cluster.stop(leader);
                    std::thread::sleep(Duration::from_millis(rng.gen_range(300..1200)));
                    cluster.start(leader);
                }
                // Stop a follower for a while.
                _ => {
                    let f = *cluster
                        .ids()
                        .iter()
                        .find(|&&i| i != leader)
                        .expect("a follower");
                    cluster.stop(f);
                    std::thread::sleep(Duration::from_millis(rng.gen_range(300..1200)));
                    cluster.start(f);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
    });

    // A member added now, behind the purged log, catches up by a snapshot.
    let leader = cluster.wait_leader(Duration::from_secs(10));
    let lm = cluster.member(leader).expect("up");
    for i in 0..150 {
        lm.propose(
            format!("s{seed}-tail{i}").into_bytes(),
            Duration::from_secs(5),
        )
        .expect("a healthy group commits");
        oracle
            .lock()
            .acked
            .push(format!("s{seed}-tail{i}").into_bytes());
    }
    lm.snapshot_now().expect("snapshots");
    cluster.start(4);
    lm.add_learner(4, MemberInfo::at(&Cluster::addr(4)), true)
        .expect("learner catches up");
    lm.change_voters((1..=4).collect())
        .expect("becomes a voter");

    // Everyone applies everything the leader committed.
    let last = lm.status().committed.expect("something committed");
    for id in cluster.ids() {
        let m = cluster.member(id).expect("up");
        assert!(
            m.wait_applied(last, Duration::from_secs(20)),
            "member {id} did not apply {last}"
        );
    }
    let st = cluster.member(4).expect("up").status();
    assert!(
        st.snapshot.is_some(),
        "the new member installed no snapshot: {st:?}"
    );

    // State-machine safety: the same command at the same index everywhere.
    let logs: BTreeMap<NodeId, BTreeMap<u64, Vec<u8>>> = cluster
        .recorders
        .lock()
        .iter()
        .map(|(id, r)| (*id, r.applied()))
        .collect();
    let first = logs.values().next().expect("members").clone();
    for (id, l) in &logs {
        assert_eq!(
            l,
            &first,
            "member {id} applied other entries than member {:?}",
            logs.keys().next()
        );
    }
    // The client oracle: acknowledged exactly once, unknown at most once, nothing else.
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for c in first.values() {
        *counts.entry(c.as_slice()).or_default() += 1;
    }
    let oracle = oracle.into_inner();
    for c in &oracle.acked {
        assert_eq!(
            counts.get(c.as_slice()),
            Some(&1),
            "acknowledged {:?} applied other than once",
            String::from_utf8_lossy(c)
        );
    }
    for c in &oracle.unknown {
        assert!(counts.get(c.as_slice()).copied().unwrap_or(0) <= 1);
    }
    let known: HashSet<&[u8]> = oracle
        .acked
        .iter()
        .chain(&oracle.unknown)
        .map(Vec::as_slice)
        .collect();
    for c in first.values() {
        assert!(
            known.contains(c.as_slice()),
            "applied a command nobody proposed"
        );
    }
    // Election safety.
    for (term, ls) in cluster.leaders.lock().iter() {
        assert!(ls.len() <= 1, "term {term} had leaders {ls:?}");
    }
    eprintln!(
        "  seed {seed}: {} acknowledged, {} unknown, {} applied, terms {:?}",
        oracle.acked.len(),
        oracle.unknown.len(),
        first.len(),
        cluster.leaders.lock().keys().collect::<Vec<_>>()
    );
    assert!(
        oracle.acked.len() > 150,
        "the client got few writes through: {}",
        oracle.acked.len()
    );
    for id in cluster.ids() {
        cluster.stop(id);
    }
}

#[test]
fn the_group_keeps_every_acknowledged_command_through_faults() {
    let seeds: Vec<u64> = match std::env::var("SILT_RAFT_SEED") {
        Ok(s) => vec![s.parse().expect("a seed")],
        Err(_) => {
            let n = std::env::var("SILT_RAFT_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(3);
            (1..=n).collect()
        }
    };
    for seed in seeds {
        eprintln!("seed {seed}");
        run_seed(seed);
    }
}
