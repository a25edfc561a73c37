//! Key ranges: a scan the planner bounded in value space (`silt_query::plan::IndexScan`)
//! turned into byte ranges of its index's dictionary.
//!
//! The equality points multiply out into encoded prefixes (each field in its direction); the
//! interval of the next field, if any, becomes a pair of positions relative to each prefix.
//! An interval's type-bracket ends are the bracket's tag byte (`keyenc::bracket_tag`), so a
//! range never crosses into another type. The ranges are sorted in key order.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use bson::Bson;
use silt_bson::keyenc;
use silt_query::plan::{IndexScan, ValueBound};

use crate::index::prefix_end;
use crate::{Index, Result};

/// A range of keys of one dictionary.
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// One end of a component interval, in the component's encoded (direction-adjusted) bytes:
/// just before every key starting with the bytes, or just after all of them.
#[derive(Debug, Clone)]
enum Pos {
    Before(Vec<u8>),
    After(Vec<u8>),
}

fn vb_pos_asc(b: &ValueBound, lower: bool) -> Pos {
    match (b, lower) {
        (ValueBound::Incl(v), true) => Pos::Before(keyenc::encode(v)),
        (ValueBound::Excl(v), true) => Pos::After(keyenc::encode(v)),
        (ValueBound::Incl(v), false) => Pos::After(keyenc::encode(v)),
        (ValueBound::Excl(v), false) => Pos::Before(keyenc::encode(v)),
        (ValueBound::Type(t), true) => Pos::Before(vec![keyenc::bracket_tag(*t)]),
        (ValueBound::Type(t), false) => Pos::After(vec![keyenc::bracket_tag(*t)]),
    }
}

fn desc_bytes(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    keyenc::encode_value_desc(v, &mut out);
    out
}

/// The interval in encoded bytes of one field's values `[lo, hi]`.
fn interval(lo: &ValueBound, hi: &ValueBound, desc: bool) -> (Pos, Pos) {
    if !desc {
        return (vb_pos_asc(lo, true), vb_pos_asc(hi, false));
    }
    // Descending: the value range's upper end is the byte range's lower end.
    let l = match hi {
        ValueBound::Incl(v) => Pos::Before(desc_bytes(v)),
        ValueBound::Excl(v) => Pos::After(desc_bytes(v)),
        ValueBound::Type(t) => Pos::Before(vec![!keyenc::bracket_tag(*t)]),
    };
    let h = match lo {
        ValueBound::Incl(v) => Pos::After(desc_bytes(v)),
        ValueBound::Excl(v) => Pos::Before(desc_bytes(v)),
        ValueBound::Type(t) => Pos::After(vec![!keyenc::bracket_tag(*t)]),
    };
    (l, h)
}

fn cat(p: &[u8], s: &[u8]) -> Vec<u8> {
    let mut v = p.to_vec();
    v.extend_from_slice(s);
    v
}

fn key_range(prefix: &[u8], iv: Option<&(Pos, Pos)>) -> Option<KeyRange> {
    let Some((l, h)) = iv else {
        let lo = if prefix.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Included(prefix.to_vec())
        };
        let hi = match prefix_end(prefix) {
            Some(e) if !prefix.is_empty() => Bound::Excluded(e),
            _ => Bound::Unbounded,
        };
        return Some((lo, hi));
    };
    let lo = match l {
        Pos::Before(s) => Bound::Included(cat(prefix, s)),
        Pos::After(s) => Bound::Included(prefix_end(&cat(prefix, s))?),
    };
    let hi = match h {
        Pos::Before(s) => Bound::Excluded(cat(prefix, s)),
        Pos::After(s) => match prefix_end(&cat(prefix, s)) {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        },
    };
    Some((lo, hi))
}

fn bound_cmp(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            x.cmp(y)
        }
    }
}

/// A bound on owned bytes as a bound on a slice.
pub(crate) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// One scan of a secondary index over byte ranges.
#[derive(Debug, Clone)]
pub struct KeyScan {
    pub(crate) index: Arc<Index>,
    /// Key ranges in index order (scanned last to first when `reverse`).
    pub(crate) ranges: Vec<KeyRange>,
    pub(crate) reverse: bool,
}

impl KeyScan {
    /// The byte ranges of `scan` over `index` (the index the planner's scan names).
    pub fn new(index: Arc<Index>, scan: &IndexScan) -> KeyScan {
        let fields = &index.spec.fields;
        let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
        for (i, vs) in scan.points.iter().enumerate() {
            let desc = fields[i].1;
            let mut next = Vec::with_capacity(prefixes.len() * vs.len());
            for pre in &prefixes {
                for v in vs {
                    let mut k = pre.clone();
                    if desc {
                        keyenc::encode_value_desc(v, &mut k);
                    } else {
                        keyenc::encode_value(v, &mut k);
                    }
                    next.push(k);
                }
            }
            prefixes = next;
        }
        let iv = scan
            .range
            .as_ref()
            .map(|r| interval(&r.lo, &r.hi, fields[scan.points.len()].1));
        let mut ranges: Vec<KeyRange> = prefixes
            .iter()
            .filter_map(|p| key_range(p, iv.as_ref()))
            .collect();
        ranges.sort_by(|a, b| bound_cmp(&a.0, &b.0));
        KeyScan {
            index,
            ranges,
            reverse: scan.reverse,
        }
    }

    /// The index scanned.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The `_id` keys of the entries in the ranges (at most `limit`), read from the index
    /// alone.
    pub fn id_keys(&self, limit: Option<usize>) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        for (lo, hi) in &self.ranges {
            let mut cur = self
                .index
                .parts()
                .cursor(as_ref(lo), as_ref(hi), None, false);
            while let Some((k, _)) = cur.next()? {
                if let Some(id) = self.index.entry_id_key(&k) {
                    out.push(id.to_vec());
                }
                if limit.is_some_and(|l| out.len() >= l) {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// The number of entries in the ranges that `snap` sees (the latest without one),
    /// counted in the tree; how it was answered is added to `stats`.
    pub fn count(
        &self,
        snap: Option<&silt_storage::Snapshot>,
        stats: &mut silt_storage::CountStats,
    ) -> Result<u64> {
        let mut n = 0u64;
        let parts = self.index.parts();
        for (lo, hi) in &self.ranges {
            n += parts.count_range_at(as_ref(lo), as_ref(hi), false, snap, stats)?;
        }
        Ok(n)
    }

    /// How many key ranges it scans.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt_bson::compare::{cmp_values, type_rank};

    fn within(r: &KeyRange, k: &[u8]) -> bool {
        let lo = match &r.0 {
            Bound::Included(b) => k >= b.as_slice(),
            Bound::Excluded(b) => k > b.as_slice(),
            Bound::Unbounded => true,
        };
        let hi = match &r.1 {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        };
        lo && hi
    }

    /// Every (prefix value, range value) key with an `_id` suffix lands in the range built
    /// for `x == 1 && lo op y op hi` exactly when the predicate holds, in both directions.
    #[test]
    fn ranges_hold_exactly_the_matching_keys() {
        let values = [
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-3),
            Bson::Int32(5),
            Bson::Double(5.5),
            Bson::Int64(10),
            Bson::String("a".into()),
            Bson::String("zz".into()),
            Bson::Boolean(true),
            Bson::MaxKey,
        ];
        let num = type_rank(&Bson::Int32(0));
        let bounds = [
            (ValueBound::Excl(Bson::Int32(5)), ValueBound::Type(num)),
            (ValueBound::Type(num), ValueBound::Incl(Bson::Int32(10))),
            (
                ValueBound::Incl(Bson::Int32(5)),
                ValueBound::Excl(Bson::Int32(10)),
            ),
            (
                ValueBound::Incl(Bson::String("a".into())),
                ValueBound::Type(type_rank(&Bson::String(String::new()))),
            ),
        ];
        let holds = |v: &Bson, lo: &ValueBound, hi: &ValueBound| {
            let lo_ok = match lo {
                ValueBound::Incl(b) => type_rank(v) == type_rank(b) && cmp_values(v, b).is_ge(),
                ValueBound::Excl(b) => type_rank(v) == type_rank(b) && cmp_values(v, b).is_gt(),
                ValueBound::Type(t) => type_rank(v) == *t,
            };
            let hi_ok = match hi {
                ValueBound::Incl(b) => type_rank(v) == type_rank(b) && cmp_values(v, b).is_le(),
                ValueBound::Excl(b) => type_rank(v) == type_rank(b) && cmp_values(v, b).is_lt(),
                ValueBound::Type(t) => type_rank(v) == *t,
            };
            lo_ok && hi_ok && !matches!(v, Bson::Double(d) if d.is_nan())
        };
        for desc in [false, true] {
            for (lo, hi) in &bounds {
                let mut prefix = Vec::new();
                keyenc::encode_value(&Bson::Int32(1), &mut prefix);
                let iv = interval(lo, hi, desc);
                let r = key_range(&prefix, Some(&iv)).unwrap();
                for x in [Bson::Int32(0), Bson::Int32(1), Bson::Int32(2)] {
                    for v in &values {
                        let mut k = Vec::new();
                        keyenc::encode_value(&x, &mut k);
                        if desc {
                            keyenc::encode_value_desc(v, &mut k);
                        } else {
                            keyenc::encode_value(v, &mut k);
                        }
                        keyenc::encode_value(&Bson::Int32(42), &mut k);
                        let want = x == Bson::Int32(1) && holds(v, lo, hi);
                        // NaN sits at the bottom of the numbers: a range open at the bottom
                        // of the bracket may include it (the matcher decides).
                        if matches!(v, Bson::Double(d) if d.is_nan()) {
                            continue;
                        }
                        assert_eq!(within(&r, &k), want, "{x} {v} {lo:?} {hi:?} desc={desc}");
                    }
                }
            }
        }
        // Equality only: the prefix's own keys.
        let mut p = Vec::new();
        keyenc::encode_value(&Bson::Int32(7), &mut p);
        let r = key_range(&p, None).unwrap();
        let mut k = p.clone();
        keyenc::encode_value(&Bson::Int32(1), &mut k);
        assert!(within(&r, &k));
        let mut other = Vec::new();
        keyenc::encode_value(&Bson::Int32(8), &mut other);
        assert!(!within(&r, &other));
    }
}
