//! Model-based property test: random operations against the engine and a `BTreeMap`, with tiny
//! nodes so that trees get deep and flush, split and merge constantly, a cache far smaller than
//! the data, and checkpoints, clean reopens and simulated crashes in the middle.
//!
//! The same operations also run on a simulated disk (`vfs::sim::SimFs`) that loses power:
//! afterwards the contents must be what the model held after some prefix of the operations
//! since the last point that made everything durable (a log sync, a checkpoint, a clean
//! close): nothing acknowledged as durable is lost, nothing is half-applied. And on a disk
//! that starts failing every call after a random number of them (`vfs::sim::FaultFs`): the
//! failure surfaces as an I/O or poisoned error, and after a crash (with or without power
//! loss) the reopened tree verifies and holds the acknowledged writes, plus at most the one
//! that failed.

#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use std::collections::BTreeMap;
use std::ops::Bound::{self, *};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;

use common::{key, model_toggle, tiny_opts, toggle};
use proptest::prelude::*;
use silt_storage::vfs::sim::{FaultFs, SimFs};
use silt_storage::vfs::{RealFs, Vfs};
use silt_storage::{
    Compression, Dict, Env, EnvOptions, Error, SyncPolicy, UpdateOutcome, UpdateRegistry,
    WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const ADD: u32 = 1;
const TOGGLE: u32 = 2;

fn add(old: Option<&[u8]>, arg: &[u8]) -> Option<Vec<u8>> {
    let cur = old
        .and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0);
    let a = u64::from_le_bytes(arg.try_into().unwrap_or([0; 8]));
    Some(cur.wrapping_add(a).to_le_bytes().to_vec())
}

fn registry() -> UpdateRegistry {
    let mut r = UpdateRegistry::new();
    r.register(ADD, |_k, old, arg| match add(old, arg) {
        Some(v) => UpdateOutcome::Set(v),
        None => UpdateOutcome::Delete,
    });
    r.register(TOGGLE, |_k, old, arg| match toggle(old, arg) {
        Some(Some(v)) => UpdateOutcome::Set(v),
        Some(None) => UpdateOutcome::Delete,
        None => UpdateOutcome::NoChange,
    });
    r
}

fn model_update(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: &[u8], func: u32, arg: &[u8]) {
    let old = m.get(k).cloned();
    match func {
        ADD => {
            if let Some(v) = add(old.as_deref(), arg) {
                m.insert(k.to_vec(), v);
            }
        }
        _ => model_toggle(m, k, arg),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16, Vec<u8>),
    /// `replace` when the key exists, `put` when not (replace's contract).
    Replace(u16, Vec<u8>),
    /// Puts (`Some`) and deletes (`None`) committed as one `WriteBatch`.
    Batch(Vec<(u16, Option<Vec<u8>>)>),
    PutIfAbsent(u16, Vec<u8>),
    Delete(u16),
    Update(u16, u32, Vec<u8>),
    UpdateAll(u32, Vec<u8>),
    Get(u16),
    Range(u16, u16),
    Cursor(u16),
    Checkpoint,
    Reopen,
    Crash,
    /// Make the log durable (`Env::sync_log`).
    Sync,
    /// Lose power (on the simulated disk; a process crash on a real one).
    PowerLoss(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u16..600;
    let val = prop::collection::vec(any::<u8>(), 0..48);
    let arg = (1u64..5).prop_map(|x| x.to_le_bytes().to_vec());
    prop_oneof![
        30 => (k.clone(), val.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        5 => (k.clone(), val.clone()).prop_map(|(k, v)| Op::PutIfAbsent(k, v)),
        8 => (k.clone(), val.clone()).prop_map(|(k, v)| Op::Replace(k, v)),
        3 => prop::collection::vec((k.clone(), prop::option::of(val.clone())), 1..6).prop_map(Op::Batch),
        10 => k.clone().prop_map(Op::Delete),
        8 => (k.clone(), prop_oneof![Just(ADD), Just(TOGGLE)], arg.clone()).prop_map(|(k, f, a)| Op::Update(k, f, a)),
        1 => (prop_oneof![Just(ADD), Just(TOGGLE)], arg).prop_map(|(f, a)| Op::UpdateAll(f, a)),
        8 => k.clone().prop_map(Op::Get),
        3 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Range(a.min(b), a.max(b))),
        1 => k.prop_map(Op::Cursor),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::Sync),
        1 => any::<u64>().prop_map(Op::PowerLoss),
    ]
}

fn opts(compression: Compression, direct_io: bool, sync: SyncPolicy) -> EnvOptions {
    EnvOptions {
        compression,
        direct_io,
        sync,
        ..tiny_opts()
    }
}

fn bound(k: Bound<&Vec<u8>>) -> Bound<&[u8]> {
    match k {
        Included(k) => Included(k.as_slice()),
        Excluded(k) => Excluded(k.as_slice()),
        Unbounded => Unbounded,
    }
}

/// What a write does to the model (reads and environment operations do nothing).
fn model_apply(m: &mut Model, op: &Op) {
    match op {
        Op::Put(k, v) | Op::Replace(k, v) => {
            m.insert(key(*k), v.clone());
        }
        Op::Batch(w) => {
            for (k, v) in w {
                match v {
                    Some(v) => m.insert(key(*k), v.clone()),
                    None => m.remove(&key(*k)),
                };
            }
        }
        Op::PutIfAbsent(k, v) => {
            m.entry(key(*k)).or_insert(v.clone());
        }
        Op::Delete(k) => {
            m.remove(&key(*k));
        }
        Op::Update(k, f, a) => model_update(m, &key(*k), *f, a),
        Op::UpdateAll(f, a) => {
            // A broadcast never creates keys: TOGGLE on an absent key is not applied.
            let keys: Vec<_> = m.keys().cloned().collect();
            for k in keys {
                model_update(m, &k, *f, a);
            }
        }
        _ => {}
    }
}

/// Run one operation against the engine, checking reads against the model `m` (the state
/// before the operation). Environment operations are the caller's.
fn exec(d: &Dict, m: &Model, op: &Op) -> Result<(), Error> {
    match op {
        Op::Put(k, v) => d.put(&key(*k), v)?,
        Op::Replace(k, v) => {
            // `replace` when the key exists, `put` when not (replace's contract).
            if m.contains_key(&key(*k)) {
                d.replace(&key(*k), v)?;
            } else {
                d.put(&key(*k), v)?;
            }
        }
        Op::Batch(w) => {
            let mut b = WriteBatch::new();
            for (k, v) in w {
                match v {
                    Some(v) => b.put(d, &key(*k), v)?,
                    None => b.delete(d, &key(*k))?,
                }
            }
            b.commit()?;
        }
        Op::PutIfAbsent(k, v) => d.put_if_absent(&key(*k), v)?,
        Op::Delete(k) => d.delete(&key(*k))?,
        Op::Update(k, f, a) => d.update(&key(*k), *f, a)?,
        Op::UpdateAll(f, a) => d.update_all(*f, a)?,
        Op::Get(k) => {
            assert_eq!(d.get(&key(*k))?, m.get(&key(*k)).cloned(), "get {k}");
        }
        Op::Range(a, b) => {
            let (lo, hi) = (key(*a), key(*b));
            let want: Vec<_> = m
                .range::<Vec<u8>, _>((Included(&lo), Excluded(&hi)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let got = d.range(bound(Included(&lo)), bound(Excluded(&hi)))?;
            assert_eq!(got, want, "range {a}..{b}");
            let n = d.count_range(bound(Included(&lo)), bound(Excluded(&hi)))?;
            assert_eq!(n as usize, want.len(), "count {a}..{b}");
        }
        Op::Cursor(k) => {
            let mut c = d.cursor(Unbounded, Unbounded);
            c.seek(&key(*k));
            let fwd: Vec<_> = m
                .range(key(*k)..)
                .take(5)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut got = Vec::new();
            for _ in 0..5 {
                if let Some(e) = c.next()? {
                    got.push(e);
                }
            }
            assert_eq!(got, fwd, "cursor forward from {k}");
            // Step back from where we are: the entries before the last one returned.
            if got.len() == 5 {
                let back = c.prev()?.expect("an entry before");
                assert_eq!(back, got[got.len() - 2], "cursor prev");
            }
            let mut c = d.cursor(Unbounded, Unbounded);
            c.seek_last();
            let last: Vec<_> = m
                .iter()
                .rev()
                .take(3)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut got = Vec::new();
            for _ in 0..3 {
                if let Some(e) = c.prev()? {
                    got.push(e);
                }
            }
            assert_eq!(got, last, "cursor from the end");
        }
        _ => {}
    }
    Ok(())
}

fn contents(d: &Dict) -> Model {
    d.range(Unbounded, Unbounded).unwrap().into_iter().collect()
}

/// After a loss, the contents must be the model after some prefix of `since` applied to
/// `durable`.
fn assert_a_prefix(got: &Model, durable: &Model, since: &[Op], what: &str) {
    let mut cand = durable.clone();
    if &cand == got {
        return;
    }
    for op in since {
        model_apply(&mut cand, op);
        if &cand == got {
            return;
        }
    }
    panic!(
        "{what}: the recovered contents ({} keys) are no prefix of the {} operations since the \
         last durable point ({} keys then)",
        got.len(),
        since.len(),
        durable.len()
    );
}

/// The disk a run uses: a real directory, or a simulated one that can lose power.
enum Disk {
    Real(tempfile::TempDir),
    Sim(SimFs),
}

impl Disk {
    fn vfs(&self) -> Arc<dyn Vfs> {
        match self {
            Disk::Real(_) => Arc::new(RealFs),
            Disk::Sim(s) => Arc::new(s.clone()),
        }
    }

    fn dir(&self) -> PathBuf {
        match self {
            Disk::Real(t) => t.path().to_path_buf(),
            Disk::Sim(_) => PathBuf::from("/sim/db"),
        }
    }
}

fn open(disk: &Disk, o: &EnvOptions) -> Env {
    Env::open_on(disk.vfs(), disk.dir(), o.clone(), registry()).unwrap()
}

fn verify(vfs: &dyn Vfs, dir: &Path) {
    let report = silt_storage::inspect::verify_dir_on(vfs, dir).unwrap();
    assert!(report.errors.is_empty(), "verify: {:?}", report.errors);
}

fn run(ops: Vec<Op>, compression: Compression, direct_io: bool, disk: Disk) {
    let o = opts(compression, direct_io, SyncPolicy::Never);
    let mut env = open(&disk, &o);
    let mut d = env.create_dict("t").unwrap();
    env.checkpoint().unwrap();
    let mut m = Model::new();
    // The model as of the last point that made everything durable, and the operations since.
    let mut durable = Model::new();
    let mut since: Vec<Op> = Vec::new();
    for op in ops {
        match op {
            Op::Checkpoint => env.checkpoint().unwrap(),
            Op::Sync => env.sync_log().unwrap(),
            Op::Reopen => {
                drop(d);
                env.close().unwrap();
                env = open(&disk, &o);
                d = env.open_dict("t").unwrap();
            }
            Op::Crash => {
                drop(d);
                env.simulate_crash();
                env = open(&disk, &o);
                d = env.open_dict("t").unwrap();
            }
            Op::PowerLoss(seed) => {
                drop(d);
                env.simulate_crash();
                if let Disk::Sim(s) = &disk {
                    s.power_loss(seed);
                }
                env = open(&disk, &o);
                d = env.open_dict("t").unwrap();
                let got = contents(&d);
                assert_a_prefix(&got, &durable, &since, "after a power loss");
                m = got;
            }
            op => {
                exec(&d, &m, &op).unwrap();
                model_apply(&mut m, &op);
                since.push(op);
                continue;
            }
        }
        // Every environment operation above leaves everything durable (recovery ends in a
        // checkpoint; a crash keeps what the OS has, which the next checkpoint makes durable
        // only if it runs: a crash alone does not, so keep the history then).
        if !matches!(op, Op::Crash) {
            durable = m.clone();
            since.clear();
        }
    }
    let all = d.range(Unbounded, Unbounded).unwrap();
    let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want, "final contents");
    assert_eq!(
        d.count_range(Unbounded, Unbounded).unwrap() as usize,
        m.len()
    );
    d.optimize().unwrap();
    assert_eq!(
        d.stats().rows as usize,
        m.len(),
        "row estimate after optimize"
    );
    let all = d.range(Unbounded, Unbounded).unwrap();
    assert_eq!(all, want, "contents after optimize");
    drop(d);
    env.close().unwrap();
    verify(&*disk.vfs(), &disk.dir());
}

/// Run `ops` on a simulated disk that fails every call after `budget` of them; then crash
/// (losing power if `power_loss`), reopen on the healthy disk, and check what survived.
fn run_faults(ops: Vec<Op>, budget: u64, power_loss: Option<u64>) {
    let sim = SimFs::new();
    let fault = FaultFs::new(Arc::new(sim.clone()), u64::MAX);
    let dir = PathBuf::from("/sim/db");
    let o = opts(Compression::Lz4, false, SyncPolicy::Never);
    let env = Env::open_on(Arc::new(fault.clone()), &dir, o.clone(), registry()).unwrap();
    let d = env.create_dict("t").unwrap();
    env.checkpoint().unwrap();
    fault.fail_after(budget);
    let mut m = Model::new();
    let mut durable = Model::new();
    let mut since: Vec<Op> = Vec::new();
    let mut failed: Option<Op> = None;
    for op in ops {
        let r = match &op {
            Op::Checkpoint => env.checkpoint(),
            Op::Sync => env.sync_log(),
            Op::Reopen | Op::Crash | Op::PowerLoss(_) => continue,
            op => exec(&d, &m, op),
        };
        match r {
            Ok(()) => {
                model_apply(&mut m, &op);
                if matches!(op, Op::Checkpoint | Op::Sync) {
                    durable = m.clone();
                    since.clear();
                } else {
                    since.push(op);
                }
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Io { .. } | Error::Poisoned(_)),
                    "an I/O failure must surface as an I/O or poisoned error, not {e}"
                );
                failed = Some(op);
                break;
            }
        }
    }
    drop(d);
    env.simulate_crash();
    fault.heal();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let got = {
        if let Some(seed) = power_loss {
            sim.power_loss(seed);
        }
        let env = Env::open_on(vfs.clone(), &dir, o, registry()).unwrap();
        let d = env.open_dict("t").unwrap();
        let got = contents(&d);
        drop(d);
        env.close().unwrap();
        got
    };
    if power_loss.is_some() {
        since.extend(failed);
        assert_a_prefix(&got, &durable, &since, "after a failure and a power loss");
    } else {
        // A process crash keeps every write the log accepted: all acknowledged operations,
        // and perhaps the one that failed.
        let mut with_failed = m.clone();
        if let Some(op) = &failed {
            model_apply(&mut with_failed, op);
        }
        assert!(
            got == m || got == with_failed,
            "after a failure and a crash: {} keys, expected {} (or {} with the failed write)",
            got.len(),
            m.len(),
            with_failed.len()
        );
    }
    verify(&*vfs, &dir);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, .. ProptestConfig::default() })]

    #[test]
    fn model_lz4(ops in prop::collection::vec(op(), 1..1500)) {
        run(ops, Compression::Lz4, false, Disk::Real(tempfile::tempdir().unwrap()));
    }

    #[test]
    fn model_zstd(ops in prop::collection::vec(op(), 1..800)) {
        // Node reads bypass the page cache here, so unaligned partitions go through the
        // aligned-span path.
        run(ops, Compression::Zstd(1), true, Disk::Real(tempfile::tempdir().unwrap()));
    }

    #[test]
    fn model_power_loss(ops in prop::collection::vec(op(), 1..1200)) {
        run(ops, Compression::Lz4, false, Disk::Sim(SimFs::new()));
    }

    #[test]
    fn model_io_errors(
        ops in prop::collection::vec(op(), 1..800),
        budget in 0u64..3000,
        power in prop::option::of(any::<u64>()),
    ) {
        run_faults(ops, budget, power);
    }
}
