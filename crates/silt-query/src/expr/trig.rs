//! Trigonometry (`$sin` ... `$atanh`, `$atan2`, `$degreesToRadians`, `$radiansToDegrees`) and
//! bitwise operators (`$bitAnd`, `$bitOr`, `$bitXor`, `$bitNot`), MongoDB 4.2+ and 6.3+.

use bson::Bson;
use silt_bson::compare::{as_num, Num};

use super::{fmt_value, nullish, type_name, Val};
use crate::error::{QResult, QueryError};

fn number(name: &str, v: &Bson) -> QResult<f64> {
    match as_num(v) {
        Some(Num::Int(i)) => Ok(i as f64),
        Some(Num::Float(f)) => Ok(f),
        None => Err(QueryError::located(
            28765,
            format!(
                "{name} only supports numeric types, not {}",
                type_name(Some(v))
            ),
        )),
    }
}

/// One-argument trigonometry: a double (a decimal input is computed through `f64`).
pub(super) fn unary(name: &str, v: Val) -> QResult<Val> {
    let Some(v) = v.filter(|v| !nullish(Some(v))) else {
        return Ok(Some(Bson::Null));
    };
    let x = number(name, &v)?;
    let range = |lo: f64, hi: f64| -> QResult<()> {
        if !x.is_nan() && (x < lo || x > hi) {
            return Err(QueryError::located(
                50989,
                format!(
                    "cannot apply {name} to {}, value must be in [{lo},{hi}]",
                    fmt_value(&v)
                ),
            ));
        }
        Ok(())
    };
    let out = match name {
        "$sin" => x.sin(),
        "$cos" => x.cos(),
        "$tan" => x.tan(),
        "$asin" => {
            range(-1.0, 1.0)?;
            x.asin()
        }
        "$acos" => {
            range(-1.0, 1.0)?;
            x.acos()
        }
        "$atan" => x.atan(),
        "$sinh" => x.sinh(),
        "$cosh" => x.cosh(),
        "$tanh" => x.tanh(),
        "$asinh" => x.asinh(),
        "$acosh" => {
            range(1.0, f64::INFINITY)?;
            x.acosh()
        }
        "$atanh" => {
            range(-1.0, 1.0)?;
            x.atanh()
        }
        "$degreesToRadians" => x.to_radians(),
        _ => x.to_degrees(),
    };
    Ok(Some(Bson::Double(out)))
}

pub(super) fn atan2(y: Val, x: Val) -> QResult<Val> {
    let (Some(y), Some(x)) = (
        y.filter(|v| !nullish(Some(v))),
        x.filter(|v| !nullish(Some(v))),
    ) else {
        return Ok(Some(Bson::Null));
    };
    Ok(Some(Bson::Double(
        number("$atan2", &y)?.atan2(number("$atan2", &x)?),
    )))
}

/// Bitwise operators over ints and longs (a long operand makes the result a long).
#[expect(
    clippy::cast_possible_truncation,
    reason = "without a long operand every operand is a sign-extended i32, and so is any bitwise \
              combination of them: exact"
)]
pub(super) fn bits(name: &str, vals: Vec<Val>) -> QResult<Val> {
    let mut long = false;
    let mut acc: Option<i64> = None;
    for v in &vals {
        let n = match v {
            None | Some(Bson::Null | Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(Bson::Int32(i)) => i64::from(*i),
            Some(Bson::Int64(i)) => {
                long = true;
                *i
            }
            Some(other) => {
                return Err(QueryError::located(
                    28765,
                    format!(
                        "{name} only supports int and long operands, not {}",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        acc = Some(match (name, acc) {
            ("$bitNot", _) => !n,
            (_, None) => n,
            ("$bitAnd", Some(a)) => a & n,
            ("$bitOr", Some(a)) => a | n,
            (_, Some(a)) => a ^ n,
        });
    }
    let r = acc.unwrap_or(match name {
        "$bitAnd" => -1,
        _ => 0,
    });
    Ok(Some(if long {
        Bson::Int64(r)
    } else {
        Bson::Int32(r as i32)
    }))
}
