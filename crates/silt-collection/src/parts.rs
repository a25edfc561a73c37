//! Partitions of a key space (issue 12, `docs/partitions-plan.md`): one engine dictionary per
//! range of the primary key, so that dropping a range drops its files at once.
//!
//! A collection's primary dictionary and each of its indexes become a [`Parts`]: members in
//! primary-key order, member `i` holding the documents whose primary key is above member
//! `i - 1`'s `max` and at most its own (the last member is unbounded). A document's index
//! entries live in the member of the document's partition, whatever their index key, so that
//! one document's entries always leave together.
//!
//! [`PartsCursor`] reads several members as one, in key order: a k-way merge of their
//! cursors. Over a primary dictionary the members' ranges are disjoint and the merge is a
//! concatenation; over an index it interleaves (index keys end with the primary key, so no
//! two members hold the same key). A member dropped while a cursor reads it ends, and the
//! cursor goes on with the others.
//!
//! An unpartitioned collection is one member ([`Parts::single`]); every read and write of a
//! collection goes through its `Parts`.

use std::ops::Bound;

use silt_storage::{CountStats, Cursor, Dict, DictStats, Error, Result, Snapshot};

/// One partition's dictionary.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    /// The partition's id (ids increase and are never reused).
    pub id: u64,
    /// The largest primary key the partition holds, encoded; `None` for the last partition,
    /// which is unbounded.
    pub max: Option<Vec<u8>>,
    pub dict: Dict,
}

/// The members of one partitioned dictionary, in primary-key order.
#[derive(Clone, Debug)]
pub(crate) struct Parts {
    members: Vec<Member>,
}

impl Parts {
    /// Members in order: every `max` but the last's is set and increasing, the last's is
    /// `None`.
    pub(crate) fn new(members: Vec<Member>) -> Result<Parts> {
        let ok = !members.is_empty()
            && members.last().is_some_and(|m| m.max.is_none())
            && members[..members.len() - 1].iter().all(|m| m.max.is_some())
            && members
                .windows(2)
                .all(|w| w[1].max.is_none() || w[0].max < w[1].max);
        if !ok {
            return Err(Error::InvalidArgument(
                "partition bounds must increase and the last must be unbounded".into(),
            ));
        }
        Ok(Parts { members })
    }

    /// One unbounded member: an unpartitioned dictionary.
    pub(crate) fn single(dict: Dict) -> Parts {
        Parts {
            members: vec![Member {
                id: 0,
                max: None,
                dict,
            }],
        }
    }

    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    /// Every member's dictionary, in order.
    pub(crate) fn dicts(&self) -> impl Iterator<Item = &Dict> {
        self.members.iter().map(|m| &m.dict)
    }

    /// The first member's dictionary (the catalog's `dict` of an unpartitioned collection).
    pub(crate) fn first(&self) -> &Dict {
        &self.members[0].dict
    }

    /// The newest committed value of primary key `pk` (nothing when its member was dropped
    /// since these members were read).
    pub(crate) fn get(&self, pk: &[u8]) -> Result<Option<Vec<u8>>> {
        gone_is_none(self.member_for(pk).get(pk))
    }

    /// The value of primary key `pk` that `snap` sees.
    pub(crate) fn get_at(&self, pk: &[u8], snap: &Snapshot) -> Result<Option<Vec<u8>>> {
        gone_is_none(self.member_for(pk).get_at(pk, snap))
    }

    /// The values of primary keys `pks` (ascending) that `snap` sees, each given to `f` with
    /// its index (`Dict::get_sorted`, member by member; a member dropped meanwhile holds
    /// nothing).
    pub(crate) fn get_sorted_at(
        &self,
        pks: &[&[u8]],
        snap: &Snapshot,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let mut i = 0;
        while i < pks.len() {
            let m = self.position_of(pks[i]);
            let mut j = i + 1;
            while j < pks.len() && self.position_of(pks[j]) == m {
                j += 1;
            }
            let r = self.members[m]
                .dict
                .get_sorted(&pks[i..j], Some(snap), &mut |k, v| f(i + k, v));
            match r {
                Ok(()) => {}
                Err(Error::NoSuchDictionary(_)) => (i..j).for_each(|k| f(k, None)),
                Err(e) => return Err(e),
            }
            i = j;
        }
        Ok(())
    }

    /// Live keys in `(lo, hi)` over the members (pruned by the bounds when they are primary
    /// keys), counted in the trees. A member dropped meanwhile counts nothing.
    pub(crate) fn count_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        primary: bool,
    ) -> Result<u64> {
        self.count_range_at(lo, hi, primary, None, &mut CountStats::default())
    }

    /// [`Parts::count_range`] of what `snap` sees (the latest state without one), adding
    /// how each member's count was answered to `stats`.
    pub(crate) fn count_range_at(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        primary: bool,
        snap: Option<&Snapshot>,
        stats: &mut CountStats,
    ) -> Result<u64> {
        let mut n = 0;
        for i in 0..self.members.len() {
            if primary && !self.meets(i, lo, hi) {
                continue;
            }
            match self.members[i].dict.count_range_explained(lo, hi, snap) {
                Ok((c, how)) => {
                    n += c;
                    stats.nodes += how.nodes;
                    stats.scanned_ranges += how.scanned_ranges;
                }
                Err(Error::NoSuchDictionary(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// The members' statistics added up (the height is the tallest member's).
    pub(crate) fn stats(&self) -> DictStats {
        let mut t = DictStats {
            rows: 0,
            data_bytes: 0,
            file_bytes: 0,
            file_allocated_bytes: 0,
            height: 0,
            resident_nodes: 0,
            counted: true,
            count_repairs: 0,
            unsure: 0,
        };
        for d in self.dicts() {
            let s = d.stats();
            t.rows += s.rows;
            t.data_bytes += s.data_bytes;
            t.file_bytes += s.file_bytes;
            t.file_allocated_bytes += s.file_allocated_bytes;
            t.height = t.height.max(s.height);
            t.resident_nodes += s.resident_nodes;
            t.counted &= s.counted;
            t.count_repairs += s.count_repairs;
            t.unsure += s.unsure;
        }
        t
    }

    /// The index of the member that holds primary key `pk`.
    pub(crate) fn position_of(&self, pk: &[u8]) -> usize {
        self.members
            .partition_point(|m| m.max.as_deref().is_some_and(|max| max < pk))
            .min(self.members.len() - 1)
    }

    /// The dictionary that holds (or would hold) primary key `pk`.
    pub(crate) fn member_for(&self, pk: &[u8]) -> &Dict {
        &self.members[self.position_of(pk)].dict
    }

    /// Whether member `i`'s primary-key range meets `(lo, hi)` (conservatively: an excluded
    /// upper bound just above the previous member's `max` still counts).
    fn meets(&self, i: usize, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let max = self.members[i].max.as_deref();
        let prev = i
            .checked_sub(1)
            .and_then(|p| self.members[p].max.as_deref());
        let lo_ok = match (lo, max) {
            (_, None) | (Bound::Unbounded, _) => true,
            (Bound::Included(l), Some(m)) => l <= m,
            (Bound::Excluded(l), Some(m)) => l < m,
        };
        let hi_ok = match (hi, prev) {
            (_, None) | (Bound::Unbounded, _) => true,
            (Bound::Included(h) | Bound::Excluded(h), Some(p)) => h > p,
        };
        lo_ok && hi_ok
    }

    /// A cursor over `(lo, hi)` of every member, read at `snap` when given. With `primary`,
    /// the bounds are primary keys and members outside them are skipped; without, the
    /// bounds are keys of an index and every member is read.
    pub(crate) fn cursor(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        snap: Option<&Snapshot>,
        primary: bool,
    ) -> PartsCursor {
        let curs = (0..self.members.len())
            .filter(|&i| !primary || self.meets(i, lo, hi))
            .map(|i| {
                let d = &self.members[i].dict;
                match snap {
                    Some(s) => d.cursor_at(lo, hi, s),
                    None => d.cursor(lo, hi),
                }
            })
            .collect::<Vec<_>>();
        PartsCursor {
            heads: vec![None; curs.len()],
            curs,
            dir: None,
        }
    }
}

/// A read of a member that was dropped finds nothing.
fn gone_is_none(r: Result<Option<Vec<u8>>>) -> Result<Option<Vec<u8>>> {
    match r {
        Err(Error::NoSuchDictionary(_)) => Ok(None),
        r => r,
    }
}

/// An entry read from a dictionary.
type Entry = (Vec<u8>, Vec<u8>);

/// Several members' cursors read as one, in key order (see the module docs). A cursor goes
/// one way: forward with [`PartsCursor::next`], or backward with [`PartsCursor::prev`] after
/// [`PartsCursor::seek_last`].
pub(crate) struct PartsCursor {
    curs: Vec<Cursor>,
    /// Each member's next entry, once the cursor has started.
    heads: Vec<Option<Entry>>,
    /// The direction, once started: forward is `true`.
    dir: Option<bool>,
}

impl std::fmt::Debug for PartsCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartsCursor")
            .field("members", &self.curs.len())
            .field("dir", &self.dir)
            .finish()
    }
}

/// The member's next entry; a member dropped under the cursor has none.
fn pull(c: &mut Cursor, forward: bool) -> Result<Option<Entry>> {
    let r = if forward { c.next() } else { c.prev() };
    match r {
        Err(Error::NoSuchDictionary(_)) => Ok(None),
        r => r,
    }
}

impl PartsCursor {
    /// Position after the last key, to read backward.
    pub(crate) fn seek_last(&mut self) {
        for c in &mut self.curs {
            c.seek_last();
        }
        self.heads.iter_mut().for_each(|h| *h = None);
        self.dir = None;
    }

    /// The next entry in key order.
    #[allow(clippy::should_implement_trait)]
    pub(crate) fn next(&mut self) -> Result<Option<Entry>> {
        self.step(true)
    }

    /// The previous entry in key order.
    pub(crate) fn prev(&mut self) -> Result<Option<Entry>> {
        self.step(false)
    }

    fn step(&mut self, forward: bool) -> Result<Option<Entry>> {
        match self.dir {
            Some(d) if d == forward => {}
            Some(_) => {
                return Err(Error::InvalidArgument(
                    "a cursor over partitions reads in one direction".into(),
                ))
            }
            None => {
                for (c, h) in self.curs.iter_mut().zip(self.heads.iter_mut()) {
                    *h = pull(c, forward)?;
                }
                self.dir = Some(forward);
            }
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some((k, _)) = h else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some((bk, _)) => (k < bk) == forward,
            };
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else {
            return Ok(None);
        };
        let out = self.heads[i].take();
        self.heads[i] = pull(&mut self.curs[i], forward)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ops::RangeBounds;

    use proptest::prelude::*;
    use silt_storage::{Env, EnvOptions};

    use super::*;

    fn env(dir: &std::path::Path) -> Env {
        Env::open(
            dir,
            EnvOptions {
                cache_bytes: 8 << 20,
                node_bytes: 64 << 10,
                basement_bytes: 16 << 10,
                ..EnvOptions::default()
            },
        )
        .unwrap()
    }

    /// Members over `pivots` (sorted, distinct), named `p0`, `p1`, ...
    fn parts(e: &Env, pivots: &[Vec<u8>]) -> Parts {
        let mut members = Vec::new();
        for i in 0..=pivots.len() {
            members.push(Member {
                id: i as u64,
                max: pivots.get(i).cloned(),
                dict: e.create_dict(&format!("p{i}")).unwrap(),
            });
        }
        Parts::new(members).unwrap()
    }

    fn key(n: u16) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    fn bound(b: Option<(u16, bool)>) -> Bound<Vec<u8>> {
        match b {
            None => Bound::Unbounded,
            Some((n, true)) => Bound::Included(key(n)),
            Some((n, false)) => Bound::Excluded(key(n)),
        }
    }

    #[test]
    fn bounds_must_increase() {
        let dir = tempfile::tempdir().unwrap();
        let e = env(dir.path());
        let d = |n: &str| e.create_dict(n).unwrap();
        let m = |id, max: Option<u16>, dict| Member {
            id,
            max: max.map(key),
            dict,
        };
        assert!(Parts::new(vec![]).is_err());
        assert!(
            Parts::new(vec![m(0, Some(5), d("a"))]).is_err(),
            "last bounded"
        );
        assert!(Parts::new(vec![
            m(0, Some(5), d("b")),
            m(1, Some(5), d("c")),
            m(2, None, d("x"))
        ])
        .is_err());
        assert!(Parts::new(vec![m(0, None, d("e")), m(1, None, d("f"))]).is_err());
        let p = Parts::new(vec![
            m(0, Some(5), d("g")),
            m(1, Some(9), d("h")),
            m(2, None, d("i")),
        ])
        .unwrap();
        assert_eq!(p.position_of(&key(0)), 0);
        assert_eq!(p.position_of(&key(5)), 0, "max is inclusive");
        assert_eq!(p.position_of(&key(6)), 1);
        assert_eq!(p.position_of(&key(9)), 1);
        assert_eq!(p.position_of(&key(10)), 2);
        assert_eq!(p.position_of(&[0xff; 8]), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Scans over partitions agree with one sorted map holding the same entries: routed by
        /// key (a primary dictionary, members pruned by the bounds) or spread over every member
        /// (an index), forward and backward.
        #[test]
        fn merged_scans_match_a_model(
            pivots in proptest::collection::btree_set(0u16..1000, 0..5),
            keys in proptest::collection::btree_set(0u16..1000, 0..300),
            spread in proptest::collection::vec(0usize..8, 300),
            lo in proptest::option::of((0u16..1000, any::<bool>())),
            hi in proptest::option::of((0u16..1000, any::<bool>())),
            primary in any::<bool>(),
            reverse in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let e = env(dir.path());
            let pivots: Vec<Vec<u8>> = pivots.into_iter().map(key).collect();
            let p = parts(&e, &pivots);
            let mut model = BTreeMap::new();
            for (i, k) in keys.iter().enumerate() {
                let k = key(*k);
                let v = format!("v{i}").into_bytes();
                let d = if primary {
                    p.member_for(&k)
                } else {
                    &p.members()[spread[i] % p.members().len()].dict
                };
                d.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            let (lo, hi) = (bound(lo), bound(hi));
            let mut c = p.cursor(lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice), None, primary);
            let mut got = Vec::new();
            if reverse {
                c.seek_last();
                while let Some(x) = c.prev().unwrap() {
                    got.push(x);
                }
            } else {
                while let Some(x) = c.next().unwrap() {
                    got.push(x);
                }
            }
            let range = (lo.clone(), hi.clone());
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = model
                .iter()
                .filter(|(k, _)| range.contains(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if reverse {
                want.reverse();
            }
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_member_dropped_under_a_cursor_ends_and_the_others_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let e = env(dir.path());
        let p = parts(&e, &[key(99), key(199)]);
        for n in 0..300u16 {
            p.member_for(&key(n)).put(&key(n), b"x").unwrap();
        }
        let mut c = p.cursor(Bound::Unbounded, Bound::Unbounded, None, true);
        for n in 0..10u16 {
            assert_eq!(c.next().unwrap().unwrap().0, key(n));
        }
        e.drop_dict("p0").unwrap();
        let rest: Vec<Vec<u8>> = std::iter::from_fn(|| c.next().unwrap())
            .map(|(k, _)| k)
            .collect();
        // What the dropped member had already handed to the cursor may still come; then the
        // other members, whole and in order.
        let tail: Vec<Vec<u8>> = (100..300u16).map(key).collect();
        assert!(
            rest.ends_with(&tail),
            "{} entries after the drop",
            rest.len()
        );
        assert!(rest[..rest.len() - tail.len()]
            .iter()
            .all(|k| k.as_slice() < key(100).as_slice()));
        assert!(c.prev().is_err(), "one direction");
    }
}
