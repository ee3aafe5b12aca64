//! Server-side `Table` output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`): the
//! columns and cells the real kube-apiserver's printers give for each served kind, and for
//! custom resources the columns their CRD's `additionalPrinterColumns` name.
//!
//! Owns: the column definitions per kind (every column, the wide ones at priority 1, as
//! the real server sends them: kubectl drops priority-1 columns unless `-o wide`), the
//! cells of one object's row, ages as the API machinery's human durations, and the Table
//! document (rows carrying the object as `includeObject` asks).
//! Must not: read the store or speak HTTP.
//!
//! One file (over 800 lines): one column table per served kind, read side by side with the real
//! printers; a file per kind would scatter the shared age and cell helpers.

use jiff::Timestamp;
use jsonpath_rust::JsonPath;
use serde_json::{json, Map, Value};

use super::resources::{PrinterColumn, ResourceType};

/// One column of a Table (`metav1.TableColumnDefinition`).
struct Col {
    name: &'static str,
    type_: &'static str,
    priority: i32,
    description: &'static str,
}

const fn col(name: &'static str, description: &'static str) -> Col {
    Col {
        name,
        type_: "string",
        priority: 0,
        description,
    }
}

const fn int(name: &'static str, description: &'static str) -> Col {
    Col {
        name,
        type_: "integer",
        priority: 0,
        description,
    }
}

const fn wide(name: &'static str, description: &'static str) -> Col {
    Col {
        name,
        type_: "string",
        priority: 1,
        description,
    }
}

const NAME: Col = col("Name", "The object's name, unique within its namespace.");
const AGE: Col = col("Age", "Time since the object was created.");

const POD: &[Col] = &[
    NAME,
    col("Ready", "Ready containers of all containers."),
    col(
        "Status",
        "The pod's phase, or why its containers are not running.",
    ),
    col(
        "Restarts",
        "Container restarts, and how long ago the last one was.",
    ),
    AGE,
    wide("IP", "The pod's first IP address."),
    wide("Node", "The node the pod is bound to."),
    wide(
        "Nominated Node",
        "The node the scheduler nominated for preemption.",
    ),
    wide("Readiness Gates", "Readiness gates that are True, of all."),
];

const NODE: &[Col] = &[
    NAME,
    col(
        "Status",
        "Ready, NotReady or Unknown, and SchedulingDisabled.",
    ),
    col("Roles", "The node-role.kubernetes.io labels."),
    AGE,
    col("Version", "The kubelet's version."),
    wide("Internal-IP", "The node's InternalIP address."),
    wide("External-IP", "The node's ExternalIP address."),
    wide("OS-Image", "The node's OS image."),
    wide("Kernel-Version", "The node's kernel version."),
    wide(
        "Container-Runtime",
        "The node's container runtime and version.",
    ),
];

const DAEMONSET: &[Col] = &[
    NAME,
    int("Desired", "Nodes that should run the daemon pod."),
    int("Current", "Nodes that run at least one daemon pod."),
    int("Ready", "Nodes whose daemon pod is ready."),
    int("Up-to-date", "Nodes running the updated daemon pod."),
    int("Available", "Nodes whose daemon pod is available."),
    col("Node Selector", "The pod template's node selector."),
    AGE,
    wide("Containers", "The pod template's containers."),
    wide("Images", "The pod template's images."),
    wide("Selector", "The label selector of the daemon pods."),
];

const NAMESPACE: &[Col] = &[NAME, col("Status", "The namespace's phase."), AGE];

const LEASE: &[Col] = &[NAME, col("Holder", "The lease's holder identity."), AGE];

const CONFIGMAP: &[Col] = &[NAME, int("Data", "Keys in data and binaryData."), AGE];

const EVENT: &[Col] = &[
    col("Last Seen", "Time since the event was last observed."),
    col("Type", "Normal or Warning."),
    col("Reason", "Why the event was emitted, in one word."),
    col("Object", "The object the event is about."),
    wide(
        "Subobject",
        "The part of the object (a container) it is about.",
    ),
    wide("Source", "The component (and host) that reported it."),
    col("Message", "What happened, for people."),
    wide("First Seen", "Time since the event was first observed."),
    wide("Count", "How often it was observed."),
    Col {
        name: "Name",
        type_: "string",
        priority: 1,
        description: "The event's name.",
    },
];

const SERVICE: &[Col] = &[
    NAME,
    col("Type", "How the service is exposed."),
    col("Cluster-IP", "The service's cluster IP."),
    col("External-IP", "The service's external IPs."),
    col("Port(s)", "The service's ports."),
    AGE,
    wide("Selector", "The pods the service routes to."),
];

const ENDPOINTSLICE: &[Col] = &[
    NAME,
    col("AddressType", "The type of the slice's addresses."),
    col("Ports", "The slice's ports."),
    col("Endpoints", "The slice's endpoint addresses."),
    AGE,
];

/// The real server prints a CRD with its default table convertor: the name and when it was
/// created.
const CRD: &[Col] = &[
    NAME,
    Col {
        name: "Created At",
        type_: "date",
        priority: 0,
        description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
    },
];

/// The Name and Age columns every other kind of the real server gets.
const DEFAULT: &[Col] = &[NAME, AGE];

fn builtin_columns(res: &ResourceType) -> &'static [Col] {
    match (res.group, res.kind) {
        ("", "Pod") => POD,
        ("", "Node") => NODE,
        ("apps", "DaemonSet") => DAEMONSET,
        ("", "Namespace") => NAMESPACE,
        ("coordination.k8s.io", "Lease") => LEASE,
        ("", "ConfigMap") => CONFIGMAP,
        ("", "Event") | ("events.k8s.io", "Event") => EVENT,
        ("", "Service") => SERVICE,
        ("discovery.k8s.io", "EndpointSlice") => ENDPOINTSLICE,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => CRD,
        _ => DEFAULT,
    }
}

fn column_json(name: &str, type_: &str, format: &str, priority: i32, description: &str) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description,
        "priority": priority})
}

/// The Table's `columnDefinitions` for `res`.
pub fn columns(res: &ResourceType) -> Vec<Value> {
    if res.custom {
        let mut out = vec![column_json("Name", "string", "name", 0, NAME.description)];
        out.extend(crd_columns(res).iter().map(|c| {
            column_json(
                c.name,
                c.type_,
                "",
                c.priority,
                &format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    c.json_path
                ),
            )
        }));
        return out;
    }
    builtin_columns(res)
        .iter()
        .map(|c| {
            let format = if c.name == "Name" { "name" } else { "" };
            column_json(c.name, c.type_, format, c.priority, c.description)
        })
        .collect()
}

/// A CRD without printer columns gets an Age column (the API server's default).
fn crd_columns(res: &ResourceType) -> &'static [PrinterColumn] {
    const AGE_ONLY: &[PrinterColumn] = &[PrinterColumn {
        name: "Age",
        type_: "date",
        json_path: ".metadata.creationTimestamp",
        priority: 0,
    }];
    if res.printer_columns.is_empty() {
        AGE_ONLY
    } else {
        res.printer_columns
    }
}

/// `duration.HumanDuration`: `45s`, `3m20s`, `17m`, `5h10m`, `3d4h`, `2y30d`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Time since an RFC 3339 timestamp, or `<unknown>` when there is none.
fn since(ts: Option<&str>, now: Timestamp) -> String {
    match ts.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

fn s<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn or<'a>(v: &'a str, default: &'a str) -> &'a str {
    if v.is_empty() {
        default
    } else {
        v
    }
}

fn age(obj: &Value, now: Timestamp) -> String {
    since(
        obj.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now,
    )
}

/// `labels.FormatLabels`: `k=v,k2=v2` sorted by key, `<none>` when empty.
fn format_labels(m: Option<&Value>) -> String {
    let mut pairs: Vec<String> = m
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// `metav1.FormatLabelSelector` for matchLabels and matchExpressions, sorted by key.
fn format_selector(sel: Option<&Value>) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
    {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in sel
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let key = s(e, "/key").to_string();
        let mut values: Vec<&str> = arr(e, "/values").iter().filter_map(Value::as_str).collect();
        values.sort_unstable();
        let text = match s(e, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".into(),
        };
        reqs.push((key, text));
    }
    reqs.sort();
    let text: Vec<String> = reqs.into_iter().map(|(_, t)| t).collect();
    if text.is_empty() {
        "<none>".into()
    } else {
        text.join(",")
    }
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let containers = arr(pod, "/spec/containers").len();
    let mut reason = or(s(pod, "/status/reason"), s(pod, "/status/phase")).to_string();
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut has_running = false;
    for c in arr(pod, "/status/containerStatuses").iter().rev() {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        if let Some(t) = c
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
        {
            last_restart = Some(last_restart.map_or(t, |l| l.max(t)));
        }
        let waiting = s(c, "/state/waiting/reason");
        let terminated = c.pointer("/state/terminated");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if let Some(t) = terminated {
            let r = s(t, "/reason");
            reason = if !r.is_empty() {
                r.to_string()
            } else {
                match t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
                    Some(sig) => format!("Signal:{sig}"),
                    None => format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    ),
                }
            };
        } else if c.get("ready").and_then(Value::as_bool) == Some(true)
            && c.pointer("/state/running").is_some()
        {
            has_running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && has_running {
        let pod_ready = arr(pod, "/status/conditions")
            .iter()
            .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True");
        reason = if pod_ready { "Running" } else { "NotReady" }.into();
    }
    let phase = s(pod, "/status/phase");
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        if s(pod, "/status/reason") == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(phase, "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }
    let restarts_text = match last_restart {
        Some(t) if restarts != 0 => {
            format!(
                "{restarts} ({} ago)",
                human_duration(now.as_second() - t.as_second())
            )
        }
        _ => restarts.to_string(),
    };
    let ip = arr(pod, "/status/podIPs")
        .first()
        .map(|p| s(p, "/ip"))
        .unwrap_or("");
    let gates = arr(pod, "/spec/readinessGates");
    let gates_text = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = arr(pod, "/status/conditions");
        let true_ = gates
            .iter()
            .filter(|g| {
                let t = s(g, "/conditionType");
                conds
                    .iter()
                    .find(|c| s(c, "/type") == t)
                    .is_some_and(|c| s(c, "/status") == "True")
            })
            .count();
        format!("{true_}/{}", gates.len())
    };
    vec![
        json!(s(pod, "/metadata/name")),
        json!(format!("{ready}/{containers}")),
        json!(reason),
        json!(restarts_text),
        json!(age(pod, now)),
        json!(or(ip, "<none>")),
        json!(or(s(pod, "/spec/nodeName"), "<none>")),
        json!(or(s(pod, "/status/nominatedNodeName"), "<none>")),
        json!(gates_text),
    ]
}

fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    let mut status: Vec<String> = arr(node, "/status/conditions")
        .iter()
        .filter(|c| s(c, "/type") == "Ready")
        .take(1)
        .map(|c| {
            if s(c, "/status") == "True" {
                "Ready".to_string()
            } else {
                "NotReady".to_string()
            }
        })
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!r.is_empty()).then(|| r.to_string())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|v| !v.is_empty()).map(str::to_string)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |t: &str| {
        arr(node, "/status/addresses")
            .iter()
            .find(|a| s(a, "/type") == t)
            .map(|a| s(a, "/address").to_string())
            .unwrap_or_else(|| "<none>".into())
    };
    let info = |f: &str| or(s(node, &format!("/status/nodeInfo/{f}")), "<unknown>").to_string();
    vec![
        json!(s(node, "/metadata/name")),
        json!(status.join(",")),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        json!(age(node, now)),
        json!(s(node, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn daemonset_cells(ds: &Value, now: Timestamp) -> Vec<Value> {
    let n = |f: &str| {
        ds.pointer(&format!("/status/{f}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let containers = arr(ds, "/spec/template/spec/containers");
    let join = |f: &str| {
        containers
            .iter()
            .map(|c| s(c, f))
            .collect::<Vec<_>>()
            .join(",")
    };
    vec![
        json!(s(ds, "/metadata/name")),
        json!(n("desiredNumberScheduled")),
        json!(n("currentNumberScheduled")),
        json!(n("numberReady")),
        json!(n("updatedNumberScheduled")),
        json!(n("numberAvailable")),
        json!(format_labels(
            ds.pointer("/spec/template/spec/nodeSelector")
        )),
        json!(age(ds, now)),
        json!(join("/name")),
        json!(join("/image")),
        json!(format_selector(ds.pointer("/spec/selector"))),
    ]
}

fn event_cells(ev: &Value, now: Timestamp) -> Vec<Value> {
    let first = match ev.get("firstTimestamp").and_then(Value::as_str) {
        Some(t) => since(Some(t), now),
        None => since(ev.get("eventTime").and_then(Value::as_str), now),
    };
    let mut last = match ev.get("lastTimestamp").and_then(Value::as_str) {
        Some(t) => since(Some(t), now),
        None => first.clone(),
    };
    let mut count = ev.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = ev.get("series").filter(|s| s.is_object()) {
        last = since(series.get("lastObservedTime").and_then(Value::as_str), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = s(ev, "/involvedObject/kind").to_lowercase();
    let name = s(ev, "/involvedObject/name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = or(s(ev, "/source/component"), s(ev, "/reportingComponent"));
    let instance = or(s(ev, "/source/host"), s(ev, "/reportingInstance"));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(s(ev, "/type")),
        json!(s(ev, "/reason")),
        json!(target),
        json!(s(ev, "/involvedObject/fieldPath")),
        json!(source),
        json!(s(ev, "/message").trim()),
        json!(first),
        json!(count),
        json!(s(ev, "/metadata/name")),
    ]
}

fn service_cells(svc: &Value, now: Timestamp) -> Vec<Value> {
    let type_ = s(svc, "/spec/type");
    let cluster_ip = arr(svc, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let external: Vec<&str> = arr(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external_text = match type_ {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".into(),
        "ExternalName" => s(svc, "/spec/externalName").to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<&str> = arr(svc, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| or(s(i, "/ip"), s(i, "/hostname")))
                .filter(|x| !x.is_empty())
                .collect();
            ips.sort_unstable();
            ips.dedup();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = arr(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = s(p, "/protocol");
            match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
                Some(np) => format!("{port}:{np}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    vec![
        json!(s(svc, "/metadata/name")),
        json!(type_),
        json!(cluster_ip),
        json!(external_text),
        json!(if ports.is_empty() {
            "<none>".into()
        } else {
            ports.join(",")
        }),
        json!(age(svc, now)),
        json!(format_labels(svc.pointer("/spec/selector"))),
    ]
}

/// `listWithMoreString`: the first three, then `+ N more...`; `<unset>` when empty.
fn first_three(all: &[String]) -> String {
    if all.len() > 3 {
        return format!("{} + {} more...", all[..3].join(","), all.len() - 3);
    }
    if all.is_empty() {
        "<unset>".into()
    } else {
        all.join(",")
    }
}

fn endpointslice_cells(es: &Value, now: Timestamp) -> Vec<Value> {
    let ports: Vec<String> = arr(es, "/ports")
        .iter()
        .map(|p| match p.get("port").and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => or(s(p, "/name"), "*").to_string(),
        })
        .collect();
    let addrs: Vec<String> = arr(es, "/endpoints")
        .iter()
        .flat_map(|e| arr(e, "/addresses").iter())
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    vec![
        json!(s(es, "/metadata/name")),
        json!(s(es, "/addressType")),
        json!(first_three(&ports)),
        json!(first_three(&addrs)),
        json!(age(es, now)),
    ]
}

/// A CRD column's cell: a string column prints what the JSONPath finds; a date column
/// the age; a missing value is null (kubectl prints `<none>`).
fn crd_cell(obj: &Value, c: &PrinterColumn, now: Timestamp) -> Value {
    let path = format!("${}", c.json_path);
    let found = obj
        .query(&path)
        .ok()
        .and_then(|r| r.into_iter().next().cloned());
    let Some(v) = found else {
        return Value::Null;
    };
    match c.type_ {
        "string" => match v {
            Value::String(t) => json!(t),
            Value::Null => Value::Null,
            other => json!(other.to_string()),
        },
        "date" => match v.as_str() {
            Some(t) => match t.parse::<Timestamp>() {
                Ok(t) => json!(human_duration(now.as_second() - t.as_second())),
                Err(_) => json!("<invalid>"),
            },
            None => Value::Null,
        },
        "integer" => v.as_i64().map_or(Value::Null, |n| json!(n)),
        "number" => v.as_f64().map_or(Value::Null, |n| json!(n)),
        "boolean" => v.as_bool().map_or(Value::Null, |b| json!(b)),
        _ => Value::Null,
    }
}

/// The cells of `obj`'s row, every column's (wide ones included, as the real server).
pub fn cells(res: &ResourceType, obj: &Value, now: Timestamp) -> Vec<Value> {
    if res.custom {
        let mut out = vec![json!(s(obj, "/metadata/name"))];
        out.extend(crd_columns(res).iter().map(|c| crd_cell(obj, c, now)));
        return out;
    }
    match (res.group, res.kind) {
        ("", "Pod") => pod_cells(obj, now),
        ("", "Node") => node_cells(obj, now),
        ("apps", "DaemonSet") => daemonset_cells(obj, now),
        ("", "Namespace") => vec![
            json!(s(obj, "/metadata/name")),
            json!(s(obj, "/status/phase")),
            json!(age(obj, now)),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            json!(s(obj, "/metadata/name")),
            json!(s(obj, "/spec/holderIdentity")),
            json!(age(obj, now)),
        ],
        ("", "ConfigMap") => {
            let n = |f: &str| obj.get(f).and_then(Value::as_object).map_or(0, Map::len);
            vec![
                json!(s(obj, "/metadata/name")),
                json!(n("data") + n("binaryData")),
                json!(age(obj, now)),
            ]
        }
        // The events.k8s.io view is printed from the core object it is made from.
        (_, "Event") => event_cells(obj, now),
        ("", "Service") => service_cells(obj, now),
        ("discovery.k8s.io", "EndpointSlice") => endpointslice_cells(obj, now),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![
            json!(s(obj, "/metadata/name")),
            json!(s(obj, "/metadata/creationTimestamp")),
        ],
        _ => vec![json!(s(obj, "/metadata/name")), json!(age(obj, now))],
    }
}

/// What each row carries of its object (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    /// The default: a `PartialObjectMetadata`.
    Metadata,
    Object,
}

/// An `includeObject` value the API server does not know (400, in its words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unrecognized includeObject value: {value:?}")]
pub struct UnknownInclude {
    pub value: String,
}

impl Include {
    pub fn parse(v: Option<&str>) -> Result<Include, UnknownInclude> {
        match v {
            None | Some("" | "Metadata") => Ok(Include::Metadata),
            Some("Object") => Ok(Include::Object),
            Some("None") => Ok(Include::None),
            Some(other) => Err(UnknownInclude {
                value: other.to_string(),
            }),
        }
    }
}

/// One row: the cells, and the object as `include` asks (`version` is the Table's
/// meta.k8s.io version, which the partial metadata carries).
pub fn row(
    res: &ResourceType,
    obj: &Value,
    include: Include,
    version: &str,
    now: Timestamp,
) -> Value {
    let object = match include {
        Include::None => Value::Null,
        Include::Metadata => json!({"kind": "PartialObjectMetadata",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))}),
        Include::Object => {
            let mut o = obj.clone();
            if let Value::Object(m) = &mut o {
                m.entry("apiVersion")
                    .or_insert_with(|| json!(res.api_version()));
                m.entry("kind").or_insert_with(|| json!(res.kind));
            }
            o
        }
    };
    json!({"cells": cells(res, obj, now), "object": object})
}

/// A Table of `rows` (with the column definitions unless `headers` is false, as in a
/// watch's later events) and the list's metadata.
pub fn table(
    res: &ResourceType,
    rows: Vec<Value>,
    headers: bool,
    meta: Map<String, Value>,
    version: &str,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": meta,
        "columnDefinitions": if headers { columns(res) } else { Vec::new() },
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_path;

    #[test]
    fn human_durations_as_the_api_machinery() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 10 * 60, "5h10m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (3 * 86400, "3d"),
            (100 * 86400, "100d"),
            (3 * 365 * 86400 + 30 * 86400, "3y30d"),
            (10 * 365 * 86400, "10y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn pod_rows_follow_the_printer() {
        let res = by_path("", "v1", "pods").expect("pods");
        let now: Timestamp = "2026-01-01T00:10:00Z".parse().expect("ts");
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}],
                "containerStatuses": [
                    {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                     "lastState": {"terminated": {"finishedAt": "2026-01-01T00:07:00Z"}}},
                    {"name": "b", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let c = cells(res, &pod, now);
        assert_eq!(
            c,
            vec![
                json!("p"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("2 (3m ago)"),
                json!("10m"),
                json!("10.0.0.1"),
                json!("n1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let mut gone = pod.clone();
        gone["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:10:30Z");
        gone["status"]["containerStatuses"][1]["state"] = json!({"running": {}});
        assert_eq!(cells(res, &gone, now)[2], json!("Terminating"));
        assert_eq!(columns(res).len(), c.len());
    }

    #[test]
    fn crd_columns_from_the_printer_columns() {
        let res = by_path("helm.toolkit.fluxcd.io", "v2", "helmreleases").expect("hr");
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().expect("ts");
        let hr = json!({"metadata": {"name": "cilium", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Reconciling", "status": "False", "message": "x"},
                {"type": "Ready", "status": "True", "message": "Helm upgrade succeeded"}]}});
        assert_eq!(
            cells(res, &hr, now),
            vec![
                json!("cilium"),
                json!("60m"),
                json!("True"),
                json!("Helm upgrade succeeded")
            ]
        );
        let bare = json!({"metadata": {"name": "x"}});
        assert_eq!(cells(res, &bare, now)[2], Value::Null);
        let names: Vec<Value> = columns(res).iter().map(|c| c["name"].clone()).collect();
        assert_eq!(names, ["Name", "Age", "Ready", "Status"]);
    }

    #[test]
    fn selectors_and_labels_format_sorted() {
        assert_eq!(
            format_selector(Some(&json!({"matchLabels": {"b": "2", "a": "1"},
                "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}]}))),
            "a=1,b=2,c in (x,y)"
        );
        assert_eq!(format_labels(None), "<none>");
    }
}
