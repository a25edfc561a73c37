//! Tests of the oplog: entries of every write in the same batch as the write, visibility
//! below pending times, trimming by whole partitions, the clock across a reopen, and replay
//! through the apply function, and data and oplog agreeing after a power loss.

use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};

use super::tests::opts;
use super::*;
use crate::oplog::{Oplog, OplogOptions};

fn open(dir: &std::path::Path, max_bytes: u64) -> Store {
    Store::open_with_oplog(
        dir,
        opts(),
        UpdateRegistry::new(),
        Some(OplogOptions {
            max_bytes,
            min_retention: Duration::ZERO,
        }),
    )
    .unwrap()
}

fn entries(log: &Oplog) -> Vec<Document> {
    let mut scan = log.read(None);
    let mut out = Vec::new();
    while let Some((_, d)) = scan.next_entry().unwrap() {
        out.push(d);
    }
    out
}

fn ops(log: &Oplog) -> Vec<String> {
    entries(log)
        .iter()
        .map(|e| {
            let o = e.get_document("o").unwrap();
            match e.get_str("op").unwrap() {
                "c" => format!("c {}", o.keys().next().unwrap()),
                op => format!("{op} {}", e.get_str("ns").unwrap()),
            }
        })
        .collect()
}

#[test]
fn every_write_is_logged_in_order_with_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 1 << 30);
    let log = s.oplog().unwrap().clone();
    let c = s.get_or_create("db.c").unwrap();
    c.insert(&doc! {"_id": 1, "a": 1}).unwrap();
    let lock = c.lock_doc(id_key(&Bson::Int32(1))).unwrap();
    let old = lock.read().unwrap().unwrap();
    c.update(&lock, &old, &doc! {"_id": 1, "a": 2}).unwrap();
    c.replace(&lock, &doc! {"_id": 1, "a": 2}, &doc! {"_id": 1, "b": 1})
        .unwrap();
    c.delete(&lock, &doc! {"_id": 1, "b": 1}).unwrap();
    drop(lock);
    // Neither the local database nor the retry table is logged.
    s.get_or_create("local.x")
        .unwrap()
        .insert(&doc! {"_id": 1})
        .unwrap();
    s.get_or_create("config.transactions")
        .unwrap()
        .insert(&doc! {"_id": 1})
        .unwrap();
    s.drop_collection("db.c").unwrap();
    assert_eq!(
        ops(&log),
        ["c create", "i db.c", "u db.c", "u db.c", "d db.c", "c drop"]
    );
    let e = entries(&log);
    assert_eq!(e[1].get_document("o").unwrap(), &doc! {"_id": 1, "a": 1});
    assert_eq!(e[1].get_document("o2").unwrap(), &doc! {"_id": 1});
    assert_eq!(
        e[2].get_document("o").unwrap(),
        &doc! {"$v": 2, "diff": {"u": {"a": 2}}}
    );
    assert_eq!(e[3].get_document("o").unwrap(), &doc! {"_id": 1, "b": 1});
    assert_eq!(e[4].get_document("o").unwrap(), &doc! {"_id": 1});
    for w in e.windows(2) {
        assert!(w[0].get_timestamp("ts").unwrap() < w[1].get_timestamp("ts").unwrap());
    }
    for x in &e {
        assert_eq!(x.get_i64("v").unwrap(), 2);
        assert_eq!(x.get_i64("t").unwrap(), 1);
        assert!(x.get_datetime("wall").is_ok());
    }
}

#[test]
fn a_transaction_is_one_apply_ops_entry_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 1 << 30);
    let log = s.oplog().unwrap().clone();
    let c = s.get_or_create("db.c").unwrap();
    let before = ops(&log).len();
    let t = s.begin(TxnKind::Multi, Duration::from_millis(50)).unwrap();
    t.set_session(oplog::OpSession {
        lsid: doc! {"id": 1},
        txn_number: 7,
    });
    c.insert_as(&doc! {"_id": 1}, Writer::new(Some(&t)))
        .unwrap();
    c.insert_as(&doc! {"_id": 2}, Writer::new(Some(&t)))
        .unwrap();
    assert_eq!(
        ops(&log).len(),
        before,
        "nothing is logged before the commit"
    );
    t.commit(true).unwrap();
    let e = entries(&log);
    let last = e.last().unwrap();
    assert_eq!(last.get_str("ns").unwrap(), "admin.$cmd");
    assert_eq!(last.get_i64("txnNumber").unwrap(), 7);
    let list = last
        .get_document("o")
        .unwrap()
        .get_array("applyOps")
        .unwrap();
    assert_eq!(list.len(), 2);
    // An aborted transaction logs nothing.
    let n = e.len();
    let t = s.begin(TxnKind::Multi, Duration::from_millis(50)).unwrap();
    c.insert_as(&doc! {"_id": 3}, Writer::new(Some(&t)))
        .unwrap();
    t.abort().unwrap();
    assert_eq!(entries(&log).len(), n);
}

#[test]
fn readers_stop_below_a_pending_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 1 << 30);
    let log = s.oplog().unwrap().clone();
    let c = s.get_or_create("db.c").unwrap();
    let n = entries(&log).len();
    // A write that has taken its time but not committed hides every later entry.
    let held = log.reserve(1);
    c.insert(&doc! {"_id": 1}).unwrap();
    assert_eq!(entries(&log).len(), n);
    assert!(log.visible() < held.stamps.ts(0));
    drop(held);
    assert_eq!(entries(&log).len(), n + 1);
    assert!(log.wait_past(
        bson::Timestamp {
            time: 0,
            increment: 0
        },
        std::time::Instant::now()
    ));
}

#[test]
fn trimming_drops_whole_partitions_and_the_clock_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let newest;
    {
        let s = open(dir.path(), 256 << 10);
        let log = s.oplog().unwrap().clone();
        let c = s.get_or_create("db.c").unwrap();
        let pad = "x".repeat(1000);
        let mut reader = log.read(None);
        let mut dropped = 0;
        for i in 0..2000 {
            c.insert(&doc! {"_id": i, "pad": &pad}).unwrap();
            if i % 50 == 0 {
                dropped += s.maintain_oplog().unwrap();
            }
        }
        assert!(dropped > 0, "the oplog was trimmed");
        let (bytes, parts) = log.size();
        assert!(bytes <= (256 << 10) + (64 << 10) * 2, "{bytes} bytes kept");
        assert!(parts >= 2);
        // The oldest entry kept is an insert well past the first.
        let first = entries(&log)[0].clone();
        assert!(first.get_document("o").unwrap().get_i32("_id").unwrap() > 0);
        // A reader whose partition was dropped learns it.
        let lost = loop {
            match reader.next_entry() {
                Ok(Some(_)) => continue,
                Ok(None) => break false,
                Err(CollError::PositionLost(_)) => break true,
                Err(e) => panic!("{e}"),
            }
        };
        assert!(lost);
        newest = log.newest().unwrap().unwrap();
        s.close().unwrap();
    }
    let s = open(dir.path(), 256 << 10);
    let log = s.oplog().unwrap().clone();
    assert_eq!(log.newest().unwrap().unwrap(), newest);
    assert!(log.clock().tick() > newest);
    s.get_or_create("db.c")
        .unwrap()
        .insert(&doc! {"_id": -1})
        .unwrap();
    assert!(log.newest().unwrap().unwrap() > newest);
}

#[test]
fn replay_into_an_empty_store_gives_the_same_documents() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), 1 << 30);
    let c = s.get_or_create("db.c").unwrap();
    for i in 0..20 {
        c.insert(&doc! {"_id": i, "a": [1, 2, 3], "n": {"x": i}})
            .unwrap();
    }
    for i in 0..20 {
        let lock = c.lock_doc(id_key(&Bson::Int32(i))).unwrap();
        let old = lock.read().unwrap().unwrap();
        let mut new = old.clone();
        new.insert("a", vec![Bson::Int32(i)]);
        new.remove("n");
        new.insert("z", i);
        if i % 3 == 0 {
            c.delete(&lock, &old).unwrap();
        } else {
            c.update(&lock, &old, &new).unwrap();
        }
    }
    s.create_indexes(
        "db.c",
        vec![IndexSpec::parse(&doc! {"key": {"z": 1}, "name": "z_1"}).unwrap()],
    )
    .unwrap();
    s.rename("db.c", "db.d", false).unwrap();
    let log = s.oplog().unwrap().clone();
    let other = tempfile::tempdir().unwrap();
    let r = Store::open(other.path(), opts(), UpdateRegistry::new()).unwrap();
    for e in entries(&log) {
        oplog::apply(&r, &e).unwrap();
    }
    // Applied twice: the same.
    for e in entries(&log) {
        oplog::apply(&r, &e).unwrap();
    }
    let all = |s: &Store| -> Vec<Vec<u8>> {
        let c = s.get("db.d").unwrap();
        let mut cur = c.scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
        let mut out = Vec::new();
        while let Some((_, d)) = cur.next_doc().unwrap() {
            out.push(encode_doc(&d));
        }
        out
    };
    assert_eq!(all(&s), all(&r));
    assert!(r.get("db.d").unwrap().index("z_1").is_some());
    assert!(r.get("db.c").is_none());
}

#[test]
fn data_and_oplog_agree_after_a_power_loss() {
    use silt_storage::vfs::sim::SimFs;
    for seed in 0..6u64 {
        let sim = SimFs::new();
        let vfs: Arc<dyn silt_storage::vfs::Vfs> = Arc::new(sim.clone());
        let dir = std::path::PathBuf::from("/sim/db");
        let oplog = Some(OplogOptions {
            max_bytes: 1 << 30,
            min_retention: Duration::ZERO,
        });
        let s = Store::open_on(vfs.clone(), &dir, opts(), UpdateRegistry::new(), oplog).unwrap();
        let c = s.get_or_create("db.c").unwrap();
        for i in 0..400i32 {
            let id = i % 37;
            let lock = c.lock_doc(id_key(&Bson::Int32(id))).unwrap();
            match lock.read().unwrap() {
                None => c.insert_under(&lock, &doc! {"_id": id, "n": i}).unwrap(),
                Some(old) if i % 5 == 0 => c.delete(&lock, &old).unwrap(),
                Some(old) => {
                    let mut new = old.clone();
                    new.insert("n", i);
                    new.insert("seed", seed as i64);
                    c.update(&lock, &old, &new).unwrap();
                }
            }
            drop(lock);
            // Some of it is made durable, the rest may be lost (whole records or none).
            if i % 97 == 0 {
                s.sync_log().unwrap();
            }
        }
        drop(c);
        s.simulate_crash();
        sim.power_loss(seed);
        let s = Store::open_on(vfs, &dir, opts(), UpdateRegistry::new(), oplog).unwrap();
        // What survived of the data is what replaying what survived of the oplog gives.
        let other = tempfile::tempdir().unwrap();
        let r = Store::open(other.path(), opts(), UpdateRegistry::new()).unwrap();
        for e in entries(s.oplog().unwrap()) {
            oplog::apply(&r, &e).unwrap();
        }
        let all = |s: &Store| -> Vec<Vec<u8>> {
            let Some(c) = s.get("db.c") else {
                return Vec::new();
            };
            let mut cur = c.scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
            let mut out = Vec::new();
            while let Some((_, d)) = cur.next_doc().unwrap() {
                out.push(encode_doc(&d));
            }
            out
        };
        assert_eq!(all(&s), all(&r), "seed {seed}");
        s.close().unwrap();
    }
}
