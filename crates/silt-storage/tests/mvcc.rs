//! Model-based property test of MVCC: several transactions and snapshots interleaved at random
//! with writes outside transactions, against a model of the committed state, of what each
//! snapshot saw when it was taken and of each transaction's own view. Tiny nodes keep messages
//! moving through buffers (provisional versions, commits and aborts reach leaves at any time),
//! and checkpoints, clean reopens, crashes and power losses (on the simulated disk) come in
//! between: afterwards the committed state must be what the model held after some prefix of
//! the commits since the last durable point, with every unfinished transaction gone.
//!
//! The test also checks the write-conflict rule the layer above relies on: a write conflicts
//! exactly when another live transaction wrote the key, or (for a transaction) a version of
//! the key was committed after the transaction's snapshot (first committer wins). A write that
//! conflicts is not made, as the layer above would refuse it.

#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound::{self, *};
use std::path::PathBuf;
use std::sync::Arc;

mod common;

use common::tiny_opts;
use proptest::prelude::*;
use silt_storage::vfs::sim::SimFs;
use silt_storage::{
    Dict, Env, EnvOptions, Snapshot, Txn, UpdateOutcome, UpdateRegistry, WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const ADD: u32 = 1;

fn add(old: Option<&[u8]>, arg: &[u8]) -> Vec<u8> {
    let cur = old
        .and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0);
    let a = u64::from_le_bytes(arg.try_into().unwrap_or([0; 8]));
    cur.wrapping_add(a).to_le_bytes().to_vec()
}

fn registry() -> UpdateRegistry {
    let mut r = UpdateRegistry::new();
    r.register(ADD, |_k, old, arg| UpdateOutcome::Set(add(old, arg)));
    r
}

/// One write.
#[derive(Debug, Clone)]
enum W {
    Put(u16, Vec<u8>),
    PutIfAbsent(u16, Vec<u8>),
    Delete(u16),
    Add(u16, u64),
}

impl W {
    fn key(&self) -> Vec<u8> {
        let k = match self {
            W::Put(k, _) | W::PutIfAbsent(k, _) | W::Delete(k) | W::Add(k, _) => *k,
        };
        key(k)
    }

    fn apply(&self, m: &mut Model) {
        let k = self.key();
        match self {
            W::Put(_, v) => {
                m.insert(k, v.clone());
            }
            W::PutIfAbsent(_, v) => {
                m.entry(k).or_insert(v.clone());
            }
            W::Delete(_) => {
                m.remove(&k);
            }
            W::Add(_, a) => {
                let v = add(m.get(&k).map(Vec::as_slice), &a.to_le_bytes());
                m.insert(k, v);
            }
        }
    }

    fn add_to(&self, b: &mut WriteBatch, d: &Dict) {
        let k = self.key();
        match self {
            W::Put(_, v) => b.put(d, &k, v).unwrap(),
            W::PutIfAbsent(_, v) => b.put_if_absent(d, &k, v).unwrap(),
            W::Delete(_) => b.delete(d, &k).unwrap(),
            W::Add(_, a) => b.update(d, &k, ADD, &a.to_le_bytes()).unwrap(),
        }
    }
}

/// Who reads.
#[derive(Debug, Clone, Copy)]
enum Reader {
    Latest,
    Snap(usize),
    Txn(usize),
}

#[derive(Debug, Clone)]
enum Op {
    /// Writes outside a transaction, as one batch.
    Auto(Vec<W>),
    Begin(usize),
    /// Writes of a transaction, as one batch.
    Tx(usize, Vec<W>),
    Commit(usize, bool),
    Abort(usize),
    Snap(usize),
    DropSnap(usize),
    Read(Reader, u16, u16),
    Optimize,
    Checkpoint,
    Sync,
    Reopen,
    Crash,
    PowerLoss(u64),
}

const TXNS: usize = 3;
const SNAPS: usize = 2;

fn key(k: u16) -> Vec<u8> {
    let mut v = b"mvcc-key/".to_vec();
    v.extend_from_slice(&k.to_be_bytes());
    v
}

fn w() -> impl Strategy<Value = W> {
    // Hot keys, where transactions meet, and a wider range that grows the tree.
    let k = prop_oneof![0u16..40, 0u16..400];
    let val = prop::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        5 => (k.clone(), val.clone()).prop_map(|(k, v)| W::Put(k, v)),
        1 => (k.clone(), val).prop_map(|(k, v)| W::PutIfAbsent(k, v)),
        2 => k.clone().prop_map(W::Delete),
        2 => (k, 1u64..9).prop_map(|(k, a)| W::Add(k, a)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let ws = || prop::collection::vec(w(), 1..4);
    let t = 0..TXNS;
    let s = 0..SNAPS;
    let reader = prop_oneof![
        Just(Reader::Latest),
        (0..SNAPS).prop_map(Reader::Snap),
        (0..TXNS).prop_map(Reader::Txn),
    ];
    prop_oneof![
        20 => ws().prop_map(Op::Auto),
        6 => t.clone().prop_map(Op::Begin),
        25 => (t.clone(), ws()).prop_map(|(t, w)| Op::Tx(t, w)),
        5 => (t.clone(), any::<bool>()).prop_map(|(t, d)| Op::Commit(t, d)),
        2 => t.prop_map(Op::Abort),
        3 => s.clone().prop_map(Op::Snap),
        1 => s.prop_map(Op::DropSnap),
        12 => (reader, 0u16..400, 0u16..400).prop_map(|(r, a, b)| Op::Read(r, a.min(b), a.max(b) + 1)),
        1 => Just(Op::Optimize),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Sync),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => any::<u64>().prop_map(Op::PowerLoss),
    ]
}

fn opts() -> EnvOptions {
    EnvOptions {
        log_file_bytes: 16 << 10,
        ..tiny_opts()
    }
}

struct TxState {
    txn: Txn,
    begin_seq: u64,
    view: Model,
    wrote: BTreeSet<Vec<u8>>,
}

/// The model: the committed state, when each key last got a committed version, the live
/// transactions and snapshots with what they see.
struct World {
    committed: Model,
    seq: u64,
    touched: HashMap<Vec<u8>, u64>,
    txns: Vec<Option<TxState>>,
    snaps: Vec<Option<(Snapshot, Model)>>,
    /// The committed state at the last point that made everything durable, and after each
    /// commit since.
    durable: Model,
    since: Vec<Model>,
    ops_since: Vec<String>,
}

impl World {
    fn new() -> World {
        World {
            committed: Model::new(),
            seq: 0,
            touched: HashMap::new(),
            txns: (0..TXNS).map(|_| None).collect(),
            snaps: (0..SNAPS).map(|_| None).collect(),
            durable: Model::new(),
            since: Vec::new(),
            ops_since: Vec::new(),
        }
    }

    /// Whether another live transaction than `me` wrote `k`.
    fn written_by_other(&self, k: &[u8], me: Option<usize>) -> bool {
        self.txns
            .iter()
            .enumerate()
            .any(|(i, t)| Some(i) != me && t.as_ref().is_some_and(|t| t.wrote.contains(k)))
    }

    fn committed_event(&mut self) {
        self.since.push(self.committed.clone());
    }

    fn all_durable(&mut self) {
        self.durable = self.committed.clone();
        self.since.clear();
        self.ops_since.clear();
    }

    /// Forget every transaction and snapshot (their environment is gone).
    fn lose_handles(&mut self) {
        for t in &mut self.txns {
            *t = None;
        }
        for s in &mut self.snaps {
            *s = None;
        }
    }
}

/// A differing key (its last two bytes) with its value on each side.
type Diff = (Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);

fn diff(a: &Model, b: &Model) -> Vec<Diff> {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            (
                k[k.len() - 2..].to_vec(),
                a.get(k).cloned(),
                b.get(k).cloned(),
            )
        })
        .collect()
}

fn bounds(a: u16, b: u16) -> (Vec<u8>, Vec<u8>) {
    (key(a), key(b))
}

fn check_read(d: &Dict, world: &World, r: Reader, a: u16, b: u16) {
    let (lo, hi) = bounds(a, b);
    let (model, snap): (&Model, Option<&Snapshot>) = match r {
        Reader::Latest => (&world.committed, None),
        Reader::Snap(i) => match &world.snaps[i] {
            Some((s, m)) => (m, Some(s)),
            None => return,
        },
        Reader::Txn(i) => match &world.txns[i] {
            Some(t) => (&t.view, Some(t.txn.snapshot())),
            None => return,
        },
    };
    let want: Vec<_> = model
        .range::<Vec<u8>, _>((Included(&lo), Excluded(&hi)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let (l, h): (Bound<&[u8]>, Bound<&[u8]>) = (Included(&lo), Excluded(&hi));
    let (got, n, one) = match snap {
        None => (
            d.range(l, h).unwrap(),
            d.count_range(l, h).unwrap(),
            d.get(&lo).unwrap(),
        ),
        Some(s) => (
            d.range_at(l, h, s).unwrap(),
            d.count_range_at(l, h, s).unwrap(),
            d.get_at(&lo, s).unwrap(),
        ),
    };
    assert_eq!(got, want, "{r:?} range {a}..{b}");
    assert_eq!(n as usize, want.len(), "{r:?} count {a}..{b}");
    assert_eq!(one, model.get(&lo).cloned(), "{r:?} get {a}");
    // A cursor reads the same, stepping across basements.
    if let Some(s) = snap {
        let mut c = d.cursor_at(l, h, s);
        let mut all = Vec::new();
        while let Some(e) = c.next().unwrap() {
            all.push(e);
        }
        assert_eq!(all, want, "{r:?} cursor {a}..{b}");
    }
}

fn run(ops: Vec<Op>) {
    let sim = SimFs::new();
    let dir = PathBuf::from("/sim/mvcc");
    let o = opts();
    let open = || Env::open_on(Arc::new(sim.clone()), &dir, o.clone(), registry()).unwrap();
    let mut env = Some(open());
    let mut d = env.as_ref().unwrap().create_dict("t").unwrap();
    env.as_ref().unwrap().checkpoint().unwrap();
    let mut world = World::new();
    for op in ops {
        world.ops_since.push(format!("{op:?}"));
        let e = env.as_ref().unwrap();
        match op {
            Op::Auto(ws) => {
                let keys: BTreeSet<Vec<u8>> = ws.iter().map(W::key).collect();
                let model_conflict = keys.iter().any(|k| world.written_by_other(k, None));
                let engine_conflict = keys.iter().any(|k| d.write_conflict(k, None).unwrap());
                assert_eq!(engine_conflict, model_conflict, "conflict of {ws:?}");
                if model_conflict {
                    continue;
                }
                let mut b = WriteBatch::new();
                for w in &ws {
                    w.add_to(&mut b, &d);
                }
                b.commit().unwrap();
                for w in &ws {
                    let k = w.key();
                    let before = world.committed.get(&k).cloned();
                    w.apply(&mut world.committed);
                    if world.committed.get(&k) != before.as_ref() {
                        world.seq += 1;
                        world.touched.insert(k, world.seq);
                    }
                }
                world.committed_event();
            }
            Op::Begin(i) => {
                if world.txns[i].is_none() {
                    world.txns[i] = Some(TxState {
                        txn: e.begin().unwrap(),
                        begin_seq: world.seq,
                        view: world.committed.clone(),
                        wrote: BTreeSet::new(),
                    });
                }
            }
            Op::Tx(i, ws) => {
                let Some(t) = &world.txns[i] else { continue };
                let keys: BTreeSet<Vec<u8>> = ws.iter().map(W::key).collect();
                let model_conflict = keys.iter().any(|k| {
                    world.written_by_other(k, Some(i))
                        || world.touched.get(k).is_some_and(|s| *s > t.begin_seq)
                });
                let engine_conflict = keys
                    .iter()
                    .any(|k| d.write_conflict(k, Some(&t.txn)).unwrap());
                assert_eq!(
                    engine_conflict, model_conflict,
                    "conflict of txn {i}: {ws:?}"
                );
                if model_conflict {
                    continue;
                }
                let mut b = WriteBatch::new();
                for w in &ws {
                    w.add_to(&mut b, &d);
                }
                b.commit_in(&t.txn).unwrap();
                let t = world.txns[i].as_mut().unwrap();
                for w in &ws {
                    w.apply(&mut t.view);
                    t.wrote.insert(w.key());
                }
            }
            Op::Commit(i, durable) => {
                let Some(t) = world.txns[i].take() else {
                    continue;
                };
                t.txn.commit(durable).unwrap();
                for k in &t.wrote {
                    match t.view.get(k) {
                        Some(v) => world.committed.insert(k.clone(), v.clone()),
                        None => world.committed.remove(k),
                    };
                    world.seq += 1;
                    world.touched.insert(k.clone(), world.seq);
                }
                world.committed_event();
                if durable {
                    world.all_durable();
                }
            }
            Op::Abort(i) => {
                if let Some(t) = world.txns[i].take() {
                    t.txn.abort().unwrap();
                }
            }
            Op::Snap(i) => world.snaps[i] = Some((e.snapshot(), world.committed.clone())),
            Op::DropSnap(i) => world.snaps[i] = None,
            Op::Read(r, a, b) => check_read(&d, &world, r, a, b),
            Op::Optimize => d.optimize().unwrap(),
            Op::Checkpoint => {
                e.checkpoint().unwrap();
                world.all_durable();
            }
            Op::Sync => {
                e.sync_log().unwrap();
                world.all_durable();
            }
            Op::Reopen | Op::Crash | Op::PowerLoss(_) => {
                drop(d);
                let old = env.take().unwrap();
                match op {
                    Op::Reopen => old.close().unwrap(),
                    _ => old.simulate_crash(),
                }
                // The handles of the old environment go now (their aborts cannot run).
                world.lose_handles();
                if let Op::PowerLoss(seed) = op {
                    sim.power_loss(seed);
                }
                env = Some(open());
                d = env.as_ref().unwrap().open_dict("t").unwrap();
                let got: Model = d.range(Unbounded, Unbounded).unwrap().into_iter().collect();
                if matches!(op, Op::PowerLoss(_)) {
                    let ok = got == world.durable || world.since.contains(&got);
                    assert!(
                        ok,
                        "after a power loss the contents ({} keys) are not the committed \
                         state after any prefix of the {} commits since the last durable point; \
                         differences from the durable state: {:?}; ops since: {:?}",
                        got.len(),
                        world.since.len(),
                        diff(&world.durable, &got),
                        world.ops_since
                    );
                    world.committed = got;
                } else {
                    assert_eq!(got, world.committed, "after {op:?}");
                }
                world.all_durable();
            }
        }
    }
    if std::env::var("MVCC_STATS").is_ok() {
        eprintln!("seq {} keys {}", world.seq, world.committed.len());
    }
    for t in world.txns.iter_mut() {
        if let Some(t) = t.take() {
            t.txn.abort().unwrap();
        }
    }
    world.snaps.clear();
    let want: Vec<_> = world
        .committed
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(
        d.range(Unbounded, Unbounded).unwrap(),
        want,
        "final contents"
    );
    d.optimize().unwrap();
    assert_eq!(
        d.stats().rows as usize,
        want.len(),
        "row estimate after optimize"
    );
    assert_eq!(
        d.range(Unbounded, Unbounded).unwrap(),
        want,
        "after optimize"
    );
    drop(d);
    env.take().unwrap().close().unwrap();
    let report = silt_storage::inspect::verify_dir_on(&sim, &dir).unwrap();
    assert!(report.errors.is_empty(), "verify: {:?}", report.errors);
}

proptest! {
    // PROPTEST_CASES overrides the count for longer searches.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn mvcc_against_a_model(ops in prop::collection::vec(op(), 1..700)) {
        run(ops);
    }
}

/// A reader's snapshot survives everything the writers do, including the garbage collection
/// of flushes and checkpoints, and is released when dropped.
#[test]
fn a_long_snapshot_keeps_its_view_while_writers_go_on() {
    let sim = SimFs::new();
    let env = Env::open_on(Arc::new(sim), "/sim/long", opts(), registry()).unwrap();
    let d = env.create_dict("t").unwrap();
    for k in 0..300u16 {
        d.put(&key(k), b"v0").unwrap();
    }
    let snap = env.snapshot();
    for round in 1..5u8 {
        for k in 0..300u16 {
            d.put(&key(k), &[b'v', b'0' + round]).unwrap();
        }
        d.delete(&key(round.into())).unwrap();
        env.checkpoint().unwrap();
        d.optimize().unwrap();
    }
    let all = d.range_at(Unbounded, Unbounded, &snap).unwrap();
    assert_eq!(all.len(), 300);
    assert!(all.iter().all(|(_, v)| v == b"v0"));
    assert_eq!(d.range(Unbounded, Unbounded).unwrap().len(), 299);
    assert_eq!(env.stats().snapshots, 1);
    drop(snap);
    assert_eq!(env.stats().snapshots, 0);
    // With no snapshot left, the next flushes and checkpoint collect the old versions.
    for k in 0..300u16 {
        d.put(&key(k), b"last").unwrap();
    }
    d.optimize().unwrap();
    env.checkpoint().unwrap();
    assert!(d
        .range(Unbounded, Unbounded)
        .unwrap()
        .iter()
        .all(|(_, v)| v == b"last"));
}
