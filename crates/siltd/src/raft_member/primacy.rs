//! Who is primary: failing waiting writes when primacy is lost, priority takeover,
//! `replSetStepDown` and `replSetFreeze`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use silt_collection::Store;
use silt_query::{QResult, QueryError};
use silt_raft::{Member, MemberInfo, Role, Status};

use super::machine::{ready, Abandoned};
use super::{not_primary, replication_error, RaftMember};

/// Fail the writes waiting for replication whenever this member stops being a writable
/// primary, so they release their locks and answer at once (11602) rather than at their
/// wait limit; their entries, if committed later, are applied like any other member's.
pub(super) fn watch_primacy(
    member: Arc<OnceLock<Member>>,
    store: Arc<Store>,
    frozen: Arc<AtomicBool>,
    abandoned: Arc<Abandoned>,
) {
    let spawned = std::thread::Builder::new()
        .name("silt-primacy".into())
        .spawn(move || {
            let mut was = false;
            let mut electable = None;
            let mut last_takeover: Option<Instant> = None;
            loop {
                std::thread::sleep(Duration::from_millis(50));
                let Some(m) = member.get() else { continue };
                let s = ready(m.status(), &abandoned);
                if s.role == Role::Shutdown {
                    return;
                }
                if was && !s.writable {
                    tracing::info!(term = s.term, "no longer primary: waiting writes fail");
                    abandoned.note(&s);
                    store.abandon_proposals("is no longer primary");
                }
                was = s.writable;
                // A member with priority 0 (hidden ones among them) never campaigns, nor does
                // a frozen one.
                let mine = s
                    .members
                    .iter()
                    .find(|p| p.id == s.id)
                    .map(|p| p.info.clone());
                let want = mine
                    .as_ref()
                    .is_none_or(|i| i.priority_milli > 0 && !i.hidden)
                    && !frozen.load(Ordering::Acquire);
                if electable != Some(want) {
                    m.set_electable(want);
                    electable = Some(want);
                }
                if s.writable {
                    priority_takeover(m, &s, mine.as_ref(), &mut last_takeover);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the primacy watcher");
    }
}

/// On the primary: hand the role to a voter of higher priority whose log has caught up with
/// this member's, as mongod's priority takeover does (at most every 5 s).
fn priority_takeover(
    m: &Member,
    s: &Status,
    mine: Option<&MemberInfo>,
    last: &mut Option<Instant>,
) {
    let my_priority = mine.map_or(1000, |i| i.priority_milli);
    if last.is_some_and(|t| t.elapsed() < Duration::from_secs(5)) {
        return;
    }
    let better = s
        .members
        .iter()
        .filter(|p| p.voter && p.id != s.id && !p.info.hidden)
        .filter(|p| p.info.priority_milli > my_priority && p.matched == s.last_log_index)
        .max_by_key(|p| p.info.priority_milli);
    if let Some(p) = better {
        *last = Some(Instant::now());
        tracing::info!(
            to = p.id,
            "priority takeover: a member of higher priority caught up"
        );
        if let Err(e) = m.transfer_leadership(p.id) {
            tracing::info!(error = %e, "priority takeover failed");
        }
    }
}

impl RaftMember {
    /// `replSetStepDown`: hand the primary's role to a secondary whose log has caught up
    /// (waiting up to `catch_up` for one, unless `force`), and do not campaign for `secs`.
    pub(crate) fn step_down(&self, secs: u64, catch_up: Duration, force: bool) -> QResult<()> {
        let Some(m) = self.member() else {
            return Err(QueryError::coded(
                262,
                "ExceededTimeLimit",
                "No electable secondaries caught up: this is the set's only member",
            ));
        };
        if !m.status().writable {
            return Err(not_primary("step down"));
        }
        let deadline = Instant::now() + if force { Duration::ZERO } else { catch_up };
        let target = loop {
            let s = m.status();
            let mut others: Vec<_> = s
                .members
                .iter()
                .filter(|p| {
                    p.voter
                        && p.id != s.id
                        && p.matched.is_some()
                        && p.info.priority_milli > 0
                        && !p.info.hidden
                })
                .collect();
            others.sort_by_key(|p| std::cmp::Reverse(p.matched));
            if let Some(p) = others.iter().find(|p| p.matched == s.last_log_index) {
                break p.id;
            }
            if Instant::now() >= deadline {
                match others.first() {
                    Some(p) if force => break p.id,
                    _ => {
                        return Err(QueryError::coded(
                            262,
                            "ExceededTimeLimit",
                            "No electable secondaries caught up as of the step-down deadline",
                        ))
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.freeze_for(m, secs);
        m.transfer_leadership(target).map_err(replication_error)?;
        let until = Instant::now() + Duration::from_secs(10);
        while m.status().role == Role::Leader && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        tracing::info!(to = target, "stepped down");
        Ok(())
    }

    /// Do not campaign for `secs` seconds (0: campaign again now, if this member's priority
    /// allows; `watch_primacy` turns campaigning back on). A later freeze replaces an earlier
    /// one.
    fn freeze_for(&self, m: &Member, secs: u64) {
        let generation = self.freezes.fetch_add(1, Ordering::AcqRel) + 1;
        self.frozen.store(secs > 0, Ordering::Release);
        if secs == 0 {
            return;
        }
        m.set_electable(false);
        let (freezes, frozen) = (self.freezes.clone(), self.frozen.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            if freezes.load(Ordering::Acquire) == generation {
                frozen.store(false, Ordering::Release);
            }
        });
    }

    /// `replSetFreeze`: a secondary does not campaign for `secs` seconds (0 ends it).
    pub(crate) fn freeze(&self, secs: u64) -> QResult<Document> {
        let primary = || {
            QueryError::coded(
                95,
                "NotSecondary",
                "cannot freeze node when primary or running for election. state: Primary",
            )
        };
        let Some(m) = self.member() else {
            return Err(primary());
        };
        if m.status().role == Role::Leader {
            return Err(primary());
        }
        self.freeze_for(m, secs);
        Ok(if secs == 0 {
            doc! { "info": "unfreezing" }
        } else {
            Document::new()
        })
    }
}
