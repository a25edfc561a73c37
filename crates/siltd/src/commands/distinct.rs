//! The `distinct` command.

use std::sync::Arc;

use bson::{doc, Bson, Document};
use silt_bson::compare::collated_equal as values_equal;
use silt_collection::MatchSource;
use silt_query::plan::{self};

use super::common::{coll_arg, deadline, doc_arg, new_matcher};
use crate::ctx::Ctx;
use crate::cursors::DocSource;
use crate::ops::read_stop;
use crate::state::{CmdResult, Server};

pub(super) fn distinct(s: &Server, db: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let coll = coll_arg(db, cmd, "distinct")?;
    let ns = format!("{db}.{coll}");
    let key = match cmd.get("key") {
        Some(Bson::String(k)) => k.clone(),
        None => return Err(super::common::missing_field("distinct.key")),
        other => return Err(super::common::wrong_type("distinct.key", other, "string")),
    };
    let filter = doc_arg(cmd, "query")?.cloned().unwrap_or_default();
    let mut values: Vec<Bson> = Vec::new();
    let add = |d: Document, values: &mut Vec<Bson>| {
        let mut found = Vec::new();
        distinct_values(
            &Bson::Document(d),
            &key.split('.').collect::<Vec<_>>(),
            &mut found,
        );
        for v in found {
            if !values
                .iter()
                .any(|x| values_equal(x, &v) && silt_bson::type_rank(x) == silt_bson::type_rank(&v))
            {
                values.push(v);
            }
        }
    };
    if s.views().is_view(&ns) {
        let docs =
            super::aggregate::view_docs(s, db, &coll, cmd, vec![doc! { "$match": filter }], op)?;
        for d in docs {
            add(d, &mut values);
        }
    } else if let Some(c) = s.store().get(&ns) {
        let matcher = Arc::new(new_matcher(&filter)?);
        // Read from index entries alone when an index holds the key and the filter's fields.
        let needs = plan::needed_paths(&matcher, None, Some(vec![key.clone()]));
        let planned = c.plan(&filter, &matcher, None, None, needs.as_deref())?;
        let snap = op.snap(&c);
        let mut src =
            MatchSource::new_at(c, &planned, Some(matcher), read_stop(deadline(cmd)?), snap);
        while let Some(d) = src.next_doc()? {
            add(d, &mut values);
        }
    }
    values.sort_by(silt_bson::compare::cmp_collated);
    Ok(doc! { "values": values })
}

/// Values at `parts` with arrays unwound (one level at the leaf, every level on the way).
fn distinct_values(v: &Bson, parts: &[&str], out: &mut Vec<Bson>) {
    match (v, parts.first()) {
        (Bson::Array(a), _) => {
            for x in a {
                if parts.is_empty() {
                    out.push(x.clone());
                } else {
                    distinct_values(x, parts, out);
                }
            }
        }
        (other, None) => out.push(other.clone()),
        (Bson::Document(d), Some(p)) => {
            if let Some(x) = d.get(*p) {
                distinct_values(x, &parts[1..], out);
            }
        }
        _ => {}
    }
}
