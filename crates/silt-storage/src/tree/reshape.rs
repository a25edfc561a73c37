//! The tree's shape: splitting a node that grew past `node_bytes` (or a child count past
//! `fanout`) and merging neighbours that shrank, with the buffer of the parent's pivot split
//! or joined to match. Runs under the tree write lock, like all of `Tree`; flushes (`mod.rs`)
//! call in here once a message has moved down.

use std::sync::atomic::Ordering;

use super::node::{self, entry_bytes, Basement, ChildBuf, Key, LeafBuilder, Node, PartData};
use super::{set_leaf, take_leaf_basements, Tree};
use crate::ids::BlockNum;
use crate::msg::UpdateRegistry;

impl Tree {
    pub(super) fn split_root(&mut self, fns: &UpdateRegistry) {
        let old = self.root;
        let nb = self.alloc_block();
        let h = self.node(old).height + 1;
        let nr = Node::new_internal(nb, h, vec![(old, ChildBuf::default())], Vec::new());
        self.insert_node(nr);
        self.root = nb;
        if self.node(old).is_leaf() {
            self.split_leaf(fns, nb, 0);
        } else {
            self.split_internal(fns, nb, 0);
        }
    }

    /// Split leaf child `c` of `pb` into as many leaves as its size needs.
    pub(super) fn split_leaf(&mut self, fns: &UpdateRegistry, pb: BlockNum, c: usize) {
        let cb = self.node(pb).parts[c].child;
        self.modify(pb);
        self.modify(cb);
        let cfg = self.cfg;
        let old = take_leaf_basements(self.nodes.get_mut(&cb).expect("child"));
        let total: usize = old.iter().map(Basement::bytes).sum();
        let count: usize = old.iter().map(Basement::len).sum();
        let pieces = total.div_ceil(cfg.node_bytes).max(2).min(count);
        let per = total.div_ceil(pieces);
        let mut groups = vec![LeafBuilder::new(cfg.basement_bytes)];
        let mut firsts: Vec<Key> = Vec::new();
        let mut acc = 0;
        for bm in &old {
            for i in 0..bm.len() {
                let (k, t, v) = bm.entry(i);
                let eb = entry_bytes(k, v);
                let last = groups.last_mut().expect("group");
                if acc + eb > per && !last.is_empty() && groups.len() < pieces {
                    firsts.push(k.into());
                    groups.push(LeafBuilder::new(cfg.basement_bytes));
                    acc = 0;
                }
                acc += eb;
                groups.last_mut().expect("group").push(k, t, v);
            }
        }
        drop(old);
        let max_msn = self.node(cb).max_msn;
        let mut groups = groups.into_iter();
        let first = groups.next().expect("one group");
        set_leaf(self.nodes.get_mut(&cb).expect("child"), first);
        let mut new_children = Vec::new();
        for (g, pivot) in groups.zip(firsts) {
            let nb = self.alloc_block();
            let (bms, pv) = g.finish();
            let mut n = Node::new_leaf(nb, bms, pv);
            n.max_msn = max_msn;
            self.insert_node(n);
            new_children.push((pivot, nb));
        }
        self.recharge(cb);
        self.attach_children(fns, pb, c, new_children);
    }

    /// Insert new right siblings of child `c` into `pb`, splitting `c`'s buffer among them,
    /// and count each piece afresh.
    pub(super) fn attach_children(
        &mut self,
        fns: &UpdateRegistry,
        pb: BlockNum,
        c: usize,
        new_children: Vec<(Key, BlockNum)>,
    ) {
        let p = self.nodes.get_mut(&pb).expect("parent");
        let mut rest = std::mem::take(p.buf_mut(c));
        let mut bufs = Vec::with_capacity(new_children.len());
        for (pivot, _) in new_children.iter().rev() {
            bufs.push(rest.split_off(pivot));
        }
        bufs.reverse();
        *p.buf_mut(c) = rest;
        let k = new_children.len();
        for (j, ((pivot, nb), buf)) in new_children.into_iter().zip(bufs).enumerate() {
            p.pivots.insert(c + j, pivot);
            p.parts
                .insert(c + 1 + j, node::Part::new(nb, PartData::Buf(buf)));
        }
        for i in c..=c + k {
            self.recount(fns, pb, i);
        }
        self.recharge(pb);
    }

    pub(super) fn split_internal(&mut self, fns: &UpdateRegistry, pb: BlockNum, c: usize) {
        let cb = self.node(pb).parts[c].child;
        self.modify(pb);
        self.modify(cb);
        let nb = self.alloc_block();
        let child = self.nodes.get_mut(&cb).expect("child");
        let half = child.parts.len() / 2;
        let right_parts: Vec<node::Part> = child.parts.drain(half..).collect();
        let mut right_pivots: Vec<Key> = child.pivots.drain(half - 1..).collect();
        let mid = right_pivots.remove(0);
        let height = child.height;
        let max_msn = child.max_msn;
        let mut right = Node::new_internal(nb, height, Vec::new(), right_pivots);
        right.parts = right_parts;
        right.max_msn = max_msn;
        self.insert_node(right);
        self.recharge(cb);
        self.attach_children(fns, pb, c, vec![(mid, nb)]);
    }

    /// Merge child `c` of `pb` (the last node of `path`, from the root) with a neighbour if
    /// both are resident; otherwise leave it.
    pub(super) fn try_merge(&mut self, fns: &UpdateRegistry, path: &[BlockNum], c: usize) {
        let pb = *path.last().expect("path is never empty");
        let p = self.node(pb);
        if p.parts.len() < 2 {
            return;
        }
        let (l, r) = if c + 1 < p.parts.len() {
            (c, c + 1)
        } else {
            (c - 1, c)
        };
        let (lb, rb) = (p.parts[l].child, p.parts[r].child);
        let resident = |b: BlockNum| self.nodes.get(&b).is_some_and(Node::fully_loaded);
        if !resident(lb) || !resident(rb) {
            return;
        }
        for i in [l, r] {
            if !self.node(pb).buf(i).is_some_and(ChildBuf::is_empty) {
                self.flush_into(fns, path, i);
            }
        }
        let cfg = self.cfg;
        let (ln, rn) = (self.node(lb), self.node(rb));
        if ln.is_leaf() {
            let total = ln.bytes() + rn.bytes();
            if total <= cfg.node_bytes * 3 / 4 {
                self.modify(lb);
                self.modify(rb);
                let mut out = LeafBuilder::new(cfg.basement_bytes);
                for n in [lb, rb] {
                    for bm in take_leaf_basements(self.nodes.get_mut(&n).expect("leaf")) {
                        for i in 0..bm.len() {
                            let (k, t, v) = bm.entry(i);
                            out.push(k, t, v);
                        }
                    }
                }
                set_leaf(self.nodes.get_mut(&lb).expect("l"), out);
                self.detach_child(pb, r);
                self.remove_node(rb);
                self.recount(fns, pb, l);
                self.recharge(lb);
            }
        } else if ln.parts.len() + rn.parts.len() <= cfg.fanout {
            self.modify(lb);
            self.modify(rb);
            let sep = self.node(pb).pivots[l].clone();
            let mut rnode = self.nodes.remove(&rb).expect("r");
            self.cache
                .used
                .fetch_sub(rnode.charged as i64, Ordering::Relaxed);
            let ln = self.nodes.get_mut(&lb).expect("l");
            ln.pivots.push(sep);
            ln.pivots.append(&mut rnode.pivots);
            ln.parts.append(&mut rnode.parts);
            ln.max_msn = ln.max_msn.max(rnode.max_msn);
            self.file.state.lock().remove_current(rb);
            self.detach_child(pb, r);
            self.recount(fns, pb, l);
            self.recharge(lb);
        }
    }

    /// Remove child `r` (whose buffer is empty) and the pivot before it from `pb`.
    pub(super) fn detach_child(&mut self, pb: BlockNum, r: usize) {
        self.modify(pb);
        let p = self.nodes.get_mut(&pb).expect("parent");
        p.parts.remove(r);
        p.pivots.remove(r - 1);
        self.recharge(pb);
    }
}
