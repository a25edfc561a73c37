//! `validate`: check a collection's documents, indexes and (with `full: true`) files, in
//! MongoDB's reply shape. Damage is reported with `valid: false`, not as a command error.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::args;
use super::common::{bool_arg, coll_arg};
use crate::errors::coll_err;
use crate::state::{CmdResult, Server};

pub(super) fn validate(s: &Server, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_arg(db, cmd, "validate")?;
    for refused in ["repair", "metadata"] {
        if bool_arg(cmd, refused)?.unwrap_or(false) {
            return Err(args::not_implemented(&format!("validate.{refused}")));
        }
    }
    let full = bool_arg(cmd, "full")?.unwrap_or(false);
    // `background: true` asks for a lighter check that does not block writers; siltd's own
    // validate answers the same question, more thoroughly. With `full`, refused as mongod
    // refuses it.
    if bool_arg(cmd, "background")?.unwrap_or(false) && full {
        return Err(QueryError::invalid_options(
            "Running the validate command with both { background: true } and { full: true } is \
             not supported.",
        ));
    }
    let enforce_count = bool_arg(cmd, "enforceFastCount")?.unwrap_or(false);
    let ns = format!("{db}.{coll}");
    let Some(mut r) = s.store().validate(&ns, full).map_err(coll_err)? else {
        return Err(QueryError::namespace_not_found(format!(
            "Collection '{ns}' does not exist to validate."
        )));
    };
    if enforce_count {
        r.errors.append(&mut r.warnings);
    }
    let mut keys = Document::new();
    let mut details = Document::new();
    for (name, n) in &r.keys_per_index {
        keys.insert(name.clone(), crate::num::int32(*n));
        details.insert(
            name.clone(),
            doc! { "valid": !r.invalid_indexes.contains(name) },
        );
    }
    let valid = r.errors.is_empty();
    let mut out = doc! { "ns": &ns };
    if let Some(c) = s.store().get(&ns) {
        out.insert("uuid", c.uuid());
    }
    out.extend(doc! {
        "nInvalidDocuments": crate::num::int32(r.corrupt_records),
        "nNonCompliantDocuments": 0i32,
        "nrecords": crate::num::int32(r.nrecords),
        "nIndexes": crate::num::int32(r.keys_per_index.len()),
        "keysPerIndex": keys,
        "indexDetails": details,
        "valid": valid,
        "repaired": false,
        "warnings": r.warnings.iter().map(|w| Bson::String(w.clone())).collect::<Vec<_>>(),
        "errors": r.errors.iter().map(|e| Bson::String(e.clone())).collect::<Vec<_>>(),
        "extraIndexEntries": Vec::<Bson>::new(),
        "missingIndexEntries": Vec::<Bson>::new(),
        "corruptRecords": Vec::<Bson>::new(),
    });
    // siltd counts index inconsistencies where mongod lists them: the counts go under `silt`,
    // only when there is something to report, so a clean reply is mongod's.
    if r.extra_index_entries > 0 || r.missing_index_entries > 0 {
        out.insert(
            "silt",
            doc! {
                "extraIndexEntries": r.extra_index_entries as i64,
                "missingIndexEntries": r.missing_index_entries as i64,
                "full": full,
            },
        );
    }
    if !valid {
        out.insert(
            "advice",
            "A corrupt namespace has been detected. Rebuild the damaged indexes (drop and create them) or restore the collection from a backup.",
        );
    }
    Ok(out)
}
