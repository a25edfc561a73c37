//! Partition compression. Every stored partition starts with one tag byte naming its method, so
//! a file may hold partitions written under different settings and each describes itself.

use std::cell::RefCell;

use crate::options::Compression;

// zstd contexts are reused per thread: creating one per partition costs large allocations
// (the compression workspace) on every node write and read.
thread_local! {
    static CCTX: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static DCTX: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// `[tag 2][zstd frame of raw]`.
fn zstd_compress(raw: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    CCTX.with(|c| {
        let mut c = c.borrow_mut();
        let cx = match &mut *c {
            Some((l, cx)) if *l == level => cx,
            slot => &mut slot.insert((level, zstd::bulk::Compressor::new(level)?)).1,
        };
        let mut out = crate::bufpool::zeroed(1 + zstd::zstd_safe::compress_bound(raw.len()));
        out[0] = Compression::Zstd(level).tag();
        let n = cx.compress_to_buffer(raw, &mut out[1..])?;
        out.truncate(1 + n);
        Ok(out)
    })
}

fn zstd_decompress(payload: &[u8], raw_len: usize) -> std::io::Result<Vec<u8>> {
    DCTX.with(|d| {
        let mut d = d.borrow_mut();
        let dx = match &mut *d {
            Some(dx) => dx,
            slot => slot.insert(zstd::bulk::Decompressor::new()?),
        };
        let mut out = Vec::with_capacity(raw_len);
        dx.decompress_to_buffer(payload, &mut out)?;
        Ok(out)
    })
}

/// Compress `raw` with `method`, writing `[tag][payload]` to a buffer of `crate::bufpool`
/// (give it back when done).
pub(crate) fn compress(method: Compression, raw: &[u8]) -> Vec<u8> {
    let mut out = crate::bufpool::take();
    out.push(method.tag());
    match method {
        Compression::None => out.extend_from_slice(raw),
        Compression::Lz4 => out.extend_from_slice(&lz4_flex::block::compress(raw)),
        Compression::Zstd(level) => match zstd_compress(raw, level) {
            Ok(c) => crate::bufpool::give(std::mem::replace(&mut out, c)),
            Err(_) => {
                out[0] = Compression::None.tag();
                out.extend_from_slice(raw);
            }
        },
    }
    out
}

/// Undo [`compress`]. `raw_len` is the uncompressed length recorded beside the partition.
pub(crate) fn decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let (&tag, payload) = stored.split_first().ok_or("empty partition")?;
    let out = match tag {
        0 => payload.to_vec(),
        1 => lz4_flex::block::decompress(payload, raw_len).map_err(|e| format!("lz4: {e}"))?,
        2 => zstd_decompress(payload, raw_len).map_err(|e| format!("zstd: {e}"))?,
        t => return Err(format!("unknown compression tag {t}")),
    };
    if out.len() != raw_len {
        return Err(format!(
            "decompressed {} bytes, expected {raw_len}",
            out.len()
        ));
    }
    Ok(out)
}
