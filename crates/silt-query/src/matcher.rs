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
//!
//! Parsing is in `matcher/parse.rs`, evaluation in `matcher/eval.rs`.

use std::cmp::Ordering;

use bson::{Bson, Document};
use regex::Regex;
use silt_bson::compare::{as_num, cmp_collated, Num};
use silt_bson::path::{FieldPath, LeafArrays};

use crate::error::{QResult, QueryError};

mod eval;
mod parse;
mod raw;
pub mod schema;

use eval::Eval;
pub(crate) use parse::FIELD_OPS;
use parse::{Level, Parser};

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
    /// `$jsonSchema`: the document satisfies the schema.
    Schema(std::sync::Arc<schema::JsonSchema>),
    /// `$text`: true once the planner has bound it to the collection's text index and the
    /// document satisfies it there (`crate::text`).
    Text(std::sync::Arc<crate::text::TextQuery>),
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
            || self.values.binary_search_by(|x| cmp_collated(x, v)).is_ok()
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

    /// Every match in `s` (only the first unless `all`): the matched text, its code-point
    /// index and its capture groups (`None` for a group that took no part).
    pub fn find_in(&self, s: &str, all: bool) -> Vec<(String, usize, Vec<Option<String>>)> {
        let mut out = Vec::new();
        for caps in self.re.captures_iter(s) {
            let Some(m) = caps.get(0) else { continue };
            let idx = s[..m.start()].chars().count();
            let groups = (1..caps.len())
                .map(|i| caps.get(i).map(|g| g.as_str().to_string()))
                .collect();
            out.push((m.as_str().to_string(), idx, groups));
            if !all {
                break;
            }
        }
        out
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
                    .and_then(|c| i32::try_from(c).ok())
                    .ok_or_else(|| {
                        QueryError::failed_to_parse(format!("Expected an integer: {v}"))
                    })?;
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
#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is checked to be integral and in [-2^63, 2^63): exact"
)]
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
    /// The fields [`Matcher::matches_raw`] reads, when it can decide every document
    /// (`raw::raw_fields`); 0 when it cannot.
    raw_fields: usize,
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
        check_text_placement(&expr)?;
        if p.has_expr && expr_eval.is_none() {
            return Err(QueryError::not_implemented(
                "$expr is not supported here (no expression evaluator)",
            ));
        }
        let raw_fields = raw::raw_fields(&expr);
        Ok(Matcher {
            expr,
            expr_eval,
            raw_fields,
        })
    }

    /// The filter's `$text`, if it has one (always a top-level conjunct).
    pub fn text(&self) -> Option<&std::sync::Arc<crate::text::TextQuery>> {
        fn find(e: &MatchExpr) -> Option<&std::sync::Arc<crate::text::TextQuery>> {
            match e {
                MatchExpr::Text(t) => Some(t),
                MatchExpr::And(kids) => kids.iter().find_map(find),
                _ => None,
            }
        }
        find(&self.expr)
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

#[cfg(test)]
mod tests;

/// `$text` at most once, and only where every matching document must satisfy it (the top
/// level or a top-level `$and`): it is answered through the text index.
fn check_text_placement(e: &MatchExpr) -> QResult<()> {
    fn count(e: &MatchExpr) -> usize {
        match e {
            MatchExpr::Text(_) => 1,
            MatchExpr::And(k) | MatchExpr::Or(k) | MatchExpr::Nor(k) => k.iter().map(count).sum(),
            MatchExpr::Not(k) => count(k),
            _ => 0,
        }
    }
    fn top(e: &MatchExpr) -> usize {
        match e {
            MatchExpr::Text(_) => 1,
            MatchExpr::And(k) => k.iter().map(top).sum(),
            _ => 0,
        }
    }
    match (count(e), top(e)) {
        (0, _) | (1, 1) => Ok(()),
        (n, _) if n > 1 => Err(QueryError::bad_value("Too many text expressions")),
        _ => Err(QueryError::coded(
            291,
            "NoQueryExecutionPlans",
            "$text is only supported at the top level of a filter or in a top-level $and \
             (siltd answers it through the text index)",
        )),
    }
}
