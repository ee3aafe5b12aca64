//! `kube-wait`: wait, by watching the API server, until a named condition holds.
//!
//! Owns: parsing a `kube-wait` condition ([`Condition::parse`]); judging each condition on
//! the objects the API server sends (DaemonSet, Pods, ConfigMaps, Node, Lease) by building
//! the pane the live panes build (`convert`'s panes, `checks::live`'s rules) and reading its
//! verdict ([`judge_rollout`], [`judge_node`], [`judge_agents`], [`judge_lease`]); and the
//! wait itself ([`wait`], over the generic [`drive`] that `flux` reuses): watches
//! (`kube::runtime::watcher`, never polling), one progress line each time the picture
//! changes, the verdict when the condition holds or fails, a timeout, and prompt
//! cancellation. Where the agents live and how long a pod may stay unready are the panes'
//! [`WatchSettings`], so a wait and a pane never disagree.
//! Must not: decide what the live rules decide (rolled out, stuck on an unready pod, dials
//! the VIP, held and fresh, Ready: `checks::live` says), convert objects itself (`convert`
//! does), write to the API server, or know the terminal or the run.
//!
//! Time is read from the local clock: the rules take "now" as an input, and a rollout can
//! become stuck with no event at all (an updated pod that simply stays unready), so the
//! wait also wakes at the moment the rule would call it stuck. That is a local timer, not a
//! request: the API server is only watched.
//!
//! Why one file over 800 lines: the code is under 850 lines; the rest is its unit tests, which
//! build the API objects each condition is judged on.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::cluster::{convert, WatchSettings};
use hk_engine::checks::live::{
    self, EnvTopology, Look, RolloutPod, RolloutState, Rule, Severity, Timestamp,
};

// ---------------------------------------------------------------------------------------
// Conditions

/// A `kube-wait` condition, as a runbook names it (`condition:` after rendering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `daemonset-rolled-out NS/NAME`.
    DaemonSetRolledOut { namespace: String, name: String },
    /// `node-ready NODE`.
    NodeReady { node: String },
    /// `agents-dial-vip`: every cilium-agent's KUBERNETES_SERVICE_HOST is the VIP.
    AgentsDialVip,
    /// `lease-held NS/NAME`: the Lease has a holder that renews.
    LeaseHeld { namespace: String, name: String },
    /// The planner's health gate between hosts (`runbook::plan::HEALTH_GATE`), judged by
    /// `cluster::health_probe` over repeated looks rather than by a watch.
    HealthBetweenHosts(hk_engine::runbook::plan::HealthGate),
    /// The planner's look before a `disrupts: node` step (`runbook::plan::NODE_DISRUPTION`).
    NodeDisruption(hk_engine::runbook::plan::NodeDisruption),
}

impl Condition {
    /// Parse a rendered condition. The names are `runbook::schema::KUBE_CONDITIONS`.
    pub fn parse(text: &str) -> Result<Condition, ConditionError> {
        if let Some(gate) = hk_engine::runbook::plan::HealthGate::parse(text) {
            return Ok(gate.map(Condition::HealthBetweenHosts)?);
        }
        if let Some(look) = hk_engine::runbook::plan::NodeDisruption::parse(text) {
            return Ok(look.map(Condition::NodeDisruption)?);
        }
        let mut words = text.split_whitespace();
        let name = words.next().unwrap_or_default();
        let arg = words.next();
        if let Some(extra) = words.next() {
            return Err(ConditionError::ExtraArgument {
                text: text.to_string(),
                extra: extra.to_string(),
            });
        }
        let ns_name = |arg: Option<&str>| -> Result<(String, String), ConditionError> {
            let arg = arg.ok_or_else(|| ConditionError::NeedsNamespacedName {
                name: name.to_string(),
            })?;
            match arg.split_once('/') {
                Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => {
                    Ok((ns.to_string(), n.to_string()))
                }
                _ => Err(ConditionError::NotNamespacedName {
                    name: name.to_string(),
                    arg: arg.to_string(),
                }),
            }
        };
        match name {
            "daemonset-rolled-out" => {
                let (namespace, name) = ns_name(arg)?;
                Ok(Condition::DaemonSetRolledOut { namespace, name })
            }
            "lease-held" => {
                let (namespace, name) = ns_name(arg)?;
                Ok(Condition::LeaseHeld { namespace, name })
            }
            "node-ready" => match arg {
                Some(node) => Ok(Condition::NodeReady {
                    node: node.to_string(),
                }),
                None => Err(ConditionError::NeedsNode),
            },
            "agents-dial-vip" => match arg {
                None => Ok(Condition::AgentsDialVip),
                Some(a) => Err(ConditionError::TakesNoArgument { arg: a.to_string() }),
            },
            other => Err(ConditionError::Unknown {
                name: other.to_string(),
            }),
        }
    }
}

/// Why a rendered `kube-wait` condition could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// A planner-written condition (health gate, disruption look) that does not read back.
    #[error(transparent)]
    Planned(#[from] hk_engine::runbook::plan::MalformedCondition),
    #[error("kube-wait condition `{text}`: unexpected `{extra}` (one argument at most)")]
    ExtraArgument { text: String, extra: String },
    #[error("kube-wait condition `{name}` needs NS/NAME")]
    NeedsNamespacedName { name: String },
    #[error("kube-wait condition `{name}`: `{arg}` is not NAMESPACE/NAME")]
    NotNamespacedName { name: String, arg: String },
    #[error("kube-wait condition `node-ready` needs the node's name")]
    NeedsNode,
    #[error("kube-wait condition `agents-dial-vip` takes no argument (got `{arg}`)")]
    TakesNoArgument { arg: String },
    #[error("unknown kube-wait condition `{name}` (known: {known})", known = known_conditions())]
    Unknown { name: String },
}

/// The condition names a runbook may use, for the message naming an unknown one.
fn known_conditions() -> String {
    hk_engine::runbook::schema::KUBE_CONDITIONS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::DaemonSetRolledOut { namespace, name } => {
                write!(f, "daemonset-rolled-out {namespace}/{name}")
            }
            Condition::NodeReady { node } => write!(f, "node-ready {node}"),
            Condition::AgentsDialVip => f.write_str("agents-dial-vip"),
            Condition::LeaseHeld { namespace, name } => write!(f, "lease-held {namespace}/{name}"),
            Condition::HealthBetweenHosts(g) => f.write_str(&g.condition()),
            Condition::NodeDisruption(d) => f.write_str(&d.condition()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Judging (pure: `convert` turns the objects into the live rules' inputs and panes, the
// rules decide, this maps their answer to pending / met / failed)

/// Whether `pod` is controlled by `ds` (owner reference with its uid): a pod the selector
/// also matches but another controller owns is not part of this rollout.
pub fn owned_by(pod: &Pod, ds: &DaemonSet) -> bool {
    let Some(uid) = ds.metadata.uid.as_deref() else {
        return false;
    };
    pod.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Where a wait stands after one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// Not there yet: what it looks like now. `recheck_at`: the moment the answer can change
    /// with no event (a pending pod turning stuck).
    Pending {
        line: String,
        recheck_at: Option<Timestamp>,
    },
    /// The condition holds.
    Met { detail: String },
    /// It cannot hold without someone stepping in (a stuck rollout, Ready=False).
    Failed { detail: String },
}

fn pending(line: impl Into<String>) -> Judgement {
    Judgement::Pending {
        line: line.into(),
        recheck_at: None,
    }
}

/// `daemonset-rolled-out`: the rollout pane (`convert::rollout_pane`, `live::rollout`) over
/// the DaemonSet and the pods it controls. Rolled out = met, stuck on an updated unready pod
/// = failed (naming pod and node), rolling = pending with
/// `U/D updated, N unavailable: POD on NODE not ready`.
pub fn judge_rollout(
    env: &str,
    what: &str,
    ds: Option<&DaemonSet>,
    pods: &[&Pod],
    now: Timestamp,
    stuck_after: Duration,
) -> Judgement {
    let Some(ds) = ds else {
        return pending(format!("daemonset {what} does not exist (yet)"));
    };
    let owned: Vec<&Pod> = pods.iter().copied().filter(|p| owned_by(p, ds)).collect();
    let stuck_ms = u64::try_from(stuck_after.as_millis()).unwrap_or(u64::MAX);
    let pane = convert::rollout_pane(
        env,
        &Look::seen(Some(ds)),
        &Look::seen(owned),
        now,
        stuck_ms,
    );
    let message = pane
        .verdicts
        .iter()
        .map(|v| v.message.clone())
        .collect::<Vec<_>>()
        .join("; ");
    match pane.state {
        Some(RolloutState::RolledOut) => Judgement::Met {
            detail: format!("daemonset {what}: {message}"),
        },
        Some(RolloutState::Stuck { .. }) => Judgement::Failed {
            detail: format!("daemonset {what}: {message}"),
        },
        // Unavailable without a rollout (the last updated pod not ready yet looks the
        // same): pending, and failed once an updated pod is stuck, as while rolling.
        Some(RolloutState::Rolling { .. } | RolloutState::Unavailable { .. }) => {
            // The moment the oldest pending updated pod would turn stuck.
            let recheck_at = pane
                .pods
                .iter()
                .filter(|p| p.updated && !p.ready)
                .filter_map(|p| p.not_ready_since)
                .map(|t| Timestamp(t.0.saturating_add(stuck_ms).saturating_add(1)))
                .min();
            Judgement::Pending {
                line: rollout_line(&convert::daemonset_status(ds), &pane.pods),
                recheck_at,
            }
        }
        None => pending(message),
    }
}

/// `2/3 updated, 1 unavailable: cilium-abcde on k3s-dev-2 not ready`.
fn rollout_line(st: &live::DaemonSetStatus, pods: &[RolloutPod]) -> String {
    let mut line = format!(
        "{}/{} updated, {} unavailable",
        st.updated, st.desired, st.unavailable
    );
    if st.observed_generation < st.generation {
        line.push_str(&format!(
            " (controller at generation {}, spec at {})",
            st.observed_generation, st.generation
        ));
    }
    let waiting: Vec<String> = pods
        .iter()
        .filter(|p| !p.ready)
        .map(|p| match &p.node {
            Some(n) => format!("{} on {n} not ready", p.name),
            None => format!("{} (unscheduled) not ready", p.name),
        })
        .collect();
    if !waiting.is_empty() {
        line.push_str(": ");
        line.push_str(&waiting.join(", "));
    }
    line
}

/// `node-ready`: the nodes pane's Ready verdict for that node.
pub fn judge_node(topo: &EnvTopology, node: &str, found: Option<&Node>) -> Judgement {
    let Some(n) = found else {
        return pending(format!("node {node} is not (yet) a node of the cluster"));
    };
    let pane = convert::nodes_pane(topo, &Look::seen(vec![n]));
    match pane.verdicts.iter().find(|v| v.rule == Rule::NodeReady) {
        Some(v) if v.severity == Severity::Ok => Judgement::Met {
            detail: v.message.clone(),
        },
        Some(v) => pending(v.message.clone()),
        None => pending(format!("node {node}: no verdict")),
    }
}

/// Where each kubelet renews its Lease.
pub const NODE_LEASE_NS: &str = "kube-node-lease";

/// `node-ready` as a wait judges it: [`judge_node`], and the node's kubelet heard from
/// (its Lease renewed) since the wait began at `since_ms`. A node's Ready condition stays
/// True for the node-monitor grace period after its kubelet stopped: read right after a
/// reboot, it is the node before the reboot, not the node back.
pub fn judge_node_since(
    topo: &EnvTopology,
    node: &str,
    found: Option<&Node>,
    lease: Option<&Lease>,
    since_ms: u64,
) -> Judgement {
    let ready = judge_node(topo, node, found);
    let Judgement::Met { detail } = ready else {
        return ready;
    };
    let renewed = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0);
    match renewed {
        Some(t) if u64::try_from(t.as_millisecond()).unwrap_or(0) >= since_ms => Judgement::Met {
            detail: format!(
                "{detail}; its kubelet renewed its Lease at {}",
                t.strftime("%H:%M:%S")
            ),
        },
        Some(t) => pending(format!(
            "{node} says Ready, but its kubelet has not renewed its Lease since this wait began \
             (last at {}): waiting to hear from it",
            t.strftime("%H:%M:%S")
        )),
        None => pending(format!(
            "{node} says Ready, but it has no kubelet Lease {NODE_LEASE_NS}/{node} renewed yet"
        )),
    }
}

/// `agents-dial-vip`: the agent env pane's summary over every agent pod; met when it is ok
/// (at least one agent, all dialling the VIP).
pub fn judge_agents(
    topo: &EnvTopology,
    pods: &[&Pod],
    cms: &[&ConfigMap],
    container: &str,
) -> Judgement {
    let pane = convert::agents_pane(
        topo,
        &Look::seen(pods.to_vec()),
        &Look::seen(cms.to_vec()),
        container,
    );
    let Some(summary) = pane.verdicts.iter().find(|v| v.rule == Rule::AgentsSummary) else {
        return pending("no verdict on the cilium agents");
    };
    if summary.severity == Severity::Ok {
        return Judgement::Met {
            detail: summary.message.clone(),
        };
    }
    let mut parts = vec![summary.message.clone()];
    parts.extend(
        pane.verdicts
            .iter()
            .filter(|v| v.rule == Rule::AgentHost && v.severity != Severity::Ok)
            .map(|v| v.message.clone()),
    );
    pending(parts.join("; "))
}

/// `lease-held`: the VIP lease pane's held and fresh verdicts (its VIP probe is not part of
/// this condition and is not run).
pub fn judge_lease(
    topo: &EnvTopology,
    what: &str,
    found: Option<&Lease>,
    now: Timestamp,
) -> Judgement {
    let Some(l) = found else {
        return pending(format!("lease {what} does not exist (yet)"));
    };
    let pane = convert::vip_pane(
        topo,
        &Look::seen(Some(l)),
        &Look::could_not("not probed by kube-wait"),
        now,
    );
    let of = |rule: Rule| pane.verdicts.iter().find(|v| v.rule == rule);
    let (held, fresh) = (of(Rule::LeaseHeld), of(Rule::LeaseFresh));
    let ok = |v: Option<&live::Verdict>| v.is_some_and(|v| v.severity == Severity::Ok);
    if ok(held) && ok(fresh) {
        let detail: Vec<String> = [held, fresh, of(Rule::LeaseHolder)]
            .into_iter()
            .flatten()
            .map(|v| v.message.clone())
            .collect();
        return Judgement::Met {
            detail: format!("lease {what}: {}", detail.join("; ")),
        };
    }
    let why: Vec<String> = [held, fresh]
        .into_iter()
        .flatten()
        .filter(|v| v.severity != Severity::Ok)
        .map(|v| v.message.clone())
        .collect();
    pending(format!("lease {what}: {}", why.join("; ")))
}

// ---------------------------------------------------------------------------------------
// Watching

/// How a wait ended: `cluster` owns the type (its health probe ends a wait too, and
/// `cluster/` must not import `exec/`); re-exported here where every wait returns it.
pub use crate::cluster::WaitEnd;

/// Why a wait could not be carried out at all (as opposed to a verdict).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WaitError(pub String);

/// Timeout and stuck threshold of one wait.
#[derive(Debug, Clone)]
pub struct WaitOptions {
    pub timeout: Duration,
    pub stuck_after: Duration,
    /// Where the health gate reads etcd's members (None: it reads only the API's view).
    pub etcd: Option<std::sync::Arc<dyn crate::cluster::health_probe::EtcdMembers>>,
}

impl WaitOptions {
    /// `timeout`, and the panes' stuck threshold (the runbook schema has none of its own).
    pub fn new(timeout: Duration, settings: &WatchSettings) -> Self {
        WaitOptions {
            timeout,
            stuck_after: settings.stuck_after,
            etcd: None,
        }
    }
}

/// A watch that failed, and what it was watching (`pods k8s-app=cilium in kube-system`).
#[derive(Debug)]
pub struct FeedError {
    pub what: String,
    pub error: watcher::Error,
}

impl FeedError {
    /// An API answer that retrying will not change: 401, 403, or 404 (a type the server
    /// does not serve, e.g. a CRD that is not installed).
    fn permanent(&self) -> Option<&kube::core::Status> {
        let e = match &self.error {
            watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) => e,
            _ => return None,
        };
        match e {
            kube::Error::Api(s) if matches!(s.code, 401 | 403 | 404) => Some(s),
            _ => None,
        }
    }
}

/// One watch stream, its events wrapped as `T`.
pub type Feed<T> = BoxStream<'static, Result<T, FeedError>>;
/// All the watches of one wait.
pub type Feeds<T> = SelectAll<Feed<T>>;

/// A watch of `api` (with `cfg`'s selectors), with kube's default backoff between retries.
pub fn feed<K, T>(
    api: Api<K>,
    cfg: watcher::Config,
    what: String,
    wrap: fn(Event<K>) -> T,
) -> Feed<T>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    watcher::watcher(api, cfg)
        .default_backoff()
        .map(move |r| {
            r.map(wrap).map_err(|error| FeedError {
                what: what.clone(),
                error,
            })
        })
        .boxed()
}

/// The objects of one watch, kept current from its events. `synced` once the first list is
/// complete (before that, nothing is judged: an empty store would be a lie).
#[derive(Debug)]
pub struct Mirror<K> {
    objects: BTreeMap<String, K>,
    listing: Option<BTreeMap<String, K>>,
    synced: bool,
}

impl<K> Default for Mirror<K> {
    fn default() -> Self {
        Mirror {
            objects: BTreeMap::new(),
            listing: None,
            synced: false,
        }
    }
}

impl<K: Resource> Mirror<K> {
    /// Take one event in; true when the store changed and is synced (worth judging).
    pub fn apply(&mut self, ev: Event<K>) -> bool {
        match ev {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                false
            }
            Event::InitApply(o) => {
                match &mut self.listing {
                    Some(l) => {
                        l.insert(o.name_any(), o);
                    }
                    None => {
                        self.objects.insert(o.name_any(), o);
                    }
                }
                false
            }
            Event::InitDone => {
                if let Some(l) = self.listing.take() {
                    self.objects = l;
                }
                self.synced = true;
                true
            }
            Event::Apply(o) => {
                self.objects.insert(o.name_any(), o);
                self.synced
            }
            Event::Delete(o) => {
                self.objects.remove(&o.name_any());
                self.synced
            }
        }
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    pub fn get(&self, name: &str) -> Option<&K> {
        self.objects.get(name)
    }

    pub fn all(&self) -> impl Iterator<Item = &K> {
        self.objects.values()
    }
}

/// What a wait watches and how it judges: events come in through [`Watched::take`] (which
/// may start further watches), and [`Watched::judge`] looks at everything seen so far.
pub trait Watched: Send {
    type Seen: Send + 'static;
    /// True when the picture may have changed and is complete enough to judge.
    fn take(&mut self, seen: Self::Seen, feeds: &mut Feeds<Self::Seen>) -> Result<bool, WaitError>;
    fn judge(&self, now: Timestamp) -> Judgement;
}

/// Run a wait: judge after every event that changes the picture, report each new progress
/// line, end on met / failed, on `timeout`, or (promptly) on `cancel`. A watch error that
/// retrying cannot fix (401/403/404) ends the wait with a [`WaitError`]; others are reported
/// as progress and retried with backoff until the timeout.
pub async fn drive<W: Watched>(
    w: &mut W,
    mut feeds: Feeds<W::Seen>,
    first_line: String,
    timeout: Duration,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<WaitEnd, WaitError> {
    let deadline = tokio::time::Instant::now() + timeout;
    progress(first_line.clone());
    let mut last = first_line;
    let mut recheck: Option<tokio::time::Instant> = None;
    let mut failing: Option<String> = None;
    loop {
        let wake = async {
            match recheck {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(WaitEnd::Cancelled { last }),
            _ = tokio::time::sleep_until(deadline) => {
                let last = match failing {
                    Some(e) => format!("{last}; and {e}"),
                    None => last,
                };
                return Ok(WaitEnd::TimedOut { after: timeout, last });
            }
            _ = wake => {}
            item = feeds.next() => match item {
                None => return Err(WaitError("every watch ended".into())),
                Some(Err(e)) => {
                    if let Some(s) = e.permanent() {
                        return Err(WaitError(format!(
                            "cannot watch {}: the API server answered {} {}: {}",
                            e.what, s.code, s.reason, s.message
                        )));
                    }
                    let line = format!("cannot watch {} (retrying): {}", e.what, e.error);
                    if failing.as_deref() != Some(line.as_str()) {
                        progress(line.clone());
                    }
                    failing = Some(line);
                    continue;
                }
                Some(Ok(seen)) => {
                    failing = None;
                    if !w.take(seen, &mut feeds)? {
                        continue;
                    }
                }
            }
        }
        let now = hk_engine::journal::now();
        match w.judge(now) {
            Judgement::Met { detail } => return Ok(WaitEnd::Met(detail)),
            Judgement::Failed { detail } => return Ok(WaitEnd::Failed(detail)),
            Judgement::Pending { line, recheck_at } => {
                recheck = recheck_at.map(|t| {
                    tokio::time::Instant::now() + Duration::from_millis(t.0.saturating_sub(now.0))
                });
                if line != last {
                    progress(line.clone());
                    last = line;
                }
            }
        }
    }
}

/// One event of a kube-wait's watches.
#[derive(Debug)]
pub enum Seen {
    DaemonSet(Event<DaemonSet>),
    Pod(Event<Pod>),
    ConfigMap(Event<ConfigMap>),
    Node(Event<Node>),
    Lease(Event<Lease>),
}

/// The state of one kube-wait.
struct ConditionWatch {
    client: Client,
    topo: EnvTopology,
    settings: WatchSettings,
    condition: Condition,
    stuck_after: Duration,
    daemonsets: Mirror<DaemonSet>,
    pods: Mirror<Pod>,
    pods_watched: bool,
    config_maps: Mirror<ConfigMap>,
    nodes: Mirror<Node>,
    leases: Mirror<Lease>,
    /// When the wait began (ms since the epoch): `node-ready` wants its kubelet heard from
    /// after it.
    since_ms: u64,
}

fn by_name(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

impl ConditionWatch {
    /// The first watches of the condition.
    fn feeds(&self) -> Feeds<Seen> {
        let c = &self.client;
        let mut feeds = Feeds::new();
        match &self.condition {
            Condition::DaemonSetRolledOut { namespace, name } => feeds.push(feed(
                Api::<DaemonSet>::namespaced(c.clone(), namespace),
                by_name(name),
                format!("daemonset {namespace}/{name}"),
                Seen::DaemonSet,
            )),
            Condition::NodeReady { node } => {
                feeds.push(feed(
                    Api::<Node>::all(c.clone()),
                    by_name(node),
                    format!("node {node}"),
                    Seen::Node,
                ));
                // The kubelet's heartbeat: a Ready condition outlives a kubelet that stopped
                // (for the node-monitor grace period), its Lease renewals do not.
                feeds.push(feed(
                    Api::<Lease>::namespaced(c.clone(), NODE_LEASE_NS),
                    by_name(node),
                    format!("lease {NODE_LEASE_NS}/{node}"),
                    Seen::Lease,
                ));
            }
            Condition::AgentsDialVip => {
                let (ns, selector) = (&self.settings.namespace, &self.settings.agent_selector);
                feeds.push(feed(
                    Api::<Pod>::namespaced(c.clone(), ns),
                    watcher::Config::default().labels(selector),
                    format!("pods {selector} in {ns}"),
                    Seen::Pod,
                ));
                feeds.push(feed(
                    Api::<ConfigMap>::namespaced(c.clone(), ns),
                    watcher::Config::default(),
                    format!("configmaps in {ns}"),
                    Seen::ConfigMap,
                ));
            }
            Condition::LeaseHeld { namespace, name } => feeds.push(feed(
                Api::<Lease>::namespaced(c.clone(), namespace),
                by_name(name),
                format!("lease {namespace}/{name}"),
                Seen::Lease,
            )),
            // Looked at by `health_probe`; [`wait`] never builds a watch for them.
            Condition::HealthBetweenHosts(_) | Condition::NodeDisruption(_) => {}
        }
        feeds
    }

    /// Once the DaemonSet is known, watch the pods its selector picks.
    fn watch_pods(&mut self, feeds: &mut Feeds<Seen>) -> Result<(), WaitError> {
        let Condition::DaemonSetRolledOut { namespace, name } = &self.condition else {
            return Ok(());
        };
        if self.pods_watched {
            return Ok(());
        }
        let Some(ds) = self.daemonsets.get(name) else {
            return Ok(());
        };
        let selector = ds
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let selector = kube::core::Selector::try_from(selector).map_err(|e| {
            WaitError(format!(
                "daemonset {namespace}/{name}: its pod selector cannot be used: {e}"
            ))
        })?;
        feeds.push(feed(
            Api::<Pod>::namespaced(self.client.clone(), namespace),
            watcher::Config::default().labels_from(&selector),
            format!("pods {selector} in {namespace}"),
            Seen::Pod,
        ));
        self.pods_watched = true;
        Ok(())
    }
}

impl Watched for ConditionWatch {
    type Seen = Seen;

    fn take(&mut self, seen: Seen, feeds: &mut Feeds<Seen>) -> Result<bool, WaitError> {
        let changed = match seen {
            Seen::DaemonSet(e) => {
                let changed = self.daemonsets.apply(e);
                self.watch_pods(feeds)?;
                changed
            }
            Seen::Pod(e) => self.pods.apply(e),
            Seen::ConfigMap(e) => self.config_maps.apply(e),
            Seen::Node(e) => self.nodes.apply(e),
            Seen::Lease(e) => self.leases.apply(e),
        };
        // Judge only with every list this condition reads complete.
        let complete = match &self.condition {
            Condition::DaemonSetRolledOut { .. } => {
                self.daemonsets.synced() && (!self.pods_watched || self.pods.synced())
            }
            Condition::NodeReady { .. } => self.nodes.synced() && self.leases.synced(),
            Condition::AgentsDialVip => self.pods.synced() && self.config_maps.synced(),
            Condition::LeaseHeld { .. } => self.leases.synced(),
            Condition::HealthBetweenHosts(_) | Condition::NodeDisruption(_) => false,
        };
        Ok(changed && complete)
    }

    fn judge(&self, now: Timestamp) -> Judgement {
        match &self.condition {
            Condition::DaemonSetRolledOut { namespace, name } => {
                let pods: Vec<&Pod> = self.pods.all().collect();
                judge_rollout(
                    &self.topo.env,
                    &format!("{namespace}/{name}"),
                    self.daemonsets.get(name),
                    &pods,
                    now,
                    self.stuck_after,
                )
            }
            Condition::NodeReady { node } => judge_node_since(
                &self.topo,
                node,
                self.nodes.get(node),
                self.leases.get(node),
                self.since_ms,
            ),
            Condition::AgentsDialVip => {
                let pods: Vec<&Pod> = self.pods.all().collect();
                let cms: Vec<&ConfigMap> = self.config_maps.all().collect();
                judge_agents(&self.topo, &pods, &cms, &self.settings.agent_container)
            }
            Condition::LeaseHeld { namespace, name } => judge_lease(
                &self.topo,
                &format!("{namespace}/{name}"),
                self.leases.get(name),
                now,
            ),
            Condition::HealthBetweenHosts(_) | Condition::NodeDisruption(_) => Judgement::Failed {
                detail: format!("{} is judged by looks, not by a watch", self.condition),
            },
        }
    }
}

/// Wait until `condition` holds in the cluster `client` talks to (the environment `topo`,
/// read as `settings` say), streaming a line to `progress` each time the picture changes.
/// Read-only: it lists and watches, nothing else.
pub async fn wait(
    client: Client,
    topo: &EnvTopology,
    settings: &WatchSettings,
    condition: &Condition,
    opts: &WaitOptions,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<WaitEnd, WaitError> {
    wait_scaled(client, topo, settings, condition, opts, 1, cancel, progress).await
}

/// [`wait`] in a compressed timeline: the health gate's stable_for and soak are divided by
/// `time_scale` (the demo's; 1 against a real cluster).
#[allow(clippy::too_many_arguments)]
pub async fn wait_scaled(
    client: Client,
    topo: &EnvTopology,
    settings: &WatchSettings,
    condition: &Condition,
    opts: &WaitOptions,
    time_scale: u32,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<WaitEnd, WaitError> {
    match condition {
        Condition::HealthBetweenHosts(gate) => {
            return Ok(crate::cluster::health_probe::wait_healthy(
                &client,
                topo,
                settings,
                gate,
                time_scale,
                opts.timeout,
                opts.etcd.as_deref(),
                cancel,
                progress,
            )
            .await)
        }
        Condition::NodeDisruption(look) => {
            return Ok(crate::cluster::health_probe::look_before_disruption(
                &client, topo, settings, look, progress,
            )
            .await
            .1)
        }
        _ => {}
    }
    let mut w = ConditionWatch {
        client,
        topo: topo.clone(),
        settings: settings.clone(),
        condition: condition.clone(),
        stuck_after: opts.stuck_after,
        daemonsets: Mirror::default(),
        pods: Mirror::default(),
        pods_watched: false,
        config_maps: Mirror::default(),
        nodes: Mirror::default(),
        leases: Mirror::default(),
        since_ms: u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0),
    };
    let feeds = w.feeds();
    let first = format!(
        "{}: waiting up to {} s for {condition} (watching)",
        topo.env,
        opts.timeout.as_secs()
    );
    drive(&mut w, feeds, first, opts.timeout, cancel, progress).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn topo() -> EnvTopology {
        EnvTopology {
            env: "dev".into(),
            vip: "10.0.0.100".parse().expect("ip"),
            api_port: 6443,
            agents: Vec::new(),
            servers: vec![
                live::Server {
                    name: "k3s-dev-1".into(),
                    address: "10.0.0.11".parse().expect("ip"),
                },
                live::Server {
                    name: "k3s-dev-2".into(),
                    address: "10.0.0.12".parse().expect("ip"),
                },
            ],
        }
    }

    fn ts(s: &str) -> Timestamp {
        convert::timestamp(&s.parse().expect("timestamp"))
    }

    #[test]
    fn conditions_parse_and_print_back() {
        for text in [
            "daemonset-rolled-out kube-system/cilium",
            "node-ready k3s-dev-2",
            "agents-dial-vip",
            "lease-held kube-system/plndr-cp-lock",
        ] {
            let c = Condition::parse(text).expect(text);
            assert_eq!(c.to_string(), text);
        }
        assert_eq!(
            Condition::parse("  node-ready   n1 ").expect("spaces"),
            Condition::NodeReady { node: "n1".into() }
        );
        for (bad, says) in [
            ("daemonset-rolled-out cilium", "is not NAMESPACE/NAME"),
            ("daemonset-rolled-out", "needs NS/NAME"),
            ("lease-held a/b/c", "is not NAMESPACE/NAME"),
            ("node-ready", "needs the node's name"),
            ("agents-dial-vip now", "takes no argument"),
            ("pods-happy x", "unknown kube-wait condition `pods-happy`"),
            ("node-ready a b", "unexpected `b`"),
        ] {
            let e = Condition::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    fn ds(generation: i64, template: &str, status: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "cilium", "namespace": "kube-system", "uid": "ds-uid",
                         "generation": generation,
                         "annotations": {convert::DS_TEMPLATE_GENERATION_ANNOTATION: template}},
            "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}},
                     "template": {"metadata": {}, "spec": {"containers": []}}},
            "status": status,
        }))
        .expect("daemonset")
    }

    fn pod(name: &str, node: &str, template: &str, ready: bool, since: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system",
                         "creationTimestamp": "2026-12-02T10:00:00Z",
                         "labels": {convert::POD_TEMPLATE_GENERATION_LABEL: template},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": "cilium", "uid": "ds-uid",
                                              "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "cilium-agent",
                     "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.100"},
                             {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": if ready {"True"} else {"False"},
                 "lastTransitionTime": since}]},
        }))
        .expect("pod")
    }

    fn status(desired: i32, updated: i32, ready: i32, observed: i64) -> serde_json::Value {
        json!({"desiredNumberScheduled": desired, "currentNumberScheduled": desired,
               "numberMisscheduled": 0, "numberReady": ready,
               "updatedNumberScheduled": updated, "numberAvailable": ready,
               "numberUnavailable": desired - ready, "observedGeneration": observed})
    }

    #[test]
    fn rollout_rolling_names_the_unready_pod_and_wakes_when_it_would_turn_stuck() {
        let d = ds(2, "2", status(3, 2, 2, 2));
        let p1 = pod(
            "cilium-aaaaa",
            "k3s-dev-1",
            "2",
            true,
            "2026-12-02T10:00:00Z",
        );
        let p2 = pod(
            "cilium-abcde",
            "k3s-dev-2",
            "2",
            false,
            "2026-12-02T10:00:10Z",
        );
        let p3 = pod("cilium-old", "k3s-dev-3", "1", true, "2026-12-02T10:00:00Z");
        let now = ts("2026-12-02T10:00:20Z");
        let j = judge_rollout(
            "dev",
            "kube-system/cilium",
            Some(&d),
            &[&p1, &p2, &p3],
            now,
            Duration::from_secs(30),
        );
        assert_eq!(
            j,
            Judgement::Pending {
                line: "2/3 updated, 1 unavailable: cilium-abcde on k3s-dev-2 not ready".into(),
                recheck_at: Some(Timestamp(ts("2026-12-02T10:00:40Z").0 + 1)),
            }
        );
        // 30 s later with no event: stuck, naming the pod and the node.
        let later = ts("2026-12-02T10:00:41Z");
        match judge_rollout(
            "dev",
            "kube-system/cilium",
            Some(&d),
            &[&p1, &p2, &p3],
            later,
            Duration::from_secs(30),
        ) {
            Judgement::Failed { detail } => {
                assert!(detail.contains("cilium-abcde on k3s-dev-2"), "{detail}");
                assert!(detail.contains("rollout stuck"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rollout_met_only_when_the_controller_saw_the_spec_and_all_are_available() {
        let p = pod("cilium-a", "k3s-dev-1", "3", true, "2026-12-02T10:00:00Z");
        let now = ts("2026-12-02T10:01:00Z");
        let stuck = Duration::from_secs(30);
        let done = ds(3, "3", status(1, 1, 1, 3));
        assert!(matches!(
            judge_rollout("dev", "ns/ds", Some(&done), &[&p], now, stuck),
            Judgement::Met { .. }
        ));
        let unseen = ds(3, "3", status(1, 1, 1, 2));
        match judge_rollout("dev", "ns/ds", Some(&unseen), &[&p], now, stuck) {
            Judgement::Pending { line, .. } => {
                assert!(
                    line.contains("controller at generation 2, spec at 3"),
                    "{line}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            judge_rollout("dev", "ns/ds", None, &[], now, stuck),
            Judgement::Pending { line, .. } if line.contains("does not exist")
        ));
        // A pod of another owner with the same labels is not this DaemonSet's.
        let mut stranger = pod("other", "k3s-dev-2", "3", false, "2026-12-02T10:00:00Z");
        stranger.metadata.owner_references = None;
        assert!(matches!(
            judge_rollout("dev", "ns/ds", Some(&done), &[&p, &stranger], now, stuck),
            Judgement::Met { .. }
        ));
    }

    fn agent(name: &str, node: &str, host: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"nodeName": node, "containers": [
                {"name": "sidecar", "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "1.2.3.4"}]},
                {"name": "cilium-agent", "env": [host,
                    {"name": "K8S_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]}]},
        }))
        .expect("pod")
    }

    #[test]
    fn agents_dial_vip_reads_the_agent_container_and_resolves_configmaps() {
        let a = agent(
            "cilium-a",
            "k3s-dev-1",
            json!({"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.100"}),
        );
        let b = agent(
            "cilium-b",
            "k3s-dev-2",
            json!({"name": "KUBERNETES_SERVICE_HOST",
            "valueFrom": {"configMapKeyRef": {"name": "endpoint", "key": "host"}}}),
        );
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "endpoint"}, "data": {"host": "10.0.0.12"}}))
        .expect("cm");
        let j = judge_agents(&topo(), &[&a, &b], &[&cm], "cilium-agent");
        match j {
            Judgement::Pending { line, .. } => {
                assert!(
                    line.contains("1 of 2 agents dial k3s-dev-2's own address 10.0.0.12"),
                    "{line}"
                );
                assert!(line.contains("cilium-b on k3s-dev-2"), "{line}");
            }
            other => panic!("{other:?}"),
        }
        let mut fixed = cm.clone();
        fixed.data = Some([("host".to_string(), "10.0.0.100".to_string())].into());
        assert_eq!(
            judge_agents(&topo(), &[&a, &b], &[&fixed], "cilium-agent"),
            Judgement::Met {
                detail: "2 of 2 agents dial the VIP 10.0.0.100".into()
            }
        );
        assert!(matches!(
            judge_agents(&topo(), &[], &[], "cilium-agent"),
            Judgement::Pending { .. }
        ));
        // The sidecar's env is not the agent's: judged by the container the settings name.
        assert!(matches!(
            judge_agents(&topo(), &[&a], &[], "sidecar"),
            Judgement::Pending { line, .. } if line.contains("1.2.3.4")
        ));
    }

    #[test]
    fn node_ready_and_lease_held_use_the_live_verdicts() {
        let node = |status: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "k3s-dev-2"},
                "status": {"conditions": [{"type": "Ready", "status": status}]}}))
            .expect("node")
        };
        assert!(matches!(
            judge_node(&topo(), "k3s-dev-2", Some(&node("True"))),
            Judgement::Met { .. }
        ));
        assert!(
            matches!(judge_node(&topo(), "k3s-dev-2", Some(&node("Unknown"))),
            Judgement::Pending { line, .. } if line.contains("NotReady"))
        );
        assert!(matches!(judge_node(&topo(), "k3s-dev-9", None),
            Judgement::Pending { line, .. } if line.contains("k3s-dev-9 is not (yet) a node")));

        let lease = |holder: Option<&str>, renew: &str| -> Lease {
            serde_json::from_value(json!({"metadata": {"name": "plndr-cp-lock"},
                "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 5}}))
            .expect("lease")
        };
        let now = ts("2026-12-02T10:00:03Z");
        let fresh = lease(Some("k3s-dev-1"), "2026-12-02T10:00:01.000000Z");
        match judge_lease(&topo(), "kube-system/plndr-cp-lock", Some(&fresh), now) {
            Judgement::Met { detail } => {
                assert!(detail.contains("held by k3s-dev-1"), "{detail}");
                assert!(detail.contains("is server k3s-dev-1"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        let stale = lease(Some("k3s-dev-1"), "2026-12-02T09:59:00.000000Z");
        assert!(matches!(judge_lease(&topo(), "x/y", Some(&stale), now),
            Judgement::Pending { line, .. } if line.contains("stale")));
        assert!(
            matches!(judge_lease(&topo(), "x/y", Some(&lease(None, "2026-12-02T10:00:01.000000Z")), now),
            Judgement::Pending { line, .. } if line.contains("no holder"))
        );
    }

    #[test]
    fn the_mirror_judges_only_complete_lists() {
        let n = |name: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("node")
        };
        let mut m: Mirror<Node> = Mirror::default();
        assert!(!m.apply(Event::Init));
        assert!(!m.apply(Event::InitApply(n("a"))));
        assert!(!m.synced());
        assert!(m.apply(Event::InitDone));
        assert!(m.get("a").is_some());
        assert!(m.apply(Event::Apply(n("b"))));
        assert!(m.apply(Event::Delete(n("a"))));
        // A relist replaces the store: what it does not list is gone.
        m.apply(Event::Init);
        m.apply(Event::InitApply(n("c")));
        assert!(m.get("b").is_some(), "kept until the relist is complete");
        m.apply(Event::InitDone);
        assert_eq!(m.all().map(|o| o.name_any()).collect::<Vec<_>>(), ["c"]);
    }
}
