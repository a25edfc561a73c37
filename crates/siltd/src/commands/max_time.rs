//! `maxTimeMS`, a generic argument of every command, parsed as mongod 7.0 parses it before any
//! handler runs: an integer in `0..=i32::MAX` (0: no limit). Out of that range is 2 ("<v>
//! value for maxTimeMS is out of range [0, 2147483647]"), a fraction 2, `null` or another
//! type 2 ("maxTimeMS must be a number"). `aggregate` and `getMore` parse it through their
//! own IDL first, so there a type other than a number or null is 14 naming
//! `<command>.maxTimeMS`, and in `aggregate` a negative value is 51024.

use std::time::{Duration, Instant};

use bson::{Bson, Document};
use silt_query::{QResult, QueryError};

use super::common::wrong_number_type;

/// mongod's interval for the value, as its message prints it.
const INTERVAL: &str = "[0, 2147483647]";

/// The command's `maxTimeMS` in milliseconds; `None` when absent or 0 (no limit).
#[expect(
    clippy::cast_possible_truncation,
    reason = "a double is floored and saturates into i64, as mongod reports it"
)]
pub(crate) fn parse(command: &str, cmd: &Document) -> QResult<Option<u32>> {
    let idl = command == "aggregate";
    let idl_types = idl || command == "getMore";
    let n = match cmd.get("maxTimeMS") {
        None => return Ok(None),
        Some(Bson::Null) => return Err(not_a_number()),
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) => {
            if idl && *d < 0.0 {
                negative(d.floor() as i64)?;
            }
            if d.fract() != 0.0 {
                return Err(QueryError::bad_value("maxTimeMS has non-integral value"));
            }
            *d as i64
        }
        Some(Bson::Decimal128(d)) => match d.to_string().parse::<f64>() {
            Ok(f) if f.fract() == 0.0 => f as i64,
            _ => return Err(QueryError::bad_value("maxTimeMS has non-integral value")),
        },
        Some(other) if idl_types => {
            return Err(wrong_number_type(&format!("{command}.maxTimeMS"), other));
        }
        Some(_) => return Err(not_a_number()),
    };
    if idl {
        negative(n)?;
    }
    let ms = u32::try_from(n)
        .ok()
        .filter(|ms| i32::try_from(*ms).is_ok())
        .ok_or_else(|| {
            QueryError::bad_value(format!(
                "{n} value for maxTimeMS is out of range {INTERVAL}"
            ))
        })?;
    Ok((ms > 0).then_some(ms))
}

fn not_a_number() -> QueryError {
    QueryError::bad_value("maxTimeMS must be a number")
}

/// `aggregate`'s IDL check: 51024 for a negative value.
fn negative(n: i64) -> QResult<()> {
    if n < 0 {
        return Err(QueryError::located(
            51024,
            format!("BSON field 'maxTimeMS' value must be >= 0, actual value '{n}'"),
        ));
    }
    Ok(())
}

/// When a command with this `maxTimeMS` must stop (checked when the command starts).
pub(crate) fn deadline(cmd: &Document) -> Option<Instant> {
    let name = cmd.keys().next().map_or("", String::as_str);
    parse(name, cmd)
        .ok()
        .flatten()
        .map(|ms| Instant::now() + Duration::from_millis(u64::from(ms)))
}
