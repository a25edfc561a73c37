//! The commands: the name of a command (the first key of its document) picks an entry of the
//! command table (`table.rs`), whose properties (`props.rs`) the request pipeline
//! (`crate::request`) reads; `args.rs` checks the command's fields against it, then its
//! handler runs. Handlers return the reply body without `ok`; the pipeline adds `ok` or turns
//! an error into MongoDB's error shape.
//!
//! One file per command, named after it (`find.rs`, `create_indexes.rs`, ...); the few that
//! only answer `ok` (`ping`, `whatsmyuri`) live in the table, and `commitTransaction` and
//! `abortTransaction` call `crate::transactions`, which owns sessions' transactions. Shared pieces: `common.rs` (argument helpers), `query.rs`
//! (a find's query), `write.rs` (write results and errors), `modify.rs` (updating and
//! deleting what a filter selects), `index_stats.rs` (the `$indexStats` stage).

pub(crate) use agg_write::drop_leftovers as drop_out_leftovers;
pub(crate) use common::FCV;

mod add_partition;
mod agg_write;
mod aggregate;
mod api;
mod apply_ops;
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
mod max_time;
mod merge_authz;
mod modify;
mod profile;
mod props;
mod query;
mod re_index;
mod rename_collection;
mod repl_set_get_config;
mod repl_set_get_status;
mod repl_set_initiate;
mod repl_set_reconfig;
mod repl_set_resize_oplog;
mod repl_set_step_down;
mod roles_info;
mod rw_concern_defaults;
mod sasl;
mod server_status;
mod set_parameter;
mod shutdown;
mod silt_raft;
mod start_session;
mod table;
mod top;
mod update;
mod update_user;
mod users_info;
mod validate;
mod write;

use bson::Document;
use silt_query::QueryError;

use crate::ctx::Ctx;
use crate::state::Server;

pub(crate) use common::{effective_collation, type_name};
pub(crate) use props::OpKind;
pub(crate) use server_status::server_status;
pub(crate) use table::{Command, TABLE};

/// Delete at most `cap` documents of `ns` matching `filter`, outside any transaction (the
/// TTL monitor's batches): how many were deleted.
pub(crate) fn delete_batch(
    s: &Server,
    ns: &str,
    filter: &Document,
    cap: usize,
) -> Result<usize, QueryError> {
    let conn = crate::conn::ConnInfo::new(0, "TTLMonitor".into());
    let none = Document::new();
    let op = Ctx::new(&conn, &none);
    modify::delete_some(s, &op, ns, filter, None, true, None, cap).map(|d| d.len())
}

/// Apply a `--setParameter NAME=VALUE` given at start-up, as the `setParameter` command would.
pub(crate) fn startup_parameter(s: &Server, name: &str, value: &str) -> Result<(), QueryError> {
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

/// Whether command `name` (or an alias of it) writes.
pub(crate) fn is_write(name: &str) -> bool {
    lookup(name).is_some_and(|c| c.props.writes)
}

/// The table entry for a command name or alias.
pub(crate) fn lookup(name: &str) -> Option<&'static Command> {
    TABLE
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
}

/// Check a command's fields against its entry `c` (sent as `name`): the versioned API, then
/// each field (`args.rs`).
pub(crate) fn check_fields(c: &Command, name: &str, cmd: &Document) -> Result<(), QueryError> {
    api::check(c, cmd)?;
    args::check(name, c.fields, cmd)?;
    max_time::parse(name, cmd).map(drop)
}
