//! Privileges in MongoDB's shape (`{resource, actions}`): what `rolesInfo` and
//! `connectionStatus` show, what user-defined roles grant, and the one rule that says whether
//! a set of privileges allows a command.
//!
//! A command declares a coarse [`Need`] in the command table; [`actions_for`] turns the need
//! and the command's name into the actions MongoDB checks for it, any one of which suffices.
//! Built-in roles keep their fast check (`Role::grants`); their privileges here are what they
//! grant written out, and a test checks that the two agree.

use std::collections::BTreeSet;

use bson::{doc, Bson, Document};
use silt_query::QueryError;

use super::roles::Need;

/// What a privilege is on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Resource {
    /// `{db, collection}`; an empty string stands for every database or every collection.
    Namespace { db: String, collection: String },
    /// `{cluster: true}`: the server itself.
    Cluster,
    /// `{anyResource: true}`.
    Any,
}

impl Resource {
    pub(crate) fn to_doc(&self) -> Document {
        match self {
            Resource::Namespace { db, collection } => doc! { "db": db, "collection": collection },
            Resource::Cluster => doc! { "cluster": true },
            Resource::Any => doc! { "anyResource": true },
        }
    }

    fn parse(d: &Document) -> Result<Resource, QueryError> {
        if d.get_bool("cluster") == Ok(true) && d.len() == 1 {
            return Ok(Resource::Cluster);
        }
        if d.get_bool("anyResource") == Ok(true) && d.len() == 1 {
            return Ok(Resource::Any);
        }
        match (d.get_str("db"), d.get_str("collection")) {
            (Ok(db), Ok(c)) if d.len() == 2 => Ok(Resource::Namespace {
                db: db.into(),
                collection: c.into(),
            }),
            _ => Err(QueryError::bad_value(format!(
                "a privilege's resource must be {{db, collection}}, {{cluster: true}} or \
                 {{anyResource: true}}, not {d}"
            ))),
        }
    }

    /// Whether this resource covers a need on database `db` (collection `coll`, when the
    /// command names one).
    fn covers(&self, need: Need, db: &str, coll: Option<&str>) -> bool {
        match self {
            Resource::Any => true,
            Resource::Cluster => matches!(need, Need::ClusterMonitor | Need::ClusterAdmin),
            Resource::Namespace { db: d, collection } => {
                !matches!(need, Need::ClusterMonitor | Need::ClusterAdmin)
                    && (d.is_empty() || d == db)
                    && (collection.is_empty() || coll == Some(collection.as_str()))
            }
        }
    }
}

/// One privilege: actions on a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Privilege {
    pub resource: Resource,
    pub actions: BTreeSet<String>,
}

impl Privilege {
    fn new(resource: Resource, actions: &[&str]) -> Privilege {
        Privilege {
            resource,
            actions: actions.iter().map(|a| a.to_string()).collect(),
        }
    }

    pub(crate) fn to_doc(&self) -> Document {
        doc! {
            "resource": self.resource.to_doc(),
            "actions": self.actions.iter().cloned().collect::<Vec<_>>(),
        }
    }

    /// A privilege as `createRole` and `grantPrivilegesToRole` take it; an action MongoDB
    /// does not know is refused (FailedToParse), as mongod refuses it.
    pub(crate) fn parse(v: &Bson) -> Result<Privilege, QueryError> {
        let Bson::Document(d) = v else {
            return Err(QueryError::failed_to_parse(
                "each privilege must be a document with 'resource' and 'actions'",
            ));
        };
        let resource = Resource::parse(d.get_document("resource").map_err(|_| {
            QueryError::failed_to_parse("a privilege needs a 'resource' document")
        })?)?;
        let mut actions = BTreeSet::new();
        for a in d
            .get_array("actions")
            .map_err(|_| QueryError::failed_to_parse("a privilege needs an 'actions' array"))?
        {
            let Bson::String(a) = a else {
                return Err(QueryError::failed_to_parse("actions must be strings"));
            };
            if !KNOWN_ACTIONS.contains(&a.as_str()) {
                return Err(QueryError::failed_to_parse(format!(
                    "Unrecognized action privilege string: {a}"
                )));
            }
            actions.insert(a.clone());
        }
        if let Some(k) = d
            .keys()
            .find(|k| !matches!(k.as_str(), "resource" | "actions"))
        {
            return Err(QueryError::failed_to_parse(format!(
                "unknown field '{k}' in a privilege"
            )));
        }
        Ok(Privilege { resource, actions })
    }

    /// Whether this privilege allows one of `actions` for `need` on `db` (and `coll`).
    pub(crate) fn allows(
        &self,
        need: Need,
        actions: &[&str],
        db: &str,
        coll: Option<&str>,
    ) -> bool {
        self.resource.covers(need, db, coll) && actions.iter().any(|a| self.actions.contains(*a))
    }
}

/// Merge privileges on the same resource into one, as mongod shows them.
pub(crate) fn merge(privs: impl IntoIterator<Item = Privilege>) -> Vec<Privilege> {
    let mut out: Vec<Privilege> = Vec::new();
    for p in privs {
        match out.iter_mut().find(|q| q.resource == p.resource) {
            Some(q) => q.actions.extend(p.actions),
            None => out.push(p),
        }
    }
    out.sort_by(|a, b| a.resource.cmp(&b.resource));
    out
}

/// Remove `actions` of `privs` on the same resources (`revokePrivilegesFromRole`).
pub(crate) fn subtract(privs: &mut Vec<Privilege>, gone: &[Privilege]) {
    for g in gone {
        if let Some(p) = privs.iter_mut().find(|p| p.resource == g.resource) {
            p.actions.retain(|a| !g.actions.contains(a));
        }
    }
    privs.retain(|p| !p.actions.is_empty());
}

/// The actions MongoDB checks for a command with `need`, any one of which suffices.
pub(crate) fn actions_for(need: Need, cmd: &str) -> &'static [&'static str] {
    use Need::*;
    match (need, cmd) {
        (Nothing | Authenticated, _) => &[],
        (Read, _) => &["find"],
        (Write, "insert") => &["insert"],
        (Write, "update") => &["update"],
        (Write, "delete") => &["remove"],
        (Write, "findAndModify") => &["update", "remove"],
        (Write, _) => &["insert"],
        (Inspect, "listCollections") => &["listCollections"],
        (Inspect, "listIndexes") => &["listIndexes"],
        (Inspect, "collStats") => &["collStats"],
        (Inspect, "dbStats") => &["dbStats"],
        (Inspect, _) => &["collStats", "dbStats", "listCollections", "listIndexes"],
        (Shape, "create") => &["createCollection"],
        (Shape, "createIndexes") => &["createIndex"],
        (Shape, "drop") => &["dropCollection"],
        (Shape, "dropIndexes") => &["dropIndex"],
        (Shape, _) => &[
            "createCollection",
            "createIndex",
            "dropCollection",
            "dropIndex",
        ],
        (DbAdmin, "collMod") => &["collMod"],
        (DbAdmin, "compact") => &["compact"],
        (DbAdmin, "validate") => &["validate"],
        (DbAdmin, "profile") => &["enableProfiler"],
        (DbAdmin, "dropDatabase") => &["dropDatabase"],
        (DbAdmin, "reIndex") => &["reIndex"],
        (DbAdmin, _) => &[
            "collMod",
            "compact",
            "validate",
            "enableProfiler",
            "dropDatabase",
        ],
        (UserAdmin, "createUser") => &["createUser"],
        (UserAdmin, "dropUser" | "dropAllUsersFromDatabase") => &["dropUser"],
        (UserAdmin, "usersInfo") => &["viewUser"],
        (UserAdmin, "rolesInfo") => &["viewRole"],
        (UserAdmin, "createRole") => &["createRole"],
        (UserAdmin, "dropRole" | "dropAllRolesFromDatabase") => &["dropRole"],
        (UserAdmin, "grantRolesToUser" | "grantRolesToRole" | "grantPrivilegesToRole") => {
            &["grantRole"]
        }
        (UserAdmin, "revokeRolesFromUser" | "revokeRolesFromRole" | "revokePrivilegesFromRole") => {
            &["revokeRole"]
        }
        (UserAdmin, _) => &[
            "createUser",
            "grantRole",
            "createRole",
            "viewUser",
            "viewRole",
        ],
        (ClusterMonitor, "serverStatus") => &["serverStatus"],
        (ClusterMonitor, "currentOp") => &["inprog"],
        (ClusterMonitor, "top") => &["top"],
        (ClusterMonitor, "getLog") => &["getLog"],
        (ClusterMonitor, "hostInfo") => &["hostInfo"],
        (ClusterMonitor, "getCmdLineOpts") => &["getCmdLineOpts"],
        (ClusterMonitor, "replSetGetStatus" | "replSetGetConfig") => &["replSetGetStatus"],
        (ClusterMonitor, _) => &["serverStatus", "inprog", "top", "getLog"],
        (ClusterAdmin, "shutdown") => &["shutdown"],
        (ClusterAdmin, "setParameter") => &["setParameter"],
        (ClusterAdmin, "fsync" | "fsyncUnlock") => &["fsync"],
        (ClusterAdmin, "killOp") => &["killop"],
        (ClusterAdmin, "logRotate") => &["logRotate"],
        (ClusterAdmin, _) => &["shutdown", "setParameter", "fsync", "killop"],
    }
}

/// The actions siltd knows (a privilege naming another is refused).
pub(crate) const KNOWN_ACTIONS: &[&str] = &[
    "anyAction",
    "changeCustomData",
    "changeOwnCustomData",
    "changeOwnPassword",
    "changePassword",
    "changeStream",
    "collMod",
    "collStats",
    "compact",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createRole",
    "createUser",
    "dbHash",
    "dbStats",
    "dropCollection",
    "dropDatabase",
    "dropIndex",
    "dropRole",
    "dropUser",
    "enableProfiler",
    "find",
    "fsync",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "grantRole",
    "hostInfo",
    "indexStats",
    "inprog",
    "insert",
    "killCursors",
    "killop",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "logRotate",
    "planCacheRead",
    "reIndex",
    "remove",
    "renameCollectionSameDB",
    "replSetConfigure",
    "replSetGetConfig",
    "replSetGetStatus",
    "revokeRole",
    "serverStatus",
    "setDefaultRWConcern",
    "setParameter",
    "shutdown",
    "top",
    "update",
    "validate",
    "viewRole",
    "viewUser",
];

const READ: &[&str] = &[
    "changeStream",
    "collStats",
    "dbHash",
    "dbStats",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "planCacheRead",
];
const WRITE: &[&str] = &[
    "convertToCapped",
    "createCollection",
    "createIndex",
    "dropCollection",
    "dropIndex",
    "insert",
    "remove",
    "renameCollectionSameDB",
    "update",
];
const DB_ADMIN: &[&str] = &[
    "collMod",
    "collStats",
    "compact",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "dbStats",
    "dropCollection",
    "dropDatabase",
    "dropIndex",
    "enableProfiler",
    "listCollections",
    "listIndexes",
    "reIndex",
    "renameCollectionSameDB",
    "validate",
];
const USER_ADMIN: &[&str] = &[
    "changeCustomData",
    "changePassword",
    "createRole",
    "createUser",
    "dropRole",
    "dropUser",
    "grantRole",
    "revokeRole",
    "viewRole",
    "viewUser",
];
const CLUSTER_MONITOR: &[&str] = &[
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "hostInfo",
    "inprog",
    "listDatabases",
    "replSetGetConfig",
    "replSetGetStatus",
    "serverStatus",
    "top",
];
const CLUSTER_ADMIN: &[&str] = &[
    "fsync",
    "killop",
    "logRotate",
    "replSetConfigure",
    "setDefaultRWConcern",
    "setParameter",
    "shutdown",
];
/// What `clusterMonitor` may read on every database.
const MONITOR_ANY_DB: &[&str] = &["collStats", "dbStats", "indexStats"];

fn on(db: &str, actions: &[&[&str]]) -> Privilege {
    let all: Vec<&str> = actions.iter().flat_map(|a| a.iter().copied()).collect();
    Privilege::new(
        Resource::Namespace {
            db: db.into(),
            collection: String::new(),
        },
        &all,
    )
}

fn cluster(actions: &[&[&str]]) -> Privilege {
    let all: Vec<&str> = actions.iter().flat_map(|a| a.iter().copied()).collect();
    Privilege::new(Resource::Cluster, &all)
}

/// The privileges of built-in role `role` on database `db` (`None` for a name that is not
/// a built-in role).
pub(crate) fn built_in(role: &str, db: &str) -> Option<Vec<Privilege>> {
    let p = match role {
        "read" => vec![on(db, &[READ])],
        "readWrite" => vec![on(db, &[READ, WRITE])],
        "dbAdmin" => vec![on(db, &[DB_ADMIN])],
        "userAdmin" => vec![on(db, &[USER_ADMIN])],
        "dbOwner" => vec![on(db, &[READ, WRITE, DB_ADMIN, USER_ADMIN])],
        "readAnyDatabase" => vec![on("", &[READ]), cluster(&[&["listDatabases"]])],
        "readWriteAnyDatabase" => vec![on("", &[READ, WRITE]), cluster(&[&["listDatabases"]])],
        "dbAdminAnyDatabase" => vec![on("", &[DB_ADMIN]), cluster(&[&["listDatabases"]])],
        "userAdminAnyDatabase" => vec![on("", &[USER_ADMIN]), cluster(&[&["listDatabases"]])],
        "clusterMonitor" => vec![on("", &[MONITOR_ANY_DB]), cluster(&[CLUSTER_MONITOR])],
        "clusterAdmin" => vec![
            on("", &[MONITOR_ANY_DB]),
            cluster(&[CLUSTER_MONITOR, CLUSTER_ADMIN]),
        ],
        "backup" => vec![
            on(
                "",
                &[&[
                    "find",
                    "listCollections",
                    "listIndexes",
                    "collStats",
                    "dbStats",
                ]],
            ),
            cluster(&[CLUSTER_MONITOR]),
        ],
        "restore" => vec![
            on("", &[READ, WRITE, USER_ADMIN]),
            cluster(&[&["listDatabases"]]),
        ],
        "root" => vec![Privilege::new(Resource::Any, &["anyAction"])],
        _ => return None,
    };
    Some(merge(p))
}

/// Whether `privs` allow the need (of command `cmd`) on `db` and `coll`.
pub(crate) fn allow(
    privs: &[Privilege],
    need: Need,
    cmd: &str,
    db: &str,
    coll: Option<&str>,
) -> bool {
    let actions = actions_for(need, cmd);
    privs.iter().any(|p| {
        p.allows(need, actions, db, coll)
            || (p.resource == Resource::Any && p.actions.contains("anyAction"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    const NEEDS: &[Need] = &[
        Need::Read,
        Need::Write,
        Need::Inspect,
        Need::Shape,
        Need::DbAdmin,
        Need::UserAdmin,
        Need::ClusterMonitor,
        Need::ClusterAdmin,
    ];

    /// The built-in roles' written-out privileges allow exactly what their fast check
    /// grants, for every need, on their own database and on another.
    #[test]
    fn built_in_privileges_agree_with_the_fast_check() {
        for role in [
            "read",
            "readWrite",
            "dbAdmin",
            "userAdmin",
            "dbOwner",
            "readAnyDatabase",
            "readWriteAnyDatabase",
            "dbAdminAnyDatabase",
            "userAdminAnyDatabase",
            "clusterMonitor",
            "clusterAdmin",
            "backup",
            "restore",
            "root",
        ] {
            let on_t = Role {
                role: role.into(),
                db: "t".into(),
            };
            let home = if on_t.is_built_in() { "t" } else { "admin" };
            let r = Role {
                role: role.into(),
                db: home.into(),
            };
            let privs = built_in(role, if r.any_database() { "" } else { home }).unwrap();
            for &need in NEEDS {
                for db in [home, "other"] {
                    assert_eq!(
                        allow(&privs, need, "", db, Some("c")),
                        r.grants(need, db),
                        "{role}@{home}: {need:?} on {db}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_collection_privilege_covers_only_its_collection() {
        let p = Privilege::parse(&Bson::Document(
            doc! { "resource": { "db": "t", "collection": "c" }, "actions": ["find"] },
        ))
        .unwrap();
        let p = std::slice::from_ref(&p);
        assert!(allow(p, Need::Read, "find", "t", Some("c")));
        assert!(!allow(p, Need::Read, "find", "t", Some("d")));
        assert!(!allow(p, Need::Write, "insert", "t", Some("c")));
        assert!(!allow(p, Need::Read, "find", "u", Some("c")));
        assert!(Privilege::parse(&Bson::Document(
            doc! { "resource": { "db": "t", "collection": "" }, "actions": ["fly"] }
        ))
        .is_err());
    }
}
