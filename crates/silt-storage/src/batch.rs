//! Atomic groups of writes across dictionaries: a document and its index entries.
//!
//! A [`WriteBatch`] collects writes to any dictionaries of one environment and commits them as
//! one log record. Recovery replays a record whole or not at all, and a checkpoint (which
//! excludes writers) sees all of a batch's writes or none, so after a crash a batch is either
//! complete or absent. A reader through a [`Snapshot`](crate::Snapshot) sees all of a batch or
//! none of it; a reader without one may see one dictionary's write before another's.

use std::sync::Arc;

use crate::dict::Dict;
use crate::error::{Error, Result};
use crate::txn::Txn;
use crate::wal::LogRecord;

/// Writes to commit together. Build it with the methods named like [`Dict`]'s, then
/// [`WriteBatch::commit`].
#[derive(Default)]
pub struct WriteBatch {
    ops: Vec<(Dict, LogRecord)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Number of writes collected.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no write was collected.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// [`Dict::put`] as part of the batch.
    pub fn put(&mut self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::Put { dict, key, val })?;
        self.push(d, rec)
    }

    /// [`Dict::replace`] as part of the batch.
    pub fn replace(&mut self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::Replace {
            dict,
            key,
            val,
        })?;
        self.push(d, rec)
    }

    /// [`Dict::put_if_absent`] as part of the batch.
    pub fn put_if_absent(&mut self, d: &Dict, key: &[u8], val: &[u8]) -> Result<()> {
        let rec = d.value_record(key, val, |dict, key, val| LogRecord::PutIfAbsent {
            dict,
            key,
            val,
        })?;
        self.push(d, rec)
    }

    /// [`Dict::delete`] as part of the batch.
    pub fn delete(&mut self, d: &Dict, key: &[u8]) -> Result<()> {
        let rec = d.delete_record(key)?;
        self.push(d, rec)
    }

    /// [`Dict::update`] as part of the batch.
    pub fn update(&mut self, d: &Dict, key: &[u8], func: u32, arg: &[u8]) -> Result<()> {
        let rec = d.update_record(key, func, arg)?;
        self.push(d, rec)
    }

    fn push(&mut self, d: &Dict, rec: LogRecord) -> Result<()> {
        if let Some((first, _)) = self.ops.first() {
            if !Arc::ptr_eq(&first.env, &d.env) {
                return Err(Error::InvalidArgument(
                    "a write batch spans one environment".into(),
                ));
            }
        }
        self.ops.push((d.clone(), rec));
        Ok(())
    }

    /// Log the writes as one record, apply them, and return once the record is written (and
    /// synced under [`SyncPolicy::EveryCommit`]).
    pub fn commit(self) -> Result<()> {
        match self.ops.first() {
            None => Ok(()),
            Some((d, _)) => {
                let env = d.env.clone();
                crate::write::commit(&env, self.ops, None)
            }
        }
    }

    /// Log the writes as one record of `txn` and apply them provisionally (see [`Txn`]).
    pub fn commit_in(self, txn: &Txn) -> Result<()> {
        if let Some((d, _)) = self.ops.first() {
            if !Arc::ptr_eq(&d.env, &txn.env) {
                return Err(Error::InvalidArgument(
                    "a transaction spans one environment".into(),
                ));
            }
        }
        crate::write::commit(&txn.env, self.ops, Some(&txn.core))
    }
}
