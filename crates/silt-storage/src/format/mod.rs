//! Bytes only: how headers, block tables, nodes and partitions are laid out on disk. Nothing
//! here does I/O or takes a lock. `docs/format.md` is the human-readable form of this module.
//!
//! Decoders meet bytes from disk, which may be anything: they return errors, never panic, so
//! `expect` and `unwrap` are refused here outside tests (a damaged block is a corruption error
//! naming the file and block, not a dead server).
#![cfg_attr(not(test), deny(clippy::expect_used, clippy::unwrap_used))]

pub(crate) mod btt;
pub(crate) mod bytes;
pub(crate) mod compress;
pub(crate) mod header;
pub(crate) mod node;
