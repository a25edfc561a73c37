//! Partitioned collections against unpartitioned ones: the same writes go to a collection
//! with partitions (added and dropped along the way) and to a plain one, from which the
//! documents of each dropped partition are deleted; every read must agree.

use std::ops::Bound;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use proptest::prelude::*;
use silt_query::matcher::Matcher;
use silt_query::plan::SortSpec;

use super::tests::opts;
use super::*;

fn open(dir: &std::path::Path) -> Store {
    Store::open(dir, opts(), UpdateRegistry::new()).unwrap()
}

fn partitioned(s: &Store, ns: &str) -> Arc<Collection> {
    s.create(ns, doc! {"partitioned": true}).unwrap()
}

fn code(e: CollError) -> i32 {
    match e {
        CollError::Partition { code, .. } => code,
        e => panic!("not a partition error: {e}"),
    }
}

fn all_docs(c: &Collection) -> Vec<Document> {
    let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
    let mut out = Vec::new();
    while let Some((_, d)) = cur.next_doc().unwrap() {
        out.push(d);
    }
    out
}

/// The documents a query returns, in the order its plan reads them (sorted by `sort` when
/// the plan says so).
fn query(c: &Arc<Collection>, filter: Document, sort: Option<Document>) -> (Vec<Document>, bool) {
    let m = Arc::new(Matcher::new(&filter).unwrap());
    let sort = sort.map(|s| SortSpec::parse(&s).unwrap());
    let planned = c.plan(&filter, &m, sort.as_ref(), None, None).unwrap();
    let mut src = MatchSource::new(c.clone(), &planned, Some(m), Stop::default());
    let mut out = Vec::new();
    while let Some((_, d)) = src.next_match().unwrap() {
        out.push(d);
    }
    (out, planned.sorted())
}

#[test]
fn writes_route_and_reads_merge_across_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let c = partitioned(&s, "db.p");
    s.create_indexes(
        "db.p",
        vec![IndexSpec::parse(&doc! {"key": {"a": 1}, "name": "a_1"}).unwrap()],
    )
    .unwrap();
    for i in 0..30 {
        c.insert(&doc! {"_id": i, "a": 29 - i}).unwrap();
    }
    let p1 = s.add_partition("db.p", None).unwrap();
    assert_eq!(p1.id, 1);
    for i in 30..60 {
        c.insert(&doc! {"_id": i, "a": 100 - i}).unwrap();
    }
    s.add_partition("db.p", Some(doc! {"_id": Bson::Int32(59)}))
        .unwrap();
    for i in 60..90 {
        c.insert(&doc! {"_id": i, "a": i % 7}).unwrap();
    }
    let st = c.partition_stats().unwrap();
    let counts: Vec<u64> = st.iter().map(|p| p.count).collect();
    assert_eq!(counts, vec![30, 30, 30]);
    assert_eq!(st[0].info.max, Some(doc! {"_id": Bson::Int32(29)}));
    assert_eq!(st[1].info.max, Some(doc! {"_id": Bson::Int32(59)}));
    assert_eq!(st[2].info.max, None);
    assert_eq!(c.estimated_count(), 90);
    assert_eq!(c.count().unwrap(), 90);
    let ids: Vec<i32> = all_docs(&c)
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect();
    assert_eq!(ids, (0..90).collect::<Vec<_>>());
    // A sort on the index merges the partitions.
    let (docs, sorted) = query(&c, doc! {"a": {"$gte": 5}}, Some(doc! {"a": 1, "_id": 1}));
    let got: Vec<(i32, i32)> = docs
        .iter()
        .map(|d| (d.get_i32("a").unwrap(), d.get_i32("_id").unwrap()))
        .collect();
    let mut want = got.clone();
    want.sort();
    assert_eq!(got, want);
    assert!(sorted || docs.len() == want.len());
    assert_eq!(
        got.len(),
        30 + 30 + 30
            - (0..30).filter(|i| 29 - i < 5).count()
            - (60..90).filter(|i| i % 7 < 5).count()
    );
    let r = s.validate("db.p", true).unwrap().unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    // Point reads and updates route by `_id`.
    let lock = c.lock_doc(id_key(&Bson::Int32(45))).unwrap();
    let old = lock.read().unwrap().unwrap();
    c.replace(&lock, &old, &doc! {"_id": 45, "a": 1000})
        .unwrap();
    drop(lock);
    assert_eq!(
        c.get(&Bson::Int32(45))
            .unwrap()
            .unwrap()
            .get_i32("a")
            .unwrap(),
        1000
    );
    // Dropping the middle partition takes its documents and index entries.
    assert_eq!(
        s.drop_partition("db.p", DropPartitions::Id(1)).unwrap(),
        vec![1]
    );
    assert_eq!(c.count().unwrap(), 60);
    assert!(c.get(&Bson::Int32(45)).unwrap().is_none());
    let (docs, _) = query(&c, doc! {"a": 1000}, None);
    assert!(docs.is_empty());
    // Keys of the dropped range now go to the next partition.
    c.insert(&doc! {"_id": 45, "a": 1}).unwrap();
    let st = c.partition_stats().unwrap();
    assert_eq!(st.iter().map(|p| p.count).collect::<Vec<_>>(), vec![30, 31]);
    let r = s.validate("db.p", true).unwrap().unwrap();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    drop(c);
    s.close().unwrap();
    // The layout survives a restart.
    let s = open(dir.path());
    let c = s.get("db.p").unwrap();
    assert!(c.is_partitioned());
    let st = c.partition_stats().unwrap();
    assert_eq!(st.iter().map(|p| p.info.id).collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(c.count().unwrap(), 61);
    assert_eq!(
        s.add_partition("db.p", None).unwrap().id,
        3,
        "ids are never reused"
    );
}

#[test]
fn partition_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let c = partitioned(&s, "db.p");
    s.create("db.plain", doc! {}).unwrap();
    assert_eq!(code(s.add_partition("db.plain", None).unwrap_err()), 20);
    assert!(matches!(
        s.add_partition("db.none", None),
        Err(CollError::NamespaceNotFound(_))
    ));
    assert_eq!(code(s.add_partition("db.p", None).unwrap_err()), 17248);
    assert_eq!(
        code(s.drop_partition("db.p", DropPartitions::Id(0)).unwrap_err()),
        17252
    );
    for i in 0..10 {
        c.insert(&doc! {"_id": i}).unwrap();
    }
    assert_eq!(
        code(
            s.add_partition("db.p", Some(doc! {"_id": Bson::Int32(5)}))
                .unwrap_err()
        ),
        17250
    );
    s.add_partition("db.p", Some(doc! {"_id": Bson::Int32(20)}))
        .unwrap();
    assert_eq!(
        code(
            s.add_partition("db.p", Some(doc! {"_id": Bson::Int32(20)}))
                .unwrap_err()
        ),
        17249
    );
    assert_eq!(
        code(
            s.add_partition("db.p", Some(doc! {"_id": Bson::MaxKey}))
                .unwrap_err()
        ),
        2
    );
    assert_eq!(
        code(s.drop_partition("db.p", DropPartitions::Id(7)).unwrap_err()),
        2
    );
    let unique = IndexSpec::parse(&doc! {"key": {"u": 1}, "name": "u_1", "unique": true}).unwrap();
    assert_eq!(
        code(s.create_indexes("db.p", vec![unique]).unwrap_err()),
        17351
    );
    // By max: only partitions whose max is at or below it, and never the last.
    assert!(s
        .drop_partition("db.p", DropPartitions::UpTo(doc! {"_id": Bson::Int32(19)}))
        .unwrap()
        .is_empty());
    assert_eq!(
        s.drop_partition("db.p", DropPartitions::UpTo(doc! {"_id": Bson::MaxKey}))
            .unwrap(),
        vec![0]
    );
    assert_eq!(c.partition_stats().unwrap().len(), 1);
    assert_eq!(c.count().unwrap(), 0);
}

#[test]
fn dropping_the_last_partition_unbounds_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let c = partitioned(&s, "db.p");
    for i in 0..10 {
        c.insert(&doc! {"_id": i}).unwrap();
    }
    s.add_partition("db.p", None).unwrap();
    c.insert(&doc! {"_id": 50}).unwrap();
    s.drop_partition("db.p", DropPartitions::Id(1)).unwrap();
    let st = c.partition_stats().unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].info.max, None);
    c.insert(&doc! {"_id": 50}).unwrap();
    assert_eq!(c.count().unwrap(), 11);
}

#[test]
fn a_cursor_survives_the_drop_of_the_partition_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let c = partitioned(&s, "db.p");
    for i in 0..300 {
        c.insert(&doc! {"_id": i, "pad": "x".repeat(100)}).unwrap();
        if i == 99 || i == 199 {
            s.add_partition("db.p", None).unwrap();
        }
    }
    let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
    for i in 0..10 {
        assert_eq!(
            cur.next_doc().unwrap().unwrap().1.get_i32("_id").unwrap(),
            i
        );
    }
    s.drop_partition("db.p", DropPartitions::Id(0)).unwrap();
    let mut rest = Vec::new();
    while let Some((_, d)) = cur.next_doc().unwrap() {
        rest.push(d.get_i32("_id").unwrap());
    }
    assert!(rest.ends_with(&(100..300).collect::<Vec<_>>()));
    assert_eq!(c.count().unwrap(), 200);
}

#[derive(Debug, Clone)]
enum Op {
    Put(i32, i32),
    Delete(i32),
    Add(Option<i32>),
    DropId(usize),
    DropUpTo(i32),
    IndexB,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0i32..300, 0i32..20).prop_map(|(i, a)| Op::Put(i, a)),
        2 => (0i32..300).prop_map(Op::Delete),
        1 => proptest::option::of(0i32..300).prop_map(Op::Add),
        1 => (0usize..6).prop_map(Op::DropId),
        1 => (0i32..300).prop_map(Op::DropUpTo),
        1 => Just(Op::IndexB),
    ]
}

fn put(c: &Collection, id: i32, a: i32) {
    let lock = c.lock_doc(id_key(&Bson::Int32(id))).unwrap();
    let new = doc! {"_id": id, "a": a, "b": format!("{}", a * 7 % 11)};
    match lock.read().unwrap() {
        Some(old) => c.replace(&lock, &old, &new).unwrap(),
        None => c.insert_under(&lock, &new).unwrap(),
    }
}

fn delete(c: &Collection, id: i32) {
    let lock = c.lock_doc(id_key(&Bson::Int32(id))).unwrap();
    if let Some(old) = lock.read().unwrap() {
        c.delete(&lock, &old).unwrap();
    }
}

fn check_same(s: &Store, p: &Arc<Collection>, r: &Arc<Collection>) {
    assert_eq!(all_docs(p), all_docs(r));
    assert_eq!(p.count().unwrap(), r.count().unwrap());
    assert_eq!(p.estimated_count(), r.estimated_count());
    for ix in r.indexes() {
        let name = ix.name();
        let entries = |c: &Collection| {
            let ix = c.index(name).unwrap();
            let mut cur = ix
                .parts()
                .cursor(Bound::Unbounded, Bound::Unbounded, None, false);
            std::iter::from_fn(|| cur.next().unwrap())
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        };
        assert_eq!(entries(p), entries(r), "index {name}");
    }
    for (filter, sort) in [
        (doc! {"a": {"$gte": 3, "$lt": 12}}, Some(doc! {"a": -1})),
        (doc! {"b": {"$in": ["1", "5", "9"]}}, Some(doc! {"b": 1})),
        (doc! {"_id": {"$gt": 50, "$lte": 150}}, None),
    ] {
        let (pd, ps) = query(p, filter.clone(), sort.clone());
        let (rd, rs) = query(r, filter, sort);
        assert_eq!(ps, rs);
        if ps {
            // Both sorted by the same index: the same documents in the same order (ties in
            // `_id` order, as index keys end with it).
            assert_eq!(pd, rd);
        } else {
            assert_eq!(pd.len(), rd.len());
        }
    }
    let v = s.validate(p.ns(), false).unwrap().unwrap();
    assert!(v.errors.is_empty(), "{:?}", v.errors);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Writes, partition adds and drops and an index build on a partitioned collection give
    /// the reads a plain collection gives with the same writes (and the dropped partitions'
    /// documents deleted), before and after a restart.
    #[test]
    fn partitioned_reads_match_a_plain_collection(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let s = open(dir.path());
        let p = partitioned(&s, "db.p");
        let r = s.create("db.r", doc! {}).unwrap();
        let a = IndexSpec::parse(&doc! {"key": {"a": 1}, "name": "a_1"}).unwrap();
        s.create_indexes("db.p", vec![a.clone()]).unwrap();
        s.create_indexes("db.r", vec![a]).unwrap();
        for op in ops {
            match op {
                Op::Put(id, a) => {
                    put(&p, id, a);
                    put(&r, id, a);
                }
                Op::Delete(id) => {
                    delete(&p, id);
                    delete(&r, id);
                }
                Op::Add(max) => {
                    let _ = s.add_partition("db.p", max.map(|v| doc! {"_id": v}));
                }
                Op::DropId(_) | Op::DropUpTo(_) => {
                    let before = p.layout();
                    let members = before.primary.members();
                    let which = match op {
                        Op::DropId(i) => DropPartitions::Id(members[i % members.len()].id),
                        Op::DropUpTo(v) => DropPartitions::UpTo(doc! {"_id": v}),
                        _ => unreachable!(),
                    };
                    let Ok(gone) = s.drop_partition("db.p", which) else { continue };
                    for d in all_docs(&r) {
                        let id = d.get("_id").unwrap().clone();
                        let at = before.primary.position_of(&id_key(&id));
                        if gone.contains(&members[at].id) {
                            delete(&r, d.get_i32("_id").unwrap());
                        }
                    }
                }
                Op::IndexB => {
                    let b = IndexSpec::parse(&doc! {"key": {"b": -1, "a": 1}, "name": "b"}).unwrap();
                    s.create_indexes("db.p", vec![b.clone()]).unwrap();
                    s.create_indexes("db.r", vec![b]).unwrap();
                }
            }
            check_same(&s, &p, &r);
        }
        drop((p, r));
        s.close().unwrap();
        let s = open(dir.path());
        let (p, r) = (s.get("db.p").unwrap(), s.get("db.r").unwrap());
        check_same(&s, &p, &r);
    }
}
