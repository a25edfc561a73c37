//! What the member reports: `hello`'s replica-set fields, `replSetGetStatus`,
//! `serverStatus`'s positions and `replSetGetConfig`'s members.

use std::sync::atomic::Ordering;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use silt_raft::{MemberOptions, NodeId, Role, Status};

use crate::optimes::OpTime;

use super::membership::tags_doc;
use super::RaftMember;

/// `electionId` of term `t`: `7fffffff` then the term, big-endian.
fn election_id(term: u64) -> ObjectId {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    b[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(b)
}

/// The config's `version` (and `hello.setVersion`) of a member's status: the log index of
/// the membership in effect, which every membership change moves forward.
pub(super) fn config_version(s: &Status) -> i32 {
    s.membership_index
        .map_or(1, |i| i32::try_from(i).unwrap_or(i32::MAX))
}

/// Whether a member that is not primary holds the set's data to serve reads from: it applied
/// an entry and is not installing a snapshot. Until then it is in mongod's `STARTUP2`
/// (initial sync), and `hello` does not call it a secondary, so drivers do not read from it.
pub(super) fn synced(s: &Status) -> bool {
    s.applied.is_some() && s.receiving_snapshot.is_none()
}

/// A log position as a reply shows it: an `int64`, or null when there is none.
fn index_bson(v: Option<u64>) -> Bson {
    v.map_or(Bson::Null, |i| {
        Bson::Int64(i64::try_from(i).unwrap_or(i64::MAX))
    })
}

impl RaftMember {
    /// `hello`'s replica-set fields, and whether this member is the writable primary; `None`
    /// while this server is not in a multi-member set.
    pub(crate) fn hello_fields(&self, d: &mut Document) -> Option<bool> {
        let s = self.status()?;
        let addr = |id: NodeId| {
            s.members
                .iter()
                .find(|p| p.id == id)
                .map(|p| p.addr.clone())
        };
        // As mongod: `hosts` the members that may become primary, `passives` the others
        // (priority 0, or not voting yet), hidden members in neither.
        let electable = |p: &&silt_raft::Peer| p.voter && p.info.priority_milli > 0;
        let hosts: Vec<Bson> = s
            .members
            .iter()
            .filter(|p| !p.info.hidden && electable(p))
            .map(|p| Bson::String(p.addr.clone()))
            .collect();
        let passives: Vec<Bson> = s
            .members
            .iter()
            .filter(|p| !p.info.hidden && !electable(p))
            .map(|p| Bson::String(p.addr.clone()))
            .collect();
        if let Some(me) = s.members.iter().find(|p| p.id == s.id) {
            if me.info.hidden {
                d.insert("hidden", true);
            }
            if !electable(&me) {
                d.insert("passive", true);
            }
            if !me.info.tags.is_empty() {
                d.insert("tags", tags_doc(&me.info));
            }
        }
        d.insert("hosts", hosts);
        if !passives.is_empty() {
            d.insert("passives", passives);
        }
        d.insert("setName", self.set.clone());
        d.insert("setVersion", config_version(&s));
        d.insert(
            "secondary",
            !s.writable && matches!(s.role, Role::Follower | Role::Learner) && synced(&s),
        );
        if let Some(p) = s.leader.and_then(addr) {
            d.insert("primary", p);
        }
        d.insert("me", self.me.clone());
        // The newest applied entry (drivers compute a secondary's staleness from it).
        if let Some(log) = self.store.oplog() {
            let ts = log.visible();
            let term = i64::try_from(s.term).unwrap_or(i64::MAX);
            let date = bson::DateTime::from_millis(i64::from(ts.time) * 1000);
            d.insert(
                "lastWrite",
                doc! {
                    "opTime": { "ts": ts, "t": term },
                    "lastWriteDate": date,
                    "majorityOpTime": { "ts": ts, "t": term },
                    "majorityWriteDate": date,
                },
            );
        }
        if s.writable {
            d.insert("electionId", election_id(s.term));
        }
        Some(s.writable)
    }

    /// `hello.topologyVersion.counter`, as of the last look at the member.
    pub(crate) fn topology_counter(&self) -> i64 {
        self.topology.load(Ordering::Relaxed)
    }

    /// `hello.topologyVersion.counter` now (looking at the member first).
    pub(crate) fn topology_counter_now(&self) -> i64 {
        let _ = self.status();
        self.topology_counter()
    }

    /// `replSetGetStatus` of a multi-member set, `None` while this server is not in one. Each
    /// member's optime is that of its log position as this member knows it: its own applied
    /// entry; on the primary, each member's matched entry; elsewhere the primary's commit
    /// point, and `Timestamp(0, 0)` for the members it does not hear from.
    pub(crate) fn status_doc(&self) -> Option<Document> {
        let s = self.status()?;
        let state = |role: Role, writable: bool| match (role, writable) {
            (Role::Leader, true) => (1, "PRIMARY"),
            (Role::Shutdown, _) => (8, "(not reachable/healthy)"),
            (Role::Follower | Role::Learner, _) if !synced(&s) => (5, "STARTUP2"),
            (Role::Leader, false) | (Role::Candidate | Role::Follower | Role::Learner, _) => {
                (2, "SECONDARY")
            }
        };
        let (my_state, _) = state(s.role, s.writable);
        let mut raft = doc! {
            "lastLogIndex": index_bson(s.last_log_index),
            "committedIndex": index_bson(s.committed),
            "appliedIndex": index_bson(s.applied),
            "snapshotIndex": index_bson(s.snapshot),
            "purgedIndex": index_bson(s.purged),
        };
        if let Some(b) = s.receiving_snapshot {
            // Catching up by another member's snapshot: how much of it has arrived.
            raft.insert("receivingSnapshotBytes", index_bson(Some(b)));
        }
        let voters = s.members.iter().filter(|p| p.voter).count();
        let majority = voters / 2 + 1;
        let applied = self.optimes.at(s.applied);
        let committed = self.optimes.at(s.committed);
        let leader_addr = s
            .leader
            .and_then(|l| s.members.iter().find(|p| p.id == l))
            .map(|p| p.addr.clone());
        // Every member but the primary follows the primary's log.
        let from_leader = match (leader_addr, s.leader) {
            (Some(a), Some(l)) => (a, i64::try_from(l).unwrap_or(i64::MAX) - 1),
            _ => (String::new(), -1i64),
        };
        let none = (String::new(), -1i64);
        let now = bson::DateTime::now();
        let members: Vec<Bson> = s
            .members
            .iter()
            .map(|p| {
                let me = p.id == s.id;
                let (st, name) = if me {
                    state(s.role, s.writable)
                } else if s.leader == Some(p.id) {
                    (1, "PRIMARY")
                } else if s.role == Role::Leader && !p.voter && p.matched.is_none() {
                    // A member being added that has no entry of the log yet.
                    (5, "STARTUP2")
                } else {
                    (2, "SECONDARY")
                };
                let optime = if me {
                    applied
                } else if s.role == Role::Leader {
                    self.optimes.at(p.matched)
                } else if s.leader == Some(p.id) {
                    committed
                } else {
                    OpTime::NONE
                };
                let (source, source_id) = if st == 1 {
                    none.clone()
                } else {
                    from_leader.clone()
                };
                let mut m = doc! {
                    "_id": i64::try_from(p.id).unwrap_or(i64::MAX) - 1,
                    "name": p.addr.clone(),
                    "health": 1.0,
                    "state": st,
                    "stateStr": name,
                    "uptime": if me {
                        i64::try_from(self.started.elapsed().as_secs()).unwrap_or(i64::MAX)
                    } else {
                        0
                    },
                    "optime": optime.doc(),
                    "optimeDate": optime.date(),
                    "optimeDurable": optime.doc(),
                    "optimeDurableDate": optime.date(),
                    "lastAppliedWallTime": optime.date(),
                    "lastDurableWallTime": optime.date(),
                    "syncSourceHost": source,
                    "syncSourceId": source_id,
                    "infoMessage": "",
                    "configVersion": config_version(&s),
                    "configTerm": i64::try_from(s.term).unwrap_or(i64::MAX),
                    "self": me,
                };
                if !me {
                    m.insert("lastHeartbeat", now);
                    m.insert("lastHeartbeatRecv", now);
                    m.insert("pingMs", 0i64);
                    m.insert("lastHeartbeatMessage", "");
                }
                if let Some(i) = p.matched {
                    m.insert("raftMatchedIndex", i64::try_from(i).unwrap_or(i64::MAX));
                }
                Bson::Document(m)
            })
            .collect();
        let (source, source_id) = if my_state == 1 { none } else { from_leader };
        Some(doc! {
            "set": self.set.clone(),
            "date": now,
            "myState": my_state,
            "term": i64::try_from(s.term).unwrap_or(i64::MAX),
            "syncSourceHost": source,
            "syncSourceId": source_id,
            "heartbeatIntervalMillis": i64::try_from(MemberOptions::default().heartbeat.as_millis()).unwrap_or(i64::MAX),
            "majorityVoteCount": crate::num::int32(majority),
            "writeMajorityCount": crate::num::int32(majority),
            "votingMembersCount": crate::num::int32(voters),
            "writableVotingMembersCount": crate::num::int32(voters),
            "optimes": {
                "lastCommittedOpTime": committed.doc(),
                "lastCommittedWallTime": committed.date(),
                "readConcernMajorityOpTime": committed.doc(),
                "appliedOpTime": applied.doc(),
                "durableOpTime": applied.doc(),
                "lastAppliedWallTime": applied.date(),
                "lastDurableWallTime": applied.date(),
            },
            "raft": raft,
            "members": members,
        })
    }

    /// `serverStatus.repl.raft` (and so `/metrics`): the term, this member's log, commit and
    /// apply positions, and on the primary each member's matched position and lag in entries.
    pub(crate) fn positions(&self) -> Option<Document> {
        let s = self.status()?;
        let mut members = Document::new();
        if s.role == Role::Leader {
            for p in &s.members {
                let lag = match (s.last_log_index, p.matched) {
                    (Some(last), Some(m)) => Some(last.saturating_sub(m)),
                    _ => None,
                };
                members.insert(
                    format!("m{}", p.id - 1),
                    doc! { "matchedIndex": index_bson(p.matched), "lagEntries": index_bson(lag) },
                );
            }
        }
        Some(doc! {
            "term": index_bson(Some(s.term)),
            "lastLogIndex": index_bson(s.last_log_index),
            "committedIndex": index_bson(s.committed),
            "appliedIndex": index_bson(s.applied),
            "snapshotIndex": index_bson(s.snapshot),
            "purgedIndex": index_bson(s.purged),
            "members": members,
        })
    }

    /// `replSetGetConfig.config`'s `members`, `version` and `term` of a multi-member set (of
    /// one status), `None` while this server is not in one. Learners (members being added, or
    /// `votes: 0`) show as non-voting.
    pub(crate) fn config_fields(&self) -> Option<Document> {
        let s = self.member()?.status();
        let members: Vec<Bson> = s
            .members
            .iter()
            .map(|p| {
                Bson::Document(doc! {
                    "_id": i64::try_from(p.id).unwrap_or(i64::MAX) - 1,
                    "host": p.addr.clone(),
                    "arbiterOnly": false,
                    "buildIndexes": true,
                    "hidden": p.info.hidden,
                    "priority": f64::from(p.info.priority_milli) / 1000.0,
                    "tags": tags_doc(&p.info),
                    "secondaryDelaySecs": 0i64,
                    "votes": i32::from(p.voter),
                })
            })
            .collect();
        Some(doc! {
            "members": members,
            "version": config_version(&s),
            "term": i64::try_from(s.term).unwrap_or(i64::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::election_id;

    #[test]
    fn election_ids_order_by_term() {
        assert_eq!(election_id(1).to_hex(), "7fffffff0000000000000001");
        assert!(election_id(2).bytes() > election_id(1).bytes());
    }
}
