//! Sort specifications of `find`, `findAndModify` and deletes: parsing, the key a document
//! sorts by, and comparing and sorting documents.

use std::cmp::Ordering;

use bson::{Bson, Document};
use silt_bson::compare::cmp_collated as cmp_values;

use crate::{QResult, QueryError};

/// The direction of one sort key that is not `$meta` (find's and `$sort`'s rule): 1 or -1
/// in any numeric type; another number is 15975, another type 15974 naming the element.
pub(crate) fn key_direction(key: &str, v: &Bson) -> QResult<bool> {
    let x = match silt_bson::compare::as_num(v) {
        Some(silt_bson::compare::Num::Int(i)) => i as f64,
        Some(silt_bson::compare::Num::Float(f)) => f,
        None => {
            let shown = crate::expr::fmt_doc(&bson::doc! { key: v.clone() });
            return Err(QueryError::located(
                15974,
                format!(
                    "Illegal key in $sort specification: {}",
                    shown.trim_start_matches("{ ").trim_end_matches(" }")
                ),
            ));
        }
    };
    if x == 1.0 {
        Ok(true)
    } else if x == -1.0 {
        Ok(false)
    } else {
        Err(QueryError::located(
            15975,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
        ))
    }
}

/// A parsed sort specification.
#[derive(Debug, Clone)]
pub struct SortSpec(pub Vec<(String, bool)>);

impl SortSpec {
    pub fn parse(spec: &Document) -> QResult<SortSpec> {
        let mut keys = Vec::new();
        for (k, v) in spec {
            if k.is_empty() {
                return Err(QueryError::bad_value("empty sort field name"));
            }
            let asc = match v {
                // A `$text` query's score, highest first (`crate::text::SCORE_FIELD`).
                Bson::Document(m) if m.get_str("$meta") == Ok("textScore") && m.len() == 1 => {
                    keys.push((crate::text::SCORE_FIELD.to_string(), false));
                    continue;
                }
                Bson::Document(m) if m.contains_key("$meta") => {
                    return Err(QueryError::not_implemented(format!(
                        "$meta sort {m} is not supported (only textScore)"
                    )))
                }
                _ => key_direction(k, v)?,
            };
            keys.push((k.clone(), asc));
        }
        Ok(SortSpec(keys))
    }

    /// Compare two documents in this order.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        for (path, asc) in &self.0 {
            let va = sort_value(a, path, *asc);
            let vb = sort_value(b, path, *asc);
            let o = cmp_values(&va, &vb);
            let o = if *asc { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Sort documents; precomputes each document's keys once.
    pub fn sort(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut keyed: Vec<(Vec<Bson>, Document)> = docs
            .into_iter()
            .map(|d| {
                let ks = self
                    .0
                    .iter()
                    .map(|(p, asc)| sort_value(&d, p, *asc))
                    .collect();
                (ks, d)
            })
            .collect();
        keyed.sort_by(|(ka, _), (kb, _)| {
            for ((x, y), (_, asc)) in ka.iter().zip(kb.iter()).zip(self.0.iter()) {
                let o = cmp_values(x, y);
                let o = if *asc { o } else { o.reverse() };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
        keyed.into_iter().map(|(_, d)| d).collect()
    }
}

/// Collect every value a sort on `path` considers (arrays fan out).
fn collect_values(v: &Bson, parts: &[&str], out: &mut Vec<Bson>) {
    if parts.is_empty() {
        match v {
            Bson::Array(a) if a.is_empty() => out.push(Bson::Undefined),
            Bson::Array(a) => out.extend(a.iter().cloned()),
            other => out.push(other.clone()),
        }
        return;
    }
    match v {
        Bson::Document(d) => match d.get(parts[0]) {
            Some(x) => collect_values(x, &parts[1..], out),
            None => out.push(Bson::Null),
        },
        Bson::Array(a) => {
            if let Ok(i) = parts[0].parse::<usize>() {
                if let Some(x) = a.get(i) {
                    collect_values(x, &parts[1..], out);
                    return;
                }
            }
            for x in a {
                if let Bson::Document(_) = x {
                    collect_values(x, parts, out);
                }
            }
            if out.is_empty() {
                out.push(Bson::Null);
            }
        }
        _ => out.push(Bson::Null),
    }
}

/// The value a document sorts by on `path`: the smallest element of arrays when ascending,
/// the largest when descending; missing is null.
pub fn sort_value(doc: &Document, path: &str, asc: bool) -> Bson {
    let parts: Vec<&str> = path.split('.').collect();
    let mut vals = Vec::new();
    match doc.get(parts[0]) {
        Some(v) => collect_values(v, &parts[1..], &mut vals),
        None => return Bson::Null,
    }
    // An empty array sorts before null, as in MongoDB (undefined stands in for it).
    let pick = if asc {
        vals.into_iter().min_by(cmp_values)
    } else {
        vals.into_iter().max_by(cmp_values)
    };
    match pick {
        Some(v) => v,
        None => Bson::Null,
    }
}
