//! Checkpoints: write every dirty node and a new block table, then the header, so that
//! recovery starts from here and the log before it can go.
//!
//! 1. One checkpoint at a time (`ckpt_mutex`, which also serialises catalog changes).
//! 2. Briefly, under the write gate held exclusively (no write is between its log append and
//!    its injection): note the last LSN; in every dictionary mark each dirty node
//!    checkpoint-pending, copy the current block table to the in-progress one and take the
//!    header fields; ask the log to start a new file after that LSN.
//! 3. Writers go on; one about to change a pending node first captures its image for the
//!    checkpoint (copy-before-write, `tree::Tree::ckpt_images`).
//! 4. Sync the log up to the checkpoint's LSN.
//! 5. Per dictionary: write every pending node and captured image to fresh extents, then the
//!    in-progress table; sync; write the header into the next slot; sync. Free the extents
//!    only the previous checkpoint used, trim the file and punch holes in large free ranges.
//! 6. Delete the log files the checkpoint covers (keeping the oldest live transaction's).
//!
//! `docs/design/engine.md` tells the whole story.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::env::EnvInner;
use crate::error::Result;
use crate::format::btt;
use crate::format::node::image_of;
use crate::ids::{Lsn, Msn};

impl EnvInner {
    /// Take a checkpoint (see the module's comment).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        let _one = self.ckpt_mutex.lock();
        self.poison.check()?;
        let started = Instant::now();
        let dicts = self.dict_list();
        let mut plans = Vec::with_capacity(dicts.len());
        let lsn;
        let next_xid;
        let keep_from;
        {
            let _w = self.gate.exclusive();
            lsn = self.wal.last_lsn();
            next_xid = self.txns.next_xid();
            // The log from the first record of the oldest live transaction on is needed to
            // finish it after a crash.
            keep_from = self.txns.oldest_lsn();
            // Start a new log file after `lsn` (at the next log write, the sync below), so
            // that when this checkpoint completes every older file can be deleted.
            self.wal.rotate_at_last();
            for d in &dicts {
                let mut t = d.tree.write();
                let mut pending = Vec::new();
                for (b, n) in t.nodes.iter_mut() {
                    if n.dirty {
                        n.ckpt_pending = true;
                        pending.push(*b);
                    }
                }
                let mut st = d.file.state.lock();
                let mut h = st.header.clone();
                h.ckpt_lsn = lsn;
                h.root = t.root;
                h.next_block = t.next_block;
                h.max_msn = Msn(t.next_msn);
                h.rows = t.stats.rows;
                h.data_bytes = t.stats.bytes;
                h.next_xid = next_xid;
                h.counted = t.counted;
                st.inprogress = Some(st.current.clone());
                plans.push((d.clone(), pending, h));
            }
        }
        let pause = started.elapsed();
        self.wal.sync()?;
        for (d, pending, mut h) in plans {
            for b in pending {
                let img = {
                    let mut t = d.tree.write();
                    if t.nodes.get(&b).is_some_and(|n| n.ckpt_pending) {
                        // Versions no snapshot can see are not written.
                        t.collect_leaf(b);
                    }
                    match t.nodes.get_mut(&b) {
                        Some(n) if n.ckpt_pending => {
                            n.ckpt_pending = false;
                            Some(image_of(n))
                        }
                        _ => None,
                    }
                };
                if let Some(img) = img {
                    let (ext, locs) = d.write_image(self, &img)?;
                    d.finish_write(&img, ext, locs, true, false);
                }
            }
            loop {
                let imgs = std::mem::take(&mut d.tree.write().ckpt_images);
                if imgs.is_empty() {
                    break;
                }
                for img in imgs {
                    let (ext, locs) = d.write_image(self, &img)?;
                    d.finish_write(&img, ext, locs, true, false);
                }
            }
            let table = {
                let st = d.file.state.lock();
                btt::encode_table(st.inprogress.as_ref().expect("checkpoint in progress"))
            };
            let tx = d.file.write_block(&table)?;
            d.file.sync()?;
            {
                let st = d.file.state.lock();
                h.ckpt_count = st.header.ckpt_count + 1;
            }
            h.btt_offset = tx.offset;
            h.btt_len = tx.len;
            d.file.write_header(&h)?;
            let mut st = d.file.state.lock();
            let new = st.inprogress.take().expect("checkpoint in progress");
            let old = std::mem::replace(&mut st.checkpointed, new);
            for (b, x) in old {
                if st.current.get(&b) != Some(&x) && st.checkpointed.get(&b) != Some(&x) {
                    st.alloc.free(x);
                }
            }
            if let Some(ob) = st.ckpt_btt.replace(tx) {
                st.alloc.free(ob);
            }
            st.header = h;
            drop(st);
            d.file.trim()?;
            d.file.punch_free();
            d.file.trim()?;
        }
        let keep = match keep_from {
            Some(first) => Lsn(lsn.0.min(first.0.saturating_sub(1))),
            None => lsn,
        };
        self.wal.trim(keep)?;
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            lsn = lsn.0,
            pause_us = u64::try_from(pause.as_micros()).unwrap_or(u64::MAX),
            total_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "checkpoint complete"
        );
        Ok(())
    }
}
