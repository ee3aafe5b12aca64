//! The demo serves the repo's Flux objects, read with the real kubectl: the overlay's Flux
//! Kustomization (in its own namespace, Ready), the HelmRelease it applies with the overlay's
//! substitution and the value the agents run now, a reconcile request on either answered (the
//! release's value moving with the upgrade), and a Kustomization whose objects cannot be told
//! served Ready=Unknown with the reason, never as if reconciled.

use crate::demo_common;

use std::path::Path;

use demo_common::{kubeconfig, kubectl, until};
use hk_sim::demo;

fn get(kc: &Path, args: &[&str]) -> String {
    let (out, err, code) = kubectl(kc, args);
    assert_eq!(code, Some(0), "kubectl {args:?}: {err}");
    out
}

/// The VIP of `env` as the demo placed it (the kubeconfig's server host).
fn vip(kc: &Path) -> String {
    let text = std::fs::read_to_string(kc).expect("kubeconfig");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .expect("server line");
    server.rsplit_once(':').expect("host:port").0.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repos_kustomization_and_release_are_served_and_reconciled() {
    let (dir, _d) = demo_common::start("agents-on-node-ip").await;
    let kc = kubeconfig(dir.path(), "prod");
    let vip = vip(&kc);

    let ks = get(&kc, &["get", "kustomizations", "-A"]);
    let row = ks
        .lines()
        .find(|l| l.starts_with("flux-system") && l.contains("platform"))
        .unwrap_or_else(|| panic!("no flux-system/platform:\n{ks}"));
    assert!(row.contains("True"), "{ks}");
    assert!(row.contains("Applied revision"), "{ks}");
    assert!(get(&kc, &["get", "ns", "flux-system", "-o", "name"]).contains("namespace/flux-system"));

    // The repo's release, with its values: the agents dial their own node before the
    // reconcile (the scenario), the VIP after it (the repo's overlay value).
    let values = get(
        &kc,
        &[
            "get",
            "hr",
            "-n",
            "kube-system",
            "cilium",
            "-o",
            "jsonpath={.spec.values}",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&values).expect("values json");
    assert_eq!(v["kubeProxyReplacement"], true, "{values}");
    assert_eq!(v["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 1);
    assert!(v["k8sServicePort"].is_number(), "{values}");
    let before = v["k8sServiceHost"].as_str().expect("host").to_string();
    assert_ne!(
        before, vip,
        "agents-on-node-ip: the agents dial a node, not the VIP"
    );

    get(
        &kc,
        &[
            "annotate",
            "hr",
            "-n",
            "kube-system",
            "cilium",
            "--overwrite",
            "reconcile.fluxcd.io/requestedAt=t1",
        ],
    );
    until(20, "the release's value moves to the VIP", || {
        let host = get(
            &kc,
            &[
                "get",
                "hr",
                "-n",
                "kube-system",
                "cilium",
                "-o",
                "jsonpath={.spec.values.k8sServiceHost} {.status.lastHandledReconcileAt}",
            ],
        );
        (host.trim() == format!("{vip} t1")).then_some(host)
    });

    get(
        &kc,
        &[
            "annotate",
            "ks",
            "-n",
            "flux-system",
            "platform",
            "--overwrite",
            "reconcile.fluxcd.io/requestedAt=t2",
        ],
    );
    until(10, "the Kustomization's reconcile is answered", || {
        let at = get(
            &kc,
            &[
                "get",
                "ks",
                "-n",
                "flux-system",
                "platform",
                "-o",
                "jsonpath={.status.lastHandledReconcileAt}",
            ],
        );
        (at.trim() == "t2").then_some(at)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kustomization_that_cannot_be_told_is_not_shown_reconciled() {
    // The sample repo, with prod's variables coming from a Secret the demo cannot read.
    let src = tempfile::tempdir().expect("tempdir");
    let sample = hk_test_support::root().join("inventory");
    let out = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", sample.display()))
        .arg(src.path())
        .output()
        .expect("cp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let platform = src.path().join("clusters/prod/platform.yaml");
    let text = std::fs::read_to_string(&platform).expect("platform.yaml");
    let text = text.replace(
        "  postBuild:\n",
        "  postBuild:\n    substituteFrom:\n      - kind: Secret\n        name: cluster-vars\n",
    );
    assert!(
        text.contains("cluster-vars"),
        "the sample's platform.yaml changed shape"
    );
    std::fs::write(&platform, text).expect("write");

    let dir = tempfile::tempdir().expect("tempdir");
    let _d = demo::start_from("healthy", dir.path(), Some(src.path()))
        .await
        .unwrap_or_else(|e| panic!("demo --repo: {e}"));
    let kc = kubeconfig(dir.path(), "prod");
    let status = get(
        &kc,
        &["get", "ks", "-n", "flux-system", "platform", "-o",
            "jsonpath={.status.conditions[0].status} {.status.conditions[0].reason} {.status.conditions[0].message}"],
    );
    assert!(status.starts_with("Unknown NotSimulated "), "{status}");
    assert!(status.contains("substituteFrom"), "{status}");
    assert!(status.contains("platform.yaml"), "{status}");
    // The release is still there (the simulation's own), so the panes keep working.
    get(&kc, &["get", "hr", "-n", "kube-system", "cilium"]);
}
