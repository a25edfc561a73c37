//! The I/O side of a dictionary's tree ([`DictCore`]): loading nodes and partitions from its
//! file, writing dirty nodes back, the eviction clock's sweep and the flush loop.
//!
//! The tree lock is never held across I/O: an operation that misses returns [`Need`], drops
//! every lock and calls [`DictCore::do_io`], which reads with no lock held and installs what it
//! read only if it is still current; the operation then starts again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::poison::TreeLock;

use crate::env::EnvInner;
use crate::error::{corruption, Result};
use crate::file::DictFile;
use crate::format::btt::Extent;
use crate::format::node::{
    self as fnode, decode_header, decode_part, encode_block, image_of, NodeImage,
};
use crate::ids::{BlockNum, DictId};
use crate::tree::node::{Node, Part, PartData, PartLoc};
use crate::tree::{Need, Step, Tree};
use crate::width::usize_of;

pub(crate) struct DictCore {
    pub id: DictId,
    pub name: Mutex<String>,
    pub file: Arc<DictFile>,
    pub tree: TreeLock<Tree>,
    pub dropped: AtomicBool,
}

/// Read a node's header from `ext`. Partitions (basements, buffers) are read on demand, so a
/// point read of a cold path costs one header and one partition per level.
pub(crate) fn load_node(file: &DictFile, b: BlockNum, ext: Extent) -> Result<Node> {
    let what = || format!("block {b} at offset {}", ext.offset);
    // Enough for the header of any ordinary node (as the original engine, which reads at most
    // 32 KiB); a longer header costs a second read.
    let first = usize_of(ext.len).min(32 << 10);
    let header = file.read_with(
        ext.offset,
        first,
        |buf| -> crate::format::bytes::DecResult<_> {
            let hlen = fnode::header_len_from_fixed(buf)?;
            Ok(if hlen <= buf.len() {
                Ok(decode_header(buf)?)
            } else {
                Err(hlen)
            })
        },
    )?;
    let h = match header.map_err(|e| corruption(&file.path, what(), e))? {
        Ok(h) => h,
        Err(hlen) if hlen > usize_of(ext.len) => {
            return Err(corruption(&file.path, what(), "header longer than block"))
        }
        Err(hlen) => file
            .read_with(ext.offset, hlen, decode_header)?
            .map_err(|e| corruption(&file.path, what(), e))?,
    };
    if h.blocknum != b {
        return Err(corruption(
            &file.path,
            what(),
            format!("holds block {}", h.blocknum),
        ));
    }
    let leaf = h.height == 0;
    let mut parts = Vec::with_capacity(h.parts.len());
    for (i, rel) in h.parts.iter().enumerate() {
        let loc = PartLoc {
            offset: ext.offset + rel.offset,
            ..*rel
        };
        if rel.offset + u64::from(rel.disk_len) > ext.len {
            return Err(corruption(&file.path, what(), "partition beyond block end"));
        }
        parts.push(Part {
            child: h.children.get(i).copied().unwrap_or_default(),
            data: None,
            loc: Some(loc),
            touched: AtomicBool::new(false),
            count: h.counts.get(i).copied().flatten(),
        });
    }
    let mut n = if leaf {
        Node::new_leaf(b, Vec::new(), h.pivots)
    } else {
        Node::new_internal(b, h.height, Vec::new(), h.pivots)
    };
    n.parts = parts;
    n.max_msn = h.max_msn;
    n.dirty = false;
    Ok(n)
}

/// Read the given partitions (one `pread` covering all of them).
pub(crate) fn load_parts(
    file: &DictFile,
    b: BlockNum,
    leaf: bool,
    list: &[(usize, PartLoc)],
) -> Result<Vec<(usize, PartLoc, PartData)>> {
    let start = list.iter().map(|(_, l)| l.offset).min().unwrap_or(0);
    let end = list
        .iter()
        .map(|(_, l)| l.offset + u64::from(l.disk_len))
        .max()
        .unwrap_or(0);
    file.read_with(start, usize_of(end - start), |buf| {
        list.iter()
            .map(|&(i, loc)| {
                let s = &buf[usize_of(loc.offset - start)
                    ..usize_of(loc.offset - start + u64::from(loc.disk_len))];
                decode_part(s, &loc, leaf)
                    .map(|d| (i, loc, d))
                    .map_err(|e| {
                        corruption(
                            &file.path,
                            format!("block {b} partition {i} at offset {}", loc.offset),
                            e,
                        )
                    })
            })
            .collect()
    })?
}

/// Partially evict clean node `b`: drop each resident partition that has an on-disk copy and,
/// unless `all`, whose touched bit is clear (clearing the bits as it goes). Returns the bytes
/// released.
fn drop_parts(env: &EnvInner, t: &mut Tree, b: BlockNum, all: bool) -> i64 {
    let Some(n) = t.nodes.get_mut(&b) else {
        return 0;
    };
    let mut dropped = 0;
    for p in &mut n.parts {
        if p.data.is_some() && p.loc.is_some() && (!p.touched.swap(false, Ordering::Relaxed) || all)
        {
            drop_part(p);
            dropped += 1;
        }
    }
    uncharge_parts(env, t, b, dropped)
}

/// Drop the data of resident partition `p`, which has an on-disk copy, keeping its count.
fn drop_part(p: &mut Part) {
    if let Some(PartData::Leaf(b)) = &p.data {
        p.count = Some(crate::tree::count::basement_count(b));
    }
    p.data = None;
}

/// Recharge node `b` after `dropped` of its partitions were dropped: the bytes released.
fn uncharge_parts(env: &EnvInner, t: &mut Tree, b: BlockNum, dropped: u64) -> i64 {
    if dropped == 0 {
        return 0;
    }
    let Some(n) = t.nodes.get(&b) else {
        return 0;
    };
    let before = n.charged as i64;
    t.recharge(b);
    env.cache
        .partial_evictions
        .fetch_add(dropped, Ordering::Relaxed);
    before - t.nodes[&b].charged as i64
}

impl DictCore {
    /// Perform the read an operation asked for and install the result if still current.
    pub(crate) fn do_io(&self, env: &EnvInner, need: Need) -> Result<()> {
        env.cache.misses.fetch_add(1, Ordering::Relaxed);
        match need {
            Need::Node(b) => {
                let Some(ext) = self.file.state.lock().current.get(&b).copied() else {
                    return Ok(());
                };
                let node = match load_node(&self.file, b, ext) {
                    Ok(n) => n,
                    Err(e) => {
                        if self.file.state.lock().current.get(&b) != Some(&ext) {
                            return Ok(());
                        }
                        return Err(e);
                    }
                };
                let mut t = self.tree.write();
                if !t.nodes.contains_key(&b) && self.file.state.lock().current.get(&b) == Some(&ext)
                {
                    t.insert_node(node);
                }
            }
            Need::Parts(b, list) => {
                let leaf = match self.tree.read().nodes.get(&b) {
                    Some(n) => n.is_leaf(),
                    None => return Ok(()),
                };
                let loaded = match load_parts(&self.file, b, leaf, &list) {
                    Ok(v) => v,
                    Err(e) => {
                        let t = self.tree.read();
                        let still = t.nodes.get(&b).is_some_and(|n| {
                            list.iter()
                                .all(|(i, l)| n.parts.get(*i).is_some_and(|p| p.loc == Some(*l)))
                        });
                        if still {
                            return Err(e);
                        }
                        return Ok(());
                    }
                };
                let mut t = self.tree.write();
                if let Some(n) = t.nodes.get_mut(&b) {
                    for (i, loc, data) in loaded {
                        if let Some(p) = n.parts.get_mut(i) {
                            if p.data.is_none() && p.loc == Some(loc) {
                                p.data = Some(data);
                                p.touched.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                    t.recharge(b);
                }
            }
        }
        // No eviction here: the caller is about to use what was just read. Memory is
        // relieved when the operation completes.
        Ok(())
    }

    /// Compress and write an image to a fresh extent.
    pub(crate) fn write_image(
        &self,
        env: &EnvInner,
        img: &NodeImage,
    ) -> Result<(Extent, Vec<PartLoc>)> {
        let (bytes, locs) = encode_block(img, env.opts.compression);
        let ext = self.file.write_block(&bytes);
        crate::bufpool::give(bytes);
        let ext = ext?;
        env.cache.writebacks.fetch_add(1, Ordering::Relaxed);
        let locs = locs
            .into_iter()
            .map(|l| PartLoc {
                offset: l.offset + ext.offset,
                ..l
            })
            .collect();
        Ok((ext, locs))
    }

    /// Publish a written image. `for_ckpt`: the image is the node as of the running
    /// checkpoint's start. `evict`: drop the node from memory if the image is still current.
    pub(crate) fn finish_write(
        &self,
        img: &NodeImage,
        ext: Extent,
        locs: Vec<PartLoc>,
        for_ckpt: bool,
        evict: bool,
    ) {
        let b = img.blocknum;
        let mut t = self.tree.write();
        let root = t.root;
        let current = t.nodes.get(&b).is_some_and(|n| n.dirty && n.gen == img.gen);
        if current {
            let n = t.nodes.get_mut(&b).expect("checked above");
            {
                let mut st = self.file.state.lock();
                st.set_current(b, ext);
                if n.ckpt_pending || for_ckpt {
                    st.set_inprogress(b, ext);
                }
            }
            n.ckpt_pending = false;
            n.dirty = false;
            for (p, l) in n.parts.iter_mut().zip(locs) {
                p.loc = Some(l);
            }
            if evict && b != root {
                let n = t.nodes.remove(&b).expect("resident");
                t.cache.used.fetch_sub(n.charged as i64, Ordering::Relaxed);
                t.cache.evictions.fetch_add(1, Ordering::Relaxed);
            } else if evict {
                // The root stays; its partitions, now on disk, go.
                for p in &mut n.parts {
                    p.data = None;
                }
                t.recharge(b);
                t.cache.evictions.fetch_add(1, Ordering::Relaxed);
            }
        } else if for_ckpt {
            self.file.state.lock().set_inprogress(b, ext);
        } else {
            self.file.state.lock().alloc.free(ext);
        }
    }

    /// Give back what a cold read ([`crate::Cursor::cold`]) brought in, once it has read it:
    /// the partitions of each `Need::Parts`, as eviction would (clean copies only: what a
    /// writer dirtied since stays). Node headers stay (they are small, and the next basement
    /// of the same leaf needs its header again), and so does everything the read found
    /// resident, so a long scan leaves the cache's working set in place.
    pub(crate) fn release_cold(&self, env: &EnvInner, loaded: &[Need]) {
        if loaded.is_empty() {
            return;
        }
        let mut t = self.tree.write();
        for need in loaded {
            let Need::Parts(b, list) = need else {
                continue;
            };
            let Some(n) = t.nodes.get_mut(b).filter(|n| !n.dirty) else {
                continue;
            };
            let mut dropped = 0;
            for (i, loc) in list {
                if let Some(p) = n.parts.get_mut(*i) {
                    if p.data.is_some() && p.loc == Some(*loc) {
                        drop_part(p);
                        dropped += 1;
                    }
                }
            }
            uncharge_parts(env, &mut t, *b, dropped);
        }
    }

    /// One clock sweep over this dictionary's resident nodes. Returns the bytes released.
    pub(crate) fn evict_pass(&self, env: &EnvInner, want: i64) -> Result<i64> {
        let mut victims = Vec::new();
        let mut freed = 0i64;
        {
            let mut t = self.tree.write();
            let root = t.root;
            // The sweep goes round the resident nodes in (height, block) order: leaves, then
            // the internal nodes, which are on every path and hold the buffers that make
            // writes cheap, so every access winds their clocks up again; the root stays
            // resident, but an idle one gives up its partitions. Each sweep starts where the
            // last one stopped: starting from the front every time made the lowest-numbered
            // leaves the only victims, however often they were read, while leaves nobody
            // read kept their place.
            let mut ids: Vec<(u32, BlockNum)> =
                t.nodes.iter().map(|(&b, n)| (n.height, b)).collect();
            ids.sort_unstable();
            let start = ids.partition_point(|x| *x <= t.evict_hand);
            ids.rotate_left(start);
            for (h, b) in ids {
                if freed >= want {
                    break;
                }
                t.evict_hand = (h, b);
                let n = t.nodes.get_mut(&b).expect("listed");
                let c = n.clock.load(Ordering::Relaxed);
                if c > 0 {
                    n.clock.store(c - 1, Ordering::Relaxed);
                    if !n.dirty {
                        freed += drop_parts(env, &mut t, b, false);
                    } else {
                        for p in &n.parts {
                            p.touched.store(false, Ordering::Relaxed);
                        }
                    }
                } else if !n.dirty && b == root {
                    freed += drop_parts(env, &mut t, b, true);
                } else if !n.dirty {
                    let n = t.nodes.remove(&b).expect("listed");
                    freed += n.charged as i64;
                    t.cache.used.fetch_sub(n.charged as i64, Ordering::Relaxed);
                    env.cache.evictions.fetch_add(1, Ordering::Relaxed);
                } else if victims.len() < 8 && env.poison.check().is_ok() {
                    // A poisoned environment writes nothing back: its trees may be damaged.
                    freed += n.charged as i64;
                    victims.push(image_of(n));
                }
            }
        }
        for img in victims {
            let (ext, locs) = self.write_image(env, &img)?;
            self.finish_write(&img, ext, locs, false, true);
        }
        Ok(freed)
    }

    /// Flush until the root's buffers are at most `target` times the node size.
    pub(crate) fn flush_until(&self, env: &EnvInner, target: f64) -> Result<()> {
        loop {
            env.poison.check()?;
            let step = {
                let mut t = self.tree.write();
                if t.root_pressure() <= target {
                    return Ok(());
                }
                t.flush_step(&env.fns)
            };
            match step {
                Step::Idle => return Ok(()),
                Step::Progress => env.relieve_memory(false)?,
                Step::Need(n) => self.do_io(env, n)?,
            }
        }
    }
}
