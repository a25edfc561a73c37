//! `$bucketAuto`'s `granularity`: bucket boundaries rounded to a preferred number series
//! (Renard R5-R80, E6-E192, 1-2-5) or to powers of two, as mongod rounds them: up to the
//! smallest series number strictly above a value, down to the largest strictly below it.

use bson::Bson;
use silt_bson::compare::{as_num, Num};

use crate::error::{QResult, QueryError};

const R5: &[f64] = &[10., 16., 25., 40., 63.];
const R10: &[f64] = &[100., 125., 160., 200., 250., 315., 400., 500., 630., 800.];
const R20: &[f64] = &[
    100., 112., 125., 140., 160., 180., 200., 224., 250., 280., 315., 355., 400., 450., 500., 560.,
    630., 710., 800., 900.,
];
const R40: &[f64] = &[
    100., 106., 112., 118., 125., 132., 140., 150., 160., 170., 180., 190., 200., 212., 224., 236.,
    250., 265., 280., 300., 315., 355., 375., 400., 425., 450., 475., 500., 530., 560., 600., 630.,
    670., 710., 750., 800., 850., 900., 950.,
];
const R80: &[f64] = &[
    103., 109., 115., 122., 128., 136., 145., 155., 165., 175., 185., 195., 206., 218., 230., 243.,
    258., 272., 290., 307., 325., 345., 365., 387., 412., 437., 462., 487., 515., 545., 575., 615.,
    650., 690., 730., 775., 825., 875., 925., 975.,
];
const S125: &[f64] = &[10., 20., 50.];
const E6: &[f64] = &[10., 15., 22., 33., 47., 68.];
const E12: &[f64] = &[10., 12., 15., 18., 22., 27., 33., 39., 47., 56., 68., 82.];
const E24: &[f64] = &[
    10., 11., 12., 13., 15., 16., 18., 20., 22., 24., 27., 30., 33., 36., 39., 43., 47., 51., 56.,
    62., 68., 75., 82., 91.,
];
const E48: &[f64] = &[
    100., 105., 110., 115., 121., 127., 133., 140., 147., 154., 162., 169., 178., 187., 196., 205.,
    215., 226., 237., 249., 261., 274., 287., 301., 316., 332., 348., 365., 383., 402., 422., 442.,
    464., 487., 511., 536., 562., 590., 619., 649., 681., 715., 750., 787., 825., 866., 909., 953.,
];
const E96: &[f64] = &[
    100., 102., 105., 107., 110., 113., 115., 118., 121., 124., 127., 130., 133., 137., 140., 143.,
    147., 150., 154., 158., 162., 165., 169., 174., 178., 182., 187., 191., 196., 200., 205., 210.,
    215., 221., 226., 232., 237., 243., 249., 255., 261., 267., 274., 280., 287., 294., 301., 309.,
    316., 324., 332., 340., 348., 357., 365., 374., 383., 392., 402., 412., 422., 432., 442., 453.,
    464., 475., 487., 499., 511., 523., 536., 549., 562., 576., 590., 604., 619., 634., 649., 665.,
    681., 698., 715., 732., 750., 768., 787., 806., 825., 845., 866., 887., 909., 931., 953., 976.,
];
const E192: &[f64] = &[
    100., 101., 102., 104., 105., 106., 107., 109., 110., 111., 113., 114., 115., 117., 118., 120.,
    121., 123., 124., 126., 127., 129., 130., 132., 133., 135., 137., 138., 140., 142., 143., 145.,
    147., 149., 150., 152., 154., 156., 158., 160., 162., 164., 165., 167., 169., 172., 174., 176.,
    178., 180., 182., 184., 187., 189., 191., 193., 196., 198., 200., 203., 205., 208., 210., 213.,
    215., 218., 221., 223., 226., 229., 232., 234., 237., 240., 243., 246., 249., 252., 255., 258.,
    261., 264., 267., 271., 274., 277., 280., 284., 287., 291., 294., 298., 301., 305., 309., 312.,
    316., 320., 324., 328., 332., 336., 340., 344., 348., 352., 357., 361., 365., 370., 374., 379.,
    383., 388., 392., 397., 402., 407., 412., 417., 422., 427., 432., 437., 442., 448., 453., 459.,
    464., 470., 475., 481., 487., 493., 499., 505., 511., 517., 523., 530., 536., 542., 549., 556.,
    562., 569., 576., 583., 590., 597., 604., 612., 619., 626., 634., 642., 649., 657., 665., 673.,
    681., 690., 698., 706., 715., 723., 732., 741., 750., 759., 768., 777., 787., 796., 806., 816.,
    825., 835., 845., 856., 866., 876., 887., 898., 909., 920., 931., 942., 953., 965., 976., 988.,
];

/// A rounding granularity.
#[derive(Clone, Debug)]
pub(crate) enum Granularity {
    Series(&'static [f64]),
    PowersOf2,
}

fn value_of(v: &Bson) -> QResult<f64> {
    let f = match as_num(v) {
        Some(Num::Int(i)) => i as f64,
        Some(Num::Float(f)) => f,
        None => {
            return Err(QueryError::located(
                40258,
                format!(
                    "$bucketAuto can specify a 'granularity' with numeric boundaries only, but \
                     found a value with type: {}",
                    silt_bson::compare::type_name(v)
                ),
            ))
        }
    };
    if f.is_nan() {
        return Err(QueryError::located(
            40259,
            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN",
        ));
    }
    if f < 0.0 {
        return Err(QueryError::located(
            40260,
            "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a \
             negative number",
        ));
    }
    Ok(f)
}

impl Granularity {
    pub(crate) fn parse(v: &Bson) -> QResult<Granularity> {
        let name = match v {
            Bson::String(s) => s.as_str(),
            _ => {
                return Err(QueryError::located(
                    40261,
                    "The $bucketAuto 'granularity' field must be a string",
                ))
            }
        };
        Ok(match name {
            "R5" => Granularity::Series(R5),
            "R10" => Granularity::Series(R10),
            "R20" => Granularity::Series(R20),
            "R40" => Granularity::Series(R40),
            "R80" => Granularity::Series(R80),
            "1-2-5" => Granularity::Series(S125),
            "E6" => Granularity::Series(E6),
            "E12" => Granularity::Series(E12),
            "E24" => Granularity::Series(E24),
            "E48" => Granularity::Series(E48),
            "E96" => Granularity::Series(E96),
            "E192" => Granularity::Series(E192),
            "POWERSOF2" => Granularity::PowersOf2,
            other => {
                return Err(QueryError::located(
                    40257,
                    format!("Unknown rounding granularity '{other}'"),
                ))
            }
        })
    }

    /// Is `v` zero?
    pub(crate) fn is_zero(v: &Bson) -> bool {
        value_of(v).is_ok_and(|x| x == 0.0)
    }

    /// Check a `groupBy` value (numeric, not NaN, not negative).
    pub(crate) fn check(v: &Bson) -> QResult<()> {
        value_of(v).map(|_| ())
    }

    /// The smallest granularity number strictly above `v` (0 stays 0).
    pub(crate) fn round_up(&self, v: &Bson) -> QResult<Bson> {
        let x = value_of(v)?;
        if x == 0.0 {
            return Ok(v.clone());
        }
        match self {
            Granularity::PowersOf2 => Ok(power_of_two(v, x, true)),
            Granularity::Series(s) => {
                let (first, last) = (s[0], s[s.len() - 1]);
                let mut m = 1.0;
                while x >= last * m {
                    m *= 10.0;
                }
                while x < first * m {
                    let previous_min = first * m;
                    m /= 10.0;
                    if x >= last * m {
                        return Ok(Bson::Double(previous_min));
                    }
                }
                let i = s.partition_point(|n| n * m <= x);
                Ok(Bson::Double(s[i] * m))
            }
        }
    }

    /// The largest granularity number strictly below `v` (0 stays 0).
    pub(crate) fn round_down(&self, v: &Bson) -> QResult<Bson> {
        let x = value_of(v)?;
        if x == 0.0 {
            return Ok(v.clone());
        }
        match self {
            Granularity::PowersOf2 => Ok(power_of_two(v, x, false)),
            Granularity::Series(s) => {
                let (first, last) = (s[0], s[s.len() - 1]);
                let mut m = 1.0;
                while x <= first * m {
                    m /= 10.0;
                }
                while x > last * m {
                    let previous_max = last * m;
                    m *= 10.0;
                    if x <= first * m {
                        return Ok(Bson::Double(previous_max));
                    }
                }
                let i = s.partition_point(|n| n * m < x);
                Ok(Bson::Double(s[i - 1] * m))
            }
        }
    }
}

/// The power of two strictly above (`up`) or below `x`, as an integer for integer input.
#[expect(
    clippy::cast_possible_truncation,
    reason = "x is positive, so floor(log2 x) is within +-1075 (+inf saturates, giving an infinite \
              power as intended); p is an integral power of two checked against each target range, \
              and 2^63 (which i64::MAX as f64 rounds to) saturates to i64::MAX as it always has"
)]
fn power_of_two(v: &Bson, x: f64, up: bool) -> Bson {
    let e = x.log2().floor() as i32;
    let exact = 2f64.powi(e) == x;
    let p = match (up, exact) {
        (true, _) => 2f64.powi(e + 1),
        (false, true) => 2f64.powi(e - 1),
        (false, false) => 2f64.powi(e),
    };
    match v {
        Bson::Int32(_) if p <= i32::MAX as f64 && p.fract() == 0.0 => Bson::Int32(p as i32),
        Bson::Int32(_) | Bson::Int64(_) if p <= i64::MAX as f64 && p.fract() == 0.0 => {
            Bson::Int64(p as i64)
        }
        _ => Bson::Double(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_as_mongod() {
        let r5 = Granularity::parse(&Bson::String("R5".into())).unwrap();
        let f = |b: Bson| match b {
            Bson::Double(d) => d,
            other => panic!("{other}"),
        };
        let up = |g: &Granularity, x: f64| f(g.round_up(&Bson::Double(x)).unwrap());
        let down = |g: &Granularity, x: f64| f(g.round_down(&Bson::Double(x)).unwrap());
        let near = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        near(up(&r5, 1.0), 1.6);
        near(up(&r5, 7.0), 10.0);
        near(up(&r5, 0.8), 1.0);
        near(up(&r5, 63.0), 100.0);
        near(down(&r5, 1.6), 1.0);
        near(down(&r5, 10.0), 6.3);
        near(down(&r5, 100.0), 63.0);
        let p2 = Granularity::parse(&Bson::String("POWERSOF2".into())).unwrap();
        assert_eq!(p2.round_up(&Bson::Int32(4)).unwrap(), Bson::Int32(8));
        assert_eq!(p2.round_up(&Bson::Int32(5)).unwrap(), Bson::Int32(8));
        assert_eq!(p2.round_down(&Bson::Int32(4)).unwrap(), Bson::Int32(2));
        assert_eq!(
            p2.round_down(&Bson::Double(5.0)).unwrap(),
            Bson::Double(4.0)
        );
        assert!(r5.round_up(&Bson::Int32(-1)).is_err());
    }
}
