//! The write-ahead log: logical operations, written with group commit.
//!
//! Files `wal-NNNNNNNNNN.log` (`files.rs`): a header `magic "SILTWAL3" | seq u64 | first_lsn
//! u64 | crc32c u32`, then records `len u32 | crc32c u32 | lsn u64 | body`, where `len` is the
//! body's length and the crc covers `lsn` and the body. The bodies are `record.rs`'s: `type u8
//! | dict u64 | fields`, the fields being length-prefixed keys, values and arguments and `u32`
//! update-function ids; a batch or a transaction's writes nest records. Files of versions 1
//! and 2 (`SILTWAL1`, `SILTWAL2`) hold a subset of today's records and are still read
//! (`reader.rs`). `writer.rs` appends and group-commits; recovery's replay is
//! `crate::recovery`.

mod files;
mod reader;
mod record;
mod writer;

pub(crate) use files::{file_name, list_files};
pub(crate) use reader::read_file_on;
pub use reader::{read_file, LogFile};
pub use record::LogRecord;
pub(crate) use writer::Wal;
