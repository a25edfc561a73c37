//! MongoDB's built-in roles and what each command needs. A command declares one [`Need`] in
//! the command table; a role grants a set of needs on its database (or, for the
//! `AnyDatabase` and cluster roles, which exist only on `admin`, on every database).

use bson::{doc, Bson, Document};
use silt_query::QueryError;

/// What a command needs of the user, on the database it runs against unless said otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing: the handshake, authentication itself, `ping`, `buildInfo`.
    Nothing,
    /// Only an authenticated user (ending sessions, committing a transaction: the user's own).
    Authenticated,
    /// Reading documents (`find`, `aggregate`, `count`, `distinct`, `getMore`).
    Read,
    /// Writing documents (`insert`, `update`, `delete`, `findAndModify`).
    Write,
    /// Reading metadata and statistics (`listCollections`, `listIndexes`, `collStats`,
    /// `dbStats`): `read` or `dbAdmin`.
    Inspect,
    /// Creating and dropping collections and indexes: `readWrite` or `dbAdmin`.
    Shape,
    /// Administering a database (`collMod`, `compact`, `validate`, `profile`,
    /// `dropDatabase`, `reIndex`).
    DbAdmin,
    /// Managing users of a database.
    UserAdmin,
    /// Watching the server (`serverStatus`, `currentOp`, `top`, `getLog`).
    ClusterMonitor,
    /// Running the server (`shutdown`, `setParameter`, `fsync`, `killOp`, replica-set setup).
    ClusterAdmin,
}

/// A role held by a user: its name and the database it is defined on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Role {
    pub role: String,
    pub db: String,
}

/// The built-in roles siltd knows, and whether they exist only on `admin`.
const BUILT_IN: &[(&str, bool)] = &[
    ("read", false),
    ("readWrite", false),
    ("dbAdmin", false),
    ("userAdmin", false),
    ("dbOwner", false),
    ("readAnyDatabase", true),
    ("readWriteAnyDatabase", true),
    ("dbAdminAnyDatabase", true),
    ("userAdminAnyDatabase", true),
    ("clusterMonitor", true),
    ("clusterAdmin", true),
    ("backup", true),
    ("restore", true),
    ("root", true),
];

impl Role {
    pub(crate) fn to_doc(&self) -> Document {
        doc! { "role": &self.role, "db": &self.db }
    }

    /// A role as commands name it: `"read"` (on `default_db`) or `{role, db}`. Whether it
    /// exists is `RoleDefs::exists`.
    pub(crate) fn parse(v: &Bson, default_db: &str) -> Result<Role, QueryError> {
        let r =
            match v {
                Bson::String(s) => Role {
                    role: s.clone(),
                    db: default_db.to_string(),
                },
                Bson::Document(d) => match (d.get_str("role"), d.get_str("db")) {
                    (Ok(role), Ok(db)) => Role {
                        role: role.into(),
                        db: db.into(),
                    },
                    _ => return Err(QueryError::failed_to_parse(
                        "a role must be a string or a document with string fields 'role' and 'db'",
                    )),
                },
                _ => {
                    return Err(QueryError::bad_value(
                        "Role names must be either strings or objects",
                    ))
                }
            };
        Ok(r)
    }

    /// Whether this names a built-in role that exists on its database.
    pub(crate) fn is_built_in(&self) -> bool {
        BUILT_IN
            .iter()
            .any(|(n, admin_only)| *n == self.role && (!admin_only || self.db == "admin"))
    }

    /// The names of the built-in roles that exist on `db`.
    pub(crate) fn built_in_names(db: &str) -> impl Iterator<Item = &'static str> + '_ {
        BUILT_IN
            .iter()
            .filter(move |(_, admin_only)| !admin_only || db == "admin")
            .map(|(n, _)| *n)
    }

    /// A built-in role's privileges, written out (`None` for another role).
    pub(crate) fn built_in_privileges(&self) -> Option<Vec<super::privileges::Privilege>> {
        if !self.is_built_in() {
            return None;
        }
        let db = if self.any_database() { "" } else { &self.db };
        super::privileges::built_in(&self.role, db)
    }

    /// Whether this role grants `need` on database `db`.
    pub(crate) fn grants(&self, need: Need, db: &str) -> bool {
        use Need::*;
        let here = self.db == db;
        match self.role.as_str() {
            "root" => true,
            "read" => here && matches!(need, Read | Inspect),
            "readWrite" => here && matches!(need, Read | Write | Inspect | Shape),
            "dbAdmin" => here && matches!(need, Inspect | Shape | DbAdmin),
            "userAdmin" => here && need == UserAdmin,
            "dbOwner" => {
                here && matches!(need, Read | Write | Inspect | Shape | DbAdmin | UserAdmin)
            }
            "readAnyDatabase" => matches!(need, Read | Inspect),
            "readWriteAnyDatabase" => matches!(need, Read | Write | Inspect | Shape),
            "dbAdminAnyDatabase" => matches!(need, Inspect | Shape | DbAdmin),
            "userAdminAnyDatabase" => need == UserAdmin,
            "clusterMonitor" => matches!(need, ClusterMonitor | Inspect),
            "clusterAdmin" => matches!(need, ClusterMonitor | ClusterAdmin | Inspect),
            "backup" => matches!(need, Read | Inspect | ClusterMonitor),
            "restore" => matches!(need, Read | Write | Inspect | Shape | UserAdmin),
            _ => false,
        }
    }

    /// Whether the role reaches every database (so `listDatabases` shows them all).
    pub(crate) fn any_database(&self) -> bool {
        BUILT_IN
            .iter()
            .any(|(n, admin_only)| *admin_only && *n == self.role)
    }
}

/// Grant (`grant`) or revoke `roles` in `held` (a user's or a role's list), keeping its order
/// and holding each role once.
pub(crate) fn grant_or_revoke(held: &mut Vec<Role>, roles: Vec<Role>, grant: bool) {
    for r in roles {
        if !grant {
            held.retain(|x| *x != r);
        } else if !held.contains(&r) {
            held.push(r);
        }
    }
}

/// The `roles` array of a user or role command; every role must exist (RoleNotFound, 31).
pub(crate) fn parse_roles(
    v: Option<&Bson>,
    default_db: &str,
    cmd: &str,
    defs: &super::RoleDefs,
) -> Result<Vec<Role>, QueryError> {
    let a = match v {
        Some(Bson::Array(a)) => a,
        None => {
            return Err(QueryError::located(
                40414,
                format!("BSON field '{cmd}.roles' is missing but a required field"),
            ))
        }
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{cmd}.roles' is the wrong type '{}', expected type 'array'",
                silt_bson::compare::type_name(other)
            )))
        }
    };
    let mut out: Vec<Role> = Vec::new();
    for r in a {
        let r = Role::parse(r, default_db)?;
        defs.check_exist(std::slice::from_ref(&r))?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_grant_what_mongodb_grants() {
        let r = |s: &str, db: &str| Role::parse(&Bson::String(s.into()), db).unwrap();
        assert!(r("read", "test").grants(Need::Read, "test"));
        assert!(!r("read", "test").grants(Need::Write, "test"));
        assert!(!r("read", "test").grants(Need::Read, "other"));
        assert!(r("readWrite", "t").grants(Need::Shape, "t"));
        assert!(!r("dbAdmin", "t").grants(Need::Read, "t"));
        assert!(r("readAnyDatabase", "admin").grants(Need::Read, "x"));
        assert!(r("root", "admin").grants(Need::ClusterAdmin, "admin"));
        assert!(!r("clusterMonitor", "admin").grants(Need::Read, "x"));
        assert!(!r("root", "test").is_built_in());
        assert!(r("root", "admin").is_built_in());
        assert!(!r("nosuch", "test").is_built_in());
    }
}
