//! Subtree counts against a model: random writes to a counted dictionary (inserts of absent
//! keys, replaces, deletes of present keys, put-if-absent and updates of unknown effect,
//! transactions committed and aborted) with tiny nodes, so that trees get deep and flush,
//! split and merge constantly, a cache far smaller than the data, and checkpoints, optimizes,
//! clean reopens and crashes in the middle. Every count over a random range, of the latest
//! state, of an older snapshot and of a transaction's own view, must equal the model's and
//! the scan's; and no write may have broken the counting promise.

#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use std::collections::BTreeMap;
use std::ops::Bound::*;

mod common;

use common::{key, model_toggle, tiny_opts, toggle};
use proptest::prelude::*;
use silt_storage::{Dict, Env, EnvOptions, Snapshot, UpdateOutcome, UpdateRegistry};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Appends its argument to a present value (a keeping function: never creates or removes).
const APPEND: u32 = 1;
/// Present with an even first byte: delete. Present otherwise: no change. Absent: insert.
const TOGGLE: u32 = 2;

fn registry() -> UpdateRegistry {
    let mut r = UpdateRegistry::new();
    r.register_keeping(APPEND, |_k, old, arg| {
        let mut v = old.unwrap_or_default().to_vec();
        v.extend_from_slice(arg);
        v.truncate(40);
        UpdateOutcome::Set(v)
    });
    r.register(TOGGLE, |_k, old, arg| match toggle(old, arg) {
        Some(Some(v)) => UpdateOutcome::Set(v),
        Some(None) => UpdateOutcome::Delete,
        None => UpdateOutcome::NoChange,
    });
    r
}

fn model_update(m: &mut Model, k: &[u8], func: u32, arg: &[u8]) {
    match func {
        APPEND => {
            if let Some(v) = m.get_mut(k) {
                v.extend_from_slice(arg);
                v.truncate(40);
            }
        }
        _ => model_toggle(m, k, arg),
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// `put` if absent, `replace` if present (the counting promise).
    Set(u16, Vec<u8>),
    /// `delete` if present.
    Delete(u16),
    PutIfAbsent(u16, Vec<u8>),
    Update(u16, u32, Vec<u8>),
    /// Writes (`None`: delete) in a transaction, then commit (`true`) or abort; the
    /// transaction counts a range before it ends.
    Txn(Vec<(u16, Option<Vec<u8>>)>, bool, u16, u16),
    Count(u16, u16),
    /// Take a snapshot (kept until the next reopen or crash).
    Snap,
    /// Count a range of the last snapshot.
    SnapCount(u16, u16),
    Checkpoint,
    Optimize,
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u16..800;
    let val = prop::collection::vec(any::<u8>(), 0..40);
    let arg = prop::collection::vec(any::<u8>(), 1..4);
    prop_oneof![
        40 => (k.clone(), val.clone()).prop_map(|(k, v)| Op::Set(k, v)),
        12 => k.clone().prop_map(Op::Delete),
        4 => (k.clone(), val.clone()).prop_map(|(k, v)| Op::PutIfAbsent(k, v)),
        8 => (k.clone(), prop_oneof![3 => Just(APPEND), 1 => Just(TOGGLE)], arg).prop_map(|(k, f, a)| Op::Update(k, f, a)),
        4 => (prop::collection::vec((k.clone(), prop::option::of(val)), 1..8), any::<bool>(), k.clone(), k.clone())
            .prop_map(|(w, c, a, b)| Op::Txn(w, c, a.min(b), a.max(b))),
        8 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Count(a.min(b), a.max(b))),
        1 => Just(Op::Snap),
        3 => (k.clone(), k).prop_map(|(a, b)| Op::SnapCount(a.min(b), a.max(b))),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Optimize),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

fn opts() -> EnvOptions {
    tiny_opts()
}

fn range(a: u16, b: u16) -> (Vec<u8>, Vec<u8>) {
    (key(a), key(b))
}

fn model_count(m: &Model, a: u16, b: u16) -> u64 {
    let (lo, hi) = range(a, b);
    m.range::<Vec<u8>, _>((Included(&lo), Excluded(&hi)))
        .count() as u64
}

/// The count of `[a, b)` (of what `snap` sees, if given) from subtree counts, checked
/// against the scan and the model.
fn check_count(d: &Dict, snap: Option<&Snapshot>, m: &Model, a: u16, b: u16, what: &str) {
    let (lo, hi) = range(a, b);
    let (fast, _) = d
        .count_range_explained(Included(&lo), Excluded(&hi), snap)
        .unwrap();
    let scan = d
        .count_range_by_scan(Included(&lo), Excluded(&hi), snap)
        .unwrap();
    let want = model_count(m, a, b);
    assert_eq!(scan, want, "{what}: scan of {a}..{b}");
    assert_eq!(fast, want, "{what}: count of {a}..{b}");
}

fn set(d: &Dict, m: &Model, k: u16, v: &[u8]) {
    if m.contains_key(&key(k)) {
        d.replace(&key(k), v).unwrap();
    } else {
        d.put(&key(k), v).unwrap();
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let o = opts();
    let mut env = Env::open_with(dir.path(), o.clone(), registry()).unwrap();
    let mut d = env.create_counted_dict("t").unwrap();
    let mut m = Model::new();
    let mut snap: Option<(Snapshot, Model)> = None;
    let mut repairs = 0;
    for op in ops {
        match op {
            Op::Set(k, v) => {
                set(&d, &m, k, &v);
                m.insert(key(k), v);
            }
            Op::Delete(k) => {
                if m.remove(&key(k)).is_some() {
                    d.delete(&key(k)).unwrap();
                }
            }
            Op::PutIfAbsent(k, v) => {
                d.put_if_absent(&key(k), &v).unwrap();
                m.entry(key(k)).or_insert(v);
            }
            Op::Update(k, f, a) => {
                d.update(&key(k), f, &a).unwrap();
                model_update(&mut m, &key(k), f, &a);
            }
            Op::Txn(writes, commit, a, b) => {
                let t = env.begin().unwrap();
                let mut tm = m.clone();
                for (k, v) in writes {
                    let present = tm.contains_key(&key(k));
                    match (v, present) {
                        (Some(v), true) => {
                            t.replace(&d, &key(k), &v).unwrap();
                            tm.insert(key(k), v);
                        }
                        (Some(v), false) => {
                            t.put(&d, &key(k), &v).unwrap();
                            tm.insert(key(k), v);
                        }
                        (None, true) => {
                            t.delete(&d, &key(k)).unwrap();
                            tm.remove(&key(k));
                        }
                        (None, false) => {}
                    }
                }
                check_count(&d, Some(t.snapshot()), &tm, a, b, "own writes");
                check_count(&d, None, &m, a, b, "others' uncommitted writes");
                if commit {
                    t.commit(false).unwrap();
                    m = tm;
                } else {
                    t.abort().unwrap();
                }
            }
            Op::Count(a, b) => check_count(&d, None, &m, a, b, "latest"),
            Op::Snap => snap = Some((d.snapshot(), m.clone())),
            Op::SnapCount(a, b) => match &snap {
                Some((s, sm)) => check_count(&d, Some(s), sm, a, b, "snapshot"),
                None => check_count(&d, None, &m, a, b, "latest"),
            },
            Op::Checkpoint => env.checkpoint().unwrap(),
            Op::Optimize => d.optimize().unwrap(),
            Op::Reopen | Op::Crash => {
                snap = None;
                repairs += d.stats().count_repairs;
                drop(d);
                if matches!(op, Op::Crash) {
                    env.simulate_crash();
                } else {
                    env.close().unwrap();
                }
                env = Env::open_with(dir.path(), o.clone(), registry()).unwrap();
                d = env.open_dict("t").unwrap();
                assert!(d.stats().counted, "the dictionary still keeps counts");
            }
        }
    }
    check_count(&d, None, &m, 0, u16::MAX, "everything");
    let (n, how) = d.count_range_explained(Unbounded, Unbounded, None).unwrap();
    assert_eq!(n as usize, m.len());
    d.optimize().unwrap();
    let (n, how_after) = d.count_range_explained(Unbounded, Unbounded, None).unwrap();
    assert_eq!(n as usize, m.len());
    assert_eq!(
        how_after.scanned_ranges, 0,
        "with every message applied, nothing is scanned (before: {how:?})"
    );
    repairs += d.stats().count_repairs;
    assert_eq!(repairs, 0, "no write broke the counting promise");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn subtree_counts_match_the_model(ops in prop::collection::vec(op(), 1..700)) {
        run(ops);
    }
}

/// A bigger tree, written only with known effects: every count is answered from the counts,
/// without scanning, and reads few nodes.
#[test]
fn counts_read_only_the_boundary_paths() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open_with(dir.path(), opts(), registry()).unwrap();
    let d = env.create_counted_dict("t").unwrap();
    let mut m = Model::new();
    for i in 0..20_000u32 {
        let k = (i.wrapping_mul(7919) % 20_000) as u16;
        let v = vec![b'v'; (i % 30) as usize];
        set(&d, &m, k, &v);
        m.insert(key(k), v);
        if i % 3 == 0 {
            let k = (i.wrapping_mul(31) % 20_000) as u16;
            if m.remove(&key(k)).is_some() {
                d.delete(&key(k)).unwrap();
            }
        }
    }
    assert!(d.stats().height >= 3, "a deep tree: {:?}", d.stats());
    for (a, b) in [(0, 20_000), (10, 19_990), (5_000, 5_010), (123, 17_777)] {
        let (lo, hi) = range(a, b);
        let (n, how) = d
            .count_range_explained(Included(&lo), Excluded(&hi), None)
            .unwrap();
        assert_eq!(n, model_count(&m, a, b), "count of {a}..{b}");
        assert_eq!(how.scanned_ranges, 0, "{a}..{b}: {how:?}");
        let height = u64::from(d.stats().height);
        assert!(
            how.nodes <= 2 * (height + 1) * 4,
            "{a}..{b} read {} nodes in a tree of height {height}",
            how.nodes
        );
    }
}

/// A bulk load writes the counts of the tree it builds; writes afterwards keep them, and so
/// does a reopen.
#[test]
fn bulk_loaded_trees_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open_with(dir.path(), opts(), registry()).unwrap();
    let d = env.create_counted_dict("t").unwrap();
    let mut m = Model::new();
    for k in 0..6000u16 {
        m.insert(key(k), vec![b'x'; usize::from(k % 20)]);
    }
    d.bulk_load(m.iter().map(|(k, v)| (k.clone(), v.clone())))
        .unwrap();
    assert!(d.stats().height >= 2, "{:?}", d.stats());
    for (a, b) in [(0, 6000), (17, 5999), (3000, 3001), (100, 4000)] {
        check_count(&d, None, &m, a, b, "bulk loaded");
        let (lo, hi) = range(a, b);
        let (_, how) = d
            .count_range_explained(Included(&lo), Excluded(&hi), None)
            .unwrap();
        assert_eq!(how.scanned_ranges, 0, "{a}..{b}: {how:?}");
    }
    for k in (0..6000u16).step_by(3) {
        d.delete(&key(k)).unwrap();
        m.remove(&key(k));
    }
    check_count(&d, None, &m, 10, 5000, "after deletes");
    drop(d);
    env.close().unwrap();
    let env = Env::open_with(dir.path(), opts(), registry()).unwrap();
    let d = env.open_dict("t").unwrap();
    check_count(&d, None, &m, 0, 6000, "reopened");
    assert_eq!(d.stats().count_repairs, 0);
}
