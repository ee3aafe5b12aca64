//! kube-wait and flux-reconcile against the REAL kube-apiserver (crates/hk-sim/tests/support/apiserver.rs):
//! each condition passing on a change made while it watches (and how long after the change
//! the wait returns), timing out, the stuck rollout failing with pod and node named;
//! flux-reconcile against a HelmRelease while this test plays the Flux controller (it sees
//! the annotation and writes lastHandledReconcileAt and Ready through the status
//! subresource), Ready=False failing with its message, a read-only user refused; prompt
//! cancellation; and the console's wiring (`capabilities_for_repo`): executors built from a
//! repo's kubeconfig, a missing kubeconfig named with where its name came from, kube-wait in
//! observe mode's read-only set. The kube-wait user is the harness's read-only observer
//! (RBAC get/list/watch): the audit log must show it made no write and got no 403, and only
//! list and watch requests (watches, not polls).
//! Needs `bash tests/apiserver/build.sh` (tests/run-all.sh runs it); fails with that hint.

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hk_console::checks::live::EnvTopology;
use hk_console::cluster::WatchSettings;
use hk_console::exec::kube::flux::{self, FluxObject, REQUESTED_AT_ANNOTATION};
use hk_console::exec::kube::wait::{self, Condition, WaitEnd, WaitError, WaitOptions};
use hk_console::repo::Repo;
use hk_console::runbook::machine::Input;
use hk_console::runbook::plan::{Expect, PlannedStep, StepKind};
use hk_console::session::exec::{ExecReply, ExecRequest, NoExecutor};
use hk_console::session::executors::capabilities_for_repo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::Client;
use serde_json::{json, Value};
use support::apiserver::*;
use support::three_servers::{ThreeServers, VIP};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const DEV: ThreeServers = ThreeServers::named("dev", ["k3s-dev-1", "k3s-dev-2", "k3s-dev-3"]);
const NODES: [(&str, &str); 3] = DEV.nodes;

fn topo() -> EnvTopology {
    DEV.topo()
}

/// A wait running on its own task; its progress lines arrive on `lines`.
struct Running {
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<(Result<WaitEnd, WaitError>, Instant)>,
}

impl Running {
    /// Waits (10 s at most) for a progress line containing `needle`.
    async fn until(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Ok(None) => panic!(
                    "the wait ended before a line with {needle:?}: {:?}",
                    self.seen
                ),
                Err(_) => panic!("no progress line with {needle:?} in 10 s: {:?}", self.seen),
            }
        }
    }

    /// The wait's end, when it returned, and every progress line.
    async fn end(mut self) -> (WaitEnd, Instant, Vec<String>) {
        let (r, at) = tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the wait returned within 60 s")
            .expect("wait task");
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        (r.expect("the wait could be carried out"), at, self.seen)
    }
}

fn start_wait(client: Client, condition: &str, timeout_s: u64, stuck_after: Duration) -> Running {
    let condition = Condition::parse(condition).expect("condition");
    let (tx, lines) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let task = tokio::spawn(async move {
        // The real API server alone: no SSH to its servers, so the API's view only.
        let opts = WaitOptions {
            timeout: Duration::from_secs(timeout_s),
            stuck_after,
            etcd: None,
        };
        let progress = move |l: String| {
            let _ = tx.send(l);
        };
        let settings = WatchSettings::default();
        let r = wait::wait(client, &topo(), &settings, &condition, &opts, &c, &progress).await;
        (r, Instant::now())
    });
    Running {
        lines,
        seen: Vec::new(),
        cancel,
        task,
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

async fn make_nodes(admin: &Client) {
    DEV.create_nodes(admin).await;
}

/// kube-system/cilium with one updated pod per node; `unready` ones not ready.
async fn make_cilium(admin: &Client, unready: &[&str]) {
    let pods = ["cilium-aaaaa", "cilium-bbbbb", "cilium-ccccc"];
    DEV.create_cilium(admin, pods, unready).await;
    let ready = 3 - unready.len() as i32;
    set_daemonset_status(admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 3, ready)).await;
}

/// The observer made only list/watch requests, none refused, none writing.
async fn assert_observer_only_watched(server: &ApiServer) -> usize {
    server.audit_settle().await;
    let writes = server.writes_by(OBSERVER_USER);
    assert!(writes.is_empty(), "kube-wait wrote: {writes:?}");
    let codes = server.status_codes_by(OBSERVER_USER);
    assert!(!codes.contains(&403), "kube-wait got a 403: {codes:?}");
    let requests = server.requests_by(OBSERVER_USER);
    for r in &requests {
        let verb = r.get("verb").and_then(Value::as_str).unwrap_or_default();
        assert!(
            verb == "list" || verb == "watch",
            "kube-wait made a {verb} request: {r}"
        );
    }
    requests.len()
}

// ---------------------------------------------------------------------------------------
// kube-wait conditions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_passes_when_the_last_updated_pod_turns_ready() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let observer = client_for(&server.observer_kubeconfig().await).await;
    make_nodes(&admin).await;
    make_cilium(&admin, &["k3s-dev-3"]).await;
    // The API server itself records the template generation the pods are compared with.
    let ds = Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(admin.clone(), KUBE_SYSTEM)
        .get("cilium")
        .await
        .expect("get ds");
    assert_eq!(
        hk_console::cluster::convert::template_generation(&ds).as_deref(),
        Some("1"),
        "{:?}",
        ds.metadata.annotations
    );

    let mut w = start_wait(
        observer,
        "daemonset-rolled-out kube-system/cilium",
        30,
        Duration::from_secs(60),
    );
    let line = w
        .until("3/3 updated, 1 unavailable: cilium-ccccc on k3s-dev-3 not ready")
        .await;
    assert_eq!(
        line,
        "3/3 updated, 1 unavailable: cilium-ccccc on k3s-dev-3 not ready"
    );

    // The kubelet reports the pod ready, then the DaemonSet controller counts it.
    set_pod_ready(&admin, KUBE_SYSTEM, "cilium-ccccc", true).await;
    w.until("3/3 updated, 1 unavailable").await;
    let t0 = Instant::now();
    set_daemonset_status(&admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 3, 3)).await;
    let (end, at, lines) = w.end().await;
    let latency = at.saturating_duration_since(t0);
    assert_eq!(
        end,
        WaitEnd::Met(
            "daemonset kube-system/cilium: rolled out: 3 of 3 updated and available".into()
        ),
        "{lines:?}"
    );
    println!(
        "MEASURED rollout: status write sent -> wait returned: {} ms",
        ms(latency)
    );
    assert!(latency < Duration::from_secs(3), "{latency:?}");
    let n = assert_observer_only_watched(&server).await;
    println!("MEASURED rollout: observer requests during the wait: {n} (list+watch)");
    assert!(
        n <= 8,
        "{n} requests: a wait that polls, not one that watches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_fails_naming_the_pod_and_node() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let observer = client_for(&server.observer_kubeconfig().await).await;
    make_nodes(&admin).await;
    make_cilium(&admin, &["k3s-dev-2"]).await;
    let t0 = Instant::now();
    let w = start_wait(
        observer,
        "daemonset-rolled-out kube-system/cilium",
        60,
        Duration::from_secs(4),
    );
    let (end, at, lines) = w.end().await;
    let took = at.saturating_duration_since(t0);
    let pod = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(admin.clone(), KUBE_SYSTEM)
        .get("cilium-bbbbb")
        .await
        .expect("get pod");
    let since = pod
        .status
        .and_then(|s| s.conditions)
        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time)
        .expect("Ready lastTransitionTime")
        .0;
    let stuck_at = since + k8s_openapi::jiff::SignedDuration::from_secs(4);
    let late = k8s_openapi::jiff::Timestamp::now().duration_since(stuck_at);
    println!(
        "MEASURED stuck rollout: failed {} ms after the moment the rule calls it stuck \
         (the API server keeps lastTransitionTime to the second)",
        late.as_millis()
    );
    // Up to 1 s of it is the truncation to the second; the rest is the poll and, on a busy
    // machine, scheduling (measured 1.23 s once with the suite's three binaries at once).
    assert!(
        late.is_positive() && late < k8s_openapi::jiff::SignedDuration::from_secs(2),
        "{late:?}"
    );
    match &end {
        WaitEnd::Failed(detail) => {
            assert!(detail.contains("rollout stuck"), "{detail}");
            assert!(
                detail.contains("updated pod cilium-bbbbb on k3s-dev-2 not ready"),
                "{detail}"
            );
        }
        other => panic!("expected a failure naming the pod: {other:?} {lines:?}"),
    }
    // It fails when the rule says stuck (4 s after the pod turned unready), by a local
    // timer: no event arrives, and it does not wait for the 60 s timeout. The pending line
    // shows it was judged before that moment, not stuck on the first list.
    println!(
        "MEASURED stuck rollout: failed {} ms after the wait started (stuck_after 4 s)",
        ms(took)
    );
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("cilium-bbbbb on k3s-dev-2 not ready")),
        "{lines:?}"
    );
    assert_observer_only_watched(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_lease_and_agents_pass_on_the_change_they_wait_for() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let observer = client_for(&server.observer_kubeconfig().await).await;
    make_nodes(&admin).await;
    set_node_ready(&admin, "k3s-dev-2", false).await;
    create_vip_lease(
        &admin,
        &VipLease::held_by("k3s-dev-1", Duration::from_secs(60)),
    )
    .await;
    // The agents read their endpoint from a ConfigMap that still names a node.
    create_configmap(
        &admin,
        KUBE_SYSTEM,
        "cilium-endpoint",
        &[("host", "127.0.0.52"), ("port", "6443")],
    )
    .await;
    let env = AgentEnv::from_configmap("cilium-endpoint", "host", "port");
    create_cilium_daemonset(&admin, &env).await;
    for (i, (node, _)) in NODES.iter().enumerate() {
        let p = CiliumPod {
            name: format!("cilium-{i}"),
            node: node.to_string(),
            env: env.clone(),
            ready: true,
        };
        create_cilium_pod(&admin, &p).await;
    }

    // node-ready
    let mut w = start_wait(
        observer.clone(),
        "node-ready k3s-dev-2",
        30,
        WatchSettings::default().stuck_after,
    );
    w.until("k3s-dev-2 NotReady").await;
    // Ready from before the wait, with no kubelet heard from since: not the node back.
    set_node_ready(&admin, "k3s-dev-2", true).await;
    w.until("k3s-dev-2 says Ready, but").await;
    let t0 = Instant::now();
    renew_node_lease(&admin, "k3s-dev-2").await;
    let (end, at, _) = w.end().await;
    assert!(
        matches!(&end, WaitEnd::Met(d) if d.contains("k3s-dev-2 Ready") && d.contains("renewed its Lease")),
        "{end:?}"
    );
    println!(
        "MEASURED node-ready: kubelet Lease renewal sent -> wait returned: {} ms",
        ms(at.saturating_duration_since(t0))
    );
    assert!(at.saturating_duration_since(t0) < Duration::from_secs(3));

    // lease-held: stale until the holder renews.
    let mut w = start_wait(
        observer.clone(),
        "lease-held kube-system/plndr-cp-lock",
        30,
        WatchSettings::default().stuck_after,
    );
    w.until("stale").await;
    let t0 = Instant::now();
    update_vip_lease(&admin, &VipLease::held_by("k3s-dev-1", Duration::ZERO)).await;
    let (end, at, _) = w.end().await;
    match &end {
        WaitEnd::Met(d) => {
            assert!(d.contains("held by k3s-dev-1"), "{d}");
            assert!(d.contains("is server k3s-dev-1 (127.0.0.51)"), "{d}");
        }
        other => panic!("{other:?}"),
    }
    println!(
        "MEASURED lease-held: renewal write sent -> wait returned: {} ms",
        ms(at.saturating_duration_since(t0))
    );
    assert!(at.saturating_duration_since(t0) < Duration::from_secs(3));

    // agents-dial-vip: the ConfigMap moves to the VIP.
    let mut w = start_wait(
        observer.clone(),
        "agents-dial-vip",
        30,
        WatchSettings::default().stuck_after,
    );
    let line = w.until("single-node dependency").await;
    assert!(
        line.contains("3 of 3 agents dial k3s-dev-2's own address 127.0.0.52"),
        "{line}"
    );
    let t0 = Instant::now();
    Api::<ConfigMap>::namespaced(admin.clone(), KUBE_SYSTEM)
        .patch(
            "cilium-endpoint",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"host": VIP}})),
        )
        .await
        .expect("patch configmap");
    let (end, at, _) = w.end().await;
    assert_eq!(
        end,
        WaitEnd::Met(format!("3 of 3 agents dial the VIP {VIP}"))
    );
    println!(
        "MEASURED agents-dial-vip: ConfigMap write sent -> wait returned: {} ms",
        ms(at.saturating_duration_since(t0))
    );
    assert!(at.saturating_duration_since(t0) < Duration::from_secs(3));

    let n = assert_observer_only_watched(&server).await;
    println!("MEASURED node/lease/agents: observer requests over three waits: {n} (list+watch)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_condition_times_out_saying_what_it_last_saw() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let observer = client_for(&server.observer_kubeconfig().await).await;
    make_nodes(&admin).await;
    set_node_ready(&admin, "k3s-dev-3", false).await;
    create_vip_lease(
        &admin,
        &VipLease {
            holder: None,
            ..VipLease::held_by("x", Duration::ZERO)
        },
    )
    .await;
    let env = AgentEnv::literal("127.0.0.53", 6443);
    create_cilium_daemonset(&admin, &env).await;
    let p = CiliumPod {
        name: "cilium-x".into(),
        node: "k3s-dev-3".into(),
        env,
        ready: false,
    };
    create_cilium_pod(&admin, &p).await;
    set_daemonset_status(&admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 1, 0)).await;

    let cases = [
        (
            "daemonset-rolled-out kube-system/cilium",
            "1/3 updated, 3 unavailable: cilium-x on k3s-dev-3 not ready",
        ),
        ("node-ready k3s-dev-3", "k3s-dev-3 NotReady"),
        (
            "agents-dial-vip",
            "1 of 1 agents dial k3s-dev-3's own address 127.0.0.53",
        ),
        ("lease-held kube-system/plndr-cp-lock", "has no holder"),
        (
            "lease-held kube-system/no-such-lease",
            "lease kube-system/no-such-lease does not exist (yet)",
        ),
    ];
    let t0 = Instant::now();
    let running: Vec<_> = cases
        .iter()
        .map(|(c, _)| start_wait(observer.clone(), c, 2, Duration::from_secs(60)))
        .collect();
    for (w, (condition, last)) in running.into_iter().zip(cases) {
        let (end, at, lines) = w.end().await;
        match &end {
            WaitEnd::TimedOut { after, last: seen } => {
                assert_eq!(*after, Duration::from_secs(2));
                assert!(seen.contains(last), "{condition}: {seen} / {lines:?}");
            }
            other => panic!("{condition}: expected a timeout, got {other:?}"),
        }
        assert!(
            end.to_string()
                .starts_with("timed out after 2 s; last seen: "),
            "{end}"
        );
        let took = at.saturating_duration_since(t0);
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(5),
            "{condition}: {took:?}"
        );
    }
    assert_observer_only_watched(&server).await;
}

/// No API server at the kubeconfig's address: the wait keeps retrying (with backoff) and its
/// timeout names what failed. Not a crash, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_times_out_naming_the_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = tempfile::tempdir().expect("temp dir");
    let kc = dir.path().join("gone.kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: gone\n  context:\n    cluster: gone\n    user: u\ncurrent-context: gone\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .expect("kubeconfig");
    let client = client_for(&kc).await;
    let w = start_wait(
        client,
        "node-ready k3s-dev-1",
        2,
        WatchSettings::default().stuck_after,
    );
    let (end, _, lines) = w.end().await;
    match &end {
        WaitEnd::TimedOut { last, .. } => {
            // Its watches (the node, and its kubelet's Lease) each name what failed.
            assert!(
                last.contains("cannot watch node k3s-dev-1 (retrying)")
                    || last.contains("cannot watch lease kube-node-lease/k3s-dev-1 (retrying)"),
                "{last}"
            );
            assert!(last.contains("(Connect)"), "{last}");
        }
        other => panic!("{other:?} {lines:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_wait_promptly() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    let observer = client_for(&server.observer_kubeconfig().await).await;
    make_nodes(&admin).await;
    set_node_ready(&admin, "k3s-dev-1", false).await;
    let mut w = start_wait(
        observer,
        "node-ready k3s-dev-1",
        600,
        WatchSettings::default().stuck_after,
    );
    w.until("k3s-dev-1 NotReady").await;
    let t0 = Instant::now();
    w.cancel.cancel();
    let (end, at, _) = w.end().await;
    let took = at.saturating_duration_since(t0);
    assert!(
        matches!(&end, WaitEnd::Cancelled { last } if last.contains("NotReady")),
        "{end:?}"
    );
    println!(
        "MEASURED cancel: kube-wait returned {} ms after the cancel",
        ms(took)
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
}

// ---------------------------------------------------------------------------------------
// flux-reconcile

fn helm_releases(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), KUBE_SYSTEM, &helm_release_resource())
}

/// kube-system/cilium, Ready from an earlier reconcile (handled long ago).
async fn make_helm_release(admin: &Client) {
    install_flux_crds(admin).await;
    let hr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": KUBE_SYSTEM},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "cilium", "version": "1.18.4",
                 "sourceRef": {"kind": "HelmRepository", "name": "cilium", "namespace": "flux-system"}}}},
    }))
    .expect("HelmRelease");
    helm_releases(admin)
        .create(&PostParams::default(), &hr)
        .await
        .expect("create HelmRelease");
    helm_releases(admin)
        .patch_status(
            "cilium",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
            "observedGeneration": 1,
            "lastHandledReconcileAt": "2026-12-01T08:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                            "message": "old news", "observedGeneration": 1,
                            "lastTransitionTime": "2026-12-01T08:00:01Z"}]}})),
        )
        .await
        .expect("HelmRelease status");
}

/// Plays helm-controller for one request: watches kube-system/cilium until it carries a
/// requestedAt it has not handled, reports Ready=Unknown (in progress), then after 300 ms
/// handles it with `ready` (True or False, with `message`). Returns when it started writing
/// the final status, and the requestedAt it handled.
fn play_flux(
    admin: Client,
    ready: &'static str,
    message: &'static str,
) -> tokio::task::JoinHandle<(Instant, String)> {
    tokio::spawn(async move {
        let api = helm_releases(&admin);
        let cfg = watcher::Config::default().fields("metadata.name=cilium");
        let mut events = std::pin::pin!(kube::runtime::watcher::watcher(api.clone(), cfg));
        loop {
            let ev = events
                .next()
                .await
                .expect("watch open")
                .expect("watch event");
            let obj = match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o,
                _ => continue,
            };
            let Some(at) = obj
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REQUESTED_AT_ANNOTATION))
                .cloned()
            else {
                continue;
            };
            if obj.data["status"]["lastHandledReconcileAt"].as_str() == Some(at.as_str()) {
                continue;
            }
            let generation = obj.metadata.generation.expect("generation");
            let cond = |status: &str, reason: &str, msg: &str| {
                json!({"type": "Ready", "status": status,
                "reason": reason, "message": msg, "observedGeneration": generation,
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()})
            };
            api.patch_status(
                "cilium",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                "conditions": [cond("Unknown", "Progressing", "Reconciliation in progress")]}})),
            )
            .await
            .expect("in-progress status");
            tokio::time::sleep(Duration::from_millis(300)).await;
            let reason = if ready == "True" {
                "UpgradeSucceeded"
            } else {
                "UpgradeFailed"
            };
            let writing = Instant::now();
            api.patch_status(
                "cilium",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                "observedGeneration": generation,
                "lastHandledReconcileAt": at,
                "conditions": [cond(ready, reason, message)]}})),
            )
            .await
            .expect("final status");
            return (writing, at);
        }
    })
}

async fn reconcile(
    client: Client,
    cancel: &CancellationToken,
    lines: mpsc::UnboundedSender<String>,
) -> (Result<flux::Reconciled, WaitError>, Instant) {
    let obj = FluxObject::parse("helmrelease/cilium", Some(KUBE_SYSTEM)).expect("object");
    let progress = move |l: String| {
        let _ = lines.send(l);
    };
    let recorded = support::recorded_start(&step(
        1,
        StepKind::FluxReconcile,
        None,
        None,
        Some(vec!["flux-reconcile".into()]),
    ));
    let r = flux::reconcile(
        client,
        &obj,
        Duration::from_secs(20),
        cancel,
        &progress,
        &recorded.start,
    )
    .await;
    (r, Instant::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_reconcile_waits_for_its_own_request_to_be_handled_and_ready() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    make_helm_release(&admin).await;
    let controller = play_flux(
        admin.clone(),
        "True",
        "Helm upgrade succeeded for release kube-system/cilium.v2 with chart cilium@1.18.4",
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (r, returned) = reconcile(admin.clone(), &CancellationToken::new(), tx).await;
    let (writing, handled) = controller.await.expect("controller");
    let r = r.expect("reconcile ran");
    assert_eq!(
        r.requested_at, handled,
        "the controller handled the value hk-console wrote"
    );
    assert_eq!(
        r.end,
        WaitEnd::Met("HelmRelease kube-system/cilium: Ready (UpgradeSucceeded): Helm upgrade succeeded for release kube-system/cilium.v2 with chart cilium@1.18.4".into())
    );
    let mut lines = Vec::new();
    while let Ok(l) = rx.try_recv() {
        lines.push(l);
    }
    // The old Ready=True did not count, nor did the in-progress state.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Ready=Unknown (Progressing): Reconciliation in progress")),
        "{lines:?}"
    );
    let latency = returned.saturating_duration_since(writing);
    println!(
        "MEASURED flux-reconcile: Ready write sent -> wait returned: {} ms",
        ms(latency)
    );
    assert!(latency < Duration::from_secs(3), "{latency:?}");

    // One merge PATCH of the annotation, by the field manager hk-console; nothing else written.
    server.audit_settle().await;
    let writes: Vec<Value> = server
        .writes_by(ADMIN_USER)
        .into_iter()
        .filter(|e| {
            e.pointer("/objectRef/resource").and_then(Value::as_str) == Some("helmreleases")
        })
        .filter(|e| e.pointer("/objectRef/subresource").is_none())
        .collect();
    let patches: Vec<&Value> = writes.iter().filter(|e| e["verb"] == "patch").collect();
    assert_eq!(patches.len(), 1, "{writes:?}");
    assert!(
        patches[0]["requestURI"]
            .as_str()
            .is_some_and(|u| u.contains("fieldManager=hk-console")),
        "{}",
        patches[0]
    );
    let hr = helm_releases(&admin).get("cilium").await.expect("get");
    assert_eq!(
        hr.metadata.annotations.expect("annotations")[REQUESTED_AT_ANNOTATION],
        r.requested_at
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_reconcile_fails_with_ready_false_and_refuses_without_rights() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    make_helm_release(&admin).await;
    let controller = play_flux(admin.clone(), "False", "Helm upgrade failed for release kube-system/cilium with chart cilium@1.18.4: context deadline exceeded");
    let (tx, _rx) = mpsc::unbounded_channel();
    let (r, _) = reconcile(admin.clone(), &CancellationToken::new(), tx).await;
    controller.await.expect("controller");
    assert_eq!(
        r.expect("reconcile ran").end,
        WaitEnd::Failed("HelmRelease kube-system/cilium: Ready=False (UpgradeFailed): Helm upgrade failed for release kube-system/cilium with chart cilium@1.18.4: context deadline exceeded".into())
    );

    // The read-only observer cannot request a reconcile: a 403, named, and nothing changed.
    let observer = client_for(&server.observer_kubeconfig().await).await;
    let before = helm_releases(&admin).get("cilium").await.expect("get");
    let (tx, _rx) = mpsc::unbounded_channel();
    let (r, _) = reconcile(observer, &CancellationToken::new(), tx).await;
    let e = r.expect_err("a read-only user cannot annotate");
    assert!(e.0.contains("HelmRelease kube-system/cilium: the API server answered 403 Forbidden while annotating it"), "{e}");
    let after = helm_releases(&admin).get("cilium").await.expect("get");
    assert_eq!(
        before.metadata.resource_version,
        after.metadata.resource_version
    );

    // No such object: named, with the CRD it looked in.
    let missing = FluxObject::parse("kustomization/nothing", None).expect("object");
    let recorded = support::recorded_start(&step(
        1,
        StepKind::FluxReconcile,
        None,
        None,
        Some(vec!["flux-reconcile".into()]),
    ));
    let e = flux::request(admin, &missing, "x", &recorded.start)
        .await
        .expect_err("missing");
    assert!(
        e.0.contains("Kustomization flux-system/nothing: not found while reading it"),
        "{e}"
    );
    assert!(
        e.0.contains("kustomizations.kustomize.toolkit.fluxcd.io/v1"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_reconcile_wait_promptly() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    make_helm_release(&admin).await;
    // No controller: nobody will handle the request.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let task = {
        let (admin, cancel) = (admin.clone(), cancel.clone());
        tokio::spawn(async move { reconcile(admin, &cancel, tx).await })
    };
    loop {
        let l = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("progress")
            .expect("line");
        if l.contains("waiting for Flux to handle the request") {
            break;
        }
    }
    let t0 = Instant::now();
    cancel.cancel();
    let (r, at) = task.await.expect("task");
    let took = at.saturating_duration_since(t0);
    let r = r.expect("reconcile ran");
    assert!(matches!(&r.end, WaitEnd::Cancelled { .. }), "{:?}", r.end);
    println!(
        "MEASURED cancel: flux-reconcile wait returned {} ms after the cancel",
        ms(took)
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    // The request was made before the cancel: the annotation stays (Flux acts on it).
    let hr = helm_releases(&admin).get("cilium").await.expect("get");
    assert_eq!(
        hr.metadata.annotations.expect("annotations")[REQUESTED_AT_ANNOTATION],
        r.requested_at
    );
}

// ---------------------------------------------------------------------------------------
// The console's executors, built from a repo

/// dev (kubeconfig `.cache/dev.yaml`) and prod (`.cache/prod.yaml`, never written), all on
/// loopback addresses.
fn two_env_repo(root: &Path) -> Repo {
    let inv = root.join("infra/ansible/inventory");
    std::fs::create_dir_all(&inv).expect("mkdir");
    std::fs::write(
        root.join("hk-console.yaml"),
        "ansible_dir: infra/ansible\ninventory: infra/ansible/inventory/hosts.ini\n\
         environments:\n  dev: { servers: k3s_dev }\n  prod: { servers: k3s_prod }\n",
    )
    .expect("config");
    let mut ini = String::from("[k3s_dev]\n");
    for (n, ip) in NODES {
        ini.push_str(&format!("{n} ansible_host={ip}\n"));
    }
    ini.push_str(&format!(
        "[k3s_dev:vars]\nkube_vip_address={VIP}\nk3s_api_port=6443\n\
         cluster_kubeconfig_name=dev.yaml\nk3s_primary_group=k3s_dev\n\
         [k3s_prod]\nk3s-prod-1 ansible_host=127.0.0.61\n\
         [k3s_prod:vars]\nkube_vip_address=127.0.0.60\nk3s_api_port=6443\n\
         cluster_kubeconfig_name=prod.yaml\nk3s_primary_group=k3s_prod\n"
    ));
    std::fs::write(inv.join("hosts.ini"), ini).expect("inventory");
    Repo::load(root).expect("repo")
}

fn step(
    n: usize,
    kind: StepKind,
    host: Option<&str>,
    condition: Option<&str>,
    command: Option<Vec<String>>,
) -> PlannedStep {
    PlannedStep {
        n,
        id: format!("s{n}"),
        kind,
        host: host.map(str::to_string),
        mutates: kind == StepKind::FluxReconcile,
        gate: None,
        command,
        expect: condition.map(|c| Expect {
            condition: Some(c.to_string()),
            timeout_s: Some(20),
            ..Expect::default()
        }),
        title: String::new(),
        cwd: None,
        source: None,
        blast_radius: None,
        declared_read_only: None,
    }
}

/// Sends `req` to the executor and collects replies until the step's outcome (not
/// StepStarted). Returns (output lines, StepStarted seen, final input).
async fn run_step(
    e: &Arc<dyn hk_console::session::exec::StepExecutor>,
    req: ExecRequest,
    cancel_on: Option<&str>,
) -> (Vec<String>, bool, Input) {
    let (tx, mut rx) = mpsc::channel(256);
    let cancel_req = match &req {
        ExecRequest::Execute {
            tag, step, attempt, ..
        } => ExecRequest::Cancel {
            tag: *tag,
            step: step.clone(),
            attempt: *attempt,
        },
        _ => panic!("run_step takes an Execute"),
    };
    e.handle(req, tx.clone());
    let mut lines = Vec::new();
    // The session records a step's start before the request leaves, so an executor
    // reports none: "started" is whether it got past its own refusals (which end
    // "the step was not started").
    let started = |input: &Input| !matches!(input, Input::StepFinished { error: Some(e), .. } if e.ends_with("the step was not started"));
    loop {
        let reply = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("a reply in 30 s")
            .expect("replies open");
        match reply {
            ExecReply::Output { line, .. } => {
                if cancel_on.is_some_and(|c| line.contains(c)) {
                    e.handle(cancel_req.clone(), tx.clone());
                }
                lines.push(line);
            }
            ExecReply::Outcome {
                input: Input::StepStarted { .. },
                ..
            } => panic!("an executor reported a start: only the session records one"),
            ExecReply::Outcome { input, .. } => return (lines, started(&input), input),
        }
    }
}

async fn verify(e: &Arc<dyn hk_console::session::exec::StepExecutor>, s: &PlannedStep) -> Input {
    let (tx, mut rx) = mpsc::channel(8);
    e.handle(
        ExecRequest::Verify {
            tag: 1,
            step: s.clone(),
            attempt: 1,
        },
        tx,
    );
    match rx.recv().await.expect("verify reply") {
        ExecReply::Outcome { input, .. } => input,
        other => panic!("{other:?}"),
    }
}

fn execute(s: &PlannedStep) -> ExecRequest {
    execute_in(s, "dev")
}

/// The request as the console sends it for a run in `env`.
fn execute_in(s: &PlannedStep, env: &str) -> ExecRequest {
    ExecRequest::Execute {
        tag: 1,
        step: s.clone(),
        attempt: 1,
        authorised: vec![],
        env: env.into(),
        start: support::recorded_start(s).start,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_runs_kube_steps_on_each_environments_cluster() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = two_env_repo(dir.path());

    // No kubeconfig anywhere yet: no kube executor, and a step says which file is missing
    // and where its name came from.
    let node_step = step(
        1,
        StepKind::KubeWait,
        Some("k3s-dev-2"),
        Some("node-ready k3s-dev-2"),
        None,
    );
    let (caps, notices) = capabilities_for_repo(&repo, true);
    let why = caps
        .executor_for(&node_step)
        .expect_err("no kubeconfig, no executor");
    assert!(
        matches!(
            why,
            NoExecutor::Unavailable {
                kind: StepKind::KubeWait,
                ..
            }
        ),
        "{why:?}"
    );
    let text = why.to_string();
    let dev_file = dir.path().join(".cache/dev.yaml");
    assert!(
        text.contains(&format!(
            "kubeconfig {} (from cluster_kubeconfig_name at ",
            dev_file.display()
        )),
        "{text}"
    );
    assert!(text.contains("hosts.ini:"), "{text}");
    assert!(
        notices.iter().any(|n| n.contains("prod.yaml")),
        "{notices:?}"
    );

    let server = ApiServer::start();
    let admin = server.admin_client().await;
    make_nodes(&admin).await;
    set_node_ready(&admin, "k3s-dev-2", false).await;
    std::fs::create_dir_all(dir.path().join(".cache")).expect("mkdir .cache");
    std::fs::copy(server.observer_kubeconfig().await, &dev_file).expect("copy kubeconfig");

    // Observe mode: kube-wait is in the read-only set; flux-reconcile is not there at all.
    let (caps, notices) = capabilities_for_repo(&repo, true);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("environment `prod`") && n.contains("prod.yaml")),
        "{notices:?}"
    );
    let e = Arc::clone(caps.executor_for(&node_step).expect("kube-wait executor"));
    assert!(!e.mutates());
    let flux_argv: Vec<String> = [
        "flux",
        "reconcile",
        "helmrelease",
        "cilium",
        "-n",
        "kube-system",
        "--with-source",
        "--kubeconfig",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dev_file.display().to_string()])
    .collect();
    let flux_step = step(2, StepKind::FluxReconcile, None, None, Some(flux_argv));
    assert!(matches!(
        caps.executor_for(&flux_step),
        Err(NoExecutor::ObserveMode { .. })
    ));

    // A dev step runs on dev's cluster: progress as output, verdict on Verify.
    let t0 = Instant::now();
    let node_ready_later = {
        let admin = admin.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            // The kubelet back: Ready posted and its Lease renewed.
            set_node_ready(&admin, "k3s-dev-2", true).await;
            renew_node_lease(&admin, "k3s-dev-2").await;
        })
    };
    let (lines, started, input) = run_step(&e, execute(&node_step), None).await;
    node_ready_later.await.expect("flip");
    assert!(started);
    assert!(
        matches!(
            input,
            Input::StepFinished {
                exit_code: Some(0),
                error: None,
                ..
            }
        ),
        "{input:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("k3s-dev-2 NotReady")),
        "{lines:?}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("verdict: k3s-dev-2 Ready")),
        "{lines:?}"
    );
    match verify(&e, &node_step).await {
        Input::VerifyResult {
            ok: true, detail, ..
        } => assert!(detail.contains("k3s-dev-2 Ready"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(10));

    // A prod step: prod has no kubeconfig. It fails unstarted, naming the file.
    let prod_step = step(
        3,
        StepKind::KubeWait,
        Some("k3s-prod-1"),
        Some("node-ready k3s-prod-1"),
        None,
    );
    let (_, started, input) = run_step(&e, execute_in(&prod_step, "prod"), None).await;
    assert!(!started);
    match input {
        Input::StepFinished {
            error: Some(err),
            exit_code: None,
            ..
        } => {
            assert!(err.contains("environment `prod`: kubeconfig"), "{err}");
            assert!(
                err.contains("prod.yaml (from cluster_kubeconfig_name at"),
                "{err}"
            );
            assert!(err.ends_with("the step was not started"), "{err}");
        }
        other => panic!("{other:?}"),
    }

    // A step bound to no host goes to the run's environment's cluster (prod here, which
    // has no kubeconfig: refused naming prod's file, never sent to dev's cluster).
    let loose = step(4, StepKind::KubeWait, None, Some("agents-dial-vip"), None);
    let (_, started, input) = run_step(&e, execute_in(&loose, "prod"), None).await;
    assert!(!started);
    assert!(
        matches!(&input, Input::StepFinished { error: Some(err), .. } if err.contains("environment `prod`: kubeconfig")),
        "{input:?}"
    );
    // A step whose own host is in another environment than the run's is refused.
    let (_, started, input) = run_step(&e, execute_in(&node_step, "prod"), None).await;
    assert!(!started);
    assert!(
        matches!(&input, Input::StepFinished { error: Some(err), .. } if err.contains("belongs to environment `dev` but the run is for `prod`")),
        "{input:?}"
    );

    // The console's cancel reaches a running wait and stops it promptly.
    let lease_step = step(
        5,
        StepKind::KubeWait,
        Some("k3s-dev-1"),
        Some("lease-held kube-system/nothing"),
        None,
    );
    let t0 = Instant::now();
    let (_, started, input) =
        run_step(&e, execute(&lease_step), Some("does not exist (yet)")).await;
    assert!(started);
    assert!(
        matches!(&input, Input::Cancelled { reason, .. } if reason.contains("operator's request")),
        "{input:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_observer_only_watched(&server).await;

    // Operate mode with an admin kubeconfig: flux-reconcile, placed by the kubeconfig its
    // planned argv names, runs against dev while this test plays Flux.
    std::fs::copy(server.admin_kubeconfig(), &dev_file).expect("copy admin kubeconfig");
    make_helm_release(&admin).await;
    let (caps, _) = capabilities_for_repo(&repo, false);
    let fx = Arc::clone(caps.executor_for(&flux_step).expect("flux executor"));
    assert!(fx.mutates());
    let controller = play_flux(admin.clone(), "True", "Helm upgrade succeeded");
    let (lines, started, input) = run_step(&fx, execute(&flux_step), None).await;
    controller.await.expect("controller");
    assert!(started);
    assert!(
        matches!(
            input,
            Input::StepFinished {
                exit_code: Some(0),
                error: None,
                ..
            }
        ),
        "{input:?} {lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(REQUESTED_AT_ANNOTATION)),
        "{lines:?}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("Ready (UpgradeSucceeded): Helm upgrade succeeded")),
        "{lines:?}"
    );
}
