//! Integer widths: the engine's one place for the conversions `clippy::cast_possible_truncation`
//! asks about.
//!
//! - File offsets and lengths are `u64` (on disk and in the block table) and index memory as
//!   `usize`. The crate builds for 64-bit targets only (refused below), where `u64` to `usize`
//!   loses nothing: [`usize_of`] is that cast, with the reason written once.
//! - Lengths and arena offsets stored in 32-bit fields, on disk and in memory, are bounded by
//!   the engine's limits: a key is at most `MAX_KEY_BYTES`, a value `MAX_VALUE_BYTES`, a node's
//!   partitions and in-memory arenas hold at most about one node's worth (`node_bytes`) of
//!   entries, all far below 4 GiB. [`len_u32`] checks it and panics naming that invariant
//!   rather than writing a truncated length (a silently corrupt block or log record). The check
//!   is a compare and a never-taken branch.

#[cfg(not(target_pointer_width = "64"))]
compile_error!(
    "silt-storage supports 64-bit targets only: file offsets (u64) index memory as usize"
);

/// A `u64` offset or length as `usize`.
#[inline]
#[expect(
    clippy::cast_possible_truncation,
    reason = "64-bit targets only (compile_error! above): usize holds every u64"
)]
pub(crate) const fn usize_of(n: u64) -> usize {
    n as usize
}

/// A length or arena offset as the `u32` of its 32-bit field. Panics above `u32::MAX`, which
/// the engine's size limits rule out (see the module comment).
#[inline]
#[track_caller]
pub(crate) fn len_u32(n: usize) -> u32 {
    match u32::try_from(n) {
        Ok(v) => v,
        Err(_) => too_long(n),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn too_long(n: usize) -> ! {
    panic!(
        "length or offset {n} does not fit its 32-bit field: keys, values and node partitions \
         are bounded far below 4 GiB"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(usize_of(u64::MAX), usize::MAX);
        assert_eq!(len_u32(0), 0);
        assert_eq!(len_u32(u32::MAX as usize), u32::MAX);
    }

    #[test]
    #[should_panic(expected = "does not fit its 32-bit field")]
    fn len_past_u32_panics() {
        len_u32(u32::MAX as usize + 1);
    }
}
