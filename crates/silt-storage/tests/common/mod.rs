//! What the engine's model-based tests share: the tiny tree shape that makes trees deep and
//! busy with little data, their keys, and the `TOGGLE` update function with its model.
#![allow(dead_code, reason = "each test crate uses a part of it")]

use std::collections::BTreeMap;

use silt_storage::{Compression, EnvOptions, SyncPolicy};

/// Tiny nodes (2 KiB, 512-byte basements, fanout 4), so that trees get deep and flush, split
/// and merge constantly, and a 48 KiB cache, far smaller than the data.
pub(crate) fn tiny_opts() -> EnvOptions {
    EnvOptions {
        cache_bytes: 48 << 10,
        node_bytes: 2048,
        basement_bytes: 512,
        fanout: 4,
        compression: Compression::Lz4,
        sync: SyncPolicy::Never,
        checkpoint_period: None,
        log_file_bytes: 64 << 10,
        flusher_threads: 1,
        direct_io: false,
    }
}

/// Key `k`: a long-ish common prefix makes keys realistic and fills nodes faster.
pub(crate) fn key(k: u16) -> Vec<u8> {
    let mut v = b"key-prefix/".to_vec();
    v.extend_from_slice(&k.to_be_bytes());
    v
}

/// `TOGGLE`: present with an even first byte, delete; present otherwise, no change; absent,
/// insert `arg` (`None`: no change).
pub(crate) fn toggle(old: Option<&[u8]>, arg: &[u8]) -> Option<Option<Vec<u8>>> {
    match old {
        Some(v) if v.first().is_some_and(|b| b % 2 == 0) => Some(None),
        Some(_) => None,
        None => Some(Some(arg.to_vec())),
    }
}

/// What [`toggle`] does to key `k` of a model.
pub(crate) fn model_toggle(m: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: &[u8], arg: &[u8]) {
    match toggle(m.get(k).map(Vec::as_slice), arg) {
        Some(Some(v)) => {
            m.insert(k.to_vec(), v);
        }
        Some(None) => {
            m.remove(k);
        }
        None => {}
    }
}
