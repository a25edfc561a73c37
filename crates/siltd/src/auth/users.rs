//! The users: documents of `admin.system.users` in MongoDB's shape (`_id: "<db>.<user>"`,
//! `user`, `db`, `credentials` holding only salted keys, `roles`, `customData`), kept in
//! memory as well so that every command's check reads no collection. The collection is the
//! truth; it is written first and the memory follows.

use std::collections::BTreeMap;

use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use silt_collection::Store;
use silt_query::QueryError;

use super::roles::Role;
use super::scram::{Credential, Mech};

/// Where users live, as in MongoDB.
pub(crate) const USERS_NS: &str = "admin.system.users";

/// One user as the server holds it.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub user: String,
    pub db: String,
    pub roles: Vec<Role>,
    pub creds: Vec<(Mech, Credential)>,
    pub custom_data: Option<Document>,
    pub user_id: bson::Binary,
}

impl User {
    pub(crate) fn id(&self) -> String {
        format!("{}.{}", self.db, self.user)
    }

    pub(crate) fn credential(&self, m: Mech) -> Option<&Credential> {
        self.creds.iter().find(|(x, _)| *x == m).map(|(_, c)| c)
    }

    pub(crate) fn mechanisms(&self) -> Vec<Bson> {
        self.creds
            .iter()
            .map(|(m, _)| Bson::String(m.name().into()))
            .collect()
    }

    /// The stored document.
    pub(crate) fn to_doc(&self) -> Document {
        let mut creds = Document::new();
        for (m, c) in &self.creds {
            creds.insert(m.name(), c.to_doc());
        }
        let mut d = doc! {
            "_id": self.id(),
            "userId": self.user_id.clone(),
            "user": &self.user,
            "db": &self.db,
            "credentials": creds,
            "roles": self.roles.iter().map(Role::to_doc).collect::<Vec<_>>(),
        };
        if let Some(c) = &self.custom_data {
            d.insert("customData", c.clone());
        }
        d
    }

    pub(crate) fn from_doc(d: &Document) -> Option<User> {
        let creds = d.get_document("credentials").ok()?;
        Some(User {
            user: d.get_str("user").ok()?.to_string(),
            db: d.get_str("db").ok()?.to_string(),
            roles: d
                .get_array("roles")
                .ok()?
                .iter()
                .filter_map(|r| match r {
                    Bson::Document(r) => Some(Role {
                        role: r.get_str("role").ok()?.to_string(),
                        db: r.get_str("db").ok()?.to_string(),
                    }),
                    _ => None,
                })
                .collect(),
            creds: Mech::ALL
                .into_iter()
                .filter_map(|m| {
                    Some((m, Credential::from_doc(creds.get_document(m.name()).ok()?)?))
                })
                .collect(),
            custom_data: d.get_document("customData").ok().cloned(),
            user_id: match d.get("userId") {
                Some(Bson::Binary(b)) => b.clone(),
                _ => new_user_id(),
            },
        })
    }
}

/// A user's id: a random UUID, as mongod gives one.
pub(crate) fn new_user_id() -> bson::Binary {
    bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: bson::Uuid::new().bytes().to_vec(),
    }
}

/// Every user, by `(db, user)`.
#[derive(Debug, Default)]
pub(crate) struct Users {
    map: RwLock<BTreeMap<(String, String), User>>,
}

impl Users {
    /// Read `admin.system.users`.
    pub(crate) fn load(store: &Store) -> Users {
        let mut map = BTreeMap::new();
        for d in super::system_docs::load(store, USERS_NS) {
            match User::from_doc(&d) {
                Some(u) => {
                    map.insert((u.db.clone(), u.user.clone()), u);
                }
                None => tracing::warn!(id = %d.get("_id").cloned().unwrap_or(Bson::Null),
                    "skipping a malformed document in admin.system.users"),
            }
        }
        Users {
            map: RwLock::new(map),
        }
    }

    /// Read `admin.system.users` again (a secondary applied a change to it).
    pub(crate) fn reload(&self, store: &Store) {
        let fresh = Users::load(store).map.into_inner();
        *self.map.write() = fresh;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    pub(crate) fn get(&self, db: &str, user: &str) -> Option<User> {
        self.map.read().get(&(db.into(), user.into())).cloned()
    }

    /// The users of `db` (every database's when `None`).
    pub(crate) fn list(&self, db: Option<&str>) -> Vec<User> {
        self.map
            .read()
            .values()
            .filter(|u| db.is_none_or(|d| u.db == d))
            .cloned()
            .collect()
    }

    /// Store `u` (a new user when `create`, else a changed one); written to
    /// `admin.system.users` before the memory changes.
    pub(crate) fn put(&self, store: &Store, u: User, create: bool) -> Result<(), QueryError> {
        let mut map = self.map.write();
        let key = (u.db.clone(), u.user.clone());
        if create && map.contains_key(&key) {
            return Err(QueryError::located(
                51003,
                format!("User \"{}@{}\" already exists", u.user, u.db),
            ));
        }
        if !create && !map.contains_key(&key) {
            return Err(not_found(&u.user, &u.db));
        }
        if create {
            super::system_docs::ensure_version_docs(store, true)?;
        }
        super::system_docs::put(store, USERS_NS, &u.id(), Some(&u.to_doc()))?;
        map.insert(key, u);
        Ok(())
    }

    /// Remove users of `db` that `which` picks; how many went.
    pub(crate) fn remove(
        &self,
        store: &Store,
        db: &str,
        which: impl Fn(&User) -> bool,
    ) -> Result<usize, QueryError> {
        let mut map = self.map.write();
        let gone: Vec<User> = map
            .values()
            .filter(|u| u.db == db && which(u))
            .cloned()
            .collect();
        if gone.is_empty() {
            return Ok(0);
        }
        for u in &gone {
            super::system_docs::put(store, USERS_NS, &u.id(), None)?;
            map.remove(&(u.db.clone(), u.user.clone()));
        }
        Ok(gone.len())
    }
}

/// MongoDB's `UserNotFound` (11).
pub(crate) fn not_found(user: &str, db: &str) -> QueryError {
    QueryError::coded(11, "UserNotFound", format!("User '{user}@{db}' not found"))
}
