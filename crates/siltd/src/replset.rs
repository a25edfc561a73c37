//! The one-member replica set (`--replSet NAME`): what a primary tells drivers about itself.
//!
//! Drivers run transactions and retryable writes only against a replica set, so siltd can
//! present itself as the primary of a set whose only member it is. It is primary from the
//! start (as if `replSetInitiate` had run with the default configuration), its term and
//! config version are 1, and it never steps down. It keeps an oplog
//! (`silt_collection::oplog`) but has no other member: write concern `majority` is met by
//! making the write durable in the log, as a one-member set with
//! `writeConcernMajorityJournalDefault` does.
//!
//! The cluster time is a `Timestamp(seconds, increment)` from the member's clock, which
//! stamps every oplog entry and resumes after the newest one on restart; every reply carries
//! it (`$clusterTime`, `operationTime`), unsigned (keyId 0), as on a deployment without keys.

use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document, Timestamp};
use silt_collection::oplog::Clock;

/// The set this server is the only member (and the primary) of.
#[derive(Debug)]
pub(crate) struct ReplSet {
    pub name: String,
    /// This member's `host:port`, as `hello.me`, `hosts` and the config name it.
    pub me: String,
    pub replica_set_id: ObjectId,
    /// The id of the (only) election, which made this process primary in term 1.
    pub election_id: ObjectId,
    pub elected: bson::DateTime,
    /// The member's clock, shared with its oplog (which stamps every entry from it).
    clock: Arc<Clock>,
}

impl ReplSet {
    /// The set `name`, for a server listening on `bind:port`.
    pub(crate) fn new(name: &str, bind: &str, port: u16, clock: Arc<Clock>) -> ReplSet {
        // A wildcard bind is reached by the host's name; a specific address by itself (not
        // `localhost`, which some clients resolve to ::1 first).
        let host = match bind {
            "0.0.0.0" | "::" => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "127.0.0.1".into()),
            b => b
                .split(',')
                .next()
                .unwrap_or("127.0.0.1")
                .trim()
                .to_string(),
        };
        ReplSet {
            name: name.to_string(),
            me: format!("{host}:{port}"),
            replica_set_id: ObjectId::new(),
            election_id: ObjectId::parse_str("7fffffff0000000000000001").expect("a valid id"),
            elected: bson::DateTime::now(),
            clock,
        }
    }

    /// The current cluster time (the last one handed out).
    pub(crate) fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// A new cluster time, after every earlier one: the time of a write (or of a snapshot
    /// read that may later be repeated at it).
    pub(crate) fn tick(&self) -> Timestamp {
        self.clock.tick()
    }

    /// The `$clusterTime` document replies carry.
    pub(crate) fn cluster_time(&self) -> Document {
        doc! {
            "clusterTime": self.now(),
            "signature": {
                "hash": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] },
                "keyId": 0i64,
            },
        }
    }

    /// An optime `{ts, t}` at `t` in term 1.
    fn optime(t: Timestamp) -> Document {
        doc! { "ts": t, "t": 1i64 }
    }

    fn date_of(t: Timestamp) -> bson::DateTime {
        bson::DateTime::from_millis(t.time as i64 * 1000)
    }

    /// The replica set fields of `hello` for this primary.
    pub(crate) fn hello_fields(&self, d: &mut Document) {
        let now = self.now();
        d.insert("hosts", vec![Bson::String(self.me.clone())]);
        d.insert("setName", self.name.clone());
        d.insert("setVersion", 1);
        d.insert("secondary", false);
        d.insert("primary", self.me.clone());
        d.insert("me", self.me.clone());
        d.insert("electionId", self.election_id);
        d.insert(
            "lastWrite",
            doc! {
                "opTime": Self::optime(now),
                "lastWriteDate": Self::date_of(now),
                "majorityOpTime": Self::optime(now),
                "majorityWriteDate": Self::date_of(now),
            },
        );
    }

    /// `replSetGetConfig.config`.
    pub(crate) fn config(&self) -> Document {
        doc! {
            "_id": self.name.clone(),
            "version": 1,
            "term": 1,
            "members": [{
                "_id": 0,
                "host": self.me.clone(),
                "arbiterOnly": false,
                "buildIndexes": true,
                "hidden": false,
                "priority": 1.0,
                "tags": {},
                "secondaryDelaySecs": 0i64,
                "votes": 1,
            }],
            "protocolVersion": 1i64,
            "writeConcernMajorityJournalDefault": true,
            "settings": {
                "chainingAllowed": true,
                "heartbeatIntervalMillis": 2000,
                "heartbeatTimeoutSecs": 10,
                "electionTimeoutMillis": 10000,
                "catchUpTimeoutMillis": -1,
                "catchUpTakeoverDelayMillis": 30000,
                "getLastErrorModes": {},
                "getLastErrorDefaults": { "w": 1, "wtimeout": 0 },
                "replicaSetId": self.replica_set_id,
            },
        }
    }

    /// `replSetGetStatus` (without `ok`), `uptime` in seconds.
    pub(crate) fn status(&self, uptime: u64) -> Document {
        let now = self.now();
        let op = Self::optime(now);
        let date = Self::date_of(now);
        doc! {
            "set": self.name.clone(),
            "date": bson::DateTime::now(),
            "myState": 1,
            "term": 1i64,
            "syncSourceHost": "",
            "syncSourceId": -1,
            "heartbeatIntervalMillis": 2000i64,
            "majorityVoteCount": 1,
            "writeMajorityCount": 1,
            "votingMembersCount": 1,
            "writableVotingMembersCount": 1,
            "optimes": {
                "lastCommittedOpTime": op.clone(),
                "lastCommittedWallTime": date,
                "readConcernMajorityOpTime": op.clone(),
                "appliedOpTime": op.clone(),
                "durableOpTime": op.clone(),
                "lastAppliedWallTime": date,
                "lastDurableWallTime": date,
            },
            "members": [{
                "_id": 0,
                "name": self.me.clone(),
                "health": 1.0,
                "state": 1,
                "stateStr": "PRIMARY",
                "uptime": crate::num::int32(uptime),
                "optime": op.clone(),
                "optimeDate": date,
                "lastAppliedWallTime": date,
                "lastDurableWallTime": date,
                "syncSourceHost": "",
                "syncSourceId": -1,
                "infoMessage": "",
                "electionTime": Timestamp { time: u32::try_from(self.elected.timestamp_millis() / 1000).unwrap_or(0), increment: 1 },
                "electionDate": self.elected,
                "configVersion": 1,
                "configTerm": 1,
                "self": true,
                "lastHeartbeatMessage": "",
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_time_only_moves_forward() {
        let r = ReplSet::new(
            "rs0",
            "127.0.0.1",
            27017,
            Arc::new(Clock::starting_after(0)),
        );
        assert_eq!(r.me, "127.0.0.1:27017");
        let a = r.tick();
        let b = r.tick();
        assert!((b.time, b.increment) > (a.time, a.increment));
        assert_eq!(r.now(), b);
    }
}
