//! The public transaction handle, [`Txn`], and what the write path needs of a transaction
//! ([`TxnCore`]: its xid and the keys it wrote). Visibility and snapshots are `mvcc.rs`'s.
//!
//! A write inside a [`Txn`] is *provisional*: the leaf entry holds it apart from the committed
//! versions until a COMMIT message (one per key the transaction wrote) promotes it or an ABORT
//! message drops it (`write::finish`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::dict::Dict;
use crate::env::EnvInner;
use crate::error::{Error, Result};
use crate::ids::{DictId, Xid};
use crate::locks::{LockMode, LockOwner};
use crate::msg::UpdateRegistry;
use crate::mvcc::Snapshot;
use crate::wal::LogRecord;

/// The keys a transaction wrote, per dictionary, each with what its writes to the key add up
/// to (charged when the commit is injected).
pub(crate) type WriteSet = BTreeMap<DictId, (Dict, BTreeMap<Box<[u8]>, KeyRows>)>;

/// What a transaction's writes to one key add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyRows {
    /// The change in the row count: -1, 0 or 1.
    pub rows: i8,
    /// Some write to the key had an effect on the key count that is not known until it
    /// reaches the leaf (a put-if-absent, or an update that may create or remove the key).
    pub unsure: bool,
}

/// Add write `w` to the keys of its dictionary in a write set, with its row estimate: the
/// estimates a write outside a transaction would be charged (put +1, delete -1, replace and
/// update 0), summed per key and kept within -1..=1.
pub(crate) fn note_write(
    keys: &mut BTreeMap<Box<[u8]>, KeyRows>,
    w: &LogRecord,
    fns: &UpdateRegistry,
) {
    let (key, rows, unsure) = match w {
        LogRecord::Put { key, .. } => (key, 1, false),
        LogRecord::PutIfAbsent { key, .. } => (key, 1, true),
        LogRecord::Delete { key, .. } => (key, -1, false),
        LogRecord::Replace { key, .. } => (key, 0, false),
        LogRecord::Update { key, func, .. } => (key, 0, !fns.keeps(*func)),
        _ => return,
    };
    let e = keys.entry(key.as_slice().into()).or_default();
    e.rows = (e.rows + rows).clamp(-1, 1);
    e.unsure |= unsure;
}

/// What the write path needs of a transaction.
pub(crate) struct TxnCore {
    pub xid: Xid,
    writes: Mutex<WriteSet>,
    done: AtomicBool,
}

impl TxnCore {
    /// Refuse writes once the transaction has ended.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.done.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "transaction {} has ended",
                self.xid
            )));
        }
        Ok(())
    }

    /// Add the writes of `rec` (a `Txn` record over `handles`' dictionaries, in order) to the
    /// write set.
    pub(crate) fn note_writes(&self, handles: &[Dict], rec: &LogRecord) {
        let mut ws = self.writes.lock();
        let mut i = 0;
        rec.for_each_write(&mut |w| {
            let d = &handles[i];
            i += 1;
            let keys = &mut ws
                .entry(d.core.id)
                .or_insert_with(|| (d.clone(), BTreeMap::new()))
                .1;
            note_write(keys, w, &d.env.fns);
        });
    }

    /// Take the write set (the transaction is ending).
    pub(crate) fn take_writes(&self) -> WriteSet {
        self.done.store(true, Ordering::Release);
        std::mem::take(&mut *self.writes.lock())
    }
}

/// A transaction: writes through it are provisional (seen by its own reads, by nobody else's)
/// until [`Txn::commit`]; [`Txn::abort`], or dropping it unfinished, undoes them. Its snapshot
/// ([`Txn::snapshot`]) is taken when it begins. Writes are not checked for conflicts here:
/// the layer above locks what it writes and asks [`Dict::write_conflict`] first.
///
/// [`Dict::write_conflict`]: crate::Dict::write_conflict
pub struct Txn {
    pub(crate) env: Arc<EnvInner>,
    pub(crate) core: TxnCore,
    snap: Snapshot,
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn").field("xid", &self.core.xid).finish()
    }
}

impl Txn {
    pub(crate) fn begin(env: &Arc<EnvInner>) -> Txn {
        let xid = env.txns.begin();
        let snap = env.txns.snapshot(Some(xid));
        Txn {
            env: env.clone(),
            core: TxnCore {
                xid,
                writes: Mutex::new(BTreeMap::new()),
                done: AtomicBool::new(false),
            },
            snap,
        }
    }

    /// The transaction's id.
    pub fn xid(&self) -> Xid {
        self.core.xid
    }

    /// What the transaction reads: the state when it began, plus its own writes.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn write(&self, d: &Dict, rec: LogRecord) -> Result<()> {
        if !Arc::ptr_eq(&d.env, &self.env) {
            return Err(Error::InvalidArgument(
                "a transaction spans one environment".into(),
            ));
        }
        crate::write::commit(&self.env, vec![(d.clone(), rec)], Some(&self.core))
    }

    /// [`Dict::put`](crate::Dict::put), provisionally.
    pub fn put(&self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        self.write(
            d,
            d.value_record(key, val, |dict, key, val| LogRecord::Put { dict, key, val })?,
        )
    }

    /// [`Dict::replace`](crate::Dict::replace), provisionally.
    pub fn replace(&self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::Replace {
            dict,
            key,
            val,
        })?;
        self.write(d, rec)
    }

    /// [`Dict::put_if_absent`](crate::Dict::put_if_absent), provisionally.
    pub fn put_if_absent(&self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::PutIfAbsent {
            dict,
            key,
            val,
        })?;
        self.write(d, rec)
    }

    /// [`Dict::delete`](crate::Dict::delete), provisionally.
    pub fn delete(&self, d: &Dict, key: &[u8]) -> Result<()> {
        self.write(d, d.delete_record(key)?)
    }

    /// [`Dict::update`](crate::Dict::update), provisionally: the function sees the
    /// transaction's own earlier writes.
    pub fn update(&self, d: &Dict, key: &[u8], func: u32, arg: &[u8]) -> Result<()> {
        self.write(d, d.update_record(key, func, arg)?)
    }

    /// Lock `[lo, hi]` of `d` in `mode` until the transaction ends, waiting at most
    /// `timeout` for other owners (see `locks.rs`: [`Error::LockTimeout`], or
    /// [`Error::Deadlock`] when waiting would close a cycle).
    pub fn lock(
        &self,
        d: &Dict,
        range: (&[u8], &[u8]),
        mode: LockMode,
        timeout: Duration,
    ) -> Result<()> {
        self.core.check_open()?;
        self.env
            .locks
            .acquire(d.core.id, range, self.owner(), mode, timeout)
    }

    /// The transaction as a lock owner.
    pub fn owner(&self) -> LockOwner {
        LockOwner(self.core.xid.0)
    }

    /// Make every write of the transaction committed, atomically for every snapshot taken
    /// afterwards. Returns once the commit record is written; synced too when `durable` (or
    /// under [`SyncPolicy::EveryCommit`](crate::SyncPolicy::EveryCommit)).
    pub fn commit(self, durable: bool) -> Result<()> {
        self.core.check_open()?;
        let r = crate::write::finish(&self.env, &self.core, true, durable);
        self.env.locks.release_all(self.owner());
        r
    }

    /// Undo every write of the transaction.
    pub fn abort(self) -> Result<()> {
        self.core.check_open()?;
        let r = crate::write::finish(&self.env, &self.core, false, false);
        self.env.locks.release_all(self.owner());
        r
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if !self.core.done.load(Ordering::Acquire) {
            if let Err(e) = crate::write::finish(&self.env, &self.core, false, false) {
                tracing::warn!(xid = %self.core.xid, error = %e, "aborting a dropped transaction failed");
            }
            self.env.locks.release_all(self.owner());
        }
    }
}
