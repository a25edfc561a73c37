//! What the catalog names, read into memory: the engine dictionary names the store uses
//! (`_catalog`, and `coll-N`, `idx-N` and `oplog-N` for collections, indexes and oplog
//! partitions), and the collections opened from the catalog's entries, as the store does when
//! it opens and after an image replaced its data (`image.rs`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bson::Bson;
use silt_storage::{Dict, Env};

use crate::collection::Layout;
use crate::oplog::Oplog;
use crate::parts::Parts;
use crate::{decode_doc, CollError, Collection, Index, IndexSpec, Result};

/// Name of the catalog dictionary inside the engine.
pub(crate) const CATALOG: &str = "_catalog";

/// The number of a collection, index or oplog dictionary name (`None` for other names).
pub(crate) fn dict_number(name: &str) -> Option<u64> {
    name.strip_prefix("coll-")
        .or_else(|| name.strip_prefix("idx-"))
        .or_else(|| name.strip_prefix("oplog-"))
        .and_then(|s| s.parse::<u64>().ok())
}

/// The collections the catalog names, opened over `env` (raising `next` above every
/// dictionary number they use and adding their dictionaries to `known`).
pub(crate) fn load_collections(
    env: &Env,
    catalog: &Dict,
    oplog: Option<&Arc<Oplog>>,
    next: &mut u64,
    known: &mut Vec<String>,
) -> Result<BTreeMap<String, Arc<Collection>>> {
    let mut colls = BTreeMap::new();
    for (k, v) in catalog.range(Bound::Unbounded, Bound::Unbounded)? {
        if Oplog::is_meta_key(&k) || k == crate::oplog::POSITION_KEY {
            continue;
        }
        let ns = String::from_utf8_lossy(&k).into_owned();
        let meta = decode_doc(&ns, &v)?;
        let options = meta.get_document("options").cloned().unwrap_or_default();
        let mut open = |name: &str| -> Result<Dict> {
            if let Some(n) = dict_number(name) {
                *next = (*next).max(n + 1);
            }
            known.push(name.to_string());
            Ok(env.open_dict(name)?)
        };
        let mut specs = Vec::new();
        if let Ok(list) = meta.get_array("indexes") {
            for ix in list {
                let Bson::Document(ix) = ix else { continue };
                let spec = IndexSpec::parse(ix).map_err(|e| CollError::BadStoredDocument {
                    ns: ns.clone(),
                    detail: format!("index spec: {}", e.0),
                })?;
                specs.push((spec, ix.clone()));
            }
        }
        let (layout, mut ixparts) = match meta.get_array("partitions") {
            Ok(list) => crate::partition::load(&ns, &meta, list, &specs, &mut open)?,
            Err(_) => {
                let dict = open(meta.get_str("dict").unwrap_or_default())?;
                let mut ixparts = Vec::new();
                for (_, ix) in &specs {
                    ixparts.push(Parts::single(open(ix.get_str("dict").unwrap_or_default())?));
                }
                (Layout::single(dict), ixparts)
            }
        };
        let mut indexes = Vec::new();
        for ((spec, ix), parts) in specs.into_iter().zip(ixparts.drain(..)) {
            let mk = ix.get_bool("multikey").unwrap_or(true);
            let coverable = ix.get_bool("coverable").unwrap_or(false);
            indexes.push(Arc::new(Index::new(spec, parts, mk, coverable)));
        }
        // Catalogs from before collections had UUIDs get one now, kept from here on.
        let stored = match meta.get("uuid") {
            Some(Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice())
                .ok()
                .map(bson::Uuid::from_bytes),
            _ => None,
        };
        let uuid = stored.unwrap_or_else(bson::Uuid::new);
        let c = Collection::new(
            ns.clone(),
            uuid,
            layout,
            options,
            indexes,
            catalog.clone(),
            oplog,
        );
        if meta.get_bool("countUncertain").unwrap_or(false) {
            c.count_uncertain.store(true, Ordering::Release);
        }
        if stored.is_none() {
            c.persist_meta()?;
        }
        colls.insert(ns, c);
    }
    Ok(colls)
}

/// Drop the numbered dictionaries not in `known`: those a crash left without a catalog
/// entry (collections, index builds, drops held back while an image was written).
pub(crate) fn sweep_orphans(env: &Env, known: &[String]) -> Result<()> {
    for name in env.list_dicts() {
        if dict_number(&name).is_some() && !known.contains(&name) {
            tracing::info!(dict = %name, "dropping orphaned dictionary");
            env.drop_dict(&name)?;
        }
    }
    Ok(())
}
