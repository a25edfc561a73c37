//! The positional operators: comparison, boolean, string, array, set, object, type and the
//! accumulators usable as expressions; also the named-argument string and object operators
//! (`$trim`, `$regexMatch`, `$replaceAll`, `$getField`, `$setField`). The array operators that
//! take positions and ranges are in `array.rs`.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use bson::{Bson, Document};
use silt_bson::compare::{cmp_collated as cmp_values, collated_equal as values_equal};

use super::arith::{exact_i32, Number, StdDev, Sum};
use super::array::{array_elem_at, array_to_object, index_bounds, index_of_array, range, slice};
use super::convert::coerce_to_string;
use super::{
    fmt_value, int, null, nullish, show, truthy, type_name, Eval, Expr, Op, Val, ValueKey,
};
use crate::error::{QResult, QueryError};
use crate::matcher::RegexMatch;

fn yes(b: bool) -> QResult<Val> {
    Ok(Some(Bson::Boolean(b)))
}

/// A value for comparison: missing compares like `undefined`, below `null`.
fn cmp_val(a: &Val, b: &Val) -> Ordering {
    let u = Bson::Undefined;
    cmp_values(a.as_ref().unwrap_or(&u), b.as_ref().unwrap_or(&u))
}

/// Characters `$trim` removes by default.
fn is_trim_space(c: char) -> bool {
    matches!(
        c,
        '\0' | ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{A0}' | '\u{1680}'
    ) || ('\u{2000}'..='\u{200A}').contains(&c)
}

/// The elements an accumulator expression works on: the elements of its only argument when
/// that is an array, otherwise its (present) arguments.
fn accumulator_inputs(vals: Vec<Val>) -> Vec<Bson> {
    if vals.len() == 1 {
        match vals.into_iter().next().flatten() {
            Some(Bson::Array(a)) => a,
            Some(v) => vec![v],
            None => Vec::new(),
        }
    } else {
        vals.into_iter().flatten().collect()
    }
}

/// Deduplicate by MongoDB equality, keeping first occurrences in order.
fn unique(items: impl IntoIterator<Item = Bson>) -> Vec<Bson> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for v in items {
        if seen.insert(ValueKey(v.clone())) {
            out.push(v);
        }
    }
    out
}

fn key_set(items: &[Bson]) -> BTreeSet<ValueKey> {
    items.iter().cloned().map(ValueKey).collect()
}

impl Eval<'_, '_> {
    pub(crate) fn op(&self, op: Op, args: &[Expr]) -> QResult<Val> {
        match op {
            Op::And => {
                for a in args {
                    if !truthy(self.eval(a)?.as_ref()) {
                        return yes(false);
                    }
                }
                yes(true)
            }
            Op::Or => {
                for a in args {
                    if truthy(self.eval(a)?.as_ref()) {
                        return yes(true);
                    }
                }
                yes(false)
            }
            Op::IfNull => {
                for (i, a) in args.iter().enumerate() {
                    let v = self.eval(a)?;
                    if i + 1 == args.len() || !nullish(v.as_ref()) {
                        return Ok(v);
                    }
                }
                null()
            }
            Op::Add => self.add(args),
            Op::Multiply => self.multiply(args),
            Op::Round | Op::Trunc => self.round(op.name(), args),
            _ => {
                let vals = self.all(args)?;
                self.apply(op, vals)
            }
        }
    }

    fn apply(&self, op: Op, vals: Vec<Val>) -> QResult<Val> {
        let name = op.name();
        match op {
            Op::Eq | Op::Ne | Op::Gt | Op::Gte | Op::Lt | Op::Lte | Op::Cmp => {
                let o = cmp_val(&vals[0], &vals[1]);
                Ok(Some(match op {
                    Op::Eq => Bson::Boolean(o == Ordering::Equal),
                    Op::Ne => Bson::Boolean(o != Ordering::Equal),
                    Op::Gt => Bson::Boolean(o == Ordering::Greater),
                    Op::Gte => Bson::Boolean(o != Ordering::Less),
                    Op::Lt => Bson::Boolean(o == Ordering::Less),
                    Op::Lte => Bson::Boolean(o != Ordering::Greater),
                    _ => Bson::Int32(o as i32),
                }))
            }
            Op::Not => yes(!truthy(vals[0].as_ref())),
            Op::Subtract | Op::Divide | Op::Mod | Op::Pow | Op::Log => {
                let mut it = vals.into_iter();
                let (a, b) = (it.next().flatten(), it.next().flatten());
                match op {
                    Op::Subtract => self.subtract(a, b),
                    Op::Divide => self.divide(a, b),
                    Op::Mod => self.modulo(a, b),
                    Op::Pow => self.pow(a, b),
                    _ => self.log(a, b),
                }
            }
            Op::Abs | Op::Ceil | Op::Floor | Op::Sqrt | Op::Exp | Op::Ln | Op::Log10 => {
                self.unary_math(name, vals.into_iter().next().flatten())
            }
            Op::Sin
            | Op::Cos
            | Op::Tan
            | Op::Asin
            | Op::Acos
            | Op::Atan
            | Op::Sinh
            | Op::Cosh
            | Op::Tanh
            | Op::Asinh
            | Op::Acosh
            | Op::Atanh
            | Op::DegreesToRadians
            | Op::RadiansToDegrees => super::trig::unary(name, vals.into_iter().next().flatten()),
            Op::Atan2 => {
                let mut it = vals.into_iter();
                super::trig::atan2(it.next().flatten(), it.next().flatten())
            }
            Op::BitAnd | Op::BitOr | Op::BitXor | Op::BitNot => super::trig::bits(name, vals),
            Op::Concat => concat(vals),
            Op::Substr | Op::SubstrBytes => substr_bytes(name, &vals),
            Op::SubstrCP => substr_cp(&vals),
            Op::ToLower | Op::ToUpper => {
                let s = coerce_to_string(name, vals[0].as_ref())?;
                Ok(Some(Bson::String(if op == Op::ToLower {
                    s.to_ascii_lowercase()
                } else {
                    s.to_ascii_uppercase()
                })))
            }
            Op::StrLenBytes | Op::StrLenCP => match &vals[0] {
                Some(Bson::String(s)) => Ok(Some(int(if op == Op::StrLenBytes {
                    s.len() as i64
                } else {
                    s.chars().count() as i64
                }))),
                v => Err(QueryError::located(
                    if op == Op::StrLenBytes { 34473 } else { 34471 },
                    format!(
                        "{name} requires a string argument, found: {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::Split => split(&vals),
            Op::IndexOfBytes | Op::IndexOfCP => index_of_str(op, &vals),
            Op::Strcasecmp => {
                let a = coerce_to_string(name, vals[0].as_ref())?.to_ascii_lowercase();
                let b = coerce_to_string(name, vals[1].as_ref())?.to_ascii_lowercase();
                Ok(Some(Bson::Int32(a.cmp(&b) as i32)))
            }
            Op::Size => match &vals[0] {
                Some(Bson::Array(a)) => Ok(Some(int(a.len() as i64))),
                v => Err(QueryError::located(
                    17124,
                    format!(
                        "The argument to $size must be an array. Type of argument was: {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::ArrayElemAt => array_elem_at(&vals),
            Op::First | Op::Last => match &vals[0] {
                v if nullish(v.as_ref()) => null(),
                Some(Bson::Array(a)) => Ok(if op == Op::First {
                    a.first().cloned()
                } else {
                    a.last().cloned()
                }),
                v => Err(QueryError::located(
                    28689,
                    format!(
                        "{name}'s argument must be an array, but is {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::ConcatArrays => {
                let mut out = Vec::new();
                for v in vals {
                    match v {
                        ref v if nullish(v.as_ref()) => return null(),
                        Some(Bson::Array(a)) => out.extend(a),
                        v => {
                            return Err(QueryError::located(
                                28664,
                                format!(
                                    "$concatArrays only supports arrays, not {}",
                                    type_name(v.as_ref())
                                ),
                            ))
                        }
                    }
                }
                Ok(Some(Bson::Array(out)))
            }
            Op::In => match &vals[1] {
                Some(Bson::Array(a)) => {
                    let needle = vals[0].clone().unwrap_or(Bson::Undefined);
                    yes(a.iter().any(|x| values_equal(x, &needle)))
                }
                v => Err(QueryError::located(
                    40081,
                    format!(
                        "$in requires an array as a second argument, found: {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::IsArray => yes(matches!(vals[0], Some(Bson::Array(_)))),
            Op::Slice => slice(&vals),
            Op::ReverseArray => match &vals[0] {
                v if nullish(v.as_ref()) => null(),
                Some(Bson::Array(a)) => Ok(Some(Bson::Array(a.iter().rev().cloned().collect()))),
                v => Err(QueryError::located(
                    34435,
                    format!(
                        "The argument to $reverseArray must be an array, but was of type: {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::Range => range(&vals),
            Op::IndexOfArray => index_of_array(&vals),
            Op::SetUnion | Op::SetIntersection => {
                let mut sets = Vec::new();
                for v in &vals {
                    match v {
                        v if nullish(v.as_ref()) => return null(),
                        Some(Bson::Array(a)) => sets.push(a.clone()),
                        v => {
                            return Err(QueryError::located(
                                if op == Op::SetUnion { 17043 } else { 17047 },
                                format!(
                                    "All operands of {name} must be arrays. One argument is of \
                                     type: {}",
                                    type_name(v.as_ref())
                                ),
                            ))
                        }
                    }
                }
                if op == Op::SetUnion {
                    return Ok(Some(Bson::Array(unique(sets.into_iter().flatten()))));
                }
                let mut iter = sets.into_iter();
                let Some(first) = iter.next() else {
                    return Ok(Some(Bson::Array(Vec::new())));
                };
                let mut out = unique(first);
                for s in iter {
                    let keys = key_set(&s);
                    out.retain(|x| keys.contains(&ValueKey(x.clone())));
                }
                Ok(Some(Bson::Array(out)))
            }
            Op::SetDifference | Op::SetIsSubset => {
                let (a, b) = (&vals[0], &vals[1]);
                if op == Op::SetDifference && (nullish(a.as_ref()) || nullish(b.as_ref())) {
                    return null();
                }
                let (first_code, second_code, what) = if op == Op::SetDifference {
                    (17048, 17049, "$setDifference")
                } else {
                    (17310, 17046, "$setIsSubset")
                };
                let Some(Bson::Array(x)) = a else {
                    return Err(QueryError::located(
                        first_code,
                        format!(
                            "both operands of {what} must be arrays. First argument is of type: \
                             {}",
                            type_name(a.as_ref())
                        ),
                    ));
                };
                let Some(Bson::Array(y)) = b else {
                    return Err(QueryError::located(
                        second_code,
                        format!(
                            "both operands of {what} must be arrays. Second argument is of type: \
                             {}",
                            type_name(b.as_ref())
                        ),
                    ));
                };
                let ys = key_set(y);
                if op == Op::SetIsSubset {
                    return yes(x.iter().all(|v| ys.contains(&ValueKey(v.clone()))));
                }
                let out = unique(x.iter().cloned())
                    .into_iter()
                    .filter(|v| !ys.contains(&ValueKey(v.clone())))
                    .collect();
                Ok(Some(Bson::Array(out)))
            }
            Op::SetEquals => {
                let mut sets = Vec::new();
                for v in &vals {
                    match v {
                        Some(Bson::Array(a)) => sets.push(key_set(a)),
                        v => {
                            return Err(QueryError::located(
                                17044,
                                format!(
                                    "All operands of $setEquals must be arrays. One argument is \
                                     of type: {}",
                                    type_name(v.as_ref())
                                ),
                            ))
                        }
                    }
                }
                yes(sets.windows(2).all(|w| w[0] == w[1]))
            }
            Op::AllElementsTrue | Op::AnyElementTrue => match &vals[0] {
                Some(Bson::Array(a)) => yes(if op == Op::AllElementsTrue {
                    a.iter().all(|x| truthy(Some(x)))
                } else {
                    a.iter().any(|x| truthy(Some(x)))
                }),
                v => Err(QueryError::located(
                    if op == Op::AllElementsTrue {
                        17040
                    } else {
                        17041
                    },
                    format!(
                        "{name}'s argument must be an array, but is {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::Type => Ok(Some(Bson::String(type_name(vals[0].as_ref()).into()))),
            Op::IsNumber => yes(vals[0].as_ref().and_then(Number::of).is_some()),
            Op::TextScore => crate::text::meta_score(vals[0].clone()),
            Op::MergeObjects => {
                let mut out = Document::new();
                for v in vals {
                    match v {
                        ref v if nullish(v.as_ref()) => {}
                        Some(Bson::Document(d)) => {
                            for (k, x) in d {
                                out.insert(k, x);
                            }
                        }
                        v => {
                            return Err(QueryError::located(
                                40400,
                                format!(
                                    "$mergeObjects requires object inputs, but input {} is of \
                                     type {}",
                                    show(v.as_ref()),
                                    type_name(v.as_ref())
                                ),
                            ))
                        }
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Op::ObjectToArray => match &vals[0] {
                v if nullish(v.as_ref()) => null(),
                Some(Bson::Document(d)) => Ok(Some(Bson::Array(
                    d.iter()
                        .map(|(k, v)| {
                            let mut pair = Document::new();
                            pair.insert("k", k.clone());
                            pair.insert("v", v.clone());
                            Bson::Document(pair)
                        })
                        .collect(),
                ))),
                v => Err(QueryError::located(
                    40390,
                    format!(
                        "$objectToArray requires a document input, found: {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            Op::ArrayToObject => array_to_object(&vals[0]),
            Op::Sum | Op::Avg => {
                let mut s = Sum::default();
                for v in accumulator_inputs(vals) {
                    s.push(&v);
                }
                Ok(Some(if op == Op::Sum { s.sum() } else { s.avg() }))
            }
            Op::Min | Op::Max => {
                let best = accumulator_inputs(vals)
                    .into_iter()
                    .filter(|v| !nullish(Some(v)))
                    .reduce(|a, b| {
                        let o = cmp_values(&b, &a);
                        let better = if op == Op::Min {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        };
                        if better {
                            b
                        } else {
                            a
                        }
                    });
                Ok(Some(best.unwrap_or(Bson::Null)))
            }
            Op::StdDevPop | Op::StdDevSamp => {
                let mut s = StdDev::default();
                for v in accumulator_inputs(vals) {
                    s.push(&v);
                }
                Ok(Some(s.result(op == Op::StdDevSamp)))
            }
            Op::Rand => {
                let r = super::random_u64() >> 11;
                Ok(Some(Bson::Double(r as f64 / (1u64 << 53) as f64)))
            }
            Op::BsonSize => match &vals[0] {
                v if nullish(v.as_ref()) => null(),
                Some(Bson::Document(d)) => {
                    let mut buf = Vec::new();
                    d.to_writer(&mut buf)
                        .map_err(|e| QueryError::internal(e.to_string()))?;
                    Ok(Some(int(buf.len() as i64)))
                }
                v => Err(QueryError::located(
                    31393,
                    format!(
                        "$bsonSize requires a document input, found: {}",
                        type_name(v.as_ref())
                    ),
                )),
            },
            // Handled before argument evaluation.
            Op::And
            | Op::Or
            | Op::IfNull
            | Op::Add
            | Op::Multiply
            | Op::Round
            | Op::Trunc
            | Op::Trim
            | Op::Ltrim
            | Op::Rtrim
            | Op::Year
            | Op::Month
            | Op::DayOfMonth
            | Op::Hour
            | Op::Minute
            | Op::Second
            | Op::Millisecond
            | Op::DayOfWeek
            | Op::DayOfYear
            | Op::Week
            | Op::IsoWeek
            | Op::IsoWeekYear
            | Op::IsoDayOfWeek => Err(QueryError::internal(format!(
                "{name} evaluated as a positional operator"
            ))),
        }
    }

    pub(crate) fn trim(&self, op: Op, input: &Expr, chars: Option<&Expr>) -> QResult<Val> {
        let name = op.name();
        let s = match self.eval(input)? {
            v if nullish(v.as_ref()) => return null(),
            Some(Bson::String(s)) => s,
            v => {
                return Err(QueryError::located(
                    50699,
                    format!(
                        "{name} requires its input to be a string, got {} (of type {}) instead.",
                        show(v.as_ref()),
                        type_name(v.as_ref())
                    ),
                ))
            }
        };
        let set: Option<Vec<char>> = match chars {
            None => None,
            Some(c) => match self.eval(c)? {
                v if nullish(v.as_ref()) => return null(),
                Some(Bson::String(cs)) => Some(cs.chars().collect()),
                v => {
                    return Err(QueryError::located(
                        50700,
                        format!(
                            "{name} requires 'chars' to be a string, got {} (of type {}) instead.",
                            show(v.as_ref()),
                            type_name(v.as_ref())
                        ),
                    ))
                }
            },
        };
        let strip = |c: char| match &set {
            Some(cs) => cs.contains(&c),
            None => is_trim_space(c),
        };
        let out = match op {
            Op::Ltrim => s.trim_start_matches(strip),
            Op::Rtrim => s.trim_end_matches(strip),
            _ => s.trim_matches(strip),
        };
        Ok(Some(Bson::String(out.to_string())))
    }

    pub(crate) fn regex_match(
        &self,
        mode: u8,
        input: &Expr,
        regex: &Expr,
        options: Option<&Expr>,
        compiled: Option<&RegexMatch>,
    ) -> QResult<Val> {
        let none = || -> QResult<Val> {
            Ok(Some(match mode {
                0 => Bson::Boolean(false),
                1 => Bson::Null,
                _ => Bson::Array(Vec::new()),
            }))
        };
        let s = match self.eval(input)? {
            v if nullish(v.as_ref()) => return none(),
            Some(Bson::String(s)) => s,
            _ => {
                return Err(QueryError::located(
                    51104,
                    "$regexMatch needs 'input' to be of type string",
                ))
            }
        };
        let owned;
        let re = match compiled {
            Some(re) => re,
            None => {
                let r = self.eval(regex)?;
                let o = options.map(|o| self.eval(o)).transpose()?;
                let Some((pattern, flags)) = regex_spec(r, o)? else {
                    return none();
                };
                owned = RegexMatch::new(&pattern, &flags)?;
                &owned
            }
        };
        if mode == 0 {
            return yes(re.matches(&Bson::String(s)));
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "a match position in one string (at most 16 MiB): far below 2^31"
        )]
        let found: Vec<Bson> = re
            .find_in(&s, mode == 2)
            .into_iter()
            .map(|(m, idx, caps)| {
                Bson::Document(bson::doc! {
                    "match": m,
                    "idx": idx as i32,
                    "captures": caps.into_iter().map(|c| c.map_or(Bson::Null, Bson::String)).collect::<Vec<_>>(),
                })
            })
            .collect();
        Ok(Some(match mode {
            1 => found.into_iter().next().unwrap_or(Bson::Null),
            _ => Bson::Array(found),
        }))
    }

    pub(crate) fn replace(
        &self,
        all: bool,
        input: &Expr,
        find: &Expr,
        replacement: &Expr,
    ) -> QResult<Val> {
        let name = if all { "$replaceAll" } else { "$replaceOne" };
        let mut parts = Vec::with_capacity(3);
        for (e, what, code) in [
            (input, "input", 51746),
            (find, "find", 51745),
            (replacement, "replacement", 51744),
        ] {
            match self.eval(e)? {
                v if nullish(v.as_ref()) => parts.push(None),
                Some(Bson::String(s)) => parts.push(Some(s)),
                v => {
                    return Err(QueryError::located(
                        code,
                        format!(
                            "{name} requires that '{what}' be a string, found: {}",
                            show(v.as_ref())
                        ),
                    ))
                }
            }
        }
        let (Some(s), Some(f), Some(r)) = (parts[0].take(), parts[1].take(), parts[2].take())
        else {
            return null();
        };
        Ok(Some(Bson::String(if all {
            s.replace(&f, &r)
        } else {
            s.replacen(&f, &r, 1)
        })))
    }

    /// `$$CURRENT` as a value.
    fn current(&self) -> Bson {
        match self.vars.get("CURRENT") {
            Some(v) => v.clone(),
            None => Bson::Document(self.root.clone()),
        }
    }

    pub(crate) fn get_field(&self, field: &str, input: Option<&Expr>) -> QResult<Val> {
        let v = match input {
            Some(e) => self.eval(e)?,
            None => Some(self.current()),
        };
        match v {
            None => Ok(None),
            Some(Bson::Null | Bson::Undefined) => null(),
            Some(Bson::Document(d)) => Ok(d.get(field).cloned()),
            Some(other) => Err(QueryError::located(
                3041705,
                format!(
                    "$getField requires 'input' to evaluate to type Object, but got {}",
                    type_name(Some(&other))
                ),
            )),
        }
    }

    pub(crate) fn set_field(
        &self,
        field: &str,
        input: &Expr,
        value: Option<&Expr>,
    ) -> QResult<Val> {
        let mut d = match self.eval(input)? {
            v if nullish(v.as_ref()) => return null(),
            Some(Bson::Document(d)) => d,
            v => {
                return Err(QueryError::located(
                    4161105,
                    format!(
                        "$setField requires 'input' to evaluate to type Object, but got {}",
                        type_name(v.as_ref())
                    ),
                ))
            }
        };
        match value.map(|e| self.eval(e)).transpose()?.flatten() {
            Some(v) => {
                d.insert(field, v);
            }
            None => {
                d.remove(field);
            }
        }
        Ok(Some(Bson::Document(d)))
    }
}

/// The pattern and flags of `$regexMatch`'s `regex` and `options` values; `None` when the
/// regex is null or missing.
pub(crate) fn regex_spec(regex: Val, options: Option<Val>) -> QResult<Option<(String, String)>> {
    let (pattern, mut flags) = match regex {
        v if nullish(v.as_ref()) => return Ok(None),
        Some(Bson::String(p)) => (p, String::new()),
        Some(Bson::RegularExpression(r)) => (r.pattern, r.options),
        _ => {
            return Err(QueryError::located(
                51105,
                "$regexMatch needs 'regex' to be of type string or regex",
            ))
        }
    };
    match options.flatten() {
        None | Some(Bson::Null | Bson::Undefined) => {}
        Some(Bson::String(opts)) => {
            if !flags.is_empty() {
                return Err(QueryError::located(
                    51107,
                    "$regexMatch found regex option(s) specified in both 'regex' and 'option' \
                     fields",
                ));
            }
            flags = opts;
        }
        _ => {
            return Err(QueryError::located(
                51106,
                "$regexMatch needs 'options' to be of type string",
            ))
        }
    }
    Ok(Some((pattern, flags)))
}

fn concat(vals: Vec<Val>) -> QResult<Val> {
    let mut out = String::new();
    for v in vals {
        match v {
            ref v if nullish(v.as_ref()) => return null(),
            Some(Bson::String(s)) => out.push_str(&s),
            v => {
                return Err(QueryError::located(
                    16702,
                    format!(
                        "$concat only supports strings, not {}",
                        type_name(v.as_ref())
                    ),
                ))
            }
        }
    }
    Ok(Some(Bson::String(out)))
}

/// A numeric argument truncated to an integer (as `coerceToLong` does).
#[expect(
    clippy::cast_possible_truncation,
    reason = "truncated toward zero, saturating past the i64 range, as this coercion always has"
)]
fn trunc_arg(v: Option<&Bson>) -> Option<i64> {
    let n = Number::of(v?)?;
    match n {
        Number::Int(i) => Some(i64::from(i)),
        Number::Long(i) => Some(i),
        Number::Double(f) | Number::Decimal(f) => Some(f.trunc() as i64),
    }
}

fn substr_bytes(name: &str, vals: &[Val]) -> QResult<Val> {
    let s = coerce_to_string(name, vals[0].as_ref())?;
    let start = trunc_arg(vals[1].as_ref()).ok_or_else(|| {
        QueryError::located(
            16034,
            format!(
                "{name}: starting index must be a numeric type (is BSON type {})",
                type_name(vals[1].as_ref())
            ),
        )
    })?;
    let len = trunc_arg(vals[2].as_ref()).ok_or_else(|| {
        QueryError::located(
            16035,
            format!(
                "{name}: length must be a numeric type (is BSON type {})",
                type_name(vals[2].as_ref())
            ),
        )
    })?;
    if start < 0 {
        return Err(QueryError::located(
            50752,
            format!("{name}: starting index must be non-negative integer (is: {start})"),
        ));
    }
    let bytes = s.as_bytes();
    let start = usize::try_from(start).unwrap_or(usize::MAX);
    if start >= bytes.len() {
        return Ok(Some(Bson::String(String::new())));
    }
    let end = if len < 0 {
        bytes.len()
    } else {
        start
            .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
            .min(bytes.len())
    };
    if !s.is_char_boundary(start) {
        return Err(QueryError::located(
            28656,
            format!("{name}:  Invalid range, starting index is a UTF-8 continuation byte."),
        ));
    }
    if !s.is_char_boundary(end) {
        return Err(QueryError::located(
            28657,
            format!("{name}:  Invalid range, ending index is in the middle of a UTF-8 character."),
        ));
    }
    Ok(Some(Bson::String(s[start..end].to_string())))
}

fn substr_cp(vals: &[Val]) -> QResult<Val> {
    let s = coerce_to_string("$substrCP", vals[0].as_ref())?;
    let int_arg = |v: &Val, what: &str, numeric_code: i32, int_code: i32| -> QResult<i64> {
        match v {
            Some(x) if Number::of(x).is_some() => exact_i32(x).map(i64::from).ok_or_else(|| {
                QueryError::located(
                    int_code,
                    format!(
                        "$substrCP: {what} cannot be represented as a 32-bit integral value: {}",
                        fmt_value(x)
                    ),
                )
            }),
            _ => Err(QueryError::located(
                numeric_code,
                format!(
                    "$substrCP: {what} must be a numeric type (is BSON type {})",
                    type_name(v.as_ref())
                ),
            )),
        }
    };
    let start = int_arg(&vals[1], "starting index", 34450, 34451)?;
    let len = int_arg(&vals[2], "length", 34452, 34453)?;
    if len < 0 {
        return Err(QueryError::located(
            34454,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    if start < 0 {
        return Err(QueryError::located(
            34455,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    let (skip, take) = (
        usize::try_from(start).unwrap_or(usize::MAX),
        usize::try_from(len).unwrap_or(usize::MAX),
    );
    let out: String = s.chars().skip(skip).take(take).collect();
    Ok(Some(Bson::String(out)))
}

fn split(vals: &[Val]) -> QResult<Val> {
    let (a, b) = (&vals[0], &vals[1]);
    if nullish(a.as_ref()) || nullish(b.as_ref()) {
        return null();
    }
    let Some(Bson::String(s)) = a else {
        return Err(QueryError::located(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, \
                 found: {}",
                type_name(a.as_ref())
            ),
        ));
    };
    let Some(Bson::String(d)) = b else {
        return Err(QueryError::located(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second argument, \
                 found: {}",
                type_name(b.as_ref())
            ),
        ));
    };
    if d.is_empty() {
        return Err(QueryError::located(
            40087,
            "$split requires a non-empty separator",
        ));
    }
    Ok(Some(Bson::Array(
        s.split(d.as_str())
            .map(|p| Bson::String(p.to_string()))
            .collect(),
    )))
}

fn index_of_str(op: Op, vals: &[Val]) -> QResult<Val> {
    let name = op.name();
    let s = match &vals[0] {
        v if nullish(v.as_ref()) => return null(),
        Some(Bson::String(s)) => s,
        v => {
            return Err(QueryError::located(
                40091,
                format!(
                    "{name} requires a string as the first argument, found: {}",
                    type_name(v.as_ref())
                ),
            ))
        }
    };
    let Some(Bson::String(sub)) = &vals[1] else {
        return Err(QueryError::located(
            40092,
            format!(
                "{name} requires a string as the second argument, found: {}",
                type_name(vals[1].as_ref())
            ),
        ));
    };
    let found = if op == Op::IndexOfBytes {
        let (start, end) = index_bounds(name, vals, s.len())?;
        if start > end {
            None
        } else {
            let hay = &s.as_bytes()[start..end];
            let needle = sub.as_bytes();
            if needle.is_empty() {
                Some(start)
            } else {
                hay.windows(needle.len())
                    .position(|w| w == needle)
                    .map(|p| p + start)
            }
        }
    } else {
        let chars: Vec<char> = s.chars().collect();
        let needle: Vec<char> = sub.chars().collect();
        let (start, end) = index_bounds(name, vals, chars.len())?;
        if start > end {
            None
        } else if needle.is_empty() {
            Some(start)
        } else {
            chars[start..end]
                .windows(needle.len())
                .position(|w| w == needle.as_slice())
                .map(|p| p + start)
        }
    };
    Ok(Some(int(found.map_or(-1, |i| i as i64))))
}
