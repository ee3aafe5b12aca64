//! One look at what a gate's live blast radius is read from (issue 29), for a caller that
//! keeps no live panes: a headless run answers its gates with no console, so before each
//! gate of a mutating step it looks once, as the Live screen would have.
//!
//! Owns: [`look`], the VIP lease and nodes panes (one LIST each, as `observe --once`) and
//! the etcd pane (the members over SSH and quorum through the API endpoint, as the console's
//! etcd poller) of one environment, taken together. Must not: judge what the step may do
//! (that is `guard::blast`'s), or write anything.

use tokio_util::sync::CancellationToken;

use crate::cluster::{self, KubeOverrides};
use crate::exec::SshOptions;
use hk_engine::checks::live::{EtcdPane, NodesPane, VipLeasePane};
use hk_engine::repo::Repo;

/// The panes one look found, each `None` when it could not be taken (with why in
/// `problems`).
#[derive(Debug, Clone, Default)]
pub struct GateLook {
    pub vip: Option<VipLeasePane>,
    pub nodes: Option<NodesPane>,
    pub etcd: Option<EtcdPane>,
    pub problems: Vec<String>,
}

/// Look once at `env`'s VIP lease, nodes and etcd, as the console's panes do.
pub async fn look(repo: &Repo, env: &str, overrides: &KubeOverrides, ssh: SshOptions) -> GateLook {
    let mut out = GateLook::default();
    let kube = async {
        let topo = cluster::env_topology(repo, env).map_err(|e| e.to_string())?;
        let settings = cluster::watch_settings(repo, env).map_err(|e| e.to_string())?;
        let target = cluster::kube_target(repo, env, overrides).map_err(|e| e.to_string())?;
        let client = cluster::client(&target).await.map_err(|e| e.to_string())?;
        let panes = super::once::look_once(&client, &topo, &settings).await;
        Ok::<_, String>((panes, client, settings))
    };
    let (client, settings) = match kube.await {
        Ok((panes, client, settings)) => {
            out.vip = Some(panes.vip);
            out.nodes = Some(panes.nodes);
            (Some(client), Some(settings))
        }
        Err(why) => {
            out.problems
                .push(format!("{env}: the VIP lease and nodes: {why}"));
            (None, None)
        }
    };
    let mut probe = super::etcd::EtcdProbe::for_repo(repo, ssh);
    if let (Some(client), Some(settings)) = (client, settings) {
        probe = probe.with_api(env, client, settings);
    }
    let (pane, _) = probe.look(repo, env, &CancellationToken::new()).await;
    out.etcd = Some(pane);
    out
}
