//! The observation types live sources send to the UI.
//!
//! Owns: what one look at the VIP lease, the cilium-agents' API endpoint and the VPN
//! gateways found, and the pure verdicts drawn from it (an agent dialling a node IP is the
//! single-node API dependency; two gateways handed one tunnel address by one server is the
//! eviction loop). Every observation is stamped with when it was made, so the UI can say
//! "stale" with an age instead of showing an old answer as current.
//! Must not: do IO, read the clock or know the terminal.

use serde::{Deserialize, Serialize};

use crate::runbook::machine::Timestamp;

/// The three live panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pane {
    VipLease,
    AgentEnv,
    VpnEgress,
}

impl Pane {
    pub const ALL: [Pane; 3] = [Pane::VipLease, Pane::AgentEnv, Pane::VpnEgress];

    pub fn title(self) -> &'static str {
        match self {
            Pane::VipLease => "VIP lease",
            Pane::AgentEnv => "Agent env",
            Pane::VpnEgress => "VPN egress",
        }
    }
}

/// One message from a live source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The environment observed (a name from hk-console.yaml).
    pub env: String,
    /// When the look was taken.
    pub at: Timestamp,
    pub body: ObservationBody,
}

/// What was seen, or why nothing could be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ObservationBody {
    VipLease(VipLease),
    AgentEnv(AgentEnv),
    VpnEgress(VpnEgress),
    /// The source could not look (API unreachable, ssh refused, ...).
    Error {
        pane: Pane,
        message: String,
    },
}

impl ObservationBody {
    pub fn pane(&self) -> Pane {
        match self {
            ObservationBody::VipLease(_) => Pane::VipLease,
            ObservationBody::AgentEnv(_) => Pane::AgentEnv,
            ObservationBody::VpnEgress(_) => Pane::VpnEgress,
            ObservationBody::Error { pane, .. } => *pane,
        }
    }
}

/// The kube-vip Lease and whether VIP:port answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VipLease {
    /// The environment's VIP (from the inventory).
    pub vip: String,
    /// The lease holder's identity (a node name), if the lease has one.
    pub holder: Option<String>,
    /// The lease's last renew time.
    pub renewed_at: Option<Timestamp>,
    /// Whether a TCP connection to VIP:port succeeded; `None` when not probed.
    pub api_answers: Option<bool>,
}

/// What a cilium-agent's KUBERNETES_SERVICE_HOST points at, judged against the inventory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointVerdict {
    /// The environment's VIP: good.
    Vip,
    /// One node's own IP: the single-node API dependency.
    NodeIp,
    /// Neither (a stale or foreign address, or unset).
    Other,
}

/// One cilium-agent pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    pub pod: String,
    pub node: String,
    /// KUBERNETES_SERVICE_HOST of the agent container; `None` when unset.
    pub service_host: Option<String>,
    pub verdict: EndpointVerdict,
}

/// Every cilium-agent pod of the environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEnv {
    pub agents: Vec<Agent>,
}

impl AgentEnv {
    /// Judge a service host against the environment's VIP and node IPs.
    pub fn judge(service_host: Option<&str>, vip: &str, node_ips: &[&str]) -> EndpointVerdict {
        match service_host {
            Some(h) if h == vip => EndpointVerdict::Vip,
            Some(h) if node_ips.contains(&h) => EndpointVerdict::NodeIp,
            _ => EndpointVerdict::Other,
        }
    }

    /// How many agents dial the VIP, out of all.
    pub fn on_vip(&self) -> usize {
        self.agents
            .iter()
            .filter(|a| a.verdict == EndpointVerdict::Vip)
            .count()
    }
}

/// One VPN egress gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    pub host: String,
    /// `systemctl is-active vpn-egress-tunnel.service` said `active`.
    pub tunnel_active: bool,
    /// `curl --interface tun0` answer.
    pub exit_ip: Option<String>,
    /// The home ISP's address, seen without the tunnel.
    pub home_ip: Option<String>,
    /// The PIA server the tunnel connected to (`Peer Connection Initiated with ...`).
    pub server: Option<String>,
    /// The tunnel address it was handed (`ifconfig ...`).
    pub tunnel_addr: Option<String>,
    /// Tunnel restarts in the last few minutes.
    pub recent_restarts: u32,
}

impl Gateway {
    /// Traffic leaves through the home ISP instead of the tunnel.
    pub fn leaks(&self) -> bool {
        matches!((&self.exit_ip, &self.home_ip), (Some(e), Some(h)) if e == h)
    }
}

/// Every VPN gateway seen (of every environment: the eviction loop is across them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VpnEgress {
    pub gateways: Vec<Gateway>,
}

impl VpnEgress {
    /// Pairs of gateways connected to one server with one tunnel address: each reconnect
    /// steals the other's address (the 2026-09-12 eviction loop).
    pub fn evicting_pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs = Vec::new();
        for (i, a) in self.gateways.iter().enumerate() {
            for b in &self.gateways[i + 1..] {
                let same_server = a.server.is_some() && a.server == b.server;
                let same_addr = a.tunnel_addr.is_some() && a.tunnel_addr == b.tunnel_addr;
                if same_server && same_addr {
                    pairs.push((a.host.as_str(), b.host.as_str()));
                }
            }
        }
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gw(host: &str, server: &str, addr: &str) -> Gateway {
        Gateway {
            host: host.into(),
            tunnel_active: true,
            exit_ip: Some("203.0.113.7".into()),
            home_ip: Some("198.51.100.1".into()),
            server: Some(server.into()),
            tunnel_addr: Some(addr.into()),
            recent_restarts: 0,
        }
    }

    #[test]
    fn same_server_and_tunnel_address_is_the_eviction_loop() {
        let v = VpnEgress {
            gateways: vec![
                gw("gw-a", "192.0.2.112:1198", "10.0.0.7"),
                gw("gw-b", "192.0.2.112:1198", "10.0.0.7"),
                gw("gw-c", "192.0.2.135:1198", "10.0.0.7"),
            ],
        };
        assert_eq!(v.evicting_pairs(), vec![("gw-a", "gw-b")]);
    }

    #[test]
    fn agent_endpoint_verdicts() {
        let ips = ["10.0.0.10", "10.0.0.11"];
        assert_eq!(
            AgentEnv::judge(Some("10.0.0.9"), "10.0.0.9", &ips),
            EndpointVerdict::Vip
        );
        assert_eq!(
            AgentEnv::judge(Some("10.0.0.10"), "10.0.0.9", &ips),
            EndpointVerdict::NodeIp
        );
        assert_eq!(
            AgentEnv::judge(None, "10.0.0.9", &ips),
            EndpointVerdict::Other
        );
    }

    #[test]
    fn exit_through_home_isp_is_a_leak() {
        let mut g = gw("gw", "s", "a");
        assert!(!g.leaks());
        g.exit_ip = g.home_ip.clone();
        assert!(g.leaks());
    }
}
