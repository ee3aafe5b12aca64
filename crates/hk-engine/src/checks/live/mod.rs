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
//!   servers of the environment the cluster does not know. [`holder_ready`] crosses the VIP
//!   holder with its node: a NotReady holder is a warning while its lease still looks fresh.
//! - etcd ([`etcd`]): per server, the member's metrics ([`parse_etcd_metrics`]: leader,
//!   DB size vs quota, WAL fsync p99) and IO pressure ([`parse_psi`], `/proc/pressure/io`,
//!   the documented starvation sign); exactly one leader among the servers.
//!
//! A source that could not be read is given as [`Look::CouldNotLook`] and becomes a
//! [`Rule::CouldNotLook`] verdict; [`exit_code`] maps critical to 1 and could-not-look to 2.

//!
//! One file a pane (a rule family), this file the verdict types they share; every public
//! item is re-exported here, so callers name `checks::live::X` whatever file X is in:
//! `vip.rs` (VIP lease, the holder's node), `agents.rs` (agent env), `rollout.rs` (the
//! DaemonSet rollout), `journald.rs` (the OpenVPN journal parser), `vpn.rs` (VPN egress
//! rules), `nodes.rs`, `etcd.rs` (member metrics, IO pressure, leadership).

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

pub use crate::runbook::machine::Timestamp;

mod agents;
mod etcd;
mod etcd_client;
mod journald;
mod nodes;
mod rollout;
mod vip;
mod vpn;

pub use agents::*;
pub use etcd::*;
pub use etcd_client::*;
pub use journald::*;
pub use nodes::*;
pub use rollout::*;
pub use vip::*;
pub use vpn::*;

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
    /// etcd members, leader, DB size, WAL fsync and IO pressure (`observe::etcd`).
    Etcd,
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
    /// The holder's node is Ready (a fresh lease held by a NotReady node is about to move).
    LeaseHolderReady,
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
    /// The etcd cluster has exactly one leader among the servers.
    EtcdLeader,
    /// One member's metrics: DB size and WAL fsync latency.
    EtcdMember,
    /// One server's IO pressure (`/proc/pressure/io`), the documented starvation sign.
    EtcdIoPressure,
    /// Enough members up for etcd to commit: `/readyz/etcd` through the API endpoint and
    /// the servers' Ready conditions, counted against a majority.
    EtcdQuorum,
    /// etcd's membership as its members list it: agreed, no learner, no unstarted member,
    /// more than two voters, each a server of the environment (`etcd_client`).
    EtcdMembership,
    /// A member's own status: it answers, sees the one leader, reports no error, few leader
    /// changes, DB under its quota, WAL fsync within bounds.
    EtcdStatus,
    /// An etcd alarm (NOSPACE, CORRUPT).
    EtcdAlarm,
    /// A linearizable read answered within its deadline.
    EtcdQuorumRead,
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
    pub(crate) fn new(
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
    /// The etcd members of each environment, over SSH, with quorum through its API.
    #[serde(default)]
    pub etcd: Vec<EtcdPane>,
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
        all.extend(self.etcd.iter().flat_map(|p| p.verdicts.iter().cloned()));
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
    /// Its agent (worker) nodes (hk-console.yaml `agents:`): nodes of the cluster that run
    /// no API server, so an address of theirs is never an API endpoint.
    pub agents: Vec<Server>,
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
