//! A bounds-checked little-endian reader and a strict BSON document reader.

use bson::raw::{RawArray, RawArrayIter, RawBsonRef, RawDocument, RawIter};
use bson::{Bson, Document, JavaScriptCodeWithScope};

use crate::{RepeatedKey, WireError, MAX_BSON_DEPTH, MAX_BSON_INTERNAL_BYTES};

/// A cursor over a byte slice; every read is bounds-checked and fails with
/// [`WireError::Truncated`] instead of panicking.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Everything not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(WireError::Truncated(what))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        self.array(what).map(i32::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, WireError> {
        self.array(what).map(i64::from_le_bytes)
    }

    /// A NUL-terminated string that must be valid UTF-8.
    pub(crate) fn cstring(&mut self, what: &'static str) -> Result<&'a str, WireError> {
        let rest = &self.buf[self.pos..];
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(WireError::Truncated(what))?;
        self.pos += nul + 1;
        std::str::from_utf8(&rest[..nul])
            .map_err(|_| WireError::Malformed(format!("{what} is not UTF-8")))
    }

    /// One BSON document: its declared length must fit the size limit and the
    /// remaining bytes, then [`decode_document`] decodes it strictly.
    pub(crate) fn document(&mut self) -> Result<Document, WireError> {
        self.document_noting(&[], &mut Vec::new())
    }

    /// [`Reader::document`], noting each repeated key in `repeats` with its path after
    /// `prefix`.
    pub(crate) fn document_noting(
        &mut self,
        prefix: &[String],
        repeats: &mut Vec<RepeatedKey>,
    ) -> Result<Document, WireError> {
        let len = Reader::new(&self.buf[self.pos..]).i32("document length")?;
        if len < 5 {
            return Err(WireError::InvalidBson(format!(
                "document length {len} is below 5"
            )));
        }
        let len = len as usize;
        if len > MAX_BSON_INTERNAL_BYTES {
            return Err(WireError::TooLarge {
                what: "document",
                size: len,
                limit: MAX_BSON_INTERNAL_BYTES,
            });
        }
        if len > self.remaining() {
            return Err(WireError::InvalidBson(format!(
                "document length {len} exceeds the {} bytes left in the message",
                self.remaining()
            )));
        }
        decode_noting(self.take(len, "document")?, 0, prefix, repeats)
    }
}

/// A document or array being decoded, with the key it will have in its parent.
struct Frame<'a> {
    key: &'a str,
    items: Items<'a>,
    /// The document's bytes (none for an array), and whether a repeated key was noted in it.
    raw: Option<&'a RawDocument>,
    noted: bool,
}

enum Items<'a> {
    Document(RawIter<'a>, Document),
    Array(RawArrayIter<'a>, Vec<Bson>),
}

impl<'a> Frame<'a> {
    fn document(key: &'a str, doc: &'a RawDocument) -> Self {
        let items = Items::Document(doc.iter_elements(), Document::new());
        Self {
            key,
            items,
            raw: Some(doc),
            noted: false,
        }
    }

    fn array(key: &'a str, array: &'a RawArray) -> Self {
        let items = Items::Array(array.into_iter(), Vec::new());
        Self {
            key,
            items,
            raw: None,
            noted: false,
        }
    }

    /// The next element: its key (empty in arrays) and raw value.
    fn next(&mut self) -> Result<Option<(&'a str, RawBsonRef<'a>)>, bson::raw::Error> {
        match &mut self.items {
            Items::Document(iter, _) => iter
                .next()
                .map(|element| element.and_then(|e| Ok((e.key(), e.value()?))))
                .transpose(),
            Items::Array(iter, _) => iter.next().map(|v| v.map(|v| ("", v))).transpose(),
        }
    }

    /// Add a decoded element; true if its key was already there (the first repeat only).
    fn push(&mut self, key: &str, value: Bson) -> bool {
        match &mut self.items {
            Items::Document(_, doc) => {
                let repeated = doc.insert(key, value).is_some() && !self.noted;
                self.noted |= repeated;
                repeated
            }
            Items::Array(_, array) => {
                array.push(value);
                false
            }
        }
    }

    /// This frame's name in its parent's path: its key, or its position in an array.
    fn name(&self, parent: &Frame<'_>) -> String {
        match &parent.items {
            Items::Array(_, array) => array.len().to_string(),
            Items::Document(..) => self.key.to_string(),
        }
    }

    fn into_value(self) -> Bson {
        match self.items {
            Items::Document(_, doc) => Bson::Document(doc),
            Items::Array(_, array) => Bson::Array(array),
        }
    }
}

/// Decodes one BSON document of exactly `bytes.len()` bytes, nested `depth`
/// levels deep (0 at top level).
///
/// `bson`'s own decoder recurses with large stack frames (a 2 MiB stack
/// overflows at ~150 levels in debug builds), so this drives `bson`'s
/// validating raw parser with an explicit stack instead and rejects nesting
/// beyond [`MAX_BSON_DEPTH`].
pub(crate) fn decode_document(bytes: &[u8], depth: usize) -> Result<Document, WireError> {
    decode_noting(bytes, depth, &[], &mut Vec::new())
}

/// [`decode_document`], noting each document in which a key repeats (see `repeated.rs`).
fn decode_noting(
    bytes: &[u8],
    depth: usize,
    prefix: &[String],
    repeats: &mut Vec<RepeatedKey>,
) -> Result<Document, WireError> {
    let invalid = |e: bson::raw::Error| WireError::InvalidBson(e.to_string());
    let too_deep = || {
        WireError::InvalidBson(format!(
            "document nesting exceeds the maximum depth of {MAX_BSON_DEPTH}"
        ))
    };
    let root = RawDocument::from_bytes(bytes).map_err(invalid)?;
    let mut parents: Vec<Frame<'_>> = Vec::new();
    let mut current = Frame::document("", root);
    loop {
        // Depth of a value nested in `current`.
        let child_depth = depth + parents.len() + 2;
        match current.next().map_err(invalid)? {
            Some((key, value)) => {
                let nested = match value {
                    RawBsonRef::Document(doc) => Frame::document(key, doc),
                    RawBsonRef::Array(array) => Frame::array(key, array),
                    RawBsonRef::JavaScriptCodeWithScope(code) => {
                        if child_depth > MAX_BSON_DEPTH {
                            return Err(too_deep());
                        }
                        let scope = decode_document(code.scope.as_bytes(), child_depth - 1)?;
                        let code = JavaScriptCodeWithScope {
                            code: code.code.to_owned(),
                            scope,
                        };
                        if current.push(key, Bson::JavaScriptCodeWithScope(code)) {
                            note(prefix, &parents, &current, key, repeats);
                        }
                        continue;
                    }
                    leaf => {
                        let value = Bson::try_from(leaf)
                            .map_err(|e| WireError::InvalidBson(e.to_string()))?;
                        if current.push(key, value) {
                            note(prefix, &parents, &current, key, repeats);
                        }
                        continue;
                    }
                };
                if child_depth > MAX_BSON_DEPTH {
                    return Err(too_deep());
                }
                parents.push(std::mem::replace(&mut current, nested));
            }
            None => {
                let Some(parent) = parents.pop() else {
                    return match current.into_value() {
                        Bson::Document(doc) => Ok(doc),
                        _ => Err(WireError::InvalidBson("top level is not a document".into())),
                    };
                };
                let done = std::mem::replace(&mut current, parent);
                let key = done.key;
                if current.push(key, done.into_value()) {
                    note(prefix, &parents, &current, key, repeats);
                }
            }
        }
    }
}

/// Note that `key` repeats in `current`, whose ancestors are `parents` (the root first).
fn note(
    prefix: &[String],
    parents: &[Frame<'_>],
    current: &Frame<'_>,
    key: &str,
    repeats: &mut Vec<RepeatedKey>,
) {
    let mut path = prefix.to_vec();
    let chain: Vec<&Frame<'_>> = parents.iter().chain(std::iter::once(current)).collect();
    for pair in chain.windows(2) {
        path.push(pair[1].name(pair[0]));
    }
    repeats.push(RepeatedKey {
        path,
        key: key.to_string(),
        raw: current
            .raw
            .map(|r| r.as_bytes().to_vec())
            .unwrap_or_default(),
    });
}
