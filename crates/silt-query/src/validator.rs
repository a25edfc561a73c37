//! Collection validators (`validator`, `validationLevel`, `validationAction`): which documents
//! a collection accepts, and MongoDB's explanation of a refusal (`errInfo.details`).
//!
//! A validator is a query filter (with `$jsonSchema` and `$expr` allowed, and the operators
//! MongoDB forbids there refused). `strict` checks every insert and update; `moderate` checks
//! updates only of documents that were valid before; `off` checks nothing. With `warn` a
//! failure is only reported to the caller to log.

use bson::{doc, Bson, Document};

use crate::error::{QResult, QueryError};
use crate::matcher::{MatchExpr, Matcher};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Strict,
    Moderate,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Error,
    Warn,
}

/// A collection's compiled validator.
#[derive(Clone, Debug)]
pub struct Validator {
    pub filter: Document,
    matcher: Matcher,
    pub level: Level,
    pub action: Action,
}

/// Query operators a validator may not use.
const FORBIDDEN: &[&str] = &["$near", "$nearSphere", "$text", "$where", "$geoNear"];

fn check_ops(d: &Document) -> QResult<()> {
    for (k, v) in d {
        if FORBIDDEN.contains(&k.as_str()) {
            return Err(QueryError::invalid_options(format!(
                "{k} is not allowed in collection validators"
            )));
        }
        match v {
            Bson::Document(sub) => check_ops(sub)?,
            Bson::Array(a) => {
                for x in a {
                    if let Bson::Document(sub) = x {
                        check_ops(sub)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

impl Level {
    pub fn parse(v: Option<&Bson>) -> QResult<Level> {
        match v {
            None | Some(Bson::Null) => Ok(Level::Strict),
            Some(Bson::String(s)) => match s.as_str() {
                "strict" => Ok(Level::Strict),
                "moderate" => Ok(Level::Moderate),
                "off" => Ok(Level::Off),
                other => Err(QueryError::bad_value(format!(
                    "Enumeration value '{other}' for field 'validationLevel' is not a valid value."
                ))),
            },
            Some(_) => Err(QueryError::type_mismatch(
                "BSON field 'validationLevel' is the wrong type, expected type 'string'",
            )),
        }
    }
}

impl Action {
    pub fn parse(v: Option<&Bson>) -> QResult<Action> {
        match v {
            None | Some(Bson::Null) => Ok(Action::Error),
            Some(Bson::String(s)) => match s.as_str() {
                "error" => Ok(Action::Error),
                "warn" => Ok(Action::Warn),
                other => Err(QueryError::bad_value(format!(
                    "Enumeration value '{other}' for field 'validationAction' is not a valid value."
                ))),
            },
            Some(_) => Err(QueryError::type_mismatch(
                "BSON field 'validationAction' is the wrong type, expected type 'string'",
            )),
        }
    }
}

/// Check a `validator` option's value.
pub fn parse_filter(v: &Bson) -> QResult<Document> {
    let Bson::Document(d) = v else {
        return Err(QueryError::type_mismatch(
            "BSON field 'validator' is the wrong type, expected type 'object'",
        ));
    };
    check_ops(d)?;
    Matcher::new_with_expr(d, crate::expr::eval_expr)?;
    Ok(d.clone())
}

impl Validator {
    /// The validator of a collection with `options`, if it has one.
    pub fn from_options(options: &Document) -> QResult<Option<Validator>> {
        let filter = match options.get("validator") {
            None | Some(Bson::Null) => return Ok(None),
            Some(v) => parse_filter(v)?,
        };
        if filter.is_empty() {
            return Ok(None);
        }
        Ok(Some(Validator {
            matcher: Matcher::new_with_expr(&filter, crate::expr::eval_expr)?,
            filter,
            level: Level::parse(options.get("validationLevel"))?,
            action: Action::parse(options.get("validationAction"))?,
        }))
    }

    /// Whether `doc` passes (an error evaluating it counts as a failure).
    pub fn accepts(&self, doc: &Document) -> bool {
        self.matcher.try_matches(doc).unwrap_or(false)
    }

    /// Check a new document (`old`: the document it replaces). `Ok` when it may be written;
    /// `Err(details)` with MongoDB's `errInfo` when it fails under level and action `error`.
    /// A failure under `warn` is `Ok(Some(info))`, for the caller to log.
    pub fn check(
        &self,
        old: Option<&Document>,
        new: &Document,
    ) -> Result<Option<Document>, Document> {
        if self.level == Level::Off {
            return Ok(None);
        }
        if self.level == Level::Moderate && old.is_some_and(|o| !self.accepts(o)) {
            return Ok(None);
        }
        if self.accepts(new) {
            return Ok(None);
        }
        let info = doc! {
            "failingDocumentId": new.get("_id").cloned().unwrap_or(Bson::Null),
            "details": self.details(new),
        };
        match self.action {
            Action::Error => Err(info),
            Action::Warn => Ok(Some(info)),
        }
    }

    /// MongoDB's `details` for a failing document.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the position of a clause in one filter document (at most 16 MiB): far below 2^31"
    )]
    fn details(&self, doc: &Document) -> Document {
        let clauses: Vec<(&String, &Bson)> = self.filter.iter().collect();
        let explain = |k: &str, v: &Bson| -> Document {
            if k == "$jsonSchema" {
                if let Bson::Document(s) = v {
                    if let Ok(schema) = crate::matcher::schema::JsonSchema::parse(s) {
                        let rules = schema.failures(&Bson::Document(doc.clone()));
                        return doc! {
                            "operatorName": "$jsonSchema",
                            "schemaRulesNotSatisfied": rules,
                        };
                    }
                }
            }
            let mut spec = Document::new();
            spec.insert(k, v.clone());
            let op = match v {
                Bson::Document(d) if !k.starts_with('$') => d
                    .keys()
                    .next()
                    .filter(|o| o.starts_with('$'))
                    .cloned()
                    .unwrap_or_else(|| "$eq".into()),
                _ if k.starts_with('$') => k.to_string(),
                _ => "$eq".into(),
            };
            let mut d = doc! { "operatorName": op, "specifiedAs": spec, "reason": "expression did not match" };
            if !k.starts_with('$') {
                match silt_bson::path::get_path(doc, k) {
                    Some(x) => d.insert("consideredValue", x.clone()),
                    None => d.insert("reason", "field was missing"),
                };
            }
            d
        };
        let failing: Vec<(usize, Document)> = clauses
            .iter()
            .enumerate()
            .filter(|(_, (k, v))| {
                let mut one = Document::new();
                one.insert((*k).clone(), (*v).clone());
                Matcher::new_with_expr(&one, crate::expr::eval_expr)
                    .map(|m| !m.try_matches(doc).unwrap_or(false))
                    .unwrap_or(true)
            })
            .map(|(i, (k, v))| (i, explain(k, v)))
            .collect();
        match (clauses.len(), failing.as_slice()) {
            (1, [(_, d)]) => d.clone(),
            _ => doc! {
                "operatorName": "$and",
                "clausesNotSatisfied": failing
                    .into_iter()
                    .map(|(i, d)| Bson::Document(doc! { "index": i as i32, "details": d }))
                    .collect::<Vec<_>>(),
            },
        }
    }

    /// Whether the filter's top level is only `$jsonSchema` (for tests and explain).
    pub fn is_schema_only(&self) -> bool {
        matches!(self.matcher.expr(), MatchExpr::Schema(_))
    }
}
