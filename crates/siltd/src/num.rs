//! Numbers as siltd's replies carry them. A count goes out as the `int32` mongod sends and
//! clamps at `i32::MAX` instead of wrapping; a duration goes out as `int64` milliseconds or
//! microseconds and clamps likewise. Every reply field built from a `usize`, `u64` or
//! `Duration` goes through these, so no `as` cast can wrap a figure into a negative one.

use std::time::Duration;

/// A count, an index or a setting as an `int32` reply field, clamped to `i32`'s range.
pub(crate) fn int32<T: TryInto<i32> + PartialOrd + Default + Copy>(n: T) -> i32 {
    n.try_into()
        .unwrap_or(if n < T::default() { i32::MIN } else { i32::MAX })
}

/// A size or count as mongod's `appendNumber` writes it: an `int32` when it fits, an `int64`
/// otherwise (so a client reading `int32` sizes sees the type mongod sends).
pub(crate) fn number<T: TryInto<i64> + Copy>(n: T) -> bson::Bson {
    let n: i64 = n.try_into().unwrap_or(i64::MAX);
    i32::try_from(n).map_or(bson::Bson::Int64(n), bson::Bson::Int32)
}

/// A duration in whole milliseconds, as an `int64` reply field.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A duration in whole microseconds, as an `int64` reply field.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_instead_of_wrapping() {
        assert_eq!(int32(5usize), 5);
        assert_eq!(int32(u64::MAX), i32::MAX);
        assert_eq!(int32(1usize << 31), i32::MAX);
        assert_eq!(int32(-5i64), -5);
        assert_eq!(int32(i64::MIN), i32::MIN);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(micros(Duration::MAX), i64::MAX);
    }
}
