//! Dotted paths (`a.b.0.c`) with MongoDB's array semantics.
//!
//! [`get_path`] is plain traversal: documents by field name, arrays by numeric index.
//!
//! [`any_value`] enumerates the *candidates* a query predicate considers for a path, exactly as
//! MongoDB's element iterator does:
//! - documents are descended by field name; a missing field, or a scalar where the path
//!   continues, yields one "missing" candidate (`value: None`), which `$exists` and `null`
//!   equality look at;
//! - an array at the end of the path yields each element and then the array itself (unless the
//!   caller asks for [`LeafArrays::NoTraversal`], as `$size` and `$elemMatch` do);
//! - an array in the middle of the path fans out: each element that is a document is searched
//!   for the rest of the path (a numeric component is then a field name), and when the next
//!   component is a numeric index the element at that index is also followed positionally (an
//!   array there is entered, a value there ends the path). Other elements contribute nothing,
//!   and an array in the middle of a path never yields "missing" by itself.
//!
//! Each candidate carries the index into the outermost array that was traversed implicitly, the
//! key the positional projection `field.$` uses.

use bson::{Bson, Document};

/// Whether `prefix` is `path` or one of its ancestors (`a` of `a.b`).
pub fn path_covers(prefix: &str, path: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// A dotted path split into its components once, for repeated evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath {
    dotted: String,
    parts: Vec<String>,
}

impl FieldPath {
    pub fn new(dotted: &str) -> FieldPath {
        FieldPath {
            dotted: dotted.to_string(),
            parts: dotted.split('.').map(str::to_string).collect(),
        }
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.dotted
    }

    pub fn parts(&self) -> &[String] {
        &self.parts
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dotted)
    }
}

/// How an array at the end of a path is presented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafArrays {
    /// Each element, then the array itself (equality, ranges, `$in`, `$type`, ...).
    Traverse,
    /// Only the array itself (`$size`, `$elemMatch`).
    NoTraversal,
}

/// One value a predicate considers for a path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate<'a> {
    /// `None` when the path is missing (a missing field or a scalar where the path continues).
    pub value: Option<&'a Bson>,
    /// The index into the outermost implicitly traversed array, if any.
    pub array_index: Option<usize>,
}

/// A numeric path component as an array index: ASCII digits in canonical form ("0", "12";
/// not "01"), since MongoDB matches the component against the element's field name.
pub fn array_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if part.len() > 1 && part.starts_with('0') {
        return None;
    }
    part.parse().ok()
}

/// Plain traversal: field names into documents, numeric components into arrays.
pub fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut cur = doc.get(parts.next()?)?;
    for p in parts {
        cur = match cur {
            Bson::Document(d) => d.get(p)?,
            Bson::Array(a) => a.get(array_index(p)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Call `f` on every candidate for `path` in `doc` until it returns `true`; returns whether it
/// did (so this is "does any candidate satisfy `f`").
pub fn any_value<'a>(
    doc: &'a Document,
    path: &FieldPath,
    leaf: LeafArrays,
    f: &mut dyn FnMut(Candidate<'a>) -> bool,
) -> bool {
    Walker { leaf, f }.doc(doc, &path.parts, None)
}

/// All present values a predicate considers for `path` (missing candidates left out), in
/// candidate order.
pub fn lookup(doc: &Document, path: &str) -> Vec<Bson> {
    let mut out = Vec::new();
    any_value(doc, &FieldPath::new(path), LeafArrays::Traverse, &mut |c| {
        if let Some(v) = c.value {
            out.push(v.clone());
        }
        false
    });
    out
}

/// Whether any candidate for `path` is present (`$exists: true`).
pub fn path_exists(doc: &Document, path: &FieldPath) -> bool {
    any_value(doc, path, LeafArrays::Traverse, &mut |c| c.value.is_some())
}

struct Walker<'f, 'a> {
    leaf: LeafArrays,
    f: &'f mut dyn FnMut(Candidate<'a>) -> bool,
}

impl<'a> Walker<'_, 'a> {
    fn emit(&mut self, value: Option<&'a Bson>, array_index: Option<usize>) -> bool {
        (self.f)(Candidate { value, array_index })
    }

    /// Descend `doc` along `parts` (non-empty) through documents until an array or the end.
    fn doc(&mut self, doc: &'a Document, parts: &[String], off: Option<usize>) -> bool {
        let mut cur = doc;
        let mut i = 0;
        loop {
            let last = i + 1 == parts.len();
            match cur.get(&parts[i]) {
                None => return self.emit(None, off),
                Some(v @ Bson::Array(a)) => return self.array(v, a, &parts[i + 1..], off),
                Some(v) if last => return self.emit(Some(v), off),
                Some(Bson::Document(d)) => {
                    cur = d;
                    i += 1;
                }
                Some(_) => return self.emit(None, off),
            }
        }
    }

    /// An array reached with `rest` of the path still to go.
    fn array(&mut self, v: &'a Bson, arr: &'a [Bson], rest: &[String], off: Option<usize>) -> bool {
        if rest.is_empty() {
            if self.leaf == LeafArrays::Traverse {
                for (i, e) in arr.iter().enumerate() {
                    if self.emit(Some(e), off.or(Some(i))) {
                        return true;
                    }
                }
            }
            return self.emit(Some(v), off);
        }
        let idx = array_index(&rest[0]);
        for (i, e) in arr.iter().enumerate() {
            if let Bson::Document(d) = e {
                if self.doc(d, rest, off.or(Some(i))) {
                    return true;
                }
            }
            if idx != Some(i) {
                continue;
            }
            // Positional: not an implicit traversal, so this level sets no array index.
            let found = match (e, rest.len()) {
                (_, 1) => self.emit(Some(e), off),
                (Bson::Document(d), _) => self.doc(d, &rest[1..], off),
                (Bson::Array(inner), _) => self.array(e, inner, &rest[1..], off),
                _ => false,
            };
            if found {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn cands(d: &Document, path: &str, leaf: LeafArrays) -> Vec<(Option<Bson>, Option<usize>)> {
        let mut out = Vec::new();
        any_value(d, &FieldPath::new(path), leaf, &mut |c| {
            out.push((c.value.cloned(), c.array_index));
            false
        });
        out
    }

    #[test]
    fn get_path_plain() {
        let d = doc! {"a": {"b": [10, {"c": 5}]}, "x": 1};
        assert_eq!(get_path(&d, "a.b.0"), Some(&bson!(10)));
        assert_eq!(get_path(&d, "a.b.1.c"), Some(&bson!(5)));
        assert_eq!(get_path(&d, "a.b.c"), None);
        assert_eq!(get_path(&d, "x.y"), None);
        assert_eq!(get_path(&d, "a.b.01"), None);
        assert_eq!(get_path(&d, "a.b.-1"), None);
    }

    #[test]
    fn leaf_arrays_yield_elements_then_array() {
        let d = doc! {"a": [1, [2]]};
        assert_eq!(
            cands(&d, "a", LeafArrays::Traverse),
            vec![
                (Some(bson!(1)), Some(0)),
                (Some(bson!([2])), Some(1)),
                (Some(bson!([1, [2]])), None)
            ]
        );
        assert_eq!(
            cands(&d, "a", LeafArrays::NoTraversal),
            vec![(Some(bson!([1, [2]])), None)]
        );
    }

    #[test]
    fn missing_and_scalars() {
        let d = doc! {"a": 1, "b": {"c": 2}};
        assert_eq!(cands(&d, "z", LeafArrays::Traverse), vec![(None, None)]);
        assert_eq!(cands(&d, "a.x", LeafArrays::Traverse), vec![(None, None)]);
        assert_eq!(cands(&d, "b.x", LeafArrays::Traverse), vec![(None, None)]);
        assert_eq!(
            cands(&d, "b", LeafArrays::Traverse),
            vec![(Some(bson!({"c": 2})), None)]
        );
    }

    #[test]
    fn fan_out_over_documents() {
        let d = doc! {"a": [{"b": 1}, {"c": 2}, 3, {"b": [4, 5]}]};
        assert_eq!(
            cands(&d, "a.b", LeafArrays::Traverse),
            vec![
                (Some(bson!(1)), Some(0)),
                (None, Some(1)),
                (Some(bson!(4)), Some(3)),
                (Some(bson!(5)), Some(3)),
                (Some(bson!([4, 5])), Some(3)),
            ]
        );
        // An array of scalars has no candidates at all for a sub-path.
        assert!(cands(&doc! {"a": [1, 2]}, "a.b", LeafArrays::Traverse).is_empty());
        // Nested arrays are not entered implicitly.
        assert!(cands(&doc! {"a": [[{"b": 1}]]}, "a.b", LeafArrays::Traverse).is_empty());
    }

    #[test]
    fn numeric_components() {
        let d = doc! {"a": [{"b": 1}, {"b": 2, "0": "f"}]};
        assert_eq!(
            cands(&d, "a.1.b", LeafArrays::Traverse),
            vec![(None, Some(0)), (None, Some(1)), (Some(bson!(2)), None)]
        );
        let d = doc! {"a": [{"0": "x"}, 7]};
        assert_eq!(
            cands(&d, "a.0", LeafArrays::Traverse),
            vec![(Some(bson!("x")), Some(0)), (Some(bson!({"0": "x"})), None)]
        );
        let d = doc! {"a": [[1, 2], [3]]};
        assert_eq!(
            cands(&d, "a.0", LeafArrays::Traverse),
            vec![(Some(bson!([1, 2])), None)]
        );
        assert_eq!(
            cands(&d, "a.0.1", LeafArrays::Traverse),
            vec![(Some(bson!(2)), None)]
        );
        let d = doc! {"a": [[{"b": 9}]]};
        assert_eq!(
            cands(&d, "a.0.b", LeafArrays::Traverse),
            vec![(Some(bson!(9)), Some(0))]
        );
    }

    #[test]
    fn lookup_and_exists() {
        let d = doc! {"a": [{"b": 1}, {"b": [2, 3]}]};
        assert_eq!(
            lookup(&d, "a.b"),
            vec![bson!(1), bson!(2), bson!(3), bson!([2, 3])]
        );
        assert!(path_exists(&d, &FieldPath::new("a.b")));
        assert!(!path_exists(&d, &FieldPath::new("a.c")));
    }

    #[test]
    fn stops_early() {
        let d = doc! {"a": [1, 2, 3]};
        let mut seen = 0;
        let hit = any_value(&d, &FieldPath::new("a"), LeafArrays::Traverse, &mut |c| {
            seen += 1;
            c.value == Some(&bson!(2))
        });
        assert!(hit);
        assert_eq!(seen, 2);
    }
}
