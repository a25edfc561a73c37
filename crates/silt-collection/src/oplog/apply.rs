//! Applying oplog entries to a store: the one function that `applyOps` (mongorestore's
//! `--oplogReplay`), replay into an empty data directory and, later, secondaries use.
//!
//! Every kind of entry applies idempotently, so an entry applied twice (a replay that
//! overlaps what a crash kept) leaves what applying it once leaves:
//! - `i` inserts the document, or replaces the one with its `_id`;
//! - `u` with a `$v: 2` diff applies the diff to the document (a missing document is left
//!   missing); with a whole document, replaces it or inserts it;
//! - `d` deletes the document with the `_id` if there is one;
//! - `c` runs the command (`create`, `drop`, `renameCollection`, `createIndexes`,
//!   `dropIndexes`, `collMod`, `dropDatabase`, `applyOps`), ignoring "already done";
//! - `n` does nothing.
//!
//! An entry that carries the collection's UUID (`ui`) applies to the collection with that
//! UUID, whatever its name is by then (a replay that runs past a rename finds it); `create`
//! keeps the entry's UUID. Without `ui` (entries from elsewhere), `ns` names the collection.
//!
//! The writes go through the store's ordinary document write, so a member that keeps an
//! oplog logs what it applies, as mongod does for `applyOps`.

use std::sync::Arc;

use bson::{Bson, Document};

use super::diff::apply_diff;
use crate::{CollError, Collection, IndexSpec, Result, Store, Writer};

fn bad(msg: impl Into<String>) -> CollError {
    CollError::Refused {
        code: 2,
        msg: msg.into(),
    }
}

/// Apply one oplog entry (or one operation of an `applyOps`) to `store`.
pub fn apply(store: &Store, entry: &Document) -> Result<()> {
    apply_as(store, entry, Writer::plain())
}

/// [`apply`], with the document writes made by `w` (in its transaction, when it has one).
/// Commands run on their own, outside any transaction.
pub(crate) fn apply_as(store: &Store, entry: &Document, w: Writer<'_>) -> Result<()> {
    let op = entry
        .get_str("op")
        .map_err(|_| bad("the entry has no op"))?;
    let ns = entry.get_str("ns").unwrap_or("");
    let o = || {
        entry
            .get_document("o")
            .map_err(|_| bad(format!("the {op} entry has no o document")))
    };
    let ui = uuid_of(entry);
    match op {
        "n" => Ok(()),
        "i" => {
            let coll = target_or_create(store, ns, ui)?;
            upsert(&coll, o()?, w)
        }
        "u" => update(store, ns, ui, entry, o()?, w),
        "d" => {
            let id = o()?.get("_id").ok_or_else(|| bad("a delete without _id"))?;
            match target(store, ns, ui) {
                Some(c) => delete(&c, id, w),
                None => Ok(()),
            }
        }
        "c" => command(store, ns, ui, o()?),
        other => Err(bad(format!("unknown oplog op type {other}"))),
    }
}

/// The UUID an entry gives, or a new one.
fn fresh_unless(ui: Option<bson::Uuid>) -> bson::Uuid {
    match ui {
        Some(u) => u,
        None => bson::Uuid::new(),
    }
}

fn uuid_of(entry: &Document) -> Option<bson::Uuid> {
    match entry.get("ui") {
        Some(Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice())
            .ok()
            .map(bson::Uuid::from_bytes),
        _ => None,
    }
}

/// The collection an entry names: by its UUID when it has one that exists, else by `ns`.
fn target(store: &Store, ns: &str, ui: Option<bson::Uuid>) -> Option<Arc<Collection>> {
    ui.and_then(|u| store.by_uuid(u)).or_else(|| store.get(ns))
}

/// The collection an entry names, created (with the entry's UUID) when there is none.
fn target_or_create(store: &Store, ns: &str, ui: Option<bson::Uuid>) -> Result<Arc<Collection>> {
    if let Some(c) = target(store, ns, ui) {
        return Ok(c);
    }
    match ui {
        Some(u) => match store.create_as(ns, Document::new(), u) {
            Ok(c) => Ok(c),
            Err(CollError::NamespaceExists(_)) => store.get_or_create(ns),
            Err(e) => Err(e),
        },
        None => store.get_or_create(ns),
    }
}

fn upsert(coll: &Collection, doc: &Document, w: Writer<'_>) -> Result<()> {
    let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
    match coll.key_of_id(&id)? {
        Some(key) => {
            let lock = coll.lock_doc_as(key, w)?;
            match lock.read()? {
                Some(old) => coll.replace(&lock, &old, doc),
                None => coll.insert_under(&lock, doc),
            }
        }
        None => coll.insert_as(doc, w),
    }
}

fn update(
    store: &Store,
    ns: &str,
    ui: Option<bson::Uuid>,
    entry: &Document,
    o: &Document,
    w: Writer<'_>,
) -> Result<()> {
    let id = entry
        .get_document("o2")
        .ok()
        .and_then(|d| d.get("_id"))
        .ok_or_else(|| bad("an update without o2._id"))?;
    if o.contains_key("$silt") {
        return message(store, ns, ui, id, o, w);
    }
    let is_diff = matches!(o.get("$v"), Some(Bson::Int32(2) | Bson::Int64(2)));
    if !is_diff {
        if o.keys().any(|k| k.starts_with('$')) {
            return Err(bad(
                "an update entry with update operators ($v: 1) cannot be applied; siltd applies $v: 2 diffs and replacements",
            ));
        }
        let mut doc = Document::new();
        doc.insert("_id", id.clone());
        for (k, v) in o {
            if k != "_id" {
                doc.insert(k.clone(), v.clone());
            }
        }
        let coll = target_or_create(store, ns, ui)?;
        return upsert(&coll, &doc, w);
    }
    let diff = o
        .get_document("diff")
        .map_err(|_| bad("a $v: 2 update without diff"))?;
    let Some(coll) = target(store, ns, ui) else {
        return Ok(());
    };
    let Some(key) = coll.key_of_id(id)? else {
        return Ok(());
    };
    let lock = coll.lock_doc_as(key, w)?;
    let Some(old) = lock.read()? else {
        return Ok(());
    };
    let new = apply_diff(&old, diff).map_err(|e| bad(e.0))?;
    if super::diff::same(&Bson::Document(old.clone()), &Bson::Document(new.clone())) {
        return Ok(());
    }
    coll.update(&lock, &old, &new)
}

/// A fast update's entry (`{$silt: 1, fn, arg}`): the update message, applied by reading
/// the document and running its update function, then written as an ordinary update (so the
/// indexes of the collection applied to follow). Unlike the other entries it is not
/// idempotent ($inc applied twice adds twice): a replay applies each entry once.
fn message(
    store: &Store,
    ns: &str,
    ui: Option<bson::Uuid>,
    id: &Bson,
    o: &Document,
    w: Writer<'_>,
) -> Result<()> {
    let func = match o.get("fn") {
        Some(Bson::Int64(n)) => u32::try_from(*n).ok(),
        Some(Bson::Int32(n)) => u32::try_from(*n).ok(),
        _ => None,
    }
    .ok_or_else(|| bad("a $silt entry without fn"))?;
    let arg = match o.get("arg") {
        Some(Bson::Document(d)) => crate::encode_doc(d),
        Some(Bson::Binary(b)) => b.bytes.clone(),
        _ => return Err(bad("a $silt entry without arg")),
    };
    let coll = target_or_create(store, ns, ui)?;
    let key = match coll.key_of_id(id)? {
        Some(k) => k,
        None => crate::id_key(id),
    };
    let lock = coll.lock_doc_as(key.clone(), w)?;
    // A member applying the replicated log injects the message, as the primary did, without
    // reading the document: the primary chose the fast path for the indexes this member has
    // at this point of the log too (`Collection::fast_update` still refuses where a message
    // cannot go, and then the document is read).
    if super::applying() {
        let uncertain = !store.env().update_keeps(func);
        if coll.fast_update(&lock, |_| true, uncertain, func, &arg)? {
            return Ok(());
        }
    }
    let old = lock.read()?;
    let old_bytes = old.as_ref().map(crate::encode_doc);
    match store
        .env()
        .run_update(func, &key, old_bytes.as_deref(), &arg)?
    {
        silt_storage::UpdateOutcome::NoChange => Ok(()),
        silt_storage::UpdateOutcome::Delete => match old {
            Some(old) => coll.delete(&lock, &old),
            None => Ok(()),
        },
        silt_storage::UpdateOutcome::Set(bytes) => {
            let new = crate::decode_doc(ns, &bytes)?;
            match old {
                Some(old) => coll.update(&lock, &old, &new),
                None => coll.insert_under(&lock, &new),
            }
        }
    }
}

fn delete(coll: &Collection, id: &Bson, w: Writer<'_>) -> Result<()> {
    let Some(key) = coll.key_of_id(id)? else {
        return Ok(());
    };
    let lock = coll.lock_doc_as(key, w)?;
    match lock.read()? {
        Some(old) => coll.delete(&lock, &old),
        None => Ok(()),
    }
}

fn command(store: &Store, ns: &str, ui: Option<bson::Uuid>, o: &Document) -> Result<()> {
    let db = ns.strip_suffix(".$cmd").unwrap_or(ns);
    let Some((name, target)) = o.iter().next() else {
        return Err(bad("an empty command entry"));
    };
    let coll_ns = || -> Result<String> {
        match target {
            Bson::String(c) => Ok(format!("{db}.{c}")),
            _ => Err(bad(format!("{name}: the collection name is not a string"))),
        }
    };
    // The collection's name now, for an entry that carries its UUID.
    let named = |ns: String| match ui.and_then(|u| store.by_uuid(u)) {
        Some(c) => c.ns().to_string(),
        None => ns,
    };
    match name.as_str() {
        "applyOps" => {
            let ops = o
                .get_array("applyOps")
                .map_err(|_| bad("applyOps is not an array"))?;
            for op in ops {
                let Bson::Document(op) = op else {
                    return Err(bad("an applyOps operation is not a document"));
                };
                apply(store, op)?;
            }
            Ok(())
        }
        "create" => {
            let mut options = o.clone();
            options.remove("create");
            options.remove("idIndex");
            if ui.is_some_and(|u| store.by_uuid(u).is_some()) {
                return Ok(());
            }
            match store.create_as(&coll_ns()?, options, fresh_unless(ui)) {
                Ok(_) | Err(CollError::NamespaceExists(_)) => Ok(()),
                Err(e) => Err(e),
            }
        }
        "drop" => match (ui, ui.and_then(|u| store.by_uuid(u))) {
            (Some(_), None) => Ok(()),
            (_, Some(c)) => store.drop_collection(c.ns()).map(|_| ()),
            (None, None) => store.drop_collection(&coll_ns()?).map(|_| ()),
        },
        "dropDatabase" => store.drop_database(db),
        "renameCollection" => {
            let from = o
                .get_str("renameCollection")
                .map_err(|_| bad("renameCollection"))?;
            let to = o
                .get_str("to")
                .map_err(|_| bad("renameCollection without to"))?;
            let drop_target = !matches!(o.get("dropTarget"), None | Some(Bson::Boolean(false)));
            let from = match ui.and_then(|u| store.by_uuid(u)) {
                Some(c) if c.ns() == to => return Ok(()),
                Some(c) => c.ns().to_string(),
                None if ui.is_some() => return Ok(()),
                None => from.to_string(),
            };
            match store.rename(&from, to, drop_target) {
                Err(CollError::NamespaceNotFound(_)) if store.get(to).is_some() => Ok(()),
                r => r,
            }
        }
        "createIndexes" => {
            let mut spec = o.clone();
            spec.remove("createIndexes");
            let spec = IndexSpec::parse(&spec).map_err(|e| bad(e.0))?;
            match store.create_indexes(&named(coll_ns()?), vec![spec]) {
                Ok(_) | Err(CollError::IndexConflict { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        }
        "dropIndexes" => {
            let index = o
                .get_str("index")
                .map_err(|_| bad("dropIndexes without index"))?;
            match store.drop_indexes(&named(coll_ns()?), &[index.to_string()]) {
                Ok(_) | Err(CollError::IndexNotFound(_) | CollError::NamespaceNotFound(_)) => {
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        "collMod" => {
            let ns = named(coll_ns()?);
            if let Ok(ix) = o.get_document("index") {
                let name = ix.get_str("name").unwrap_or("").to_string();
                let new = IndexSpec::parse(ix).map_err(|e| bad(e.0))?;
                return store
                    .modify_index(&ns, &name, |s| {
                        *s = new;
                        Ok(())
                    })
                    .map(|_| ());
            }
            let Some(coll) = store.get(&ns) else {
                return Err(CollError::NamespaceNotFound(ns));
            };
            let mut options = coll.options();
            for (k, v) in o.iter().skip(1) {
                options.insert(k.clone(), v.clone());
            }
            store.set_options(&ns, options)
        }
        other => Err(bad(format!("cannot apply the command {other}"))),
    }
}
