//! The write rules hold on every entry point of a document write (a differential test: each
//! entry point must refuse exactly what the others refuse, with the same code, and write
//! nothing), and a capped collection is trimmed on every path that inserts.

use std::sync::Arc;
use std::time::Duration;

use bson::doc;

use super::*;

const WAIT: Duration = Duration::from_millis(50);

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), crate::tests::opts(), UpdateRegistry::new()).unwrap();
    (dir, s)
}

/// The code a refusal carries: 121 for the validator, the `Refused` code otherwise.
fn code(e: CollError) -> i32 {
    match e {
        CollError::Validation(_) => 121,
        CollError::Refused { code, .. } => code,
        other => panic!("unexpected error {other:?}"),
    }
}

/// Write `bad` through every entry point of `c` (the document `_id: "seed"` exists); return
/// each refusal's code, by entry point.
fn every_entry_point(s: &Store, c: &Arc<Collection>, bad: &Document) -> Vec<(&'static str, i32)> {
    let with_id = |id: &str| {
        let mut d = bad.clone();
        d.insert("_id", id);
        d
    };
    let seed = id_key(&Bson::String("seed".into()));
    let mut out = Vec::new();
    out.push(("insert", c.insert(&with_id("a")).map_err(code).unwrap_err()));
    out.push((
        "insert_if_absent (falls back)",
        match c.insert_if_absent(&[with_id("b")], Writer::plain()) {
            Ok(false) => c.insert(&with_id("b")).map_err(code).unwrap_err(),
            other => panic!("insert_if_absent wrote a document that breaks a rule: {other:?}"),
        },
    ));
    {
        let lock = c.lock_doc(id_key(&Bson::String("c".into()))).unwrap();
        out.push((
            "insert_under",
            c.insert_under(&lock, &with_id("c"))
                .map_err(code)
                .unwrap_err(),
        ));
    }
    {
        let lock = c.lock_doc(seed.clone()).unwrap();
        let old = lock.read().unwrap().unwrap();
        out.push((
            "replace",
            c.replace(&lock, &old, &with_id("seed"))
                .map_err(code)
                .unwrap_err(),
        ));
    }
    let t = s.begin(TxnKind::Retryable, WAIT).unwrap();
    out.push((
        "insert_as in a retryable write",
        c.insert_as(&with_id("d"), Writer::new(Some(&t)))
            .map_err(code)
            .unwrap_err(),
    ));
    {
        let lock = c.lock_doc_as(seed, Writer::new(Some(&t))).unwrap();
        let old = lock.read().unwrap().unwrap();
        out.push((
            "replace in a retryable write",
            c.replace(&lock, &old, &with_id("seed"))
                .map_err(code)
                .unwrap_err(),
        ));
    }
    t.commit(false).unwrap();
    out
}

#[test]
fn every_entry_point_applies_the_same_rules() {
    let (_d, s) = store();
    let v = s
        .create("db.v", doc! {"validator": {"n": {"$type": "int"}}})
        .unwrap();
    v.insert(&doc! {"_id": "seed", "n": 1}).unwrap();
    let mut deep = doc! {};
    for _ in 0..120 {
        deep = doc! {"d": deep};
    }
    let plain = s.get_or_create("db.p").unwrap();
    plain.insert(&doc! {"_id": "seed"}).unwrap();
    for (c, bad, want) in [
        (&v, doc! {"n": "text"}, 121),
        (&plain, doc! {"deep": deep}, 15),
        (&plain, doc! {"big": "x".repeat(17 << 20)}, 10334),
    ] {
        let before = c.count().unwrap();
        for (entry, got) in every_entry_point(&s, c, &bad) {
            assert_eq!(got, want, "{entry}");
        }
        assert_eq!(c.count().unwrap(), before, "nothing written");
    }
    // Bypassing validation lets the same document in.
    v.insert_as(
        &doc! {"_id": "b", "n": "text"},
        Writer::plain().bypassing_validation(true),
    )
    .unwrap();
}

#[test]
fn capped_collections_trim_on_every_insert_path_and_refuse_multi_document_transactions() {
    let (_d, s) = store();
    let c = s
        .create("db.cap", doc! {"capped": true, "size": 100_000, "max": 3})
        .unwrap();
    for i in 0..5 {
        c.insert(&doc! {"_id": i}).unwrap();
    }
    let ids = |c: &Collection| -> Vec<Bson> {
        let mut cur = c.scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
        let mut out = Vec::new();
        while let Some((_, d)) = cur.next_doc().unwrap() {
            out.push(d.get("_id").unwrap().clone());
        }
        out
    };
    assert_eq!(
        ids(&c),
        vec![Bson::Int32(2), Bson::Int32(3), Bson::Int32(4)]
    );
    // A retryable write's transaction: trimmed when it commits.
    for i in 10..13 {
        let t = s.begin(TxnKind::Retryable, WAIT).unwrap();
        c.insert_as(&doc! {"_id": i}, Writer::new(Some(&t)))
            .unwrap();
        t.commit(false).unwrap();
    }
    assert_eq!(
        ids(&c),
        vec![Bson::Int32(10), Bson::Int32(11), Bson::Int32(12)]
    );
    // A multi-document transaction may not write it at all.
    let t = s.begin(TxnKind::Multi, WAIT).unwrap();
    let e = c
        .insert_as(&doc! {"_id": 20}, Writer::new(Some(&t)))
        .unwrap_err();
    assert!(matches!(e, CollError::Refused { code: 263, .. }), "{e:?}");
    let (oldest, _) = c
        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .next_doc()
        .unwrap()
        .unwrap();
    let lock = c.lock_doc_as(oldest, Writer::new(Some(&t))).unwrap();
    let old = lock.read().unwrap().unwrap();
    let e = c.delete(&lock, &old).unwrap_err();
    assert!(matches!(e, CollError::Refused { code: 20, .. }), "{e:?}");
    drop(lock);
    t.abort().unwrap();
    assert_eq!(
        ids(&c),
        vec![Bson::Int32(10), Bson::Int32(11), Bson::Int32(12)]
    );
}
