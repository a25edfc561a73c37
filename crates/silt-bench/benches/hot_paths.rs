//! Criterion micro-benchmarks of the engine's hot paths (issue 15), opt-in so that `make test`
//! never builds criterion:
//!
//! ```text
//! cargo bench -p silt-bench --features micro --bench hot_paths
//! ```
//!
//! - `inject`: a put and a blind update through `Dict` into an in-memory tree (the log append
//!   to the OS included, no fsync): what every write pays before its message settles.
//! - `leaf_apply`: a buffer's messages (inserts, blind updates, deletes) applied to a 4 MiB
//!   leaf, as a flush does.
//! - `node`: a 4 MiB leaf laid out as a block (compression, checksums) and read back whole or
//!   one basement at a time, with each compressor.
//! - `keyenc`: a compound index key encoded and decoded.
//! - `matcher`: a query filter parsed, and evaluated against a document.

use std::hint::black_box;
use std::time::Duration;

use bson::{doc, Bson};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use silt_storage::microbench::{LeafApply, LeafNode};
use silt_storage::{Compression, Env, EnvOptions, SyncPolicy, UpdateOutcome, UpdateRegistry};

const BASEMENT: usize = 128 << 10;
/// Entries of a 4 MiB leaf with 100-byte values.
const LEAF_ENTRIES: u64 = 36_000;

fn inject(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut fns = UpdateRegistry::new();
    fns.register(1, |_, old, arg| {
        let cur = old.map_or(0, |o| {
            u64::from_le_bytes(o.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]))
        });
        let add = u64::from_le_bytes(arg.try_into().unwrap_or([0; 8]));
        UpdateOutcome::Set(cur.wrapping_add(add).to_le_bytes().to_vec())
    });
    let opts = EnvOptions {
        cache_bytes: 512 << 20,
        sync: SyncPolicy::Never,
        checkpoint_period: None,
        ..EnvOptions::default()
    };
    let env = Env::open_with(dir.path(), opts, fns).expect("an environment");
    let dict = env.create_dict("bench").expect("a dictionary");
    let value = vec![7u8; 100];
    let mut g = Criterion::benchmark_group(c, "inject");
    g.throughput(Throughput::Elements(1));
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 10_000_000
    };
    g.bench_function("put_100B_random_key", |b| {
        b.iter(|| dict.put(&next().to_be_bytes(), &value).expect("put"))
    });
    g.bench_function("blind_update_random_key", |b| {
        b.iter(|| {
            dict.update(&next().to_be_bytes(), 1, &1u64.to_le_bytes())
                .expect("update")
        })
    });
    g.finish();
    drop(dict);
    env.close().expect("close");
}

fn leaf_apply(c: &mut Criterion) {
    let mut g = c.benchmark_group("leaf_apply");
    for msgs in [1_000u64, 10_000] {
        let case = LeafApply::new(LEAF_ENTRIES, msgs, 100, BASEMENT);
        g.throughput(Throughput::Elements(msgs));
        g.bench_with_input(BenchmarkId::new("4MiB_leaf", msgs), &case, |b, case| {
            b.iter(|| black_box(case.apply()))
        });
    }
    g.finish();
}

fn node(c: &mut Criterion) {
    let mut g = c.benchmark_group("node");
    let leaf = LeafNode::new(LEAF_ENTRIES, 100, 0.5, BASEMENT);
    g.throughput(Throughput::Bytes(leaf.raw_bytes() as u64));
    for (name, comp) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd1", Compression::Zstd(1)),
        ("zstd3", Compression::Zstd(3)),
    ] {
        g.bench_function(BenchmarkId::new("serialize", name), |b| {
            b.iter(|| black_box(leaf.encode(comp)))
        });
        let block = leaf.encode(comp);
        g.bench_function(BenchmarkId::new("deserialize", name), |b| {
            b.iter(|| black_box(LeafNode::decode(&block)))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("node_one_basement");
    for (name, comp) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd1", Compression::Zstd(1)),
    ] {
        let block = leaf.encode(comp);
        let mid = leaf.basements() / 2;
        g.bench_function(BenchmarkId::new("deserialize", name), |b| {
            b.iter(|| black_box(LeafNode::decode_one(&block, mid)))
        });
    }
    g.finish();
}

fn keyenc(c: &mut Criterion) {
    use silt_bson::keyenc;
    let mut g = c.benchmark_group("keyenc");
    let (a, s, d) = (
        Bson::Int64(1_234_567),
        Bson::String("customer-000042".into()),
        Bson::Double(98.25),
    );
    g.bench_function("encode_int_string_double", |b| {
        b.iter(|| black_box(keyenc::encode_key(&[(&a, false), (&s, false), (&d, true)])))
    });
    let key = keyenc::encode_key(&[(&a, false), (&s, false), (&d, true)]);
    g.bench_function("decode_int_string_double", |b| {
        b.iter(|| black_box(keyenc::decode_key(&key, &[false, false, true])))
    });
    g.finish();
}

fn matcher(c: &mut Criterion) {
    use silt_query::matcher::Matcher;
    let mut g = c.benchmark_group("matcher");
    let filter = doc! {
        "price": { "$gte": 10.0, "$lt": 50.0 },
        "customer.region": "EU",
        "tags": { "$in": ["red", "blue"] },
    };
    let hit = doc! {
        "_id": 17i64, "price": 25.5, "customer": { "id": 42i32, "region": "EU" },
        "tags": ["green", "blue"], "pad": "x".repeat(100),
    };
    let miss = doc! {
        "_id": 18i64, "price": 75.0, "customer": { "id": 43i32, "region": "EU" },
        "tags": ["green"], "pad": "x".repeat(100),
    };
    g.bench_function("parse", |b| {
        b.iter(|| black_box(Matcher::new(&filter).expect("a filter")))
    });
    let m = Matcher::new(&filter).expect("a filter");
    g.bench_function("match_hit", |b| b.iter(|| black_box(m.matches(&hit))));
    g.bench_function("match_miss", |b| b.iter(|| black_box(m.matches(&miss))));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = inject, leaf_apply, node, keyenc, matcher
}
criterion_main!(benches);
