//! A collection's primary key: the key its documents are stored, ordered and partitioned by
//! (TokuMX's `primaryKey` option). `{_id: 1}` by default; otherwise ascending fields ending
//! in `_id`, such as `{ts: 1, _id: 1}`. A document's record key is the concatenated
//! order-preserving encoding of its values for those fields (`silt_bson::keyenc`), so for the
//! default it is the encoded `_id` itself. Secondary index entries end in the record key.
//!
//! With a key other than `{_id: 1}`, `_id` is found through a secondary index named `_id_`,
//! which is unique within each partition (as in TokuMX), not across partitions.

use bson::{doc, Bson, Document};
use silt_bson::keyenc;

use crate::{CollError, Result};

/// The fields a collection is keyed by (the last one is always `_id`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimaryKey {
    fields: Vec<String>,
    /// A capped collection: documents are keyed by their insertion sequence (then `_id`), so
    /// storage order is insertion order; the sequence is assigned by the collection
    /// (`Collection::new_record_key`), never derived from the document.
    natural: bool,
}

impl Default for PrimaryKey {
    fn default() -> Self {
        PrimaryKey {
            fields: vec!["_id".into()],
            natural: false,
        }
    }
}

fn bad(code: i32, msg: impl Into<String>) -> CollError {
    CollError::Partition {
        code,
        msg: msg.into(),
    }
}

fn is_one(v: &Bson) -> bool {
    match v {
        Bson::Int32(i) => *i == 1,
        Bson::Int64(i) => *i == 1,
        Bson::Double(f) => *f == 1.0,
        _ => false,
    }
}

impl PrimaryKey {
    /// The `primaryKey` option of `create`: an object of ascending fields (`1`) ending in
    /// `_id: 1`, without repeats. TokuMX's errors: 17209 not an object, 17203 not ending in
    /// `_id`; BadValue for a direction other than 1 or a field named twice or empty.
    pub fn parse(spec: &Bson) -> Result<PrimaryKey> {
        let Bson::Document(d) = spec else {
            return Err(bad(
                17209,
                format!("primaryKey must be an object, not {spec}"),
            ));
        };
        let mut fields: Vec<String> = Vec::new();
        for (k, v) in d {
            if k.is_empty() || k.starts_with('$') || k.split('.').any(str::is_empty) {
                return Err(bad(
                    2,
                    format!("primaryKey has an illegal field name '{k}'"),
                ));
            }
            if !is_one(v) {
                return Err(bad(
                    2,
                    format!("primaryKey {d}: every field must be ascending (1), not {k}: {v}"),
                ));
            }
            if fields.contains(k) {
                return Err(bad(2, format!("primaryKey {d} names {k} twice")));
            }
            fields.push(k.clone());
        }
        if fields.last().map(String::as_str) != Some("_id") {
            return Err(bad(17203, "defined primary key must end in _id: 1"));
        }
        Ok(PrimaryKey {
            fields,
            natural: false,
        })
    }

    /// The key of a collection created with these options (`primaryKey`, validated when the
    /// collection was created).
    pub fn of_options(options: &Document) -> Result<PrimaryKey> {
        if options.get_bool("capped").unwrap_or(false) {
            return Ok(PrimaryKey {
                fields: vec!["_id".into()],
                natural: true,
            });
        }
        match options.get("primaryKey") {
            None => Ok(PrimaryKey::default()),
            Some(spec) => PrimaryKey::parse(spec),
        }
    }

    /// Whether this is `{_id: 1}`.
    pub fn is_id(&self) -> bool {
        self.fields.len() == 1 && !self.natural
    }

    /// Whether documents are keyed by insertion order (a capped collection).
    pub fn is_natural(&self) -> bool {
        self.natural
    }

    /// The key pattern, `{ts: 1, _id: 1}` (`{$natural: 1}` for a capped collection).
    pub fn pattern(&self) -> Document {
        if self.natural {
            return doc! { "$natural": 1 };
        }
        self.fields
            .iter()
            .map(|f| (f.clone(), Bson::Int32(1)))
            .collect()
    }

    /// The fields, `_id` last.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// The record key of `doc`. A missing field counts as null; an array, a regex or
    /// undefined is refused (TokuMX's 17205, 17208, 17210).
    pub fn key_of(&self, doc: &Document) -> Result<Vec<u8>> {
        if self.natural {
            return Err(bad(
                2,
                "a capped collection's record keys come from its insertion sequence",
            ));
        }
        let mut out = Vec::with_capacity(16 * self.fields.len());
        for f in &self.fields {
            let v = silt_bson::path::get_path(doc, f)
                .cloned()
                .unwrap_or(Bson::Null);
            if self.fields.len() > 1 {
                check_value(f, &v)?;
            }
            keyenc::encode_value(&v, &mut out);
        }
        Ok(out)
    }

    /// The record key of a key document naming exactly the key's fields in order
    /// (`addPartition`'s `newMax`, `dropPartition`'s `max`).
    pub fn key_of_bound(&self, d: &Document) -> Result<Vec<u8>> {
        let names: Vec<&str> = d.keys().map(String::as_str).collect();
        if names != self.fields.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(bad(
                2,
                format!(
                    "{d} is not a key of the collection's primaryKey {}",
                    self.pattern()
                ),
            ));
        }
        let mut out = Vec::new();
        for v in d.values() {
            keyenc::encode_value(v, &mut out);
        }
        Ok(out)
    }

    /// The key document of a record key (`{ts: .., _id: ..}`); `None` if unreadable.
    pub fn doc_of_key(&self, key: &[u8]) -> Option<Document> {
        let vals = decode_values(key)?;
        (vals.len() == self.fields.len())
            .then(|| self.fields.iter().cloned().zip(vals).collect::<Document>())
    }

    /// The key document with every field MaxKey (the last partition's bound).
    pub fn max_key_doc(&self) -> Document {
        self.fields
            .iter()
            .map(|f| (f.clone(), Bson::MaxKey))
            .collect()
    }
}

/// Every value a record key (or any run of encoded values) holds, in order.
pub(crate) fn decode_values(mut key: &[u8]) -> Option<Vec<Bson>> {
    let mut out = Vec::new();
    while !key.is_empty() {
        let (v, used) = keyenc::decode_value(key)?;
        out.push(v);
        key = &key[used..];
    }
    Some(out)
}

/// The `_id` of a record key (its last value).
pub(crate) fn id_of_key(key: &[u8]) -> Option<Bson> {
    decode_values(key)?.pop()
}

fn check_value(field: &str, v: &Bson) -> Result<()> {
    let (code, what) = match v {
        Bson::Array(_) => (17205, "an array"),
        Bson::RegularExpression(_) => (17208, "a regex"),
        Bson::Undefined => (17210, "undefined"),
        _ => return Ok(()),
    };
    Err(bad(
        code,
        format!(
            "primary key field {field} cannot be {what}: {}",
            doc! { field: v.clone() }
        ),
    ))
}
