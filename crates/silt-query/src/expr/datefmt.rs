//! `$dateFromString` with a `format`: the string read field by field as the format's
//! specifiers say (`%Y %m %d %H %M %S %L %j %G %V %u %b %B %z %Z %%`, literal characters
//! matched exactly), giving a wall-clock time and the offset the string itself names, if any.

use super::date::days_from_civil;
use crate::error::QResult;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Check a `$dateFromString` format: only the specifiers it can read.
pub(crate) fn check(fmt: &str) -> QResult<()> {
    super::date::check_format(fmt, "dGHjLmMSuVYzZ%bB")
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn digits(&mut self, min: usize, max: usize) -> Option<i64> {
        let start = self.i;
        while self.i < self.s.len() && self.i - start < max && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        if self.i - start < min {
            return None;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok()
    }

    fn sign(&mut self) -> Option<i64> {
        let s = match self.s.get(self.i)? {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        self.i += 1;
        Some(s)
    }
}

/// Read `s` by `fmt`: the wall-clock milliseconds (as if UTC) and the offset from UTC in
/// milliseconds the string names (`%z`, `%Z`), or `None` when `s` does not fit the format.
pub(crate) fn parse(s: &str, fmt: &str) -> Option<(i64, Option<i64>)> {
    let mut r = Reader {
        s: s.as_bytes(),
        i: 0,
    };
    let (mut year, mut month, mut day) = (1970i64, 1i64, 1i64);
    let (mut hour, mut minute, mut second, mut millis) = (0i64, 0i64, 0i64, 0i64);
    let (mut yday, mut iso_year, mut iso_week, mut iso_day) = (None, None, None, None);
    let mut offset = None;
    let mut f = fmt.chars();
    while let Some(c) = f.next() {
        if c != '%' {
            let mut buf = [0u8; 4];
            let lit = c.encode_utf8(&mut buf).as_bytes();
            if !r.s[r.i..].starts_with(lit) {
                return None;
            }
            r.i += lit.len();
            continue;
        }
        match f.next()? {
            'Y' => year = r.digits(4, 4)?,
            'm' => month = r.digits(1, 2)?,
            'd' => day = r.digits(1, 2)?,
            'H' => hour = r.digits(1, 2)?,
            'M' => minute = r.digits(1, 2)?,
            'S' => second = r.digits(1, 2)?,
            'L' => {
                let start = r.i;
                let v = r.digits(1, 3)?;
                #[expect(clippy::cast_possible_truncation, reason = "at most 3 digits")]
                let scale = 10i64.pow(3 - (r.i - start) as u32);
                millis = v * scale;
            }
            'j' => yday = Some(r.digits(1, 3)?),
            'G' => iso_year = Some(r.digits(4, 4)?),
            'V' => iso_week = Some(r.digits(1, 2)?),
            'u' => iso_day = Some(r.digits(1, 1)?),
            'b' | 'B' => {
                let rest = std::str::from_utf8(&r.s[r.i..]).ok()?.to_ascii_lowercase();
                let (m, len) = MONTHS.iter().enumerate().find_map(|(i, name)| {
                    if rest.starts_with(name) {
                        Some((i, name.len()))
                    } else if rest.starts_with(&name[..3]) {
                        Some((i, 3))
                    } else {
                        None
                    }
                })?;
                month = m as i64 + 1;
                r.i += len;
            }
            'z' => {
                let sign = r.sign()?;
                let h = r.digits(2, 2)?;
                if r.s.get(r.i) == Some(&b':') {
                    r.i += 1;
                }
                let m = r.digits(2, 2)?;
                offset = Some(sign * (h * 3_600_000 + m * 60_000));
            }
            'Z' => {
                let sign = r.sign()?;
                offset = Some(sign * r.digits(1, 4)? * 60_000);
            }
            '%' => {
                if r.s.get(r.i) != Some(&b'%') {
                    return None;
                }
                r.i += 1;
            }
            _ => return None,
        }
    }
    if r.i != r.s.len()
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = match (iso_year, yday) {
        (Some(y), _) => {
            let (w, d) = (iso_week.unwrap_or(1), iso_day.unwrap_or(1));
            if !(1..=53).contains(&w) || !(1..=7).contains(&d) {
                return None;
            }
            let jan4 = days_from_civil(y, 1, 4);
            jan4 - (jan4 + 3).rem_euclid(7) + (w - 1) * 7 + (d - 1)
        }
        (None, Some(j)) if (1..=366).contains(&j) => days_from_civil(year, 1, 1) + j - 1,
        (None, Some(_)) => return None,
        (None, None) => days_from_civil(year, u32::try_from(month).ok()?, 1) + day - 1,
    };
    let ms = days * 86_400_000 + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis;
    Some((ms, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_formats() {
        let (ms, off) = parse("15/06/2026 13:05:09.5 +02:00", "%d/%m/%Y %H:%M:%S.%L %z").unwrap();
        assert_eq!(ms, 1_781_528_709_500);
        assert_eq!(off, Some(7_200_000));
        assert_eq!(parse("2026-166", "%Y-%j").unwrap().0, 1_781_481_600_000);
        assert_eq!(
            parse("Jun 15 2026", "%b %d %Y").unwrap().0,
            1_781_481_600_000
        );
        assert_eq!(
            parse("2026-W25-1", "%G-W%V-%u").unwrap().0,
            1_781_481_600_000
        );
        assert!(parse("2026-13-01", "%Y-%m-%d").is_none());
        assert!(parse("2026-06-15x", "%Y-%m-%d").is_none());
        assert!(check("%Y-%q").is_err());
    }
}
