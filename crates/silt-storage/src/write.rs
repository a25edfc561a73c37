//! The one write path. Every logged write, a single [`Dict`] write or a [`WriteBatch`] across
//! dictionaries, inside a transaction or not, goes through [`commit`] (or its one-write form
//! [`commit_one`]), and a transaction ends through [`finish`]. They alone own the sequence
//! (steps 1 to 4 are one function, `append_and_apply`):
//!
//! 1. take the write gate shared (the checkpoint takes it exclusively to mark nodes, so no
//!    write is ever between its log append and its injection while a checkpoint starts);
//! 2. take every involved tree for writing, in dictionary-id order, each with its root whole
//!    ([`Ready`]): if a root partition was evicted, everything is released, it is read back,
//!    and the sequence starts again;
//! 3. append one log record (refused once the environment is poisoned, before anything is
//!    applied, so a write the log cannot hold is never visible);
//! 4. inject each write into its tree;
//! 5. release, wait for the log (group commit), then keep buffers and memory in bounds.
//!
//! A write outside a transaction gets its own xid, live from before step 1 until after step 4,
//! so that a snapshot sees all of a batch or none of it. A transaction's writes carry its xid,
//! are logged inside a `Txn` record and injected as provisional; its commit (or abort) is one
//! log record and one COMMIT (ABORT) message per key it wrote.
//!
//! The gate's shared side is private to this module: the only other way in is
//! [`install_tree`] (a bulk load publishing a finished tree, which logs nothing).
//!
//! [`WriteBatch`]: crate::WriteBatch

use std::sync::Arc;

use parking_lot::{RwLock, RwLockWriteGuard};

use crate::dict::{apply_record, Dict, DictCore};
use crate::env::EnvInner;
use crate::error::{Error, Result};
use crate::ids::{Lsn, Xid};
use crate::msg::MsgKind;
use crate::options::SyncPolicy;
use crate::poison::TreeMut;
use crate::tree::{Need, Ready, Tree};
use crate::txn::TxnCore;
use crate::wal::LogRecord;

/// The lock between writers (shared) and the start of a checkpoint (exclusive). Lock order:
/// after the checkpoint mutex and the catalog, before any tree lock.
#[derive(Debug, Default)]
pub(crate) struct WriteGate {
    lock: RwLock<()>,
}

impl WriteGate {
    /// Exclude every writer (the checkpoint, while it notes the last LSN and marks nodes).
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.lock.write()
    }
}

/// Every locked tree ready for injection, or the first (by position) whose root must be read.
fn whole<'a>(
    trees: &'a mut [TreeMut<'_, Tree>],
) -> std::result::Result<Vec<Ready<'a>>, (usize, Need)> {
    trees
        .iter_mut()
        .enumerate()
        .map(|(i, t)| t.ready().map_err(|n| (i, n)))
        .collect()
}

/// Steps 1 to 4, written once: under the write gate (shared) and the write locks of the trees
/// of `cores` (in id order, as given), each with its root whole, append `rec` to the log, then
/// hand it, its LSN and the ready trees to `apply`. A root that must be read back first is
/// read with nothing held, and the sequence starts again. Returns the LSN and each tree's
/// root pressure, to take along when the locks are gone.
fn append_and_apply(
    env: &EnvInner,
    cores: &[&DictCore],
    rec: LogRecord,
    apply: impl FnOnce(&mut [Ready<'_>], LogRecord, Lsn),
) -> Result<(Lsn, Vec<f64>)> {
    loop {
        let gate = env.gate.lock.read();
        // Every tree is locked while the record is appended, so that each dictionary's
        // messages get their MSNs in log order.
        let mut trees: Vec<_> = cores.iter().map(|c| c.tree.write()).collect();
        let mut ready = match whole(&mut trees) {
            Ok(r) => r,
            Err((i, need)) => {
                drop(trees);
                drop(gate);
                cores[i].do_io(env, need)?;
                continue;
            }
        };
        let lsn = env.wal.append(&rec)?;
        apply(&mut ready, rec, lsn);
        return Ok((lsn, ready.iter().map(Ready::root_pressure).collect()));
    }
}

/// Marks an auto-committed write's xid finished when dropped (also on an error path).
struct AutoXid<'a>(&'a EnvInner, Xid);

impl Drop for AutoXid<'_> {
    fn drop(&mut self) {
        self.0.txns.finish(self.1);
    }
}

/// Log `ops` as one record and apply them (see the module docs): committed at once without
/// `txn`, provisional writes of `txn` with it. With one write the record is that write's own;
/// with several it is a batch record, replayed whole or not at all.
pub(crate) fn commit(
    env: &Arc<EnvInner>,
    mut ops: Vec<(Dict, LogRecord)>,
    txn: Option<&TxnCore>,
) -> Result<()> {
    if ops.len() == 1 && txn.is_none() {
        let (d, rec) = ops.pop().expect("one write");
        return commit_one(&d, rec);
    }
    if ops.is_empty() {
        return Ok(());
    }
    let mut dicts: Vec<Dict> = ops.iter().map(|(d, _)| d.clone()).collect();
    dicts.sort_by_key(|d| d.core.id);
    dicts.dedup_by_key(|d| d.core.id);
    for d in &dicts {
        d.live()?;
    }
    if let Some(t) = txn {
        t.check_open()?;
        if ops
            .iter()
            .any(|(_, r)| matches!(r, LogRecord::UpdateAll { .. }))
        {
            return Err(Error::InvalidArgument(
                "update_all cannot run inside a transaction".into(),
            ));
        }
    }
    let (xid, _auto) = match txn {
        Some(t) => (t.xid, None),
        None => {
            let x = env.txns.begin();
            (x, Some(AutoXid(env, x)))
        }
    };
    let (handles, recs): (Vec<Dict>, Vec<LogRecord>) = ops.into_iter().unzip();
    let mut rec = if recs.len() == 1 {
        recs.into_iter().next().expect("one")
    } else {
        LogRecord::Batch(recs)
    };
    if txn.is_some() {
        rec = LogRecord::Txn {
            xid,
            rec: Box::new(rec),
        };
    }
    let cores: Vec<&DictCore> = dicts.iter().map(|d| &*d.core).collect();
    let (lsn, pressure) = append_and_apply(env, &cores, rec, |ready, rec, lsn| {
        if let Some(t) = txn {
            env.txns.logged(xid, lsn);
            t.note_writes(&handles, &rec);
        }
        for (d, r) in handles.iter().zip(rec.writes()) {
            let i = dicts
                .binary_search_by_key(&d.core.id, |x| x.core.id)
                .expect("every dictionary of the batch is locked");
            apply_record(&mut ready[i], &env.fns, r, xid, txn.is_some());
        }
    })?;
    drop(_auto);
    if txn.is_none() {
        env.wal
            .wait(lsn, env.opts.sync == SyncPolicy::EveryCommit)?;
    }
    for (d, p) in dicts.iter().zip(pressure) {
        d.after_write(p)?;
    }
    Ok(())
}

/// [`commit`] of one write outside a transaction: its own record, one tree.
pub(crate) fn commit_one(d: &Dict, rec: LogRecord) -> Result<()> {
    d.live()?;
    let env = &d.env;
    let x = env.txns.begin();
    let auto = AutoXid(env, x);
    let (lsn, pressure) = append_and_apply(env, &[&d.core], rec, |ready, rec, _| {
        apply_record(&mut ready[0], &env.fns, rec, x, false);
    })?;
    drop(auto);
    env.wal
        .wait(lsn, env.opts.sync == SyncPolicy::EveryCommit)?;
    d.after_write(pressure.first().copied().unwrap_or(0.0))
}

/// End transaction `t`: log its commit (or abort) and send a COMMIT (ABORT) message to every
/// key it wrote, then mark it finished. A commit waits for its record to be written, and
/// synced when `durable` (or under [`SyncPolicy::EveryCommit`]; a durable commit of a
/// transaction that wrote nothing syncs the log). Dictionaries dropped since
/// the transaction wrote to them are skipped.
pub(crate) fn finish(env: &Arc<EnvInner>, t: &TxnCore, commit: bool, durable: bool) -> Result<()> {
    let ws = t.take_writes();
    let dicts: Vec<_> = ws
        .into_values()
        .filter(|(d, _)| d.readable().is_ok())
        .collect();
    if dicts.is_empty() {
        env.txns.finish(t.xid);
        // A durable commit of a transaction that wrote nothing still returns only once what
        // it read is durable.
        if commit && durable {
            env.wal.sync()?;
        }
        return Ok(());
    }
    for (d, _) in &dicts {
        d.live()?;
    }
    let rec = if commit {
        LogRecord::Commit { xid: t.xid }
    } else {
        LogRecord::Abort { xid: t.xid }
    };
    let cores: Vec<&DictCore> = dicts.iter().map(|(d, _)| &*d.core).collect();
    let (lsn, pressure) = append_and_apply(env, &cores, rec, |ready, _, _| {
        for ((_, keys), tree) in dicts.iter().zip(ready.iter_mut()) {
            for (key, rows) in keys {
                let kind = if commit {
                    MsgKind::Commit {
                        rows: rows.rows,
                        sure: !rows.unsure,
                    }
                } else {
                    MsgKind::Abort
                };
                tree.inject(&env.fns, key, kind, t.xid, false);
            }
        }
    })?;
    env.txns.finish(t.xid);
    if commit {
        env.wal
            .wait(lsn, durable || env.opts.sync == SyncPolicy::EveryCommit)?;
    }
    for ((d, _), p) in dicts.iter().zip(pressure) {
        d.after_write(p)?;
    }
    Ok(())
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
