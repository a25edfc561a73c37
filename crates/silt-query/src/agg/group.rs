//! `$group` and the stages built on it (`$bucket`, `$sortByCount`): group keys compared by
//! MongoDB equality (`1`, `1.0` and `NumberLong(1)` are one group, the first seen value is its
//! `_id`), accumulators, and output documents with `_id` first. Groups come out in the order
//! their first document arrived.

use std::collections::{BTreeMap, BTreeSet};

use bson::{Bson, Document};
use silt_bson::compare::cmp_collated as cmp_values;

use crate::error::{QResult, QueryError};
use crate::expr::{type_name, Expr, ValueKey, Vars};

/// The accumulators of `$group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AccOp {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    Count,
    StdDevPop,
    StdDevSamp,
    MergeObjects,
    /// `$firstN`, `$topN`, `$median`, ... (`super::nacc`).
    N,
}

const ACCUMULATORS: &[(&str, AccOp)] = &[
    ("$sum", AccOp::Sum),
    ("$avg", AccOp::Avg),
    ("$min", AccOp::Min),
    ("$max", AccOp::Max),
    ("$first", AccOp::First),
    ("$last", AccOp::Last),
    ("$push", AccOp::Push),
    ("$addToSet", AccOp::AddToSet),
    ("$count", AccOp::Count),
    ("$stdDevPop", AccOp::StdDevPop),
    ("$stdDevSamp", AccOp::StdDevSamp),
    ("$mergeObjects", AccOp::MergeObjects),
];

/// Accumulators MongoDB has that SiltDB does not implement.
const UNSUPPORTED_ACCUMULATORS: &[&str] = &["$accumulator", "$concatArrays", "$setUnion"];

/// One output field of a group: its accumulator and argument.
#[derive(Clone, Debug)]
pub(crate) struct Accumulator {
    name: String,
    op: AccOp,
    arg: Expr,
    /// The accumulator when `op` is [`AccOp::N`].
    n: Option<Box<super::nacc::NAcc>>,
}

/// The running state of one accumulator in one group.
#[derive(Clone, Debug)]
pub(crate) enum State {
    Sum(crate::expr::Sum),
    Extreme(Option<Bson>),
    First(Option<Bson>),
    Last(Bson),
    Push(Vec<Bson>),
    Set(Vec<Bson>, BTreeSet<ValueKey>),
    StdDev(crate::expr::StdDev),
    Merge(Document),
    N(super::nacc::NState),
}

impl Accumulator {
    /// Parse the output field `name: {$acc: arg}` of a `$group` (or `$bucket`'s `output`).
    pub(crate) fn parse(name: &str, spec: &Bson) -> QResult<Accumulator> {
        if name.starts_with('$') {
            return Err(QueryError::located(
                40236,
                format!("The field name '{name}' cannot be an operator name"),
            ));
        }
        if name.contains('.') {
            return Err(QueryError::located(
                40235,
                format!("The field name '{name}' cannot contain '.'"),
            ));
        }
        let d = match spec {
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => d,
            _ => {
                return Err(QueryError::located(
                    40234,
                    format!("The field '{name}' must be an accumulator object"),
                ))
            }
        };
        if d.len() != 1 {
            return Err(QueryError::located(
                40238,
                format!("The field '{name}' must specify one accumulator"),
            ));
        }
        let Some((acc, arg)) = d.iter().next() else {
            return Err(QueryError::located(
                40234,
                format!("The field '{name}' must be an accumulator object"),
            ));
        };
        if let Some((_, kind)) = super::nacc::NAMES.iter().find(|(n, _)| n == acc) {
            return Ok(Accumulator {
                name: name.to_string(),
                op: AccOp::N,
                arg: Expr::Literal(Bson::Null),
                n: Some(Box::new(super::nacc::NAcc::parse(acc, *kind, arg)?)),
            });
        }
        let Some(op) = ACCUMULATORS
            .iter()
            .find(|(n, _)| n == acc)
            .map(|(_, op)| *op)
        else {
            if UNSUPPORTED_ACCUMULATORS.contains(&acc.as_str()) {
                return Err(QueryError::not_implemented(format!(
                    "The {acc} accumulator is not supported"
                )));
            }
            return Err(QueryError::located(
                15952,
                format!("unknown group operator '{acc}'"),
            ));
        };
        let arg = if op == AccOp::Count {
            if !matches!(arg, Bson::Document(a) if a.is_empty()) {
                return Err(QueryError::type_mismatch(
                    "$count takes no arguments, i.e. $count:{}",
                ));
            }
            Expr::Literal(Bson::Int32(1))
        } else {
            if matches!(arg, Bson::Array(_)) {
                return Err(QueryError::located(
                    40237,
                    format!("The {acc} accumulator is a unary operator"),
                ));
            }
            Expr::parse(arg)?
        };
        Ok(Accumulator {
            name: name.to_string(),
            op,
            arg,
            n: None,
        })
    }

    /// The output field's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A `{name: {$sum: 1}}` counter.
    pub(crate) fn count(name: &str) -> Accumulator {
        Accumulator {
            name: name.to_string(),
            op: AccOp::Sum,
            arg: Expr::Literal(Bson::Int32(1)),
            n: None,
        }
    }

    pub(crate) fn init(&self) -> State {
        match self.op {
            AccOp::Sum | AccOp::Avg | AccOp::Count => State::Sum(Default::default()),
            AccOp::Min | AccOp::Max => State::Extreme(None),
            AccOp::First => State::First(None),
            AccOp::Last => State::Last(Bson::Null),
            AccOp::Push => State::Push(Vec::new()),
            AccOp::AddToSet => State::Set(Vec::new(), BTreeSet::new()),
            AccOp::StdDevPop | AccOp::StdDevSamp => State::StdDev(Default::default()),
            AccOp::MergeObjects => State::Merge(Document::new()),
            AccOp::N => State::N(Default::default()),
        }
    }

    pub(crate) fn update(&self, state: &mut State, doc: &Document, vars: &Vars<'_>) -> QResult<()> {
        if let (State::N(st), Some(n)) = (&mut *state, &self.n) {
            return n.update(st, doc, vars);
        }
        let v = self.arg.evaluate(doc, vars)?;
        match state {
            State::Sum(s) => {
                if let Some(v) = &v {
                    s.push(v);
                }
            }
            State::Extreme(best) => {
                let Some(v) = v else { return Ok(()) };
                if matches!(v, Bson::Null | Bson::Undefined) {
                    return Ok(());
                }
                let replace = match best {
                    None => true,
                    Some(b) => {
                        let o = cmp_values(&v, b);
                        if self.op == AccOp::Min {
                            o.is_lt()
                        } else {
                            o.is_gt()
                        }
                    }
                };
                if replace {
                    *best = Some(v);
                }
            }
            State::First(first) => {
                if first.is_none() {
                    *first = Some(v.unwrap_or(Bson::Null));
                }
            }
            State::Last(last) => *last = v.unwrap_or(Bson::Null),
            State::Push(items) => {
                if let Some(v) = v {
                    items.push(v);
                }
            }
            State::Set(items, seen) => {
                if let Some(v) = v {
                    if seen.insert(ValueKey(v.clone())) {
                        items.push(v);
                    }
                }
            }
            State::StdDev(s) => {
                if let Some(v) = &v {
                    s.push(v);
                }
            }
            State::N(_) => {}
            State::Merge(out) => match v {
                None | Some(Bson::Null | Bson::Undefined) => {}
                Some(Bson::Document(d)) => {
                    for (k, x) in d {
                        out.insert(k, x);
                    }
                }
                Some(other) => {
                    return Err(QueryError::located(
                        40400,
                        format!(
                            "$mergeObjects requires object inputs, but input {} is of type {}",
                            crate::expr::fmt_value(&other),
                            type_name(Some(&other))
                        ),
                    ))
                }
            },
        }
        Ok(())
    }

    pub(crate) fn finish(&self, state: State) -> Bson {
        match state {
            State::Sum(s) => match self.op {
                AccOp::Avg => s.avg(),
                _ => s.sum(),
            },
            State::Extreme(v) => v.unwrap_or(Bson::Null),
            State::First(v) => v.unwrap_or(Bson::Null),
            State::Last(v) => v,
            State::Push(items) | State::Set(items, _) => Bson::Array(items),
            State::StdDev(s) => s.result(self.op == AccOp::StdDevSamp),
            State::Merge(d) => Bson::Document(d),
            State::N(st) => match &self.n {
                Some(n) => n.finish(st),
                None => Bson::Null,
            },
        }
    }
}

/// A parsed `$group`.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    id: Expr,
    accs: Vec<Accumulator>,
}

impl Group {
    pub(crate) fn parse(spec: &Bson) -> QResult<Group> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::located(
                15947,
                "a group's fields must be specified in an object",
            ));
        };
        let mut id = None;
        let mut accs = Vec::new();
        for (k, v) in d {
            if k == "_id" {
                id = Some(Expr::parse(v)?);
            } else {
                accs.push(Accumulator::parse(k, v)?);
            }
        }
        let id = id.ok_or_else(|| {
            QueryError::located(15955, "a group specification must include an _id")
        })?;
        Ok(Group { id, accs })
    }

    /// A group with the given key and accumulators.
    pub(crate) fn new(id: Expr, accs: Vec<Accumulator>) -> Group {
        Group { id, accs }
    }

    /// Group `docs`; each output document is `_id` then the accumulated fields.
    pub(crate) fn run(
        &self,
        docs: impl Iterator<Item = QResult<Document>>,
        vars: &Vars<'_>,
    ) -> QResult<Vec<Document>> {
        group_by_key(docs, &self.accs, vars, |d| {
            Ok(self.id.evaluate(d, vars)?.unwrap_or(Bson::Null))
        })
    }
}

/// How many values a state keeps (`$push`, `$addToSet`); 0 for the others.
fn held(s: &State) -> usize {
    match s {
        State::Push(items) | State::Set(items, _) => items.len(),
        _ => 0,
    }
}

/// Group `docs` by `key_of`, accumulating `accs`.
fn group_by_key(
    docs: impl Iterator<Item = QResult<Document>>,
    accs: &[Accumulator],
    vars: &Vars<'_>,
    mut key_of: impl FnMut(&Document) -> QResult<Bson>,
) -> QResult<Vec<Document>> {
    let mut index: BTreeMap<ValueKey, usize> = BTreeMap::new();
    let mut groups: Vec<(Bson, Vec<State>)> = Vec::new();
    let mut budget = crate::memory::Budget::new(crate::memory::Use::Group);
    for doc in docs {
        let doc = doc?;
        let key = key_of(&doc)?;
        let slot = match index.get(&ValueKey(key.clone())) {
            Some(i) => *i,
            None => {
                // The key twice (index and group), and each accumulator's state.
                budget.charge(2 * crate::memory::approx_size(&key) + 64 * (accs.len() + 1))?;
                let states = accs.iter().map(Accumulator::init).collect();
                groups.push((key.clone(), states));
                index.insert(ValueKey(key), groups.len() - 1);
                groups.len() - 1
            }
        };
        for (acc, state) in accs.iter().zip(groups[slot].1.iter_mut()) {
            let before = held(state);
            acc.update(state, &doc, vars)?;
            // `$push` and `$addToSet` keep what they are given.
            if held(state) > before {
                if let State::Push(items) | State::Set(items, _) = state {
                    budget.charge(
                        items
                            .last()
                            .map_or(0, |v| 2 * crate::memory::approx_size(v)),
                    )?;
                }
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|(key, states)| {
            let mut out = Document::new();
            out.insert("_id", key);
            for (acc, state) in accs.iter().zip(states) {
                out.insert(acc.name.clone(), acc.finish(state));
            }
            out
        })
        .collect())
}

/// A parsed `$bucket`.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    group_by: Expr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Vec<Accumulator>,
}

impl Bucket {
    pub(crate) fn parse(spec: &Bson) -> QResult<Bucket> {
        let Bson::Document(d) = spec else {
            return Err(QueryError::located(
                40201,
                format!(
                    "Argument to $bucket stage must be an object, but found type: {}.",
                    type_name(Some(spec))
                ),
            ));
        };
        let (mut group_by, mut boundaries, mut default, mut output) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => group_by = Some(v),
                "boundaries" => boundaries = Some(v),
                "default" => default = Some(v),
                "output" => output = Some(v),
                other => {
                    return Err(QueryError::located(
                        40197,
                        format!("Unrecognized option to $bucket: {other}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
            return Err(QueryError::located(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        let group_by = match group_by {
            Bson::String(s) if s.starts_with('$') => Expr::parse(group_by)?,
            Bson::Document(g) if g.keys().next().is_some_and(|k| k.starts_with('$')) => {
                Expr::parse(group_by)?
            }
            other => {
                return Err(QueryError::located(
                    40202,
                    format!(
                        "The $bucket 'groupBy' field must be defined as a $-prefixed path or an \
                         expression, but found: {}.",
                        crate::expr::fmt_value(other)
                    ),
                ))
            }
        };
        let Bson::Array(bounds) = boundaries else {
            return Err(QueryError::located(
                40200,
                format!(
                    "The $bucket 'boundaries' field must be an array, but found type: {}.",
                    type_name(Some(boundaries))
                ),
            ));
        };
        if bounds.len() < 2 {
            return Err(QueryError::located(
                40192,
                format!(
                    "The $bucket 'boundaries' field must have at least 2 values, but found {} \
                     value(s).",
                    bounds.len()
                ),
            ));
        }
        let rank = silt_bson::compare::type_rank(&bounds[0]);
        for (i, pair) in bounds.windows(2).enumerate() {
            if silt_bson::compare::type_rank(&pair[1]) != rank {
                return Err(QueryError::located(
                    40193,
                    format!(
                        "All values in the the 'boundaries' option to $bucket must have the \
                         same type. Found conflicting types {} and {}.",
                        type_name(Some(&pair[0])),
                        type_name(Some(&pair[1]))
                    ),
                ));
            }
            if !cmp_values(&pair[0], &pair[1]).is_lt() {
                return Err(QueryError::located(
                    40194,
                    format!(
                        "The 'boundaries' option to $bucket must be sorted in ascending order, \
                         but elements {} and {} are not in ascending order ({} is not less than \
                         {}).",
                        i,
                        i + 1,
                        crate::expr::fmt_value(&pair[0]),
                        crate::expr::fmt_value(&pair[1])
                    ),
                ));
            }
        }
        if let Some(dflt) = default {
            let below = cmp_values(dflt, &bounds[0]).is_lt();
            let above = !cmp_values(dflt, &bounds[bounds.len() - 1]).is_lt();
            if silt_bson::compare::type_rank(dflt) == rank && !below && !above {
                return Err(QueryError::located(
                    40199,
                    "The $bucket 'default' field must be less than the lowest boundary or \
                     greater than or equal to the highest boundary.",
                ));
            }
        }
        let output = match output {
            None => vec![Accumulator::count("count")],
            Some(Bson::Document(o)) => o
                .iter()
                .map(|(k, v)| Accumulator::parse(k, v))
                .collect::<QResult<_>>()?,
            Some(other) => {
                return Err(QueryError::located(
                    40196,
                    format!(
                        "The $bucket 'output' field must be an object, but found type: {}.",
                        type_name(Some(other))
                    ),
                ))
            }
        };
        Ok(Bucket {
            group_by,
            boundaries: bounds.clone(),
            default: default.cloned(),
            output,
        })
    }

    /// Bucket `docs`; buckets come out in `_id` order, empty ones left out.
    pub(crate) fn run(
        &self,
        docs: impl Iterator<Item = QResult<Document>>,
        vars: &Vars<'_>,
    ) -> QResult<Vec<Document>> {
        let groups = group_by_key(docs, &self.output, vars, |d| self.bucket_of(d, vars))?;
        Ok(super::sort::SortSpec::single("_id", true).sort(groups))
    }

    fn bucket_of(&self, d: &Document, vars: &Vars<'_>) -> QResult<Bson> {
        let v = self.group_by.eval(d, vars)?;
        let n = self.boundaries.len();
        let rank = silt_bson::compare::type_rank(&self.boundaries[0]);
        if silt_bson::compare::type_rank(&v) == rank
            && !cmp_values(&v, &self.boundaries[0]).is_lt()
            && cmp_values(&v, &self.boundaries[n - 1]).is_lt()
        {
            let i = self.boundaries[1..]
                .iter()
                .position(|b| cmp_values(&v, b).is_lt())
                .unwrap_or(0);
            return Ok(self.boundaries[i].clone());
        }
        self.default.clone().ok_or_else(|| {
            QueryError::located(
                40066,
                "$switch could not find a matching branch for an input, and no default was \
                 specified.",
            )
        })
    }
}
