//! Command dispatch: the name of a command (the first key of its document) picks an entry of
//! the command table (`table.rs`); `args.rs` checks the command's fields against it, then its
//! handler runs. Handlers return the reply body without `ok`; `Server::run_command` adds `ok`
//! or turns an error into MongoDB's error shape.
//!
//! One file per command, named after it (`find.rs`, `create_indexes.rs`, ...); the few that
//! only answer `ok` (`ping`, and `commitTransaction`/`abortTransaction`, whose work
//! `crate::transactions` does before dispatch) and
//! `whatsmyuri` live in the table. Shared pieces: `common.rs` (argument helpers), `query.rs`
//! (a find's query), `write.rs` (write results and errors), `modify.rs` (updating and
//! deleting what a filter selects), `index_stats.rs` (the `$indexStats` stage).

pub use agg_write::drop_leftovers as drop_out_leftovers;
pub use common::FCV;

mod add_partition;
mod agg_write;
mod aggregate;
mod api;
mod args;
mod build_info;
mod change_role;
mod coll_mod;
mod coll_stats;
mod common;
mod compact;
mod configure_fail_point;
mod connection_status;
mod count;
mod create;
mod create_indexes;
mod create_role;
mod create_user;
mod current_op;
mod data_size;
mod db_hash;
mod db_stats;
mod delete;
mod distinct;
mod drop;
mod drop_database;
mod drop_indexes;
mod drop_partition;
mod drop_role;
mod drop_user;
mod end_sessions;
mod explain;
mod features;
mod fields;
mod find;
mod find_and_modify;
mod fsync;
mod get_cmd_line_opts;
mod get_log;
mod get_more;
mod get_parameter;
mod get_partition_info;
mod grant_roles;
mod hello;
mod host_info;
mod index_stats;
mod insert;
mod kill_cursors;
mod kill_op;
mod list_collections;
mod list_commands;
mod list_databases;
mod list_indexes;
mod log_rotate;
mod merge_authz;
mod modify;
mod profile;
mod query;
mod re_index;
mod rename_collection;
mod repl_set_get_config;
mod repl_set_get_status;
mod repl_set_initiate;
mod roles_info;
mod rw_concern_defaults;
mod sasl;
mod server_status;
mod set_parameter;
mod shutdown;
mod start_session;
mod table;
mod top;
mod update;
mod update_user;
mod users_info;
mod validate;
mod write;

use bson::Document;
use silt_query::collation::Collation;
use silt_query::QueryError;

use crate::state::{CmdResult, Ctx, Server};

pub use common::type_name;
pub use server_status::server_status;
pub use table::{Command, TABLE};

/// Delete at most `cap` documents of `ns` matching `filter`, outside any transaction (the
/// TTL monitor's batches): how many were deleted.
pub fn delete_batch(
    s: &Server,
    ns: &str,
    filter: &Document,
    cap: usize,
) -> Result<usize, QueryError> {
    let conn = crate::state::ConnInfo::new(0, "TTLMonitor".into());
    let op = Ctx::new(&conn);
    modify::delete_some(s, &op, ns, filter, None, true, None, cap).map(|d| d.len())
}

/// Apply a `--setParameter NAME=VALUE` given at start-up, as the `setParameter` command would.
pub fn startup_parameter(s: &Server, name: &str, value: &str) -> Result<(), QueryError> {
    let v = match value {
        "true" => bson::Bson::Boolean(true),
        "false" => bson::Bson::Boolean(false),
        v => match v.parse::<i64>() {
            Ok(n) => i32::try_from(n).map_or(bson::Bson::Int64(n), bson::Bson::Int32),
            Err(_) => bson::Bson::String(v.to_string()),
        },
    };
    let mut cmd = bson::doc! { "setParameter": 1 };
    cmd.insert(name, v);
    set_parameter::set_parameter(s, &cmd).map(|_| ())
}

/// Commands that write documents, indexes, users or the catalog (by table name): they wait while
/// `fsync` holds its lock, and after them write concern `j`/`majority` makes the log durable
/// (`crate::transactions`).
const WRITES: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "create",
    "createIndexes",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "renameCollection",
    "collMod",
    "compact",
    "reIndex",
    "addPartition",
    "dropPartition",
    "commitTransaction",
    "abortTransaction",
    "createUser",
    "updateUser",
    "dropUser",
    "dropAllUsersFromDatabase",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "createRole",
    "updateRole",
    "dropRole",
    "dropAllRolesFromDatabase",
    "grantRolesToRole",
    "revokeRolesFromRole",
    "grantPrivilegesToRole",
    "revokePrivilegesFromRole",
    "_mergeAuthzCollections",
    "setDefaultRWConcern",
];

/// Whether command `name` (or an alias of it) writes.
pub fn is_write(name: &str) -> bool {
    lookup(name).is_some_and(|c| WRITES.contains(&c.name))
}

/// The table entry for a command name or alias.
pub fn lookup(name: &str) -> Option<&'static Command> {
    TABLE
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// Run the command `name` after checking its fields.
pub fn dispatch(s: &Server, db: &str, name: &str, cmd: &Document, op: &Ctx) -> CmdResult {
    let Some(c) = lookup(name) else {
        return Err(QueryError::command_not_found(format!(
            "no such command: '{name}'"
        )));
    };
    api::check(c.name, cmd)?;
    args::check(name, c.fields, cmd)?;
    if WRITES.contains(&c.name) && s.fsync_lock.is_locked() {
        // `fsync` with `lock: true`: writes wait for `fsyncUnlock`.
        s.fsync_lock.wait_for_writes(|| s.shutting_down());
    }
    op.bypass_validation.set(matches!(
        cmd.get("bypassDocumentValidation"),
        Some(bson::Bson::Boolean(true))
    ));
    // The command's collation holds for everything it compares, until it returns; its
    // cursors take it along to their getMores. Update and delete statements carry their own.
    let collation = match c.name {
        "find" | "count" | "distinct" | "aggregate" | "findAndModify" => {
            let ns = match cmd.iter().next() {
                Some((_, bson::Bson::String(coll))) => Some(format!("{db}.{coll}")),
                _ => None,
            };
            common::effective_collation(s, ns.as_deref(), cmd)?
        }
        _ => None,
    };
    let _collation = Collation::scope(collation.as_ref());
    (c.run)(s, db, cmd, op)
}
