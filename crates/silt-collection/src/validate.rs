//! Online validation of one collection (the `validate` command): that every stored document
//! decodes, that each index holds exactly the entries its documents need (no entry missing,
//! none extra, each with the value it must carry), that keys are in order, and, with `full`,
//! that every tree's checkpointed file verifies (checksums and structure). Damage is
//! reported, never turned into a failure of the command.
//!
//! Writers to the collection wait meanwhile (the `build` lock is held exclusively, as by an
//! index build), so the documents and the entries are compared as of one moment. Each index
//! is checked by sorting the entries the documents need with the external sorter and merging
//! them with a scan of the index, so memory stays within the sort budget whatever the size.

use std::ops::Bound;
use std::path::Path;

use crate::parts::Parts;
use crate::{decode_doc, sorter, CollError, Collection, Index, Result};

/// That the subtree counts of a tree (`silt_storage::Dict::count_range`) agree with the
/// `found` entries a scan saw, and whether a writer broke the counting promise.
fn check_counts(name: &str, parts: &Parts, found: u64, r: &mut ValidateReport) -> Result<()> {
    let counted = parts.count_range(Bound::Unbounded, Bound::Unbounded, false)?;
    if counted != found {
        r.error(format!(
            "index {name}: its subtree counts say {counted} entries, but it holds {found}"
        ));
    }
    let repairs = parts.stats().count_repairs;
    if repairs > 0 {
        r.warnings.push(format!(
            "index {name}: {repairs} writes since the start did not do what they told the \
             subtree counts; the counts were repaired when they reached the leaves"
        ));
    }
    Ok(())
}

/// How many examples of each kind of damage are listed.
const EXAMPLES: usize = 10;

/// What `validate` found.
#[derive(Debug, Default)]
pub struct ValidateReport {
    /// Documents in the primary tree.
    pub nrecords: u64,
    /// Stored values that are not valid BSON documents.
    pub corrupt_records: u64,
    /// Entries found in each index, `_id_` first (the primary tree).
    pub keys_per_index: Vec<(String, u64)>,
    /// Indexes found damaged.
    pub invalid_indexes: Vec<String>,
    /// Entries a document needs that its index lacks.
    pub missing_index_entries: u64,
    /// Entries an index holds that no document needs.
    pub extra_index_entries: u64,
    /// Damage, described.
    pub errors: Vec<String>,
    /// Things that need no repair.
    pub warnings: Vec<String>,
}

impl ValidateReport {
    /// Whether nothing is damaged.
    pub fn valid(&self) -> bool {
        self.errors.is_empty()
    }

    fn error(&mut self, msg: String) {
        if self.errors.len() < 100 {
            self.errors.push(msg);
        }
    }
}

impl Collection {
    /// Validate this collection (see the module docs); `full` also verifies the files.
    pub fn validate(&self, full: bool, tmp: &Path, memory: usize) -> Result<ValidateReport> {
        let _b = self.build.write();
        let mut r = ValidateReport::default();
        let indexes = self.indexes.read().clone();
        let mut sorters = Vec::with_capacity(indexes.len());
        let io = |e: std::io::Error| {
            CollError::Storage(silt_storage::Error::Io {
                path: tmp.to_path_buf(),
                source: e,
            })
        };
        let per_index = (memory / (indexes.len() + 1)).max(1 << 20);
        for _ in &indexes {
            sorters.push(sorter::Sorter::new(tmp, per_index).map_err(io)?);
        }
        let layout = self.layout();
        let primary = &layout.primary;
        let mut cur = primary.cursor(Bound::Unbounded, Bound::Unbounded, None, true);
        let mut prev: Option<Vec<u8>> = None;
        while let Some((k, v)) = cur.next()? {
            if prev.as_deref().is_some_and(|p| p >= k.as_slice()) {
                r.error(format!("{}: _id_ keys out of order", self.ns));
            }
            r.nrecords += 1;
            let d = match decode_doc(&self.ns, &v) {
                Ok(d) => d,
                Err(e) => {
                    r.corrupt_records += 1;
                    r.error(e.to_string());
                    prev = Some(k);
                    continue;
                }
            };
            for (ix, s) in indexes.iter().zip(sorters.iter_mut()) {
                let keys = match ix.spec.keys(&d) {
                    Ok(k) => k.keys,
                    Err(e) => {
                        r.error(format!(
                            "index {}: document cannot be indexed: {e:?}",
                            ix.name()
                        ));
                        continue;
                    }
                };
                let val = if ix.spec.clustering {
                    v.clone()
                } else if ix.is_coverable() {
                    ix.spec.shape(&d)
                } else {
                    Vec::new()
                };
                for (p, _) in keys {
                    let mut e = p;
                    e.extend_from_slice(&k);
                    s.push(e, val.clone()).map_err(io)?;
                }
            }
            prev = Some(k);
        }
        r.keys_per_index
            .push((self.primary_index_name().into(), r.nrecords));
        let rows = primary.stats().rows;
        if self.count_is_exact() && rows != r.nrecords {
            r.warnings.push(format!(
                "the maintained document count is {rows}, but the collection holds {} documents",
                r.nrecords
            ));
        }
        if layout.partitions.is_some() {
            check_routing(
                self.primary_index_name(),
                primary,
                primary,
                |_| Some(0),
                &mut r,
            )?;
            for ix in &indexes {
                let pk_at = |k: &[u8]| ix.entry_id_key(k).map(|id| k.len() - id.len());
                check_routing(ix.name(), primary, &ix.parts(), pk_at, &mut r)?;
            }
        }
        for (ix, s) in indexes.iter().zip(sorters) {
            let expected = s.finish().map_err(io)?;
            self.compare_index(ix, expected, &mut r)?;
        }
        check_counts(self.primary_index_name(), primary, r.nrecords, &mut r)?;
        for ix in &indexes {
            let found = r
                .keys_per_index
                .iter()
                .find(|(n, _)| n == ix.name())
                .map(|(_, k)| *k);
            if let Some(found) = found {
                check_counts(ix.name(), &ix.parts(), found, &mut r)?;
            }
        }
        if full {
            self.verify_files(&indexes, &mut r);
        }
        Ok(r)
    }

    /// [`Collection::validate`], with damage met while reading (a checksum that does not
    /// match, naming the file and block) reported rather than returned: the scan stops
    /// there, and `full` still verifies every file.
    pub fn validate_reporting(
        &self,
        full: bool,
        tmp: &Path,
        memory: usize,
    ) -> Result<ValidateReport> {
        match self.validate(full, tmp, memory) {
            Err(CollError::Storage(e @ silt_storage::Error::Corruption { .. })) => {
                let mut r = ValidateReport::default();
                r.error(format!("{}: {e}", self.ns));
                if full {
                    let indexes = self.indexes.read().clone();
                    self.verify_files(&indexes, &mut r);
                }
                Ok(r)
            }
            other => other,
        }
    }

    /// Verify every checksum of the collection's files into `r`.
    fn verify_files(
        &self,
        indexes: &[std::sync::Arc<crate::index::Index>],
        r: &mut ValidateReport,
    ) {
        let layout = self.layout();
        let primary = &layout.primary;
        {
            let mut files: Vec<_> = primary
                .dicts()
                .map(|d| (self.primary_index_name().to_string(), d.verify()))
                .collect();
            for ix in indexes {
                for d in ix.parts().dicts() {
                    files.push((ix.name().to_string(), d.verify()));
                }
            }
            for (name, v) in files {
                for e in v.errors {
                    r.error(format!("index {name}: {e}"));
                    if !r.invalid_indexes.contains(&name) {
                        r.invalid_indexes.push(name.clone());
                    }
                }
                r.warnings.extend(v.warnings);
            }
        }
    }

    /// Merge the sorted entries the documents need with the index's entries.
    fn compare_index(
        &self,
        ix: &Index,
        expected: sorter::Merge,
        r: &mut ValidateReport,
    ) -> Result<()> {
        let name = ix.name().to_string();
        let mut expected = expected.peekable();
        let mut cur = ix
            .parts()
            .cursor(Bound::Unbounded, Bound::Unbounded, None, false);
        let mut actual = cur.next()?;
        let (mut found, mut missing, mut extra, mut wrong) = (0u64, 0u64, 0u64, 0u64);
        let mut prev: Option<Vec<u8>> = None;
        let mut examples = Vec::new();
        loop {
            let want = match expected.peek() {
                Some(Ok((k, _))) => Some(k.clone()),
                Some(Err(_)) => {
                    let e = expected.next().and_then(|x| x.err());
                    return Err(CollError::Storage(silt_storage::Error::Io {
                        path: std::path::PathBuf::from("validate"),
                        source: e.unwrap_or_else(|| std::io::Error::other("sorter")),
                    }));
                }
                None => None,
            };
            match (&want, &actual) {
                (None, None) => break,
                (Some(w), Some((a, av))) if w == a => {
                    let (_, wv) = expected.next().and_then(|x| x.ok()).unwrap_or_default();
                    if &wv != av {
                        wrong += 1;
                        if examples.len() < EXAMPLES {
                            examples.push(format!("entry value differs for key {a:02x?}"));
                        }
                    }
                    found += 1;
                    prev = Some(a.clone());
                    actual = cur.next()?;
                }
                (Some(w), Some((a, _))) if w < a => {
                    missing += 1;
                    if examples.len() < EXAMPLES {
                        examples.push(format!("missing entry {w:02x?}"));
                    }
                    expected.next();
                }
                (Some(_), None) => {
                    missing += 1;
                    expected.next();
                }
                (_, Some((a, _))) => {
                    if prev.as_deref().is_some_and(|p| p >= a.as_slice()) {
                        r.error(format!("index {name}: keys out of order"));
                    }
                    extra += 1;
                    found += 1;
                    if examples.len() < EXAMPLES {
                        examples.push(format!("extra entry {a:02x?}"));
                    }
                    prev = Some(a.clone());
                    actual = cur.next()?;
                }
            }
        }
        r.keys_per_index.push((name.clone(), found));
        r.missing_index_entries += missing;
        r.extra_index_entries += extra;
        if missing + extra + wrong > 0 {
            r.invalid_indexes.push(name.clone());
            r.error(format!(
                "index {name}: {missing} entries missing, {extra} extra, {wrong} with a wrong value"
            ));
            for e in examples {
                r.error(format!("index {name}: {e}"));
            }
        }
        Ok(())
    }
}

/// Every entry of `parts` (the primary dictionary's or an index's members) lies in the member
/// that `primary` routes its primary key to (`pk_at`: where the key's primary key starts).
fn check_routing(
    name: &str,
    primary: &Parts,
    parts: &Parts,
    pk_at: impl Fn(&[u8]) -> Option<usize>,
    r: &mut ValidateReport,
) -> Result<()> {
    let mut misplaced = 0u64;
    for (i, d) in parts.dicts().enumerate() {
        let mut cur = d.cursor(Bound::Unbounded, Bound::Unbounded);
        while let Some((k, _)) = cur.next()? {
            let placed = pk_at(&k).is_some_and(|at| primary.position_of(&k[at..]) == i);
            if !placed {
                misplaced += 1;
            }
        }
    }
    if misplaced > 0 {
        r.error(format!(
            "index {name}: {misplaced} entries in a partition their _id does not belong to"
        ));
        if !r.invalid_indexes.iter().any(|n| n == name) {
            r.invalid_indexes.push(name.to_string());
        }
    }
    Ok(())
}

impl crate::Store {
    /// Validate the collection `ns` (see [`Collection::validate`]); `None` if it does not
    /// exist.
    pub fn validate(&self, ns: &str, full: bool) -> Result<Option<ValidateReport>> {
        let Some(c) = self.get(ns) else {
            return Ok(None);
        };
        let tmp = self.env().dir().join(crate::build::SORT_TMP_DIR);
        std::fs::create_dir_all(&tmp).map_err(|e| {
            CollError::Storage(silt_storage::Error::Io {
                path: tmp.clone(),
                source: e,
            })
        })?;
        c.validate_reporting(full, &tmp, self.build_memory)
            .map(Some)
    }
}
