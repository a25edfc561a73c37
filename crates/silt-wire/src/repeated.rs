//! Repeated field names. BSON allows a key to appear twice in one document; a decoded
//! `bson::Document` keeps only the last value. mongod sees every element, and refuses some
//! repeats (two `_id`s, two update paths, two fields of an expression object) while others
//! have a meaning (a filter's repeated conditions all apply). So the decoder notes each
//! repeat, with where it was and the raw bytes of the document that holds it, and the server
//! decides what each one means.

/// One document in which a key appeared more than once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedKey {
    /// Where the document is in the command: field names, and array positions as decimal
    /// strings (a document sequence's documents are under its identifier, like a body array).
    pub path: Vec<String>,
    /// The first key that repeats.
    pub key: String,
    /// The document's raw bytes, every element in wire order.
    pub raw: Vec<u8>,
}

impl RepeatedKey {
    /// Whether the document is at `path` exactly.
    pub fn is_at(&self, path: &[&str]) -> bool {
        self.path.len() == path.len() && self.path.iter().zip(path).all(|(a, b)| a == b)
    }

    /// Whether the document is at `prefix` or inside it.
    pub fn is_under(&self, prefix: &[&str]) -> bool {
        self.path.len() >= prefix.len() && self.path.iter().zip(prefix).all(|(a, b)| a == b)
    }
}
