//! The TTL monitor: a background thread that, every `ttlMonitorSleepSecs` (default 60),
//! deletes the documents whose TTL-indexed date is older than the index's
//! `expireAfterSeconds`, as mongod's TTLMonitor does. A document expires when the indexed field
//! is a date (or an array holding one) earlier than now minus `expireAfterSeconds`; other
//! values never expire. Deletes go through the normal write path in batches of
//! [`BATCH`] documents, each document under its own lock, so other work goes on between them.
//! `serverStatus().metrics.ttl` counts passes and deleted documents.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bson::{doc, Bson, Document};

use crate::state::Server;

/// Documents deleted per batch.
pub(crate) const BATCH: usize = 1000;

/// The monitor's settings and counters.
#[derive(Debug)]
pub(crate) struct TtlState {
    /// `ttlMonitorSleepSecs`.
    pub sleep_secs: AtomicU64,
    /// `ttlMonitorEnabled`.
    pub enabled: AtomicBool,
    pub passes: AtomicU64,
    pub sub_passes: AtomicU64,
    pub deleted: AtomicU64,
}

impl Default for TtlState {
    fn default() -> Self {
        TtlState {
            sleep_secs: AtomicU64::new(60),
            enabled: AtomicBool::new(true),
            passes: AtomicU64::new(0),
            sub_passes: AtomicU64::new(0),
            deleted: AtomicU64::new(0),
        }
    }
}

impl TtlState {
    /// `serverStatus().metrics.ttl`.
    pub(crate) fn metrics(&self) -> Document {
        doc! {
            "deletedDocuments": self.deleted.load(Ordering::Relaxed) as i64,
            "passes": self.passes.load(Ordering::Relaxed) as i64,
            "subPasses": self.sub_passes.load(Ordering::Relaxed) as i64,
        }
    }
}

/// Start the monitor thread. It holds the server weakly and ends when the server is gone.
pub(crate) fn spawn(server: &Arc<Server>) {
    let weak: Weak<Server> = Arc::downgrade(server);
    let started = std::thread::Builder::new()
        .name("ttl-monitor".into())
        .spawn(move || loop {
            // Sleep in short steps so a changed interval and shutdown are noticed.
            let mut slept = Duration::ZERO;
            loop {
                let Some(s) = weak.upgrade() else { return };
                let want = Duration::from_secs(s.ttl().sleep_secs.load(Ordering::Relaxed).max(1));
                drop(s);
                if slept >= want {
                    break;
                }
                let step = Duration::from_millis(200).min(want - slept);
                std::thread::sleep(step);
                slept += step;
            }
            let Some(s) = weak.upgrade() else { return };
            if s.ttl().enabled.load(Ordering::Relaxed) && !s.shutting_down() {
                pass(&s);
            }
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "cannot start the TTL monitor");
    }
}

/// One pass over every TTL index.
pub(crate) fn pass(s: &Server) {
    // A secondary of a multi-member set deletes what the primary's passes delete, through
    // the log.
    if s.raft()
        .is_some_and(crate::raft_member::RaftMember::follows)
    {
        return;
    }
    s.ttl().passes.fetch_add(1, Ordering::Relaxed);
    s.ttl().sub_passes.fetch_add(1, Ordering::Relaxed);
    let now = bson::DateTime::now().timestamp_millis();
    for db in s.store().list_databases() {
        for (name, c) in s.store().list_collections(&db) {
            let ns = format!("{db}.{name}");
            for ix in c.indexes() {
                let Some(secs) = ix.spec.expire_after_secs else {
                    continue;
                };
                let Some((field, _)) = ix.spec.fields.first() else {
                    continue;
                };
                let cutoff = bson::DateTime::from_millis(now.saturating_sub(secs * 1000));
                let mut filter = doc! { field.clone(): { "$lt": cutoff } };
                if let Some((p, _)) = &ix.spec.partial {
                    filter = doc! { "$and": [Bson::Document(filter), Bson::Document(p.clone())] };
                }
                expire(s, &ns, ix.spec.name.as_str(), &filter);
            }
        }
    }
}

fn expire(s: &Server, ns: &str, index: &str, filter: &Document) {
    loop {
        if s.shutting_down() {
            return;
        }
        match crate::commands::delete_batch(s, ns, filter, BATCH) {
            Ok(n) => {
                s.ttl().deleted.fetch_add(n as u64, Ordering::Relaxed);
                if n > 0 {
                    tracing::debug!(ns, index, deleted = n, "TTL deletes");
                }
                if n < BATCH {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(ns, index, error = %e, "TTL pass failed");
                return;
            }
        }
    }
}
