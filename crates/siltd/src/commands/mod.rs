//! Command dispatch: the name of a command (the first key of its document) picks a handler.
//! Handlers return the reply body without `ok`; `Server::run_command` adds `ok` or turns an
//! error into MongoDB's error shape.

mod admin;
mod aggregate;
mod catalog;
mod crud;
pub mod plan;

use bson::{Bson, Document};
use silt_query::{QResult, QueryError};

use crate::state::{CmdResult, ConnInfo, Server};

/// Every command name this server answers, for `listCommands`.
pub const COMMANDS: &[&str] = &[
    "aggregate",
    "buildInfo",
    "collStats",
    "connectionStatus",
    "count",
    "create",
    "createIndexes",
    "currentOp",
    "dbStats",
    "delete",
    "distinct",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "endSessions",
    "explain",
    "find",
    "findAndModify",
    "getCmdLineOpts",
    "getLog",
    "getMore",
    "getParameter",
    "hello",
    "hostInfo",
    "insert",
    "isMaster",
    "killAllSessions",
    "killCursors",
    "killOp",
    "listCollections",
    "listCommands",
    "listDatabases",
    "listIndexes",
    "ping",
    "renameCollection",
    "serverStatus",
    "setParameter",
    "startSession",
    "update",
    "whatsmyuri",
];

pub fn dispatch(s: &Server, db: &str, name: &str, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    match name {
        "hello" | "isMaster" | "ismaster" => admin::hello(s, name, cmd, conn),
        "ping" => Ok(Document::new()),
        "buildInfo" | "buildinfo" => admin::build_info(),
        "serverStatus" => admin::server_status(s),
        "hostInfo" => admin::host_info(),
        "getParameter" => admin::get_parameter(s, cmd),
        "setParameter" => admin::set_parameter(s, cmd),
        "getCmdLineOpts" => admin::cmd_line_opts(s),
        "connectionStatus" => admin::connection_status(),
        "whatsmyuri" => Ok(bson::doc! { "you": conn.peer.clone() }),
        "getLog" => admin::get_log(s, cmd),
        "currentOp" => admin::current_op(s, db, cmd),
        "killOp" => admin::kill_op(s, db, cmd),
        "listCommands" => admin::list_commands(),
        "endSessions" | "killAllSessions" | "killSessions" | "refreshSessions" => {
            Ok(Document::new())
        }
        "startSession" => admin::start_session(),
        "listDatabases" => catalog::list_databases(s, db, cmd),
        "dropDatabase" => catalog::drop_database(s, db),
        "dbStats" => catalog::db_stats(s, db, cmd),
        "collStats" => catalog::coll_stats(s, db, cmd),
        "compact" => catalog::compact(s, db, cmd),
        "create" => catalog::create(s, db, cmd),
        "drop" => catalog::drop(s, db, cmd),
        "renameCollection" => catalog::rename(s, db, cmd),
        "listCollections" => catalog::list_collections(s, db, cmd),
        "listIndexes" => catalog::list_indexes(s, db, cmd),
        "createIndexes" => catalog::create_indexes(s, db, cmd),
        "dropIndexes" | "deleteIndexes" => catalog::drop_indexes(s, db, cmd),
        "insert" => crud::insert(s, db, cmd),
        "find" => crud::find(s, db, cmd),
        "explain" => crud::explain(s, db, cmd),
        "getMore" => crud::get_more(s, db, cmd),
        "killCursors" => crud::kill_cursors(s, db, cmd),
        "update" => crud::update(s, db, cmd),
        "delete" => crud::delete(s, db, cmd),
        "findAndModify" | "findandmodify" => crud::find_and_modify(s, db, cmd),
        "count" => crud::count(s, db, cmd),
        "distinct" => crud::distinct(s, db, cmd),
        "aggregate" => aggregate::aggregate(s, db, cmd),
        _ => Err(QueryError::command_not_found(format!(
            "no such command: '{name}'"
        ))),
    }
}

// ---- argument helpers shared by the handlers ----

/// The collection name a command names in its first field.
pub fn coll_arg(db: &str, cmd: &Document, name: &str) -> QResult<String> {
    match cmd.get(name) {
        Some(Bson::String(c)) => {
            crate::state::check_coll_name(db, c)?;
            Ok(c.clone())
        }
        Some(other) => Err(QueryError::located(
            73,
            format!("collection name has invalid type {}", type_name(other)),
        ))
        .map_err(|mut e| {
            e.code_name = "InvalidNamespace";
            e
        }),
        None => Err(QueryError::failed_to_parse(format!("missing '{name}'"))),
    }
}

/// An optional sub-document argument.
pub fn doc_arg<'a>(cmd: &'a Document, name: &str) -> QResult<Option<&'a Document>> {
    match cmd.get(name) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => Err(QueryError::type_mismatch(format!(
            "BSON field '{name}' is the wrong type '{}', expected type 'object'",
            type_name(other)
        ))),
    }
}

/// An optional boolean argument (numbers are accepted as MongoDB does).
pub fn bool_arg(cmd: &Document, name: &str) -> QResult<Option<bool>> {
    match cmd.get(name) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(Bson::Int32(i)) => Ok(Some(*i != 0)),
        Some(Bson::Int64(i)) => Ok(Some(*i != 0)),
        Some(Bson::Double(d)) => Ok(Some(*d != 0.0)),
        Some(other) => Err(QueryError::type_mismatch(format!(
            "BSON field '{name}' is the wrong type '{}', expected type 'bool'",
            type_name(other)
        ))),
    }
}

/// An optional non-negative integer argument.
pub fn int_arg(cmd: &Document, name: &str) -> QResult<Option<i64>> {
    let v = match cmd.get(name) {
        None | Some(Bson::Null) => return Ok(None),
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.is_finite() => *d as i64,
        Some(other) => {
            return Err(QueryError::type_mismatch(format!(
                "BSON field '{name}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                type_name(other)
            )))
        }
    };
    Ok(Some(v))
}

pub use silt_bson::compare::type_name;

/// `{cursor: {firstBatch, id, ns}}`.
pub fn cursor_reply(ns: &str, batch: Vec<Document>, id: i64, first: bool) -> Document {
    let field = if first { "firstBatch" } else { "nextBatch" };
    let mut c = Document::new();
    c.insert(field, batch);
    c.insert("id", id);
    c.insert("ns", ns);
    bson::doc! { "cursor": c }
}
