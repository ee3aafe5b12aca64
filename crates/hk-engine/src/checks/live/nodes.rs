//! Nodes: the Ready condition, roles from `node-role.kubernetes.io/*` labels, and servers of
//! the environment the cluster does not know.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{could_not, EnvTopology, Look, Pane, Rule, Severity, Verdict};

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
    let inventory = topo
        .servers
        .iter()
        .map(|s| ("server", s))
        .chain(topo.agents.iter().map(|a| ("agent", a)));
    for (role, s) in inventory {
        let known = nodes
            .iter()
            .any(|n| n.name == s.name || n.addresses.contains(&s.address));
        if !known {
            pane.verdicts.push(Verdict::new(
                Pane::Nodes,
                Rule::NodeMissing,
                Severity::Warn,
                env,
                format!("{role} {}", s.name),
                format!(
                    "{role} {} ({}) of {env} is not a node of the cluster",
                    s.name, s.address
                ),
            ));
        }
    }
    pane
}
