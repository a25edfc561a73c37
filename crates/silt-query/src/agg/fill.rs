//! `$fill` (null and missing values filled by a value, the last value seen, or linear
//! interpolation) and `$densify` (documents added so that a numeric or date field takes every
//! step of a range), MongoDB 5.1+/5.3+.

use std::collections::BTreeMap;

use bson::{Bson, Document};
use silt_bson::compare::{as_num, cmp_values, Num};

use super::sort::SortSpec;
use crate::error::{QResult, QueryError};
use crate::expr::{path_parts, Expr, ValueKey, Vars};

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::failed_to_parse(msg)
}

fn num(v: &Bson) -> Option<f64> {
    as_num(v).map(|n| match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    })
}

#[derive(Clone, Debug)]
enum FillHow {
    Value(Expr),
    Locf,
    Linear,
}

/// A parsed `$fill`.
#[derive(Clone, Debug)]
pub(crate) struct Fill {
    partition_by: Option<Expr>,
    sort_by: Option<SortSpec>,
    sort_field: Option<String>,
    outputs: Vec<(String, Vec<String>, FillHow)>,
}

/// Partition `docs` by `key`, keeping the order of first appearance.
pub(crate) fn partitions(
    docs: Vec<Document>,
    mut key: impl FnMut(&Document) -> QResult<Bson>,
) -> QResult<Vec<Vec<Document>>> {
    let mut index: BTreeMap<ValueKey, usize> = BTreeMap::new();
    let mut parts: Vec<Vec<Document>> = Vec::new();
    for d in docs {
        let k = key(&d)?;
        let i = *index.entry(ValueKey(k)).or_insert_with(|| {
            parts.push(Vec::new());
            parts.len() - 1
        });
        parts[i].push(d);
    }
    Ok(parts)
}

/// Partition `docs` by the `partitionBy` expression (all in one when absent), keeping the
/// order of first appearance, and sort each partition by `sortBy` when given. Shared by
/// `$fill` and `$setWindowFields`.
pub(crate) fn sorted_partitions(
    docs: Vec<Document>,
    partition_by: Option<&Expr>,
    sort_by: Option<&SortSpec>,
    vars: &Vars<'_>,
) -> QResult<Vec<Vec<Document>>> {
    let parts = partitions(docs, |d| match partition_by {
        Some(e) => Ok(e.evaluate(d, vars)?.unwrap_or(Bson::Null)),
        None => Ok(Bson::Null),
    })?;
    Ok(match sort_by {
        Some(s) => parts.into_iter().map(|p| s.sort(p)).collect(),
        None => parts,
    })
}

fn fields_key(d: &Document, fields: &[String]) -> Bson {
    Bson::Array(
        fields
            .iter()
            .map(|f| {
                silt_bson::path::get_path(d, f)
                    .cloned()
                    .unwrap_or(Bson::Null)
            })
            .collect(),
    )
}

impl Fill {
    pub(crate) fn parse(spec: &Bson) -> QResult<Fill> {
        let Bson::Document(d) = spec else {
            return Err(bad("$fill specification must be an object"));
        };
        let mut partition_by = None;
        let mut sort_by = None;
        let mut sort_field = None;
        let mut outputs = Vec::new();
        for (k, v) in d {
            match k.as_str() {
                "partitionBy" => partition_by = Some(Expr::parse(v)?),
                "partitionByFields" => {
                    let Bson::Array(a) = v else {
                        return Err(bad("partitionByFields must be an array of strings"));
                    };
                    let obj: Document = a
                        .iter()
                        .filter_map(|f| f.as_str())
                        .map(|f| (f.replace('.', "_"), Bson::String(format!("${f}"))))
                        .collect();
                    partition_by = Some(Expr::parse(&Bson::Document(obj))?);
                }
                "sortBy" => {
                    let Bson::Document(s) = v else {
                        return Err(bad("sortBy must be an object"));
                    };
                    sort_field = s.keys().next().cloned();
                    sort_by = Some(SortSpec::parse(v)?);
                }
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(bad("output must be an object"));
                    };
                    for (field, how) in o {
                        let Bson::Document(h) = how else {
                            return Err(bad(format!("output field '{field}' must be an object")));
                        };
                        let how = match (h.get("value"), h.get("method")) {
                            (Some(v), None) => FillHow::Value(Expr::parse(v)?),
                            (None, Some(Bson::String(m))) if m == "locf" => FillHow::Locf,
                            (None, Some(Bson::String(m))) if m == "linear" => FillHow::Linear,
                            (None, Some(m)) => {
                                return Err(bad(format!("Method must be either locf or linear, not {m}")))
                            }
                            _ => {
                                return Err(bad(format!(
                                    "Exactly one of 'value' and 'method' must be specified for '{field}'"
                                )))
                            }
                        };
                        if matches!(how, FillHow::Locf | FillHow::Linear)
                            && sort_by.is_none()
                            && !d.contains_key("sortBy")
                        {
                            return Err(bad("sortBy is required for methods locf and linear"));
                        }
                        outputs.push((field.clone(), path_parts(field)?, how));
                    }
                }
                other => {
                    return Err(QueryError::located(
                        40415,
                        format!("BSON field '$fill.{other}' is an unknown field."),
                    ))
                }
            }
        }
        if outputs.is_empty() {
            return Err(bad("$fill requires 'output'"));
        }
        Ok(Fill {
            partition_by,
            sort_by,
            sort_field,
            outputs,
        })
    }

    pub(crate) fn run(&self, docs: Vec<Document>, vars: &Vars<'_>) -> QResult<Vec<Document>> {
        let parts = sorted_partitions(
            docs,
            self.partition_by.as_ref(),
            self.sort_by.as_ref(),
            vars,
        )?;
        let mut out = Vec::new();
        for mut part in parts {
            for (field, path, how) in &self.outputs {
                let missing = |d: &Document| {
                    matches!(
                        silt_bson::path::get_path(d, field),
                        None | Some(Bson::Null | Bson::Undefined)
                    )
                };
                match how {
                    FillHow::Value(e) => {
                        for d in part.iter_mut() {
                            if missing(d) {
                                let v = e.evaluate(d, vars)?.unwrap_or(Bson::Null);
                                super::stages::set_path(d, path, v);
                            }
                        }
                    }
                    FillHow::Locf => {
                        let mut last: Option<Bson> = None;
                        for d in part.iter_mut() {
                            if missing(d) {
                                if let Some(v) = &last {
                                    super::stages::set_path(d, path, v.clone());
                                }
                            } else {
                                last = silt_bson::path::get_path(d, field).cloned();
                            }
                        }
                    }
                    FillHow::Linear => {
                        let sort_field = self.sort_field.clone().unwrap_or_default();
                        let xs: Vec<Option<f64>> = part
                            .iter()
                            .map(|d| {
                                silt_bson::path::get_path(d, &sort_field).and_then(|v| match v {
                                    Bson::DateTime(t) => Some(t.timestamp_millis() as f64),
                                    other => num(other),
                                })
                            })
                            .collect();
                        let ys: Vec<Option<f64>> = part
                            .iter()
                            .map(|d| silt_bson::path::get_path(d, field).and_then(num))
                            .collect();
                        for i in 0..part.len() {
                            if ys[i].is_some() || !missing(&part[i]) {
                                continue;
                            }
                            let prev = (0..i).rev().find(|&j| ys[j].is_some());
                            let next = (i + 1..part.len()).find(|&j| ys[j].is_some());
                            if let (Some(p), Some(n), Some(x)) = (prev, next, xs[i]) {
                                if let (Some(xp), Some(xn), Some(yp), Some(yn)) =
                                    (xs[p], xs[n], ys[p], ys[n])
                                {
                                    let y = if xn == xp {
                                        yp
                                    } else {
                                        yp + (yn - yp) * (x - xp) / (xn - xp)
                                    };
                                    super::stages::set_path(&mut part[i], path, Bson::Double(y));
                                }
                            }
                        }
                    }
                }
            }
            out.extend(part);
        }
        Ok(out)
    }
}

#[derive(Clone, Debug)]
enum Bounds {
    Full,
    Partition,
    Explicit(Box<(Bson, Bson)>),
}

/// A parsed `$densify`.
#[derive(Clone, Debug)]
pub(crate) struct Densify {
    field: String,
    path: Vec<String>,
    partition_fields: Vec<String>,
    step: f64,
    /// Milliseconds per unit, for dates.
    unit: Option<f64>,
    bounds: Bounds,
}

impl Densify {
    pub(crate) fn parse(spec: &Bson) -> QResult<Densify> {
        let Bson::Document(d) = spec else {
            return Err(bad("$densify specification must be an object"));
        };
        let field = d
            .get_str("field")
            .map_err(|_| bad("$densify requires 'field' as a string"))?
            .to_string();
        let partition_fields = match d.get("partitionByFields") {
            None => Vec::new(),
            Some(Bson::Array(a)) => a
                .iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect(),
            Some(_) => return Err(bad("partitionByFields must be an array of strings")),
        };
        let Ok(range) = d.get_document("range") else {
            return Err(bad("$densify requires 'range' as an object"));
        };
        let step = range.get("step").and_then(num).filter(|s| *s > 0.0).ok_or_else(|| {
            QueryError::located(5733401, "the step parameter in a range statement must be a strictly positive numeric value")
        })?;
        let unit = match range.get("unit") {
            None => None,
            Some(Bson::String(u)) => Some(super::window_fns::unit_ms(u).ok_or_else(|| {
                QueryError::not_implemented(format!(
                    "$densify unit '{u}' is not supported (millisecond to week are)"
                ))
            })?),
            Some(_) => return Err(bad("unit must be a string")),
        };
        let bounds = match range.get("bounds") {
            Some(Bson::String(s)) if s == "full" => Bounds::Full,
            Some(Bson::String(s)) if s == "partition" => Bounds::Partition,
            Some(Bson::Array(a)) if a.len() == 2 => {
                Bounds::Explicit(Box::new((a[0].clone(), a[1].clone())))
            }
            _ => {
                return Err(bad(
                    "bounds must be 'full', 'partition' or an array of two values",
                ))
            }
        };
        Ok(Densify {
            path: path_parts(&field)?,
            field,
            partition_fields,
            step,
            unit,
            bounds,
        })
    }

    fn pos(&self, v: &Bson) -> Option<f64> {
        match (v, self.unit) {
            (Bson::DateTime(t), Some(u)) => Some(t.timestamp_millis() as f64 / u),
            (Bson::DateTime(_), None) => None,
            (other, None) => num(other),
            (_, Some(_)) => None,
        }
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "with a unit, p lies between two bounds that are dates, so p * u is within the \
                  i64 milliseconds range (saturating at its very edges); the Int32 arm is \
                  integral and below 2^31 in magnitude (checked)"
    )]
    fn value_at(&self, p: f64) -> Bson {
        match self.unit {
            Some(u) => Bson::DateTime(bson::DateTime::from_millis((p * u).round() as i64)),
            None if p.fract() == 0.0 && p.abs() < 2f64.powi(31) => Bson::Int32(p as i32),
            None => Bson::Double(p),
        }
    }

    pub(crate) fn run(&self, docs: Vec<Document>) -> QResult<Vec<Document>> {
        for d in &docs {
            if let Some(v) = silt_bson::path::get_path(d, &self.field) {
                if !matches!(v, Bson::Null) && self.pos(v).is_none() {
                    return Err(QueryError::located(
                        5733201,
                        "$densify: the field must be numeric (or a date when a unit is given) in every document",
                    ));
                }
            }
        }
        let positions = |ds: &[Document]| -> Vec<f64> {
            ds.iter()
                .filter_map(|d| silt_bson::path::get_path(d, &self.field).and_then(|v| self.pos(v)))
                .collect()
        };
        let all = positions(&docs);
        let global = all
            .iter()
            .cloned()
            .fold(None, |acc: Option<(f64, f64)>, p| {
                Some(acc.map_or((p, p), |(lo, hi)| (lo.min(p), hi.max(p))))
            });
        let parts = partitions(docs, |d| Ok(fields_key(d, &self.partition_fields)))?;
        let mut out = Vec::new();
        for part in parts {
            let mut part = part;
            part.sort_by(|a, b| {
                cmp_values(
                    silt_bson::path::get_path(a, &self.field).unwrap_or(&Bson::Null),
                    silt_bson::path::get_path(b, &self.field).unwrap_or(&Bson::Null),
                )
            });
            let mine = positions(&part);
            let range = match &self.bounds {
                Bounds::Full => global.map(|(lo, hi)| (lo, hi, true)),
                Bounds::Partition => mine
                    .iter()
                    .cloned()
                    .fold(None, |acc: Option<(f64, f64)>, p| {
                        Some(acc.map_or((p, p), |(lo, hi)| (lo.min(p), hi.max(p))))
                    })
                    .map(|(lo, hi)| (lo, hi, true)),
                Bounds::Explicit(b) => match (self.pos(&b.0), self.pos(&b.1)) {
                    (Some(l), Some(h)) => Some((l, h, false)),
                    _ => {
                        return Err(QueryError::located(
                            5733403,
                            "$densify bounds must match the field's type",
                        ))
                    }
                },
            };
            let template: Document = self
                .partition_fields
                .iter()
                .filter_map(|f| {
                    part.first()
                        .and_then(|d| silt_bson::path::get_path(d, f))
                        .map(|v| (f.clone(), v.clone()))
                })
                .collect();
            let mut generated = Vec::new();
            if let Some((lo, hi, inclusive)) = range {
                let mut p = lo;
                let mut steps = 0u64;
                while (p < hi || (inclusive && p <= hi)) && steps < 1_000_000 {
                    if !mine.iter().any(|m| (m - p).abs() < 1e-9) {
                        let mut d = template.clone();
                        super::stages::set_path(&mut d, &self.path, self.value_at(p));
                        generated.push((p, d));
                    }
                    steps += 1;
                    p = lo + self.step * steps as f64;
                }
                if steps >= 1_000_000 {
                    return Err(QueryError::located(
                        5897900,
                        "$densify would generate more than 1,000,000 documents",
                    ));
                }
            }
            // Merge the generated documents into the partition's order.
            let mut merged = Vec::with_capacity(part.len() + generated.len());
            let mut gen = generated.into_iter().peekable();
            for d in part {
                let p = silt_bson::path::get_path(&d, &self.field).and_then(|v| self.pos(v));
                while let Some((gp, _)) = gen.peek() {
                    if p.is_some_and(|p| *gp < p) {
                        merged.push(gen.next().map(|g| g.1).unwrap_or_default());
                    } else {
                        break;
                    }
                }
                merged.push(d);
            }
            merged.extend(gen.map(|g| g.1));
            out.extend(merged);
        }
        Ok(out)
    }
}
