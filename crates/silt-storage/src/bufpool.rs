//! Large transient byte buffers (block reads, compressed partitions, block images), reused.
//!
//! A fresh large allocation is fresh pages, and the kernel faults each one in on first touch.
//! Under jemalloc (siltd's allocator, and silt-bench's), the engine's transient buffers kept
//! arriving as fresh pages: one `silt-bench engine` run took 3.1 million page faults against
//! 48 thousand under glibc's malloc, 73% of them in `pread` copying into a new read buffer,
//! and its out-of-cache point gets ran at 60% of their speed. Buffers taken here come back
//! warm. The pool keeps at most [`KEPT`] buffers of at most [`MAX_KEPT_BYTES`] of capacity
//! each, so it holds at most 32 MiB whatever the number of threads.

use parking_lot::Mutex;

static POOL: Mutex<Vec<Vec<u8>>> = parking_lot::const_mutex(Vec::new());
const KEPT: usize = 16;
const MAX_KEPT_BYTES: usize = 2 << 20;
/// Buffers smaller than this are not worth keeping (the allocator's caches serve them).
const MIN_KEPT_BYTES: usize = 16 << 10;

/// An empty buffer, from the pool when it has one.
pub(crate) fn take() -> Vec<u8> {
    POOL.lock().pop().unwrap_or_default()
}

/// A buffer of `len` zero bytes, from the pool when it has one.
pub(crate) fn zeroed(len: usize) -> Vec<u8> {
    let mut b = take();
    b.clear();
    b.resize(len, 0);
    b
}

/// Give a buffer back for reuse (dropped when the pool is full or it is too small or too
/// large to keep).
pub(crate) fn give(mut b: Vec<u8>) {
    if !(MIN_KEPT_BYTES..=MAX_KEPT_BYTES).contains(&b.capacity()) {
        return;
    }
    b.clear();
    let mut pool = POOL.lock();
    if pool.len() < KEPT {
        pool.push(b);
    }
}
