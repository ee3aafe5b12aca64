//! The same kubectl commands against the demo's simulated API server and against a real
//! kube-apiserver (crates/hk-sim/tests/support/apiserver.rs) holding the same objects (copied from the
//! simulation's store): the tables have the same columns and, but for the ages, the same
//! cells; `auth can-i` gives the same verdicts.
//! Missing kube-apiserver/etcd/kubectl = FAIL with the build hint.

use crate::demo_common;
use crate::support;

use std::time::{Duration, Instant};

use demo_common::kubectl;
use hk_sim::demo;
use hk_sim::kube::resources::RESOURCES;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::Client;
use serde_json::{json, Value};
use support::apiserver::ApiServer;

/// The CRDs of the simulation's custom resources, with its printer columns, on the real
/// server (so both derive their Table from the same columns).
async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for r in RESOURCES.iter().filter(|r| r.custom) {
        let columns: Vec<Value> = r
            .printer_columns
            .iter()
            .map(|c| {
                json!({"name": c.name, "type": c.type_, "jsonPath": c.json_path,
                "priority": c.priority})
            })
            .collect();
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", r.plural, r.group)},
            "spec": {"group": r.group, "scope": "Namespaced",
                "names": {"kind": r.kind, "listKind": format!("{}List", r.kind), "plural": r.plural,
                    "singular": r.singular, "shortNames": r.short_names},
                "versions": [{"name": r.version, "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .expect("a CRD");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    let t0 = Instant::now();
    for r in RESOURCES.iter().filter(|r| r.custom) {
        let name = format!("{}.{}", r.plural, r.group);
        loop {
            let c = crds.get(&name).await.expect("get CRD");
            let est = c.status.and_then(|s| s.conditions).unwrap_or_default();
            if est
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
            {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{name} not Established"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Copy one object of the simulation to the real server: created without the fields the
/// server sets, then its status written through the status subresource.
async fn copy(client: &Client, obj: &Value) {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let res = RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
        .expect("a served kind");
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), res.plural);
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let mut body = obj.clone();
    let meta = body["metadata"].as_object_mut().expect("metadata");
    for f in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        meta.remove(f);
    }
    let status = body.as_object_mut().and_then(|m| m.remove("status"));
    let dynamic: DynamicObject = serde_json::from_value(body).expect("a DynamicObject");
    let name = dynamic.metadata.name.clone().expect("name");
    api.create(&PostParams::default(), &dynamic)
        .await
        .unwrap_or_else(|e| panic!("create {kind} {name} on the real server: {e}"));
    if let Some(s) = status.filter(|_| res.status) {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": s})),
        )
        .await
        .unwrap_or_else(|e| panic!("status of {kind} {name} on the real server: {e}"));
    }
}

/// The header's column names and where each starts (kubectl aligns cells under them).
fn columns(header: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let b = header.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b' ' && (i == 0 || (i >= 2 && &b[i - 2..i] == b"  ")) {
            let start = i;
            let mut end = i;
            while end < b.len() && !(b[end] == b' ' && b.get(end + 1) == Some(&b' ')) {
                end += 1;
            }
            out.push((start, header[start..end].trim().to_string()));
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Each row as (column, cell), the time-dependent columns left out.
fn cells(out: &str) -> (Vec<String>, Vec<Vec<(String, String)>>) {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let cols = columns(header);
    let names: Vec<String> = cols.iter().map(|(_, n)| n.clone()).collect();
    let rows = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            cols.iter()
                .enumerate()
                .filter(|(_, (_, n))| {
                    !matches!(
                        n.as_str(),
                        "AGE" | "LAST SEEN" | "FIRST SEEN" | "CREATED AT"
                    )
                })
                .map(|(i, (start, n))| {
                    let end = cols.get(i + 1).map_or(l.len(), |c| c.0.min(l.len()));
                    let cell = l.get((*start).min(l.len())..end).unwrap_or("").trim();
                    (n.clone(), cell.to_string())
                })
                .collect()
        })
        .collect();
    (names, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_the_simulation_as_a_real_server() {
    let real = ApiServer::start();
    let admin = real.admin_client().await;
    install_crds(&admin).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let sim_kc = demo_common::kubeconfig(&d.dir, "prod");
    // Some history to show: a pod deleted, the DaemonSet controller's replacement.
    let kc = sim_kc.clone();
    tokio::task::spawn_blocking(move || {
        let (o, e, code) = kubectl(&kc, &["delete", "pod", "-n", "kube-system", "cilium-g1-n3"]);
        assert_eq!(code, Some(0), "{o}{e}");
        let (o, e, code) = kubectl(
            &kc,
            &[
                "wait",
                "-n",
                "kube-system",
                "--for=condition=Ready",
                "pod",
                "-l",
                "k8s-app=cilium",
                "--timeout=20s",
            ],
        );
        assert_eq!(code, Some(0), "{o}{e}");
        // The READY column counts ready containers, which the simulation sets a look after
        // the Ready condition: copied between the two, the real server kept `0/1` (seen
        // once in a full run under load). Wait for the containers too.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let (o, e, code) = kubectl(
                &kc,
                &[
                    "get",
                    "pods",
                    "-n",
                    "kube-system",
                    "-l",
                    "k8s-app=cilium",
                    "-o",
                    "jsonpath={.items[*].status.containerStatuses[*].ready}",
                ],
            );
            assert_eq!(code, Some(0), "{o}{e}");
            if !o.trim().is_empty() && !o.contains("false") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "cilium's containers never all ready: {o}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    })
    .await
    .expect("delete a pod");
    let store = d.kubes["prod"].store().clone();
    // The namespaces the simulation adds (Flux's, for the repo's Kustomizations) first.
    for ns in store.objects("v1", "Namespace", None).expect("namespaces") {
        let name = ns
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if name != "default" && !name.starts_with("kube-") {
            copy(&admin, &ns).await;
        }
    }
    let copied = [
        ("v1", "Node", None),
        ("coordination.k8s.io/v1", "Lease", Some("kube-node-lease")),
        ("coordination.k8s.io/v1", "Lease", Some("kube-system")),
        ("apps/v1", "DaemonSet", Some("kube-system")),
        ("v1", "Pod", Some("kube-system")),
        (
            "helm.toolkit.fluxcd.io/v2",
            "HelmRelease",
            Some("kube-system"),
        ),
        ("v1", "Event", Some("kube-system")),
        (
            "kustomize.toolkit.fluxcd.io/v1",
            "Kustomization",
            Some("flux-system"),
        ),
    ];
    for (av, kind, ns) in copied {
        for o in store.objects(av, kind, ns).expect("served kind") {
            copy(&admin, &o).await;
        }
    }
    // The simulation's `kubernetes` slice holds loopback addresses, which a real server
    // refuses: the same slice of other addresses goes into both instead.
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "hk-compare", "namespace": "default"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["192.0.2.1"]}, {"addresses": ["192.0.2.2"]},
            {"addresses": ["192.0.2.3"]}, {"addresses": ["192.0.2.4"]}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}, {"name": "x", "protocol": "TCP"}]});
    copy(&admin, &slice).await;
    copy(&d.kubes["prod"].client().await.expect("sim client"), &slice).await;
    let real_kc = real.admin_kubeconfig();
    let real_ro = real.observer_kubeconfig().await;
    let sim_ro = d.dir.join(".cache").join("readonly").join(
        demo_common::kubeconfig(&d.dir, "prod")
            .file_name()
            .expect("a kubeconfig file name"),
    );
    tokio::task::spawn_blocking(move || {
        let commands: &[&[&str]] = &[
            &["get", "nodes"],
            &["get", "nodes", "-o", "wide"],
            &["get", "pods", "-n", "kube-system"],
            &["get", "pods", "-n", "kube-system", "-o", "wide"],
            &["get", "ds", "-n", "kube-system"],
            &["get", "ds", "-n", "kube-system", "-o", "wide"],
            &["get", "leases", "-n", "kube-system"],
            &["get", "leases", "-n", "kube-node-lease"],
            &["get", "ns"],
            &["get", "hr", "-n", "kube-system"],
            &[
                "get",
                "helmreleases.helm.toolkit.fluxcd.io",
                "-A",
                "-o",
                "wide",
            ],
            &["get", "kustomizations", "-A"],
            &["get", "ks", "-n", "flux-system", "-o", "wide"],
            &["get", "events", "-n", "kube-system"],
            &["get", "events", "-n", "kube-system", "-o", "wide"],
            &["get", "svc", "-n", "default"],
            &["get", "svc", "-n", "default", "-o", "wide"],
            &["get", "endpointslices", "-n", "default", "hk-compare"],
            // Both have the Flux CRDs (the simulation builds them in).
            &["get", "crd"],
        ];
        for args in commands {
            let (so, se, sc) = kubectl(&sim_kc, args);
            let (ro, re, rc) = kubectl(&real_kc, args);
            assert_eq!(sc, Some(0), "sim: kubectl {args:?}: {so}{se}");
            assert_eq!(rc, Some(0), "real: kubectl {args:?}: {ro}{re}");
            let (sh, srows) = cells(&so);
            let (rh, rrows) = cells(&ro);
            assert_eq!(
                sh, rh,
                "kubectl {args:?} columns\n--- sim:\n{so}--- real:\n{ro}"
            );
            // The real server has objects of its own (its identity Lease `apiserver-...` in
            // kube-system, as k3s has); every other row must be the same.
            let theirs: Vec<&Vec<(String, String)>> = rrows
                .iter()
                .filter(|r| !r.iter().any(|(_, c)| c.starts_with("apiserver-")))
                .collect();
            let ours: Vec<&Vec<(String, String)>> = srows.iter().collect();
            assert_eq!(
                ours, theirs,
                "kubectl {args:?} cells\n--- sim:\n{so}--- real:\n{ro}"
            );
            assert!(!srows.is_empty(), "kubectl {args:?}: no rows\n{so}");
        }
        // The same verdicts for the admin of each.
        let verdicts: &[&[&str]] = &[
            &["auth", "can-i", "list", "pods", "-n", "kube-system"],
            &["auth", "can-i", "delete", "daemonsets", "-A"],
            &["auth", "can-i", "patch", "helmreleases", "-A"],
        ];
        for args in verdicts {
            let (so, _, _) = kubectl(&sim_kc, args);
            let (ro, _, _) = kubectl(&real_kc, args);
            assert_eq!(so, ro, "kubectl {args:?}");
        }
        // The read-only users (the real server's: a ServiceAccount bound to get/list/watch of
        // what the console reads): the same verdicts, and a refused delete worded alike.
        let verdicts: &[&[&str]] = &[
            &["auth", "can-i", "list", "pods", "-n", "kube-system"],
            &["auth", "can-i", "watch", "leases", "-n", "kube-system"],
            &["auth", "can-i", "get", "helmreleases", "-n", "kube-system"],
            &["auth", "can-i", "delete", "pods", "-n", "kube-system"],
            &["auth", "can-i", "patch", "daemonsets", "-n", "kube-system"],
            &["auth", "can-i", "create", "namespaces"],
        ];
        for args in verdicts {
            let (so, _, _) = kubectl(&sim_ro, args);
            let (ro, _, _) = kubectl(&real_ro, args);
            assert_eq!(so, ro, "read-only: kubectl {args:?}");
        }
        let args = ["delete", "pod", "-n", "kube-system", "cilium-g1-n1"];
        let (_, se, sc) = kubectl(&sim_ro, &args);
        let (_, re, rc) = kubectl(&real_ro, &args);
        assert_eq!((sc, rc), (Some(1), Some(1)), "{se}{re}");
        let tail =
            "cannot delete resource \"pods\" in API group \"\" in the namespace \"kube-system\"";
        for e in [&se, &re] {
            assert!(
                e.contains(
                    "Error from server (Forbidden): pods \"cilium-g1-n1\" is forbidden: User \""
                ) && e.contains(tail),
                "{e}"
            );
        }
        let (so, _, _) = kubectl(
            &sim_ro,
            &[
                "get",
                "pods",
                "-n",
                "kube-system",
                "cilium-g1-n1",
                "-o",
                "name",
            ],
        );
        assert_eq!(so, "pod/cilium-g1-n1\n");
    })
    .await
    .expect("kubectl comparisons");
    drop(d);
}
