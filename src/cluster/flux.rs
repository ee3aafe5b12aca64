//! `flux-reconcile`: ask Flux to reconcile a HelmRelease or Kustomization now, and wait
//! until it has.
//!
//! Owns: naming the Flux object ([`FluxObject`]: `helmrelease/NAME` is a
//! helm.toolkit.fluxcd.io/v2 HelmRelease, `kustomization/NAME` a
//! kustomize.toolkit.fluxcd.io/v1 Kustomization, namespace from the step or `flux-system`);
//! the request, exactly as `flux reconcile` makes it: a merge PATCH setting the annotation
//! `reconcile.fluxcd.io/requestedAt` to an RFC 3339 time ([`request`]); the verdict
//! ([`judge`]): done when `status.lastHandledReconcileAt` is that value and the Ready
//! condition is True for the current generation, failed on Ready=False (its message), and
//! the wait ([`reconcile`]: a watch, with a timeout and prompt cancellation).
//! Must not: change anything but that one annotation, poll, or know the terminal or the run.

use std::fmt;
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::Client;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::wait::{drive, feed, Feeds, Judgement, Mirror, WaitEnd, WaitError, Watched};
use crate::checks::live::Timestamp;

/// The annotation `flux reconcile` sets; Flux's controllers reconcile when it changes.
pub const REQUESTED_AT_ANNOTATION: &str = "reconcile.fluxcd.io/requestedAt";
/// Where Flux objects live unless the step names a namespace (Flux's own default).
pub const DEFAULT_NAMESPACE: &str = "flux-system";
/// How long to wait for the reconcile (the `flux` CLI's default; the runbook schema has no
/// timeout for this step kind).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// The field manager the API server records for the PATCH.
pub const FIELD_MANAGER: &str = "hk-console";

/// The Flux kinds a step can reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FluxKind {
    HelmRelease,
    Kustomization,
}

impl FluxKind {
    /// `helmrelease` / `kustomization` (as `flux reconcile` spells them; plural, short
    /// names and any case accepted).
    pub fn parse(s: &str) -> Result<FluxKind, String> {
        match s.to_ascii_lowercase().as_str() {
            "helmrelease" | "helmreleases" | "hr" => Ok(FluxKind::HelmRelease),
            "kustomization" | "kustomizations" | "ks" => Ok(FluxKind::Kustomization),
            _ => Err(format!(
                "`{s}` is not a Flux kind hk-console reconciles (helmrelease, kustomization)"
            )),
        }
    }

    /// The API type: group, version, kind, plural.
    pub fn api_resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            FluxKind::HelmRelease => (
                "helm.toolkit.fluxcd.io",
                "v2",
                "HelmRelease",
                "helmreleases",
            ),
            FluxKind::Kustomization => (
                "kustomize.toolkit.fluxcd.io",
                "v1",
                "Kustomization",
                "kustomizations",
            ),
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
    }
}

/// One Flux object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxObject {
    pub kind: FluxKind,
    pub name: String,
    pub namespace: String,
}

impl FluxObject {
    /// `object: <kind>/<name>` and `namespace:` of a runbook step.
    pub fn parse(object: &str, namespace: Option<&str>) -> Result<FluxObject, String> {
        let (kind, name) = object
            .split_once('/')
            .filter(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'))
            .ok_or_else(|| format!("flux object `{object}` is not <kind>/<name>"))?;
        Ok(FluxObject {
            kind: FluxKind::parse(kind)?,
            name: name.to_string(),
            namespace: namespace
                .filter(|n| !n.is_empty())
                .unwrap_or(DEFAULT_NAMESPACE)
                .to_string(),
        })
    }

    /// From a planned step's argv, `flux reconcile <kind> <name> [-n <namespace>] ...` (the
    /// planner's rendering of `object` and `namespace`).
    pub fn from_argv(argv: &[String]) -> Result<FluxObject, String> {
        let shown = argv.join(" ");
        let (kind, name) = match argv {
            [flux, verb, kind, name, ..] if flux == "flux" && verb == "reconcile" => (kind, name),
            _ => {
                return Err(format!(
                    "`{shown}` is not `flux reconcile <kind> <name> ...`"
                ))
            }
        };
        let mut namespace = None;
        let mut rest = argv.iter().skip(4);
        while let Some(a) = rest.next() {
            if a == "-n" || a == "--namespace" {
                namespace = Some(
                    rest.next()
                        .ok_or_else(|| format!("`{shown}`: {a} without a namespace"))?
                        .as_str(),
                );
            }
        }
        FluxObject::parse(&format!("{kind}/{name}"), namespace)
    }
}

impl fmt::Display for FluxObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            FluxKind::HelmRelease => "HelmRelease",
            FluxKind::Kustomization => "Kustomization",
        };
        write!(f, "{kind} {}/{}", self.namespace, self.name)
    }
}

/// Now, as the value of the annotation (RFC 3339, UTC, nanoseconds as `flux` writes it).
pub fn requested_at_now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Where the reconcile stands. `None`: the object is gone.
pub fn judge(obj: Option<&DynamicObject>, what: &str, requested_at: &str) -> Judgement {
    let pending = |line: String| Judgement::Pending {
        line,
        recheck_at: None,
    };
    let Some(obj) = obj else {
        return pending(format!("{what} does not exist"));
    };
    if obj.data["spec"]["suspend"].as_bool() == Some(true) {
        return Judgement::Failed {
            detail: format!("{what} is suspended: Flux will not reconcile it (resume it first)"),
        };
    }
    let status = &obj.data["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let handled = status["lastHandledReconcileAt"].as_str();
    if handled != Some(requested_at) {
        // What the controller says meanwhile (e.g. Ready=Unknown, in progress), for the
        // operator; it does not count until this request is the one handled.
        let now = ready
            .map(|r| {
                format!(
                    "; now Ready={} ({}): {}",
                    r["status"].as_str().unwrap_or("Unknown"),
                    text(&r["reason"]),
                    text(&r["message"])
                )
            })
            .unwrap_or_default();
        return pending(format!(
            "{what}: waiting for Flux to handle the request of {requested_at} (last handled: {}){now}",
            handled.unwrap_or("never")
        ));
    }
    let generation = obj.metadata.generation;
    if let (Some(g), Some(o)) = (generation, status["observedGeneration"].as_i64()) {
        if o < g {
            return pending(format!(
                "{what}: handled; the controller has observed generation {o}, the spec is at {g}"
            ));
        }
    }
    let Some(ready) = ready else {
        return pending(format!("{what}: handled, no Ready condition yet"));
    };
    if let (Some(g), Some(cg)) = (generation, ready["observedGeneration"].as_i64()) {
        if cg != g {
            return pending(format!(
                "{what}: its Ready condition is for generation {cg}, the spec is at {g}"
            ));
        }
    }
    let (reason, message) = (text(&ready["reason"]), text(&ready["message"]));
    match ready["status"].as_str() {
        Some("True") => Judgement::Met {
            detail: format!("{what}: Ready ({reason}): {message}"),
        },
        Some("False") => Judgement::Failed {
            detail: format!("{what}: Ready=False ({reason}): {message}"),
        },
        other => pending(format!(
            "{what}: Ready={} ({reason}): {message}",
            other.unwrap_or("Unknown")
        )),
    }
}

fn api(client: Client, obj: &FluxObject) -> Api<DynamicObject> {
    Api::namespaced_with(client, &obj.namespace, &obj.kind.api_resource())
}

fn api_error(obj: &FluxObject, doing: &str, e: kube::Error) -> WaitError {
    let ar = obj.kind.api_resource();
    match &e {
        kube::Error::Api(s) if s.code == 404 => WaitError(format!(
            "{obj}: not found while {doing} (is it there, and is Flux's {}.{}/{} CRD installed?): {}",
            ar.plural, ar.group, ar.version, s.message
        )),
        kube::Error::Api(s) => WaitError(format!(
            "{obj}: the API server answered {} {} while {doing}: {}",
            s.code, s.reason, s.message
        )),
        _ => WaitError(format!("{obj}: {doing}: {e}")),
    }
}

/// Set `reconcile.fluxcd.io/requestedAt` on the object (a merge PATCH of that annotation
/// only). Reads it first: a missing or suspended object is refused before any write.
pub async fn request(
    client: Client,
    obj: &FluxObject,
    requested_at: &str,
) -> Result<DynamicObject, WaitError> {
    let api = api(client, obj);
    let current = api
        .get(&obj.name)
        .await
        .map_err(|e| api_error(obj, "reading it", e))?;
    if current.data["spec"]["suspend"].as_bool() == Some(true) {
        return Err(WaitError(format!(
            "{obj} is suspended: Flux will not reconcile it (resume it first); nothing was changed"
        )));
    }
    let patch = json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: requested_at}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    api.patch(&obj.name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error(obj, "annotating it", e))
}

struct FluxWatch {
    name: String,
    what: String,
    requested_at: String,
    objects: Mirror<DynamicObject>,
}

impl Watched for FluxWatch {
    type Seen = Event<DynamicObject>;

    fn take(
        &mut self,
        seen: Event<DynamicObject>,
        _feeds: &mut Feeds<Event<DynamicObject>>,
    ) -> Result<bool, WaitError> {
        Ok(self.objects.apply(seen))
    }

    fn judge(&self, _now: Timestamp) -> Judgement {
        judge(self.objects.get(&self.name), &self.what, &self.requested_at)
    }
}

/// How a reconcile went: the value written, and how the wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciled {
    pub requested_at: String,
    pub end: WaitEnd,
}

/// Request a reconcile of `obj` and watch it until Flux has handled that request and the
/// object is Ready (or Ready=False, the timeout, or `cancel`). Once the annotation is
/// written a cancel stops the waiting only: Flux still reconciles.
pub async fn reconcile(
    client: Client,
    obj: &FluxObject,
    timeout: Duration,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<Reconciled, WaitError> {
    let requested_at = requested_at_now();
    if cancel.is_cancelled() {
        return Ok(Reconciled {
            requested_at,
            end: WaitEnd::Cancelled {
                last: format!("{obj}: nothing requested"),
            },
        });
    }
    request(client.clone(), obj, &requested_at).await?;
    let what = obj.to_string();
    let mut feeds = Feeds::new();
    feeds.push(feed(
        api(client, obj),
        watcher::Config::default().fields(&format!("metadata.name={}", obj.name)),
        what.clone(),
        |e| e,
    ));
    let mut w = FluxWatch {
        name: obj.name.clone(),
        what: what.clone(),
        requested_at: requested_at.clone(),
        objects: Mirror::default(),
    };
    let first = format!(
        "{what}: {REQUESTED_AT_ANNOTATION}={requested_at} set; waiting up to {} s for Flux (watching)",
        timeout.as_secs()
    );
    let end = drive(&mut w, feeds, first, timeout, cancel, progress).await?;
    Ok(Reconciled { requested_at, end })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_parse_from_the_step_and_from_the_planned_argv() {
        let o = FluxObject::parse("helmrelease/cilium", Some("kube-system")).expect("hr");
        assert_eq!(o.to_string(), "HelmRelease kube-system/cilium");
        assert_eq!(
            o.kind.api_resource().api_version,
            "helm.toolkit.fluxcd.io/v2"
        );
        let k = FluxObject::parse("kustomization/platform", None).expect("ks");
        assert_eq!(k.namespace, DEFAULT_NAMESPACE);
        assert_eq!(k.kind.api_resource().plural, "kustomizations");
        assert_eq!(
            k.kind.api_resource().api_version,
            "kustomize.toolkit.fluxcd.io/v1"
        );
        let argv: Vec<String> =
            "flux reconcile helmrelease cilium -n kube-system --with-source --kubeconfig /x"
                .split(' ')
                .map(String::from)
                .collect();
        assert_eq!(FluxObject::from_argv(&argv).expect("argv"), o);
        for bad in [
            "cilium",
            "gitrepository/x",
            "helmrelease/",
            "helmrelease/a/b",
        ] {
            assert!(FluxObject::parse(bad, None).is_err(), "{bad}");
        }
        assert!(FluxObject::from_argv(&["ansible-playbook".to_string()]).is_err());
    }

    fn hr(generation: i64, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "cilium", "namespace": "kube-system", "generation": generation},
            "spec": {"interval": "10m"},
            "status": status,
        }))
        .expect("helmrelease")
    }

    #[test]
    fn done_only_when_this_request_was_handled_and_ready_for_this_generation() {
        let at = "2026-12-02T10:00:00.123456789Z";
        let w = "HelmRelease kube-system/cilium";
        let ready = |s: &str, g: i64| json!({"type": "Ready", "status": s, "reason": "R", "message": "M", "observedGeneration": g});
        let cases = [
            (json!({}), "pending"),
            (
                json!({"lastHandledReconcileAt": "older", "conditions": [ready("True", 2)]}),
                "pending",
            ),
            (
                json!({"lastHandledReconcileAt": at, "observedGeneration": 1, "conditions": [ready("True", 2)]}),
                "pending",
            ),
            (
                json!({"lastHandledReconcileAt": at, "conditions": [ready("True", 1)]}),
                "pending",
            ),
            (
                json!({"lastHandledReconcileAt": at, "conditions": [ready("Unknown", 2)]}),
                "pending",
            ),
            (
                json!({"lastHandledReconcileAt": at, "conditions": [ready("True", 2)]}),
                "met",
            ),
            (
                json!({"lastHandledReconcileAt": at, "conditions": [ready("False", 2)]}),
                "failed",
            ),
        ];
        for (status, want) in cases {
            let j = judge(Some(&hr(2, status.clone())), w, at);
            let got = match &j {
                Judgement::Pending { .. } => "pending",
                Judgement::Met { .. } => "met",
                Judgement::Failed { .. } => "failed",
            };
            assert_eq!(got, want, "{status} -> {j:?}");
        }
        let failed = judge(
            Some(&hr(
                2,
                json!({"lastHandledReconcileAt": at, "conditions": [ready("False", 2)]}),
            )),
            w,
            at,
        );
        assert_eq!(
            failed,
            Judgement::Failed {
                detail: "HelmRelease kube-system/cilium: Ready=False (R): M".into()
            }
        );
        // Before this request is handled the controller's word is shown, and not counted.
        let meanwhile = judge(
            Some(&hr(
                2,
                json!({"lastHandledReconcileAt": "older", "conditions": [ready("True", 2)]}),
            )),
            w,
            at,
        );
        assert!(
            matches!(&meanwhile, Judgement::Pending { line, .. }
                if line.ends_with("(last handled: older); now Ready=True (R): M")),
            "{meanwhile:?}"
        );
        let mut suspended = hr(2, json!({}));
        suspended.data["spec"]["suspend"] = json!(true);
        assert!(
            matches!(judge(Some(&suspended), w, at), Judgement::Failed { detail } if detail.contains("suspended"))
        );
        assert!(matches!(judge(None, w, at), Judgement::Pending { .. }));
    }

    #[test]
    fn requested_at_is_rfc3339_utc() {
        let t = requested_at_now();
        assert!(t.ends_with('Z'), "{t}");
        assert!(t.parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "{t}");
    }
}
