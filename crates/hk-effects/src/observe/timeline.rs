//! The event trail: what changed on the platform, and when, from successive live looks.
//!
//! Owns: [`Timeline`], which compares each [`Update`] (and each etcd pane) with the last
//! one of its environment and kind and keeps what changed as [`TrailEvent`]s in a bounded
//! ring (the lease moved k3s-prod-1 -> k3s-prod-2, a node went NotReady, an agent was
//! recreated dialling a node address, a VPN tunnel restarted); and [`TrailWriter`], which
//! appends the events seen during a run to the run's record, a sidecar of its journal
//! (`<run>.trail.jsonl`, mode 0600), so the journal's own format is untouched.
//! Must not: judge (severities come from the panes' verdicts or say only how notable a
//! change is), read the clock (every event carries its update's time), or draw.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use hk_engine::checks::live::{
    ConditionStatus, Endpoint, EtcdPane, RolloutState, Rule, Severity, TcpProbe, Timestamp, Verdict,
};

use super::feed::{Feed, Update};

/// How many events the session keeps (older ones drop off the front).
pub const DEFAULT_CAPACITY: usize = 500;

/// What kind of change an event records (stable names for the trail file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrailKind {
    LeaseMoved,
    LeaseTaken,
    LeaseLost,
    VipSilent,
    VipAnswers,
    NodeNotReady,
    NodeReady,
    NodeAppeared,
    NodeGone,
    AgentRecreated,
    AgentEndpoint,
    Rollout,
    VpnState,
    VpnReconnected,
    EtcdLeader,
    /// etcd's own view (membership, status, alarms, quorum reads): a finding raised or
    /// cleared.
    EtcdMembers,
    IoPressure,
    /// A verdict's severity changed (any pane) where no more specific kind says it.
    Verdict,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrailEvent {
    /// The time of the look that saw it.
    pub at: Timestamp,
    pub env: String,
    pub kind: TrailKind,
    /// How notable: the severity of the state it changed into.
    pub severity: Severity,
    /// For a human: names the hosts, pods and values.
    pub text: String,
}

impl TrailEvent {
    /// `12:03:19` (UTC) of the event.
    pub fn clock(&self) -> String {
        clock(self.at)
    }
}

/// `HH:MM:SS` (UTC).
pub fn clock(t: Timestamp) -> String {
    let s = (t.0 / 1000) % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// The last look of one (environment, kind) the next one is compared with.
#[derive(Debug, Clone)]
enum Last {
    Feed(Box<Feed>),
    Etcd(Box<EtcdPane>),
}

/// The session's trail: a bounded ring of events and the last look per source.
#[derive(Debug, Clone)]
pub struct Timeline {
    events: VecDeque<TrailEvent>,
    capacity: usize,
    last: BTreeMap<(String, &'static str), Last>,
    /// Events that fell off the front.
    dropped: u64,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::with_capacity(DEFAULT_CAPACITY)
    }
}

impl Timeline {
    pub fn with_capacity(capacity: usize) -> Self {
        Timeline {
            events: VecDeque::new(),
            capacity: capacity.max(1),
            last: BTreeMap::new(),
            dropped: 0,
        }
    }

    /// The kept events, oldest first.
    pub fn events(&self) -> impl DoubleEndedIterator<Item = &TrailEvent> + ExactSizeIterator {
        self.events.iter()
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// How many events the ring has let go of.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    fn push(&mut self, e: TrailEvent) {
        if self.events.len() == self.capacity {
            self.events.pop_front();
            self.dropped += 1;
        }
        self.events.push_back(e);
    }

    /// Compare `u` with the last update of its environment and kind; returns (and keeps)
    /// what changed. The first look of a source is the baseline: nothing changed yet.
    pub fn observe(&mut self, u: &Update) -> Vec<TrailEvent> {
        let kind = match &u.feed {
            Feed::Vip(_) => "vip",
            Feed::Agents(_) => "agents",
            Feed::Rollout(_) => "rollout",
            Feed::Nodes(_) => "nodes",
            Feed::Vpn(_) => "vpn",
            Feed::Etcd(p) => return self.observe_etcd(p, u.at),
        };
        let key = (u.env.clone(), kind);
        let new = Last::Feed(Box::new(u.feed.clone()));
        let events = match self.last.get(&key) {
            Some(Last::Feed(prev)) => diff_feed(&u.env, u.at, prev, &u.feed),
            _ => Vec::new(),
        };
        self.last.insert(key, new);
        for e in &events {
            self.push(e.clone());
        }
        events
    }

    /// [`Timeline::observe`] for an etcd pane seen at `at`.
    pub fn observe_etcd(&mut self, pane: &EtcdPane, at: Timestamp) -> Vec<TrailEvent> {
        let key = (pane.env.clone(), "etcd");
        let events = match self.last.get(&key) {
            Some(Last::Etcd(prev)) => diff_etcd(at, prev, pane),
            _ => Vec::new(),
        };
        self.last.insert(key, Last::Etcd(Box::new(pane.clone())));
        for e in &events {
            self.push(e.clone());
        }
        events
    }
}

fn ev(at: Timestamp, env: &str, kind: TrailKind, severity: Severity, text: String) -> TrailEvent {
    TrailEvent {
        at,
        env: env.to_string(),
        kind,
        severity,
        text,
    }
}

fn diff_feed(env: &str, at: Timestamp, prev: &Feed, new: &Feed) -> Vec<TrailEvent> {
    let mut out = Vec::new();
    match (prev, new) {
        (Feed::Vip(a), Feed::Vip(b)) => {
            let name = |p: &hk_engine::checks::live::VipLeasePane| {
                p.holder_node.clone().or_else(|| p.holder.clone())
            };
            match (name(a), name(b)) {
                (Some(x), Some(y)) if x != y => out.push(ev(
                    at,
                    env,
                    TrailKind::LeaseMoved,
                    Severity::Warn,
                    format!("lease moved {x} -> {y}"),
                )),
                (None, Some(y)) => out.push(ev(
                    at,
                    env,
                    TrailKind::LeaseTaken,
                    Severity::Ok,
                    format!("lease taken by {y}"),
                )),
                (Some(x), None) => out.push(ev(
                    at,
                    env,
                    TrailKind::LeaseLost,
                    Severity::Critical,
                    format!("lease lost (was held by {x})"),
                )),
                _ => {}
            }
            let answers = |p: &hk_engine::checks::live::VipLeasePane| {
                p.probe
                    .as_ref()
                    .map(|t| matches!(t, TcpProbe::Connected { .. }))
            };
            let vip = format!("{}:{}", b.vip, b.port);
            match (answers(a), answers(b)) {
                (Some(true), Some(false)) => out.push(ev(
                    at,
                    env,
                    TrailKind::VipSilent,
                    Severity::Critical,
                    format!("VIP {vip} stopped answering"),
                )),
                (Some(false), Some(true)) => out.push(ev(
                    at,
                    env,
                    TrailKind::VipAnswers,
                    Severity::Ok,
                    format!("VIP {vip} answers again"),
                )),
                _ => {}
            }
            out.extend(severity_changes(
                env,
                at,
                &a.verdicts,
                &b.verdicts,
                &[Rule::LeaseHeld, Rule::VipAnswers, Rule::LeaseFresh],
            ));
        }
        (Feed::Nodes(a), Feed::Nodes(b)) => {
            for n in &b.nodes {
                match a.nodes.iter().find(|p| p.name == n.name) {
                    None => out.push(ev(
                        at,
                        env,
                        TrailKind::NodeAppeared,
                        Severity::Ok,
                        format!("node {} joined ({})", n.name, ready_word(n.ready)),
                    )),
                    Some(p) if p.ready != n.ready => {
                        let up = n.ready == Some(ConditionStatus::True);
                        out.push(ev(
                            at,
                            env,
                            if up {
                                TrailKind::NodeReady
                            } else {
                                TrailKind::NodeNotReady
                            },
                            if up { Severity::Ok } else { Severity::Critical },
                            format!(
                                "node {} {} -> {}",
                                n.name,
                                ready_word(p.ready),
                                ready_word(n.ready)
                            ),
                        ));
                    }
                    Some(_) => {}
                }
            }
            for p in &a.nodes {
                if !b.nodes.iter().any(|n| n.name == p.name) {
                    out.push(ev(
                        at,
                        env,
                        TrailKind::NodeGone,
                        Severity::Warn,
                        format!("node {} left the cluster", p.name),
                    ));
                }
            }
        }
        (Feed::Agents(a), Feed::Agents(b)) => {
            for row in &b.agents {
                let node = row.node.as_deref().unwrap_or("no node");
                let before = a
                    .agents
                    .iter()
                    .find(|p| p.pod == row.pod)
                    .or_else(|| a.agents.iter().find(|p| p.node == row.node));
                let Some(before) = before else { continue };
                if before.pod != row.pod {
                    out.push(ev(
                        at,
                        env,
                        TrailKind::AgentRecreated,
                        endpoint_severity(&row.endpoint),
                        format!(
                            "agent on {node} recreated ({} -> {}), dials {}",
                            before.pod,
                            row.pod,
                            endpoint_words(&row.endpoint)
                        ),
                    ));
                } else if before.endpoint != row.endpoint {
                    out.push(ev(
                        at,
                        env,
                        TrailKind::AgentEndpoint,
                        endpoint_severity(&row.endpoint),
                        format!(
                            "agent {} on {node} now dials {} (was {})",
                            row.pod,
                            endpoint_words(&row.endpoint),
                            endpoint_words(&before.endpoint)
                        ),
                    ));
                }
            }
        }
        (Feed::Rollout(a), Feed::Rollout(b)) => {
            let word = |s: &Option<RolloutState>| match s {
                None => "unknown".to_string(),
                Some(RolloutState::RolledOut) => "rolled out".to_string(),
                Some(RolloutState::Rolling { updated, desired }) => {
                    format!("rolling ({updated}/{desired} updated)")
                }
                Some(RolloutState::Unavailable { available, desired }) => {
                    format!("no rollout, {available}/{desired} available")
                }
                Some(RolloutState::Stuck { pod, node, .. }) => format!(
                    "stuck on {pod}{}",
                    node.as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
            };
            let same_kind = std::mem::discriminant(&a.state) == std::mem::discriminant(&b.state)
                && matches!(
                    (&a.state, &b.state),
                    (
                        Some(RolloutState::Rolling { .. }),
                        Some(RolloutState::Rolling { .. })
                    ) | (None, None)
                        | (Some(RolloutState::RolledOut), Some(RolloutState::RolledOut))
                        | (
                            Some(RolloutState::Unavailable { .. }),
                            Some(RolloutState::Unavailable { .. })
                        )
                );
            let stuck_same = matches!(
                (&a.state, &b.state),
                (Some(RolloutState::Stuck { pod: x, .. }), Some(RolloutState::Stuck { pod: y, .. })) if x == y
            );
            if !same_kind && !stuck_same {
                let sev = match &b.state {
                    Some(RolloutState::Stuck { .. }) => Severity::Critical,
                    Some(RolloutState::RolledOut) => Severity::Ok,
                    _ => Severity::Warn,
                };
                out.push(ev(
                    at,
                    env,
                    TrailKind::Rollout,
                    sev,
                    format!("cilium rollout {} -> {}", word(&a.state), word(&b.state)),
                ));
            }
        }
        (Feed::Vpn(a), Feed::Vpn(b)) => {
            for g in &b.gateways {
                let Some(p) = a
                    .gateways
                    .iter()
                    .find(|p| p.host == g.host && p.env == g.env)
                else {
                    continue;
                };
                if p.active_state != g.active_state {
                    let s = |x: &Option<String>| x.clone().unwrap_or_else(|| "unknown".into());
                    let sev = if g.active_state.as_deref() == Some("active") {
                        Severity::Ok
                    } else {
                        Severity::Critical
                    };
                    out.push(ev(
                        at,
                        &g.env,
                        TrailKind::VpnState,
                        sev,
                        format!(
                            "VPN tunnel on {} {} -> {}",
                            g.host,
                            s(&p.active_state),
                            s(&g.active_state)
                        ),
                    ));
                }
                let newest_before = p.connects.iter().max().copied();
                for c in &g.connects {
                    if newest_before.is_some_and(|n| *c > n) {
                        out.push(ev(
                            *c,
                            &g.env,
                            TrailKind::VpnReconnected,
                            Severity::Warn,
                            format!(
                                "VPN tunnel on {} restarted (connected at {})",
                                g.host,
                                clock(*c)
                            ),
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    out
}

/// Severity changes of the listed rules' verdicts (by subject) not said more precisely
/// above: e.g. the lease going stale, or fresh again.
fn severity_changes(
    env: &str,
    at: Timestamp,
    before: &[Verdict],
    after: &[Verdict],
    rules: &[Rule],
) -> Vec<TrailEvent> {
    let mut out = Vec::new();
    for v in after.iter().filter(|v| rules.contains(&v.rule)) {
        // Said by the lease/probe events.
        if matches!(v.rule, Rule::VipAnswers | Rule::LeaseHeld) {
            continue;
        }
        let Some(p) = before
            .iter()
            .find(|p| p.rule == v.rule && p.subject == v.subject)
        else {
            continue;
        };
        if p.severity != v.severity {
            out.push(ev(
                at,
                env,
                TrailKind::Verdict,
                v.severity,
                format!(
                    "{} {} -> {}: {}",
                    v.subject, p.severity, v.severity, v.message
                ),
            ));
        }
    }
    out
}

fn ready_word(r: Option<ConditionStatus>) -> &'static str {
    match r {
        Some(ConditionStatus::True) => "Ready",
        Some(ConditionStatus::False) => "NotReady",
        Some(ConditionStatus::Unknown) => "NotReady (Unknown)",
        None => "no Ready condition",
    }
}

fn endpoint_words(e: &Endpoint) -> String {
    match e {
        Endpoint::Vip => "the VIP".to_string(),
        Endpoint::SupervisorLb => "the k3s supervisor's load balancer (127.0.0.1:6444)".to_string(),
        Endpoint::NodeAddress { node, address } => {
            format!("node address {address} ({node}'s own: single-node dependency)")
        }
        Endpoint::Other => "neither the VIP nor a node address".to_string(),
    }
}

fn endpoint_severity(e: &Endpoint) -> Severity {
    match e {
        Endpoint::Vip | Endpoint::SupervisorLb => Severity::Ok,
        Endpoint::NodeAddress { .. } => Severity::Critical,
        Endpoint::Other => Severity::Unknown,
    }
}

fn diff_etcd(at: Timestamp, a: &EtcdPane, b: &EtcdPane) -> Vec<TrailEvent> {
    let env = b.env.as_str();
    let mut out = Vec::new();
    match (&a.leader, &b.leader) {
        (Some(x), Some(y)) if x != y => out.push(ev(
            at,
            env,
            TrailKind::EtcdLeader,
            Severity::Warn,
            format!("etcd leader moved {x} -> {y}"),
        )),
        (Some(x), None) => out.push(ev(
            at,
            env,
            TrailKind::EtcdLeader,
            Severity::Warn,
            format!("etcd leader {x} no longer seen leading"),
        )),
        (None, Some(y)) => out.push(ev(
            at,
            env,
            TrailKind::EtcdLeader,
            Severity::Ok,
            format!("etcd leader is {y}"),
        )),
        _ => {}
    }
    // etcd's own findings: each one raised, each one gone.
    let findings = |p: &EtcdPane| -> Vec<(Severity, String)> {
        p.verdicts
            .iter()
            .filter(|v| {
                matches!(
                    v.rule,
                    Rule::EtcdMembership
                        | Rule::EtcdStatus
                        | Rule::EtcdAlarm
                        | Rule::EtcdQuorumRead
                ) && v.severity != Severity::Ok
            })
            .map(|v| (v.severity, v.message.clone()))
            .collect()
    };
    let (before, now) = (findings(a), findings(b));
    for (sev, text) in &now {
        if !before.iter().any(|(_, t)| t == text) {
            out.push(ev(
                at,
                env,
                TrailKind::EtcdMembers,
                *sev,
                format!("etcd: {text}"),
            ));
        }
    }
    for (_, text) in &before {
        if !now.iter().any(|(_, t)| t == text) {
            out.push(ev(
                at,
                env,
                TrailKind::EtcdMembers,
                Severity::Ok,
                format!("etcd: no longer: {text}"),
            ));
        }
    }
    for v in b.verdicts.iter().filter(|v| v.rule == Rule::EtcdIoPressure) {
        let Some(p) = a
            .verdicts
            .iter()
            .find(|p| p.rule == v.rule && p.subject == v.subject)
        else {
            continue;
        };
        if p.severity != v.severity {
            out.push(ev(
                at,
                env,
                TrailKind::IoPressure,
                v.severity,
                format!("{} -> {}: {}", p.severity, v.severity, v.message),
            ));
        }
    }
    out
}

/// The trail file of a run: `<run>.trail.jsonl` next to its journal.
pub fn trail_path(journal: &Path) -> PathBuf {
    let name = journal
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    journal.with_file_name(format!("{name}{}", hk_engine::journal::TRAIL_SUFFIX))
}

/// Appends the events seen during a run to its trail file, one JSON line each (mode 0600:
/// it names hosts and addresses, like the journal).
#[derive(Debug)]
pub struct TrailWriter {
    path: PathBuf,
    file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum TrailError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A line of a trail read back is not an event.
    #[error("{path}:{line}: {source}")]
    Line {
        path: String,
        line: usize,
        source: serde_json::Error,
    },
}

impl TrailWriter {
    /// Open (or continue, on resume) the trail of the run whose journal is `journal`.
    pub fn open(journal: &Path) -> Result<TrailWriter, TrailError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = trail_path(journal);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| TrailError::Io {
                path: path.display().to_string(),
                source,
            })?;
        Ok(TrailWriter { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append and flush `events` (the trail is evidence beside the journal, not a record
    /// the run is replayed from: written, not fsynced per line).
    pub fn append(&mut self, events: &[TrailEvent]) -> Result<(), TrailError> {
        let io = |source| TrailError::Io {
            path: self.path.display().to_string(),
            source,
        };
        let mut bytes = Vec::new();
        for e in events {
            serde_json::to_writer(&mut bytes, e)
                .map_err(|e| io(std::io::Error::other(e.to_string())))?;
            bytes.push(b'\n');
        }
        self.file.write_all(&bytes).map_err(io)?;
        self.file.flush().map_err(io)
    }
}

/// Read a run's trail back (for the run's record view); a missing file is no events, a
/// line that is not an event is an error naming the file and line.
pub fn read_trail(journal: &Path) -> Result<Vec<TrailEvent>, TrailError> {
    let path = trail_path(journal);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TrailError::Io {
                path: path.display().to_string(),
                source,
            })
        }
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| TrailError::Line {
                path: path.display().to_string(),
                line: i + 1,
                source,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::checks::live::{
        AgentEnvPane, AgentRow, NodeRow, NodesPane, Resolved, VipLeasePane,
    };

    fn vip(holder: Option<&str>, answers: bool) -> Feed {
        let mut p = VipLeasePane::unjudged("prod", "192.168.2.9".parse().expect("ip"), 6443);
        p.holder = holder.map(str::to_string);
        p.holder_node = holder.map(str::to_string);
        p.probe = Some(if answers {
            TcpProbe::Connected { latency_ms: 1 }
        } else {
            TcpProbe::Failed {
                error: "refused".into(),
            }
        });
        Feed::Vip(p)
    }

    fn up(at: u64, feed: Feed) -> Update {
        Update {
            env: "prod".into(),
            at: Timestamp(at),
            feed,
        }
    }

    // 12:03:19 UTC on some day.
    const T: u64 = 1_796_300_000_000 - (1_796_300_000_000 % 86_400_000) + 43_399_000;

    #[test]
    fn the_lease_moving_is_recorded_with_its_time() {
        let mut t = Timeline::default();
        assert!(t
            .observe(&up(T - 5000, vip(Some("k3s-prod-1"), true)))
            .is_empty());
        assert!(t
            .observe(&up(T - 1000, vip(Some("k3s-prod-1"), true)))
            .is_empty());
        let e = t.observe(&up(T, vip(Some("k3s-prod-2"), true)));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].kind, TrailKind::LeaseMoved);
        assert_eq!(e[0].text, "lease moved k3s-prod-1 -> k3s-prod-2");
        assert_eq!(e[0].clock(), "12:03:19");
        let e = t.observe(&up(T + 1000, vip(None, false)));
        let kinds: Vec<_> = e.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![TrailKind::LeaseLost, TrailKind::VipSilent]);
        assert_eq!(t.len(), 3);
    }

    fn nodes(ready: &[(&str, ConditionStatus)]) -> Feed {
        Feed::Nodes(NodesPane {
            env: "prod".into(),
            nodes: ready
                .iter()
                .map(|(n, r)| NodeRow {
                    name: n.to_string(),
                    ready: Some(*r),
                    roles: vec![],
                })
                .collect(),
            verdicts: vec![],
        })
    }

    #[test]
    fn nodes_and_agents_changes() {
        use ConditionStatus::*;
        let mut t = Timeline::default();
        t.observe(&up(1, nodes(&[("k3s-prod-1", True), ("k3s-prod-2", True)])));
        let e = t.observe(&up(
            2,
            nodes(&[("k3s-prod-1", Unknown), ("k3s-prod-2", True)]),
        ));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, TrailKind::NodeNotReady);
        assert_eq!(e[0].severity, Severity::Critical);
        assert_eq!(e[0].text, "node k3s-prod-1 Ready -> NotReady (Unknown)");

        let agent = |pod: &str, ep: Endpoint| AgentRow {
            pod: pod.into(),
            node: Some("k3s-prod-2".into()),
            phase: "Running".into(),
            ready: true,
            host: Resolved::Unset,
            port: Resolved::Unset,
            endpoint: ep,
        };
        let agents = |rows: Vec<AgentRow>| {
            Feed::Agents(AgentEnvPane {
                env: "prod".into(),
                agents: rows,
                verdicts: vec![],
            })
        };
        t.observe(&up(3, agents(vec![agent("cilium-aaaaa", Endpoint::Vip)])));
        let e = t.observe(&up(
            4,
            agents(vec![agent(
                "cilium-bbbbb",
                Endpoint::NodeAddress {
                    node: "k3s-prod-2".into(),
                    address: "192.168.2.11".into(),
                },
            )]),
        ));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, TrailKind::AgentRecreated);
        assert!(
            e[0].text.starts_with(
                "agent on k3s-prod-2 recreated (cilium-aaaaa -> cilium-bbbbb), dials node address 192.168.2.11"
            ),
            "{}",
            e[0].text
        );
    }

    #[test]
    fn the_ring_is_bounded_and_the_trail_file_round_trips() {
        let mut t = Timeline::with_capacity(2);
        let mut holder = 1;
        t.observe(&up(0, vip(Some("k3s-prod-1"), true)));
        for i in 1..=5 {
            holder = holder % 3 + 1;
            t.observe(&up(i, vip(Some(&format!("k3s-prod-{holder}")), true)));
        }
        assert_eq!(t.len(), 2);
        assert_eq!(t.dropped(), 3);

        let dir = tempfile::tempdir().expect("dir");
        let journal = dir.path().join("run-1.jsonl");
        let mut w = TrailWriter::open(&journal).expect("open");
        let events: Vec<TrailEvent> = t.events().cloned().collect();
        w.append(&events).expect("append");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(w.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_trail(&journal).expect("read"), events);
        std::fs::write(trail_path(&journal), "{not json}\n").expect("write");
        let err = read_trail(&journal).expect_err("bad line").to_string();
        assert!(err.contains("run-1.trail.jsonl:1:"), "{err}");
    }
}
