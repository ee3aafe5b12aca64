//! The demo's simulated homelab, reached through hk-console's REAL clients: the kube client
//! built from the kubeconfig the inventory names, and the VPN look over SSH.

use std::sync::Arc;

use hk_console::checks::live::{Rule, Severity};
use hk_console::cluster::{client, kube_target, KubeOverrides};
use hk_console::exec::settings::{SshConfig, SshDefaults};
use hk_console::observe::vpn::{look, Gateways};
use hk_console::sim::demo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

async fn start(name: &str) -> (tempfile::TempDir, demo::Demo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start(name, dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo {name}: {e}"));
    (dir, d)
}

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
