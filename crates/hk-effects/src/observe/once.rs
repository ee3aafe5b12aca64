//! One look at the kube panes of an environment: `observe --once`.
//!
//! Owns: [`look_once`]: one LIST of each source the watchers watch (the kube-vip Lease, the
//! agent pods, their DaemonSet, the namespace's ConfigMaps, the nodes), run together, and
//! one TCP probe of VIP:port, judged into the four kube panes; and [`could_not_look`] for an
//! environment whose client could not even be built.
//! Must not: watch, write, or judge (the panes come from `convert`, the same path the
//! watchers take). A failed LIST is that pane's `Look::CouldNotLook`, never an error.

use std::fmt::Debug;
use std::net::SocketAddr;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::ListParams;
use kube::Api;
use serde::de::DeserializeOwned;

use super::watch::tcp_probe;
use crate::cluster::{convert, explain, WatchSettings};
use hk_engine::checks::live::{
    AgentEnvPane, EnvTopology, Look, NodesPane, RolloutPane, Snapshot, TcpProbe, VipLeasePane,
};
use hk_engine::time::now;

/// The four kube panes of one environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubePanes {
    pub vip: VipLeasePane,
    pub agents: AgentEnvPane,
    pub rollout: RolloutPane,
    pub nodes: NodesPane,
}

impl KubePanes {
    /// Append these panes to a snapshot.
    pub fn add_to(self, s: &mut Snapshot) {
        s.vip_lease.push(self.vip);
        s.agent_env.push(self.agents);
        s.rollout.push(self.rollout);
        s.nodes.push(self.nodes);
    }
}

/// One LIST, as a Look (an error or a timeout is the reason, naming `what`).
async fn list<K>(
    api: Api<K>,
    lp: ListParams,
    what: String,
    settings: &WatchSettings,
) -> Look<Vec<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    match tokio::time::timeout(settings.request_timeout, api.list(&lp)).await {
        Ok(Ok(l)) => Look::seen(l.items),
        Ok(Err(e)) => Look::could_not(format!("list {what}: {}", explain(&e))),
        Err(_) => Look::could_not(format!(
            "list {what}: no answer within {}s",
            settings.request_timeout.as_secs()
        )),
    }
}

fn refs<K>(l: &Look<Vec<K>>) -> Look<Vec<&K>> {
    match l {
        Look::Seen { value } => Look::seen(value.iter().collect()),
        Look::CouldNotLook { reason } => Look::could_not(reason.clone()),
    }
}

fn named<'a, K: kube::Resource>(l: &'a Look<Vec<K>>, name: &str) -> Look<Option<&'a K>> {
    match l {
        Look::Seen { value } => Look::seen(
            value
                .iter()
                .find(|o| o.meta().name.as_deref() == Some(name)),
        ),
        Look::CouldNotLook { reason } => Look::could_not(reason.clone()),
    }
}

/// Everything the kube panes need, listed once (concurrently), plus one probe of VIP:port.
pub async fn look_once(
    client: &kube::Client,
    topo: &EnvTopology,
    settings: &WatchSettings,
) -> KubePanes {
    let ns = settings.namespace.as_str();
    let by_name = |n: &str| ListParams::default().fields(&format!("metadata.name={n}"));
    let (lease, pods, ds, cms, nodes, probe) = tokio::join!(
        list(
            Api::<Lease>::namespaced(client.clone(), ns),
            by_name(&settings.lease_name),
            format!("Lease {ns}/{}", settings.lease_name),
            settings,
        ),
        list(
            Api::<Pod>::namespaced(client.clone(), ns),
            ListParams::default().labels(&settings.agent_selector),
            format!("pods {} in {ns}", settings.agent_selector),
            settings,
        ),
        list(
            Api::<DaemonSet>::namespaced(client.clone(), ns),
            by_name(&settings.daemonset),
            format!("DaemonSet {ns}/{}", settings.daemonset),
            settings,
        ),
        list(
            Api::<ConfigMap>::namespaced(client.clone(), ns),
            ListParams::default(),
            format!("ConfigMaps in {ns}"),
            settings,
        ),
        list(
            Api::<Node>::all(client.clone()),
            ListParams::default(),
            "nodes".to_string(),
            settings,
        ),
        tcp_probe(
            SocketAddr::new(topo.vip, topo.api_port),
            settings.probe_timeout
        ),
    );
    let at = now();
    let stuck_after = u64::try_from(settings.stuck_after.as_millis()).unwrap_or(u64::MAX);
    let nodes_pane = convert::nodes_pane(topo, &refs(&nodes));
    let mut vip = convert::vip_pane(
        topo,
        &named(&lease, &settings.lease_name),
        &Look::seen(probe),
        at,
    );
    // A NotReady holder warns while its lease still looks fresh (as the watcher judges it).
    vip.verdicts
        .extend(hk_engine::checks::live::holder_ready(&vip, &nodes_pane));
    KubePanes {
        vip,
        agents: convert::agents_pane(topo, &refs(&pods), &refs(&cms), &settings.agent_container),
        rollout: convert::rollout_pane(
            &topo.env,
            &named(&ds, &settings.daemonset),
            &refs(&pods),
            at,
            stuck_after,
        ),
        nodes: nodes_pane,
    }
}

/// The four panes of an environment whose cluster could not be reached at all (no
/// kubeconfig, an unusable one): every pane says why. The VIP is still probed: it does not
/// need the API.
pub async fn could_not_look(
    topo: &EnvTopology,
    settings: &WatchSettings,
    reason: &str,
) -> KubePanes {
    let probe: TcpProbe = tcp_probe(
        SocketAddr::new(topo.vip, topo.api_port),
        settings.probe_timeout,
    )
    .await;
    let at = now();
    let pods: Look<Vec<&Pod>> = Look::could_not(reason);
    let cms: Look<Vec<&ConfigMap>> = Look::could_not(reason);
    let lease: Look<Option<&Lease>> = Look::could_not(reason);
    let ds: Look<Option<&DaemonSet>> = Look::could_not(reason);
    let nodes: Look<Vec<&Node>> = Look::could_not(reason);
    KubePanes {
        vip: convert::vip_pane(topo, &lease, &Look::seen(probe), at),
        agents: convert::agents_pane(topo, &pods, &cms, &settings.agent_container),
        rollout: convert::rollout_pane(&topo.env, &ds, &pods, at, 0),
        nodes: convert::nodes_pane(topo, &nodes),
    }
}
