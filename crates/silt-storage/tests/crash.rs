//! Crash tests: a child process writes and reports every acknowledged key; the parent
//! `kill -9`s it at a random moment, recovers, and checks that every acknowledged write is
//! there. Also: damaged bytes in a node or the log give a clear error or a clean truncation,
//! never a panic or wrong data.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use silt_storage::{Compression, Env, EnvOptions, Error, SyncPolicy, WriteBatch};

fn opts(sync: SyncPolicy) -> EnvOptions {
    EnvOptions {
        cache_bytes: 256 << 10,
        node_bytes: 16 << 10,
        basement_bytes: 4 << 10,
        fanout: 8,
        compression: Compression::Zstd(1),
        sync,
        checkpoint_period: Some(Duration::from_millis(300)),
        log_file_bytes: 256 << 10,
        flusher_threads: 1,
        direct_io: false,
    }
}

/// The "index entry" of key `k`: a different order than the key's, so that a batch's two
/// writes land in unrelated places of their trees.
fn index_entry(k: &[u8]) -> Vec<u8> {
    let mut e: Vec<u8> = k.iter().rev().copied().collect();
    e.extend_from_slice(k);
    e
}

fn val(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// The child: runs only when `SILT_CRASH_CHILD` names a directory.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SILT_CRASH_CHILD") else {
        return;
    };
    let env = Env::open(&dir, opts(SyncPolicy::Never)).unwrap();
    let d = env.open_or_create("t").unwrap();
    let ix = env.open_or_create("ix").unwrap();
    let start: u64 = std::env::var("SILT_CRASH_START").unwrap().parse().unwrap();
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    for i in start.. {
        let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
        // A "document" and its "index entry", written together.
        let mut b = WriteBatch::new();
        b.put(&d, &k, &val(i)).unwrap();
        b.put(&ix, &index_entry(&k), b"").unwrap();
        b.commit().unwrap();
        if i % 7 == 0 {
            let mut b = WriteBatch::new();
            b.delete(&d, &k).unwrap();
            b.delete(&ix, &index_entry(&k)).unwrap();
            b.commit().unwrap();
        }
        writeln!(out, "{i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn kill_minus_nine_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut acked_upto: Option<u64> = None;
    for round in 0..4 {
        let start = acked_upto.map(|a| a + 1).unwrap_or(0);
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("SILT_CRASH_CHILD", dir.path())
            .env("SILT_CRASH_START", start.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(rng.gen_range(300..1500));
        let t0 = Instant::now();
        let mut last = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(i) = line.trim().parse::<u64>() {
                last = Some(i);
            }
            if t0.elapsed() > kill_after {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
        let _ = child.wait();
        let last = last.expect("child acknowledged something");
        acked_upto = Some(last);
        let env = Env::open(dir.path(), opts(SyncPolicy::Never)).unwrap();
        let d = env.open_dict("t").unwrap();
        // Batches are atomic: the index holds exactly the entries of the documents present,
        // acknowledged or not.
        let ix = env.open_dict("ix").unwrap();
        let docs: Vec<Vec<u8>> = d
            .range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .unwrap()
            .into_iter()
            .map(|(k, _)| index_entry(&k))
            .collect();
        let mut docs = docs;
        docs.sort();
        let entries: Vec<Vec<u8>> = ix
            .range(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            entries, docs,
            "round {round}: index entries match the documents"
        );
        drop(ix);
        for i in 0..=last {
            let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_be_bytes();
            let want = if i % 7 == 0 { None } else { Some(val(i)) };
            assert_eq!(
                d.get(&k).unwrap(),
                want,
                "round {round}: key #{i} of {last} acknowledged"
            );
        }
        drop(d);
        // Leave without a clean close half the time, so the next round recovers from the log.
        if round % 2 == 0 {
            env.simulate_crash();
        } else {
            env.close().unwrap();
        }
    }
}

fn dict_file(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "silt"))
        .unwrap()
}

#[test]
fn flipped_node_byte_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = EnvOptions {
        cache_bytes: 128 << 10,
        ..opts(SyncPolicy::Never)
    };
    {
        let env = Env::open(dir.path(), o.clone()).unwrap();
        let d = env.create_dict("t").unwrap();
        for i in 0..5000u32 {
            d.put(&i.to_be_bytes(), &val(u64::from(i))).unwrap();
        }
        d.optimize().unwrap();
        env.close().unwrap();
    }
    let path = dict_file(dir.path());
    let table = silt_storage::inspect::block_table(&path).unwrap();
    // Damage the middle of every node block but the root, so any leaf read hits damage.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    for (_, x) in &table[1..] {
        let off = x.offset + x.len / 2;
        let mut b = [0u8];
        f.read_exact_at(&mut b, off).unwrap();
        b[0] ^= 0x5a;
        f.write_all_at(&b, off).unwrap();
    }
    drop(f);
    let report = silt_storage::inspect::verify_dir(dir.path()).unwrap();
    assert!(!report.errors.is_empty(), "verify finds the damage");
    match Env::open(dir.path(), o) {
        Err(e) => assert!(matches!(e, Error::Corruption { .. }), "{e}"),
        Ok(env) => {
            let d = env.open_dict("t").unwrap();
            let mut corrupt = 0;
            for i in (0..5000u32).step_by(97) {
                match d.get(&i.to_be_bytes()) {
                    Ok(Some(v)) => assert_eq!(v, val(u64::from(i)), "never wrong data"),
                    Ok(None) => panic!("key {i} silently missing"),
                    Err(Error::Corruption { path, what, .. }) => {
                        assert!(path.to_string_lossy().ends_with(".silt"));
                        assert!(what.contains("block"), "{what}");
                        corrupt += 1;
                    }
                    Err(e) => panic!("unexpected error {e}"),
                }
            }
            assert!(corrupt > 0, "damage was detected");
            env.simulate_crash();
        }
    }
}

#[test]
fn flipped_log_byte_truncates_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let o = EnvOptions {
        checkpoint_period: None,
        ..opts(SyncPolicy::Never)
    };
    {
        let env = Env::open(dir.path(), o.clone()).unwrap();
        let d = env.create_dict("t").unwrap();
        env.checkpoint().unwrap();
        for i in 0..1000u32 {
            d.put(&i.to_be_bytes(), &val(u64::from(i))).unwrap();
        }
        drop(d);
        env.simulate_crash();
    }
    let log = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let len = std::fs::metadata(&log).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&log)
        .unwrap();
    let off = len * 3 / 4;
    let mut b = [0u8];
    f.read_exact_at(&mut b, off).unwrap();
    b[0] ^= 0xff;
    f.write_all_at(&b, off).unwrap();
    drop(f);
    let env = Env::open(dir.path(), o).unwrap();
    let d = env.open_dict("t").unwrap();
    // A prefix of the writes survives, in order, with the right values; nothing after the damage.
    let mut present = 0u32;
    let mut gap = false;
    for i in 0..1000u32 {
        match d.get(&i.to_be_bytes()).unwrap() {
            Some(v) => {
                assert!(!gap, "key {i} present after a missing one");
                assert_eq!(v, val(u64::from(i)));
                present += 1;
            }
            None => gap = true,
        }
    }
    assert!(
        present > 500 && present < 1000,
        "{present} records survived"
    );
}

const ACCOUNTS: u64 = 40;
const START_BALANCE: u64 = 1000;

fn account(i: u64) -> Vec<u8> {
    format!("acct-{i:04}").into_bytes()
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.expect("account exists").try_into().expect("8 bytes"))
}

/// One transfer in a transaction: lock both accounts, check neither changed since the
/// snapshot, move `amount`, leave a receipt, commit (or, when `abort`, change its mind at the
/// end: nothing of it may remain). `Ok(false)`: a conflict, aborted.
fn transfer(
    env: &Env,
    d: &silt_storage::Dict,
    (from, to, amount): (u64, u64, u64),
    receipt: &[u8],
    abort: bool,
) -> Result<bool, Error> {
    use silt_storage::LockMode;
    let t = env.begin()?;
    for k in [account(from.min(to)), account(from.max(to))] {
        match t.lock(d, (&k, &k), LockMode::Exclusive, Duration::from_millis(5)) {
            Ok(()) => {}
            Err(Error::LockTimeout | Error::Deadlock) => return Ok(false),
            Err(e) => return Err(e),
        }
        if d.write_conflict(&k, Some(&t))? {
            return Ok(false);
        }
    }
    let a = balance(d.get_at(&account(from), t.snapshot())?);
    let b = balance(d.get_at(&account(to), t.snapshot())?);
    let amount = amount.min(a);
    let mut batch = WriteBatch::new();
    batch.put(d, &account(from), &(a - amount).to_le_bytes())?;
    batch.put(d, &account(to), &(b + amount).to_le_bytes())?;
    batch.put(d, receipt, &amount.to_le_bytes())?;
    batch.commit_in(&t)?;
    if abort {
        t.abort()?;
        return Ok(true);
    }
    t.commit(false)?;
    Ok(true)
}

/// The child of the transaction crash test: four threads transfer between accounts in
/// transactions and report each committed receipt.
#[test]
fn txn_crash_child() {
    let Ok(dir) = std::env::var("SILT_TXN_CRASH_CHILD") else {
        return;
    };
    let env = std::sync::Arc::new(Env::open(&dir, opts(SyncPolicy::Never)).unwrap());
    let d = env.open_or_create("bank").unwrap();
    if d.get(&account(0)).unwrap().is_none() {
        let mut b = WriteBatch::new();
        for i in 0..ACCOUNTS {
            b.put(&d, &account(i), &START_BALANCE.to_le_bytes())
                .unwrap();
        }
        b.commit().unwrap();
        env.sync_log().unwrap();
    }
    let round: u64 = std::env::var("SILT_TXN_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..4u64)
        .map(|th| {
            let (env, d, out) = (env.clone(), d.clone(), out.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(round * 100 + th);
                for n in 0u64.. {
                    let from = rng.gen_range(0..ACCOUNTS);
                    let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let receipt = format!("rcpt-{round}-{th}-{n:08}").into_bytes();
                    let amount = rng.gen_range(1..50);
                    while !transfer(&env, &d, (from, to, amount), &receipt, n % 5 == 0).unwrap() {}
                    if n % 5 != 0 {
                        use std::io::Write;
                        let mut o = out.lock().unwrap();
                        writeln!(o, "{}", String::from_utf8_lossy(&receipt)).unwrap();
                        o.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn kill_minus_nine_in_the_middle_of_concurrent_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut acked: Vec<Vec<u8>> = Vec::new();
    for round in 0..3u64 {
        let mut child = Command::new(&exe)
            .args([
                "txn_crash_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SILT_TXN_CRASH_CHILD", dir.path())
            .env("SILT_TXN_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(rng.gen_range(400..1500));
        let t0 = Instant::now();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("rcpt-") {
                acked.push(line.trim().as_bytes().to_vec());
            }
            if t0.elapsed() > kill_after {
                child.kill().unwrap(); // SIGKILL, with transactions in every state
                break;
            }
        }
        let _ = child.wait();
        assert!(
            !acked.is_empty(),
            "round {round}: the child committed something"
        );
        let env = Env::open(dir.path(), opts(SyncPolicy::Never)).unwrap();
        let d = env.open_dict("bank").unwrap();
        // Committed transfers are whole and the others left no trace: money is conserved.
        let total: u64 = (0..ACCOUNTS)
            .map(|i| balance(d.get(&account(i)).unwrap()))
            .sum();
        assert_eq!(
            total,
            ACCOUNTS * START_BALANCE,
            "round {round}: the sum invariant"
        );
        // Every acknowledged commit survived; no aborted transaction's receipt exists.
        for r in &acked {
            assert!(
                d.get(r).unwrap().is_some(),
                "round {round}: acknowledged {}",
                String::from_utf8_lossy(r)
            );
        }
        let receipts = d
            .range(
                std::ops::Bound::Included(b"rcpt-"),
                std::ops::Bound::Excluded(b"rcpt."),
            )
            .unwrap();
        for (k, _) in &receipts {
            let n: u64 = String::from_utf8_lossy(&k[k.len() - 8..]).parse().unwrap();
            assert!(
                !n.is_multiple_of(5),
                "an aborted transaction's receipt: {}",
                String::from_utf8_lossy(k)
            );
        }
        assert_eq!(env.stats().live_txns, 0);
        eprintln!(
            "round {round}: {} acknowledged commits, {} receipts recovered",
            acked.len(),
            receipts.len()
        );
        drop(d);
        env.simulate_crash();
    }
}
