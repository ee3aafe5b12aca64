//! Every environment at a glance: one line per environment (VIP, agents, VPN, nodes, etcd,
//! parity), worst first, and for each critical or warning facet its next step.
//!
//! Owns: [`Summary`] (what the strip on every screen shows), the facets of an environment
//! and their worst verdict, and [`NextStep`]: the runbook that fixes or verifies a verdict,
//! found from the runbooks' own content (which step proves the thing the verdict is about),
//! or a read-only [`Look`] (events, the pod's recent log lines, a describe-like view) at the
//! object the verdict names.
//! Must not: judge (severities are the verdicts' and the parity findings'), do IO, or name a
//! runbook id, host or address: those come from the inputs.

use std::collections::BTreeMap;

use serde::Serialize;

use hk_engine::checks::live::{
    AgentEnvPane, Endpoint, Pane, RolloutPane, RolloutState, Rule, Severity, Verdict,
};
use hk_engine::checks::parity;
use hk_engine::runbook::schema::{Runbook, StepSpec};

/// One column of the strip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Facet {
    Vip,
    Agents,
    Vpn,
    Nodes,
    Etcd,
    Parity,
}

impl Facet {
    pub const ALL: [Facet; 6] = [
        Facet::Vip,
        Facet::Agents,
        Facet::Vpn,
        Facet::Nodes,
        Facet::Etcd,
        Facet::Parity,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Facet::Vip => "VIP",
            Facet::Agents => "agents",
            Facet::Vpn => "VPN",
            Facet::Nodes => "nodes",
            Facet::Etcd => "etcd",
            Facet::Parity => "parity",
        }
    }

    fn of(pane: Pane) -> Facet {
        match pane {
            Pane::VipLease => Facet::Vip,
            Pane::AgentEnv => Facet::Agents,
            Pane::VpnEgress => Facet::Vpn,
            Pane::Nodes => Facet::Nodes,
            Pane::Etcd => Facet::Etcd,
        }
    }
}

/// A Kubernetes object a look is taken at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectRef {
    /// `Pod`, `Node`, `Lease`, `DaemonSet`.
    pub kind: String,
    /// None for cluster-scoped kinds (Node).
    pub namespace: Option<String>,
    pub name: String,
}

/// A read-only look that explains a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LookKind {
    /// The object's Kubernetes events.
    Events,
    /// A container's recent log lines.
    Logs,
    /// The object's state and conditions, describe-like.
    Describe,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Look {
    pub env: String,
    pub object: ObjectRef,
    /// The looks worth taking, in order (the first is the key's default).
    pub kinds: Vec<LookKind>,
    /// For logs: the container.
    pub container: Option<String>,
}

/// What to do about a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum NextStep {
    /// Open this runbook's plan for `env` (`fixes`: it changes the thing; else it verifies).
    Runbook {
        id: String,
        env: String,
        fixes: bool,
        /// Why this runbook: the step of it that proves the verdict's subject.
        why: String,
    },
    /// Look at an object (read-only kube calls).
    Look(Look),
    /// The static check's findings (the Check screen, file:line).
    Check { env: String },
}

impl NextStep {
    /// Few words for the strip: `→ cilium-endpoint-rollout`, `→ look: pod cilium-x`.
    pub fn short(&self) -> String {
        match self {
            NextStep::Runbook { id, .. } => format!("→ {id}"),
            NextStep::Look(l) => {
                format!("→ look: {} {}", l.object.kind.to_lowercase(), l.object.name)
            }
            NextStep::Check { .. } => "→ :check".to_string(),
        }
    }
}

/// One facet of one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FacetState {
    pub facet: Facet,
    /// None: nothing seen yet.
    pub severity: Option<Severity>,
    /// The worst verdict's message (or the first finding's), for the expanded line.
    pub headline: Option<String>,
    pub next: Option<NextStep>,
}

/// One environment's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvSummary {
    pub env: String,
    pub protected: bool,
    pub facets: Vec<FacetState>,
}

impl EnvSummary {
    /// The worst severity over the facets (None: nothing seen).
    pub fn worst(&self) -> Option<Severity> {
        self.facets
            .iter()
            .filter_map(|f| f.severity)
            .reduce(Severity::worst)
    }

    pub fn facet(&self, f: Facet) -> Option<&FacetState> {
        self.facets.iter().find(|s| s.facet == f)
    }

    /// The next step of the worst facet that has one.
    pub fn first_next(&self) -> Option<&NextStep> {
        let mut facets: Vec<&FacetState> = self
            .facets
            .iter()
            .filter(|f| f.next.is_some() && f.severity.is_some())
            .collect();
        facets.sort_by_key(|f| std::cmp::Reverse(f.severity.map(Severity::rank)));
        facets.first().and_then(|f| f.next.as_ref())
    }
}

/// The strip: every environment, worst first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub envs: Vec<EnvSummary>,
}

impl Summary {
    /// The first environment with a critical verdict (the header names it).
    pub fn critical_env(&self) -> Option<&EnvSummary> {
        self.envs
            .iter()
            .find(|e| e.worst() == Some(Severity::Critical))
    }

    pub fn env(&self, name: &str) -> Option<&EnvSummary> {
        self.envs.iter().find(|e| e.env == name)
    }
}

/// What the summary is built from, per environment.
#[derive(Debug, Clone, Default)]
pub struct EnvInput<'a> {
    pub env: &'a str,
    pub protected: bool,
    /// The latest verdicts of every live pane of the environment (the VPN look's for its
    /// gateways, and the across-environment ones naming it).
    pub verdicts: Vec<Verdict>,
    pub agents: Option<&'a AgentEnvPane>,
    pub rollout: Option<&'a RolloutPane>,
    /// None: the static check has not run.
    pub parity: Option<Vec<&'a parity::Finding>>,
    /// The names of this environment's objects (its watch settings: hk-console.yaml
    /// `names:` and `cni:`, the servers' hostvars); `None`: those [`summarize`] is given.
    pub objects: Option<&'a Objects>,
}

/// Names of the objects the looks go to (the watch settings of the environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Objects {
    pub namespace: String,
    pub lease_name: String,
    pub agent_container: String,
    pub daemonset: String,
}

impl Objects {
    /// The names the kube panes watch (`cluster::WatchSettings`), so a look goes to the same
    /// objects the verdict came from.
    pub fn of(settings: &crate::cluster::WatchSettings) -> Self {
        Objects {
            namespace: settings.namespace.clone(),
            lease_name: settings.lease_name.clone(),
            agent_container: settings.agent_container.clone(),
            daemonset: settings.daemonset.clone(),
        }
    }
}

/// Build the strip. `runbooks` are the loaded runbooks; `objects` the names looked at for an
/// environment whose input names none; environments sort worst first, then by the order
/// given.
pub fn summarize(inputs: &[EnvInput<'_>], runbooks: &[&Runbook], objects: &Objects) -> Summary {
    let mut envs: Vec<(usize, EnvSummary)> = inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| {
            (
                i,
                env_summary(inp, runbooks, inp.objects.unwrap_or(objects)),
            )
        })
        .collect();
    // Worst first; among equally bad ones, what the running platform says (a live critical)
    // before what the repo's files say (parity), then the one with more critical facets.
    let rank = |s: Option<Severity>| s.map(|s| s.rank() + 1).unwrap_or(0);
    envs.sort_by_key(|(i, e)| {
        let live = e
            .facets
            .iter()
            .filter(|f| f.facet != Facet::Parity)
            .filter_map(|f| f.severity)
            .reduce(Severity::worst);
        let criticals = e
            .facets
            .iter()
            .filter(|f| f.severity == Some(Severity::Critical))
            .count();
        (
            std::cmp::Reverse(rank(e.worst())),
            std::cmp::Reverse(rank(live)),
            std::cmp::Reverse(criticals),
            *i,
        )
    });
    Summary {
        envs: envs.into_iter().map(|(_, e)| e).collect(),
    }
}

fn env_summary(inp: &EnvInput<'_>, runbooks: &[&Runbook], objects: &Objects) -> EnvSummary {
    let mut by_facet: BTreeMap<Facet, Vec<&Verdict>> = BTreeMap::new();
    for v in inp.verdicts.iter().filter(|v| v.env == inp.env) {
        by_facet.entry(Facet::of(v.pane)).or_default().push(v);
    }
    let mut facets = Vec::new();
    for facet in Facet::ALL {
        if facet == Facet::Parity {
            facets.push(parity_facet(inp));
            continue;
        }
        let vs = by_facet.get(&facet).cloned().unwrap_or_default();
        let worst = vs.iter().max_by_key(|v| v.severity.rank()).copied();
        let severity = worst.map(|v| v.severity);
        let next = match worst {
            Some(v) if matches!(v.severity, Severity::Critical | Severity::Warn) => {
                next_step(inp, facet, v, &vs, runbooks, objects)
            }
            _ => None,
        };
        facets.push(FacetState {
            facet,
            severity,
            headline: worst.map(|v| v.message.clone()),
            next,
        });
    }
    EnvSummary {
        env: inp.env.to_string(),
        protected: inp.protected,
        facets,
    }
}

fn parity_facet(inp: &EnvInput<'_>) -> FacetState {
    let Some(findings) = &inp.parity else {
        return FacetState {
            facet: Facet::Parity,
            severity: None,
            headline: None,
            next: None,
        };
    };
    let sev = |f: &parity::Finding| match f.severity {
        parity::Severity::Violation => Severity::Critical,
        parity::Severity::Warning => Severity::Warn,
        parity::Severity::CannotTell => Severity::Unknown,
    };
    let worst = findings.iter().max_by_key(|f| sev(f).rank());
    match worst {
        None => FacetState {
            facet: Facet::Parity,
            severity: Some(Severity::Ok),
            headline: Some("the parity contract holds".to_string()),
            next: None,
        },
        Some(f) => FacetState {
            facet: Facet::Parity,
            severity: Some(sev(f)),
            headline: Some(format!(
                "{} finding{}: {f}",
                findings.len(),
                if findings.len() == 1 { "" } else { "s" }
            )),
            next: Some(NextStep::Check {
                env: inp.env.to_string(),
            }),
        },
    }
}

/// Runbooks planned for `env`, in the order given.
fn for_env<'r>(runbooks: &[&'r Runbook], env: &str) -> impl Iterator<Item = &'r Runbook> {
    runbooks
        .iter()
        .copied()
        .filter(move |r| r.environments.iter().any(|e| e == env))
        .collect::<Vec<_>>()
        .into_iter()
}

/// `r` proposed as the next step on `env`.
fn propose(r: &Runbook, env: &str, fixes: bool, why: String) -> NextStep {
    NextStep::Runbook {
        id: r.id.clone(),
        env: env.to_string(),
        fixes,
        why,
    }
}

/// The id of `r`'s first step whose spec `pick` accepts.
fn first_step(r: &Runbook, pick: impl Fn(&StepSpec) -> bool) -> Option<String> {
    r.steps.iter().find(|s| pick(&s.spec)).map(|s| s.id.clone())
}

/// The runbook that brings every agent onto the VIP: one that waits for the
/// `agents-dial-vip` condition after changing something (its own proof of the fix).
fn agents_fixer(runbooks: &[&Runbook], env: &str) -> Option<NextStep> {
    for_env(runbooks, env).find_map(|r| {
        let proves = first_step(r, |spec| {
            matches!(spec, StepSpec::KubeWait { condition, .. } if condition.starts_with("agents-dial-vip"))
        })?;
        let why = format!("its step `{proves}` waits until every agent dials the VIP");
        Some(propose(r, env, r.mutates() || !r.read_only, why))
    })
}

/// The runbook that ends an eviction loop: one that waits for `vpn-remotes-differ` in the
/// repo and later proves `vpn-loop-gone` on the live gateways.
fn eviction_fixer(runbooks: &[&Runbook], env: &str) -> Option<NextStep> {
    for_env(runbooks, env).find_map(|r| {
        let waits = first_step(r, |spec| {
            matches!(spec, StepSpec::RepoWait { condition, .. } if condition.starts_with("vpn-remotes-differ"))
        })?;
        let proves = first_step(r, |spec| {
            matches!(spec, StepSpec::VpnWait { condition, .. } if condition.starts_with("vpn-loop-gone"))
        })?;
        let why = format!(
            "its step `{waits}` waits for one gateway's remote to differ in the repo, `{proves}` \
             proves the loop gone"
        );
        Some(propose(r, env, true, why))
    })
}

/// A read-only runbook whose target is `group`: it verifies, it changes nothing (the VPN
/// gateways' look, the servers' health look).
fn read_only_on(runbooks: &[&Runbook], env: &str, group: &str, why: &str) -> Option<NextStep> {
    for_env(runbooks, env).find_map(|r| {
        let t = r.target.as_ref()?;
        (r.read_only && t.group == group).then(|| propose(r, env, false, why.to_string()))
    })
}

/// A runbook with an ssh step reading `needle`: a mutating one whose read-back reads the
/// IO queue fixes starvation; a read-only one that reads the pressure verifies it.
fn by_ssh_read(runbooks: &[&Runbook], env: &str, needle: &str, fixes: bool) -> Option<NextStep> {
    for_env(runbooks, env).find_map(|r| {
        if fixes == r.read_only || (fixes && !r.mutates()) {
            return None;
        }
        let step = first_step(
            r,
            |spec| matches!(spec, StepSpec::Ssh { command, .. } if command.contains(needle)),
        )?;
        Some(propose(
            r,
            env,
            fixes,
            format!("its step `{step}` reads {needle}"),
        ))
    })
}

/// An agent pod looked at through the agent's container (its logs are that container's).
fn agent_pod(env: &str, ns: &str, pod: &str, container: &str, kinds: Vec<LookKind>) -> NextStep {
    NextStep::Look(Look {
        env: env.to_string(),
        object: ObjectRef {
            kind: "Pod".into(),
            namespace: Some(ns.to_string()),
            name: pod.to_string(),
        },
        kinds,
        container: Some(container.to_string()),
    })
}

fn look(env: &str, kind: &str, ns: Option<&str>, name: &str, kinds: Vec<LookKind>) -> NextStep {
    NextStep::Look(Look {
        env: env.to_string(),
        object: ObjectRef {
            kind: kind.to_string(),
            namespace: ns.map(str::to_string),
            name: name.to_string(),
        },
        kinds,
        container: None,
    })
}

fn next_step(
    inp: &EnvInput<'_>,
    facet: Facet,
    worst: &Verdict,
    all: &[&Verdict],
    runbooks: &[&Runbook],
    objects: &Objects,
) -> Option<NextStep> {
    let env = inp.env;
    let ns = objects.namespace.as_str();
    match facet {
        Facet::Agents => {
            // A stuck rollout is explained by the stuck pod: its events and its log lines.
            if let Some(RolloutState::Stuck { pod, .. }) =
                inp.rollout.and_then(|r| r.state.as_ref())
            {
                if all
                    .iter()
                    .any(|v| v.rule == Rule::Rollout && v.severity == worst.severity)
                {
                    return Some(agent_pod(
                        env,
                        ns,
                        pod,
                        &objects.agent_container,
                        vec![LookKind::Events, LookKind::Logs, LookKind::Describe],
                    ));
                }
            }
            let on_node_ip = inp.agents.is_some_and(|a| {
                a.agents
                    .iter()
                    .any(|r| matches!(r.endpoint, Endpoint::NodeAddress { .. }))
            });
            // Some agents on the VIP and some on a node's address: the drifted pods were
            // started from another config than the rest, and a rollout of what the cluster
            // already says changes nothing (issue 38: its preview said `unchanged`, then it
            // waited 300 s). The drifted pod is what must go: look at it.
            let drifted = inp.agents.and_then(|a| {
                let on_vip = a.agents.iter().any(|r| r.endpoint == Endpoint::Vip);
                let first = a
                    .agents
                    .iter()
                    .find(|r| matches!(r.endpoint, Endpoint::NodeAddress { .. }));
                on_vip.then_some(first).flatten()
            });
            if let Some(r) = drifted {
                return Some(agent_pod(
                    env,
                    ns,
                    &r.pod,
                    &objects.agent_container,
                    vec![LookKind::Describe, LookKind::Events, LookKind::Logs],
                ));
            }
            if on_node_ip {
                if let Some(n) = agents_fixer(runbooks, env) {
                    return Some(n);
                }
            }
            // Otherwise the pod the verdict names, or the DaemonSet.
            let pod = worst.subject.strip_prefix("pod ");
            Some(match pod {
                Some(p) => agent_pod(
                    env,
                    ns,
                    p,
                    &objects.agent_container,
                    vec![LookKind::Logs, LookKind::Events, LookKind::Describe],
                ),
                None => look(
                    env,
                    "DaemonSet",
                    Some(ns),
                    &objects.daemonset,
                    vec![LookKind::Events, LookKind::Describe],
                ),
            })
        }
        Facet::Vpn => {
            // Two gateways evicting each other: the runbook that points one elsewhere, the
            // one that waits for the repo's remotes to differ and then proves the loop gone.
            let looping = all.iter().any(|v| v.rule == Rule::VpnEvictionLoop);
            looping
                .then(|| eviction_fixer(runbooks, env))
                .flatten()
                .or_else(|| {
                    read_only_on(
                        runbooks,
                        env,
                        "vpn_gateways",
                        "read-only, on the environment's VPN gateways",
                    )
                })
        }
        Facet::Etcd => {
            let starving = all
                .iter()
                .any(|v| v.rule == Rule::EtcdIoPressure && v.severity == worst.severity);
            if starving {
                return by_ssh_read(runbooks, env, "/sys/block/", true)
                    .or_else(|| by_ssh_read(runbooks, env, "/proc/pressure/io", false));
            }
            if worst.rule == Rule::EtcdIoPressure {
                return by_ssh_read(runbooks, env, "/proc/pressure/io", false);
            }
            // One member's trouble (not answering, its own errors, its disk): its node. A
            // finding about the membership, an alarm or the leader is no node's, and no
            // runbook here changes it: no step is offered rather than one that cannot help.
            let node = worst
                .subject
                .strip_prefix("member ")
                .or_else(|| worst.subject.strip_prefix("server "));
            node.map(|n| {
                look(
                    env,
                    "Node",
                    None,
                    n,
                    vec![LookKind::Describe, LookKind::Events],
                )
            })
        }
        Facet::Nodes => {
            let node = worst
                .subject
                .strip_prefix("node ")
                .or_else(|| worst.subject.strip_prefix("server "));
            match node {
                Some(n) => Some(look(
                    env,
                    "Node",
                    None,
                    n,
                    vec![LookKind::Describe, LookKind::Events],
                )),
                None => read_only_on(
                    runbooks,
                    env,
                    "servers",
                    "read-only, on the environment's servers",
                ),
            }
        }
        Facet::Vip => {
            // A holder in trouble: its node; otherwise the lease itself.
            if worst.rule == Rule::LeaseHolderReady {
                if let Some(h) = worst.subject.strip_prefix("holder ") {
                    return Some(look(
                        env,
                        "Node",
                        None,
                        h,
                        vec![LookKind::Describe, LookKind::Events],
                    ));
                }
            }
            Some(look(
                env,
                "Lease",
                Some(ns),
                &objects.lease_name,
                vec![LookKind::Describe, LookKind::Events],
            ))
        }
        Facet::Parity => Some(NextStep::Check {
            env: env.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::checks::live::{AgentRow, Resolved};

    fn runbooks() -> Vec<Runbook> {
        let set = hk_engine::runbook::embedded::load(&[]).expect("embedded runbooks load");
        set.iter().map(|l| l.runbook.clone()).collect()
    }

    fn objects() -> Objects {
        Objects {
            namespace: "kube-system".into(),
            lease_name: "plndr-cp-lock".into(),
            agent_container: "cilium-agent".into(),
            daemonset: "cilium".into(),
        }
    }

    fn verdict(env: &str, pane: Pane, rule: Rule, sev: Severity, subject: &str) -> Verdict {
        Verdict {
            pane,
            rule,
            severity: sev,
            env: env.into(),
            subject: subject.into(),
            message: format!("{subject} is {sev}"),
        }
    }

    /// One agent drifted onto its node's address while the others dial the VIP: what the
    /// cluster says is already the VIP, so a rollout of it changes nothing; the drifted pod
    /// is offered (issue 38: `:fault prod agent-drifts 2` suggested cilium-endpoint-rollout,
    /// whose preview said `unchanged` before it waited 300 s).
    #[test]
    fn a_drifted_agent_offers_its_pod_not_a_rollout_that_changes_nothing() {
        let rbs = runbooks();
        let refs: Vec<&Runbook> = rbs.iter().collect();
        let row = |pod: &str, endpoint: Endpoint| AgentRow {
            pod: pod.into(),
            node: Some("k3s-prod-2".into()),
            phase: "Running".into(),
            ready: true,
            host: Resolved::Unset,
            port: Resolved::Unset,
            endpoint,
        };
        let agents = AgentEnvPane {
            env: "prod".into(),
            agents: vec![
                row("cilium-a", Endpoint::Vip),
                row(
                    "cilium-b",
                    Endpoint::NodeAddress {
                        node: "k3s-prod-2".into(),
                        address: "192.168.2.11".into(),
                    },
                ),
                row("cilium-c", Endpoint::Vip),
            ],
            verdicts: vec![],
        };
        let prod = EnvInput {
            env: "prod",
            verdicts: vec![verdict(
                "prod",
                Pane::AgentEnv,
                Rule::AgentsSummary,
                Severity::Critical,
                "agents",
            )],
            agents: Some(&agents),
            ..EnvInput::default()
        };
        let s = summarize(&[prod], &refs, &objects());
        match s.envs[0].facet(Facet::Agents).and_then(|f| f.next.clone()) {
            Some(NextStep::Look(l)) => {
                assert_eq!(l.object.kind, "Pod");
                assert_eq!(l.object.name, "cilium-b");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn agents_on_a_node_ip_name_the_runbook_that_fixes_them_and_sort_first() {
        let rbs = runbooks();
        let refs: Vec<&Runbook> = rbs.iter().collect();
        let agents = AgentEnvPane {
            env: "prod".into(),
            agents: vec![AgentRow {
                pod: "cilium-x".into(),
                node: Some("k3s-prod-1".into()),
                phase: "Running".into(),
                ready: true,
                host: Resolved::Unset,
                port: Resolved::Unset,
                endpoint: Endpoint::NodeAddress {
                    node: "k3s-prod-1".into(),
                    address: "192.168.2.10".into(),
                },
            }],
            verdicts: vec![],
        };
        let dev = EnvInput {
            env: "dev",
            verdicts: vec![verdict(
                "dev",
                Pane::VipLease,
                Rule::LeaseHeld,
                Severity::Ok,
                "lease",
            )],
            ..EnvInput::default()
        };
        let prod = EnvInput {
            env: "prod",
            protected: true,
            verdicts: vec![verdict(
                "prod",
                Pane::AgentEnv,
                Rule::AgentsSummary,
                Severity::Critical,
                "agents",
            )],
            agents: Some(&agents),
            ..EnvInput::default()
        };
        let s = summarize(&[dev, prod], &refs, &objects());
        assert_eq!(s.envs[0].env, "prod", "worst first");
        assert_eq!(s.critical_env().map(|e| e.env.as_str()), Some("prod"));
        let f = s.envs[0].facet(Facet::Agents).expect("agents facet");
        match &f.next {
            Some(NextStep::Runbook {
                id,
                env,
                fixes,
                why,
            }) => {
                assert_eq!(id, "cilium-endpoint-rollout");
                assert_eq!(env, "prod");
                assert!(fixes);
                assert!(
                    why.contains("agents-dial-vip") || why.contains("dials the VIP"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.envs[1].worst(), Some(Severity::Ok));
        assert_eq!(s.envs[1].facet(Facet::Etcd).and_then(|f| f.severity), None);
    }

    /// An etcd finding no runbook here changes (a learner, members disagreeing) offers no
    /// step; one member's trouble offers a look at its node; never node-health for them
    /// (issue 38: `etcd ✗` on a membership finding suggested node-health).
    #[test]
    fn etcd_membership_findings_offer_no_runbook_that_cannot_change_them() {
        let rbs = runbooks();
        let refs: Vec<&Runbook> = rbs.iter().collect();
        let next_for = |rule, subject: &str| {
            let prod = EnvInput {
                env: "prod",
                verdicts: vec![verdict(
                    "prod",
                    Pane::Etcd,
                    rule,
                    Severity::Critical,
                    subject,
                )],
                ..EnvInput::default()
            };
            let s = summarize(&[prod], &refs, &objects());
            s.envs[0].facet(Facet::Etcd).and_then(|f| f.next.clone())
        };
        assert_eq!(next_for(Rule::EtcdMembership, "membership"), None);
        match next_for(Rule::EtcdStatus, "member k3s-prod-2") {
            Some(NextStep::Look(l)) => {
                assert_eq!(l.object.kind, "Node");
                assert_eq!(l.object.name, "k3s-prod-2");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn vpn_etcd_and_stuck_rollouts_have_their_next_steps() {
        let rbs = runbooks();
        let refs: Vec<&Runbook> = rbs.iter().collect();
        let rollout = RolloutPane {
            env: "prod".into(),
            state: Some(RolloutState::Stuck {
                pod: "cilium-stuck".into(),
                node: Some("k3s-prod-2".into()),
                not_ready_ms: 300_000,
            }),
            pods: vec![],
            verdicts: vec![],
        };
        let prod = EnvInput {
            env: "prod",
            verdicts: vec![
                verdict(
                    "prod",
                    Pane::VpnEgress,
                    Rule::VpnFlapping,
                    Severity::Warn,
                    "gw",
                ),
                verdict(
                    "prod",
                    Pane::Etcd,
                    Rule::EtcdIoPressure,
                    Severity::Critical,
                    "server k3s-prod-1",
                ),
                verdict(
                    "prod",
                    Pane::AgentEnv,
                    Rule::Rollout,
                    Severity::Critical,
                    "daemonset cilium",
                ),
            ],
            rollout: Some(&rollout),
            ..EnvInput::default()
        };
        let s = summarize(&[prod], &refs, &objects());
        let e = &s.envs[0];
        let next = |f| e.facet(f).and_then(|f| f.next.clone());
        assert!(
            matches!(next(Facet::Vpn), Some(NextStep::Runbook { ref id, fixes: false, .. }) if id == "vpn-egress-verify"),
            "{:?}",
            next(Facet::Vpn)
        );
        assert!(
            matches!(next(Facet::Etcd), Some(NextStep::Runbook { ref id, fixes: true, .. }) if id == "etcd-io-priority"),
            "{:?}",
            next(Facet::Etcd)
        );
        match next(Facet::Agents) {
            Some(NextStep::Look(l)) => {
                assert_eq!(l.object.name, "cilium-stuck");
                assert_eq!(l.object.namespace.as_deref(), Some("kube-system"));
                assert_eq!(l.kinds[0], LookKind::Events);
                assert!(l.kinds.contains(&LookKind::Logs));
                assert_eq!(l.container.as_deref(), Some("cilium-agent"));
            }
            other => panic!("{other:?}"),
        }
    }

    /// The Lease a next step looks at is the environment's own (hk-console.yaml `names:`),
    /// not the seed's.
    #[test]
    fn the_lease_looked_at_is_the_environments_own() {
        let held = |env: &'static str| {
            vec![verdict(
                env,
                Pane::VipLease,
                Rule::LeaseFresh,
                Severity::Critical,
                "lease",
            )]
        };
        let renamed = Objects {
            lease_name: "my-cp-lock".into(),
            ..objects()
        };
        let dev = EnvInput {
            env: "dev",
            verdicts: held("dev"),
            objects: Some(&renamed),
            ..EnvInput::default()
        };
        let prod = EnvInput {
            env: "prod",
            verdicts: held("prod"),
            ..EnvInput::default()
        };
        let s = summarize(&[dev, prod], &[], &objects());
        let looked_at = |env: &str| match s
            .envs
            .iter()
            .find(|e| e.env == env)
            .and_then(|e| e.facet(Facet::Vip))
            .and_then(|f| f.next.clone())
        {
            Some(NextStep::Look(l)) => (l.object.kind, l.object.name),
            other => panic!("{other:?}"),
        };
        assert_eq!(looked_at("dev"), ("Lease".into(), "my-cp-lock".into()));
        assert_eq!(looked_at("prod"), ("Lease".into(), "plndr-cp-lock".into()));
    }

    #[test]
    fn an_eviction_loop_offers_the_runbook_that_fixes_it() {
        let rbs = runbooks();
        let refs: Vec<&Runbook> = rbs.iter().collect();
        let prod = EnvInput {
            env: "prod",
            verdicts: vec![verdict(
                "prod",
                Pane::VpnEgress,
                Rule::VpnEvictionLoop,
                Severity::Critical,
                "dev/k3s-dev-3 + prod/k3s-prod-3",
            )],
            ..EnvInput::default()
        };
        let s = summarize(&[prod], &refs, &objects());
        match s.envs[0].facet(Facet::Vpn).and_then(|f| f.next.clone()) {
            Some(NextStep::Runbook { id, fixes, why, .. }) => {
                assert_eq!(id, hk_engine::checks::live::EVICTION_FIX);
                assert!(fixes);
                assert_eq!(
                    why,
                    "its step `remote-changed` waits for one gateway's remote to differ in the \
                     repo, `loop-gone` proves the loop gone"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parity_findings_land_in_their_environment() {
        let f = parity::Finding {
            rule: "cilium-endpoint",
            severity: parity::Severity::Violation,
            env: Some("prod".into()),
            file: "clusters/prod/kustomization.yaml".into(),
            line: 7,
            message: "K3S_API_HOST is a node address".into(),
        };
        let prod = EnvInput {
            env: "prod",
            parity: Some(vec![&f]),
            ..EnvInput::default()
        };
        let dev = EnvInput {
            env: "dev",
            parity: Some(vec![]),
            ..EnvInput::default()
        };
        let s = summarize(&[dev, prod], &[], &objects());
        let p = s
            .env("prod")
            .and_then(|e| e.facet(Facet::Parity))
            .expect("facet");
        assert_eq!(p.severity, Some(Severity::Critical));
        assert!(
            p.headline
                .as_deref()
                .is_some_and(|h| h.contains("clusters/prod/kustomization.yaml:7")),
            "{:?}",
            p.headline
        );
        assert_eq!(p.next, Some(NextStep::Check { env: "prod".into() }));
        let d = s
            .env("dev")
            .and_then(|e| e.facet(Facet::Parity))
            .expect("facet");
        assert_eq!(d.severity, Some(Severity::Ok));

        // Both critical: the one the running platform says is critical comes first.
        let dev = EnvInput {
            env: "dev",
            parity: Some(vec![&f]),
            ..EnvInput::default()
        };
        let prod = EnvInput {
            env: "prod",
            verdicts: vec![verdict(
                "prod",
                Pane::AgentEnv,
                Rule::AgentsSummary,
                Severity::Critical,
                "agents",
            )],
            parity: Some(vec![&f]),
            ..EnvInput::default()
        };
        let s = summarize(&[dev, prod], &[], &objects());
        assert_eq!(s.envs[0].env, "prod");
        assert_eq!(s.critical_env().map(|e| e.env.as_str()), Some("prod"));
    }
}
