//! The Flux objects a simulated cluster serves: what Flux would have applied from the
//! environment's overlay in the demo repo (its Flux Kustomizations, and the HelmReleases they
//! apply, substituted), so `kubectl get kustomizations,helmreleases -A` and k9s show the repo's
//! objects, not made-up ones.
//!
//! Owns: which of those objects the simulation serves, their reconciled status, and answering
//! a reconcile request on a Kustomization.
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
        ks["status"] = match objects {
            Ok(objs) => {
                out.releases.extend(
                    objs.iter()
                        .filter(|o| is_kind(o, HELM_GROUP, "HelmRelease") && served(o))
                        .cloned(),
                );
                let mut s = ready(
                    "True",
                    "ReconciliationSucceeded",
                    &format!("Applied revision: {REVISION}"),
                    now,
                );
                s["lastAppliedRevision"] = json!(REVISION);
                s
            }
            Err(e) => ready(
                "Unknown",
                "NotSimulated",
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

/// `namespace/name` of an object.
fn display(o: &Value) -> String {
    let name = o["metadata"]["name"].as_str().unwrap_or("");
    match o["metadata"]["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn obj_ref(o: &Value) -> ObjRef {
    ObjRef::new(
        o["apiVersion"].as_str().unwrap_or(""),
        o["kind"].as_str().unwrap_or(""),
        o["metadata"]["namespace"].as_str(),
        o["metadata"]["name"].as_str().unwrap_or(""),
    )
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

/// Flux answers a reconcile request on a Kustomization `ks` (its `requestedAt` annotation
/// changed): handled, Ready as before.
pub async fn answer_kustomization<C: ClusterApi>(
    api: &C,
    ks: &Value,
    requested_at: &str,
) -> Result<(), SimError> {
    if !is_kind(ks, FLUX_KS_GROUP, "Kustomization") {
        return Ok(());
    }
    api.patch_status(
        &obj_ref(ks),
        json!({"lastHandledReconcileAt": requested_at}),
    )
    .await?;
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
