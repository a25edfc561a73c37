//! Binding variables by substitution: a `$lookup`'s `let` (per joined document) and a
//! command's `let` (once per command, [`LetVars`]). In expressions (everywhere in a stage but
//! `$match`, where only under `$expr`), `$$name` and `$$name.path` become `{$literal: value}`,
//! or `$$REMOVE` when the value is missing, so the stages parse with no free variables.

use bson::{doc, Bson, DateTime, Document};

use crate::error::{QResult, QueryError};
use crate::expr::{type_name, Expr, Vars};

/// A command's `let` variables, evaluated once (they are constants: MongoDB evaluates them
/// before the command reads any document; `$$NOW` and earlier variables are in scope).
#[derive(Clone, Debug, Default)]
pub struct LetVars {
    vars: Vec<(String, Option<Bson>)>,
}

impl LetVars {
    /// Parse `cmd`'s `let` field (`command` names the command in errors), evaluating each
    /// variable with `$$NOW` = `now`. `extra` are further constants (an update statement's
    /// `c`), which take precedence.
    pub fn parse(let_field: Option<&Bson>, command: &str, now: DateTime) -> QResult<LetVars> {
        let mut out = LetVars::default();
        out.add(let_field, command, "let", now)?;
        Ok(out)
    }

    /// Add the variables of `field` (a `let` or an update statement's `c`).
    pub fn add(
        &mut self,
        field: Option<&Bson>,
        command: &str,
        name: &str,
        now: DateTime,
    ) -> QResult<()> {
        let d = match field {
            None | Some(Bson::Null) => return Ok(()),
            Some(Bson::Document(d)) => d,
            Some(other) => {
                return Err(QueryError::type_mismatch(format!(
                    "BSON field '{command}.{name}' is the wrong type '{}', expected type \
                     'object'",
                    type_name(Some(other))
                )))
            }
        };
        let mut scope = Vars::new();
        scope.bind("NOW", Bson::DateTime(now));
        for (k, e) in d {
            crate::expr::check_var_name(k)?;
            let bound = bind_value(e, &self.vars);
            let value = Expr::parse(&bound)?.evaluate(&Document::new(), &scope)?;
            match self.vars.iter_mut().find(|(n, _)| n == k) {
                Some(slot) => slot.1 = value,
                None => self.vars.push((k.clone(), value)),
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// A query filter with the variables bound inside its `$expr`s.
    pub fn filter(&self, filter: &Document) -> Document {
        if self.vars.is_empty() {
            return filter.clone();
        }
        bind_filter(filter, &self.vars)
    }

    /// Pipeline stages with the variables bound.
    pub fn stages(&self, stages: &[Document]) -> Vec<Document> {
        if self.vars.is_empty() {
            return stages.to_vec();
        }
        stages.iter().map(|s| bind_stage(s, &self.vars)).collect()
    }

    /// An expression (or a projection value) with the variables bound.
    pub fn value(&self, v: &Bson) -> Bson {
        if self.vars.is_empty() {
            return v.clone();
        }
        bind_value(v, &self.vars)
    }
}

/// Substitute `$lookup` `let` variables into a sub-pipeline stage: in expressions
/// (everywhere but in `$match`, where only under `$expr`), `$$name` and `$$name.path` become
/// `{$literal: value}` (or `$$REMOVE` when missing).
pub(crate) fn bind_stage(stage: &Document, vars: &[(String, Option<Bson>)]) -> Document {
    let mut out = Document::new();
    for (k, v) in stage {
        let bound = match (k.as_str(), v) {
            ("$match", Bson::Document(f)) => Bson::Document(bind_filter(f, vars)),
            _ => bind_value(v, vars),
        };
        out.insert(k.clone(), bound);
    }
    out
}

pub(crate) fn bind_filter(f: &Document, vars: &[(String, Option<Bson>)]) -> Document {
    let mut out = Document::new();
    for (k, v) in f {
        let bound = match (k.as_str(), v) {
            ("$expr", _) => bind_value(v, vars),
            ("$and" | "$or" | "$nor", Bson::Array(items)) => Bson::Array(
                items
                    .iter()
                    .map(|x| match x {
                        Bson::Document(d) => Bson::Document(bind_filter(d, vars)),
                        other => other.clone(),
                    })
                    .collect(),
            ),
            _ => v.clone(),
        };
        out.insert(k.clone(), bound);
    }
    out
}

pub(crate) fn bind_value(v: &Bson, vars: &[(String, Option<Bson>)]) -> Bson {
    match v {
        Bson::String(s) => {
            let Some(rest) = s.strip_prefix("$$") else {
                return v.clone();
            };
            let (name, path) = match rest.split_once('.') {
                Some((n, p)) => (n, Some(p)),
                None => (rest, None),
            };
            let Some((_, value)) = vars.iter().find(|(n, _)| n == name) else {
                return v.clone();
            };
            let resolved = match path {
                None => value.clone(),
                Some(p) => {
                    let parts: Vec<String> = p.split('.').map(str::to_string).collect();
                    value
                        .as_ref()
                        .and_then(|x| crate::expr::traverse(x, &parts))
                }
            };
            match resolved {
                Some(x) => Bson::Document(doc! { "$literal": x }),
                None => Bson::String("$$REMOVE".into()),
            }
        }
        Bson::Document(d) if d.len() == 1 && d.contains_key("$literal") => v.clone(),
        Bson::Document(d) => {
            let mut out = Document::new();
            for (k, x) in d {
                let bound = match (k.as_str(), x) {
                    // A nested sub-pipeline: its stages again.
                    ("pipeline", Bson::Array(stages)) => Bson::Array(
                        stages
                            .iter()
                            .map(|st| match st {
                                Bson::Document(sd) => Bson::Document(bind_stage(sd, vars)),
                                other => other.clone(),
                            })
                            .collect(),
                    ),
                    _ => bind_value(x, vars),
                };
                out.insert(k.clone(), bound);
            }
            Bson::Document(out)
        }
        Bson::Array(items) => Bson::Array(items.iter().map(|x| bind_value(x, vars)).collect()),
        other => other.clone(),
    }
}
