//! MongoDB's comparison order for BSON values.
//!
//! Values of different types compare by their *canonical type* (MinKey < null < numbers <
//! strings < objects < arrays < binary < ObjectId < bool < date < timestamp < regex < code <
//! MaxKey); numbers of every width compare by value; strings compare bytewise (the simple
//! collation). This is the order of every index key and of every check that asks whether stored
//! data changed ([`cmp_values`], [`values_equal`]).
//!
//! A command with a collation compares strings by that collation's rules wherever MongoDB
//! applies it (filters, sorts, group keys, expression comparisons, update operators); those
//! sites call [`cmp_collated`]/[`collated_equal`], which read the collation a
//! [`CollationScope`] installed on this thread for the command's duration. This crate knows
//! no collation rules: a collation is anything implementing [`StringOrder`].

use std::cell::RefCell;
use std::cmp::Ordering;
use std::sync::Arc;

use bson::{Bson, Document};

/// The canonical type rank MongoDB uses before comparing values (`canonicalizeBSONType`).
pub fn type_rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 0,
        Bson::Undefined => 1,
        Bson::Null => 2,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// MongoDB's name for the type of a value, as `$type` and error messages spell it.
pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// A number as the comparator sees it.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    Int(i64),
    Float(f64),
}

/// The numeric value of `v`, if it is a number. Decimal128 goes through its string form
/// (exact for every value an f64 holds; wider decimals are rounded).
pub fn as_num(v: &Bson) -> Option<Num> {
    match v {
        Bson::Int32(i) => Some(Num::Int(i64::from(*i))),
        Bson::Int64(i) => Some(Num::Int(*i)),
        Bson::Double(d) => Some(Num::Float(*d)),
        Bson::Decimal128(d) => Some(Num::Float(decimal_to_f64(d))),
        _ => None,
    }
}

/// A Decimal128 as the nearest f64 (NaN for NaN, ±inf for infinities).
pub fn decimal_to_f64(d: &bson::Decimal128) -> f64 {
    let s = d.to_string();
    match s.as_str() {
        "NaN" | "-NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => s.parse::<f64>().unwrap_or(f64::NAN),
    }
}

/// Compare two numbers exactly; NaN is below every other number and equal to itself.
pub fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => cmp_f64(x, y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

fn cmp_f64(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // -0.0 == 0.0, as MongoDB compares them.
        _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

fn cmp_int_float(x: i64, y: f64) -> Ordering {
    if y.is_nan() {
        return Ordering::Greater;
    }
    // 2^63 as f64 is exact; every i64 is below it and at or above -2^63.
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if y >= TWO63 {
        return Ordering::Less;
    }
    if y < -TWO63 {
        return Ordering::Greater;
    }
    let t = y.trunc();
    #[expect(
        clippy::cast_possible_truncation,
        reason = "exact: -2^63 <= t < 2^63 and t is integral (checked above)"
    )]
    let ti = t as i64;
    match x.cmp(&ti) {
        Ordering::Equal => {
            if y > t {
                Ordering::Less
            } else if y < t {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

/// How strings compare under a collation other than the simple one.
pub trait StringOrder: Send + Sync + std::fmt::Debug {
    fn cmp_str(&self, a: &str, b: &str) -> Ordering;
    /// The collation's resolved description: equal descriptions compare alike.
    fn spec(&self) -> &Document;
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<dyn StringOrder>>> = const { RefCell::new(None) };
}

/// The collation of the command running on this thread, from `enter` until the scope drops
/// (the previous one comes back then, so scopes nest). `None` is the simple collation. A
/// scope is tied to its thread: a cursor resumed by `getMore` enters its collation again.
#[derive(Debug)]
pub struct CollationScope {
    previous: Option<Arc<dyn StringOrder>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl CollationScope {
    pub fn enter(order: Option<Arc<dyn StringOrder>>) -> CollationScope {
        let previous = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), order));
        CollationScope {
            previous,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for CollationScope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// The collation of the current scope, if any.
pub fn current_collation() -> Option<Arc<dyn StringOrder>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Compare two values in MongoDB's order, strings by the current scope's collation.
pub fn cmp_collated(a: &Bson, b: &Bson) -> Ordering {
    // Borrowed, not cloned: this runs for every comparison of a filter, sort or group.
    CURRENT.with(|c| match &*c.borrow() {
        Some(order) => cmp_by(a, b, Some(&**order)),
        None => cmp_by(a, b, None),
    })
}

/// Equality under the current scope's collation.
pub fn collated_equal(a: &Bson, b: &Bson) -> bool {
    cmp_collated(a, b) == Ordering::Equal
}

/// Compare two values in MongoDB's order (strings bytewise).
pub fn cmp_values(a: &Bson, b: &Bson) -> Ordering {
    cmp_by(a, b, None)
}

fn cmp_by(a: &Bson, b: &Bson, order: Option<&dyn StringOrder>) -> Ordering {
    let (ra, rb) = (type_rank(a), type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        _ if ra == 10 => match (as_num(a), as_num(b)) {
            (Some(x), Some(y)) => cmp_num(x, y),
            _ => Ordering::Equal,
        },
        _ if ra == 15 => match order {
            Some(o) => o.cmp_str(str_of(a), str_of(b)),
            None => str_of(a).as_bytes().cmp(str_of(b).as_bytes()),
        },
        (Bson::Document(x), Bson::Document(y)) => cmp_docs_by(x, y, order),
        (Bson::Array(x), Bson::Array(y)) => cmp_arrays_by(x, y, order),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .cmp(&y.pattern)
            .then_with(|| x.options.cmp(&y.options)),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.cmp(y),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .cmp(&y.code)
            .then_with(|| cmp_documents(&x.scope, &y.scope)),
        (Bson::DbPointer(_), Bson::DbPointer(_)) => {
            match (dbpointer_parts(a), dbpointer_parts(b)) {
                // MongoDB compares the value bytes: namespace length first, then namespace, then id.
                (Some((na, ia)), Some((nb, ib))) => na
                    .len()
                    .cmp(&nb.len())
                    .then_with(|| na.as_bytes().cmp(nb.as_bytes()))
                    .then_with(|| ia.cmp(&ib)),
                _ => Ordering::Equal,
            }
        }
        // MinKey, MaxKey, null, undefined: one value each.
        _ => Ordering::Equal,
    }
}

/// The namespace and id of a DBPointer. The bson crate keeps its fields private, so this goes
/// through the value's BSON bytes.
pub fn dbpointer_parts(v: &Bson) -> Option<(String, [u8; 12])> {
    if !matches!(v, Bson::DbPointer(_)) {
        return None;
    }
    let mut doc = Document::new();
    doc.insert("", v.clone());
    let mut buf = Vec::new();
    doc.to_writer(&mut buf).ok()?;
    // int32 doc length, type byte 0x0C, key "" (one NUL), int32 string length, string, NUL, oid.
    let body = buf.get(6..)?;
    let len = usize::try_from(i32::from_le_bytes(body.get(..4)?.try_into().ok()?)).ok()?;
    let ns = body.get(4..4 + len.checked_sub(1)?)?;
    let oid = body.get(4 + len..4 + len + 12)?;
    Some((String::from_utf8(ns.to_vec()).ok()?, oid.try_into().ok()?))
}

/// Build a DBPointer value (the bson crate has no public constructor).
pub fn make_dbpointer(namespace: &str, id: [u8; 12]) -> Option<Bson> {
    let mut body = Vec::new();
    body.push(0x0C);
    body.push(0); // key ""
    let len = i32::try_from(namespace.len() + 1).ok()?;
    body.extend_from_slice(&len.to_le_bytes());
    body.extend_from_slice(namespace.as_bytes());
    body.push(0);
    body.extend_from_slice(&id);
    body.push(0); // document terminator
    let total = i32::try_from(body.len() + 4).ok()?;
    let mut buf = total.to_le_bytes().to_vec();
    buf.extend_from_slice(&body);
    let doc = Document::from_reader(&buf[..]).ok()?;
    doc.get("").cloned()
}

fn str_of(v: &Bson) -> &str {
    match v {
        Bson::String(s) | Bson::Symbol(s) => s,
        _ => "",
    }
}

/// Compare two documents: element by element (type rank, then field name, then value), a
/// prefix before the longer document.
pub fn cmp_documents(a: &Document, b: &Document) -> Ordering {
    cmp_docs_by(a, b, None)
}

fn cmp_docs_by(a: &Document, b: &Document, order: Option<&dyn StringOrder>) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let o = type_rank(va)
                    .cmp(&type_rank(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| cmp_by(va, vb, order));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// Compare two arrays element by element, a prefix first.
pub fn cmp_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    cmp_arrays_by(a, b, None)
}

fn cmp_arrays_by(a: &[Bson], b: &[Bson], order: Option<&dyn StringOrder>) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = type_rank(x)
            .cmp(&type_rank(y))
            .then_with(|| cmp_by(x, y, order));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Equality in MongoDB's sense: `1`, `1.0` and `NumberLong(1)` are equal; field order in
/// embedded documents matters.
pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    cmp_values(a, b) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc, oid::ObjectId};

    #[test]
    fn cross_type_order() {
        let ordered = vec![
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-5),
            Bson::Double(1.5),
            Bson::Int64(2),
            Bson::String("a".into()),
            Bson::String("b".into()),
            bson!({ "a": 1 }),
            bson!([1, 2]),
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![1],
            }),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-1)),
            Bson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 0,
            }),
            Bson::MaxKey,
        ];
        for i in 0..ordered.len() {
            for j in 0..ordered.len() {
                assert_eq!(
                    cmp_values(&ordered[i], &ordered[j]),
                    i.cmp(&j),
                    "{:?} vs {:?}",
                    ordered[i],
                    ordered[j]
                );
            }
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(values_equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(values_equal(&Bson::Int64(1), &Bson::Int32(1)));
        assert_eq!(
            cmp_values(&Bson::Int64(i64::MAX), &Bson::Double(9.3e18)),
            Ordering::Less
        );
        assert_eq!(
            cmp_values(&Bson::Int64(3), &Bson::Double(2.5)),
            Ordering::Greater
        );
        assert_eq!(
            cmp_values(&Bson::Int64(-3), &Bson::Double(-2.5)),
            Ordering::Less
        );
        assert!(values_equal(&Bson::Double(0.0), &Bson::Double(-0.0)));
    }

    #[test]
    fn documents_compare_fieldwise() {
        assert_eq!(
            cmp_documents(&doc! {"a": 1}, &doc! {"a": 1, "b": 0}),
            Ordering::Less
        );
        assert_eq!(
            cmp_documents(&doc! {"a": 2}, &doc! {"b": 1}),
            Ordering::Less
        );
        assert_eq!(
            cmp_documents(&doc! {"a": "x"}, &doc! {"a": 5}),
            Ordering::Greater
        );
    }
}
