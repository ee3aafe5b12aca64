//! One simulated k3s cluster: the objects a real one has, and what its controllers do.
//!
//! Owns: seeding a [`Store`] with what the console watches and an operator's kubectl shows
//! (nodes with their kube-node-lease Leases, the kube-vip Lease, kube-vip's DaemonSet with
//! a pod per server whose logs tell the leader election, the cilium DaemonSet, its agents
//! and their logs, the repo's Flux objects ([`super::flux_applied`]), the `kubernetes` Service and
//! EndpointSlice), and the task that plays the cluster's controllers on it: kube-vip
//! renewing the Lease (and handing it over when the holder dies, or when the k3s server
//! under it restarts for longer than the lease lasts; releasing it on a graceful stop, so
//! the next candidate takes it at once; keeping it through a crash), the node lifecycle
//! controller (a node silent past the grace period NotReady, and every pod on it
//! unready until its kubelet posts again), the kubelets renewing
//! theirs and stopping a deleted pod after its grace period (scaled by the scenario's time
//! scale), Flux's helm- and kustomize-controller ([`super::flux`]: a reconcile request, a
//! resume, never a suspended object), the DaemonSet controller replacing a missing
//! pod and rolling a new generation (`rollout restart`, a Flux upgrade) one node at a time,
//! never past an unready pod, the events each of them records, and the scenario's faults on
//! their timeline and as they arrive live (the console's `:fault`, through
//! `demo::FaultInjector`).
//! Must not: know the homelab. Names and addresses come in through [`SimEnv`] (built from
//! the demo repo's inventory); what goes wrong comes from the scenario.
//!
//! One file (over 800 lines): the controllers act on one store in one task, in an order that
//! matters (a lease moves before the node it left goes NotReady); seeding is what they expect.

use std::net::Ipv4Addr;
use std::time::Duration;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::apiserver::EtcdMembers;
use super::kube::api::{ClusterApi, KubeApi};
use super::kube::events::{self, Involved, Source};
use super::kube::logs::Logs;
use super::kube::{micro_time, EventType, ObjRef, Origin, SimError, Store, StoreEvent};
use super::scenario::{AgentsDial, EnvState, Fault};

pub use super::flux::REQUESTED_AT;
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
    /// The scenario's time scale: the real system's periods (a pod's grace period, a new
    /// pod's start) are divided by it.
    pub time_scale: u32,
    /// What Flux applied from the environment's overlay in the repo.
    pub flux: super::flux_applied::FluxObjects,
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

fn time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The image the simulated agents run.
const CILIUM_IMAGE: &str = "quay.io/cilium/cilium:v1.18.2";
const AGENT: &str = "cilium-agent";
/// What a simulated node reports of itself: a 4-CPU, 16 GiB Debian 12 k3s server (the SSH
/// side's `free`, `uname -r` and /etc/os-release say the same).
const CPUS: &str = "4";
const MEMORY_KI: &str = "16288032Ki";
const KUBELET_VERSION: &str = "v1.34.4+k3s1";
/// How long a k3s server takes to serve again after its service (re)starts (etcd rejoins,
/// the API server comes up): while it does, the kube-vip on that node cannot renew the
/// control-plane Lease through its local API server, nor the kubelet its node Lease. Not
/// scaled by the time scale: it races the kube-vip lease, whose timings are not scaled
/// either; with the usual 15 s lease, a restart of the holder's k3s moves the VIP.
const K3S_START_S: u64 = 20;

/// What the SSH side tells the controllers: the operator's faults, and what a command on
/// a node did to that node's k3s server (`systemctl restart k3s`, from a playbook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterInput {
    Fault(Fault),
    /// Server `server` (0-based)'s k3s.service (re)started: it serves again after
    /// [`K3S_START_S`].
    K3sStarted {
        server: usize,
    },
    /// Server `server`'s k3s.service stopped: it serves nothing until it starts.
    K3sStopped {
        server: usize,
    },
    /// Server `server`'s kube-vip container crashed (no graceful stop, so no release of the
    /// Lease) and the kubelet started it again.
    VipCrashes {
        server: usize,
    },
}

/// Whether a server's k3s serves its API (and so its kube-vip and kubelet can renew).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum K3s {
    Serving,
    Starting { until: tokio::time::Instant },
    Stopped,
}

/// How long a kubelet's node Lease lasts, and how often the simulation renews it.
const NODE_LEASE_S: u64 = 40;
const NODE_LEASE_RENEW: Duration = Duration::from_secs(10);
/// kube-controller-manager's `--node-monitor-grace-period` default (50 s since v1.32; what
/// the v1.34 node lifecycle controller uses): a node whose kubelet has not renewed its Lease
/// for this long goes NotReady. Not scaled: it races the kubelets' renewals, which are not.
const NODE_MONITOR_GRACE: Duration = Duration::from_secs(50);

fn node(name: &str, addr: Ipv4Addr, ready: bool, now: jiff::Timestamp) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "kubernetes.io/hostname": name,
            "node-role.kubernetes.io/control-plane": "true",
            "node-role.kubernetes.io/etcd": "true",
            "node-role.kubernetes.io/master": "true"}},
        "spec": {"providerID": format!("k3s://{name}")},
        "status": node_status(name, addr, ready, now),
    })
}

fn condition(type_: &str, ok: bool, reason: &str, message: &str, now: jiff::Timestamp) -> Value {
    json!({"type": type_, "status": if ok { "False" } else { "Unknown" }, "reason": reason,
        "message": message, "lastHeartbeatTime": time(now), "lastTransitionTime": time(now)})
}

fn node_status(name: &str, addr: Ipv4Addr, ready: bool, now: jiff::Timestamp) -> Value {
    let resources = json!({"cpu": CPUS, "ephemeral-storage": "101639152Ki",
        "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": MEMORY_KI, "pods": "110"});
    let gone = "Kubelet stopped posting node status.";
    let pressure = |t: &str, reason: &str, msg: &str| {
        if ready {
            condition(t, true, reason, msg, now)
        } else {
            condition(t, false, "NodeStatusUnknown", gone, now)
        }
    };
    json!({
        "addresses": [{"type": "InternalIP", "address": addr.to_string()},
            {"type": "Hostname", "address": name}],
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            pressure("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            pressure("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            pressure("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            {
                "type": "Ready",
                "status": if ready { "True" } else { "Unknown" },
                "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" },
                "message": if ready { "kubelet is posting ready status" } else { gone },
                "lastHeartbeatTime": time(now),
                "lastTransitionTime": time(now),
            }],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
            "osImage": "Debian GNU/Linux 12 (bookworm)", "kernelVersion": "6.1.0-28-amd64",
            "containerRuntimeVersion": "containerd://2.1.5-k3s1",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
            "machineID": "", "systemUUID": "", "bootID": ""},
    })
}

/// The kubelet's Lease in kube-node-lease (what `describe node` shows, and what the node
/// controller judges a node by).
fn node_lease(name: &str, node_uid: &str, now: jiff::Timestamp) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": NODE_LEASE_S,
            "renewTime": micro_time(now)}
    })
}

fn agent_env(host: &str, port: u16) -> Value {
    json!([
        {"name": "KUBERNETES_SERVICE_HOST", "value": host},
        {"name": "KUBERNETES_SERVICE_PORT", "value": port.to_string()},
    ])
}

/// The agent container as the chart declares it (its readiness probe is what the stuck
/// rollout's pod fails).
fn agent_container(host: &str, port: u16) -> Value {
    json!({
        "name": AGENT, "image": CILIUM_IMAGE, "imagePullPolicy": "IfNotPresent",
        "command": ["cilium-agent"], "args": ["--config-dir=/tmp/cilium/config-map"],
        "env": agent_env(host, port),
        "readinessProbe": {"httpGet": {"host": "127.0.0.1", "path": "/healthz", "port": 9879,
            "scheme": "HTTP"}, "periodSeconds": 30, "timeoutSeconds": 5,
            "successThreshold": 1, "failureThreshold": 3},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    })
}

/// What every agent pod's spec shares with the DaemonSet's template.
fn agent_pod_spec(host: &str, port: u16) -> Value {
    json!({
        "containers": [agent_container(host, port)],
        "hostNetwork": true,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "cilium",
        "priorityClassName": "system-node-critical",
        // The chart's value: the agent exits at once.
        "terminationGracePeriodSeconds": 1,
        "tolerations": [{"operator": "Exists"}],
    })
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
                "spec": agent_pod_spec(host, env.api_port),
            }
        }
    })
}

fn ds_ref() -> ObjRef {
    ObjRef::new("apps/v1", "DaemonSet", Some(NS), "cilium")
}

fn pod_ref(name: &str) -> ObjRef {
    ObjRef::new("v1", "Pod", Some(NS), name)
}

/// The DaemonSet's generation and uid, as the cluster has them. Its pods carry that uid as
/// their controller's (a client that checks ownership, like kube-wait, ignores pods that
/// name another).
async fn ds_meta<C: ClusterApi>(api: &C) -> (u64, String) {
    ds_meta_of(api, &ds_ref()).await
}

/// [`ds_meta`] of the DaemonSet `r`.
async fn ds_meta_of<C: ClusterApi>(api: &C, r: &ObjRef) -> (u64, String) {
    let ds = api.fetch(r).await.ok().flatten();
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

/// A container ID as containerd reports it (64 hex digits).
fn container_id() -> String {
    let mut b = [0u8; 32];
    rand::fill(&mut b);
    format!("containerd://{}", data_encoding::HEXLOWER.encode(&b))
}

/// One agent pod of `generation` on `server`, named `name`.
#[allow(clippy::too_many_arguments)]
fn pod(
    env: &SimEnv,
    server: usize,
    name: &str,
    generation: u64,
    owner_uid: &str,
    host: &str,
    ready: bool,
    now: jiff::Timestamp,
) -> Value {
    let (node, addr) = &env.servers[server];
    let mut spec = agent_pod_spec(host, env.api_port);
    spec["nodeName"] = json!(node);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "generateName": "cilium-",
            "labels": {"k8s-app": "cilium", "pod-template-generation": generation.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium",
                "uid": owner_uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
        "status": pod_status(*addr, ready, now, now, &container_id()),
    })
}

/// A running agent pod's status: its container running since `started`, ready or not.
fn pod_status(
    addr: Ipv4Addr,
    ready: bool,
    started: jiff::Timestamp,
    now: jiff::Timestamp,
    container_id: &str,
) -> Value {
    container_pod_status(
        addr,
        AGENT,
        CILIUM_IMAGE,
        ready,
        0,
        started,
        now,
        container_id,
        json!({}),
    )
}

/// A running one-container pod's status: `container` of `image` running since `started`,
/// restarted `restarts` times (`last_state`: how the last instance ended, `{}` if none),
/// ready or not.
#[allow(clippy::too_many_arguments)]
fn container_pod_status(
    addr: Ipv4Addr,
    container: &str,
    image: &str,
    ready: bool,
    restarts: u64,
    started: jiff::Timestamp,
    now: jiff::Timestamp,
    container_id: &str,
    last_state: Value,
) -> Value {
    let cond = |t: &str, ok: bool, at: jiff::Timestamp| {
        let mut c = json!({"type": t, "status": if ok { "True" } else { "False" },
            "lastTransitionTime": time(at), "lastProbeTime": null});
        if !ok {
            c["reason"] = json!("ContainersNotReady");
            c["message"] = json!(format!("containers with unready status: [{container}]"));
        }
        c
    };
    let ip = addr.to_string();
    json!({
        "phase": "Running",
        "conditions": [
            cond("PodReadyToStartContainers", true, started),
            cond("Initialized", true, started),
            cond("Ready", ready, now),
            cond("ContainersReady", ready, now),
            cond("PodScheduled", true, started),
        ],
        "hostIP": ip, "hostIPs": [{"ip": ip}], "podIP": ip, "podIPs": [{"ip": ip}],
        "qosClass": "BestEffort",
        "containerStatuses": [{"name": container, "ready": ready, "restartCount": restarts,
            "image": image, "imageID": format!("{image}@sha256:{}", "0".repeat(64)),
            "containerID": container_id, "started": true,
            "state": {"running": {"startedAt": time(started)}}, "lastState": last_state}],
        "startTime": time(started),
    })
}

/// One cilium-agent log line in its format (Go's slog, logfmt: `time=... level=info
/// msg="..." key=value`).
fn agent_line(level: &str, msg: &str, attrs: &str) -> String {
    let t = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
    let msg = if msg.contains(' ') {
        format!("\"{msg}\"")
    } else {
        msg.to_string()
    };
    if attrs.is_empty() {
        format!("time={t} level={level} msg={msg}")
    } else {
        format!("time={t} level={level} msg={msg} {attrs}")
    }
}

/// What an agent logs as it starts: the API server it dials is the line an operator
/// looks for.
fn agent_starts(logs: Option<&Logs>, pod: &str, host: &str, port: u16) {
    let Some(logs) = logs else {
        return;
    };
    let k8s = "module=agent.infra.k8s-client";
    for (msg, attrs) in [
        ("Starting hive", String::new()),
        (
            "Establishing connection to apiserver",
            format!("{k8s} ipAddr=https://{host}:{port}"),
        ),
        ("Connected to apiserver", k8s.to_string()),
        (
            "Started gops server",
            "module=agent.infra.gops address=127.0.0.1:9890".to_string(),
        ),
    ] {
        logs.append(NS, pod, AGENT, agent_line("info", msg, &attrs));
    }
}

/// The name of the agent pod the controller creates for `server` in `generation`: stable
/// and readable for the first one, a counter after (a pod deleted and recreated).
fn pod_name(server: usize, generation: u64, nth: u64) -> String {
    let n = server + 1;
    if nth == 0 {
        format!("cilium-g{generation}-n{n}")
    } else {
        format!("cilium-g{generation}-n{n}-{nth}")
    }
}

/// kube-vip as a k3s HA install runs it: the DaemonSet `kube-vip manifest daemonset`
/// generates, one pod per control-plane node, selected by its name label.
const VIP_DS: &str = "kube-vip-ds";
const VIP_LABEL: &str = "app.kubernetes.io/name";
const VIP: &str = "kube-vip";
const VIP_VERSION: &str = "v0.8.9";
const VIP_IMAGE: &str = "ghcr.io/kube-vip/kube-vip:v0.8.9";

fn vip_ds_ref() -> ObjRef {
    ObjRef::new("apps/v1", "DaemonSet", Some(NS), VIP_DS)
}

/// The kube-vip container as the generated manifest declares it (control plane only, ARP,
/// leader election on the inventory's Lease).
fn vip_container(env: &SimEnv, lease_duration_s: u64) -> Value {
    let var = |n: &str, v: String| json!({"name": n, "value": v});
    json!({
        "name": VIP, "image": VIP_IMAGE, "imagePullPolicy": "IfNotPresent",
        "args": ["manager"],
        "env": [
            var("vip_arp", "true".into()),
            var("port", env.api_port.to_string()),
            var("vip_address", env.vip.to_string()),
            var("cp_enable", "true".into()),
            var("cp_namespace", NS.into()),
            var("vip_leaderelection", "true".into()),
            var("vip_leasename", env.lease_name.clone()),
            var("vip_leaseduration", lease_duration_s.to_string()),
            var("vip_renewdeadline", (lease_duration_s * 2 / 3).max(1).to_string()),
            var("vip_retryperiod", (lease_duration_s / 5).max(1).to_string()),
        ],
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    })
}

fn vip_pod_spec(env: &SimEnv, lease_duration_s: u64) -> Value {
    json!({
        "containers": [vip_container(env, lease_duration_s)],
        "hostNetwork": true,
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "kube-vip",
        "terminationGracePeriodSeconds": 30,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane",
                "operator": "Exists"}]}]}}},
        "tolerations": [{"effect": "NoSchedule", "operator": "Exists"},
            {"effect": "NoExecute", "operator": "Exists"}],
    })
}

fn vip_daemonset(env: &SimEnv, lease_duration_s: u64) -> Value {
    let labels = json!({VIP_LABEL: VIP_DS, "app.kubernetes.io/version": VIP_VERSION});
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": VIP_DS, "namespace": NS, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {VIP_LABEL: VIP_DS}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels},
                "spec": vip_pod_spec(env, lease_duration_s)},
        }
    })
}

/// The kube-vip pod on `server` named `name`, of the DaemonSet's `generation`.
#[allow(clippy::too_many_arguments)]
fn vip_pod(
    env: &SimEnv,
    server: usize,
    name: &str,
    generation: u64,
    owner_uid: &str,
    lease_duration_s: u64,
    ready: bool,
    now: jiff::Timestamp,
) -> Value {
    let (node, addr) = &env.servers[server];
    let mut spec = vip_pod_spec(env, lease_duration_s);
    spec["nodeName"] = json!(node);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "generateName": format!("{VIP_DS}-"),
            "labels": {VIP_LABEL: VIP_DS, "app.kubernetes.io/version": VIP_VERSION,
                "pod-template-generation": generation.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": VIP_DS,
                "uid": owner_uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
        "status": container_pod_status(*addr, VIP, VIP_IMAGE, ready, 0, now, now, &container_id(), json!({})),
    })
}

/// The name of the kube-vip pod the controller creates for `server`: stable for the first,
/// a counter after.
fn vip_pod_name(server: usize, nth: u64) -> String {
    let n = server + 1;
    if nth == 0 {
        format!("{VIP_DS}-n{n}")
    } else {
        format!("{VIP_DS}-n{n}-{nth}")
    }
}

/// One kube-vip line of its own (logrus' text format: `time="..." level=info msg="..."`).
fn vip_line(level: &str, msg: &str) -> String {
    let t = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
    format!(
        "time=\"{t}\" level={level} msg=\"{}\"",
        msg.replace('"', "\\\"")
    )
}

/// One line of client-go's leader election inside kube-vip (klog's header: severity,
/// MMDD, time, thread, file:line).
fn klog_line(severity: char, at: &str, msg: &str) -> String {
    let t = jiff::Timestamp::now().strftime("%m%d %H:%M:%S%.6f");
    format!("{severity}{t}       1 {at}] {msg}")
}

fn vip_log(logs: Option<&Logs>, pod: &str, lines: Vec<String>) {
    if let Some(logs) = logs {
        for l in lines {
            logs.append(NS, pod, VIP, l);
        }
    }
}

/// What kube-vip logs as it starts on `node`, up to its first try for the Lease.
fn vip_starts(logs: Option<&Logs>, pod: &str, node: &str, lease: &str) {
    vip_log(
        logs,
        pod,
        vec![
            vip_line("info", &format!("Starting kube-vip.io [{VIP_VERSION}]")),
            vip_line(
                "info",
                &format!("namespace [{NS}], Mode: [ARP], Features(s): Control Plane:[true], Services:[false]"),
            ),
            vip_line(
                "info",
                &format!("Beginning cluster membership, namespace [{NS}], lock name [{lease}], id [{node}]"),
            ),
            klog_line(
                'I',
                "leaderelection.go:257",
                &format!("attempting to acquire leader lease {NS}/{lease}..."),
            ),
        ],
    );
}

/// The kube-vip that took the Lease: client-go says so, then kube-vip's new-leader line.
fn vip_acquires(logs: Option<&Logs>, pod: &str, node: &str, lease: &str) {
    vip_log(
        logs,
        pod,
        vec![
            klog_line(
                'I',
                "leaderelection.go:271",
                &format!("successfully acquired lease {NS}/{lease}"),
            ),
            vip_line(
                "info",
                &format!("Node [{node}] is assuming leadership of the cluster"),
            ),
        ],
    );
}

/// A follower's kube-vip seeing `leader` take the Lease.
fn vip_sees_leader(logs: Option<&Logs>, pod: &str, leader: &str) {
    vip_log(
        logs,
        pod,
        vec![vip_line(
            "info",
            &format!("Node [{leader}] is assuming leadership of the cluster"),
        )],
    );
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
    // Seeded at generation 1, which helm-controller has observed.
    let mut status = json!({"observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True",
        "reason": "UpgradeSucceeded", "message": "Helm upgrade succeeded",
        "observedGeneration": 1, "lastTransitionTime": time(jiff::Timestamp::now())}]});
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

/// The `kubernetes` Service in `default` as k3s has it (its first service address).
fn kubernetes_service() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.43.0.1", "clusterIPs": ["10.43.0.1"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
        "status": {"loadBalancer": {}}
    })
}

/// Its EndpointSlice: every live server's address, on the API port (the API server's
/// endpoint reconciler keeps one endpoint per live server).
fn kubernetes_endpoints(env: &SimEnv, dead: &[bool]) -> Value {
    let endpoints: Vec<Value> = env
        .servers
        .iter()
        .enumerate()
        .filter(|(i, _)| !dead.get(*i).copied().unwrap_or(false))
        .map(|(_, (_, addr))| json!({"addresses": [addr.to_string()], "conditions": {"ready": true}}))
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "https", "port": env.api_port, "protocol": "TCP"}],
    })
}

/// Where the simulated controllers write: the cluster's API (the built-in [`Store`], or a
/// real kube-apiserver through [`KubeApi`]), and what only the built-in server carries.
#[derive(Clone)]
pub struct Target<C> {
    pub api: C,
    /// The containers' log lines. The built-in server serves them; a real kube-apiserver
    /// asks the node's kubelet for them, and the simulation runs none: `None` there.
    pub logs: Option<Logs>,
    /// Whether the simulation keeps the `kubernetes` Service and its EndpointSlice (the
    /// built-in server), or the API server does (a real one reconciles them itself, with
    /// its own address, and would undo the simulation's).
    pub service_endpoints: bool,
    /// Where etcd's quorum is modelled: the built-in server's store (its `/readyz/etcd`
    /// and client writes fail without it). A real kube-apiserver runs over a real etcd,
    /// which keeps or loses its quorum itself: `None` there.
    pub quorum: Option<Store>,
    /// `demo --apiserver`: the environment's real etcd, a member per server. A server that
    /// dies takes its member down (its k3s.service's stops and starts are the demo's
    /// `watch_k3s`'s), and etcd itself, not the simulation, then decides whether a write
    /// commits.
    pub members: Option<EtcdMembers>,
}

impl std::fmt::Debug for Target<Store> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("api", &"built-in").finish()
    }
}

impl Target<Store> {
    /// The built-in API server's store.
    pub fn builtin(store: Store) -> Target<Store> {
        Target {
            logs: Some(store.logs().clone()),
            quorum: Some(store.clone()),
            api: store,
            service_endpoints: true,
            members: None,
        }
    }
}

impl Target<KubeApi> {
    /// A real kube-apiserver, as `client` reaches it.
    pub fn real(client: kube::Client) -> Target<KubeApi> {
        Target {
            api: KubeApi::new(client),
            logs: None,
            service_endpoints: false,
            quorum: None,
            members: None,
        }
    }
}

/// What the controllers last made of the cluster (the kube-vip Lease's holder, each node's
/// readiness), for whoever must answer at once without a request (the console's `:fault`).
#[derive(Debug, Clone, Default)]
pub struct View {
    inner: Arc<Mutex<ViewState>>,
}

#[derive(Debug, Default)]
struct ViewState {
    holder: Option<String>,
    ready: BTreeMap<String, bool>,
    /// The servers that died (`holder-dies`): their k3s, etcd member included, is gone.
    dead: std::collections::BTreeSet<String>,
    /// The servers whose k3s.service is stopped: their etcd member with it (k3s embeds it).
    k3s_stopped: std::collections::BTreeSet<String>,
}

impl View {
    fn lock(&self) -> std::sync::MutexGuard<'_, ViewState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kube-vip Lease's holder.
    pub fn lease_holder(&self) -> Option<String> {
        self.lock().holder.clone()
    }

    /// Whether node `name` is Ready (`None`: no such node).
    pub fn node_ready(&self, name: &str) -> Option<bool> {
        self.lock().ready.get(name).copied()
    }

    /// Whether server `name` died (its etcd member with it).
    pub fn dead(&self, name: &str) -> bool {
        self.lock().dead.contains(name)
    }

    /// Whether server `name`'s etcd member is down: the server died or its k3s is stopped.
    pub fn member_down(&self, name: &str) -> bool {
        let v = self.lock();
        v.dead.contains(name) || v.k3s_stopped.contains(name)
    }

    fn set_dead(&self, name: &str) {
        self.lock().dead.insert(name.to_string());
    }

    fn set_k3s_stopped(&self, name: &str, stopped: bool) {
        let mut v = self.lock();
        if stopped {
            v.k3s_stopped.insert(name.to_string());
        } else {
            v.k3s_stopped.remove(name);
        }
    }

    fn set_holder(&self, holder: &str) {
        self.lock().holder = Some(holder.to_string());
    }

    fn clear_holder(&self) {
        self.lock().holder = None;
    }

    fn set_ready(&self, node: &str, ready: bool) {
        self.lock().ready.insert(node.to_string(), ready);
    }
}

/// Put the cluster of `env` into `t` as `state` says; `view` learns what was put.
pub async fn seed<C: ClusterApi>(
    t: &Target<C>,
    env: &SimEnv,
    state: &EnvState,
    view: &View,
) -> Result<(), SimError> {
    let api = &t.api;
    let now = jiff::Timestamp::now();
    for (name, addr) in &env.servers {
        let n = api.apply(node(name, *addr, true, now)).await?;
        let uid = n
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        api.apply(node_lease(name, uid, now)).await?;
        view.set_ready(name, true);
    }
    let holder_ix = state
        .lease_holder
        .saturating_sub(1)
        .min(env.servers.len().saturating_sub(1));
    if let Some((holder, _)) = env.servers.get(holder_ix) {
        api.apply(lease(
            &env.lease_name,
            holder,
            state.lease_duration_s,
            0,
            now,
        ))
        .await?;
        view.set_holder(holder);
    }
    if t.service_endpoints {
        api.apply(kubernetes_service()).await?;
        api.apply(kubernetes_endpoints(env, &[])).await?;
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
    api.apply(daemonset(env, &template_host)).await?;
    let ds = ds_ref();
    let (generation, owner) = ds_meta(api).await;
    for (i, h) in hosts.iter().enumerate() {
        let name = pod_name(i, generation, 0);
        api.apply(pod(env, i, &name, generation, &owner, h, true, now))
            .await?;
        agent_starts(t.logs.as_ref(), &name, h, env.api_port);
        agent_ready(t.logs.as_ref(), &name);
    }
    api.patch_status(
        &ds,
        super::daemonset::status(
            generation,
            env.servers.len(),
            env.servers.len(),
            env.servers.len(),
        ),
    )
    .await?;
    seed_vip(t, env, state, holder_ix, now).await?;
    super::flux_applied::seed(api, &env.flux, helmrelease(None), &template_host).await?;
    Ok(())
}

/// kube-vip's DaemonSet and its pod on every server, each having logged its start and the
/// election that made `holder_ix` the leader.
async fn seed_vip<C: ClusterApi>(
    t: &Target<C>,
    env: &SimEnv,
    state: &EnvState,
    holder_ix: usize,
    now: jiff::Timestamp,
) -> Result<(), SimError> {
    let api = &t.api;
    let logs = t.logs.as_ref();
    api.apply(vip_daemonset(env, state.lease_duration_s))
        .await?;
    let (generation, owner) = ds_meta_of(api, &vip_ds_ref()).await;
    let holder = env.servers.get(holder_ix).map(|s| s.0.as_str());
    for (i, (node, _)) in env.servers.iter().enumerate() {
        let name = vip_pod_name(i, 0);
        api.apply(vip_pod(
            env,
            i,
            &name,
            generation,
            &owner,
            state.lease_duration_s,
            true,
            now,
        ))
        .await?;
        vip_starts(logs, &name, node, &env.lease_name);
        match holder {
            Some(h) if h == node => vip_acquires(logs, &name, node, &env.lease_name),
            Some(h) => vip_sees_leader(logs, &name, h),
            None => {}
        }
    }
    let n = env.servers.len();
    api.patch_status(&vip_ds_ref(), super::daemonset::status(generation, n, n, n))
        .await?;
    Ok(())
}

/// The holder of `env`'s kube-vip Lease as the cluster has it now.
pub async fn lease_holder<C: ClusterApi>(api: &C, env: &SimEnv) -> Option<String> {
    let lease = ObjRef::new("coordination.k8s.io/v1", "Lease", Some(NS), &env.lease_name);
    api.fetch(&lease)
        .await
        .ok()
        .flatten()?
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        // A released Lease has an empty holder (client-go's release): nobody holds it.
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// Whether the Node `name` is Ready as the cluster has it now (`None`: no such node).
pub async fn node_ready<C: ClusterApi>(api: &C, name: &str) -> Option<bool> {
    let node = api
        .fetch(&ObjRef::new("v1", "Node", None, name))
        .await
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

fn agent_ready(logs: Option<&Logs>, pod: &str) {
    if let Some(logs) = logs {
        logs.append(
            NS,
            pod,
            AGENT,
            agent_line(
                "info",
                "Daemon initialization completed",
                "module=agent.controlplane.daemon",
            ),
        );
    }
}

fn agent_stops(logs: Option<&Logs>, pod: &str) {
    if let Some(logs) = logs {
        logs.append(NS, pod, AGENT, agent_line("info", "Stopping hive", ""));
    }
}

/// One change the controllers react to, from either kind of API server.
#[derive(Debug, Clone)]
pub struct Change {
    pub kind: &'static str,
    pub event: EventType,
    pub name: String,
    /// The object after the change (for a deletion: its last state).
    pub object: Value,
    /// The object before the change, when it was seen before.
    pub prev: Option<Value>,
    /// Written by a client (an operator's kubectl, the console), not by the simulation.
    /// The built-in server knows; a real one's watch does not say, so there every change
    /// counts as a client's and the controllers tell their own writes apart by content.
    pub by_client: bool,
}

/// What the controllers' change feed yields.
#[derive(Debug)]
pub enum Feed {
    Change(Change),
    /// Changes were missed: look at the whole state instead.
    Missed,
    Closed,
}

/// The kinds whose changes the controllers react to, and the namespace they watch them in
/// on a real API server (`None`: every namespace; Flux's Kustomizations live in theirs).
const WATCHED: [(&str, &str, Option<&str>); 4] = [
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease", Some(NS)),
    ("v1", "Pod", Some(NS)),
    ("apps/v1", "DaemonSet", Some(NS)),
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", None),
];

/// Where the controllers learn of changes: the built-in store's own feed, or kube watches on
/// a real API server.
pub enum Changes {
    Store(broadcast::Receiver<Arc<StoreEvent>>),
    Kube(mpsc::UnboundedReceiver<Feed>),
}

impl Changes {
    /// The built-in store's feed.
    pub fn of_store(store: &Store) -> Changes {
        Changes::Store(store.subscribe())
    }

    /// Watches of the watched kinds on a real API server, until `cancel`.
    pub fn watch(client: &kube::Client, cancel: &CancellationToken) -> Changes {
        let (tx, rx) = mpsc::unbounded_channel();
        for (api_version, kind, ns) in WATCHED {
            let Some(res) = super::kube::resources::by_kind(api_version, kind) else {
                continue;
            };
            tokio::spawn(watch_kind(
                client.clone(),
                res,
                ns,
                tx.clone(),
                cancel.clone(),
            ));
        }
        Changes::Kube(rx)
    }

    async fn next(&mut self) -> Feed {
        match self {
            Changes::Store(rx) => loop {
                match rx.recv().await {
                    Ok(e) => {
                        let kind = e.resource.kind;
                        if !WATCHED.iter().any(|(_, k, _)| *k == kind) {
                            continue;
                        }
                        return Feed::Change(Change {
                            kind,
                            event: e.event,
                            name: e.name.clone(),
                            object: (*e.object).clone(),
                            prev: e.prev.as_ref().map(|p| (**p).clone()),
                            by_client: e.origin == Origin::Api,
                        });
                    }
                    Err(RecvError::Lagged(_)) => return Feed::Missed,
                    Err(RecvError::Closed) => return Feed::Closed,
                }
            },
            Changes::Kube(rx) => rx.recv().await.unwrap_or(Feed::Closed),
        }
    }
}

/// One kind's watch on a real API server, turned into [`Change`]s (with the object as last
/// seen, for `prev`). A re-list after a broken watch says [`Feed::Missed`].
async fn watch_kind(
    client: kube::Client,
    res: &'static super::kube::resources::ResourceType,
    ns: Option<&str>,
    tx: mpsc::UnboundedSender<Feed>,
    cancel: CancellationToken,
) {
    use kube::runtime::watcher::{self, Event};
    use kube::runtime::WatchStreamExt;
    let ar = super::kube::api::api_resource(res);
    let api: kube::Api<kube::api::DynamicObject> = match ns {
        Some(ns) => kube::Api::namespaced_with(client, ns, &ar),
        None => kube::Api::all_with(client, &ar),
    };
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut seen: BTreeMap<String, Value> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, Value>> = None;
    let mut first = true;
    let value = |o: &kube::api::DynamicObject| serde_json::to_value(o).unwrap_or(Value::Null);
    // Keyed by namespace and name: a watch over every namespace sees equal names.
    let key = |o: &kube::api::DynamicObject| {
        format!(
            "{}/{}",
            o.metadata.namespace.as_deref().unwrap_or(""),
            o.metadata.name.as_deref().unwrap_or("")
        )
    };
    loop {
        let ev = tokio::select! {
            _ = cancel.cancelled() => return,
            ev = stream.next() => ev,
        };
        let feed = match ev {
            None => return,
            Some(Err(e)) => {
                tracing::warn!("simulated cluster: watching {}: {e}", res.plural);
                continue;
            }
            Some(Ok(Event::Apply(o))) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                let object = value(&o);
                let prev = seen.insert(key(&o), object.clone());
                Feed::Change(Change {
                    kind: res.kind,
                    event: if prev.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    },
                    name,
                    object,
                    prev,
                    by_client: true,
                })
            }
            Some(Ok(Event::Delete(o))) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                let prev = seen.remove(&key(&o));
                Feed::Change(Change {
                    kind: res.kind,
                    event: EventType::Deleted,
                    name,
                    object: value(&o),
                    prev,
                    by_client: true,
                })
            }
            Some(Ok(Event::Init)) => {
                listing = Some(BTreeMap::new());
                continue;
            }
            Some(Ok(Event::InitApply(o))) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(key(&o), value(&o));
                }
                continue;
            }
            Some(Ok(Event::InitDone)) => {
                let now = listing.take().unwrap_or_default();
                let missed = !first && now != seen;
                seen = now;
                first = false;
                if !missed {
                    continue;
                }
                Feed::Missed
            }
        };
        if tx.send(feed).is_err() {
            return;
        }
    }
}

/// The controllers of one simulated cluster, until `cancel`: the scenario's timeline
/// `faults`, every fault that arrives on `live` as it arrives, and what clients change
/// (`changes`). They write through `t`; `view` follows the Lease holder and the nodes.
#[allow(clippy::too_many_arguments)]
pub async fn run<C: ClusterApi + Clone + 'static>(
    t: Target<C>,
    mut changes: Changes,
    view: View,
    env: SimEnv,
    state: EnvState,
    faults: Vec<(Duration, Fault)>,
    live: mpsc::UnboundedReceiver<ClusterInput>,
    cancel: CancellationToken,
) {
    let mut c = Controllers::new(t, view, env, state, cancel.clone()).await;
    let mut renew = tokio::time::interval(Duration::from_secs(c.state.lease_renew_every_s.max(1)));
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut kubelets = tokio::time::interval(NODE_LEASE_RENEW);
    kubelets.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = tokio::time::Instant::now();
    let mut faults = faults.into_iter().peekable();
    // `None` once every sender is gone: the branch then never fires again.
    let mut live = Some(live);
    loop {
        let next_fault = faults.peek().map(|(at, _)| start + *at);
        tokio::select! {
            _ = cancel.cancelled() => return,
            // Without etcd's quorum nothing is committed: kube-vip can neither renew nor
            // take its Lease, no kubelet renews its node Lease and no controller posts a
            // status (the built-in server's store refuses; over a real etcd the
            // controllers try, and etcd refuses).
            _ = renew.tick(), if c.has_quorum() => c.renew().await,
            _ = kubelets.tick(), if c.has_quorum() => c.renew_node_leases().await,
            f = async {
                match live.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => match f {
                Some(ClusterInput::Fault(f)) => c.fault(&f).await,
                Some(ClusterInput::K3sStarted { server }) => c.k3s_starts(server),
                Some(ClusterInput::K3sStopped { server }) => c.k3s_stops(server),
                Some(ClusterInput::VipCrashes { server }) if c.has_quorum() => c.vip_crashes(server).await,
                Some(ClusterInput::VipCrashes { .. }) => {}
                None => live = None,
            },
            _ = async {
                match next_fault {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some((_, f)) = faults.next() {
                    c.fault(&f).await;
                }
            }
            feed = changes.next() => match feed {
                Feed::Change(_) | Feed::Missed if !c.has_quorum() => {}
                Feed::Change(e) => c.react(&e).await,
                Feed::Missed => c.ensure_pods().await,
                Feed::Closed => return,
            },
        }
    }
}

struct Controllers<C> {
    t: Target<C>,
    view: View,
    env: SimEnv,
    state: EnvState,
    holder: usize,
    dead: Vec<bool>,
    /// Each server's k3s: a restarting one serves nothing for a while.
    k3s: Vec<K3s>,
    transitions: u64,
    /// When the holder last renewed (for the handover after it dies).
    last_renew: jiff::Timestamp,
    agents_dial: AgentsDial,
    /// Pods created per (node, generation) so far: a recreated pod gets the next name.
    created: BTreeMap<(usize, u64), u64>,
    /// The DaemonSet generation last rolled: a change to it is the controller's own (Flux's
    /// upgrade, rolled at once), not a new one to roll.
    rolled: u64,
    /// kube-vip pods created per node so far (the seeded one counts).
    vip_created: Vec<u64>,
    /// The kube-vip DaemonSet generation last rolled.
    vip_rolled: u64,
    /// When each server's kubelet last renewed its node Lease (what the node lifecycle
    /// controller judges a node by).
    node_renewed: Vec<tokio::time::Instant>,
    /// The nodes the node lifecycle controller has marked NotReady (their pods unready).
    not_ready: Vec<bool>,
    /// The holder's kube-vip stopped gracefully and released the Lease (client-go's
    /// ReleaseOnCancel, which kube-vip sets): nobody holds it until a candidate retries.
    released: bool,
    /// kube-vip pods whose container has been told to stop (each releases at most once).
    vip_stopped: std::collections::BTreeSet<String>,
    /// The cilium release's Helm revision (the install was 1; each upgrade adds one).
    helm_revision: u64,
    /// Each Flux object's spec (without `suspend`) as last reconciled, by `Kind/ns/name`:
    /// a due reconcile of another spec is one the simulation cannot play.
    flux_specs: BTreeMap<String, Value>,
    cancel: CancellationToken,
}

impl<C: ClusterApi + Clone + 'static> Controllers<C> {
    async fn new(
        t: Target<C>,
        view: View,
        env: SimEnv,
        state: EnvState,
        cancel: CancellationToken,
    ) -> Controllers<C> {
        let n = env.servers.len();
        let (rolled, _) = ds_meta(&t.api).await;
        let (vip_rolled, _) = ds_meta_of(&t.api, &vip_ds_ref()).await;
        let mut flux_specs = BTreeMap::new();
        for (api_version, kind) in FLUX_KINDS {
            for o in t
                .api
                .objects(api_version, kind, None)
                .await
                .unwrap_or_default()
            {
                flux_specs.insert(flux_key(&o), super::flux::spec_but_suspend(&o));
            }
        }
        Controllers {
            flux_specs,
            node_renewed: vec![tokio::time::Instant::now(); n],
            not_ready: vec![false; n],
            released: false,
            vip_stopped: std::collections::BTreeSet::new(),
            helm_revision: 1,
            vip_created: vec![1; n],
            vip_rolled,
            holder: state
                .lease_holder
                .saturating_sub(1)
                .min(n.saturating_sub(1)),
            dead: vec![false; n],
            k3s: vec![K3s::Serving; n],
            transitions: 0,
            last_renew: jiff::Timestamp::now(),
            agents_dial: state.agents_dial,
            created: (0..n).map(|i| ((i, 1), 1)).collect(),
            rolled,
            t,
            view,
            env,
            state,
            cancel,
        }
    }

    /// Whether a majority of the servers' etcd members lives: only then does etcd commit,
    /// and only then may a controller write. Over a real etcd (`demo --apiserver`) etcd
    /// itself decides: the controllers write, and without quorum the write fails there.
    fn has_quorum(&self) -> bool {
        if self.t.members.is_some() {
            return true;
        }
        let n = self.dead.len();
        n == 0 || (n - self.members_down().len()) > n / 2
    }

    /// The servers whose etcd member is down: dead, or their k3s stopped (k3s embeds it).
    fn members_down(&self) -> Vec<&str> {
        self.env
            .servers
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                self.dead.get(*i).copied().unwrap_or(false)
                    || self.k3s.get(*i) == Some(&K3s::Stopped)
            })
            .map(|(_, (name, _))| name.as_str())
            .collect()
    }

    fn logs(&self) -> Option<&Logs> {
        self.t.logs.as_ref()
    }

    async fn record(
        &self,
        r: &ObjRef,
        container: bool,
        type_: &str,
        reason: &str,
        msg: &str,
        src: Source<'_>,
    ) {
        let c = container.then_some(AGENT);
        self.record_in(r, c, type_, reason, msg, src).await;
    }

    /// An event about `r`, or about its `container`.
    async fn record_in(
        &self,
        r: &ObjRef,
        container: Option<&str>,
        type_: &str,
        reason: &str,
        msg: &str,
        src: Source<'_>,
    ) {
        let Some(mut inv) = Involved::of(&self.t.api, r).await else {
            return;
        };
        if let Some(c) = container {
            inv = inv.container(c);
        }
        if let Err(e) = events::record(&self.t.api, &inv, type_, reason, msg, src).await {
            tracing::warn!("simulated cluster: recording {reason}: {e}");
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

    /// A period of the real system, compressed by the scenario's time scale.
    fn scaled(&self, d: Duration) -> Duration {
        d / self.env.time_scale.max(1)
    }

    /// What the controllers do about a change: a client's reconcile request (Flux), a
    /// client's pod delete (the kubelet stops it, then it goes), a pod gone (the DaemonSet
    /// controller replaces it), a client's change of the pod template (`rollout restart`).
    async fn react(&mut self, e: &Change) {
        match (e.kind, e.event, e.by_client) {
            // Flux's controllers act on what the object asks now (a request not yet handled,
            // a generation not yet observed, never while suspended), read afresh: a change
            // seen late, or their own status write coming back from a real server's watch,
            // asks nothing.
            ("HelmRelease", EventType::Modified, _) => self.flux_release(&e.object).await,
            ("Kustomization", EventType::Modified, _) => {
                self.flux_kustomization(&e.object).await;
            }
            ("Pod", EventType::Modified, true) => {
                let marked = e.object.pointer("/metadata/deletionTimestamp").is_some();
                let was = e
                    .prev
                    .as_ref()
                    .is_some_and(|p| p.pointer("/metadata/deletionTimestamp").is_some());
                if marked && !was {
                    self.kubelet_stops(&e.object).await;
                }
            }
            ("Pod", EventType::Deleted, _) => {
                // Deleted at once (`--force --grace-period=0`): the kubelet still stops the
                // container with a short grace, and kube-vip's stop is as graceful.
                if e.object
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(VIP_LABEL))
                    == Some(&json!(VIP_DS))
                {
                    let node = e
                        .object
                        .pointer("/spec/nodeName")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    self.vip_terminates(&e.name, &node).await;
                }
                self.ensure_pods().await
            }
            ("DaemonSet", EventType::Modified, true) if e.name == "cilium" => {
                let generation =
                    |o: &Value| o.pointer("/metadata/generation").and_then(Value::as_u64);
                let now = generation(&e.object);
                let new = now.is_some_and(|g| g > self.rolled);
                if new && now != e.prev.as_ref().and_then(generation) {
                    self.roll().await;
                }
            }
            ("DaemonSet", EventType::Modified, true) if e.name == VIP_DS => {
                let generation =
                    |o: &Value| o.pointer("/metadata/generation").and_then(Value::as_u64);
                let now = generation(&e.object);
                let new = now.is_some_and(|g| g > self.vip_rolled);
                if new && now != e.prev.as_ref().and_then(generation) {
                    self.roll_vip().await;
                }
            }
            _ => {}
        }
    }

    /// The kubelet on the pod's node: the container is told to stop, and the pod object goes
    /// once its grace period (scaled) has passed.
    async fn kubelet_stops(&mut self, pod: &Value) {
        let field = |p: &str| {
            pod.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let name = field("/metadata/name");
        let uid = field("/metadata/uid");
        let node = field("/spec/nodeName");
        let grace = pod
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let r = pod_ref(&name);
        let container = pod
            .pointer("/spec/containers/0/name")
            .and_then(Value::as_str)
            .unwrap_or(AGENT);
        if container == AGENT {
            agent_stops(self.logs(), &name);
        }
        if container == VIP {
            self.vip_terminates(&name, &node).await;
        }
        self.record_in(
            &r,
            Some(container),
            "Normal",
            "Killing",
            &format!("Stopping container {container}"),
            Source {
                component: "kubelet",
                host: Some(&node),
            },
        )
        .await;
        let api = self.t.api.clone();
        let wait = self.scaled(Duration::from_secs(grace));
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(wait) => {
                    let same = api.fetch(&r).await.ok().flatten().is_some_and(|p| {
                        p.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid.as_str())
                    });
                    if same {
                        let _ = api.remove(&r).await;
                    }
                }
            }
        });
    }

    /// Whether server `i` is alive and its k3s serves: its kube-vip (which talks to the API
    /// through 127.0.0.1) and its kubelet can renew their Leases.
    fn serving(&mut self, i: usize) -> bool {
        if self.dead.get(i).copied().unwrap_or(true) {
            return false;
        }
        match self.k3s.get(i).copied() {
            Some(K3s::Serving) => true,
            Some(K3s::Starting { until }) if tokio::time::Instant::now() >= until => {
                self.k3s[i] = K3s::Serving;
                true
            }
            _ => false,
        }
    }

    /// A k3s.service (re)start on server `i`: it serves again after [`K3S_START_S`].
    fn k3s_starts(&mut self, i: usize) {
        if let Some(k) = self.k3s.get_mut(i) {
            *k = K3s::Starting {
                until: tokio::time::Instant::now() + Duration::from_secs(K3S_START_S),
            };
            // Its etcd member is up again at once (it starts before the API server).
            self.view.set_k3s_stopped(&self.env.servers[i].0, false);
            self.etcd_quorum();
            tracing::info!(
                env = %self.env.name,
                server = %self.env.servers[i].0,
                holder = i == self.holder,
                "simulated cluster: k3s restarts; serving again in {K3S_START_S} s"
            );
        }
    }

    /// A k3s.service stop on server `i`: it serves nothing until started again.
    fn k3s_stops(&mut self, i: usize) {
        if let Some(k) = self.k3s.get_mut(i) {
            *k = K3s::Stopped;
            self.view.set_k3s_stopped(&self.env.servers[i].0, true);
            self.etcd_quorum();
        }
    }

    /// kube-vip: the holder renews while its node lives and its k3s serves; otherwise, once
    /// its lease has run out, the first serving server takes it.
    async fn renew(&mut self) {
        let now = jiff::Timestamp::now();
        if self.released {
            self.acquire_released(now).await;
            return;
        }
        if self.serving(self.holder) {
            self.last_renew = now;
            if let Err(e) = self
                .t
                .api
                .merge_patch(
                    &self.lease_ref(),
                    json!({"spec": {"renewTime": micro_time(now)}}),
                )
                .await
            {
                tracing::warn!("simulated cluster: kube-vip renewing its Lease: {e}");
            }
            return;
        }
        if !self.dead.get(self.holder).copied().unwrap_or(true) {
            self.vip_renew_fails(self.holder).await;
        }
        let expired = now.as_millisecond() - self.last_renew.as_millisecond()
            > i64::try_from(self.state.lease_duration_s * 1000).unwrap_or(i64::MAX);
        if !expired {
            return;
        }
        if let Some(next) = (0..self.env.servers.len()).find(|i| self.serving(*i)) {
            let old = self.holder;
            if !self.dead.get(old).copied().unwrap_or(true) {
                self.vip_loses(old).await;
            }
            self.take_lease(next, now).await;
        }
    }

    /// The released Lease goes to the first candidate to retry: the candidates' retry
    /// loops are modelled as running in server order after the one that released it, so
    /// the next live server whose kube-vip runs takes it (the releaser's own node only if
    /// it is the only candidate left). Nobody: it stays released.
    async fn acquire_released(&mut self, now: jiff::Timestamp) {
        let n = self.env.servers.len();
        for k in 1..=n {
            let i = (self.holder + k) % n;
            if !self.serving(i) || self.vip_pod_of(i).await.is_none() {
                continue;
            }
            self.released = false;
            self.take_lease(i, now).await;
            return;
        }
    }

    /// Server `next`'s kube-vip takes the Lease (a new holder: one more transition).
    async fn take_lease(&mut self, next: usize, now: jiff::Timestamp) {
        {
            self.holder = next;
            self.transitions += 1;
            self.last_renew = now;
            let holder = self.env.servers[next].0.clone();
            if let Err(e) = self
                .t
                .api
                .apply(lease(
                    &self.env.lease_name,
                    &holder,
                    self.state.lease_duration_s,
                    self.transitions,
                    now,
                ))
                .await
            {
                tracing::warn!("simulated cluster: kube-vip taking its Lease: {e}");
            }
            self.view.set_holder(&holder);
            self.vip_new_leader(next).await;
            // client-go's leader election records this on the lock object.
            self.record(
                &self.lease_ref(),
                false,
                "Normal",
                "LeaderElection",
                &format!("{holder} became leader"),
                Source {
                    component: "kube-vip",
                    host: None,
                },
            )
            .await;
        }
    }

    /// Every live kubelet renews its node Lease (k3s runs the kubelet: not while it
    /// restarts).
    async fn renew_node_leases(&mut self) {
        let now = jiff::Timestamp::now();
        let tick = tokio::time::Instant::now();
        for i in 0..self.env.servers.len() {
            if !self.serving(i) {
                // The node lifecycle controller: a node silent for the grace period is
                // NotReady, and so are its pods.
                let silent = tick.duration_since(self.node_renewed[i]);
                if !self.not_ready[i] && silent >= NODE_MONITOR_GRACE {
                    self.node_not_ready(i).await;
                }
                continue;
            }
            self.node_renewed[i] = tick;
            if self.not_ready[i] {
                self.node_back(i).await;
            }
            let name = self.env.servers[i].0.clone();
            let _ = self
                .t
                .api
                .merge_patch(
                    &ObjRef::new(
                        "coordination.k8s.io/v1",
                        "Lease",
                        Some("kube-node-lease"),
                        &name,
                    ),
                    json!({"spec": {"renewTime": micro_time(now)}}),
                )
                .await;
        }
    }

    async fn fault(&mut self, f: &Fault) {
        let now = jiff::Timestamp::now();
        match f {
            Fault::HolderDies => {
                // The node's death is written as it dies, while etcd can still commit
                // (the fault's contract: NotReady at once); after that, if its member was
                // the one quorum needed, nothing more is.
                let could_write = self.has_quorum();
                let h = self.holder;
                if let Some(d) = self.dead.get_mut(h) {
                    *d = true;
                }
                if let Some((name, _)) = self.env.servers.get(h) {
                    self.view.set_dead(name);
                }
                // The fault's contract (and the console's incident drill) has the node
                // NotReady at once rather than after the node-monitor grace period; its
                // pods go unready with it, as the node lifecycle controller marks them.
                if could_write && !self.not_ready[h] {
                    self.node_not_ready(h).await;
                }
                if could_write && self.t.service_endpoints {
                    let _ = self
                        .t
                        .api
                        .apply(kubernetes_endpoints(&self.env, &self.dead))
                        .await;
                }
                // Its real etcd member dies with it (after its death was written).
                if let (Some(m), Some((name, _))) = (&self.t.members, self.env.servers.get(h)) {
                    if let Err(why) = m.stop(name) {
                        tracing::warn!("simulated cluster: {name}'s etcd member: {why}");
                    }
                }
                self.etcd_quorum();
            }
            Fault::AgentDrifts { .. } if !self.has_quorum() => {
                tracing::info!(env = %self.env.name, "simulated cluster: no quorum: the agent cannot be recreated");
            }
            Fault::AgentDrifts { server } => {
                let i = server.saturating_sub(1);
                if i < self.env.servers.len() {
                    let (generation, owner) = ds_meta(&self.t.api).await;
                    let host = self.env.dial(AgentsDial::OwnNode, i);
                    self.replace_pod(i, generation, &owner, &host, true, now)
                        .await;
                }
            }
            // The tunnel and etcd's membership are the SSH side's; the cluster has nothing
            // to do.
            Fault::VpnDown | Fault::VpnUp | Fault::EtcdLearnerAdded | Fault::EtcdLearnerRemoved => {
            }
        }
    }

    /// etcd: each server is a member, a dead one is down; with a majority down the
    /// members left cannot commit, and the built-in server answers as a real one would
    /// (see `Store::set_no_quorum`). The controllers write nothing more either (see
    /// [`Controllers::has_quorum`]), on either API server.
    fn etcd_quorum(&self) {
        let Some(store) = &self.t.quorum else {
            return;
        };
        let n = self.dead.len();
        let down = self.members_down();
        let why = (n > 0 && n - down.len() < n / 2 + 1).then(|| {
            format!(
                "{} of {n} etcd members down ({}): no quorum",
                down.len(),
                down.join(", ")
            )
        });
        if let Some(w) = &why {
            tracing::info!(env = %self.env.name, "simulated cluster: {w}");
        }
        store.set_no_quorum(why);
    }

    /// The node lifecycle controller gives up on node `server`: its Ready condition Unknown
    /// (the kubelet stopped posting), then every pod on it not Ready.
    async fn node_not_ready(&mut self, server: usize) {
        self.set_node_ready(server, false).await;
    }

    /// Node `server`'s kubelet posts again: the node is Ready, and the kubelet reports each
    /// of its pods Ready as their containers are.
    async fn node_back(&mut self, server: usize) {
        self.set_node_ready(server, true).await;
    }

    /// Node `server`'s Ready condition turns `ready`, with the event who turned it records
    /// (the node controller's NodeNotReady, the kubelet's NodeReady on its host), then its
    /// pods follow and the DaemonSets recount.
    async fn set_node_ready(&mut self, server: usize, ready: bool) {
        let now = jiff::Timestamp::now();
        self.not_ready[server] = !ready;
        let (name, addr) = self.env.servers[server].clone();
        let node = ObjRef::new("v1", "Node", None, &name);
        let _ = self
            .t
            .api
            .patch_status(&node, node_status(&name, addr, ready, now))
            .await;
        self.view.set_ready(&name, ready);
        let (reason, source) = if ready {
            (
                "NodeReady",
                Source {
                    component: "kubelet",
                    host: Some(&name),
                },
            )
        } else {
            (
                "NodeNotReady",
                Source {
                    component: "node-controller",
                    host: None,
                },
            )
        };
        self.record(
            &node,
            false,
            "Normal",
            reason,
            &format!("Node {name} status is now: {reason}"),
            source,
        )
        .await;
        self.pods_ready_on(server, ready).await;
        self.daemonsets_count_ready().await;
    }

    /// The DaemonSet controller recounts its ready pods (a node's pods changed readiness).
    async fn daemonsets_count_ready(&self) {
        let (generation, _) = ds_meta(&self.t.api).await;
        self.ds_status(generation).await;
        let (vip_generation, _) = ds_meta_of(&self.t.api, &vip_ds_ref()).await;
        self.vip_ds_status(vip_generation).await;
    }

    /// Every pod on node `server`, in every namespace. `ready` false: what the node
    /// lifecycle controller does to a NotReady node's pods (MarkPodsNotReady: only the Ready
    /// condition turns False, then a Warning NodeNotReady event on the pod). `ready` true:
    /// the kubelet posting again, each pod Ready as its ContainersReady condition says.
    async fn pods_ready_on(&self, server: usize, ready: bool) {
        let Some((node, _)) = self.env.servers.get(server) else {
            return;
        };
        let pods = match self.t.api.objects("v1", "Pod", None).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("simulated cluster: listing the pods on {node}: {e}");
                return;
            }
        };
        let now = time(jiff::Timestamp::now());
        for p in pods {
            if p.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node.as_str()) {
                continue;
            }
            let Some(mut conds) = p
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
            else {
                continue;
            };
            let containers_ready = conds
                .iter()
                .any(|c| c["type"] == "ContainersReady" && c["status"] == "True");
            let want = if ready && containers_ready {
                "True"
            } else {
                "False"
            };
            let Some(c) = conds.iter_mut().find(|c| c["type"] == "Ready") else {
                continue;
            };
            if c["status"] == want {
                continue;
            }
            c["status"] = json!(want);
            c["lastTransitionTime"] = json!(now);
            let name = p
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let ns = p.pointer("/metadata/namespace").and_then(Value::as_str);
            let r = ObjRef::new("v1", "Pod", ns, &name);
            if let Err(e) = self
                .t
                .api
                .patch_status(&r, json!({"conditions": conds}))
                .await
            {
                tracing::warn!("simulated cluster: pod {name}'s readiness: {e}");
                continue;
            }
            if !ready {
                self.record_in(
                    &r,
                    None,
                    "Warning",
                    "NodeNotReady",
                    "Node is not ready",
                    Source {
                        component: "node-controller",
                        host: None,
                    },
                )
                .await;
            }
        }
    }

    /// kube-vip on `node` is told to stop (SIGTERM): it cancels its leader election, which
    /// (ReleaseOnCancel) releases the Lease if it holds it: an empty holder, a 1 s duration,
    /// the transitions kept, as client-go writes it. Either way its election ends
    /// (OnStoppedLeading) and it exits.
    async fn vip_terminates(&mut self, pod: &str, node: &str) {
        if !self.vip_stopped.insert(pod.to_string()) {
            return;
        }
        let Some(server) = self.env.servers.iter().position(|(n, _)| n == node) else {
            return;
        };
        vip_log(
            self.logs(),
            pod,
            vec![vip_line(
                "info",
                "Received termination, signaling cluster shutdown",
            )],
        );
        let holds = server == self.holder && !self.released;
        if holds && self.serving(server) {
            let now = jiff::Timestamp::now();
            let released = lease(&self.env.lease_name, "", 1, self.transitions, now);
            match self.t.api.apply(released).await {
                Ok(_) => {
                    self.released = true;
                    self.view.clear_holder();
                    tracing::info!(
                        env = %self.env.name,
                        server = %node,
                        "simulated cluster: kube-vip released the Lease on its graceful stop"
                    );
                }
                Err(e) => tracing::warn!("simulated cluster: kube-vip releasing its Lease: {e}"),
            }
        }
        vip_log(
            self.logs(),
            pod,
            vec![
                vip_line(
                    "info",
                    "This node is becoming a follower within the cluster",
                ),
                vip_line("fatal", "lost leadership, restarting kube-vip"),
            ],
        );
    }

    /// Server `server`'s kube-vip container crashes: no graceful stop, so the Lease is not
    /// released; the kubelet starts the container again, and the new instance (the same
    /// identity, the node's name) renews a Lease it still holds at once (client-go treats
    /// a record naming its own identity as its own), else follows the holder.
    async fn vip_crashes(&mut self, server: usize) {
        if server >= self.env.servers.len() || self.dead[server] {
            return;
        }
        let Some(pod) = self.vip_pod_of(server).await else {
            return;
        };
        self.vip_pod_ready(server, true, true).await;
        let node = self.env.servers[server].0.clone();
        let lease = self.env.lease_name.clone();
        vip_starts(self.logs(), &pod, &node, &lease);
        if server == self.holder && !self.released && self.serving(server) {
            let now = jiff::Timestamp::now();
            self.last_renew = now;
            if let Err(e) = self
                .t
                .api
                .merge_patch(
                    &self.lease_ref(),
                    json!({"spec": {"renewTime": micro_time(now)}}),
                )
                .await
            {
                tracing::warn!("simulated cluster: kube-vip renewing its Lease: {e}");
            }
            vip_acquires(self.logs(), &pod, &node, &lease);
        } else if !self.released {
            let leader = self.env.servers[self.holder].0.clone();
            vip_sees_leader(self.logs(), &pod, &leader);
        }
    }

    /// The DaemonSet controller deletes a pod (the kubelet stops its container first).
    async fn delete_pod(&self, name: &str) {
        let r = pod_ref(name);
        agent_stops(self.logs(), name);
        let node = self
            .t
            .api
            .fetch(&r)
            .await
            .ok()
            .flatten()
            .and_then(|p| {
                p.pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        self.record(
            &r,
            true,
            "Normal",
            "Killing",
            &format!("Stopping container {AGENT}"),
            Source {
                component: "kubelet",
                host: Some(&node),
            },
        )
        .await;
        if self.t.api.remove(&r).await.is_ok() {
            self.record(
                &ds_ref(),
                false,
                "Normal",
                "SuccessfulDelete",
                &format!("Deleted pod: {name}"),
                Source {
                    component: "daemonset-controller",
                    host: None,
                },
            )
            .await;
        }
    }

    /// The DaemonSet controller creates a pod on `server`; the scheduler binds it and the
    /// kubelet starts its container. Returns its name.
    async fn create_pod(
        &mut self,
        server: usize,
        generation: u64,
        owner: &str,
        host: &str,
        ready: bool,
        now: jiff::Timestamp,
    ) -> String {
        let nth = self.created.entry((server, generation)).or_insert(0);
        let name = pod_name(server, generation, *nth);
        *nth += 1;
        let node = self.env.servers[server].0.clone();
        if let Err(e) = self
            .t
            .api
            .apply(pod(
                &self.env, server, &name, generation, owner, host, ready, now,
            ))
            .await
        {
            tracing::warn!("simulated cluster: creating pod {name}: {e}");
        }
        agent_starts(self.logs(), &name, host, self.env.api_port);
        if ready {
            agent_ready(self.logs(), &name);
        }
        self.record(
            &ds_ref(),
            false,
            "Normal",
            "SuccessfulCreate",
            &format!("Created pod: {name}"),
            Source {
                component: "daemonset-controller",
                host: None,
            },
        )
        .await;
        let r = pod_ref(&name);
        self.record(
            &r,
            false,
            "Normal",
            "Scheduled",
            &format!("Successfully assigned {NS}/{name} to {node}"),
            Source {
                component: "default-scheduler",
                host: None,
            },
        )
        .await;
        let kubelet = Source {
            component: "kubelet",
            host: Some(&node),
        };
        for (reason, msg) in [
            (
                "Pulled",
                format!("Container image \"{CILIUM_IMAGE}\" already present on machine"),
            ),
            ("Created", format!("Created container: {AGENT}")),
            ("Started", format!("Started container {AGENT}")),
        ] {
            self.record(&r, true, "Normal", reason, &msg, kubelet).await;
        }
        name
    }

    /// The DaemonSet controller's move on one node: the node's current agent pod goes, a
    /// new one of `generation` dialling `host` takes its place. Returns the new pod's name.
    async fn replace_pod(
        &mut self,
        server: usize,
        generation: u64,
        owner: &str,
        host: &str,
        ready: bool,
        now: jiff::Timestamp,
    ) -> String {
        if let Some(old) = self.current_pod(server).await {
            self.delete_pod(&old).await;
        }
        self.create_pod(server, generation, owner, host, ready, now)
            .await
    }

    /// The DaemonSet's pod on node `server` (an agent pod: other kube-system pods on the
    /// node are not the DaemonSet's).
    async fn current_pod(&self, server: usize) -> Option<String> {
        let node = &self.env.servers.get(server)?.0;
        self.t
            .api
            .objects("v1", "Pod", Some(NS))
            .await
            .ok()?
            .into_iter()
            .find(|p| {
                p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                    && p.pointer("/metadata/labels/k8s-app")
                        .and_then(Value::as_str)
                        == Some("cilium")
            })
            .and_then(|p| {
                p.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
    }

    /// The live pod labelled `key=value` on node `server` (one being deleted is gone for a
    /// DaemonSet controller).
    async fn pod_on(&self, server: usize, key: &str, value: &str) -> Option<Value> {
        let node = &self.env.servers.get(server)?.0;
        let ptr = format!("/metadata/labels/{}", key.replace('/', "~1"));
        self.t
            .api
            .objects("v1", "Pod", Some(NS))
            .await
            .ok()?
            .into_iter()
            .find(|p| {
                p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                    && p.pointer(&ptr).and_then(Value::as_str) == Some(value)
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            })
    }

    /// The name of kube-vip's pod on node `server`.
    async fn vip_pod_of(&self, server: usize) -> Option<String> {
        self.pod_on(server, VIP_LABEL, VIP_DS).await.and_then(|p| {
            p.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    }

    /// kube-vip's pod on `server` Ready or not; `restarted`: its container just exited (a
    /// fatal error: exit code 1) and the kubelet started it again (one more restart, running
    /// since now, the ended one its last state, a new log).
    async fn vip_pod_ready(&self, server: usize, ready: bool, restarted: bool) {
        let Some(p) = self.pod_on(server, VIP_LABEL, VIP_DS).await else {
            return;
        };
        let field = |ptr: &str| p.pointer(ptr).cloned().unwrap_or(Value::Null);
        let Some(name) = field("/metadata/name").as_str().map(str::to_string) else {
            return;
        };
        let now = jiff::Timestamp::now();
        let mut started = field("/status/startTime")
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(now);
        let mut restarts = field("/status/containerStatuses/0/restartCount")
            .as_u64()
            .unwrap_or(0);
        let mut cid = field("/status/containerStatuses/0/containerID")
            .as_str()
            .unwrap_or("")
            .to_string();
        let mut last_state = match field("/status/containerStatuses/0/lastState") {
            Value::Null => json!({}),
            v => v,
        };
        if restarted {
            let ran_since = field("/status/containerStatuses/0/state/running/startedAt")
                .as_str()
                .map_or_else(|| time(started), str::to_string);
            last_state = json!({"terminated": {"exitCode": 1, "reason": "Error",
                "startedAt": ran_since, "finishedAt": time(now), "containerID": cid}});
            restarts += 1;
            started = now;
            cid = container_id();
            if let Some(logs) = self.logs() {
                logs.restart(NS, &name, VIP);
            }
        }
        let status = container_pod_status(
            self.env.servers[server].1,
            VIP,
            VIP_IMAGE,
            ready,
            restarts,
            started,
            now,
            &cid,
            last_state,
        );
        if let Err(e) = self.t.api.patch_status(&pod_ref(&name), status).await {
            tracing::warn!("simulated cluster: kube-vip pod {name}'s status: {e}");
        }
    }

    /// The holder's kube-vip cannot reach its k3s to renew (it talks to 127.0.0.1).
    async fn vip_renew_fails(&self, server: usize) {
        let Some(pod) = self.vip_pod_of(server).await else {
            return;
        };
        let (lease, port) = (&self.env.lease_name, self.env.api_port);
        let msg = format!(
            "error retrieving resource lock {NS}/{lease}: Get \"https://127.0.0.1:{port}/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease}?timeout=10s\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        );
        vip_log(
            self.logs(),
            &pod,
            vec![klog_line('E', "leaderelection.go:436", &msg)],
        );
    }

    /// The old holder's kube-vip gives up the Lease: kube-vip exits on lost leadership and
    /// the kubelet restarts its container, which starts over as a candidate.
    async fn vip_loses(&self, server: usize) {
        let Some(pod) = self.vip_pod_of(server).await else {
            return;
        };
        let lease = &self.env.lease_name;
        vip_log(
            self.logs(),
            &pod,
            vec![
                klog_line(
                    'I',
                    "leaderelection.go:297",
                    &format!(
                        "failed to renew lease {NS}/{lease}: timed out waiting for the condition"
                    ),
                ),
                vip_line(
                    "info",
                    "This node is becoming a follower within the cluster",
                ),
                vip_line("fatal", "lost leadership, restarting kube-vip"),
            ],
        );
        self.vip_pod_ready(server, true, true).await;
        vip_starts(self.logs(), &pod, &self.env.servers[server].0, lease);
    }

    /// Server `next` took the Lease: its kube-vip says so, every other live one sees it.
    async fn vip_new_leader(&self, next: usize) {
        let leader = self.env.servers[next].0.clone();
        for i in 0..self.env.servers.len() {
            if self.dead.get(i).copied().unwrap_or(true) {
                continue;
            }
            let Some(pod) = self.vip_pod_of(i).await else {
                continue;
            };
            if i == next {
                vip_acquires(self.logs(), &pod, &leader, &self.env.lease_name);
            } else {
                vip_sees_leader(self.logs(), &pod, &leader);
            }
        }
    }

    /// The kube-vip DaemonSet controller creates its pod on `server` (running at once: the
    /// image is on the node); its kube-vip joins the election the Lease's holder leads.
    async fn create_vip_pod(&mut self, server: usize, generation: u64, owner: &str) {
        let Some(nth) = self.vip_created.get_mut(server) else {
            return;
        };
        let name = vip_pod_name(server, *nth);
        *nth += 1;
        let node = self.env.servers[server].0.clone();
        let pod = vip_pod(
            &self.env,
            server,
            &name,
            generation,
            owner,
            self.state.lease_duration_s,
            true,
            jiff::Timestamp::now(),
        );
        if let Err(e) = self.t.api.apply(pod).await {
            tracing::warn!("simulated cluster: creating pod {name}: {e}");
            return;
        }
        self.record(
            &vip_ds_ref(),
            false,
            "Normal",
            "SuccessfulCreate",
            &format!("Created pod: {name}"),
            Source {
                component: "daemonset-controller",
                host: None,
            },
        )
        .await;
        let lease = &self.env.lease_name;
        vip_starts(self.logs(), &name, &node, lease);
        if self.released {
            // Nobody holds the Lease: the new kube-vip is one more candidate.
        } else if server == self.holder {
            vip_acquires(self.logs(), &name, &node, lease);
        } else {
            let leader = &self.env.servers[self.holder].0;
            vip_sees_leader(self.logs(), &name, leader);
        }
    }

    async fn vip_ds_status(&self, generation: u64) {
        let n = self.env.servers.len();
        if let Err(e) = super::daemonset::report_status_by(
            &self.t.api,
            &vip_ds_ref(),
            (VIP_LABEL, VIP_DS),
            generation,
            n,
        )
        .await
        {
            tracing::warn!("simulated cluster: the {VIP_DS} DaemonSet's status: {e}");
        }
    }

    /// Every live server runs one kube-vip pod: a missing one is created.
    async fn ensure_vip_pods(&mut self) {
        let (generation, owner) = ds_meta_of(&self.t.api, &vip_ds_ref()).await;
        let mut made = false;
        for i in 0..self.env.servers.len() {
            if self.dead[i] || self.vip_pod_of(i).await.is_some() {
                continue;
            }
            self.create_vip_pod(i, generation, &owner).await;
            made = true;
        }
        if made {
            self.vip_ds_status(generation).await;
        }
    }

    /// `rollout restart` of kube-vip's DaemonSet: each live node's pod is replaced by one of
    /// the new generation, one node at a time.
    async fn roll_vip(&mut self) {
        let step = Duration::from_millis(700);
        let (generation, owner) = ds_meta_of(&self.t.api, &vip_ds_ref()).await;
        self.vip_rolled = self.vip_rolled.max(generation);
        self.vip_ds_status(generation).await;
        for i in 0..self.env.servers.len() {
            if self.cancel.is_cancelled() {
                return;
            }
            if self.dead[i] {
                continue;
            }
            if let Some(old) = self.vip_pod_of(i).await {
                let r = pod_ref(&old);
                let node = self.env.servers[i].0.clone();
                self.vip_terminates(&old, &node).await;
                self.record_in(
                    &r,
                    Some(VIP),
                    "Normal",
                    "Killing",
                    &format!("Stopping container {VIP}"),
                    Source {
                        component: "kubelet",
                        host: Some(&node),
                    },
                )
                .await;
                let _ = self.t.api.remove(&r).await;
            }
            self.create_vip_pod(i, generation, &owner).await;
            self.vip_ds_status(generation).await;
            tokio::time::sleep(step).await;
        }
    }

    /// The pod's readiness, after the kubelet's first probe.
    async fn set_ready(&self, name: &str, server: usize) {
        let r = pod_ref(name);
        let Some(p) = self.t.api.fetch(&r).await.ok().flatten() else {
            return;
        };
        let started = p
            .pointer("/status/startTime")
            .and_then(Value::as_str)
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(jiff::Timestamp::now);
        let cid = p
            .pointer("/status/containerStatuses/0/containerID")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        agent_ready(self.logs(), name);
        let _ = self
            .t
            .api
            .patch_status(
                &r,
                pod_status(
                    self.env.servers[server].1,
                    true,
                    started,
                    jiff::Timestamp::now(),
                    &cid,
                ),
            )
            .await;
    }

    /// The stuck pod's readiness probe fails (the kubelet says so in an event).
    async fn probe_fails(&self, name: &str, server: usize) {
        self.record(
            &pod_ref(name),
            true,
            "Warning",
            "Unhealthy",
            "Readiness probe failed: Get \"http://127.0.0.1:9879/healthz\": dial tcp 127.0.0.1:9879: connect: connection refused",
            Source { component: "kubelet", host: Some(&self.env.servers[server].0) },
        )
        .await;
    }

    async fn ds_status(&self, generation: u64) {
        let n = self.env.servers.len();
        if let Err(e) =
            super::daemonset::report_status(&self.t.api, &ds_ref(), "cilium", generation, n).await
        {
            tracing::warn!("simulated cluster: the cilium DaemonSet's status: {e}");
        }
    }

    /// The DaemonSet controller: every live node runs one agent pod; a missing one is
    /// created from the current template (and becomes ready a moment later).
    async fn ensure_pods(&mut self) {
        self.ensure_vip_pods().await;
        let (generation, owner) = ds_meta(&self.t.api).await;
        let mut made = Vec::new();
        for i in 0..self.env.servers.len() {
            if self.dead[i] || self.current_pod(i).await.is_some() {
                continue;
            }
            let host = self.env.dial(self.agents_dial, i);
            let name = self
                .create_pod(i, generation, &owner, &host, false, jiff::Timestamp::now())
                .await;
            made.push((name, i));
        }
        if made.is_empty() {
            return;
        }
        self.ds_status(generation).await;
        tokio::time::sleep(
            self.scaled(Duration::from_secs(2))
                .max(Duration::from_millis(200)),
        )
        .await;
        for (name, i) in made {
            self.set_ready(&name, i).await;
        }
        self.ds_status(generation).await;
    }

    /// Roll the DaemonSet's current generation onto every node, one at a time, never past
    /// an unready pod (maxUnavailable 1). A node the scenario marks stuck never gets ready,
    /// and the rollout stops there.
    async fn roll(&mut self) {
        let step = Duration::from_millis(700);
        let n = self.env.servers.len();
        let (generation, owner) = ds_meta(&self.t.api).await;
        self.rolled = self.rolled.max(generation);
        self.ds_status(generation).await;
        for i in 0..n {
            if self.cancel.is_cancelled() {
                return;
            }
            let host = self.env.dial(self.agents_dial, i);
            let name = self
                .replace_pod(i, generation, &owner, &host, false, jiff::Timestamp::now())
                .await;
            self.ds_status(generation).await;
            if self.state.rollout_stuck_on == Some(i + 1) {
                // maxUnavailable 1: the controller waits for this pod forever.
                self.probe_fails(&name, i).await;
                return;
            }
            tokio::time::sleep(step).await;
            self.set_ready(&name, i).await;
            self.ds_status(generation).await;
            tokio::time::sleep(step).await;
        }
    }

    /// helm-controller on a HelmRelease that changed: the modelled cilium release answers a
    /// new reconcile request with the scenario's upgrade ([`Self::reconcile`]); any other due
    /// reconcile of the spec last reconciled (a resumed release) finds the release in sync:
    /// handled, observed, Ready, no upgrade. A spec a client changed otherwise is not played
    /// ([`super::flux::not_simulated`]).
    async fn flux_release(&mut self, changed: &Value) {
        let r = flux_ref("helm.toolkit.fluxcd.io/v2", "HelmRelease", changed);
        let Some(due) = self.flux_due(&r).await else {
            return;
        };
        match due {
            super::flux::Due::Request(at) if r == cilium_release() => self.reconcile(&at).await,
            _ => {
                let answered =
                    super::flux::answer_release(&self.t.api, &r, None, jiff::Timestamp::now());
                if let Err(e) = answered.await {
                    tracing::warn!("simulated helm-controller: answering {r}: {e}");
                }
            }
        }
        self.flux_reconciled(&r).await;
    }

    /// kustomize-controller on a Kustomization that changed: a due reconcile of the spec last
    /// reconciled is answered; another spec is not played. One that applied the cilium
    /// release while the scenario's fix is pending applies it: the release's values change
    /// (its `Progressing` event says the release was configured), the Kustomization reports
    /// Ready, then helm-controller upgrades the release.
    async fn flux_kustomization(&mut self, changed: &Value) {
        let started = tokio::time::Instant::now();
        let r = flux_ref("kustomize.toolkit.fluxcd.io/v1", "Kustomization", changed);
        if self.flux_due(&r).await.is_none() {
            return;
        }
        let applies_release = self
            .t
            .api
            .fetch(&r)
            .await
            .ok()
            .flatten()
            .is_some_and(|ks| super::flux_applied::in_inventory(&ks, &cilium_release()));
        // A suspended release is not upgraded by helm-controller; the simulation then does
        // not apply the fix to it either (it plays the two together), so the drift stays
        // visible to `flux diff` until the release is resumed and reconciled.
        let release_suspended = self
            .t
            .api
            .fetch(&cilium_release())
            .await
            .ok()
            .flatten()
            .is_some_and(|hr| hr.pointer("/spec/suspend") == Some(&json!(true)));
        let fix = if applies_release && !release_suspended {
            self.apply_pending_fix().await
        } else {
            None
        };
        if fix.is_some() {
            super::flux::configured(&self.t.api, &r, &cilium_release()).await;
        }
        let answered = super::flux::answer_kustomization(
            &self.t.api,
            &r,
            started.elapsed(),
            jiff::Timestamp::now(),
        );
        if let Err(e) = answered.await {
            tracing::warn!("simulated kustomize-controller: answering {r}: {e}");
        }
        self.flux_reconciled(&r).await;
        if fix.is_some() {
            self.helm_upgrade(fix, &format!("applied by {r}")).await;
            self.flux_reconciled(&cilium_release()).await;
        }
    }

    /// What the Flux object `r` is due, when it is due a reconcile the simulation plays.
    /// Otherwise `None`, having answered what it can: a request on an object served
    /// NotSimulated only marked handled; a spec not the one last reconciled marked
    /// NotSimulated.
    async fn flux_due(&mut self, r: &ObjRef) -> Option<super::flux::Due> {
        let now = self.t.api.fetch(r).await.ok().flatten()?;
        let due = super::flux::due(&now);
        if due == super::flux::Due::Nothing {
            return None;
        }
        let answered = if super::flux::is_not_simulated(&now) {
            super::flux::handled_only(&self.t.api, r).await
        } else if self.flux_specs.get(&flux_key(&now)) != Some(&super::flux::spec_but_suspend(&now))
        {
            let why = format!(
                "a change of this {}'s spec other than suspend is not simulated (what Flux would apply for it is not played); the simulation plays suspend, resume and reconcile",
                r.kind
            );
            super::flux::not_simulated(&self.t.api, r, &why, jiff::Timestamp::now()).await
        } else {
            return Some(due);
        };
        if let Err(e) = answered {
            tracing::warn!("simulated Flux: answering {r}: {e}");
        }
        None
    }

    /// After a reconcile the simulation played: the spec it leaves is the one reconciled.
    async fn flux_reconciled(&mut self, r: &ObjRef) {
        if let Ok(Some(o)) = self.t.api.fetch(r).await {
            self.flux_specs
                .insert(flux_key(&o), super::flux::spec_but_suspend(&o));
        }
    }

    /// helm-controller on the cilium release's reconcile request: when the scenario's fix is
    /// pending, the release's values change first (the sim's compression of the fixed repo
    /// reaching the release), then the Helm upgrade ([`Self::helm_upgrade`]). Otherwise the
    /// release is in sync: handled, Ready, nothing upgraded.
    async fn reconcile(&mut self, requested_at: &str) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let fix = self.apply_pending_fix().await;
        self.helm_upgrade(fix, requested_at).await;
    }

    /// The scenario's fix, when one is pending (the agents do not dial what the repo says
    /// yet), applied to the cilium release's values: what the agents will dial and the
    /// first server's address for the template.
    async fn apply_pending_fix(&mut self) -> Option<(AgentsDial, String)> {
        let target = self
            .state
            .agents_dial_after_reconcile
            .filter(|t| *t != self.agents_dial)?;
        let host0 = self.env.dial(target, 0);
        let release = cilium_release();
        if let Err(e) = super::flux_applied::release_dials(&self.t.api, &release, &host0).await {
            tracing::warn!("simulated cluster: the values of {release}: {e}");
        }
        Some((target, host0))
    }

    /// helm-controller reports the cilium release reconciled (Ready for its generation, the
    /// request handled; with `fix`, a Helm upgrade and its `UpgradeSucceeded` event), then
    /// the upgrade changes the DaemonSet's template and the new generation rolls.
    async fn helm_upgrade(&mut self, fix: Option<(AgentsDial, String)>, why: &str) {
        let release = cilium_release();
        let upgrade = fix.as_ref().map(|_| {
            self.helm_revision += 1;
            super::flux::Upgrade {
                revision: self.helm_revision,
            }
        });
        if let Err(e) = super::flux::answer_release(
            &self.t.api,
            &release,
            upgrade.as_ref(),
            jiff::Timestamp::now(),
        )
        .await
        {
            tracing::warn!("simulated cluster: answering the reconcile of {release} ({why}): {e}");
        }
        let Some((target, host0)) = fix else {
            return;
        };
        self.agents_dial = target;
        // helm upgrade: the template's containers change; whatever else a client set on the
        // DaemonSet (a restartedAt annotation) stays.
        let _ = self
            .t
            .api
            .merge_patch(
                &ds_ref(),
                json!({"spec": {"template": {"spec": {"containers": [agent_container(&host0, self.env.api_port)]}}}}),
            )
            .await;
        self.roll().await;
    }
}

/// The Flux kinds whose reconciles the simulation plays.
const FLUX_KINDS: [(&str, &str); 2] = [
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
];

/// `Kind/namespace/name` of a Flux object.
fn flux_key(o: &Value) -> String {
    let f = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("");
    format!(
        "{}/{}/{}",
        f("/kind"),
        f("/metadata/namespace"),
        f("/metadata/name")
    )
}

/// The Flux object `changed` is, as a reference of `kind`.
fn flux_ref(api_version: &str, kind: &str, changed: &Value) -> ObjRef {
    let f = |p: &str| changed.pointer(p).and_then(Value::as_str);
    ObjRef::new(
        api_version,
        kind,
        f("/metadata/namespace"),
        f("/metadata/name").unwrap_or(""),
    )
}

/// The HelmRelease whose upgrades the simulation plays (the cilium agents').
fn cilium_release() -> ObjRef {
    ObjRef::new(
        "helm.toolkit.fluxcd.io/v2",
        "HelmRelease",
        Some(NS),
        "cilium",
    )
}
