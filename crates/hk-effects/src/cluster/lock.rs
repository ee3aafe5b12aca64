//! One operator at a time, held by the cluster: the run lock.
//!
//! Owns: the Lease `kube-system/hk-console-run-lock` a mutating run takes ([`acquire`]),
//! renews while it lives ([`HeldLock::renew`]) and releases ([`HeldLock::release`]); what a
//! second console sees ([`look`], read-only: observe mode uses only this); a stale lock
//! (its holder stopped renewing) taken over only with the environment's name typed and a
//! reason ([`take_over`]), which returns the [`Takeover`] record the taking run journals
//! and leaves a [`TakeoverMark`] on the Lease (annotations `hk-console.io/taken-over-*`)
//! that the taken-from run reads ([`takeover_of`]) when it finds its lock gone (a renewal
//! refused, or its resume), and journals in its own run: the two runs may be on two
//! machines, so the cluster carries the message. The mark stays through releases and new
//! acquisitions until the next take-over replaces it: only the last take-over is kept.
//! Every write is a replace at the resourceVersion read (or a create), so two consoles
//! racing for the lock cannot both win: the loser gets a conflict and reads the winner.
//! Freshness is judged by what THIS console saw change, on its own monotonic clock (as
//! client-go's leader election does): a held record is stale only when this console has
//! watched it unchanged (holder, renewTime, leaseTransitions, resourceVersion) for longer
//! than its duration ([`Watch`], [`judge_watched`]). The holder's timestamps are never
//! compared with this machine's wall clock to decide: two consoles' clocks may disagree
//! by minutes (a console under `faketime -f +600s` once took a lock renewed every 2 s).
//! A console that has just started and seen the record once cannot call it stale until it
//! has watched it unchanged for the duration. A renewTime far from this machine's clock is
//! named ([`LockRecord::clock_note`]) as information, not as a verdict.
//! Must not: decide when a run needs the lock (the session does), or judge cluster health.
//! [`judge_watched`] and [`Watch`] are pure; times come in.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use serde::{Deserialize, Serialize};

use super::convert;
use super::explain;
use hk_engine::checks::live::Timestamp;
use hk_engine::guard::health::clock;
use hk_engine::time::now;

/// The Lease's name and namespace.
pub const LOCK_NAME: &str = "hk-console-run-lock";
pub const LOCK_NAMESPACE: &str = "kube-system";
/// Annotations that say which run holds it.
pub const RUN_ID_ANNOTATION: &str = "hk-console.io/run-id";
pub const RUNBOOK_ANNOTATION: &str = "hk-console.io/runbook";
pub const ENV_ANNOTATION: &str = "hk-console.io/environment";
/// The last take-over: whose lock (holder and run) was taken, by whom (and their run),
/// when and why.
pub const TAKEN_FROM_ANNOTATION: &str = "hk-console.io/taken-over-from";
pub const TAKEN_FROM_RUN_ANNOTATION: &str = "hk-console.io/taken-over-from-run";
pub const TAKEN_BY_ANNOTATION: &str = "hk-console.io/taken-over-by";
pub const TAKEN_BY_RUN_ANNOTATION: &str = "hk-console.io/taken-over-by-run";
pub const TAKEN_AT_ANNOTATION: &str = "hk-console.io/taken-over-at";
pub const TAKEN_WHY_ANNOTATION: &str = "hk-console.io/taken-over-reason";

/// The last take-over, as the Lease carries it for the run it was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakeoverMark {
    pub from: String,
    pub from_run: Option<String>,
    pub by: String,
    pub by_run: Option<String>,
    pub reason: String,
    /// ms since the epoch, as written.
    pub at: Option<Timestamp>,
}

/// The take-over mark a Lease carries, if any.
pub fn takeover_mark(lease: &Lease) -> Option<TakeoverMark> {
    let ann = lease.metadata.annotations.as_ref()?;
    let a = |k: &str| ann.get(k).cloned().filter(|v| !v.is_empty());
    Some(TakeoverMark {
        from: a(TAKEN_FROM_ANNOTATION)?,
        from_run: a(TAKEN_FROM_RUN_ANNOTATION),
        by: a(TAKEN_BY_ANNOTATION)?,
        by_run: a(TAKEN_BY_RUN_ANNOTATION),
        reason: a(TAKEN_WHY_ANNOTATION).unwrap_or_default(),
        at: a(TAKEN_AT_ANNOTATION)
            .and_then(|t| t.parse::<u64>().ok())
            .map(Timestamp),
    })
}

/// Whether run `run_id`'s lock was taken over: the Lease's mark, if it names that run.
/// Read-only (one GET). Its `at` is when THIS console read the mark (its own clock), not
/// the time the taking console wrote: that console's clock may be far off, and an event
/// carries the time it was observed.
pub async fn takeover_of(client: &Client, run_id: &str) -> Result<Option<TakeoverMark>, LockError> {
    Ok(read(client)
        .await?
        .as_ref()
        .and_then(takeover_mark)
        .filter(|m| m.from_run.as_deref() == Some(run_id))
        .map(|m| TakeoverMark {
            at: Some(now()),
            ..m
        }))
}

/// Who asks for the lock: `login@host` and the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimant {
    pub holder: String,
    pub run_id: String,
    pub runbook: String,
    pub env: String,
}

impl Claimant {
    /// `login@host` of this process, for `run_id` of `runbook` in `env`.
    pub fn this_console(run_id: &str, runbook: &str, env: &str) -> Claimant {
        Claimant {
            holder: format!("{}@{}", hk_engine::journal::operator_login(), host_name()),
            run_id: run_id.to_string(),
            runbook: runbook.to_string(),
            env: env.to_string(),
        }
    }
}

/// The machine's host name (`unknown-host` if it cannot be read: a lock is never refused
/// for want of a name, and the holder string says it was unknown).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "unknown-host".to_string())
}

/// What the Lease says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    pub holder: String,
    pub run_id: Option<String>,
    pub runbook: Option<String>,
    pub env: Option<String>,
    pub since: Option<Timestamp>,
    pub renewed: Option<Timestamp>,
    pub duration_s: Option<u64>,
    /// The holder's renewTime far from this machine's clock, said (information only: it
    /// decides nothing), e.g. "its renewTime is 600 s ahead of this machine".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_note: Option<String>,
}

/// How far a renewTime may be from this machine's clock before it is named: a few seconds
/// are the write's own delay.
pub const CLOCK_NOTE_AFTER_S: u64 = 30;

/// The note for a holder whose renewTime is far from this machine's `wall_now`.
pub fn clock_note(renewed: Option<Timestamp>, wall_now: Timestamp) -> Option<String> {
    let r = renewed?.0;
    if r > wall_now.0 + CLOCK_NOTE_AFTER_S * 1000 {
        Some(format!(
            "its renewTime is {} s ahead of this machine (one of the two clocks is off; freshness is judged by what this console saw change, not by it)",
            (r - wall_now.0) / 1000
        ))
    } else {
        None
    }
}

impl std::fmt::Display for LockRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.holder)?;
        if let Some(rb) = &self.runbook {
            write!(f, " running {rb}")?;
        }
        if let Some(id) = &self.run_id {
            write!(f, " (run {id})")?;
        }
        if let Some(t) = self.since {
            write!(f, " since {t}")?;
        }
        if let Some(t) = self.renewed {
            write!(f, ", last renewed {}", clock(t))?;
        }
        if let Some(n) = &self.clock_note {
            write!(f, " ({n})")?;
        }
        Ok(())
    }
}

/// The lock as a console sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "lock")]
pub enum LockState {
    /// No Lease, or one nobody holds.
    Free,
    /// Held, and renewed within its duration.
    Held { record: LockRecord },
    /// Held by someone who stopped renewing: this console watched the record unchanged for
    /// `age_ms`, longer than its duration.
    Stale { record: LockRecord, age_ms: u64 },
}

/// What identifies one writing of the lock record: any renewal, take-over or release
/// changes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordKey {
    pub uid: Option<String>,
    pub holder: Option<String>,
    pub renew_time: Option<String>,
    pub transitions: Option<i32>,
    pub resource_version: Option<String>,
}

impl RecordKey {
    pub fn of(lease: &Lease) -> RecordKey {
        let spec = lease.spec.as_ref();
        RecordKey {
            uid: lease.metadata.uid.clone(),
            holder: spec.and_then(|s| s.holder_identity.clone()),
            renew_time: spec
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0.to_string()),
            transitions: spec.and_then(|s| s.lease_transitions),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// What one console saw of the lock record over time, on its own monotonic clock: the
/// record last seen and since when it has been seen unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watch {
    seen: Option<(RecordKey, std::time::Instant)>,
}

impl Watch {
    /// The record as seen at `at`: a record that differs from the last one seen starts a
    /// new watch at `at`. Answers since when this record has been seen unchanged.
    pub fn see(&mut self, key: RecordKey, at: std::time::Instant) -> std::time::Instant {
        match &self.seen {
            Some((k, since)) if *k == key => *since,
            _ => {
                self.seen = Some((key, at));
                at
            }
        }
    }
}

/// The one watch of this process (every look, take and write goes through it), keyed by
/// the Lease's uid (unique per object and cluster): two clusters' locks are watched apart.
fn process_watch() -> &'static std::sync::Mutex<std::collections::HashMap<String, Watch>> {
    static W: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, Watch>>> =
        std::sync::OnceLock::new();
    W.get_or_init(Default::default)
}

/// Note `lease` as seen now by this process: since when it has been seen unchanged, on
/// this process's monotonic clock.
fn seen_now(lease: &Lease) -> std::time::Instant {
    let at = std::time::Instant::now();
    let mut all = process_watch().lock().unwrap_or_else(|p| p.into_inner());
    all.entry(lease.metadata.uid.clone().unwrap_or_default())
        .or_default()
        .see(RecordKey::of(lease), at)
}

/// The record of a held lock (None: free), with the clock note against `wall_now`.
fn record_of(lease: Option<&Lease>, wall_now: Timestamp) -> Option<LockRecord> {
    let l = lease?;
    let spec = l.spec.as_ref();
    let holder = spec
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())?;
    let ann = l.metadata.annotations.as_ref();
    let a = |k: &str| ann.and_then(|m| m.get(k)).cloned();
    let renewed = spec
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| convert::timestamp(&t.0));
    Some(LockRecord {
        holder,
        run_id: a(RUN_ID_ANNOTATION),
        runbook: a(RUNBOOK_ANNOTATION),
        env: a(ENV_ANNOTATION),
        since: spec
            .and_then(|s| s.acquire_time.as_ref())
            .map(|t| convert::timestamp(&t.0)),
        renewed,
        duration_s: spec
            .and_then(|s| s.lease_duration_seconds)
            .map(|d| u64::try_from(d).unwrap_or(0)),
        clock_note: clock_note(renewed, wall_now),
    })
}

/// Judge a lock Lease this console has seen unchanged since `unchanged_since` (its own
/// monotonic clock), at `now`. Stale: watched unchanged strictly longer than its duration
/// (a record with no duration counts as 0 s). The wall-clock `wall_now` only words the
/// clock note; it decides nothing.
pub fn judge_watched(
    lease: Option<&Lease>,
    unchanged_since: std::time::Instant,
    now: std::time::Instant,
    wall_now: Timestamp,
) -> LockState {
    let Some(record) = record_of(lease, wall_now) else {
        return LockState::Free;
    };
    let watched = now.saturating_duration_since(unchanged_since);
    let age_ms = u64::try_from(watched.as_millis()).unwrap_or(u64::MAX);
    match record.duration_s {
        Some(d) if age_ms <= d.saturating_mul(1000) => LockState::Held { record },
        _ => LockState::Stale { record, age_ms },
    }
}

/// The lock as this process sees it now: `lease` noted as seen, judged by how long this
/// process has watched it unchanged.
fn judge_now(lease: Option<&Lease>) -> LockState {
    let since = match lease {
        Some(l) => seen_now(l),
        None => std::time::Instant::now(),
    };
    judge_watched(lease, since, std::time::Instant::now(), now())
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("the cluster could not be asked for the run lock {LOCK_NAMESPACE}/{LOCK_NAME}: {0}")]
    Unreachable(String),
    /// The API server answered, but its datastore could not: etcd without quorum or without
    /// a leader. No write succeeds (the lock's, or any a run makes) until etcd has one again.
    #[error("the cluster's etcd cannot write: the API server answered {0}")]
    NoQuorum(String),
    #[error("another console holds the run lock: {record}; a mutating run cannot start here until it ends (observe mode can). This console calls a lock stale only once it has seen its record unchanged for the lock's duration, on this machine's own clock: try again after that to be offered the take-over")]
    Held { record: Box<LockRecord> },
    #[error("the run lock is stale: {record}, seen unchanged by this console for {} s; take it over by typing the environment's name and a reason", age_ms / 1000)]
    Stale {
        record: Box<LockRecord>,
        age_ms: u64,
    },
    #[error("take-over refused: {0}")]
    TakeoverRefused(String),
    #[error("the run lock was lost: {now_held_by} holds it now")]
    Lost { now_held_by: String },
}

/// A take-over, as both runs journal it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Takeover {
    pub previous: LockRecord,
    pub by: Claimant,
    pub reason: String,
    pub at: Timestamp,
}

/// A failed call on the lock, named: the datastore refusing (an `etcdserver:` answer, as
/// kube-apiserver relays etcd's own errors: request timed out, no leader, leader changed)
/// is etcd without quorum, not an unreachable cluster.
fn failed(e: &kube::Error) -> LockError {
    match e {
        kube::Error::Api(s) if s.message.contains("etcdserver:") => LockError::NoQuorum(explain(e)),
        _ => LockError::Unreachable(explain(e)),
    }
}

fn api(client: &Client) -> Api<Lease> {
    Api::namespaced(client.clone(), LOCK_NAMESPACE)
}

fn micro(t: Timestamp) -> Result<MicroTime, LockError> {
    let ms = i64::try_from(t.0).map_err(|_| LockError::Unreachable("clock out of range".into()))?;
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .map(MicroTime)
        .map_err(|e| LockError::Unreachable(format!("clock: {e}")))
}

async fn read(client: &Client) -> Result<Option<Lease>, LockError> {
    api(client).get_opt(LOCK_NAME).await.map_err(|e| failed(&e))
}

/// The lock now, read-only (one GET), judged by what this process has seen of it: a
/// record first seen now is held until it has been watched unchanged for its duration.
pub async fn look(client: &Client) -> Result<LockState, LockError> {
    Ok(judge_now(read(client).await?.as_ref()))
}

/// The Lease `me` holds from `at`, carrying over the object's metadata (name,
/// resourceVersion) so the write is a compare-and-swap.
fn claimed(
    base: Option<&Lease>,
    me: &Claimant,
    duration_s: u64,
    acquired: Timestamp,
    at: Timestamp,
) -> Result<Lease, LockError> {
    let mut meta = base
        .map(|l| l.metadata.clone())
        .unwrap_or_else(|| ObjectMeta {
            name: Some(LOCK_NAME.into()),
            namespace: Some(LOCK_NAMESPACE.into()),
            ..ObjectMeta::default()
        });
    let ann = meta.annotations.get_or_insert_with(Default::default);
    ann.insert(RUN_ID_ANNOTATION.into(), me.run_id.clone());
    ann.insert(RUNBOOK_ANNOTATION.into(), me.runbook.clone());
    ann.insert(ENV_ANNOTATION.into(), me.env.clone());
    let transitions = base
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0);
    Ok(Lease {
        metadata: meta,
        spec: Some(LeaseSpec {
            holder_identity: Some(me.holder.clone()),
            lease_duration_seconds: Some(i32::try_from(duration_s).unwrap_or(i32::MAX)),
            acquire_time: Some(micro(acquired)?),
            renew_time: Some(micro(at)?),
            lease_transitions: Some(transitions + i32::from(acquired == at)),
            ..LeaseSpec::default()
        }),
    })
}

/// Write `lease` (create when `create`, else replace at its resourceVersion). A conflict
/// means another console wrote first: re-read and report what it holds.
async fn write(client: &Client, lease: &Lease, create: bool) -> Result<Lease, LockError> {
    let pp = PostParams::default();
    let r = if create {
        api(client).create(&pp, lease).await
    } else {
        api(client).replace(LOCK_NAME, &pp, lease).await
    };
    match r {
        Ok(l) => {
            // Our own write, seen as written: the watch starts from it.
            seen_now(&l);
            Ok(l)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            match judge_now(read(client).await?.as_ref()) {
                LockState::Held { record } => Err(LockError::Held {
                    record: Box::new(record),
                }),
                LockState::Stale { record, age_ms } => Err(LockError::Stale {
                    record: Box::new(record),
                    age_ms,
                }),
                LockState::Free => Err(LockError::Unreachable(
                    "the lock changed while it was being taken; try again".into(),
                )),
            }
        }
        Err(e) => Err(failed(&e)),
    }
}

/// A lock this console holds.
#[derive(Clone)]
pub struct HeldLock {
    client: Client,
    pub me: Claimant,
    pub duration_s: u64,
    lease: Lease,
}

impl std::fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLock")
            .field("me", &self.me)
            .field("duration_s", &self.duration_s)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl HeldLock {
    /// The Lease as last written.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Renew: a replace at the resourceVersion last written. Lost if anyone else wrote.
    pub async fn renew(&mut self) -> Result<(), LockError> {
        let spec = self.lease.spec.clone().unwrap_or_default();
        let mut next = self.lease.clone();
        next.spec = Some(LeaseSpec {
            renew_time: Some(micro(now())?),
            ..spec
        });
        match api(&self.client)
            .replace(LOCK_NAME, &PostParams::default(), &next)
            .await
        {
            Ok(l) => {
                seen_now(&l);
                self.lease = l;
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                let now_held_by = match look(&self.client).await? {
                    LockState::Held { record } | LockState::Stale { record, .. } => record.holder,
                    LockState::Free => "nobody".into(),
                };
                Err(LockError::Lost { now_held_by })
            }
            Err(e) => Err(failed(&e)),
        }
    }

    /// Release: clear the holder (at the resourceVersion last written, so a lock taken over
    /// meanwhile is left alone).
    pub async fn release(self) -> Result<(), LockError> {
        let mut next = self.lease.clone();
        if let Some(a) = next.metadata.annotations.as_mut() {
            for k in [RUN_ID_ANNOTATION, RUNBOOK_ANNOTATION, ENV_ANNOTATION] {
                a.remove(k);
            }
        }
        next.spec = Some(LeaseSpec {
            holder_identity: None,
            acquire_time: None,
            renew_time: None,
            ..next.spec.unwrap_or_default()
        });
        match api(&self.client)
            .replace(LOCK_NAME, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                let now_held_by = match look(&self.client).await? {
                    LockState::Held { record } | LockState::Stale { record, .. } => record.holder,
                    LockState::Free => "nobody".into(),
                };
                Err(LockError::Lost { now_held_by })
            }
            Err(e) => Err(failed(&e)),
        }
    }
}

/// A held lock kept renewed by a task (every third of its duration) while the run lives.
/// A renewal that finds the lock lost stops renewing and says so in [`Renewer::trouble`]
/// and [`Renewer::standing`] (with the Lease's take-over mark for this run, read then);
/// one that cannot reach the cluster says so too and keeps trying.
pub struct Renewer {
    cancel: tokio_util::sync::CancellationToken,
    trouble: tokio::sync::watch::Receiver<Option<Trouble>>,
    task: tokio::task::JoinHandle<Option<HeldLock>>,
    /// When the Lease was last written by this holder (taken or renewed).
    last_written: std::sync::Arc<std::sync::Mutex<std::time::Instant>>,
    duration: std::time::Duration,
}

/// What went wrong while renewing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trouble {
    /// Someone else holds it now (named): renewing stopped. The take-over mark naming this
    /// run, when the Lease carried one as the loss was found.
    Lost(String, Option<TakeoverMark>),
    /// The last renewal failed; renewing goes on.
    Renewal(String),
}

/// Whether a renewed lock may still be counted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Renewed within its duration: no other console can have taken it.
    Held,
    /// Lost: `now_held_by` holds it; `mark` is the take-over that named this run, if any.
    Lost {
        now_held_by: String,
        mark: Option<TakeoverMark>,
    },
    /// Not written for longer than its duration (the console was stopped, or the cluster
    /// did not answer): another console may have taken it over meanwhile. Until a renewal
    /// succeeds, nothing should count on it.
    Lapsed { for_s: u64 },
}

impl HeldLock {
    /// Hand the lock to a renewing task.
    pub fn keep_renewed(mut self) -> Renewer {
        let cancel = tokio_util::sync::CancellationToken::new();
        let (tx, trouble) = tokio::sync::watch::channel(None);
        let every = std::time::Duration::from_millis(self.duration_s.max(1) * 1000 / 3);
        let duration = std::time::Duration::from_secs(self.duration_s.max(1));
        let stop = cancel.clone();
        let last_written = std::sync::Arc::new(std::sync::Mutex::new(std::time::Instant::now()));
        let written = std::sync::Arc::clone(&last_written);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return Some(self),
                    _ = tokio::time::sleep(every) => {}
                }
                let asked = std::time::Instant::now();
                match self.renew().await {
                    Ok(()) => {
                        // Counted from when the renewal was asked: the Lease's renew time is
                        // at least that late.
                        *written.lock().unwrap_or_else(|p| p.into_inner()) = asked;
                        tx.send_replace(None);
                    }
                    Err(LockError::Lost { now_held_by }) => {
                        // Who took it over and why, read now, so the run can journal the
                        // loss when it learns of it (not only at its end).
                        let mark = takeover_of(&self.client, &self.me.run_id)
                            .await
                            .ok()
                            .flatten();
                        tx.send_replace(Some(Trouble::Lost(now_held_by, mark)));
                        return None;
                    }
                    Err(e) => {
                        tx.send_replace(Some(Trouble::Renewal(e.to_string())));
                    }
                }
            }
        });
        Renewer {
            cancel,
            trouble,
            task,
            last_written,
            duration,
        }
    }
}

impl Renewer {
    /// What is wrong with the lock now (lost, or the last renewal failed), if anything.
    pub fn trouble(&self) -> Option<String> {
        self.trouble.borrow().as_ref().map(|t| match t {
            Trouble::Lost(holder, _) => format!("the run lock was lost: {holder} holds it now"),
            Trouble::Renewal(e) => format!("could not renew the run lock (retrying): {e}"),
        })
    }

    /// Whether the lock may still be counted on: lost, lapsed (not written for longer than
    /// its duration), or held.
    pub fn standing(&self) -> Standing {
        if let Some(Trouble::Lost(holder, mark)) = self.trouble.borrow().as_ref() {
            return Standing::Lost {
                now_held_by: holder.clone(),
                mark: mark.clone(),
            };
        }
        let since = self
            .last_written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed();
        if since > self.duration {
            return Standing::Lapsed {
                for_s: since.as_secs(),
            };
        }
        Standing::Held
    }

    /// Stop renewing and release the lock (if it was not lost).
    pub async fn release(self) -> Result<(), LockError> {
        self.cancel.cancel();
        let trouble = self.trouble.clone();
        match self.task.await {
            Ok(Some(held)) => held.release().await,
            Ok(None) => Err(LockError::Lost {
                now_held_by: match trouble.borrow().as_ref() {
                    Some(Trouble::Lost(holder, _)) => holder.clone(),
                    _ => "someone else".into(),
                },
            }),
            Err(e) => Err(LockError::Unreachable(format!(
                "the renewing task ended: {e}"
            ))),
        }
    }
}

/// Take the lock for `me`, for `duration_s` seconds per renewal. Refused, naming the
/// holder, while another console holds it (stale or not: a stale one needs [`take_over`]).
/// The same run taking it again (a resumed run) renews it.
pub async fn acquire(
    client: &Client,
    me: &Claimant,
    duration_s: u64,
) -> Result<HeldLock, LockError> {
    let current = read(client).await?;
    let at = now();
    let lease = match judge_now(current.as_ref()) {
        LockState::Free => {
            let l = claimed(current.as_ref(), me, duration_s, at, at)?;
            write(client, &l, current.is_none()).await?
        }
        LockState::Held { record } | LockState::Stale { record, .. }
            if record.holder == me.holder
                && record.run_id.as_deref() == Some(me.run_id.as_str()) =>
        {
            let since = record.since.unwrap_or(at);
            let l = claimed(current.as_ref(), me, duration_s, since, at)?;
            write(client, &l, false).await?
        }
        LockState::Held { record } => {
            return Err(LockError::Held {
                record: Box::new(record),
            })
        }
        LockState::Stale { record, age_ms } => {
            return Err(LockError::Stale {
                record: Box::new(record),
                age_ms,
            })
        }
    };
    Ok(HeldLock {
        client: client.clone(),
        me: me.clone(),
        duration_s,
        lease,
    })
}

/// Take over a stale lock: `typed` must be the environment's name (`me.env`) and `reason`
/// must say why. A lock that is held and fresh is never taken over.
pub async fn take_over(
    client: &Client,
    me: &Claimant,
    duration_s: u64,
    typed: &str,
    reason: &str,
) -> Result<(HeldLock, Takeover), LockError> {
    if typed.trim() != me.env {
        return Err(LockError::TakeoverRefused(format!(
            "type the environment's name `{}` to take over its run lock (got `{}`)",
            me.env,
            typed.trim()
        )));
    }
    if reason.trim().is_empty() {
        return Err(LockError::TakeoverRefused(
            "say why the lock is taken over: the reason is journaled in both runs".into(),
        ));
    }
    let current = read(client).await?;
    let at = now();
    let previous = match judge_now(current.as_ref()) {
        LockState::Stale { record, .. } => record,
        LockState::Held { record } => {
            return Err(LockError::Held {
                record: Box::new(record),
            })
        }
        LockState::Free => {
            return Err(LockError::TakeoverRefused(
                "the lock is free: take it, there is nothing to take over".into(),
            ))
        }
    };
    let mut l = claimed(current.as_ref(), me, duration_s, at, at)?;
    let ann = l.metadata.annotations.get_or_insert_with(Default::default);
    for (k, v) in [
        (TAKEN_FROM_ANNOTATION, previous.holder.clone()),
        (
            TAKEN_FROM_RUN_ANNOTATION,
            previous.run_id.clone().unwrap_or_default(),
        ),
        (TAKEN_BY_ANNOTATION, me.holder.clone()),
        (TAKEN_BY_RUN_ANNOTATION, me.run_id.clone()),
        (TAKEN_AT_ANNOTATION, at.0.to_string()),
        (TAKEN_WHY_ANNOTATION, reason.trim().to_string()),
    ] {
        ann.insert(k.to_string(), v);
    }
    let lease = write(client, &l, false).await?;
    Ok((
        HeldLock {
            client: client.clone(),
            me: me.clone(),
            duration_s,
            lease,
        },
        Takeover {
            previous,
            by: me.clone(),
            reason: reason.trim().to_string(),
            at,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_ms: u64, duration: i32) -> Lease {
        let t = |ms: u64| {
            MicroTime(k8s_openapi::jiff::Timestamp::from_millisecond(ms as i64).expect("time"))
        };
        Lease {
            metadata: ObjectMeta {
                name: Some(LOCK_NAME.into()),
                annotations: Some(
                    [(RUN_ID_ANNOTATION.to_string(), "r1".to_string())]
                        .into_iter()
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: Some(t(renewed_ms)),
                acquire_time: Some(t(renewed_ms - 1000)),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn an_etcdserver_answer_is_no_quorum_anything_else_unreachable() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.into(),
                ..kube::core::Status::default()
            }))
        };
        for m in [
            "etcdserver: request timed out",
            "etcdserver: no leader",
            "etcdserver: leader changed",
        ] {
            match failed(&status(500, m)) {
                LockError::NoQuorum(why) => assert!(why.contains(m), "{why}"),
                other => panic!("{m}: {other}"),
            }
        }
        assert!(matches!(
            failed(&status(500, "Internal error occurred: admission webhook")),
            LockError::Unreachable(_)
        ));
        assert!(matches!(
            failed(&status(403, "leases is forbidden")),
            LockError::Unreachable(_)
        ));
    }

    #[test]
    fn free_held_and_stale_by_what_this_console_watched() {
        use std::time::{Duration, Instant};
        let wall = Timestamp(1_788_782_400_000);
        let t0 = Instant::now();
        assert_eq!(judge_watched(None, t0, t0, wall), LockState::Free);
        assert_eq!(
            judge_watched(Some(&lease(None, wall.0, 60)), t0, t0, wall),
            LockState::Free
        );
        let l = lease(Some("ann@lab"), wall.0 - 600_000, 60);
        // Renewed 10 min ago by the holder's clock, but first seen now: held. The holder's
        // timestamps decide nothing.
        match judge_watched(Some(&l), t0, t0, wall) {
            LockState::Held { record } => {
                assert_eq!(record.holder, "ann@lab");
                assert_eq!(record.run_id.as_deref(), Some("r1"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            judge_watched(Some(&l), t0, t0 + Duration::from_secs(60), wall),
            LockState::Held { .. }
        ));
        match judge_watched(Some(&l), t0, t0 + Duration::from_millis(60_001), wall) {
            LockState::Stale { record, age_ms } => {
                assert_eq!(age_ms, 60_001);
                assert_eq!(
                    record.to_string(),
                    "ann@lab (run r1) since 2026-09-07T11:49:59.000Z, last renewed 11:50:00"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// Issue 34: console C under `faketime -f +600s` called a lock renewed every 2 s stale
    /// (its holder's renewTime was 10 min behind C's clock). Judged by what C watched: a
    /// record that changes every 2 s is never stale however far the clocks disagree, and a
    /// renewTime far ahead of this machine is named, not judged.
    #[test]
    fn a_foreign_clock_decides_nothing_what_changes_is_what_counts() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let mut watch = Watch::default();
        // B renews every 2 s for 5 minutes; C (600 s ahead) looks every second.
        let b_wall = 1_788_782_400_000u64;
        let c_wall = |s: u64| Timestamp(b_wall + 600_000 + s * 1000);
        for s in 0..300u64 {
            let renewed = b_wall + (s / 2) * 2000;
            let mut l = lease(Some("bob@console-b"), renewed, 15);
            l.metadata.resource_version = Some(format!("{}", 100 + s / 2));
            let at = t0 + Duration::from_secs(s);
            let since = watch.see(RecordKey::of(&l), at);
            match judge_watched(Some(&l), since, at, c_wall(s)) {
                LockState::Held { .. } => {}
                other => panic!("second {s}: {other:?}"),
            }
        }
        // B stops (SIGSTOP): the record stops changing. Stale only after C watched it
        // unchanged for the 15 s duration, counted from C's first sight of this record.
        let mut l = lease(Some("bob@console-b"), b_wall + 300_000, 15);
        l.metadata.resource_version = Some("999".into());
        let first = t0 + Duration::from_secs(300);
        let mut verdicts = Vec::new();
        for s in [0u64, 10, 15, 16] {
            let at = first + Duration::from_secs(s);
            let since = watch.see(RecordKey::of(&l), at);
            verdicts.push(matches!(
                judge_watched(Some(&l), since, at, c_wall(300 + s)),
                LockState::Stale { .. }
            ));
        }
        assert_eq!(verdicts, vec![false, false, false, true]);
        // A holder whose clock is 600 s ahead of this machine's is named, as information.
        let ahead = lease(Some("carol@console-c"), b_wall + 600_000, 15);
        match judge_watched(Some(&ahead), t0, t0, Timestamp(b_wall)) {
            LockState::Held { record } => {
                let note = record.clock_note.clone().unwrap_or_default();
                assert!(
                    note.starts_with("its renewTime is 600 s ahead of this machine"),
                    "{note}"
                );
                assert!(record.to_string().contains("600 s ahead"), "{record}");
            }
            other => panic!("{other:?}"),
        }
        // A console that has just started and seen the record once cannot call it stale.
        let mut fresh = Watch::default();
        let now = Instant::now();
        let since = fresh.see(RecordKey::of(&l), now);
        assert!(matches!(
            judge_watched(Some(&l), since, now, c_wall(10_000)),
            LockState::Held { .. }
        ));
    }
}
