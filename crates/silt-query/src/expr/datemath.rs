//! Date arithmetic of MongoDB 5.0+: `$dateAdd`, `$dateSubtract`, `$dateDiff` and
//! `$dateTrunc`, with units from millisecond to year (month, quarter and year in calendar
//! terms: adding a month to January 31 gives the last day of February), an optional
//! timezone (a fixed offset or an Olson name, `date::Tz`), and `startOfWeek` for weeks.

use bson::Bson;

use super::date::{civil, date_millis, days_from_civil, parse_tz, Tz};
use super::{nullish, type_name, Eval, Expr, Val};
use crate::error::{QResult, QueryError};

/// Which operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DateOp {
    Add,
    Subtract,
    Diff,
    Trunc,
    FromParts,
    ToParts,
    FromString,
}

impl DateOp {
    pub(super) fn name(self) -> &'static str {
        match self {
            DateOp::Add => "$dateAdd",
            DateOp::Subtract => "$dateSubtract",
            DateOp::Diff => "$dateDiff",
            DateOp::Trunc => "$dateTrunc",
            DateOp::FromParts => "$dateFromParts",
            DateOp::ToParts => "$dateToParts",
            DateOp::FromString => "$dateFromString",
        }
    }

    /// The position of `timezone` among [`DateOp::args`].
    fn tz_index(self) -> usize {
        match self {
            DateOp::FromParts => 7,
            DateOp::ToParts => 1,
            DateOp::FromString => 2,
            _ => 3,
        }
    }

    /// The named arguments, required ones first.
    pub(super) fn args(self) -> (&'static [&'static str], usize) {
        match self {
            DateOp::Add | DateOp::Subtract => (&["startDate", "unit", "amount", "timezone"], 3),
            DateOp::Diff => (
                &["startDate", "endDate", "unit", "timezone", "startOfWeek"],
                3,
            ),
            DateOp::Trunc => (&["date", "unit", "binSize", "timezone", "startOfWeek"], 2),
            DateOp::FromParts => (
                &[
                    "year",
                    "month",
                    "day",
                    "hour",
                    "minute",
                    "second",
                    "millisecond",
                    "timezone",
                    "isoWeekYear",
                    "isoWeek",
                    "isoDayOfWeek",
                ],
                0,
            ),
            DateOp::ToParts => (&["date", "timezone", "iso8601"], 1),
            DateOp::FromString => (
                &["dateString", "format", "timezone", "onError", "onNull"],
                1,
            ),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

fn unit_of(op: DateOp, v: Val) -> QResult<Option<Unit>> {
    Ok(Some(match v {
        None | Some(Bson::Null | Bson::Undefined) => return Ok(None),
        Some(Bson::String(s)) => match s.as_str() {
            "millisecond" => Unit::Millisecond,
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "quarter" => Unit::Quarter,
            "year" => Unit::Year,
            other => {
                return Err(QueryError::located(
                    5439014,
                    format!(
                        "{} parameter 'unit' value cannot be recognized as a time unit: {other}",
                        op.name()
                    ),
                ))
            }
        },
        Some(other) => {
            return Err(QueryError::located(
                5439013,
                format!(
                    "{} requires 'unit' to be a string, but got {}",
                    op.name(),
                    type_name(Some(&other))
                ),
            ))
        }
    }))
}

fn fixed_ms(u: Unit) -> Option<i64> {
    Some(match u {
        Unit::Millisecond => 1,
        Unit::Second => 1_000,
        Unit::Minute => 60_000,
        Unit::Hour => 3_600_000,
        Unit::Day => 86_400_000,
        Unit::Week => 604_800_000,
        _ => return None,
    })
}

fn months_of(u: Unit) -> i64 {
    match u {
        Unit::Quarter => 3,
        Unit::Year => 12,
        _ => 1,
    }
}

#[expect(clippy::cast_possible_truncation, reason = "a month has 28 to 31 days")]
fn days_in_month(y: i64, m: u32) -> u32 {
    let next = if m == 12 {
        days_from_civil(y + 1, 1, 1)
    } else {
        days_from_civil(y, m + 1, 1)
    };
    (next - days_from_civil(y, m, 1)) as u32
}

/// Local milliseconds plus `months` calendar months (the day clamped to the month's end).
#[expect(
    clippy::cast_possible_truncation,
    reason = "(total mod 12) + 1 is in 1..=12"
)]
fn add_months(local: i64, months: i64) -> i64 {
    let c = civil(local);
    let total = c.year * 12 + i64::from(c.month - 1) + months;
    let (y, m) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let d = c.day.min(days_in_month(y, m));
    let in_day = local.rem_euclid(86_400_000);
    days_from_civil(y, m, d) * 86_400_000 + in_day
}

fn week_start(v: Val) -> QResult<u32> {
    // 0 = Sunday .. 6 = Saturday, as `Civil::weekday`.
    Ok(match v {
        None | Some(Bson::Null) => 0,
        Some(Bson::String(s)) => match s.to_ascii_lowercase().as_str() {
            "sunday" | "sun" => 0,
            "monday" | "mon" => 1,
            "tuesday" | "tue" => 2,
            "wednesday" | "wed" => 3,
            "thursday" | "thu" => 4,
            "friday" | "fri" => 5,
            "saturday" | "sat" => 6,
            other => {
                return Err(QueryError::located(
                    5439016,
                    format!(
                    "startOfWeek parameter value cannot be recognized as a day of a week: {other}"
                ),
                ))
            }
        },
        Some(other) => {
            return Err(QueryError::located(
                5439015,
                format!(
                    "startOfWeek must be a string, found {}",
                    type_name(Some(&other))
                ),
            ))
        }
    })
}

/// The start of the bin (of `bin` units) holding local instant `local`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "(start mod 12) + 1 is in 1..=12"
)]
fn trunc(local: i64, unit: Unit, bin: i64, sow: u32) -> i64 {
    match unit {
        Unit::Month | Unit::Quarter | Unit::Year => {
            let c = civil(local);
            let months = c.year * 12 + i64::from(c.month - 1);
            // Bins count from 2000-01-01, as MongoDB's reference point.
            let span = months_of(unit) * bin;
            let from = 2000 * 12;
            let start = from + (months - from).div_euclid(span) * span;
            days_from_civil(start.div_euclid(12), (start.rem_euclid(12) + 1) as u32, 1) * 86_400_000
        }
        Unit::Week => {
            // Reference: the first `sow` day on or after 2000-01-01 (a Saturday).
            let ref_day = days_from_civil(2000, 1, 1) + i64::from((sow + 7 - 6) % 7);
            let day = local.div_euclid(86_400_000);
            let start = ref_day + (day - ref_day).div_euclid(7 * bin) * 7 * bin;
            start * 86_400_000
        }
        _ => {
            let span = fixed_ms(unit).unwrap_or(1) * bin;
            let origin = days_from_civil(2000, 1, 1) * 86_400_000;
            origin + (local - origin).div_euclid(span) * span
        }
    }
}

impl Eval<'_, '_> {
    pub(super) fn date_math(&self, op: DateOp, args: &[Option<Box<Expr>>]) -> QResult<Val> {
        let get = |i: usize| -> QResult<Val> {
            match args.get(i).and_then(|a| a.as_deref()) {
                Some(e) => self.eval(e),
                None => Ok(None),
            }
        };
        let date_arg = |v: Val, what: &str| -> QResult<Option<i64>> {
            if nullish(v.as_ref()) {
                return Ok(None);
            }
            match v.as_ref().and_then(date_millis) {
                Some(ms) => Ok(Some(ms)),
                None => Err(QueryError::located(
                    5166403,
                    format!("{} requires {what} to be convertible to a date", op.name()),
                )),
            }
        };
        let tz_index = op.tz_index();
        let zone = match get(tz_index)? {
            v if nullish(v.as_ref()) && args.get(tz_index).is_some_and(|a| a.is_some()) => {
                return Ok(Some(Bson::Null))
            }
            None => Tz::UTC,
            Some(Bson::String(s)) => parse_tz(&s)?,
            Some(other) => {
                return Err(QueryError::located(
                    40517,
                    format!(
                        "timezone must evaluate to a string, found {}",
                        type_name(Some(&other))
                    ),
                ))
            }
        };
        match op {
            DateOp::FromParts => {
                let given = |i: usize| args.get(i).is_some_and(|a| a.is_some());
                let iso = given(8);
                if iso && (given(0) || given(1) || given(2)) {
                    return Err(QueryError::located(
                        40489,
                        "$dateFromParts does not allow mixing natural dates with ISO dates",
                    ));
                }
                if !iso && (given(9) || given(10)) {
                    return Err(QueryError::located(
                        40516,
                        "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
                    ));
                }
                if !iso && args.first().is_none_or(|a| a.is_none()) {
                    return Err(QueryError::located(
                        40516,
                        "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
                    ));
                }
                let mut parts = [0i64; 7];
                let defaults = [1970, 1, 1, 0, 0, 0, 0];
                // ISO dates read year, week and weekday from their own fields.
                let source = |i: usize| if iso && i < 3 { i + 8 } else { i };
                for (i, slot) in parts.iter_mut().enumerate() {
                    let i = source(i);
                    let d = if i >= 8 { i - 8 } else { i };
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "an integral double; past the i64 range it saturates, as it \
                                  always has"
                    )]
                    let part = match get(i)? {
                        None if args.get(i).is_none_or(|a| a.is_none()) => defaults[d],
                        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
                        Some(v) => match silt_bson::compare::as_num(&v) {
                            Some(silt_bson::compare::Num::Int(n)) => n,
                            Some(silt_bson::compare::Num::Float(f)) if f.fract() == 0.0 => f as i64,
                            _ => {
                                return Err(QueryError::located(
                                    40515,
                                    format!("'{}' must evaluate to an integer", op.args().0[i]),
                                ))
                            }
                        },
                        None => defaults[d],
                    };
                    *slot = part;
                }
                if !(1..=9999).contains(&parts[0]) {
                    return Err(QueryError::located(
                        40523,
                        "'year' must evaluate to an integer in the range 1 to 9999",
                    ));
                }
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "(months mod 12) + 1 is in 1..=12"
                )]
                let days = if iso {
                    // Week 1 holds 4 January; weeks start on Monday (1) and end on Sunday (7).
                    let jan4 = days_from_civil(parts[0], 1, 4);
                    let monday = jan4 - (jan4 + 3).rem_euclid(7);
                    monday + (parts[1] - 1) * 7 + (parts[2] - 1)
                } else {
                    // Months and days out of range carry over, as MongoDB's do.
                    let months = parts[0] * 12 + (parts[1] - 1);
                    days_from_civil(months.div_euclid(12), (months.rem_euclid(12) + 1) as u32, 1)
                        + parts[2]
                        - 1
                };
                let ms = days * 86_400_000
                    + parts[3] * 3_600_000
                    + parts[4] * 60_000
                    + parts[5] * 1000
                    + parts[6];
                Ok(Some(Bson::DateTime(bson::DateTime::from_millis(
                    zone.local_to_utc(ms),
                ))))
            }
            DateOp::ToParts => {
                let Some(d) = date_arg(get(0)?, "date")? else {
                    return Ok(Some(Bson::Null));
                };
                let iso = matches!(get(2)?, Some(Bson::Boolean(true)));
                let c = civil(zone.utc_to_local(d));
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "milliseconds in an i64 span +-292 million years: a year fits an i32"
                )]
                let year_i32 = |y: i64| y as i32;
                if iso {
                    let (week, year) = c.iso_week();
                    return Ok(Some(Bson::Document(bson::doc! {
                        "isoWeekYear": year_i32(year),
                        "isoWeek": week as i32,
                        "isoDayOfWeek": c.iso_weekday() as i32,
                        "hour": c.hour as i32,
                        "minute": c.minute as i32,
                        "second": c.second as i32,
                        "millisecond": c.millis as i32,
                    })));
                }
                Ok(Some(Bson::Document(bson::doc! {
                    "year": year_i32(c.year),
                    "month": c.month as i32,
                    "day": c.day as i32,
                    "hour": c.hour as i32,
                    "minute": c.minute as i32,
                    "second": c.second as i32,
                    "millisecond": c.millis as i32,
                })))
            }
            DateOp::FromString => {
                let on_error = args.get(3).and_then(|a| a.as_deref());
                let on_null = args.get(4).and_then(|a| a.as_deref());
                let s = match get(0)? {
                    None | Some(Bson::Null | Bson::Undefined) => {
                        return match on_null {
                            Some(e) => self.eval(e),
                            None => Ok(Some(Bson::Null)),
                        }
                    }
                    Some(Bson::String(s)) => s,
                    Some(other) => {
                        return match on_error {
                            Some(e) => self.eval(e),
                            None => Err(QueryError::conversion_failure(format!(
                                "$dateFromString requires that 'dateString' be a string, found: {}",
                                type_name(Some(&other))
                            ))),
                        }
                    }
                };
                let format = match get(1)? {
                    None if args.get(1).is_none_or(|a| a.is_none()) => None,
                    v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
                    Some(Bson::String(f)) => {
                        super::datefmt::check(&f)?;
                        Some(f)
                    }
                    _ => {
                        return Err(QueryError::located(
                            40684,
                            "$dateFromString requires that 'format' be a string",
                        ))
                    }
                };
                if let Some(f) = format {
                    return match super::datefmt::parse(&s, &f) {
                        // An offset in the string wins over `timezone`.
                        Some((local, off)) => Ok(Some(Bson::DateTime(
                            bson::DateTime::from_millis(match off {
                                Some(o) => local - o,
                                None => zone.local_to_utc(local),
                            }),
                        ))),
                        None => match on_error {
                            Some(e) => self.eval(e),
                            None => Err(QueryError::conversion_failure(format!(
                                "Error parsing date string '{s}' with format '{f}'"
                            ))),
                        },
                    };
                }
                match super::date::parse_iso(&s) {
                    // A string without a zone is in `timezone`.
                    Some(ms) => {
                        let zoned = s.ends_with('Z')
                            || s.contains('+')
                            || s[10.min(s.len())..].contains('-');
                        Ok(Some(Bson::DateTime(bson::DateTime::from_millis(
                            if zoned { ms } else { zone.local_to_utc(ms) },
                        ))))
                    }
                    None => match on_error {
                        Some(e) => self.eval(e),
                        None => Err(QueryError::conversion_failure(format!(
                            "Error parsing date string '{s}'"
                        ))),
                    },
                }
            }
            DateOp::Add | DateOp::Subtract => {
                let Some(start) = date_arg(get(0)?, "startDate")? else {
                    return Ok(Some(Bson::Null));
                };
                let Some(unit) = unit_of(op, get(1)?)? else {
                    return Ok(Some(Bson::Null));
                };
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "an integral double; past the i64 range it saturates, as it always has"
                )]
                let amount = match get(2)? {
                    None => return Ok(Some(Bson::Null)),
                    v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
                    Some(Bson::Int32(i)) => i64::from(i),
                    Some(Bson::Int64(i)) => i,
                    Some(Bson::Double(f)) if f.fract() == 0.0 => f as i64,
                    Some(other) => {
                        return Err(QueryError::located(
                            5166405,
                            format!(
                                "{} expects integer amount of time units, found {}",
                                op.name(),
                                super::fmt_value(&other)
                            ),
                        ))
                    }
                };
                let amount = if op == DateOp::Subtract {
                    amount.saturating_neg()
                } else {
                    amount
                };
                let out = match fixed_ms(unit) {
                    // Days and weeks are calendar days in the timezone (23 or 25 hours across
                    // a daylight-saving change).
                    Some(ms) if matches!(unit, Unit::Day | Unit::Week) => zone
                        .utc_to_local(start)
                        .checked_add(amount.saturating_mul(ms))
                        .map(|l| zone.local_to_utc(l)),
                    Some(ms) => start.checked_add(amount.saturating_mul(ms)),
                    None => {
                        let local = zone.utc_to_local(start);
                        Some(zone.local_to_utc(add_months(local, amount * months_of(unit))))
                    }
                };
                let out = out.ok_or_else(|| {
                    QueryError::located(5166406, format!("{} overflowed", op.name()))
                })?;
                Ok(Some(Bson::DateTime(bson::DateTime::from_millis(out))))
            }
            DateOp::Diff => {
                let Some(a) = date_arg(get(0)?, "startDate")? else {
                    return Ok(Some(Bson::Null));
                };
                let Some(b) = date_arg(get(1)?, "endDate")? else {
                    return Ok(Some(Bson::Null));
                };
                let Some(unit) = unit_of(op, get(2)?)? else {
                    return Ok(Some(Bson::Null));
                };
                let sow = week_start(get(4)?)?;
                let (la, lb) = (zone.utc_to_local(a), zone.utc_to_local(b));
                let n = match unit {
                    Unit::Month | Unit::Quarter | Unit::Year => {
                        let (ca, cb) = (civil(la), civil(lb));
                        let months = (cb.year * 12 + i64::from(cb.month))
                            - (ca.year * 12 + i64::from(ca.month));
                        months.div_euclid(months_of(unit))
                    }
                    Unit::Week => {
                        trunc(lb, Unit::Week, 1, sow).div_euclid(604_800_000)
                            - trunc(la, Unit::Week, 1, sow).div_euclid(604_800_000)
                    }
                    Unit::Millisecond => lb - la,
                    u => {
                        let ms = fixed_ms(u).unwrap_or(1);
                        lb.div_euclid(ms) - la.div_euclid(ms)
                    }
                };
                Ok(Some(Bson::Int64(n)))
            }
            DateOp::Trunc => {
                let Some(d) = date_arg(get(0)?, "date")? else {
                    return Ok(Some(Bson::Null));
                };
                let Some(unit) = unit_of(op, get(1)?)? else {
                    return Ok(Some(Bson::Null));
                };
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "an integral double; past the i64 range it saturates, as it always has"
                )]
                let bin = match get(2)? {
                    None => 1,
                    v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
                    Some(Bson::Int32(i)) if i > 0 => i64::from(i),
                    Some(Bson::Int64(i)) if i > 0 => i,
                    Some(Bson::Double(f)) if f > 0.0 && f.fract() == 0.0 => f as i64,
                    Some(other) => {
                        return Err(QueryError::located(
                            5439017,
                            format!("$dateTrunc requires 'binSize' to be a positive 64-bit integer, but got value '{}'", super::fmt_value(&other)),
                        ))
                    }
                };
                let sow = week_start(get(4)?)?;
                let out = zone.local_to_utc(trunc(zone.utc_to_local(d), unit, bin, sow));
                Ok(Some(Bson::DateTime(bson::DateTime::from_millis(out))))
            }
        }
    }
}
