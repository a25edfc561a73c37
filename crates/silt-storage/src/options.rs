//! Environment options. Every size is in bytes.

use std::time::Duration;

use crate::error::{Error, Result};

/// How partitions of a node are compressed on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is.
    None,
    /// LZ4 block format (`lz4_flex`).
    Lz4,
    /// Zstandard at the given level.
    Zstd(i32),
}

impl Compression {
    /// The tag byte written in front of every compressed partition.
    pub(crate) fn tag(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd(_) => 2,
        }
    }

    /// Parse `none`, `lz4`, `zstd` or `zstd:LEVEL`.
    pub fn parse(s: &str) -> Option<Compression> {
        match s {
            "none" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd(1)),
            _ => s
                .strip_prefix("zstd:")
                .and_then(|l| l.parse().ok())
                .map(Compression::Zstd),
        }
    }
}

/// When the write-ahead log is forced to stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// fsync before every write returns (group commit shares one fsync among concurrent writers).
    EveryCommit,
    /// A background thread fsyncs at this period. Writes still reach the OS (a `write(2)`)
    /// before they return, so a process crash loses nothing; a machine crash may lose up to
    /// one period.
    Periodic(Duration),
    /// Never fsync (tests and benchmarks). Writes still reach the OS before they return.
    Never,
}

/// Options for [`crate::Env::open`].
#[derive(Clone, Debug)]
pub struct EnvOptions {
    /// Memory budget of the node cache across all dictionaries.
    pub cache_bytes: usize,
    /// Target uncompressed size of a node; leaves split above it, buffers flush above it.
    pub node_bytes: usize,
    /// Target uncompressed size of a leaf's basement (the unit of partial reads and eviction).
    /// The default, 128 KiB, was chosen from a sweep of 16 to 128 KiB
    /// (`bench/results/basement/`): out-of-cache point reads differed by at most 10% (each is
    /// one random read whatever its size; decompressing a basement costs about 19 µs,
    /// `bench/results/micro.txt`), while inserts and blind updates were fastest at 128 KiB.
    pub basement_bytes: usize,
    /// Maximum children of an internal node.
    pub fanout: usize,
    /// Compression of node partitions.
    pub compression: Compression,
    /// Write-ahead log sync policy.
    pub sync: SyncPolicy,
    /// Period of automatic checkpoints; `None` disables them (a checkpoint still runs on close).
    pub checkpoint_period: Option<Duration>,
    /// Size at which the log rotates to a new file.
    pub log_file_bytes: u64,
    /// Number of background flusher threads.
    pub flusher_threads: usize,
    /// Read node blocks with `O_DIRECT`, bypassing the operating system's page cache, so that
    /// the cache budget above is the only memory holding tree data (TokuMX's `directio`).
    /// Writes stay buffered. Falls back to ordinary reads where the filesystem refuses it.
    pub direct_io: bool,
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            cache_bytes: 128 << 20,
            node_bytes: 4 << 20,
            basement_bytes: 128 << 10,
            fanout: 16,
            compression: Compression::Zstd(1),
            sync: SyncPolicy::Periodic(Duration::from_millis(100)),
            checkpoint_period: Some(Duration::from_secs(60)),
            log_file_bytes: 64 << 20,
            flusher_threads: 1,
            direct_io: false,
        }
    }
}

/// Largest key the engine accepts.
pub const MAX_KEY_BYTES: usize = 32 << 10;
/// Largest value the engine accepts.
pub const MAX_VALUE_BYTES: usize = 32 << 20;

impl EnvOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::InvalidOptions(m.to_string()));
        if self.fanout < 4 {
            return bad("fanout must be at least 4");
        }
        if self.node_bytes < 1024 {
            return bad("node size must be at least 1 KiB");
        }
        if self.basement_bytes == 0 || self.basement_bytes > self.node_bytes {
            return bad("basement size must be between 1 byte and the node size");
        }
        if self.cache_bytes < 8 * self.node_bytes {
            return bad("cache must hold at least eight nodes");
        }
        if let Compression::Zstd(l) = self.compression {
            if !(-7..=22).contains(&l) {
                return bad("zstd level must be in -7..=22");
            }
        }
        Ok(())
    }
}
