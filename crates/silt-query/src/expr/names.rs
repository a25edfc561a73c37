//! mongod's naming rules for what expressions read and bind: field paths (`FieldPath`: the
//! one place its rules live, used by projections, stages and expressions alike) and variable
//! names (a bound one starts with a lowercase letter, a read one may be a system variable).

use crate::error::{QResult, QueryError};

/// Validate a variable name a user binds (`$let`, `$map`'s `as`, ...).
pub(crate) fn check_var_name(name: &str) -> QResult<()> {
    if name == "CURRENT" {
        return Ok(());
    }
    var_name_rules(name, |c| c.is_ascii_lowercase())
}

/// Validate a variable name an expression reads (`$$name`): a system variable may start
/// with a capital letter.
pub(super) fn check_read_var_name(name: &str) -> QResult<()> {
    var_name_rules(name, |c| c.is_ascii_alphabetic())
}

/// mongod 7's variable-name rules (FailedToParse): a first character `first_ok` accepts
/// (or any non-ASCII one), then letters, digits, `_` or non-ASCII characters.
fn var_name_rules(name: &str, first_ok: fn(char) -> bool) -> QResult<()> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(QueryError::failed_to_parse(
            "empty variable names are not allowed",
        ));
    };
    if first.is_ascii() && !first_ok(first) {
        return Err(QueryError::failed_to_parse(format!(
            "'{name}' starts with an invalid character for a user variable name"
        )));
    }
    if let Some(c) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii())) {
        return Err(QueryError::failed_to_parse(format!(
            "'{name}' contains an invalid character for a variable name: '{c}'"
        )));
    }
    Ok(())
}

/// Split and validate a field path (after its `$` or `$$name`, or a projection key): mongod's
/// `FieldPath` rules, in its order. The one place these rules live.
pub(crate) fn path_parts(rest: &str) -> QResult<Vec<String>> {
    if rest.is_empty() {
        return Err(QueryError::located(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if rest.ends_with('.') {
        return Err(QueryError::located(
            40353,
            "FieldPath must not end with a '.'.",
        ));
    }
    rest.split('.')
        .map(|p| {
            if p.is_empty() {
                Err(QueryError::located(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ))
            } else if p.starts_with('$') && !matches!(p, "$id" | "$ref" | "$db") {
                Err(QueryError::located(
                    16410,
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField.",
                ))
            } else if p.contains('\0') {
                Err(QueryError::located(
                    16411,
                    "FieldPath field names may not contain '\\0'.",
                ))
            } else {
                Ok(p.to_string())
            }
        })
        .collect()
}
