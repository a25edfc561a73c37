//! The rules of a document write, applied by the one function every write goes through
//! (`Collection::write_doc` in `write.rs`), whatever the entry point: an insert (plain, in a
//! transaction, an upsert, a `$out`/`$merge` write, a partition's), a replacement, an update
//! read and rewritten, a delete (a user's, a TTL deletion, a capped collection's trimming).
//!
//! Before anything is written: a multi-document transaction may not write a capped
//! collection; the new version of the document must fit MongoDB's size and nesting limits and
//! pass the collection's validator (unless the writer bypasses it). Index keys and unique
//! checks follow in `write_doc` itself; after the commit, a capped collection that received
//! a document is trimmed back to its cap (at once outside a transaction, when the
//! transaction commits inside one: `txn.rs`).

use bson::{Bson, Document};

use crate::{CollError, Collection, Result, Writer};

/// Largest document stored (MongoDB's 16 MiB).
pub const MAX_DOC_BYTES: usize = 16 * 1024 * 1024;

/// Deepest nesting of embedded documents and arrays a stored document may have (MongoDB's
/// limit for user storage; the wire accepts deeper ones for commands).
pub const MAX_STORAGE_DEPTH: usize = 100;

/// How deep documents and arrays nest below `d` (0 for a flat document).
pub fn nesting_depth(d: &Document) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Bson, usize)> = d.values().map(|v| (v, 1)).collect();
    while let Some((v, depth)) = stack.pop() {
        match v {
            Bson::Document(sub) => {
                deepest = deepest.max(depth);
                stack.extend(sub.values().map(|x| (x, depth + 1)));
            }
            Bson::Array(a) => {
                deepest = deepest.max(depth);
                stack.extend(a.iter().map(|x| (x, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The new version of a document (`new_len` bytes encoded) within MongoDB's limits: 10334
/// BSONObjectTooLarge past 16 MiB (worded as MongoDB words an insert's and an update's), 15
/// Overflow past 100 levels of nesting.
pub fn check_limits(old: Option<&Document>, new: &Document, new_len: usize) -> Result<()> {
    if new_len > MAX_DOC_BYTES {
        let msg = match old {
            None => format!(
                "object to insert too large. size in bytes: {new_len}, max size: {MAX_DOC_BYTES}"
            ),
            Some(_) => format!("Resulting document after update is larger than {MAX_DOC_BYTES}"),
        };
        return Err(CollError::Refused { code: 10334, msg });
    }
    if nesting_depth(new) > MAX_STORAGE_DEPTH {
        return Err(CollError::Refused {
            code: 15,
            msg: format!("cannot store a document nested deeper than {MAX_STORAGE_DEPTH} levels"),
        });
    }
    Ok(())
}

impl Collection {
    /// Whether this is a capped collection.
    pub fn is_capped(&self) -> bool {
        self.pk.is_natural()
    }

    /// The rules that decide whether `w` may write `new` over `old` (see the module's
    /// comment); `new_len` is `new`'s encoded size.
    pub(crate) fn check_write(
        &self,
        w: &Writer<'_>,
        old: Option<&Document>,
        new: Option<(&Document, usize)>,
    ) -> Result<()> {
        if self.is_capped() && w.txn.is_some_and(|t| t.is_multi()) {
            return Err(match new {
                Some(_) => CollError::Refused {
                    code: 263,
                    msg: format!(
                        "Collection '{}' is a capped collection. Writes in transactions are not allowed on capped collections.",
                        self.ns
                    ),
                },
                None => CollError::Refused {
                    code: 20,
                    msg: format!(
                        "Cannot remove from a capped collection in a multi-document transaction: {}",
                        self.ns
                    ),
                },
            });
        }
        let Some((new, new_len)) = new else {
            return Ok(());
        };
        check_limits(old, new, new_len)?;
        if !w.bypass_validation {
            self.check_validator(old, new)?;
        }
        Ok(())
    }

    /// Check `new` (replacing `old`, if any) against the validator: refused under action
    /// `error`, logged under `warn`.
    fn check_validator(&self, old: Option<&Document>, new: &Document) -> Result<()> {
        let Some(v) = self.validator() else {
            return Ok(());
        };
        // A validator compares under the collection's default collation (as it was
        // compiled), whatever the writing command's collation is.
        let _collation = silt_query::collation::Collation::scope(self.default_collation());
        match v.check(old, new) {
            Ok(None) => Ok(()),
            Ok(Some(info)) => {
                tracing::warn!(
                    ns = %self.ns,
                    id = %new.get("_id").cloned().unwrap_or(Bson::Null),
                    details = %info,
                    "Document would fail validation"
                );
                Ok(())
            }
            Err(info) => Err(CollError::Validation(Box::new(info))),
        }
    }
}
