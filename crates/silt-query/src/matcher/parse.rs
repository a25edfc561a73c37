//! Parsing a filter document into a [`MatchExpr`] tree, with MongoDB's errors.

use bson::{Bson, Document};
use silt_bson::compare::{as_num, cmp_collated, Num};
use silt_bson::path::FieldPath;

use super::*;
use crate::error::{QResult, QueryError};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    /// The filter's own top level (or `$and`/`$or`/`$nor` inside it).
    Top,
    /// Inside `$elemMatch`: `$expr` and friends are not allowed.
    Sub,
}

/// Top-level operators that take no path.
const PATHLESS: &[&str] = &[
    "and",
    "or",
    "nor",
    "expr",
    "where",
    "comment",
    "text",
    "alwaysTrue",
    "alwaysFalse",
    "jsonSchema",
    "id",
    "ref",
    "db",
    "sampleRate",
];

/// Operators that take a path.
pub(crate) const FIELD_OPS: &[&str] = &[
    "$eq",
    "$ne",
    "$gt",
    "$gte",
    "$lt",
    "$lte",
    "$in",
    "$nin",
    "$not",
    "$exists",
    "$type",
    "$regex",
    "$options",
    "$mod",
    "$all",
    "$elemMatch",
    "$size",
    "$bitsAllSet",
    "$bitsAllClear",
    "$bitsAnySet",
    "$bitsAnyClear",
    "$geoWithin",
    "$geoIntersects",
    "$near",
    "$nearSphere",
    "$within",
];

/// A document that references another (`{$ref, $id}`), which is a value, not operators.
fn is_dbref(d: &Document, allow_incomplete: bool) -> bool {
    let (r, i, db) = (
        d.contains_key("$ref"),
        d.contains_key("$id"),
        d.contains_key("$db"),
    );
    if allow_incomplete {
        r || i || db
    } else {
        r && i
    }
}

/// `{$op: ...}`: a non-empty document whose first field starts with `$` (DBRefs excepted).
fn is_expression_doc(v: &Bson, allow_incomplete_dbref: bool) -> bool {
    match v {
        Bson::Document(d) => d
            .keys()
            .next()
            .is_some_and(|k| k.starts_with('$') && !is_dbref(d, allow_incomplete_dbref)),
        _ => false,
    }
}

fn leaf(path: &FieldPath, op: LeafOp) -> MatchExpr {
    MatchExpr::Leaf {
        path: path.clone(),
        op,
    }
}

fn and_of(mut v: Vec<MatchExpr>) -> MatchExpr {
    if v.len() == 1 {
        v.pop().unwrap_or(MatchExpr::AlwaysTrue)
    } else {
        MatchExpr::And(v)
    }
}

/// BSON's `trueValue`: false for false, zero, null, undefined.
fn true_value(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        _ => match as_num(v) {
            Some(Num::Int(i)) => i != 0,
            Some(Num::Float(f)) => f != 0.0,
            None => true,
        },
    }
}

fn cmp_leaf(path: &FieldPath, op: CmpOp, v: &Bson) -> QResult<MatchExpr> {
    if matches!(v, Bson::Undefined) {
        return Err(QueryError::bad_value("cannot compare to undefined"));
    }
    if op != CmpOp::Eq && matches!(v, Bson::RegularExpression(_)) {
        return Err(QueryError::bad_value(format!(
            "Can't have RegEx as arg to predicate over field '{path}'."
        )));
    }
    Ok(leaf(path, LeafOp::Cmp(op, v.clone())))
}

pub(super) struct Parser {
    pub(super) has_expr: bool,
}

impl Parser {
    pub(super) fn filter(&mut self, filter: &Document, level: Level) -> QResult<MatchExpr> {
        let mut out = Vec::new();
        for (k, v) in filter {
            if let Some(name) = k.strip_prefix('$') {
                if let Some(e) = self.pathless(k, name, v, level)? {
                    out.push(e);
                }
                continue;
            }
            let path = FieldPath::new(k);
            match v {
                Bson::Document(d) if is_expression_doc(v, false) => {
                    self.sub(&path, d, level, &mut out)?
                }
                Bson::RegularExpression(r) => out.push(leaf(
                    &path,
                    LeafOp::Regex(RegexMatch::new(&r.pattern, &r.options)?),
                )),
                _ => out.push(cmp_leaf(&path, CmpOp::Eq, v)?),
            }
        }
        Ok(and_of(out))
    }

    fn pathless(
        &mut self,
        key: &str,
        name: &str,
        v: &Bson,
        level: Level,
    ) -> QResult<Option<MatchExpr>> {
        Ok(Some(match name {
            "and" | "or" | "nor" => {
                let Bson::Array(arr) = v else {
                    return Err(QueryError::bad_value(format!("{key} must be an array")));
                };
                if arr.is_empty() {
                    return Err(QueryError::bad_value(
                        "$and/$or/$nor must be a nonempty array",
                    ));
                }
                let mut kids = Vec::with_capacity(arr.len());
                for e in arr {
                    let Bson::Document(d) = e else {
                        return Err(QueryError::bad_value(
                            "$or/$and/$nor entries need to be full objects",
                        ));
                    };
                    kids.push(self.filter(d, level)?);
                }
                match name {
                    "and" => MatchExpr::And(kids),
                    "or" => MatchExpr::Or(kids),
                    _ => MatchExpr::Nor(kids),
                }
            }
            "comment" => return Ok(None),
            "expr" => {
                if level == Level::Sub {
                    return Err(QueryError::bad_value(
                        "$expr can only be applied to the top-level document",
                    ));
                }
                self.has_expr = true;
                MatchExpr::Expr(v.clone())
            }
            "alwaysTrue" | "alwaysFalse" => {
                if integral(v) != Some(1) {
                    return Err(QueryError::failed_to_parse(format!(
                        "{key} must be an integer value of 1"
                    )));
                }
                if name == "alwaysTrue" {
                    MatchExpr::AlwaysTrue
                } else {
                    MatchExpr::AlwaysFalse
                }
            }
            "id" | "ref" | "db" => cmp_leaf(&FieldPath::new(key), CmpOp::Eq, v)?,
            "jsonSchema" => match v {
                Bson::Document(d) => {
                    if level == Level::Sub {
                        return Err(QueryError::bad_value(
                            "$jsonSchema can only be applied to the top-level document",
                        ));
                    }
                    MatchExpr::Schema(std::sync::Arc::new(super::schema::JsonSchema::parse(d)?))
                }
                _ => return Err(QueryError::type_mismatch("$jsonSchema must be an object")),
            },
            "text" => {
                if level == Level::Sub {
                    return Err(QueryError::bad_value(
                        "$text can only be applied to the top-level document",
                    ));
                }
                MatchExpr::Text(std::sync::Arc::new(crate::text::TextQuery::parse(v)?))
            }
            "where" | "sampleRate" => {
                return Err(QueryError::not_implemented(format!(
                    "{key} is not supported"
                )))
            }
            _ => {
                return Err(QueryError::bad_value(format!(
                    "unknown top level operator: {key}"
                )))
            }
        }))
    }

    /// `{path: {$op: arg, ...}}`: each operator becomes one expression in `out`.
    fn sub(
        &mut self,
        path: &FieldPath,
        ops: &Document,
        level: Level,
        out: &mut Vec<MatchExpr>,
    ) -> QResult<()> {
        for (name, arg) in ops {
            if let Some(e) = self.field_op(path, ops, name, arg, level)? {
                out.push(e);
            }
        }
        Ok(())
    }

    fn field_op(
        &mut self,
        path: &FieldPath,
        context: &Document,
        name: &str,
        arg: &Bson,
        level: Level,
    ) -> QResult<Option<MatchExpr>> {
        let not = |e: MatchExpr| MatchExpr::Not(Box::new(e));
        Ok(Some(match name {
            "$eq" => cmp_leaf(path, CmpOp::Eq, arg)?,
            "$lt" => cmp_leaf(path, CmpOp::Lt, arg)?,
            "$lte" => cmp_leaf(path, CmpOp::Lte, arg)?,
            "$gt" => cmp_leaf(path, CmpOp::Gt, arg)?,
            "$gte" => cmp_leaf(path, CmpOp::Gte, arg)?,
            "$ne" => {
                if matches!(arg, Bson::RegularExpression(_)) {
                    return Err(QueryError::bad_value("Can't have regex as arg to $ne."));
                }
                not(cmp_leaf(path, CmpOp::Eq, arg)?)
            }
            "$in" | "$nin" => {
                let Bson::Array(arr) = arg else {
                    return Err(QueryError::bad_value(format!("{name} needs an array")));
                };
                let e = leaf(path, LeafOp::In(in_list(arr)?));
                if name == "$in" {
                    e
                } else {
                    not(e)
                }
            }
            "$not" => not(self.not_arg(path, arg, level)?),
            "$exists" => {
                if true_value(arg) {
                    leaf(path, LeafOp::Exists)
                } else {
                    not(leaf(path, LeafOp::Exists))
                }
            }
            "$type" => leaf(path, LeafOp::Type(TypeSet::parse(arg)?)),
            "$size" => leaf(path, LeafOp::Size(parse_size(arg)?)),
            "$mod" => parse_mod(path, arg)?,
            "$options" => {
                if context.contains_key("$regex") {
                    return Ok(None);
                }
                return Err(QueryError::bad_value("$options needs a $regex"));
            }
            "$regex" => leaf(path, LeafOp::Regex(regex_document(context)?)),
            "$elemMatch" => self.elem_match(path, arg)?,
            "$all" => self.all(path, arg)?,
            "$bitsAllSet" => bits(path, BitsOp::AllSet, name, arg)?,
            "$bitsAllClear" => bits(path, BitsOp::AllClear, name, arg)?,
            "$bitsAnySet" => bits(path, BitsOp::AnySet, name, arg)?,
            "$bitsAnyClear" => bits(path, BitsOp::AnyClear, name, arg)?,
            "$where" => return Err(QueryError::bad_value("$where cannot be applied to a field")),
            "$geoWithin" | "$geoIntersects" | "$near" | "$nearSphere" | "$within" => {
                return Err(QueryError::not_implemented(format!(
                    "{name} is not supported"
                )))
            }
            _ => return Err(QueryError::bad_value(format!("unknown operator: {name}"))),
        }))
    }

    /// The operand of `$not`: a regex or an operator document (never a plain value).
    fn not_arg(&mut self, path: &FieldPath, arg: &Bson, level: Level) -> QResult<MatchExpr> {
        match arg {
            Bson::RegularExpression(r) => Ok(leaf(
                path,
                LeafOp::Regex(RegexMatch::new(&r.pattern, &r.options)?),
            )),
            Bson::Document(d) if d.is_empty() => Err(QueryError::bad_value("$not cannot be empty")),
            Bson::Document(d) => {
                let mut kids = Vec::new();
                self.sub(path, d, level, &mut kids)?;
                Ok(and_of(kids))
            }
            _ => Err(QueryError::bad_value("$not needs a regex or a document")),
        }
    }

    fn elem_match(&mut self, path: &FieldPath, arg: &Bson) -> QResult<MatchExpr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::bad_value("$elemMatch needs an Object"));
        };
        let value_form = is_expression_doc(arg, true)
            && d.keys()
                .next()
                .is_some_and(|k| !PATHLESS.contains(&&k[1..]));
        if value_form {
            let mut kids = Vec::new();
            self.sub(&FieldPath::new(""), d, Level::Sub, &mut kids)?;
            Ok(leaf(path, LeafOp::ElemMatchValue(kids)))
        } else {
            let sub = self.filter(d, Level::Sub)?;
            Ok(leaf(path, LeafOp::ElemMatchObject(Box::new(sub))))
        }
    }

    fn all(&mut self, path: &FieldPath, arg: &Bson) -> QResult<MatchExpr> {
        let Bson::Array(arr) = arg else {
            return Err(QueryError::bad_value("$all needs an array"));
        };
        let first_key = |e: &Bson| match e {
            Bson::Document(d) => d.keys().next().cloned(),
            _ => None,
        };
        let mut kids = Vec::with_capacity(arr.len());
        if arr.first().and_then(first_key).as_deref() == Some("$elemMatch") {
            for e in arr {
                match (first_key(e).as_deref(), e) {
                    (Some("$elemMatch"), Bson::Document(d)) => {
                        let inner = d.get("$elemMatch").unwrap_or(&Bson::Null);
                        kids.push(self.elem_match(path, inner)?);
                    }
                    _ => {
                        return Err(QueryError::bad_value(
                            "$all/$elemMatch has to be consistent",
                        ))
                    }
                }
            }
            return Ok(MatchExpr::And(kids));
        }
        for e in arr {
            match e {
                Bson::RegularExpression(r) => kids.push(leaf(
                    path,
                    LeafOp::Regex(RegexMatch::new(&r.pattern, &r.options)?),
                )),
                _ if first_key(e).is_some_and(|k| FIELD_OPS.contains(&k.as_str())) => {
                    return Err(QueryError::bad_value("no $ expressions in $all"))
                }
                _ => kids.push(cmp_leaf(path, CmpOp::Eq, e)?),
            }
        }
        Ok(if kids.is_empty() {
            MatchExpr::AlwaysFalse
        } else {
            MatchExpr::And(kids)
        })
    }
}

fn in_list(arr: &[Bson]) -> QResult<InList> {
    let mut list = InList {
        values: Vec::new(),
        regexes: Vec::new(),
        has_null: false,
    };
    for e in arr {
        match e {
            _ if is_expression_doc(e, false) => {
                return Err(QueryError::bad_value("cannot nest $ under $in"))
            }
            Bson::RegularExpression(r) => {
                list.regexes.push(RegexMatch::new(&r.pattern, &r.options)?)
            }
            Bson::Undefined => {
                return Err(QueryError::bad_value(
                    "InMatchExpression equality cannot be undefined",
                ))
            }
            _ => {
                list.has_null |= matches!(e, Bson::Null);
                list.values.push(e.clone());
            }
        }
    }
    list.values.sort_by(cmp_collated);
    list.values
        .dedup_by(|a, b| cmp_collated(a, b) == Ordering::Equal);
    Ok(list)
}

fn parse_size(arg: &Bson) -> QResult<usize> {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the double is checked to be integral and within the i32 range: exact"
    )]
    let n: i64 = match arg {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => i32::try_from(*i).map(i64::from).map_err(|_| {
            QueryError::bad_value("$size must be representable as a 32-bit integer")
        })?,
        Bson::Double(d) => {
            if d.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(d) {
                return Err(QueryError::bad_value("$size must be a whole number"));
            }
            *d as i64
        }
        _ => return Err(QueryError::bad_value("$size needs a number")),
    };
    usize::try_from(n).map_err(|_| QueryError::bad_value("$size may not be negative"))
}

fn parse_mod(path: &FieldPath, arg: &Bson) -> QResult<MatchExpr> {
    let Bson::Array(a) = arg else {
        return Err(QueryError::bad_value("malformed mod, needs to be an array"));
    };
    if a.len() < 2 {
        return Err(QueryError::bad_value("malformed mod, not enough elements"));
    }
    if a.len() > 2 {
        return Err(QueryError::bad_value("malformed mod, too many elements"));
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the truncated double is checked to be in [-2^63, 2^63): exact"
    )]
    let num = |v: &Bson, what: &str| -> QResult<i64> {
        match as_num(v) {
            None => Err(QueryError::bad_value(format!(
                "malformed mod, {what} not a number"
            ))),
            Some(Num::Int(i)) => Ok(i),
            Some(Num::Float(f)) if (-TWO63..TWO63).contains(&f.trunc()) => Ok(f.trunc() as i64),
            Some(Num::Float(_)) => Err(QueryError::bad_value(format!(
                "malformed mod, {what} value is invalid"
            ))),
        }
    };
    let divisor = num(&a[0], "divisor")?;
    let remainder = num(&a[1], "remainder")?;
    if divisor == 0 {
        return Err(QueryError::bad_value("divisor cannot be 0"));
    }
    Ok(leaf(path, LeafOp::Mod { divisor, remainder }))
}

/// `{$regex: ..., $options: ...}` (the whole operator document is the context).
fn regex_document(context: &Document) -> QResult<RegexMatch> {
    let mut pattern = String::new();
    let mut options = String::new();
    for (k, v) in context {
        match (k.as_str(), v) {
            ("$regex", Bson::String(s)) => pattern = s.clone(),
            ("$regex", Bson::RegularExpression(r)) => {
                pattern = r.pattern.clone();
                if !r.options.is_empty() {
                    if !options.is_empty() {
                        return Err(QueryError::located(
                            51074,
                            "options set in both $regex and $options",
                        ));
                    }
                    options = r.options.clone();
                }
            }
            ("$regex", _) => return Err(QueryError::bad_value("$regex has to be a string")),
            ("$options", Bson::String(s)) => {
                if !options.is_empty() {
                    return Err(QueryError::located(
                        51075,
                        "options set in both $regex and $options",
                    ));
                }
                options = s.clone();
            }
            ("$options", _) => return Err(QueryError::bad_value("$options has to be a string")),
            _ => {}
        }
    }
    RegexMatch::new(&pattern, &options)
}

/// A value as mongod prints a BSON element's value in its parse errors: a whole double keeps
/// its `.0` (`-1.0`), a string its quotes.
fn elem_text(v: &Bson) -> String {
    match v {
        Bson::Double(d) if d.is_finite() && d.fract() == 0.0 => format!("{d:.1}"),
        Bson::Double(d) => format!("{d}"),
        other => crate::expr::fmt_value(other),
    }
}

/// A bit position or mask: a whole, non-negative number; else mongod's reason.
fn bit_number(v: &Bson) -> Result<i64, &'static str> {
    if as_num(v).is_none() {
        return Err("Expected a number in");
    }
    match integral(v) {
        None => Err("Expected an integer"),
        Some(i) if i < 0 => Err("Expected a non-negative number in"),
        Some(i) => Ok(i),
    }
}

fn bits(path: &FieldPath, op: BitsOp, name: &str, arg: &Bson) -> QResult<MatchExpr> {
    // mongod's texts: a position is named by its index in the list, a mask by the operator.
    let mask = match arg {
        Bson::Array(a) => {
            let mut positions = Vec::with_capacity(a.len());
            for (i, e) in a.iter().enumerate() {
                let p = bit_number(e).map_err(|why| {
                    QueryError::bad_value(format!(
                        "Failed to parse bit position. {why}: {i}: {}",
                        elem_text(e)
                    ))
                })?;
                positions.push(u32::try_from(p).unwrap_or(u32::MAX));
            }
            BitMask::from_positions(positions)
        }
        Bson::Binary(b) => {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a BSON binary is at most 16 MiB: its bit count fits a u32"
            )]
            let bits = b.bytes.len() as u32 * 8;
            BitMask::from_positions(
                (0..bits)
                    .filter(|p| b.bytes[(p / 8) as usize] & (1 << (p % 8)) != 0)
                    .collect(),
            )
        }
        _ if as_num(arg).is_some() => {
            let m = bit_number(arg).map_err(|why| {
                QueryError::failed_to_parse(format!("{why}: {name}: {}", elem_text(arg)))
            })?;
            BitMask::from_positions((0..63).filter(|p| m >> p & 1 == 1).collect())
        }
        _ => {
            return Err(QueryError::bad_value(format!(
                "{path} takes an Array, a number, or a BinData but received: {name}: {}",
                elem_text(arg)
            )))
        }
    };
    Ok(leaf(path, LeafOp::Bits(op, mask)))
}
