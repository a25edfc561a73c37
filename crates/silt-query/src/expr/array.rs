//! Array operators of expressions: `$arrayElemAt`, `$slice`, `$range`, `$indexOfArray`,
//! `$arrayToObject`; and the start/end index arguments they share with `$indexOfBytes` and
//! `$indexOfCP` (`index_bounds`).

use bson::{Bson, Document};
use silt_bson::compare::collated_equal as values_equal;

use super::arith::{exact_i32, exact_i64, Number};
use super::{fmt_value, int, null, nullish, show, type_name, Val};
use crate::error::{QResult, QueryError};

pub(super) fn array_elem_at(vals: &[Val]) -> QResult<Val> {
    let (a, i) = (&vals[0], &vals[1]);
    if nullish(a.as_ref()) || nullish(i.as_ref()) {
        return null();
    }
    let Some(Bson::Array(arr)) = a else {
        return Err(QueryError::located(
            28689,
            format!(
                "$arrayElemAt's first argument must be an array, but is {}",
                type_name(a.as_ref())
            ),
        ));
    };
    let idx = match i {
        Some(x) if Number::of(x).is_some() => exact_i32(x).ok_or_else(|| {
            QueryError::located(
                28691,
                format!(
                    "$arrayElemAt's second argument must be representable as a 32-bit integer: \
                     {}",
                    fmt_value(x)
                ),
            )
        })?,
        _ => {
            return Err(QueryError::located(
                28690,
                format!(
                    "$arrayElemAt's second argument must be a numeric value, but is {}",
                    type_name(i.as_ref())
                ),
            ))
        }
    };
    let pos = if idx < 0 {
        arr.len().checked_sub(idx.unsigned_abs() as usize)
    } else {
        Some(idx as usize)
    };
    Ok(pos.and_then(|p| arr.get(p)).cloned())
}

pub(super) fn slice(vals: &[Val]) -> QResult<Val> {
    if vals.iter().any(|v| nullish(v.as_ref())) {
        return null();
    }
    let Some(Bson::Array(arr)) = &vals[0] else {
        return Err(QueryError::located(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                type_name(vals[0].as_ref())
            ),
        ));
    };
    let second = match &vals[1] {
        Some(x) if Number::of(x).is_some() => exact_i32(x).ok_or_else(|| {
            QueryError::located(
                28726,
                format!(
                    "Second argument to $slice can't be represented as a 32-bit integer: {}",
                    fmt_value(x)
                ),
            )
        })?,
        v => {
            return Err(QueryError::located(
                28725,
                format!(
                    "Second argument to $slice must be a numeric value, but is of type: {}",
                    type_name(v.as_ref())
                ),
            ))
        }
    };
    let len = arr.len() as i64;
    let (start, count) = if let Some(third) = vals.get(2) {
        let n = match third {
            Some(x) if Number::of(x).is_some() => exact_i32(x).ok_or_else(|| {
                QueryError::located(
                    28728,
                    format!(
                        "Third argument to $slice can't be represented as a 32-bit integer: {}",
                        fmt_value(x)
                    ),
                )
            })?,
            v => {
                return Err(QueryError::located(
                    28727,
                    format!(
                        "Third argument to $slice must be numeric, but is of type: {}",
                        type_name(v.as_ref())
                    ),
                ))
            }
        };
        if n <= 0 {
            return Err(QueryError::located(
                28729,
                format!("Third argument to $slice must be positive: {n}"),
            ));
        }
        let pos = i64::from(second);
        let start = if pos < 0 {
            (len + pos).max(0)
        } else {
            pos.min(len)
        };
        (start, i64::from(n))
    } else if second >= 0 {
        (0, i64::from(second))
    } else {
        ((len + i64::from(second)).max(0), len)
    };
    let end = start.saturating_add(count).min(len);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "0 <= start <= end <= len, an array length"
    )]
    let (start, end) = (start as usize, end as usize);
    Ok(Some(Bson::Array(arr[start..end].to_vec())))
}

pub(super) fn range(vals: &[Val]) -> QResult<Val> {
    let arg = |i: usize, what: &str, numeric_code: i32, int_code: i32| -> QResult<i64> {
        match &vals[i] {
            Some(x) if Number::of(x).is_some() => exact_i32(x).map(i64::from).ok_or_else(|| {
                QueryError::located(
                    int_code,
                    format!(
                        "$range requires a {what} that can be represented as a 32-bit integer, \
                         found value: {}",
                        fmt_value(x)
                    ),
                )
            }),
            v => Err(QueryError::located(
                numeric_code,
                format!(
                    "$range requires a numeric {what}, found value of type: {}",
                    type_name(v.as_ref())
                ),
            )),
        }
    };
    let start = arg(0, "starting value", 34443, 34444)?;
    let end = arg(1, "ending value", 34445, 34446)?;
    let step = if vals.len() > 2 {
        arg(2, "step value", 34447, 34448)?
    } else {
        1
    };
    if step == 0 {
        return Err(QueryError::located(
            34449,
            "$range requires a non-zero step value",
        ));
    }
    let count = if (step > 0 && end > start) || (step < 0 && end < start) {
        ((end - start).abs() + step.abs() - 1) / step.abs()
    } else {
        0
    };
    const MAX_ELEMS: i64 = 1 << 23;
    if count > MAX_ELEMS {
        return Err(QueryError::exceeded_memory_limit(format!(
            "$range would use too much memory ({} bytes) and cannot spill to disk. Memory \
             limit: 104857600 bytes",
            count * 16
        )));
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "every value lies between start and end, both i32 (checked above)"
    )]
    let out = (0..count)
        .map(|i| Bson::Int32((start + i * step) as i32))
        .collect();
    Ok(Some(Bson::Array(out)))
}

pub(super) fn index_of_array(vals: &[Val]) -> QResult<Val> {
    let arr = match &vals[0] {
        v if nullish(v.as_ref()) => return null(),
        Some(Bson::Array(a)) => a,
        v => {
            return Err(QueryError::located(
                40090,
                format!(
                    "$indexOfArray requires an array as a first argument, found: {}",
                    type_name(v.as_ref())
                ),
            ))
        }
    };
    let (start, end) = index_bounds("$indexOfArray", vals, arr.len())?;
    let needle = vals[1].clone().unwrap_or(Bson::Undefined);
    let found = (start..end).find(|&i| values_equal(&arr[i], &needle));
    Ok(Some(int(found.map_or(-1, |i| i as i64))))
}

pub(super) fn array_to_object(v: &Val) -> QResult<Val> {
    let arr = match v {
        v if nullish(v.as_ref()) => return null(),
        Some(Bson::Array(a)) => a,
        v => {
            return Err(QueryError::located(
                40386,
                format!(
                    "$arrayToObject requires an array input, found: {}",
                    type_name(v.as_ref())
                ),
            ))
        }
    };
    let mut out = Document::new();
    let mut pairs_are_arrays: Option<bool> = None;
    for e in arr {
        let (k, v) = match e {
            Bson::Array(pair) => {
                if pairs_are_arrays == Some(false) {
                    return Err(QueryError::located(
                        40391,
                        "$arrayToObject requires a consistent input format. Elements must all be \
                         arrays or all be objects. Object was detected, now found: array",
                    ));
                }
                pairs_are_arrays = Some(true);
                if pair.len() != 2 {
                    return Err(QueryError::located(
                        40397,
                        format!(
                            "$arrayToObject requires an array of size 2 arrays,found array of \
                             size: {}",
                            pair.len()
                        ),
                    ));
                }
                (&pair[0], pair[1].clone())
            }
            Bson::Document(d) => {
                if pairs_are_arrays == Some(true) {
                    return Err(QueryError::located(
                        40396,
                        "$arrayToObject requires a consistent input format. Elements must all be \
                         arrays or all be objects. Array was detected, now found: object",
                    ));
                }
                pairs_are_arrays = Some(false);
                if d.len() != 2 {
                    return Err(QueryError::located(
                        40392,
                        format!(
                            "$arrayToObject requires an object keys of 'k' and 'v'. Found \
                             incorrect number of keys:{}",
                            d.len()
                        ),
                    ));
                }
                match (d.get("k"), d.get("v")) {
                    (Some(k), Some(v)) => (k, v.clone()),
                    _ => {
                        return Err(QueryError::located(
                            40393,
                            format!(
                                "$arrayToObject requires an object with keys 'k' and 'v'. \
                                 Missing either or both keys from: {}",
                                super::fmt_doc(d)
                            ),
                        ))
                    }
                }
            }
            other => {
                return Err(QueryError::located(
                    40398,
                    format!(
                        "Unrecognised input type format for $arrayToObject: {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        let Bson::String(k) = k else {
            return Err(QueryError::located(
                40395,
                format!(
                    "$arrayToObject requires an array of key-value pairs, where the key must be \
                     of type string. Found key type: {}",
                    type_name(Some(k))
                ),
            ));
        };
        if k.contains('\0') {
            return Err(QueryError::located(
                4940400,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.insert(k.clone(), v);
    }
    Ok(Some(Bson::Document(out)))
}

/// The optional start/end index arguments of `$indexOfBytes`, `$indexOfCP`, `$indexOfArray`.
pub(super) fn index_bounds(name: &str, vals: &[Val], len: usize) -> QResult<(usize, usize)> {
    let mut bounds = [0usize, len];
    for (i, what) in [(2, "starting"), (3, "ending")] {
        let Some(v) = vals.get(i) else { continue };
        let n = match v.as_ref() {
            Some(x) if exact_i64(x).is_some() => exact_i64(x).unwrap_or(0),
            _ => {
                return Err(QueryError::located(
                    40096,
                    format!(
                        "{name} requires an integral {what} index, found a value of type: {}, \
                         with value: {}",
                        type_name(v.as_ref()),
                        show(v.as_ref())
                    ),
                ))
            }
        };
        if n < 0 {
            return Err(QueryError::located(
                40097,
                format!("{name} requires a nonnegative {what} index, found: {n}"),
            ));
        }
        bounds[i - 2] = usize::try_from(n).unwrap_or(usize::MAX);
    }
    Ok((bounds[0], bounds[1].min(len)))
}
