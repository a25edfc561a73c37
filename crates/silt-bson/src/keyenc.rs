//! The order-preserving byte encoding of BSON values used for every dictionary key: `_id` in a
//! collection's primary dictionary and every secondary-index key.
//!
//! For any values `a` and `b`, `encode(a).cmp(&encode(b)) == cmp_values(a, b)` when the byte
//! strings are compared with memcmp, and values that compare equal (`1`, `1.0`,
//! `NumberLong(1)`) encode to identical bytes. Every encoding is self-delimiting (no encoding is
//! a proper prefix of a different one), so concatenations preserve tuple order and compound keys
//! are simply component encodings laid end to end. A descending component is the bitwise
//! complement of its ascending encoding, which reverses its order and stays self-delimiting.
//!
//! The byte format is documented in `docs/keys.md`. In short: one tag byte (the canonical type
//! rank plus one; `0x00` is reserved as the terminator of documents and arrays), then a
//! type-specific body. Numbers of every width share one body: the order key of the value rounded
//! toward negative infinity to an f64, then the exact integer remainder (non-zero only for
//! 64-bit integers an f64 cannot hold).
//!
//! Decoding returns a value that compares equal to the encoded one, in canonical form: numbers
//! that are integral and fit an i32 decode as `Int32`, other integral values in the i64 range
//! as `Int64`, everything else as `Double` (Decimal128 values are encoded through their f64
//! value, as `cmp_values` compares them); symbols decode as strings.

use bson::{spec::BinarySubtype, Binary, Bson, Document, Regex, Timestamp};

use crate::compare::{as_num, dbpointer_parts, make_dbpointer, type_rank, Num};

/// Terminator of documents, arrays and the element list of code-with-scope.
const END: u8 = 0x00;

/// The tag byte of a value: its canonical type rank plus one (so `0x00` stays free for `END`).
pub fn tag(v: &Bson) -> u8 {
    bracket_tag(type_rank(v))
}

/// The tag byte of every value of canonical type rank `rank` (`compare::type_rank`): the byte
/// that starts, and whose successor ends, that type's bracket of keys.
pub fn bracket_tag(rank: u8) -> u8 {
    rank + 1
}

const TAG_MINKEY: u8 = 1;
const TAG_UNDEFINED: u8 = 2;
const TAG_NULL: u8 = 3;
const TAG_NUMBER: u8 = 11;
const TAG_STRING: u8 = 16;
const TAG_DOCUMENT: u8 = 21;
const TAG_ARRAY: u8 = 26;
const TAG_BINARY: u8 = 31;
const TAG_OBJECTID: u8 = 36;
const TAG_BOOL: u8 = 41;
const TAG_DATE: u8 = 46;
const TAG_TIMESTAMP: u8 = 48;
const TAG_REGEX: u8 = 51;
const TAG_DBPOINTER: u8 = 56;
const TAG_CODE: u8 = 61;
const TAG_CODE_W_SCOPE: u8 = 66;
const TAG_MAXKEY: u8 = 128;

/// Append the ascending encoding of `v` to `out`.
pub fn encode_value(v: &Bson, out: &mut Vec<u8>) {
    out.push(tag(v));
    encode_body(v, out);
}

/// Append the descending encoding of `v` (the complement of the ascending one) to `out`.
pub fn encode_value_desc(v: &Bson, out: &mut Vec<u8>) {
    let start = out.len();
    encode_value(v, out);
    for b in &mut out[start..] {
        *b = !*b;
    }
}

/// The encoding of a compound key: each component ascending or descending (`true`).
pub fn encode_key(values: &[(&Bson, bool)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (v, desc) in values {
        if *desc {
            encode_value_desc(v, &mut out);
        } else {
            encode_value(v, &mut out);
        }
    }
    out
}

/// The ascending encoding of a single value.
pub fn encode(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

fn encode_body(v: &Bson, out: &mut Vec<u8>) {
    match v {
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined => {}
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            if let Some(n) = as_num(v) {
                encode_number(n, out);
            }
        }
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => encode_str(s, out),
        Bson::Document(d) => encode_doc_body(d, out),
        Bson::Array(a) => {
            for e in a {
                encode_value(e, out);
            }
            out.push(END);
        }
        Bson::Binary(b) => {
            // Length first (MongoDB orders binaries by length, then subtype, then bytes).
            let len = u32::try_from(b.bytes.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::DateTime(d) => out.extend_from_slice(&flip_sign(d.timestamp_millis()).to_be_bytes()),
        Bson::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        Bson::RegularExpression(r) => {
            encode_str(&r.pattern, out);
            encode_str(&r.options, out);
        }
        Bson::DbPointer(_) => {
            let (ns, id) = dbpointer_parts(v).unwrap_or_default();
            let len = u32::try_from(ns.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(ns.as_bytes());
            out.extend_from_slice(&id);
        }
        Bson::JavaScriptCodeWithScope(c) => {
            encode_str(&c.code, out);
            encode_doc_body(&c.scope, out);
        }
    }
}

fn encode_doc_body(d: &Document, out: &mut Vec<u8>) {
    for (k, v) in d {
        out.push(tag(v));
        encode_str(k, out);
        encode_body(v, out);
    }
    out.push(END);
}

/// Strings: the bytes with `0x00` escaped as `0x00 0xFF`, terminated by `0x00 0x00`.
fn encode_str(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

fn flip_sign(i: i64) -> u64 {
    (i as u64) ^ (1 << 63)
}

/// The memcmp-ordered key of a double: NaN lowest (all zeros), -0.0 folded into 0.0.
fn f64_key(d: f64) -> u64 {
    if d.is_nan() {
        return 0;
    }
    let d = if d == 0.0 { 0.0 } else { d };
    let bits = d.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn f64_from_key(k: u64) -> f64 {
    if k == 0 {
        f64::NAN
    } else if k >> 63 == 1 {
        f64::from_bits(k & !(1 << 63))
    } else {
        f64::from_bits(!k)
    }
}

/// The largest f64 not above `x`, and the (non-negative) remainder `x - floor`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "exact: `f` is an integral f64 within 2^63 of zero, which i128 holds"
)]
fn floor_f64(x: i64) -> (f64, u16) {
    let mut f = x as f64; // round to nearest
    if f as i128 > i128::from(x) {
        // Step one ulp toward -inf. `f` is non-zero here (x == 0 converts exactly).
        let bits = f.to_bits();
        f = f64::from_bits(if f > 0.0 { bits - 1 } else { bits + 1 });
    }
    let r = i128::from(x) - f as i128;
    // |x| < 2^63 so the spacing of doubles near x is at most 2^10: r < 1024.
    (f, u16::try_from(r).unwrap_or(u16::MAX))
}

/// Numbers: 8 bytes of `f64_key(floor)` then the remainder: `0x00` when zero, else two bytes
/// `0x8000 | r` big-endian (r < 1024). A double has remainder zero; an i64 equal to a double
/// encodes exactly like that double.
fn encode_number(n: Num, out: &mut Vec<u8>) {
    let (f, r) = match n {
        Num::Float(d) => (d, 0),
        Num::Int(i) => floor_f64(i),
    };
    out.extend_from_slice(&f64_key(f).to_be_bytes());
    if r == 0 {
        out.push(0);
    } else {
        out.extend_from_slice(&(0x8000 | r).to_be_bytes());
    }
}

/// Whether decoding `v`'s encoding gives back `v` itself, type and bits included (the same
/// BSON bytes), not merely an equal value. False for what the canonical decoding changes:
/// `Int64` values that fit an `Int32`, integral doubles in the `i64` range (`-0.0` too), NaNs
/// other than the canonical one, every `Decimal128`, symbols, and containers holding any of
/// these. Index entries record such values beside the key so that covered queries can return
/// them exactly (`silt_collection::index`).
pub fn is_exact(v: &Bson) -> bool {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    match v {
        Bson::Int32(_) => true,
        Bson::Int64(i) => i32::try_from(*i).is_err(),
        Bson::Double(d) if d.is_nan() => d.to_bits() == f64::NAN.to_bits(),
        Bson::Double(d) => !(d.fract() == 0.0 && (-TWO63..TWO63).contains(d)),
        Bson::Decimal128(_) | Bson::Symbol(_) => false,
        Bson::Document(d) => d.values().all(is_exact),
        Bson::Array(a) => a.iter().all(is_exact),
        Bson::JavaScriptCodeWithScope(c) => c.scope.values().all(is_exact),
        _ => true,
    }
}

/// Decode one ascending value from the front of `bytes`; returns it and the bytes consumed.
pub fn decode_value(bytes: &[u8]) -> Option<(Bson, usize)> {
    let mut r = Reader {
        bytes,
        pos: 0,
        flip: 0,
    };
    let v = r.value()?;
    Some((v, r.pos))
}

/// Decode one descending value (as written by [`encode_value_desc`]).
pub fn decode_value_desc(bytes: &[u8]) -> Option<(Bson, usize)> {
    let mut r = Reader {
        bytes,
        pos: 0,
        flip: 0xFF,
    };
    let v = r.value()?;
    Some((v, r.pos))
}

/// Decode a compound key written by [`encode_key`] with the same directions; `None` if the
/// bytes are malformed or not fully consumed.
pub fn decode_key(bytes: &[u8], desc: &[bool]) -> Option<Vec<Bson>> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(desc.len());
    for &d in desc {
        let rest = bytes.get(pos..)?;
        let (v, n) = if d {
            decode_value_desc(rest)?
        } else {
            decode_value(rest)?
        };
        out.push(v);
        pos += n;
    }
    (pos == bytes.len()).then_some(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    flip: u8,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b ^ self.flip)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).map(|b| b ^ self.flip)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut a = [0u8; N];
        for b in &mut a {
            *b = self.byte()?;
        }
        Some(a)
    }

    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        let raw = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(raw.iter().map(|b| b ^ self.flip).collect())
    }

    fn string(&mut self) -> Option<String> {
        let mut buf = Vec::new();
        loop {
            match self.byte()? {
                0 => match self.byte()? {
                    0 => break,
                    0xFF => buf.push(0),
                    _ => return None,
                },
                b => buf.push(b),
            }
        }
        String::from_utf8(buf).ok()
    }

    fn value(&mut self) -> Option<Bson> {
        let t = self.byte()?;
        self.body(t)
    }

    fn document(&mut self) -> Option<Document> {
        let mut d = Document::new();
        loop {
            let t = self.byte()?;
            if t == END {
                return Some(d);
            }
            let k = self.string()?;
            let v = self.body(t)?;
            d.insert(k, v);
        }
    }

    fn body(&mut self, t: u8) -> Option<Bson> {
        Some(match t {
            TAG_MINKEY => Bson::MinKey,
            TAG_UNDEFINED => Bson::Undefined,
            TAG_NULL => Bson::Null,
            TAG_MAXKEY => Bson::MaxKey,
            TAG_NUMBER => self.number()?,
            TAG_STRING => Bson::String(self.string()?),
            TAG_DOCUMENT => Bson::Document(self.document()?),
            TAG_ARRAY => {
                let mut a = Vec::new();
                loop {
                    if self.peek()? == END {
                        self.pos += 1;
                        break Bson::Array(a);
                    }
                    a.push(self.value()?);
                }
            }
            TAG_BINARY => {
                let len = u32::from_be_bytes(self.array()?) as usize;
                let subtype = BinarySubtype::from(self.byte()?);
                Bson::Binary(Binary {
                    subtype,
                    bytes: self.take(len)?,
                })
            }
            TAG_OBJECTID => Bson::ObjectId(bson::oid::ObjectId::from_bytes(self.array()?)),
            TAG_BOOL => Bson::Boolean(self.byte()? != 0),
            TAG_DATE => {
                let u = u64::from_be_bytes(self.array()?);
                Bson::DateTime(bson::DateTime::from_millis((u ^ (1 << 63)) as i64))
            }
            TAG_TIMESTAMP => Bson::Timestamp(Timestamp {
                time: u32::from_be_bytes(self.array()?),
                increment: u32::from_be_bytes(self.array()?),
            }),
            TAG_REGEX => Bson::RegularExpression(Regex {
                pattern: self.string()?,
                options: self.string()?,
            }),
            TAG_DBPOINTER => {
                let len = u32::from_be_bytes(self.array()?) as usize;
                let ns = String::from_utf8(self.take(len)?).ok()?;
                make_dbpointer(&ns, self.array()?)?
            }
            TAG_CODE => Bson::JavaScriptCode(self.string()?),
            TAG_CODE_W_SCOPE => Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                code: self.string()?,
                scope: self.document()?,
            }),
            _ => return None,
        })
    }

    fn number(&mut self) -> Option<Bson> {
        let f = f64_from_key(u64::from_be_bytes(self.array()?));
        let first = self.byte()?;
        let r = if first == 0 {
            0
        } else {
            i128::from(u16::from_be_bytes([first, self.byte()?]) & 0x7FFF)
        };
        const TWO63: f64 = 9_223_372_036_854_775_808.0;
        if r == 0 && !(f.fract() == 0.0 && (-TWO63..TWO63).contains(&f)) {
            return Some(Bson::Double(f)); // NaN, infinities, fractions, huge integers
        }
        // A remainder only goes with an integral f64 in the i64 range; other bytes are not
        // an encoding (found by the `keyenc` fuzz target: this used to overflow).
        #[expect(
            clippy::cast_possible_truncation,
            reason = "an encoding's `f` is integral and within 2^63 of zero (exact in i128); \
                      for other bytes the cast saturates and the checks refuse what overflows"
        )]
        let i = i64::try_from((f as i128).checked_add(r)?).ok()?;
        Some(match i32::try_from(i) {
            Ok(small) => Bson::Int32(small),
            Err(_) => Bson::Int64(i),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{cmp_values, values_equal};
    use bson::{bson, doc, oid::ObjectId};
    use proptest::prelude::*;
    use std::cmp::Ordering;
    use std::str::FromStr;

    fn check_pair(a: &Bson, b: &Bson) {
        let (ea, eb) = (encode(a), encode(b));
        assert_eq!(
            ea.cmp(&eb),
            cmp_values(a, b),
            "{a:?} vs {b:?}: {ea:02x?} {eb:02x?}"
        );
        assert_eq!(ea == eb, values_equal(a, b), "{a:?} vs {b:?}");
        let mut da = Vec::new();
        let mut db = Vec::new();
        encode_value_desc(a, &mut da);
        encode_value_desc(b, &mut db);
        assert_eq!(da.cmp(&db), cmp_values(a, b).reverse());
    }

    fn check_roundtrip(v: &Bson) {
        let e = encode(v);
        let (d, n) = decode_value(&e).expect("decodes");
        assert_eq!(n, e.len());
        assert!(values_equal(&d, v), "{v:?} decoded as {d:?}");
        assert_eq!(encode(&d), e);
        let mut de = Vec::new();
        encode_value_desc(v, &mut de);
        let (d2, n2) = decode_value_desc(&de).expect("decodes desc");
        assert_eq!(n2, de.len());
        assert!(values_equal(&d2, v));
    }

    fn edge_numbers() -> Vec<Bson> {
        let mut v = vec![
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Double(-1e300),
            Bson::Int64(i64::MIN),
            Bson::Double(-9_223_372_036_854_775_808.0),
            Bson::Int64(i64::MIN + 1),
            Bson::Int64(-(1 << 53) - 1),
            Bson::Double(-9_007_199_254_740_992.0),
            Bson::Int32(i32::MIN),
            Bson::Double(-1.5),
            Bson::Int32(-1),
            Bson::Double(-f64::MIN_POSITIVE),
            Bson::Double(-0.0),
            Bson::Double(0.0),
            Bson::Int32(0),
            Bson::Double(5e-324),
            Bson::Double(0.5),
            Bson::Int64(1),
            Bson::Double(1.0),
            Bson::Double(1.0000000000000002),
            Bson::Int32(2),
            Bson::Int32(i32::MAX),
            Bson::Double(9_007_199_254_740_992.0),
            Bson::Int64((1 << 53) + 1),
            Bson::Double(9_007_199_254_740_994.0),
            Bson::Int64(i64::MAX - 1),
            Bson::Int64(i64::MAX),
            Bson::Double(9_223_372_036_854_775_808.0),
            Bson::Double(1e300),
            Bson::Double(f64::INFINITY),
        ];
        for s in ["1.5", "-0", "NaN", "Infinity", "12345678901234567890"] {
            v.push(Bson::Decimal128(
                bson::Decimal128::from_str(s).expect("decimal"),
            ));
        }
        v
    }

    #[test]
    fn numbers_order_and_roundtrip() {
        let nums = edge_numbers();
        for a in &nums {
            check_roundtrip(a);
            for b in &nums {
                check_pair(a, b);
            }
        }
    }

    #[test]
    fn canonical_decoding() {
        let dec = |v: Bson| decode_value(&encode(&v)).unwrap().0;
        assert_eq!(dec(Bson::Double(3.0)), Bson::Int32(3));
        assert_eq!(dec(Bson::Int64(7)), Bson::Int32(7));
        assert_eq!(dec(Bson::Int64(1 << 40)), Bson::Int64(1 << 40));
        assert_eq!(dec(Bson::Int64(i64::MAX)), Bson::Int64(i64::MAX));
        assert_eq!(dec(Bson::Double(2.5)), Bson::Double(2.5));
        assert_eq!(dec(Bson::Double(1e30)), Bson::Double(1e30));
        assert_eq!(dec(Bson::Symbol("x".into())), Bson::String("x".into()));
        let dp = make_dbpointer("db.coll", [7; 12]).unwrap();
        assert_eq!(dec(dp.clone()), dp);
    }

    #[test]
    fn strings_with_nuls_and_prefixes() {
        let strs = [
            "", "\0", "\0\0", "\0a", "a", "a\0", "a\0\0", "a\u{1}", "ab", "b", "\u{ff}",
        ];
        for a in strs {
            for b in strs {
                check_pair(&Bson::String(a.into()), &Bson::String(b.into()));
            }
        }
    }

    #[test]
    fn compound_keys_preserve_tuple_order() {
        let vals = [
            bson!("a"),
            bson!("a\0"),
            bson!(1),
            bson!([1]),
            bson!([]),
            bson!({}),
            bson!({"a": 1}),
            Bson::Null,
        ];
        for a1 in &vals {
            for a2 in &vals {
                for b1 in &vals {
                    for b2 in &vals {
                        for d in [false, true] {
                            let ka = encode_key(&[(a1, d), (a2, false)]);
                            let kb = encode_key(&[(b1, d), (b2, false)]);
                            let c1 = cmp_values(a1, b1);
                            let want =
                                if d { c1.reverse() } else { c1 }.then_with(|| cmp_values(a2, b2));
                            assert_eq!(ka.cmp(&kb), want, "{a1:?},{a2:?} vs {b1:?},{b2:?}");
                        }
                    }
                }
                let k = encode_key(&[(a1, true), (a2, false)]);
                let back = decode_key(&k, &[true, false]).unwrap();
                assert!(values_equal(&back[0], a1) && values_equal(&back[1], a2));
            }
        }
    }

    #[test]
    fn cross_type_examples() {
        let vals = vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            bson!(1),
            bson!("s"),
            bson!({"a": 1}),
            bson!({"a": "x"}),
            bson!({"b": 1}),
            bson!([]),
            bson!([1, 2]),
            bson!([[]]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1, 2],
            }),
            Bson::ObjectId(ObjectId::from_bytes([1; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(-5)),
            Bson::DateTime(bson::DateTime::from_millis(5)),
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: 2,
            }),
            Bson::RegularExpression(Regex {
                pattern: "a".into(),
                options: "i".into(),
            }),
            make_dbpointer("a.b", [0; 12]).unwrap(),
            Bson::JavaScriptCode("f()".into()),
            Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                code: "g".into(),
                scope: doc! {"x": 1},
            }),
            Bson::MaxKey,
        ];
        for a in &vals {
            check_roundtrip(a);
            for b in &vals {
                check_pair(a, b);
            }
        }
        assert_eq!(
            encode(&bson!({"a": 1, "b": [1.0]})),
            encode(&bson!({"a": 1.0, "b": [Bson::Int64(1)]}))
        );
        assert_ne!(decode_value(&[0x99]), Some((Bson::Null, 1)));
    }

    fn leaf() -> impl Strategy<Value = Bson> {
        prop_oneof![
            any::<i32>().prop_map(Bson::Int32),
            any::<i64>().prop_map(Bson::Int64),
            (-3i64..3).prop_map(Bson::Int64),
            any::<f64>().prop_map(Bson::Double),
            (-4i32..4).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
            any::<i64>().prop_map(|i| Bson::Double(i as f64)),
            (0usize..35).prop_map(|i| edge_numbers()[i].clone()),
            (0u8..3).prop_map(|b| make_dbpointer("db.c", [b; 12]).expect("dbpointer")),
            "[ab\0\u{e9}]{0,4}".prop_map(Bson::String),
            "[ab]{0,2}".prop_map(Bson::Symbol),
            prop::collection::vec(0u8..3, 0..3).prop_map(|bytes| Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes
            })),
            (0u8..3).prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12]))),
            any::<bool>().prop_map(Bson::Boolean),
            any::<i64>().prop_map(|m| Bson::DateTime(bson::DateTime::from_millis(m))),
            (0u32..3, 0u32..3)
                .prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment })),
            ("[a.]{0,2}", "[im]{0,2}").prop_map(|(pattern, options)| {
                Bson::RegularExpression(Regex { pattern, options })
            }),
            "[fg]{0,2}".prop_map(Bson::JavaScriptCode),
            Just(Bson::Null),
            Just(Bson::Undefined),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
        ]
    }

    fn value() -> impl Strategy<Value = Bson> {
        leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
                prop::collection::vec(("[ab\0]{0,2}", inner), 0..4)
                    .prop_map(|kvs| { Bson::Document(kvs.into_iter().collect()) }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn order_agrees_with_cmp_values(a in value(), b in value()) {
            check_pair(&a, &b);
        }

        #[test]
        fn roundtrips(a in value()) {
            check_roundtrip(&a);
        }

        #[test]
        fn exactness_is_the_decoders(a in value()) {
            check_exact(&a);
        }

        #[test]
        fn compound_order(a in (value(), value(), any::<bool>()), b in (value(), value())) {
            let (a1, a2, d) = a;
            let (b1, b2) = b;
            let ka = encode_key(&[(&a1, d), (&a2, true)]);
            let kb = encode_key(&[(&b1, d), (&b2, true)]);
            let c1 = cmp_values(&a1, &b1);
            let want = if d { c1.reverse() } else { c1 }
                .then_with(|| cmp_values(&a2, &b2).reverse());
            prop_assert_eq!(ka.cmp(&kb), want);
            let back = decode_key(&ka, &[d, true]).unwrap();
            prop_assert!(values_equal(&back[0], &a1) && values_equal(&back[1], &a2));
        }

        #[test]
        fn close_numbers(base in any::<i64>(), delta in -3i64..3) {
            let i = base.saturating_add(delta);
            let f = base as f64;
            check_pair(&Bson::Int64(i), &Bson::Double(f));
            check_pair(&Bson::Int64(i), &Bson::Int64(base));
            prop_assert_eq!(
                encode(&Bson::Int64(i)).cmp(&encode(&Bson::Double(f))),
                cmp_values(&Bson::Int64(i), &Bson::Double(f))
            );
        }
    }

    fn bson_bytes(v: &Bson) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        doc! {"v": v.clone()}.to_writer(&mut out).ok()?;
        Some(out)
    }

    /// `is_exact` says whether the decoded value has the original's BSON bytes (for values
    /// BSON can hold: field names with NUL cannot be stored, so they are skipped).
    fn check_exact(v: &Bson) {
        if bson_bytes(v).is_none() {
            return;
        }
        let mut asc = Vec::new();
        encode_value(v, &mut asc);
        let back = decode_value(&asc).expect("decodes").0;
        assert_eq!(
            is_exact(v),
            bson_bytes(&back) == bson_bytes(v),
            "{v:?} decoded as {back:?}"
        );
        let mut desc = Vec::new();
        encode_value_desc(v, &mut desc);
        let back_desc = decode_value_desc(&desc).expect("decodes").0;
        assert_eq!(bson_bytes(&back_desc), bson_bytes(&back));
    }

    #[test]
    fn exactness_of_edge_values() {
        for v in edge_numbers() {
            check_exact(&v);
        }
        check_exact(&make_dbpointer("db.coll", [7; 12]).unwrap());
        check_exact(&Bson::Double(f64::from_bits(f64::NAN.to_bits() | 1)));
        check_exact(&Bson::Double(-f64::NAN));
        assert!(!is_exact(&Bson::Double(-0.0)));
        assert!(!is_exact(&Bson::Int64(3)));
        assert!(is_exact(&Bson::Int64(1 << 40)));
        assert!(!is_exact(&bson!({"a": [1, {"b": 2.0}]})));
        assert!(is_exact(&bson!({"a": [1, {"b": 2.5}], "s": "x"})));
    }

    /// The examples in docs/keys.md.
    #[test]
    fn documented_examples() {
        let hex = |b: &[u8]| {
            b.iter()
                .map(|x| format!("{x:02X}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let cases = [
            (Bson::Null, "03"),
            (bson!(1), "0B BF F0 00 00 00 00 00 00 00"),
            (bson!(1.0), "0B BF F0 00 00 00 00 00 00 00"),
            (bson!(-1), "0B 40 0F FF FF FF FF FF FF 00"),
            (
                Bson::Int64((1 << 53) + 1),
                "0B C3 40 00 00 00 00 00 00 80 01",
            ),
            (bson!("ab"), "10 61 62 00 00"),
            (
                bson!({"a": 1}),
                "15 0B 61 00 00 BF F0 00 00 00 00 00 00 00 00",
            ),
            (bson!([true]), "1A 29 01 00"),
            (bson!([]), "1A 00"),
        ];
        for (v, want) in cases {
            assert_eq!(hex(&encode(&v)), want, "{v:?}");
        }
        assert_eq!(hex(&encode_key(&[(&Bson::Null, true)])), "FC");
        assert_eq!(
            hex(&encode_key(&[(&bson!("x"), false), (&bson!(2), true)])),
            "10 78 00 00 F4 3F FF FF FF FF FF FF FF FF"
        );
    }

    #[test]
    fn nan_sorts_below_numbers() {
        assert_eq!(
            encode(&Bson::Double(f64::NAN)).cmp(&encode(&Bson::Double(f64::NEG_INFINITY))),
            Ordering::Less
        );
        assert!(encode(&Bson::Null) < encode(&Bson::Double(f64::NAN)));
    }
}
