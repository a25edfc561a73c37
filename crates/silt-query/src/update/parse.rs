//! Parsing an operator update into MongoDB's update tree: one node per path component,
//! children ordered by field name (array indexes numerically), `$` kept apart as the
//! positional child and `$[]`/`$[<id>]` under array nodes. Two operators on the same path, or
//! on a path and its prefix, collide while the tree is built.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use bson::{Bson, Document};

use super::pull::{ArrayFilter, PullCond};
use super::{arith, fmt, UpdateOps};
use crate::error::{QResult, QueryError};

/// A child name in the update tree, ordered as MongoDB orders them
/// (`pathsupport::cmpPathsAndArrayIndexes`): numbers without leading zeros by value, all
/// else bytewise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FieldKey(pub(super) String);

impl Ord for FieldKey {
    fn cmp(&self, other: &Self) -> Ordering {
        let numeric = |s: &str| {
            let b = s.as_bytes();
            !b.is_empty() && b[0].is_ascii_digit() && !(b[0] == b'0' && b.len() > 1)
        };
        let (a, b) = (&self.0, &other.0);
        if numeric(a) && numeric(b) && a.len() != b.len() {
            a.len().cmp(&b.len())
        } else {
            a.cmp(b)
        }
    }
}

impl PartialOrd for FieldKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Clone, Debug)]
pub(super) enum Node {
    Leaf(Box<Op>),
    Object(ObjectNode),
    Array(ArrayNode),
}

/// An interior node over a document (or an array indexed by number).
#[derive(Clone, Debug, Default)]
pub(super) struct ObjectNode {
    pub(super) children: BTreeMap<FieldKey, Node>,
    /// The child reached through `$`, applied at the index the query matched.
    pub(super) positional: Option<Box<Node>>,
}

/// An interior node whose children apply to array elements: `""` for `$[]`, otherwise the
/// identifier of an array filter.
#[derive(Clone, Debug, Default)]
pub(super) struct ArrayNode {
    pub(super) children: BTreeMap<FieldKey, Node>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BitOp {
    And,
    Or,
    Xor,
}

#[derive(Clone, Debug)]
pub(super) enum SortSpec {
    /// Sort whole elements; `true` for descending.
    Whole(bool),
    /// Sort by fields of the elements: (dotted path, descending).
    Fields(Vec<(Vec<String>, bool)>),
}

#[derive(Clone, Debug, Default)]
pub(super) struct PushSpec {
    pub(super) values: Vec<Bson>,
    pub(super) slice: Option<i64>,
    pub(super) sort: Option<SortSpec>,
    pub(super) position: Option<i64>,
}

/// One modifier at one path.
#[derive(Clone, Debug)]
pub(super) enum Op {
    Set(Bson),
    SetOnInsert(Bson),
    Unset,
    Arith(arith::Arith, Bson),
    Min(Bson),
    Max(Bson),
    CurrentDate {
        timestamp: bool,
    },
    /// At the destination path; `from` is the source path.
    Rename {
        from: Vec<String>,
    },
    /// Holds the source path of a `$rename` in the tree so other updates conflict with it.
    RenameSource,
    Push(PushSpec),
    AddToSet(Vec<Bson>),
    Pop {
        front: bool,
    },
    Pull(PullCond),
    PullAll(Vec<Bson>),
    Bit(Vec<(BitOp, Bson)>),
}

/// A parsed path component.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Field(String),
    /// `$`
    Positional,
    /// `$[]` (empty identifier) or `$[<identifier>]`.
    Elements(String),
}

impl Part {
    fn of(s: &str) -> Part {
        if s == "$" {
            Part::Positional
        } else if s.len() >= 3 && s.starts_with("$[") && s.ends_with(']') {
            Part::Elements(s[2..s.len() - 1].to_owned())
        } else {
            Part::Field(s.to_owned())
        }
    }
}

struct Parser<'a> {
    filters: &'a BTreeMap<String, ArrayFilter>,
    used: BTreeSet<String>,
    root: ObjectNode,
    positional: bool,
    touched: Vec<String>,
}

pub(super) fn parse_operators(
    update: &Document,
    array_filters: Option<&[Document]>,
) -> QResult<UpdateOps> {
    let filters = parse_array_filters(array_filters.unwrap_or(&[]))?;
    let mut p = Parser {
        filters: &filters,
        used: BTreeSet::new(),
        root: ObjectNode::default(),
        positional: false,
        touched: Vec::new(),
    };
    for (name, arg) in update {
        if !OPERATORS.contains(&name.as_str()) {
            return Err(QueryError::failed_to_parse(format!(
                "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style \
                 update specified as an array"
            )));
        }
        let Bson::Document(fields) = arg else {
            return Err(QueryError::failed_to_parse(format!(
                "Modifiers operate on fields but we found type {} instead. For example: \
                 {{$mod: {{<field>: ...}}}} not {{{}}}",
                fmt::type_name(arg),
                fmt::elem(name, arg)
            )));
        };
        for (path, value) in fields {
            p.add(name, path, value)?;
        }
    }
    if let Some(unused) = filters.keys().find(|id| !p.used.contains(*id)) {
        return Err(QueryError::failed_to_parse(format!(
            "The array filter for identifier '{unused}' was not used in the update {}",
            fmt::doc(update)
        )));
    }
    let Parser {
        root,
        positional,
        mut touched,
        ..
    } = p;
    touched.sort();
    touched.dedup();
    Ok(UpdateOps {
        root,
        filters,
        positional,
        touched,
    })
}

const OPERATORS: &[&str] = &[
    "$set",
    "$setOnInsert",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$currentDate",
    "$rename",
    "$push",
    "$addToSet",
    "$pop",
    "$pull",
    "$pullAll",
    "$bit",
];

impl Parser<'_> {
    fn add(&mut self, operator: &str, path: &str, value: &Bson) -> QResult<()> {
        if operator == "$rename" {
            // The source holds a placeholder so that other updates of it conflict.
            let from = self.check_path(path)?;
            self.insert(&from, path, Op::RenameSource)?;
            let Bson::String(to) = value else {
                return Err(QueryError::bad_value(format!(
                    "The 'to' field for $rename must be a string: {}",
                    fmt::elem(path, value)
                )));
            };
            let to_parts = self.check_path(to)?;
            let op = rename(path, &from, to, &to_parts, value)?;
            return self.insert(&to_parts, to, op);
        }
        let parts = self.check_path(path)?;
        let op = leaf(operator, path, value)?;
        self.insert(&parts, path, op)
    }

    /// `fieldchecker::isUpdatable` and the positional checks of `parseAndMerge`.
    fn check_path(&mut self, path: &str) -> QResult<Vec<Part>> {
        if path.is_empty() {
            return Err(QueryError::empty_field_name(
                "An empty update path is not valid.",
            ));
        }
        if path.split('.').any(str::is_empty) {
            return Err(QueryError::empty_field_name(format!(
                "The update path '{path}' contains an empty field name, which is not allowed."
            )));
        }
        let parts: Vec<Part> = path.split('.').map(Part::of).collect();
        let positions: Vec<usize> = (0..parts.len())
            .filter(|&i| parts[i] == Part::Positional)
            .collect();
        if positions.len() > 1 {
            return Err(QueryError::bad_value(format!(
                "Too many positional (i.e. '$') elements found in path '{path}'"
            )));
        }
        if positions.first() == Some(&0) {
            return Err(QueryError::bad_value(format!(
                "Cannot have positional (i.e. '$') element in the first position in path \
                 '{path}'"
            )));
        }
        self.positional |= !positions.is_empty();
        // Everything before the first dynamic or numeric component may be modified.
        let fixed: Vec<&str> = path
            .split('.')
            .take_while(|s| !s.starts_with('$') && !s.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        if !fixed.is_empty() {
            self.touched.push(fixed.join("."));
        }
        Ok(parts)
    }

    /// The tree child name for `parts[i]`, checking array filter identifiers.
    fn child_name(&mut self, parts: &[Part], i: usize, path: &str) -> QResult<String> {
        Ok(match &parts[i] {
            Part::Field(f) => f.clone(),
            Part::Positional => "$".to_owned(),
            Part::Elements(id) => {
                if i == 0 {
                    return Err(QueryError::bad_value(format!(
                        "Cannot have array filter identifier (i.e. '$[<id>]') element in the \
                         first position in path '{path}'"
                    )));
                }
                if !id.is_empty() {
                    if !self.filters.contains_key(id) {
                        return Err(QueryError::bad_value(format!(
                            "No array filter found for identifier '{id}' in path '{path}'"
                        )));
                    }
                    self.used.insert(id.clone());
                }
                id.clone()
            }
        })
    }

    fn insert(&mut self, parts: &[Part], path: &str, op: Op) -> QResult<()> {
        let raw: Vec<&str> = path.split('.').collect();
        let conflict = |upto: usize| {
            QueryError::conflicting_update_operators(format!(
                "Updating the path '{path}' would create a conflict at '{}'",
                raw[..upto].join(".")
            ))
        };
        let mut names = Vec::with_capacity(parts.len());
        for i in 0..parts.len() {
            names.push(self.child_name(parts, i, path)?);
        }
        let mut current = Internal::Object(&mut self.root);
        for i in 0..parts.len() - 1 {
            let wants_array = matches!(parts[i + 1], Part::Elements(_));
            let slot = current.slot(&names[i]);
            let child = slot.get_or_insert_with(|| {
                if wants_array {
                    Node::Array(ArrayNode::default())
                } else {
                    Node::Object(ObjectNode::default())
                }
            });
            current = match child {
                Node::Object(o) if !wants_array => Internal::Object(o),
                Node::Array(a) if wants_array => Internal::Array(a),
                _ => return Err(conflict(i + 1)),
            };
        }
        let slot = current.slot(&names[parts.len() - 1]);
        if slot.is_some() {
            return Err(conflict(parts.len()));
        }
        slot.set(Node::Leaf(Box::new(op)));
        Ok(())
    }
}

/// An interior node being descended while inserting.
enum Internal<'a> {
    Object(&'a mut ObjectNode),
    Array(&'a mut ArrayNode),
}

impl<'a> Internal<'a> {
    fn slot(self, name: &str) -> SlotRef<'a> {
        match self {
            Internal::Object(o) if name == "$" => SlotRef::Boxed(&mut o.positional),
            Internal::Object(o) => SlotRef::Map(&mut o.children, FieldKey(name.to_owned())),
            Internal::Array(a) => SlotRef::Map(&mut a.children, FieldKey(name.to_owned())),
        }
    }
}

/// Where a child lives: the positional slot or an entry of a children map.
enum SlotRef<'a> {
    Boxed(&'a mut Option<Box<Node>>),
    Map(&'a mut BTreeMap<FieldKey, Node>, FieldKey),
}

impl<'a> SlotRef<'a> {
    fn is_some(&self) -> bool {
        match self {
            SlotRef::Boxed(b) => b.is_some(),
            SlotRef::Map(m, k) => m.contains_key(k),
        }
    }

    fn get_or_insert_with(self, make: impl FnOnce() -> Node) -> &'a mut Node {
        match self {
            SlotRef::Boxed(b) => b.get_or_insert_with(|| Box::new(make())),
            SlotRef::Map(m, k) => m.entry(k).or_insert_with(make),
        }
    }

    fn set(self, node: Node) {
        match self {
            SlotRef::Boxed(b) => *b = Some(Box::new(node)),
            SlotRef::Map(m, k) => {
                m.insert(k, node);
            }
        }
    }
}

fn rename(
    from: &str,
    from_parts: &[Part],
    to: &str,
    to_parts: &[Part],
    value: &Bson,
) -> QResult<Op> {
    let elem = fmt::elem(from, value);
    if from == to {
        return Err(QueryError::bad_value(format!(
            "The source and target field for $rename must differ: {elem}"
        )));
    }
    let prefix = |a: &str, b: &str| b.starts_with(a) && b.as_bytes().get(a.len()) == Some(&b'.');
    if prefix(from, to) || prefix(to, from) {
        return Err(QueryError::bad_value(format!(
            "The source and target field for $rename must not be on the same path: {elem}"
        )));
    }
    let dynamic = |parts: &[Part]| parts.iter().any(|p| !matches!(p, Part::Field(_)));
    if dynamic(from_parts) {
        return Err(QueryError::bad_value(format!(
            "The source field for $rename may not be dynamic: {from}"
        )));
    }
    if dynamic(to_parts) {
        return Err(QueryError::bad_value(format!(
            "The destination field for $rename may not be dynamic: {to}"
        )));
    }
    Ok(Op::Rename {
        from: from.split('.').map(str::to_owned).collect(),
    })
}

/// Build the leaf for one `<operator>: {<path>: <value>}` entry (the `init` of MongoDB's
/// update nodes).
fn leaf(operator: &str, path: &str, value: &Bson) -> QResult<Op> {
    Ok(match operator {
        "$set" => Op::Set(value.clone()),
        "$setOnInsert" => Op::SetOnInsert(value.clone()),
        "$unset" => Op::Unset,
        "$inc" | "$mul" => {
            if !arith::is_number(value) {
                let verb = if operator == "$inc" {
                    "increment"
                } else {
                    "multiply"
                };
                return Err(QueryError::type_mismatch(format!(
                    "Cannot {verb} with non-numeric argument: {{{}}}",
                    fmt::elem(path, value)
                )));
            }
            let op = if operator == "$inc" {
                arith::Arith::Add
            } else {
                arith::Arith::Mul
            };
            Op::Arith(op, value.clone())
        }
        "$min" => Op::Min(value.clone()),
        "$max" => Op::Max(value.clone()),
        "$currentDate" => current_date(value)?,
        "$push" => Op::Push(push(value)?),
        "$addToSet" => add_to_set(value)?,
        "$pop" => {
            let n = integer(path, value)?;
            if n != 1 && n != -1 {
                return Err(QueryError::failed_to_parse(format!(
                    "$pop expects 1 or -1, found: {n}"
                )));
            }
            Op::Pop { front: n == -1 }
        }
        "$pull" => Op::Pull(PullCond::new(value)?),
        "$pullAll" => match value {
            Bson::Array(items) => Op::PullAll(items.clone()),
            other => {
                return Err(QueryError::bad_value(format!(
                    "$pullAll requires an array argument but was given a {}",
                    fmt::type_name(other)
                )))
            }
        },
        "$bit" => bit(value)?,
        other => unreachable!("operator {other} is checked against OPERATORS"),
    })
}

fn current_date(value: &Bson) -> QResult<Op> {
    match value {
        Bson::Boolean(_) => Ok(Op::CurrentDate { timestamp: false }),
        Bson::Document(d) => {
            let mut timestamp = None;
            for (k, v) in d {
                if k != "$type" {
                    return Err(QueryError::bad_value(format!(
                        "Unrecognized $currentDate option: {k}"
                    )));
                }
                match v {
                    Bson::String(s) if s == "date" => timestamp = Some(false),
                    Bson::String(s) if s == "timestamp" => timestamp = Some(true),
                    _ => {}
                }
            }
            timestamp
                .map(|timestamp| Op::CurrentDate { timestamp })
                .ok_or_else(|| {
                    QueryError::bad_value(
                        "The '$type' string field is required to be 'date' or 'timestamp': \
                         {$currentDate: {field : {$type: 'date'}}}",
                    )
                })
        }
        other => Err(QueryError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({{$type: 'timestamp/date'}}).",
            fmt::type_name(other)
        ))),
    }
}

fn push(value: &Bson) -> QResult<PushSpec> {
    let whole = || PushSpec {
        values: vec![value.clone()],
        ..PushSpec::default()
    };
    let Bson::Document(d) = value else {
        return Ok(whole());
    };
    if !d.contains_key("$each") {
        return Ok(whole());
    }
    if let Some(k) = d
        .keys()
        .find(|k| !["$each", "$slice", "$sort", "$position"].contains(&k.as_str()))
    {
        return Err(QueryError::bad_value(format!(
            "Unrecognized clause in $push: {k}"
        )));
    }
    let mut spec = PushSpec::default();
    match d.get("$each") {
        Some(Bson::Array(items)) => spec.values = items.clone(),
        Some(other) => {
            return Err(QueryError::bad_value(format!(
                "The argument to $each in $push must be an array but it was of type: {}",
                fmt::type_name(other)
            )))
        }
        None => {}
    }
    if let Some(v) = d.get("$slice") {
        spec.slice = Some(integer("$slice", v).map_err(|_| {
            QueryError::bad_value(format!(
                "The value for $slice must be an integer value but was given type: {}",
                fmt::type_name(v)
            ))
        })?);
    }
    if let Some(v) = d.get("$sort") {
        spec.sort = Some(sort(v)?);
    }
    if let Some(v) = d.get("$position") {
        spec.position = Some(integer("$position", v).map_err(|_| {
            QueryError::bad_value(format!(
                "The value for $position must be an integer value, not of type: {}",
                fmt::type_name(v)
            ))
        })?);
    }
    Ok(spec)
}

fn sort(v: &Bson) -> QResult<SortSpec> {
    let direction = |v: &Bson| {
        let f = match silt_bson::compare::as_num(v)? {
            silt_bson::compare::Num::Int(i) => i as f64,
            silt_bson::compare::Num::Float(f) => f,
        };
        if f == 1.0 {
            Some(false)
        } else if f == -1.0 {
            Some(true)
        } else {
            None
        }
    };
    match v {
        Bson::Document(pattern) => {
            if pattern.is_empty() {
                return Err(QueryError::bad_value(
                    "The sort pattern is empty when it should be a set of fields.",
                ));
            }
            let mut fields = Vec::with_capacity(pattern.len());
            for (k, dir) in pattern {
                let Some(desc) = direction(dir) else {
                    return Err(QueryError::bad_value(
                        "The sort element value must be either 1 or -1",
                    ));
                };
                if k.is_empty() {
                    return Err(QueryError::bad_value("The sort field cannot be empty"));
                }
                if k.split('.').any(str::is_empty) {
                    return Err(QueryError::bad_value(format!(
                        "The sort field is a dotted field but has an empty part: {k}"
                    )));
                }
                fields.push((k.split('.').map(str::to_owned).collect(), desc));
            }
            Ok(SortSpec::Fields(fields))
        }
        v if arith::is_number(v) => direction(v)
            .map(SortSpec::Whole)
            .ok_or_else(|| QueryError::bad_value("The $sort element value must be either 1 or -1")),
        _ => Err(QueryError::bad_value(
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to \
             sort embedded fields",
        )),
    }
}

fn add_to_set(value: &Bson) -> QResult<Op> {
    let mut values = match value {
        Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$each") => {
            let Some(Bson::Array(items)) = d.get("$each") else {
                return Err(QueryError::type_mismatch(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {}",
                    fmt::type_name(d.get("$each").unwrap_or(&Bson::Null))
                )));
            };
            if d.len() > 1 {
                return Err(QueryError::bad_value(format!(
                    "Found unexpected fields after $each in $addToSet: {}",
                    fmt::doc(d)
                )));
            }
            items.clone()
        }
        v => vec![v.clone()],
    };
    // Duplicates among the values themselves are dropped, the first one kept.
    let mut unique: Vec<Bson> = Vec::with_capacity(values.len());
    for v in values.drain(..) {
        if !unique
            .iter()
            .any(|u| silt_bson::compare::values_equal(u, &v))
        {
            unique.push(v);
        }
    }
    Ok(Op::AddToSet(unique))
}

fn bit(value: &Bson) -> QResult<Op> {
    let Bson::Document(d) = value else {
        return Err(QueryError::bad_value(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded \
             document: {{$bit: {{field: {{and/or/xor: #}}}}",
            fmt::type_name(value)
        )));
    };
    let mut ops = Vec::with_capacity(d.len());
    for (k, v) in d {
        let op = match k.as_str() {
            "and" => BitOp::And,
            "or" => BitOp::Or,
            "xor" => BitOp::Xor,
            _ => {
                return Err(QueryError::bad_value(format!(
                    "The $bit modifier only supports 'and', 'or', and 'xor', not '{k}' which is \
                     an unknown operator: {{{}}}",
                    fmt::elem(k, v)
                )))
            }
        };
        if !matches!(v, Bson::Int32(_) | Bson::Int64(_)) {
            return Err(QueryError::bad_value(format!(
                "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported \
                 here: {{{}}}",
                fmt::type_name(v),
                fmt::elem(k, v)
            )));
        }
        ops.push((op, v.clone()));
    }
    if ops.is_empty() {
        return Err(QueryError::bad_value(
            "You must pass in at least one bitwise operation. The format is: {$bit: {field: \
             {and/or/xor: #}}",
        ));
    }
    Ok(Op::Bit(ops))
}

/// `MatchExpressionParser::parseIntegerElementToLong`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the double is checked to be integral and in [-2^63, 2^63): exact"
)]
fn integer(name: &str, v: &Bson) -> QResult<i64> {
    let fail = |what: &str| QueryError::failed_to_parse(format!("{what}{}", fmt::elem(name, v)));
    let f = match v {
        Bson::Int32(i) => return Ok(i64::from(*i)),
        Bson::Int64(i) => return Ok(*i),
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => silt_bson::compare::decimal_to_f64(d),
        _ => return Err(fail("Expected a number in: ")),
    };
    if f.is_nan() {
        return Err(fail("Expected an integer, but found NaN in: "));
    }
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
        return Err(fail("Cannot represent as a 64-bit integer: "));
    }
    if f.fract() != 0.0 {
        return Err(fail("Expected an integer: "));
    }
    Ok(f as i64)
}

/// Validate `arrayFilters` and key them by identifier.
fn parse_array_filters(filters: &[Document]) -> QResult<BTreeMap<String, ArrayFilter>> {
    let mut out = BTreeMap::new();
    for filter in filters {
        let mut ident: Option<String> = None;
        identifier(filter, &mut ident)?;
        let Some(ident) = ident else {
            return Err(QueryError::failed_to_parse(
                "Cannot use an expression without a top-level field name in arrayFilters",
            ));
        };
        let mut chars = ident.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_alphanumeric());
        if !valid {
            return Err(QueryError::bad_value(format!(
                "Error parsing array filter :: caused by :: The top-level field name must be an \
                 alphanumeric string beginning with a lowercase letter, found '{ident}'"
            )));
        }
        if out.contains_key(&ident) {
            return Err(QueryError::failed_to_parse(format!(
                "Found multiple array filters with the same top-level field name {ident}"
            )));
        }
        let compiled = ArrayFilter::new(ident.clone(), filter)?;
        out.insert(ident, compiled);
    }
    Ok(out)
}

/// The single top-level field name (before any dot) of a filter, looking inside
/// `$and`/`$or`/`$nor`.
fn identifier(filter: &Document, found: &mut Option<String>) -> QResult<()> {
    for (k, v) in filter {
        if matches!(k.as_str(), "$and" | "$or" | "$nor") {
            if let Bson::Array(items) = v {
                for item in items {
                    if let Bson::Document(sub) = item {
                        identifier(sub, found)?;
                    }
                }
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let name = k.split('.').next().unwrap_or_default();
        match found {
            Some(prev) if prev != name => {
                return Err(QueryError::failed_to_parse(format!(
                    "Error parsing array filter :: caused by :: Expected a single top-level \
                     field name, found '{prev}' and '{name}'"
                )))
            }
            _ => *found = Some(name.to_owned()),
        }
    }
    Ok(())
}
