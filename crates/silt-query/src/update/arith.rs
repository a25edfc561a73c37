//! `$inc` and `$mul` arithmetic with MongoDB's type promotion (SafeNum): int32 results that
//! overflow become int64, int64 overflow is an error, a double makes the result a double, a
//! decimal makes it a decimal (doubles converted with 15 significant digits).

use std::cmp::Ordering;

use bson::{Bson, Decimal128};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Mul,
}

impl Arith {
    fn ints(self, a: i64, b: i64) -> Option<i64> {
        match self {
            Arith::Add => a.checked_add(b),
            Arith::Mul => a.checked_mul(b),
        }
    }

    fn floats(self, a: f64, b: f64) -> f64 {
        match self {
            Arith::Add => a + b,
            Arith::Mul => a * b,
        }
    }
}

/// `cur <op> arg` for two numbers; `None` when an integer result does not fit an int64
/// (or either side is not a number).
pub(crate) fn apply(op: Arith, cur: &Bson, arg: &Bson) -> Option<Bson> {
    use Bson::*;
    Some(match (cur, arg) {
        (Int32(a), Int32(b)) => {
            let r = op.ints(i64::from(*a), i64::from(*b))?;
            i32::try_from(r).map_or(Int64(r), Int32)
        }
        (Int32(_) | Int64(_), Int32(_) | Int64(_)) => Int64(op.ints(int(cur)?, int(arg)?)?),
        (Decimal128(_), _) | (_, Decimal128(_)) => {
            let (a, b) = (Dec::of(cur)?, Dec::of(arg)?);
            match op {
                Arith::Add => a.add(&b),
                Arith::Mul => a.mul(&b),
            }
            .to_bson()
        }
        _ => Double(op.floats(float(cur)?, float(arg)?)),
    })
}

/// Same type and same value (doubles by `==`, so NaN never equals itself), as SafeNum's
/// `isIdentical`.
pub(crate) fn identical(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => x == y,
        (Bson::Int64(x), Bson::Int64(y)) => x == y,
        (Bson::Double(x), Bson::Double(y)) => x == y,
        (Bson::Decimal128(x), Bson::Decimal128(y)) => x == y,
        _ => false,
    }
}

pub(crate) fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

fn int(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

fn float(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// A decimal floating-point value with an exact coefficient (decimal digits, most
/// significant first) for IEEE 754 decimal128 arithmetic.
#[derive(Clone, Debug, PartialEq)]
enum Dec {
    NaN,
    Inf {
        neg: bool,
    },
    Fin {
        neg: bool,
        digits: Vec<u8>,
        exp: i32,
    },
}

const MAX_DIGITS: usize = 34;
const MAX_EXP: i32 = 6111;
const MIN_EXP: i32 = -6176;

impl Dec {
    fn of(v: &Bson) -> Option<Dec> {
        match v {
            Bson::Int32(i) => Some(Dec::int(i64::from(*i))),
            Bson::Int64(i) => Some(Dec::int(*i)),
            Bson::Double(d) => Some(Dec::double(*d)),
            Bson::Decimal128(d) => Some(Dec::parse(&d.to_string())),
            _ => None,
        }
    }

    fn int(i: i64) -> Dec {
        Dec::Fin {
            neg: i < 0,
            digits: i
                .unsigned_abs()
                .to_string()
                .bytes()
                .map(|b| b - b'0')
                .collect(),
            exp: 0,
        }
    }

    /// A double rounded to 15 significant digits, as MongoDB converts doubles for
    /// mixed-type decimal arithmetic (`kRoundTo15Digits`).
    fn double(d: f64) -> Dec {
        if d.is_nan() {
            return Dec::NaN;
        }
        if d.is_infinite() {
            return Dec::Inf { neg: d < 0.0 };
        }
        let neg = d.is_sign_negative();
        if d == 0.0 {
            return Dec::Fin {
                neg,
                digits: vec![0],
                exp: 0,
            };
        }
        let sci = format!("{:.14e}", d.abs());
        let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        Dec::Fin {
            neg,
            digits: mant
                .bytes()
                .filter(u8::is_ascii_digit)
                .map(|b| b - b'0')
                .collect(),
            exp: exp.parse::<i32>().unwrap_or(0) - 14,
        }
    }

    /// Parse the string form the bson crate prints (`1.05E+3`, `-0.001`, `NaN`, `-Infinity`).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the fraction of a printed decimal128 has a few dozen digits at most"
    )]
    fn parse(s: &str) -> Dec {
        let (neg, body) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        match body {
            "NaN" => return Dec::NaN,
            "Infinity" | "Inf" => return Dec::Inf { neg },
            _ => {}
        }
        let (mant, exp) = match body.split_once(['E', 'e']) {
            Some((m, e)) => (m, e.trim_start_matches('+').parse::<i32>().unwrap_or(0)),
            None => (body, 0),
        };
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        let digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
        Dec::Fin {
            neg,
            digits: strip(digits),
            exp: exp - frac.len() as i32,
        }
    }

    fn add(&self, other: &Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Inf { neg: a }, Dec::Inf { neg: b }) if a != b => Dec::NaN,
            (Dec::Inf { neg }, _) | (_, Dec::Inf { neg }) => Dec::Inf { neg: *neg },
            (
                Dec::Fin {
                    neg: na,
                    digits: da,
                    exp: ea,
                },
                Dec::Fin {
                    neg: nb,
                    digits: db,
                    exp: eb,
                },
            ) => {
                let exp = (*ea).min(*eb);
                let a = scale(da, (ea - exp) as usize);
                let b = scale(db, (eb - exp) as usize);
                let (neg, digits) = if na == nb {
                    (*na, add_mag(&a, &b))
                } else {
                    match cmp_mag(&a, &b) {
                        Ordering::Greater => (*na, sub_mag(&a, &b)),
                        Ordering::Less => (*nb, sub_mag(&b, &a)),
                        Ordering::Equal => (false, vec![0]),
                    }
                };
                Dec::Fin { neg, digits, exp }
            }
        }
    }

    fn mul(&self, other: &Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Inf { neg: a }, Dec::Inf { neg: b }) => Dec::Inf { neg: a != b },
            (Dec::Inf { neg: a }, Dec::Fin { neg: b, digits, .. })
            | (Dec::Fin { neg: b, digits, .. }, Dec::Inf { neg: a }) => {
                if is_zero(digits) {
                    Dec::NaN
                } else {
                    Dec::Inf { neg: a != b }
                }
            }
            (
                Dec::Fin {
                    neg: na,
                    digits: da,
                    exp: ea,
                },
                Dec::Fin {
                    neg: nb,
                    digits: db,
                    exp: eb,
                },
            ) => Dec::Fin {
                neg: na != nb,
                digits: mul_mag(da, db),
                exp: ea + eb,
            },
        }
    }

    /// Round to 34 digits (ties to even), fit the exponent range and encode.
    fn to_bson(&self) -> Bson {
        let text = match self {
            Dec::NaN => "NaN".to_owned(),
            Dec::Inf { neg } => format!("{}Infinity", if *neg { "-" } else { "" }),
            Dec::Fin { neg, digits, exp } => {
                let sign = if *neg { "-" } else { "" };
                match fit(strip(digits.clone()), *exp) {
                    Some((digits, exp)) => {
                        let d: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
                        format!("{sign}{d}E{exp}")
                    }
                    None => format!("{sign}Infinity"),
                }
            }
        };
        Bson::Decimal128(
            text.parse::<Decimal128>()
                .unwrap_or_else(|_| "NaN".parse().expect("NaN is a valid Decimal128 string")),
        )
    }
}

/// Round `digits × 10^exp` into decimal128's coefficient and exponent ranges; `None` on
/// overflow.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the digits dropped are those of a product of two decimal128 coefficients: fewer than \
              100"
)]
fn fit(mut digits: Vec<u8>, mut exp: i32) -> Option<(Vec<u8>, i32)> {
    if digits.len() > MAX_DIGITS {
        let drop = digits.len() - MAX_DIGITS;
        digits = round_off(&digits, drop);
        exp += drop as i32;
        if digits.len() > MAX_DIGITS {
            digits.pop();
            exp += 1;
        }
    }
    if exp < MIN_EXP {
        let drop = (MIN_EXP - exp) as usize;
        digits = strip(round_off(&digits, drop));
        exp = MIN_EXP;
    }
    if exp > MAX_EXP {
        if is_zero(&digits) {
            exp = MAX_EXP;
        } else {
            let pad = (exp - MAX_EXP) as usize;
            if digits.len() + pad > MAX_DIGITS {
                return None;
            }
            digits.resize(digits.len() + pad, 0);
            exp = MAX_EXP;
        }
    }
    Some((digits, exp))
}

/// Drop the last `drop` digits, rounding half to even.
fn round_off(digits: &[u8], drop: usize) -> Vec<u8> {
    let n = digits.len();
    if drop == 0 {
        return digits.to_vec();
    }
    let (mut keep, first, rest) = if drop > n {
        (vec![0], 0, digits)
    } else {
        let keep = if drop == n {
            vec![0]
        } else {
            digits[..n - drop].to_vec()
        };
        (keep, digits[n - drop], &digits[n - drop + 1..])
    };
    let tail = rest.iter().any(|&d| d != 0) || (drop > n && digits.iter().any(|&d| d != 0));
    let odd = keep.last().is_some_and(|d| d % 2 == 1);
    if first > 5 || (first == 5 && (tail || odd)) {
        keep = add_mag(&keep, &[1]);
    }
    keep
}

fn strip(mut d: Vec<u8>) -> Vec<u8> {
    let zeros = d.iter().take_while(|&&x| x == 0).count();
    d.drain(..zeros.min(d.len().saturating_sub(1)));
    if d.is_empty() {
        d.push(0);
    }
    d
}

fn is_zero(d: &[u8]) -> bool {
    d.iter().all(|&x| x == 0)
}

fn scale(d: &[u8], zeros: usize) -> Vec<u8> {
    let mut v = d.to_vec();
    v.resize(d.len() + zeros, 0);
    v
}

fn cmp_mag(a: &[u8], b: &[u8]) -> Ordering {
    let (a, b) = (strip(a.to_vec()), strip(b.to_vec()));
    a.len().cmp(&b.len()).then_with(|| a.cmp(&b))
}

fn add_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let (mut i, mut j, mut carry) = (a.len(), b.len(), 0u8);
    while i > 0 || j > 0 || carry > 0 {
        let mut s = carry;
        if i > 0 {
            i -= 1;
            s += a[i];
        }
        if j > 0 {
            j -= 1;
            s += b[j];
        }
        out.push(s % 10);
        carry = s / 10;
    }
    out.reverse();
    strip(out)
}

/// `a - b` for `a >= b`.
fn sub_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let (mut i, mut j, mut borrow) = (a.len(), b.len(), 0i8);
    while i > 0 {
        i -= 1;
        let mut d = a[i] as i8 - borrow;
        if j > 0 {
            j -= 1;
            d -= b[j] as i8;
        }
        borrow = i8::from(d < 0);
        out.push((d + 10 * borrow) as u8);
    }
    out.reverse();
    strip(out)
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "after carrying, each place holds one decimal digit"
)]
fn mul_mag(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut acc = vec![0u32; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate().rev() {
        for (j, &y) in b.iter().enumerate().rev() {
            acc[i + j + 1] += u32::from(x) * u32::from(y);
        }
    }
    for k in (1..acc.len()).rev() {
        let carry = acc[k] / 10;
        acc[k] %= 10;
        acc[k - 1] += carry;
    }
    strip(acc.into_iter().map(|d| d as u8).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(s.parse().unwrap())
    }

    fn show(v: &Bson) -> String {
        match v {
            Bson::Decimal128(d) => d.to_string(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn integer_promotion() {
        let r = apply(Arith::Add, &Bson::Int32(i32::MAX), &Bson::Int32(1));
        assert_eq!(r, Some(Bson::Int64(i64::from(i32::MAX) + 1)));
        assert_eq!(
            apply(Arith::Add, &Bson::Int32(1), &Bson::Int32(2)),
            Some(Bson::Int32(3))
        );
        assert_eq!(
            apply(Arith::Add, &Bson::Int64(i64::MAX), &Bson::Int32(1)),
            None
        );
        assert_eq!(
            apply(Arith::Mul, &Bson::Int32(i32::MAX), &Bson::Int32(2)),
            Some(Bson::Int64(i64::from(i32::MAX) * 2))
        );
        assert_eq!(
            apply(Arith::Mul, &Bson::Int64(i64::MAX), &Bson::Int64(2)),
            None
        );
        assert_eq!(
            apply(Arith::Add, &Bson::Int32(1), &Bson::Double(0.5)),
            Some(Bson::Double(1.5))
        );
        assert_eq!(
            apply(Arith::Mul, &Bson::Int64(3), &Bson::Double(0.5)),
            Some(Bson::Double(1.5))
        );
    }

    #[test]
    fn decimal_arithmetic() {
        let add = |a: &Bson, b: &Bson| show(&apply(Arith::Add, a, b).unwrap());
        let mul = |a: &Bson, b: &Bson| show(&apply(Arith::Mul, a, b).unwrap());
        assert_eq!(add(&dec("1.5"), &Bson::Int32(2)), "3.5");
        assert_eq!(add(&dec("1.0"), &dec("1.00")), "2.00");
        assert_eq!(add(&dec("-1.5"), &dec("1.5")), "0.0");
        assert_eq!(add(&dec("1"), &Bson::Double(0.1)), "1.100000000000000");
        assert_eq!(mul(&dec("1.5"), &dec("2")), "3.0");
        assert_eq!(mul(&dec("-0.25"), &Bson::Int64(4)), "-1.00");
        assert_eq!(add(&dec("Infinity"), &dec("-Infinity")), "NaN");
        assert_eq!(mul(&dec("Infinity"), &Bson::Int32(0)), "NaN");
        // 35 significant digits round half to even.
        assert_eq!(
            add(&dec("9999999999999999999999999999999999"), &Bson::Int32(1)),
            "1.000000000000000000000000000000000E+34"
        );
        assert_eq!(
            add(&dec("1000000000000000000000000000000000"), &dec("0.5")),
            "1000000000000000000000000000000000"
        );
        assert_eq!(
            add(&dec("1000000000000000000000000000000001"), &dec("0.5")),
            "1000000000000000000000000000000002"
        );
    }
}
