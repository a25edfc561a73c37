//! The store as the state machine of a replica set's Raft group: the *position* of the last
//! replicated entry applied, kept in the catalog (`$raft`, a key no namespace can be) so that
//! it commits in the same engine batch as the entry's changes.
//!
//! Today only entries that change no data are applied through here (a new leader's first
//! entry, membership changes); replicating writes is the next step of issue 36
//! (`docs/replset-plan.md`, decision 3).

use silt_storage::WriteBatch;

use crate::{Result, Store};

/// The catalog key of the position.
pub(crate) const POSITION_KEY: &[u8] = b"$raft";

impl Store {
    /// The position stored by the newest [`Store::record_position`], if any.
    pub fn replication_position(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.catalog.get(POSITION_KEY)?)
    }

    /// Record that the replicated entry at `position` (opaque bytes) was applied.
    pub fn record_position(&self, position: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(&self.catalog, POSITION_KEY, position)?;
        batch.commit()?;
        Ok(())
    }
}
