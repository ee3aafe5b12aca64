//! The gate policy's preview of a Flux reconcile against a REAL kube-apiserver (built by
//! tests/apiserver/, run by crates/hk-sim/tests/support/apiserver.rs) with Flux's CRDs: it reads the
//! HelmRelease, says the revision it last applied and what it will reconcile to, that its
//! spec changed since, and the DaemonSet it rolls with its maxUnavailable; and it writes
//! nothing.
use crate::support;

use hk_console::exec::kube::flux::{self, FluxObject};
use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use support::apiserver::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_reads_revision_spec_change_and_the_daemonset_it_rolls_and_writes_nothing() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    install_flux_crds(&admin).await;
    let hrs: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), KUBE_SYSTEM, &helm_release_resource());
    let hr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": KUBE_SYSTEM},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "cilium", "version": "1.18.4",
                 "sourceRef": {"kind": "HelmRepository", "name": "cilium", "namespace": "flux-system"}}}},
    }))
    .expect("HelmRelease");
    hrs.create(&PostParams::default(), &hr)
        .await
        .expect("create");
    // The values changed in git and the Kustomization applied them: a new generation that
    // helm-controller has not reconciled yet.
    hrs.patch(
        "cilium",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"values": {"k8sServiceHost": "192.168.2.9"}}})),
    )
    .await
    .expect("bump generation");
    hrs.patch_status(
        "cilium",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "observedGeneration": 1,
            "helmChart": "flux-system/kube-system-cilium",
            "history": [{"chartName": "cilium", "chartVersion": "1.18.2",
                         "configDigest": "sha256:0ld", "name": "cilium", "namespace": KUBE_SYSTEM,
                         "version": 3, "status": "deployed", "digest": "sha256:x",
                         "firstDeployed": "2026-09-01T00:00:00Z", "lastDeployed": "2026-09-06T00:00:00Z"}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                            "message": "ok", "observedGeneration": 1,
                            "lastTransitionTime": "2026-12-01T08:00:01Z"}]}})),
    )
    .await
    .expect("status");
    // The DaemonSet helm-controller applied, with its origin labels; and one it did not.
    create_cilium_daemonset(&admin, &AgentEnv::literal("192.168.2.10", 6443)).await;
    let dss: Api<DaemonSet> = Api::namespaced(admin.clone(), KUBE_SYSTEM);
    dss.patch(
        "cilium",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {
            "helm.toolkit.fluxcd.io/name": "cilium",
            "helm.toolkit.fluxcd.io/namespace": KUBE_SYSTEM}}})),
    )
    .await
    .expect("label");
    set_daemonset_status(&admin, KUBE_SYSTEM, "cilium", &rollout_status(3, 3, 3)).await;

    server.audit_settle().await;
    let writes_before = server.writes_by(ADMIN_USER).len();
    let obj = FluxObject::parse("helmrelease/cilium", Some(KUBE_SYSTEM)).expect("object");
    let p = flux::preview(admin.clone(), &obj, None)
        .await
        .expect("preview");
    server.audit_settle().await;
    assert_eq!(
        server.writes_by(ADMIN_USER).len(),
        writes_before,
        "the preview wrote something"
    );

    let text = p.lines.join("\n");
    println!("{text}");
    assert_eq!(p.lines[0], "object: HelmRelease kube-system/cilium");
    assert!(
        text.contains("revision now: chart cilium 1.18.2, values sha256:0ld"),
        "{text}"
    );
    // No HelmChart CRD on this server: the spec's chart is said, with why.
    assert!(
        text.contains("reconciles to: chart cilium 1.18.4 as the spec asks (HelmChart flux-system/kube-system-cilium could not be read"),
        "{text}"
    );
    assert!(
        text.contains("spec: changed since Flux last reconciled it (generation 2, reconciled 1)"),
        "{text}"
    );
    assert_eq!(p.daemonsets.len(), 1, "{text}");
    assert_eq!(
        p.summary("HelmRelease kube-system/cilium"),
        "every cilium-agent on 3 nodes (DaemonSet kube-system/cilium, 3 ready now), one at a time (maxUnavailable 1)"
    );

    // Issue 29: with what the overlay renders, the values that change, compared with what
    // the release says and what its pods run (two agents still on a node's address).
    for (i, (node, host)) in [
        ("n1", "192.168.2.10"),
        ("n2", "192.168.2.10"),
        ("n3", "192.168.2.9"),
    ]
    .iter()
    .enumerate()
    {
        create_cilium_pod(
            &admin,
            &CiliumPod {
                name: format!("cilium-{i}"),
                node: node.to_string(),
                env: AgentEnv::literal(host, 6443),
                ready: true,
            },
        )
        .await;
    }
    let rendered = flux::Rendered {
        overlay: "clusters/prod".into(),
        object: Ok(
            json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "cilium", "namespace": KUBE_SYSTEM},
            "spec": {"chart": {"spec": {"chart": "cilium", "version": "1.18.4"}},
                     "values": {"k8sServiceHost": "192.168.2.9", "k8sServicePort": "6443"}}}),
        ),
        applies: None,
    };
    let p = flux::preview(admin.clone(), &obj, Some(&rendered))
        .await
        .expect("preview with the overlay");
    let text = p.lines.join("\n");
    println!("{text}");
    assert!(text.contains("chart: 1.18.2 now -> 1.18.4 next"), "{text}");
    assert!(
        text.contains(
            "  k8sServiceHost: 192.168.2.10 / 192.168.2.9 -> 192.168.2.9 (the pods' \
             KUBERNETES_SERVICE_HOST now: 192.168.2.10 on 2 pods, 192.168.2.9 on 1 pod; the \
             release in the cluster already says 192.168.2.9)"
        ),
        "{text}"
    );
    // The release sets no port; the overlay does: a change, said as one.
    assert!(
        text.contains(
            "  k8sServicePort: (unset) -> 6443 in the release (the pods' KUBERNETES_SERVICE_PORT \
             already: 6443 on 3 pods)"
        ),
        "{text}"
    );
    // An overlay that does not render says so, never "no change".
    let broken = flux::Rendered {
        overlay: "clusters/prod".into(),
        object: Err("clusters/prod/kustomization.yaml:3: no such resource".into()),
        applies: None,
    };
    let p = flux::preview(admin.clone(), &obj, Some(&broken))
        .await
        .expect("preview with a broken overlay");
    let text = p.lines.join("\n");
    assert!(
        text.contains("values next: unknown: the overlay clusters/prod could not be rendered: clusters/prod/kustomization.yaml:3"),
        "{text}"
    );
    assert!(!text.contains("changes no value"), "{text}");
    server.audit_settle().await;
    assert_eq!(
        server.writes_by(ADMIN_USER).len(),
        writes_before + 6,
        "the previews wrote something (the 6 writes are the test's own pods and their status)"
    );

    // A suspended object is refused: Flux would not reconcile it.
    hrs.patch(
        "cilium",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .expect("suspend");
    let e = flux::preview(admin.clone(), &obj, None)
        .await
        .expect_err("suspended");
    assert!(e.to_string().contains("suspended"), "{e}");
    // A missing object is an error naming it.
    let gone = FluxObject::parse("helmrelease/nope", Some(KUBE_SYSTEM)).expect("object");
    let e = flux::preview(admin, &gone, None)
        .await
        .expect_err("missing");
    assert!(
        e.to_string().contains("HelmRelease kube-system/nope"),
        "{e}"
    );
}
