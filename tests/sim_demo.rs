//! The demo's simulated homelab, reached through hk-console's REAL clients: the kube client
//! built from the kubeconfig the inventory names, and the VPN look over SSH.

use crate::demo_common;

use std::sync::Arc;

use demo_common::start;
use hk_console::checks::live::{Rule, Severity};
use hk_console::cluster::{client, kube_target, KubeOverrides};
use hk_console::exec::settings::{SshConfig, SshDefaults};
use hk_console::observe::vpn::{look, Gateways};
use hk_console::sim::demo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

fn gateways(d: &demo::Demo) -> Gateways {
    Gateways::for_repo_with(
        &d.repo,
        d.ssh_options(),
        &SshConfig::empty(),
        &SshDefaults::from_env(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_kube_and_vpn_through_the_real_clients() {
    let (_dir, d) = start("healthy").await;
    for env in ["dev", "prod"] {
        let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
        assert!(t.kubeconfig[0].starts_with(&d.dir), "{t}");
        let c = client(&t).await.expect("client");
        let pods: Api<Pod> = Api::namespaced(c, "kube-system");
        let list = pods
            .list(&ListParams::default().labels("k8s-app=cilium"))
            .await
            .expect("list cilium pods");
        assert_eq!(list.items.len(), 3, "{env}");
        let vip = d
            .repo
            .environment(env)
            .expect("env")
            .vip
            .get()
            .expect("vip")
            .to_string();
        for p in &list.items {
            let envs = p.spec.as_ref().expect("spec").containers[0]
                .env
                .clone()
                .unwrap_or_default();
            let host = envs
                .iter()
                .find(|e| e.name == "KUBERNETES_SERVICE_HOST")
                .and_then(|e| e.value.clone());
            assert_eq!(host.as_deref(), Some(vip.as_str()), "{env}");
        }
    }
    let g = gateways(&d);
    let v = look(&d.repo, &[], &g).await;
    assert_eq!(v.gateways.len(), 2, "{v:#?}");
    for gw in &v.gateways {
        for verdict in &gw.verdicts {
            assert_eq!(verdict.severity, Severity::Ok, "{verdict:?}");
        }
    }
    assert!(
        v.across.iter().all(|x| x.severity == Severity::Ok),
        "{:#?}",
        v.across
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eviction_loop_is_named_by_the_vpn_pane() {
    let (_dir, d) = start("vpn-eviction-loop").await;
    let g = Arc::new(gateways(&d));
    let v = look(&d.repo, &[], &g).await;
    let evictions: Vec<_> = v
        .across
        .iter()
        .filter(|x| x.rule == Rule::VpnEvictionLoop && x.severity == Severity::Critical)
        .collect();
    assert_eq!(evictions.len(), 1, "{:#?}", v);
    let msg = &evictions[0].message;
    for host in ["k3s-dev-3", "k3s-prod-3"] {
        assert!(msg.contains(host), "{msg}");
    }
    assert!(
        v.gateways
            .iter()
            .flat_map(|g| &g.verdicts)
            .any(|x| x.rule == Rule::VpnFlapping && x.severity != Severity::Ok),
        "{v:#?}"
    );
}

/// The kube panes of `env` as `observe --once` sees them.
async fn kube_look(d: &demo::Demo, env: &str) -> hk_console::observe::once::KubePanes {
    let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let topo = hk_console::cluster::env_topology(&d.repo, env).expect("topology");
    let settings = hk_console::cluster::watch_settings(&d.repo, env).expect("settings");
    hk_console::observe::once::look_once(&c, &topo, &settings).await
}

/// Poll the kube panes of `env` until `ok` holds (or fail after `secs`, showing the last).
async fn until(
    d: &demo::Demo,
    env: &str,
    secs: u64,
    ok: impl Fn(&hk_console::observe::once::KubePanes) -> bool,
) -> hk_console::observe::once::KubePanes {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let p = kube_look(d, env).await;
        if ok(&p) {
            return p;
        }
        if std::time::Instant::now() > deadline {
            panic!("{env}: condition not reached in {secs}s; last look: {p:#?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// What the runbook's flux-reconcile step asks of Flux: the requestedAt annotation.
async fn request_reconcile(d: &demo::Demo, env: &str) {
    use kube::api::{DynamicObject, Patch, PatchParams};
    use kube::discovery::ApiResource;
    let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let ar = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "helm.toolkit.fluxcd.io",
        "v2",
        "HelmRelease",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(c, "kube-system", &ar);
    api.patch(
        "cilium",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            "reconcile.fluxcd.io/requestedAt": "2026-12-02T19:00:00Z"}}})),
    )
    .await
    .expect("annotate the HelmRelease");
}

fn critical(vs: &[hk_console::checks::live::Verdict]) -> Vec<String> {
    vs.iter()
        .filter(|v| v.severity == Severity::Critical)
        .map(|v| v.message.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_on_node_ip_then_a_reconcile_moves_every_agent_to_the_vip_one_node_at_a_time() {
    let (_dir, d) = start("agents-on-node-ip").await;
    let before = kube_look(&d, "prod").await;
    let crit = critical(&before.agents.verdicts);
    assert!(
        crit.iter()
            .any(|m| m.contains("single-node dependency") && m.contains("k3s-prod-1")),
        "{crit:#?}"
    );
    assert!(critical(&kube_look(&d, "dev").await.agents.verdicts).is_empty());
    request_reconcile(&d, "prod").await;
    // While it rolls, never more than one agent is down.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let p = kube_look(&d, "prod").await;
        let unready = p.agents.agents.iter().filter(|a| !a.ready).count();
        assert!(unready <= 1, "{:#?}", p.agents);
        if critical(&p.agents.verdicts).is_empty()
            && p.agents.agents.len() == 3
            && p.agents.agents.iter().all(|a| a.ready)
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{p:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let done = until(&d, "prod", 10, |p| {
        p.rollout
            .state
            .as_ref()
            .is_some_and(|s| matches!(s, hk_console::checks::live::RolloutState::RolledOut))
    })
    .await;
    assert!(critical(&done.agents.verdicts).is_empty(), "{done:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_stuck_halts_at_the_unready_pod() {
    let (_dir, d) = start("rollout-stuck").await;
    request_reconcile(&d, "prod").await;
    let unready_on_2 = |p: &hk_console::observe::once::KubePanes| {
        p.rollout
            .pods
            .iter()
            .any(|r| r.node.as_deref() == Some("k3s-prod-2") && r.updated && !r.ready)
    };
    let p = until(&d, "prod", 20, unready_on_2).await;
    let warn = p
        .rollout
        .verdicts
        .iter()
        .find(|v| v.severity != Severity::Ok)
        .expect("the rollout is not converged");
    assert!(warn.message.contains("k3s-prod-2"), "{warn:?}");
    // Give the controller time to (wrongly) move on: it must not pass the unready pod.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let p = kube_look(&d, "prod").await;
    assert!(unready_on_2(&p), "{:#?}", p.rollout);
    let on3 = p
        .rollout
        .pods
        .iter()
        .find(|r| r.node.as_deref() == Some("k3s-prod-3"))
        .expect("agent on k3s-prod-3");
    assert!(!on3.updated && on3.ready, "{on3:?}");
    assert!(
        matches!(
            p.rollout.state,
            Some(hk_console::checks::live::RolloutState::Rolling {
                updated: 2,
                desired: 3
            })
        ),
        "{:#?}",
        p.rollout
    );
    // (Stuck, critical, is the rules' verdict once the pod has been unready for the
    // configured 5 minutes: tested in tests/kube_watch.rs and crates/hk-engine/tests/live_rules.rs.)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vip_failover_hands_the_lease_to_the_next_server() {
    let (_dir, d) = start("vip-failover").await;
    let first = kube_look(&d, "dev").await;
    assert_eq!(first.vip.holder.as_deref(), Some("k3s-dev-1"));
    let p = until(&d, "dev", 30, |p| {
        p.vip.holder.as_deref() == Some("k3s-dev-2") && p.vip.transitions == Some(1)
    })
    .await;
    assert!(
        p.nodes
            .verdicts
            .iter()
            .any(|v| v.subject.contains("k3s-dev-1") && v.severity != Severity::Ok),
        "the dead holder's node is not Ready: {:#?}",
        p.nodes
    );
}

/// The healthy demo's own copy of the repo passes `hk-console check`: every environment's
/// API server listens on the one port the shared Cilium HelmRelease names, so the copy
/// agrees with itself (it used to fail with a helmrelease-port-equals-api-port violation
/// per environment, and the console's header said "dev critical"). Two demos started at
/// once (as parallel tests do) each get a port of their own, valid on all their VIPs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_demo_repo_passes_its_own_parity_check() {
    let ((_a, da), (_b, db)) = tokio::join!(start("healthy"), start("healthy"));
    for d in [&da, &db] {
        let ports: std::collections::BTreeSet<u16> =
            d.kubes.values().map(|k| k.addr().port()).collect();
        assert_eq!(
            ports.len(),
            1,
            "one API port for every environment: {ports:?}"
        );
        let port = ports.iter().next().copied().expect("a port").to_string();
        let hr = std::fs::read_to_string(d.dir.join("platform/cilium/helmrelease.yaml"))
            .expect("read the demo's HelmRelease");
        assert!(
            hr.lines()
                .any(|l| l.trim() == format!("k8sServicePort: {port}")),
            "the HelmRelease names the demo's port {port}:\n{hr}"
        );
        for env in &d.repo.environments {
            assert_eq!(env.api_port.get(), Some(port.as_str()), "{}", env.name);
            // The kubeconfig dials the VIP (which the serving certificate names) on that port.
            let kc = std::fs::read_to_string(demo_common::kubeconfig(&d.dir, &env.name))
                .expect("read kubeconfig");
            let vip = env.vip.get().expect("vip");
            assert!(
                kc.contains(&format!("server: https://{vip}:{port}")),
                "{}: {kc}",
                env.name
            );
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hk-console"))
            .args(["check", "--repo"])
            .arg(&d.dir)
            .output()
            .expect("run hk-console check");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("parity: clean"), "{text}");
        assert!(!text.contains("helmrelease-port-equals-api-port"), "{text}");
    }
    let (pa, pb) = (
        da.kubes.values().next().expect("a kube").addr().port(),
        db.kubes.values().next().expect("a kube").addr().port(),
    );
    assert_ne!(pa, pb, "two demos on the same VIPs cannot share a port");
}
