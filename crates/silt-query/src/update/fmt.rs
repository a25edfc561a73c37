//! Values rendered the way MongoDB's error messages render them (`BSONElement::toString`):
//! `{ a: 1, b: "x" }`, `[ 1, 2 ]`, `ObjectId('…')`, doubles as `%.16g` with a `.0` for
//! integral values.

use bson::{Bson, Document};

/// MongoDB's name for the type of `v` (`typeName()`).
pub(crate) fn type_name(v: &Bson) -> &'static str {
    silt_bson::compare::type_name(v)
}

/// An element as `name: value`.
pub(crate) fn elem(name: &str, v: &Bson) -> String {
    format!("{name}: {}", value(v))
}

/// A document as `{ a: 1, b: 2 }` (`{}` when empty).
pub(crate) fn doc(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_owned();
    }
    let fields: Vec<String> = d.iter().map(|(k, v)| elem(k, v)).collect();
    format!("{{ {} }}", fields.join(", "))
}

/// The `{_id: …}` (or `{no id}`) that MongoDB's messages use to name a document.
pub(crate) fn id_of(id: Option<&Bson>) -> String {
    match id {
        Some(v) => format!("{{{}}}", elem("_id", v)),
        None => "{no id}".to_owned(),
    }
}

/// A value as MongoDB prints it.
pub(crate) fn value(v: &Bson) -> String {
    match v {
        Bson::Double(d) => double(*d),
        Bson::String(s) | Bson::Symbol(s) => format!("\"{s}\""),
        Bson::Document(d) => doc(d),
        Bson::Array(a) if a.is_empty() => "[]".to_owned(),
        Bson::Array(a) => {
            let items: Vec<String> = a.iter().map(value).collect();
            format!("[ {} ]", items.join(", "))
        }
        Bson::Binary(b) => {
            let hex: String = b.bytes.iter().map(|x| format!("{x:02X}")).collect();
            format!("BinData({}, {hex})", u8::from(b.subtype))
        }
        Bson::Undefined => "undefined".to_owned(),
        Bson::ObjectId(o) => format!("ObjectId('{}')", o.to_hex()),
        Bson::Boolean(b) => b.to_string(),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        Bson::Null => "null".to_owned(),
        Bson::RegularExpression(r) => format!("/{}/{}", r.pattern, r.options),
        Bson::JavaScriptCode(c) => c.clone(),
        Bson::JavaScriptCodeWithScope(c) => c.code.clone(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Timestamp(t) => format!("Timestamp({}, {})", t.time, t.increment),
        Bson::Decimal128(d) => format!("NumberDecimal(\"{d}\")"),
        Bson::MinKey => "MinKey".to_owned(),
        Bson::MaxKey => "MaxKey".to_owned(),
        Bson::DbPointer(_) => format!("{v:?}"),
    }
}

/// SafeNum's `debugString()`: `(NumberInt)42`, `(NumberLong)7`, ...
pub(crate) fn safe_num(v: &Bson) -> String {
    match v {
        Bson::Int32(i) => format!("(NumberInt){i}"),
        Bson::Int64(i) => format!("(NumberLong){i}"),
        Bson::Double(d) => format!("(NumberDouble){}", g16(*d)),
        Bson::Decimal128(d) => format!("(NumberDecimal){d}"),
        _ => "(EOO)".to_owned(),
    }
}

/// A double as `%.16g`, with `.0` appended when that shows no fraction or exponent.
fn double(d: f64) -> String {
    let s = g16(d);
    if s.contains(['.', 'e', 'n', 'N']) {
        s
    } else {
        s + ".0"
    }
}

/// C's `%.16g`.
fn g16(d: f64) -> String {
    if d.is_nan() {
        return "nan".to_owned();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    const P: i32 = 16;
    let sci = format!("{:.*e}", (P - 1) as usize, d);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..P).contains(&exp) {
        let mant = trim_fraction(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (P - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{d:.decimals$}")).to_owned()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}
