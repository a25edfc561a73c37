#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use std::ops::Bound::*;

use silt_storage::{Compression, Env, EnvOptions, SyncPolicy, UpdateOutcome, UpdateRegistry};

fn small_opts() -> EnvOptions {
    EnvOptions {
        cache_bytes: 1 << 20,
        node_bytes: 4096,
        basement_bytes: 1024,
        fanout: 4,
        compression: Compression::Lz4,
        sync: SyncPolicy::Never,
        checkpoint_period: None,
        log_file_bytes: 1 << 20,
        flusher_threads: 1,
        direct_io: false,
    }
}

fn fns() -> UpdateRegistry {
    let mut r = UpdateRegistry::new();
    r.register(1, |_k, old, arg| {
        let cur = old
            .map(|v| u64::from_le_bytes(v.try_into().unwrap_or([0; 8])))
            .unwrap_or(0);
        let add = u64::from_le_bytes(arg.try_into().unwrap_or([0; 8]));
        UpdateOutcome::Set((cur + add).to_le_bytes().to_vec())
    });
    r
}

#[test]
fn put_get_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::open_with(dir.path(), small_opts(), fns()).unwrap();
        let d = env.create_dict("a").unwrap();
        for i in 0..20000u32 {
            d.put(&i.to_be_bytes(), format!("value-{i}").as_bytes())
                .unwrap();
        }
        for i in (0..20000u32).step_by(3) {
            d.delete(&i.to_be_bytes()).unwrap();
        }
        for i in 0..100u32 {
            d.update(&i.to_be_bytes(), 1, &5u64.to_le_bytes()).unwrap();
        }
        assert_eq!(d.get(&1u32.to_be_bytes()).unwrap().unwrap().len(), 8);
        assert_eq!(d.get(&4u32.to_be_bytes()).unwrap().unwrap().len(), 8);
        assert_eq!(d.get(&201u32.to_be_bytes()).unwrap(), None);
        assert_eq!(d.get(&202u32.to_be_bytes()).unwrap().unwrap(), b"value-202");
        let n = d.count_range(Unbounded, Unbounded).unwrap();
        assert_eq!(n, 20000 - 6667 + 34);
        eprintln!("{:?} {:?}", d.stats(), env.stats());
        env.close().unwrap();
    }
    let env = Env::open_with(dir.path(), small_opts(), fns()).unwrap();
    let d = env.open_dict("a").unwrap();
    assert_eq!(d.get(&202u32.to_be_bytes()).unwrap().unwrap(), b"value-202");
    let n = d.count_range(Unbounded, Unbounded).unwrap();
    assert_eq!(n, 20000 - 6667 + 34);
    let all = d
        .range(
            Included(&10u32.to_be_bytes()[..]),
            Excluded(&20u32.to_be_bytes()[..]),
        )
        .unwrap();
    assert_eq!(all.len(), 10);
    eprintln!("{:?} {:?}", d.stats(), env.stats());
}

/// A checkpoint rotates the log, so afterwards only the new (empty) file is left; free space
/// in the dictionary file is returned to the filesystem as holes; and everything reopens.
#[test]
fn checkpoint_rotates_log_and_returns_free_space() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EnvOptions {
        cache_bytes: 4 << 20,
        node_bytes: 256 << 10,
        basement_bytes: 32 << 10,
        fanout: 8,
        compression: Compression::None,
        log_file_bytes: 64 << 20,
        ..small_opts()
    };
    let val = |i: u32, round: u32| format!("{i:08}-{round}-{}", "v".repeat(200)).into_bytes();
    {
        let env = Env::open_with(dir.path(), opts.clone(), fns()).unwrap();
        let d = env.create_dict("a").unwrap();
        for round in 0..3u32 {
            for i in 0..20_000u32 {
                d.put(&i.wrapping_mul(2_654_435_761).to_be_bytes(), &val(i, round))
                    .unwrap();
            }
            env.checkpoint().unwrap();
            let st = env.stats();
            assert_eq!(st.log_files, 1, "round {round}: {st:?}");
        }
        d.optimize().unwrap();
        env.checkpoint().unwrap();
        let st = env.stats();
        assert_eq!(st.log_files, 1);
        let logs: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert!(logs < 4096, "log left after the checkpoint: {logs} bytes");
        assert!(st.bytes_on_disk <= st.apparent_bytes + (64 << 10), "{st:?}");
        if cfg!(target_os = "linux") {
            // Copy-on-write left free ranges inside the file; holes were punched in them.
            let ds = d.stats();
            eprintln!("{ds:?} {st:?}");
            assert!(ds.file_allocated_bytes <= ds.file_bytes, "{ds:?}");
        }
        env.close().unwrap();
    }
    let env = Env::open_with(dir.path(), opts, fns()).unwrap();
    let d = env.open_dict("a").unwrap();
    for i in (0..20_000u32).step_by(97) {
        assert_eq!(
            d.get(&i.wrapping_mul(2_654_435_761).to_be_bytes()).unwrap(),
            Some(val(i, 2))
        );
    }
    assert_eq!(d.count_range(Unbounded, Unbounded).unwrap(), 20_000);
}

#[test]
fn replace_keeps_the_row_count_exact_and_batches_recover_whole() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::open_with(dir.path(), small_opts(), fns()).unwrap();
        let d = env.create_dict("docs").unwrap();
        let ix = env.create_dict("ix").unwrap();
        for i in 0..300u32 {
            let mut b = silt_storage::WriteBatch::new();
            b.put(&d, &i.to_be_bytes(), b"v1").unwrap();
            b.put(&ix, &(i % 7, i).0.to_be_bytes(), &i.to_be_bytes())
                .unwrap();
            b.commit().unwrap();
        }
        // Overwrites of keys known to exist: the maintained count does not move, with the
        // messages still in buffers.
        for round in 0..3u8 {
            for i in 0..300u32 {
                d.replace(&i.to_be_bytes(), &[b'v', b'2' + round]).unwrap();
            }
        }
        assert_eq!(d.stats().rows, 300);
        // A put over an existing key is counted when its message reaches the leaf.
        d.put(&5u32.to_be_bytes(), b"v9").unwrap();
        d.optimize().unwrap();
        assert_eq!(d.stats().rows, 300);
        // Recovery starts from here: what follows is replayed from the log.
        env.checkpoint().unwrap();
        for i in 300..320u32 {
            let mut b = silt_storage::WriteBatch::new();
            b.put(&d, &i.to_be_bytes(), b"late").unwrap();
            b.delete(&d, &(i - 300).to_be_bytes()).unwrap();
            b.commit().unwrap();
        }
        assert_eq!(d.stats().rows, 300);
        drop((d, ix));
        env.simulate_crash();
    }
    let env = Env::open_with(dir.path(), small_opts(), fns()).unwrap();
    let d = env.open_dict("docs").unwrap();
    assert_eq!(d.stats().rows, 300, "count after recovery");
    assert_eq!(d.count_range(Unbounded, Unbounded).unwrap(), 300);
    assert_eq!(d.get(&5u32.to_be_bytes()).unwrap(), None);
    assert_eq!(d.get(&25u32.to_be_bytes()).unwrap(), Some(b"v4".to_vec()));
    assert_eq!(
        d.get(&310u32.to_be_bytes()).unwrap(),
        Some(b"late".to_vec())
    );
}

/// Many dictionaries, each with a root full of buffered messages, in a cache far smaller than
/// their roots together: idle roots give up their partitions (written back first when dirty),
/// so the cache keeps its budget, and every write and read brings back what it needs, also
/// across a crash and recovery.
#[test]
fn idle_roots_do_not_pin_the_cache() {
    let opts = EnvOptions {
        cache_bytes: 256 << 10,
        node_bytes: 32 << 10,
        basement_bytes: 4 << 10,
        fanout: 8,
        flusher_threads: 1,
        ..small_opts()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut model: Vec<std::collections::BTreeMap<Vec<u8>, Vec<u8>>> = vec![Default::default(); 40];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let env = Env::open_with(dir.path(), opts.clone(), fns()).unwrap();
    let dicts: Vec<_> = (0..40)
        .map(|i| env.create_dict(&format!("d{i}")).unwrap())
        .collect();
    let mut worst = 0;
    // Each dictionary in turn gets a burst (enough for an internal root with full buffers),
    // then goes idle.
    for (i, d) in dicts.iter().enumerate() {
        for _ in 0..1500 {
            let k = (rnd() % 100_000).to_be_bytes().to_vec();
            let v = vec![b'a' + (i % 26) as u8; 60];
            d.put(&k, &v).unwrap();
            model[i].insert(k, v);
        }
        worst = worst.max(env.stats().cache_used);
    }
    let budget = env.stats().cache_budget;
    assert!(
        worst <= 2 * budget,
        "cache used {worst} bytes against a budget of {budget}"
    );
    // Writes and deletes spread over every dictionary: idle roots come back on demand.
    for _ in 0..6000 {
        let i = (rnd() % 40) as usize;
        let k = (rnd() % 100_000).to_be_bytes().to_vec();
        if rnd() % 4 == 0 {
            dicts[i].delete(&k).unwrap();
            model[i].remove(&k);
        } else {
            let v = rnd().to_le_bytes().to_vec();
            dicts[i].put(&k, &v).unwrap();
            model[i].insert(k, v);
        }
    }
    let check = |dicts: &[silt_storage::Dict],
                 model: &[std::collections::BTreeMap<Vec<u8>, Vec<u8>>]| {
        for (d, m) in dicts.iter().zip(model) {
            let got = d.range(Unbounded, Unbounded).unwrap();
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(got.len(), want.len(), "{}", d.name());
            assert!(got == want, "{} differs from the model", d.name());
        }
    };
    check(&dicts, &model);
    env.sync_log().unwrap();
    drop(dicts);
    env.simulate_crash();
    let env = Env::open_with(dir.path(), opts, fns()).unwrap();
    let dicts: Vec<_> = (0..40)
        .map(|i| env.open_dict(&format!("d{i}")).unwrap())
        .collect();
    check(&dicts, &model);
    let s = env.stats();
    assert!(s.cache_peak <= 2 * s.cache_budget, "{s:?}");
    env.close().unwrap();
}

/// `get_sorted` reads what one `get` per key reads: absent keys, keys with pending messages
/// (puts, deletes, updates), keys of several basements and leaves, and at a snapshot.
#[test]
fn sorted_reads_equal_point_reads() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open_with(dir.path(), small_opts(), fns()).unwrap();
    let d = env.create_dict("t").unwrap();
    let key = |i: u32| format!("k{:06}", i).into_bytes();
    for i in (0..3000).step_by(2) {
        d.put(&key(i), &u64::from(i).to_le_bytes()).unwrap();
    }
    let snap = d.snapshot();
    for i in (0..3000).step_by(7) {
        d.update(&key(i), 1, &5u64.to_le_bytes()).unwrap();
    }
    for i in (0..3000).step_by(11) {
        d.delete(&key(i)).unwrap();
    }
    let keys: Vec<Vec<u8>> = (0..3100).step_by(3).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    for s in [None, Some(&snap)] {
        let mut got = vec![None; refs.len()];
        d.get_sorted(&refs, s, &mut |i, v| got[i] = v.map(<[u8]>::to_vec))
            .unwrap();
        for (i, k) in refs.iter().enumerate() {
            let want = match s {
                None => d.get(k).unwrap(),
                Some(s) => d.get_at(k, s).unwrap(),
            };
            assert_eq!(got[i], want, "key {}", String::from_utf8_lossy(k));
        }
    }
}

/// A drop while drops are deferred hides the dictionary but leaves earlier handles reading
/// it to the end; the last deferral to go drops it, and a crash meanwhile leaves it listed
/// for the user's sweep.
#[test]
fn deferred_drops_keep_handles_reading() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open_with(dir.path(), small_opts(), fns()).unwrap();
    let d = env.create_dict("a").unwrap();
    for i in 0..5000u32 {
        d.put(&i.to_be_bytes(), b"value").unwrap();
    }
    let snap = env.snapshot();
    let held = env.defer_drops();
    let second = env.defer_drops();
    env.drop_dict("a").unwrap();
    assert!(env.drop_dict("a").is_err(), "dropped twice");
    assert!(!env.list_dicts().contains(&"a".to_string()));
    assert!(env.open_dict("a").is_err());
    let mut c = d.cursor_at(Unbounded, Unbounded, &snap);
    let mut n = 0;
    while c.next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 5000, "the handle reads every key after the drop");
    drop(held);
    assert!(
        d.get(&1u32.to_be_bytes()).is_ok(),
        "one deferral is still alive"
    );
    drop(second);
    assert!(
        d.get(&1u32.to_be_bytes()).is_err(),
        "dropped with the last deferral"
    );
    env.create_dict("a").unwrap();
}

/// A cold cursor's pass over a dictionary four times the cache leaves another dictionary's
/// working set resident, where a warm pass evicts it (a replica's snapshot is such a pass).
#[test]
fn cold_cursors_leave_the_working_set_in_cache() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EnvOptions {
        node_bytes: 16 << 10,
        basement_bytes: 4 << 10,
        fanout: 16,
        ..small_opts()
    };
    let env = Env::open_with(dir.path(), opts, fns()).unwrap();
    let hot = env.create_dict("hot").unwrap();
    let big = env.create_dict("big").unwrap();
    for i in 0..1000u32 {
        hot.put(&i.to_be_bytes(), &[7u8; 100]).unwrap();
    }
    for i in 0..40_000u32 {
        big.put(&i.to_be_bytes(), &[i as u8; 100]).unwrap();
    }
    env.checkpoint().unwrap();
    let read_hot = || {
        for _ in 0..3 {
            for i in 0..1000u32 {
                assert!(hot.get(&i.to_be_bytes()).unwrap().is_some());
            }
        }
    };
    let misses_of = |f: &dyn Fn()| {
        let before = env.stats().misses;
        f();
        env.stats().misses - before
    };
    let pass = |cold: bool| {
        let c = big.cursor(Unbounded, Unbounded);
        let mut c = if cold { c.cold() } else { c };
        let mut n = 0;
        while c.next().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 40_000);
    };
    read_hot();
    pass(false);
    let after_warm = misses_of(&read_hot);
    pass(true);
    let after_cold = misses_of(&read_hot);
    assert!(after_warm > 0, "a warm pass evicts some of the working set");
    assert!(
        after_cold * 4 <= after_warm,
        "a cold pass keeps the working set: {after_cold} misses after it, {after_warm} after a warm one"
    );
    // What the cold pass read from disk left the cache with it.
    let s = env.stats();
    assert!(
        s.cache_used <= s.cache_budget,
        "{} of {}",
        s.cache_used,
        s.cache_budget
    );
}
