//! The kube panes of one environment, kept current by watches.
//!
//! Owns: [`spawn_env_watch`]: one task per environment that WATCHES (kube-runtime's
//! `watcher` into `reflector` stores, never polling) the kube-vip Lease, the cilium-agent
//! pods, the cilium DaemonSet, the ConfigMaps of the namespace and the nodes; probes VIP:port
//! over TCP every few seconds; reads `/version` as often (the heartbeat: every update
//! carries when the server last answered, so a frozen server's panes go stale although
//! they are re-judged on the clock); re-judges on a local tick (no API request) because lease
//! staleness and a stuck rollout depend on the clock; and sends an
//! [`Update`](crate::observe::feed::Update) for a pane only when the pane changed.
//! A watch that fails (API unreachable, 403, an expired resource version...) makes the panes
//! that need it a `Look::CouldNotLook` naming the object and the reason, and is restarted
//! (a fresh LIST then WATCH) after a backoff; the panes recover on its next full list.
//! Also [`tcp_probe`], shared with `once.rs`; kube errors in words are `cluster::explain`.
//! Must not: judge (that is `checks::live`, through `convert`), write to the API (every
//! request is a LIST, a WATCH or the heartbeat's GET), or panic on anything the cluster says.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cluster::{convert, explain, WatchSettings};
use crate::observe::feed::{Feed, Update};
use hk_engine::checks::live::{
    AgentEnvPane, EnvTopology, Look, NodesPane, RolloutPane, TcpProbe, Timestamp, VipLeasePane,
};
use hk_engine::time::now;

/// One TCP connect to `addr`, with its latency, or why it failed (refused, no answer
/// within `timeout`...). Sends nothing: the connection is closed at once.
pub async fn tcp_probe(addr: SocketAddr, timeout: Duration) -> TcpProbe {
    let t0 = Instant::now();
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_stream)) => TcpProbe::Connected {
            latency_ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
        Ok(Err(e)) => TcpProbe::Failed {
            error: match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                _ => e.to_string(),
            },
        },
        Err(_) => TcpProbe::Failed {
            error: format!(
                "no answer within {}",
                hk_engine::time::span(timeout, hk_engine::time::Style::Words)
            ),
        },
    }
}

/// A watcher error in words.
fn explain_watch(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(c) => format!("list: {}", explain(c)),
        watcher::Error::WatchStartFailed(c) => format!("watch: {}", explain(c)),
        watcher::Error::WatchFailed(c) => format!("watch stream: {}", explain(c)),
        watcher::Error::WatchError(s) => {
            format!("watch: {} ({}): {}", s.reason, s.code, s.message)
        }
        other => other.to_string(),
    }
}

/// Whether the error is the API saying "start over" (an expired resource version), which is
/// routine and not worth showing.
fn routine(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchError(s) if s.code == 410)
}

/// Which watched source a signal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Lease,
    Pods,
    DaemonSet,
    ConfigMaps,
    Nodes,
}

/// What is known of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SourceState {
    /// No full list yet and no failure either: its panes wait.
    Waiting,
    /// Its store holds a current view.
    Ready,
    /// The last attempt failed; the store (if any) is stale.
    Failed(String),
}

#[derive(Debug)]
enum Signal {
    Source(Source, SourceState),
    Probe(TcpProbe),
    /// The API server answered (or not) the heartbeat's cheap read: a watch that is merely
    /// quiet is told from a server that stopped answering by this, not by the watch.
    Heartbeat(Result<(), String>),
}

/// Which panes a change touches.
#[derive(Debug, Clone, Copy, Default)]
struct Dirty {
    vip: bool,
    agents: bool,
    rollout: bool,
    nodes: bool,
}

impl Dirty {
    fn of(signal: &Signal) -> Dirty {
        let mut d = Dirty::default();
        match signal {
            Signal::Probe(_) | Signal::Source(Source::Lease, _) => d.vip = true,
            Signal::Source(Source::Pods, _) => {
                d.agents = true;
                d.rollout = true;
            }
            Signal::Source(Source::ConfigMaps, _) => d.agents = true,
            Signal::Source(Source::DaemonSet, _) => d.rollout = true,
            Signal::Source(Source::Nodes, _) => d.nodes = true,
            Signal::Heartbeat(_) => {}
        }
        d
    }

    /// The clock-dependent panes.
    fn tick() -> Dirty {
        Dirty {
            vip: true,
            rollout: true,
            ..Dirty::default()
        }
    }

    fn add(&mut self, o: Dirty) {
        self.vip |= o.vip;
        self.agents |= o.agents;
        self.rollout |= o.rollout;
        self.nodes |= o.nodes;
    }
}

/// Start watching one environment. Updates go to `tx` until `cancel` fires or the receiver
/// is dropped; the task then ends and its watches close.
pub fn spawn_env_watch(
    client: kube::Client,
    topo: EnvTopology,
    settings: WatchSettings,
    tx: mpsc::Sender<Update>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(client, topo, settings, tx, cancel))
}

/// The reflector stores of one environment and what is known of each.
struct Env {
    topo: EnvTopology,
    settings: WatchSettings,
    lease: Store<Lease>,
    pods: Store<Pod>,
    ds: Store<DaemonSet>,
    cms: Store<ConfigMap>,
    nodes: Store<Node>,
    lease_state: SourceState,
    pods_state: SourceState,
    ds_state: SourceState,
    cms_state: SourceState,
    nodes_state: SourceState,
    probe: Option<TcpProbe>,
    last_vip: Option<VipLeasePane>,
    last_agents: Option<AgentEnvPane>,
    last_rollout: Option<RolloutPane>,
    last_nodes: Option<NodesPane>,
    /// When the API server last confirmed what the panes show (a heartbeat answered, a
    /// source listed): every update carries it, so a pane re-judged on the clock while the
    /// server is silent does not look freshly seen.
    confirmed: Option<Timestamp>,
}

/// A source's objects as a Look (None while it has not been seen yet).
fn look<K>(state: &SourceState, store: &Store<K>) -> Option<Look<Vec<std::sync::Arc<K>>>>
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    match state {
        SourceState::Waiting => None,
        SourceState::Ready => Some(Look::seen(store.state())),
        SourceState::Failed(r) => Some(Look::could_not(r.clone())),
    }
}

fn refs<K>(l: &Look<Vec<std::sync::Arc<K>>>) -> Look<Vec<&K>> {
    match l {
        Look::Seen { value } => Look::seen(value.iter().map(|a| a.as_ref()).collect()),
        Look::CouldNotLook { reason } => Look::could_not(reason.clone()),
    }
}

/// The one object of that name in a list, if any.
fn named<'a, K: kube::Resource>(l: &Look<Vec<&'a K>>, name: &str) -> Look<Option<&'a K>> {
    match l {
        Look::Seen { value } => Look::seen(
            value
                .iter()
                .copied()
                .find(|o| o.meta().name.as_deref() == Some(name)),
        ),
        Look::CouldNotLook { reason } => Look::could_not(reason.clone()),
    }
}

/// Keep `new` and return it if it differs from what was last sent.
fn changed<T: PartialEq + Clone>(last: &mut Option<T>, new: T) -> Option<T> {
    if last.as_ref() == Some(&new) {
        None
    } else {
        *last = Some(new.clone());
        Some(new)
    }
}

impl Env {
    fn set(&mut self, source: Source, state: SourceState) {
        let slot = match source {
            Source::Lease => &mut self.lease_state,
            Source::Pods => &mut self.pods_state,
            Source::DaemonSet => &mut self.ds_state,
            Source::ConfigMaps => &mut self.cms_state,
            Source::Nodes => &mut self.nodes_state,
        };
        *slot = state;
    }

    /// The panes `dirty` names, judged at `now`, that differ from the last ones sent.
    fn judge(&mut self, dirty: Dirty, now: Timestamp) -> Vec<Feed> {
        let mut out = Vec::new();
        let env = self.topo.env.clone();
        let pods = look(&self.pods_state, &self.pods);
        if dirty.nodes {
            if let Some(n) = look(&self.nodes_state, &self.nodes) {
                let pane = convert::nodes_pane(&self.topo, &refs(&n));
                out.extend(changed(&mut self.last_nodes, pane).map(Feed::Nodes));
            }
        }
        // The VIP pane is judged against the nodes too (a NotReady holder warns at once, while
        // its lease still looks fresh): a node change re-judges it.
        if dirty.vip || dirty.nodes {
            if let (Some(l), Some(probe)) = (look(&self.lease_state, &self.lease), &self.probe) {
                let lease = named(&refs(&l), &self.settings.lease_name);
                let mut pane =
                    convert::vip_pane(&self.topo, &lease, &Look::seen(probe.clone()), now);
                if let Some(v) = self
                    .last_nodes
                    .as_ref()
                    .and_then(|n| hk_engine::checks::live::holder_ready(&pane, n))
                {
                    pane.verdicts.push(v);
                }
                out.extend(changed(&mut self.last_vip, pane).map(Feed::Vip));
            }
        }
        if dirty.agents {
            if let (Some(p), Some(c)) = (&pods, look(&self.cms_state, &self.cms)) {
                let pane = convert::agents_pane(
                    &self.topo,
                    &refs(p),
                    &refs(&c),
                    &self.settings.agent_container,
                );
                out.extend(changed(&mut self.last_agents, pane).map(Feed::Agents));
            }
        }
        if dirty.rollout {
            if let (Some(p), Some(d)) = (&pods, look(&self.ds_state, &self.ds)) {
                let ds = named(&refs(&d), &self.settings.daemonset);
                let pane = convert::rollout_pane(
                    &env,
                    &ds,
                    &refs(p),
                    now,
                    u64::try_from(self.settings.stuck_after.as_millis()).unwrap_or(u64::MAX),
                );
                out.extend(changed(&mut self.last_rollout, pane).map(Feed::Rollout));
            }
        }
        out
    }
}

async fn run(
    client: kube::Client,
    topo: EnvTopology,
    settings: WatchSettings,
    tx: mpsc::Sender<Update>,
    cancel: CancellationToken,
) {
    let (sig_tx, mut sig_rx) = mpsc::channel::<Signal>(256);
    let mut tasks = JoinSet::new();
    let ns = settings.namespace.clone();
    let retry = (settings.retry_min, settings.retry_max);

    let (lease, w) = reflector::store::<Lease>();
    tasks.spawn(follow(
        Api::namespaced(client.clone(), &ns),
        watcher::Config::default().fields(&format!("metadata.name={}", settings.lease_name)),
        w,
        Source::Lease,
        format!("Lease {ns}/{}", settings.lease_name),
        sig_tx.clone(),
        retry,
    ));
    let (pods, w) = reflector::store::<Pod>();
    tasks.spawn(follow(
        Api::namespaced(client.clone(), &ns),
        watcher::Config::default().labels(&settings.agent_selector),
        w,
        Source::Pods,
        format!("pods {} in {ns}", settings.agent_selector),
        sig_tx.clone(),
        retry,
    ));
    let (ds, w) = reflector::store::<DaemonSet>();
    tasks.spawn(follow(
        Api::namespaced(client.clone(), &ns),
        watcher::Config::default().fields(&format!("metadata.name={}", settings.daemonset)),
        w,
        Source::DaemonSet,
        format!("DaemonSet {ns}/{}", settings.daemonset),
        sig_tx.clone(),
        retry,
    ));
    let (cms, w) = reflector::store::<ConfigMap>();
    tasks.spawn(follow(
        Api::namespaced(client.clone(), &ns),
        watcher::Config::default(),
        w,
        Source::ConfigMaps,
        format!("ConfigMaps in {ns}"),
        sig_tx.clone(),
        retry,
    ));
    let (nodes, w) = reflector::store::<Node>();
    tasks.spawn(follow(
        Api::all(client.clone()),
        watcher::Config::default(),
        w,
        Source::Nodes,
        "nodes".to_string(),
        sig_tx.clone(),
        retry,
    ));
    tasks.spawn(heartbeat_loop(
        client.clone(),
        settings.probe_every,
        settings.request_timeout.min(HEARTBEAT_TIMEOUT),
        sig_tx.clone(),
    ));
    tasks.spawn(probe_loop(
        SocketAddr::new(topo.vip, topo.api_port),
        settings.probe_every,
        settings.probe_timeout,
        sig_tx,
    ));

    let mut tick = tokio::time::interval(settings.tick);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut env = Env {
        topo,
        settings,
        lease,
        pods,
        ds,
        cms,
        nodes,
        lease_state: SourceState::Waiting,
        pods_state: SourceState::Waiting,
        ds_state: SourceState::Waiting,
        cms_state: SourceState::Waiting,
        nodes_state: SourceState::Waiting,
        probe: None,
        last_vip: None,
        last_agents: None,
        last_rollout: None,
        last_nodes: None,
        confirmed: None,
    };
    loop {
        let mut dirty = tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => Dirty::tick(),
            sig = sig_rx.recv() => match sig {
                Some(s) => apply(&mut env, s),
                None => break,
            },
        };
        // Take in everything already queued, then judge once.
        while let Ok(s) = sig_rx.try_recv() {
            dirty.add(apply(&mut env, s));
        }
        let at = now();
        // Until the server first answers, the judging time; then the last confirmation.
        // (Only changed panes are sent; the VIP pane changes every tick with its renew
        // age, and carries each new confirmation to the console.)
        let vouched = env.confirmed.unwrap_or(at).min(at);
        for feed in env.judge(dirty, at) {
            let update = Update {
                env: env.topo.env.clone(),
                at: vouched,
                feed,
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                sent = tx.send(update) => if sent.is_err() { return },
            }
        }
    }
    // `tasks` drops here: every watch and the probe end with it.
}

fn apply(env: &mut Env, s: Signal) -> Dirty {
    let dirty = Dirty::of(&s);
    match s {
        Signal::Source(src, state) => {
            if state == SourceState::Ready {
                env.confirmed = Some(now());
            }
            env.set(src, state)
        }
        Signal::Probe(p) => env.probe = Some(p),
        Signal::Heartbeat(Ok(())) => env.confirmed = Some(now()),
        Signal::Heartbeat(Err(why)) => {
            tracing::debug!(env = %env.topo.env, "API heartbeat: {why}");
        }
    }
    dirty
}

/// How long the heartbeat's read may take (at most the settings' request timeout).
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);

/// Every `every`, one cheap read (`GET /version`) bounded by `timeout`: whether the API
/// server still answers, whatever its watches (which may just be quiet) say.
async fn heartbeat_loop(
    client: kube::Client,
    every: Duration,
    timeout: Duration,
    tx: mpsc::Sender<Signal>,
) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let r = match tokio::time::timeout(timeout, client.apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("GET /version: {}", explain(&e))),
            Err(_) => Err(format!(
                "GET /version: no answer within {}",
                hk_engine::time::span(timeout, hk_engine::time::Style::Words)
            )),
        };
        if tx.send(Signal::Heartbeat(r)).await.is_err() {
            return;
        }
    }
}

/// Keep one reflector store current: watch, and after a failure say so, wait (doubling
/// from `retry.0` up to `retry.1`) and start over with a fresh list. Signals `Ready` after
/// each full list and each change, `Failed` after each failed attempt.
async fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    mut writer: reflector::store::Writer<K>,
    source: Source,
    what: String,
    tx: mpsc::Sender<Signal>,
    retry: (Duration, Duration),
) where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let mut delay = retry.0;
    loop {
        let mut stream = watcher(api.clone(), config.clone()).boxed();
        let mut failure = None;
        while let Some(event) = stream.next().await {
            match event {
                Ok(e) => {
                    writer.apply_watcher_event(&e);
                    if matches!(
                        e,
                        watcher::Event::InitDone
                            | watcher::Event::Apply(_)
                            | watcher::Event::Delete(_)
                    ) {
                        delay = retry.0;
                        if tx
                            .send(Signal::Source(source, SourceState::Ready))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        drop(stream);
        match failure {
            Some(e) if routine(&e) => {
                tracing::debug!("{what}: {}; listing again", explain_watch(&e));
                continue;
            }
            Some(e) => {
                let reason = format!("{what}: {}", explain_watch(&e));
                tracing::warn!("{reason} (retrying in {delay:?})");
                if tx
                    .send(Signal::Source(source, SourceState::Failed(reason)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            None => tracing::debug!("{what}: watch stream ended; starting over"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(retry.1);
    }
}

async fn probe_loop(
    addr: SocketAddr,
    every: Duration,
    timeout: Duration,
    tx: mpsc::Sender<Signal>,
) {
    loop {
        let p = tcp_probe(addr, timeout).await;
        if tx.send(Signal::Probe(p)).await.is_err() {
            return;
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn probe_of_a_closed_port_is_refused_and_an_open_one_connects() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let open = listener.local_addr().expect("addr");
        match tcp_probe(open, Duration::from_secs(2)).await {
            TcpProbe::Connected { latency_ms } => assert!(latency_ms < 2000),
            other => panic!("expected connected, got {other:?}"),
        }
        drop(listener);
        match tcp_probe(open, Duration::from_secs(2)).await {
            TcpProbe::Failed { error } => assert_eq!(error, "connection refused"),
            other => panic!("expected refused, got {other:?}"),
        }
    }

    #[test]
    fn dirty_panes_per_source() {
        let d = Dirty::of(&Signal::Source(Source::ConfigMaps, SourceState::Ready));
        assert!(d.agents && !d.vip && !d.rollout && !d.nodes);
        let d = Dirty::of(&Signal::Source(Source::Pods, SourceState::Ready));
        assert!(d.agents && d.rollout && !d.vip && !d.nodes);
        let d = Dirty::of(&Signal::Probe(TcpProbe::Connected { latency_ms: 0 }));
        assert!(d.vip && !d.agents);
        let t = Dirty::tick();
        assert!(t.vip && t.rollout && !t.agents && !t.nodes);
    }

    #[test]
    fn changed_only_once() {
        let mut last = None;
        assert_eq!(changed(&mut last, 1), Some(1));
        assert_eq!(changed(&mut last, 1), None);
        assert_eq!(changed(&mut last, 2), Some(2));
    }
}
