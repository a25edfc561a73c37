//! Recovery's replay of the log (see `Env::open` and `docs/format.md` 6.4): the writes no
//! checkpoint covers, then the ends of transactions.

use std::collections::BTreeMap;

use crate::dict::{apply_record, DictCore};
use crate::env::EnvInner;
use crate::error::Result;
use crate::ids::{DictId, Lsn, Xid};
use crate::msg::MsgKind;
use crate::txn::note_write;
use crate::wal::{self, LogRecord};

impl EnvInner {
    /// Replay the log into the trees: every write a dictionary's checkpoint does not cover,
    /// then finish transactions. A transaction's writes are collected from the whole log (the
    /// checkpoint keeps the log from the first record of the oldest live transaction), so
    /// that its commit or abort reaches every key it wrote; transactions with neither are
    /// aborted. COMMIT and ABORT messages are idempotent, so finishing one in a dictionary
    /// that already holds the outcome changes nothing.
    pub(crate) fn replay(&self, logs: Vec<wal::LogFile>) -> Result<u64> {
        let dicts = self.dicts.read().clone();
        let ckpt: BTreeMap<DictId, Lsn> = dicts
            .iter()
            .map(|(id, d)| (*id, d.file.state.lock().header.ckpt_lsn))
            .collect();
        let uncovered = |id: DictId, lsn: Lsn| ckpt.get(&id).is_some_and(|&cl| lsn > cl);
        type Keys = BTreeMap<Box<[u8]>, crate::txn::KeyRows>;
        let mut open: BTreeMap<Xid, BTreeMap<DictId, Keys>> = BTreeMap::new();
        let mut n = 0u64;
        let mut inject = |d: &DictCore, w: LogRecord, xid: Xid, prov: bool| -> Result<()> {
            if let LogRecord::Update { func, .. } | LogRecord::UpdateAll { func, .. } = &w {
                self.fns.check(*func)?;
            }
            loop {
                let mut t = d.tree.write();
                match t.ready() {
                    Ok(mut r) => {
                        apply_record(&mut r, &self.fns, w, xid, prov);
                        break;
                    }
                    Err(need) => {
                        drop(t);
                        d.do_io(self, need)?;
                    }
                }
            }
            n += 1;
            if d.tree.read().root_pressure() > 2.0 {
                d.flush_until(self, 1.0)?;
            }
            self.relieve_memory(true)
        };
        let finish = |d: &DictCore, keys: &Keys, xid: Xid, commit: bool| -> Result<()> {
            for (key, rows) in keys {
                let kind = if commit {
                    MsgKind::Commit {
                        rows: rows.rows,
                        sure: !rows.unsure,
                    }
                } else {
                    MsgKind::Abort
                };
                loop {
                    let mut t = d.tree.write();
                    match t.ready() {
                        Ok(mut r) => {
                            r.inject(&self.fns, key, kind, xid, false);
                            break;
                        }
                        Err(need) => {
                            drop(t);
                            d.do_io(self, need)?;
                        }
                    }
                }
                if d.tree.read().root_pressure() > 2.0 {
                    d.flush_until(self, 1.0)?;
                }
                self.relieve_memory(true)?;
            }
            Ok(())
        };
        for lf in logs {
            for (lsn, rec) in lf.records {
                match rec {
                    LogRecord::Txn { xid, rec } => {
                        self.txns.observe(xid);
                        let ws = open.entry(xid).or_default();
                        for w in rec.writes() {
                            let id = w.dict();
                            note_write(ws.entry(id).or_default(), &w, &self.fns);
                            if let (Some(d), true) = (dicts.get(&id), uncovered(id, lsn)) {
                                inject(d, w, xid, true)?;
                            }
                        }
                    }
                    LogRecord::Commit { xid } | LogRecord::Abort { xid } => {
                        self.txns.observe(xid);
                        let commit = matches!(rec, LogRecord::Commit { .. });
                        for (id, keys) in open.remove(&xid).unwrap_or_default() {
                            if let (Some(d), true) = (dicts.get(&id), uncovered(id, lsn)) {
                                finish(d, &keys, xid, commit)?;
                            }
                        }
                    }
                    // A batch is one record: it is in the log whole or not at all. Each of its
                    // writes goes to its own dictionary unless that one's checkpoint covers it.
                    rec => {
                        for w in rec.writes() {
                            let id = w.dict();
                            if let (Some(d), true) = (dicts.get(&id), uncovered(id, lsn)) {
                                inject(d, w, Xid::AUTOCOMMIT, false)?;
                            }
                        }
                    }
                }
            }
        }
        if !open.is_empty() {
            tracing::info!(
                transactions = open.len(),
                "recovery aborts transactions that did not commit"
            );
        }
        for (xid, ws) in open {
            for (id, keys) in ws {
                if let Some(d) = dicts.get(&id) {
                    finish(d, &keys, xid, false)?;
                }
            }
        }
        Ok(n)
    }
}
