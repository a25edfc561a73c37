//! Who is in the set: a replica-set config checked as mongod checks it, `replSetInitiate`
//! and `replSetReconfig` as Raft membership changes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bson::{Bson, Document};
use silt_query::{QResult, QueryError};
use silt_raft::{MemberInfo, NodeId};

use super::{not_primary, replication_error, RaftMember};

/// A member as a replica-set config describes it.
struct ConfigMember {
    host: String,
    voter: bool,
    priority_milli: u32,
    hidden: bool,
    tags: BTreeMap<String, String>,
}

impl ConfigMember {
    fn info(&self) -> MemberInfo {
        MemberInfo {
            addr: self.host.clone(),
            priority_milli: self.priority_milli,
            hidden: self.hidden,
            tags: self.tags.clone(),
        }
    }
}

/// mongod's check of set `set`'s new config's `version` against the `current` one: above it
/// (103 otherwise, unless `force`d: a config made from an older one would undo a newer
/// change).
fn check_version(set: &str, config: &Document, current: i32, force: bool) -> QResult<()> {
    match config.get("version").map(version_of) {
        Some(None) => Err(QueryError::coded(
            93,
            "InvalidReplicaSetConfig",
            "the config's version must be a positive integer",
        )),
        Some(Some(v)) if !force && v <= i64::from(current) => Err(QueryError::coded(
            103,
            "NewReplicaSetConfigurationIncompatible",
            format!(
                "New replica set configuration version must be greater than old, but {v} is not greater than {current} for replica set {set}"
            ),
        )),
        _ => Ok(()),
    }
}

/// A config's `version`: a positive integer of any numeric type.
fn version_of(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 9e15 => format!("{f:.0}").parse().ok(),
        _ => None,
    }
    .filter(|v| *v > 0)
}

/// The members of a replica-set config by Raft id (`_id` + 1), checked as mongod checks them.
/// What siltd cannot honour is refused by name: arbiters (a Raft voter holds the log) and
/// delayed members (their reads would be older than the set's).
fn parse_members(config: &Document) -> QResult<BTreeMap<NodeId, ConfigMember>> {
    let bad = |m: String| QueryError::coded(93, "InvalidReplicaSetConfig", m);
    let Ok(members) = config.get_array("members") else {
        return Err(bad("the config has no members array".into()));
    };
    let mut out = BTreeMap::new();
    for m in members {
        let Bson::Document(m) = m else {
            return Err(bad("a member is not a document".into()));
        };
        let id = match m.get("_id") {
            Some(Bson::Int32(i)) if *i >= 0 => u64::from(i.unsigned_abs()),
            Some(Bson::Int64(i)) if *i >= 0 => i.unsigned_abs(),
            Some(Bson::Double(f)) if *f >= 0.0 && f.fract() == 0.0 && *f < 1e9 => {
                format!("{f:.0}").parse().unwrap_or(0)
            }
            _ => return Err(bad("a member's _id must be a non-negative integer".into())),
        };
        let host = m
            .get_str("host")
            .map_err(|_| bad("a member has no host".into()))?;
        let num = |k: &str| match m.get(k) {
            None => Some(1.0),
            Some(Bson::Int32(i)) => Some(f64::from(*i)),
            Some(Bson::Int64(i)) => i32::try_from(*i).ok().map(f64::from),
            Some(Bson::Double(f)) => Some(*f),
            _ => None,
        };
        let votes = num("votes").ok_or_else(|| bad("votes must be a number".into()))?;
        let priority = num("priority").ok_or_else(|| bad("priority must be a number".into()))?;
        let refuse = |what: &str| {
            Err(QueryError::coded(
                238,
                "NotImplemented",
                format!("member {host}: {what} is not supported by siltd's replica sets yet"),
            ))
        };
        if m.get_bool("arbiterOnly").unwrap_or(false) {
            return refuse("arbiterOnly");
        }
        let delayed = ["secondaryDelaySecs", "slaveDelay"]
            .iter()
            .any(|k| match m.get(*k) {
                None | Some(Bson::Int32(0) | Bson::Int64(0)) => false,
                Some(Bson::Double(f)) => *f != 0.0,
                Some(_) => true,
            });
        if delayed {
            return refuse("secondaryDelaySecs");
        }
        let hidden = m.get_bool("hidden").unwrap_or(false);
        if !(0.0..=1000.0).contains(&priority) {
            return Err(bad(format!(
                "member {host}: priority must be between 0 and 1000"
            )));
        }
        if votes != 0.0 && votes != 1.0 {
            return Err(bad(format!("member {host}: votes must be 0 or 1")));
        }
        if hidden && priority != 0.0 {
            return Err(bad(format!(
                "member {host}: priority must be 0 when hidden=true"
            )));
        }
        if votes == 0.0 && priority != 0.0 {
            return Err(bad(format!(
                "member {host}: priority must be 0 when non-voting (votes:0)"
            )));
        }
        // In range, so the rounded thousandths fit.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "priority is within 0..=1000"
        )]
        let priority_milli = (priority * 1000.0).round() as u32;
        let mut tags = BTreeMap::new();
        match m.get("tags") {
            None | Some(Bson::Null) => {}
            Some(Bson::Document(t)) => {
                for (k, v) in t {
                    let Bson::String(v) = v else {
                        return Err(bad(format!(
                            "member {host}: tags must be strings, {k} is not"
                        )));
                    };
                    tags.insert(k.clone(), v.clone());
                }
            }
            Some(_) => return Err(bad(format!("member {host}: tags must be a document"))),
        }
        let member = ConfigMember {
            host: host.to_string(),
            voter: votes != 0.0,
            priority_milli,
            hidden,
            tags,
        };
        if out.insert(id + 1, member).is_some() {
            return Err(bad(format!("two members have _id {id}")));
        }
    }
    Ok(out)
}

/// A member's `tags` as a document.
pub(super) fn tags_doc(info: &MemberInfo) -> Document {
    info.tags
        .iter()
        .map(|(k, v)| (k.clone(), Bson::String(v.clone())))
        .collect()
}

impl RaftMember {
    /// `replSetInitiate` with `config`: true when this server is now a member of a
    /// multi-member set; false when the config names only this member (the one-member set it
    /// already is). A multi-member config is refused with `unsupported`'s reason when set.
    pub(crate) fn initiate(&self, config: &Document, unsupported: Option<&str>) -> QResult<bool> {
        let bad = |m: String| QueryError::coded(93, "InvalidReplicaSetConfig", m);
        if config.get_str("_id").ok() != Some(self.set.as_str()) {
            return Err(bad(format!(
                "Attempting to initiate a replica set with name {}, but command line reports {}; rejecting",
                config.get_str("_id").unwrap_or(""),
                self.set
            )));
        }
        let members = parse_members(config)?;
        let mine = members
            .iter()
            .find(|(_, m)| m.host == self.me)
            .map(|(id, _)| *id);
        let Some(mine) = mine else {
            return Err(QueryError::coded(
                93,
                "InvalidReplicaSetConfig",
                format!("No host described in new configuration with {{version: 1, term: 0}} for replica set {} maps to this node", self.set),
            ));
        };
        if members.get(&mine).is_some_and(|m| !m.voter) {
            return Err(bad("the member that initiates the set must vote".into()));
        }
        if members.len() == 1 {
            return Ok(false);
        }
        if let Some(why) = unsupported {
            return Err(QueryError::coded(238, "NotImplemented", why.to_string()));
        }
        let m = self
            .start(mine)
            .map_err(|e| QueryError::coded(8, "UnknownError", e.to_string()))?;
        // The set begins as this member alone, whose data (from before the set: no log entry
        // carries it) becomes the set's first snapshot, with the log before it purged. The
        // others then join as a reconfig adds members: as learners that start from that
        // snapshot (replacing what they held, as mongod's initial sync does), then voters.
        let only_me = BTreeMap::from([(mine, self.me.clone())]);
        m.initialize(&only_me).map_err(|e| {
            QueryError::coded(
                23,
                "AlreadyInitialized",
                format!("already initialized: {e}"),
            )
        })?;
        m.seed(Duration::from_secs(30)).map_err(replication_error)?;
        // mongod's first entry of a set, stamped with the initiator's clock (so that
        // `hello.lastWrite` has a date before the first write).
        if let Some(log) = self.store.oplog() {
            log.log(&silt_collection::oplog::Op::noop("initiating set"))
                .map_err(|e| QueryError::coded(8, "UnknownError", e.to_string()))?;
        }
        for (id, member) in members.iter().filter(|(id, _)| **id != mine) {
            m.add_learner(*id, member.info(), false)
                .map_err(replication_error)?;
        }
        if let Some(me) = members
            .get(&mine)
            .filter(|me| me.info() != MemberInfo::at(&self.me))
        {
            m.set_infos(BTreeMap::from([(mine, me.info())]))
                .map_err(replication_error)?;
        }
        // The members vote once a majority of them answer (joint consensus). As mongod's
        // initiate, the reply waits for them; one that cannot be reached makes it fail
        // (the change goes on, and completes when they answer).
        let cell = self.member.clone();
        let all: BTreeSet<NodeId> = members
            .iter()
            .filter(|(_, m)| m.voter)
            .map(|(id, _)| *id)
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let Some(m) = cell.get() {
                let r = m.change_voters(all);
                match &r {
                    Ok(()) => tracing::info!("every initiated member votes"),
                    Err(e) => tracing::error!(
                        error = %e,
                        "the initiated members do not vote: run replSetReconfig"
                    ),
                }
                let _ = tx.send(r);
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(r) => r.map_err(replication_error)?,
            Err(_) => {
                return Err(QueryError::coded(
                    74,
                    "NodeNotFound",
                    "replSetInitiate quorum check failed: a majority of the members did not \
                     answer within 30 s (they become voters when they do)",
                ))
            }
        }
        Ok(true)
    }

    /// `replSetReconfig` on the primary: members added join as learners and vote once they
    /// have caught up (joint consensus); members removed stop voting, then leave. As mongod,
    /// a config whose `version` is not above the current one is refused (103) unless
    /// `force`d: it was made from an older config and would undo a newer change.
    pub(crate) fn reconfig(
        &self,
        config: &Document,
        force: bool,
        unsupported: Option<&str>,
    ) -> QResult<()> {
        if config.get_str("_id").ok() != Some(self.set.as_str()) {
            return Err(QueryError::coded(
                93,
                "InvalidReplicaSetConfig",
                format!("the config's _id must be {}", self.set),
            ));
        }
        // As mongod: the config is checked on its own first, then against the current one.
        let want = parse_members(config)?;
        let Some(m) = self.member() else {
            // The one-member set (version 1) grows as an initiate with the new config would
            // make it: mongosh's `rs.initiate()`, then `rs.add()`.
            check_version(&self.set, config, 1, force)?;
            self.initiate(config, unsupported)?;
            return Ok(());
        };
        let s = m.status();
        if !s.writable {
            return Err(not_primary("reconfig"));
        }
        check_version(&self.set, config, super::report::config_version(&s), force)?;
        for p in &s.members {
            if want.get(&p.id).is_some_and(|w| w.host != p.addr) {
                return Err(QueryError::coded(
                    103,
                    "NewReplicaSetConfigurationIncompatible",
                    format!("member {} cannot change its host", p.id - 1),
                ));
            }
        }
        for (id, w) in &want {
            if !s.members.iter().any(|p| p.id == *id) {
                m.add_learner(*id, w.info(), true)
                    .map_err(replication_error)?;
            }
        }
        // New options of members already in the set (priority, hidden).
        let changed: BTreeMap<NodeId, MemberInfo> = s
            .members
            .iter()
            .filter_map(|p| Some((p.id, want.get(&p.id)?.info())))
            .filter(|(id, info)| s.members.iter().any(|p| p.id == *id && p.info != *info))
            .collect();
        if !changed.is_empty() {
            m.set_infos(changed).map_err(replication_error)?;
        }
        let voters: BTreeSet<NodeId> = want
            .iter()
            .filter(|(_, w)| w.voter)
            .map(|(id, _)| *id)
            .collect();
        if voters.is_empty() {
            return Err(QueryError::coded(
                93,
                "InvalidReplicaSetConfig",
                "a set needs a voting member",
            ));
        }
        let current: BTreeSet<NodeId> =
            s.members.iter().filter(|p| p.voter).map(|p| p.id).collect();
        if voters != current {
            m.change_voters(voters).map_err(replication_error)?;
        }
        let gone: BTreeSet<NodeId> = s
            .members
            .iter()
            .map(|p| p.id)
            .filter(|id| !want.contains_key(id))
            .collect();
        if !gone.is_empty() {
            m.remove(gone).map_err(replication_error)?;
        }
        Ok(())
    }
}
