//! The live (L2) verdict rules: what the running clusters and gateways say, judged.
//!
//! Owns: the plain input structs the future watchers fill (from the API server and over SSH),
//! the pure rules that turn them into typed [`Verdict`]s, the OpenVPN/journald line parser the
//! VPN pane needs, and the exit-code policy of `observe --once` ([`exit_code`]).
//! Must not: do IO, read the clock, or know any particular homelab. Times are inputs
//! ([`Timestamp`], ms since the Unix epoch); every address, host, service name and interface
//! comes from the inputs. The kube client, SSH and the panes' UI live elsewhere.
//!
//! Panes and their rules:
//! - VIP lease ([`vip_lease`]): the kube-vip Lease (holder, renew age vs duration) and a TCP
//!   probe of VIP:port. No lease = critical, VIP silent = critical, stale renew = warn, holder
//!   that is no server of the environment = warn, lease and probe disagreeing = named.
//! - Agent env ([`agent_env`], [`rollout`]): each cilium-agent's `KUBERNETES_SERVICE_HOST`/
//!   `_PORT` (literal or from a ConfigMap, see [`resolve_env`]) against the environment's VIP
//!   and node addresses (a node address = single-node dependency, the 2026-09-06 incident),
//!   and the DaemonSet rollout (rolled out / rolling / stuck on an unready updated pod).
//! - VPN egress ([`vpn_gateway`], [`vpn_across`]): service state, exit IP through the tunnel vs
//!   without it (equal = leak), and from the unit's journal ([`parse_journal`]) the server, the
//!   tunnel address and the (re)connect times: flapping per gateway, and across gateways the
//!   eviction loop of 2026-09-12 (same server AND same tunnel address).
//! - Nodes ([`nodes`]): Ready condition, roles from `node-role.kubernetes.io/*` labels, and
//!   servers of the environment the cluster does not know.
//!
//! A source that could not be read is given as [`Look::CouldNotLook`] and becomes a
//! [`Rule::CouldNotLook`] verdict; [`exit_code`] maps critical to 1 and could-not-look to 2.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

pub use crate::runbook::machine::Timestamp;

// ---------------------------------------------------------------------------------------------
// Verdicts
// ---------------------------------------------------------------------------------------------

/// How bad a verdict is. `Unknown` means the rule could not decide (e.g. an endpoint that is
/// neither the VIP nor a node address, or a source that could not be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Ok,
    Warn,
    Critical,
    Unknown,
}

impl Severity {
    /// Order for "the worst of": ok < unknown < warn < critical.
    pub fn rank(self) -> u8 {
        match self {
            Severity::Ok => 0,
            Severity::Unknown => 1,
            Severity::Warn => 2,
            Severity::Critical => 3,
        }
    }

    /// The worse of two severities (by [`Severity::rank`]).
    pub fn worst(self, other: Severity) -> Severity {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Ok => "ok",
            Severity::Warn => "warn",
            Severity::Critical => "critical",
            Severity::Unknown => "unknown",
        })
    }
}

/// Which pane a verdict belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pane {
    VipLease,
    AgentEnv,
    VpnEgress,
    Nodes,
}

/// Which rule produced a verdict (stable names for `--json` and for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A source (API server, SSH, a probe) could not be read at all.
    CouldNotLook,
    /// The Lease exists and has a holder.
    LeaseHeld,
    /// The holder is (or is not) a server of the environment.
    LeaseHolder,
    /// renew age vs lease duration.
    LeaseFresh,
    /// TCP connect to VIP:port.
    VipAnswers,
    /// Lease state and VIP probe tell the same story.
    LeaseVipAgree,
    /// One agent's KUBERNETES_SERVICE_HOST.
    AgentHost,
    /// One agent's KUBERNETES_SERVICE_PORT.
    AgentPort,
    /// All agents together.
    AgentsSummary,
    /// The cilium DaemonSet rollout.
    Rollout,
    /// The tunnel service's active state.
    VpnService,
    /// Exit IP through the tunnel vs without it.
    VpnExit,
    /// Reconnects every few minutes.
    VpnFlapping,
    /// Two gateways on one server with one tunnel address.
    VpnEvictionLoop,
    /// A node's Ready condition.
    NodeReady,
    /// A server of the environment the cluster does not list.
    NodeMissing,
}

/// One judged fact. `subject` names what it is about (a pod, a host, a lease); `message`
/// names the hosts, pods and values involved, for a human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub pane: Pane,
    pub rule: Rule,
    pub severity: Severity,
    pub env: String,
    pub subject: String,
    pub message: String,
}

impl Verdict {
    fn new(
        pane: Pane,
        rule: Rule,
        severity: Severity,
        env: &str,
        subject: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Verdict {
            pane,
            rule,
            severity,
            env: env.to_string(),
            subject: subject.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} {}: {}",
            self.severity, self.env, self.subject, self.message
        )
    }
}

/// The exit code of `observe --once`: 1 if any verdict is critical, else 2 if any source
/// could not be read, else 0. Critical wins because it is the more urgent news.
pub fn exit_code(verdicts: &[Verdict]) -> i32 {
    if verdicts.iter().any(|v| v.severity == Severity::Critical) {
        1
    } else if verdicts.iter().any(|v| v.rule == Rule::CouldNotLook) {
        2
    } else {
        0
    }
}

/// One look at every pane (what `observe --once [--json]` prints). Each list may hold
/// several environments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub vip_lease: Vec<VipLeasePane>,
    pub agent_env: Vec<AgentEnvPane>,
    pub rollout: Vec<RolloutPane>,
    pub vpn: Vec<GatewayPane>,
    /// [`vpn_across`] over all gateways of all environments.
    pub vpn_across: Vec<Verdict>,
    pub nodes: Vec<NodesPane>,
}

impl Snapshot {
    /// Every verdict, pane by pane.
    pub fn verdicts(&self) -> Vec<Verdict> {
        let mut all = Vec::new();
        all.extend(
            self.vip_lease
                .iter()
                .flat_map(|p| p.verdicts.iter().cloned()),
        );
        all.extend(
            self.agent_env
                .iter()
                .flat_map(|p| p.verdicts.iter().cloned()),
        );
        all.extend(self.rollout.iter().flat_map(|p| p.verdicts.iter().cloned()));
        all.extend(self.vpn.iter().flat_map(|p| p.verdicts.iter().cloned()));
        all.extend(self.vpn_across.iter().cloned());
        all.extend(self.nodes.iter().flat_map(|p| p.verdicts.iter().cloned()));
        all
    }

    /// [`exit_code`] over all verdicts.
    pub fn exit_code(&self) -> i32 {
        exit_code(&self.verdicts())
    }
}

/// The worst severity among verdicts (`Ok` for none).
pub fn worst(verdicts: &[Verdict]) -> Severity {
    verdicts
        .iter()
        .fold(Severity::Ok, |acc, v| acc.worst(v.severity))
}

// ---------------------------------------------------------------------------------------------
// Common inputs
// ---------------------------------------------------------------------------------------------

/// What a watcher saw, or why it saw nothing (API unreachable, 403, SSH failed...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "look")]
pub enum Look<T> {
    Seen { value: T },
    CouldNotLook { reason: String },
}

impl<T> Look<T> {
    pub fn seen(value: T) -> Self {
        Look::Seen { value }
    }
    pub fn could_not(reason: impl Into<String>) -> Self {
        Look::CouldNotLook {
            reason: reason.into(),
        }
    }
    pub fn as_seen(&self) -> Option<&T> {
        match self {
            Look::Seen { value } => Some(value),
            Look::CouldNotLook { .. } => None,
        }
    }
}

/// One server of an environment (inventory name and address).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Server {
    pub name: String,
    pub address: IpAddr,
}

/// What the rules need to know about an environment: its VIP, API port and servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvTopology {
    pub env: String,
    pub vip: IpAddr,
    pub api_port: u16,
    pub servers: Vec<Server>,
}

impl EnvTopology {
    fn server_by_address(&self, addr: IpAddr) -> Option<&Server> {
        self.servers.iter().find(|s| s.address == addr)
    }

    /// kube-vip holder identities are the node name (`vip_nodename` = spec.nodeName); also
    /// accept the name as the first label of an FQDN.
    fn server_by_identity(&self, identity: &str) -> Option<&Server> {
        self.servers.iter().find(|s| {
            identity == s.name
                || identity
                    .strip_prefix(s.name.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

fn could_not(pane: Pane, env: &str, subject: &str, reason: &str) -> Verdict {
    Verdict::new(
        pane,
        Rule::CouldNotLook,
        Severity::Unknown,
        env,
        subject,
        format!("could not look: {reason}"),
    )
}

/// `1m 30s`-style rendering of a duration for messages.
fn human_ms(ms: u64) -> String {
    crate::time::span_ms(ms, crate::time::Style::Words)
}

/// `HH:MM:SS` (UTC) of a timestamp, for lists of restart times.
fn clock(t: Timestamp) -> String {
    crate::time::clock(t)
}

// ---------------------------------------------------------------------------------------------
// 1. VIP lease
// ---------------------------------------------------------------------------------------------

/// The kube-vip control-plane Lease as read from kube-system (fields of `LeaseSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseObs {
    pub name: String,
    pub holder_identity: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub lease_duration_seconds: Option<u64>,
    pub lease_transitions: Option<u64>,
}

/// A TCP connect to VIP:port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum TcpProbe {
    Connected { latency_ms: u64 },
    Failed { error: String },
}

/// Input of the VIP lease pane. `lease`: `Seen { None }` = no such Lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipLeaseInput {
    pub lease: Look<Option<LeaseObs>>,
    pub probe: Look<TcpProbe>,
    pub now: Timestamp,
}

/// What the VIP lease pane shows, plus its verdicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipLeasePane {
    pub env: String,
    pub vip: IpAddr,
    pub port: u16,
    pub holder: Option<String>,
    /// The environment server the holder identity maps to.
    pub holder_node: Option<String>,
    pub renew_age_ms: Option<u64>,
    pub lease_duration_seconds: Option<u64>,
    pub transitions: Option<u64>,
    pub probe: Option<TcpProbe>,
    pub verdicts: Vec<Verdict>,
}

impl VipLeasePane {
    /// The pane of `env`'s VIP before anything is known about its lease or probe.
    pub fn unjudged(env: &str, vip: IpAddr, port: u16) -> VipLeasePane {
        VipLeasePane {
            env: env.to_string(),
            vip,
            port,
            holder: None,
            holder_node: None,
            renew_age_ms: None,
            lease_duration_seconds: None,
            transitions: None,
            probe: None,
            verdicts: Vec::new(),
        }
    }
}

/// Judge the kube-vip Lease and the VIP probe. Stale means renew age strictly greater than
/// the lease duration (at exactly the duration the holder is still within its lease).
pub fn vip_lease(topo: &EnvTopology, input: &VipLeaseInput) -> VipLeasePane {
    let env = topo.env.as_str();
    let vip_at = format!("{}:{}", topo.vip, topo.api_port);
    let mut pane = VipLeasePane::unjudged(env, topo.vip, topo.api_port);
    let v = |rule, sev, subject: &str, msg: String| {
        Verdict::new(Pane::VipLease, rule, sev, env, subject, msg)
    };

    // None = could not look; Some(true) = a live holder; Some(false) = missing/stale/empty.
    let mut lease_live: Option<bool> = None;
    let mut lease_story = String::new();
    match &input.lease {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VipLease, env, "lease", reason));
        }
        Look::Seen { value: None } => {
            lease_live = Some(false);
            lease_story = "no kube-vip lease".to_string();
            pane.verdicts.push(v(
                Rule::LeaseHeld,
                Severity::Critical,
                "lease",
                format!(
                    "no kube-vip lease: nobody is elected to announce the VIP {}",
                    topo.vip
                ),
            ));
        }
        Look::Seen { value: Some(lease) } => {
            pane.holder = lease.holder_identity.clone().filter(|h| !h.is_empty());
            pane.lease_duration_seconds = lease.lease_duration_seconds;
            pane.transitions = lease.lease_transitions;
            let subject = format!("lease {}", lease.name);
            match &pane.holder {
                None => {
                    lease_live = Some(false);
                    lease_story = format!("lease {} has no holder", lease.name);
                    pane.verdicts.push(v(
                        Rule::LeaseHeld,
                        Severity::Critical,
                        &subject,
                        format!(
                            "lease {} has no holder: nobody announces the VIP {}",
                            lease.name, topo.vip
                        ),
                    ));
                }
                Some(holder) => {
                    lease_live = Some(true);
                    lease_story = format!("lease {} is held by {holder}", lease.name);
                    let transitions = lease
                        .lease_transitions
                        .map(|t| format!(", {t} transitions"))
                        .unwrap_or_default();
                    pane.verdicts.push(v(
                        Rule::LeaseHeld,
                        Severity::Ok,
                        &subject,
                        format!("lease {} held by {holder}{transitions}", lease.name),
                    ));
                    match topo.server_by_identity(holder) {
                        Some(s) => {
                            pane.holder_node = Some(s.name.clone());
                            pane.verdicts.push(v(
                                Rule::LeaseHolder,
                                Severity::Ok,
                                &subject,
                                format!("holder {holder} is server {} ({})", s.name, s.address),
                            ));
                        }
                        None => pane.verdicts.push(v(
                            Rule::LeaseHolder,
                            Severity::Warn,
                            &subject,
                            format!(
                                "holder {holder} is none of {env}'s servers ({})",
                                names(&topo.servers)
                            ),
                        )),
                    }
                    match (lease.renew_time, lease.lease_duration_seconds) {
                        (Some(renew), Some(dur)) => {
                            // A renew in the future (clock skew) counts as just renewed.
                            let age = input.now.0.saturating_sub(renew.0);
                            pane.renew_age_ms = Some(age);
                            let dur_ms = dur.saturating_mul(1000);
                            if age > dur_ms {
                                lease_live = Some(false);
                                lease_story = format!(
                                    "lease {} is stale (last renewed by {holder} {} ago)",
                                    lease.name,
                                    human_ms(age)
                                );
                                pane.verdicts.push(v(
                                    Rule::LeaseFresh,
                                    Severity::Warn,
                                    &subject,
                                    format!(
                                        "stale: {holder} last renewed {} ago, longer than the \
                                         lease duration {dur}s",
                                        human_ms(age)
                                    ),
                                ));
                            } else {
                                pane.verdicts.push(v(
                                    Rule::LeaseFresh,
                                    Severity::Ok,
                                    &subject,
                                    format!(
                                        "renewed {} ago (lease duration {dur}s)",
                                        human_ms(age)
                                    ),
                                ));
                            }
                        }
                        (renew, _) => {
                            if let Some(r) = renew {
                                pane.renew_age_ms = Some(input.now.0.saturating_sub(r.0));
                            }
                            let missing = if renew.is_none() {
                                "renewTime"
                            } else {
                                "leaseDurationSeconds"
                            };
                            pane.verdicts.push(v(
                                Rule::LeaseFresh,
                                Severity::Unknown,
                                &subject,
                                format!("cannot tell freshness: the lease has no {missing}"),
                            ));
                        }
                    }
                }
            }
        }
    }

    let mut vip_answers: Option<bool> = None;
    let mut probe_story = String::new();
    match &input.probe {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VipLease, env, &vip_at, reason));
        }
        Look::Seen { value } => {
            pane.probe = Some(value.clone());
            match value {
                TcpProbe::Connected { latency_ms } => {
                    vip_answers = Some(true);
                    probe_story = format!("VIP {vip_at} answers");
                    pane.verdicts.push(v(
                        Rule::VipAnswers,
                        Severity::Ok,
                        &vip_at,
                        format!("VIP {vip_at} answers ({latency_ms} ms)"),
                    ));
                }
                TcpProbe::Failed { error } => {
                    vip_answers = Some(false);
                    probe_story = format!("VIP {vip_at} does not answer ({error})");
                    pane.verdicts.push(v(
                        Rule::VipAnswers,
                        Severity::Critical,
                        &vip_at,
                        format!("VIP {vip_at} does not answer: {error}"),
                    ));
                }
            }
        }
    }

    match (lease_live, vip_answers) {
        (Some(true), Some(false)) => pane.verdicts.push(v(
            Rule::LeaseVipAgree,
            Severity::Critical,
            &vip_at,
            format!(
                "{lease_story}, but {probe_story}: the holder is not announcing or the API \
                 server behind it is down"
            ),
        )),
        (Some(false), Some(true)) => pane.verdicts.push(v(
            Rule::LeaseVipAgree,
            Severity::Warn,
            &vip_at,
            format!(
                "{probe_story}, but {lease_story}: something answers that no live leader \
                 announces (a former holder's ARP, or another host on the address)"
            ),
        )),
        (Some(true), Some(true)) => pane.verdicts.push(v(
            Rule::LeaseVipAgree,
            Severity::Ok,
            &vip_at,
            format!("{lease_story} and {probe_story}"),
        )),
        _ => {}
    }
    pane
}

fn names(servers: &[Server]) -> String {
    if servers.is_empty() {
        return "no servers known".to_string();
    }
    servers
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// 2. Agent env and the DaemonSet rollout
// ---------------------------------------------------------------------------------------------

/// Where a container env var's value comes from (the `env[]` entry of the pod spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "from")]
pub enum EnvSource {
    /// `value: "..."`.
    Literal { value: String },
    /// `valueFrom.configMapKeyRef`.
    ConfigMapKey {
        config_map: String,
        key: String,
        #[serde(default)]
        optional: bool,
    },
    /// Any other `valueFrom` (fieldRef, secretKeyRef, resourceFieldRef): not resolved here.
    Other { description: String },
}

/// One `env[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    pub name: String,
    pub source: EnvSource,
}

/// One `envFrom[].configMapRef` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvFromConfigMap {
    pub config_map: String,
    #[serde(default)]
    pub prefix: String,
}

/// ConfigMaps of the pod's namespace: name -> data.
pub type ConfigMaps = BTreeMap<String, BTreeMap<String, String>>;

/// The resolved value of a container env var.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "resolved")]
pub enum Resolved {
    Value {
        value: String,
    },
    /// Not set by the container at all.
    Unset,
    /// Set, but its value cannot be known from what was given.
    Unresolvable {
        reason: String,
    },
}

/// Resolve a container env var the way the kubelet does: `env[]` wins over `envFrom`; among
/// `env[]` entries of one name the last wins; among `envFrom` sources the last wins. A
/// `configMapKeyRef` to a missing ConfigMap or key is unresolvable (an optional one is unset).
/// `$(VAR)` references inside literals are not expanded.
pub fn resolve_env(
    env: &[EnvVar],
    env_from: &[EnvFromConfigMap],
    name: &str,
    config_maps: &ConfigMaps,
) -> Resolved {
    if let Some(var) = env.iter().rev().find(|e| e.name == name) {
        return match &var.source {
            EnvSource::Literal { value } => Resolved::Value {
                value: value.clone(),
            },
            EnvSource::ConfigMapKey {
                config_map,
                key,
                optional,
            } => match config_maps.get(config_map) {
                None if *optional => Resolved::Unset,
                None => Resolved::Unresolvable {
                    reason: format!("{name} comes from ConfigMap {config_map}, which is not known"),
                },
                Some(data) => match data.get(key) {
                    Some(value) => Resolved::Value {
                        value: value.clone(),
                    },
                    None if *optional => Resolved::Unset,
                    None => Resolved::Unresolvable {
                        reason: format!("{name} comes from ConfigMap {config_map} key {key}, which it does not have"),
                    },
                },
            },
            EnvSource::Other { description } => Resolved::Unresolvable {
                reason: format!("{name} comes from {description}, not resolved here"),
            },
        };
    }
    for from in env_from.iter().rev() {
        let Some(key) = name.strip_prefix(from.prefix.as_str()) else {
            continue;
        };
        match config_maps.get(&from.config_map) {
            Some(data) => {
                if let Some(value) = data.get(key) {
                    return Resolved::Value {
                        value: value.clone(),
                    };
                }
            }
            None => {
                return Resolved::Unresolvable {
                    reason: format!(
                        "{name} may come from envFrom ConfigMap {}, which is not known",
                        from.config_map
                    ),
                }
            }
        }
    }
    Resolved::Unset
}

/// One cilium-agent pod (container `cilium-agent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPod {
    pub name: String,
    pub node: Option<String>,
    pub phase: String,
    pub ready: bool,
    pub env: Vec<EnvVar>,
    #[serde(default)]
    pub env_from: Vec<EnvFromConfigMap>,
}

/// Where one agent dials the API server, classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Endpoint {
    /// The environment's VIP.
    Vip,
    /// A server's own address (or name): a single-node dependency.
    NodeAddress { node: String, address: String },
    /// Anything else (another address, a name, unset, unresolvable).
    Other,
}

/// One agent as the pane shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRow {
    pub pod: String,
    pub node: Option<String>,
    pub phase: String,
    pub ready: bool,
    pub host: Resolved,
    pub port: Resolved,
    pub endpoint: Endpoint,
}

/// The agent env pane (without the rollout, see [`rollout`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEnvPane {
    pub env: String,
    pub agents: Vec<AgentRow>,
    pub verdicts: Vec<Verdict>,
}

/// The env var names the rules read.
pub const SERVICE_HOST_VAR: &str = "KUBERNETES_SERVICE_HOST";
pub const SERVICE_PORT_VAR: &str = "KUBERNETES_SERVICE_PORT";

/// Judge every agent's API endpoint, then all of them together.
pub fn agent_env(
    topo: &EnvTopology,
    pods: &Look<Vec<AgentPod>>,
    config_maps: &ConfigMaps,
) -> AgentEnvPane {
    let env = topo.env.as_str();
    let mut pane = AgentEnvPane {
        env: env.to_string(),
        agents: Vec::new(),
        verdicts: Vec::new(),
    };
    let pods = match pods {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::AgentEnv, env, "cilium-agent pods", reason));
            return pane;
        }
        Look::Seen { value } => value,
    };
    let v = |rule, sev, subject: &str, msg: String| {
        Verdict::new(Pane::AgentEnv, rule, sev, env, subject, msg)
    };
    for pod in pods {
        let host = resolve_env(&pod.env, &pod.env_from, SERVICE_HOST_VAR, config_maps);
        let port = resolve_env(&pod.env, &pod.env_from, SERVICE_PORT_VAR, config_maps);
        let on = pod
            .node
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default();
        let subject = format!("pod {}", pod.name);
        let (endpoint, sev, msg) = match &host {
            Resolved::Value { value } => classify_host(topo, value.trim(), &pod.name, &on),
            Resolved::Unset => (
                Endpoint::Other,
                Severity::Unknown,
                format!(
                    "{}{on}: {SERVICE_HOST_VAR} is not set (the kubelet then injects the \
                     kubernetes Service address, not {env}'s VIP {})",
                    pod.name, topo.vip
                ),
            ),
            Resolved::Unresolvable { reason } => (
                Endpoint::Other,
                Severity::Unknown,
                format!("{}{on}: {reason}", pod.name),
            ),
        };
        pane.verdicts.push(v(Rule::AgentHost, sev, &subject, msg));
        let want = topo.api_port.to_string();
        let (psev, pmsg) = match &port {
            Resolved::Value { value } if value.trim() == want => (
                Severity::Ok,
                format!("{}{on}: {SERVICE_PORT_VAR}={want}", pod.name),
            ),
            Resolved::Value { value } => (
                Severity::Warn,
                format!(
                    "{}{on}: {SERVICE_PORT_VAR}={value}, but {env}'s API port is {want}",
                    pod.name
                ),
            ),
            Resolved::Unset => (
                Severity::Unknown,
                format!("{}{on}: {SERVICE_PORT_VAR} is not set", pod.name),
            ),
            Resolved::Unresolvable { reason } => {
                (Severity::Unknown, format!("{}{on}: {reason}", pod.name))
            }
        };
        pane.verdicts.push(v(Rule::AgentPort, psev, &subject, pmsg));
        pane.agents.push(AgentRow {
            pod: pod.name.clone(),
            node: pod.node.clone(),
            phase: pod.phase.clone(),
            ready: pod.ready,
            host,
            port,
            endpoint,
        });
    }
    pane.verdicts.push(agents_summary(topo, &pane.agents));
    pane
}

fn classify_host(
    topo: &EnvTopology,
    value: &str,
    pod: &str,
    on: &str,
) -> (Endpoint, Severity, String) {
    let env = topo.env.as_str();
    let by_addr = value.parse::<IpAddr>().ok().and_then(|ip| {
        if ip == topo.vip {
            Some(None)
        } else {
            topo.server_by_address(ip).map(Some)
        }
    });
    let server = match by_addr {
        Some(None) => {
            return (
                Endpoint::Vip,
                Severity::Ok,
                format!("{pod}{on}: {SERVICE_HOST_VAR}={value}, {env}'s VIP"),
            )
        }
        Some(Some(s)) => Some(s),
        // A host name that is a server's name is the same dependency.
        None => topo.servers.iter().find(|s| s.name == value),
    };
    match server {
        Some(s) => (
            Endpoint::NodeAddress {
                node: s.name.clone(),
                address: value.to_string(),
            },
            Severity::Critical,
            format!(
                "{pod}{on}: {SERVICE_HOST_VAR}={value} is {}'s own address, not the VIP {}: \
                 single-node dependency (lose {} and no service or policy update reaches \
                 this agent)",
                s.name, topo.vip, s.name
            ),
        ),
        None => (
            Endpoint::Other,
            Severity::Unknown,
            format!(
                "{pod}{on}: {SERVICE_HOST_VAR}={value} is neither {env}'s VIP {} nor a \
                 server address",
                topo.vip
            ),
        ),
    }
}

fn agents_summary(topo: &EnvTopology, agents: &[AgentRow]) -> Verdict {
    let env = topo.env.as_str();
    let n = agents.len();
    let v = |sev, msg: String| {
        Verdict::new(
            Pane::AgentEnv,
            Rule::AgentsSummary,
            sev,
            env,
            "cilium-agents",
            msg,
        )
    };
    if n == 0 {
        return v(
            Severity::Unknown,
            "no cilium-agent pods found: nothing to judge".to_string(),
        );
    }
    let on_vip = agents
        .iter()
        .filter(|a| a.endpoint == Endpoint::Vip)
        .count();
    // node -> (address, count), in a stable order.
    let mut on_node: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    for a in agents {
        if let Endpoint::NodeAddress { node, address } = &a.endpoint {
            on_node.entry(node).or_insert((address, 0)).1 += 1;
        }
    }
    let other = n - on_vip - on_node.values().map(|(_, c)| c).sum::<usize>();
    if !on_node.is_empty() {
        let parts: Vec<String> = on_node
            .iter()
            .map(|(node, (addr, c))| format!("{c} of {n} agents dial {node}'s own address {addr}"))
            .collect();
        let rest = if on_vip > 0 {
            format!(" ({on_vip} dial the VIP)")
        } else {
            String::new()
        };
        return v(
            Severity::Critical,
            format!(
                "{}{rest}: single-node dependency, the VIP {} is not used",
                parts.join("; "),
                topo.vip
            ),
        );
    }
    if other > 0 {
        return v(
            Severity::Unknown,
            format!(
                "{on_vip} of {n} agents dial the VIP {}; {other} dial something else or could \
                 not be resolved",
                topo.vip
            ),
        );
    }
    v(
        Severity::Ok,
        format!("{n} of {n} agents dial the VIP {}", topo.vip),
    )
}

/// The DaemonSet's status counters (and generations, to tell a controller that has not yet
/// seen the newest spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonSetStatus {
    pub name: String,
    pub generation: u64,
    pub observed_generation: u64,
    pub desired: u32,
    pub updated: u32,
    pub ready: u32,
    pub available: u32,
    pub unavailable: u32,
}

/// One pod of the DaemonSet: whether it runs the current template, and readiness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutPod {
    pub name: String,
    pub node: Option<String>,
    /// Runs the current template (pod-template-generation / controller-revision-hash match).
    pub updated: bool,
    pub ready: bool,
    /// When the pod was last seen turning not ready (Ready condition's lastTransitionTime, or
    /// creation time for a pod that never was ready).
    pub not_ready_since: Option<Timestamp>,
}

/// Where a rollout stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum RolloutState {
    RolledOut,
    Rolling {
        updated: u32,
        desired: u32,
    },
    Stuck {
        pod: String,
        node: Option<String>,
        not_ready_ms: u64,
    },
}

/// The rollout verdict with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutPane {
    pub env: String,
    pub state: Option<RolloutState>,
    /// The pods per node, as given (for the pane's per-node rows).
    pub pods: Vec<RolloutPod>,
    pub verdicts: Vec<Verdict>,
}

/// Rolled out (ok): the controller has seen the newest spec, every desired pod is updated and
/// available, none unavailable. Stuck (critical): an updated pod not ready for longer than
/// `stuck_after_ms` (the rollout will not pass it). Otherwise rolling (warn: not converged).
pub fn rollout(
    env: &str,
    ds: &Look<Option<DaemonSetStatus>>,
    pods: &[RolloutPod],
    now: Timestamp,
    stuck_after_ms: u64,
) -> RolloutPane {
    let mut pane = RolloutPane {
        env: env.to_string(),
        state: None,
        pods: pods.to_vec(),
        verdicts: Vec::new(),
    };
    let v = |sev, subject: &str, msg: String| {
        Verdict::new(Pane::AgentEnv, Rule::Rollout, sev, env, subject, msg)
    };
    let ds = match ds {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::AgentEnv, env, "cilium daemonset", reason));
            return pane;
        }
        Look::Seen { value: None } => {
            pane.verdicts.push(v(
                Severity::Critical,
                "cilium daemonset",
                "no cilium DaemonSet: no CNI agents are scheduled".to_string(),
            ));
            return pane;
        }
        Look::Seen { value: Some(ds) } => ds,
    };
    let subject = format!("daemonset {}", ds.name);
    let stuck = pods
        .iter()
        .filter(|p| p.updated && !p.ready)
        .filter_map(|p| {
            let since = p.not_ready_since?;
            let age = now.0.saturating_sub(since.0);
            (age > stuck_after_ms).then_some((p, age))
        })
        .max_by_key(|(_, age)| *age);
    if let Some((p, age)) = stuck {
        let on = p.node.as_deref().unwrap_or("no node");
        pane.state = Some(RolloutState::Stuck {
            pod: p.name.clone(),
            node: p.node.clone(),
            not_ready_ms: age,
        });
        pane.verdicts.push(v(
            Severity::Critical,
            &subject,
            format!(
                "rollout stuck: updated pod {} on {on} not ready for {} ({} of {} updated, {} \
                 unavailable); the DaemonSet will not pass it",
                p.name,
                human_ms(age),
                ds.updated,
                ds.desired,
                ds.unavailable
            ),
        ));
        return pane;
    }
    let done = ds.observed_generation >= ds.generation
        && ds.updated == ds.desired
        && ds.available == ds.desired
        && ds.unavailable == 0;
    if done {
        pane.state = Some(RolloutState::RolledOut);
        pane.verdicts.push(v(
            Severity::Ok,
            &subject,
            format!(
                "rolled out: {} of {} updated and available",
                ds.updated, ds.desired
            ),
        ));
    } else {
        pane.state = Some(RolloutState::Rolling {
            updated: ds.updated,
            desired: ds.desired,
        });
        let waiting: Vec<String> = pods
            .iter()
            .filter(|p| !p.ready)
            .map(|p| match &p.node {
                Some(n) => format!("{} on {n}", p.name),
                None => p.name.clone(),
            })
            .collect();
        let waiting = if waiting.is_empty() {
            String::new()
        } else {
            format!("; not ready: {}", waiting.join(", "))
        };
        let seen = if ds.observed_generation < ds.generation {
            format!(
                " (controller has not yet seen generation {}, at {})",
                ds.generation, ds.observed_generation
            )
        } else {
            String::new()
        };
        pane.verdicts.push(v(
            Severity::Warn,
            &subject,
            format!(
                "rolling: {} of {} updated, {} ready, {} unavailable{seen}{waiting}",
                ds.updated, ds.desired, ds.ready, ds.unavailable
            ),
        ));
    }
    pane
}

// ---------------------------------------------------------------------------------------------
// 3. VPN egress: the journal parser
// ---------------------------------------------------------------------------------------------

/// An OpenVPN peer (`[AF_INET]IP:PORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeerAddr {
    pub ip: IpAddr,
    pub port: u16,
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// The tunnel address the server handed out, with its netmask or peer as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelAddr {
    pub address: IpAddr,
    /// As logged: a netmask (`255.255.192.0`), `/18`, or `peer 10.8.0.5`; empty if none.
    pub mask: String,
}

impl fmt::Display for TunnelAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mask.is_empty() {
            write!(f, "{}", self.address)
        } else if self.mask.starts_with('/') {
            write!(f, "{}{}", self.address, self.mask)
        } else {
            write!(f, "{} {}", self.address, self.mask)
        }
    }
}

/// What the journal of the tunnel unit says. Server and address are the LAST ones logged
/// (the current connection); for an address logged in several forms, the first form of it
/// (the PUSH_REPLY's netmask) is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalFacts {
    pub server: Option<PeerAddr>,
    pub tunnel_addr: Option<TunnelAddr>,
    /// Times of `Initialization Sequence Completed`, or, if the journal has none, of systemd
    /// `Started` lines: each is a (re)connect. Sorted.
    pub connects: Vec<Timestamp>,
    /// Times of systemd `Stopped` lines (reported, not used by the rules).
    pub stops: Vec<Timestamp>,
    /// Lines whose first field is not an accepted timestamp (still searched for server and
    /// address; cannot place a restart in time).
    pub untimed_lines: usize,
}

/// Parse a journald `short-iso` / `short-iso-precise` timestamp, as printed by
/// `journalctl -o short-iso`: `2026-09-12T22:57:05+0000`, `2026-09-12T22:57:05.123456+00:00`,
/// or with `Z`. Any UTC offset is applied. Returns None for anything else (including the
/// default `Sep 12 22:57:05` form, which has no year).
pub fn parse_journal_time(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() < 20 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if b.get(10) != Some(&b'T') || b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = s.get(r)?;
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    let mut ms = 0u64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut f3 = frac.get(..digits.min(3))?.to_string();
        while f3.len() < 3 {
            f3.push('0');
        }
        ms = f3.parse().ok()?;
        rest = frac.get(digits..)?;
    }
    let offset_s: i64 = if rest == "Z" {
        0
    } else {
        let sign = match rest.as_bytes().first() {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return None,
        };
        let digits: String = rest.get(1..)?.chars().filter(|c| *c != ':').collect();
        if digits.len() != 4 || !digits.bytes().all(|c| c.is_ascii_digit()) || rest.len() > 6 {
            return None;
        }
        let oh: i64 = digits.get(0..2)?.parse().ok()?;
        let om: i64 = digits.get(2..4)?.parse().ok()?;
        sign * (oh * 3600 + om * 60)
    };
    if y < 1970 {
        return None;
    }
    let local = i64::try_from(crate::time::utc_seconds(y, mo, d, h, mi, se)?).ok()?;
    let utc = u64::try_from(local - offset_s).ok()?;
    Some(Timestamp(utc.checked_mul(1000)?.checked_add(ms)?))
}

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn peer_re() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    re(&R, r"Peer Connection Initiated with \[AF_INET6?\](\S+)")
}

/// The forms OpenVPN 2.4-2.6 log the tunnel address in:
/// - PUSH_REPLY option: `ifconfig 10.72.192.7 255.255.192.0` (topology subnet) or
///   `ifconfig 10.8.0.6 10.8.0.5` (net30/p2p);
/// - iproute2: `/sbin/ip addr add dev tun0 10.72.192.7/18 broadcast ...` and
///   `/sbin/ip addr add dev tun0 local 10.8.0.6 peer 10.8.0.5`;
/// - netlink (2.5+ default on Linux): `net_addr_v4_add: 10.72.192.7/18 dev tun0` and
///   `net_addr_ptp_v4_add: 10.8.0.6 peer 10.8.0.5 dev tun0`;
/// - net-tools: `/sbin/ifconfig tun0 10.72.192.7 netmask 255.255.192.0 mtu 1500 ...`.
fn addr_res() -> Vec<&'static Regex> {
    static A: OnceLock<Option<Regex>> = OnceLock::new();
    static B: OnceLock<Option<Regex>> = OnceLock::new();
    static C: OnceLock<Option<Regex>> = OnceLock::new();
    static D: OnceLock<Option<Regex>> = OnceLock::new();
    static E: OnceLock<Option<Regex>> = OnceLock::new();
    static F: OnceLock<Option<Regex>> = OnceLock::new();
    const IP: &str = r"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})";
    [
        re(&A, &format!(r"(?:^|[\s,'])ifconfig {IP} {IP}(?:[,'\s]|$)")),
        re(&B, &format!(r"ip addr add dev \S+ {IP}(/\d{{1,2}})")),
        re(&C, &format!(r"ip addr add dev \S+ local {IP} (peer {IP})")),
        re(&D, &format!(r"net_addr_v4_add: {IP}(/\d{{1,2}})")),
        re(&E, &format!(r"net_addr_ptp_v4_add: {IP} (peer {IP})")),
        re(&F, &format!(r"ifconfig \S+ {IP} netmask {IP}")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Split a `journalctl -o short-iso` line into (time, identifier, message). A line whose first
/// field is no timestamp is all message (e.g. `-o cat`).
fn split_line(line: &str) -> (Option<Timestamp>, &str, &str) {
    let mut fields = line.splitn(3, ' ');
    let first = fields.next().unwrap_or_default();
    let Some(t) = parse_journal_time(first) else {
        return (None, "", line);
    };
    let _host = fields.next();
    let rest = fields.next().unwrap_or_default();
    match rest.split_once(": ") {
        Some((ident, msg)) if !ident.contains(' ') => (Some(t), ident, msg),
        _ => (Some(t), "", rest),
    }
}

/// Parse the tunnel unit's journal lines (see [`parse_journal_time`] for the accepted time
/// formats). Never fails: what is not understood is skipped.
pub fn parse_journal(lines: &[String]) -> JournalFacts {
    let mut facts = JournalFacts::default();
    let mut inits = Vec::new();
    let mut starts = Vec::new();
    let addr_res = addr_res();
    for line in lines {
        let (t, ident, msg) = split_line(line);
        if t.is_none() {
            facts.untimed_lines += 1;
        }
        if let Some(c) = peer_re().and_then(|r| r.captures(msg)) {
            if let Some(peer) = c.get(1).and_then(|m| parse_peer(m.as_str())) {
                facts.server = Some(peer);
            }
        }
        for r in &addr_res {
            // The last match on the line wins, like the last line.
            if let Some(c) = r.captures_iter(msg).last() {
                let addr = c.get(1).and_then(|m| m.as_str().parse::<IpAddr>().ok());
                if let Some(address) = addr {
                    // One connection logs its address twice (PUSH_REPLY `ifconfig A MASK`,
                    // then `net_addr_v4_add: A/N`): keep the pushed form as OpenVPN quotes it.
                    let same = facts
                        .tunnel_addr
                        .as_ref()
                        .is_some_and(|t| t.address == address);
                    if !same {
                        facts.tunnel_addr = Some(TunnelAddr {
                            address,
                            mask: c.get(2).map(|m| m.as_str().to_string()).unwrap_or_default(),
                        });
                    }
                }
            }
        }
        if let Some(t) = t {
            let from_systemd = ident.starts_with("systemd");
            if msg.contains("Initialization Sequence Completed") {
                inits.push(t);
            } else if from_systemd && msg.starts_with("Started ") {
                starts.push(t);
            } else if from_systemd && msg.starts_with("Stopped ") {
                facts.stops.push(t);
            }
        }
    }
    // Each systemd start is followed by an Initialization Sequence Completed when it
    // connects; soft restarts (--ping-restart) log only the latter. Counting both would count
    // one reconnect twice.
    facts.connects = if inits.is_empty() { starts } else { inits };
    facts.connects.sort();
    facts.stops.sort();
    facts
}

/// `158.173.241.112:1198` or `2001:db8::1:1198` (last colon separates the port); a trailing
/// `,` or `)` is not part of it.
fn parse_peer(s: &str) -> Option<PeerAddr> {
    let s = s.trim_end_matches([',', ')', '.', ';']);
    let (ip, port) = s.rsplit_once(':')?;
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    // `[AF_INET6]::ffff:1.2.3.4:1198` (a v4 peer on a dual-stack socket) is that v4 peer.
    let ip: IpAddr = ip.parse().ok()?;
    Some(PeerAddr {
        ip: ip.to_canonical(),
        port: port.parse().ok()?,
    })
}

/// Parse the body of an exit-IP probe (e.g. `curl https://ipinfo.io/ip`): one address,
/// surrounding whitespace allowed.
pub fn parse_exit_ip(body: &str) -> Result<IpAddr, String> {
    let t = body.trim();
    t.parse::<IpAddr>().map_err(|_| {
        let shown: String = t.chars().take(60).collect();
        format!("exit-IP probe returned {shown:?}, not an IP address")
    })
}

// ---------------------------------------------------------------------------------------------
// 3. VPN egress: the rules
// ---------------------------------------------------------------------------------------------

/// What was seen on one gateway host. The service name and interface are the ones used (from
/// hostvars), carried for messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayObs {
    pub env: String,
    pub host: String,
    pub service: String,
    pub interface: String,
    /// systemd ActiveState (`active`, `inactive`, `failed`, `activating`...).
    pub active_state: Look<String>,
    /// Exit IP through the tunnel interface, or the probe's error.
    pub tunnel_exit: Look<Result<IpAddr, String>>,
    /// Exit IP without it (the home ISP's), or the probe's error.
    pub direct_exit: Look<Result<IpAddr, String>>,
    /// The unit's journal lines over the window, `journalctl -o short-iso` format.
    pub journal: Look<Vec<String>>,
}

/// Thresholds of the VPN rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VpnPolicy {
    /// Only (re)connects within `now - window_ms ..= now` count.
    pub window_ms: u64,
    /// Flapping: at least `flap_min_connects` connects in the window whose median interval is
    /// at most `flap_max_period_ms`.
    pub flap_min_connects: usize,
    pub flap_max_period_ms: u64,
}

impl Default for VpnPolicy {
    /// 30 minutes, 3 connects, every 5 minutes or faster.
    fn default() -> Self {
        VpnPolicy {
            window_ms: 30 * 60 * 1000,
            flap_min_connects: 3,
            flap_max_period_ms: 5 * 60 * 1000,
        }
    }
}

/// One gateway as the pane shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayPane {
    pub env: String,
    pub host: String,
    pub active_state: Option<String>,
    pub tunnel_exit: Option<IpAddr>,
    pub direct_exit: Option<IpAddr>,
    pub server: Option<PeerAddr>,
    pub tunnel_addr: Option<TunnelAddr>,
    /// (Re)connects within the window.
    pub connects: Vec<Timestamp>,
    /// Median interval between them, when there are at least two.
    pub connect_period_ms: Option<u64>,
    pub verdicts: Vec<Verdict>,
}

fn median_interval(ts: &[Timestamp]) -> Option<u64> {
    let mut gaps: Vec<u64> = ts
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0))
        .collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied()
}

/// `~2m` / `~30s`: from 45 s on, whole minutes (59 s reads as "~1m").
fn approx(ms: u64) -> String {
    let s = (ms + 500) / 1000;
    if s >= 45 {
        format!("~{}m", (s + 30) / 60)
    } else {
        format!("~{s}s")
    }
}

/// Judge one gateway: service state, leak, flapping.
pub fn vpn_gateway(obs: &GatewayObs, now: Timestamp, policy: &VpnPolicy) -> GatewayPane {
    let env = obs.env.as_str();
    let host = obs.host.as_str();
    let mut pane = GatewayPane {
        env: env.to_string(),
        host: host.to_string(),
        active_state: None,
        tunnel_exit: None,
        direct_exit: None,
        server: None,
        tunnel_addr: None,
        connects: Vec::new(),
        connect_period_ms: None,
        verdicts: Vec::new(),
    };
    let v = |rule, sev, msg: String| Verdict::new(Pane::VpnEgress, rule, sev, env, host, msg);
    let svc = obs.service.as_str();
    let ifc = obs.interface.as_str();

    match &obs.active_state {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VpnEgress, env, host, reason))
        }
        Look::Seen { value } => {
            pane.active_state = Some(value.clone());
            if value.trim() == "active" {
                pane.verdicts.push(v(
                    Rule::VpnService,
                    Severity::Ok,
                    format!("{svc} is active on {host}"),
                ));
            } else {
                pane.verdicts.push(v(
                    Rule::VpnService,
                    Severity::Critical,
                    format!(
                        "{svc} is {} on {host}: egress through {ifc} is down",
                        if value.trim().is_empty() {
                            "in no state"
                        } else {
                            value.trim()
                        }
                    ),
                ));
            }
        }
    }

    let mut looked_exits = true;
    for look in [&obs.tunnel_exit, &obs.direct_exit] {
        if let Look::CouldNotLook { reason } = look {
            looked_exits = false;
            pane.verdicts
                .push(could_not(Pane::VpnEgress, env, host, reason));
        }
    }
    if looked_exits {
        let t = obs.tunnel_exit.as_seen();
        let d = obs.direct_exit.as_seen();
        pane.tunnel_exit = t.and_then(|r| r.as_ref().ok().copied());
        pane.direct_exit = d.and_then(|r| r.as_ref().ok().copied());
        match (t, d) {
            (Some(Ok(t)), Some(Ok(d))) if t == d => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Critical,
                format!(
                    "LEAK: traffic through {ifc} on {host} exits from {t}, the same address as \
                     without the tunnel (the home ISP's)"
                ),
            )),
            (Some(Ok(t)), Some(Ok(d))) => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Ok,
                format!("{host} exits through {ifc} from {t} (without it: {d})"),
            )),
            (Some(Err(e)), _) => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Critical,
                format!("no exit through {ifc} on {host}: {e}"),
            )),
            (Some(Ok(t)), Some(Err(e))) => pane.verdicts.push(v(
                Rule::VpnExit,
                Severity::Unknown,
                format!(
                    "{host} exits through {ifc} from {t}, but the direct exit probe failed \
                     ({e}), so a leak cannot be ruled out"
                ),
            )),
            _ => {}
        }
    }

    match &obs.journal {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::VpnEgress, env, host, reason))
        }
        Look::Seen { value } => {
            let facts = parse_journal(value);
            pane.server = facts.server;
            pane.tunnel_addr = facts.tunnel_addr;
            let from = now.0.saturating_sub(policy.window_ms);
            pane.connects = facts
                .connects
                .into_iter()
                .filter(|t| t.0 >= from && t.0 <= now.0)
                .collect();
            pane.connect_period_ms = median_interval(&pane.connects);
            let n = pane.connects.len();
            match pane.connect_period_ms {
                Some(p) if n >= policy.flap_min_connects && p <= policy.flap_max_period_ms => {
                    let shown: Vec<String> = pane
                        .connects
                        .iter()
                        .rev()
                        .take(8)
                        .rev()
                        .map(|t| clock(*t))
                        .collect();
                    let more = if n > shown.len() { "..., " } else { "" };
                    pane.verdicts.push(v(
                        Rule::VpnFlapping,
                        Severity::Warn,
                        format!(
                            "{svc} on {host} restarts every {}: {more}{} ({n} in the last {})",
                            approx(p),
                            shown.join(", "),
                            human_ms(policy.window_ms)
                        ),
                    ));
                }
                _ => pane.verdicts.push(v(
                    Rule::VpnFlapping,
                    Severity::Ok,
                    format!(
                        "{n} (re)connect(s) of {svc} on {host} in the last {}",
                        human_ms(policy.window_ms)
                    ),
                )),
            }
        }
    }
    pane
}

/// Across all gateways (of all environments): two on the same server (IP and port) with the
/// same tunnel address evict each other. One critical verdict per such pair.
pub fn vpn_across(gateways: &[GatewayPane]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (i, a) in gateways.iter().enumerate() {
        for b in gateways.iter().skip(i + 1) {
            let (Some(sa), Some(sb)) = (a.server, b.server) else {
                continue;
            };
            let (Some(ta), Some(tb)) = (&a.tunnel_addr, &b.tunnel_addr) else {
                continue;
            };
            if sa != sb || ta.address != tb.address {
                continue;
            }
            let rhythm = match (a.connect_period_ms, b.connect_period_ms) {
                (Some(pa), Some(pb)) => {
                    let apart = interleave(&a.connects, &b.connects)
                        .map(|ms| format!(", {} apart", approx(ms)))
                        .unwrap_or_default();
                    format!(
                        "; {} restarts every {}, {} every {}{apart}",
                        a.host,
                        approx(pa),
                        b.host,
                        approx(pb)
                    )
                }
                _ => String::new(),
            };
            out.push(Verdict::new(
                Pane::VpnEgress,
                Rule::VpnEvictionLoop,
                Severity::Critical,
                &a.env,
                format!("{}/{} + {}/{}", a.env, a.host, b.env, b.host),
                format!(
                    "EVICTION LOOP: {} ({}) and {} ({}) are both on PIA server {sa} with tunnel \
                     address {ta}: each reconnect steals the address from the other{rhythm}. \
                     Point one at another server.",
                    a.host, a.env, b.host, b.env
                ),
            ));
        }
    }
    out
}

/// Median distance from each of `a`'s connects to the nearest of `b`'s.
fn interleave(a: &[Timestamp], b: &[Timestamp]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut d: Vec<u64> = a
        .iter()
        .filter_map(|t| b.iter().map(|u| t.0.abs_diff(u.0)).min())
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    d.get(d.len() / 2).copied()
}

// ---------------------------------------------------------------------------------------------
// 4. Nodes
// ---------------------------------------------------------------------------------------------

/// The status of a node's Ready condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConditionStatus {
    True,
    False,
    /// The node controller's "kubelet stopped posting status".
    Unknown,
}

/// One Node object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeObs {
    pub name: String,
    /// None: the node has no Ready condition.
    pub ready: Option<ConditionStatus>,
    pub labels: BTreeMap<String, String>,
    /// status.addresses of type InternalIP/ExternalIP.
    pub addresses: Vec<IpAddr>,
}

/// A node as the pane shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRow {
    pub name: String,
    pub ready: Option<ConditionStatus>,
    pub roles: Vec<String>,
}

/// The nodes pane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodesPane {
    pub env: String,
    pub nodes: Vec<NodeRow>,
    pub verdicts: Vec<Verdict>,
}

/// Roles from `node-role.kubernetes.io/<role>` labels (any value), sorted.
pub fn node_roles(labels: &BTreeMap<String, String>) -> Vec<String> {
    let mut roles: Vec<String> = labels
        .keys()
        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect();
    roles.sort();
    roles.dedup();
    roles
}

/// Ready = ok, NotReady (False or Unknown) = critical, no condition = unknown; a server of the
/// environment that matches no node by name or address = warn.
pub fn nodes(topo: &EnvTopology, nodes: &Look<Vec<NodeObs>>) -> NodesPane {
    let env = topo.env.as_str();
    let mut pane = NodesPane {
        env: env.to_string(),
        nodes: Vec::new(),
        verdicts: Vec::new(),
    };
    let nodes = match nodes {
        Look::CouldNotLook { reason } => {
            pane.verdicts
                .push(could_not(Pane::Nodes, env, "nodes", reason));
            return pane;
        }
        Look::Seen { value } => value,
    };
    for n in nodes {
        let roles = node_roles(&n.labels);
        let shown = if roles.is_empty() {
            "no roles".to_string()
        } else {
            roles.join(",")
        };
        let subject = format!("node {}", n.name);
        let (sev, msg) = match n.ready {
            Some(ConditionStatus::True) => (Severity::Ok, format!("{} Ready ({shown})", n.name)),
            Some(ConditionStatus::False) => {
                (Severity::Critical, format!("{} NotReady ({shown})", n.name))
            }
            Some(ConditionStatus::Unknown) => (
                Severity::Critical,
                format!(
                    "{} NotReady: Ready is Unknown, the kubelet stopped posting status ({shown})",
                    n.name
                ),
            ),
            None => (
                Severity::Unknown,
                format!("{} has no Ready condition ({shown})", n.name),
            ),
        };
        pane.verdicts.push(Verdict::new(
            Pane::Nodes,
            Rule::NodeReady,
            sev,
            env,
            subject,
            msg,
        ));
        pane.nodes.push(NodeRow {
            name: n.name.clone(),
            ready: n.ready,
            roles,
        });
    }
    for s in &topo.servers {
        let known = nodes
            .iter()
            .any(|n| n.name == s.name || n.addresses.contains(&s.address));
        if !known {
            pane.verdicts.push(Verdict::new(
                Pane::Nodes,
                Rule::NodeMissing,
                Severity::Warn,
                env,
                format!("server {}", s.name),
                format!(
                    "server {} ({}) of {env} is not a node of the cluster",
                    s.name, s.address
                ),
            ));
        }
    }
    pane
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_time_forms() {
        let base = parse_journal_time("2026-09-12T22:57:05+0000").expect("short-iso");
        assert_eq!(base.to_string(), "2026-09-12T22:57:05.000Z");
        assert_eq!(parse_journal_time("2026-09-12T22:57:05Z"), Some(base));
        assert_eq!(parse_journal_time("2026-09-12T22:57:05+00:00"), Some(base));
        assert_eq!(parse_journal_time("2026-09-13T00:57:05+0200"), Some(base));
        assert_eq!(
            parse_journal_time("2026-09-12T22:57:05.123456+0000"),
            Some(Timestamp(base.0 + 123))
        );
        for bad in [
            "Sep 12 22:57:05",
            "2026-13-12T22:57:05+0000",
            "2026-09-12T22:57:05",
            "2026-09-12T22:57:05+00",
            "2026-09-12 22:57:05+0000",
            "2026-09-12T22:57:05.+0000",
            "",
            "1969-12-31T23:59:59+0000",
            "1970-01-01T00:00:00+0100",
        ] {
            assert_eq!(parse_journal_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn days_from_civil_matches_known_dates() {
        let days_from_civil =
            |y, m, d| crate::time::utc_seconds(y, m, d, 0, 0, 0).map(|s| s / 86_400);
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2026, 9, 12), Some(20_708));
    }

    #[test]
    fn tunnel_address_forms() {
        let cases = [
            (
                "PUSH: Received control message: 'PUSH_REPLY,route-gateway 10.72.192.1,topology subnet,ifconfig 10.72.192.7 255.255.192.0,peer-id 0'",
                "10.72.192.7",
                "255.255.192.0",
            ),
            ("/sbin/ip addr add dev tun0 10.72.192.7/18 broadcast 10.72.255.255", "10.72.192.7", "/18"),
            ("/sbin/ip addr add dev tun0 local 10.8.0.6 peer 10.8.0.5", "10.8.0.6", "peer 10.8.0.5"),
            ("net_addr_v4_add: 10.72.192.7/18 dev tun0", "10.72.192.7", "/18"),
            ("net_addr_ptp_v4_add: 10.8.0.6 peer 10.8.0.5 dev tun0", "10.8.0.6", "peer 10.8.0.5"),
            ("/sbin/ifconfig tun0 10.72.192.7 netmask 255.255.192.0 mtu 1500 broadcast 10.72.255.255", "10.72.192.7", "255.255.192.0"),
        ];
        for (line, addr, mask) in cases {
            let f = parse_journal(&[line.to_string()]);
            let t = f.tunnel_addr.expect(line);
            assert_eq!(t.address.to_string(), addr, "{line}");
            assert_eq!(t.mask, mask, "{line}");
        }
        // ifconfig-ipv6 is not the v4 tunnel address.
        let f = parse_journal(&["PUSH_REPLY,ifconfig-ipv6 fd00::2/64 fd00::1".to_string()]);
        assert_eq!(f.tunnel_addr, None);
    }

    #[test]
    fn peer_forms() {
        let p = parse_peer("158.173.241.112:1198").expect("v4");
        assert_eq!(p.to_string(), "158.173.241.112:1198");
        let p6 = parse_peer("2001:db8::1:1194").expect("v6");
        assert_eq!(p6.port, 1194);
        let mapped = parse_peer("::ffff:158.173.241.112:1198").expect("mapped");
        assert_eq!(mapped, p);
        assert!(parse_peer("158.173.241.112").is_none());
        assert!(parse_peer("x:y").is_none());
    }

    #[test]
    fn approx_and_human() {
        assert_eq!(approx(118_000), "~2m");
        assert_eq!(approx(30_000), "~30s");
        assert_eq!(approx(59_000), "~1m");
        assert_eq!(human_ms(90_000), "1m 30s");
        assert_eq!(human_ms(1_800_000), "30m");
    }
}
