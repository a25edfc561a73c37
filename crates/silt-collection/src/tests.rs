//! Tests of the store, collections, index maintenance and builds.
#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use std::ops::Bound;
use std::sync::atomic::Ordering;

use bson::doc;
use parking_lot::Mutex;

use crate::build::SORT_TMP_DIR;

use super::*;

pub(crate) fn opts() -> EnvOptions {
    EnvOptions {
        cache_bytes: 8 << 20,
        node_bytes: 64 << 10,
        basement_bytes: 16 << 10,
        ..EnvOptions::default()
    }
}

#[test]
fn catalog_survives_reopen_and_rename() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let c = s.get_or_create("db.a").unwrap();
        c.insert(&doc! {"_id": 1, "x": "one"}).unwrap();
        c.insert(&doc! {"_id": 2.0, "x": "two"}).unwrap();
        assert!(matches!(
            c.insert(&doc! {"_id": 1i64}),
            Err(CollError::DuplicateKey { .. })
        ));
        s.create("db.b", doc! {}).unwrap();
        assert!(matches!(
            s.create("db.b", doc! {}),
            Err(CollError::NamespaceExists(_))
        ));
        s.rename("db.a", "db.c", false).unwrap();
        assert!(s.drop_collection("db.b").unwrap());
        s.close().unwrap();
    }
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    assert!(s.get("db.a").is_none() && s.get("db.b").is_none());
    let c = s.get("db.c").unwrap();
    assert_eq!(
        c.get(&Bson::Int32(2))
            .unwrap()
            .unwrap()
            .get_str("x")
            .unwrap(),
        "two"
    );
    let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
    let mut n = 0;
    while cur.next_doc().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
    assert_eq!(s.list_databases(), vec!["db".to_string()]);
    s.drop_database("db").unwrap();
    assert!(s.list_databases().is_empty());
}

fn spec(d: Document) -> IndexSpec {
    IndexSpec::parse(&d).unwrap()
}

fn vals(s: &IndexSpec, d: Document) -> Vec<Vec<Bson>> {
    s.keys(&d)
        .unwrap()
        .keys
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn key_generation_follows_mongodb() {
    let a = spec(doc! {"key": {"a": 1}});
    assert_eq!(a.name, "a_1");
    assert_eq!(vals(&a, doc! {"a": 5}), vec![vec![Bson::Int32(5)]]);
    assert_eq!(vals(&a, doc! {"b": 5}), vec![vec![Bson::Null]]);
    // Multikey: one key per distinct element; an empty array is undefined.
    let k = a.keys(&doc! {"a": [1, 2, 2, 1.0]}).unwrap();
    assert!(k.multikey);
    assert_eq!(k.keys.len(), 2);
    assert_eq!(vals(&a, doc! {"a": []}), vec![vec![Bson::Undefined]]);
    // Dotted paths through arrays of documents.
    let ab = spec(doc! {"key": {"a.b": 1}});
    let mut got = vals(&ab, doc! {"a": [{"b": 1}, {"b": [2, 3]}, {"c": 1}]});
    got.sort_by(|x, y| silt_bson::cmp_values(&x[0], &y[0]));
    assert_eq!(got.len(), 4);
    // Compound with one array: the product; with two: parallel arrays.
    let c = spec(doc! {"key": {"a": 1, "b": -1}});
    assert_eq!(c.name, "a_1_b_-1");
    assert_eq!(vals(&c, doc! {"a": [1, 2], "b": "x"}).len(), 2);
    assert!(matches!(
        c.keys(&doc! {"a": [1], "b": [2]}),
        Err(KeyError::ParallelArrays(x, y)) if x == "a" && y == "b"
    ));
    // Descending components order in reverse.
    let (k1, k2) = (
        c.keys(&doc! {"a": 1, "b": 1}).unwrap().keys[0].0.clone(),
        c.keys(&doc! {"a": 1, "b": 2}).unwrap().keys[0].0.clone(),
    );
    assert!(k1 > k2);
    // Sparse: skipped only when every field is missing.
    let sp = spec(doc! {"key": {"a": 1, "b": 1}, "sparse": true});
    assert!(sp.keys(&doc! {"c": 1}).unwrap().keys.is_empty());
    assert_eq!(
        vals(&sp, doc! {"b": 1}),
        vec![vec![Bson::Null, Bson::Int32(1)]]
    );
    // Partial: only documents matching the filter.
    let p = spec(doc! {"key": {"a": 1}, "partialFilterExpression": {"x": {"$gt": 5}}});
    assert!(p.keys(&doc! {"a": 1, "x": 1}).unwrap().keys.is_empty());
    assert_eq!(p.keys(&doc! {"a": 1, "x": 9}).unwrap().keys.len(), 1);
    assert!(IndexSpec::parse(&doc! {"key": {"a": "2dsphere"}}).is_err());
    assert!(IndexSpec::parse(&doc! {"key": {"a": "text", "b": 1}}).is_err());
    // A text index: one entry per term, (term, score), in the index's own key pattern.
    let t = spec(doc! {"key": {"a": "text"}});
    assert_eq!(t.key_pattern, doc! {"_fts": "text", "_ftsx": 1});
    let k = t.keys(&doc! {"a": "Running dogs run"}).unwrap();
    let terms: Vec<_> = k.keys.iter().map(|(_, v)| v[0].clone()).collect();
    assert_eq!(
        terms,
        vec![Bson::String("dog".into()), Bson::String("run".into())]
    );
    assert!(k.multikey);
    assert!(t.keys(&doc! {"a": "x", "language": "klingon"}).is_err());
    assert!(IndexSpec::parse(&doc! {"key": {"a": 0}}).is_err());
}

fn entries(c: &Collection, name: &str) -> Vec<(Vec<Bson>, Bson)> {
    let ix = c.index(name).unwrap();
    let mut cur = ix
        .parts()
        .cursor(Bound::Unbounded, Bound::Unbounded, None, false);
    let mut out = Vec::new();
    while let Some((k, _)) = cur.next().unwrap() {
        let id = silt_bson::keyenc::decode_value(ix.entry_id_key(&k).unwrap())
            .unwrap()
            .0;
        out.push((ix.entry_values(&k).unwrap(), id));
    }
    out
}

#[test]
fn builds_larger_than_their_memory_spill_and_merge() {
    let dir = tempfile::tempdir().unwrap();
    // An 8 MiB cache gives index builds 4 MiB: 120,000 entries of a clustering index
    // (each holding its document) need several runs.
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    let c = s.get_or_create("db.big").unwrap();
    let n = 120_000i64;
    for i in 0..n {
        let a = (i * 7919) % n;
        c.insert(&doc! {"_id": i, "a": a, "u": i, "pad": "p".repeat(40)})
            .unwrap();
    }
    s.create_indexes(
        "db.big",
        vec![
            spec(doc! {"key": {"a": 1}, "name": "a_1", "clustering": true}),
            spec(doc! {"key": {"u": -1}, "name": "u_-1", "unique": true}),
        ],
    )
    .unwrap();
    // Index keys hold numbers by value (an int64 that fits comes back as an int32).
    let num = |b: &Bson| match b {
        Bson::Int32(x) => i64::from(*x),
        Bson::Int64(x) => *x,
        other => panic!("{other:?}"),
    };
    let a = entries(&c, "a_1");
    assert_eq!(a.len(), n as usize);
    for (j, (vals, id)) in a.iter().enumerate() {
        assert_eq!(num(&vals[0]), j as i64);
        assert_eq!(num(id) * 7919 % n, j as i64);
    }
    let u = entries(&c, "u_-1");
    let us: Vec<i64> = u.iter().map(|(v, _)| num(&v[0])).collect();
    assert_eq!(us, (0..n).rev().collect::<Vec<_>>());
    // A duplicate far from its twin is found in the merge, and nothing is left behind.
    c.insert(&doc! {"_id": n, "a": 5i64, "u": n}).unwrap();
    let e = s
        .create_indexes(
            "db.big",
            vec![spec(
                doc! {"key": {"a": -1}, "name": "a_-1", "unique": true},
            )],
        )
        .unwrap_err();
    assert!(matches!(e, CollError::DuplicateKey { .. }), "{e:?}");
    assert!(c.index("a_-1").is_none());
    let tmp = dir.path().join(SORT_TMP_DIR);
    assert_eq!(std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0), 0);
}

#[test]
fn maintenance_unique_build_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let c = s.get_or_create("db.c").unwrap();
        for i in 0..100 {
            c.insert(&doc! {"_id": i, "a": i % 10, "u": i}).unwrap();
        }
        // Build on existing data.
        let out = s
            .create_indexes(
                "db.c",
                vec![
                    spec(doc! {"key": {"a": 1}}),
                    spec(doc! {"key": {"u": 1}, "unique": true}),
                    spec(doc! {"key": {"t": 1}, "clustering": true}),
                ],
            )
            .unwrap();
        assert_eq!((out.before, out.after), (1, 4));
        assert_eq!(entries(&c, "a_1").len(), 100);
        // A unique build over duplicates fails and leaves nothing.
        let e = s.create_indexes(
            "db.c",
            vec![spec(doc! {"key": {"a": -1}, "unique": true, "name": "ua"})],
        );
        assert!(matches!(e, Err(CollError::DuplicateKey { .. })));
        assert!(c.index("ua").is_none());
        // Insert: a unique violation writes nothing anywhere.
        let e = c.insert(&doc! {"_id": 500, "a": 77, "u": 5});
        assert!(matches!(e, Err(CollError::DuplicateKey { ref index, .. }) if index == "u_1"));
        assert!(c.get(&Bson::Int32(500)).unwrap().is_none());
        assert!(!entries(&c, "a_1")
            .iter()
            .any(|(v, _)| v[0] == Bson::Int32(77)));
        // Update moves keys; delete removes them.
        let key = id_key(&Bson::Int32(3));
        let old = c.get_by_key(&key).unwrap().unwrap();
        let new = doc! {"_id": 3, "a": [40, 41], "u": 3, "t": "x"};
        c.replace(&c.lock_doc(key.clone()).unwrap(), &old, &new)
            .unwrap();
        let a = entries(&c, "a_1");
        assert_eq!(a.iter().filter(|(_, id)| *id == Bson::Int32(3)).count(), 2);
        assert!(c.index("a_1").unwrap().is_multikey());
        let t = entries(&c, "t_1");
        assert!(t.contains(&(vec![Bson::String("x".into())], Bson::Int32(3))));
        let old = c.get_by_key(&key).unwrap().unwrap();
        let moved = doc! {"_id": 3, "a": 1, "u": 4};
        assert!(matches!(
            c.replace(&c.lock_doc(key.clone()).unwrap(), &old, &moved),
            Err(CollError::DuplicateKey { .. })
        ));
        assert_eq!(c.get_by_key(&key).unwrap().unwrap(), old);
        c.delete(&c.lock_doc(key.clone()).unwrap(), &old).unwrap();
        assert!(!entries(&c, "a_1")
            .iter()
            .any(|(_, id)| *id == Bson::Int32(3)));
        assert_eq!(entries(&c, "t_1").len(), 99);
        // Drop one index.
        assert_eq!(s.drop_indexes("db.c", &["t_1".to_string()]).unwrap(), 4);
        s.close().unwrap();
    }
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    let c = s.get("db.c").unwrap();
    let names: Vec<String> = c.indexes().iter().map(|i| i.name().to_string()).collect();
    assert_eq!(names, vec!["a_1".to_string(), "u_1".to_string()]);
    assert!(c.index("a_1").unwrap().is_multikey());
    assert!(!c.index("u_1").unwrap().is_multikey());
    assert_eq!(entries(&c, "u_1").len(), 99);
    assert!(matches!(
        c.insert(&doc! {"_id": 1000, "u": 7}),
        Err(CollError::DuplicateKey { .. })
    ));
    s.rename("db.c", "db.d", false).unwrap();
    let d = s.get("db.d").unwrap();
    assert_eq!(d.indexes().len(), 2);
    assert!(s.drop_collection("db.d").unwrap());
    assert!(!s.env().list_dicts().iter().any(|n| n.starts_with("idx-")));
}

/// The document with every sub-document's fields sorted (covered documents follow the
/// key pattern's order, projections the document's), as BSON bytes: equal when the
/// values and their types are.
fn canonical(d: &Document) -> Vec<u8> {
    fn sort(v: &Bson) -> Bson {
        match v {
            Bson::Document(d) => {
                let mut kv: Vec<(String, Bson)> =
                    d.iter().map(|(k, v)| (k.clone(), sort(v))).collect();
                kv.sort_by(|a, b| a.0.cmp(&b.0));
                Bson::Document(kv.into_iter().collect())
            }
            Bson::Array(a) => Bson::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    let mut out = Vec::new();
    if let Bson::Document(d) = sort(&Bson::Document(d.clone())) {
        d.to_writer(&mut out).unwrap();
    }
    out
}

/// Each entry rebuilt by `covered_doc` is the document projected on the index's fields
/// (types, nulls and missing fields included), or `None` for the documents an entry
/// cannot stand for; shapes follow updates that keep the key.
fn check_covered(c: &Collection, name: &str, docs: &[Document]) {
    let ix = c.index(name).unwrap();
    let mut spec = doc! {};
    for (f, _) in &ix.spec.fields {
        // {n: 1, "n.y": 1} is a path collision: `n` holds `n.y`.
        if !ix
            .spec
            .fields
            .iter()
            .any(|(g, _)| g != f && silt_bson::path::path_covers(g, f))
        {
            spec.insert(f.clone(), 1);
        }
    }
    let proj = silt_query::projection::Projection::new(&spec).unwrap();
    let mut cur = ix
        .parts()
        .cursor(Bound::Unbounded, Bound::Unbounded, None, false);
    let mut seen = 0;
    while let Some((k, v)) = cur.next().unwrap() {
        let id = silt_bson::keyenc::decode_value(ix.entry_id_key(&k).unwrap())
            .unwrap()
            .0;
        let d = docs
            .iter()
            .find(|d| silt_bson::compare::values_equal(d.get("_id").unwrap(), &id))
            .unwrap();
        let want = proj.apply(d, None).unwrap();
        match ix.covered_doc(&k, &v) {
            Some(got) => assert_eq!(canonical(&got), canonical(&want), "{d}: {got}"),
            None => {
                let dotted_missing = ix
                    .spec
                    .fields
                    .iter()
                    .any(|(f, _)| f.contains('.') && index::tests_value_at(d, f).is_none());
                let arrays = ix.spec.keys(d).unwrap().multikey;
                assert!(dotted_missing || arrays, "{d} not covered");
            }
        }
        seen += 1;
    }
    assert!(seen >= docs.len() || ix.is_multikey());
}

fn mixed_value() -> impl proptest::strategy::Strategy<Value = Option<Bson>> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        (-1i32..2).prop_map(Bson::Int32),
        (-1i64..2).prop_map(Bson::Int64),
        Just(Bson::Int64(1 << 40)),
        (-2i32..4).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
        Just(Bson::Double(-0.0)),
        Just(Bson::Double(f64::NAN)),
        Just(Bson::Decimal128("2.50".parse().unwrap())),
        "[ab]{0,2}".prop_map(Bson::String),
        "[ab]{0,1}".prop_map(Bson::Symbol),
        Just(Bson::Null),
        any::<bool>().prop_map(Bson::Boolean),
    ];
    let nested =
        (leaf.clone(), leaf.clone()).prop_map(|(x, y)| Bson::Document(doc! {"x": x, "y": y}));
    prop_oneof![
        3 => leaf.prop_map(Some),
        1 => nested.prop_map(Some),
        1 => Just(Some(Bson::Int32(7))).prop_map(|_| Some(Bson::Document(doc! {"y": 1}))),
        1 => Just(None),
    ]
}

#[test]
fn shapes_follow_updates_that_keep_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    s.create_indexes("db.c", vec![spec(doc! {"key": {"a": 1}})])
        .unwrap();
    let c = s.get("db.c").unwrap();
    let mut d = doc! {"_id": 1, "a": 1};
    c.insert(&d).unwrap();
    for v in [Bson::Int64(1), Bson::Double(1.0), Bson::Int32(1)] {
        let old = d.clone();
        d.insert("a", v);
        c.replace(&c.lock_doc(id_key(&Bson::Int32(1))).unwrap(), &old, &d)
            .unwrap();
        check_covered(&c, "a_1", std::slice::from_ref(&d));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn covered_docs_equal_projections(
        rows in proptest::collection::vec(
            (mixed_value(), mixed_value(), mixed_value()), 1..20),
        retype in proptest::collection::vec(mixed_value(), 20),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
        let c = s.get_or_create("db.c").unwrap();
        let mut docs = Vec::new();
        for (i, (a, b, n)) in rows.into_iter().enumerate() {
            let id = if i % 3 == 0 { Bson::Int64(i as i64) } else { Bson::Int32(i as i32) };
            let mut d = doc! {"_id": id};
            for (k, v) in [("a", a), ("b", b), ("n", n)] {
                if let Some(v) = v {
                    d.insert(k, v);
                }
            }
            c.insert(&d).unwrap();
            docs.push(d);
        }
        s.create_indexes("db.c", vec![
            spec(doc! {"key": {"a": 1}}),
            spec(doc! {"key": {"a": -1, "b": 1}}),
            spec(doc! {"key": {"n.x": 1, "b": -1}}),
            spec(doc! {"key": {"n": 1, "n.y": 1}}),
        ]).unwrap();
        // Updates after the build: new values (often equal as keys, of another type).
        for (d, v) in docs.iter_mut().zip(retype) {
            let key = id_key(d.get("_id").unwrap());
            let old = d.clone();
            match v {
                Some(v) => { d.insert("a", v); }
                None => { d.remove("a"); }
            }
            c.replace(&c.lock_doc(key.clone()).unwrap(), &old, d).unwrap();
        }
        for name in ["a_1", "a_-1_b_1", "n.x_1_b_-1", "n_1_n.y_1"] {
            check_covered(&c, name, &docs);
        }
    }
}

#[test]
fn concurrent_unique_inserts_admit_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    s.create_indexes("db.c", vec![spec(doc! {"key": {"u": 1}, "unique": true})])
        .unwrap();
    let c = s.get("db.c").unwrap();
    for round in 0..20 {
        let ok = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|sc| {
            for t in 0..4 {
                let (c, ok) = (&c, &ok);
                sc.spawn(move || {
                    if c.insert(&doc! {"_id": round * 10 + t, "u": round}).is_ok() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(ok.load(Ordering::Relaxed), 1);
    }
    assert_eq!(entries(&c, "u_1").len(), 20);
    assert_eq!(c.count().unwrap(), 20);
}

/// Records phases and progress; interrupts once `stop_at` units of phase `stop_phase`
/// are done.
struct Watch {
    seen: Mutex<Vec<(String, u64, u64)>>,
    stop: Option<(&'static str, u64)>,
}

impl BuildObserver for Watch {
    fn phase(&self, msg: &str, total: u64) {
        self.seen.lock().push((msg.to_string(), total, 0));
    }
    fn progress(&self, done: u64) {
        if let Some(last) = self.seen.lock().last_mut() {
            last.2 = done;
        }
    }
    fn interrupted(&self) -> bool {
        let seen = self.seen.lock();
        let last = seen.last();
        self.stop
            .is_some_and(|(p, n)| last.is_some_and(|l| l.0 == p && l.2 >= n))
    }
}

#[test]
fn builds_report_progress_and_stop_when_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    let c = s.get_or_create("db.c").unwrap();
    for i in 0..3000 {
        c.insert(&doc! {"_id": i, "a": i % 17}).unwrap();
    }
    let dicts = s.env().list_dicts().len();
    for stop in [BUILD_SCANNING, BUILD_INSERTING] {
        let w = Watch {
            seen: Mutex::new(Vec::new()),
            stop: Some((stop, 1000)),
        };
        let r = s.create_indexes_observed("db.c", vec![spec(doc! {"key": {"a": 1}})], &w);
        assert!(matches!(r, Err(CollError::Interrupted)), "{stop}");
        assert!(c.index("a_1").is_none());
        assert_eq!(
            s.env().list_dicts().len(),
            dicts,
            "half-built index dropped"
        );
    }
    let w = Watch {
        seen: Mutex::new(Vec::new()),
        stop: None,
    };
    s.create_indexes_observed("db.c", vec![spec(doc! {"key": {"a": 1}})], &w)
        .unwrap();
    let seen = w.seen.lock().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, BUILD_SCANNING);
    assert_eq!(seen[0].2, 3000);
    assert_eq!(
        (seen[1].0.as_str(), seen[1].1, seen[1].2),
        (BUILD_INSERTING, 3000, 3000)
    );
    assert_eq!(entries(&c, "a_1").len(), 3000);
}

#[test]
fn a_build_blocks_only_its_own_collection() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    let a = s.get_or_create("db.a").unwrap();
    let b = s.get_or_create("db.b").unwrap();
    // What an index build holds for its whole duration.
    let held = a.build.write();
    b.insert(&doc! {"_id": 1}).unwrap();
    s.get_or_create("db.new")
        .unwrap()
        .insert(&doc! {"_id": 1})
        .unwrap();
    assert!(a.get(&Bson::Int32(1)).unwrap().is_none()); // reads go on
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            a.insert(&doc! {"_id": 1}).unwrap();
            done.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            !done.load(Ordering::SeqCst),
            "a write to the building collection waits"
        );
        drop(held);
    });
    assert!(done.load(Ordering::SeqCst));
}
