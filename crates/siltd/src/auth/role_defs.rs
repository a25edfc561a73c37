//! User-defined roles: documents of `admin.system.roles` in MongoDB's shape (`_id:
//! "<db>.<role>"`, `role`, `db`, `privileges`, `roles`, `authenticationRestrictions`), kept
//! in memory as well, like the users. A role grants its privileges and everything the roles
//! it inherits grant; the commands that change roles refuse a cycle.

use std::collections::{BTreeMap, BTreeSet};

use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use silt_collection::Store;
use silt_query::QueryError;

use super::privileges::{self, Privilege};
use super::roles::{Need, Role};

/// Where user-defined roles live, as in MongoDB.
pub(crate) const ROLES_NS: &str = "admin.system.roles";

/// One user-defined role.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RoleDef {
    pub role: String,
    pub db: String,
    pub privileges: Vec<Privilege>,
    pub roles: Vec<Role>,
    /// Kept and shown as given; siltd enforces no authentication restriction, so only an
    /// empty list is accepted by the commands.
    pub restrictions: Vec<Bson>,
}

impl RoleDef {
    pub(crate) fn id(&self) -> String {
        format!("{}.{}", self.db, self.role)
    }

    pub(crate) fn name(&self) -> Role {
        Role {
            role: self.role.clone(),
            db: self.db.clone(),
        }
    }

    /// The stored document.
    pub(crate) fn to_doc(&self) -> Document {
        doc! {
            "_id": self.id(),
            "role": &self.role,
            "db": &self.db,
            "privileges": self.privileges.iter().map(Privilege::to_doc).collect::<Vec<_>>(),
            "roles": self.roles.iter().map(Role::to_doc).collect::<Vec<_>>(),
            "authenticationRestrictions": self.restrictions.clone(),
        }
    }

    /// A stored document (also one restored from a dump of mongod).
    pub(crate) fn from_doc(d: &Document) -> Result<RoleDef, QueryError> {
        let bad = || QueryError::bad_value(format!("malformed role document {d}"));
        let privileges = match d.get("privileges") {
            None => Vec::new(),
            Some(Bson::Array(a)) => a.iter().map(Privilege::parse).collect::<Result<_, _>>()?,
            Some(_) => return Err(bad()),
        };
        let roles = match d.get("roles") {
            None => Vec::new(),
            Some(Bson::Array(a)) => a
                .iter()
                .map(|r| match r {
                    Bson::Document(r) => Ok(Role {
                        role: r.get_str("role").map_err(|_| bad())?.into(),
                        db: r.get_str("db").map_err(|_| bad())?.into(),
                    }),
                    _ => Err(bad()),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad()),
        };
        Ok(RoleDef {
            role: d.get_str("role").map_err(|_| bad())?.into(),
            db: d.get_str("db").map_err(|_| bad())?.into(),
            privileges,
            roles,
            restrictions: d
                .get_array("authenticationRestrictions")
                .cloned()
                .unwrap_or_default(),
        })
    }
}

/// Every user-defined role, by `(db, role)`.
#[derive(Debug, Default)]
pub(crate) struct RoleDefs {
    map: RwLock<BTreeMap<(String, String), RoleDef>>,
}

impl RoleDefs {
    /// Read `admin.system.roles`.
    /// Read `admin.system.roles` again (a secondary applied a change to it).
    pub(crate) fn reload(&self, store: &Store) {
        let fresh = RoleDefs::load(store).map.into_inner();
        *self.map.write() = fresh;
    }

    pub(crate) fn load(store: &Store) -> RoleDefs {
        let mut map = BTreeMap::new();
        for d in super::system_docs::load(store, ROLES_NS) {
            match RoleDef::from_doc(&d) {
                Ok(r) => {
                    map.insert((r.db.clone(), r.role.clone()), r);
                }
                Err(e) => tracing::warn!(error = %e, "skipping a document of admin.system.roles"),
            }
        }
        RoleDefs {
            map: RwLock::new(map),
        }
    }

    pub(crate) fn get(&self, r: &Role) -> Option<RoleDef> {
        self.map
            .read()
            .get(&(r.db.clone(), r.role.clone()))
            .cloned()
    }

    /// The roles of `db` (every database's when `None`).
    pub(crate) fn list(&self, db: Option<&str>) -> Vec<RoleDef> {
        self.map
            .read()
            .values()
            .filter(|r| db.is_none_or(|d| r.db == d))
            .cloned()
            .collect()
    }

    /// Whether `r` names a built-in role that exists on its database, or a defined role.
    pub(crate) fn exists(&self, r: &Role) -> bool {
        Role::is_built_in(r)
            || self
                .map
                .read()
                .contains_key(&(r.db.clone(), r.role.clone()))
    }

    /// RoleNotFound (31) unless every role of `roles` exists.
    pub(crate) fn check_exist(&self, roles: &[Role]) -> Result<(), QueryError> {
        match roles.iter().find(|r| !self.exists(r)) {
            Some(r) => Err(role_not_found(r)),
            None => Ok(()),
        }
    }

    /// Store `def` (a new role when `create`, else a changed one): written to
    /// `admin.system.roles` before the memory changes. A role that would inherit itself is
    /// refused (InvalidRoleModification, 49).
    pub(crate) fn put(&self, store: &Store, def: RoleDef, create: bool) -> Result<(), QueryError> {
        let mut map = self.map.write();
        let key = (def.db.clone(), def.role.clone());
        if create && (map.contains_key(&key) || Role::is_built_in(&def.name())) {
            return Err(QueryError::coded(
                51002,
                "Location51002",
                format!("Role \"{}@{}\" already exists", def.role, def.db),
            ));
        }
        if !create && !map.contains_key(&key) {
            return Err(role_not_found(&def.name()));
        }
        let me = def.name();
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Role> = def.roles.clone();
        while let Some(r) = stack.pop() {
            if r == me {
                return Err(invalid_modification(format!(
                    "Granting roles to {}@{} would introduce a cycle in the role graph",
                    def.role, def.db
                )));
            }
            if seen.insert((r.db.clone(), r.role.clone())) {
                if let Some(d) = map.get(&(r.db.clone(), r.role.clone())) {
                    stack.extend(d.roles.iter().cloned());
                }
            }
        }
        if create {
            super::system_docs::ensure_version_docs(store, true)?;
        }
        super::system_docs::put(store, ROLES_NS, &def.id(), Some(&def.to_doc()))?;
        map.insert(key, def);
        Ok(())
    }

    /// Remove the roles of `db` that `which` picks; the removed ones.
    pub(crate) fn remove(
        &self,
        store: &Store,
        db: &str,
        which: impl Fn(&RoleDef) -> bool,
    ) -> Result<Vec<RoleDef>, QueryError> {
        let mut map = self.map.write();
        let gone: Vec<RoleDef> = map
            .values()
            .filter(|r| r.db == db && which(r))
            .cloned()
            .collect();
        for r in &gone {
            super::system_docs::put(store, ROLES_NS, &r.id(), None)?;
            map.remove(&(r.db.clone(), r.role.clone()));
        }
        Ok(gone)
    }

    /// Every role `roles` reach, themselves included, each once, in the order reached.
    pub(crate) fn closure(&self, roles: &[Role]) -> Vec<Role> {
        closure_in(&self.map.read(), roles)
    }

    /// The privileges that `roles` grant, their inherited roles' included, merged by
    /// resource.
    pub(crate) fn privileges(&self, roles: &[Role]) -> Vec<Privilege> {
        // One read lock for the whole walk: taking it again while held could wait behind a
        // queued writer and never return.
        let map = self.map.read();
        let mut all = Vec::new();
        for r in closure_in(&map, roles) {
            match map.get(&(r.db.clone(), r.role.clone())) {
                Some(d) => all.extend(d.privileges.iter().cloned()),
                None => all.extend(Role::built_in_privileges(&r).unwrap_or_default()),
            }
        }
        privileges::merge(all)
    }

    /// Whether `roles` grant `need` for command `cmd` on `db` (and collection `coll`): a
    /// built-in role by its own check, a defined one by its privileges, each with the roles
    /// it inherits.
    pub(crate) fn grant(
        &self,
        roles: &[Role],
        need: Need,
        cmd: &str,
        db: &str,
        coll: Option<&str>,
    ) -> bool {
        if roles.iter().any(|r| r.grants(need, db)) {
            return true;
        }
        let map = self.map.read();
        if map.is_empty() {
            return false;
        }
        closure_in(&map, roles)
            .iter()
            .any(|r| match map.get(&(r.db.clone(), r.role.clone())) {
                Some(d) => privileges::allow(&d.privileges, need, cmd, db, coll),
                None => r.grants(need, db),
            })
    }

    /// Take `gone` out of every defined role's `roles` (after it was dropped).
    pub(crate) fn forget(&self, store: &Store, gone: &Role) -> Result<(), QueryError> {
        let holders: Vec<RoleDef> = self
            .map
            .read()
            .values()
            .filter(|d| d.roles.contains(gone))
            .cloned()
            .collect();
        for mut d in holders {
            d.roles.retain(|r| r != gone);
            self.put(store, d, false)?;
        }
        Ok(())
    }
}

/// Every role `roles` reach in `map`, themselves included, each once, in the order reached.
fn closure_in(map: &BTreeMap<(String, String), RoleDef>, roles: &[Role]) -> Vec<Role> {
    let mut out: Vec<Role> = Vec::new();
    let mut stack: Vec<Role> = roles.iter().rev().cloned().collect();
    while let Some(r) = stack.pop() {
        if out.contains(&r) {
            continue;
        }
        if let Some(d) = map.get(&(r.db.clone(), r.role.clone())) {
            stack.extend(d.roles.iter().rev().cloned());
        }
        out.push(r);
    }
    out
}

/// MongoDB's `RoleNotFound` (31).
pub(crate) fn role_not_found(r: &Role) -> QueryError {
    QueryError::coded(
        31,
        "RoleNotFound",
        format!("Could not find role: {}@{}", r.role, r.db),
    )
}

/// MongoDB's `InvalidRoleModification` (49).
pub(crate) fn invalid_modification(msg: impl Into<String>) -> QueryError {
    QueryError::coded(49, "InvalidRoleModification", msg)
}
