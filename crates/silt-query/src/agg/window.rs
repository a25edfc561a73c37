//! `$setWindowFields` (MongoDB 5.0+): for each document, values computed over a window of the
//! documents of its partition in `sortBy` order.
//!
//! Supported: `partitionBy`, `sortBy`, and outputs that are `$group` accumulators (`$sum`,
//! `$avg`, `$min`, `$max`, `$count`, `$first`, `$last`, `$push`, `$addToSet`, `$stdDevPop`,
//! `$stdDevSamp`, `$mergeObjects`, `$firstN`, `$topN`, `$median`, ...) over a `documents`
//! window or a `range` window (numeric, or dates with `unit`), the default window being the
//! whole partition; `$rank`, `$denseRank`, `$documentNumber`, `$shift` and `$locf`; and
//! (`window_fns.rs`) `$derivative`, `$integral`, `$expMovingAvg`, `$covariancePop`,
//! `$covarianceSamp` and `$linearFill`. Output documents come partition by partition, each in
//! `sortBy` order.

use bson::{Bson, Document};
use silt_bson::compare::{as_num, collated_equal as values_equal, Num};

use super::group::Accumulator;
use super::sort::SortSpec;
use super::window_fns;
use crate::error::{QResult, QueryError};
use crate::expr::{path_parts, Expr, Vars};

#[derive(Clone, Debug)]
enum Bound {
    Unbounded,
    Current,
    Offset(f64),
}

#[derive(Clone, Debug)]
enum Window {
    Documents(Bound, Bound),
    /// `unit`: milliseconds per unit for date ranges.
    Range(Bound, Bound, Option<f64>),
}

#[derive(Clone, Debug)]
enum Func {
    Acc(Accumulator, Window),
    Rank,
    DenseRank,
    DocumentNumber,
    Shift {
        output: Expr,
        by: i64,
        default: Bson,
    },
    Locf(Expr),
    /// `$derivative` / `$integral`: input, output unit (ms per unit) for a date axis, window.
    Rate {
        integral: bool,
        input: Expr,
        unit: Option<f64>,
        window: Window,
    },
    Ema(Expr, f64),
    Covariance {
        a: Expr,
        b: Expr,
        sample: bool,
        window: Window,
    },
    LinearFill(Expr),
}

#[derive(Clone, Debug)]
struct Output {
    path: Vec<String>,
    func: Func,
}

/// A parsed `$setWindowFields`.
#[derive(Clone, Debug)]
pub(crate) struct SetWindowFields {
    partition_by: Option<Expr>,
    sort_by: Option<SortSpec>,
    outputs: Vec<Output>,
}

fn bad(msg: impl Into<String>) -> QueryError {
    QueryError::failed_to_parse(msg)
}

fn parse_bound(v: &Bson, docs: bool) -> QResult<Bound> {
    match v {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        other => match as_num(other) {
            Some(Num::Int(i)) => Ok(Bound::Offset(i as f64)),
            Some(Num::Float(f)) if !docs || f.fract() == 0.0 => Ok(Bound::Offset(f)),
            _ => Err(bad(
                "Window bounds must be 'unbounded', 'current', or a number (an integer for \
                 'documents')",
            )),
        },
    }
}

fn parse_window(v: &Bson) -> QResult<Window> {
    let Bson::Document(d) = v else {
        return Err(bad("'window' field must be an object"));
    };
    let pair = |v: &Bson, docs: bool| -> QResult<(Bound, Bound)> {
        match v {
            Bson::Array(a) if a.len() == 2 => {
                Ok((parse_bound(&a[0], docs)?, parse_bound(&a[1], docs)?))
            }
            _ => Err(bad("Window bounds must be a 2-element array")),
        }
    };
    let mut unit = None;
    if let Some(u) = d.get("unit") {
        let Bson::String(u) = u else {
            return Err(bad("'unit' must be a string"));
        };
        unit = Some(window_fns::unit_ms(u).ok_or_else(|| {
            QueryError::not_implemented(format!(
                "window unit '{u}' is not supported (millisecond to week are)"
            ))
        })?);
    }
    for k in d.keys() {
        if !matches!(k.as_str(), "documents" | "range" | "unit") {
            return Err(bad(format!("'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field, not '{k}'")));
        }
    }
    match (d.get("documents"), d.get("range")) {
        (Some(v), None) if unit.is_none() => {
            let (lo, hi) = pair(v, true)?;
            Ok(Window::Documents(lo, hi))
        }
        (None, Some(v)) => {
            let (lo, hi) = pair(v, false)?;
            Ok(Window::Range(lo, hi, unit))
        }
        _ => Err(bad(
            "'window' field must specify either 'documents' or 'range'",
        )),
    }
}

impl SetWindowFields {
    pub(crate) fn parse(spec: &Bson) -> QResult<SetWindowFields> {
        let Bson::Document(d) = spec else {
            return Err(bad(
                "the $setWindowFields stage specification must be an object",
            ));
        };
        let mut partition_by = None;
        let mut sort_by = None;
        let mut output = None;
        for (k, v) in d {
            match k.as_str() {
                "partitionBy" => partition_by = Some(Expr::parse(v)?),
                "sortBy" => {
                    let Bson::Document(s) = v else {
                        return Err(bad("'sortBy' must be an object"));
                    };
                    sort_by = Some(SortSpec::parse(&Bson::Document(s.clone()))?);
                }
                "output" => output = Some(v),
                other => {
                    return Err(QueryError::located(
                        40415,
                        format!("BSON field '$setWindowFields.{other}' is an unknown field."),
                    ))
                }
            }
        }
        let Some(Bson::Document(out)) = output else {
            return Err(QueryError::located(
                40414,
                "BSON field '$setWindowFields.output' is missing but a required field",
            ));
        };
        let mut outputs = Vec::new();
        for (field, f) in out {
            let Bson::Document(fd) = f else {
                return Err(bad(format!("The field '{field}' must be an object")));
            };
            let window = fd.get("window").map(parse_window).transpose()?;
            let ops: Vec<(&String, &Bson)> = fd.iter().filter(|(k, _)| *k != "window").collect();
            let [(op, arg)] = ops.as_slice() else {
                return Err(bad(format!(
                    "Expected exactly one function for window field '{field}'"
                )));
            };
            let needs_sort = |name: &str| -> QResult<()> {
                if sort_by.is_none() {
                    return Err(bad(format!("{name} must be specified with a top level sortBy expression with exactly one element")));
                }
                if window.is_some() {
                    return Err(bad(format!("{name} does not accept a 'window' field")));
                }
                Ok(())
            };
            let func = match op.as_str() {
                "$rank" => {
                    needs_sort("$rank")?;
                    Func::Rank
                }
                "$denseRank" => {
                    needs_sort("$denseRank")?;
                    Func::DenseRank
                }
                "$documentNumber" => {
                    needs_sort("$documentNumber")?;
                    Func::DocumentNumber
                }
                "$shift" => {
                    needs_sort("$shift")?;
                    let Bson::Document(a) = arg else {
                        return Err(bad("$shift must be an object"));
                    };
                    let output = Expr::parse(
                        a.get("output")
                            .ok_or_else(|| bad("$shift requires 'output'"))?,
                    )?;
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "an integral double; a shift past the i64 range saturates"
                    )]
                    let by = match a.get("by").and_then(as_num) {
                        Some(Num::Int(i)) => i,
                        Some(Num::Float(f)) if f.fract() == 0.0 => f as i64,
                        _ => return Err(bad("$shift requires 'by' as an integer")),
                    };
                    let default = a.get("default").cloned().unwrap_or(Bson::Null);
                    Func::Shift {
                        output,
                        by,
                        default,
                    }
                }
                "$locf" => Func::Locf(Expr::parse(arg)?),
                "$derivative" | "$integral" => {
                    if sort_by.as_ref().is_none_or(|s| s.len() != 1) {
                        return Err(bad(format!("{op} requires a sortBy on exactly one field")));
                    }
                    let integral = op.as_str() == "$integral";
                    let (input, unit) = window_fns::parse_rate(op, arg)?;
                    let window = match (&window, integral) {
                        (Some(w), _) => w.clone(),
                        (None, true) => Window::Documents(Bound::Unbounded, Bound::Unbounded),
                        (None, false) => {
                            return Err(QueryError::located(
                                5624901,
                                "$derivative requires explicit window bounds",
                            ))
                        }
                    };
                    Func::Rate {
                        integral,
                        input,
                        unit,
                        window,
                    }
                }
                "$expMovingAvg" => {
                    needs_sort("$expMovingAvg")?;
                    let (input, alpha) = window_fns::parse_ema(arg)?;
                    Func::Ema(input, alpha)
                }
                "$covariancePop" | "$covarianceSamp" => {
                    let (a, b) = window_fns::parse_pair(op, arg)?;
                    Func::Covariance {
                        a,
                        b,
                        sample: op.as_str() == "$covarianceSamp",
                        window: window
                            .clone()
                            .unwrap_or(Window::Documents(Bound::Unbounded, Bound::Unbounded)),
                    }
                }
                "$linearFill" => {
                    needs_sort("$linearFill")?;
                    if sort_by.as_ref().is_some_and(|s| s.len() != 1) {
                        return Err(bad("$linearFill requires a sortBy on exactly one field"));
                    }
                    Func::LinearFill(Expr::parse(arg)?)
                }
                _ => {
                    let mut acc = Document::new();
                    acc.insert(op.as_str(), (*arg).clone());
                    let acc = Accumulator::parse(
                        field.split('.').next_back().unwrap_or("x"),
                        &Bson::Document(acc),
                    )?;
                    let window = window
                        .clone()
                        .unwrap_or(Window::Documents(Bound::Unbounded, Bound::Unbounded));
                    if matches!(window, Window::Range(..))
                        && sort_by.as_ref().is_none_or(|s| s.len() != 1)
                    {
                        return Err(bad("Range-based window require sortBy a single field"));
                    }
                    if matches!(
                        window,
                        Window::Documents(Bound::Offset(_) | Bound::Current, _)
                            | Window::Documents(_, Bound::Offset(_) | Bound::Current)
                    ) && sort_by.is_none()
                    {
                        return Err(bad("Document-based bounds require a sortBy"));
                    }
                    Func::Acc(acc, window)
                }
            };
            outputs.push(Output {
                path: path_parts(field)?,
                func,
            });
        }
        Ok(SetWindowFields {
            partition_by,
            sort_by,
            outputs,
        })
    }

    pub(crate) fn run(&self, docs: Vec<Document>, vars: &Vars<'_>) -> QResult<Vec<Document>> {
        // Partitions, in the order their first document arrived, each in `sortBy` order.
        let parts = super::fill::sorted_partitions(
            docs,
            self.partition_by.as_ref(),
            self.sort_by.as_ref(),
            vars,
        )?;
        let mut out = Vec::new();
        for part in parts {
            let keys: Vec<Vec<Bson>> = match &self.sort_by {
                Some(s) => part.iter().map(|d| s.key(d)).collect(),
                None => Vec::new(),
            };
            let mut values: Vec<Vec<Bson>> = Vec::with_capacity(self.outputs.len());
            for o in &self.outputs {
                values.push(self.compute(&o.func, &part, &keys, vars)?);
            }
            for (i, mut d) in part.into_iter().enumerate() {
                for (o, vals) in self.outputs.iter().zip(&values) {
                    super::stages::set_path(&mut d, &o.path, vals[i].clone());
                }
                out.push(d);
            }
        }
        Ok(out)
    }

    #[expect(
        clippy::cast_possible_truncation,
        reason = "document numbers and ranks count the documents of one partition, held in memory \
                  (far below 2^31); a shifted position `j` is checked to be in 0..n"
    )]
    fn compute(
        &self,
        func: &Func,
        part: &[Document],
        keys: &[Vec<Bson>],
        vars: &Vars<'_>,
    ) -> QResult<Vec<Bson>> {
        let n = part.len();
        let same = |a: &[Bson], b: &[Bson]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_equal(x, y))
        };
        Ok(match func {
            Func::DocumentNumber => (1..=n).map(|i| Bson::Int32(i as i32)).collect(),
            Func::Rank => {
                let mut out = Vec::with_capacity(n);
                let mut rank = 1;
                for i in 0..n {
                    if i > 0 && !same(&keys[i], &keys[i - 1]) {
                        rank = i + 1;
                    }
                    out.push(Bson::Int32(rank as i32));
                }
                out
            }
            Func::DenseRank => {
                let mut out = Vec::with_capacity(n);
                let mut rank = 1;
                for i in 0..n {
                    if i > 0 && !same(&keys[i], &keys[i - 1]) {
                        rank += 1;
                    }
                    out.push(Bson::Int32(rank));
                }
                out
            }
            Func::Shift {
                output,
                by,
                default,
            } => (0..n as i64)
                .map(|i| {
                    let j = i.saturating_add(*by);
                    if j < 0 || j >= n as i64 {
                        return Ok(default.clone());
                    }
                    Ok(output
                        .evaluate(&part[j as usize], vars)?
                        .unwrap_or(Bson::Null))
                })
                .collect::<QResult<_>>()?,
            Func::Locf(e) => {
                let mut last = Bson::Null;
                let mut out = Vec::with_capacity(n);
                for d in part {
                    match e.evaluate(d, vars)? {
                        Some(v) if !matches!(v, Bson::Null | Bson::Undefined) => {
                            last = v.clone();
                            out.push(v);
                        }
                        _ => out.push(last.clone()),
                    }
                }
                out
            }
            Func::Rate {
                integral,
                input,
                unit,
                window,
            } => {
                let name = if *integral {
                    "$integral"
                } else {
                    "$derivative"
                };
                let x = window_fns::axis(keys, *unit, name)?;
                let pos = range_positions(window, keys)?;
                let mut out = Vec::with_capacity(n);
                for i in 0..n {
                    let idx = window_indices(window, i, n, &pos).unwrap_or_default();
                    out.push(if *integral {
                        window_fns::integral(part, &idx, &x, input, vars)?
                    } else {
                        window_fns::derivative(part, &idx, &x, input, vars)?
                    });
                }
                out
            }
            Func::Ema(input, alpha) => window_fns::ema(part, input, *alpha, vars)?,
            Func::Covariance {
                a,
                b,
                sample,
                window,
            } => {
                let pos = range_positions(window, keys)?;
                let mut out = Vec::with_capacity(n);
                for i in 0..n {
                    let idx = window_indices(window, i, n, &pos).unwrap_or_default();
                    out.push(window_fns::covariance(part, &idx, (a, b), *sample, vars)?);
                }
                out
            }
            Func::LinearFill(input) => {
                let dates = keys
                    .iter()
                    .any(|k| matches!(k.first(), Some(Bson::DateTime(_))));
                let x = window_fns::axis(keys, dates.then_some(1.0), "$linearFill")?;
                window_fns::linear_fill(part, &x, input, vars)?
            }
            Func::Acc(acc, window) => {
                let mut out = Vec::with_capacity(n);
                match window {
                    Window::Documents(Bound::Unbounded, Bound::Unbounded) => {
                        let mut st = acc.init();
                        for d in part {
                            acc.update(&mut st, d, vars)?;
                        }
                        let v = acc.finish(st);
                        out.resize(n, v);
                    }
                    Window::Documents(Bound::Unbounded, Bound::Current) => {
                        let mut st = acc.init();
                        for d in part {
                            acc.update(&mut st, d, vars)?;
                            out.push(acc.finish(st.clone()));
                        }
                    }
                    _ => {
                        let pos = range_positions(window, keys)?;
                        for i in 0..n {
                            let Some(idx) = window_indices(window, i, n, &pos) else {
                                out.push(Bson::Null);
                                continue;
                            };
                            let mut st = acc.init();
                            for j in idx {
                                acc.update(&mut st, &part[j], vars)?;
                            }
                            out.push(acc.finish(st));
                        }
                    }
                }
                out
            }
        })
    }
}

/// Each document's place on the `sortBy` axis for a range window (in `unit`s for dates);
/// empty for a documents window.
fn range_positions(window: &Window, keys: &[Vec<Bson>]) -> QResult<Vec<Option<f64>>> {
    let Window::Range(_, _, unit) = window else {
        return Ok(Vec::new());
    };
    keys.iter()
        .map(|k| match (k.first(), unit) {
            (Some(Bson::DateTime(t)), Some(u)) => Ok(Some(t.timestamp_millis() as f64 / u)),
            (Some(Bson::DateTime(_)), None) => Err(bad("Invalid range: Expected the sortBy field to be a number, but it was Date; a 'unit' is required")),
            (Some(v), None) => Ok(as_num(v).map(|n| match n {
                Num::Int(i) => i as f64,
                Num::Float(f) => f,
            })),
            (Some(_), Some(_)) => Err(bad("Invalid range: Expected the sortBy field to be a Date, because a 'unit' was given")),
            (None, _) => Ok(None),
        })
        .collect()
}

/// The documents in `window` around document `i` of a partition of `n` (`pos`: from
/// [`range_positions`]); `None` for a range window around a document with no position.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a documents-window offset is integral (parse_bound) and saturates past the i64 \
              range; each position kept is clamped into 0..n"
)]
fn window_indices(window: &Window, i: usize, n: usize, pos: &[Option<f64>]) -> Option<Vec<usize>> {
    Some(match window {
        Window::Documents(lo, hi) => {
            let lo = match lo {
                Bound::Unbounded => 0i64,
                Bound::Current => i as i64,
                Bound::Offset(o) => (i as i64).saturating_add(*o as i64),
            };
            let hi = match hi {
                Bound::Unbounded => n as i64 - 1,
                Bound::Current => i as i64,
                Bound::Offset(o) => (i as i64).saturating_add(*o as i64),
            };
            (lo.max(0)..=hi.min(n as i64 - 1))
                .map(|j| j as usize)
                .collect()
        }
        Window::Range(lo, hi, _) => {
            let me = pos[i]?;
            let at = |b: &Bound, inf: f64| match b {
                Bound::Unbounded => inf,
                Bound::Current => me,
                Bound::Offset(o) => me + o,
            };
            let (lo, hi) = (at(lo, f64::NEG_INFINITY), at(hi, f64::INFINITY));
            (0..n)
                .filter(|&j| pos[j].is_some_and(|p| p >= lo && p <= hi))
                .collect()
        }
    })
}
