//! Flux's helm-controller as the simulation plays it, written once over
//! [`ClusterApi`](super::kube::api::ClusterApi): the same code answers a reconcile request on
//! the built-in API server and on a real kube-apiserver.
//!
//! Owns: the HelmRelease status an answered request leaves (the request handled, Ready).
//! Must not: decide whether a reconcile changes the workload (that is the scenario's, in
//! [`super::cluster`]).

use serde_json::{json, Value};

use super::kube::api::ClusterApi;
use super::kube::{ObjRef, SimError};

/// helm-controller's answer to `reconcile.fluxcd.io/requestedAt: requested_at` on
/// `release`: the request is recorded as handled and the release is Ready after a
/// successful upgrade. Returns the release as stored.
pub async fn answer_reconcile<C: ClusterApi>(
    api: &C,
    release: &ObjRef,
    requested_at: &str,
    now: jiff::Timestamp,
) -> Result<Value, SimError> {
    api.patch_status(
        release,
        json!({"lastHandledReconcileAt": requested_at,
            "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                "message": "Helm upgrade succeeded",
                "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}]}),
    )
    .await
}
