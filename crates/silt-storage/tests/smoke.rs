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
