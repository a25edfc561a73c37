//! Counting a key range from subtree counts (`count.rs`): descend the range's two boundary
//! paths, add the counts of the pointers wholly inside the range, and add the effects of the
//! messages in range waiting in the buffers on the way. What cannot be counted so is handed
//! back as ranges to scan: a subtree whose pointer knows no count, one with messages of
//! unknown effect, or, for a snapshot, one with versions the snapshot may not see.
//!
//! Under one hold of the tree's read lock the answer is one consistent state; a [`Need`]
//! restarts the walk from the root once the read is done.

use std::ops::Bound;

use super::bounds::{bound_ref, empty_range, tighter_hi, tighter_lo};
use super::count::stored_effect;
use super::le;
use super::node::{Key, Node, PartData};
use super::{Need, Tree};
use crate::format::node::EMPTY_BUFFER_RAW_LEN;
use crate::ids::{BlockNum, Xid};
use crate::msg::{tag, UpdateRegistry};
use crate::mvcc::View;

/// A key range, owned.
pub(crate) type Range = (Bound<Key>, Bound<Key>);

/// What one walk counted, and what it left to scan.
#[derive(Debug, Default)]
pub(crate) struct CountPlan {
    /// Live keys counted from pointers, basements and pending messages, outside `scan`.
    pub live: i64,
    /// Ranges to count by scanning (nothing in them is in `live`).
    pub scan: Vec<Range>,
    /// Nodes the walk visited.
    pub nodes: u64,
}

struct Walk<'a> {
    fns: &'a UpdateRegistry,
    view: View<'a>,
    /// Every message or version below this xid is seen by `view` (`u64::MAX`: the latest).
    bound: Xid,
    q: (Bound<&'a [u8]>, Bound<&'a [u8]>),
    plan: CountPlan,
    /// The buffers on the path whose messages in a part of the range were added to `live`:
    /// node, partition and that part (to take back what a scanned range holds).
    spans: Vec<(BlockNum, usize, Range)>,
}

fn owned((a, z): (Bound<&[u8]>, Bound<&[u8]>)) -> Range {
    let o = |b: Bound<&[u8]>| match b {
        Bound::Included(k) => Bound::Included(Key::from(k)),
        Bound::Excluded(k) => Bound::Excluded(Key::from(k)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (o(a), o(z))
}

impl Tree {
    /// Count the live keys of `q` that `view` sees, as far as subtree counts allow.
    pub(crate) fn count_range(
        &self,
        fns: &UpdateRegistry,
        q: (Bound<&[u8]>, Bound<&[u8]>),
        view: View<'_>,
    ) -> Result<CountPlan, Need> {
        let bound = match view {
            View::Latest => Xid(u64::MAX),
            // The reader's own provisional versions are not in any count.
            View::At(s) => Xid(s.bound().min(s.own.map_or(u64::MAX, |x| x.0))),
        };
        let mut w = Walk {
            fns,
            view,
            bound,
            q,
            plan: CountPlan::default(),
            spans: Vec::new(),
        };
        if !self.counted {
            w.plan.scan.push(owned(q));
            return Ok(w.plan);
        }
        self.count_node(&mut w, self.root, Bound::Unbounded, Bound::Unbounded)?;
        // A scanned range counts the messages above it itself: take back what the walk added
        // of them.
        let mut plan = w.plan;
        for s in &plan.scan {
            for (b, i, (a, z)) in &w.spans {
                let Some(PartData::Buf(buf)) = &self.node(*b).parts[*i].data else {
                    continue;
                };
                let lo = tighter_lo(bound_ref(&s.0), bound_ref(a));
                let hi = tighter_hi(bound_ref(&s.1), bound_ref(z));
                if empty_range(lo, hi) {
                    continue;
                }
                for j in buf.positions(lo, hi) {
                    plan.live -= stored_effect(&buf.msg(j), fns).unwrap_or(0);
                }
            }
        }
        Ok(plan)
    }

    fn count_node<'t>(
        &'t self,
        w: &mut Walk<'_>,
        b: BlockNum,
        nlo: Bound<&'t [u8]>,
        nhi: Bound<&'t [u8]>,
    ) -> Result<(), Need> {
        let n = self.nodes.get(&b).ok_or(Need::Node(b))?;
        n.touch();
        w.plan.nodes += 1;
        let last_part = n.parts.len() - 1;
        let first = match w.q.0 {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => n.child_for(k),
        };
        let last = match w.q.1 {
            Bound::Unbounded => last_part,
            Bound::Included(k) | Bound::Excluded(k) => n.child_for(k),
        };
        for i in first..=last {
            let clo = if i == 0 {
                nlo
            } else {
                Bound::Included(&*n.pivots[i - 1])
            };
            let chi = if i == last_part {
                nhi
            } else {
                Bound::Excluded(&*n.pivots[i])
            };
            let (a, z) = (tighter_lo(w.q.0, clo), tighter_hi(w.q.1, chi));
            if empty_range(a, z) {
                continue;
            }
            let inside = a == clo && z == chi;
            if n.is_leaf() {
                count_basement(w, n, i, (a, z), inside)?;
                continue;
            }
            let part = &n.parts[i];
            let Some(c) = part.count else {
                w.plan.scan.push(owned((a, z)));
                continue;
            };
            if inside {
                if let Some(k) = c.exact_below(w.bound) {
                    w.plan.live += k as i64;
                    continue;
                }
            }
            let Some(PartData::Buf(buf)) = &part.data else {
                let loc = part.loc.expect("a non-resident partition has a location");
                if loc.raw_len == EMPTY_BUFFER_RAW_LEN {
                    // Nothing waits there: no need to read it.
                    self.count_node(w, part.child, clo, chi)?;
                    continue;
                }
                return Err(Need::Parts(b, vec![(i, loc)]));
            };
            // The messages in range on the way down must each have a known effect that the
            // view sees; otherwise the child's part of the range is scanned.
            let (mut adds, mut added) = (0, false);
            let mut known = buf.bcasts.is_empty();
            for j in buf.positions(a, z) {
                if !known {
                    break;
                }
                let m = buf.msg(j);
                let prov = tag::split(m.tag).1;
                match stored_effect(&m, w.fns) {
                    None => known = false,
                    Some(0) if !prov => {}
                    Some(_) if m.xid >= w.bound => known = false,
                    Some(e) => {
                        adds += e;
                        added |= e != 0;
                    }
                }
            }
            if !known {
                w.plan.scan.push(owned((a, z)));
                continue;
            }
            if added {
                w.plan.live += adds;
                w.spans.push((b, i, owned((a, z))));
            }
            self.count_node(w, part.child, clo, chi)?;
        }
        Ok(())
    }
}

/// Count basement `i` of leaf `n` over `(a, z)`, from its stored count if it is `inside` the
/// range and not resident.
fn count_basement(
    w: &mut Walk<'_>,
    n: &Node,
    i: usize,
    (a, z): (Bound<&[u8]>, Bound<&[u8]>),
    inside: bool,
) -> Result<(), Need> {
    let part = &n.parts[i];
    let Some(PartData::Leaf(bm)) = &part.data else {
        if let Some(k) = part
            .count
            .filter(|_| inside)
            .and_then(|c| c.exact_below(w.bound))
        {
            w.plan.live += k as i64;
            return Ok(());
        }
        let loc = part.loc.expect("a non-resident partition has a location");
        return Err(Need::Parts(n.blocknum, vec![(i, loc)]));
    };
    let (s, e) = bm.positions(a, z);
    let view = w.view;
    w.plan.live += if bm.all_clean() {
        (e - s) as i64
    } else {
        (s..e)
            .filter(|&j| {
                let (_, t, v) = bm.entry(j);
                le::visible(t, v, view).is_some()
            })
            .count() as i64
    };
    Ok(())
}
