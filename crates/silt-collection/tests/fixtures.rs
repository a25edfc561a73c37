//! Data directories written by earlier releases (`tests/fixtures/format-v*`, made by
//! `tests/fixtures/make.py`; see `docs/format.md` section 13) still open: recovery replays
//! their old-format log, the old node layout is read, the old catalog entries are understood,
//! every document and index entry is where it should be, and the directory takes new writes
//! that survive a reopen.

use std::ops::Bound;
use std::path::Path;

use bson::{doc, Bson, Document};
use silt_collection::Store;
use silt_storage::{EnvOptions, UpdateRegistry};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn expected() -> Vec<Document> {
    (0..300)
        .filter(|i| !(250..260).contains(i))
        .map(|i| {
            let mut d = doc! {"_id": i, "a": i % 7, "s": format!("s{i}"), "arr": [i, i + 1]};
            if i % 10 == 0 {
                d.insert("u", true);
            }
            d
        })
        .collect()
}

fn open(dir: &Path) -> Store {
    let opts = EnvOptions {
        cache_bytes: 64 << 20,
        ..EnvOptions::default()
    };
    Store::open(dir, opts, UpdateRegistry::new()).unwrap()
}

fn documents(store: &Store) -> Vec<Document> {
    let c = store.get("fx.docs").expect("the fixture's collection");
    let mut cur = c.scan(Bound::Unbounded, Bound::Unbounded);
    let mut out = Vec::new();
    while let Some((_, d)) = cur.next_doc().unwrap() {
        out.push(d);
    }
    out
}

fn check(version: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(version);
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&src, tmp.path());
    let store = open(tmp.path());
    assert_eq!(documents(&store), expected(), "{version}: documents");
    let c = store.get("fx.docs").unwrap();
    let mut names: Vec<String> = c.indexes().iter().map(|i| i.name().to_string()).collect();
    names.sort();
    assert_eq!(names, ["a_1", "s_1_a_-1"], "{version}: indexes");
    let r = store.validate("fx.docs", true).unwrap().unwrap();
    assert!(r.valid(), "{version}: validate: {:?}", r.errors);
    assert_eq!(r.nrecords, 290);
    assert!(
        r.keys_per_index.iter().all(|(_, n)| *n == 290),
        "{:?}",
        r.keys_per_index
    );
    // The unique index still holds.
    assert!(c.insert(&doc! {"_id": 1000, "a": 3, "s": "s3"}).is_err());
    // New writes land in today's formats and survive a reopen.
    c.insert(&doc! {"_id": 1001, "a": 1, "s": "new"}).unwrap();
    drop(c);
    store.close().unwrap();
    let store = open(tmp.path());
    let docs = documents(&store);
    assert_eq!(docs.len(), 291);
    assert_eq!(
        docs.last().unwrap().get("s"),
        Some(&Bson::String("new".into()))
    );
    let r = store.validate("fx.docs", true).unwrap().unwrap();
    assert!(
        r.valid(),
        "{version}: validate after writes: {:?}",
        r.errors
    );
    store.close().unwrap();
}

#[test]
fn format_v1_opens() {
    check("format-v1");
}

#[test]
fn format_v2_opens() {
    check("format-v2");
}
