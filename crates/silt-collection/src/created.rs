//! Collections created inside a multi-document transaction (by its first insert, or by
//! `create`/`createIndexes` in it, as MongoDB allows since 4.4).
//!
//! The collection is made at once (its dictionaries and catalog entry), so that the
//! transaction's writes have somewhere to go, but it is *pending*: the store's listings
//! (`listCollections`, `listDatabases`) do not show it until the transaction commits, and
//! its documents are the transaction's provisional writes, which nobody else reads. When the
//! transaction aborts (or is dropped unfinished) the collection is *abandoned*: still hidden,
//! and dropped by the store's periodic work ([`crate::Store::maintain_oplog`]'s caller runs
//! [`crate::Store::drop_abandoned`]) unless someone else has written a document into it
//! meanwhile (then it stays, shown).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;

/// The store's set of pending and abandoned creations (a leaf lock).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    inner: Mutex<PendingState>,
}

#[derive(Debug, Default)]
struct PendingState {
    /// Namespaces hidden from listings, with how many transactions hold them pending.
    hidden: BTreeMap<String, usize>,
    /// Hidden namespaces whose creating transaction did not commit: to drop if still empty.
    abandoned: BTreeSet<String>,
}

impl Pending {
    /// Whether `ns` is hidden from listings.
    pub(crate) fn hides(&self, ns: &str) -> bool {
        self.inner.lock().hidden.contains_key(ns)
    }

    fn hide(&self, ns: &str) {
        *self.inner.lock().hidden.entry(ns.to_string()).or_insert(0) += 1;
    }

    fn show(&self, ns: &str) {
        let mut st = self.inner.lock();
        if let Some(n) = st.hidden.get_mut(ns) {
            *n -= 1;
            if *n == 0 && !st.abandoned.contains(ns) {
                st.hidden.remove(ns);
            }
        }
    }

    fn abandon(&self, ns: &str) {
        self.inner.lock().abandoned.insert(ns.to_string());
    }

    /// The abandoned namespaces, taken out of the set (the caller drops or shows each).
    pub(crate) fn take_abandoned(&self) -> Vec<String> {
        let mut st = self.inner.lock();
        let list: Vec<String> = std::mem::take(&mut st.abandoned).into_iter().collect();
        list
    }

    /// Stop hiding `ns` (dropped, or kept because someone else wrote to it).
    pub(crate) fn forget(&self, ns: &str) {
        let mut st = self.inner.lock();
        st.hidden.remove(ns);
        st.abandoned.remove(ns);
    }
}

/// The collections one transaction created: shown when it commits, abandoned otherwise
/// (also when dropped unfinished).
#[derive(Debug, Default)]
pub(crate) struct Created {
    pending: Option<Arc<Pending>>,
    names: Vec<String>,
    committed: bool,
}

impl Created {
    /// Note that the transaction created `ns` (now hidden).
    pub(crate) fn add(&mut self, pending: &Arc<Pending>, ns: &str) {
        if self.names.iter().any(|n| n == ns) {
            return;
        }
        pending.hide(ns);
        self.pending.get_or_insert_with(|| pending.clone());
        self.names.push(ns.to_string());
    }

    /// Whether the transaction created `ns`.
    pub(crate) fn contains(&self, ns: &str) -> bool {
        self.names.iter().any(|n| n == ns)
    }

    /// The transaction committed: show its collections.
    pub(crate) fn commit(mut self) {
        self.committed = true;
        if let Some(p) = &self.pending {
            for ns in &self.names {
                p.show(ns);
            }
        }
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if let Some(p) = &self.pending {
            for ns in &self.names {
                p.abandon(ns);
            }
        }
    }
}
