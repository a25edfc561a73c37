//! What a child pointer (or a leaf basement) knows of the live keys below it: the value
//! `tree/count.rs` keeps and explains, apart so that the node types can hold it.

use crate::ids::Xid;

/// What a child pointer knows of the keys below it, or a basement of its entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SubCount {
    /// Live keys, counting the messages of known effect.
    pub live: i64,
    /// Messages of unknown effect not yet applied to their leaf.
    pub unsure: u64,
    /// At least the xid of every committed change of existence below (see the module).
    pub max_xid: u64,
}

impl SubCount {
    /// Account for one more message of effect `e` written by `xid` (`prov`: provisional,
    /// which only its own transaction sees, and whose snapshot must not trust the count).
    pub(crate) fn note(&mut self, e: Option<i64>, xid: Xid, prov: bool) {
        match e {
            Some(0) if !prov => return,
            Some(0) => {}
            Some(d) => self.live += d,
            None => self.unsure += 1,
        }
        self.max_xid = self.max_xid.max(xid.0);
    }

    /// Add what `o` counts.
    pub(crate) fn absorb(&mut self, o: SubCount) {
        self.live += o.live;
        self.unsure += o.unsure;
        self.max_xid = self.max_xid.max(o.max_xid);
    }

    /// The count, if it is exact for every snapshot that sees every xid below `bound`
    /// (`Xid(u64::MAX)`: the latest state).
    pub(crate) fn exact_below(&self, bound: Xid) -> Option<u64> {
        (self.unsure == 0 && (bound.0 == u64::MAX || self.max_xid < bound.0))
            .then(|| self.live.max(0) as u64)
    }
}
