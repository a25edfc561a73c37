//! Memory caps for the operators that hold their whole input: a blocking sort (`find` with a
//! sort no index gives, `$sort`) and `$group`. MongoDB's limits and parameter names, 100 MiB
//! each by default (`internalQueryMaxBlockingSortMemoryUsageBytes`,
//! `internalDocumentSourceGroupMaxMemoryBytes`, set with `setParameter`). siltd does not spill
//! these to disk, so past the cap the command fails with
//! QueryExceededMemoryLimitNoDiskUseAllowed (292) and a message saying what would help,
//! whatever `allowDiskUse` says, instead of growing without bound.

use std::sync::atomic::{AtomicUsize, Ordering};

use bson::{Bson, Document};

use crate::QueryError;

/// `internalQueryMaxBlockingSortMemoryUsageBytes`.
pub static SORT_LIMIT: AtomicUsize = AtomicUsize::new(100 << 20);
/// `internalDocumentSourceGroupMaxMemoryBytes`.
pub static GROUP_LIMIT: AtomicUsize = AtomicUsize::new(100 << 20);

/// Roughly the bytes a value takes in memory (its BSON size plus per-value overhead).
pub fn approx_size(v: &Bson) -> usize {
    match v {
        Bson::String(s) | Bson::JavaScriptCode(s) | Bson::Symbol(s) => 32 + s.len(),
        Bson::Document(d) => doc_size(d),
        Bson::Array(a) => 32 + a.iter().map(approx_size).sum::<usize>(),
        Bson::Binary(b) => 32 + b.bytes.len(),
        Bson::RegularExpression(r) => 64 + r.pattern.len() + r.options.len(),
        _ => 24,
    }
}

/// [`approx_size`] of a document.
pub fn doc_size(d: &Document) -> usize {
    32 + d
        .iter()
        .map(|(k, v)| 16 + k.len() + approx_size(v))
        .sum::<usize>()
}

/// What a budget is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Sort,
    Group,
}

/// Bytes charged against one cap by one operator of one command.
#[derive(Debug)]
pub struct Budget {
    used: usize,
    limit: usize,
    kind: Use,
}

impl Budget {
    pub fn new(kind: Use) -> Budget {
        let limit = match kind {
            Use::Sort => SORT_LIMIT.load(Ordering::Relaxed),
            Use::Group => GROUP_LIMIT.load(Ordering::Relaxed),
        };
        Budget {
            used: 0,
            limit,
            kind,
        }
    }

    /// Charge `n` bytes; the error once past the cap.
    pub fn charge(&mut self, n: usize) -> Result<(), QueryError> {
        self.used = self.used.saturating_add(n);
        if self.used <= self.limit {
            return Ok(());
        }
        let msg = match self.kind {
            Use::Sort => format!(
                "Sort exceeded memory limit of {} bytes, and siltd does not sort on disk (allowDiskUse cannot help): use an index that gives this order, add a limit, or raise internalQueryMaxBlockingSortMemoryUsageBytes",
                self.limit
            ),
            Use::Group => format!(
                "Exceeded memory limit for $group ({} bytes), and siltd does not spill $group to disk (allowDiskUse cannot help): group fewer documents or keys, or raise internalDocumentSourceGroupMaxMemoryBytes",
                self.limit
            ),
        };
        Err(QueryError::coded(
            292,
            "QueryExceededMemoryLimitNoDiskUseAllowed",
            msg,
        ))
    }

    /// Whether more than half the cap is used: time for a bounded sort to drop what it will
    /// not return.
    pub fn past_half(&self) -> bool {
        self.used > self.limit / 2
    }

    /// Give `n` bytes back (documents a bounded sort dropped).
    pub fn release(&mut self, n: usize) {
        self.used = self.used.saturating_sub(n);
    }
}
