//! Authentication and authorization, as MongoDB does them: SCRAM-SHA-1 and SCRAM-SHA-256
//! conversations (`saslStart`/`saslContinue`, or speculatively inside `hello`), users stored
//! salted and hashed in `admin.system.users`, built-in roles, and a check of every command
//! against the roles of the connection's user when `--auth` is on. With `--auth` and no user
//! at all, a client on the loopback interface may create the first one (the localhost
//! exception) and do nothing else.
//!
//! Lock order: a connection's [`ConnAuth`] lock is a leaf. Nothing is locked while it is held
//! (it is released before [`Users`] or [`RoleDefs`] is locked); it may be taken under other
//! locks (`currentOp` reads a connection's user under the operation table's connection lock).

mod needs;
pub(crate) mod privileges;
pub(crate) mod role_defs;
pub(crate) mod roles;
pub(crate) mod scram;
pub(crate) mod system_docs;
pub(crate) mod users;

use std::sync::Arc;

use bson::{doc, Bson, Document};
use parking_lot::Mutex;
use silt_query::QueryError;

pub(crate) use role_defs::{RoleDef, RoleDefs};
pub(crate) use roles::{Need, Role};
use scram::{ClientFirst, Credential, Mech, Pending, ScramError};
pub(crate) use users::{User, Users};

use crate::conn::ConnInfo;
use crate::state::Server;

/// The server-wide side: whether `--auth` is on, the users, the user-defined roles, and the
/// secret that makes the decoy salts of unknown users stable.
pub(crate) struct Auth {
    pub enabled: bool,
    pub users: Users,
    pub roles: RoleDefs,
    /// `enableLocalhostAuthBypass` (default true): the localhost exception is open.
    pub localhost_bypass: std::sync::atomic::AtomicBool,
    secret: [u8; 32],
}

impl Auth {
    /// Read the users and roles of `store`, and write the `admin.system.version` documents
    /// mongod keeps (a store that cannot be written starts all the same).
    pub(crate) fn load(enabled: bool, store: &silt_collection::Store) -> Auth {
        let users = Users::load(store);
        let roles = RoleDefs::load(store);
        let with_schema = !users.is_empty() || !roles.list(None).is_empty();
        if let Err(e) = system_docs::ensure_version_docs(store, with_schema) {
            tracing::warn!(error = %e, "cannot write admin.system.version");
        }
        Auth::new(enabled, users, roles)
    }

    /// Read the users and roles again: a member of a multi-member set applied a change to
    /// them that another member made.
    pub(crate) fn reload(&self, store: &silt_collection::Store) {
        self.users.reload(store);
        self.roles.reload(store);
    }

    pub(crate) fn new(enabled: bool, users: Users, roles: RoleDefs) -> Auth {
        let mut secret = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut secret);
        Auth {
            enabled,
            users,
            roles,
            localhost_bypass: std::sync::atomic::AtomicBool::new(true),
            secret,
        }
    }
}

/// Where a connection's SCRAM conversation stands.
#[derive(Debug)]
enum Conversation {
    /// Waiting for the client-final message.
    Started {
        pending: Pending,
        user: String,
        db: String,
        skip_empty: bool,
    },
    /// Proof accepted; MongoDB's extra empty round is still to come.
    Verified { user: String, db: String },
}

#[derive(Debug, Default)]
struct ConnState {
    /// The authenticated user, `(db, user)`.
    user: Option<(String, String)>,
    conversation: Option<Conversation>,
}

/// One connection's authentication state.
#[derive(Debug, Default)]
pub(crate) struct ConnAuth {
    state: Mutex<ConnState>,
}

impl ConnAuth {
    pub(crate) fn user(&self) -> Option<(String, String)> {
        self.state.lock().user.clone()
    }

    pub(crate) fn logout(&self) {
        let mut st = self.state.lock();
        st.user = None;
        st.conversation = None;
    }
}

/// A new connection's authentication state.
pub(crate) fn new_conn() -> Arc<ConnAuth> {
    Arc::new(ConnAuth::default())
}

fn auth_failed() -> QueryError {
    QueryError::coded(18, "AuthenticationFailed", "Authentication failed.")
}

fn payload_bytes(cmd: &Document) -> Result<Vec<u8>, QueryError> {
    match cmd.get("payload") {
        Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
        Some(Bson::String(s)) => Ok(s.clone().into_bytes()),
        _ => Err(QueryError::bad_value(
            "Missing required field payload (BinData or string)",
        )),
    }
}

fn payload(bytes: Vec<u8>) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes,
    })
}

/// `saslStart` (also a `hello`'s `speculativeAuthenticate`): check the mechanism, read the
/// client-first message, answer the server-first one.
pub(crate) fn sasl_start(
    s: &Server,
    conn: &ConnInfo,
    db: &str,
    cmd: &Document,
) -> Result<Document, QueryError> {
    let mech_name = cmd
        .get_str("mechanism")
        .map_err(|_| QueryError::bad_value("Missing required field mechanism (a string)"))?;
    let Some(mech) = Mech::from_name(mech_name) else {
        return Err(QueryError::coded(
            334,
            "MechanismUnavailable",
            format!(
                "Received authentication for mechanism {mech_name} which is unknown or not enabled"
            ),
        ));
    };
    let bytes = payload_bytes(cmd)?;
    let first = ClientFirst::parse(&bytes).map_err(|e| match e {
        ScramError::Protocol(m) | ScramError::Failed(m) => QueryError::bad_value(m),
    })?;
    let user = s.auth().users.get(db, &first.user);
    let cred = match (&user, user.as_ref().and_then(|u| u.credential(mech))) {
        (_, Some(c)) => c.clone(),
        // mongod tells a user that exists without this mechanism's credentials so.
        (Some(_), None) => {
            let m = mech.name();
            return Err(QueryError::coded(
                334,
                "MechanismUnavailable",
                format!(
                    "Unable to use {m} based authentication for user without any {m} \
                     credentials registered"
                ),
            ));
        }
        (None, None) => Credential::decoy(mech, &s.auth().secret, &format!("{db}.{}", first.user)),
    };
    let skip_empty = cmd
        .get_document("options")
        .ok()
        .and_then(|o| o.get_bool("skipEmptyExchange").ok())
        .unwrap_or(false);
    let (pending, server_first) = Pending::start(mech, &first, cred);
    conn.auth.state.lock().conversation = Some(Conversation::Started {
        pending,
        user: first.user,
        db: db.to_string(),
        skip_empty,
    });
    Ok(doc! { "conversationId": 1, "done": false, "payload": payload(server_first) })
}

/// `saslContinue`: check the client's proof (authenticating the connection) or close
/// MongoDB's empty final round.
pub(crate) fn sasl_continue(
    s: &Server,
    conn: &ConnInfo,
    cmd: &Document,
) -> Result<Document, QueryError> {
    let bytes = payload_bytes(cmd)?;
    let conv = conn.auth.state.lock().conversation.take();
    match conv {
        None => Err(QueryError::coded(
            17,
            "ProtocolError",
            "No SASL session state found",
        )),
        Some(Conversation::Verified { user, db }) => {
            conn.auth.state.lock().user = Some((db, user));
            Ok(doc! { "conversationId": 1, "done": true, "payload": payload(Vec::new()) })
        }
        Some(Conversation::Started {
            pending,
            user,
            db,
            skip_empty,
        }) => {
            let mech = pending.mech;
            let known = s
                .auth()
                .users
                .get(&db, &user)
                .is_some_and(|u| u.credential(mech).is_some());
            match pending.finish(&bytes) {
                Ok(server_final) if known => {
                    tracing::info!(
                        mechanism = mech.name(),
                        user = %user,
                        db = %db,
                        remote = %conn.peer,
                        "Successfully authenticated"
                    );
                    let mut st = conn.auth.state.lock();
                    if skip_empty {
                        st.user = Some((db, user));
                    } else {
                        st.conversation = Some(Conversation::Verified { user, db });
                    }
                    Ok(
                        doc! { "conversationId": 1, "done": skip_empty, "payload": payload(server_final) },
                    )
                }
                Ok(_) | Err(ScramError::Failed(_)) => {
                    let why = if known {
                        "incorrect password or proof"
                    } else {
                        "UserNotFound"
                    };
                    tracing::warn!(
                        mechanism = mech.name(),
                        user = %user,
                        db = %db,
                        remote = %conn.peer,
                        error = why,
                        "Authentication failed"
                    );
                    s.remember_log(format!(
                        "Authentication failed: mechanism {} user {user} db {db} remote {}",
                        mech.name(),
                        conn.peer
                    ));
                    Err(auth_failed())
                }
                Err(ScramError::Protocol(m)) => Err(QueryError::bad_value(m)),
            }
        }
    }
}

/// `hello`'s authentication fields: `saslSupportedMechs` for `"<db>.<user>"`, and the
/// answer to `speculativeAuthenticate` (a `saslStart` riding on the handshake).
pub(crate) fn hello_fields(
    s: &Server,
    conn: &ConnInfo,
    cmd: &Document,
    out: &mut Document,
) -> Result<(), QueryError> {
    if let Ok(name) = cmd.get_str("saslSupportedMechs") {
        let Some((db, user)) = name.split_once('.') else {
            return Err(QueryError::bad_value(
                "UserName must contain a '.' separated database.user pair",
            ));
        };
        if let Some(u) = s.auth().users.get(db, user) {
            out.insert("saslSupportedMechs", u.mechanisms());
        }
    }
    if let Ok(spec) = cmd.get_document("speculativeAuthenticate") {
        if spec.contains_key("saslStart") {
            let db = spec.get_str("db").unwrap_or("admin");
            // As mongod: no speculative answer unless the user has that mechanism, so that the
            // driver negotiates one (`saslSupportedMechs`) and starts again.
            let has_mech = spec
                .get_str("mechanism")
                .ok()
                .and_then(Mech::from_name)
                .zip(
                    payload_bytes(spec)
                        .ok()
                        .and_then(|p| ClientFirst::parse(&p).ok()),
                )
                .and_then(|(m, first)| s.auth().users.get(db, &first.user)?.credential(m).cloned());
            if has_mech.is_none() {
                return Ok(());
            }
            if let Ok(reply) = sasl_start(s, conn, db, spec) {
                out.insert("speculativeAuthenticate", reply);
            }
        }
    }
    Ok(())
}

/// Whether the connection comes from the loopback interface.
fn from_localhost(conn: &ConnInfo) -> bool {
    conn.peer
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().is_loopback())
}

/// The roles the connection's user holds now (a role granted or revoked since the user
/// authenticated counts at once; a dropped user holds none).
fn current_roles(s: &Server, conn: &ConnInfo) -> Option<Vec<Role>> {
    let (db, user) = conn.auth.user()?;
    Some(
        s.auth()
            .users
            .get(&db, &user)
            .map(|u| u.roles)
            .unwrap_or_default(),
    )
}

/// Whether the connection's user may see every database in `listDatabases`.
pub(crate) fn sees_every_database(s: &Server, conn: &ConnInfo) -> bool {
    if !s.auth().enabled {
        return true;
    }
    let Some(roles) = current_roles(s, conn) else {
        return false;
    };
    s.auth()
        .roles
        .closure(&roles)
        .iter()
        .any(Role::any_database) || s.auth().roles.privileges(&roles).iter().any(|p| {
        matches!(&p.resource, privileges::Resource::Any)
            || matches!(&p.resource, privileges::Resource::Namespace { db, .. } if db.is_empty())
    })
}

/// The databases the connection's user holds some role on.
pub(crate) fn role_databases(s: &Server, conn: &ConnInfo) -> Vec<String> {
    let roles = current_roles(s, conn).unwrap_or_default();
    let mut dbs: Vec<String> = s
        .auth()
        .roles
        .closure(&roles)
        .into_iter()
        .map(|r| r.db)
        .collect();
    for p in s.auth().roles.privileges(&roles) {
        if let privileges::Resource::Namespace { db, .. } = p.resource {
            dbs.push(db);
        }
    }
    dbs.sort();
    dbs.dedup();
    dbs
}

/// Check that the connection may run `cmd` (`name` on `db`) with `--auth` on: Unauthorized
/// (13) if not.
pub(crate) fn authorize(
    s: &Server,
    conn: &ConnInfo,
    db: &str,
    name: &str,
    cmd: &Document,
) -> Result<(), QueryError> {
    if !s.auth().enabled {
        return Ok(());
    }
    let Some(c) = crate::commands::lookup(name) else {
        return Ok(());
    };
    let wanted = needs::of(c, db, cmd);
    if wanted.iter().all(|w| w.need == Need::Nothing) {
        return Ok(());
    }
    let Some(roles) = current_roles(s, conn) else {
        // The localhost exception: the first user, and initiating the set before it (mongod
        // documents initiating a keyFile set over localhost, then creating the first user on
        // the primary).
        if matches!(c.name, "createUser" | "replSetInitiate")
            && s.auth().users.is_empty()
            && from_localhost(conn)
            && s.auth()
                .localhost_bypass
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(());
        }
        return Err(QueryError::unauthorized(format!(
            "Command {} requires authentication",
            c.name
        )));
    };
    if c.name == "usersInfo" && asks_only_self(conn, db, cmd) {
        return Ok(());
    }
    for w in &wanted {
        if matches!(w.need, Need::Nothing | Need::Authenticated) {
            continue;
        }
        if !s
            .auth()
            .roles
            .grant(&roles, w.need, c.name, &w.db, w.coll.as_deref())
        {
            let target = cmd
                .iter()
                .next()
                .map(|(k, v)| format!("{k}: {v}"))
                .unwrap_or_default();
            return Err(QueryError::unauthorized(format!(
                "not authorized on {} to execute command {{ {target} }}",
                w.db
            )));
        }
    }
    Ok(())
}

/// `usersInfo` naming only the connection's own user (allowed to anyone, as in MongoDB).
fn asks_only_self(conn: &ConnInfo, db: &str, cmd: &Document) -> bool {
    let Some((udb, uname)) = conn.auth.user() else {
        return false;
    };
    match cmd.get("usersInfo") {
        Some(Bson::String(u)) => *u == uname && db == udb,
        Some(Bson::Document(d)) => {
            d.get_str("user") == Ok(uname.as_str()) && d.get_str("db") == Ok(udb.as_str())
        }
        _ => false,
    }
}

/// `connectionStatus`'s `authInfo`: the user, the roles it holds (inherited ones included,
/// as mongod lists them) and, with `show_privileges`, what they grant.
pub(crate) fn auth_info(s: &Server, conn: &ConnInfo, show_privileges: bool) -> Document {
    let (users, roles) = match conn.auth.user() {
        Some((db, user)) => {
            let roles = s
                .auth()
                .users
                .get(&db, &user)
                .map(|u| u.roles)
                .unwrap_or_default();
            (vec![Bson::Document(doc! { "user": user, "db": db })], roles)
        }
        None => (Vec::new(), Vec::new()),
    };
    let mut d = doc! {
        "authenticatedUsers": users,
        "authenticatedUserRoles": s
            .auth()
            .roles
            .closure(&roles)
            .iter()
            .map(|r| Bson::Document(r.to_doc()))
            .collect::<Vec<_>>(),
    };
    if show_privileges {
        let privs = s.auth().roles.privileges(&roles);
        d.insert(
            "authenticatedUserPrivileges",
            privs
                .iter()
                .map(|p| Bson::Document(p.to_doc()))
                .collect::<Vec<_>>(),
        );
    }
    d
}
