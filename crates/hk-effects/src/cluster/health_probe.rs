//! The read-only look the guard rails take at a cluster: the health gate between hosts and
//! the look before a `disrupts: node` step.
//!
//! Owns: gathering a [`ClusterSnapshot`] (one LIST of the nodes, the agent pods and the
//! namespace's ConfigMaps, one GET of the kube-vip Lease and of `/readyz/etcd` through the
//! environment's API endpoint), [`wait_healthy`] (looks until the gate passes, the timeout
//! or a cancel) and [`look_before_disruption`].
//! Must not: write anything (only GET/LIST; tests/guard_health.rs counts the writes in the
//! real API server's audit log), or judge (that is `guard::health`).

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::explain;
use super::{convert, WatchSettings};
use hk_engine::checks::live::{EnvTopology, Look, Rule};
use hk_engine::guard::health::{
    disruption, ClusterSnapshot, DisruptionVerdict, EtcdReady, GateState, GateWatch, HealthNode,
    LeaseLook,
};
use hk_engine::runbook::plan::{HealthGate, NodeDisruption};
use hk_engine::time::now;

use super::WaitEnd;

/// Where the health gate reads etcd's members from (the etcd look's `EtcdSource`, over
/// SSH): a port, so the gate does not reach into the look.
pub trait EtcdMembers: std::fmt::Debug + Send + Sync {
    fn read<'a>(
        &'a self,
        env: &'a str,
        cancel: &'a CancellationToken,
    ) -> futures::future::BoxFuture<'a, Look<hk_engine::checks::live::EtcdClientView>>;
}

async fn list<K>(api: Api<K>, lp: ListParams, what: &str, settings: &WatchSettings) -> Look<Vec<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    match tokio::time::timeout(settings.request_timeout, api.list(&lp)).await {
        Ok(Ok(l)) => Look::seen(l.items),
        Ok(Err(e)) => Look::could_not(format!("list {what}: {}", explain(&e))),
        Err(_) => Look::could_not(format!(
            "list {what}: no answer within {} s",
            settings.request_timeout.as_secs()
        )),
    }
}

/// A Node as the gate reads it: the Ready condition and when it last changed.
pub fn health_node(n: &Node) -> HealthNode {
    let obs = convert::node(n);
    let since = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| convert::timestamp(&t.0));
    HealthNode {
        name: obs.name,
        ready: obs.ready,
        since,
    }
}

fn refs<K>(l: &Look<Vec<K>>) -> Look<Vec<&K>> {
    match l {
        Look::Seen { value } => Look::seen(value.iter().collect()),
        Look::CouldNotLook { reason } => Look::could_not(reason.clone()),
    }
}

fn lease_look(l: &Lease) -> LeaseLook {
    let obs = convert::lease(l);
    LeaseLook {
        name: obs.name,
        holder: obs.holder_identity,
        renew_time: obs.renew_time,
        acquire_time: l
            .spec
            .as_ref()
            .and_then(|s| s.acquire_time.as_ref())
            .map(|t| convert::timestamp(&t.0)),
        duration_s: obs.lease_duration_seconds,
    }
}

/// `/readyz/etcd` of the API server the client's endpoint reaches (the environment's VIP
/// when its kubeconfig names it): `ok`, or what it answered instead.
pub async fn readyz_etcd(client: &Client, settings: &WatchSettings) -> Look<EtcdReady> {
    let req = match http::Request::get("/readyz/etcd").body(Vec::new()) {
        Ok(r) => r,
        Err(e) => return Look::could_not(format!("GET /readyz/etcd: {e}")),
    };
    match tokio::time::timeout(settings.request_timeout, client.request_text(req)).await {
        Ok(Ok(body)) if body.trim() == "ok" => Look::seen(EtcdReady::Ok),
        Ok(Ok(body)) => Look::seen(EtcdReady::Failed {
            detail: body.trim().to_string(),
        }),
        // A server error is the check's verdict (readyz answers 500 naming the failed
        // check); a refusal (401, 403) or anything else is a failure to look.
        Ok(Err(kube::Error::Api(s))) if s.code >= 500 => Look::seen(EtcdReady::Failed {
            detail: format!("{} {}", s.code, s.message.trim()),
        }),
        Ok(Err(e)) => Look::could_not(format!("GET /readyz/etcd: {}", explain(&e))),
        Err(_) => Look::could_not(format!(
            "GET /readyz/etcd: no answer within {} s",
            settings.request_timeout.as_secs()
        )),
    }
}

/// One look at everything the gate judges, all at once.
pub async fn snapshot(
    client: &Client,
    topo: &EnvTopology,
    settings: &WatchSettings,
) -> ClusterSnapshot {
    let ns = settings.namespace.as_str();
    let pods_what = format!("pods {} in {ns}", settings.agent_selector);
    let cms_what = format!("ConfigMaps in {ns}");
    let lease_what = format!("Lease {ns}/{}", settings.lease_name);
    let (nodes, pods, cms, lease, etcd) = tokio::join!(
        list(
            Api::<Node>::all(client.clone()),
            ListParams::default(),
            "nodes",
            settings
        ),
        list(
            Api::<Pod>::namespaced(client.clone(), ns),
            ListParams::default().labels(&settings.agent_selector),
            &pods_what,
            settings,
        ),
        list(
            Api::<ConfigMap>::namespaced(client.clone(), ns),
            ListParams::default(),
            &cms_what,
            settings,
        ),
        async {
            let api = Api::<Lease>::namespaced(client.clone(), ns);
            match tokio::time::timeout(settings.request_timeout, api.get_opt(&settings.lease_name))
                .await
            {
                Ok(Ok(l)) => Look::seen(l.as_ref().map(lease_look)),
                Ok(Err(e)) => Look::could_not(format!("get {lease_what}: {}", explain(&e))),
                Err(_) => Look::could_not(format!("get {lease_what}: no answer in time")),
            }
        },
        readyz_etcd(client, settings),
    );
    let at = now();
    let nodes = match nodes {
        Look::Seen { value } => {
            let mut v: Vec<HealthNode> = value.iter().map(health_node).collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            Look::seen(v)
        }
        Look::CouldNotLook { reason } => Look::could_not(reason),
    };
    // The agent env pane's own rule classifies what each agent dials.
    let pane = convert::agents_pane(topo, &refs(&pods), &refs(&cms), &settings.agent_container);
    let agents = match pane.verdicts.iter().find(|v| v.rule == Rule::CouldNotLook) {
        Some(v) => Look::could_not(v.message.clone()),
        None => Look::seen(pane.agents),
    };
    ClusterSnapshot {
        at,
        nodes,
        agents,
        etcd,
        lease,
        etcd_members: None,
    }
}

/// `d` divided by the time scale (the demo compresses its timeline; 1 elsewhere).
fn scaled(d: Duration, time_scale: u32) -> Duration {
    d / time_scale.max(1)
}

/// Look until the health gate passes (its soak included), `timeout` passes (the last
/// causes named) or the operator cancels. Each change of verdict is one progress line.
#[allow(clippy::too_many_arguments)]
pub async fn wait_healthy(
    client: &Client,
    topo: &EnvTopology,
    settings: &WatchSettings,
    gate: &HealthGate,
    time_scale: u32,
    timeout: Duration,
    etcd: Option<&dyn EtcdMembers>,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> WaitEnd {
    let stable = scaled(Duration::from_secs(gate.stable_for_s), time_scale);
    let soak = scaled(Duration::from_secs(gate.soak_s), time_scale);
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let mut watch = GateWatch::new(ms(stable), ms(soak)).disrupting(&gate.after);
    let every = scaled(settings.tick.max(Duration::from_millis(200)), time_scale)
        .max(Duration::from_millis(100));
    let deadline = tokio::time::Instant::now() + timeout;
    progress(format!(
        "{}: health gate after {} before {}: every node Ready, every cilium-agent Ready on the VIP {}, /readyz/etcd ok, {}the VIP lease holder unchanged for {} s, then healthy for {} s (up to {} s)",
        topo.env,
        gate.after,
        gate.before,
        topo.vip,
        if etcd.is_some() {
            format!(
                "etcd's members agreeing on one leader and caught up within {} entries, no alarm, {}'s WAL fsync p99 over the soak no worse than before its change, ",
                hk_engine::guard::health::CATCH_UP_ENTRIES,
                gate.after
            )
        } else {
            String::new()
        },
        stable.as_secs_f32(),
        soak.as_secs_f32(),
        timeout.as_secs()
    ));
    let mut last = String::from("no look yet");
    // While it waits, the soak's count is said again every sixth of the soak (at least every
    // look), so the line the operator reads moves: a "0 s of 60 s" that never counts reads
    // as stuck.
    let recount = (soak / 6).max(every);
    let mut said_at = tokio::time::Instant::now();
    loop {
        let snap = tokio::select! {
            biased;
            _ = cancel.cancelled() => return WaitEnd::Cancelled { last },
            _ = tokio::time::sleep_until(deadline) => {
                return WaitEnd::TimedOut { after: timeout, last }
            }
            s = async {
                let members = async {
                    match etcd {
                        Some(e) => Some(e.read(&topo.env, cancel).await),
                        None => None,
                    }
                };
                let (mut snap, members) = tokio::join!(snapshot(client, topo, settings), members);
                snap.etcd_members = members;
                snap
            } => s,
        };
        let state = watch.observe(topo, &snap);
        let line = state.to_string();
        if let GateState::Passed { summary } = state {
            progress(line);
            return WaitEnd::Met(summary);
        }
        // Waiting lines change every second with the soak; say a change of kind at once,
        // and the count again every `recount`.
        if worth_saying(&state, &last, said_at.elapsed(), recount) {
            progress(line.clone());
            said_at = tokio::time::Instant::now();
        }
        last = line;
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return WaitEnd::Cancelled { last },
            _ = tokio::time::sleep_until(deadline) => {
                return WaitEnd::TimedOut { after: timeout, last }
            }
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Whether a health gate's look is a progress line: a change of kind (unhealthy, waiting)
/// or of its causes or reasons, at once (a soak that starts again says why when it does);
/// the same wait again once `every` has passed since the last line said, so its count is
/// seen to move.
fn worth_saying(state: &GateState, last: &str, since_said: Duration, every: Duration) -> bool {
    let now = state.to_string();
    match (state, last.split(':').next()) {
        (GateState::Waiting { .. }, Some("healthy, waiting")) if shape(&now) == shape(last) => {
            since_said >= every && now != last
        }
        // The same causes with other numbers (a member's applied index, an age): again
        // only once `every` has passed, not at every look.
        (GateState::Unhealthy { .. }, Some("unhealthy")) if shape(&now) == shape(last) => {
            since_said >= every && now != last
        }
        _ => now != last,
    }
}

/// A progress line with its numbers taken out: what kind of line it is.
fn shape(line: &str) -> String {
    line.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// One look at what `look.node` carries, judged: met when it may be taken away, failed
/// naming every blocker.
pub async fn look_before_disruption(
    client: &Client,
    topo: &EnvTopology,
    settings: &WatchSettings,
    look: &NodeDisruption,
    progress: &(dyn Fn(String) + Send + Sync),
) -> (DisruptionVerdict, WaitEnd) {
    let snap = snapshot(client, topo, settings).await;
    let v = disruption(&look.node, topo, &snap);
    for fact in &v.facts {
        progress(fact.clone());
    }
    for b in &v.blockers {
        progress(format!("blocked: {b}"));
    }
    let end = if v.blocked() {
        WaitEnd::Failed(format!(
            "{} must not be taken away now: {}",
            look.node,
            v.blockers.join("; ")
        ))
    } else {
        WaitEnd::Met(format!(
            "{} may be taken away: {}",
            look.node,
            v.facts.join("; ")
        ))
    };
    (v, end)
}

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn a_soak_in_progress_is_said_again_as_it_counts() {
        let waiting = |n: u64| GateState::Waiting {
            why: format!("soak: healthy since 03:16:21, {n} s of 60 s"),
        };
        let every = Duration::from_secs(10);
        let first = waiting(0).to_string();
        // From unhealthy to waiting: said at once.
        assert!(worth_saying(
            &waiting(0),
            "unhealthy: k3s-prod-2 NotReady",
            Duration::ZERO,
            every
        ));
        // The next look, a second on: not yet.
        assert!(!worth_saying(
            &waiting(1),
            &first,
            Duration::from_secs(1),
            every
        ));
        // Ten seconds on: the count is said again.
        assert!(worth_saying(
            &waiting(10),
            &waiting(9).to_string(),
            every,
            every
        ));
        // The same words are never said twice.
        assert!(!worth_saying(
            &waiting(10),
            &waiting(10).to_string(),
            every * 2,
            every
        ));
        // The soak starts again, and why: at once (CI once held a gate for minutes on a
        // slow disk whose line was never said, the count's lines only).
        let again = GateState::Waiting {
            why: "k3s-prod-3's WAL fsync p99 over the soak 16 ms (2.0 ms its p99 before the change, 204 fsyncs): above it, the soak starts again; soak: healthy since 03:16:31, 0 s of 60 s".into(),
        };
        assert!(worth_saying(
            &again,
            &waiting(9).to_string(),
            Duration::from_secs(1),
            every
        ));
        // Unhealthy again: at once.
        let bad = GateState::Unhealthy {
            causes: vec!["k3s-prod-2 NotReady".into()],
        };
        assert!(worth_saying(
            &bad,
            &waiting(3).to_string(),
            Duration::ZERO,
            every
        ));
    }

    /// A member catching up changes its numbers at every look: the same cause is said
    /// again every `every`, not every look (the demo printed one line a second for minutes);
    /// another cause is said at once.
    #[test]
    fn the_same_causes_with_other_numbers_are_said_again_only_as_the_count_is() {
        let behind = |applied: u64| {
            GateState::Unhealthy {
            causes: vec![format!(
                "etcd: k3s-prod-1's member has applied {applied} of the leader's (k3s-prod-2) {}: 225 entries behind",
                applied + 225
            )],
        }
        };
        let every = Duration::from_secs(10);
        let last = behind(1662).to_string();
        assert!(!worth_saying(
            &behind(1668),
            &last,
            Duration::from_secs(1),
            every
        ));
        assert!(worth_saying(&behind(1720), &last, every, every));
        let other = GateState::Unhealthy {
            causes: vec!["k3s-prod-1 NotReady since 12:00:01".into()],
        };
        assert!(worth_saying(&other, &last, Duration::ZERO, every));
    }
}
