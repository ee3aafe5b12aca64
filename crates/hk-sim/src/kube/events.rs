//! Events: what the simulated controllers record (a core/v1 Event, aggregated as client-go's
//! recorder does: the same object, reason and message again bumps `count` and
//! `lastTimestamp`), their lifetime (the real server's `--event-ttl`, one hour, and a cap),
//! and the events.k8s.io/v1 view of the same objects.
//!
//! Owns: [`record`], [`expire`], and [`to_events_v1`] (core/v1 -> events.k8s.io/v1, field
//! by field as the API server's conversion).
//! Must not: emit anything of its own accord (the controllers in `sim::cluster` decide).

use serde_json::{json, Value};

use super::api::ClusterApi;
use super::store::ObjRef;
#[cfg(test)]
use super::store::Store;
use super::SimError;

/// The real API server keeps events for an hour (`--event-ttl`).
pub const EVENT_TTL_S: i64 = 3600;
/// Events kept at most, oldest dropped first: a bound on memory whatever the scenario.
pub const MAX_EVENTS: usize = 500;

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Involved {
    pub api_version: String,
    pub kind: String,
    /// `None` for cluster-scoped objects (their events go to `default`, as a kubelet's do).
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// `spec.containers{cilium-agent}` for a container's events.
    pub field_path: Option<String>,
}

impl Involved {
    /// The object `r` as the cluster has it now (its uid); `None` if it is gone.
    pub async fn of<C: ClusterApi>(api: &C, r: &ObjRef) -> Option<Involved> {
        let obj = api.fetch(r).await.ok().flatten()?;
        Some(Involved {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: obj
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            field_path: None,
        })
    }

    pub fn container(mut self, name: &str) -> Involved {
        self.field_path = Some(format!("spec.containers{{{name}}}"));
        self
    }
}

/// Who reports: `kubelet` on a host, `default-scheduler`, `daemonset-controller`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    pub component: &'a str,
    pub host: Option<&'a str>,
}

fn now_seconds() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// Record `type_` (`Normal`/`Warning`) `reason`: `message` about `inv`, from `src`.
pub async fn record<C: ClusterApi>(
    store: &C,
    inv: &Involved,
    type_: &str,
    reason: &str,
    message: &str,
    src: Source<'_>,
) -> Result<(), SimError> {
    record_annotated(store, inv, &[], type_, reason, message, src).await
}

/// [`record`] with the event's own `annotations`, as client-go's `AnnotatedEventf` makes it
/// (Flux's controllers put the revision there). An aggregated event keeps the annotations it
/// was first recorded with, as client-go's correlator does.
pub async fn record_annotated<C: ClusterApi>(
    store: &C,
    inv: &Involved,
    annotations: &[(&str, &str)],
    type_: &str,
    reason: &str,
    message: &str,
    src: Source<'_>,
) -> Result<(), SimError> {
    let ns = inv.namespace.clone().unwrap_or_else(|| "default".into());
    let now = now_seconds();
    let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let same = store
        .objects("v1", "Event", Some(&ns))
        .await?
        .into_iter()
        .find(|e| {
            let f = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or("");
            f("/involvedObject/uid") == inv.uid
                && f("/involvedObject/name") == inv.name
                && f("/involvedObject/kind") == inv.kind
                && f("/involvedObject/fieldPath") == inv.field_path.as_deref().unwrap_or("")
                && f("/reason") == reason
                && f("/message") == message
                && f("/source/component") == src.component
        });
    if let Some(e) = same {
        let name = e
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let count = e.get("count").and_then(Value::as_i64).unwrap_or(1);
        store
            .merge_patch(
                &ObjRef::new("v1", "Event", Some(&ns), &name),
                json!({"count": count + 1, "lastTimestamp": stamp}),
            )
            .await?;
        return expire(store).await;
    }
    let mut involved = json!({"apiVersion": inv.api_version, "kind": inv.kind,
        "name": inv.name, "uid": inv.uid});
    if let Some(n) = &inv.namespace {
        involved["namespace"] = json!(n);
    }
    if let Some(fp) = &inv.field_path {
        involved["fieldPath"] = json!(fp);
    }
    let mut source = json!({"component": src.component});
    if let Some(h) = src.host {
        source["host"] = json!(h);
    }
    // client-go names an event after its object and the time in hex nanoseconds.
    let nanos = u128::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(0);
    let mut metadata = json!({"name": format!("{}.{nanos:x}", inv.name), "namespace": ns});
    if !annotations.is_empty() {
        let a: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_string(), json!(v)))
            .collect();
        metadata["annotations"] = Value::Object(a);
    }
    store
        .apply(json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": metadata,
            "involvedObject": involved,
            "reason": reason, "message": message, "type": type_,
            "source": source,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "eventTime": null,
            "reportingComponent": src.component,
            "reportingInstance": src.host.unwrap_or(""),
        }))
        .await?;
    expire(store).await
}

/// Drop events older than [`EVENT_TTL_S`], then the oldest beyond [`MAX_EVENTS`].
pub async fn expire<C: ClusterApi>(store: &C) -> Result<(), SimError> {
    let mut all: Vec<(i64, ObjRef)> = store
        .objects("v1", "Event", None)
        .await?
        .iter()
        .map(|e| {
            let f = |p: &str| e.pointer(p).and_then(Value::as_str).unwrap_or("");
            let last = f("/lastTimestamp")
                .parse::<jiff::Timestamp>()
                .map_or(0, |t| t.as_second());
            (
                last,
                ObjRef::new(
                    "v1",
                    "Event",
                    Some(f("/metadata/namespace")),
                    f("/metadata/name"),
                ),
            )
        })
        .collect();
    all.sort_by_key(|(t, _)| *t);
    let cutoff = jiff::Timestamp::now().as_second() - EVENT_TTL_S;
    let excess = all.len().saturating_sub(MAX_EVENTS);
    for (i, (t, r)) in all.iter().enumerate() {
        if i < excess || *t < cutoff {
            store.remove(r).await?;
        }
    }
    Ok(())
}

/// A core/v1 Event as events.k8s.io/v1 serves it (the API server converts between the two
/// versions of one stored object).
pub fn to_events_v1(core: &Value) -> Value {
    let mut out = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": core.get("metadata").cloned().unwrap_or_else(|| json!({}))});
    let map = [
        ("eventTime", "eventTime"),
        ("series", "series"),
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
        ("involvedObject", "regarding"),
        ("related", "related"),
        ("message", "note"),
        ("type", "type"),
        ("source", "deprecatedSource"),
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
        ("count", "deprecatedCount"),
    ];
    if let Value::Object(m) = &mut out {
        for (from, to) in map {
            if let Some(v) = core.get(from).filter(|v| !v.is_null()) {
                m.insert(to.into(), v.clone());
            }
        }
        // eventTime is required in events.k8s.io/v1: a legacy event shows its first time.
        if !m.contains_key("eventTime") {
            let first = core
                .get("firstTimestamp")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(super::micro_time);
            m.insert("eventTime".into(), json!(first));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn recorded_events_aggregate_and_convert() {
        let store = Store::new(100);
        store
            .apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
            .expect("node");
        let inv = Involved::of(&store, &ObjRef::new("v1", "Node", None, "n1"))
            .await
            .expect("node");
        let src = Source {
            component: "node-controller",
            host: None,
        };
        for _ in 0..3 {
            record(
                &store,
                &inv,
                "Normal",
                "NodeNotReady",
                "Node n1 status is now: NodeNotReady",
                src,
            )
            .await
            .expect("record");
        }
        let evs = store
            .objects("v1", "Event", Some("default"))
            .expect("events");
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0]["count"], 3);
        assert_eq!(evs[0]["involvedObject"]["uid"], json!(inv.uid));
        let v1 = to_events_v1(&evs[0]);
        assert_eq!(v1["regarding"]["name"], "n1");
        assert_eq!(v1["note"], "Node n1 status is now: NodeNotReady");
        assert_eq!(v1["deprecatedCount"], 3);
        assert!(v1["eventTime"].as_str().is_some_and(|t| t.ends_with('Z')));
    }

    #[tokio::test]
    async fn events_are_bounded() {
        let store = Store::new(100);
        store
            .apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
            .expect("node");
        let inv = Involved::of(&store, &ObjRef::new("v1", "Node", None, "n1"))
            .await
            .expect("node");
        let src = Source {
            component: "kubelet",
            host: Some("n1"),
        };
        for i in 0..(MAX_EVENTS + 20) {
            record(&store, &inv, "Normal", "Test", &format!("message {i}"), src)
                .await
                .expect("record");
        }
        let n = store.objects("v1", "Event", None).expect("events").len();
        assert_eq!(n, MAX_EVENTS);
    }
}
