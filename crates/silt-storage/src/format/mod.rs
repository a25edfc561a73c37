//! Bytes only: how headers, block tables, nodes and partitions are laid out on disk. Nothing
//! here does I/O or takes a lock. `docs/format.md` is the human-readable form of this module.

pub(crate) mod btt;
pub(crate) mod bytes;
pub(crate) mod compress;
pub(crate) mod header;
pub(crate) mod node;
