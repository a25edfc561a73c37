//! Numbers in expressions: MongoDB's type promotion (int32 → int64 → double, decimal
//! dominating) and the arithmetic operators, including date arithmetic for `$add` and
//! `$subtract`.

use bson::{Bson, Decimal128};

use super::{fmt_value, nullish, type_name, Eval, Expr, Val};
use crate::error::{QResult, QueryError};

/// A numeric value with its BSON width.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Number {
    Int(i32),
    Long(i64),
    Double(f64),
    /// A decimal, computed through `f64`.
    Decimal(f64),
}

use Number::{Decimal, Double, Int, Long};

impl Number {
    pub(crate) fn of(v: &Bson) -> Option<Number> {
        match v {
            Bson::Int32(i) => Some(Int(*i)),
            Bson::Int64(i) => Some(Long(*i)),
            Bson::Double(d) => Some(Double(*d)),
            Bson::Decimal128(d) => Some(Decimal(silt_bson::compare::decimal_to_f64(d))),
            _ => None,
        }
    }

    pub(crate) fn to_bson(self) -> Bson {
        match self {
            Int(i) => Bson::Int32(i),
            Long(i) => Bson::Int64(i),
            Double(d) => Bson::Double(d),
            Decimal(d) => decimal(d),
        }
    }

    pub(crate) fn f64(self) -> f64 {
        match self {
            Int(i) => f64::from(i),
            Long(i) => i as f64,
            Double(d) | Decimal(d) => d,
        }
    }

    fn int(self) -> Option<i64> {
        match self {
            Int(i) => Some(i64::from(i)),
            Long(i) => Some(i),
            _ => None,
        }
    }

    fn is_decimal(self) -> bool {
        matches!(self, Decimal(_))
    }

    /// A floating result of the widest kind of `self` and `other`.
    fn float(self, other: Number, v: f64) -> Number {
        if self.is_decimal() || other.is_decimal() {
            Decimal(v)
        } else {
            Double(v)
        }
    }

    pub(crate) fn is_zero(self) -> bool {
        self.f64() == 0.0
    }
}

/// A Decimal128 holding `f` (through its shortest decimal representation).
pub(crate) fn decimal(f: f64) -> Bson {
    let s = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        format!("{f:e}")
    };
    match s.parse::<Decimal128>() {
        Ok(d) => Bson::Decimal128(d),
        Err(_) => Bson::Double(f),
    }
}

/// The value of `v` as an integer, if it is a number with no fractional part that fits i64.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is checked to be integral and in [-2^63, 2^63): exact"
)]
pub(crate) fn exact_i64(v: &Bson) -> Option<i64> {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    match Number::of(v)? {
        Int(i) => Some(i64::from(i)),
        Long(i) => Some(i),
        Double(f) | Decimal(f) if f.fract() == 0.0 && (-TWO63..TWO63).contains(&f) => {
            Some(f as i64)
        }
        _ => None,
    }
}

/// The value of `v` as an i32, if it is a number exactly representable as one.
pub(crate) fn exact_i32(v: &Bson) -> Option<i32> {
    exact_i64(v).and_then(|i| i32::try_from(i).ok())
}

type IntOp = fn(i64, i64) -> Option<i64>;

/// A binary operation with MongoDB's promotion: int32 results widen to int64 on overflow,
/// int64 results to double.
fn promote(a: Number, b: Number, int_op: IntOp, float_op: fn(f64, f64) -> f64) -> Number {
    if let (Int(x), Int(y)) = (a, b) {
        if let Some(r) = int_op(i64::from(x), i64::from(y)) {
            return match i32::try_from(r) {
                Ok(r) => Int(r),
                Err(_) => Long(r),
            };
        }
    }
    if let (Some(x), Some(y)) = (a.int(), b.int()) {
        if let Some(r) = int_op(x, y) {
            return Long(r);
        }
    }
    a.float(b, float_op(a.f64(), b.f64()))
}

pub(crate) fn add(a: Number, b: Number) -> Number {
    promote(a, b, i64::checked_add, |x, y| x + y)
}

pub(crate) fn sub(a: Number, b: Number) -> Number {
    promote(a, b, i64::checked_sub, |x, y| x - y)
}

pub(crate) fn mul(a: Number, b: Number) -> Number {
    promote(a, b, i64::checked_mul, |x, y| x * y)
}

/// A double rounded to the nearest integer the way `llround` does (halves away from zero),
/// saturating.
#[expect(
    clippy::cast_possible_truncation,
    reason = "saturating is the documented behaviour (as llround)"
)]
fn llround(f: f64) -> i64 {
    f.round() as i64
}

fn millis_of(n: Number) -> i64 {
    match n {
        Int(i) => i64::from(i),
        Long(i) => i,
        Double(f) | Decimal(f) => llround(f),
    }
}

fn date(ms: i64) -> Bson {
    Bson::DateTime(bson::DateTime::from_millis(ms))
}

fn num_arg(v: &Val, err: impl FnOnce(&'static str) -> QueryError) -> QResult<Number> {
    v.as_ref()
        .and_then(Number::of)
        .ok_or_else(|| err(type_name(v.as_ref())))
}

/// MongoDB's rendering of a number in messages (`-1`, `1.5`).
fn show(v: &Val) -> String {
    v.as_ref().map_or_else(|| "missing".to_owned(), fmt_value)
}

impl Eval<'_, '_> {
    pub(crate) fn add(&self, args: &[Expr]) -> QResult<Val> {
        let mut total = Int(0);
        let mut millis: i64 = 0;
        let mut overflow = false;
        let mut date_seen = false;
        for v in self.all(args)? {
            match v {
                ref v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
                Some(Bson::DateTime(d)) => {
                    if date_seen {
                        return Err(QueryError::located(
                            16612,
                            "only one date allowed in an $add expression",
                        ));
                    }
                    date_seen = true;
                    let (m, o) = millis.overflowing_add(d.timestamp_millis());
                    millis = m;
                    overflow |= o;
                }
                Some(ref x) => match Number::of(x) {
                    Some(n) => {
                        total = add(total, n);
                        let (m, o) = millis.overflowing_add(millis_of(n));
                        millis = m;
                        overflow |= o;
                    }
                    None => {
                        return Err(QueryError::type_mismatch(format!(
                            "$add only supports numeric or date types, not {}",
                            type_name(Some(x))
                        )))
                    }
                },
                None => return Ok(Some(Bson::Null)),
            }
        }
        if date_seen && overflow {
            return Err(QueryError::overflow("date overflow in $add"));
        }
        Ok(Some(if date_seen {
            date(millis)
        } else {
            total.to_bson()
        }))
    }

    pub(crate) fn subtract(&self, a: Val, b: Val) -> QResult<Val> {
        if nullish(a.as_ref()) || nullish(b.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let (Some(x), Some(y)) = (a, b) else {
            return Ok(Some(Bson::Null));
        };
        let out = match (&x, &y) {
            (Bson::DateTime(p), Bson::DateTime(q)) => {
                Bson::Int64(p.timestamp_millis().wrapping_sub(q.timestamp_millis()))
            }
            (Bson::DateTime(p), other) if Number::of(other).is_some() => {
                let n = Number::of(other).map_or(0, millis_of);
                date(
                    p.timestamp_millis()
                        .checked_sub(n)
                        .ok_or_else(|| QueryError::overflow("date overflow in $subtract"))?,
                )
            }
            _ => match (Number::of(&x), Number::of(&y)) {
                (Some(p), Some(q)) => sub(p, q).to_bson(),
                _ => {
                    return Err(QueryError::type_mismatch(format!(
                        "can't $subtract {} from {}",
                        type_name(Some(&y)),
                        type_name(Some(&x))
                    )))
                }
            },
        };
        Ok(Some(out))
    }

    pub(crate) fn multiply(&self, args: &[Expr]) -> QResult<Val> {
        let mut total = Int(1);
        for v in self.all(args)? {
            if nullish(v.as_ref()) {
                return Ok(Some(Bson::Null));
            }
            let n = num_arg(&v, |t| {
                QueryError::type_mismatch(format!("$multiply only supports numeric types, not {t}"))
            })?;
            total = mul(total, n);
        }
        Ok(Some(total.to_bson()))
    }

    pub(crate) fn divide(&self, a: Val, b: Val) -> QResult<Val> {
        if nullish(a.as_ref()) || nullish(b.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let (Some(x), Some(y)) = (
            a.as_ref().and_then(Number::of),
            b.as_ref().and_then(Number::of),
        ) else {
            return Err(QueryError::type_mismatch(format!(
                "$divide only supports numeric types, not {} and {}",
                type_name(a.as_ref()),
                type_name(b.as_ref())
            )));
        };
        if y.is_zero() {
            return Err(QueryError::bad_value("can't $divide by zero"));
        }
        Ok(Some(x.float(y, x.f64() / y.f64()).to_bson()))
    }

    pub(crate) fn modulo(&self, a: Val, b: Val) -> QResult<Val> {
        if nullish(a.as_ref()) || nullish(b.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let (Some(x), Some(y)) = (
            a.as_ref().and_then(Number::of),
            b.as_ref().and_then(Number::of),
        ) else {
            return Err(QueryError::type_mismatch(format!(
                "$mod only supports numeric types, not {} and {}",
                type_name(a.as_ref()),
                type_name(b.as_ref())
            )));
        };
        if y.is_zero() {
            return Err(QueryError::located(16610, "can't $mod by zero"));
        }
        Ok(Some(
            promote(x, y, |p, q| Some(p.wrapping_rem(q)), |p, q| p % q).to_bson(),
        ))
    }

    /// `$abs`, `$ceil`, `$floor`, `$sqrt`, `$exp`, `$ln`, `$log10`.
    pub(crate) fn unary_math(&self, name: &str, v: Val) -> QResult<Val> {
        if nullish(v.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let n = num_arg(&v, |t| {
            QueryError::located(
                28765,
                format!("{name} only supports numeric types, not {t}"),
            )
        })?;
        let f = n.f64();
        let out = match name {
            "$abs" => match n {
                Int(i) => match i.checked_abs() {
                    Some(a) => Int(a),
                    None => Long(i64::from(i).abs()),
                },
                Long(i) => Long(i.checked_abs().ok_or_else(|| {
                    QueryError::located(28680, "can't take $abs of long long min")
                })?),
                Double(d) => Double(d.abs()),
                Decimal(d) => Decimal(d.abs()),
            },
            "$ceil" | "$floor" => {
                let g = if name == "$ceil" { f.ceil() } else { f.floor() };
                match n {
                    Int(_) | Long(_) => n,
                    Double(_) => Double(g),
                    Decimal(_) => Decimal(g),
                }
            }
            "$sqrt" => {
                if f < 0.0 {
                    return Err(QueryError::located(
                        28714,
                        "$sqrt's argument must be greater than or equal to 0",
                    ));
                }
                n.float(n, f.sqrt())
            }
            "$exp" => n.float(n, f.exp()),
            "$ln" | "$log10" => {
                if f <= 0.0 && !f.is_nan() {
                    return Err(QueryError::located(
                        if name == "$ln" { 28766 } else { 28761 },
                        format!(
                            "{name}'s argument must be a positive number, but is {}",
                            show(&v)
                        ),
                    ));
                }
                n.float(n, if name == "$ln" { f.ln() } else { f.log10() })
            }
            _ => n,
        };
        Ok(Some(out.to_bson()))
    }

    pub(crate) fn log(&self, a: Val, b: Val) -> QResult<Val> {
        if nullish(a.as_ref()) || nullish(b.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let x = num_arg(&a, |t| {
            QueryError::located(28756, format!("$log's argument must be numeric, not {t}"))
        })?;
        let base = num_arg(&b, |t| {
            QueryError::located(28757, format!("$log's base must be numeric, not {t}"))
        })?;
        if x.f64() <= 0.0 {
            return Err(QueryError::located(
                28758,
                format!(
                    "$log's argument must be a positive number, but is {}",
                    show(&a)
                ),
            ));
        }
        if base.f64() <= 0.0 || base.f64() == 1.0 {
            return Err(QueryError::located(
                28759,
                format!(
                    "$log's base must be a positive number not equal to 1, but is {}",
                    show(&b)
                ),
            ));
        }
        Ok(Some(
            x.float(base, x.f64().ln() / base.f64().ln()).to_bson(),
        ))
    }

    pub(crate) fn pow(&self, a: Val, b: Val) -> QResult<Val> {
        if nullish(a.as_ref()) || nullish(b.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let base = num_arg(&a, |t| {
            QueryError::located(28762, format!("$pow's base must be numeric, not {t}"))
        })?;
        let exp = num_arg(&b, |t| {
            QueryError::located(28763, format!("$pow's exponent must be numeric, not {t}"))
        })?;
        if base.is_zero() && exp.f64() < 0.0 {
            return Err(QueryError::located(
                28764,
                "$pow cannot take a base of 0 and a negative exponent",
            ));
        }
        if let (Some(x), Some(e)) = (base.int(), exp.int()) {
            let both_int = matches!((base, exp), (Int(_), Int(_)));
            if e < 0 {
                // Only 1 and -1 keep an integral result.
                return Ok(Some(match x {
                    1 => base.to_bson(),
                    -1 => {
                        let r = if e % 2 == 0 { 1 } else { -1 };
                        if matches!(base, Int(_)) && both_int {
                            Bson::Int32(r)
                        } else {
                            Bson::Int64(i64::from(r))
                        }
                    }
                    _ => Bson::Double((x as f64).powf(e as f64)),
                }));
            }
            let r = u32::try_from(e).ok().and_then(|e| x.checked_pow(e));
            return Ok(Some(match r {
                Some(r) if both_int => match i32::try_from(r) {
                    Ok(i) => Bson::Int32(i),
                    Err(_) => Bson::Int64(r),
                },
                Some(r) => Bson::Int64(r),
                None => Bson::Double((x as f64).powf(e as f64)),
            }));
        }
        Ok(Some(base.float(exp, base.f64().powf(exp.f64())).to_bson()))
    }

    /// `$round` and `$trunc`.
    pub(crate) fn round(&self, name: &str, args: &[Expr]) -> QResult<Val> {
        let vals = self.all(args)?;
        let v = vals.first().cloned().flatten();
        let place_v = vals.get(1).cloned().unwrap_or(Some(Bson::Int32(0)));
        if nullish(v.as_ref()) || nullish(place_v.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let n = num_arg(&v, |t| {
            QueryError::located(
                51081,
                format!("{name} only supports numeric types, not {t}"),
            )
        })?;
        let place = match place_v.as_ref().and_then(exact_i64) {
            Some(p) if (-20..=100).contains(&p) => p,
            Some(p) => {
                return Err(QueryError::located(
                    51083,
                    format!(
                        "cannot apply {name} with precision value {p} value must be in [-20, 100]"
                    ),
                ))
            }
            None => {
                return Err(QueryError::located(
                    51082,
                    format!(
                        "precision argument to  {name} must be a integral value, but is {}",
                        show(&place_v)
                    ),
                ))
            }
        };
        let half_even = name == "$round";
        let out = match n {
            Int(_) | Long(_) if place >= 0 => n,
            Int(i) => match round_int(i64::from(i), place, half_even) {
                Some(r) => i32::try_from(r).map_or(Long(r), Int),
                None => Double(round_f64(f64::from(i), place, half_even)),
            },
            Long(i) => match round_int(i, place, half_even) {
                Some(r) => Long(r),
                None => Double(round_f64(i as f64, place, half_even)),
            },
            Double(f) => Double(round_f64(f, place, half_even)),
            Decimal(f) => Decimal(round_f64(f, place, half_even)),
        };
        Ok(Some(out.to_bson()))
    }
}

/// Round (half to even) or truncate an integer to `place` (< 0) decimal places.
fn round_int(x: i64, place: i64, half_even: bool) -> Option<i64> {
    let p = 10i64.checked_pow(u32::try_from(-place).ok()?);
    let Some(p) = p else {
        return Some(0);
    };
    let (q, r) = (x / p, x % p);
    if !half_even {
        return q.checked_mul(p);
    }
    let twice = r.unsigned_abs() * 2;
    let up = match twice.cmp(&p.unsigned_abs()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => q % 2 != 0,
        std::cmp::Ordering::Less => false,
    };
    let q = if up { q + x.signum() } else { q };
    q.checked_mul(p)
}

/// Round (half to even) or truncate a double to `place` decimal places, working on its
/// 15-significant-digit decimal form as MongoDB does (so `2.675` rounds to `2.68`).
pub(crate) fn round_f64(x: f64, place: i64, half_even: bool) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let sci = format!("{:.14e}", x.abs());
    let Some((mant, exp)) = sci.split_once('e') else {
        return x;
    };
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| b - b'0')
        .collect();
    // Digits to keep: those before the decimal point plus `place` after it.
    let keep = exp + 1 + place;
    if keep >= digits.len() as i64 {
        return x;
    }
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    if keep < 0 {
        return 0.0 * sign;
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "0 <= keep < digits.len() (checked above)"
    )]
    let keep = keep as usize;
    let (kept, rest) = digits.split_at(keep);
    let mut n: u128 = kept.iter().fold(0, |acc, d| acc * 10 + u128::from(*d));
    if half_even {
        let first = rest[0];
        let tail_nonzero = rest[1..].iter().any(|d| *d != 0);
        let up = first > 5 || (first == 5 && (tail_nonzero || n % 2 == 1));
        if up {
            n += 1;
        }
    }
    let scale = exp + 1 - keep as i64;
    let s = format!("{n}e{scale}");
    sign * s.parse::<f64>().unwrap_or(x.abs())
}

/// The running state of `$sum` / `$avg` over numbers (non-numbers are ignored).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sum {
    pub total: Number,
    pub count: u64,
}

impl Default for Sum {
    fn default() -> Self {
        Sum {
            total: Int(0),
            count: 0,
        }
    }
}

impl Sum {
    pub(crate) fn push(&mut self, v: &Bson) {
        if let Some(n) = Number::of(v) {
            self.total = add(self.total, n);
            self.count += 1;
        }
    }

    /// `$sum`'s result.
    pub(crate) fn sum(&self) -> Bson {
        self.total.to_bson()
    }

    /// `$avg`'s result: null when no number was seen.
    pub(crate) fn avg(&self) -> Bson {
        if self.count == 0 {
            return Bson::Null;
        }
        let avg = self.total.f64() / self.count as f64;
        match self.total {
            Decimal(_) => decimal(avg),
            _ => Bson::Double(avg),
        }
    }
}

/// Welford's running variance for `$stdDevPop` / `$stdDevSamp`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StdDev {
    count: u64,
    mean: f64,
    m2: f64,
}

impl StdDev {
    pub(crate) fn push(&mut self, v: &Bson) {
        if let Some(n) = Number::of(v) {
            let x = n.f64();
            self.count += 1;
            let delta = x - self.mean;
            self.mean += delta / self.count as f64;
            self.m2 += delta * (x - self.mean);
        }
    }

    pub(crate) fn result(&self, sample: bool) -> Bson {
        let n = self.count as f64;
        if sample {
            if self.count < 2 {
                return Bson::Null;
            }
            Bson::Double((self.m2 / (n - 1.0)).sqrt())
        } else {
            if self.count == 0 {
                return Bson::Null;
            }
            Bson::Double((self.m2 / n).sqrt())
        }
    }
}
