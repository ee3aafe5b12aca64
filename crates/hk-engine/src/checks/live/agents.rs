//! Agent env: each cilium-agent's `KUBERNETES_SERVICE_HOST`/`_PORT` (literal or from a
//! ConfigMap, [`resolve_env`]) against the environment's VIP and node addresses.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{could_not, EnvTopology, Look, Pane, Rule, Severity, Verdict};

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
    /// `127.0.0.1:6444`: the k3s supervisor's client-side load balancer, on every node,
    /// which follows every server: as highly available as the VIP.
    SupervisorLb,
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
/// The port of the k3s supervisor's client-side load balancer on every node (k3s agents and
/// servers run it on loopback; it forwards to every server it knows).
pub const SUPERVISOR_LB_PORT: &str = "6444";

/// Whether `host` names the node itself (`localhost`, a loopback address): where the k3s
/// supervisor's load balancer listens on every node. The static parity check reads the same.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim();
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `host`:`port` is the k3s supervisor's load balancer on the agent's own node.
fn is_supervisor_lb(host: &Resolved, port: &Resolved) -> bool {
    matches!((host, port), (Resolved::Value { value: h }, Resolved::Value { value: p })
        if is_loopback_host(h) && p.trim() == SUPERVISOR_LB_PORT)
}
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
        let lb = is_supervisor_lb(&host, &port);
        let (endpoint, sev, msg) = match &host {
            Resolved::Value { value } if lb => (
                Endpoint::SupervisorLb,
                Severity::Ok,
                format!(
                    "{}{on}: {SERVICE_HOST_VAR}={} port {SUPERVISOR_LB_PORT}, the k3s supervisor's \
                     load balancer on its node, which follows every server: highly available",
                    pod.name,
                    value.trim()
                ),
            ),
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
            Resolved::Value { value } if lb => (
                Severity::Ok,
                format!(
                    "{}{on}: {SERVICE_PORT_VAR}={}, the k3s supervisor's load balancer",
                    pod.name,
                    value.trim()
                ),
            ),
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
    if server.is_none() {
        let agent = value.parse::<IpAddr>().ok().and_then(|ip| {
            topo.agents
                .iter()
                .find(|a| a.address == ip)
                .or_else(|| topo.agents.iter().find(|a| a.name == value))
        });
        if let Some(a) = agent {
            return (
                Endpoint::Other,
                Severity::Critical,
                format!(
                    "{pod}{on}: {SERVICE_HOST_VAR}={value} is agent {}'s address: an agent node \
                     runs no API server (expected {env}'s VIP {})",
                    a.name, topo.vip
                ),
            );
        }
    }
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
    let on_lb = agents
        .iter()
        .filter(|a| a.endpoint == Endpoint::SupervisorLb)
        .count();
    // node -> (address, count), in a stable order.
    let mut on_node: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
    for a in agents {
        if let Endpoint::NodeAddress { node, address } = &a.endpoint {
            on_node.entry(node).or_insert((address, 0)).1 += 1;
        }
    }
    let other = n - on_vip - on_lb - on_node.values().map(|(_, c)| c).sum::<usize>();
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
    if on_lb > 0 {
        return v(
            Severity::Ok,
            format!(
                "{n} of {n} agents dial a highly available endpoint: {on_vip} the VIP {}, {on_lb} \
                 the k3s supervisor's load balancer (127.0.0.1:{SUPERVISOR_LB_PORT})",
                topo.vip
            ),
        );
    }
    v(
        Severity::Ok,
        format!("{n} of {n} agents dial the VIP {}", topo.vip),
    )
}
