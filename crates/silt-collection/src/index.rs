//! Secondary indexes: specs, key generation (MongoDB's rules) and the entry layout.
//!
//! Each index is its own engine dictionary. An entry's key is
//! `keyenc::encode_key(index values with their directions) ++ keyenc::encode(_id)`; its value
//! is the whole document's BSON for a clustering index, and otherwise the entry's *shape*
//! (below). The part before the `_id` is the entry's *prefix*; a unique index allows one `_id`
//! per prefix.
//!
//! **Shapes.** A key does not say everything about the indexed values: its decoding is
//! canonical (`NumberLong(5)` and `5.0` decode as `5`, see `keyenc::is_exact`), and a missing
//! field is keyed as null. So that a covered query (one answered from index entries alone)
//! returns exactly what reading the document would, the value of a non-clustering entry
//! records what the key loses, as a BSON document with any of:
//!
//! - `v: {<field position or "_id">: <value>}`: the stored values whose decoding is not exact;
//! - `m: [<field position>, ...]`: the indexed fields the document lacks;
//! - `x: true`: the document has an array along an indexed path (its keys are elements), so
//!   the entry cannot stand in for the document.
//!
//! The value is empty when there is nothing to record (the common case: strings, ObjectIds,
//! dates, 32-bit integers, fractional doubles, present fields). Indexes built before shapes
//! existed have empty values throughout; their catalog entry lacks `coverable: true` and they
//! are never used to cover a query.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use silt_bson::keyenc;
use silt_bson::path::path_covers;
use silt_query::collation::Collation;
use silt_query::matcher::Matcher;
use silt_query::plan::IndexInfo;
use silt_query::text::TextIndexSpec;

use crate::parts::Parts;

/// A parsed index specification.
#[derive(Clone, Debug)]
pub struct IndexSpec {
    /// The index name (`a_1_b_-1` by default).
    pub name: String,
    /// Fields and directions (`true` = descending).
    pub fields: Vec<(String, bool)>,
    /// The key pattern as given.
    pub key_pattern: Document,
    pub unique: bool,
    pub sparse: bool,
    /// `partialFilterExpression`, and its compiled matcher.
    pub partial: Option<(Document, Matcher)>,
    /// Entries carry the whole document (TokuMX's clustering indexes).
    pub clustering: bool,
    /// A TTL index: documents whose indexed date is older than this many seconds are deleted
    /// by the server's TTL monitor.
    pub expire_after_secs: Option<i64>,
    /// Maintained but not used by the planner (MongoDB's hidden indexes).
    pub hidden: bool,
    /// The index's collation: its keys hold `Collation::key` of every string (`docs/keys.md`),
    /// so that they order as the collation does. `None` is the simple collation.
    pub collation: Option<Arc<Collation>>,
    /// A text index: what it reads. Its key pattern is `{_fts: "text", _ftsx: 1}`, its keys
    /// `(term, score)` for each term of a document (`silt_query::text`).
    pub text: Option<Arc<TextIndexSpec>>,
}

/// Parse `expireAfterSeconds` (MongoDB 7.0: a number in [0, 2^31 - 1]).
#[expect(
    clippy::cast_possible_truncation,
    reason = "checked to be in [0, 2^31 - 1]: only a fraction is dropped"
)]
pub fn parse_expire_after(v: &Bson) -> Result<i64, SpecError> {
    let n = match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        other => {
            return Err(SpecError(format!(
                "TTL index 'expireAfterSeconds' option must be numeric, but received a type of \
                 '{}'",
                silt_bson::compare::type_name(other)
            )))
        }
    };
    if n.is_nan() || !(0.0..=f64::from(i32::MAX)).contains(&n) {
        return Err(SpecError(format!(
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a \
             lower number. Value: {n}"
        )));
    }
    Ok(n as i64)
}

/// Why an index spec is refused.
#[derive(Debug, Clone)]
pub struct SpecError(pub String);

/// The default name of an index on `key`: `a_1_b_-1`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "an integral double prints as an integer; one past the i64 range saturates, as it \
              always has (directions are small numbers)"
)]
pub fn default_name(key: &Document) -> String {
    let mut parts = Vec::new();
    for (k, v) in key {
        let d = match v {
            Bson::Int32(i) => i.to_string(),
            Bson::Int64(i) => i.to_string(),
            Bson::Double(d) if d.fract() == 0.0 => format!("{}", *d as i64),
            Bson::Double(d) => d.to_string(),
            Bson::String(s) => s.clone(),
            other => other.to_string(),
        };
        parts.push(format!("{k}_{d}"));
    }
    parts.join("_")
}

fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(i)) => *i != 0,
        Some(Bson::Int64(i)) => *i != 0,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(_) => true,
    }
}

impl IndexSpec {
    /// Parse a `createIndexes` spec (or a stored one).
    pub fn parse(spec: &Document) -> Result<IndexSpec, SpecError> {
        let mut key = spec
            .get_document("key")
            .map_err(|_| {
                SpecError("The 'key' field is a required property of an index specification".into())
            })?
            .clone();
        let name = match spec.get("name") {
            Some(Bson::String(n)) if !n.is_empty() => n.clone(),
            Some(Bson::String(_)) => return Err(SpecError("index name cannot be empty".into())),
            Some(_) => return Err(SpecError("The 'name' field must be a string".into())),
            None => default_name(&key),
        };
        let text = TextIndexSpec::parse(spec)
            .map_err(|e| SpecError(e.msg))?
            .map(Arc::new);
        if text.is_some() {
            key = TextIndexSpec::key_pattern();
        }
        let fields = match &text {
            Some(_) => vec![("_fts".to_string(), false), ("_ftsx".to_string(), false)],
            None => silt_query::plan::parse_key_pattern(&key).map_err(SpecError)?,
        };
        let collation = match spec.get("collation") {
            None => None,
            Some(v) => Collation::parse(v).map_err(|e| SpecError(e.msg))?,
        };
        if text.is_some() && collation.is_some() {
            return Err(SpecError(
                "Index type 'text' does not support collation (give it {locale: \"simple\"})"
                    .into(),
            ));
        }
        let partial = match spec.get("partialFilterExpression") {
            None => None,
            Some(Bson::Document(d)) => {
                let _collation = Collation::scope(collation.as_ref());
                let m = Matcher::new(d).map_err(|e| SpecError(e.msg))?;
                Some((d.clone(), m))
            }
            Some(_) => {
                return Err(SpecError(
                    "partialFilterExpression must be an object".into(),
                ))
            }
        };
        let sparse = truthy(spec.get("sparse"));
        if sparse && partial.is_some() {
            return Err(SpecError(
                "cannot mix \"partialFilterExpression\" and \"sparse\" options".into(),
            ));
        }
        let expire_after_secs = match spec.get("expireAfterSeconds") {
            None | Some(Bson::Null) => None,
            Some(v) => {
                if fields.len() != 1 {
                    return Err(SpecError(
                        "TTL indexes are single-field indexes, compound indexes do not support \
                         TTL"
                        .into(),
                    ));
                }
                if fields[0].0 == "_id" {
                    return Err(SpecError(
                        "The field 'expireAfterSeconds' is not valid for an _id index \
                         specification"
                            .into(),
                    ));
                }
                Some(parse_expire_after(v)?)
            }
        };
        let hidden = truthy(spec.get("hidden"));
        if hidden && name == "_id_" {
            return Err(SpecError("cannot hide _id index".into()));
        }
        Ok(IndexSpec {
            name,
            fields,
            key_pattern: key,
            unique: truthy(spec.get("unique")),
            sparse,
            partial,
            clustering: truthy(spec.get("clustering")),
            expire_after_secs,
            hidden,
            collation,
            text,
        })
    }

    /// The spec as `listIndexes` shows it.
    pub fn to_doc(&self) -> Document {
        let mut d = doc! { "v": 2, "key": self.key_pattern.clone(), "name": &self.name };
        if self.unique {
            d.insert("unique", true);
        }
        if self.sparse {
            d.insert("sparse", true);
        }
        if let Some((p, _)) = &self.partial {
            d.insert("partialFilterExpression", p.clone());
        }
        if self.clustering {
            d.insert("clustering", true);
        }
        if let Some(s) = self.expire_after_secs {
            d.insert(
                "expireAfterSeconds",
                i32::try_from(s).map_or(Bson::Int64(s), Bson::Int32),
            );
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        if let Some(c) = &self.collation {
            d.insert("collation", c.resolved().clone());
        }
        if let Some(t) = &self.text {
            t.describe(&mut d);
        }
        d
    }

    /// Whether `other` describes the same index (key and options; the name aside).
    pub fn same_as(&self, other: &IndexSpec) -> bool {
        self.same_key(other)
            && self.unique == other.unique
            && self.sparse == other.sparse
            && self.clustering == other.clustering
            && self.expire_after_secs == other.expire_after_secs
            && self.hidden == other.hidden
            && silt_query::collation::same(self.collation.as_ref(), other.collation.as_ref())
            && self.text == other.text
            && self.partial.as_ref().map(|p| &p.0) == other.partial.as_ref().map(|p| &p.0)
    }

    /// Whether the key patterns are the same fields in the same directions.
    pub fn same_key(&self, other: &IndexSpec) -> bool {
        self.fields == other.fields
    }

    /// The directions of the fields.
    pub fn directions(&self) -> Vec<bool> {
        self.fields.iter().map(|(_, d)| *d).collect()
    }

    /// The index keys of `doc`: for each, the encoded prefix (without `_id`) and the values.
    /// Empty if the document is not indexed (sparse and missing every field, or outside
    /// the partial filter). Also tells whether any field held an array (multikey).
    pub fn keys(&self, doc: &Document) -> Result<DocKeys, KeyError> {
        if let Some((_, m)) = &self.partial {
            // The partial filter compares under the index's collation, whatever the command
            // that writes the document uses.
            let _collation = Collation::scope(self.collation.as_ref());
            if !m.matches(doc) {
                return Ok(DocKeys::default());
            }
        }
        if let Some(t) = &self.text {
            // One entry per term: (term, the document's score for it).
            let scores = t
                .term_scores(doc)
                .map_err(|e| KeyError::Text(e.code, e.msg))?;
            let keys = scores
                .into_iter()
                .map(|(term, score)| {
                    let vals = vec![Bson::String(term), Bson::Double(score)];
                    let key = keyenc::encode_key(&[(&vals[0], false), (&vals[1], false)]);
                    (key, vals)
                })
                .collect();
            return Ok(DocKeys {
                keys,
                multikey: true,
            });
        }
        let mut per_field: Vec<Vec<Bson>> = Vec::with_capacity(self.fields.len());
        let mut arrays: Vec<&str> = Vec::new();
        let mut any_present = false;
        for (path, _) in &self.fields {
            let parts: Vec<&str> = path.split('.').collect();
            let mut w = Walk::default();
            match doc.get(parts[0]) {
                Some(x) => w.walk(x, &parts[1..]),
                None => w.out.push(Bson::Null),
            }
            if w.out.is_empty() {
                w.out.push(Bson::Null);
            }
            any_present |= w.present;
            if w.array {
                arrays.push(path);
            }
            // Deduplicate values equal as keys.
            let mut seen: Vec<Vec<u8>> = Vec::new();
            let mut vals = Vec::new();
            for v in w.out {
                let v = match &self.collation {
                    Some(c) => c.key(&v),
                    None => v,
                };
                let e = keyenc::encode(&v);
                if !seen.contains(&e) {
                    seen.push(e);
                    vals.push(v);
                }
            }
            per_field.push(vals);
        }
        if arrays.len() > 1 {
            return Err(KeyError::ParallelArrays(
                arrays[0].to_string(),
                arrays[1].to_string(),
            ));
        }
        if self.sparse && !any_present {
            return Ok(DocKeys::default());
        }
        let mut combos: Vec<Vec<Bson>> = vec![Vec::new()];
        for vals in per_field {
            let mut next = Vec::with_capacity(combos.len() * vals.len());
            for c in &combos {
                for v in &vals {
                    let mut c2 = c.clone();
                    c2.push(v.clone());
                    next.push(c2);
                }
            }
            combos = next;
        }
        let keys = combos
            .into_iter()
            .map(|vals| {
                let pairs: Vec<(&Bson, bool)> = vals
                    .iter()
                    .zip(self.fields.iter())
                    .map(|(v, (_, d))| (v, *d))
                    .collect();
                (keyenc::encode_key(&pairs), vals)
            })
            .collect();
        Ok(DocKeys {
            keys,
            multikey: !arrays.is_empty(),
        })
    }

    /// `{ a: 1, b: "x" }` for a key's values, as MongoDB prints a duplicate key.
    pub fn key_value_doc(&self, vals: &[Bson]) -> Document {
        let mut d = Document::new();
        for ((f, _), v) in self.fields.iter().zip(vals) {
            d.insert(f.clone(), v.clone());
        }
        d
    }

    /// The shape of `doc`'s entries in a non-clustering index (see the module docs): empty
    /// when the keys say everything.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a field's position: a key pattern is one BSON document (at most 16 MiB), so it \
                  has far fewer than 2^31 fields"
    )]
    pub fn shape(&self, doc: &Document) -> Vec<u8> {
        let mut exact = Document::new();
        let mut missing: Vec<Bson> = Vec::new();
        for (i, (path, _)) in self.fields.iter().enumerate() {
            match value_at(doc, path) {
                At::Value(v) if !keyenc::is_exact(v) => {
                    exact.insert(i.to_string(), v.clone());
                }
                At::Value(_) => {}
                At::Missing => missing.push(Bson::Int32(i as i32)),
                At::Array => return encode_shape(doc! { "x": true }),
            }
        }
        if let Some(id) = doc.get("_id").filter(|id| !keyenc::is_exact(id)) {
            exact.insert("_id", id.clone());
        }
        let mut shape = Document::new();
        if !exact.is_empty() {
            shape.insert("v", exact);
        }
        if !missing.is_empty() {
            shape.insert("m", missing);
        }
        if shape.is_empty() {
            Vec::new()
        } else {
            encode_shape(shape)
        }
    }
}

fn encode_shape(d: Document) -> Vec<u8> {
    let mut v = Vec::new();
    // Writing a document to a Vec cannot fail.
    let _ = d.to_writer(&mut v);
    v
}

/// The value at a dotted path, reached through documents only.
enum At<'a> {
    Value(&'a Bson),
    Missing,
    /// An array on the way or at the end.
    Array,
}

fn value_at<'a>(doc: &'a Document, path: &str) -> At<'a> {
    let mut parts = path.split('.');
    let Some(mut cur) = parts.next().and_then(|p| doc.get(p)) else {
        return At::Missing;
    };
    for p in parts {
        match cur {
            Bson::Document(d) => match d.get(p) {
                Some(v) => cur = v,
                None => return At::Missing,
            },
            Bson::Array(_) => return At::Array,
            _ => return At::Missing,
        }
    }
    match cur {
        Bson::Array(_) => At::Array,
        v => At::Value(v),
    }
}

/// The value at a dotted path through documents (`None` if missing or under a non-document),
/// for tests.
#[cfg(test)]
pub(crate) fn tests_value_at<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    match value_at(doc, path) {
        At::Value(v) => Some(v),
        _ => None,
    }
}

/// Set `path` in `doc` to `v`, creating the documents on the way; `None` if a non-document
/// is in the way.
fn set_path(doc: &mut Document, path: &str, v: Bson) -> Option<()> {
    match path.split_once('.') {
        None => {
            doc.insert(path, v);
            Some(())
        }
        Some((first, rest)) => {
            if !doc.contains_key(first) {
                doc.insert(first, Document::new());
            }
            match doc.get_mut(first)? {
                Bson::Document(sub) => set_path(sub, rest, v),
                _ => None,
            }
        }
    }
}

/// The keys of one document under one index.
#[derive(Debug, Default, Clone)]
pub struct DocKeys {
    /// (encoded prefix, values), deduplicated.
    pub keys: Vec<(Vec<u8>, Vec<Bson>)>,
    pub multikey: bool,
}

/// A document that cannot be indexed.
#[derive(Debug, Clone)]
pub enum KeyError {
    /// Two indexed fields hold arrays.
    ParallelArrays(String, String),
    /// A text index cannot read the document (MongoDB's code and message).
    Text(i32, String),
}

#[derive(Default)]
struct Walk {
    out: Vec<Bson>,
    array: bool,
    present: bool,
}

impl Walk {
    fn walk(&mut self, v: &Bson, parts: &[&str]) {
        let Some((first, rest)) = parts.split_first() else {
            self.present = true;
            match v {
                Bson::Array(a) => {
                    self.array = true;
                    if a.is_empty() {
                        self.out.push(Bson::Undefined);
                    } else {
                        self.out.extend(a.iter().cloned());
                    }
                }
                other => self.out.push(other.clone()),
            }
            return;
        };
        match v {
            Bson::Document(d) => match d.get(*first) {
                Some(x) => self.walk(x, rest),
                None => self.out.push(Bson::Null),
            },
            Bson::Array(a) => {
                if let Some(i) = silt_bson::path::array_index(first) {
                    if let Some(x) = a.get(i) {
                        self.walk(x, rest);
                        return;
                    }
                }
                self.array = true;
                let before = self.out.len();
                for x in a {
                    if let Bson::Document(_) = x {
                        self.walk(x, parts);
                    }
                }
                if self.out.len() == before {
                    self.out.push(Bson::Null);
                }
            }
            _ => self.out.push(Bson::Null),
        }
    }
}

/// The smallest byte string greater than every string that starts with `p` (None if there is
/// none: `p` is all `0xFF`).
pub fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut v = p.to_vec();
    while let Some(last) = v.pop() {
        if last != 0xFF {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

/// The length of the index-value part (the prefix) of an entry key.
pub fn prefix_len(key: &[u8], desc: &[bool]) -> Option<usize> {
    let mut pos = 0;
    for &d in desc {
        let rest = key.get(pos..)?;
        let (_, n) = if d {
            keyenc::decode_value_desc(rest)?
        } else {
            keyenc::decode_value(rest)?
        };
        pos += n;
    }
    Some(pos)
}

/// One secondary index of a collection: its spec and dictionary.
/// How often an index was chosen to answer an operation since this process loaded it
/// (`$indexStats`' `accesses`): kept in memory, reset by a restart, as in MongoDB.
#[derive(Debug)]
pub struct Accesses {
    ops: std::sync::atomic::AtomicU64,
    since: std::time::SystemTime,
}

impl Default for Accesses {
    fn default() -> Self {
        Accesses {
            ops: std::sync::atomic::AtomicU64::new(0),
            since: std::time::SystemTime::now(),
        }
    }
}

impl Accesses {
    /// One more operation used the index.
    pub fn record(&self) {
        self.ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Operations counted so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// When counting started.
    pub fn since(&self) -> std::time::SystemTime {
        self.since
    }
}

pub struct Index {
    pub spec: IndexSpec,
    /// Operations that chose this index.
    pub accesses: Accesses,
    /// One dictionary per partition of the collection (one member when unpartitioned); an
    /// entry lives in the member of its document's partition.
    parts: RwLock<Arc<Parts>>,
    multikey: AtomicBool,
    /// Entries carry shapes (every index built since shapes exist).
    pub(crate) coverable: bool,
    desc: Vec<bool>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("name", &self.spec.name)
            .finish()
    }
}

impl Index {
    pub(crate) fn new(spec: IndexSpec, parts: Parts, multikey: bool, coverable: bool) -> Index {
        let desc = spec.directions();
        Index {
            spec,
            accesses: Accesses::default(),
            parts: RwLock::new(Arc::new(parts)),
            multikey: AtomicBool::new(multikey),
            coverable,
            desc,
        }
    }

    /// Whether entries carry shapes, so that [`Index::covered_doc`] can answer (false for a
    /// clustering index, whose entries carry the document itself).
    pub fn is_coverable(&self) -> bool {
        // A collated index holds collation keys, not the strings a query returns.
        self.coverable
            && !self.spec.clustering
            && self.spec.collation.is_none()
            && self.spec.text.is_none()
    }

    /// The index's dictionaries, one per partition.
    pub(crate) fn parts(&self) -> Arc<Parts> {
        self.parts.read().clone()
    }

    /// Replace the members (a partition added or dropped; the caller holds the collection's
    /// `build` lock exclusively).
    pub(crate) fn set_parts(&self, parts: Parts) {
        *self.parts.write() = Arc::new(parts);
    }

    /// The index name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether some document ever had an array in an indexed field.
    pub fn is_multikey(&self) -> bool {
        self.multikey.load(Ordering::Relaxed)
    }

    /// Mark multikey; true if this changed the flag.
    pub(crate) fn set_multikey(&self) -> bool {
        !self.multikey.swap(true, Ordering::Relaxed)
    }

    /// The record key (the encoded primary key: `_id` by default) of an entry key.
    pub fn entry_id_key<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        let n = prefix_len(key, &self.desc)?;
        key.get(n..)
    }

    /// The index values of an entry key, decoded.
    pub fn entry_values(&self, key: &[u8]) -> Option<Vec<Bson>> {
        let n = prefix_len(key, &self.desc)?;
        keyenc::decode_key(&key[..n], &self.desc)
    }

    /// The document an entry stands for, rebuilt from its key and shape: `_id` and every
    /// indexed field, with the stored types, and without the fields the document lacks.
    /// `None` when the entry cannot stand in for the document: the index does not carry
    /// shapes, the document had an array along an indexed path, or it lacks a dotted field
    /// (`{a: 5}`, `{a: {}}` and `{}` all lack `a.b`, and project differently).
    pub fn covered_doc(&self, key: &[u8], value: &[u8]) -> Option<Document> {
        if !self.is_coverable() {
            return None;
        }
        let n = prefix_len(key, &self.desc)?;
        let mut vals = keyenc::decode_key(&key[..n], &self.desc)?;
        // The record key ends in `_id`, whatever the collection's primary key.
        let mut id = crate::pk::id_of_key(&key[n..])?;
        let mut missing = vec![false; vals.len()];
        if !value.is_empty() {
            let shape = Document::from_reader(value).ok()?;
            if shape.get_bool("x").unwrap_or(false) {
                return None;
            }
            if let Ok(exact) = shape.get_document("v") {
                for (k, v) in exact {
                    if k == "_id" {
                        id = v.clone();
                    } else {
                        *vals.get_mut(k.parse::<usize>().ok()?)? = v.clone();
                    }
                }
            }
            if let Ok(m) = shape.get_array("m") {
                for i in m {
                    let Bson::Int32(i) = i else { return None };
                    *missing.get_mut(usize::try_from(*i).ok()?)? = true;
                }
            }
        }
        let mut doc = doc! { "_id": id };
        let fields = &self.spec.fields;
        for (i, ((path, _), v)) in fields.iter().zip(vals).enumerate() {
            // `_id` is whole already; a field inside another indexed field is part of it.
            let inside = |f: &str| f != path.as_str() && path_covers(f, path);
            if path_covers("_id", path) || fields.iter().any(|(f, _)| inside(f)) {
                continue;
            }
            if missing[i] {
                if path.contains('.') {
                    return None;
                }
                continue;
            }
            set_path(&mut doc, path, v)?;
        }
        Some(doc)
    }

    /// The index as the planner sees it (the multikey flag as it is now).
    pub fn info(&self) -> IndexInfo<'_> {
        let s = &self.spec;
        IndexInfo {
            name: &s.name,
            key_pattern: &s.key_pattern,
            fields: &s.fields,
            unique: s.unique,
            sparse: s.sparse,
            partial: s.partial.as_ref().map(|(d, _)| d),
            clustering: s.clustering,
            multikey: self.is_multikey(),
            coverable: self.is_coverable(),
            collation: s.collation.as_ref(),
        }
    }

    /// The catalog form: the spec plus the dictionary name and the multikey and coverable
    /// flags.
    pub(crate) fn catalog_doc(&self) -> Document {
        let mut d = self.spec.to_doc();
        d.insert("dict", self.parts().first().name());
        d.insert("multikey", self.is_multikey());
        if self.coverable {
            d.insert("coverable", true);
        }
        d
    }
}
