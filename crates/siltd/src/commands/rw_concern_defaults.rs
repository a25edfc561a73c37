//! `getDefaultRWConcern` and `setDefaultRWConcern`: the cluster-wide default read and write
//! concerns, kept as mongod keeps them in `config.settings` (`_id:
//! "ReadWriteConcernDefaults"`). As on mongod, a standalone server refuses both (51300).
//! On siltd's one-member set every level a default may name (`local`, `available`,
//! `majority`; `w: 1` or `"majority"`) gives the same answers, so the defaults are recorded
//! and reported; a write concern no member set of one can satisfy is refused.

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use crate::auth::system_docs;
use crate::state::{CmdResult, Server};

const SETTINGS_NS: &str = "config.settings";
const ID: &str = "ReadWriteConcernDefaults";

fn standalone(s: &Server, name: &str) -> Result<(), QueryError> {
    if s.repl().is_none() {
        return Err(QueryError::coded(
            51300,
            "Location51300",
            format!("'{name}' is not supported on standalone nodes."),
        ));
    }
    Ok(())
}

/// The stored defaults, if any were ever set.
fn stored(s: &Server) -> Option<Document> {
    system_docs::load(s.store(), SETTINGS_NS)
        .into_iter()
        .find(|d| d.get_str("_id") == Ok(ID))
}

/// The reply of both commands: what is set, or the implicit defaults, with their sources.
fn reply(d: Option<&Document>) -> Document {
    let mut out = Document::new();
    let rc = d.and_then(|d| d.get_document("defaultReadConcern").ok().cloned());
    let wc = d.and_then(|d| d.get_document("defaultWriteConcern").ok().cloned());
    let rc_source = if rc.is_some() { "global" } else { "implicit" };
    let wc_source = if wc.is_some() { "global" } else { "implicit" };
    out.insert(
        "defaultReadConcern",
        rc.unwrap_or_else(|| doc! { "level": "local" }),
    );
    out.insert(
        "defaultWriteConcern",
        wc.unwrap_or_else(|| doc! { "w": "majority", "wtimeout": 0 }),
    );
    if let Some(d) = d {
        for k in ["updateOpTime", "updateWallClockTime"] {
            if let Some(v) = d.get(k) {
                out.insert(k, v.clone());
            }
        }
    }
    out.insert("defaultWriteConcernSource", wc_source);
    out.insert("defaultReadConcernSource", rc_source);
    let local = d
        .and_then(|d| d.get("updateWallClockTime").cloned())
        .unwrap_or_else(|| Bson::DateTime(bson::DateTime::now()));
    out.insert("localUpdateWallClockTime", local);
    out
}

pub(super) fn get_default_rw_concern(s: &Server, cmd: &Document) -> CmdResult {
    standalone(s, "getDefaultRWConcern")?;
    let mut r = reply(stored(s).as_ref());
    if cmd.get_bool("inMemory") == Ok(true) {
        r.insert("inMemory", true);
    }
    Ok(r)
}

/// A default read concern: `{}` unsets it; a level must suit every read.
fn read_concern(v: &Bson) -> Result<Option<Document>, QueryError> {
    let Bson::Document(d) = v else {
        return Err(QueryError::type_mismatch(
            "defaultReadConcern must be an object",
        ));
    };
    if d.is_empty() {
        return Ok(None);
    }
    if let Some(k) = d.keys().find(|k| k.as_str() != "level") {
        return Err(QueryError::bad_value(format!(
            "'{k}' is not suitable for the default read concern"
        )));
    }
    match d.get_str("level") {
        Ok("local" | "available" | "majority") => Ok(Some(d.clone())),
        Ok(l) => Err(QueryError::bad_value(format!(
            "level: '{l}' is not suitable for the default read concern"
        ))),
        Err(_) => Err(QueryError::failed_to_parse("level must be a string")),
    }
}

/// A default write concern, checked against a set of one member.
fn write_concern(v: &Bson) -> Result<Document, QueryError> {
    let Bson::Document(d) = v else {
        return Err(QueryError::type_mismatch(
            "defaultWriteConcern must be an object",
        ));
    };
    if d.is_empty() {
        return Err(QueryError::bad_value(
            "Unsetting default write concern is not allowed",
        ));
    }
    if let Some(k) = d
        .keys()
        .find(|k| !matches!(k.as_str(), "w" | "j" | "wtimeout"))
    {
        return Err(QueryError::failed_to_parse(format!(
            "unrecognized write concern field: {k}"
        )));
    }
    match d.get("w") {
        None => {}
        Some(Bson::String(w)) if w == "majority" => {}
        Some(Bson::String(w)) => {
            return Err(QueryError::coded(
                79,
                "UnknownReplWriteConcern",
                format!("Unrecognized write concern mode: {w}"),
            ))
        }
        Some(w) => match silt_bson::compare::as_num(w) {
            Some(silt_bson::compare::Num::Int(0)) => {
                return Err(QueryError::bad_value(
                    "Default write concern mode 'w' cannot be 0",
                ))
            }
            Some(silt_bson::compare::Num::Int(1)) => {}
            Some(_) => {
                return Err(QueryError::coded(
                    100,
                    "UnsatisfiableWriteConcern",
                    "Not enough data-bearing nodes",
                ))
            }
            None => {
                return Err(QueryError::failed_to_parse(
                    "w must be a number or a string",
                ))
            }
        },
    }
    let mut out = d.clone();
    if !out.contains_key("wtimeout") {
        out.insert("wtimeout", 0);
    }
    Ok(out)
}

pub(super) fn set_default_rw_concern(s: &Server, cmd: &Document) -> CmdResult {
    standalone(s, "setDefaultRWConcern")?;
    let rc = cmd.get("defaultReadConcern");
    let wc = cmd.get("defaultWriteConcern");
    if rc.is_none() && wc.is_none() {
        return Err(QueryError::bad_value(
            "At least one of the \"defaultReadConcern\" or \"defaultWriteConcern\" fields must \
             be present",
        ));
    }
    let mut d = stored(s).unwrap_or_else(|| doc! { "_id": ID });
    if let Some(rc) = rc {
        match read_concern(rc)? {
            Some(rc) => d.insert("defaultReadConcern", rc),
            None => d.remove("defaultReadConcern"),
        };
    }
    if let Some(wc) = wc {
        d.insert("defaultWriteConcern", write_concern(wc)?);
    }
    if let Some(rs) = &s.repl() {
        d.insert("updateOpTime", rs.tick());
    }
    d.insert("updateWallClockTime", bson::DateTime::now());
    system_docs::put(s.store(), SETTINGS_NS, ID, Some(&d))?;
    Ok(reply(Some(&d)))
}
