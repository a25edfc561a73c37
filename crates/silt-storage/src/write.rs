//! The one write path. Every logged write, a single [`Dict`] write or a [`WriteBatch`] across
//! dictionaries, goes through [`commit`] (or its one-write form [`commit_one`]), which alone
//! own the sequence
//!
//! 1. take the write gate shared (the checkpoint takes it exclusively to mark nodes, so no
//!    write is ever between its log append and its injection while a checkpoint starts);
//! 2. take every involved tree for writing, in dictionary-id order;
//! 3. append one log record (refused once the environment is poisoned, before anything is
//!    applied, so a write the log cannot hold is never visible);
//! 4. inject each write into its tree;
//! 5. release, wait for the log (group commit), then keep buffers and memory in bounds.
//!
//! The gate's shared side is private to this module: the only other way in is
//! [`install_tree`] (a bulk load publishing a finished tree, which logs nothing).
//!
//! [`WriteBatch`]: crate::WriteBatch

use std::sync::Arc;

use parking_lot::{RwLock, RwLockWriteGuard};

use crate::dict::{apply_record, Dict, DictCore};
use crate::env::EnvInner;
use crate::error::Result;
use crate::options::SyncPolicy;
use crate::tree::Tree;
use crate::wal::LogRecord;

/// The lock between writers (shared) and the start of a checkpoint (exclusive). Lock order:
/// after the checkpoint mutex and the catalog, before any tree lock.
#[derive(Debug, Default)]
pub(crate) struct WriteGate {
    lock: RwLock<()>,
}

impl WriteGate {
    /// Exclude every writer (the checkpoint, while it notes the last LSN and marks nodes).
    pub fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.lock.write()
    }
}

/// Log `ops` as one record and apply them (see the module docs). With one write the record is
/// that write's own; with several it is a batch record, replayed whole or not at all.
pub(crate) fn commit(env: &Arc<EnvInner>, mut ops: Vec<(Dict, LogRecord)>) -> Result<()> {
    if ops.len() == 1 {
        let (d, rec) = ops.pop().expect("one write");
        return commit_one(&d, rec);
    }
    let mut dicts: Vec<Dict> = ops.iter().map(|(d, _)| d.clone()).collect();
    dicts.sort_by_key(|d| d.core.id);
    dicts.dedup_by_key(|d| d.core.id);
    for d in &dicts {
        d.live()?;
    }
    let lsn = {
        let _gate = env.gate.lock.read();
        // Every tree is locked while the record is appended, so that each dictionary's
        // messages get their MSNs in log order.
        let mut trees: Vec<_> = dicts
            .iter()
            .map(|d| (d.core.id, d.core.tree.write()))
            .collect();
        let (handles, recs): (Vec<Dict>, Vec<LogRecord>) = ops.into_iter().unzip();
        let rec = LogRecord::Batch(recs);
        let lsn = env.wal.append(&rec)?;
        for (d, r) in handles.iter().zip(rec.writes()) {
            let i = trees
                .binary_search_by_key(&d.core.id, |(id, _)| *id)
                .expect("every dictionary of the batch is locked");
            apply_record(&mut trees[i].1, env, r);
        }
        lsn
    };
    env.wal
        .wait(lsn, env.opts.sync == SyncPolicy::EveryCommit)?;
    for d in &dicts {
        d.after_write()?;
    }
    Ok(())
}

/// [`commit`] of one write: its own record, one tree.
pub(crate) fn commit_one(d: &Dict, rec: LogRecord) -> Result<()> {
    d.live()?;
    let env = &d.env;
    let lsn = {
        let _gate = env.gate.lock.read();
        let mut t = d.core.tree.write();
        let lsn = env.wal.append(&rec)?;
        apply_record(&mut t, env, rec);
        lsn
    };
    env.wal
        .wait(lsn, env.opts.sync == SyncPolicy::EveryCommit)?;
    d.after_write()
}

/// Run `f` on `core`'s tree with writers of the write path excluded from no one but that
/// tree, and a checkpoint's start excluded (a bulk load publishing its finished tree).
pub(crate) fn install_tree<R>(
    env: &EnvInner,
    core: &DictCore,
    f: impl FnOnce(&mut Tree) -> R,
) -> R {
    let _gate = env.gate.lock.read();
    let mut t = core.tree.write();
    f(&mut t)
}
