//! The window functions of `$setWindowFields` that are not `$group` accumulators:
//! `$derivative` and `$integral` (rates and areas over the `sortBy` axis), `$expMovingAvg`,
//! `$covariancePop`/`$covarianceSamp` and `$linearFill`. Parsing of their arguments is here;
//! the windows themselves are `window.rs`'s.

use bson::{Bson, Document};
use silt_bson::compare::{as_num, Num};

use crate::error::{QResult, QueryError};
use crate::expr::{Expr, Vars};

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::failed_to_parse(msg)
}

fn num(v: Option<Bson>) -> Option<f64> {
    v.as_ref().and_then(as_num).map(|n| match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    })
}

/// `$derivative`/`$integral` arguments: `{input, unit}`.
pub(super) fn parse_rate(name: &str, arg: &Bson) -> QResult<(Expr, Option<f64>)> {
    let Bson::Document(d) = arg else {
        return Err(bad(format!("{name} expects an object")));
    };
    let mut input = None;
    let mut unit = None;
    for (k, v) in d {
        match k.as_str() {
            "input" => input = Some(Expr::parse(v)?),
            "unit" => {
                let Bson::String(u) = v else {
                    return Err(bad(format!("{name} 'unit' must be a string")));
                };
                unit = Some(unit_ms(u).ok_or_else(|| {
                    QueryError::not_implemented(format!(
                        "{name} unit '{u}' is not supported (millisecond to week are)"
                    ))
                })?);
            }
            other => return Err(bad(format!("{name} got unexpected argument: {other}"))),
        }
    }
    let input = input.ok_or_else(|| bad(format!("{name} requires an 'input' expression")))?;
    Ok((input, unit))
}

/// `$expMovingAvg` arguments: `{input, N}` or `{input, alpha}`; the smoothing factor.
pub(super) fn parse_ema(arg: &Bson) -> QResult<(Expr, f64)> {
    let Bson::Document(d) = arg else {
        return Err(bad("$expMovingAvg expects an object"));
    };
    let input = Expr::parse(
        d.get("input")
            .ok_or_else(|| bad("$expMovingAvg requires an 'input' expression"))?,
    )?;
    let alpha = match (d.get("N"), d.get("alpha")) {
        (Some(n), None) => match as_num(n) {
            Some(Num::Int(n)) if n > 0 => 2.0 / (n as f64 + 1.0),
            _ => return Err(bad("'N' field must be an integer, but found type: ...")),
        },
        (None, Some(a)) => match num(Some(a.clone())) {
            Some(a) if a > 0.0 && a < 1.0 => a,
            _ => return Err(bad("'alpha' must be between 0 and 1 (exclusive)")),
        },
        _ => {
            return Err(bad(
                "$expMovingAvg requires exactly one of 'N' and 'alpha' alongside 'input'",
            ))
        }
    };
    if d.keys()
        .any(|k| !matches!(k.as_str(), "input" | "N" | "alpha"))
    {
        return Err(bad("$expMovingAvg got an unexpected argument"));
    }
    Ok((input, alpha))
}

/// `$covariancePop`/`$covarianceSamp` arguments: two expressions.
pub(super) fn parse_pair(name: &str, arg: &Bson) -> QResult<(Expr, Expr)> {
    match arg {
        Bson::Array(a) if a.len() == 2 => Ok((Expr::parse(&a[0])?, Expr::parse(&a[1])?)),
        _ => Err(bad(format!("{name} requires an array of two expressions"))),
    }
}

/// Where each document sits on the `sortBy` axis: numbers as they are, dates in `unit`s.
pub(super) fn axis(keys: &[Vec<Bson>], unit: Option<f64>, name: &str) -> QResult<Vec<Option<f64>>> {
    keys.iter()
        .map(|k| match (k.first(), unit) {
            (Some(Bson::DateTime(t)), Some(u)) => Ok(Some(t.timestamp_millis() as f64 / u)),
            (Some(Bson::DateTime(_)), None) => Err(QueryError::located(
                5624901,
                format!("{name} where the sortBy is a Date requires a 'unit'"),
            )),
            (Some(v), None) => Ok(num(Some(v.clone()))),
            (Some(_), Some(_)) => Err(QueryError::located(
                5624900,
                format!("{name} with a 'unit' expects the sortBy field to be a Date"),
            )),
            (None, _) => Ok(None),
        })
        .collect()
}

/// The rate of `input` over the window `idx` (first to last point), `null` below two points.
pub(super) fn derivative(
    part: &[Document],
    idx: &[usize],
    x: &[Option<f64>],
    input: &Expr,
    vars: &Vars<'_>,
) -> QResult<Bson> {
    let (Some(&a), Some(&b)) = (idx.first(), idx.last()) else {
        return Ok(Bson::Null);
    };
    if a == b {
        return Ok(Bson::Null);
    }
    let ya = num(input.evaluate(&part[a], vars)?);
    let yb = num(input.evaluate(&part[b], vars)?);
    Ok(match (ya, yb, x[a], x[b]) {
        (Some(ya), Some(yb), Some(xa), Some(xb)) if xb != xa => Bson::Double((yb - ya) / (xb - xa)),
        _ => Bson::Null,
    })
}

/// The area under `input` over the window `idx` (trapezoids between consecutive points).
pub(super) fn integral(
    part: &[Document],
    idx: &[usize],
    x: &[Option<f64>],
    input: &Expr,
    vars: &Vars<'_>,
) -> QResult<Bson> {
    if idx.is_empty() {
        return Ok(Bson::Null);
    }
    let mut pts = Vec::with_capacity(idx.len());
    for &i in idx {
        if let (Some(xi), Some(yi)) = (x[i], num(input.evaluate(&part[i], vars)?)) {
            pts.push((xi, yi));
        }
    }
    let area: f64 = pts
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .sum();
    Ok(Bson::Double(area))
}

/// The covariance of the two inputs over the window (numeric pairs only).
pub(super) fn covariance(
    part: &[Document],
    idx: &[usize],
    (a, b): (&Expr, &Expr),
    sample: bool,
    vars: &Vars<'_>,
) -> QResult<Bson> {
    let mut pts = Vec::new();
    for &i in idx {
        if let (Some(x), Some(y)) = (
            num(a.evaluate(&part[i], vars)?),
            num(b.evaluate(&part[i], vars)?),
        ) {
            pts.push((x, y));
        }
    }
    let n = pts.len() as f64;
    if pts.is_empty() || (sample && pts.len() < 2) {
        return Ok(Bson::Null);
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let s: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    Ok(Bson::Double(s / if sample { n - 1.0 } else { n }))
}

/// `$expMovingAvg` down the partition: numbers update the average, other values leave it
/// (and get `null` before the first number).
pub(super) fn ema(
    part: &[Document],
    input: &Expr,
    alpha: f64,
    vars: &Vars<'_>,
) -> QResult<Vec<Bson>> {
    let mut avg: Option<f64> = None;
    let mut out = Vec::with_capacity(part.len());
    for d in part {
        if let Some(v) = num(input.evaluate(d, vars)?) {
            avg = Some(match avg {
                None => v,
                Some(a) => alpha * v + (1.0 - alpha) * a,
            });
            out.push(Bson::Double(avg.unwrap_or(v)));
        } else {
            out.push(Bson::Null);
        }
    }
    Ok(out)
}

/// `$linearFill`: nulls and missing values between two numbers take the straight line
/// between them along the `sortBy` axis; values before the first or after the last number
/// stay null.
pub(super) fn linear_fill(
    part: &[Document],
    x: &[Option<f64>],
    input: &Expr,
    vars: &Vars<'_>,
) -> QResult<Vec<Bson>> {
    let mut vals = Vec::with_capacity(part.len());
    for d in part {
        vals.push(
            input
                .evaluate(d, vars)?
                .filter(|v| !matches!(v, Bson::Null | Bson::Undefined)),
        );
    }
    let mut out = vec![Bson::Null; part.len()];
    let mut prev: Option<usize> = None;
    for i in 0..part.len() {
        let Some(v) = &vals[i] else { continue };
        out[i] = v.clone();
        if let Some(p) = prev {
            if let (Some(y0), Some(y1), Some(x0), Some(x1)) =
                (num(vals[p].clone()), num(Some(v.clone())), x[p], x[i])
            {
                for j in p + 1..i {
                    if let Some(xj) = x[j] {
                        let t = if x1 == x0 { 0.0 } else { (xj - x0) / (x1 - x0) };
                        out[j] = Bson::Double(y0 + t * (y1 - y0));
                    }
                }
            }
        }
        prev = Some(i);
    }
    Ok(out)
}

/// Milliseconds in a time unit of a window or a rate (`millisecond` to `week`).
pub(super) fn unit_ms(unit: &str) -> Option<f64> {
    Some(match unit {
        "millisecond" => 1.0,
        "second" => 1_000.0,
        "minute" => 60_000.0,
        "hour" => 3_600_000.0,
        "day" => 86_400_000.0,
        "week" => 604_800_000.0,
        _ => return None,
    })
}
