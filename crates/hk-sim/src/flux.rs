//! Flux's helm-controller and kustomize-controller as the simulation plays them, written once
//! over [`ClusterApi`](super::kube::api::ClusterApi): the same code answers on the built-in
//! API server and on a real kube-apiserver, so the operator's `flux` CLI finds what the real
//! controllers leave.
//!
//! Owns: when a Flux object is due a reconcile ([`due`]: a reconcile request not yet handled,
//! or a generation not yet observed, e.g. after `flux resume`; never while `spec.suspend` is
//! true, as the controllers skip a suspended object), the status a reconcile leaves (the
//! request handled, the generation observed, Ready for that generation: what `flux
//! reconcile` and `flux resume` wait for), and the events the controllers record about it
//! (reason, message, annotations and reporting controller as theirs: what `flux events`
//! lists).
//! Must not: decide whether a reconcile changes the workload (that is the scenario's, in
//! [`super::cluster`]); claim a reconcile it cannot play: on an object served
//! `NotSimulated` (a Kustomization whose objects cannot be told) it only marks the request
//! handled, and a spec a client changed beyond `suspend` is served `NotSimulated` naming
//! that ([`not_simulated`]): no success recorded, Ready Unknown, so `flux resume` waits and
//! times out rather than report one.

use std::time::Duration;

use serde_json::{json, Value};

use super::kube::api::ClusterApi;
use super::kube::events::{self, Involved, Source};
use super::kube::{ObjRef, SimError};

/// The annotation Flux's `reconcile` verb sets; a new value asks for a reconcile.
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
/// The reporting controllers (client-go's event source component for each).
pub const HELM_CONTROLLER: &str = "helm-controller";
pub const KUSTOMIZE_CONTROLLER: &str = "kustomize-controller";
/// The chart version the simulated cilium release runs (the agents' image is v1.18.2); a
/// HelmRelease that pins no version is reported at this one.
pub const CHART_VERSION: &str = "1.18.2";
/// The Ready reason a Kustomization whose objects cannot be told is served with.
pub const NOT_SIMULATED: &str = "NotSimulated";

/// What a Flux object asks of its controller now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Nothing: handled and observed, or suspended.
    Nothing,
    /// A reconcile request (`requestedAt`) not yet handled: its value.
    Request(String),
    /// A spec generation not yet observed (a client changed the spec, or resumed it).
    Generation,
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    str_at(
        obj,
        &format!("/metadata/annotations/{}", key.replace('/', "~1")),
    )
}

/// The object's `metadata.generation` (0 when it has none).
pub fn generation(obj: &Value) -> i64 {
    obj.pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether `obj` (a HelmRelease or a Kustomization as the cluster has it now) is due a
/// reconcile, as its controller decides: a suspended object never is (the controllers return
/// at once, status untouched); else a reconcile request whose value is not
/// `status.lastHandledReconcileAt`, else a generation above `status.observedGeneration`.
pub fn due(obj: &Value) -> Due {
    if obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return Due::Nothing;
    }
    if let Some(asked) = annotation(obj, REQUESTED_AT) {
        if Some(asked) != str_at(obj, "/status/lastHandledReconcileAt") {
            return Due::Request(asked.to_string());
        }
    }
    let observed = obj
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if generation(obj) > observed {
        return Due::Generation;
    }
    Due::Nothing
}

fn stamp(now: jiff::Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The Ready condition after a successful reconcile of generation `generation`: its
/// transition time moves only when it was not True before (Flux's conditions package).
fn ready_true(
    current: &Value,
    reason: &str,
    message: &str,
    generation: i64,
    now: jiff::Timestamp,
) -> Value {
    let before = current
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let since = match before {
        Some(c) if c["status"] == "True" => c["lastTransitionTime"].clone(),
        _ => json!(stamp(now)),
    };
    json!({"type": "Ready", "status": "True", "reason": reason, "message": message,
        "observedGeneration": generation, "lastTransitionTime": since})
}

/// helm-controller's record of one Helm release revision (`status.history[]`, newest first):
/// the chart and version it ran and the Helm revision number.
pub fn history_entry(release: &Value, revision: u64, now: jiff::Timestamp) -> Value {
    let name = str_at(release, "/metadata/name").unwrap_or_default();
    let ns = str_at(release, "/metadata/namespace").unwrap_or("default");
    let chart = str_at(release, "/spec/chart/spec/chart").unwrap_or(name);
    let version = str_at(release, "/spec/chart/spec/version").unwrap_or(CHART_VERSION);
    json!({"name": name, "namespace": ns, "chartName": chart, "chartVersion": version,
        "version": revision, "status": "deployed",
        "firstDeployed": stamp(now), "lastDeployed": stamp(now)})
}

/// The status fields every reconcile of `current` sets: the generation observed and the
/// request handled (the annotation's value, as the controllers copy it whenever it is set).
fn reconciled(current: &Value) -> Value {
    let mut s = json!({"observedGeneration": generation(current)});
    if let Some(at) = annotation(current, REQUESTED_AT) {
        s["lastHandledReconcileAt"] = json!(at);
    }
    s
}

/// The object's spec without `suspend`: what a reconcile acts on. A spec that differs from
/// the one last reconciled only in `suspend` is in sync.
pub fn spec_but_suspend(obj: &Value) -> Value {
    let mut spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    if let Value::Object(m) = &mut spec {
        m.remove("suspend");
    }
    spec
}

/// Whether `obj` is served Ready=Unknown, reason [`NOT_SIMULATED`].
pub fn is_not_simulated(obj: &Value) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["reason"] == NOT_SIMULATED)
        })
}

/// What the simulation answers for a reconcile it cannot play (a spec a client changed
/// beyond `suspend`: a real controller would apply it, the simulation does not know what that
/// does): the generation observed and the request handled, Ready=Unknown
/// [`NOT_SIMULATED`] naming `why`, so `flux get` shows it and `flux resume` waits rather
/// than report a success. A later reconcile keeps it so.
pub async fn not_simulated<C: ClusterApi>(
    api: &C,
    r: &ObjRef,
    why: &str,
    now: jiff::Timestamp,
) -> Result<(), SimError> {
    let Some(current) = api.fetch(r).await? else {
        return Ok(());
    };
    let mut status = reconciled(&current);
    status["conditions"] = json!([{"type": "Ready", "status": "Unknown",
        "reason": NOT_SIMULATED, "message": format!("hk-console simulation: {why}"),
        "observedGeneration": generation(&current), "lastTransitionTime": stamp(now)}]);
    api.patch_status(r, status).await?;
    Ok(())
}

/// A due reconcile of an object served [`NOT_SIMULATED`]: the request is marked handled,
/// nothing else (no Ready, no event).
pub async fn handled_only<C: ClusterApi>(api: &C, r: &ObjRef) -> Result<(), SimError> {
    let Some(current) = api.fetch(r).await? else {
        return Ok(());
    };
    if let Some(at) = annotation(&current, REQUESTED_AT) {
        if Some(at) != str_at(&current, "/status/lastHandledReconcileAt") {
            api.patch_status(r, json!({"lastHandledReconcileAt": at}))
                .await?;
        }
    }
    Ok(())
}

/// A Helm upgrade helm-controller made: the release's new Helm revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    /// Helm's release revision after the upgrade (the install was 1).
    pub revision: u64,
}

/// helm-controller's answer to a due reconcile of `release`: the request handled, the
/// generation observed, Ready. `upgrade`: the reconcile made a Helm upgrade, which it
/// reports in an `UpgradeSucceeded` event (in sync, helm-controller upgrades nothing and
/// records no event). Returns the release as stored.
pub async fn answer_release<C: ClusterApi>(
    api: &C,
    release: &ObjRef,
    upgrade: Option<&Upgrade>,
    now: jiff::Timestamp,
) -> Result<Value, SimError> {
    let Some(current) = api.fetch(release).await? else {
        return Err(SimError::Invalid(format!("{release}: not found")));
    };
    let mut status = reconciled(&current);
    status["conditions"] = json!([ready_true(
        &current,
        "UpgradeSucceeded",
        "Helm upgrade succeeded",
        generation(&current),
        now
    )]);
    if let Some(u) = upgrade {
        // The new Helm revision goes first; the ones before it stay.
        let mut history = vec![history_entry(&current, u.revision, now)];
        if let Some(old) = current.pointer("/status/history").and_then(Value::as_array) {
            history.extend(old.iter().take(4).cloned());
        }
        status["history"] = json!(history);
    }
    let stored = api.patch_status(release, status).await?;
    if let Some(u) = upgrade {
        let chart = str_at(&current, "/spec/chart/spec/chart").unwrap_or(&release.name);
        let version = str_at(&current, "/spec/chart/spec/version").unwrap_or(CHART_VERSION);
        let ns = release.namespace.as_deref().unwrap_or("default");
        let message = format!(
            "Helm upgrade succeeded for release {ns}/{}.v{} with chart {chart}@{version}",
            release.name, u.revision
        );
        let revision_key = "helm.toolkit.fluxcd.io/revision";
        record(
            api,
            release,
            &[(revision_key, version)],
            "UpgradeSucceeded",
            &message,
            HELM_CONTROLLER,
        )
        .await;
    }
    Ok(stored)
}

/// kustomize-controller's answer to a due reconcile of the Kustomization `ks`, begun
/// `took` ago: the request handled, the generation observed, Ready with the revision it
/// applied, and its `ReconciliationSucceeded` event ("Reconciliation finished in ..., next
/// run in ..."). One served `NotSimulated` only has its request marked handled.
pub async fn answer_kustomization<C: ClusterApi>(
    api: &C,
    ks: &ObjRef,
    took: Duration,
    now: jiff::Timestamp,
) -> Result<(), SimError> {
    let Some(current) = api.fetch(ks).await? else {
        return Ok(());
    };
    if is_not_simulated(&current) {
        return handled_only(api, ks).await;
    }
    let revision = str_at(&current, "/status/lastAppliedRevision")
        .unwrap_or("")
        .to_string();
    let mut status = reconciled(&current);
    status["lastAttemptedRevision"] = json!(revision);
    status["conditions"] = json!([ready_true(
        &current,
        "ReconciliationSucceeded",
        &format!("Applied revision: {revision}"),
        generation(&current),
        now
    )]);
    api.patch_status(ks, status).await?;
    let interval = str_at(&current, "/spec/interval")
        .and_then(parse_go_duration)
        .map_or_else(
            || str_at(&current, "/spec/interval").unwrap_or("").to_string(),
            go_duration,
        );
    let message = format!(
        "Reconciliation finished in {}, next run in {interval}",
        go_duration(took)
    );
    let mut annotations = vec![("kustomize.toolkit.fluxcd.io/commit_status", "update")];
    if !revision.is_empty() {
        annotations.push(("kustomize.toolkit.fluxcd.io/revision", revision.as_str()));
    }
    record(
        api,
        ks,
        &annotations,
        "ReconciliationSucceeded",
        &message,
        KUSTOMIZE_CONTROLLER,
    )
    .await;
    Ok(())
}

/// kustomize-controller's event for an apply that changed `object`: the change set
/// (`Kind/namespace/name configured`), reported while its Ready condition is `Progressing`
/// (the reason its events take from that condition).
pub async fn configured<C: ClusterApi>(api: &C, ks: &ObjRef, object: &ObjRef) {
    let revision = match api.fetch(ks).await {
        Ok(Some(k)) => str_at(&k, "/status/lastAppliedRevision")
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    };
    let ns = object.namespace.as_deref().unwrap_or("");
    let subject = if ns.is_empty() {
        format!("{}/{}", object.kind, object.name)
    } else {
        format!("{}/{ns}/{}", object.kind, object.name)
    };
    let mut annotations = Vec::new();
    if !revision.is_empty() {
        annotations.push(("kustomize.toolkit.fluxcd.io/revision", revision.as_str()));
    }
    record(
        api,
        ks,
        &annotations,
        "Progressing",
        &format!("{subject} configured"),
        KUSTOMIZE_CONTROLLER,
    )
    .await;
}

/// A Normal event about `r` from `controller`, as client-go's recorder under Flux's makes it
/// (source component and reporting controller the controller's name, no host).
async fn record<C: ClusterApi>(
    api: &C,
    r: &ObjRef,
    annotations: &[(&str, &str)],
    reason: &str,
    message: &str,
    controller: &str,
) {
    let Some(inv) = Involved::of(api, r).await else {
        return;
    };
    let src = Source {
        component: controller,
        host: None,
    };
    if let Err(e) =
        events::record_annotated(api, &inv, annotations, "Normal", reason, message, src).await
    {
        tracing::warn!("simulated {controller}: recording {reason} for {r}: {e}");
    }
}

/// A Go duration string (`10m`, `1h30m`, `1.5s`, `250ms`), as Flux's `spec.interval` holds
/// one; `None` when it is not one.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// `d` as Go's `time.Duration.String()` writes it: `10m0s`, `1h0m0s`, `1.5s`, `52.25ms`,
/// `0s` (what Flux's event messages contain).
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    // Below a second Go writes one unit with a fraction: ns, µs or ms.
    let fraction = |value: u128, unit: u128, name: &str| {
        let whole = value / unit;
        let frac = value % unit;
        if frac == 0 {
            format!("{whole}{name}")
        } else {
            let width = unit.to_string().len() - 1;
            let digits = format!("{frac:0width$}");
            format!("{whole}.{}{name}", digits.trim_end_matches('0'))
        }
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return fraction(nanos, 1_000, "µs");
    }
    if nanos < 1_000_000_000 {
        return fraction(nanos, 1_000_000, "ms");
    }
    let secs = fraction(nanos % 60_000_000_000, 1_000_000_000, "s");
    let minutes = nanos / 60_000_000_000;
    if minutes == 0 {
        return secs;
    }
    let (h, m) = (minutes / 60, minutes % 60);
    if h == 0 {
        format!("{m}m{secs}")
    } else {
        format!("{h}h{m}m{secs}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_and_written_as_go_does() {
        let cases = [
            ("10m", "10m0s"),
            ("1h", "1h0m0s"),
            ("1h30m", "1h30m0s"),
            ("30s", "30s"),
            ("1.5s", "1.5s"),
            ("250ms", "250ms"),
            ("90s", "1m30s"),
        ];
        for (text, go) in cases {
            let d = parse_go_duration(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(go_duration(d), go, "{text}");
        }
        assert_eq!(go_duration(Duration::from_micros(52_250)), "52.25ms");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_millis(61_001)), "1m1.001s");
        for bad in ["", "10", "m", "10x", "1..5s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn due_as_the_controllers_decide() {
        let obj = |spec: Value, ann: Value, status: Value| {
            json!({"metadata": {"generation": 3, "annotations": ann}, "spec": spec,
                "status": status})
        };
        let handled = json!({"observedGeneration": 3, "lastHandledReconcileAt": "a"});
        let at = json!({REQUESTED_AT: "a"});
        assert_eq!(
            due(&obj(json!({}), at.clone(), handled.clone())),
            Due::Nothing
        );
        assert_eq!(
            due(&obj(json!({}), json!({REQUESTED_AT: "b"}), handled.clone())),
            Due::Request("b".into())
        );
        let older = json!({"observedGeneration": 2, "lastHandledReconcileAt": "a"});
        assert_eq!(
            due(&obj(json!({}), at.clone(), older.clone())),
            Due::Generation
        );
        // Suspended: neither a request nor a new generation is acted on.
        let suspended = json!({"suspend": true});
        assert_eq!(
            due(&obj(suspended.clone(), json!({REQUESTED_AT: "b"}), older)),
            Due::Nothing
        );
        assert_eq!(
            due(&obj(json!({"suspend": false}), at, handled)),
            Due::Nothing
        );
    }
}
