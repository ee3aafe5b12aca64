//! The Flux objects a simulated cluster serves: what Flux would have applied from the
//! environment's overlay in the demo repo (its Flux Kustomizations, and the HelmReleases they
//! apply, substituted), so `kubectl get kustomizations,helmreleases -A` and k9s show the repo's
//! objects, not made-up ones.
//!
//! Owns: which of those objects the simulation serves, and their reconciled state as
//! kustomize-controller leaves it: each Kustomization's status (Ready, the revision, and
//! `status.inventory`: one entry per object it applied that the simulation serves, in Flux's
//! `namespace_name_group_Kind` id, what `flux tree` and `flux diff` read), and the owner
//! labels (`kustomize.toolkit.fluxcd.io/name`, `/namespace`) on the objects it applied.
//! Answering reconcile requests is Flux's controllers' ([`super::flux`]).
//! Must not: pretend. A Kustomization whose objects cannot be told (an unread
//! `substituteFrom` source, an unmodelled spec field) is served Ready=Unknown with the reason
//! in its message; kinds the simulation does not serve (sources, plain manifests) are left
//! out, and the module doc of [`super::kube`] says so.

use std::path::Path;

use serde_json::{json, Value};

use super::kube::api::ClusterApi;
use super::kube::{resources, ObjRef, SimError};

const FLUX_KS_GROUP: &str = "kustomize.toolkit.fluxcd.io/";
const HELM_GROUP: &str = "helm.toolkit.fluxcd.io/";

/// What an environment's overlay makes Flux apply, as the simulation serves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FluxObjects {
    /// Flux Kustomizations, each with its status.
    pub kustomizations: Vec<Value>,
    /// HelmReleases as Flux applied them (no status yet).
    pub releases: Vec<Value>,
}

fn is_kind(o: &Value, group: &str, kind: &str) -> bool {
    o["apiVersion"]
        .as_str()
        .is_some_and(|a| a.starts_with(group))
        && o["kind"] == kind
}

/// Whether the simulation serves `o`'s apiVersion and kind.
fn served(o: &Value) -> bool {
    resources::by_kind(
        o["apiVersion"].as_str().unwrap_or(""),
        o["kind"].as_str().unwrap_or(""),
    )
    .is_some()
}

fn ready(status: &str, reason: &str, message: &str, now: jiff::Timestamp) -> Value {
    json!({"observedGeneration": 1, "conditions": [{"type": "Ready", "status": status,
        "reason": reason, "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}]})
}

/// The revision a reconciled Kustomization reports: the demo's repo is a copy, not a git
/// checkout, so there is no commit to name, and none is made up.
const REVISION: &str = "the demo's copy of the repo (no git commit)";

/// The Flux objects of the overlay `overlay` of the repo at `root`. No overlay directory: none
/// (a repo without Flux). An overlay that does not build: none, and the reason, which `check`
/// reports in full.
pub fn from_repo(root: &Path, overlay: &Path) -> (FluxObjects, Option<String>) {
    let mut out = FluxObjects::default();
    if !root.join(overlay).is_dir() {
        return (out, None);
    }
    let applied = match hk_engine::repo::flux::applied_objects(root, overlay) {
        Ok(a) => a,
        Err(e) => return (out, Some(e.to_string())),
    };
    let now = jiff::Timestamp::now();
    for (name, objects) in &applied.by_kustomization {
        let Some(mut ks) = applied
            .top
            .iter()
            .find(|o| {
                is_kind(o, FLUX_KS_GROUP, "Kustomization") && display(o) == *name && served(o)
            })
            .cloned()
        else {
            continue;
        };
        let owner = (
            ks["metadata"]["name"].as_str().unwrap_or("").to_string(),
            ks["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
        ks["status"] = match objects {
            Ok(objs) => {
                let applied: Vec<Value> = objs
                    .iter()
                    .filter(|o| served(o))
                    .map(|o| owned_by(o.clone(), &owner))
                    .collect();
                out.releases.extend(
                    applied
                        .iter()
                        .filter(|o| is_kind(o, HELM_GROUP, "HelmRelease"))
                        .cloned(),
                );
                let mut s = ready(
                    "True",
                    "ReconciliationSucceeded",
                    &format!("Applied revision: {REVISION}"),
                    now,
                );
                s["lastAppliedRevision"] = json!(REVISION);
                s["lastAttemptedRevision"] = json!(REVISION);
                s["inventory"] =
                    json!({"entries": applied.iter().map(inventory_entry).collect::<Vec<_>>()});
                s
            }
            Err(e) => ready(
                "Unknown",
                super::flux::NOT_SIMULATED,
                &format!(
                    "hk-console simulation: what this Kustomization applies cannot be told: {e}"
                ),
                now,
            ),
        };
        out.kustomizations.push(ks);
    }
    (out, None)
}

/// `o` with the labels kustomize-controller puts on every object a Kustomization applies
/// (`owner`: its name and namespace), which `flux diff` builds too.
fn owned_by(mut o: Value, owner: &(String, String)) -> Value {
    if !o["metadata"]["labels"].is_object() {
        o["metadata"]["labels"] = json!({});
    }
    o["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] = json!(owner.0);
    o["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/namespace"] = json!(owner.1);
    o
}

/// An object's entry in a Kustomization's `status.inventory`: its id as Flux writes it
/// (cli-utils' ObjMetadata: `namespace_name_group_Kind`, the namespace empty for a
/// cluster-scoped object, the group empty for the core one) and its version.
fn inventory_entry(o: &Value) -> Value {
    let api_version = o["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    json!({"id": format!("{}_{}_{group}_{}",
            o["metadata"]["namespace"].as_str().unwrap_or(""),
            o["metadata"]["name"].as_str().unwrap_or(""),
            o["kind"].as_str().unwrap_or("")),
        "v": version})
}

/// Whether the Kustomization `ks` applied the object `r` (its `status.inventory` lists it).
pub fn in_inventory(ks: &Value, r: &ObjRef) -> bool {
    let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let id = format!(
        "{}_{}_{group}_{}",
        r.namespace.as_deref().unwrap_or(""),
        r.name,
        r.kind
    );
    ks.pointer("/status/inventory/entries")
        .and_then(Value::as_array)
        .is_some_and(|es| es.iter().any(|e| e["id"] == id.as_str()))
}

/// `namespace/name` of an object.
fn display(o: &Value) -> String {
    let name = o["metadata"]["name"].as_str().unwrap_or("");
    match o["metadata"]["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// Put `flux`'s objects into the cluster: their namespaces first (as Flux's bootstrap would
/// have), then the Kustomizations, then the releases, each Ready. `modelled` is the release
/// the simulation plays the upgrades of: the repo's release of that namespace/name takes its
/// place (keeping its status), with `values.k8sServiceHost` set to `dialled`, what the agents
/// run now (a reconcile moves it to what the repo says); without one, `modelled` is served.
pub async fn seed<C: ClusterApi>(
    api: &C,
    flux: &FluxObjects,
    modelled: Value,
    dialled: &str,
) -> Result<(), SimError> {
    let now = jiff::Timestamp::now();
    let mut namespaces: Vec<&str> = flux
        .kustomizations
        .iter()
        .chain(&flux.releases)
        .filter_map(|o| o["metadata"]["namespace"].as_str())
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    for ns in namespaces {
        let r = ObjRef::new("v1", "Namespace", None, ns);
        if api.fetch(&r).await?.is_none() {
            api.apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns}, "status": {"phase": "Active"}}))
                .await?;
        }
    }
    for ks in &flux.kustomizations {
        api.apply(ks.clone()).await?;
    }
    let mut modelled_served = false;
    for release in &flux.releases {
        let mut r = release.clone();
        if display(&r) == display(&modelled) {
            modelled_served = true;
            r["status"] = modelled["status"].clone();
            if r.pointer("/spec/values/k8sServiceHost").is_some() {
                r["spec"]["values"]["k8sServiceHost"] = json!(dialled);
            }
        } else {
            r["status"] = ready("True", "UpgradeSucceeded", "Helm upgrade succeeded", now);
        }
        // Installed before the demo began: Helm revision 1 of the chart it names.
        if r.pointer("/status/history").is_none() {
            r["status"]["history"] = json!([super::flux::history_entry(&r, 1, now)]);
        }
        api.apply(r).await?;
    }
    if !modelled_served {
        api.apply(modelled).await?;
    }
    Ok(())
}

/// A Helm upgrade moved the agents to `dialled`: the release that asked for it says so.
pub async fn release_dials<C: ClusterApi>(
    api: &C,
    release: &ObjRef,
    dialled: &str,
) -> Result<(), SimError> {
    let has_host = api
        .fetch(release)
        .await?
        .is_some_and(|r| r.pointer("/spec/values/k8sServiceHost").is_some());
    if has_host {
        api.merge_patch(
            release,
            json!({"spec": {"values": {"k8sServiceHost": dialled}}}),
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_overlay_serves_its_kustomization_and_release() {
        let root = Path::new(env!("HK_SOURCE_ROOT")).join("inventory");
        let (f, why) = from_repo(&root, Path::new("clusters/prod"));
        assert_eq!(why, None);
        assert_eq!(f.kustomizations.len(), 1, "{f:?}");
        let ks = &f.kustomizations[0];
        assert_eq!(display(ks), "flux-system/platform");
        assert_eq!(ks["status"]["conditions"][0]["status"], "True");
        assert_eq!(f.releases.len(), 1, "{f:?}");
        let hr = &f.releases[0];
        assert_eq!(display(hr), "kube-system/cilium");
        // The overlay's substitution, not the base's 0.0.0.0.
        let host = hr["spec"]["values"]["k8sServiceHost"]
            .as_str()
            .expect("host");
        assert_ne!(host, "0.0.0.0");
        assert!(!host.contains('$'), "{host}");
        assert!(hr["spec"]["values"]["k8sServicePort"].is_number());
        // As kustomize-controller leaves them: the inventory `flux tree` lists, and the
        // owner labels on what it applied.
        assert_eq!(
            ks["status"]["inventory"],
            json!({"entries": [{"id": "kube-system_cilium_helm.toolkit.fluxcd.io_HelmRelease",
                "v": "v2"}]})
        );
        let cilium = ObjRef::new(
            "helm.toolkit.fluxcd.io/v2",
            "HelmRelease",
            Some("kube-system"),
            "cilium",
        );
        assert!(in_inventory(ks, &cilium));
        let other = ObjRef::new("helm.toolkit.fluxcd.io/v2", "HelmRelease", None, "cilium");
        assert!(!in_inventory(ks, &other));
        assert_eq!(
            hr["metadata"]["labels"],
            json!({"kustomize.toolkit.fluxcd.io/name": "platform",
                "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
        );
    }

    #[test]
    fn no_overlay_is_no_flux_objects() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            from_repo(d.path(), Path::new("clusters/prod")),
            (FluxObjects::default(), None)
        );
    }
}
