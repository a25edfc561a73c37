//! `explain`'s `winningPlan`: a choice described with MongoDB's stage names.

use std::ops::Bound;

use bson::{doc, Bson, Document};

use super::{Access, Choice, IndexInfo, IndexScan, Plan, SortSpec};

/// The `IXSCAN` stage of one index scan.
fn ixscan(scan: &IndexScan, ix: &IndexInfo<'_>) -> Document {
    doc! {
        "stage": "IXSCAN",
        "keyPattern": ix.key_pattern.clone(),
        "indexName": ix.name,
        "isMultiKey": ix.multikey,
        "isUnique": ix.unique,
        "isSparse": ix.sparse,
        "isPartial": ix.partial.is_some(),
        "isClustering": ix.clustering,
        "indexVersion": 2,
        "direction": if scan.reverse { "backward" } else { "forward" },
        "indexBounds": scan.bounds_doc(ix),
    }
}

/// The `winningPlan` of explain for a choice over `indexes` (the slice it was chosen from),
/// with MongoDB's stage names. A covered plan is `PROJECTION_COVERED` over the `IXSCAN`
/// (carrying the filter when the bounds do not answer it), with no `FETCH`. A scan of a
/// clustering index, whose entries hold the documents, is `CLUSTERED_IXSCAN` (as MongoDB names
/// a scan of a clustered collection), with no `FETCH` either. Other projections are
/// `PROJECTION_SIMPLE` (top-level fields only) or `PROJECTION_DEFAULT` on top.
pub fn explain_plan(
    choice: &Choice,
    indexes: &[IndexInfo<'_>],
    filter: &Document,
    sort: Option<&SortSpec>,
    projection: Option<&Document>,
) -> Document {
    let explain = |s: &IndexScan| ixscan(s, &indexes[s.index]);
    let stage = match &choice.plan {
        Plan::Primary(Access::Points(_)) => doc! { "stage": "IDHACK" },
        Plan::Primary(Access::IdRange(lo, hi)) => {
            let f = |b: &Bound<Bson>, l: bool| match b {
                Bound::Included(v) => format!("{}{v}", if l { "[" } else { "" }),
                Bound::Excluded(v) => format!("{}{v}", if l { "(" } else { "" }),
                Bound::Unbounded => {
                    if l {
                        "[MinKey".into()
                    } else {
                        "MaxKey".into()
                    }
                }
            };
            let close = match hi {
                Bound::Excluded(_) => ")",
                _ => "]",
            };
            doc! {
                "stage": "CLUSTERED_IXSCAN",
                "filter": filter.clone(),
                "direction": "forward",
                "indexName": "_id_",
                "keyPattern": { "_id": 1 },
                "indexBounds": { "_id": [format!("{}, {}{close}", f(lo, true), f(hi, false))] },
            }
        }
        Plan::Primary(Access::FullScan) => doc! {
            "stage": "COLLSCAN",
            "filter": filter.clone(),
            "direction": "forward",
        },
        Plan::Index(scans) => match scans.as_slice() {
            [scan] if choice.covered.is_some() => {
                let mut ix = explain(scan);
                if choice.covered.is_some_and(|c| !c.exact) {
                    ix.insert("filter", filter.clone());
                }
                ix
            }
            [scan] if indexes[scan.index].clustering => {
                let mut ix = explain(scan);
                ix.insert("stage", "CLUSTERED_IXSCAN");
                ix.insert("filter", filter.clone());
                ix
            }
            [scan] => {
                doc! { "stage": "FETCH", "filter": filter.clone(), "inputStage": explain(scan) }
            }
            _ => doc! {
                "stage": "FETCH",
                "filter": filter.clone(),
                "inputStage": {
                    "stage": "OR",
                    "inputStages": scans.iter().map(|s| Bson::Document(explain(s))).collect::<Vec<_>>(),
                },
            },
        },
    };
    let stage = match sort {
        Some(so) if !choice.sorted => {
            let mut pat = Document::new();
            for (p, asc) in &so.0 {
                pat.insert(p.clone(), if *asc { 1 } else { -1 });
            }
            doc! { "stage": "SORT", "sortPattern": pat, "inputStage": stage }
        }
        _ => stage,
    };
    let Some(p) = projection else {
        return stage;
    };
    let name = if choice.covered.is_some() {
        "PROJECTION_COVERED"
    } else if p
        .iter()
        .all(|(k, v)| !k.contains('.') && !matches!(v, Bson::Document(_)))
    {
        "PROJECTION_SIMPLE"
    } else {
        "PROJECTION_DEFAULT"
    };
    doc! { "stage": name, "transformBy": p.clone(), "inputStage": stage }
}
