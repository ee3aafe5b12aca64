//! The three-server environment the guard-rail and kube-wait tests build on the REAL
//! kube-apiserver (tests/guard_health.rs, tests/kube_wait.rs): one Node per server on
//! 127.0.0.51-53, the VIP 127.0.0.49 on port 6443, and kube-system/cilium dialing that VIP
//! with one agent pod per node. Each test names its own environment and nodes, because its
//! assertions quote them.

use hk_console::checks::live::{EnvTopology, Server};
use kube::Client;

use super::apiserver::{
    create_cilium_daemonset, create_cilium_pod, create_node, AgentEnv, CiliumPod, FixtureNode,
};

pub const VIP: &str = "127.0.0.49";
pub const API_PORT: u16 = 6443;

/// An environment of three servers: `nodes` are (node name, InternalIP).
pub struct ThreeServers {
    pub env: &'static str,
    pub nodes: [(&'static str, &'static str); 3],
}

impl ThreeServers {
    /// `names` on 127.0.0.51, .52 and .53, in that order.
    pub const fn named(env: &'static str, names: [&'static str; 3]) -> ThreeServers {
        ThreeServers {
            env,
            nodes: [
                (names[0], "127.0.0.51"),
                (names[1], "127.0.0.52"),
                (names[2], "127.0.0.53"),
            ],
        }
    }

    /// The topology the live rules and the health gate judge this environment by.
    pub fn topo(&self) -> EnvTopology {
        EnvTopology {
            env: self.env.into(),
            vip: VIP.parse().expect("vip"),
            api_port: API_PORT,
            agents: Vec::new(),
            servers: self
                .nodes
                .iter()
                .map(|(n, ip)| Server {
                    name: n.to_string(),
                    address: ip.parse().expect("ip"),
                })
                .collect(),
        }
    }

    /// One Ready server Node each.
    pub async fn create_nodes(&self, admin: &Client) {
        for (name, ip) in self.nodes {
            create_node(admin, &FixtureNode::server(name, ip)).await;
        }
    }

    /// kube-system/cilium dialing the VIP, pod `pods[i]` on node i; the pods on `unready`
    /// nodes are not Ready. The DaemonSet's status is the caller's to set.
    pub async fn create_cilium(&self, admin: &Client, pods: [&str; 3], unready: &[&str]) {
        let env = AgentEnv::literal(VIP, API_PORT);
        create_cilium_daemonset(admin, &env).await;
        for (pod, (node, _)) in pods.iter().zip(self.nodes) {
            create_cilium_pod(
                admin,
                &CiliumPod {
                    name: pod.to_string(),
                    node: node.to_string(),
                    env: env.clone(),
                    ready: !unready.contains(&node),
                },
            )
            .await;
        }
    }
}
