//! Transactions and change streams through the Rust driver (the `mongodb` crate, sync API)
//! against a real `siltd --replSet rs0` over TCP: the second driver beside pymongo's suite
//! (`tests/compat/test_transactions.py`, `test_change_streams.py`). Each test starts its own
//! server in a temporary directory and stops it at the end.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Document};
use mongodb::change_stream::event::OperationType;
use mongodb::error::{Error, ErrorKind, TRANSIENT_TRANSACTION_ERROR};
use mongodb::options::{ReadConcern, WriteConcern};
use mongodb::sync::{Client, Collection};

/// A `siltd --replSet rs0` child on a free port; killed and its directory removed on drop.
struct Siltd {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Siltd {
    fn start() -> Siltd {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_siltd")))
            .args([
                "--port",
                &port.to_string(),
                "--replSet",
                "rs0",
                "--log-level",
                "warn",
            ])
            .arg("--dbpath")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("siltd starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "siltd did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Siltd {
            child,
            port,
            _dir: dir,
        }
    }

    fn client(&self) -> Client {
        Client::with_uri_str(format!(
            "mongodb://127.0.0.1:{}/?replicaSet=rs0&serverSelectionTimeoutMS=10000",
            self.port
        ))
        .expect("client")
    }
}

impl Drop for Siltd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn code(e: &Error) -> Option<i32> {
    match *e.kind {
        ErrorKind::Command(ref c) => Some(c.code),
        ErrorKind::Write(mongodb::error::WriteFailure::WriteError(ref w)) => Some(w.code),
        _ => None,
    }
}

fn sum(acc: &Collection<Document>) -> i64 {
    acc.find(doc! {})
        .run()
        .expect("find")
        .map(|d| i64::from(d.expect("document").get_i32("v").expect("v")))
        .sum()
}

/// `v` of document `id`, read outside any session.
fn v_of(acc: &Collection<Document>, id: i32) -> i32 {
    let d = acc.find_one(doc! {"_id": id}).run().expect("find");
    d.expect("document").get_i32("v").expect("v")
}

#[test]
fn with_transaction_keeps_the_sum_while_threads_conflict() {
    let server = Siltd::start();
    let client = server.client();
    let acc = client.database("rust_driver").collection::<Document>("acc");
    acc.insert_many([doc! {"_id": 1, "v": 100}, doc! {"_id": 2, "v": 100}])
        .run()
        .expect("insert");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                let acc = client.database("rust_driver").collection::<Document>("acc");
                let mut attempts = 0u32;
                for i in 0..25 {
                    let (from, to) = if (t + i) % 2 == 0 { (1, 2) } else { (2, 1) };
                    let mut session = client.start_session().run().expect("session");
                    // `and_run` is the driver's with_transaction: it retries the whole
                    // callback on TransientTransactionError and the commit on
                    // UnknownTransactionCommitResult.
                    session
                        .start_transaction()
                        .read_concern(ReadConcern::snapshot())
                        .write_concern(WriteConcern::majority())
                        .and_run(|s| {
                            attempts += 1;
                            acc.update_one(doc! {"_id": from}, doc! {"$inc": {"v": -1}})
                                .session(&mut *s)
                                .run()?;
                            acc.update_one(doc! {"_id": to}, doc! {"$inc": {"v": 1}})
                                .session(&mut *s)
                                .run()?;
                            Ok(())
                        })
                        .expect("transaction commits after retries");
                }
                attempts
            })
        })
        .collect();
    let attempts: u32 = threads.into_iter().map(|h| h.join().expect("thread")).sum();
    assert!(attempts >= 100, "{attempts} attempts for 100 transactions");
    assert_eq!(
        sum(&acc),
        200,
        "every transfer moved one unit, whole or not at all"
    );
}

#[test]
fn a_conflict_is_transient_an_abort_leaves_nothing_and_a_snapshot_holds() {
    let server = Siltd::start();
    let client = server.client();
    let acc = client.database("rust_driver").collection::<Document>("acc");
    acc.insert_one(doc! {"_id": 1, "v": 1})
        .run()
        .expect("insert");

    // Two transactions write one document: the second gets WriteConflict, labelled so that
    // drivers retry it.
    let mut s1 = client.start_session().run().expect("session");
    let mut s2 = client.start_session().run().expect("session");
    s1.start_transaction().run().expect("start");
    s2.start_transaction().run().expect("start");
    acc.update_one(doc! {"_id": 1}, doc! {"$set": {"v": 2}})
        .session(&mut s1)
        .run()
        .expect("first writer");
    let e = acc
        .update_one(doc! {"_id": 1}, doc! {"$set": {"v": 3}})
        .session(&mut s2)
        .run()
        .expect_err("second writer conflicts");
    assert_eq!(code(&e), Some(112), "{e}");
    assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR), "{e}");
    s1.commit_transaction().run().expect("commit");
    // A commit sent again (as a driver does after a network error) succeeds again.
    s1.commit_transaction().run().expect("commit retried");
    let _ = s2.abort_transaction().run();
    assert_eq!(v_of(&acc, 1), 2);

    // Uncommitted writes are invisible outside; aborted ones leave nothing.
    s2.start_transaction().run().expect("start");
    acc.insert_one(doc! {"_id": 99})
        .session(&mut s2)
        .run()
        .expect("insert in transaction");
    assert_eq!(
        acc.count_documents(doc! {"_id": 99}).run().expect("count"),
        0
    );
    s2.abort_transaction().run().expect("abort");
    assert_eq!(
        acc.count_documents(doc! {"_id": 99}).run().expect("count"),
        0
    );

    // A snapshot session keeps reading the cluster time of its first read.
    let mut snap = client
        .start_session()
        .snapshot(true)
        .run()
        .expect("session");
    let mut read_in_snapshot = || {
        acc.find_one(doc! {"_id": 1})
            .session(&mut snap)
            .run()
            .expect("find")
            .expect("doc")
    };
    let before = read_in_snapshot();
    acc.update_one(doc! {"_id": 1}, doc! {"$inc": {"v": 1000}})
        .run()
        .expect("update outside");
    let again = read_in_snapshot();
    assert_eq!(before, again);
    assert_eq!(v_of(&acc, 1), 1002);
}

#[test]
fn change_streams_every_event_type_and_resuming() {
    let s = Siltd::start();
    let client = s.client();
    let coll: Collection<Document> = client.database("cs").collection("c");
    coll.insert_one(doc! {"_id": 0}).run().expect("seed");
    let stream = coll.watch().run().expect("watch");
    coll.insert_one(doc! {"_id": 1, "a": 1, "l": [1, 2, 3]})
        .run()
        .expect("insert");
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"a": 2}, "$pop": {"l": 1}})
        .run()
        .expect("update");
    coll.replace_one(doc! {"_id": 1}, doc! {"b": 1})
        .run()
        .expect("replace");
    coll.delete_one(doc! {"_id": 1}).run().expect("delete");
    coll.drop().run().expect("drop");
    let events: Vec<_> = stream.take(6).map(|e| e.expect("an event")).collect();
    let kinds: Vec<OperationType> = events.iter().map(|e| e.operation_type.clone()).collect();
    assert_eq!(
        kinds,
        [
            OperationType::Insert,
            OperationType::Update,
            OperationType::Replace,
            OperationType::Delete,
            OperationType::Drop,
            OperationType::Invalidate
        ]
    );
    assert_eq!(
        events[0].full_document.as_ref(),
        Some(&doc! {"_id": 1, "a": 1, "l": [1, 2, 3]})
    );
    assert_eq!(events[0].document_key.as_ref(), Some(&doc! {"_id": 1}));
    let u = events[1]
        .update_description
        .as_ref()
        .expect("updateDescription");
    assert_eq!(u.updated_fields, doc! {"a": 2});
    let truncated = u.truncated_arrays.as_ref().expect("truncatedArrays");
    assert_eq!(truncated[0].field, "l");
    assert_eq!(truncated[0].new_size, 2);
    assert_eq!(
        events[2].full_document.as_ref(),
        Some(&doc! {"_id": 1, "b": 1})
    );
    // Resuming after the insert gives the rest, in order, from the same tokens.
    let resumed: Vec<OperationType> = coll
        .watch()
        .start_after(events[0].id.clone())
        .run()
        .expect("resume")
        .take(3)
        .map(|e| e.expect("an event").operation_type)
        .collect();
    assert_eq!(
        resumed,
        [
            OperationType::Update,
            OperationType::Replace,
            OperationType::Delete
        ]
    );
}
