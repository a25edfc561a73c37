//! Dates: calendar fields of a UTC instant (proleptic Gregorian), fixed-offset timezones,
//! `$year`-style operators, `$dateToString` formats and ISO-8601 parsing for `$toDate`.

use bson::Bson;

use super::{fmt_value, nullish, type_name, Eval, Expr, Op, Val};
use crate::error::{QResult, QueryError};

/// The calendar fields of an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Civil {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millis: u32,
    /// 0 = Sunday .. 6 = Saturday
    pub weekday: u32,
    /// 1..=366
    pub yday: u32,
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "by construction the day is in 1..=31 and the month in 1..=12"
)]
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "each field is a remainder within one day, week or year (at most 86_400_000)"
)]
pub(crate) fn civil(ms: i64) -> Civil {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: (in_day / 3_600_000) as u32,
        minute: (in_day / 60_000 % 60) as u32,
        second: (in_day / 1000 % 60) as u32,
        millis: (in_day % 1000) as u32,
        weekday: (days + 4).rem_euclid(7) as u32,
        yday: (days - days_from_civil(year, 1, 1) + 1) as u32,
    }
}

impl Civil {
    /// ISO day of week: 1 = Monday .. 7 = Sunday.
    pub(crate) fn iso_weekday(&self) -> u32 {
        if self.weekday == 0 {
            7
        } else {
            self.weekday
        }
    }

    /// Week of the year with weeks starting on Sunday (`%U`): days before the first Sunday are
    /// in week 0.
    fn week(&self) -> u32 {
        (self.yday + 6 - self.weekday) / 7
    }

    /// ISO-8601 week number and week-numbering year.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "w is in 1..=53 here (checked above)"
    )]
    pub(crate) fn iso_week(&self) -> (u32, i64) {
        let wd = i64::from(self.iso_weekday());
        let w = (i64::from(self.yday) - wd + 10) / 7;
        if w < 1 {
            return (weeks_in_year(self.year - 1), self.year - 1);
        }
        if w > i64::from(weeks_in_year(self.year)) {
            return (1, self.year + 1);
        }
        (w as u32, self.year)
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn weeks_in_year(y: i64) -> u32 {
    // 53 weeks when 1 January is a Thursday, or a Wednesday in a leap year.
    let jan1 = (days_from_civil(y, 1, 1) + 4).rem_euclid(7); // 0 = Sunday
    if jan1 == 4 || (jan1 == 3 && is_leap(y)) {
        53
    } else {
        52
    }
}

/// A date operator's `timezone`: a fixed offset, or an Olson name whose offset depends on
/// the instant (jiff's bundled time zone database).
#[derive(Clone, Debug)]
pub(crate) enum Tz {
    /// Milliseconds east of UTC.
    Fixed(i64),
    Named(jiff::tz::TimeZone),
}

impl Tz {
    pub(crate) const UTC: Tz = Tz::Fixed(0);

    /// The offset from UTC (ms) at the instant `utc`.
    pub(crate) fn offset_at(&self, utc: i64) -> i64 {
        match self {
            Tz::Fixed(o) => *o,
            Tz::Named(tz) => jiff::Timestamp::from_millisecond(utc)
                .map(|t| i64::from(tz.to_offset(t).seconds()) * 1000)
                .unwrap_or(0),
        }
    }

    /// Wall-clock milliseconds (as if UTC) of the instant `utc` in this zone.
    pub(crate) fn utc_to_local(&self, utc: i64) -> i64 {
        utc + self.offset_at(utc)
    }

    /// The instant whose wall-clock time here is `local` (a time skipped by a transition is
    /// read with the offset before it, a repeated one as its first occurrence).
    pub(crate) fn local_to_utc(&self, local: i64) -> i64 {
        match self {
            Tz::Fixed(o) => local - o,
            Tz::Named(_) => {
                let before = self.offset_at(local - self.offset_at(local) - 86_400_000);
                let after = self.offset_at(local - self.offset_at(local) + 86_400_000);
                // The earlier reading first: it is right unless the wall time only exists
                // with the later offset.
                let first = local - before;
                if self.offset_at(first) == before {
                    first
                } else {
                    local - after
                }
            }
        }
    }
}

/// A timezone argument: a UTC alias, a fixed offset (`+hh`, `+hhmm`, `+hh:mm`), or an Olson
/// name (40485 otherwise).
pub(crate) fn parse_tz(tz: &str) -> QResult<Tz> {
    if let Ok(o) = parse_fixed_tz(tz) {
        return Ok(Tz::Fixed(o));
    }
    match jiff::tz::TimeZone::get(tz) {
        Ok(z) if tz.contains('/') || tz.chars().all(|c| c.is_ascii_alphabetic()) => {
            Ok(Tz::Named(z))
        }
        _ => Err(QueryError::located(
            40485,
            format!("unrecognized time zone identifier: \"{tz}\""),
        )),
    }
}

/// A timezone as a fixed offset from UTC in milliseconds (the UTC aliases and `±hh[[:]mm]`).
pub(crate) fn parse_fixed_tz(tz: &str) -> QResult<i64> {
    match tz {
        "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT" | "Etc/Universal" | "Etc/Zulu"
        | "Universal" | "Zulu" => return Ok(0),
        _ => {}
    }
    let bad = || {
        QueryError::located(
            40485,
            format!("unrecognized time zone identifier: \"{tz}\""),
        )
    };
    let (sign, rest) = match tz.as_bytes().first() {
        Some(b'+') => (1, &tz[1..]),
        Some(b'-') => (-1, &tz[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m) = match digits.len() {
        2 => (&digits[..2], "0"),
        4 => (&digits[..2], &digits[2..]),
        _ => return Err(bad()),
    };
    let h: i64 = h.parse().map_err(|_| bad())?;
    let m: i64 = m.parse().map_err(|_| bad())?;
    if rest.len() == 5 && rest.as_bytes()[2] != b':' {
        return Err(bad());
    }
    Ok(sign * (h * 3_600_000 + m * 60_000))
}

/// The instant a value denotes for date operators: dates, timestamps and ObjectIds.
pub(crate) fn date_millis(v: &Bson) -> Option<i64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis()),
        Bson::Timestamp(t) => Some(i64::from(t.time) * 1000),
        Bson::ObjectId(o) => Some(o.timestamp().timestamp_millis()),
        _ => None,
    }
}

fn offset_str(offset_ms: i64, colon: bool) -> String {
    let sign = if offset_ms < 0 { '-' } else { '+' };
    let mins = offset_ms.abs() / 60_000;
    if colon {
        format!("{sign}{:02}:{:02}", mins / 60, mins % 60)
    } else {
        format!("{sign}{:02}{:02}", mins / 60, mins % 60)
    }
}

/// Check a `$dateToString` format string.
pub(crate) fn validate_format(f: &str) -> QResult<()> {
    check_format(f, "dGHjLmMSwuUVYzZ%bBpI")
}

/// Check that every `%` specifier of `f` is one of `allowed` (18535, 18536 otherwise).
pub(crate) fn check_format(f: &str, allowed: &str) -> QResult<()> {
    let mut chars = f.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            None => {
                return Err(QueryError::located(
                    18535,
                    "Unmatched '%' at end of format string",
                ))
            }
            Some(c) if allowed.contains(c) => {}
            Some(other) => {
                return Err(QueryError::located(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ))
            }
        }
    }
    Ok(())
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Format the instant `ms` (UTC) shifted by `offset_ms`.
pub(crate) fn format_date(ms: i64, offset_ms: i64, f: &str) -> String {
    let c = civil(ms + offset_ms);
    let mut out = String::new();
    let mut chars = f.chars();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let Some(spec) = chars.next() else { break };
        let s = match spec {
            'Y' => format!("{:04}", c.year),
            'm' => format!("{:02}", c.month),
            'd' => format!("{:02}", c.day),
            'H' => format!("{:02}", c.hour),
            'I' => format!("{:02}", (c.hour + 11) % 12 + 1),
            'p' => if c.hour < 12 { "AM" } else { "PM" }.to_string(),
            'M' => format!("{:02}", c.minute),
            'S' => format!("{:02}", c.second),
            'L' => format!("{:03}", c.millis),
            'j' => format!("{:03}", c.yday),
            'w' => format!("{}", c.weekday + 1),
            'u' => format!("{}", c.iso_weekday()),
            'U' => format!("{:02}", c.week()),
            'V' => format!("{:02}", c.iso_week().0),
            'G' => format!("{:04}", c.iso_week().1),
            'z' => offset_str(offset_ms, false),
            'Z' => format!("{}", offset_ms / 60_000),
            'b' => MONTHS[(c.month - 1) as usize][..3].to_string(),
            'B' => MONTHS[(c.month - 1) as usize].to_string(),
            other => other.to_string(),
        };
        out.push_str(&s);
    }
    out
}

/// MongoDB's default rendering of a date (`2021-03-04T05:06:07.089Z`).
pub(crate) fn iso_string(ms: i64) -> String {
    format_date(ms, 0, "%Y-%m-%dT%H:%M:%S.%LZ")
}

/// Parse an ISO-8601 date or date-time (`2021-03-04`, `2021-03-04T05:06:07.089Z`,
/// `2021-03-04 05:06:07+01:00`) into milliseconds since the epoch.
pub(crate) fn parse_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) && !part.is_empty() {
            part.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (m, d) = (u32::try_from(m).ok()?, u32::try_from(d).ok()?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    let mut ms = days_from_civil(y, m, d) * 86_400_000;
    let mut i = 10;
    if i == b.len() {
        return Some(ms);
    }
    if b[i] != b'T' && b[i] != b' ' {
        return None;
    }
    i += 1;
    let h = num(i..i + 2)?;
    if b.get(i + 2) != Some(&b':') {
        return None;
    }
    let mi = num(i + 3..i + 5)?;
    i += 5;
    let mut sec = 0;
    if b.get(i) == Some(&b':') {
        sec = num(i + 1..i + 3)?;
        i += 3;
    }
    let mut frac_ms = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        if end == start {
            return None;
        }
        let digits = &s[start..end.min(start + 3)];
        #[expect(clippy::cast_possible_truncation, reason = "at most 3 digits")]
        let scale = 10i64.pow(3 - digits.len() as u32);
        frac_ms = digits.parse::<i64>().ok()? * scale;
        i = end;
    }
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    ms += h * 3_600_000 + mi * 60_000 + sec * 1000 + frac_ms;
    let rest = &s[i..];
    if rest.is_empty() || rest == "Z" {
        return Some(ms);
    }
    let off = parse_fixed_tz(rest).ok()?;
    Some(ms - off)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

impl Eval<'_, '_> {
    /// The timezone argument of a date operator (UTC when absent; `None` when null).
    fn tz_offset(&self, name: &str, tz: Option<&Expr>) -> QResult<Option<Tz>> {
        let Some(tz) = tz else {
            return Ok(Some(Tz::UTC));
        };
        match self.eval(tz)? {
            v if nullish(v.as_ref()) => Ok(None),
            Some(Bson::String(s)) => parse_tz(&s).map(Some),
            Some(other) => Err(QueryError::located(
                40517,
                format!(
                    "timezone must evaluate to a string, found {} ({name})",
                    type_name(Some(&other))
                ),
            )),
            None => Ok(None),
        }
    }

    pub(crate) fn date_part(&self, op: Op, date: &Expr, tz: Option<&Expr>) -> QResult<Val> {
        let v = self.eval(date)?;
        if nullish(v.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let Some(zone) = self.tz_offset(op.name(), tz)? else {
            return Ok(Some(Bson::Null));
        };
        let ms = match v.as_ref().and_then(date_millis) {
            Some(ms) => ms,
            None => {
                return Err(QueryError::located(
                    16006,
                    format!(
                        "can't convert from BSON type {} to Date",
                        type_name(v.as_ref())
                    ),
                ))
            }
        };
        let c = civil(zone.utc_to_local(ms));
        let n: i64 = match op {
            Op::Year => c.year,
            Op::Month => i64::from(c.month),
            Op::DayOfMonth => i64::from(c.day),
            Op::Hour => i64::from(c.hour),
            Op::Minute => i64::from(c.minute),
            Op::Second => i64::from(c.second),
            Op::Millisecond => i64::from(c.millis),
            Op::DayOfWeek => i64::from(c.weekday + 1),
            Op::DayOfYear => i64::from(c.yday),
            Op::Week => i64::from(c.week()),
            Op::IsoWeek => i64::from(c.iso_week().0),
            Op::IsoWeekYear => return Ok(Some(Bson::Int64(c.iso_week().1))),
            Op::IsoDayOfWeek => i64::from(c.iso_weekday()),
            _ => 0,
        };
        Ok(Some(Bson::Int32(i32::try_from(n).unwrap_or(i32::MAX))))
    }

    pub(crate) fn date_to_string(
        &self,
        date: &Expr,
        format: Option<&Expr>,
        tz: Option<&Expr>,
        on_null: Option<&Expr>,
    ) -> QResult<Val> {
        let fmt = match format {
            None => None,
            Some(f) => match self.eval(f)? {
                None | Some(Bson::Null | Bson::Undefined) => return Ok(Some(Bson::Null)),
                Some(Bson::String(s)) => {
                    validate_format(&s)?;
                    Some(s)
                }
                Some(other) => {
                    return Err(QueryError::located(
                        18533,
                        format!(
                            "$dateToString requires that 'format' be a string, found: {} with \
                             value {}",
                            type_name(Some(&other)),
                            fmt_value(&other)
                        ),
                    ))
                }
            },
        };
        let Some(zone) = self.tz_offset("$dateToString", tz)? else {
            return Ok(Some(Bson::Null));
        };
        let v = self.eval(date)?;
        if nullish(v.as_ref()) {
            return match on_null {
                Some(e) => self.eval(e),
                None => Ok(Some(Bson::Null)),
            };
        }
        let ms = v.as_ref().and_then(date_millis).ok_or_else(|| {
            QueryError::located(
                16006,
                format!(
                    "can't convert from BSON type {} to Date",
                    type_name(v.as_ref())
                ),
            )
        })?;
        let fmt = fmt.unwrap_or_else(|| {
            if tz.is_some() {
                "%Y-%m-%dT%H:%M:%S.%L".to_string()
            } else {
                "%Y-%m-%dT%H:%M:%S.%LZ".to_string()
            }
        });
        Ok(Some(Bson::String(format_date(
            ms,
            zone.offset_at(ms),
            &fmt,
        ))))
    }
}
