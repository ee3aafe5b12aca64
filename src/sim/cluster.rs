//! One simulated k3s cluster: the objects a real one has, and what its controllers do.
//!
//! Owns: seeding a [`Store`] with what the console watches (nodes, the kube-vip Lease,
//! the cilium DaemonSet, its agents and the cilium HelmRelease), and the task that plays
//! the cluster's controllers on it: kube-vip renewing the Lease (and handing it over when
//! the holder dies), Flux answering a reconcile request, the DaemonSet controller rolling
//! the agents one node at a time and never past an unready pod, and the scenario's faults
//! on their timeline and as they arrive live (the console's `:fault`, through
//! `demo::FaultInjector`).
//! Must not: know the homelab. Names and addresses come in through [`SimEnv`] (built from
//! the demo repo's inventory); what goes wrong comes from the scenario.

use std::net::Ipv4Addr;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::kube::{EventType, ObjRef, Origin, Store};
use super::scenario::{AgentsDial, EnvState, Fault};

/// The annotation Flux's `reconcile` verb sets; a change asks for a reconcile.
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
const NS: &str = "kube-system";

/// What the simulation knows of one environment (from the demo repo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimEnv {
    pub name: String,
    /// Servers in inventory order: (host name, loopback address).
    pub servers: Vec<(String, Ipv4Addr)>,
    pub vip: Ipv4Addr,
    pub api_port: u16,
    /// The founder's address (what agents dial in the 2026-09-06 incident).
    pub founder: Ipv4Addr,
    /// The kube-vip Lease's name (the inventory's, else kube-vip's default).
    pub lease_name: String,
}

impl SimEnv {
    /// The address an agent on `server` (0-based) dials when it dials `how`.
    pub fn dial(&self, how: AgentsDial, server: usize) -> String {
        match how {
            AgentsDial::Vip => self.vip.to_string(),
            AgentsDial::Founder => self.founder.to_string(),
            AgentsDial::OwnNode => self
                .servers
                .get(server)
                .map_or_else(|| self.vip.to_string(), |s| s.1.to_string()),
        }
    }
}

/// RFC 3339 with microseconds, UTC (what the API server writes for MicroTime).
pub fn micro_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

fn time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn node(name: &str, addr: Ipv4Addr, ready: bool, now: jiff::Timestamp) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "node-role.kubernetes.io/control-plane": "true",
            "node-role.kubernetes.io/etcd": "true",
            "node-role.kubernetes.io/master": "true"}},
        "spec": {},
        "status": node_status(addr, ready, now),
    })
}

fn node_status(addr: Ipv4Addr, ready: bool, now: jiff::Timestamp) -> Value {
    json!({
        "addresses": [{"type": "InternalIP", "address": addr.to_string()}],
        "conditions": [{
            "type": "Ready",
            "status": if ready { "True" } else { "Unknown" },
            "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" },
            "message": if ready { "kubelet is posting ready status" } else { "Kubelet stopped posting node status." },
            "lastHeartbeatTime": time(now),
            "lastTransitionTime": time(now),
        }],
        "nodeInfo": {"kubeletVersion": "v1.34.4+k3s1"},
    })
}

fn agent_env(host: &str, port: u16) -> Value {
    json!([
        {"name": "KUBERNETES_SERVICE_HOST", "value": host},
        {"name": "KUBERNETES_SERVICE_PORT", "value": port.to_string()},
    ])
}

fn daemonset(env: &SimEnv, host: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        // helm-controller labels what a HelmRelease applies with its name and namespace.
        "metadata": {"name": "cilium", "namespace": NS, "labels": {"k8s-app": "cilium",
            "helm.toolkit.fluxcd.io/name": "cilium", "helm.toolkit.fluxcd.io/namespace": NS}},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "cilium"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"k8s-app": "cilium"}},
                "spec": {"containers": [{
                    "name": "cilium-agent", "image": "quay.io/cilium/cilium:v1.18.2",
                    "env": agent_env(host, env.api_port)}]}
            }
        }
    })
}

fn ds_ref() -> ObjRef {
    ObjRef::new("apps/v1", "DaemonSet", Some(NS), "cilium")
}

/// The DaemonSet's generation and uid, as the store has them. Its pods carry that uid as
/// their controller's (a client that checks ownership, like kube-wait, ignores pods that
/// name another).
fn ds_meta(store: &Store) -> (u64, String) {
    let ds = store.fetch(&ds_ref()).ok().flatten();
    let field = |p: &str| ds.as_ref().and_then(|o| o.pointer(p).cloned());
    (
        field("/metadata/generation")
            .and_then(|v| v.as_u64())
            .unwrap_or(1),
        field("/metadata/uid")
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    )
}

#[allow(clippy::too_many_arguments)]
fn pod(
    env: &SimEnv,
    server: usize,
    generation: u64,
    owner_uid: &str,
    host: &str,
    ready: bool,
    now: jiff::Timestamp,
) -> Value {
    let node = &env.servers[server].0;
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod_name(env, server, generation),
            "namespace": NS,
            "labels": {"k8s-app": "cilium", "pod-template-generation": generation.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium",
                "uid": owner_uid, "controller": true}],
        },
        "spec": {"nodeName": node, "containers": [{
            "name": "cilium-agent", "image": "quay.io/cilium/cilium:v1.18.2",
            "env": agent_env(host, env.api_port)}]},
        "status": pod_status(ready, now),
    })
}

fn pod_status(ready: bool, now: jiff::Timestamp) -> Value {
    json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
            "lastTransitionTime": time(now)}],
        "containerStatuses": [{"name": "cilium-agent", "ready": ready, "restartCount": 0,
            "image": "quay.io/cilium/cilium:v1.18.2", "imageID": "", "started": true}],
        "startTime": time(now),
    })
}

fn pod_name(env: &SimEnv, server: usize, generation: u64) -> String {
    // Stable per node and generation, like the controller's random suffix but readable.
    let n = server + 1;
    let _ = env;
    format!("cilium-g{generation}-n{n}")
}

fn lease(
    name: &str,
    holder: &str,
    duration_s: u64,
    transitions: u64,
    now: jiff::Timestamp,
) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s,
            "acquireTime": micro_time(now), "renewTime": micro_time(now),
            "leaseTransitions": transitions}
    })
}

fn helmrelease(generation_handled: Option<&str>) -> Value {
    let mut status = json!({"conditions": [{"type": "Ready", "status": "True",
        "reason": "UpgradeSucceeded", "message": "Helm upgrade succeeded",
        "lastTransitionTime": time(jiff::Timestamp::now())}]});
    if let Some(at) = generation_handled {
        status["lastHandledReconcileAt"] = json!(at);
    }
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": NS},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "cilium", "version": "1.18.2"}}},
        "status": status,
    })
}

fn daemonset_status(generation: u64, desired: usize, updated: usize, ready: usize) -> Value {
    json!({
        "observedGeneration": generation,
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": desired,
        "numberMisscheduled": 0,
        "updatedNumberScheduled": updated,
        "numberReady": ready,
        "numberAvailable": ready,
        "numberUnavailable": desired.saturating_sub(ready),
    })
}

/// Put the cluster of `env` into `store` as `state` says.
pub fn seed(store: &Store, env: &SimEnv, state: &EnvState) -> Result<(), super::kube::SimError> {
    let now = jiff::Timestamp::now();
    for (name, addr) in &env.servers {
        store.apply(node(name, *addr, true, now))?;
    }
    let holder_ix = state
        .lease_holder
        .saturating_sub(1)
        .min(env.servers.len().saturating_sub(1));
    if let Some((holder, _)) = env.servers.get(holder_ix) {
        store.apply(lease(
            &env.lease_name,
            holder,
            state.lease_duration_s,
            0,
            now,
        ))?;
    }
    let hosts: Vec<String> = (0..env.servers.len())
        .map(|i| env.dial(state.agents_dial, i))
        .collect();
    // The template carries what the agents were last rolled out with; with agents on
    // their own node it shows the first node's value, as a kubectl edit would leave it.
    let template_host = hosts
        .first()
        .cloned()
        .unwrap_or_else(|| env.vip.to_string());
    store.apply(daemonset(env, &template_host))?;
    let ds = ds_ref();
    let (generation, owner) = ds_meta(store);
    for (i, h) in hosts.iter().enumerate() {
        store.apply(pod(env, i, generation, &owner, h, true, now))?;
    }
    store.patch_status(
        &ds,
        daemonset_status(
            generation,
            env.servers.len(),
            env.servers.len(),
            env.servers.len(),
        ),
    )?;
    store.apply(helmrelease(None))?;
    Ok(())
}

/// The holder of `env`'s kube-vip Lease as the store has it now.
pub fn lease_holder(store: &Store, env: &SimEnv) -> Option<String> {
    let lease = ObjRef::new("coordination.k8s.io/v1", "Lease", Some(NS), &env.lease_name);
    store
        .fetch(&lease)
        .ok()
        .flatten()?
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether the Node `name` is Ready as the store has it now (`None`: no such node).
pub fn node_ready(store: &Store, name: &str) -> Option<bool> {
    let node = store
        .fetch(&ObjRef::new("v1", "Node", None, name))
        .ok()
        .flatten()?;
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?
        .get("status")
        .and_then(Value::as_str)
        == Some("True");
    Some(ready)
}

/// The controllers of one simulated cluster, until `cancel`: the scenario's timeline
/// `faults`, and every fault that arrives on `live` as it arrives.
pub async fn run(
    store: Store,
    env: SimEnv,
    state: EnvState,
    faults: Vec<(Duration, Fault)>,
    live: mpsc::UnboundedReceiver<Fault>,
    cancel: CancellationToken,
) {
    let mut c = Controllers::new(store, env, state);
    let mut events = c.store.subscribe();
    let mut renew = tokio::time::interval(Duration::from_secs(c.state.lease_renew_every_s.max(1)));
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = tokio::time::Instant::now();
    let mut faults = faults.into_iter().peekable();
    // `None` once every sender is gone: the branch then never fires again.
    let mut live = Some(live);
    loop {
        let next_fault = faults.peek().map(|(at, _)| start + *at);
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = renew.tick() => c.renew(),
            f = async {
                match live.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => match f {
                Some(f) => c.fault(&f),
                None => live = None,
            },
            _ = async {
                match next_fault {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some((_, f)) = faults.next() {
                    c.fault(&f);
                }
            }
            ev = events.recv() => match ev {
                Ok(e) => {
                    if e.origin == Origin::Api
                        && e.event == EventType::Modified
                        && e.resource.kind == "HelmRelease"
                        && e.name == "cilium"
                    {
                        let asked = e.object.pointer(&format!("/metadata/annotations/{}", REQUESTED_AT.replace('/', "~1"))).and_then(Value::as_str).map(str::to_string);
                        let before = e.prev.as_ref().and_then(|p| p.pointer(&format!("/metadata/annotations/{}", REQUESTED_AT.replace('/', "~1"))).and_then(Value::as_str).map(str::to_string));
                        if let Some(at) = asked.filter(|a| Some(a) != before.as_ref()) {
                            c.reconcile(&at, &cancel).await;
                        }
                    }
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

struct Controllers {
    store: Store,
    env: SimEnv,
    state: EnvState,
    holder: usize,
    dead: Vec<bool>,
    transitions: u64,
    /// When the holder last renewed (for the handover after it dies).
    last_renew: jiff::Timestamp,
    agents_dial: AgentsDial,
}

impl Controllers {
    fn new(store: Store, env: SimEnv, state: EnvState) -> Controllers {
        let n = env.servers.len();
        Controllers {
            holder: state
                .lease_holder
                .saturating_sub(1)
                .min(n.saturating_sub(1)),
            dead: vec![false; n],
            transitions: 0,
            last_renew: jiff::Timestamp::now(),
            agents_dial: state.agents_dial,
            store,
            env,
            state,
        }
    }

    fn lease_ref(&self) -> ObjRef {
        ObjRef::new(
            "coordination.k8s.io/v1",
            "Lease",
            Some(NS),
            &self.env.lease_name,
        )
    }

    /// kube-vip: the live holder renews; a dead one does not, and once its lease has run
    /// out the first live server takes it.
    fn renew(&mut self) {
        let now = jiff::Timestamp::now();
        if !self.dead.get(self.holder).copied().unwrap_or(true) {
            self.last_renew = now;
            let _ = self.store.merge_patch(
                &self.lease_ref(),
                json!({"spec": {"renewTime": micro_time(now)}}),
            );
            return;
        }
        let expired = now.as_millisecond() - self.last_renew.as_millisecond()
            > i64::try_from(self.state.lease_duration_s * 1000).unwrap_or(i64::MAX);
        if !expired {
            return;
        }
        if let Some(next) = (0..self.env.servers.len()).find(|i| !self.dead[*i]) {
            self.holder = next;
            self.transitions += 1;
            self.last_renew = now;
            let _ = self.store.apply(lease(
                &self.env.lease_name,
                &self.env.servers[next].0,
                self.state.lease_duration_s,
                self.transitions,
                now,
            ));
        }
    }

    fn fault(&mut self, f: &Fault) {
        let now = jiff::Timestamp::now();
        match f {
            Fault::HolderDies => {
                let h = self.holder;
                if let Some(d) = self.dead.get_mut(h) {
                    *d = true;
                }
                let (name, addr) = self.env.servers[h].clone();
                let _ = self.store.patch_status(
                    &ObjRef::new("v1", "Node", None, &name),
                    node_status(addr, false, now),
                );
            }
            Fault::AgentDrifts { server } => {
                let i = server.saturating_sub(1);
                if i < self.env.servers.len() {
                    let (generation, owner) = ds_meta(&self.store);
                    let host = self.env.dial(AgentsDial::OwnNode, i);
                    self.replace_pod(i, generation, &owner, &host, true, now);
                }
            }
            // The tunnel is the SSH side's; the cluster has nothing to do.
            Fault::VpnDown | Fault::VpnUp => {}
        }
    }

    /// The DaemonSet controller's move on one node: the node's current agent pod goes, a
    /// new one of `generation` dialling `host` takes its place.
    fn replace_pod(
        &self,
        server: usize,
        generation: u64,
        owner: &str,
        host: &str,
        ready: bool,
        now: jiff::Timestamp,
    ) {
        if let Some(old) = self.current_pod(server) {
            let _ = self.store.remove(&ObjRef::new("v1", "Pod", Some(NS), &old));
        }
        let _ = self
            .store
            .apply(pod(&self.env, server, generation, owner, host, ready, now));
    }

    fn current_pod(&self, server: usize) -> Option<String> {
        let node = &self.env.servers.get(server)?.0;
        self.store
            .objects("v1", "Pod", Some(NS))
            .ok()?
            .into_iter()
            .find(|p| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node))
            .and_then(|p| {
                p.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
    }

    /// Flux: the release is upgraded at once (Ready, request handled); the DaemonSet then
    /// rolls one node at a time: old pod gone, new pod unready, ready a moment later. A node
    /// the scenario marks stuck never gets ready, and the rollout stops there.
    async fn reconcile(&mut self, requested_at: &str, cancel: &CancellationToken) {
        let step = Duration::from_millis(700);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = self.store.patch_status(
            &ObjRef::new("helm.toolkit.fluxcd.io/v2", "HelmRelease", Some(NS), "cilium"),
            json!({"lastHandledReconcileAt": requested_at,
                "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                    "message": "Helm upgrade succeeded", "lastTransitionTime": time(jiff::Timestamp::now())}]}),
        );
        let Some(target) = self.state.agents_dial_after_reconcile else {
            return;
        };
        if target == self.agents_dial {
            return;
        }
        self.agents_dial = target;
        let n = self.env.servers.len();
        let host0 = self.env.dial(target, 0);
        let _ = self.store.apply(daemonset(&self.env, &host0));
        let (generation, owner) = ds_meta(&self.store);
        let ds = ds_ref();
        let _ = self
            .store
            .patch_status(&ds, daemonset_status(generation, n, 0, n));
        for i in 0..n {
            if cancel.is_cancelled() {
                return;
            }
            let host = self.env.dial(target, i);
            self.replace_pod(i, generation, &owner, &host, false, jiff::Timestamp::now());
            let _ = self
                .store
                .patch_status(&ds, daemonset_status(generation, n, i + 1, n - 1));
            if self.state.rollout_stuck_on == Some(i + 1) {
                // maxUnavailable 1: the controller waits for this pod forever.
                return;
            }
            tokio::time::sleep(step).await;
            let name = pod_name(&self.env, i, generation);
            let _ = self.store.patch_status(
                &ObjRef::new("v1", "Pod", Some(NS), &name),
                pod_status(true, jiff::Timestamp::now()),
            );
            let _ = self
                .store
                .patch_status(&ds, daemonset_status(generation, n, i + 1, n));
            tokio::time::sleep(step).await;
        }
    }
}
