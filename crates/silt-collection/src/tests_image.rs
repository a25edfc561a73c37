//! Tests of store images: an image is the store as of its view (later writes and drops do not
//! reach it), installing one replaces every collection, index and the oplog of another store,
//! and an install a crash interrupted is finished when the store opens again.

use std::ops::Bound;
use std::time::Duration;

use bson::{doc, Bson, Document};

use super::tests::opts;
use super::*;
use crate::oplog::OplogOptions;

/// A store with an oplog (as a replica-set member's) in `dir`.
pub(super) fn open(dir: &std::path::Path) -> Store {
    Store::open_with_oplog(
        dir,
        opts(),
        UpdateRegistry::new(),
        Some(OplogOptions {
            max_bytes: 1 << 30,
            min_retention: Duration::ZERO,
        }),
    )
    .unwrap()
}

/// Every collection's documents, in `_id` order, and the oplog's entries.
pub(super) fn contents(s: &Store) -> (Vec<(String, Vec<Document>)>, Vec<Document>) {
    let mut out = Vec::new();
    for db in s.list_databases() {
        for (ns, c) in s.list_collections(&db) {
            let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
            let mut docs = Vec::new();
            while let Some((_, d)) = cur.next_doc().unwrap() {
                docs.push(d);
            }
            out.push((ns, docs));
        }
    }
    let mut scan = s.oplog().unwrap().read(None);
    let mut log = Vec::new();
    while let Some((_, d)) = scan.next_entry().unwrap() {
        log.push(d);
    }
    (out, log)
}

fn spec(d: Document) -> IndexSpec {
    IndexSpec::parse(&d).unwrap()
}

#[test]
fn an_installed_image_is_the_store_as_of_its_view() {
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let img = a_dir.path().join("out.img");
    let a = open(a_dir.path());
    let c = a.get_or_create("db.c").unwrap();
    for i in 0..3000 {
        c.insert(&doc! {"_id": i, "a": i % 17, "pad": "x".repeat(50)})
            .unwrap();
    }
    a.create_indexes("db.c", vec![spec(doc! {"key": {"a": 1}, "name": "a_1"})])
        .unwrap();
    let gone = a.get_or_create("db.gone").unwrap();
    gone.insert(&doc! {"_id": 1}).unwrap();
    a.create("db.capped", doc! {"capped": true, "size": 4096})
        .unwrap();
    a.record_position(b"position-1").unwrap();

    let view = a.image_view().unwrap();
    assert_eq!(view.position(), b"position-1");
    let want = contents(&a);
    // After the view: a write, and a drop whose dictionaries the view still reads.
    c.insert(&doc! {"_id": "later"}).unwrap();
    assert!(a.drop_collection("db.gone").unwrap());
    let stats = view.write_to(std::fs::File::create(&img).unwrap()).unwrap();
    assert!(stats.pairs > 3000, "{stats:?}");

    let b = open(b_dir.path());
    let other = b.get_or_create("db.other").unwrap();
    other.insert(&doc! {"_id": "mine"}).unwrap();
    let installed = b.install_image(b"position-2", &img).unwrap();
    assert_eq!(
        (installed.dicts, installed.pairs),
        (stats.dicts, stats.pairs)
    );
    assert_eq!(contents(&b), want);
    assert_eq!(b.replication_position().unwrap().unwrap(), b"position-2");
    assert!(b.get("db.other").is_none());
    // The index came with the image, and the store takes writes after it.
    let c = b.get("db.c").unwrap();
    assert!(c.index("a_1").is_some());
    c.insert(&doc! {"_id": "after", "a": 1}).unwrap();
    b.get_or_create("db.new")
        .unwrap()
        .insert(&doc! {"_id": 1})
        .unwrap();
    drop((b, c, other));
    let b = open(b_dir.path());
    assert_eq!(b.get("db.c").unwrap().count().unwrap(), 3001);
    assert!(b.get("db.new").is_some());
    assert!(b.get("db.gone").is_some(), "it was in the view");
}

#[test]
fn an_interrupted_install_is_finished_when_the_store_opens() {
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let img = a_dir.path().join("out.img");
    let a = open(a_dir.path());
    let c = a.get_or_create("db.c").unwrap();
    for i in 0..100 {
        c.insert(&doc! {"_id": i}).unwrap();
    }
    a.image_view()
        .unwrap()
        .write_to(std::fs::File::create(&img).unwrap())
        .unwrap();
    let want = contents(&a);
    {
        let b = open(b_dir.path());
        b.get_or_create("db.mine")
            .unwrap()
            .insert(&doc! {"_id": Bson::Null})
            .unwrap();
    }
    // As if the process died just after the install began.
    crate::image::write_marker(b_dir.path(), &img, b"p").unwrap();
    let b = open(b_dir.path());
    assert_eq!(contents(&b), want);
    assert_eq!(b.replication_position().unwrap().unwrap(), b"p");
    assert!(!b_dir.path().join("image-install").exists());
}

#[test]
fn a_damaged_image_is_refused() {
    let a_dir = tempfile::tempdir().unwrap();
    let img = a_dir.path().join("out.img");
    let a = open(a_dir.path());
    a.get_or_create("db.c")
        .unwrap()
        .insert(&doc! {"_id": 1})
        .unwrap();
    a.image_view()
        .unwrap()
        .write_to(std::fs::File::create(&img).unwrap())
        .unwrap();
    let bytes = std::fs::read(&img).unwrap();
    std::fs::write(&img, &bytes[..bytes.len() - 9]).unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let b = open(b_dir.path());
    assert!(b.install_image(b"p", &img).is_err());
}

/// The image fixture of format version 1 (`tests/fixtures/image-v1.img`, made by
/// [`make_image_v1_fixture`] at commit 735a041): a store with an indexed collection, a capped
/// collection and an oplog.
fn image_fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/image-v1.img")
}

fn fixture_store(dir: &std::path::Path) -> Store {
    let s = open(dir);
    let c = s.get_or_create("app.c").unwrap();
    for i in 0..50 {
        c.insert(&doc! {"_id": i, "a": i % 5, "s": format!("doc {i}")})
            .unwrap();
    }
    s.create_indexes("app.c", vec![spec(doc! {"key": {"a": 1}, "name": "a_1"})])
        .unwrap();
    let capped = s
        .create("app.capped", doc! {"capped": true, "size": 4096, "max": 3})
        .unwrap();
    for i in 0..5 {
        capped.insert(&doc! {"_id": i}).unwrap();
    }
    s
}

/// Writes the fixture (run by hand: `cargo test -p silt-collection make_image_v1_fixture --
/// --ignored`); the fixture must not change once committed.
#[test]
#[ignore]
fn make_image_v1_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let s = fixture_store(dir.path());
    s.record_position(b"fixture").unwrap();
    s.image_view()
        .unwrap()
        .write_to(std::fs::File::create(image_fixture()).unwrap())
        .unwrap();
}

#[test]
fn the_version_1_image_fixture_installs() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.install_image(b"p", &image_fixture()).unwrap();
    let c = s.get("app.c").unwrap();
    assert_eq!(c.count().unwrap(), 50);
    assert_eq!(
        c.get(&Bson::Int32(7)).unwrap().unwrap(),
        doc! {"_id": 7, "a": 2, "s": "doc 7"}
    );
    assert!(c.index("a_1").is_some());
    assert_eq!(s.get("app.capped").unwrap().count().unwrap(), 3);
    let (_, log) = contents(&s);
    assert!(
        log.len() >= 50,
        "the oplog came with the image: {}",
        log.len()
    );
    // Its shape matches a store built the same way today.
    let today = tempfile::tempdir().unwrap();
    let (want, _) = contents(&fixture_store(today.path()));
    assert_eq!(contents(&s).0, want);
}
