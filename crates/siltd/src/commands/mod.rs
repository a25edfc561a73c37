//! Command dispatch: the name of a command (the first key of its document) picks a handler.
//! Handlers return the reply body without `ok`; `Server::run_command` adds `ok` or turns an
//! error into MongoDB's error shape.

mod admin;
mod aggregate;
mod args;
mod catalog;
mod crud;
mod fail_point;
mod index_stats;
mod validate;

use bson::{Bson, Document};
use silt_query::{QResult, QueryError};

use crate::state::{CmdResult, ConnInfo, Server};

use args::Fields;

/// A command handler: `(server, database, command document, connection)`.
pub type Handler = fn(&Server, &str, &Document, &ConnInfo) -> CmdResult;

/// One command: its name, the other spellings it answers to, what it accepts, its handler.
#[derive(Debug)]
pub struct Command {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub fields: Fields,
    pub help: &'static str,
    pub admin_only: bool,
    pub run: Handler,
}

const fn only(honoured: &'static [&'static str], refused: &'static [&'static str]) -> Fields {
    Fields::Only { honoured, refused }
}

/// Every command siltd answers: what both the dispatcher and `listCommands` read.
pub const TABLE: &[Command] = &[
    Command {
        name: "abortTransaction",
        aliases: &[],
        fields: Fields::Any,
        help: "refused: transactions need a replica set",
        admin_only: true,
        run: |_, _, _, _| Ok(Document::new()),
    },
    Command {
        name: "aggregate",
        aliases: &[],
        fields: only(
            &[
                "pipeline",
                "cursor",
                "explain",
                "allowDiskUse",
                "hint",
                "bypassDocumentValidation",
            ],
            &[
                "collation",
                "let",
                "needsMerge",
                "fromMongos",
                "exchange",
                "runtimeConstants",
                "isMapReduceCommand",
                "collectionUUID",
                "$_passthroughToShard",
                "encryptionInformation",
                "$_externalDataSources",
                "sampleId",
                "stmtId",
                "$_isClusterQueryWithoutShardKeyCmd",
                "$_requestResumeToken",
                "$_resumeAfter",
                "$_requestReshardingResumeToken",
            ],
        ),
        help: "run an aggregation pipeline",
        admin_only: false,
        run: |s, db, c, _| aggregate::aggregate(s, db, c),
    },
    Command {
        name: "buildInfo",
        aliases: &["buildinfo"],
        fields: Fields::Any,
        help: "version and build details",
        admin_only: false,
        run: |_, _, _, _| admin::build_info(),
    },
    Command {
        name: "collStats",
        aliases: &[],
        fields: Fields::Any,
        help: "collection statistics",
        admin_only: false,
        run: |s, db, c, _| catalog::coll_stats(s, db, c),
    },
    Command {
        name: "commitTransaction",
        aliases: &[],
        fields: Fields::Any,
        help: "refused: transactions need a replica set",
        admin_only: true,
        run: |_, _, _, _| Ok(Document::new()),
    },
    Command {
        name: "compact",
        aliases: &[],
        fields: Fields::Any,
        help: "apply every pending message of a collection, then checkpoint",
        admin_only: false,
        run: |s, db, c, _| catalog::compact(s, db, c),
    },
    Command {
        name: "configureFailPoint",
        aliases: &[],
        fields: Fields::Any,
        help: "test hooks (with --enable-test-commands)",
        admin_only: true,
        run: |s, db, c, _| fail_point::configure_fail_point(s, db, c),
    },
    Command {
        name: "connectionStatus",
        aliases: &[],
        fields: Fields::Any,
        help: "the connection's users and roles",
        admin_only: false,
        run: |_, _, _, _| admin::connection_status(),
    },
    Command {
        name: "count",
        aliases: &[],
        fields: only(
            &["query", "limit", "skip", "hint", "fields"],
            &[
                "collation",
                "encryptionInformation",
                "collectionUUID",
                "mirrored",
                "sampleId",
            ],
        ),
        help: "count matching documents",
        admin_only: false,
        run: |s, db, c, _| crud::count(s, db, c),
    },
    Command {
        name: "create",
        aliases: &[],
        fields: Fields::Any,
        help: "create a collection",
        admin_only: false,
        run: |s, db, c, _| catalog::create(s, db, c),
    },
    Command {
        name: "createIndexes",
        aliases: &[],
        fields: only(
            &["indexes"],
            &[
                "v",
                "ignoreUnknownIndexOptions",
                "commitQuorum",
                "isTimeseriesNamespace",
                "collectionUUID",
            ],
        ),
        help: "build indexes",
        admin_only: false,
        run: |s, db, c, _| catalog::create_indexes(s, db, c),
    },
    Command {
        name: "currentOp",
        aliases: &[],
        fields: Fields::Any,
        help: "operations in progress",
        admin_only: true,
        run: |s, db, c, _| admin::current_op(s, db, c),
    },
    Command {
        name: "dbStats",
        aliases: &[],
        fields: Fields::Any,
        help: "database statistics",
        admin_only: false,
        run: |s, db, c, _| catalog::db_stats(s, db, c),
    },
    Command {
        name: "delete",
        aliases: &[],
        fields: only(
            &["deletes", "ordered", "bypassDocumentValidation"],
            &[
                "let",
                "runtimeConstants",
                "stmtIds",
                "isTimeseriesNamespace",
                "collectionUUID",
                "encryptionInformation",
            ],
        ),
        help: "delete documents",
        admin_only: false,
        run: |s, db, c, _| crud::delete(s, db, c),
    },
    Command {
        name: "distinct",
        aliases: &[],
        fields: only(
            &["key", "query"],
            &[
                "collation",
                "hint",
                "collectionUUID",
                "mirrored",
                "sampleId",
            ],
        ),
        help: "distinct values of a field",
        admin_only: false,
        run: |s, db, c, _| crud::distinct(s, db, c),
    },
    Command {
        name: "drop",
        aliases: &[],
        fields: only(&[], &["collectionUUID"]),
        help: "drop a collection",
        admin_only: false,
        run: |s, db, c, _| catalog::drop(s, db, c),
    },
    Command {
        name: "dropDatabase",
        aliases: &[],
        fields: Fields::Any,
        help: "drop a database",
        admin_only: false,
        run: |s, db, _, _| catalog::drop_database(s, db),
    },
    Command {
        name: "dropIndexes",
        aliases: &["deleteIndexes"],
        fields: only(&["index"], &["isTimeseriesNamespace", "collectionUUID"]),
        help: "drop indexes",
        admin_only: false,
        run: |s, db, c, _| catalog::drop_indexes(s, db, c),
    },
    Command {
        name: "endSessions",
        aliases: &["killAllSessions", "killSessions", "refreshSessions"],
        fields: Fields::Any,
        help: "end logical sessions",
        admin_only: false,
        run: |_, _, _, _| Ok(Document::new()),
    },
    Command {
        name: "explain",
        aliases: &[],
        fields: only(&["verbosity"], &[]),
        help: "explain a find",
        admin_only: false,
        run: |s, db, c, _| crud::explain(s, db, c),
    },
    Command {
        name: "find",
        aliases: &[],
        fields: only(
            &[
                "filter",
                "projection",
                "sort",
                "hint",
                "skip",
                "limit",
                "batchSize",
                "singleBatch",
                "allowDiskUse",
                "allowPartialResults",
                "oplogReplay",
                "tailable",
            ],
            &[
                "collation",
                "let",
                "min",
                "max",
                "returnKey",
                "showRecordId",
                "noCursorTimeout",
                "awaitData",
                "term",
                "readOnce",
                "allowSpeculativeMajorityRead",
                "$_requestResumeToken",
                "$_resumeAfter",
                "runtimeConstants",
                "collectionUUID",
                "encryptionInformation",
                "mirrored",
                "sampleId",
            ],
        ),
        help: "query a collection",
        admin_only: false,
        run: |s, db, c, _| crud::find(s, db, c),
    },
    Command {
        name: "findAndModify",
        aliases: &["findandmodify"],
        fields: only(
            &[
                "query",
                "fields",
                "sort",
                "remove",
                "update",
                "upsert",
                "new",
                "arrayFilters",
                "hint",
                "bypassDocumentValidation",
            ],
            &[
                "collation",
                "let",
                "batchSize",
                "singleBatch",
                "runtimeConstants",
                "encryptionInformation",
                "mirrored",
                "sampleId",
                "collectionUUID",
            ],
        ),
        help: "update or remove one document and return it",
        admin_only: false,
        run: |s, db, c, _| crud::find_and_modify(s, db, c),
    },
    Command {
        name: "getCmdLineOpts",
        aliases: &[],
        fields: Fields::Any,
        help: "the server's flags",
        admin_only: true,
        run: |s, _, _, _| admin::cmd_line_opts(s),
    },
    Command {
        name: "getLog",
        aliases: &[],
        fields: Fields::Any,
        help: "recent log lines",
        admin_only: true,
        run: |s, _, c, _| admin::get_log(s, c),
    },
    Command {
        name: "getMore",
        aliases: &[],
        fields: only(
            &["collection", "batchSize"],
            &["term", "lastKnownCommittedOpTime"],
        ),
        help: "the next batch of a cursor",
        admin_only: false,
        run: |s, db, c, _| crud::get_more(s, db, c),
    },
    Command {
        name: "getParameter",
        aliases: &[],
        fields: Fields::Any,
        help: "server parameters",
        admin_only: true,
        run: |s, _, c, _| admin::get_parameter(s, c),
    },
    Command {
        name: "hello",
        aliases: &["isMaster", "ismaster"],
        fields: Fields::Any,
        help: "the server's role and limits",
        admin_only: false,
        run: |s, _, c, conn| {
            admin::hello(s, c.keys().next().map_or("hello", |k| k.as_str()), c, conn)
        },
    },
    Command {
        name: "hostInfo",
        aliases: &[],
        fields: Fields::Any,
        help: "the host's system",
        admin_only: false,
        run: |_, _, _, _| admin::host_info(),
    },
    Command {
        name: "insert",
        aliases: &[],
        fields: only(
            &[
                "documents",
                "ordered",
                "bypassDocumentValidation",
                "ignoreDuplicates",
            ],
            &[
                "stmtIds",
                "isTimeseriesNamespace",
                "collectionUUID",
                "encryptionInformation",
            ],
        ),
        help: "insert documents",
        admin_only: false,
        run: |s, db, c, _| crud::insert(s, db, c),
    },
    Command {
        name: "killCursors",
        aliases: &[],
        fields: only(&["cursors"], &[]),
        help: "close cursors",
        admin_only: false,
        run: |s, db, c, _| crud::kill_cursors(s, db, c),
    },
    Command {
        name: "killOp",
        aliases: &[],
        fields: Fields::Any,
        help: "interrupt an operation",
        admin_only: true,
        run: |s, db, c, _| admin::kill_op(s, db, c),
    },
    Command {
        name: "listCollections",
        aliases: &[],
        fields: only(
            &["filter", "nameOnly", "authorizedCollections", "cursor"],
            &["includePendingDrops"],
        ),
        help: "the collections of a database",
        admin_only: false,
        run: |s, db, c, _| catalog::list_collections(s, db, c),
    },
    Command {
        name: "listCommands",
        aliases: &[],
        fields: Fields::Any,
        help: "this list",
        admin_only: false,
        run: |_, _, _, _| admin::list_commands(),
    },
    Command {
        name: "listDatabases",
        aliases: &[],
        fields: Fields::Any,
        help: "the databases",
        admin_only: true,
        run: |s, db, c, _| catalog::list_databases(s, db, c),
    },
    Command {
        name: "listIndexes",
        aliases: &[],
        fields: only(
            &["cursor"],
            &[
                "includeBuildUUIDs",
                "includeIndexBuildInfo",
                "isTimeseriesNamespace",
            ],
        ),
        help: "the indexes of a collection",
        admin_only: false,
        run: |s, db, c, _| catalog::list_indexes(s, db, c),
    },
    Command {
        name: "ping",
        aliases: &[],
        fields: Fields::Any,
        help: "answer ok",
        admin_only: false,
        run: |_, _, _, _| Ok(Document::new()),
    },
    Command {
        name: "renameCollection",
        aliases: &[],
        fields: only(&["to", "dropTarget"], &["stayTemp", "collectionUUID"]),
        help: "rename a collection",
        admin_only: true,
        run: |s, db, c, _| catalog::rename(s, db, c),
    },
    Command {
        name: "serverStatus",
        aliases: &[],
        fields: Fields::Any,
        help: "server statistics",
        admin_only: false,
        run: |s, _, _, _| admin::server_status(s),
    },
    Command {
        name: "setParameter",
        aliases: &[],
        fields: Fields::Any,
        help: "change server parameters",
        admin_only: true,
        run: |s, _, c, _| admin::set_parameter(s, c),
    },
    Command {
        name: "startSession",
        aliases: &[],
        fields: Fields::Any,
        help: "start a logical session",
        admin_only: false,
        run: |_, _, _, _| admin::start_session(),
    },
    Command {
        name: "update",
        aliases: &[],
        fields: only(
            &[
                "updates",
                "ordered",
                "bypassDocumentValidation",
                "fastUpdate",
            ],
            &[
                "let",
                "runtimeConstants",
                "mirrored",
                "stmtIds",
                "isTimeseriesNamespace",
                "collectionUUID",
                "encryptionInformation",
            ],
        ),
        help: "update documents",
        admin_only: false,
        run: |s, db, c, _| crud::update(s, db, c),
    },
    Command {
        name: "validate",
        aliases: &[],
        fields: Fields::Any,
        help: "check a collection's documents, indexes and files",
        admin_only: false,
        run: |s, db, c, _| validate::validate(s, db, c),
    },
    Command {
        name: "whatsmyuri",
        aliases: &[],
        fields: Fields::Any,
        help: "the client's address",
        admin_only: false,
        run: |_, _, _, conn| Ok(bson::doc! { "you": conn.peer.clone() }),
    },
];

/// The table entry for a command name or alias.
pub fn lookup(name: &str) -> Option<&'static Command> {
    TABLE
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// Run the command `name` after checking its fields.
pub fn dispatch(s: &Server, db: &str, name: &str, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    let Some(c) = lookup(name) else {
        return Err(QueryError::command_not_found(format!(
            "no such command: '{name}'"
        )));
    };
    args::check(name, c.fields, cmd)?;
    (c.run)(s, db, cmd, conn)
}

// ---- argument helpers shared by the handlers ----

/// The collection name a command names in its first field.
pub fn coll_arg(db: &str, cmd: &Document, name: &str) -> QResult<String> {
    match cmd.get(name) {
        Some(Bson::String(c)) => {
            crate::state::check_coll_name(db, c)?;
            Ok(c.clone())
        }
        Some(other) => Err(QueryError::invalid_namespace(format!(
            "collection name has invalid type {}",
            type_name(other)
        ))),
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
