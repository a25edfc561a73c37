//! openraft's own test suite for log stores and state machines, run over [`LogStore`] and
//! the state-machine adapter (with a state machine in memory behind it).

use std::io;
use std::path::Path;
use std::sync::Arc;

use openraft::testing::log::{StoreBuilder, Suite};
use openraft::StorageError;
use parking_lot::Mutex;

use crate::log_store::LogStore;
use crate::snapshots::Snapshots;
use crate::state::{Applied, Sm, SnapshotView, StateMachine};
use crate::types::TypeConfig;

#[derive(Default)]
struct MemSm {
    position: Mutex<Option<Vec<u8>>>,
    applied: Mutex<Vec<u64>>,
}

impl StateMachine for MemSm {
    fn position(&self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.position.lock().clone())
    }
    fn apply(&self, entry: Applied<'_>, position: &[u8]) -> io::Result<Vec<u8>> {
        self.applied.lock().push(entry.index);
        *self.position.lock() = Some(position.to_vec());
        Ok(Vec::new())
    }
    fn view(&self) -> io::Result<Box<dyn SnapshotView>> {
        Ok(Box::new(MemView(
            self.position.lock().clone().unwrap_or_default(),
        )))
    }
    fn install(&self, position: &[u8], _data: &Path) -> io::Result<()> {
        *self.position.lock() = Some(position.to_vec());
        Ok(())
    }
}

/// A view of [`MemSm`]: its position only.
struct MemView(Vec<u8>);

impl SnapshotView for MemView {
    fn position(&self) -> &[u8] {
        &self.0
    }
    fn write_to(self: Box<Self>, out: &mut dyn io::Write) -> io::Result<()> {
        out.write_all(b"position only")
    }
}

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, Sm, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, Sm), StorageError<TypeConfig>> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = LogStore::open(&dir.path().join("log"), 8 << 20).expect("the log opens");
        let snapshots = Snapshots::open(&dir.path().join("snapshots")).expect("opens");
        let sm = Sm::new(Arc::new(MemSm::default()), Arc::new(snapshots));
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(Suite::test_all(Builder))
        .expect("the suite passes");
}
