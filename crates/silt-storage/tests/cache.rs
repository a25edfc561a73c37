//! The cache's replacement policy: what is read often stays resident while a stream of reads
//! of other data passes through a cache much smaller than the data.

use silt_storage::{Env, EnvOptions, SyncPolicy, UpdateRegistry};

const KEYS: u32 = 160_000;
/// The keys read over and over: about a sixth of the cache, in the leaves written first
/// (the lowest block numbers).
const HOT: u32 = 1_600;
const ROUNDS: u32 = 40;

fn opts() -> EnvOptions {
    // Nodes of 16 basements, as with the defaults (4 MiB of 128 KiB), at a small scale.
    EnvOptions {
        cache_bytes: 1 << 20,
        node_bytes: 64 << 10,
        basement_bytes: 4 << 10,
        fanout: 8,
        sync: SyncPolicy::Never,
        checkpoint_period: None,
        ..EnvOptions::default()
    }
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

#[test]
fn hot_leaves_stay_resident_while_cold_reads_stream_past() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open_with(dir.path(), opts(), UpdateRegistry::new()).unwrap();
    let d = env.create_dict("a").unwrap();
    let value = [7u8; 100];
    for i in 0..KEYS {
        d.put(&key(i), &value).unwrap();
    }
    // Everything clean and on disk, about 16 times the cache.
    env.checkpoint().unwrap();

    let mut cold = HOT;
    let mut hot_misses = Vec::new();
    for _ in 0..ROUNDS {
        // A stream of reads of data read once each, as much as a third of the cache.
        for _ in 0..3_200 {
            cold = if cold + 1 >= KEYS { HOT } else { cold + 1 };
            assert!(d.get(&key(cold)).unwrap().is_some());
        }
        let before = env.stats().misses;
        for i in 0..HOT {
            assert_eq!(d.get(&key(i)).unwrap().as_deref(), Some(&value[..]));
        }
        hot_misses.push(env.stats().misses - before);
    }
    // Once warm, the hot leaves are read every round and must not be the ones the evictor
    // picks: a sweep that starts from the lowest block numbers every time evicts exactly
    // them, and every round misses them all again.
    eprintln!("hot misses per round: {hot_misses:?}");
    let late: u64 = hot_misses[ROUNDS as usize / 2..].iter().sum();
    let first = hot_misses[0];
    assert!(
        late * 4 <= first * (ROUNDS as u64 / 2),
        "the hot keys kept missing: {hot_misses:?}"
    );
    env.close().unwrap();
}
