//! Applying an operator update: the tree is walked in order against the document, each leaf
//! modifying (or creating) the value at its concrete path. Private path helpers navigate
//! documents and arrays (`"a.0.b"` indexes arrays by number).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bson::{Bson, Document, Timestamp};
use silt_bson::compare::{cmp_collated, collated_equal, values_equal};

use super::arith::{self, Arith};
use super::parse::{ArrayNode, BitOp, FieldKey, Node, ObjectNode, Op, PushSpec, SortSpec};
use super::{fmt, UpdateCtx, UpdateOps};
use crate::error::{QResult, QueryError};

/// Longest run of nulls MongoDB pads an array with to reach an index (`kMaxPaddingAllowed`).
const MAX_PADDING: usize = 1_500_000;

pub(super) struct Applier<'a> {
    ops: &'a UpdateOps,
    ctx: &'a UpdateCtx,
    is_insert: bool,
    /// The document being updated, always a `Bson::Document`.
    root: Bson,
    /// `_id` before the update; it may not change.
    orig_id: Option<Bson>,
    changed: bool,
}

impl<'a> Applier<'a> {
    pub(super) fn run(
        ops: &'a UpdateOps,
        ctx: &'a UpdateCtx,
        doc: Document,
        is_insert: bool,
    ) -> QResult<(Document, bool)> {
        let mut a = Applier {
            ops,
            ctx,
            is_insert,
            orig_id: doc.get("_id").cloned(),
            root: Bson::Document(doc),
            changed: false,
        };
        a.object(&ops.root, &mut Vec::new())?;
        match a.root {
            Bson::Document(d) => Ok((d, a.changed)),
            _ => unreachable!("the root stays a document"),
        }
    }

    /// Apply the children of an object node in order, the positional child at the index the
    /// query matched (merged with a child of the same name).
    fn object(&mut self, node: &ObjectNode, path: &mut Vec<String>) -> QResult<()> {
        let matched = match &node.positional {
            Some(_) => Some(
                self.ctx
                    .positional
                    .ok_or_else(|| {
                        QueryError::bad_value(
                            "The positional operator did not find the match needed from the \
                             query.",
                        )
                    })?
                    .to_string(),
            ),
            None => None,
        };
        let mut pending = matched.as_deref().zip(node.positional.as_deref());
        for (key, child) in &node.children {
            if let Some((m, pos)) = pending {
                if key.0 == m {
                    path.push(m.to_owned());
                    let merged = merge(pos, child, path)?;
                    path.pop();
                    self.child(&merged, m, path)?;
                    pending = None;
                    continue;
                }
                if m < key.0.as_str() {
                    self.child(pos, m, path)?;
                    pending = None;
                }
            }
            self.child(child, &key.0, path)?;
        }
        if let Some((m, pos)) = pending {
            self.child(pos, m, path)?;
        }
        Ok(())
    }

    fn child(&mut self, node: &Node, name: &str, path: &mut Vec<String>) -> QResult<()> {
        path.push(name.to_owned());
        let r = match node {
            Node::Leaf(op) => self.leaf(op, path),
            Node::Object(o) => self.object(o, path),
            Node::Array(a) => self.array(a, path),
        };
        path.pop();
        r
    }

    /// `$[]` and `$[<id>]`: the array must exist; every element gets the children whose
    /// filter it passes (decided before any of them is applied).
    fn array(&mut self, node: &ArrayNode, path: &mut Vec<String>) -> QResult<()> {
        let matches: Vec<Vec<&Node>> = {
            let items = match lookup(&self.root, path) {
                Some(Bson::Array(items)) => items,
                Some(other) => {
                    return Err(QueryError::bad_value(format!(
                        "Cannot apply array updates to non-array element {}",
                        fmt::elem(path.last().map_or("", String::as_str), other)
                    )))
                }
                None => {
                    return Err(QueryError::bad_value(format!(
                        "The path '{}' must exist in the document in order to apply array \
                         updates.",
                        path.join(".")
                    )))
                }
            };
            let mut matches = Vec::with_capacity(items.len());
            for item in items {
                let mut updates = Vec::new();
                for (id, child) in &node.children {
                    if id.0.is_empty() || self.filter(&id.0, item)? {
                        updates.push(child);
                    }
                }
                matches.push(updates);
            }
            matches
        };
        for (i, updates) in matches.into_iter().enumerate() {
            let Some((first, rest)) = updates.split_first() else {
                continue;
            };
            let idx = i.to_string();
            if rest.is_empty() {
                self.child(first, &idx, path)?;
                continue;
            }
            path.push(idx.clone());
            let mut merged = (*first).clone();
            for other in rest {
                merged = merge(&merged, other, path)?;
            }
            path.pop();
            self.child(&merged, &idx, path)?;
        }
        Ok(())
    }

    fn filter(&self, ident: &str, item: &Bson) -> QResult<bool> {
        let filter = self
            .ops
            .filters
            .get(ident)
            .expect("identifiers are checked when parsing");
        filter.matches(item)
    }

    fn leaf(&mut self, op: &Op, path: &[String]) -> QResult<()> {
        match op {
            Op::RenameSource => return Ok(()),
            Op::SetOnInsert(_) if !self.is_insert => return Ok(()),
            Op::Rename { from } => return self.rename(from, path),
            _ => {}
        }
        let depth = existing_depth(&self.root, path);
        let modified = if depth == path.len() {
            if let Op::Unset = op {
                unset(&mut self.root, path);
                true
            } else {
                let Applier {
                    root, orig_id, ctx, ..
                } = self;
                let target = lookup_mut(root, path).expect("the path exists");
                update_existing(op, target, path, orig_id.as_ref(), ctx)?
            }
        } else if let Some(v) = new_value(op, self.ctx) {
            create_at(&mut self.root, path, depth, v)?;
            true
        } else {
            // Modifiers that never create ($unset, $pop, $pull, $pullAll) are no-ops on a
            // missing path; all but $unset still reject a path that could not exist.
            if !matches!(op, Op::Unset) {
                check_viable(&self.root, path, depth)?;
            }
            false
        };
        if modified {
            self.modified(path, depth == 0)?;
        }
        Ok(())
    }

    /// Record a modification of `path`, refusing changes to `_id` and top-level `$` fields.
    fn modified(&mut self, path: &[String], created_top: bool) -> QResult<()> {
        let top = &path[0];
        if top.starts_with('$') && (path.len() == 1 || created_top) {
            return Err(QueryError::dollar_prefixed_field_name(format!(
                "The dollar ($) prefixed field '{top}' in '{top}' is not allowed in the context \
                 of an update's replacement document. Consider using an aggregation pipeline \
                 with $replaceWith."
            )));
        }
        if top == "_id" {
            if let Some(orig) = &self.orig_id {
                let same = path.len() == 1
                    && lookup(&self.root, path).is_some_and(|now| values_equal(now, orig));
                if !same {
                    return Err(QueryError::immutable_field(format!(
                        "Performing an update on the path '{}' would modify the immutable \
                         field '_id'",
                        path.join(".")
                    )));
                }
            }
        }
        self.changed = true;
        Ok(())
    }

    /// `$rename`: a `$set` of the destination to the source's value and an `$unset` of the
    /// source; a missing source is a no-op. Neither path may run through an array.
    fn rename(&mut self, from: &[String], to: &[String]) -> QResult<()> {
        let mut cur = &self.root;
        for (i, part) in from.iter().enumerate() {
            let next = match cur {
                Bson::Document(d) => d.get(part),
                Bson::Array(items) if array_index(part).is_some() => {
                    array_index(part).and_then(|ix| items.get(ix))
                }
                // Not traversable; `i > 0` as the root is a document.
                _ => {
                    return Err(QueryError::path_not_viable(format!(
                        "cannot use the part ({} of {}) to traverse the element ({{{}}})",
                        from[i - 1],
                        from.join("."),
                        fmt::elem(&from[i - 1], cur)
                    )))
                }
            };
            match next {
                Some(n) => cur = n,
                None => return Ok(()),
            }
        }
        let id = || match self.orig_id.as_ref() {
            Some(v) => fmt::elem("_id", v),
            None => "no id".to_owned(),
        };
        let through_array = |path: &[String], upto: usize| {
            (1..=upto)
                .rev()
                .find(|&j| matches!(lookup(&self.root, &path[..j]), Some(Bson::Array(_))))
        };
        if let Some(j) = through_array(from, from.len() - 1) {
            return Err(QueryError::bad_value(format!(
                "The source field cannot be an array element, '{}' in doc with {} has an array \
                 field called '{}'",
                from.join("."),
                id(),
                from[j - 1]
            )));
        }
        let depth = existing_depth(&self.root, to);
        let upto = if depth == to.len() { depth - 1 } else { depth };
        if let Some(j) = through_array(to, upto) {
            return Err(QueryError::bad_value(format!(
                "The destination field cannot be an array element, '{}' in doc with {} has an \
                 array field called '{}'",
                to.join("."),
                id(),
                to[j - 1]
            )));
        }
        let value = lookup(&self.root, from).cloned().unwrap_or(Bson::Null);
        if depth == to.len() {
            *lookup_mut(&mut self.root, to).expect("the path exists") = value;
        } else {
            create_at(&mut self.root, to, depth, value)?;
        }
        self.modified(to, depth == 0)?;
        unset(&mut self.root, from);
        self.modified(from, false)
    }
}

/// Merge two subtrees that apply to the same element; two leaves collide.
fn merge(a: &Node, b: &Node, path: &mut Vec<String>) -> QResult<Node> {
    match (a, b) {
        (Node::Object(x), Node::Object(y)) => {
            let positional = match (&x.positional, &y.positional) {
                (Some(p), Some(q)) => {
                    path.push("$".to_owned());
                    let m = merge(p, q, path)?;
                    path.pop();
                    Some(Box::new(m))
                }
                (p, q) => p.clone().or_else(|| q.clone()),
            };
            Ok(Node::Object(ObjectNode {
                children: merge_children(&x.children, &y.children, path, false)?,
                positional,
            }))
        }
        (Node::Array(x), Node::Array(y)) => Ok(Node::Array(ArrayNode {
            children: merge_children(&x.children, &y.children, path, true)?,
        })),
        _ => Err(QueryError::conflicting_update_operators(format!(
            "Update created a conflict at '{}'",
            path.join(".")
        ))),
    }
}

fn merge_children(
    x: &BTreeMap<FieldKey, Node>,
    y: &BTreeMap<FieldKey, Node>,
    path: &mut Vec<String>,
    identifiers: bool,
) -> QResult<BTreeMap<FieldKey, Node>> {
    let mut out = x.clone();
    for (k, v) in y {
        let merged = match out.get(k) {
            Some(existing) => {
                path.push(if identifiers {
                    format!("$[{}]", k.0)
                } else {
                    k.0.clone()
                });
                let m = merge(existing, v, path)?;
                path.pop();
                m
            }
            None => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    Ok(out)
}

/// The value a creating modifier gives a path that does not exist yet.
fn new_value(op: &Op, ctx: &UpdateCtx) -> Option<Bson> {
    Some(match op {
        Op::Set(v) | Op::SetOnInsert(v) | Op::Min(v) | Op::Max(v) => v.clone(),
        Op::Arith(Arith::Add, v) => v.clone(),
        // Zero of the multiplier's type.
        Op::Arith(Arith::Mul, v) => arith::apply(Arith::Mul, &Bson::Int32(0), v)?,
        Op::CurrentDate { timestamp } => now(ctx, *timestamp),
        Op::Push(spec) => {
            let mut items = Vec::new();
            push(spec, &mut items);
            Bson::Array(items)
        }
        Op::AddToSet(values) => Bson::Array(values.clone()),
        Op::Bit(ops) => bit(&Bson::Int32(0), ops),
        Op::Unset
        | Op::Pop { .. }
        | Op::Pull(_)
        | Op::PullAll(_)
        | Op::Rename { .. }
        | Op::RenameSource => return None,
    })
}

fn now(ctx: &UpdateCtx, timestamp: bool) -> Bson {
    if !timestamp {
        return Bson::DateTime(ctx.now);
    }
    Bson::Timestamp(ctx.timestamp.unwrap_or(Timestamp {
        time: u32::try_from(ctx.now.timestamp_millis().div_euclid(1000)).unwrap_or(0),
        increment: 1,
    }))
}

/// Apply a modifier to an existing value; `Ok(false)` when nothing changed.
fn update_existing(
    op: &Op,
    target: &mut Bson,
    path: &[String],
    id: Option<&Bson>,
    ctx: &UpdateCtx,
) -> QResult<bool> {
    let field = path.last().map_or("", String::as_str);
    let not_array = |target: &Bson| -> QueryError {
        match op {
            Op::Push(_) => QueryError::bad_value(format!(
                "The field '{}' must be an array but is of type {} in document {}",
                path.join("."),
                fmt::type_name(target),
                fmt::id_of(id)
            )),
            Op::AddToSet(_) => QueryError::bad_value(format!(
                "Cannot apply $addToSet to non-array field. Field named '{field}' has non-array \
                 type {}",
                fmt::type_name(target)
            )),
            Op::Pop { .. } => QueryError::type_mismatch(format!(
                "Path '{}' contains an element of non-array type '{}'",
                path.join("."),
                fmt::type_name(target)
            )),
            _ => QueryError::bad_value("Cannot apply $pull to a non-array value"),
        }
    };
    Ok(match op {
        Op::Set(v) | Op::SetOnInsert(v) => replace_if_different(target, v),
        Op::Arith(kind, v) => {
            let name = if *kind == Arith::Add { "$inc" } else { "$mul" };
            if !arith::is_number(target) {
                return Err(QueryError::type_mismatch(format!(
                    "Cannot apply {name} to a value of non-numeric type. {} has the field \
                     '{field}' of non-numeric type {}",
                    fmt::id_of(id),
                    fmt::type_name(target)
                )));
            }
            let result = arith::apply(*kind, target, v).ok_or_else(|| {
                QueryError::bad_value(format!(
                    "Failed to apply {name} operations to current value ({}) for document {}",
                    fmt::safe_num(target),
                    fmt::id_of(id)
                ))
            })?;
            if arith::identical(&result, target) {
                false
            } else {
                *target = result;
                true
            }
        }
        Op::Min(v) | Op::Max(v) => {
            let wanted = if matches!(op, Op::Min(_)) {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            if cmp_collated(v, target) == wanted {
                *target = v.clone();
                true
            } else {
                false
            }
        }
        Op::CurrentDate { timestamp } => {
            *target = now(ctx, *timestamp);
            true
        }
        Op::Bit(ops) => {
            if !matches!(target, Bson::Int32(_) | Bson::Int64(_)) {
                return Err(QueryError::bad_value(format!(
                    "Cannot apply $bit to a value of non-integral type.{} has the field {field} \
                     of non-integer type {}",
                    id.map(|v| fmt::elem("_id", v)).unwrap_or_default(),
                    fmt::type_name(target)
                )));
            }
            let result = bit(target, ops);
            if arith::identical(&result, target) {
                false
            } else {
                *target = result;
                true
            }
        }
        Op::Push(spec) => match target {
            Bson::Array(items) => push(spec, items),
            other => return Err(not_array(other)),
        },
        Op::AddToSet(values) => match target {
            Bson::Array(items) => {
                let new: Vec<Bson> = values
                    .iter()
                    .filter(|v| !items.iter().any(|e| collated_equal(e, v)))
                    .cloned()
                    .collect();
                let added = !new.is_empty();
                items.extend(new);
                added
            }
            other => return Err(not_array(other)),
        },
        Op::Pop { front } => match target {
            Bson::Array(items) if items.is_empty() => false,
            Bson::Array(items) => {
                if *front {
                    items.remove(0);
                } else {
                    items.pop();
                }
                true
            }
            other => return Err(not_array(other)),
        },
        Op::Pull(c) => match target {
            Bson::Array(items) => {
                let before = items.len();
                let mut kept = Vec::with_capacity(before);
                for item in items.drain(..) {
                    if !c.matches(&item)? {
                        kept.push(item);
                    }
                }
                *items = kept;
                items.len() != before
            }
            other => return Err(not_array(other)),
        },
        Op::PullAll(values) => match target {
            Bson::Array(items) => {
                let before = items.len();
                items.retain(|item| !values.iter().any(|v| collated_equal(item, v)));
                items.len() != before
            }
            other => return Err(not_array(other)),
        },
        Op::Unset | Op::Rename { .. } | Op::RenameSource => {
            unreachable!("handled by the caller")
        }
    })
}

fn replace_if_different(target: &mut Bson, v: &Bson) -> bool {
    if identical(target, v) {
        false
    } else {
        *target = v.clone();
        true
    }
}

/// Same type and same bytes, as MongoDB's `binaryEqualValues` (so `1` and `1.0` differ).
pub(super) fn identical(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        (Bson::Document(x), Bson::Document(y)) => identical_docs(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| identical(p, q))
        }
        _ => a == b,
    }
}

pub(super) fn identical_docs(x: &Document, y: &Document) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|((ka, va), (kb, vb))| ka == kb && identical(va, vb))
}

/// `$push` into `items`; whether the array changed.
fn push(spec: &PushSpec, items: &mut Vec<Bson>) -> bool {
    let mut changed = false;
    if !spec.values.is_empty() {
        changed = true;
        let len = items.len() as i64;
        let at = match spec.position {
            None => len,
            Some(p) if p > len => len,
            Some(p) if p >= 0 => p,
            Some(p) if p.unsigned_abs() < len.unsigned_abs() => len + p,
            Some(_) => 0,
        };
        let at = usize::try_from(at).unwrap_or(0);
        items.splice(at..at, spec.values.iter().cloned());
    }
    if let Some(sort) = &spec.sort {
        changed = true;
        sort_items(items, sort);
    }
    if let Some(slice) = spec.slice {
        let keep = usize::try_from(slice.unsigned_abs()).unwrap_or(usize::MAX);
        if items.len() > keep {
            changed = true;
            if slice >= 0 {
                items.truncate(keep);
            } else {
                items.drain(..items.len() - keep);
            }
        }
    }
    changed
}

fn sort_items(items: &mut [Bson], sort: &SortSpec) {
    let directed = |o: Ordering, desc: bool| if desc { o.reverse() } else { o };
    match sort {
        SortSpec::Whole(desc) => items.sort_by(|a, b| directed(cmp_collated(a, b), *desc)),
        SortSpec::Fields(fields) => items.sort_by(|a, b| {
            fields
                .iter()
                .map(|(path, desc)| {
                    directed(cmp_collated(&sort_key(a, path), &sort_key(b, path)), *desc)
                })
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        }),
    }
}

/// The value an element sorts by for one field of a `$sort` pattern: non-documents are
/// looked at as `{"": value}`, arrays are not traversed, missing is null.
fn sort_key(v: &Bson, path: &[String]) -> Bson {
    let wrapped;
    let root = match v {
        Bson::Document(_) => v,
        _ => {
            let mut d = Document::new();
            d.insert("", v.clone());
            wrapped = Bson::Document(d);
            &wrapped
        }
    };
    lookup(root, path).cloned().unwrap_or(Bson::Null)
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "a bitwise combination of two sign-extended i32s is a sign-extended i32: exact"
)]
fn bit(cur: &Bson, ops: &[(BitOp, Bson)]) -> Bson {
    ops.iter().fold(cur.clone(), |acc, (op, arg)| {
        let f = |a: i64, b: i64| match op {
            BitOp::And => a & b,
            BitOp::Or => a | b,
            BitOp::Xor => a ^ b,
        };
        match (&acc, arg) {
            (Bson::Int32(a), Bson::Int32(b)) => Bson::Int32(f(i64::from(*a), i64::from(*b)) as i32),
            _ => Bson::Int64(f(int(&acc), int(arg))),
        }
    })
}

fn int(v: &Bson) -> i64 {
    match v {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        _ => 0,
    }
}

/// Create `path[depth..]` under the existing element at `path[..depth]`: intermediate
/// documents are made as needed, arrays are padded with nulls up to a numeric index.
fn create_at(root: &mut Bson, path: &[String], depth: usize, value: Bson) -> QResult<()> {
    let mut sub = value;
    for part in path[depth + 1..].iter().rev() {
        let mut d = Document::new();
        d.insert(part.clone(), sub);
        sub = Bson::Document(d);
    }
    let field = &path[depth];
    let parent = lookup_mut(root, &path[..depth]).expect("the prefix exists");
    let cannot = |parent: &Bson| {
        QueryError::path_not_viable(format!(
            "Cannot create field '{field}' in element {{{}}}",
            fmt::elem(&path[depth - 1], parent)
        ))
    };
    let index = match &*parent {
        Bson::Document(_) => None,
        Bson::Array(_) => Some(array_index(field).ok_or_else(|| cannot(parent))?),
        other => return Err(cannot(other)),
    };
    match (parent, index) {
        (Bson::Document(d), _) => {
            d.insert(field.clone(), sub);
        }
        (Bson::Array(items), Some(ix)) => {
            if ix.saturating_sub(items.len()) > MAX_PADDING {
                return Err(QueryError::cannot_backfill_array(format!(
                    "can't backfill more than {MAX_PADDING} elements"
                )));
            }
            items.resize(ix.max(items.len()), Bson::Null);
            items.push(sub);
        }
        _ => unreachable!("checked above"),
    }
    Ok(())
}

/// Non-creating modifiers on a missing path still fail when the path could never exist.
fn check_viable(root: &Bson, path: &[String], depth: usize) -> QResult<()> {
    let elem = lookup(root, &path[..depth]).expect("the prefix exists");
    let viable = match elem {
        Bson::Document(_) => true,
        Bson::Array(_) => array_index(&path[depth]).is_some(),
        _ => false,
    };
    if viable {
        return Ok(());
    }
    Err(QueryError::path_not_viable(format!(
        "Cannot use the part ({}) of ({}) to traverse the element ({{{}}})",
        path[depth],
        path.join("."),
        fmt::elem(&path[depth - 1], elem)
    )))
}

/// Remove an existing field; an array element becomes null instead.
fn unset(root: &mut Bson, path: &[String]) {
    let (last, parent) = path.split_last().expect("paths are not empty");
    match lookup_mut(root, parent) {
        Some(Bson::Document(d)) => {
            d.remove(last);
        }
        Some(Bson::Array(items)) => {
            if let Some(item) = array_index(last).and_then(|ix| items.get_mut(ix)) {
                *item = Bson::Null;
            }
        }
        _ => {}
    }
}

fn array_index(part: &str) -> Option<usize> {
    if part.bytes().all(|b| b.is_ascii_digit()) {
        part.parse().ok()
    } else {
        None
    }
}

fn child<'b>(v: &'b Bson, part: &str) -> Option<&'b Bson> {
    match v {
        Bson::Document(d) => d.get(part),
        Bson::Array(items) => items.get(array_index(part)?),
        _ => None,
    }
}

fn child_mut<'b>(v: &'b mut Bson, part: &str) -> Option<&'b mut Bson> {
    match v {
        Bson::Document(d) => d.get_mut(part),
        Bson::Array(items) => items.get_mut(array_index(part)?),
        _ => None,
    }
}

fn lookup<'b>(root: &'b Bson, path: &[String]) -> Option<&'b Bson> {
    path.iter().try_fold(root, |cur, part| child(cur, part))
}

fn lookup_mut<'b>(root: &'b mut Bson, path: &[String]) -> Option<&'b mut Bson> {
    path.iter().try_fold(root, |cur, part| child_mut(cur, part))
}

/// How many leading components of `path` exist in the document.
fn existing_depth(root: &Bson, path: &[String]) -> usize {
    let mut cur = root;
    for (i, part) in path.iter().enumerate() {
        match child(cur, part) {
            Some(next) => cur = next,
            None => return i,
        }
    }
    path.len()
}
