//! Index builds and drops: a build scans the primary tree into an external sorter and bulk
//! loads the sorted entries into a fresh dictionary, checking uniqueness on the way, while
//! writes to that collection wait; a [`BuildObserver`] follows it and may stop it.

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bson::{doc, Document};
use silt_storage::Dict;

use crate::index::{self, KeyError};
use crate::{decode_doc, sorter, CollError, Collection, Index, IndexSpec, KeySet, Result, Store};

/// What `create_indexes` did.
#[derive(Debug, Clone, Default)]
pub struct CreateIndexesOutcome {
    pub before: usize,
    pub after: usize,
    pub created_collection: bool,
    /// Specs already present (identical), skipped.
    pub existing: usize,
}

/// Where index builds spill sorted runs, under the data directory.
pub(crate) const SORT_TMP_DIR: &str = "_tmp";
/// Keys between progress lines of an index build.
const BUILD_PROGRESS_EVERY: u64 = 100_000;

/// Documents or keys between an index build's reports to its [`BuildObserver`].
const BUILD_REPORT_EVERY: u64 = 256;

/// Watches an index build (siltd shows it in `currentOp`) and may stop it.
pub trait BuildObserver: Sync {
    /// A phase begins: its description (MongoDB's, like `Index Build: scanning collection`)
    /// and how many units (documents, keys) it has, as far as known.
    fn phase(&self, msg: &str, total: u64);
    /// Units of the current phase done so far.
    fn progress(&self, done: u64);
    /// Whether to stop: the build then fails with [`CollError::Interrupted`] and leaves
    /// nothing behind.
    fn interrupted(&self) -> bool;
}

/// An observer that watches nothing and never interrupts.
pub struct Unobserved;

impl BuildObserver for Unobserved {
    fn phase(&self, _msg: &str, _total: u64) {}
    fn progress(&self, _done: u64) {}
    fn interrupted(&self) -> bool {
        false
    }
}

/// MongoDB's messages for the phases of an index build (`currentOp`'s `msg`).
pub const BUILD_SCANNING: &str = "Index Build: scanning collection";
/// The bulk load of the sorted keys.
pub const BUILD_INSERTING: &str = "Index Build: inserting keys from external sorter into index";

impl Store {
    /// Create indexes on `ns` (creating the collection if needed). Identical existing
    /// indexes are skipped; conflicting ones fail the whole request before anything is
    /// built. Writes to this collection wait during the build; other collections are not
    /// affected. A failed build (a unique violation) leaves no index behind.
    pub fn create_indexes(&self, ns: &str, specs: Vec<IndexSpec>) -> Result<CreateIndexesOutcome> {
        self.create_indexes_observed(ns, specs, &Unobserved)
    }

    /// [`Store::create_indexes`], reporting progress to `obs`, which may also interrupt the
    /// build (then nothing is built, and the half-built dictionaries are dropped).
    pub fn create_indexes_observed(
        &self,
        ns: &str,
        specs: Vec<IndexSpec>,
        obs: &dyn BuildObserver,
    ) -> Result<CreateIndexesOutcome> {
        let created_collection = self.get(ns).is_none();
        let c = self.get_or_create(ns)?;
        let _w = c.build.write();
        let existing = c.indexes.read().clone();
        let before = existing.len() + 1;
        let mut todo: Vec<IndexSpec> = Vec::new();
        let mut skipped = 0;
        for spec in specs {
            let id_only = spec.fields == [("_id".to_string(), false)]
                && !spec.sparse
                && spec.partial.is_none()
                && !spec.clustering;
            if spec.name == "_id_" || id_only {
                if id_only {
                    // The `_id` index always exists (it is the primary tree).
                    skipped += 1;
                    continue;
                }
                return Err(CollError::IndexConflict {
                    code: 86,
                    msg: format!(
                        "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {{ v: 2, key: {{ _id: 1 }}, name: \"_id_\" }}",
                        silt_query::expr::fmt_doc(&spec.to_doc())
                    ),
                });
            }
            if spec.text.is_some() {
                let other = existing
                    .iter()
                    .map(|i| &i.spec)
                    .chain(todo.iter())
                    .find(|h| h.text.is_some() && h.name != spec.name);
                if let Some(h) = other {
                    return Err(CollError::IndexConflict {
                        code: 85,
                        msg: format!(
                            "An equivalent index already exists with a different name and \
                             options. Requested index: {}, existing index: {} (only one text \
                             index per collection allowed)",
                            silt_query::expr::fmt_doc(&spec.to_doc()),
                            silt_query::expr::fmt_doc(&h.to_doc())
                        ),
                    });
                }
            }
            let mut dup = false;
            for have in existing.iter().map(|i| &i.spec).chain(todo.iter()) {
                if have.name == spec.name {
                    if have.same_as(&spec) {
                        dup = true;
                        break;
                    }
                    let code = if have.same_key(&spec) { 85 } else { 86 };
                    return Err(CollError::IndexConflict {
                        code,
                        msg: format!(
                            "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                            silt_query::expr::fmt_doc(&spec.to_doc()),
                            silt_query::expr::fmt_doc(&have.to_doc())
                        ),
                    });
                }
                if have.same_key(&spec)
                    && have.partial.as_ref().map(|p| &p.0) == spec.partial.as_ref().map(|p| &p.0)
                    && silt_query::collation::same(have.collation.as_ref(), spec.collation.as_ref())
                {
                    if have.same_as(&spec) {
                        // Same index under another name.
                        return Err(CollError::IndexConflict {
                            code: 85,
                            msg: format!(
                                "Index already exists with a different name: {}",
                                have.name
                            ),
                        });
                    }
                    return Err(CollError::IndexConflict {
                        code: 85,
                        msg: format!(
                            "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                            silt_query::expr::fmt_doc(&spec.to_doc()),
                            silt_query::expr::fmt_doc(&have.to_doc())
                        ),
                    });
                }
            }
            if dup {
                skipped += 1;
            } else {
                todo.push(spec);
            }
        }
        if c.is_partitioned() {
            if let Some(s) = todo.iter().find(|s| s.unique) {
                return Err(CollError::Partition {
                    code: 17351,
                    msg: format!(
                        "cannot add a unique index to a partitioned collection (index {}): uniqueness would need a read in every partition",
                        s.name
                    ),
                });
            }
        }
        // One dictionary per partition, each built from its partition's documents.
        let layout = c.layout();
        let mut built: Vec<Arc<Index>> = Vec::new();
        let mut made: Vec<String> = Vec::new();
        let drop_made = |made: &[String]| {
            for n in made {
                let _ = self.env.drop_dict(n);
            }
        };
        for spec in todo {
            let mut members = Vec::new();
            let mut multikey = false;
            for m in layout.primary.members() {
                let name = format!("idx-{}", self.next_dict.fetch_add(1, Ordering::Relaxed));
                let r = self
                    .env
                    .create_counted_dict(&name)
                    .map_err(CollError::from)
                    .and_then(|dict| {
                        made.push(name.clone());
                        let mk = c.build_index(
                            &spec,
                            &m.dict,
                            &dict,
                            &self.env.dir().join(SORT_TMP_DIR),
                            self.build_memory,
                            obs,
                        )?;
                        Ok((dict, mk))
                    });
                match r {
                    Ok((dict, mk)) => {
                        multikey |= mk;
                        members.push(crate::parts::Member {
                            id: m.id,
                            max: m.max.clone(),
                            dict,
                        });
                    }
                    Err(e) => {
                        drop_made(&made);
                        return Err(e);
                    }
                }
            }
            let parts = crate::parts::Parts::new(members)?;
            built.push(Arc::new(Index::new(spec, parts, multikey, true)));
        }
        let after = before + built.len();
        if !built.is_empty() {
            let _g = self.ddl.lock();
            let still = self.get(ns).is_some_and(|x| Arc::ptr_eq(&x, &c));
            if !still || !c.live.load(Ordering::Acquire) {
                drop_made(&made);
                return Err(CollError::NamespaceNotFound(ns.to_string()));
            }
            let ops: Vec<crate::oplog::Op> = built
                .iter()
                .map(|ix| c.ddl_op("createIndexes", ix.spec.to_doc()))
                .collect();
            c.indexes.write().extend(built);
            c.persist_meta_logged(&ops)?;
        }
        Ok(CreateIndexesOutcome {
            before,
            after,
            created_collection,
            existing: skipped,
        })
    }

    /// Drop the named indexes of `ns` (all must exist; `_id_` is refused by the caller).
    /// Returns how many indexes there were (with `_id_`).
    /// Change the options of index `name` of `ns` that `collMod` may change (`hidden`,
    /// `expireAfterSeconds`): `change` edits a copy of its spec, which replaces the old one
    /// (same dictionaries, same multikey flag) and is persisted. Returns the old and new spec.
    pub fn modify_index(
        &self,
        ns: &str,
        name: &str,
        change: impl FnOnce(&mut IndexSpec) -> std::result::Result<(), String>,
    ) -> Result<(IndexSpec, IndexSpec)> {
        let c = self
            .get(ns)
            .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string()))?;
        let _w = c.build.write();
        let _g = self.ddl.lock();
        let mut list = c.indexes.write();
        let Some(pos) = list.iter().position(|i| i.name() == name) else {
            return Err(CollError::IndexNotFound(format!(
                "cannot find index {name} for ns {ns}"
            )));
        };
        let old = list[pos].clone();
        let mut spec = old.spec.clone();
        change(&mut spec).map_err(|m| CollError::Partition { code: 2, msg: m })?;
        let new = Arc::new(Index::new(
            spec.clone(),
            (*old.parts()).clone(),
            old.is_multikey(),
            old.coverable,
        ));
        list[pos] = new;
        drop(list);
        let changed = spec.to_doc();
        c.persist_meta_logged(&[c.ddl_op("collMod", doc! { "index": changed })])?;
        Ok((old.spec.clone(), spec))
    }

    /// Replace the options of collection `ns` (`collMod`), persisted in its catalog entry.
    pub fn set_options(&self, ns: &str, options: Document) -> Result<()> {
        let c = self
            .get(ns)
            .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string()))?;
        let _g = self.ddl.lock();
        *c.validator.write() = crate::collection::compile_validator(ns, &options);
        *c.options.write() = options.clone();
        c.persist_meta_logged(&[c.ddl_op("collMod", options)])
    }

    pub fn drop_indexes(&self, ns: &str, names: &[String]) -> Result<usize> {
        let c = self
            .get(ns)
            .ok_or_else(|| CollError::NamespaceNotFound(ns.to_string()))?;
        let _w = c.build.write();
        let was = c.indexes.read().len() + 1;
        for n in names {
            if !c.indexes.read().iter().any(|i| i.name() == n) {
                return Err(CollError::IndexNotFound(format!(
                    "index not found with name [{n}]"
                )));
            }
        }
        let _g = self.ddl.lock();
        let gone: Vec<Arc<Index>> = {
            let mut list = c.indexes.write();
            let (gone, keep): (Vec<_>, Vec<_>) = list
                .drain(..)
                .partition(|i| names.iter().any(|n| n == i.name()));
            *list = keep;
            gone
        };
        let ops: Vec<crate::oplog::Op> = gone
            .iter()
            .map(|ix| {
                let mut op = c.ddl_op("dropIndexes", doc! { "index": ix.name() });
                op.0.insert("o2", ix.spec.to_doc());
                op
            })
            .collect();
        c.persist_meta_logged(&ops)?;
        for ix in gone {
            for d in ix.parts().dicts() {
                self.env.drop_dict(&d.name())?;
            }
        }
        Ok(was)
    }
}

impl Collection {
    /// Build `spec` into the empty `dict` from the documents of `primary` (the collection's
    /// primary dictionary, or one partition's; the caller holds `build` exclusively):
    /// generate every entry into an external sorter (spilling past `memory` bytes to run
    /// files under `tmp`), then stream the sorted entries into the bulk loader, checking
    /// uniqueness on the way. Returns whether the index is multikey.
    fn build_index(
        &self,
        spec: &IndexSpec,
        primary: &Dict,
        dict: &Dict,
        tmp: &Path,
        memory: usize,
        obs: &dyn BuildObserver,
    ) -> Result<bool> {
        let started = std::time::Instant::now();
        tracing::info!(ns = %self.ns, index = %spec.name, "index build: scanning collection");
        let interrupted = || {
            tracing::info!(ns = %self.ns, index = %spec.name, "index build interrupted");
            CollError::Interrupted
        };
        let io = |e: std::io::Error| {
            CollError::Storage(silt_storage::Error::Io {
                path: tmp.to_path_buf(),
                source: e,
            })
        };
        obs.phase(BUILD_SCANNING, self.estimated_count());
        let mut sorter = sorter::Sorter::new(tmp, memory).map_err(io)?;
        let mut multikey = false;
        let mut cur = primary.cursor(Bound::Unbounded, Bound::Unbounded);
        let mut docs = 0u64;
        let mut next_log = BUILD_PROGRESS_EVERY;
        while let Some((k, v)) = cur.next()? {
            let d = decode_doc(&self.ns, &v)?;
            let (keys, mk) = self.keys_of_spec(spec, &d)?;
            multikey |= mk;
            let val = if spec.clustering {
                v.clone()
            } else {
                spec.shape(&d)
            };
            for (p, _) in keys {
                let mut e = p;
                e.extend_from_slice(&k);
                sorter.push(e, val.clone()).map_err(io)?;
            }
            docs += 1;
            if docs.is_multiple_of(BUILD_REPORT_EVERY) {
                obs.progress(docs);
                if obs.interrupted() {
                    return Err(interrupted());
                }
            }
            if sorter.len() >= next_log {
                tracing::info!(ns = %self.ns, index = %spec.name, docs, keys = sorter.len(), runs = sorter.spilled_runs(), "index build: collecting keys");
                next_log += BUILD_PROGRESS_EVERY;
            }
        }
        obs.progress(docs);
        if obs.interrupted() {
            return Err(interrupted());
        }
        let n = sorter.len();
        tracing::info!(ns = %self.ns, index = %spec.name, docs, keys = n, runs = sorter.spilled_runs(), "index build: sorting");
        let merged = sorter.finish().map_err(io)?;
        obs.phase(BUILD_INSERTING, n);
        // The bulk loader pulls from a plain iterator: a read error, a duplicate or an
        // interruption ends the input early, and is reported once the loader returns (the
        // caller drops the half-built dictionary).
        let mut failure: Option<CollError> = None;
        let desc = spec.directions();
        let mut prev: Option<Vec<u8>> = None;
        let mut loaded = 0u64;
        let mut next_log = BUILD_PROGRESS_EVERY;
        let entries = merged.map_while(|r| {
            let (k, v) = match r {
                Ok(e) => e,
                Err(e) => {
                    failure = Some(io(e));
                    return None;
                }
            };
            if spec.unique {
                if let Some(lk) = index::prefix_len(&k, &desc) {
                    if prev.as_deref() == Some(&k[..lk]) {
                        let vals =
                            silt_bson::keyenc::decode_key(&k[..lk], &desc).unwrap_or_default();
                        failure = Some(CollError::DuplicateKey {
                            ns: self.ns.clone(),
                            index: spec.name.clone(),
                            key_pattern: Box::new(spec.key_pattern.clone()),
                            key_value: Box::new(spec.key_value_doc(&vals)),
                        });
                        return None;
                    }
                    prev = Some(k[..lk].to_vec());
                }
            }
            loaded += 1;
            if loaded.is_multiple_of(BUILD_REPORT_EVERY) {
                obs.progress(loaded);
                if obs.interrupted() {
                    failure = Some(interrupted());
                    return None;
                }
            }
            if loaded >= next_log {
                tracing::info!(ns = %self.ns, index = %spec.name, keys = loaded, of = n, "index build: inserting keys from the external sorter");
                next_log += BUILD_PROGRESS_EVERY;
            }
            Some((k, v))
        });
        let res = dict.bulk_load(entries);
        if let Some(e) = failure {
            if matches!(e, CollError::DuplicateKey { .. }) {
                tracing::info!(ns = %self.ns, index = %spec.name, "index build failed: duplicate key");
            }
            return Err(e);
        }
        res?;
        if obs.interrupted() {
            return Err(interrupted());
        }
        obs.progress(n);
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(ns = %self.ns, index = %spec.name, docs, keys = n, ms, "index build: done");
        Ok(multikey)
    }

    fn keys_of_spec(&self, spec: &IndexSpec, d: &Document) -> Result<(KeySet, bool)> {
        match spec.keys(d) {
            Ok(k) => Ok((k.keys, k.multikey)),
            Err(KeyError::ParallelArrays(a, b)) => Err(CollError::ParallelArrays(a, b)),
            Err(KeyError::Text(code, msg)) => Err(CollError::BadDocument { code, msg }),
        }
    }
}
