//! MongoDB query filters: parsing a filter document into a [`MatchExpr`] tree and evaluating it
//! against documents.
//!
//! The tree is public so the query planner can derive index bounds from it. Path predicates
//! are [`MatchExpr::Leaf`]s: a dotted path and a [`LeafOp`] that is tested against each
//! candidate value the path yields (see `silt_bson::path`); a leaf matches when any candidate
//! does. `$ne`, `$nin` and `$exists: false` are `Not` of the positive form, so they also match
//! documents where the path is missing, as in MongoDB.
//!
//! Comparison operators only match values of the same canonical type (`{$gt: 5}` never matches
//! a string); the exceptions are MongoDB's: `null` equals a missing field and `undefined`, and
//! `MinKey`/`MaxKey` bounds compare below/above everything. `$expr` is parsed here but evaluated
//! by a hook ([`ExprEval`]) that the aggregation layer supplies.

use std::cmp::Ordering;

use bson::{Bson, Document};
use regex::Regex;
use silt_bson::compare::{as_num, cmp_values, type_rank, Num};
use silt_bson::path::{any_value, FieldPath, LeafArrays};

use crate::error::{QResult, QueryError};

/// Evaluates an aggregation expression (the argument of `$expr`) against a document.
pub type ExprEval = fn(&Bson, &Document) -> QResult<Bson>;

/// A parsed filter.
#[derive(Clone, Debug)]
pub enum MatchExpr {
    /// All children match (an empty `And` matches everything).
    And(Vec<MatchExpr>),
    Or(Vec<MatchExpr>),
    Nor(Vec<MatchExpr>),
    Not(Box<MatchExpr>),
    AlwaysTrue,
    AlwaysFalse,
    /// `$expr`: the raw aggregation expression, true when it evaluates truthy.
    Expr(Bson),
    /// A predicate on the values at a path. Inside `$elemMatch` (value form) the path is empty
    /// and the op is applied to each array element directly.
    Leaf {
        path: FieldPath,
        op: LeafOp,
    },
}

/// The comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
}

/// A predicate on one candidate value.
#[derive(Clone, Debug)]
pub enum LeafOp {
    Cmp(CmpOp, Bson),
    In(InList),
    Regex(RegexMatch),
    Exists,
    Type(TypeSet),
    Mod {
        divisor: i64,
        remainder: i64,
    },
    Size(usize),
    /// `$elemMatch` whose argument is a filter on each element (documents or arrays).
    ElemMatchObject(Box<MatchExpr>),
    /// `$elemMatch` whose argument is operators on each element; all must hold.
    ElemMatchValue(Vec<MatchExpr>),
    Bits(BitsOp, BitMask),
}

impl LeafOp {
    /// How an array at the end of the path is presented to this op.
    pub fn leaf_arrays(&self) -> LeafArrays {
        match self {
            LeafOp::Size(_) | LeafOp::ElemMatchObject(_) | LeafOp::ElemMatchValue(_) => {
                LeafArrays::NoTraversal
            }
            _ => LeafArrays::Traverse,
        }
    }
}

/// The argument of `$in`: equalities (sorted by `cmp_values`, deduplicated) and regexes.
#[derive(Clone, Debug)]
pub struct InList {
    pub values: Vec<Bson>,
    pub regexes: Vec<RegexMatch>,
    /// `null` is in the list, so missing and `undefined` match too.
    pub has_null: bool,
}

impl InList {
    fn contains(&self, v: Option<&Bson>) -> bool {
        let Some(v) = v else {
            return self.has_null;
        };
        (self.has_null && matches!(v, Bson::Undefined))
            || self.values.binary_search_by(|x| cmp_values(x, v)).is_ok()
            || self.regexes.iter().any(|r| r.matches(v))
    }
}

/// A compiled `$regex` with MongoDB's options (`i m s x`).
#[derive(Clone, Debug)]
pub struct RegexMatch {
    pub pattern: String,
    pub options: String,
    re: Regex,
}

impl RegexMatch {
    pub fn new(pattern: &str, options: &str) -> QResult<RegexMatch> {
        if pattern.contains('\0') {
            return Err(QueryError::bad_value(
                "Regular expression cannot contain an embedded null byte",
            ));
        }
        // Without `m`, PCRE's `$` also matches before a final newline (unless the pattern sets
        // its own flags inline, which the translation leaves alone).
        let dollar_eol = !options.contains('m') && !pattern.contains("(?");
        let mut b = regex::RegexBuilder::new(&translate_pcre(pattern, dollar_eol));
        for c in options.chars() {
            match c {
                'i' => b.case_insensitive(true),
                'm' => b.multi_line(true),
                's' => b.dot_matches_new_line(true),
                'x' => b.ignore_whitespace(true),
                'u' => &mut b,
                _ => {
                    return Err(QueryError::located(
                        51108,
                        format!("invalid flag in regex options: {c}"),
                    ))
                }
            };
        }
        let re = b.size_limit(1 << 24).build().map_err(|e| {
            let detail = e.to_string();
            let last = detail.lines().last().unwrap_or("").trim();
            QueryError::located(51091, format!("Regular expression is invalid: {last}"))
        })?;
        Ok(RegexMatch {
            pattern: pattern.to_string(),
            options: options.to_string(),
            re,
        })
    }

    /// Strings and symbols match by the regex; a stored regex matches when identical.
    pub fn matches(&self, v: &Bson) -> bool {
        match v {
            Bson::String(s) | Bson::Symbol(s) => self.re.is_match(s),
            Bson::RegularExpression(r) => r.pattern == self.pattern && r.options == self.options,
            _ => false,
        }
    }

    /// The literal prefix every match must start with, when the pattern is anchored with `^`
    /// and has no options (for index bounds).
    pub fn literal_prefix(&self) -> Option<String> {
        if !self.options.is_empty() || self.pattern.starts_with("^(") {
            return None;
        }
        let rest = self.pattern.strip_prefix('^')?;
        let end = rest
            .find(|c: char| ".[]()*+?{}|\\$^".contains(c))
            .unwrap_or(rest.len());
        Some(rest[..end].to_string())
    }
}

/// Rewrite the PCRE-isms the `regex` crate lacks: `\Z`, `\Q...\E`, `\h`, literal `\<` `\>`,
/// a literal `[` (or doubled `&`, `~`, `-`) inside a character class, and (`dollar_eol`) a
/// `$` that also matches before a final newline.
fn translate_pcre(p: &str, dollar_eol: bool) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('Z') if !in_class => out.push_str(r"(?:\n?\z)"),
                Some('h') => out.push_str(if in_class { r" \t" } else { r"[ \t]" }),
                Some('<') => out.push('<'),
                Some('>') => out.push('>'),
                Some('Q') => {
                    let mut lit = String::new();
                    while let Some(q) = chars.next() {
                        if q == '\\' && chars.peek() == Some(&'E') {
                            chars.next();
                            break;
                        }
                        lit.push(q);
                    }
                    out.push_str(&regex::escape(&lit));
                }
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str(r"\\"),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str(r"\]");
                    chars.next();
                }
            }
            '[' if chars.peek() == Some(&':') => {
                // A POSIX class such as [:alpha:], which both dialects share.
                out.push('[');
                for q in chars.by_ref() {
                    out.push(q);
                    if q == ']' {
                        break;
                    }
                }
            }
            '[' => out.push_str(r"\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.peek() == Some(&'-') => out.push_str(r"\-"),
            '$' if dollar_eol && !in_class => out.push_str(r"(?:\n?\z)"),
            _ => out.push(c),
        }
    }
    out
}

/// The argument of `$type`: BSON type codes, or "number" for all numeric types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeSet {
    pub all_numbers: bool,
    pub codes: Vec<i32>,
}

const TYPE_ALIASES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

/// The BSON type code of a value (`$type`'s numbering: MinKey is -1).
pub fn type_code(v: &Bson) -> i32 {
    match v.element_type() as u8 {
        0xFF => -1,
        c => i32::from(c),
    }
}

impl TypeSet {
    pub fn parse(v: &Bson) -> QResult<TypeSet> {
        let mut set = TypeSet::default();
        match v {
            Bson::Array(a) => {
                for e in a {
                    set.add(e)?;
                }
            }
            _ => set.add(v)?,
        }
        if !set.all_numbers && set.codes.is_empty() {
            return Err(QueryError::failed_to_parse(
                "$type must match at least one type",
            ));
        }
        Ok(set)
    }

    fn add(&mut self, v: &Bson) -> QResult<()> {
        match v {
            Bson::String(s) if s == "number" => self.all_numbers = true,
            Bson::String(s) => match TYPE_ALIASES.iter().find(|(name, _)| name == s) {
                Some((_, code)) => self.codes.push(*code),
                None => {
                    return Err(QueryError::bad_value(format!(
                        "Unknown type name alias: {s}"
                    )))
                }
            },
            _ if as_num(v).is_some() => {
                let code = integral(v)
                    .filter(|c| i32::try_from(*c).is_ok())
                    .ok_or_else(|| {
                        QueryError::failed_to_parse(format!("Expected an integer: {v}"))
                    })? as i32;
                if !(code == -1 || code == 127 || (1..=19).contains(&code)) {
                    return Err(QueryError::bad_value(format!(
                        "Invalid numerical type code: {code}"
                    )));
                }
                self.codes.push(code);
            }
            _ => {
                return Err(QueryError::type_mismatch(
                    "type must be represented as a number or a string",
                ))
            }
        }
        Ok(())
    }

    pub fn matches(&self, v: &Bson) -> bool {
        (self.all_numbers && as_num(v).is_some()) || self.codes.contains(&type_code(v))
    }
}

/// The bit-test operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitsOp {
    AllSet,
    AllClear,
    AnySet,
    AnyClear,
}

/// The bit positions a bit-test operator examines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitMask {
    pub positions: Vec<u32>,
    /// The positions as a 64-bit mask (positions above 63 test the sign bit).
    pub mask: u64,
}

impl BitMask {
    fn from_positions(positions: Vec<u32>) -> BitMask {
        let mask = positions
            .iter()
            .fold(0u64, |m, p| m | (1u64 << (*p).min(63)));
        BitMask { positions, mask }
    }

    fn test(&self, op: BitsOp, v: &Bson) -> bool {
        let int = integral(v);
        if int.is_none() && !matches!(v, Bson::Binary(_)) {
            return false;
        }
        let bit_set = |p: u32| match v {
            Bson::Binary(b) => b
                .bytes
                .get((p / 8) as usize)
                .is_some_and(|byte| byte & (1 << (p % 8)) != 0),
            _ => int.is_some_and(|i| (i >> p.min(63)) & 1 == 1),
        };
        match op {
            BitsOp::AllSet => self.positions.iter().all(|p| bit_set(*p)),
            BitsOp::AllClear => self.positions.iter().all(|p| !bit_set(*p)),
            BitsOp::AnySet => self.positions.iter().any(|p| bit_set(*p)),
            BitsOp::AnyClear => self.positions.iter().any(|p| !bit_set(*p)),
        }
    }
}

/// 2^63 as a double: every i64 is below it and at or above its negation.
const TWO63: f64 = 9_223_372_036_854_775_808.0;

/// A number that is an integer representable as i64 (doubles must be integral).
fn integral(v: &Bson) -> Option<i64> {
    match as_num(v)? {
        Num::Int(i) => Some(i),
        Num::Float(f) if f.fract() == 0.0 && (-TWO63..TWO63).contains(&f) => Some(f as i64),
        Num::Float(_) => None,
    }
}

/// MongoDB's truthiness of an expression result.
pub fn is_truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Decimal128(_) => !matches!(as_num(v), Some(Num::Float(f)) if f == 0.0),
        _ => true,
    }
}

/// A compiled filter.
#[derive(Clone, Debug)]
pub struct Matcher {
    expr: MatchExpr,
    expr_eval: Option<ExprEval>,
}

impl Matcher {
    /// Parse `filter`. A filter using `$expr` needs [`Matcher::new_with_expr`].
    pub fn new(filter: &Document) -> QResult<Matcher> {
        Self::build(filter, None)
    }

    /// Parse `filter`, evaluating `$expr` with `eval`.
    pub fn new_with_expr(filter: &Document, eval: ExprEval) -> QResult<Matcher> {
        Self::build(filter, Some(eval))
    }

    fn build(filter: &Document, expr_eval: Option<ExprEval>) -> QResult<Matcher> {
        let mut p = Parser { has_expr: false };
        let expr = p.filter(filter, Level::Top)?;
        if p.has_expr && expr_eval.is_none() {
            return Err(QueryError::not_implemented(
                "$expr is not supported here (no expression evaluator)",
            ));
        }
        Ok(Matcher { expr, expr_eval })
    }

    /// The parsed tree.
    pub fn expr(&self) -> &MatchExpr {
        &self.expr
    }

    /// Whether `doc` matches (an error evaluating `$expr` counts as no match).
    pub fn matches(&self, doc: &Document) -> bool {
        self.try_matches(doc).unwrap_or(false)
    }

    /// Whether `doc` matches, reporting errors raised by `$expr`.
    pub fn try_matches(&self, doc: &Document) -> QResult<bool> {
        Ok(self.matches_with_key(doc)?.0)
    }

    /// Whether `doc` matches, and the array index recorded by the predicate that matched
    /// through an array (MongoDB's "elemMatchKey", used by the positional projection `a.$`).
    pub fn matches_with_key(&self, doc: &Document) -> QResult<(bool, Option<usize>)> {
        let mut ev = Eval {
            expr_eval: self.expr_eval,
            error: None,
        };
        let mut key = None;
        let m = ev.expr(&self.expr, doc, Some(&mut key));
        match ev.error {
            Some(e) => Err(e),
            None => Ok((m, if m { key } else { None })),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
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

/// Operators that take a path (MongoDB's `parsePathAcceptingKeyword`).
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

struct Parser {
    has_expr: bool,
}

impl Parser {
    fn filter(&mut self, filter: &Document, level: Level) -> QResult<MatchExpr> {
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
            "where" | "text" | "jsonSchema" | "sampleRate" => {
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
    list.values.sort_by(cmp_values);
    list.values
        .dedup_by(|a, b| cmp_values(a, b) == Ordering::Equal);
    Ok(list)
}

fn parse_size(arg: &Bson) -> QResult<usize> {
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

fn bits(path: &FieldPath, op: BitsOp, name: &str, arg: &Bson) -> QResult<MatchExpr> {
    let mask = match arg {
        Bson::Array(a) => {
            let mut positions = Vec::with_capacity(a.len());
            for e in a {
                let p = integral(e)
                    .and_then(|p| i32::try_from(p).ok())
                    .ok_or_else(|| {
                        QueryError::bad_value(format!(
                            "bit positions must be an integer but got: {e}"
                        ))
                    })?;
                let p = u32::try_from(p).map_err(|_| {
                    QueryError::bad_value(format!("bit positions must be >= 0 but got: {e}"))
                })?;
                positions.push(p);
            }
            BitMask::from_positions(positions)
        }
        Bson::Binary(b) => BitMask::from_positions(
            (0..b.bytes.len() as u32 * 8)
                .filter(|p| b.bytes[(p / 8) as usize] & (1 << (p % 8)) != 0)
                .collect(),
        ),
        _ if as_num(arg).is_some() => {
            let m = integral(arg).filter(|m| *m >= 0).ok_or_else(|| {
                QueryError::failed_to_parse(format!("Expected a positive number in: {name}: {arg}"))
            })?;
            BitMask::from_positions((0..63).filter(|p| m >> p & 1 == 1).collect())
        }
        _ => {
            return Err(QueryError::bad_value(format!(
                "{name} takes an Array, a number, or a BinData but received: {arg}"
            )))
        }
    };
    Ok(leaf(path, LeafOp::Bits(op, mask)))
}

// ---------------------------------------------------------------------------------------------
// Evaluation

struct Eval {
    expr_eval: Option<ExprEval>,
    error: Option<QueryError>,
}

impl Eval {
    /// Evaluate `e` against `doc`; `key` (when wanted) receives the array index recorded by
    /// the last matching path predicate that went through an array.
    fn expr(&mut self, e: &MatchExpr, doc: &Document, mut key: Option<&mut Option<usize>>) -> bool {
        match e {
            MatchExpr::And(kids) => kids.iter().all(|k| self.expr(k, doc, key.as_deref_mut())),
            MatchExpr::Or(kids) => kids.iter().any(|k| self.expr(k, doc, key.as_deref_mut())),
            MatchExpr::Nor(kids) => !kids.iter().any(|k| self.expr(k, doc, None)),
            MatchExpr::Not(k) => !self.expr(k, doc, None),
            MatchExpr::AlwaysTrue => true,
            MatchExpr::AlwaysFalse => false,
            MatchExpr::Expr(x) => match self.expr_eval.map(|f| f(x, doc)) {
                Some(Ok(v)) => is_truthy(&v),
                Some(Err(err)) => {
                    self.error.get_or_insert(err);
                    false
                }
                None => false,
            },
            MatchExpr::Leaf { path, op } => any_value(doc, path, op.leaf_arrays(), &mut |c| {
                let mut inner = None;
                if !self.single(op, c.value, &mut inner) {
                    return false;
                }
                if let (Some(k), Some(i)) = (key.as_deref_mut(), c.array_index.or(inner)) {
                    *k = Some(i);
                }
                true
            }),
        }
    }

    /// An expression applied to one value (the element of `$elemMatch`'s value form).
    fn single_expr(&mut self, e: &MatchExpr, v: &Bson) -> bool {
        match e {
            MatchExpr::Leaf { op, .. } => self.single(op, Some(v), &mut None),
            MatchExpr::And(kids) => kids.iter().all(|k| self.single_expr(k, v)),
            MatchExpr::Or(kids) => kids.iter().any(|k| self.single_expr(k, v)),
            MatchExpr::Nor(kids) => !kids.iter().any(|k| self.single_expr(k, v)),
            MatchExpr::Not(k) => !self.single_expr(k, v),
            MatchExpr::AlwaysTrue => true,
            MatchExpr::AlwaysFalse | MatchExpr::Expr(_) => false,
        }
    }

    /// Does the op hold for one candidate (`None` = missing)? Array ops record the index of
    /// the matching element in `key`.
    fn single(&mut self, op: &LeafOp, v: Option<&Bson>, key: &mut Option<usize>) -> bool {
        match op {
            LeafOp::Cmp(c, rhs) => compare(*c, rhs, v),
            LeafOp::In(list) => list.contains(v),
            LeafOp::Exists => v.is_some(),
            LeafOp::Regex(r) => v.is_some_and(|v| r.matches(v)),
            LeafOp::Type(t) => v.is_some_and(|v| t.matches(v)),
            LeafOp::Mod { divisor, remainder } => v
                .and_then(mod_dividend)
                .is_some_and(|d| d.checked_rem(*divisor).unwrap_or(0) == *remainder),
            LeafOp::Size(n) => matches!(v, Some(Bson::Array(a)) if a.len() == *n),
            LeafOp::Bits(b, mask) => v.is_some_and(|v| mask.test(*b, v)),
            LeafOp::ElemMatchObject(sub) => {
                let Some(Bson::Array(arr)) = v else {
                    return false;
                };
                for (i, e) in arr.iter().enumerate() {
                    let hit = match e {
                        Bson::Document(d) => self.expr(sub, d, None),
                        Bson::Array(inner) => self.expr(sub, &array_as_doc(inner), None),
                        _ => false,
                    };
                    if hit {
                        *key = Some(i);
                        return true;
                    }
                }
                false
            }
            LeafOp::ElemMatchValue(kids) => {
                let Some(Bson::Array(arr)) = v else {
                    return false;
                };
                for (i, e) in arr.iter().enumerate() {
                    if kids.iter().all(|k| self.single_expr(k, e)) {
                        *key = Some(i);
                        return true;
                    }
                }
                false
            }
        }
    }
}

/// An array seen as a document with fields "0", "1", ... (`$elemMatch` on nested arrays).
fn array_as_doc(a: &[Bson]) -> Document {
    a.iter()
        .enumerate()
        .map(|(i, v)| (i.to_string(), v.clone()))
        .collect()
}

/// The integer `$mod` divides: integers as-is, doubles truncated (NaN, infinities and values
/// beyond i64 never match).
fn mod_dividend(v: &Bson) -> Option<i64> {
    match as_num(v)? {
        Num::Int(i) => Some(i),
        Num::Float(f) => {
            let t = f.trunc();
            (-TWO63..TWO63).contains(&t).then_some(t as i64)
        }
    }
}

fn is_nan(v: &Bson) -> bool {
    matches!(as_num(v), Some(Num::Float(f)) if f.is_nan())
}

/// A comparison operator applied to one candidate, with MongoDB's cross-type rules.
fn compare(op: CmpOp, rhs: &Bson, v: Option<&Bson>) -> bool {
    // Missing and undefined share a canonical class (rank 1); null is rank 2.
    let lhs_rank = v.map_or(1, type_rank);
    let rhs_rank = type_rank(rhs);
    let inclusive = matches!(op, CmpOp::Eq | CmpOp::Lte | CmpOp::Gte);
    if lhs_rank != rhs_rank {
        if lhs_rank.min(rhs_rank) == 1 && lhs_rank.max(rhs_rank) == 2 {
            return inclusive; // null vs missing/undefined
        }
        return match rhs {
            Bson::MaxKey => matches!(op, CmpOp::Lt | CmpOp::Lte),
            Bson::MinKey => matches!(op, CmpOp::Gt | CmpOp::Gte),
            _ => false,
        };
    }
    let Some(v) = v else {
        return false;
    };
    if op != CmpOp::Eq && (is_nan(v) || is_nan(rhs)) {
        // NaN equals NaN but is otherwise unordered for range predicates.
        return matches!(op, CmpOp::Lte | CmpOp::Gte) && is_nan(v) && is_nan(rhs);
    }
    let o = cmp_values(v, rhs);
    match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Lte => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Gte => o != Ordering::Less,
    }
}

#[cfg(test)]
mod tests;
