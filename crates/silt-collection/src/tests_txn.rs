//! Transactions at the document layer: isolation, write conflicts (locks and first committer
//! wins), unique indexes inside transactions, abort, and reads at a transaction's snapshot.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bson::doc;

use super::*;

const WAIT: Duration = Duration::from_millis(20);

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), EnvOptions::default(), UpdateRegistry::new()).unwrap();
    (dir, s)
}

/// Every document of `c` as `snap` (or, without one, a fresh snapshot) sees them.
fn docs(c: &Arc<Collection>, snap: Option<&Snapshot>) -> Vec<Document> {
    let snap = snap.cloned().unwrap_or_else(|| c.snapshot());
    let planned = Planned::full_scan();
    let mut src = MatchSource::new_at(c.clone(), &planned, None, Stop::default(), snap);
    let mut out = Vec::new();
    while let Some((_, d)) = src.next_match().unwrap() {
        out.push(d);
    }
    out
}

fn update(c: &Collection, lock: &DocLock<'_>, set: Document) {
    let old = lock.read().unwrap().unwrap();
    let mut new = old.clone();
    new.extend(set);
    c.replace(lock, &old, &new).unwrap();
}

#[test]
fn a_transaction_is_invisible_until_it_commits_and_sees_its_own_writes() {
    let (_d, s) = store();
    let c = s.get_or_create("db.c").unwrap();
    c.insert(&doc! {"_id": 1, "v": 0}).unwrap();
    let t = s.begin(TxnKind::Multi, WAIT).unwrap();
    c.insert_as(&doc! {"_id": 2, "v": 0}, Writer::new(Some(&t)))
        .unwrap();
    let lock = c
        .lock_doc_as(id_key(&Bson::Int32(1)), Writer::new(Some(&t)))
        .unwrap();
    update(&c, &lock, doc! {"v": 1});
    drop(lock);
    assert_eq!(docs(&c, None), vec![doc! {"_id": 1, "v": 0}]);
    assert_eq!(
        docs(&c, Some(t.snapshot())),
        vec![doc! {"_id": 1, "v": 1}, doc! {"_id": 2, "v": 0}]
    );
    // A snapshot taken before the commit keeps its view after it.
    let before = c.snapshot();
    t.commit(false).unwrap();
    assert_eq!(docs(&c, Some(&before)), vec![doc! {"_id": 1, "v": 0}]);
    assert_eq!(
        docs(&c, None),
        vec![doc! {"_id": 1, "v": 1}, doc! {"_id": 2, "v": 0}]
    );
    assert_eq!(c.count().unwrap(), 2);
}

#[test]
fn conflicting_writers_get_write_conflicts() {
    let (_d, s) = store();
    let c = s.get_or_create("db.c").unwrap();
    c.insert(&doc! {"_id": 1, "v": 0}).unwrap();
    c.insert(&doc! {"_id": 2, "v": 0}).unwrap();
    let key1 = id_key(&Bson::Int32(1));
    let t1 = s.begin(TxnKind::Multi, WAIT).unwrap();
    let t2 = s.begin(TxnKind::Multi, WAIT).unwrap();
    let l = c.lock_doc_as(key1.clone(), Writer::new(Some(&t1))).unwrap();
    update(&c, &l, doc! {"v": 1});
    drop(l);
    // t1 holds document 1 until it ends.
    assert!(matches!(
        c.lock_doc_as(key1.clone(), Writer::new(Some(&t2))),
        Err(CollError::WriteConflict(_))
    ));
    t1.commit(false).unwrap();
    // Now free, but changed after t2's snapshot: first committer wins when t2 writes it.
    let write = |key: Vec<u8>| {
        let l = c.lock_doc_as(key, Writer::new(Some(&t2)))?;
        let old = l.read()?.unwrap();
        c.replace(
            &l,
            &old,
            &doc! {"_id": old.get("_id").cloned().unwrap(), "v": 9},
        )
    };
    assert!(matches!(
        write(key1.clone()),
        Err(CollError::WriteConflict(_))
    ));
    // A write outside a transaction after t2 began conflicts the same way.
    c.insert(&doc! {"_id": 3, "v": 0}).unwrap();
    let l = c.lock_doc(id_key(&Bson::Int32(2))).unwrap();
    update(&c, &l, doc! {"v": 7});
    drop(l);
    assert!(matches!(
        write(id_key(&Bson::Int32(2))),
        Err(CollError::WriteConflict(_))
    ));
    drop(t2);
    // A transaction begun now writes both.
    let t3 = s.begin(TxnKind::Multi, WAIT).unwrap();
    for k in [1, 2] {
        let l = c
            .lock_doc_as(id_key(&Bson::Int32(k)), Writer::new(Some(&t3)))
            .unwrap();
        update(&c, &l, doc! {"v": 9});
    }
    t3.commit(false).unwrap();
    assert!(docs(&c, None)
        .iter()
        .take(2)
        .all(|d| d.get_i32("v") == Ok(9)));
}

#[test]
fn aborted_transactions_leave_nothing_in_any_index() {
    let (_d, s) = store();
    let c = s.get_or_create("db.c").unwrap();
    s.create_indexes(
        "db.c",
        vec![IndexSpec::parse(&doc! {"key": {"a": 1}, "name": "a_1"}).unwrap()],
    )
    .unwrap();
    c.insert(&doc! {"_id": 1, "a": 1}).unwrap();
    let t = s.begin(TxnKind::Multi, WAIT).unwrap();
    c.insert_as(&doc! {"_id": 2, "a": 2}, Writer::new(Some(&t)))
        .unwrap();
    let l = c
        .lock_doc_as(id_key(&Bson::Int32(1)), Writer::new(Some(&t)))
        .unwrap();
    let old = l.read().unwrap().unwrap();
    c.delete(&l, &old).unwrap();
    drop(l);
    assert!(docs(&c, Some(t.snapshot())) == vec![doc! {"_id": 2, "a": 2}]);
    t.abort().unwrap();
    assert_eq!(docs(&c, None), vec![doc! {"_id": 1, "a": 1}]);
    let ix = c.index("a_1").unwrap();
    let all = ix
        .parts()
        .first()
        .range(Bound::Unbounded, Bound::Unbounded)
        .unwrap();
    assert_eq!(all.len(), 1);
    let report = s.validate("db.c", true).unwrap().unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
}

#[test]
fn unique_indexes_hold_inside_transactions() {
    let (_d, s) = store();
    let c = s.get_or_create("db.c").unwrap();
    s.create_indexes(
        "db.c",
        vec![IndexSpec::parse(&doc! {"key": {"u": 1}, "name": "u_1", "unique": true}).unwrap()],
    )
    .unwrap();
    let t1 = s.begin(TxnKind::Multi, WAIT).unwrap();
    let t2 = s.begin(TxnKind::Multi, WAIT).unwrap();
    c.insert_as(&doc! {"_id": 1, "u": 5}, Writer::new(Some(&t1)))
        .unwrap();
    // t1 holds the value 5: another transaction waits, then gives up.
    assert!(matches!(
        c.insert_as(&doc! {"_id": 2, "u": 5}, Writer::new(Some(&t2))),
        Err(CollError::WriteConflict(_))
    ));
    // t1 itself sees its own entry.
    assert!(matches!(
        c.insert_as(&doc! {"_id": 3, "u": 5}, Writer::new(Some(&t1))),
        Err(CollError::DuplicateKey { .. })
    ));
    t1.commit(false).unwrap();
    drop(t2);
    assert!(matches!(
        c.insert(&doc! {"_id": 4, "u": 5}),
        Err(CollError::DuplicateKey { .. })
    ));
    // Deleting the holder and reusing its value in one transaction is allowed.
    let t = s.begin(TxnKind::Multi, WAIT).unwrap();
    let l = c
        .lock_doc_as(id_key(&Bson::Int32(1)), Writer::new(Some(&t)))
        .unwrap();
    let old = l.read().unwrap().unwrap();
    c.delete(&l, &old).unwrap();
    drop(l);
    c.insert_as(&doc! {"_id": 5, "u": 5}, Writer::new(Some(&t)))
        .unwrap();
    t.commit(false).unwrap();
    assert_eq!(docs(&c, None), vec![doc! {"_id": 5, "u": 5}]);
}

#[test]
fn a_write_outside_transactions_waits_for_the_holder() {
    let (_d, s) = store();
    let c = s.get_or_create("db.c").unwrap();
    c.insert(&doc! {"_id": 1, "v": 0}).unwrap();
    let t = s.begin(TxnKind::Multi, WAIT).unwrap();
    let l = c
        .lock_doc_as(id_key(&Bson::Int32(1)), Writer::new(Some(&t)))
        .unwrap();
    update(&c, &l, doc! {"v": 1});
    drop(l);
    let c2 = c.clone();
    let w = std::thread::spawn(move || {
        let l = c2.lock_doc(id_key(&Bson::Int32(1))).unwrap();
        // It reads what the transaction committed, not what was there before.
        let v = l.read().unwrap().unwrap().get_i32("v").unwrap();
        update(&c2, &l, doc! {"v": v + 10});
    });
    while s.engine_stats().lock_waits == 0 {
        std::thread::yield_now();
    }
    t.commit(false).unwrap();
    w.join().unwrap();
    assert_eq!(docs(&c, None), vec![doc! {"_id": 1, "v": 11}]);
}

#[test]
fn blind_inserts_step_aside_for_a_transaction_holding_a_document() {
    let (_d, s) = store();
    let c = s.get_or_create("db.c").unwrap();
    let t = s.begin(TxnKind::Multi, WAIT).unwrap();
    c.insert_as(&doc! {"_id": 2, "v": "txn"}, Writer::new(Some(&t)))
        .unwrap();
    let batch = [doc! {"_id": 1}, doc! {"_id": 2, "v": "blind"}];
    assert!(
        !c.insert_if_absent(&batch, Writer::plain()).unwrap(),
        "a held document: the normal path"
    );
    t.commit(false).unwrap();
    assert!(c.insert_if_absent(&batch, Writer::plain()).unwrap());
    assert_eq!(
        docs(&c, None),
        vec![doc! {"_id": 1}, doc! {"_id": 2, "v": "txn"}]
    );
}
