//! Entry points for the fuzz targets in `fuzz/` (not an API): the deserializers of what the
//! engine reads back from disk, reached past the checksums that would otherwise stop almost
//! every mutated input at the door. Each must return an error for bad bytes, never panic
//! or allocate without bound.

use crate::format::{btt, compress, header, node};

/// Decode `data` as every on-disk structure the engine reads: a node block header (as
/// stored, checksums included), a leaf basement and a message buffer (as decompressed), a
/// compressed partition (each compressor, with a declared raw length from the input), a
/// file header, and a block table.
pub fn decode_everything(data: &[u8]) {
    let _ = node::decode_header(data);
    let _ = node::decode_basement(data.to_vec());
    let _ = node::decode_buffer(data.to_vec());
    if data.len() >= 2 {
        let raw_len = usize::from(u16::from_le_bytes([data[0], data[1]])) * 16;
        let _ = compress::decompress(&data[2..], raw_len);
    }
    let _ = header::FileHeader::decode(data);
    let _ = btt::decode_table(data);
}
