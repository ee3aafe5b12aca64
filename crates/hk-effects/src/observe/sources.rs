//! Starting the live sources of the console: a kube watcher per environment whose cluster
//! is set up on this machine, and the VPN and etcd pollers over SSH alongside them (the
//! etcd poller also reads quorum through each watched environment's API endpoint).
//!
//! Owns: which environments are watched ([`spawn`]), and the notices that say why the others
//! are not. Must not: judge (the watchers send judged panes) or know the terminal; the
//! updates go on a channel to whoever draws them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cluster::{self, KubeOverrides};
use crate::exec::SshOptions;
use crate::observe::feed::Update;
use hk_engine::repo::Repo;

/// How often the VPN gateways and the etcd members are looked at (each look is several SSH
/// commands per host).
pub const VPN_PERIOD: Duration = Duration::from_secs(15);

/// The longest one SSH look may take: the connection (`SshOptions`' 10 s connect timeout),
/// then its commands side by side, the slowest bounded by the VPN look's 15 s (the etcd
/// look's are 10 s).
pub const SSH_LOOK_BOUND: Duration = Duration::from_secs(25);

/// One refresh of an SSH-polled pane: a look starts at most [`VPN_PERIOD`] after the one
/// before it started and ends within [`SSH_LOOK_BOUND`], so a source that answers sends
/// something at least this often. Longer silence is a source that stopped answering.
pub const SSH_REFRESH_BUDGET: Duration =
    Duration::from_secs(VPN_PERIOD.as_secs() + SSH_LOOK_BOUND.as_secs());

/// The live sources, started.
pub struct Started {
    /// Every source's updates.
    pub updates: mpsc::Receiver<Update>,
    /// Why an environment (or the VPN pane) is not watched: one line each, for the console's
    /// status line (the pane then says "no data yet").
    pub notices: Vec<String>,
    /// How many environments are watched.
    pub watched: usize,
}

/// Start a kube watcher for every environment of `repo` whose kubeconfig exists, and the
/// VPN poller for those environments, on the current runtime until `cancel` trips. What
/// cannot start is a notice, never a failure: a repo checked out elsewhere is never dialled
/// by surprise, and its VPN gateways are polled only alongside its cluster.
pub async fn spawn(
    repo: &Arc<Repo>,
    overrides: &KubeOverrides,
    ssh: Option<SshOptions>,
    stuck_after: Option<Duration>,
    cancel: &CancellationToken,
) -> Started {
    let (tx, updates) = mpsc::channel(256);
    let mut notices = Vec::new();
    let mut live_envs = Vec::new();
    let mut apis = Vec::new();
    for name in repo.environment_names() {
        match start_env_watch(repo, name, overrides, stuck_after, &tx, cancel).await {
            Ok(api) => {
                live_envs.push(name.to_string());
                apis.push((name.to_string(), api));
            }
            Err(e) => notices.push(format!(
                "live panes of {name} (and its VPN gateways) not watched: {e}"
            )),
        }
    }
    let watched = live_envs.len();
    if !live_envs.is_empty() {
        let ssh = ssh.unwrap_or_else(|| crate::context::ssh_options(repo));
        let gateways = Arc::new(crate::observe::vpn::Gateways::for_repo(repo, ssh.clone()));
        // The etcd members of the watched environments, over SSH like the VPN look.
        // Quorum is read through each watched environment's API endpoint.
        let etcd = apis.into_iter().fold(
            crate::observe::etcd::EtcdProbe::for_repo(repo, ssh),
            |p, (env, (client, settings))| p.with_api(&env, client, settings),
        );
        let etcd = Arc::new(etcd);
        crate::observe::etcd::spawn_etcd_poll(
            Arc::clone(repo),
            live_envs.clone(),
            etcd,
            VPN_PERIOD,
            tx.clone(),
            |pane, at| crate::observe::feed::Update {
                env: pane.env.clone(),
                at,
                feed: crate::observe::feed::Feed::Etcd(pane),
            },
            cancel.child_token(),
        );
        crate::observe::vpn::spawn_vpn_poll(
            Arc::clone(repo),
            live_envs,
            gateways,
            VPN_PERIOD,
            tx,
            cancel.child_token(),
        );
    }
    Started {
        updates,
        notices,
        watched,
    }
}

async fn start_env_watch(
    repo: &Repo,
    name: &str,
    overrides: &KubeOverrides,
    stuck_after: Option<Duration>,
    tx: &mpsc::Sender<Update>,
    cancel: &CancellationToken,
) -> Result<(kube::Client, cluster::WatchSettings), cluster::ClusterError> {
    let topo = cluster::env_topology(repo, name)?;
    let mut settings = cluster::watch_settings(repo, name)?;
    if let Some(d) = stuck_after {
        settings.stuck_after = d;
    }
    let target = cluster::kube_target(repo, name, overrides)?;
    let client = cluster::client(&target).await?;
    super::watch::spawn_env_watch(
        client.clone(),
        topo,
        settings.clone(),
        tx.clone(),
        cancel.child_token(),
    );
    Ok((client, settings))
}
