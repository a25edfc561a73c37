//! Views: read-only collections defined by a source (`viewOn`) and an aggregation pipeline.
//!
//! As in MongoDB, a database's views are the documents of its `system.views` collection,
//! `{_id: "<db>.<view>", viewOn: "<coll>", pipeline: [...], collation?}`, written through the normal
//! write path (so they are as durable as any document). The server keeps them in memory too
//! ([`Views`], loaded at start), so that every command can tell a view from a collection
//! without a read. Reads of a view (`find`, `aggregate`, `count`, `distinct`) run as an
//! aggregation over the source with the view's pipeline first; writes and index builds are
//! refused with CommandNotSupportedOnView (166).

use std::collections::HashMap;

use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use silt_collection::Store;
use silt_query::{QResult, QueryError};

/// The name of the collection holding a database's views.
pub(crate) const SYSTEM_VIEWS: &str = "system.views";

/// How deep views may be defined on views (MongoDB's limit).
const MAX_DEPTH: usize = 20;

/// One view's definition.
#[derive(Clone, Debug)]
pub(crate) struct View {
    /// The collection or view it reads, in the same database.
    pub view_on: String,
    pub pipeline: Vec<Document>,
    /// The view's default collation (resolved), `None` for the simple one. A read of the view
    /// runs under it and may not name another.
    pub collation: Option<Document>,
}

impl View {
    /// The `system.views` document of view `ns`.
    pub(crate) fn to_doc(&self, ns: &str) -> Document {
        let mut d = doc! {
            "_id": ns,
            "viewOn": &self.view_on,
            "pipeline": self.pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
        };
        if let Some(c) = &self.collation {
            d.insert("collation", c.clone());
        }
        d
    }

    fn from_doc(d: &Document) -> Option<(String, View)> {
        let ns = d.get_str("_id").ok()?.to_string();
        let view_on = d.get_str("viewOn").ok()?.to_string();
        let pipeline = d
            .get_array("pipeline")
            .ok()?
            .iter()
            .filter_map(|s| s.as_document().cloned())
            .collect();
        let collation = d.get_document("collation").ok().cloned();
        Some((
            ns,
            View {
                view_on,
                pipeline,
                collation,
            },
        ))
    }
}

/// Every view of the server, by namespace.
#[derive(Debug, Default)]
pub(crate) struct Views {
    map: RwLock<HashMap<String, View>>,
}

/// The error of a write to a view.
pub(crate) fn not_a_collection(ns: &str) -> QueryError {
    QueryError::coded(
        166,
        "CommandNotSupportedOnView",
        format!("Namespace {ns} is a view, not a collection"),
    )
}

impl Views {
    /// Read every database's `system.views`.
    pub(crate) fn load(store: &Store) -> Views {
        let mut map = HashMap::new();
        for db in store.list_databases() {
            let Some(c) = store.get(&format!("{db}.{SYSTEM_VIEWS}")) else {
                continue;
            };
            let mut cur = c.scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded);
            loop {
                match cur.next_doc() {
                    Ok(Some((_, d))) => {
                        if let Some((ns, v)) = View::from_doc(&d) {
                            map.insert(ns, v);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(db, error = %e, "cannot read system.views");
                        break;
                    }
                }
            }
        }
        Views {
            map: RwLock::new(map),
        }
    }

    /// The view `ns`, if it is one.
    pub(crate) fn get(&self, ns: &str) -> Option<View> {
        let map = self.map.read();
        if map.is_empty() {
            return None;
        }
        map.get(ns).cloned()
    }

    pub(crate) fn is_view(&self, ns: &str) -> bool {
        let map = self.map.read();
        !map.is_empty() && map.contains_key(ns)
    }

    /// Refuse a write or an index build on `ns` when it is a view.
    pub(crate) fn refuse_write(&self, ns: &str) -> QResult<()> {
        if self.is_view(ns) {
            return Err(not_a_collection(ns));
        }
        Ok(())
    }

    /// The views of database `db`: (name, definition).
    pub(crate) fn of_db(&self, db: &str) -> Vec<(String, View)> {
        let prefix = format!("{db}.");
        let mut v: Vec<(String, View)> = self
            .map
            .read()
            .iter()
            .filter_map(|(ns, v)| ns.strip_prefix(&prefix).map(|n| (n.to_string(), v.clone())))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The collection a read of `db.coll` really reads and the pipeline to run over it first
    /// (views on views are followed). `None` when `coll` is not a view.
    pub(crate) fn resolve(&self, db: &str, coll: &str) -> QResult<Option<(String, Vec<Document>)>> {
        let Some(first) = self.get(&format!("{db}.{coll}")) else {
            return Ok(None);
        };
        let mut source = first.view_on.clone();
        let mut stages = first.pipeline.clone();
        let mut depth = 1;
        while let Some(v) = self.get(&format!("{db}.{source}")) {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(QueryError::coded(
                    165,
                    "ViewDepthLimitExceeded",
                    format!(
                        "View depth too deep or view cycle detected; maximum depth is {MAX_DEPTH}"
                    ),
                ));
            }
            let mut all = v.pipeline.clone();
            all.extend(stages);
            stages = all;
            source = v.view_on.clone();
        }
        Ok(Some((source, stages)))
    }

    /// Record view `ns` (already written to `system.views`).
    pub(crate) fn put(&self, ns: &str, v: View) {
        self.map.write().insert(ns.to_string(), v);
    }

    /// Forget view `ns`.
    pub(crate) fn remove(&self, ns: &str) {
        self.map.write().remove(ns);
    }

    /// Forget every view of database `db`.
    pub(crate) fn remove_db(&self, db: &str) {
        let prefix = format!("{db}.");
        self.map.write().retain(|ns, _| !ns.starts_with(&prefix));
    }

    /// Whether defining `ns` on `view_on` would make a cycle.
    pub(crate) fn would_cycle(&self, db: &str, ns: &str, view_on: &str) -> bool {
        let mut cur = format!("{db}.{view_on}");
        for _ in 0..=MAX_DEPTH {
            if cur == ns {
                return true;
            }
            match self.get(&cur) {
                Some(v) => cur = format!("{db}.{}", v.view_on),
                None => return false,
            }
        }
        true
    }
}
