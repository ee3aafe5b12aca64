//! The DaemonSet controller's status report, written once over
//! [`ClusterApi`](super::kube::api::ClusterApi): the same code counts the pods and writes
//! the status on the built-in API server and on a real kube-apiserver.
//!
//! Owns: the DaemonSet status fields the console and `kubectl rollout status` read, and how
//! they are counted from the pods (live ones only; updated = of the current template
//! generation; ready = Ready condition True).
//! Must not: create or delete pods (that is the rollout in [`super::cluster`]).

use serde_json::{json, Value};

use super::kube::api::ClusterApi;
use super::kube::{ObjRef, SimError};

/// A DaemonSet's status with `desired` nodes, `updated` pods of `generation`, `ready` ready.
pub fn status(generation: u64, desired: usize, updated: usize, ready: usize) -> Value {
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

fn label<'a>(pod: &'a Value, key: &str) -> Option<&'a str> {
    pod.get("metadata")?.get("labels")?.get(key)?.as_str()
}

/// [`report_status_by`] for a DaemonSet whose pods carry `k8s-app=app` (cilium's).
pub async fn report_status<C: ClusterApi>(
    api: &C,
    ds: &ObjRef,
    app: &str,
    generation: u64,
    desired: usize,
) -> Result<Value, SimError> {
    report_status_by(api, ds, ("k8s-app", app), generation, desired).await
}

/// Count the pods carrying the DaemonSet's selector label `(key, value)` in its namespace
/// (those being deleted left out) and write `ds`'s status for `generation` over `desired`
/// nodes. Returns the DaemonSet as stored.
pub async fn report_status_by<C: ClusterApi>(
    api: &C,
    ds: &ObjRef,
    (key, app): (&str, &str),
    generation: u64,
    desired: usize,
) -> Result<Value, SimError> {
    let pods = api.objects("v1", "Pod", ds.namespace.as_deref()).await?;
    let mine: Vec<&Value> = pods
        .iter()
        .filter(|p| label(p, key) == Some(app))
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .collect();
    let current = generation.to_string();
    let updated = mine
        .iter()
        .filter(|p| label(p, "pod-template-generation") == Some(current.as_str()))
        .count();
    let ready = mine
        .iter()
        .filter(|p| {
            p.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
        .count();
    api.patch_status(
        ds,
        status(
            generation,
            desired,
            updated.min(desired),
            ready.min(desired),
        ),
    )
    .await
}
