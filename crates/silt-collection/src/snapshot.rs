//! What one read sees: every collection of the store as of one moment (a transaction's own
//! writes included, when it is a transaction's). Taken by `Store::snapshot`,
//! `Collection::snapshot` or `Transaction::snapshot`, cheap to clone, and held as long as a
//! read needs it (a snapshot read's retained `atClusterTime`, a cursor's batches). The
//! engine's snapshot it wraps stays inside this crate.

/// A consistent view of the store; see the module comment.
#[derive(Clone, Debug)]
pub struct Snapshot(silt_storage::Snapshot);

impl Snapshot {
    pub(crate) fn new(engine: silt_storage::Snapshot) -> Snapshot {
        Snapshot(engine)
    }

    /// The engine's snapshot, for reads through the engine.
    pub(crate) fn engine(&self) -> &silt_storage::Snapshot {
        &self.0
    }
}
