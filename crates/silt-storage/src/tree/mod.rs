//! The B^ε-tree of one dictionary, in memory. Everything here runs under the dictionary's tree
//! lock and never does I/O: when an operation needs a node or partition that is not resident it
//! returns [`Need`], the caller drops the lock, reads, installs and retries (see `dict.rs`).
//!
//! Invariants:
//! - Child `i` of a node holds keys `k` with `pivots[i-1] <= k < pivots[i]`.
//! - Messages for a key in a buffer are in MSN order, and every message in a child's buffer is
//!   older than every message in its parent's buffer for it. A message lives in exactly one
//!   place on a root-to-leaf path (a broadcast is copied into every child buffer when it moves
//!   down, one copy per path), so each is applied to a leaf exactly once.
//! - The root node is always resident; a dirty node has every partition. The partitions of a
//!   clean root may be evicted like any other node's (an idle dictionary must not pin its
//!   buffers), so messages are injected only through [`Ready`], which proves the root whole.

pub(crate) mod apply;
mod bounds;
pub(crate) mod count;
pub(crate) mod count_read;
pub(crate) mod le;
pub(crate) mod node;
mod reshape;
pub(crate) mod subcount;

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::CacheCtl;
use crate::file::DictFile;
use crate::format::node::{image_of, NodeImage};
use crate::ids::{BlockNum, Msn, Xid};
use crate::msg::{Broadcast, MsgKind, Pending, UpdateRegistry};
use crate::mvcc::View;
use apply::{apply_buffer_to_leaf, injected_delta, merge_walk, read_value, resolve, Delta};
pub(crate) use bounds::bound_ref;
use bounds::{above_hi, below_lo, empty_range, tighter_hi, tighter_lo};
use le::{Le, LE_CLEAN};
use node::{Basement, ChildBuf, Key, LeafBuilder, Node, PartData, PartLoc, Val};

/// Shape parameters of a tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TreeCfg {
    pub node_bytes: usize,
    pub basement_bytes: usize,
    pub fanout: usize,
}

/// I/O an operation needs before it can proceed.
#[derive(Debug, Clone)]
pub(crate) enum Need {
    /// The node is not resident.
    Node(BlockNum),
    /// These partitions of a resident node are not resident.
    Parts(BlockNum, Vec<(usize, PartLoc)>),
}

/// Result of one flush step.
#[derive(Debug)]
pub(crate) enum Step {
    /// Nothing is over budget.
    Idle,
    /// One buffer was flushed.
    Progress,
    /// Must read first.
    Need(Need),
}

/// Where a read landed.
#[derive(Debug)]
pub(crate) struct Located {
    pub leaf: BlockNum,
    pub bi: usize,
    /// Inclusive lower bound of the basement's key range.
    pub lo: Option<Key>,
    /// Exclusive upper bound of the basement's key range.
    pub hi: Option<Key>,
    pub path: Vec<(BlockNum, usize)>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Target<'k> {
    At(&'k [u8]),
    Before(&'k [u8]),
    First,
    Last,
}

pub(crate) struct Tree {
    pub cfg: TreeCfg,
    pub root: BlockNum,
    pub nodes: HashMap<BlockNum, Node>,
    pub next_block: u64,
    pub next_msn: u64,
    pub stats: Delta,
    /// Images captured for the running checkpoint before a pending node was modified.
    pub ckpt_images: Vec<NodeImage>,
    pub file: Arc<DictFile>,
    pub cache: Arc<CacheCtl>,
    /// The environment's MVCC horizon (`mvcc.rs`): committed versions below it that a newer
    /// committed version hides are garbage.
    pub horizon: Arc<AtomicU64>,
    /// The eviction clock's hand: the `(height, block)` the last sweep stopped at. The next
    /// sweep goes on from there (`Dict::evict_pass`).
    pub evict_hand: (u32, BlockNum),
    /// The tree keeps subtree counts (`count.rs`; persisted in the file header).
    pub counted: bool,
    /// Times a message of known effect turned out, at its leaf, to do something else (a
    /// writer that broke the counting promise); the counts were repaired each time.
    pub count_repairs: u64,
}

/// A write-locked tree whose root is resident with every partition ([`Tree::ready`]): the only
/// way to inject a message, since injecting marks the root dirty and a dirty node must be whole.
pub(crate) struct Ready<'a>(&'a mut Tree);

impl Ready<'_> {
    /// [`Tree::root_pressure`], for the writer to take along when it lets the tree go.
    pub(crate) fn root_pressure(&self) -> f64 {
        self.0.root_pressure()
    }

    /// Inject a keyed message at the root. `prov`: a data message written inside
    /// transaction `xid` (provisional until its commit).
    pub(crate) fn inject(
        &mut self,
        fns: &UpdateRegistry,
        key: &[u8],
        kind: MsgKind,
        xid: Xid,
        prov: bool,
    ) -> Msn {
        self.0.inject(fns, key, kind, xid, prov)
    }

    /// Inject a broadcast update at the root.
    pub(crate) fn inject_broadcast(
        &mut self,
        fns: &UpdateRegistry,
        func: u32,
        arg: &[u8],
        xid: Xid,
    ) -> Msn {
        self.0.inject_broadcast(fns, func, arg, xid)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let charged: usize = self.nodes.values().map(|n| n.charged).sum();
        self.cache.used.fetch_sub(charged as i64, Ordering::Relaxed);
    }
}

impl Tree {
    pub(crate) fn node(&self, b: BlockNum) -> &Node {
        &self.nodes[&b]
    }

    /// The MVCC horizon now (a stale value only collects less).
    pub(crate) fn horizon(&self) -> Xid {
        Xid(self.horizon.load(Ordering::Acquire))
    }

    fn alloc_block(&mut self) -> BlockNum {
        let b = BlockNum(self.next_block);
        self.next_block += 1;
        b
    }

    /// Recompute what node `b` charges to the cache.
    pub(crate) fn recharge(&mut self, b: BlockNum) {
        if let Some(n) = self.nodes.get_mut(&b) {
            let m = n.mem();
            let d = m as i64 - n.charged as i64;
            n.charged = m;
            self.cache.used.fetch_add(d, Ordering::Relaxed);
        }
    }

    /// Prepare node `b` for modification: if a checkpoint is waiting to capture it, capture
    /// it first (copy-before-write), then mark it dirty.
    fn modify(&mut self, b: BlockNum) {
        let n = self.nodes.get_mut(&b).expect("modify of a resident node");
        debug_assert!(n.fully_loaded());
        if n.ckpt_pending {
            n.ckpt_pending = false;
            let img = image_of(n);
            self.ckpt_images.push(img);
        }
        n.mark_dirty();
    }

    pub(crate) fn insert_node(&mut self, n: Node) {
        let b = n.blocknum;
        self.nodes.insert(b, n);
        self.recharge(b);
    }

    fn remove_node(&mut self, b: BlockNum) {
        if let Some(n) = self.nodes.get(&b) {
            if n.ckpt_pending {
                self.modify(b);
            }
        }
        if let Some(n) = self.nodes.remove(&b) {
            self.cache
                .used
                .fetch_sub(n.charged as i64, Ordering::Relaxed);
        }
        self.file.state.lock().remove_current(b);
    }

    fn gorged(&self, n: &Node) -> bool {
        !n.is_leaf()
            && n.parts
                .iter()
                .map(|p| p.data.as_ref().map(PartData::bytes).unwrap_or(0))
                .sum::<usize>()
                > self.cfg.node_bytes
    }

    /// Size of the root's buffers relative to the node size (for write throttling).
    pub(crate) fn root_pressure(&self) -> f64 {
        let r = self.node(self.root);
        if r.is_leaf() {
            return 0.0;
        }
        let s: usize = r
            .parts
            .iter()
            .map(|p| p.data.as_ref().map(PartData::bytes).unwrap_or(0))
            .sum();
        s as f64 / self.cfg.node_bytes as f64
    }

    // ----- writes -------------------------------------------------------------------------

    /// The read that would make the root whole, if a partition of it was evicted.
    pub(crate) fn root_need(&self) -> Option<Need> {
        let r = self.node(self.root);
        (!r.fully_loaded()).then(|| missing(r))
    }

    /// The tree ready for injection: its root is resident with every partition. Otherwise the
    /// read to do first (with the tree lock released, as every [`Need`]).
    pub(crate) fn ready(&mut self) -> Result<Ready<'_>, Need> {
        match self.root_need() {
            Some(n) => Err(n),
            None => Ok(Ready(self)),
        }
    }

    /// Inject a keyed message at the root. `prov`: a data message written inside
    /// transaction `xid` (provisional until its commit).
    fn inject(
        &mut self,
        fns: &UpdateRegistry,
        key: &[u8],
        kind: MsgKind,
        xid: Xid,
        prov: bool,
    ) -> Msn {
        self.next_msn += 1;
        let msn = Msn(self.next_msn);
        self.stats.add(injected_delta(key, &kind, prov));
        let horizon = self.horizon();
        let root = self.root;
        self.modify(root);
        let r = self.nodes.get_mut(&root).expect("root is resident");
        r.touch();
        r.max_msn = msn;
        let i = r.child_for(key);
        let p = Pending {
            msn,
            xid,
            kind,
            prov,
        };
        if r.is_leaf() {
            let mut fix = Delta::default();
            let Some(PartData::Leaf(bm)) = &mut r.parts[i].data else {
                unreachable!("root leaf is fully resident")
            };
            leaf_apply_one(fns, bm, key, &p, &mut fix, horizon);
            self.stats.add(fix);
            self.after_root_leaf_change(fns, i);
        } else {
            r.buf_mut(i).push(key, &p);
            if self.counted {
                if let Some(c) = &mut r.parts[i].count {
                    c.note(count::effect(&p.kind, p.prov, fns), xid, p.prov);
                }
            }
        }
        self.recharge(root);
        msn
    }

    /// Inject a broadcast update at the root.
    fn inject_broadcast(&mut self, fns: &UpdateRegistry, func: u32, arg: &[u8], xid: Xid) -> Msn {
        self.next_msn += 1;
        let msn = Msn(self.next_msn);
        let horizon = self.horizon();
        let root = self.root;
        self.modify(root);
        // A broadcast is copied into every buffer it passes: a tree that took one keeps no
        // counts (the document layer never sends one; `Dict::update_all` refuses it on a
        // counted dictionary).
        self.counted = false;
        let r = self.nodes.get_mut(&root).expect("root is resident");
        r.touch();
        r.max_msn = msn;
        let bc = Broadcast {
            msn,
            xid,
            func,
            arg: arg.into(),
        };
        if r.is_leaf() {
            let mut fix = Delta::default();
            let old = take_leaf_basements(r);
            let mut only = ChildBuf::default();
            only.push_bcast(bc);
            let mut out = LeafBuilder::new(self.cfg.basement_bytes);
            apply_buffer_to_leaf(fns, &old, &only, &mut fix, &mut out, horizon);
            drop(old);
            set_leaf(r, out);
            self.stats.add(fix);
            self.after_root_leaf_change(fns, 0);
        } else {
            for i in 0..r.parts.len() {
                r.buf_mut(i).push_bcast(bc.clone());
            }
        }
        self.recharge(root);
        msn
    }

    fn after_root_leaf_change(&mut self, fns: &UpdateRegistry, bi: usize) {
        let root = self.root;
        let cfg = self.cfg;
        let r = self.nodes.get_mut(&root).expect("root is resident");
        if r.basement(bi)
            .is_some_and(|b| b.bytes() > 2 * cfg.basement_bytes)
        {
            recut_leaf(r, cfg.basement_bytes);
        }
        if r.bytes() > cfg.node_bytes && leaf_entries(r) > 1 {
            self.split_root(fns);
        }
    }

    /// Flush one buffer one level down, along the heaviest path from the root.
    pub(crate) fn flush_step(&mut self, fns: &UpdateRegistry) -> Step {
        let root = self.root;
        let r = self.node(root);
        if !r.fully_loaded() {
            // Only a clean root loses partitions, and what it holds in memory is below the
            // node size, or it would not have been left clean: nothing presses.
            return if self.gorged(r) {
                Step::Need(missing(r))
            } else {
                Step::Idle
            };
        }
        if !self.gorged(r) {
            return self.fix_root(fns);
        }
        let mut path = vec![root];
        loop {
            let pb = *path.last().expect("path is never empty");
            let n = self.node(pb);
            let c = heaviest_child(n);
            let cb = n.parts[c].child;
            let Some(child) = self.nodes.get(&cb) else {
                return Step::Need(Need::Node(cb));
            };
            if !child.fully_loaded() {
                return Step::Need(missing(child));
            }
            if self.gorged(child) {
                path.push(cb);
                continue;
            }
            self.flush_into(fns, &path, c);
            self.fix_after_flush(fns, &path, c);
            return Step::Progress;
        }
    }

    /// Move the buffer of child `c` of `pb` (the last node of `path`, a path from the root
    /// whose nodes are resident and whole) into the child.
    pub(super) fn flush_into(&mut self, fns: &UpdateRegistry, path: &[BlockNum], c: usize) {
        let pb = *path.last().expect("path is never empty");
        let cb = self.node(pb).parts[c].child;
        let counted = self.counted;
        self.modify(pb);
        self.modify(cb);
        let buf = std::mem::take(self.nodes.get_mut(&pb).expect("parent").buf_mut(c));
        let msn = buf.max_msn();
        let cfg = self.cfg;
        let horizon = self.horizon();
        let child = self.nodes.get_mut(&cb).expect("child");
        child.max_msn = child.max_msn.max(msn);
        if child.is_leaf() {
            let mut fix = Delta::default();
            let old = take_leaf_basements(child);
            let before = if counted {
                leaf_live(&old.iter().collect::<Vec<_>>())
            } else {
                0
            };
            let mut out = LeafBuilder::new(cfg.basement_bytes);
            apply_buffer_to_leaf(fns, &old, &buf, &mut fix, &mut out, horizon);
            drop(old);
            set_leaf(child, out);
            self.stats.add(fix);
            if counted {
                // What the messages did, against what the pointers above were told.
                let after = leaf_live(&take_leaf_view(self.node(cb)));
                let told = count::buffer_count(&buf, 0..buf.len(), fns);
                let repair = after - before - told.live;
                if repair != 0 || told.unsure != 0 {
                    if told.unsure == 0 {
                        self.count_repairs += 1;
                        tracing::debug!(repair, "a write broke the counting promise");
                    }
                    self.repair_counts(path, c, repair, told.unsure);
                }
            }
        } else {
            // The buffer is in key order: hand each child its run of messages.
            let n = buf.len();
            let mut i = 0;
            while i < n {
                let c = child.child_for(buf.key(i));
                let j = match child.pivots.get(c) {
                    Some(p) => buf.first_at_or_above(i, p),
                    None => n,
                };
                child.buf_mut(c).append_sorted(&buf, i..j);
                if counted {
                    if let Some(n) = &mut child.parts[c].count {
                        n.absorb(count::buffer_count(&buf, i..j, fns));
                    }
                }
                i = j;
            }
            for bc in buf.bcasts {
                for i in 0..child.parts.len() {
                    child.buf_mut(i).push_bcast(bc.clone());
                }
            }
        }
        self.recharge(pb);
        self.recharge(cb);
    }

    fn fix_after_flush(&mut self, fns: &UpdateRegistry, path: &[BlockNum], c: usize) {
        let pb = *path.last().expect("path");
        let cb = self.node(pb).parts[c].child;
        let child = self.node(cb);
        if child.is_leaf() {
            if child.bytes() > self.cfg.node_bytes && leaf_entries(child) > 1 {
                self.split_leaf(fns, pb, c);
            } else if child.bytes() * 4 < self.cfg.node_bytes {
                self.try_merge(fns, path, c);
            }
        } else if child.parts.len() > self.cfg.fanout {
            self.split_internal(fns, pb, c);
        } else if child.parts.len() * 4 < self.cfg.fanout {
            self.try_merge(fns, path, c);
        }
        for w in path.windows(2).rev() {
            let (parent, nb) = (w[0], w[1]);
            if self.node(nb).parts.len() > self.cfg.fanout {
                if let Some(i) = self.node(parent).parts.iter().position(|p| p.child == nb) {
                    self.split_internal(fns, parent, i);
                }
            }
        }
        self.fix_root(fns);
    }

    /// Add `repair` to the count of every pointer from the root down to child `c` of the last
    /// node of `path`, and take `landed` messages of unknown effect off their `unsure`: what
    /// a flush into a leaf measured.
    fn repair_counts(&mut self, path: &[BlockNum], c: usize, repair: i64, landed: u64) {
        let mut ptrs = Vec::with_capacity(path.len());
        for w in path.windows(2) {
            let i = self
                .node(w[0])
                .parts
                .iter()
                .position(|p| p.child == w[1])
                .expect("a path's node is its parent's child");
            ptrs.push((w[0], i));
        }
        ptrs.push((*path.last().expect("path is never empty"), c));
        for (b, i) in ptrs {
            self.modify(b);
            let n = self.nodes.get_mut(&b).expect("on the path");
            if let Some(k) = &mut n.parts[i].count {
                k.live += repair;
                k.unsure = k.unsure.saturating_sub(landed);
            }
        }
    }

    /// What pointer `i` of `pb` counts, derived from its child (resident, with every
    /// basement if a leaf) and `pb`'s buffer for it (resident). `None` in a tree that keeps no
    /// counts or below a pointer that knows none.
    pub(super) fn derive_count(
        &self,
        fns: &UpdateRegistry,
        pb: BlockNum,
        i: usize,
    ) -> Option<count::SubCount> {
        if !self.counted {
            return None;
        }
        let part = &self.node(pb).parts[i];
        let Some(PartData::Buf(buf)) = &part.data else {
            return None;
        };
        if !buf.bcasts.is_empty() {
            return None;
        }
        let child = self.nodes.get(&part.child)?;
        let mut c = count::SubCount::default();
        for q in &child.parts {
            let k = match &q.data {
                Some(PartData::Leaf(b)) => count::basement_count(b),
                _ => q.count?,
            };
            c.absorb(k);
        }
        c.absorb(count::buffer_count(buf, 0..buf.len(), fns));
        Some(c)
    }

    /// Set pointer `i` of `pb` (modified already) to [`Tree::derive_count`].
    pub(super) fn recount(&mut self, fns: &UpdateRegistry, pb: BlockNum, i: usize) {
        let c = self.derive_count(fns, pb, i);
        self.nodes.get_mut(&pb).expect("parent").parts[i].count = c;
    }

    /// Split an over-full root, or drop a root that has a single child and nothing buffered.
    fn fix_root(&mut self, fns: &UpdateRegistry) -> Step {
        let root = self.root;
        let r = self.node(root);
        if !r.is_leaf() && r.parts.len() > self.cfg.fanout {
            self.split_root(fns);
            return Step::Progress;
        }
        if !r.is_leaf() && r.parts.len() == 1 && r.buf(0).is_some_and(ChildBuf::is_empty) {
            let cb = r.parts[0].child;
            if self.nodes.get(&cb).is_some_and(Node::fully_loaded) {
                self.root = cb;
                self.remove_node(root);
                return Step::Progress;
            }
        }
        Step::Idle
    }

    // ----- reads --------------------------------------------------------------------------

    /// Descend to the basement for `t`, touching clock bits on the way.
    pub(crate) fn locate(&self, t: Target<'_>) -> Result<Located, Need> {
        let mut b = self.root;
        let mut lo: Option<Key> = None;
        let mut hi: Option<Key> = None;
        let mut path = Vec::new();
        loop {
            let n = self.nodes.get(&b).ok_or(Need::Node(b))?;
            n.touch();
            let i = match t {
                Target::At(k) => n.child_for(k),
                Target::Before(k) => n.child_before(k),
                Target::First => 0,
                Target::Last => n.parts.len() - 1,
            };
            let part = &n.parts[i];
            if part.data.is_none() {
                let loc = part.loc.expect("a non-resident partition has a location");
                return Err(Need::Parts(b, vec![(i, loc)]));
            }
            part.touched.store(true, Ordering::Relaxed);
            if i > 0 {
                lo = Some(n.pivots[i - 1].clone());
            }
            if i < n.pivots.len() {
                hi = Some(n.pivots[i].clone());
            }
            if n.is_leaf() {
                return Ok(Located {
                    leaf: b,
                    bi: i,
                    lo,
                    hi,
                    path,
                });
            }
            path.push((b, i));
            b = part.child;
        }
    }

    /// Pending messages on the path for keys in `range`, each list and the broadcasts in MSN order.
    fn pending_in(
        &self,
        path: &[(BlockNum, usize)],
        range: (Bound<&[u8]>, Bound<&[u8]>),
    ) -> (BTreeMap<Key, Vec<Pending>>, Vec<Broadcast>) {
        let mut msgs: BTreeMap<Key, Vec<Pending>> = BTreeMap::new();
        let mut bcasts = Vec::new();
        for &(b, i) in path {
            let Some(buf) = self.node(b).buf(i) else {
                continue;
            };
            for i in buf.positions(range.0, range.1) {
                let m = buf.msg(i);
                match msgs.get_mut(m.key) {
                    Some(l) => l.push(m.to_pending()),
                    None => {
                        msgs.insert(m.key.into(), vec![m.to_pending()]);
                    }
                }
            }
            bcasts.extend(buf.bcasts.iter().cloned());
        }
        if path.len() > 1 {
            for l in msgs.values_mut() {
                l.sort_by_key(|p| p.msn);
            }
            bcasts.sort_by_key(|b: &Broadcast| b.msn);
        }
        (msgs, bcasts)
    }

    /// Call `f` with `key`'s stored entry, its pending messages and the broadcasts above it
    /// (each in MSN order).
    fn with_key<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<(u8, &[u8])>, &[Pending], &[Broadcast]) -> R,
    ) -> Result<R, Need> {
        let loc = self.locate(Target::At(key))?;
        let bm = self
            .node(loc.leaf)
            .basement(loc.bi)
            .expect("located basement is resident");
        let (msgs, bcasts) =
            self.pending_in(&loc.path, (Bound::Included(key), Bound::Included(key)));
        let list = msgs.get(key).map(Vec::as_slice).unwrap_or(&[]);
        Ok(f(bm.get(key), list, &bcasts))
    }

    /// The value `view` sees of `key`.
    pub(crate) fn get(
        &self,
        fns: &UpdateRegistry,
        key: &[u8],
        view: View<'_>,
    ) -> Result<Option<Val>, Need> {
        self.with_key(key, |base, list, bcasts| {
            if list.is_empty() && bcasts.is_empty() {
                return base
                    .and_then(|(t, v)| le::visible(t, v, view))
                    .map(Val::from);
            }
            read_value(fns, key, base, list, bcasts, view)
        })
    }

    /// Read the keys of `keys` (ascending) from `from` on that lie in the basement of
    /// `keys[from]`, calling `f` with each one's index and the value `view` sees, with one
    /// descent for them all. Returns where the next basement's keys begin.
    pub(crate) fn get_run(
        &self,
        fns: &UpdateRegistry,
        keys: &[&[u8]],
        from: usize,
        view: View<'_>,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<usize, Need> {
        let loc = self.locate(Target::At(keys[from]))?;
        let bm = self
            .node(loc.leaf)
            .basement(loc.bi)
            .expect("located basement is resident");
        let mut to = from + 1;
        while to < keys.len() && loc.hi.as_deref().is_none_or(|h| keys[to] < h) {
            to += 1;
        }
        // Only the buffers on the path that hold a message between the first key and the
        // last are searched for each key's own (gathering the whole range's messages would
        // copy every message between the keys).
        let run = (Bound::Included(keys[from]), Bound::Included(keys[to - 1]));
        let busy: Vec<(BlockNum, usize)> = loc
            .path
            .iter()
            .copied()
            .filter(|&(b, i)| {
                self.node(b)
                    .buf(i)
                    .is_some_and(|x| !x.bcasts.is_empty() || !x.positions(run.0, run.1).is_empty())
            })
            .collect();
        for (i, &key) in keys.iter().enumerate().take(to).skip(from) {
            let base = bm.get(key);
            let (msgs, bcasts) =
                self.pending_in(&busy, (Bound::Included(key), Bound::Included(key)));
            match msgs.get(key) {
                None if bcasts.is_empty() => f(i, base.and_then(|(t, v)| le::visible(t, v, view))),
                list => {
                    let list = list.map(Vec::as_slice).unwrap_or(&[]);
                    let v = read_value(fns, key, base, list, &bcasts, view);
                    f(i, v.as_deref());
                }
            }
        }
        Ok(to)
    }

    /// Every version of `key`, pending messages applied (what a writer checks for conflicts).
    pub(crate) fn versions(&self, fns: &UpdateRegistry, key: &[u8]) -> Result<Le, Need> {
        self.with_key(key, |base, list, bcasts| {
            let it = list.iter().map(std::borrow::Cow::Borrowed);
            apply::resolve_le(fns, key, base, it, bcasts, None)
        })
    }

    /// Drop the garbage versions of a resident leaf's versioned entries (before it is written).
    pub(crate) fn collect_leaf(&mut self, b: BlockNum) {
        let horizon = self.horizon();
        let Some(n) = self.nodes.get_mut(&b) else {
            return;
        };
        if !n.is_leaf() || !n.fully_loaded() {
            return;
        }
        for p in &mut n.parts {
            let Some(PartData::Leaf(bm)) = &mut p.data else {
                continue;
            };
            if !(0..bm.len()).any(|i| bm.entry(i).1 != LE_CLEAN) {
                continue;
            }
            let mut out = Basement::with_capacity(bm.bytes());
            for i in 0..bm.len() {
                let (k, t, v) = bm.entry(i);
                if t == LE_CLEAN {
                    out.push(k, t, v);
                } else if let Some((t, v)) = Le::decode(t, v).settle(horizon) {
                    out.push(k, t, &v);
                }
            }
            out.shrink();
            *bm = out;
        }
        self.recharge(b);
    }

    /// Visit the live entries of one basement that fall in `[lo, hi]`, starting from `from`
    /// (in the direction of travel). Returns where the next basement starts, or `None` at the
    /// end of the range.
    pub(crate) fn scan_basement(
        &self,
        fns: &UpdateRegistry,
        from: &Bound<Key>,
        (lo, hi): (&Bound<Key>, &Bound<Key>),
        reverse: bool,
        view: View<'_>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<Option<Bound<Key>>, Need> {
        let t = match (reverse, from) {
            (false, Bound::Unbounded) => Target::First,
            (false, Bound::Included(k) | Bound::Excluded(k)) => Target::At(k),
            (true, Bound::Unbounded) => Target::Last,
            (true, Bound::Included(k)) => Target::At(k),
            (true, Bound::Excluded(k)) => Target::Before(k),
        };
        let loc = self.locate(t)?;
        // The effective range: user range, narrowed by `from`, narrowed by the basement bounds.
        let (mut a, mut z) = (bound_ref(lo), bound_ref(hi));
        if reverse {
            z = tighter_hi(z, bound_ref(from));
        } else {
            a = tighter_lo(a, bound_ref(from));
        }
        if let Some(l) = &loc.lo {
            a = tighter_lo(a, Bound::Included(l));
        }
        if let Some(h) = &loc.hi {
            z = tighter_hi(z, Bound::Excluded(h));
        }
        let mut stopped = false;
        if !empty_range(a, z) {
            let bm = self
                .node(loc.leaf)
                .basement(loc.bi)
                .expect("located basement is resident");
            let (s, e) = bm.positions(a, z);
            let (msgs, bcasts) = self.pending_in(&loc.path, (a, z));
            merge_walk(fns, (bm, s, e), &msgs, &bcasts, reverse, view, |k, v| {
                let go = f(k, &v);
                stopped |= !go;
                go
            });
        }
        if stopped {
            return Ok(None);
        }
        // Next basement, unless the range ends inside this one.
        Ok(if reverse {
            match loc.lo {
                Some(l) if !below_lo(&l, lo) => Some(Bound::Excluded(l)),
                _ => None,
            }
        } else {
            match loc.hi {
                Some(h) if !above_hi(&h, hi) => Some(Bound::Included(h)),
                _ => None,
            }
        })
    }
}

fn heaviest_child(n: &Node) -> usize {
    (0..n.parts.len())
        .max_by_key(|&i| n.buf(i).map(|b| b.bytes).unwrap_or(0))
        .unwrap_or(0)
}

pub(crate) fn missing(n: &Node) -> Need {
    Need::Parts(
        n.blocknum,
        n.missing_parts()
            .into_iter()
            .map(|i| {
                (
                    i,
                    n.parts[i]
                        .loc
                        .expect("non-resident partition has a location"),
                )
            })
            .collect(),
    )
}

fn leaf_entries(n: &Node) -> usize {
    n.parts
        .iter()
        .map(|p| match &p.data {
            Some(PartData::Leaf(b)) => b.len(),
            _ => 0,
        })
        .sum()
}

/// Live entries of a leaf's basements.
fn leaf_live(bms: &[&Basement]) -> i64 {
    bms.iter()
        .map(|b| count::live_between(b, 0, b.len()) as i64)
        .sum()
}

/// A resident leaf's basements, borrowed.
fn take_leaf_view(n: &Node) -> Vec<&Basement> {
    n.parts
        .iter()
        .filter_map(|p| match &p.data {
            Some(PartData::Leaf(b)) => Some(b),
            _ => None,
        })
        .collect()
}

/// Take a (fully resident) leaf's basements out, in order.
fn take_leaf_basements(n: &mut Node) -> Vec<Basement> {
    let mut out = Vec::with_capacity(n.parts.len());
    for p in &mut n.parts {
        if let Some(PartData::Leaf(b)) = p.data.take() {
            out.push(b);
        }
    }
    out
}

fn set_leaf(n: &mut Node, built: LeafBuilder) {
    let (bms, pivots) = built.finish();
    n.pivots = pivots;
    n.parts = bms
        .into_iter()
        .map(|b| node::Part::new(BlockNum(0), PartData::Leaf(b)))
        .collect();
}

fn recut_leaf(n: &mut Node, basement_bytes: usize) {
    let mut out = LeafBuilder::new(basement_bytes);
    for bm in take_leaf_basements(n) {
        for i in 0..bm.len() {
            let (k, t, v) = bm.entry(i);
            out.push(k, t, v);
        }
    }
    set_leaf(n, out);
}

/// Apply one message to a resident basement.
fn leaf_apply_one(
    fns: &UpdateRegistry,
    bm: &mut Basement,
    key: &[u8],
    p: &Pending,
    fix: &mut Delta,
    horizon: Xid,
) {
    let pos = bm.search(key);
    let base = pos.ok().map(|i| {
        let (_, t, v) = bm.entry(i);
        (t, v)
    });
    let nv: Option<(u8, std::borrow::Cow<'_, [u8]>)> = if base.is_none_or(|(t, _)| t == LE_CLEAN)
        && !p.prov
        && p.kind.is_data()
        && p.xid < horizon
    {
        let base = base.map(|(_, v)| Val::from(v));
        resolve(fns, key, base, std::slice::from_ref(p), &[], Some(fix))
            .map(|v| (LE_CLEAN, std::borrow::Cow::Owned(v.into_vec())))
    } else {
        let it = std::iter::once(std::borrow::Cow::Borrowed(p));
        apply::resolve_le(fns, key, base, it, &[], Some(fix)).settle(horizon)
    };
    match (pos, nv) {
        (Ok(i), Some((t, v))) => bm.splice(i, true, Some((key, t, &v))),
        (Ok(i), None) => bm.splice(i, true, None),
        (Err(i), Some((t, v))) => bm.splice(i, false, Some((key, t, &v))),
        (Err(_), None) => {}
    }
}

impl Tree {
    /// Flush some non-empty buffer anywhere in the tree, depth first. `Idle` when every buffer
    /// is empty.
    pub(crate) fn flush_any(&mut self, fns: &UpdateRegistry) -> Step {
        let mut stack = vec![vec![self.root]];
        while let Some(path) = stack.pop() {
            let b = *path.last().expect("path");
            let n = self.node(b);
            if n.is_leaf() {
                continue;
            }
            if !n.fully_loaded() {
                return Step::Need(missing(n));
            }
            if let Some(c) = (0..n.parts.len()).find(|&i| n.buf(i).is_some_and(|x| !x.is_empty())) {
                let cb = n.parts[c].child;
                match self.nodes.get(&cb) {
                    None => return Step::Need(Need::Node(cb)),
                    Some(ch) if !ch.fully_loaded() => return Step::Need(missing(ch)),
                    Some(_) => {}
                }
                self.flush_into(fns, &path, c);
                self.fix_after_flush(fns, &path, c);
                return Step::Progress;
            }
            if n.height == 1 {
                continue;
            }
            for p in n.parts.iter().rev() {
                if !self.nodes.contains_key(&p.child) {
                    return Step::Need(Need::Node(p.child));
                }
                let mut np = path.clone();
                np.push(p.child);
                stack.push(np);
            }
        }
        Step::Idle
    }
}

impl Tree {
    /// Remove a node and its block-table entry (used by the bulk loader for the old root).
    pub(crate) fn remove_node_pub(&mut self, b: BlockNum) {
        self.remove_node(b);
    }
}
