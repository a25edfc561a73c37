//! `$graphLookup` (a breadth-first search over another collection) and `$bucketAuto`
//! (buckets of about equal size over a sorted expression).

use std::collections::BTreeSet;

use bson::{doc, Bson, Document};
use silt_bson::compare::cmp_collated as cmp_values;
use silt_bson::path::{any_value, FieldPath, LeafArrays};

use super::granularity::Granularity;
use super::group::Accumulator;
use super::{AggContext, DocStream};
use crate::error::{QResult, QueryError};
use crate::expr::{path_parts, type_name, Expr, ValueKey, Vars};
use crate::matcher::Matcher;

/// A parsed `$graphLookup`.
#[derive(Clone, Debug)]
pub(crate) struct GraphLookup {
    from: String,
    start_with: Expr,
    connect_from: String,
    connect_to: String,
    as_path: Vec<String>,
    max_depth: Option<i64>,
    depth_field: Option<Vec<String>>,
    restrict: Option<Matcher>,
}

fn fail(code: i32, msg: impl Into<String>) -> QueryError {
    QueryError::located(code, msg)
}

/// The values at `path` in `d`, arrays unwound one level (query semantics).
fn values_at(d: &Document, path: &str) -> Vec<Bson> {
    let mut out = Vec::new();
    any_value(d, &FieldPath::new(path), LeafArrays::Traverse, &mut |c| {
        if let Some(v) = c.value {
            out.push(v.clone());
        }
        false
    });
    out
}

impl GraphLookup {
    pub(crate) fn parse(spec: &Bson) -> QResult<GraphLookup> {
        let Bson::Document(d) = spec else {
            return Err(fail(
                40327,
                "the $graphLookup stage specification must be an object",
            ));
        };
        let string = |k: &str, v: &Bson| -> QResult<String> {
            match v {
                Bson::String(s) if !s.starts_with('$') => Ok(s.clone()),
                _ => Err(fail(
                    40103,
                    format!(
                        "expected a string field name for '{k}', found: {}",
                        type_name(Some(v))
                    ),
                )),
            }
        };
        let (
            mut from,
            mut start,
            mut cfrom,
            mut cto,
            mut as_,
            mut max_depth,
            mut depth,
            mut restrict,
        ) = (None, None, None, None, None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "from" => from = Some(string(k, v)?),
                "startWith" => start = Some(Expr::parse(v)?),
                "connectFromField" => cfrom = Some(string(k, v)?),
                "connectToField" => cto = Some(string(k, v)?),
                "as" => as_ = Some(string(k, v)?),
                "depthField" => depth = Some(path_parts(&string(k, v)?)?),
                "maxDepth" => {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "an integral double; past the i64 range it saturates (no \
                                  practical limit)"
                    )]
                    let depth = match silt_bson::compare::as_num(v) {
                        Some(silt_bson::compare::Num::Int(i)) if i >= 0 => i,
                        Some(silt_bson::compare::Num::Float(f)) if f >= 0.0 && f.fract() == 0.0 => {
                            f as i64
                        }
                        _ => return Err(fail(40101, "maxDepth must be a non-negative integer")),
                    };
                    max_depth = Some(depth);
                }
                "restrictSearchWithMatch" => match v {
                    Bson::Document(m) => restrict = Some(Matcher::new(m)?),
                    _ => return Err(fail(40185, "restrictSearchWithMatch must be an object")),
                },
                other => {
                    return Err(fail(
                        40104,
                        format!("Unknown argument to $graphLookup: {other}"),
                    ))
                }
            }
        }
        let (Some(from), Some(start_with), Some(connect_from), Some(connect_to), Some(as_)) =
            (from, start, cfrom, cto, as_)
        else {
            return Err(fail(
                40105,
                "$graphLookup requires 'from', 'startWith', 'connectFromField', 'connectToField' and 'as'",
            ));
        };
        Ok(GraphLookup {
            from,
            start_with,
            connect_from,
            connect_to,
            as_path: path_parts(&as_)?,
            max_depth,
            depth_field: depth,
            restrict,
        })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocStream<'a>,
        ctx: &'a dyn AggContext,
        vars: &'a Vars<'a>,
    ) -> QResult<DocStream<'a>> {
        let mut foreign = ctx.scan_collection(&self.from)?;
        if let Some(m) = &self.restrict {
            foreign.retain(|d| m.matches(d));
        }
        Ok(Box::new(input.map(move |r| {
            let mut d = r?;
            let found = self.search(&d, &foreign, vars)?;
            super::stages::set_path(&mut d, &self.as_path, Bson::Array(found));
            Ok(d)
        })))
    }

    fn search(&self, d: &Document, foreign: &[Document], vars: &Vars<'_>) -> QResult<Vec<Bson>> {
        let mut frontier: Vec<Bson> = match self.start_with.evaluate(d, vars)? {
            Some(Bson::Array(a)) => a,
            Some(v) => vec![v],
            None => Vec::new(),
        };
        let mut seen_values: BTreeSet<ValueKey> = BTreeSet::new();
        let mut seen_docs: BTreeSet<ValueKey> = BTreeSet::new();
        let mut out = Vec::new();
        let mut depth = 0i64;
        while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
            let wanted: Vec<Bson> = frontier
                .drain(..)
                .filter(|v| seen_values.insert(ValueKey(v.clone())))
                .collect();
            if wanted.is_empty() {
                break;
            }
            for f in foreign {
                let hit = values_at(f, &self.connect_to)
                    .iter()
                    .any(|v| wanted.iter().any(|w| cmp_values(v, w).is_eq()))
                    || (wanted.iter().any(|w| matches!(w, Bson::Null))
                        && values_at(f, &self.connect_to).is_empty());
                if !hit {
                    continue;
                }
                let id = f.get("_id").cloned().unwrap_or(Bson::Null);
                if !seen_docs.insert(ValueKey(id)) {
                    continue;
                }
                frontier.extend(values_at(f, &self.connect_from));
                let mut f = f.clone();
                if let Some(p) = &self.depth_field {
                    super::stages::set_path(&mut f, p, Bson::Int64(depth));
                }
                out.push(Bson::Document(f));
            }
            depth += 1;
        }
        Ok(out)
    }
}

/// A parsed `$bucketAuto`.
#[derive(Clone, Debug)]
pub(crate) struct BucketAuto {
    group_by: Expr,
    buckets: usize,
    output: Vec<Accumulator>,
    granularity: Option<Granularity>,
}

impl BucketAuto {
    pub(crate) fn parse(spec: &Bson) -> QResult<BucketAuto> {
        let Bson::Document(d) = spec else {
            return Err(fail(
                40240,
                format!(
                    "The argument to $bucketAuto must be an object, but found type: {}",
                    type_name(Some(spec))
                ),
            ));
        };
        let (mut group_by, mut buckets, mut output) = (None, None, None);
        let mut granularity = None;
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => group_by = Some(Expr::parse(v)?),
                "buckets" => {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "an integral double; past usize::MAX it saturates (no practical \
                                  limit)"
                    )]
                    let n = match silt_bson::compare::as_num(v) {
                        Some(silt_bson::compare::Num::Int(i)) if i > 0 => usize::try_from(i).unwrap_or(usize::MAX),
                        Some(silt_bson::compare::Num::Float(f)) if f > 0.0 && f.fract() == 0.0 => f as usize,
                        _ => return Err(fail(40243, format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {v}"))),
                    };
                    buckets = Some(n);
                }
                "output" => {
                    let Bson::Document(o) = v else {
                        return Err(fail(
                            40244,
                            "The $bucketAuto 'output' field must be an object",
                        ));
                    };
                    output = Some(
                        o.iter()
                            .map(|(name, acc)| Accumulator::parse(name, acc))
                            .collect::<QResult<Vec<_>>>()?,
                    );
                }
                "granularity" => granularity = Some(Granularity::parse(v)?),
                other => {
                    return Err(fail(
                        40245,
                        format!("Unrecognized option to $bucketAuto: {other}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
            return Err(fail(
                40246,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        };
        Ok(BucketAuto {
            group_by,
            buckets,
            output: output.unwrap_or_else(|| vec![Accumulator::count("count")]),
            granularity,
        })
    }

    pub(crate) fn run(&self, input: DocStream<'_>, vars: &Vars<'_>) -> QResult<Vec<Document>> {
        let mut keyed = Vec::new();
        for r in input {
            let d = r?;
            let k = self.group_by.evaluate(&d, vars)?.unwrap_or(Bson::Null);
            keyed.push((k, d));
        }
        keyed.sort_by(|a, b| cmp_values(&a.0, &b.0));
        let n = keyed.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "a rounded ratio of two counts, at most n"
        )]
        let size = ((n as f64 / self.buckets as f64).round() as usize).max(1);
        if let Some(g) = &self.granularity {
            return self.run_rounded(g, &keyed, size, vars);
        }
        // Split into runs of about `size`, never splitting equal values.
        let mut bounds: Vec<(usize, usize)> = Vec::new();
        let mut start = 0;
        while start < n {
            let mut end = (start + size).min(n);
            if bounds.len() + 1 == self.buckets {
                end = n;
            }
            while end < n && cmp_values(&keyed[end].0, &keyed[end - 1].0).is_eq() {
                end += 1;
            }
            bounds.push((start, end));
            start = end;
        }
        let mut out = Vec::with_capacity(bounds.len());
        for (i, (s, e)) in bounds.iter().enumerate() {
            let min = keyed[*s].0.clone();
            let max = match bounds.get(i + 1) {
                Some((ns, _)) => keyed[*ns].0.clone(),
                None => keyed[e - 1].0.clone(),
            };
            let mut states: Vec<_> = self.output.iter().map(|a| a.init()).collect();
            for (_, d) in &keyed[*s..*e] {
                for (a, st) in self.output.iter().zip(states.iter_mut()) {
                    a.update(st, d, vars)?;
                }
            }
            let mut d = doc! { "_id": { "min": min, "max": max } };
            for (a, st) in self.output.iter().zip(states) {
                d.insert(a.name().to_string(), a.finish(st));
            }
            out.push(d);
        }
        Ok(out)
    }
}

impl BucketAuto {
    /// The buckets under a `granularity` (mongod's `adjustBoundariesAndGetMinForNextBucket`):
    /// each bucket's last value is rounded up, documents below that boundary join it, and the
    /// next bucket starts there; the first bucket's minimum is its first value rounded down.
    fn run_rounded(
        &self,
        g: &Granularity,
        keyed: &[(Bson, Document)],
        size: usize,
        vars: &Vars<'_>,
    ) -> QResult<Vec<Document>> {
        for (k, _) in keyed {
            Granularity::check(k)?;
        }
        let n = keyed.len();
        let mut out = Vec::new();
        let mut previous_max: Option<Bson> = None;
        let mut start = 0;
        while start < n {
            let last_bucket = out.len() + 1 == self.buckets;
            let mut end = start + 1;
            while end < n && (end - start < size || last_bucket) {
                end += 1;
            }
            let mut max = keyed[end - 1].0.clone();
            let boundary = g.round_up(&max)?;
            while end < n
                && (cmp_values(&boundary, &keyed[end].0).is_gt()
                    || cmp_values(&max, &keyed[end].0).is_eq())
            {
                max = keyed[end].0.clone();
                end += 1;
            }
            // A first bucket ending at 0 (0 rounds to itself) ends where the next one's
            // rounded-down minimum starts instead.
            let bucket_max = if Granularity::is_zero(&boundary) && end < n {
                g.round_down(&keyed[end].0)?
            } else {
                boundary
            };
            let bucket_min = match previous_max.take() {
                Some(m) => m,
                None => g.round_down(&keyed[start].0)?,
            };
            let mut states: Vec<_> = self.output.iter().map(|a| a.init()).collect();
            for (_, d) in &keyed[start..end] {
                for (a, st) in self.output.iter().zip(states.iter_mut()) {
                    a.update(st, d, vars)?;
                }
            }
            let mut d = doc! { "_id": { "min": bucket_min, "max": bucket_max.clone() } };
            for (a, st) in self.output.iter().zip(states) {
                d.insert(a.name().to_string(), a.finish(st));
            }
            out.push(d);
            previous_max = Some(bucket_max);
            start = end;
        }
        Ok(out)
    }
}
