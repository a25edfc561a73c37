//! Planning over a collection: `silt_query::plan` chooses among the collection's indexes as
//! they are now, and the choice stays bound to those indexes ([`Planned`]) while it is read
//! (`read.rs`). Also the two answers that need no document: fast counts and the exact scans
//! of fast updates by index.

use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document};
use silt_query::matcher::{MatchExpr, Matcher};
use silt_query::plan::{self, Access, Choice, IndexInfo, IndexScan, Plan, SortSpec};
use silt_query::{QResult, QueryError};

use crate::keyrange::KeyScan;

/// A count answered inside the storage layer ([`Collection::fast_count`]).
#[derive(Debug, Clone, Default)]
pub struct FastCount {
    /// The documents counted.
    pub n: u64,
    /// The index whose entries were counted (`None`: the primary tree).
    pub index: Option<Arc<Index>>,
    /// Key ranges counted.
    pub ranges: usize,
    /// Nodes read and ranges scanned (`silt_storage::Dict::count_range_explained`).
    pub stats: silt_storage::CountStats,
}
use crate::{Collection, Index, Result, Snapshot};

/// A choice of the planner and the indexes its scans name (by position).
#[derive(Debug, Clone)]
pub struct Planned {
    pub choice: Choice,
    indexes: Vec<Arc<Index>>,
}

impl Planned {
    /// A full scan, over no index (what explain shows for a collection that does not exist).
    pub fn full_scan() -> Planned {
        Planned {
            choice: Choice::full_scan(),
            indexes: Vec::new(),
        }
    }

    /// Whether the plan yields the requested sort order.
    pub fn sorted(&self) -> bool {
        self.choice.sorted
    }

    /// `explain`'s `winningPlan` (`silt_query::plan::explain_plan`).
    pub fn explain(
        &self,
        filter: &Document,
        sort: Option<&SortSpec>,
        projection: Option<&Document>,
    ) -> Document {
        let infos: Vec<IndexInfo<'_>> = self.indexes.iter().map(|i| i.info()).collect();
        plan::explain_plan(&self.choice, &infos, filter, sort, projection)
    }

    /// The index scans of the plan, in key space (none for a plan of the primary tree).
    pub(crate) fn key_scans(&self) -> Vec<KeyScan> {
        match &self.choice.plan {
            Plan::Index(scans) => scans
                .iter()
                .map(|s| KeyScan::new(self.indexes[s.index].clone(), s))
                .collect(),
            Plan::Primary(_) => Vec::new(),
        }
    }
}

impl Collection {
    /// The indexes the planner may use: all but hidden ones.
    fn visible_indexes(&self) -> Vec<Arc<crate::Index>> {
        let mut v = self.indexes();
        // A text index answers `$text` only (`Collection::plan_text`).
        v.retain(|i| !i.spec.hidden && i.spec.text.is_none());
        v
    }

    /// The plan of a `$text` query: the text index's entries for the searched terms, the
    /// query bound to that index so that the matcher can test (phrases, negations) and
    /// score each document. 27 IndexNotFound without a (visible) text index.
    fn plan_text(&self, text: &silt_query::text::TextQuery) -> QResult<Planned> {
        let Some(ix) = self
            .indexes()
            .into_iter()
            .find(|i| i.spec.text.is_some() && !i.spec.hidden)
        else {
            return Err(QueryError::index_not_found(
                "text index required for $text query",
            ));
        };
        let spec = ix.spec.text.clone().expect("a text index");
        let bound = text.bind(spec);
        let terms: Vec<Bson> = bound.terms.iter().cloned().map(Bson::String).collect();
        ix.accesses.record();
        Ok(Planned {
            choice: Choice {
                plan: Plan::Index(vec![IndexScan {
                    index: 0,
                    points: vec![terms],
                    range: None,
                    reverse: false,
                }]),
                sorted: false,
                covered: None,
            },
            indexes: vec![ix],
        })
    }

    /// Choose how to read this collection for a query (`silt_query::plan::choose` over its
    /// indexes as they are now), and count the choice in the indexes' access statistics.
    pub fn plan(
        &self,
        filter: &Document,
        matcher: &Matcher,
        sort: Option<&SortSpec>,
        hint: Option<&Bson>,
        needs: Option<&[String]>,
    ) -> QResult<Planned> {
        if let Some(t) = matcher.text() {
            return self.plan_text(t);
        }
        let indexes = self.visible_indexes();
        let infos: Vec<IndexInfo<'_>> = indexes.iter().map(|i| i.info()).collect();
        let choice =
            plan::choose_over(&infos, self.pk.is_id(), filter, matcher, sort, hint, needs)?;
        drop(infos);
        match &choice.plan {
            Plan::Primary(Access::FullScan) => {}
            Plan::Primary(_) => self.id_accesses().record(),
            Plan::Index(scans) => scans
                .iter()
                .for_each(|s| indexes[s.index].accesses.record()),
        }
        Ok(Planned { choice, indexes })
    }

    /// A scan of one complete (non-multikey, non-sparse, non-partial) index whose entries in
    /// its ranges are exactly the documents matching `matcher`, if there is one
    /// (`silt_query::plan::exact_scan`); counted in the index's access statistics.
    pub fn exact_scan(&self, matcher: &Matcher) -> Option<KeyScan> {
        let indexes = self.visible_indexes();
        let infos: Vec<IndexInfo<'_>> = indexes.iter().map(|i| i.info()).collect();
        let scan = plan::exact_scan(&infos, matcher)?;
        let ix = indexes[scan.index].clone();
        ix.accesses.record();
        Some(KeyScan::new(ix, &scan))
    }

    /// Count the documents matching `matcher` that `snap` sees (the latest state without
    /// one) inside the storage layer, without reading or decoding a document, when the
    /// filter is fully answered by one index's bounds (no matcher needed): an empty filter
    /// counts the primary tree from its subtree counts (or, in a tree of an older format that
    /// keeps none, the smallest complete tree); otherwise a non-multikey, non-sparse,
    /// non-partial index whose bounds consume every predicate. `None` when no such plan
    /// exists (the caller then counts by reading).
    pub fn fast_count(
        &self,
        matcher: &Matcher,
        snap: Option<&Snapshot>,
    ) -> Result<Option<FastCount>> {
        let mut leaves = Vec::new();
        plan::conjuncts(matcher.expr(), &mut leaves);
        let complete =
            |ix: &Arc<Index>| !ix.is_multikey() && !ix.spec.sparse && ix.spec.partial.is_none();
        let mut out = FastCount::default();
        let snap = snap.map(Snapshot::engine);
        if leaves.is_empty() || matches!(leaves.as_slice(), [MatchExpr::AlwaysTrue]) {
            // Every document has one entry in the primary tree and in each complete index:
            // count a tree whose subtree counts answer alone (no message of unknown effect
            // waits in it: the primary tree first), else the smallest.
            let layout = self.layout();
            let answers = |s: &silt_storage::DictStats| s.counted && s.unsure == 0;
            let mut best: (u64, Option<Arc<Index>>) = (self.stats().storage_size, None);
            if !answers(&layout.primary.stats()) {
                let ixs: Vec<_> = self.indexes().into_iter().filter(complete).collect();
                match ixs.iter().find(|ix| answers(&ix.parts().stats())) {
                    Some(ix) => best.1 = Some(ix.clone()),
                    None => {
                        for ix in ixs {
                            let size = ix.parts().stats().file_bytes;
                            if size < best.0 {
                                best = (size, Some(ix));
                            }
                        }
                    }
                }
            }
            let (all, stats) = (Bound::Unbounded, &mut out.stats);
            out.n = match &best.1 {
                Some(ix) => ix.parts().count_range_at(all, all, false, snap, stats),
                None => layout.primary.count_range_at(all, all, true, snap, stats),
            }?;
            out.index = best.1;
            out.ranges = 1;
            return Ok(Some(out));
        }
        match self.exact_scan(matcher) {
            Some(scan) => {
                out.n = scan.count(snap, &mut out.stats)?;
                out.index = Some(scan.index().clone());
                out.ranges = scan.range_count();
                Ok(Some(out))
            }
            None => Ok(None),
        }
    }
}
