//! Partition compression. Every stored partition starts with one tag byte naming its method, so
//! a file may hold partitions written under different settings and each describes itself.

use crate::options::Compression;

/// Compress `raw` with `method`, writing `[tag][payload]` to a new buffer.
pub(crate) fn compress(method: Compression, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() / 2 + 16);
    out.push(method.tag());
    match method {
        Compression::None => out.extend_from_slice(raw),
        Compression::Lz4 => out.extend_from_slice(&lz4_flex::block::compress(raw)),
        Compression::Zstd(level) => {
            // Writing into a Vec cannot fail; the error path exists only for I/O sinks.
            match zstd::bulk::compress(raw, level) {
                Ok(c) => out.extend_from_slice(&c),
                Err(_) => {
                    out[0] = Compression::None.tag();
                    out.extend_from_slice(raw);
                }
            }
        }
    }
    out
}

/// Undo [`compress`]. `raw_len` is the uncompressed length recorded beside the partition.
pub(crate) fn decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let (&tag, payload) = stored.split_first().ok_or("empty partition")?;
    let out = match tag {
        0 => payload.to_vec(),
        1 => lz4_flex::block::decompress(payload, raw_len).map_err(|e| format!("lz4: {e}"))?,
        2 => zstd::bulk::decompress(payload, raw_len).map_err(|e| format!("zstd: {e}"))?,
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
