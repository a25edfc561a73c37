//! Bound arithmetic for range scans: narrowing a range by a basement's bounds and by where a
//! scan resumes.

use std::ops::Bound;

use crate::tree::node::Key;

pub(crate) fn bound_ref(b: &Bound<Key>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub(super) fn tighter_lo<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>) -> Bound<&'a [u8]> {
    use Bound::*;
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x,
        (Included(x), Included(y)) => Included(x.max(y)),
        (Excluded(x), Excluded(y)) => Excluded(x.max(y)),
        (Included(x), Excluded(y)) | (Excluded(y), Included(x)) => {
            if x > y {
                Included(x)
            } else {
                Excluded(y)
            }
        }
    }
}

pub(super) fn tighter_hi<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>) -> Bound<&'a [u8]> {
    use Bound::*;
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x,
        (Included(x), Included(y)) => Included(x.min(y)),
        (Excluded(x), Excluded(y)) => Excluded(x.min(y)),
        (Included(x), Excluded(y)) | (Excluded(y), Included(x)) => {
            if x < y {
                Included(x)
            } else {
                Excluded(y)
            }
        }
    }
}

pub(super) fn empty_range(a: Bound<&[u8]>, z: Bound<&[u8]>) -> bool {
    use Bound::*;
    match (a, z) {
        (Unbounded, _) | (_, Unbounded) => false,
        (Included(x), Included(y)) => x > y,
        (Included(x), Excluded(y)) | (Excluded(x), Included(y)) | (Excluded(x), Excluded(y)) => {
            x >= y
        }
    }
}

/// Is every key `>= h` above the range's upper bound?
pub(super) fn above_hi(h: &[u8], hi: &Bound<Key>) -> bool {
    match hi {
        Bound::Unbounded => false,
        Bound::Included(x) => h > x.as_ref(),
        Bound::Excluded(x) => h >= x.as_ref(),
    }
}

/// Is every key `< l` below the range's lower bound?
pub(super) fn below_lo(l: &[u8], lo: &Bound<Key>) -> bool {
    match lo {
        Bound::Unbounded => false,
        Bound::Included(x) | Bound::Excluded(x) => l <= x.as_ref(),
    }
}
