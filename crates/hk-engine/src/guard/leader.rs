//! PURE. Whether etcd's leadership must move off a server before a step changes it, and to
//! which member (issue 39: the leader moved first, as Talos forfeits leadership before it
//! stops a node).
//!
//! Owns: [`choose`], a function of one look at the members ([`EtcdClientView`]) and their
//! WAL fsync p99s, and [`moved`], whether a later look shows the move done.
//! Must not: do IO; a member that did not answer is never a candidate, and a host whose own
//! member was not seen is never called "not the leader".

use std::collections::BTreeMap;

use crate::checks::live::human_fsync;
use crate::checks::live::EtcdClientView;
use crate::guard::health::CATCH_UP_ENTRIES;

/// How the verdict of a move that moved leadership begins (what a reader of the verdict,
/// e.g. the console marking its etcd look stale, keys on).
pub const MOVED: &str = "etcd's leadership moved from ";

/// What to do about etcd's leadership before `host` is changed.
#[derive(Debug, Clone, PartialEq)]
pub enum LeaderPlan {
    /// `host`'s member does not lead: nothing to move.
    NotLeader {
        host: String,
        /// Who does (its server), as the members answered.
        leader: String,
        term: u64,
    },
    /// `host` leads: move leadership to `to`.
    Move {
        from: String,
        from_id: u64,
        to: String,
        to_id: u64,
        term: u64,
        /// Why `to`: its lag and its disk, in words.
        why: String,
    },
    /// It cannot be decided or done, and why (a refusal, never a pass).
    Cannot { why: String },
}

impl LeaderPlan {
    /// One line for the step's output and the approval.
    pub fn line(&self) -> String {
        match self {
            LeaderPlan::NotLeader { host, leader, term } => {
                format!("{host} does not lead etcd ({leader} does, term {term}): nothing to move")
            }
            LeaderPlan::Move {
                from,
                to,
                term,
                why,
                ..
            } => format!("{from} leads etcd (term {term}): leadership moves to {to} ({why})"),
            LeaderPlan::Cannot { why } => format!("etcd's leadership cannot be moved: {why}"),
        }
    }
}

/// WAL fsync p99 above which a member's disk is called slow (defined with the health gate,
/// which judges a changed member's disk by it too).
pub use crate::guard::health::SLOW_DISK_MS;

/// Whether leadership must move off `host`, judged from one look: `view` (what the members
/// answered on etcd's client API) and `fsync_p99_ms` (each server's WAL fsync p99 from its
/// metrics, where seen). A candidate answered, follows the same leader, is no learner and
/// is caught up (within [`CATCH_UP_ENTRIES`]). Among them: a disk that is not slow (p99 up
/// to [`SLOW_DISK_MS`], seen) first; then one that is not in `later` (the servers the run
/// changes after `host`, so leadership moves once per run, not once per host), else the
/// one `later` reaches last; then the least behind, the fastest disk, the first name.
pub fn choose(
    view: &EtcdClientView,
    fsync_p99_ms: &BTreeMap<String, f64>,
    host: &str,
    later: &[String],
) -> LeaderPlan {
    let cannot = |why: String| LeaderPlan::Cannot { why };
    let Some(&mine) = view.member_of.get(host) else {
        return cannot(format!(
            "{host}'s etcd member did not answer, so whether it leads is not known"
        ));
    };
    let Some(leader) = view.leader_id else {
        return cannot("the members that answered see no leader".into());
    };
    let term = view
        .status
        .values()
        .map(|s| s.raft_term)
        .max()
        .unwrap_or_default();
    if leader != mine {
        return LeaderPlan::NotLeader {
            host: host.to_string(),
            leader: view
                .host_of(leader)
                .map(str::to_string)
                .unwrap_or_else(|| format!("member {leader:x}, on no server that answered")),
            term,
        };
    }
    let Some(lead) = view.status.get(host) else {
        return cannot(format!("{host}'s member gave no status"));
    };
    // (slow disk, how soon the run changes it, lag, fsync, name, id)
    let mut candidates: Vec<(bool, usize, u64, f64, &str, u64)> = Vec::new();
    let mut passed_over: Vec<String> = Vec::new();
    for (other, &id) in &view.member_of {
        if other == host {
            continue;
        }
        let Some(st) = view.status.get(other) else {
            passed_over.push(format!("{other} gave no status"));
            continue;
        };
        let learner = st.learner || view.members.iter().any(|m| m.id == id && m.learner);
        if learner {
            passed_over.push(format!("{other} is a learner"));
            continue;
        }
        if st.leader != Some(leader) {
            passed_over.push(format!("{other} does not follow {host}"));
            continue;
        }
        let lag = lead.applied_index.saturating_sub(st.applied_index);
        if lag > CATCH_UP_ENTRIES {
            passed_over.push(format!("{other} trails by {lag} entries"));
            continue;
        }
        let fsync = fsync_p99_ms.get(other).copied().unwrap_or(f64::INFINITY);
        // 0: not changed later in this run; else the sooner it is changed, the larger.
        let soon = match later.iter().position(|l| l == other) {
            None => 0,
            Some(k) => later.len() - k,
        };
        candidates.push((fsync > SLOW_DISK_MS, soon, lag, fsync, other.as_str(), id));
    }
    candidates.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.total_cmp(&b.3))
            .then(a.4.cmp(b.4))
    });
    match candidates.first() {
        Some(&(_, soon, lag, fsync, to, to_id)) => LeaderPlan::Move {
            from: host.to_string(),
            from_id: mine,
            to: to.to_string(),
            to_id,
            term,
            why: format!(
                "{}{} behind, WAL fsync p99 {}{}",
                if soon == 0 {
                    ""
                } else {
                    "changed later in this run, no other member fit; "
                },
                match lag {
                    0 => "no entry".to_string(),
                    1 => "1 entry".to_string(),
                    k => format!("{k} entries"),
                },
                if fsync.is_finite() {
                    human_fsync(fsync)
                } else {
                    "not seen".to_string()
                },
                if passed_over.is_empty() {
                    String::new()
                } else {
                    format!("; passed over: {}", passed_over.join(", "))
                }
            ),
        },
        None => cannot(format!(
            "{host} leads and no other member can take over{}",
            if passed_over.is_empty() {
                " (no other member answered)".to_string()
            } else {
                format!(": {}", passed_over.join(", "))
            }
        )),
    }
}

/// Whether a look after the transfer shows it done: every member that answered follows
/// `to_id`, and `from`'s member answered and is among them. `Err`: what is still wrong.
pub fn moved(view: &EtcdClientView, from: &str, to_id: u64) -> Result<String, String> {
    let to = view
        .host_of(to_id)
        .map(str::to_string)
        .unwrap_or_else(|| format!("member {to_id:x}"));
    if !view.status.contains_key(from) {
        return Err(format!("{from}'s member did not answer"));
    }
    let astray: Vec<String> = view
        .status
        .iter()
        .filter(|(_, s)| s.leader != Some(to_id))
        .map(|(h, s)| match s.leader {
            Some(l) => format!(
                "{h} follows {}",
                view.host_of(l)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{l:x}"))
            ),
            None => format!("{h} sees no leader"),
        })
        .collect();
    if !astray.is_empty() {
        return Err(astray.join(", "));
    }
    let term = view
        .status
        .values()
        .map(|s| s.raft_term)
        .max()
        .unwrap_or_default();
    Ok(format!(
        "{to} leads etcd (term {term}); all {} members that answered follow it",
        view.status.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::live::{EtcdMemberInfo, EtcdStatus};

    fn view(leader: u64, applied: &[(&str, u64, u64)]) -> EtcdClientView {
        let mut v = EtcdClientView {
            leader_id: Some(leader),
            ..EtcdClientView::default()
        };
        for (host, id, idx) in applied {
            v.member_of.insert(host.to_string(), *id);
            v.members.push(EtcdMemberInfo {
                id: *id,
                name: host.to_string(),
                peer_urls: vec![],
                client_urls: vec![],
                learner: false,
            });
            v.status.insert(
                host.to_string(),
                EtcdStatus {
                    member_id: *id,
                    leader: Some(leader),
                    raft_term: 4,
                    raft_index: *idx,
                    applied_index: *idx,
                    db_size: 0,
                    db_size_in_use: None,
                    learner: false,
                    errors: vec![],
                    version: "3.6.4".into(),
                },
            );
        }
        v.leader_host = v.host_of(leader).map(str::to_string);
        v
    }

    fn p99(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(h, v)| (h.to_string(), *v)).collect()
    }

    #[test]
    fn a_follower_needs_no_move_and_names_the_leader() {
        let v = view(1, &[("a", 1, 100), ("b", 2, 100), ("c", 3, 100)]);
        let plan = choose(&v, &p99(&[]), "b", &[]);
        assert_eq!(
            plan,
            LeaderPlan::NotLeader {
                host: "b".into(),
                leader: "a".into(),
                term: 4
            }
        );
        assert_eq!(
            plan.line(),
            "b does not lead etcd (a does, term 4): nothing to move"
        );
    }

    #[test]
    fn the_leader_moves_to_the_caught_up_member_with_the_fastest_disk() {
        let v = view(1, &[("a", 1, 100), ("b", 2, 100), ("c", 3, 100)]);
        match choose(&v, &p99(&[("b", 64.0), ("c", 4.0)]), "a", &[]) {
            LeaderPlan::Move { to, to_id, why, .. } => {
                assert_eq!((to.as_str(), to_id), ("c", 3));
                assert!(why.contains("WAL fsync p99 4"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Among disks that are not slow, lag first: the slower disk that is caught up wins
        // over the faster one behind.
        let v = view(1, &[("a", 1, 100), ("b", 2, 100), ("c", 3, 90)]);
        match choose(&v, &p99(&[("b", 8.0), ("c", 4.0)]), "a", &[]) {
            LeaderPlan::Move { to, .. } => assert_eq!(to, "b"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn leadership_goes_where_the_run_is_done_unless_that_disk_is_slow() {
        let v = view(1, &[("a", 1, 100), ("b", 2, 100), ("c", 3, 100)]);
        let later = ["b".to_string()];
        match choose(&v, &p99(&[("b", 1.0), ("c", 2.0)]), "a", &later) {
            LeaderPlan::Move { to, why, .. } => {
                assert_eq!(to, "c", "b is changed later in this run");
                assert!(!why.contains("changed later"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Both later: the one the run reaches last.
        let later = ["b".to_string(), "c".to_string()];
        match choose(&v, &p99(&[("b", 1.0), ("c", 2.0)]), "a", &later) {
            LeaderPlan::Move { to, why, .. } => {
                assert_eq!(to, "c");
                assert!(why.starts_with("changed later in this run"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // A slow disk is never preferred for being done: the 2026-09-07 starvation.
        let later = ["b".to_string()];
        match choose(&v, &p99(&[("b", 2.0), ("c", 64.0)]), "a", &later) {
            LeaderPlan::Move { to, .. } => assert_eq!(to, "b"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn learners_stragglers_and_the_silent_are_passed_over_and_said() {
        let mut v = view(1, &[("a", 1, 1000), ("b", 2, 10), ("c", 3, 1000)]);
        v.members[2].learner = true;
        match choose(&v, &p99(&[]), "a", &[]) {
            LeaderPlan::Cannot { why } => {
                assert!(why.contains("b trails by 990 entries"), "{why}");
                assert!(why.contains("c is a learner"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // The host's own member unseen: never "not the leader".
        let mut v = view(1, &[("a", 1, 100), ("b", 2, 100)]);
        v.member_of.remove("a");
        assert!(matches!(
            choose(&v, &p99(&[]), "a", &[]),
            LeaderPlan::Cannot { .. }
        ));
        // No leader at all.
        let mut v = view(1, &[("a", 1, 100), ("b", 2, 100)]);
        v.leader_id = None;
        assert!(matches!(
            choose(&v, &p99(&[]), "b", &[]),
            LeaderPlan::Cannot { .. }
        ));
    }

    #[test]
    fn moved_needs_every_answering_member_on_the_new_leader() {
        let mut v = view(2, &[("a", 1, 100), ("b", 2, 100), ("c", 3, 100)]);
        assert!(moved(&v, "a", 2)
            .expect("moved")
            .starts_with("b leads etcd"));
        v.status.get_mut("c").expect("c").leader = Some(1);
        assert_eq!(moved(&v, "a", 2).expect_err("c astray"), "c follows a");
        v.status.remove("a");
        assert!(moved(&v, "a", 2)
            .expect_err("a silent")
            .contains("did not answer"));
    }
}
