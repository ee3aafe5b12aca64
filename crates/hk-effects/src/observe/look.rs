//! The read-only looks behind a verdict: an object's Kubernetes events, a pod's recent log
//! lines, and a describe-like view of its state, as `kubectl get events` / `logs --tail` /
//! `describe` would show them.
//!
//! Owns: [`take`]: one look ([`LookKind`]) at one object ([`summary::Look`]) through the
//! environment's kube client, turned into lines for the look pane; what it cannot read is
//! said in one line naming the object and the reason, never an empty pane.
//! Must not: write anything (GET, LIST and the log subresource only), or judge.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, LogParams};
use kube::Api;

use super::summary::{Look, LookKind};

/// How many log lines a look asks for.
pub const LOG_TAIL: i64 = 40;

/// What one look showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookResult {
    pub kind: LookKind,
    /// `events pod kube-system/cilium-x`.
    pub title: String,
    /// The lines, or why there are none.
    pub lines: Result<Vec<String>, String>,
}

fn object_words(look: &Look) -> String {
    let o = &look.object;
    match &o.namespace {
        Some(ns) => format!("{} {ns}/{}", o.kind.to_lowercase(), o.name),
        None => format!("{} {}", o.kind.to_lowercase(), o.name),
    }
}

/// One look, bounded by `timeout`.
pub async fn take(
    client: &kube::Client,
    look: &Look,
    kind: LookKind,
    timeout: Duration,
) -> LookResult {
    let title = format!("{} {}", kind_word(kind), object_words(look));
    let fut = async {
        match kind {
            LookKind::Events => events(client, look).await,
            LookKind::Logs => logs(client, look).await,
            LookKind::Describe => describe(client, look).await,
        }
    };
    let lines = match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {}s", timeout.as_secs())),
    };
    LookResult { kind, title, lines }
}

fn kube_err(what: &str, e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{what}: {} ({})", s.message, s.code),
        other => format!("{what}: {other}"),
    }
}

async fn events(client: &kube::Client, look: &Look) -> Result<Vec<String>, String> {
    let o = &look.object;
    // Node events live in the default namespace; ask everywhere for cluster-scoped kinds.
    let api: Api<Event> = match &o.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind={},involvedObject.name={}",
        o.kind, o.name
    ));
    let mut items = api
        .list(&lp)
        .await
        .map_err(|e| kube_err("list events", e))?
        .items;
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    };
    items.sort_by_key(when);
    if items.is_empty() {
        return Ok(vec![format!("no events for {}", object_words(look))]);
    }
    Ok(items
        .iter()
        .map(|e| {
            let at = when(e)
                .map(|t| t.strftime("%H:%M:%S").to_string())
                .unwrap_or_else(|| "--:--:--".into());
            let count = e
                .count
                .filter(|c| *c > 1)
                .map(|c| format!(" (x{c})"))
                .unwrap_or_default();
            format!(
                "{at} {:<7} {}{count}: {}",
                e.type_.as_deref().unwrap_or("?"),
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("").trim()
            )
        })
        .collect())
}

async fn logs(client: &kube::Client, look: &Look) -> Result<Vec<String>, String> {
    let o = &look.object;
    if o.kind != "Pod" {
        return Err(format!(
            "{} has no logs (only a pod does)",
            object_words(look)
        ));
    }
    let ns = o.namespace.as_deref().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = LogParams {
        container: look.container.clone(),
        tail_lines: Some(LOG_TAIL),
        ..LogParams::default()
    };
    let text = api
        .logs(&o.name, &lp)
        .await
        .map_err(|e| kube_err("read logs", e))?;
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return Ok(vec![format!("{} logged nothing", object_words(look))]);
    }
    Ok(lines)
}

async fn describe(client: &kube::Client, look: &Look) -> Result<Vec<String>, String> {
    let o = &look.object;
    let ns = o.namespace.as_deref().unwrap_or("default");
    let get = |what: &str, e| kube_err(&format!("get {what}"), e);
    let mut out = Vec::new();
    match o.kind.as_str() {
        "Pod" => {
            let p = Api::<Pod>::namespaced(client.clone(), ns)
                .get(&o.name)
                .await
                .map_err(|e| get("pod", e))?;
            let spec = p.spec.unwrap_or_default();
            let st = p.status.unwrap_or_default();
            out.push(format!("Name:   {ns}/{}", o.name));
            out.push(format!(
                "Node:   {}",
                spec.node_name.unwrap_or_else(|| "<none>".into())
            ));
            out.push(format!(
                "Phase:  {}",
                st.phase.unwrap_or_else(|| "<none>".into())
            ));
            out.push("Conditions:".into());
            for c in st.conditions.unwrap_or_default() {
                out.push(format!(
                    "  {:<16} {}{}",
                    c.type_,
                    c.status,
                    c.reason.map(|r| format!(" ({r})")).unwrap_or_default()
                ));
            }
            out.push("Containers:".into());
            for c in st.container_statuses.unwrap_or_default() {
                let state = c.state.as_ref().map(|s| {
                    if let Some(w) = &s.waiting {
                        format!("Waiting ({})", w.reason.as_deref().unwrap_or("?"))
                    } else if let Some(t) = &s.terminated {
                        format!(
                            "Terminated ({}, exit {})",
                            t.reason.as_deref().unwrap_or("?"),
                            t.exit_code
                        )
                    } else if s.running.is_some() {
                        "Running".to_string()
                    } else {
                        "?".to_string()
                    }
                });
                out.push(format!(
                    "  {:<16} ready={} restarts={} {}",
                    c.name,
                    c.ready,
                    c.restart_count,
                    state.unwrap_or_default()
                ));
            }
        }
        "Node" => {
            let n = Api::<Node>::all(client.clone())
                .get(&o.name)
                .await
                .map_err(|e| get("node", e))?;
            let st = n.status.unwrap_or_default();
            out.push(format!("Name:   {}", o.name));
            let addrs: Vec<String> = st
                .addresses
                .unwrap_or_default()
                .into_iter()
                .map(|a| format!("{}={}", a.type_, a.address))
                .collect();
            out.push(format!("Addresses: {}", addrs.join(", ")));
            out.push("Conditions:".into());
            for c in st.conditions.unwrap_or_default() {
                let since = c
                    .last_transition_time
                    .map(|t| t.0.strftime("%H:%M:%S").to_string())
                    .unwrap_or_default();
                out.push(format!(
                    "  {:<20} {:<7} since {since} {}",
                    c.type_,
                    c.status,
                    c.message.unwrap_or_default()
                ));
            }
        }
        "Lease" => {
            let l = Api::<Lease>::namespaced(client.clone(), ns)
                .get(&o.name)
                .await
                .map_err(|e| get("lease", e))?;
            let s = l.spec.unwrap_or_default();
            out.push(format!("Name:        {ns}/{}", o.name));
            out.push(format!(
                "Holder:      {}",
                s.holder_identity.unwrap_or_else(|| "<none>".into())
            ));
            out.push(format!(
                "Renewed:     {}",
                s.renew_time
                    .map(|t| t.0.strftime("%H:%M:%S%.3f").to_string())
                    .unwrap_or_else(|| "<never>".into())
            ));
            out.push(format!(
                "Duration:    {}",
                s.lease_duration_seconds
                    .map(|d| format!("{d}s"))
                    .unwrap_or_else(|| "<unset>".into())
            ));
            out.push(format!(
                "Transitions: {}",
                s.lease_transitions
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "<unset>".into())
            ));
        }
        "DaemonSet" => {
            let d = Api::<DaemonSet>::namespaced(client.clone(), ns)
                .get(&o.name)
                .await
                .map_err(|e| get("daemonset", e))?;
            let st = d.status.unwrap_or_default();
            out.push(format!("Name:        {ns}/{}", o.name));
            out.push(format!(
                "Desired {} · current {} · updated {} · ready {} · available {} · unavailable {}",
                st.desired_number_scheduled,
                st.current_number_scheduled,
                st.updated_number_scheduled.unwrap_or(0),
                st.number_ready,
                st.number_available.unwrap_or(0),
                st.number_unavailable.unwrap_or(0)
            ));
        }
        other => return Err(format!("no describe for kind {other}")),
    }
    Ok(out)
}

/// Takes looks for the console: the UI asks, the event loop awaits the answer off the UI
/// task. A port, so the UI never holds a kube client and tests can answer without one.
pub trait LookSource: Send + Sync {
    /// Take look `kind` at `look`'s object; a failure is in the result, never a panic.
    fn take(&self, look: Look, kind: LookKind) -> futures::future::BoxFuture<'static, LookResult>;
}

/// How long one look may take before the pane says it got no answer.
pub const LOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Looks through each environment's own kube client, built (once, on first use) from the
/// repo's kubeconfig for it and the operator's overrides, as the live watchers' are.
pub struct Looker {
    repo: std::sync::Arc<hk_engine::repo::Repo>,
    overrides: crate::cluster::KubeOverrides,
    clients: std::sync::Arc<tokio::sync::Mutex<std::collections::BTreeMap<String, kube::Client>>>,
}

impl Looker {
    pub fn new(
        repo: std::sync::Arc<hk_engine::repo::Repo>,
        overrides: crate::cluster::KubeOverrides,
    ) -> Self {
        Looker {
            repo,
            overrides,
            clients: std::sync::Arc::default(),
        }
    }
}

impl LookSource for Looker {
    fn take(&self, look: Look, kind: LookKind) -> futures::future::BoxFuture<'static, LookResult> {
        let repo = std::sync::Arc::clone(&self.repo);
        let overrides = self.overrides.clone();
        let clients = std::sync::Arc::clone(&self.clients);
        Box::pin(async move {
            let client = {
                let mut held = clients.lock().await;
                match held.get(&look.env) {
                    Some(c) => Ok(c.clone()),
                    None => {
                        let made = async {
                            let target = crate::cluster::kube_target(&repo, &look.env, &overrides)?;
                            crate::cluster::client(&target).await
                        }
                        .await;
                        if let Ok(c) = &made {
                            held.insert(look.env.clone(), c.clone());
                        }
                        made.map_err(|e| e.to_string())
                    }
                }
            };
            match client {
                Ok(c) => take(&c, &look, kind, LOOK_TIMEOUT).await,
                Err(e) => LookResult {
                    kind,
                    title: format!("{} {}", kind_word(kind), object_words(&look)),
                    lines: Err(format!("no kube client for {}: {e}", look.env)),
                },
            }
        })
    }
}

fn kind_word(kind: LookKind) -> &'static str {
    match kind {
        LookKind::Events => "events",
        LookKind::Logs => "logs",
        LookKind::Describe => "describe",
    }
}
