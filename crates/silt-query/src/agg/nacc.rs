//! The accumulators that keep several values: `$firstN`, `$lastN`, `$maxN`, `$minN`, `$top`,
//! `$bottom`, `$topN`, `$bottomN` (MongoDB 5.2+), and `$median`/`$percentile` (7.0, computed
//! exactly: the value at rank ⌈p·n⌉, which is what MongoDB's `approximate` method returns
//! for the data sizes where the two can be compared).

use bson::{Bson, Document};
use silt_bson::compare::{as_num, cmp_collated as cmp_values, Num};

use super::sort::SortSpec;
use crate::error::{QResult, QueryError};
use crate::expr::{type_name, Expr, Vars};

/// Which of the accumulators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    FirstN,
    LastN,
    MaxN,
    MinN,
    Top,
    Bottom,
    TopN,
    BottomN,
    Median,
    Percentile,
}

pub(crate) const NAMES: &[(&str, Kind)] = &[
    ("$firstN", Kind::FirstN),
    ("$lastN", Kind::LastN),
    ("$maxN", Kind::MaxN),
    ("$minN", Kind::MinN),
    ("$top", Kind::Top),
    ("$bottom", Kind::Bottom),
    ("$topN", Kind::TopN),
    ("$bottomN", Kind::BottomN),
    ("$median", Kind::Median),
    ("$percentile", Kind::Percentile),
];

/// A parsed accumulator of this family.
#[derive(Clone, Debug)]
pub(crate) struct NAcc {
    kind: Kind,
    /// `input` (or `output` for the sorted ones).
    value: Expr,
    /// `n` (absent for `$top`, `$bottom`, `$median`, `$percentile`).
    n: Option<Expr>,
    sort: Option<SortSpec>,
    /// `$percentile`'s `p`.
    p: Vec<f64>,
}

/// The running state: the values seen (with their sort keys for the sorted kinds).
#[derive(Clone, Debug, Default)]
pub(crate) struct NState {
    n: Option<usize>,
    items: Vec<(Vec<Bson>, Bson)>,
}

fn name_of(kind: Kind) -> &'static str {
    NAMES
        .iter()
        .find(|(_, k)| *k == kind)
        .map_or("", |(n, _)| n)
}

impl NAcc {
    pub(crate) fn parse(acc: &str, kind: Kind, spec: &Bson) -> QResult<NAcc> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::located(
                5787801,
                format!(
                    "specification must be an object; found {acc}: {}",
                    type_name(Some(spec))
                ),
            ));
        };
        let sorted = matches!(kind, Kind::Top | Kind::Bottom | Kind::TopN | Kind::BottomN);
        let wants_n = matches!(
            kind,
            Kind::FirstN | Kind::LastN | Kind::MaxN | Kind::MinN | Kind::TopN | Kind::BottomN
        );
        let stats = matches!(kind, Kind::Median | Kind::Percentile);
        let (mut value, mut n, mut sort, mut p, mut method) = (None, None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "input" if !sorted => value = Some(Expr::parse(v)?),
                "output" if sorted => value = Some(Expr::parse(v)?),
                "n" if wants_n => n = Some(Expr::parse(v)?),
                "sortBy" if sorted => sort = Some(SortSpec::parse(v)?),
                "p" if kind == Kind::Percentile => p = Some(v),
                "method" if stats => method = Some(v),
                other => {
                    return Err(QueryError::located(
                        5787901,
                        format!("Unknown argument for '{acc}': {other}"),
                    ))
                }
            }
        }
        let value = value.ok_or_else(|| {
            QueryError::located(
                5787907,
                format!(
                    "{acc} requires '{}'",
                    if sorted { "output" } else { "input" }
                ),
            )
        })?;
        if wants_n && n.is_none() {
            return Err(QueryError::located(5787906, format!("{acc} requires 'n'")));
        }
        if sorted && sort.is_none() {
            return Err(QueryError::located(
                5788005,
                format!("{acc} requires 'sortBy'"),
            ));
        }
        if stats {
            match method {
                Some(Bson::String(m)) if m == "approximate" => {}
                Some(Bson::String(m)) => {
                    return Err(QueryError::bad_value(format!(
                        "Currently only 'approximate' can be used as percentile 'method', not '{m}'"
                    )))
                }
                _ => {
                    return Err(QueryError::located(
                        40414,
                        format!("BSON field '{acc}.method' is missing but a required field"),
                    ))
                }
            }
        }
        let p = match (kind, p) {
            (Kind::Median, _) => vec![0.5],
            (Kind::Percentile, Some(Bson::Array(ps))) if !ps.is_empty() => ps
                .iter()
                .map(|x| match as_num(x) {
                    Some(n) => {
                        let f = match n {
                            Num::Int(i) => i as f64,
                            Num::Float(f) => f,
                        };
                        if (0.0..=1.0).contains(&f) {
                            Ok(f)
                        } else {
                            Err(QueryError::located(
                                7750301,
                                "The $percentile 'p' values must be between 0.0 and 1.0",
                            ))
                        }
                    }
                    None => Err(QueryError::located(
                        7750301,
                        "The $percentile 'p' values must be numbers",
                    )),
                })
                .collect::<QResult<_>>()?,
            (Kind::Percentile, _) => {
                return Err(QueryError::located(
                    7750301,
                    "$percentile requires 'p' to be a non-empty array of numbers",
                ))
            }
            _ => Vec::new(),
        };
        Ok(NAcc {
            kind,
            value,
            n,
            sort,
            p,
        })
    }

    pub(crate) fn update(&self, st: &mut NState, doc: &Document, vars: &Vars<'_>) -> QResult<()> {
        if st.n.is_none() {
            st.n = Some(match &self.n {
                None => 1,
                Some(e) => eval_n(name_of(self.kind), e.evaluate(doc, vars)?)?,
            });
        }
        let v = self.value.evaluate(doc, vars)?;
        match self.kind {
            Kind::MaxN | Kind::MinN | Kind::Median | Kind::Percentile => {
                let Some(v) = v.filter(|v| !matches!(v, Bson::Null | Bson::Undefined)) else {
                    return Ok(());
                };
                if matches!(self.kind, Kind::Median | Kind::Percentile) && as_num(&v).is_none() {
                    return Ok(());
                }
                st.items.push((Vec::new(), v));
            }
            Kind::Top | Kind::Bottom | Kind::TopN | Kind::BottomN => {
                let key = self.sort.as_ref().map(|s| s.key(doc)).unwrap_or_default();
                st.items.push((key, v.unwrap_or(Bson::Null)));
            }
            Kind::FirstN => {
                if st.items.len() < st.n.unwrap_or(1) {
                    st.items.push((Vec::new(), v.unwrap_or(Bson::Null)));
                }
            }
            Kind::LastN => {
                st.items.push((Vec::new(), v.unwrap_or(Bson::Null)));
                let n = st.n.unwrap_or(1);
                if st.items.len() > n.saturating_mul(2).max(64) {
                    let cut = st.items.len() - n;
                    st.items.drain(..cut);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn finish(&self, st: NState) -> Bson {
        let n = st.n.unwrap_or(1);
        let mut items = st.items;
        match self.kind {
            Kind::FirstN => Bson::Array(items.into_iter().take(n).map(|x| x.1).collect()),
            Kind::LastN => {
                let skip = items.len().saturating_sub(n);
                Bson::Array(items.into_iter().skip(skip).map(|x| x.1).collect())
            }
            Kind::MaxN | Kind::MinN => {
                items.sort_by(|a, b| cmp_values(&a.1, &b.1));
                if self.kind == Kind::MaxN {
                    items.reverse();
                }
                Bson::Array(items.into_iter().take(n).map(|x| x.1).collect())
            }
            Kind::Top | Kind::Bottom | Kind::TopN | Kind::BottomN => {
                if let Some(s) = &self.sort {
                    items.sort_by(|a, b| s.compare_keys(&a.0, &b.0));
                }
                let picked: Vec<Bson> = if matches!(self.kind, Kind::Top | Kind::TopN) {
                    items.into_iter().take(n).map(|x| x.1).collect()
                } else {
                    let skip = items.len().saturating_sub(n);
                    items.into_iter().skip(skip).map(|x| x.1).collect()
                };
                match self.kind {
                    Kind::Top | Kind::Bottom => picked.into_iter().next().unwrap_or(Bson::Null),
                    _ => Bson::Array(picked),
                }
            }
            Kind::Median | Kind::Percentile => {
                let mut vals: Vec<f64> = items
                    .iter()
                    .filter_map(|x| as_num(&x.1))
                    .map(|n| match n {
                        Num::Int(i) => i as f64,
                        Num::Float(f) => f,
                    })
                    .collect();
                vals.sort_by(|a, b| a.total_cmp(b));
                let at = |p: f64| -> Bson {
                    if vals.is_empty() {
                        return Bson::Null;
                    }
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "a percentile of the count; the saturating cast and the clamp \
                                  keep it in 1..=len"
                    )]
                    let rank = ((p * vals.len() as f64).ceil() as usize).clamp(1, vals.len());
                    Bson::Double(vals[rank - 1])
                };
                if self.kind == Kind::Median {
                    at(0.5)
                } else {
                    Bson::Array(self.p.iter().map(|p| at(*p)).collect())
                }
            }
        }
    }
}

/// `n`: a positive integer.
#[expect(
    clippy::cast_possible_truncation,
    reason = "an integral double n past usize::MAX saturates: no practical limit"
)]
pub(crate) fn eval_n(acc: &str, v: Option<Bson>) -> QResult<usize> {
    let v = v.unwrap_or(Bson::Null);
    match as_num(&v) {
        Some(Num::Int(i)) if i > 0 => Ok(usize::try_from(i).unwrap_or(usize::MAX)),
        Some(Num::Float(f)) if f > 0.0 && f.fract() == 0.0 => Ok(f as usize),
        Some(_) => Err(QueryError::located(
            5787908,
            format!(
                "'n' must be greater than 0, found {}",
                crate::expr::fmt_value(&v)
            ),
        )),
        None => Err(QueryError::located(
            5787902,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                crate::expr::fmt_value(&v)
            ),
        )),
    }
    .map_err(|e: QueryError| QueryError {
        msg: format!("{acc}: {}", e.msg),
        ..e
    })
}
