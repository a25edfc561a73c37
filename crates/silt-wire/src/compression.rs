//! OP_COMPRESSED compressors.

use crate::WireError;

/// A compressor named by OP_COMPRESSED's `compressorId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// Id 0: the bytes are stored as they are.
    Noop,
    /// Id 1: the raw snappy block format (`snap::raw`).
    Snappy,
    /// Id 2: zlib (`flate2`, the zlib format at the default level, as MongoDB's).
    Zlib,
    /// Id 3: zstd.
    Zstd,
}

impl Compressor {
    /// The compressors this crate can both compress and decompress, in the
    /// order a server would advertise them in `hello`'s `compression` field.
    pub const SUPPORTED: [Compressor; 3] = [Compressor::Snappy, Compressor::Zstd, Compressor::Zlib];

    /// The wire id (`compressorId`).
    pub fn id(self) -> u8 {
        match self {
            Self::Noop => 0,
            Self::Snappy => 1,
            Self::Zlib => 2,
            Self::Zstd => 3,
        }
    }

    /// The compressor with wire id `id`; unknown ids are [`WireError::UnsupportedCompressor`].
    pub fn from_id(id: u8) -> Result<Self, WireError> {
        match id {
            0 => Ok(Self::Noop),
            1 => Ok(Self::Snappy),
            2 => Ok(Self::Zlib),
            3 => Ok(Self::Zstd),
            other => Err(WireError::UnsupportedCompressor(other)),
        }
    }

    /// The name used in the `hello` handshake (`"noop"`, `"snappy"`, `"zlib"`, `"zstd"`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Noop => "noop",
            Self::Snappy => "snappy",
            Self::Zlib => "zlib",
            Self::Zstd => "zstd",
        }
    }

    /// The compressor called `name` in the `hello` handshake, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Noop, Self::Snappy, Self::Zlib, Self::Zstd]
            .into_iter()
            .find(|c| c.name() == name)
    }

    /// Whether this crate can compress and decompress with it.
    pub fn is_supported(self) -> bool {
        true
    }

    /// Compresses `data`.
    pub fn compress(self, data: &[u8]) -> Result<Vec<u8>, WireError> {
        match self {
            Self::Noop => Ok(data.to_vec()),
            Self::Snappy => snap::raw::Encoder::new()
                .compress_vec(data)
                .map_err(|e| WireError::Compression(format!("snappy compression: {e}"))),
            Self::Zstd => zstd::bulk::compress(data, zstd::DEFAULT_COMPRESSION_LEVEL)
                .map_err(|e| WireError::Compression(format!("zstd compression: {e}"))),
            Self::Zlib => {
                use std::io::Write;
                let mut e = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(data.len() / 2 + 16),
                    flate2::Compression::default(),
                );
                e.write_all(data)
                    .and_then(|()| e.finish())
                    .map_err(|e| WireError::Compression(format!("zlib compression: {e}")))
            }
        }
    }

    /// Decompresses `data`, which must expand to exactly `expected_len` bytes.
    /// The caller bounds `expected_len`; no more than that is ever allocated.
    pub fn decompress(self, data: &[u8], expected_len: usize) -> Result<Vec<u8>, WireError> {
        let out = match self {
            Self::Noop => data.to_vec(),
            Self::Snappy => {
                let declared = snap::raw::decompress_len(data)
                    .map_err(|e| WireError::Compression(format!("snappy: {e}")))?;
                if declared != expected_len {
                    return Err(length_mismatch(declared, expected_len));
                }
                let mut out = vec![0; expected_len];
                let n = snap::raw::Decoder::new()
                    .decompress(data, &mut out)
                    .map_err(|e| WireError::Compression(format!("snappy: {e}")))?;
                out.truncate(n);
                out
            }
            Self::Zstd => zstd::bulk::decompress(data, expected_len)
                .map_err(|e| WireError::Compression(format!("zstd: {e}")))?,
            Self::Zlib => {
                use std::io::Read;
                // Never more than `expected_len` + 1 bytes: a longer stream is a mismatch.
                let mut out = Vec::with_capacity(expected_len);
                flate2::read::ZlibDecoder::new(data)
                    .take(expected_len as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| WireError::Compression(format!("zlib: {e}")))?;
                out
            }
        };
        if out.len() != expected_len {
            return Err(length_mismatch(out.len(), expected_len));
        }
        Ok(out)
    }
}

fn length_mismatch(actual: usize, expected: usize) -> WireError {
    WireError::Compression(format!(
        "decompressed to {actual} bytes, uncompressedSize says {expected}"
    ))
}
