//! `$firstN`, `$lastN`, `$maxN`, `$minN` over an array, and `$sortArray`.

use bson::{Bson, Document};
use silt_bson::compare::cmp_collated as cmp_values;

use super::{fmt_value, Eval, Expr, Val};
use crate::error::{QResult, QueryError};

impl Eval<'_, '_> {
    pub(super) fn n_array(&self, name: &str, n: &Expr, input: &Expr) -> QResult<Val> {
        let n = crate::agg::eval_n(name, self.eval(n)?)?;
        let items = match self.eval(input)? {
            Some(Bson::Array(a)) => a,
            Some(Bson::Null) | None => return Ok(Some(Bson::Null)),
            Some(other) => {
                return Err(QueryError::located(
                    5788200,
                    format!("Input must be an array, found {}", fmt_value(&other)),
                ))
            }
        };
        let out: Vec<Bson> = match name {
            "$firstN" => items.into_iter().take(n).collect(),
            "$lastN" => {
                let skip = items.len().saturating_sub(n);
                items.into_iter().skip(skip).collect()
            }
            _ => {
                let mut vals: Vec<Bson> = items
                    .into_iter()
                    .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                    .collect();
                vals.sort_by(cmp_values);
                if name == "$maxN" {
                    vals.reverse();
                }
                vals.truncate(n);
                vals
            }
        };
        Ok(Some(Bson::Array(out)))
    }

    pub(super) fn sort_array(&self, input: &Expr, sort_by: &Bson) -> QResult<Val> {
        let mut items = match self.eval(input)? {
            Some(Bson::Array(a)) => a,
            Some(Bson::Null) | None => return Ok(Some(Bson::Null)),
            Some(other) => {
                return Err(QueryError::located(
                    2942505,
                    format!(
                        "The input argument to $sortArray must be an array, but was of type: {}",
                        super::type_name(Some(&other))
                    ),
                ))
            }
        };
        match sort_by {
            Bson::Document(spec) => {
                let sort = crate::plan::SortSpec::parse(spec)?;
                let empty = Document::new();
                items.sort_by(|a, b| {
                    let da = a.as_document().unwrap_or(&empty);
                    let db = b.as_document().unwrap_or(&empty);
                    sort.compare(da, db)
                });
            }
            dir => {
                let desc = matches!(dir, Bson::Int32(-1) | Bson::Int64(-1))
                    || matches!(dir, Bson::Double(f) if *f == -1.0);
                items.sort_by(cmp_values);
                if desc {
                    items.reverse();
                }
            }
        }
        Ok(Some(Bson::Array(items)))
    }
}
