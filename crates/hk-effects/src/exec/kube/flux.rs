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
//! The gate policy's read-only [`preview`] of a reconcile lives here too: the object, its
//! revision now and the one its source offers, and the DaemonSets it rolls.
//! Must not: change anything but that one annotation, poll, or know the terminal or the run.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::watcher::{self, Event};
use kube::Client;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::wait::{drive, feed, Feeds, Judgement, Mirror, WaitEnd, WaitError, Watched};
use hk_engine::checks::live::Timestamp;
use hk_engine::checks::release_diff;
use hk_engine::journal::StartRecorded;

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
    pub fn parse(s: &str) -> Result<FluxKind, FluxObjectError> {
        match s.to_ascii_lowercase().as_str() {
            "helmrelease" | "helmreleases" | "hr" => Ok(FluxKind::HelmRelease),
            "kustomization" | "kustomizations" | "ks" => Ok(FluxKind::Kustomization),
            _ => Err(FluxObjectError::UnknownKind {
                kind: s.to_string(),
            }),
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

/// Why a step's Flux object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FluxObjectError {
    #[error("`{kind}` is not a Flux kind hk-console reconciles (helmrelease, kustomization)")]
    UnknownKind { kind: String },
    #[error("flux object `{object}` is not <kind>/<name>")]
    NotKindName { object: String },
    #[error("`{argv}` is not `flux reconcile <kind> <name> ...`")]
    NotReconcile { argv: String },
    #[error("`{argv}`: {flag} without a namespace")]
    NoNamespace { argv: String, flag: String },
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
    pub fn parse(object: &str, namespace: Option<&str>) -> Result<FluxObject, FluxObjectError> {
        let (kind, name) = object
            .split_once('/')
            .filter(|(k, n)| !k.is_empty() && !n.is_empty() && !n.contains('/'))
            .ok_or_else(|| FluxObjectError::NotKindName {
                object: object.to_string(),
            })?;
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
    pub fn from_argv(argv: &[String]) -> Result<FluxObject, FluxObjectError> {
        let shown = argv.join(" ");
        let (kind, name) = match argv {
            [flux, verb, kind, name, ..] if flux == "flux" && verb == "reconcile" => (kind, name),
            _ => return Err(FluxObjectError::NotReconcile { argv: shown }),
        };
        let mut namespace = None;
        let mut rest = argv.iter().skip(4);
        while let Some(a) = rest.next() {
            if a == "-n" || a == "--namespace" {
                namespace = Some(
                    rest.next()
                        .ok_or_else(|| FluxObjectError::NoNamespace {
                            argv: shown.clone(),
                            flag: a.to_string(),
                        })?
                        .as_str(),
                );
            }
        }
        FluxObject::parse(&format!("{kind}/{name}"), namespace)
    }
}

impl FluxObject {
    /// The API kind (`HelmRelease`, `Kustomization`).
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            FluxKind::HelmRelease => "HelmRelease",
            FluxKind::Kustomization => "Kustomization",
        }
    }
}

impl fmt::Display for FluxObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind_name(), self.namespace, self.name)
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
/// A write: it takes the proof that its step's start is journaled (`_start`), so it is
/// reachable only behind a durable record.
pub async fn request(
    client: Client,
    obj: &FluxObject,
    requested_at: &str,
    _start: &StartRecorded,
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
    start: &StartRecorded,
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
    request(client.clone(), obj, &requested_at, start).await?;
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

/// What a reconcile of one Flux object would do, read without changing anything: the gate
/// policy's preview before a `flux-reconcile` in a protected environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    /// One line per fact, in the order the operator reads them.
    pub lines: Vec<String>,
    /// The DaemonSets the reconcile can roll.
    pub daemonsets: Vec<DaemonSetRoll>,
}

impl Preview {
    /// The blast radius in one line: every DaemonSet's pods, nodes and pace.
    pub fn summary(&self, what: &str) -> String {
        if self.daemonsets.is_empty() {
            return format!(
                "{what}: no DaemonSet of it found; the preview cannot say which pods the reconcile restarts"
            );
        }
        self.daemonsets
            .iter()
            .map(DaemonSetRoll::radius)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One DaemonSet a reconcile can roll, as its spec and status say now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSetRoll {
    pub namespace: String,
    pub name: String,
    /// The pod template's container names (what restarts on each node).
    pub containers: Vec<String>,
    /// `status.desiredNumberScheduled`: the nodes it runs a pod on.
    pub nodes: i32,
    pub ready: i32,
    /// `RollingUpdate` (the default) or `OnDelete`.
    pub strategy: String,
    /// `rollingUpdate.maxUnavailable` as written (default 1).
    pub max_unavailable: String,
    /// The same, in nodes (a percentage rounds up, as the DaemonSet controller does).
    pub at_a_time: i32,
    /// `spec.selector.matchLabels`: how its pods are found.
    pub selector: BTreeMap<String, String>,
}

impl DaemonSetRoll {
    fn from_object(ds: &DaemonSet) -> DaemonSetRoll {
        let spec = ds.spec.clone().unwrap_or_default();
        let status = ds.status.clone().unwrap_or_default();
        let nodes = status.desired_number_scheduled;
        let strategy = spec.update_strategy.clone().unwrap_or_default();
        let kind = strategy.type_.unwrap_or_else(|| "RollingUpdate".into());
        let max = strategy
            .rolling_update
            .and_then(|r| r.max_unavailable)
            .unwrap_or(IntOrString::Int(1));
        let (written, at_a_time) = match &max {
            IntOrString::Int(k) => (k.to_string(), *k),
            IntOrString::String(p) => {
                let pct: i32 = p.trim_end_matches('%').parse().unwrap_or(0);
                // The controller scales a percentage of the desired pods, rounding up.
                (p.clone(), (nodes * pct + 99) / 100)
            }
        };
        DaemonSetRoll {
            namespace: ds.metadata.namespace.clone().unwrap_or_default(),
            name: ds.metadata.name.clone().unwrap_or_default(),
            containers: spec
                .template
                .spec
                .map(|p| p.containers.into_iter().map(|c| c.name).collect())
                .unwrap_or_default(),
            nodes,
            ready: status.number_ready,
            strategy: kind,
            max_unavailable: written,
            at_a_time,
            selector: spec.selector.match_labels.clone().unwrap_or_default(),
        }
    }

    /// "every cilium-agent on 3 nodes, one at a time (maxUnavailable 1)".
    pub fn radius(&self) -> String {
        let what = if self.containers.is_empty() {
            format!("every pod of DaemonSet {}/{}", self.namespace, self.name)
        } else {
            format!("every {}", self.containers.join(" + "))
        };
        let pace = match (self.strategy.as_str(), self.at_a_time) {
            ("OnDelete", _) => {
                "updateStrategy OnDelete: nothing restarts until a pod is deleted".to_string()
            }
            (_, 1) => format!("one at a time (maxUnavailable {})", self.max_unavailable),
            (_, k) if k <= 0 => format!(
                "maxUnavailable {}: new pods start beside the old ones (surge)",
                self.max_unavailable
            ),
            (_, k) => format!("{k} at a time (maxUnavailable {})", self.max_unavailable),
        };
        format!(
            "{what} on {} node{} (DaemonSet {}/{}, {} ready now), {pace}",
            self.nodes,
            if self.nodes == 1 { "" } else { "s" },
            self.namespace,
            self.name,
            self.ready
        )
    }
}

/// A field of a Flux object's JSON as text, if it is a non-empty string.
fn field<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The artifact revision of a Flux source object, or why it could not be read.
async fn source_revision(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<String, String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    // Flux's source kinds: GitRepository -> gitrepositories, HelmChart -> helmcharts.
    let lower = kind.to_ascii_lowercase();
    let plural = match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    };
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let obj = api.get(name).await.map_err(|e| {
        format!(
            "{kind} {namespace}/{name} could not be read: {}",
            crate::cluster::explain(&e)
        )
    })?;
    field(&obj.data, "/status/artifact/revision")
        .map(|r| format!("{r} ({kind} {namespace}/{name})"))
        .ok_or_else(|| format!("{kind} {namespace}/{name} has no artifact yet"))
}

/// What the environment's overlay renders for the object a reconcile applies (issue 29):
/// the object after Flux's postBuild substitution, where it was rendered from, or why it
/// could not be rendered. The caller reads the repo; the preview compares.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The overlay, as the operator names it (`clusters/prod`).
    pub overlay: String,
    pub object: Result<Value, String>,
    /// For a Kustomization: the objects it applies (under its `spec.path`, substituted), or
    /// why they cannot be told. `None` for a HelmRelease.
    pub applies: Option<Result<Vec<Value>, String>>,
}

/// Read what a reconcile of `obj` would do: the object (refused when missing or
/// suspended), the revision it last applied and the one its source offers now, whether its
/// spec changed since, and the DaemonSets it rolls with their maxUnavailable. For a
/// HelmRelease with `next` (what the overlay renders), the values that change: what the
/// release and its pods run now against what the overlay renders. Reads only.
pub async fn preview(
    client: Client,
    obj: &FluxObject,
    rendered: Option<&Rendered>,
) -> Result<Preview, WaitError> {
    let current = api(client.clone(), obj)
        .get(&obj.name)
        .await
        .map_err(|e| api_error(obj, "reading it for the preview", e))?;
    let data = &current.data;
    if data["spec"]["suspend"].as_bool() == Some(true) {
        return Err(WaitError(format!(
            "{obj} is suspended: Flux would not reconcile it (resume it first)"
        )));
    }
    let mut lines = vec![format!("object: {obj}")];
    let now = match obj.kind {
        FluxKind::HelmRelease => data
            .pointer("/status/history/0")
            .and_then(|h| {
                let chart = field(h, "/chartName")?;
                let version = field(h, "/chartVersion")?;
                Some(match field(h, "/configDigest") {
                    Some(d) => format!("chart {chart} {version}, values {d}"),
                    None => format!("chart {chart} {version}"),
                })
            })
            .or_else(|| field(data, "/status/lastAttemptedRevision").map(str::to_string)),
        FluxKind::Kustomization => field(data, "/status/lastAppliedRevision").map(str::to_string),
    };
    lines.push(format!(
        "revision now: {}",
        now.unwrap_or_else(
            || "none recorded in its status (never applied, or not reported)".into()
        )
    ));
    let next = match obj.kind {
        FluxKind::HelmRelease => {
            match field(data, "/status/helmChart").and_then(|c| c.split_once('/')) {
                Some((ns, name)) => {
                    source_revision(
                        &client,
                        "source.toolkit.fluxcd.io/v1",
                        "HelmChart",
                        ns,
                        name,
                    )
                    .await
                }
                None => Err("its status names no HelmChart".to_string()),
            }
            .or_else(|why| {
                let chart = field(data, "/spec/chart/spec/chart").unwrap_or("?");
                let version = field(data, "/spec/chart/spec/version").unwrap_or("any version");
                Ok::<String, String>(format!("chart {chart} {version} as the spec asks ({why})"))
            })
        }
        FluxKind::Kustomization => {
            let kind = field(data, "/spec/sourceRef/kind").unwrap_or("GitRepository");
            let name = field(data, "/spec/sourceRef/name").unwrap_or(&obj.name);
            let ns = field(data, "/spec/sourceRef/namespace").unwrap_or(&obj.namespace);
            let version = if kind == "OCIRepository" {
                "v1beta2"
            } else {
                "v1"
            };
            source_revision(
                &client,
                &format!("source.toolkit.fluxcd.io/{version}"),
                kind,
                ns,
                name,
            )
            .await
        }
    };
    lines.push(format!(
        "reconciles to: {} (--with-source fetches the source first, so it can move past this)",
        next.unwrap_or_else(|why| format!("unknown: {why}"))
    ));
    let generation = current.metadata.generation;
    let observed = data["status"]["observedGeneration"].as_i64();
    lines.push(match (generation, observed) {
        (Some(g), Some(o)) if o < g => {
            format!("spec: changed since Flux last reconciled it (generation {g}, reconciled {o})")
        }
        (Some(g), Some(_)) => format!("spec: unchanged since the last reconcile (generation {g})"),
        _ => "spec: Flux has not reported which generation it reconciled".to_string(),
    });
    let daemonsets = rolled_daemonsets(&client, obj, data).await?;
    if daemonsets.is_empty() {
        lines.push(format!(
            "rolls: no DaemonSet of {obj} found; the preview cannot say which pods restart"
        ));
    }
    for ds in &daemonsets {
        lines.push(format!("rolls: {}", ds.radius()));
    }
    if let (
        FluxKind::Kustomization,
        Some(Rendered {
            overlay,
            applies: Some(applies),
            ..
        }),
    ) = (obj.kind, rendered)
    {
        let diff = match applies {
            Ok(objects) => kustomization_diff(&client, overlay, objects, data).await,
            Err(why) => vec![format!(
                "objects it would change: unknown: the overlay {overlay} could not be rendered: {why}"
            )],
        };
        lines.splice(1..1, diff);
    }
    if let (FluxKind::HelmRelease, Some(next)) = (obj.kind, rendered) {
        let running = pods_env(&client, &daemonsets).await;
        let none = Value::Null;
        let values_now = data.pointer("/spec/values").unwrap_or(&none);
        let values_next = next
            .object
            .as_ref()
            .map(|o| o.pointer("/spec/values").unwrap_or(&none))
            .map_err(String::clone);
        let chart_next = next
            .object
            .as_ref()
            .ok()
            .and_then(|o| field(o, "/spec/chart/spec/version"))
            .map(str::to_string);
        let chart_now = field(data, "/status/history/0/chartVersion").map(str::to_string);
        // What the run exists to change goes first, under the object's name.
        let diff = release_diff::lines(&release_diff::ReleaseNowNext {
            values_now: Ok(values_now),
            values_next,
            chart_now,
            chart_next,
            running,
            overlay: &next.overlay,
        });
        lines.splice(1..1, diff);
    }
    Ok(Preview { lines, daemonsets })
}

/// What applying `objects` (the overlay's, for one Kustomization) would change in the
/// cluster, as `flux diff kustomization` answers it: per object, created, or the fields it
/// sets whose value differs (fields the server fills in are not compared), or unchanged;
/// and the objects of the Kustomization's inventory the overlay no longer renders, which
/// Flux prunes when `spec.prune` is true.
async fn kustomization_diff(
    client: &Client,
    overlay: &str,
    objects: &[Value],
    ks: &Value,
) -> Vec<String> {
    let mut changed = Vec::new();
    let mut unchanged = 0;
    let mut ids = Vec::new();
    for o in objects {
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let ns = o["metadata"]["namespace"].as_str();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        ids.push(format!("{}_{name}_{group}_{kind}", ns.unwrap_or("")));
        let shown = match ns {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = match kube::discovery::pinned_kind(client, &gvk).await {
            Err(e) => Err(format!(
                "the API server does not serve it: {}",
                crate::cluster::explain(&e)
            )),
            Ok((ar, caps)) => {
                let api: Api<DynamicObject> = match (caps.scope, ns) {
                    (kube::discovery::Scope::Namespaced, Some(ns)) => {
                        Api::namespaced_with(client.clone(), ns, &ar)
                    }
                    (kube::discovery::Scope::Namespaced, None) => {
                        Api::default_namespaced_with(client.clone(), &ar)
                    }
                    (kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &ar),
                };
                api.get_opt(name)
                    .await
                    .map_err(|e| format!("could not be read: {}", crate::cluster::explain(&e)))
            }
        };
        match found {
            Err(why) => changed.push(format!("  {shown}: unknown ({why})")),
            Ok(None) => changed.push(format!("  {shown}: created (not in the cluster now)")),
            Ok(Some(live)) => {
                let live = serde_json::to_value(&live).unwrap_or(Value::Null);
                let mut diffs = Vec::new();
                for part in ["spec", "data", "stringData", "rules", "roleRef", "subjects"] {
                    let Some(want) = o.get(part) else { continue };
                    let want = release_diff::flatten(want);
                    let have = release_diff::flatten(live.get(part).unwrap_or(&Value::Null));
                    for (k, v) in &want {
                        if have.get(k) != Some(v) {
                            diffs.push(format!(
                                "{part}.{k}: {} -> {v}",
                                have.get(k).map_or("(unset)", String::as_str)
                            ));
                        }
                    }
                }
                if diffs.is_empty() {
                    unchanged += 1;
                } else {
                    changed.push(format!("  {shown}: {}", diffs.join("; ")));
                }
            }
        }
    }
    let prune = ks["spec"]["prune"].as_bool() == Some(true);
    let gone: Vec<String> = ks["status"]["inventory"]["entries"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["id"].as_str())
                .filter(|id| !ids.iter().any(|x| x == id))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut out = vec![format!(
        "objects it would change (the cluster now -> what the overlay {overlay} renders):"
    )];
    if changed.is_empty() && gone.is_empty() {
        out[0] = format!(
            "objects: the overlay {overlay} renders what the cluster runs ({unchanged} unchanged)"
        );
        return out;
    }
    out.extend(changed);
    for id in gone {
        out.push(format!(
            "  {id}: no longer rendered: {}",
            if prune {
                "Flux deletes it (prune: true)"
            } else {
                "left in the cluster (prune is off)"
            }
        ));
    }
    if unchanged > 0 {
        out.push(format!("  ({unchanged} other object(s) unchanged)"));
    }
    out
}

/// The environment variables of [`release_diff::VALUE_ENV`] the pods of `daemonsets` run
/// with: variable -> value -> how many pods. Only literal values are counted; a variable
/// taken from a ConfigMap or Secret is counted as `(from a reference)`.
async fn pods_env(
    client: &Client,
    daemonsets: &[DaemonSetRoll],
) -> Result<BTreeMap<String, BTreeMap<String, usize>>, String> {
    if daemonsets.is_empty() {
        return Err("no DaemonSet of the release found, so no pods to read".into());
    }
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for ds in daemonsets {
        let selector = ds
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        if selector.is_empty() {
            return Err(format!(
                "DaemonSet {}/{} has no matchLabels selector to find its pods by",
                ds.namespace, ds.name
            ));
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), &ds.namespace);
        let pods = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| format!("pods of DaemonSet {}/{}: {e}", ds.namespace, ds.name))?;
        for pod in &pods.items {
            let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
            // One count per pod and variable, whichever container sets it first.
            let mut seen: BTreeMap<&str, String> = BTreeMap::new();
            for c in containers {
                for e in c.env.iter().flatten() {
                    let Some((_, var)) = release_diff::VALUE_ENV.iter().find(|(_, v)| *v == e.name)
                    else {
                        continue;
                    };
                    let value = match (&e.value, &e.value_from) {
                        (Some(v), _) => v.clone(),
                        (None, Some(_)) => "(from a reference)".to_string(),
                        (None, None) => "(empty)".to_string(),
                    };
                    seen.entry(var).or_insert(value);
                }
            }
            for (var, value) in seen {
                *out.entry(var.to_string())
                    .or_default()
                    .entry(value)
                    .or_default() += 1;
            }
        }
    }
    Ok(out)
}

/// The DaemonSets a reconcile of `obj` applies: a Kustomization's inventory, or what
/// helm-controller labels with the HelmRelease's name and namespace.
async fn rolled_daemonsets(
    client: &Client,
    obj: &FluxObject,
    data: &Value,
) -> Result<Vec<DaemonSetRoll>, WaitError> {
    let read = |e: kube::Error| WaitError(format!("{obj}: reading its DaemonSets: {e}"));
    let mut out = Vec::new();
    match obj.kind {
        FluxKind::HelmRelease => {
            let selector = format!(
                "helm.toolkit.fluxcd.io/name={},helm.toolkit.fluxcd.io/namespace={}",
                obj.name, obj.namespace
            );
            let api: Api<DaemonSet> = Api::all(client.clone());
            let list = api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(read)?;
            out.extend(list.items.iter().map(DaemonSetRoll::from_object));
        }
        FluxKind::Kustomization => {
            // Inventory ids are `<namespace>_<name>_<group>_<kind>`.
            let entries = data["status"]["inventory"]["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for e in entries {
                let id = e["id"].as_str().unwrap_or_default();
                let parts: Vec<&str> = id.split('_').collect();
                if let [ns, name, "apps", "DaemonSet"] = parts.as_slice() {
                    let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
                    let ds = api.get(name).await.map_err(read)?;
                    out.push(DaemonSetRoll::from_object(&ds));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemonset_roll_says_what_restarts_where_and_how_fast() {
        let ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "cilium", "namespace": "kube-system"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "cilium-agent"}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}},
            "status": {"desiredNumberScheduled": 3, "numberReady": 3, "currentNumberScheduled": 3,
                "numberMisscheduled": 0}
        }))
        .expect("daemonset");
        let r = DaemonSetRoll::from_object(&ds);
        assert_eq!(
            r.radius(),
            "every cilium-agent on 3 nodes (DaemonSet kube-system/cilium, 3 ready now), one at a time (maxUnavailable 1)"
        );
        let mut pct = r.clone();
        pct.max_unavailable = "50%".into();
        pct.at_a_time = 2;
        assert!(pct.radius().ends_with("2 at a time (maxUnavailable 50%)"));
        let mut ds2 = ds.clone();
        if let Some(s) = ds2.spec.as_mut() {
            s.update_strategy = Some(
                serde_json::from_value(
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}),
                )
                .expect("strategy"),
            );
        }
        // 50% of 3 rounds up to 2, as the DaemonSet controller scales it.
        assert_eq!(DaemonSetRoll::from_object(&ds2).at_a_time, 2);
        let none = Preview {
            lines: vec![],
            daemonsets: vec![],
        };
        assert!(none.summary("HelmRelease x/y").contains("no DaemonSet"));
    }

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
