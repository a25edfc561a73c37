//! What a command needs of the user: the [`Need`] its table entry declares, on the database
//! and collection it runs against, plus what its arguments reach (an aggregation's `$lookup`,
//! `$graphLookup` and `$unionWith` sources and `$out`/`$merge` target, both namespaces of a
//! rename, the databases of the roles a user command grants). A collection privilege is
//! checked against the collection of each.

use bson::{Bson, Document};

use super::roles::{Need, Role};

/// One thing a command needs: `need` on `db` (and `coll`, when it names one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Want {
    pub need: Need,
    pub db: String,
    pub coll: Option<String>,
}

impl Want {
    fn new(need: Need, db: &str, coll: Option<&str>) -> Want {
        Want {
            need,
            db: db.to_string(),
            coll: coll.map(str::to_string),
        }
    }
}

/// The collection a command names: its first field when a string, or `getMore`'s
/// `collection`.
fn collection_of(cmd: &Document) -> Option<&str> {
    match cmd.iter().next() {
        Some((_, Bson::String(c))) => Some(c),
        _ => cmd.get_str("collection").ok(),
    }
}

/// `db.coll` split at its first dot.
fn split_ns(ns: &str) -> (&str, Option<&str>) {
    match ns.split_once('.') {
        Some((d, c)) => (d, Some(c)),
        None => (ns, None),
    }
}

/// Everything command `c` (`cmd`, run on `db`) needs.
pub(super) fn of(c: &crate::commands::Command, db: &str, cmd: &Document) -> Vec<Want> {
    let first = cmd.iter().next().map(|(_, v)| v);
    let mut out = vec![Want::new(c.auth, db, collection_of(cmd))];
    match c.name {
        "explain" => {
            if let Some(Bson::Document(inner)) = first {
                if let Some(ic) = inner.keys().next().and_then(|n| crate::commands::lookup(n)) {
                    return of(ic, db, inner);
                }
            }
        }
        "currentOp" if cmd.get_bool("$ownOps") == Ok(true) => {
            // Anyone may list their own operations.
            out[0].need = Need::Authenticated;
        }
        "aggregate" => {
            let stages = cmd.get_array("pipeline").map(Vec::as_slice).unwrap_or(&[]);
            let current_op = stages
                .first()
                .and_then(|st| st.as_document())
                .and_then(|st| st.get_document("$currentOp").ok());
            if let Some(spec) = current_op {
                // Everyone's operations need `inprog`; one's own, nothing more.
                out[0].need = if spec.get_bool("allUsers") == Ok(true) {
                    Need::ClusterMonitor
                } else {
                    Need::Authenticated
                };
            }
            pipeline_reach(stages, db, &mut out);
        }
        "renameCollection" => {
            out.clear();
            for key in ["renameCollection", "to"] {
                if let Ok(ns) = cmd.get_str(key) {
                    let (d, coll) = split_ns(ns);
                    for need in [Need::Read, Need::Write, Need::Shape] {
                        out.push(Want::new(need, d, coll));
                    }
                }
            }
        }
        "createUser" | "updateUser" | "grantRolesToUser" | "createRole" | "updateRole"
        | "grantRolesToRole" => {
            // Granting a role needs userAdmin on the role's database too.
            if let Ok(rs) = cmd.get_array("roles") {
                for r in rs {
                    if let Ok(r) = Role::parse(r, db) {
                        out.push(Want::new(Need::UserAdmin, &r.db, None));
                    }
                }
            }
        }
        _ => {}
    }
    // The users' and roles' collections: readable by user administrators of `admin`, written
    // only by the user commands (or root).
    if db == "admin"
        && matches!(first, Some(Bson::String(c)) if c == "system.users" || c == "system.roles")
    {
        for w in out.iter_mut() {
            w.need = match w.need {
                Need::Read | Need::Inspect => Need::UserAdmin,
                Need::Write | Need::Shape | Need::DbAdmin => Need::ClusterAdmin,
                other => other,
            };
        }
    }
    out
}

/// What the stages of a pipeline reach, nested pipelines (`$lookup`'s, `$unionWith`'s,
/// `$facet`'s) included: reads of other collections, and the `$out`/`$merge` target.
fn pipeline_reach(stages: &[Bson], db: &str, out: &mut Vec<Want>) {
    for st in stages {
        let Bson::Document(st) = st else { continue };
        for (name, spec) in st {
            match (name.as_str(), spec) {
                ("$lookup" | "$graphLookup", Bson::Document(l)) => {
                    let (d, coll) = match l.get("from") {
                        Some(Bson::String(f)) => (db, Some(f.as_str())),
                        Some(Bson::Document(f)) => {
                            (f.get_str("db").unwrap_or(db), f.get_str("coll").ok())
                        }
                        _ => (db, None),
                    };
                    if coll.is_some() {
                        out.push(Want::new(Need::Read, d, coll));
                    }
                    if let Ok(p) = l.get_array("pipeline") {
                        pipeline_reach(p, db, out);
                    }
                }
                ("$unionWith", Bson::String(coll)) => {
                    out.push(Want::new(Need::Read, db, Some(coll)));
                }
                ("$unionWith", Bson::Document(u)) => {
                    if let Ok(coll) = u.get_str("coll") {
                        out.push(Want::new(Need::Read, db, Some(coll)));
                    }
                    if let Ok(p) = u.get_array("pipeline") {
                        pipeline_reach(p, db, out);
                    }
                }
                ("$facet", Bson::Document(f)) => {
                    for (_, p) in f {
                        if let Bson::Array(p) = p {
                            pipeline_reach(p, db, out);
                        }
                    }
                }
                ("$out" | "$merge", target) => {
                    let (tdb, tcoll) = match target {
                        Bson::String(c) => (db, Some(c.as_str())),
                        Bson::Document(t) => match t.get("into") {
                            Some(Bson::Document(i)) => {
                                (i.get_str("db").unwrap_or(db), i.get_str("coll").ok())
                            }
                            Some(Bson::String(c)) => (db, Some(c.as_str())),
                            _ => (t.get_str("db").unwrap_or(db), t.get_str("coll").ok()),
                        },
                        _ => (db, None),
                    };
                    out.push(Want::new(Need::Write, tdb, tcoll));
                    out.push(Want::new(Need::Shape, tdb, tcoll));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn wants(cmd: Document) -> Vec<(Need, String, Option<String>)> {
        let name = cmd.keys().next().unwrap().clone();
        of(crate::commands::lookup(&name).unwrap(), "shop", &cmd)
            .into_iter()
            .map(|w| (w.need, w.db, w.coll))
            .collect()
    }

    #[test]
    fn an_aggregation_needs_what_its_stages_reach() {
        let w = wants(doc! { "aggregate": "orders", "pipeline": [
            { "$lookup": { "from": "items", "as": "i", "pipeline": [
                { "$unionWith": { "coll": "archive" } } ] } },
            { "$facet": { "a": [ { "$graphLookup": { "from": "tree" } } ] } },
            { "$merge": { "into": { "db": "other", "coll": "out" } } },
        ]});
        let read = |c: &str| (Need::Read, "shop".to_string(), Some(c.to_string()));
        assert_eq!(w[0], read("orders"));
        assert!(w.contains(&read("items")));
        assert!(w.contains(&read("archive")));
        assert!(w.contains(&read("tree")));
        assert!(w.contains(&(Need::Write, "other".into(), Some("out".into()))));
    }

    #[test]
    fn get_more_explain_and_rename_name_their_collections() {
        assert_eq!(
            wants(doc! { "getMore": 5i64, "collection": "orders" })[0]
                .2
                .as_deref(),
            Some("orders")
        );
        assert_eq!(
            wants(doc! { "explain": { "find": "orders" } })[0]
                .2
                .as_deref(),
            Some("orders")
        );
        let r = wants(doc! { "renameCollection": "a.b", "to": "c.d" });
        assert!(r.contains(&(Need::Write, "c".into(), Some("d".into()))));
        assert!(r.contains(&(Need::Read, "a".into(), Some("b".into()))));
    }
}
