//! Type conversion: `$convert` and its `$toX` shorthands (MongoDB's conversion table), `$type`,
//! and the string forms of values (`$toString`, the coercion `$concat`-like string operators
//! apply).

use bson::oid::ObjectId;
use bson::Bson;

use super::arith::{decimal, Number};
use super::date::{iso_string, parse_iso};
use super::{nullish, type_name, Eval, Expr, Val};
use crate::error::{QResult, QueryError};

/// The conversion targets of `$convert`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Double,
    String,
    ObjectId,
    Bool,
    Date,
    Int,
    Long,
    Decimal,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Double => "double",
            Target::String => "string",
            Target::ObjectId => "objectId",
            Target::Bool => "bool",
            Target::Date => "date",
            Target::Int => "int",
            Target::Long => "long",
            Target::Decimal => "decimal",
        }
    }

    fn parse(v: &Bson) -> QResult<Target> {
        let by_code = |c: i64| -> Option<&'static str> {
            Some(match c {
                1 => "double",
                2 => "string",
                7 => "objectId",
                8 => "bool",
                9 => "date",
                16 => "int",
                18 => "long",
                19 => "decimal",
                _ => return None,
            })
        };
        let name = match v {
            Bson::String(s) => s.as_str(),
            other => match super::arith::exact_i64(other) {
                Some(c) => by_code(c).ok_or_else(|| {
                    QueryError::bad_value(format!("Invalid 'to' argument to $convert: {c}"))
                })?,
                None if Number::of(other).is_some() => {
                    return Err(QueryError::failed_to_parse(
                        "In $convert, numeric 'to' argument is not an integer",
                    ))
                }
                None => {
                    return Err(QueryError::failed_to_parse(format!(
                        "$convert's 'to' argument must be a string or number, but is {}",
                        type_name(Some(other))
                    )))
                }
            },
        };
        Ok(match name {
            "double" => Target::Double,
            "string" => Target::String,
            "objectId" => Target::ObjectId,
            "bool" => Target::Bool,
            "date" => Target::Date,
            "int" => Target::Int,
            "long" => Target::Long,
            "decimal" => Target::Decimal,
            "null"
            | "undefined"
            | "object"
            | "array"
            | "binData"
            | "regex"
            | "dbPointer"
            | "javascript"
            | "symbol"
            | "javascriptWithScope"
            | "timestamp"
            | "minKey"
            | "maxKey" => {
                return Err(QueryError::bad_value(format!(
                    "$convert with target type {name} is not supported"
                )))
            }
            other => return Err(QueryError::bad_value(format!("Unknown type name: {other}"))),
        })
    }
}

const NO_ON_ERROR: &str = "in $convert with no onError value";

/// A double as MongoDB's `$toString` prints it: the shortest representation that round-trips,
/// in exponent form below 1e-4 and from 1e16 up (`1`, `1.5`, `1e+16`, `1e-05`).
pub(crate) fn double_to_string(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{d:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..16).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        format!("{d}")
    }
}

/// The string form of a value for `$toString`: numbers, strings, booleans, dates, ObjectIds.
/// `None` for types that have none.
pub fn to_string_value(v: &Bson) -> Option<String> {
    Some(match v {
        Bson::String(s) | Bson::Symbol(s) => s.clone(),
        Bson::Double(d) => double_to_string(*d),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Decimal128(d) => d.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::DateTime(d) => iso_string(d.timestamp_millis()),
        Bson::ObjectId(o) => o.to_hex(),
        _ => return None,
    })
}

/// The string a string operator (`$toLower`, `$substrBytes`, ...) sees: null and missing are
/// the empty string; timestamps print as MongoDB prints them.
pub(crate) fn coerce_to_string(name: &str, v: Option<&Bson>) -> QResult<String> {
    match v {
        None | Some(Bson::Null | Bson::Undefined) => Ok(String::new()),
        Some(Bson::Timestamp(t)) => Ok(format!("Timestamp({}, {})", t.time, t.increment)),
        Some(Bson::ObjectId(_) | Bson::Boolean(_)) => Err(coerce_error(name, v)),
        Some(x) => to_string_value(x).ok_or_else(|| coerce_error(name, v)),
    }
}

fn coerce_error(_name: &str, v: Option<&Bson>) -> QueryError {
    QueryError::located(
        16007,
        format!("can't convert from BSON type {} to String", type_name(v)),
    )
}

/// Parse a string as a base-10 integer (optional sign, digits only).
fn parse_int(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(
            if digits.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
                "Did not consume whole string.".into()
            } else {
                "Did not consume any digits".into()
            },
        );
    }
    s.parse::<i64>().map_err(|_| "Out of range".into())
}

fn parse_float(s: &str) -> Result<f64, String> {
    match s {
        "Infinity" | "inf" | "+Infinity" => return Ok(f64::INFINITY),
        "-Infinity" | "-inf" => return Ok(f64::NEG_INFINITY),
        "NaN" | "nan" => return Ok(f64::NAN),
        _ => {}
    }
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && s.bytes().any(|b| b.is_ascii_digit());
    if !ok {
        return Err("Did not consume any digits".into());
    }
    s.parse::<f64>()
        .map_err(|_| "Did not consume whole string.".into())
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "checked against the target type's range above: only the fraction is dropped"
)]
fn double_to_int(d: f64, target: Target) -> QResult<Bson> {
    if d.is_nan() {
        return Err(QueryError::conversion_failure(format!(
            "Attempt to convert NaN value to integer type {NO_ON_ERROR}: NaN"
        )));
    }
    if d.is_infinite() {
        return Err(QueryError::conversion_failure(format!(
            "Attempt to convert infinity value to integer type {NO_ON_ERROR}: {}",
            double_to_string(d)
        )));
    }
    let t = d.trunc();
    let overflow = || {
        QueryError::conversion_failure(format!(
            "Conversion would overflow target type {NO_ON_ERROR}: {}",
            double_to_string(d)
        ))
    };
    match target {
        Target::Int => {
            if t < f64::from(i32::MIN) || t > f64::from(i32::MAX) {
                return Err(overflow());
            }
            Ok(Bson::Int32(t as i32))
        }
        _ => {
            const TWO63: f64 = 9_223_372_036_854_775_808.0;
            if !(-TWO63..TWO63).contains(&t) {
                return Err(overflow());
            }
            Ok(Bson::Int64(t as i64))
        }
    }
}

/// Convert `v` (neither null nor missing) to `target`, as `$convert` does.
fn convert_value(v: &Bson, target: Target) -> QResult<Bson> {
    let unsupported = || {
        QueryError::conversion_failure(format!(
            "Unsupported conversion from {} to {} {NO_ON_ERROR}",
            type_name(Some(v)),
            target.name()
        ))
    };
    let num = Number::of(v);
    Ok(match target {
        Target::Bool => match v {
            Bson::Boolean(b) => Bson::Boolean(*b),
            _ if num.is_some() => Bson::Boolean(crate::matcher::is_truthy(v)),
            Bson::MinKey | Bson::MaxKey | Bson::Undefined | Bson::Null => return Err(unsupported()),
            _ => Bson::Boolean(true),
        },
        Target::String => match v {
            Bson::String(s) => Bson::String(s.clone()),
            Bson::Double(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Decimal128(_)
            | Bson::Boolean(_)
            | Bson::DateTime(_)
            | Bson::ObjectId(_) => Bson::String(to_string_value(v).unwrap_or_default()),
            _ => return Err(unsupported()),
        },
        Target::Double => match (v, num) {
            (Bson::Decimal128(_), Some(n)) => {
                let f = n.f64();
                if f.is_infinite() && !v.to_string().contains("Inf") {
                    return Err(QueryError::conversion_failure(format!(
                        "Conversion would overflow target type {NO_ON_ERROR}: {v}"
                    )));
                }
                Bson::Double(f)
            }
            (_, Some(n)) => Bson::Double(n.f64()),
            (Bson::Boolean(b), _) => Bson::Double(if *b { 1.0 } else { 0.0 }),
            (Bson::DateTime(d), _) => Bson::Double(d.timestamp_millis() as f64),
            (Bson::String(s), _) => Bson::Double(parse_float(s).map_err(|why| {
                QueryError::conversion_failure(format!(
                    "Failed to parse number '{s}' {NO_ON_ERROR}: {why}"
                ))
            })?),
            _ => return Err(unsupported()),
        },
        Target::Decimal => match (v, num) {
            (Bson::Decimal128(_), _) => v.clone(),
            (Bson::Int32(i), _) => decimal(f64::from(*i)),
            (Bson::Int64(i), _) => match i.to_string().parse() {
                Ok(d) => Bson::Decimal128(d),
                Err(_) => decimal(*i as f64),
            },
            (_, Some(n)) => decimal(n.f64()),
            (Bson::Boolean(b), _) => decimal(if *b { 1.0 } else { 0.0 }),
            (Bson::DateTime(d), _) => decimal(d.timestamp_millis() as f64),
            (Bson::String(s), _) => {
                parse_float(s).map_err(|why| {
                    QueryError::conversion_failure(format!(
                        "Failed to parse number '{s}' {NO_ON_ERROR}: {why}"
                    ))
                })?;
                match s.parse() {
                    Ok(d) => Bson::Decimal128(d),
                    Err(_) => decimal(parse_float(s).unwrap_or(f64::NAN)),
                }
            }
            _ => return Err(unsupported()),
        },
        Target::Int | Target::Long => match (v, num) {
            (Bson::Int32(i), _) if target == Target::Int => Bson::Int32(*i),
            (Bson::Int32(i), _) => Bson::Int64(i64::from(*i)),
            (Bson::Int64(i), _) if target == Target::Long => Bson::Int64(*i),
            (Bson::Int64(i), _) => match i32::try_from(*i) {
                Ok(x) => Bson::Int32(x),
                Err(_) => {
                    return Err(QueryError::conversion_failure(format!(
                        "Conversion would overflow target type {NO_ON_ERROR}: {i}"
                    )))
                }
            },
            (_, Some(n)) => double_to_int(n.f64(), target)?,
            (Bson::Boolean(b), _) => {
                let i = i32::from(*b);
                if target == Target::Int {
                    Bson::Int32(i)
                } else {
                    Bson::Int64(i64::from(i))
                }
            }
            (Bson::DateTime(d), _) if target == Target::Long => Bson::Int64(d.timestamp_millis()),
            (Bson::String(s), _) => {
                let i = parse_int(s).map_err(|why| {
                    QueryError::conversion_failure(format!(
                        "Failed to parse number '{s}' {NO_ON_ERROR}: {why}"
                    ))
                })?;
                if target == Target::Long {
                    Bson::Int64(i)
                } else {
                    Bson::Int32(i32::try_from(i).map_err(|_| {
                        QueryError::conversion_failure(format!(
                            "Failed to parse number '{s}' {NO_ON_ERROR}: Out of range"
                        ))
                    })?)
                }
            }
            _ => return Err(unsupported()),
        },
        Target::Date => match (v, num) {
            (Bson::DateTime(_), _) => v.clone(),
            (Bson::Int32(_), _) => return Err(unsupported()),
            (Bson::Int64(i), _) => Bson::DateTime(bson::DateTime::from_millis(*i)),
            (_, Some(n)) => match double_to_int(n.f64(), Target::Long)? {
                Bson::Int64(i) => Bson::DateTime(bson::DateTime::from_millis(i)),
                _ => return Err(unsupported()),
            },
            (Bson::ObjectId(o), _) => Bson::DateTime(o.timestamp()),
            (Bson::String(s), _) => match parse_iso(s) {
                Some(ms) => Bson::DateTime(bson::DateTime::from_millis(ms)),
                None => {
                    return Err(QueryError::conversion_failure(format!(
                        "Error parsing date string '{s}'; {NO_ON_ERROR}"
                    )))
                }
            },
            _ => return Err(unsupported()),
        },
        Target::ObjectId => match v {
            Bson::ObjectId(_) => v.clone(),
            Bson::String(s) => {
                if s.len() != 24 {
                    return Err(QueryError::conversion_failure(format!(
                        "Failed to parse objectId '{s}' {NO_ON_ERROR}: Invalid string length for \
                         parsing to OID, expected 24 but found {}",
                        s.len()
                    )));
                }
                match ObjectId::parse_str(s) {
                    Ok(o) => Bson::ObjectId(o),
                    Err(_) => {
                        return Err(QueryError::conversion_failure(format!(
                            "Failed to parse objectId '{s}' {NO_ON_ERROR}: Invalid character \
                             found in hex string: {s}"
                        )))
                    }
                }
            }
            _ => return Err(unsupported()),
        },
    })
}

impl Eval<'_, '_> {
    pub(crate) fn convert(
        &self,
        input: &Expr,
        to: &Expr,
        on_error: Option<&Expr>,
        on_null: Option<&Expr>,
    ) -> QResult<Val> {
        let v = self.eval(input)?;
        let to = self.eval(to)?;
        if nullish(to.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let target = Target::parse(to.as_ref().unwrap_or(&Bson::Null))?;
        let v = match v {
            v if nullish(v.as_ref()) => {
                return match on_null {
                    Some(e) => self.eval(e),
                    None => Ok(Some(Bson::Null)),
                }
            }
            Some(v) => v,
            None => return Ok(Some(Bson::Null)),
        };
        match convert_value(&v, target) {
            Ok(out) => Ok(Some(out)),
            Err(e) if e.code == 241 => match on_error {
                Some(h) => self.eval(h),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }
}
