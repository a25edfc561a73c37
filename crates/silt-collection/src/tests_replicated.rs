//! Tests of the store as a replicated state machine (`replicated.rs`, `oplog/proposal.rs`):
//! writers on a "primary" store park their proposals, a log thread applies the proposed
//! commands in order on the primary (which commits what each writer prepared) and on a
//! "secondary" store (which applies them from their bytes), and the two end equal. The log
//! here is a channel in submission order, which is what the store needs of Raft's log: an
//! order, the same on every member.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use bson::doc;
use parking_lot::Mutex;

use super::tests_image::{contents, open};
use super::*;
use crate::oplog::limit_wait;

/// A log that is a channel: commands in the order they were submitted.
struct ChannelLog(Mutex<mpsc::Sender<Vec<u8>>>);

impl Replicator for ChannelLog {
    fn submit(&self, command: Vec<u8>, failed: Box<dyn FnOnce(Refusal) + Send>) {
        if self.0.lock().send(command).is_err() {
            failed(Refusal::NotPrimary("the log is closed".into()));
        }
    }

    fn is_leader(&self) -> bool {
        true
    }
}

/// A primary whose proposals arrive on the returned receiver.
fn primary(dir: &std::path::Path) -> (Arc<Store>, mpsc::Receiver<Vec<u8>>) {
    let s = Arc::new(open(dir));
    let (tx, rx) = mpsc::channel();
    s.start_replication(Arc::new(ChannelLog(Mutex::new(tx))))
        .unwrap();
    (s, rx)
}

/// A secondary: replicating, but nothing it proposes (it proposes nothing here).
fn secondary(dir: &std::path::Path) -> Store {
    let s = open(dir);
    let (tx, _rx) = mpsc::channel();
    s.start_replication(Arc::new(ChannelLog(Mutex::new(tx))))
        .unwrap();
    s
}

/// Apply the `n`th command (1-based) on every store of `to`.
fn apply(to: &[&Store], n: u64, command: &[u8]) {
    for s in to {
        s.apply_replicated(1, &n.to_le_bytes(), Replicated::Command(command))
            .unwrap();
    }
}

/// Create `ns` on the primary, applying its proposal (a create entry) on both stores.
fn create(
    p: &Store,
    s: &Store,
    log: mpsc::Receiver<Vec<u8>>,
    ns: &str,
) -> (Arc<Collection>, mpsc::Receiver<Vec<u8>>) {
    std::thread::scope(|sc| {
        let h = sc.spawn(move || {
            apply(&[p, s], 1, &log.recv().unwrap());
            log
        });
        let c = p.get_or_create(ns).unwrap();
        (c, h.join().unwrap())
    })
}

#[test]
fn writers_commit_at_their_turn_and_the_members_end_equal() {
    let (pd, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (p, log) = primary(pd.path());
    let s = secondary(sd.path());
    let (c, log) = create(&p, &s, log, "db.c");
    let (threads, each) = (6i32, 40i32);
    // Every fourth insert is followed by a retryable write's transaction.
    let total = 1 + u64::try_from(threads * each * 5 / 4).unwrap();
    let applier = {
        let p = p.clone();
        std::thread::spawn(move || {
            for (n, command) in (2..=total).zip(log.iter()) {
                apply(&[&p, &s], n, &command);
            }
            s
        })
    };
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let (p, c) = (p.clone(), c.clone());
            std::thread::spawn(move || {
                for i in 0..each {
                    c.insert(&doc! {"_id": t * 1000 + i, "t": t}).unwrap();
                    if i % 4 == 3 {
                        // A commit into a transaction goes through the apply too.
                        let txn = p.begin(TxnKind::Retryable, Duration::from_secs(5)).unwrap();
                        c.insert_as(&doc! {"_id": format!("t{t}-{i}")}, Writer::new(Some(&txn)))
                            .unwrap();
                        txn.commit(false).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let s = applier.join().unwrap();
    let (docs, entries) = contents(&p);
    assert_eq!(docs[0].1.len(), 6 * 40 * 5 / 4);
    assert_eq!(
        u64::try_from(entries.len()).unwrap(),
        total,
        "the create and every write"
    );
    // The primary committed its writers' batches, the secondary applied the bytes: equal.
    assert_eq!(contents(&s), (docs, entries));
    assert_eq!(
        p.replication_position().unwrap(),
        Some(total.to_le_bytes().to_vec())
    );
    assert_eq!(
        s.replication_position().unwrap(),
        p.replication_position().unwrap()
    );
}

#[test]
fn a_writer_that_gives_up_is_applied_from_its_bytes() {
    let (pd, sd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (p, log) = primary(pd.path());
    let s = secondary(sd.path());
    let (c, log) = create(&p, &s, log, "db.c");
    let e = {
        let _limit = limit_wait(Duration::from_millis(50));
        c.insert(&doc! {"_id": 1, "v": "late"}).unwrap_err()
    };
    assert!(
        matches!(e, CollError::Refused { code: 64, .. }),
        "a write past its wait limit answers 64: {e}"
    );
    assert!(c.get(&bson::Bson::Int32(1)).unwrap().is_none());
    // Its entry commits later all the same, and the apply writes it from the command.
    apply(&[&p, &s], 2, &log.recv().unwrap());
    assert_eq!(
        c.get(&bson::Bson::Int32(1)).unwrap(),
        Some(doc! {"_id": 1, "v": "late"})
    );
    assert_eq!(contents(&p), contents(&s));
}
