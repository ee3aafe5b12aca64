//! What every live source sends to the UI: one judged pane at a time.
//!
//! Owns: [`Update`], the message on the UI's observation channel, and [`Feed`], which pane it
//! carries. The panes themselves and their verdicts are `checks::live`'s; the kube watchers
//! (`cluster`) and the VPN look over SSH (`observe::vpn`) fill them.
//! Must not: do IO or judge anything (judging is `checks::live`'s).

use serde::{Deserialize, Serialize};

use hk_engine::checks::live::{
    AgentEnvPane, EtcdPane, GatewayPane, NodesPane, Pane, RolloutPane, Timestamp, Verdict,
    VipLeasePane,
};

/// One pane's new state, as a source saw it at `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    /// The environment (a name from hk-console.yaml). For [`Feed::Vpn`], the VPN look spans
    /// every environment (the eviction loop is a cross-environment fault): `env` is then
    /// [`ALL_ENVS`].
    pub env: String,
    /// When the look was taken (ms since the Unix epoch).
    pub at: Timestamp,
    pub feed: Feed,
}

/// `Update::env` of a look that spans every environment.
pub const ALL_ENVS: &str = "*";

/// The pane an update carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Feed {
    Vip(VipLeasePane),
    Agents(AgentEnvPane),
    Rollout(RolloutPane),
    Nodes(NodesPane),
    Vpn(VpnLook),
    /// The environment's etcd members over SSH (`observe::etcd`).
    Etcd(EtcdPane),
}

impl Feed {
    /// Which of the live panes shows it (the rollout is part of the agent pane).
    pub fn pane(&self) -> Pane {
        match self {
            Feed::Vip(_) => Pane::VipLease,
            Feed::Agents(_) | Feed::Rollout(_) => Pane::AgentEnv,
            Feed::Nodes(_) => Pane::Nodes,
            Feed::Vpn(_) => Pane::VpnEgress,
            Feed::Etcd(_) => Pane::Etcd,
        }
    }

    /// Every verdict the update carries.
    pub fn verdicts(&self) -> Vec<Verdict> {
        match self {
            Feed::Vip(p) => p.verdicts.clone(),
            Feed::Agents(p) => p.verdicts.clone(),
            Feed::Rollout(p) => p.verdicts.clone(),
            Feed::Nodes(p) => p.verdicts.clone(),
            Feed::Etcd(p) => p.verdicts.clone(),
            Feed::Vpn(v) => v
                .gateways
                .iter()
                .flat_map(|g| g.verdicts.iter().cloned())
                .chain(v.across.iter().cloned())
                .collect(),
        }
    }
}

/// Every VPN gateway of every environment, judged one by one and across environments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VpnLook {
    pub gateways: Vec<GatewayPane>,
    /// `checks::live::vpn_across` over `gateways` (the eviction loop names both gateways).
    pub across: Vec<Verdict>,
}
