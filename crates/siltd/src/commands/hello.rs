//! The handshake: `hello` (`isMaster`, `ismaster`).

use bson::{doc, Bson, Document};

use super::common::MAX_WIRE_VERSION;
use silt_query::QueryError;

use crate::conn::ConnInfo;
use crate::state::{CmdResult, Server};

pub(super) fn hello(s: &Server, name: &str, cmd: &Document, conn: &ConnInfo) -> CmdResult {
    if let Ok(meta) = cmd.get_document("client") {
        if !s.inprog().set_client_metadata(conn.id, meta) {
            return Err(QueryError::client_metadata_cannot_be_mutated(
                "The client metadata document may only be sent in the first hello",
            ));
        }
    }
    let mut d = Document::new();
    // Only to a client that asked (`helloOk: true`), as mongod answers.
    if cmd.get_bool("helloOk").unwrap_or(false) {
        d.insert("helloOk", true);
    }
    let mut fields = Document::new();
    let writable = s.repl_hello_fields(&mut fields);
    if name == "hello" {
        d.insert("isWritablePrimary", writable);
    } else {
        d.insert("ismaster", writable);
    }
    d.extend(fields);
    let counter = s.raft().map_or(0, |r| r.topology_counter());
    d.insert(
        "topologyVersion",
        doc! { "processId": s.process_id(), "counter": counter },
    );
    d.insert(
        "maxBsonObjectSize",
        crate::num::int32(silt_wire::MAX_BSON_OBJECT_BYTES),
    );
    d.insert(
        "maxMessageSizeBytes",
        crate::num::int32(silt_wire::MAX_MESSAGE_BYTES),
    );
    d.insert(
        "maxWriteBatchSize",
        crate::num::int32(silt_wire::MAX_WRITE_BATCH),
    );
    d.insert("localTime", bson::DateTime::now());
    d.insert("logicalSessionTimeoutMinutes", 30);
    d.insert(
        "connectionId",
        i32::try_from(conn.id).map_or(Bson::Int64(conn.id as i64), Bson::Int32),
    );
    d.insert("minWireVersion", 0);
    d.insert("maxWireVersion", MAX_WIRE_VERSION);
    d.insert("readOnly", false);
    crate::auth::hello_fields(s, conn, cmd, &mut d)?;
    if let Some(Bson::Array(wanted)) = cmd.get("compression") {
        let agreed: Vec<Bson> = wanted
            .iter()
            .filter(|c| {
                matches!(c, Bson::String(n) if silt_wire::Compressor::from_name(n)
                    .is_some_and(|c| c != silt_wire::Compressor::Noop && c.is_supported()))
            })
            .cloned()
            .collect();
        d.insert("compression", agreed);
    }
    Ok(d)
}
