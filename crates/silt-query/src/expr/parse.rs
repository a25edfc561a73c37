//! Parsing expressions: operator names and arities, named-argument operators, field paths and
//! variables (checked against the variables in scope), constant folding of literal arrays and
//! objects.

use bson::{Bson, Document};

use super::names::{check_read_var_name, check_var_name, path_parts};
use super::op::{Op, MANY, UNSUPPORTED};
use super::{fmt_doc, fmt_value, Expr};
use crate::error::{QResult, QueryError};

/// Variables every expression may read.
const BUILTIN_VARS: &[&str] = &[
    "ROOT",
    "CURRENT",
    "REMOVE",
    "NOW",
    "CLUSTER_TIME",
    "DESCEND",
    "PRUNE",
    "KEEP",
];

/// `$meta` kinds MongoDB knows besides `textScore`.
const META_KINDS: &[&str] = &[
    "randVal",
    "searchScore",
    "searchHighlights",
    "geoNearDistance",
    "geoNearPoint",
    "recordId",
    "indexKey",
    "sortKey",
    "searchScoreDetails",
    "searchSequenceToken",
    "vectorSearchScore",
    "score",
    "scoreDetails",
];

pub(crate) struct Parser {
    scope: Vec<String>,
}

fn arity_error(name: &str, lo: usize, hi: usize, n: usize) -> QueryError {
    if lo == hi {
        QueryError::located(
            16020,
            format!("Expression {name} takes exactly {lo} arguments. {n} were passed in."),
        )
    } else if hi == MANY {
        QueryError::located(
            28667,
            format!("Expression {name} takes at least {lo} arguments, but {n} were passed in."),
        )
    } else {
        QueryError::located(
            28667,
            format!(
                "Expression {name} takes at least {lo} arguments, and at most {hi}, but {n} were \
                 passed in."
            ),
        )
    }
}

/// The named arguments of an operator, in the order of `names`; `unknown` builds the error for
/// an argument not in `names`.
fn named<'d>(
    d: &'d Document,
    names: &[&str],
    unknown: impl Fn(&str) -> QueryError,
) -> QResult<Vec<Option<&'d Bson>>> {
    let mut out = vec![None; names.len()];
    for (k, v) in d {
        match names.iter().position(|n| n == k) {
            Some(i) => out[i] = Some(v),
            None => return Err(unknown(k)),
        }
    }
    Ok(out)
}

fn required(v: Option<&Bson>, err: impl FnOnce() -> QueryError) -> QResult<&Bson> {
    v.ok_or_else(err)
}

impl Parser {
    pub(crate) fn new(vars: &[&str]) -> Parser {
        Parser {
            scope: vars.iter().map(|s| s.to_string()).collect(),
        }
    }

    pub(crate) fn parse(&mut self, v: &Bson) -> QResult<Expr> {
        match v {
            Bson::String(s) if s.starts_with('$') => self.path(s),
            Bson::Array(items) => {
                let parsed = items
                    .iter()
                    .map(|x| self.parse(x))
                    .collect::<QResult<Vec<_>>>()?;
                if parsed.iter().all(|e| e.as_literal().is_some()) {
                    let lits = parsed.into_iter().map(literal_of).collect();
                    return Ok(Expr::Literal(Bson::Array(lits)));
                }
                Ok(Expr::Array(parsed))
            }
            Bson::Document(d) => self.object(d),
            other => Ok(Expr::Literal(other.clone())),
        }
    }

    fn boxed(&mut self, v: &Bson) -> QResult<Box<Expr>> {
        Ok(Box::new(self.parse(v)?))
    }

    fn opt(&mut self, v: Option<&Bson>) -> QResult<Option<Box<Expr>>> {
        v.map(|v| self.boxed(v)).transpose()
    }

    /// Parse `body` with `names` bound.
    fn scoped(&mut self, names: &[String], body: &Bson) -> QResult<Expr> {
        let depth = self.scope.len();
        self.scope.extend(names.iter().cloned());
        let out = self.parse(body);
        self.scope.truncate(depth);
        out
    }

    fn path(&mut self, s: &str) -> QResult<Expr> {
        if let Some(rest) = s.strip_prefix("$$") {
            let (name, path) = match rest.split_once('.') {
                Some((n, p)) => (n, p),
                None => (rest, ""),
            };
            check_read_var_name(name)?;
            let path = if path.is_empty() && !rest.contains('.') {
                Vec::new()
            } else {
                path_parts(path)?
            };
            if !BUILTIN_VARS.contains(&name) && !self.scope.iter().any(|v| v == name) {
                return Err(QueryError::located(
                    17276,
                    format!("Use of undefined variable: {name}"),
                ));
            }
            return Ok(Expr::Var {
                name: name.to_string(),
                path,
            });
        }
        let rest = &s[1..];
        if rest.is_empty() {
            return Err(QueryError::located(
                16872,
                "'$' by itself is not a valid FieldPath",
            ));
        }
        Ok(Expr::Field(path_parts(rest)?))
    }

    fn object(&mut self, d: &Document) -> QResult<Expr> {
        let Some(first) = d.keys().next() else {
            return Ok(Expr::Literal(Bson::Document(Document::new())));
        };
        if first.starts_with('$') {
            if d.len() != 1 {
                return Err(QueryError::located(
                    15983,
                    format!(
                        "An object representing an expression must have exactly one field: {}",
                        fmt_doc(d)
                    ),
                ));
            }
            if let Some((name, arg)) = d.iter().next() {
                return self.operator(name, arg);
            }
        }
        let mut fields = Vec::with_capacity(d.len());
        for (k, v) in d {
            if k.starts_with('$') {
                return Err(QueryError::located(
                    16410,
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField.",
                ));
            }
            if k.contains('.') {
                return Err(QueryError::located(
                    16412,
                    "FieldPath field names may not contain '.'. Consider using $getField or \
                     $setField.",
                ));
            }
            if k.is_empty() {
                return Err(QueryError::located(
                    40352,
                    "FieldPath cannot be constructed with empty string",
                ));
            }
            fields.push((k.clone(), self.parse(v)?));
        }
        if fields.iter().all(|(_, e)| e.as_literal().is_some()) {
            let mut out = Document::new();
            for (k, e) in fields {
                out.insert(k, literal_of(e));
            }
            return Ok(Expr::Literal(Bson::Document(out)));
        }
        Ok(Expr::Object(fields))
    }

    /// Positional arguments: an array is the argument list, anything else one argument.
    fn args(&mut self, arg: &Bson) -> QResult<Vec<Expr>> {
        match arg {
            Bson::Array(items) => items.iter().map(|x| self.parse(x)).collect(),
            other => Ok(vec![self.parse(other)?]),
        }
    }

    fn operator(&mut self, name: &str, arg: &Bson) -> QResult<Expr> {
        match name {
            "$literal" => return Ok(Expr::Literal(arg.clone())),
            "$meta" => {
                return match arg {
                    Bson::String(s) if s == "textScore" => Ok(Expr::Op(
                        Op::TextScore,
                        vec![Expr::Field(vec![crate::text::SCORE_FIELD.to_string()])],
                    )),
                    Bson::String(s) if META_KINDS.contains(&s.as_str()) => {
                        Err(QueryError::not_implemented(format!(
                            "$meta \"{s}\" is not supported by siltd (only textScore)"
                        )))
                    }
                    _ => Err(QueryError::located(
                        17308,
                        format!("Unsupported argument to $meta: {arg}"),
                    )),
                }
            }
            "$cond" => return self.cond(arg),
            "$switch" => return self.switch(arg),
            "$let" => return self.let_(arg),
            "$map" => return self.map(arg),
            "$filter" => return self.filter(arg),
            "$reduce" => return self.reduce(arg),
            "$convert" => return self.convert(arg),
            "$regexMatch" => return self.regex_match(arg, 0),
            "$regexFind" => return self.regex_match(arg, 1),
            "$regexFindAll" => return self.regex_match(arg, 2),
            "$replaceOne" | "$replaceAll" => return self.replace(name, arg),
            "$getField" => return self.get_field(arg),
            "$setField" | "$unsetField" => return self.set_field(name, arg),
            "$dateToString" => return self.date_to_string(arg),
            "$firstN" | "$lastN" | "$maxN" | "$minN" => return self.n_array(name, arg),
            "$sortArray" => return self.sort_array(arg),
            "$dateAdd" => return self.date_math(super::datemath::DateOp::Add, arg),
            "$dateSubtract" => return self.date_math(super::datemath::DateOp::Subtract, arg),
            "$dateDiff" => return self.date_math(super::datemath::DateOp::Diff, arg),
            "$dateTrunc" => return self.date_math(super::datemath::DateOp::Trunc, arg),
            "$dateFromParts" => return self.date_math(super::datemath::DateOp::FromParts, arg),
            "$dateToParts" => return self.date_math(super::datemath::DateOp::ToParts, arg),
            "$dateFromString" => return self.date_math(super::datemath::DateOp::FromString, arg),
            "$rand" => {
                return match arg {
                    Bson::Document(d) if d.is_empty() => Ok(Expr::Op(Op::Rand, Vec::new())),
                    Bson::Array(a) if a.is_empty() => Ok(Expr::Op(Op::Rand, Vec::new())),
                    _ => Err(QueryError::located(
                        10065,
                        "$rand does not currently accept arguments",
                    )),
                }
            }
            "$toString" | "$toInt" | "$toLong" | "$toDouble" | "$toDecimal" | "$toBool"
            | "$toObjectId" | "$toDate" => {
                let mut args = self.args(arg)?;
                if args.len() != 1 {
                    return Err(arity_error(name, 1, 1, args.len()));
                }
                let to = match name {
                    "$toString" => "string",
                    "$toInt" => "int",
                    "$toLong" => "long",
                    "$toDouble" => "double",
                    "$toDecimal" => "decimal",
                    "$toBool" => "bool",
                    "$toObjectId" => "objectId",
                    _ => "date",
                };
                return Ok(Expr::Convert {
                    input: Box::new(args.remove(0)),
                    to: Box::new(Expr::Literal(Bson::String(to.into()))),
                    on_error: None,
                    on_null: None,
                });
            }
            _ => {}
        }
        let Some((op, lo, hi)) = Op::lookup(name) else {
            if UNSUPPORTED.contains(&name) {
                return Err(QueryError::not_implemented(format!(
                    "Expression {name} is not supported"
                )));
            }
            return Err(QueryError::invalid_pipeline_operator(format!(
                "Unrecognized expression '{name}'"
            )));
        };
        if matches!(op, Op::Trim | Op::Ltrim | Op::Rtrim) {
            return self.trim(op, arg);
        }
        if op.is_date_part() {
            if let Bson::Document(d) = arg {
                if d.keys().next().is_some_and(|k| !k.starts_with('$')) {
                    return self.date_part(op, d);
                }
            }
        }
        let mut args = self.args(arg)?;
        if args.len() < lo || args.len() > hi {
            return Err(arity_error(name, lo, hi, args.len()));
        }
        if op.is_date_part() {
            return Ok(Expr::DatePart {
                op,
                date: Box::new(args.remove(0)),
                tz: None,
            });
        }
        Ok(Expr::Op(op, args))
    }

    fn cond(&mut self, arg: &Bson) -> QResult<Expr> {
        let [c, t, e] = match arg {
            Bson::Document(d) => {
                let a = named(d, &["if", "then", "else"], |k| {
                    QueryError::located(17083, format!("Unrecognized parameter to $cond: {k}"))
                })?;
                let missing = |code: i32, n: &'static str| {
                    move || QueryError::located(code, format!("Missing '{n}' parameter to $cond"))
                };
                [
                    required(a[0], missing(17080, "if"))?,
                    required(a[1], missing(17081, "then"))?,
                    required(a[2], missing(17082, "else"))?,
                ]
            }
            Bson::Array(items) if items.len() == 3 => [&items[0], &items[1], &items[2]],
            Bson::Array(items) => return Err(arity_error("$cond", 3, 3, items.len())),
            _ => return Err(arity_error("$cond", 3, 3, 1)),
        };
        Ok(Expr::Cond(Box::new([
            self.parse(c)?,
            self.parse(t)?,
            self.parse(e)?,
        ])))
    }

    fn switch(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                40060,
                format!(
                    "$switch requires an object as an argument, found: {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let a = named(d, &["branches", "default"], |k| {
            QueryError::located(40067, format!("$switch found an unknown argument: {k}"))
        })?;
        let mut branches = Vec::new();
        match a[0] {
            Some(Bson::Array(items)) => {
                for b in items {
                    let Bson::Document(bd) = b else {
                        return Err(QueryError::located(
                            40062,
                            format!(
                                "$switch expected each branch to be an object, found: {}",
                                super::type_name(Some(b))
                            ),
                        ));
                    };
                    let ba = named(bd, &["case", "then"], |k| {
                        QueryError::located(
                            40063,
                            format!("$switch found an unknown argument to a branch: {k}"),
                        )
                    })?;
                    let case = required(ba[0], || {
                        QueryError::located(
                            40064,
                            "$switch requires each branch have a 'case' expression",
                        )
                    })?;
                    let then = required(ba[1], || {
                        QueryError::located(
                            40065,
                            "$switch requires each branch have a 'then' expression.",
                        )
                    })?;
                    branches.push((self.parse(case)?, self.parse(then)?));
                }
            }
            Some(other) => {
                return Err(QueryError::located(
                    40061,
                    format!(
                        "$switch expected an array for 'branches', found: {}",
                        super::type_name(Some(other))
                    ),
                ))
            }
            None => {}
        }
        if branches.is_empty() {
            return Err(QueryError::located(
                40068,
                "$switch requires at least one branch.",
            ));
        }
        Ok(Expr::Switch {
            branches,
            default: self.opt(a[1])?,
        })
    }

    fn let_(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                16874,
                "$let only supports an object as its argument",
            ));
        };
        let a = named(d, &["vars", "in"], |k| {
            QueryError::located(16875, format!("Unrecognized parameter to $let: {k}"))
        })?;
        let vars_spec = required(a[0], || {
            QueryError::located(16876, "Missing 'vars' parameter to $let")
        })?;
        let body = required(a[1], || {
            QueryError::located(16877, "Missing 'in' parameter to $let")
        })?;
        let Bson::Document(vd) = vars_spec else {
            return Err(QueryError::located(
                10065,
                format!(
                    "invalid parameter: expected an object (vars), found {}",
                    super::type_name(Some(vars_spec))
                ),
            ));
        };
        let mut vars = Vec::with_capacity(vd.len());
        for (name, e) in vd {
            check_var_name(name)?;
            vars.push((name.clone(), self.parse(e)?));
        }
        let names: Vec<String> = vars.iter().map(|(n, _)| n.clone()).collect();
        Ok(Expr::Let {
            vars,
            body: Box::new(self.scoped(&names, body)?),
        })
    }

    /// The `as` of `$map` / `$filter` (default `this`).
    fn as_name(v: Option<&Bson>) -> QResult<String> {
        let name = match v {
            None => "this".to_string(),
            Some(Bson::String(s)) => s.clone(),
            Some(other) => {
                return Err(QueryError::located(
                    10065,
                    format!(
                        "invalid parameter: expected a string for 'as', found {}",
                        super::type_name(Some(other))
                    ),
                ))
            }
        };
        check_var_name(&name)?;
        Ok(name)
    }

    fn map(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                16878,
                "$map only supports an object as its argument",
            ));
        };
        let a = named(d, &["input", "as", "in"], |k| {
            QueryError::located(16879, format!("Unrecognized parameter to $map: {k}"))
        })?;
        let input = required(a[0], || {
            QueryError::located(16880, "Missing 'input' parameter to $map")
        })?;
        let body = required(a[2], || {
            QueryError::located(16882, "Missing 'in' parameter to $map")
        })?;
        let var = Self::as_name(a[1])?;
        Ok(Expr::Map {
            input: self.boxed(input)?,
            body: Box::new(self.scoped(std::slice::from_ref(&var), body)?),
            var,
        })
    }

    fn filter(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                28646,
                "$filter only supports an object as its argument",
            ));
        };
        let a = named(d, &["input", "as", "cond", "limit"], |k| {
            QueryError::located(28647, format!("Unrecognized parameter to $filter: {k}"))
        })?;
        let input = required(a[0], || {
            QueryError::located(28648, "Missing 'input' parameter to $filter")
        })?;
        let cond = required(a[2], || {
            QueryError::located(28650, "Missing 'cond' parameter to $filter")
        })?;
        let var = Self::as_name(a[1])?;
        Ok(Expr::Filter {
            input: self.boxed(input)?,
            cond: Box::new(self.scoped(std::slice::from_ref(&var), cond)?),
            limit: self.opt(a[3])?,
            var,
        })
    }

    fn reduce(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                40075,
                format!(
                    "$reduce requires an object as an argument, found: {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let a = named(d, &["input", "initialValue", "in"], |k| {
            QueryError::located(40076, format!("$reduce found an unknown argument: {k}"))
        })?;
        let input = required(a[0], || {
            QueryError::located(40077, "$reduce requires 'input' to be specified")
        })?;
        let initial = required(a[1], || {
            QueryError::located(40078, "$reduce requires 'initialValue' to be specified")
        })?;
        let body = required(a[2], || {
            QueryError::located(40079, "$reduce requires 'in' to be specified")
        })?;
        let names = ["value".to_string(), "this".to_string()];
        Ok(Expr::Reduce {
            input: self.boxed(input)?,
            initial: self.boxed(initial)?,
            body: Box::new(self.scoped(&names, body)?),
        })
    }

    fn convert(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::failed_to_parse(format!(
                "$convert expects an object of named arguments but found: {}",
                super::type_name(Some(arg))
            )));
        };
        let a = named(d, &["input", "to", "onError", "onNull"], |k| {
            QueryError::failed_to_parse(format!("$convert found an unknown argument: {k}"))
        })?;
        let input = required(a[0], || {
            QueryError::failed_to_parse("Missing 'input' parameter to $convert")
        })?;
        let to = required(a[1], || {
            QueryError::failed_to_parse("Missing 'to' parameter to $convert")
        })?;
        Ok(Expr::Convert {
            input: self.boxed(input)?,
            to: self.boxed(to)?,
            on_error: self.opt(a[2])?,
            on_null: self.opt(a[3])?,
        })
    }

    fn trim(&mut self, op: Op, arg: &Bson) -> QResult<Expr> {
        let name = op.name();
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                50696,
                format!(
                    "{name} only supports an object as an argument, found {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let a = named(d, &["input", "chars"], |k| {
            QueryError::located(50694, format!("{name} found an unknown argument: {k}"))
        })?;
        let input = required(a[0], || {
            QueryError::located(50695, format!("{name} requires an 'input' field"))
        })?;
        Ok(Expr::Trim {
            op,
            input: self.boxed(input)?,
            chars: self.opt(a[1])?,
        })
    }

    fn regex_match(&mut self, arg: &Bson, mode: u8) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                51103,
                format!(
                    "$regexMatch expects an object of named arguments but found: {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let a = named(d, &["input", "regex", "options"], |k| {
            QueryError::located(31024, format!("$regexMatch found an unknown argument: {k}"))
        })?;
        let input = required(a[0], || {
            QueryError::located(31022, "$regexMatch requires 'input' parameter")
        })?;
        let regex = required(a[1], || {
            QueryError::located(31023, "$regexMatch requires 'regex' parameter")
        })?;
        let regex = self.boxed(regex)?;
        let options = self.opt(a[2])?;
        let constant_options = match options.as_deref() {
            None => Some(None),
            Some(Expr::Literal(o)) => Some(Some(Some(o.clone()))),
            Some(_) => None,
        };
        let compiled = match (regex.as_literal(), constant_options) {
            (Some(r), Some(o)) => match super::ops::regex_spec(Some(r.clone()), o)? {
                Some((pattern, flags)) => {
                    Some(Box::new(crate::matcher::RegexMatch::new(&pattern, &flags)?))
                }
                None => None,
            },
            _ => None,
        };
        Ok(Expr::RegexMatch {
            mode,
            input: self.boxed(input)?,
            regex,
            options,
            compiled,
        })
    }

    fn replace(&mut self, name: &str, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                51751,
                format!(
                    "{name} requires an object as an argument, found: {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let a = named(d, &["input", "find", "replacement"], |k| {
            QueryError::located(51750, format!("{name} found an unknown argument: {k}"))
        })?;
        let req = |i: usize, code: i32, what: &str| {
            required(a[i], || {
                QueryError::located(code, format!("{name} requires '{what}' to be specified"))
            })
        };
        let (input, find, replacement) = (
            req(0, 51749, "input")?,
            req(1, 51748, "find")?,
            req(2, 51747, "replacement")?,
        );
        Ok(Expr::Replace {
            all: name == "$replaceAll",
            input: self.boxed(input)?,
            find: self.boxed(find)?,
            replacement: self.boxed(replacement)?,
        })
    }

    /// The `field` argument of `$getField`/`$setField`: a constant string.
    fn const_field(&mut self, name: &str, v: &Bson) -> QResult<String> {
        match self.parse(v)? {
            Expr::Literal(Bson::String(s)) => Ok(s),
            Expr::Literal(other) => Err(QueryError::located(
                5654602,
                format!(
                    "{name} requires 'field' to evaluate to type String, but got {}",
                    super::type_name(Some(&other))
                ),
            )),
            _ => Err(QueryError::located(
                5654601,
                format!(
                    "{name} requires 'field' to evaluate to a constant, but got a non-constant \
                     argument"
                ),
            )),
        }
    }

    fn n_array(&mut self, name: &str, arg: &Bson) -> QResult<Expr> {
        let name: &'static str = match name {
            "$firstN" => "$firstN",
            "$lastN" => "$lastN",
            "$maxN" => "$maxN",
            _ => "$minN",
        };
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                5787801,
                format!(
                    "specification must be an object; found {name}: {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let a = named(d, &["n", "input"], |k| {
            QueryError::located(5787901, format!("Unknown argument for '{name}': {k}"))
        })?;
        let n = required(a[0], || {
            QueryError::located(5787906, format!("{name} requires 'n'"))
        })?;
        let input = required(a[1], || {
            QueryError::located(5787907, format!("{name} requires 'input'"))
        })?;
        Ok(Expr::NArray {
            name,
            n: self.boxed(n)?,
            input: self.boxed(input)?,
        })
    }

    fn date_math(&mut self, op: super::datemath::DateOp, arg: &Bson) -> QResult<Expr> {
        let name = op.name();
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                5166400,
                format!("{name} expects an object as its argument"),
            ));
        };
        let (names, required_n) = op.args();
        let a = named(d, names, |k| {
            QueryError::located(5166401, format!("Unrecognized argument to {name}: {k}"))
        })?;
        for (i, n) in names.iter().enumerate().take(required_n) {
            if a[i].is_none() {
                return Err(QueryError::located(
                    5166402,
                    format!("{name} requires '{n}' to be present"),
                ));
            }
        }
        let args = a
            .into_iter()
            .map(|v| self.opt(v))
            .collect::<QResult<Vec<_>>>()?;
        Ok(Expr::DateMath { op, args })
    }

    fn sort_array(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                2942500,
                "$sortArray requires an object as its argument",
            ));
        };
        let a = named(d, &["input", "sortBy"], |k| {
            QueryError::located(
                2942501,
                format!("$sortArray found an unknown argument: {k}"),
            )
        })?;
        let input = required(a[0], || {
            QueryError::located(2942502, "$sortArray requires 'input' to be specified")
        })?;
        let sort_by = required(a[1], || {
            QueryError::located(2942503, "$sortArray requires 'sortBy' to be specified")
        })?;
        match sort_by {
            Bson::Int32(1 | -1) | Bson::Int64(1 | -1) => {}
            Bson::Double(f) if *f == 1.0 || *f == -1.0 => {}
            Bson::Document(_) => {
                crate::plan::SortSpec::parse(d.get_document("sortBy").map_err(|_| {
                    QueryError::located(2942504, "$sortArray requires sortBy to be an object")
                })?)?;
            }
            _ => {
                return Err(QueryError::located(
                    2942504,
                    "$sortArray requires sortBy to be either 1, -1, or an object",
                ))
            }
        }
        Ok(Expr::SortArray {
            input: self.boxed(input)?,
            sort_by: sort_by.clone(),
        })
    }

    fn get_field(&mut self, arg: &Bson) -> QResult<Expr> {
        match arg {
            Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                let a = named(d, &["field", "input"], |k| {
                    QueryError::located(
                        3041701,
                        format!("$getField found an unknown argument: {k}"),
                    )
                })?;
                let field = required(a[0], || {
                    QueryError::located(3041702, "$getField requires 'field' to be specified")
                })?;
                Ok(Expr::GetField {
                    field: self.const_field("$getField", field)?,
                    input: self.opt(a[1])?,
                })
            }
            other => Ok(Expr::GetField {
                field: self.const_field("$getField", other)?,
                input: None,
            }),
        }
    }

    fn set_field(&mut self, name: &str, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                4161100,
                format!(
                    "{name} only supports an object as its argument, found: {}",
                    super::type_name(Some(arg))
                ),
            ));
        };
        let unset = name == "$unsetField";
        let names: &[&str] = if unset {
            &["field", "input"]
        } else {
            &["field", "input", "value"]
        };
        let a = named(d, names, |k| {
            QueryError::located(4161101, format!("{name} found an unknown argument: {k}"))
        })?;
        let field = required(a[0], || {
            QueryError::located(4161102, format!("{name} requires 'field' to be specified"))
        })?;
        let input = required(a[1], || {
            QueryError::located(4161103, format!("{name} requires 'input' to be specified"))
        })?;
        let value = if unset {
            None
        } else {
            Some(self.boxed(required(a[2], || {
                QueryError::located(4161104, format!("{name} requires 'value' to be specified"))
            })?)?)
        };
        Ok(Expr::SetField {
            field: self.const_field(name, field)?,
            input: self.boxed(input)?,
            value,
        })
    }

    fn date_part(&mut self, op: Op, d: &Document) -> QResult<Expr> {
        let name = op.name();
        let a = named(d, &["date", "timezone"], |k| {
            QueryError::located(40535, format!("unrecognized option to {name}: \"{k}\""))
        })?;
        let date = required(a[0], || {
            QueryError::located(
                40539,
                format!(
                    "missing 'date' argument to {name}, provided: {}",
                    fmt_doc(d)
                ),
            )
        })?;
        Ok(Expr::DatePart {
            op,
            date: self.boxed(date)?,
            tz: self.opt(a[1])?,
        })
    }

    fn date_to_string(&mut self, arg: &Bson) -> QResult<Expr> {
        let Bson::Document(d) = arg else {
            return Err(QueryError::located(
                18629,
                "$dateToString only supports an object as its argument",
            ));
        };
        let a = named(d, &["date", "format", "timezone", "onNull"], |k| {
            QueryError::located(
                18534,
                format!("Unrecognized argument to $dateToString: {k}"),
            )
        })?;
        let date = required(a[0], || {
            QueryError::located(18628, "Missing 'date' parameter to $dateToString")
        })?;
        if let Some(f) = a[1] {
            if let Bson::String(s) = f {
                super::date::validate_format(s)?;
            } else if !matches!(f, Bson::Document(_)) && !matches!(f, Bson::Null) {
                return Err(QueryError::located(
                    18533,
                    format!(
                        "$dateToString requires that 'format' be a string, found: {} with value \
                         {}",
                        super::type_name(Some(f)),
                        fmt_value(f)
                    ),
                ));
            }
        }
        Ok(Expr::DateToString {
            date: self.boxed(date)?,
            format: self.opt(a[1])?,
            tz: self.opt(a[2])?,
            on_null: self.opt(a[3])?,
        })
    }
}

fn literal_of(e: Expr) -> Bson {
    match e {
        Expr::Literal(v) => v,
        _ => Bson::Null,
    }
}
