//! Aggregation expressions: the language of `$project`, `$addFields`, `$group` keys and
//! accumulator arguments, `$expr` in filters, and every other place MongoDB accepts an
//! expression.
//!
//! An expression is parsed once into an [`Expr`] tree ([`Expr::parse`]) and then evaluated
//! against documents ([`Expr::eval`] / [`Expr::evaluate`]). Evaluation distinguishes a *missing*
//! value (`None`: a field that does not exist, `$$REMOVE`) from `null`, as MongoDB does: a
//! computed field whose value is missing is left out of the output.
//!
//! Field paths (`"$a.b"`) are relative to `$$CURRENT` (normally the document itself). A path
//! through an array of documents yields the array of the values found in its elements (nested
//! arrays stay nested; scalars and elements without the field are skipped); numeric components
//! are field names, never array indexes. Variables are `$$ROOT`, `$$CURRENT`, `$$REMOVE`,
//! `$$NOW`, `$$CLUSTER_TIME` and the names bound by `$let`, `$map`, `$filter` and `$reduce`;
//! use of an unbound variable is rejected when parsing (17276).
//!
//! Numbers follow MongoDB's promotion rules: int32 → int64 → double, with an integer result
//! widened when it would overflow, and any decimal operand making the result a decimal (decimals
//! are computed through `f64`). Errors carry MongoDB's codes and messages.

mod arith;
mod array;
mod convert;
mod date;
mod datefmt;
mod datemath;
mod names;
mod narray;
mod op;
mod ops;
mod parse;
mod trig;
pub(crate) use names::path_parts;
#[cfg(test)]
mod tests;

use bson::{Bson, Document};

use crate::error::{QResult, QueryError};

pub(crate) use arith::{StdDev, Sum};
pub use convert::to_string_value;
pub(crate) use names::check_var_name;
pub use op::Op;

/// Variable bindings in scope during evaluation: a chain of scopes, innermost first.
///
/// `$$ROOT` is the document being evaluated; `$$CURRENT` is that document unless a scope binds
/// `CURRENT`. User variables come from `$let`, `$map`, `$filter` and `$reduce`.
#[derive(Debug, Default)]
pub struct Vars<'a> {
    parent: Option<&'a Vars<'a>>,
    binds: Vec<(String, Bson)>,
}

impl Vars<'static> {
    /// An empty scope.
    pub fn new() -> Vars<'static> {
        Vars::default()
    }
}

impl<'a> Vars<'a> {
    /// A new innermost scope whose lookups fall back to `self`.
    pub fn child<'b>(&'b self) -> Vars<'b> {
        Vars {
            parent: Some(self),
            binds: Vec::new(),
        }
    }

    /// Bind (or rebind) `name` in this scope.
    pub fn bind(&mut self, name: impl Into<String>, value: Bson) {
        let name = name.into();
        match self.binds.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.binds.push((name, value)),
        }
    }

    /// The value bound to `name` in the innermost scope that binds it.
    pub fn get(&self, name: &str) -> Option<&Bson> {
        let mut scope = Some(self);
        while let Some(s) = scope {
            if let Some((_, v)) = s.binds.iter().rev().find(|(n, _)| n == name) {
                return Some(v);
            }
            scope = s.parent;
        }
        None
    }
}

/// A parsed aggregation expression.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A constant (also `$literal`).
    Literal(Bson),
    /// A field path relative to `$$CURRENT`, split into components.
    Field(Vec<String>),
    /// `$$name` or `$$name.a.b`.
    Var {
        name: String,
        path: Vec<String>,
    },
    /// An object expression `{a: <expr>, ...}`; missing values leave their field out.
    Object(Vec<(String, Expr)>),
    /// An array expression `[<expr>, ...]`; missing values become null.
    Array(Vec<Expr>),
    /// An operator with positional arguments.
    Op(Op, Vec<Expr>),
    Cond(Box<[Expr; 3]>),
    Switch {
        branches: Vec<(Expr, Expr)>,
        default: Option<Box<Expr>>,
    },
    Let {
        vars: Vec<(String, Expr)>,
        body: Box<Expr>,
    },
    Map {
        input: Box<Expr>,
        var: String,
        body: Box<Expr>,
    },
    Filter {
        input: Box<Expr>,
        var: String,
        cond: Box<Expr>,
        limit: Option<Box<Expr>>,
    },
    Reduce {
        input: Box<Expr>,
        initial: Box<Expr>,
        body: Box<Expr>,
    },
    /// `$convert` and the `$toX` shorthands (which have no `onError`/`onNull`).
    Convert {
        input: Box<Expr>,
        to: Box<Expr>,
        on_error: Option<Box<Expr>>,
        on_null: Option<Box<Expr>>,
    },
    /// `$trim`, `$ltrim`, `$rtrim`.
    Trim {
        op: Op,
        input: Box<Expr>,
        chars: Option<Box<Expr>>,
    },
    RegexMatch {
        /// `$regexMatch` (0), `$regexFind` (1) or `$regexFindAll` (2).
        mode: u8,
        input: Box<Expr>,
        regex: Box<Expr>,
        options: Option<Box<Expr>>,
        /// The regex, compiled once when `regex` and `options` are constants.
        compiled: Option<Box<crate::matcher::RegexMatch>>,
    },
    /// `$replaceOne` / `$replaceAll`.
    Replace {
        all: bool,
        input: Box<Expr>,
        find: Box<Expr>,
        replacement: Box<Expr>,
    },
    GetField {
        field: String,
        input: Option<Box<Expr>>,
    },
    SetField {
        field: String,
        input: Box<Expr>,
        /// `None` for `$unsetField`.
        value: Option<Box<Expr>>,
    },
    /// `$year`, `$month`, ... with an optional timezone.
    DatePart {
        op: Op,
        date: Box<Expr>,
        tz: Option<Box<Expr>>,
    },
    DateToString {
        date: Box<Expr>,
        format: Option<Box<Expr>>,
        tz: Option<Box<Expr>>,
        on_null: Option<Box<Expr>>,
    },
    /// `$firstN`, `$lastN`, `$maxN`, `$minN` over an array (`narray.rs`).
    NArray {
        name: &'static str,
        n: Box<Expr>,
        input: Box<Expr>,
    },
    /// `$dateAdd`, `$dateSubtract`, `$dateDiff`, `$dateTrunc`: arguments in
    /// `DateOp::args` order.
    DateMath {
        op: datemath::DateOp,
        args: Vec<Option<Box<Expr>>>,
    },
    /// `$sortArray`: `sort_by` is a sort document or `1`/`-1` for the whole values.
    SortArray {
        input: Box<Expr>,
        sort_by: Bson,
    },
}

impl Expr {
    /// Parse an expression with no user variables in scope.
    pub fn parse(v: &Bson) -> QResult<Expr> {
        parse::Parser::new(&[]).parse(v)
    }

    /// Parse an expression that may use the user variables `vars` (e.g. `$lookup`'s `let`).
    pub fn parse_with_vars(v: &Bson, vars: &[&str]) -> QResult<Expr> {
        parse::Parser::new(vars).parse(v)
    }

    /// Evaluate against `root` (`$$ROOT`); a missing result is `None`.
    pub fn evaluate(&self, root: &Document, vars: &Vars<'_>) -> QResult<Option<Bson>> {
        Eval { root, vars }.eval(self)
    }

    /// Evaluate against `root`; a missing result is `null`.
    pub fn eval(&self, root: &Document, vars: &Vars<'_>) -> QResult<Bson> {
        Ok(self.evaluate(root, vars)?.unwrap_or(Bson::Null))
    }

    /// Whether this expression is a constant (its value does not depend on the document).
    pub fn as_literal(&self) -> Option<&Bson> {
        match self {
            Expr::Literal(v) => Some(v),
            _ => None,
        }
    }
}

/// Evaluate the expression `v` against `doc` (the hook the matcher's `$expr` uses).
pub fn eval_expr(v: &Bson, doc: &Document) -> QResult<Bson> {
    Expr::parse(v)?.eval(doc, &Vars::new())
}

/// MongoDB's truthiness: false, null, missing, undefined and numeric zero are false.
pub fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None => false,
        Some(v) => crate::matcher::is_truthy(v),
    }
}

/// MongoDB's name for the type of a value (`"missing"` for a missing one), as `$type` returns.
pub fn type_name(v: Option<&Bson>) -> &'static str {
    v.map_or("missing", silt_bson::compare::type_name)
}

/// A value as MongoDB's error messages print it (`{ a: 1 }`, `[ 1, 2 ]`, `"s"`).
pub fn fmt_value(v: &Bson) -> String {
    match v {
        // mongod prints a whole double with its ".0" (`{ _id: 1.0 }`).
        Bson::Double(d) if d.is_finite() && d.fract() == 0.0 && d.abs() < 1e15 => {
            format!("{d:.1}")
        }
        Bson::Double(d) => convert::double_to_string(*d),
        Bson::String(s) | Bson::Symbol(s) => format!("\"{s}\""),
        Bson::Document(d) => fmt_doc(d),
        Bson::Array(a) if a.is_empty() => "[]".to_owned(),
        Bson::Array(a) => {
            let items: Vec<String> = a.iter().map(fmt_value).collect();
            format!("[ {} ]", items.join(", "))
        }
        Bson::ObjectId(o) => format!("ObjectId('{}')", o.to_hex()),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        Bson::Decimal128(d) => format!("NumberDecimal(\"{d}\")"),
        Bson::Int64(i) => format!("{i}"),
        Bson::Int32(i) => format!("{i}"),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_owned(),
        Bson::Undefined => "undefined".to_owned(),
        Bson::RegularExpression(r) => format!("/{}/{}", r.pattern, r.options),
        Bson::Timestamp(t) => format!("Timestamp({}, {})", t.time, t.increment),
        Bson::MinKey => "MinKey".to_owned(),
        Bson::MaxKey => "MaxKey".to_owned(),
        other => format!("{other}"),
    }
}

/// A document as MongoDB's error messages print it.
pub fn fmt_doc(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_owned();
    }
    let fields: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", fmt_value(v)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// A value compared and ordered by MongoDB's rules (`1 == 1.0`), for sets and group keys.
#[derive(Clone, Debug)]
pub struct ValueKey(pub Bson);

impl PartialEq for ValueKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for ValueKey {}

impl PartialOrd for ValueKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ValueKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        silt_bson::compare::cmp_collated(&self.0, &other.0)
    }
}

/// A pseudo-random number (splitmix64 over a process-wide counter seeded from the clock); good
/// enough for `$rand` and `$sample`, not for anything secret.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a seed: the low 64 bits of the nanoseconds are as good as any"
)]
pub(crate) fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = *SEED.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 32)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `null`, `undefined` or missing: the values most operators turn into a `null` result.
pub(crate) fn nullish(v: Option<&Bson>) -> bool {
    matches!(v, None | Some(Bson::Null | Bson::Undefined))
}

/// An operator's `null` result.
fn null() -> QResult<Val> {
    Ok(Some(Bson::Null))
}

/// An integer result: `int` when it fits, else `long`.
fn int(i: i64) -> Bson {
    i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32)
}

/// A value as an error message shows it (`missing` when there is none).
fn show(v: Option<&Bson>) -> String {
    v.map_or_else(|| "missing".to_owned(), fmt_value)
}

/// Follow `path` into `v` with expression field-path semantics: through documents by name and
/// through arrays element-wise (see the module documentation).
pub fn traverse(v: &Bson, path: &[String]) -> Option<Bson> {
    let Some((first, rest)) = path.split_first() else {
        return Some(v.clone());
    };
    match v {
        Bson::Document(d) => traverse(d.get(first)?, rest),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| traverse(e, path))
                .collect(),
        )),
        _ => None,
    }
}

/// Follow `path` (non-empty) into a document.
pub(crate) fn traverse_doc(d: &Document, path: &[String]) -> Option<Bson> {
    let (first, rest) = path.split_first()?;
    traverse(d.get(first)?, rest)
}

/// The evaluation context: `$$ROOT` and the variables in scope.
pub(crate) struct Eval<'e, 'v> {
    pub root: &'e Document,
    pub vars: &'e Vars<'v>,
}

pub(crate) type Val = Option<Bson>;

impl Eval<'_, '_> {
    pub(crate) fn eval(&self, e: &Expr) -> QResult<Val> {
        match e {
            Expr::Literal(v) => Ok(Some(v.clone())),
            Expr::Field(path) => Ok(match self.vars.get("CURRENT") {
                Some(cur) => traverse(cur, path),
                None => traverse_doc(self.root, path),
            }),
            Expr::Var { name, path } => Ok(self.var(name, path)),
            Expr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = self.eval(e)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    out.push(self.eval(e)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Op(op, args) => self.op(*op, args),
            Expr::Cond(c) => {
                let [cond, then, other] = &**c;
                if truthy(self.eval(cond)?.as_ref()) {
                    self.eval(then)
                } else {
                    self.eval(other)
                }
            }
            Expr::Switch { branches, default } => {
                for (case, then) in branches {
                    if truthy(self.eval(case)?.as_ref()) {
                        return self.eval(then);
                    }
                }
                match default {
                    Some(d) => self.eval(d),
                    None => Err(QueryError::located(
                        40066,
                        "$switch could not find a matching branch for an input, and no default \
                         was specified.",
                    )),
                }
            }
            Expr::Let { vars, body } => {
                let mut scope = self.vars.child();
                for (name, e) in vars {
                    // Every binding is evaluated in the outer scope.
                    let v = self.eval(e)?.unwrap_or(Bson::Null);
                    scope.bind(name.clone(), v);
                }
                Eval {
                    root: self.root,
                    vars: &scope,
                }
                .eval(body)
            }
            Expr::Map { input, var, body } => self.map(input, var, body),
            Expr::Filter {
                input,
                var,
                cond,
                limit,
            } => self.filter(input, var, cond, limit.as_deref()),
            Expr::Reduce {
                input,
                initial,
                body,
            } => self.reduce(input, initial, body),
            Expr::Convert {
                input,
                to,
                on_error,
                on_null,
            } => self.convert(input, to, on_error.as_deref(), on_null.as_deref()),
            Expr::Trim { op, input, chars } => self.trim(*op, input, chars.as_deref()),
            Expr::RegexMatch {
                mode,
                input,
                regex,
                options,
                compiled,
            } => self.regex_match(*mode, input, regex, options.as_deref(), compiled.as_deref()),
            Expr::Replace {
                all,
                input,
                find,
                replacement,
            } => self.replace(*all, input, find, replacement),
            Expr::GetField { field, input } => self.get_field(field, input.as_deref()),
            Expr::SetField {
                field,
                input,
                value,
            } => self.set_field(field, input, value.as_deref()),
            Expr::DatePart { op, date, tz } => self.date_part(*op, date, tz.as_deref()),
            Expr::NArray { name, n, input } => self.n_array(name, n, input),
            Expr::SortArray { input, sort_by } => self.sort_array(input, sort_by),
            Expr::DateMath { op, args } => self.date_math(*op, args),
            Expr::DateToString {
                date,
                format,
                tz,
                on_null,
            } => self.date_to_string(date, format.as_deref(), tz.as_deref(), on_null.as_deref()),
        }
    }

    fn var(&self, name: &str, path: &[String]) -> Val {
        let base = match name {
            "ROOT" => Bson::Document(self.root.clone()),
            "CURRENT" => match self.vars.get("CURRENT") {
                Some(v) => v.clone(),
                None => return traverse_doc(self.root, path).or_else(|| whole(self.root, path)),
            },
            "REMOVE" => return None,
            "NOW" => match self.vars.get("NOW") {
                Some(v) => v.clone(),
                None => Bson::DateTime(bson::DateTime::now()),
            },
            "CLUSTER_TIME" => {
                let now = bson::DateTime::now().timestamp_millis() / 1000;
                Bson::Timestamp(bson::Timestamp {
                    time: u32::try_from(now).unwrap_or(u32::MAX),
                    increment: 1,
                })
            }
            "DESCEND" => Bson::String("descend".into()),
            "PRUNE" => Bson::String("prune".into()),
            "KEEP" => Bson::String("keep".into()),
            _ => self.vars.get(name)?.clone(),
        };
        traverse(&base, path)
    }

    /// Evaluate every argument.
    pub(crate) fn all(&self, args: &[Expr]) -> QResult<Vec<Val>> {
        args.iter().map(|a| self.eval(a)).collect()
    }

    /// Evaluate `body` once per element of the array `input`, with `var` bound to it.
    fn with_each<T>(
        &self,
        items: Vec<Bson>,
        var: &str,
        mut f: impl FnMut(&Eval<'_, '_>, Bson) -> QResult<Option<T>>,
    ) -> QResult<Vec<T>> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let mut scope = self.vars.child();
            scope.bind(var, item.clone());
            let ev = Eval {
                root: self.root,
                vars: &scope,
            };
            match f(&ev, item)? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        Ok(out)
    }

    fn map(&self, input: &Expr, var: &str, body: &Expr) -> QResult<Val> {
        let items = match self.eval(input)? {
            v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(a)) => a,
            v => {
                return Err(QueryError::located(
                    16883,
                    format!(
                        "input to $map must be an array not {}",
                        type_name(v.as_ref())
                    ),
                ))
            }
        };
        let out = self.with_each(items, var, |ev, _| {
            Ok(Some(ev.eval(body)?.unwrap_or(Bson::Null)))
        })?;
        Ok(Some(Bson::Array(out)))
    }

    fn filter(&self, input: &Expr, var: &str, cond: &Expr, limit: Option<&Expr>) -> QResult<Val> {
        let items = match self.eval(input)? {
            v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(a)) => a,
            v => {
                return Err(QueryError::located(
                    28651,
                    format!(
                        "input to $filter must be an array not {}",
                        type_name(v.as_ref())
                    ),
                ))
            }
        };
        let limit = match limit {
            None => usize::MAX,
            Some(l) => match self.eval(l)? {
                v if nullish(v.as_ref()) => usize::MAX,
                Some(v) => match arith::exact_i64(&v) {
                    Some(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
                    Some(n) => {
                        return Err(QueryError::located(
                            327392,
                            format!("$filter: limit must be greater than 0: {n}"),
                        ))
                    }
                    None => {
                        return Err(QueryError::located(
                            327391,
                            format!(
                                "$filter: limit must be represented as a 32-bit integral value: {}",
                                fmt_value(&v)
                            ),
                        ))
                    }
                },
                None => usize::MAX,
            },
        };
        let mut kept = 0usize;
        let out = self.with_each(items, var, |ev, item| {
            if kept >= limit {
                return Ok(None);
            }
            if truthy(ev.eval(cond)?.as_ref()) {
                kept += 1;
                Ok(Some(Some(item)))
            } else {
                Ok(Some(None))
            }
        })?;
        Ok(Some(Bson::Array(out.into_iter().flatten().collect())))
    }

    fn reduce(&self, input: &Expr, initial: &Expr, body: &Expr) -> QResult<Val> {
        let items = match self.eval(input)? {
            v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
            Some(Bson::Array(a)) => a,
            v => {
                return Err(QueryError::located(
                    40080,
                    format!(
                        "$reduce requires that 'input' be an array, found: {}",
                        v.as_ref().map_or_else(|| "missing".to_owned(), fmt_value)
                    ),
                ))
            }
        };
        let mut acc = self.eval(initial)?.unwrap_or(Bson::Null);
        for item in items {
            let mut scope = self.vars.child();
            scope.bind("value", acc);
            scope.bind("this", item);
            acc = Eval {
                root: self.root,
                vars: &scope,
            }
            .eval(body)?
            .unwrap_or(Bson::Null);
        }
        Ok(Some(acc))
    }
}

/// `$$CURRENT` with an empty path when no scope rebinds it.
fn whole(root: &Document, path: &[String]) -> Option<Bson> {
    path.is_empty().then(|| Bson::Document(root.clone()))
}
