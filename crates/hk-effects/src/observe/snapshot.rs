//! One look at every pane of some environments: what `observe --once` and `demo --once`
//! print.
//!
//! Owns: [`take`]: the kube panes of each environment (one LIST per source, concurrently)
//! and every VPN gateway and etcd member over SSH (quorum through the environment's API
//! endpoint, as the console reads it), judged; and the check that the cluster each environment
//! was read from is that environment's (one of its servers is a node there).
//! Must not: print, or decide an exit code (the command does, from what is returned).

use super::once;
use crate::cluster::{self, KubeOverrides};
use crate::observe::etcd::EtcdProbe;
use crate::observe::vpn::Gateways;
use hk_engine::checks::live::{EnvTopology, NodesPane, Snapshot};
use hk_engine::repo::Repo;

/// What one look found.
#[derive(Debug, Default)]
pub struct Taken {
    pub snapshot: Snapshot,
    /// Per environment, the kubeconfig it was read with (for the text form).
    pub targets: Vec<(String, String)>,
    /// The environments that could not be looked at, with why.
    pub problems: Vec<String>,
    /// Environments whose kubeconfig reached another cluster: none of their servers is a
    /// node there. Their verdicts judge the wrong cluster.
    pub wrong_cluster: Vec<String>,
}

/// One look at every pane of `names`.
pub async fn take(
    repo: &Repo,
    names: &[String],
    overrides: &KubeOverrides,
    gateways: &Gateways,
    etcd: &EtcdProbe,
) -> Taken {
    let cancel = tokio_util::sync::CancellationToken::new();
    let cancel = &cancel;
    // What each environment needs before anything is asked of a cluster.
    let mut problems: Vec<String> = Vec::new();
    let mut jobs = Vec::new();
    for name in names {
        let topo = cluster::env_topology(repo, name);
        let settings = cluster::watch_settings(repo, name);
        match (topo, settings) {
            (Ok(topo), Ok(settings)) => {
                let target = cluster::kube_target(repo, name, overrides);
                jobs.push((topo, settings, target));
            }
            (Err(e), _) | (_, Err(e)) => problems.push(e.to_string()),
        }
    }
    let looks = jobs.into_iter().map(|(topo, settings, target)| async move {
        let (shown, panes, etcd_pane) = match target {
            Ok(target) => {
                let shown = target.to_string();
                match cluster::client(&target).await {
                    Ok(c) => {
                        let api = (c.clone(), settings.clone());
                        let (panes, (pane, _)) = futures::join!(
                            once::look_once(&c, &topo, &settings),
                            etcd.look_via(repo, &topo.env, Some(&api), cancel)
                        );
                        (shown, panes, pane)
                    }
                    Err(e) => {
                        let why = e.to_string();
                        let (panes, (pane, _)) = futures::join!(
                            once::could_not_look(&topo, &settings, &why),
                            etcd.look_via(repo, &topo.env, None, cancel)
                        );
                        (shown, panes, pane)
                    }
                }
            }
            Err(e) => {
                let why = e.to_string();
                let (panes, (pane, _)) = futures::join!(
                    once::could_not_look(&topo, &settings, &why),
                    etcd.look_via(repo, &topo.env, None, cancel)
                );
                ("no kubeconfig".to_string(), panes, pane)
            }
        };
        let wrong = not_this_cluster(&topo, &panes.nodes, &shown);
        (shown, panes, etcd_pane, wrong)
    });
    let (looks, vpn) = futures::join!(
        futures::future::join_all(looks),
        crate::observe::vpn::look(repo, names, gateways)
    );
    let mut taken = Taken {
        problems,
        ..Taken::default()
    };
    for (target, panes, etcd, wrong) in looks {
        taken.targets.push((panes.vip.env.clone(), target));
        if let Some(why) = wrong {
            taken.wrong_cluster.push(why);
        }
        panes.add_to(&mut taken.snapshot);
        taken.snapshot.etcd.push(etcd);
    }
    taken.snapshot.vpn = vpn.gateways;
    taken.snapshot.vpn_across = vpn.across;
    taken
}

/// Why the cluster `nodes` were read from is not `topo`'s environment, when it is not: it
/// has nodes and none of them is one of the environment's servers. A kubeconfig left
/// pointing at dev must not be read as prod. `None` when it is, or when the nodes could
/// not be listed (that pane then says so).
fn not_this_cluster(topo: &EnvTopology, nodes: &NodesPane, target: &str) -> Option<String> {
    if nodes.nodes.is_empty()
        || nodes
            .nodes
            .iter()
            .any(|n| topo.servers.iter().any(|s| s.name == n.name))
    {
        return None;
    }
    let servers: Vec<&str> = topo.servers.iter().map(|s| s.name.as_str()).collect();
    let found: Vec<&str> = nodes.nodes.iter().map(|n| n.name.as_str()).collect();
    Some(format!(
        "environment `{}`: the cluster reached through {target} is not {}'s: none of its servers ({}) is a node there (its nodes: {})",
        topo.env,
        topo.env,
        servers.join(", "),
        found.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::checks::live::{NodeRow, Server};

    fn topo() -> EnvTopology {
        EnvTopology {
            env: "prod".into(),
            vip: "10.0.0.10".parse().expect("ip"),
            api_port: 6443,
            agents: Vec::new(),
            servers: vec![Server {
                name: "k3s-prod-1".into(),
                address: "10.0.0.11".parse().expect("ip"),
            }],
        }
    }

    fn nodes(names: &[&str]) -> NodesPane {
        NodesPane {
            env: "prod".into(),
            nodes: names
                .iter()
                .map(|n| NodeRow {
                    name: n.to_string(),
                    ready: None,
                    roles: vec![],
                })
                .collect(),
            verdicts: vec![],
        }
    }

    #[test]
    fn another_clusters_nodes_name_both_sides() {
        let why = not_this_cluster(&topo(), &nodes(&["k3s-dev-1"]), "/tmp/dev.yaml")
            .expect("wrong cluster");
        assert!(
            why.contains("k3s-prod-1") && why.contains("k3s-dev-1"),
            "{why}"
        );
        assert!(
            why.contains("/tmp/dev.yaml") && why.contains("`prod`"),
            "{why}"
        );
    }

    #[test]
    fn own_or_unlisted_nodes_are_not_flagged() {
        assert!(not_this_cluster(&topo(), &nodes(&["k3s-prod-1", "x"]), "f").is_none());
        assert!(not_this_cluster(&topo(), &nodes(&[]), "f").is_none());
    }
}
