//! The set's configuration document, as `replSetGetConfig` answers it, and its copy in
//! `local.system.replset`, where mongod keeps it and tools read it (mongosh's
//! `rs.printSecondaryReplicationInfo()` checks that the collection is not empty). The copy is
//! this member's own (the `local` database is not replicated), rewritten when it changes.

use bson::{Bson, Document};
use silt_collection::{id_key, CollError};

use crate::state::Server;

/// Where mongod keeps the set's configuration.
const NS: &str = "local.system.replset";

impl Server {
    /// The set's configuration (`replSetGetConfig.config`), `None` without `--replSet`.
    pub(crate) fn replset_config(&self) -> Option<Document> {
        let rs = self.repl()?;
        let mut config = rs.config();
        if let Some(set) = self.raft().and_then(|r| r.config_fields()) {
            config.extend(set);
            // The timing the members really keep (`silt_raft::MemberOptions`).
            let timing = silt_raft::MemberOptions::default();
            if let Ok(settings) = config.get_document_mut("settings") {
                let millis =
                    |d: std::time::Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
                settings.insert("heartbeatIntervalMillis", millis(timing.heartbeat));
                settings.insert("electionTimeoutMillis", millis(timing.election_timeout.1));
            }
        }
        Some(config)
    }

    /// Bring `local.system.replset` up to date with [`Server::replset_config`].
    pub(crate) fn record_replset_config(&self) -> Result<(), CollError> {
        let Some(config) = self.replset_config() else {
            return Ok(());
        };
        let id = config.get("_id").cloned().unwrap_or(Bson::Null);
        let c = self.store().get_or_create(NS)?;
        let lock = c.lock_doc(id_key(&id))?;
        match lock.read()? {
            None => {
                drop(lock);
                c.insert(&config)
            }
            Some(old) if old != config => c.replace(&lock, &old, &config),
            Some(_) => Ok(()),
        }
    }
}
