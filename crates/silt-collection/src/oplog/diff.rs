//! MongoDB's `$v: 2` update diffs: how an update is logged (`{op: "u", o: {$v: 2, diff}}`),
//! computed from the document before and after, applied to a document on replay and through
//! `applyOps`, and read back as a change event's `updateDescription`.
//!
//! A diff of a document has up to four kinds of fields, in this order: `d` (fields removed,
//! each `false`), `u` (fields whose value is replaced in place), `i` (fields appended at the
//! end, in order; a field that exists moves there) and `s<name>` (a sub-diff of the embedded
//! document or array `name`). A sub-diff of an array has `a: true`, `l: n` when the array
//! shrinks to `n` elements, then `u<index>` (a new element value; past the end the array is
//! padded with nulls) and `s<index>` (a sub-diff of an element). Applying a diff twice gives
//! what applying it once gives, which replay after a crash relies on.

use bson::{Bson, Document};

/// Whether `a` and `b` are the same value, byte for byte (field order and number types
/// included; `bson`'s own equality ignores the order of fields).
pub(crate) fn same(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => same_doc(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn same_doc(x: &Document, y: &Document) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
}

fn bson_len(v: &Bson) -> usize {
    match v {
        Bson::Document(d) => crate::encode_doc(d).len(),
        other => crate::encode_doc(&bson::doc! { "": other.clone() }).len(),
    }
}

/// The diff that turns `old` into `new` (empty when they are the same).
pub fn diff_docs(old: &Document, new: &Document) -> Document {
    let mut removed = Document::new();
    for (k, _) in old {
        if !new.contains_key(k) {
            removed.insert(k.clone(), false);
        }
    }
    // The longest prefix of `new` whose fields stay in `old`'s order; the rest is appended.
    let positions: std::collections::HashMap<&str, usize> = old
        .keys()
        .enumerate()
        .map(|(n, k)| (k.as_str(), n))
        .collect();
    let mut next = 0;
    let mut split = new.len();
    for (n, k) in new.keys().enumerate() {
        match positions.get(k.as_str()) {
            Some(&at) if at >= next => next = at + 1,
            _ => {
                split = n;
                break;
            }
        }
    }
    let mut updated = Document::new();
    let mut subs: Vec<(String, Document)> = Vec::new();
    for (k, v) in new.iter().take(split) {
        let Some(before) = old.get(k) else { continue };
        if same(before, v) {
            continue;
        }
        match sub_diff(before, v) {
            Some(sub) => subs.push((format!("s{k}"), sub)),
            None => {
                updated.insert(k.clone(), v.clone());
            }
        }
    }
    let mut inserted = Document::new();
    for (k, v) in new.iter().skip(split) {
        inserted.insert(k.clone(), v.clone());
    }
    let mut out = Document::new();
    for (name, part) in [("d", removed), ("u", updated), ("i", inserted)] {
        if !part.is_empty() {
            out.insert(name, part);
        }
    }
    for (k, sub) in subs {
        out.insert(k, sub);
    }
    out
}

/// A sub-diff of two embedded documents or two arrays, when it is smaller than the new value.
fn sub_diff(before: &Bson, after: &Bson) -> Option<Document> {
    let sub = match (before, after) {
        (Bson::Document(a), Bson::Document(b)) => diff_docs(a, b),
        (Bson::Array(a), Bson::Array(b)) => diff_arrays(a, b),
        _ => return None,
    };
    (bson_len(&Bson::Document(sub.clone())) < bson_len(after)).then_some(sub)
}

fn diff_arrays(old: &[Bson], new: &[Bson]) -> Document {
    let mut out = bson::doc! { "a": true };
    if new.len() < old.len() {
        out.insert("l", i64_len(new.len()));
    }
    for (n, v) in new.iter().enumerate() {
        match old.get(n) {
            Some(before) if same(before, v) => {}
            Some(before) => match sub_diff(before, v) {
                Some(sub) => {
                    out.insert(format!("s{n}"), sub);
                }
                None => {
                    out.insert(format!("u{n}"), v.clone());
                }
            },
            None => {
                out.insert(format!("u{n}"), v.clone());
            }
        }
    }
    out
}

fn i64_len(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A diff that cannot be applied (a malformed entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadDiff(pub String);

/// `doc` with `diff` applied.
pub fn apply_diff(doc: &Document, diff: &Document) -> Result<Document, BadDiff> {
    let section = |name: &str| -> Result<Option<&Document>, BadDiff> {
        match diff.get(name) {
            None => Ok(None),
            Some(Bson::Document(d)) => Ok(Some(d)),
            Some(_) => Err(BadDiff(format!("diff section {name} is not a document"))),
        }
    };
    let removed = section("d")?;
    let updated = section("u")?;
    let inserted = section("i")?;
    for k in diff.keys() {
        if !matches!(k.as_str(), "d" | "u" | "i") && !k.starts_with('s') {
            return Err(BadDiff(format!("unknown diff field {k}")));
        }
    }
    let has = |s: Option<&Document>, k: &str| s.is_some_and(|s| s.contains_key(k));
    let mut out = Document::new();
    for (k, v) in doc {
        if has(removed, k) || has(inserted, k) {
            continue;
        }
        if let Some(nv) = updated.and_then(|u| u.get(k)) {
            out.insert(k.clone(), nv.clone());
        } else if let Some(sub) = diff.get(format!("s{k}")) {
            let Bson::Document(sub) = sub else {
                return Err(BadDiff(format!("sub-diff of {k} is not a document")));
            };
            out.insert(k.clone(), apply_value(v, sub)?);
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    if let Some(u) = updated {
        for (k, v) in u {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(i) = inserted {
        for (k, v) in i {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

fn apply_value(v: &Bson, sub: &Document) -> Result<Bson, BadDiff> {
    if sub.get_bool("a").unwrap_or(false) {
        let Bson::Array(a) = v else {
            return Err(BadDiff(
                "an array sub-diff of a value that is not an array".into(),
            ));
        };
        return Ok(Bson::Array(apply_array(a, sub)?));
    }
    match v {
        Bson::Document(d) => Ok(Bson::Document(apply_diff(d, sub)?)),
        _ => Err(BadDiff(
            "a document sub-diff of a value that is not a document".into(),
        )),
    }
}

fn apply_array(arr: &[Bson], sub: &Document) -> Result<Vec<Bson>, BadDiff> {
    let mut out = arr.to_vec();
    if let Some(l) = sub.get("l") {
        let n = match l {
            Bson::Int32(n) => i64::from(*n),
            Bson::Int64(n) => *n,
            _ => return Err(BadDiff("array length is not an integer".into())),
        };
        let n = usize::try_from(n).map_err(|_| BadDiff("negative array length".into()))?;
        out.resize(n, Bson::Null);
    }
    for (k, v) in sub {
        if k == "a" || k == "l" {
            continue;
        }
        let (kind, idx) = k.split_at(1);
        let idx: usize = idx
            .parse()
            .map_err(|_| BadDiff(format!("unknown array diff field {k}")))?;
        if out.len() <= idx {
            out.resize(idx + 1, Bson::Null);
        }
        match (kind, v) {
            ("u", v) => out[idx] = v.clone(),
            ("s", Bson::Document(s)) => out[idx] = apply_value(&out[idx], s)?,
            _ => return Err(BadDiff(format!("unknown array diff field {k}"))),
        }
    }
    Ok(out)
}

/// What a change event says of an update: the fields set (by dotted path), the fields
/// removed and the arrays truncated (`{field, newSize}`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct UpdateDescription {
    /// `updatedFields`.
    pub updated: Document,
    /// `removedFields`.
    pub removed: Vec<String>,
    /// `truncatedArrays`.
    pub truncated: Vec<Document>,
}

/// The `updateDescription` of a diff.
pub fn describe(diff: &Document) -> UpdateDescription {
    let mut out = UpdateDescription::default();
    describe_doc(diff, "", &mut out);
    out
}

fn describe_doc(diff: &Document, prefix: &str, out: &mut UpdateDescription) {
    for (k, v) in diff {
        match (k.as_str(), v) {
            ("d", Bson::Document(d)) => {
                out.removed.extend(d.keys().map(|f| format!("{prefix}{f}")));
            }
            ("u" | "i", Bson::Document(d)) => {
                for (f, v) in d {
                    out.updated.insert(format!("{prefix}{f}"), v.clone());
                }
            }
            (s, Bson::Document(sub)) if s.starts_with('s') => {
                let path = format!("{prefix}{}", &s[1..]);
                if sub.get_bool("a").unwrap_or(false) {
                    describe_array(sub, &path, out);
                } else {
                    describe_doc(sub, &format!("{path}."), out);
                }
            }
            _ => {}
        }
    }
}

fn describe_array(sub: &Document, path: &str, out: &mut UpdateDescription) {
    for (k, v) in sub {
        match (k.as_str(), v) {
            ("a", _) => {}
            ("l", n) => {
                out.truncated
                    .push(bson::doc! { "field": path, "newSize": n.clone() });
            }
            (k, Bson::Document(s)) if k.starts_with('s') => {
                let p = format!("{path}.{}", &k[1..]);
                if s.get_bool("a").unwrap_or(false) {
                    describe_array(s, &p, out);
                } else {
                    describe_doc(s, &format!("{p}."), out);
                }
            }
            (k, v) if k.starts_with('u') => {
                out.updated.insert(format!("{path}.{}", &k[1..]), v.clone());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use proptest::prelude::*;

    fn roundtrip(old: Document, new: Document) -> Document {
        let d = diff_docs(&old, &new);
        let got = apply_diff(&old, &d).unwrap();
        assert!(
            same_doc(&got, &new),
            "old {old:?}\nnew {new:?}\ndiff {d:?}\ngot {got:?}"
        );
        // Idempotent: applying it again changes nothing.
        let again = apply_diff(&got, &d).unwrap();
        assert!(same_doc(&again, &new), "second apply {again:?}");
        d
    }

    #[test]
    fn mongod_shapes() {
        let d = roundtrip(
            doc! {"_id": 1, "a": 1, "b": 2},
            doc! {"_id": 1, "a": 5, "c": 3},
        );
        assert_eq!(d, doc! {"d": {"b": false}, "u": {"a": 5}, "i": {"c": 3}});
        let d = roundtrip(
            doc! {"_id": 1, "x": {"y": 1, "z": "a long enough string to make a sub-diff pay"}},
            doc! {"_id": 1, "x": {"y": 2, "z": "a long enough string to make a sub-diff pay"}},
        );
        assert_eq!(d, doc! {"sx": {"u": {"y": 2}}});
        let d = roundtrip(
            doc! {"_id": 1, "arr": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]},
            doc! {"_id": 1, "arr": [1, 2, 3, 4, 5, 6, 7, 8]},
        );
        assert_eq!(d, doc! {"sarr": {"a": true, "l": 8i64}});
        let desc = describe(&d);
        assert_eq!(desc.truncated, vec![doc! {"field": "arr", "newSize": 8i64}]);
        let d = roundtrip(
            doc! {"_id": 1, "arr": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]},
            doc! {"_id": 1, "arr": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]},
        );
        assert_eq!(d, doc! {"sarr": {"a": true, "u10": 11}});
        assert_eq!(describe(&d).updated, doc! {"arr.10": 11});
        // Number types are part of the value.
        let d = roundtrip(doc! {"_id": 1, "n": 1}, doc! {"_id": 1, "n": 1.0});
        assert_eq!(d, doc! {"u": {"n": 1.0}});
        // A reordering appends the fields that moved.
        roundtrip(doc! {"a": 1, "b": 2, "c": 3}, doc! {"a": 1, "c": 3, "b": 2});
        roundtrip(doc! {"a": 1, "b": 2, "c": 3}, doc! {"c": 3, "b": 2, "a": 1});
    }

    fn value() -> impl Strategy<Value = Bson> {
        let leaf = prop_oneof![
            (0i32..4).prop_map(Bson::Int32),
            (0i64..3).prop_map(Bson::Int64),
            Just(Bson::Null),
            "[ab]{0,2}".prop_map(Bson::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Bson::Array),
                prop::collection::vec(("[abcd]", inner), 0..5)
                    .prop_map(|fs| { Bson::Document(fs.into_iter().collect()) }),
            ]
        })
    }

    fn document() -> impl Strategy<Value = Document> {
        prop::collection::vec(("[abcde]", value()), 0..6).prop_map(|fs| fs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn any_diff_applies_exactly_and_idempotently(old in document(), new in document()) {
            roundtrip(old, new);
        }
    }
}
