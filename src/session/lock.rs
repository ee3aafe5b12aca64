//! The cluster's run lock around a mutating run: one operator at a time per environment.
//!
//! Owns: what a mutating run's start does about `kube-system/hk-console-run-lock`
//! ([`take`]): take it (holder `login@host`, the run id and runbook, the duration from
//! hk-console.yaml's `run_lock.duration_s`) and keep it renewed while the run lives
//! ([`RunLock`]), or refuse the start naming the holder (held), naming the holder and its
//! last renewal (stale: the take-over prompt, [`take_over`]), or naming why the cluster
//! could not be asked (unreachable: the run does not start). `--no-cluster-lock`
//! ([`LockPolicy::Disabled`]) skips all of it, and says so in a note the run journals. Each
//! outcome is a [`RunLockNote`] for the run's journal; a run that finds its lock gone reads
//! the Lease's take-over mark ([`lost_note`]) so the taken-from run journals the take-over
//! too.
//! Must not: journal (the session records the notes as `Input::RunLock`), decide which runs
//! mutate (the plan says), or write anything in observe mode (an observe session never
//! calls here: it cannot start a run).

use kube::Client;

use crate::cluster::lock::{self, Claimant, LockError, LockRecord, Renewer};
use crate::runbook::machine::RunLockNote;

/// What the operator asked of the lock for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockPolicy {
    /// Take the cluster's lock for every mutating run, for `duration_s` per renewal.
    Cluster { duration_s: u64 },
    /// `--no-cluster-lock`: runs go without it (journaled, and shown on every frame).
    Disabled,
}

impl LockPolicy {
    pub fn is_disabled(&self) -> bool {
        matches!(self, LockPolicy::Disabled)
    }
}

/// The banner line every frame shows while the lock is off.
pub const NO_LOCK_BANNER: &str =
    "NO CLUSTER RUN LOCK · --no-cluster-lock · another console may run here too";

/// Why a mutating run did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunLockError {
    /// The cluster could not be asked: the run does not start.
    #[error("the run does not start: {why} (the cluster's run lock could not be taken; `--no-cluster-lock` runs without it, journaled)")]
    Unreachable { why: String },
    /// Another console holds it and renews it.
    #[error("the run does not start: another console holds the run lock of `{env}`: {record}")]
    Held {
        env: String,
        record: Box<LockRecord>,
    },
    /// Its holder stopped renewing: shown with its last renewal; taking it over needs the
    /// environment's name typed and a reason.
    #[error("the run does not start: the run lock of `{env}` is stale: {record}, not renewed for {} s; starting again asks to take it over (the environment's name typed and a reason)", age_ms / 1000)]
    Stale {
        env: String,
        record: Box<LockRecord>,
        age_ms: u64,
    },
    /// A take-over was refused (the typed answer, or the lock changed meanwhile).
    #[error("take-over refused: {0}")]
    TakeoverRefused(String),
}

fn from_lock(env: &str, e: LockError) -> RunLockError {
    match e {
        LockError::Unreachable(why) => RunLockError::Unreachable { why },
        LockError::Held { record } => RunLockError::Held {
            env: env.to_string(),
            record,
        },
        LockError::Stale { record, age_ms } => RunLockError::Stale {
            env: env.to_string(),
            record,
            age_ms,
        },
        LockError::TakeoverRefused(why) => RunLockError::TakeoverRefused(why),
        LockError::Lost { now_held_by } => RunLockError::Held {
            env: env.to_string(),
            record: Box::new(LockRecord {
                holder: now_held_by,
                run_id: None,
                runbook: None,
                env: None,
                since: None,
                renewed: None,
                duration_s: None,
            }),
        },
    }
}

/// A lock a run holds, renewed by a task until [`RunLock::release`].
pub struct RunLock {
    renewer: Renewer,
    client: Client,
    run_id: String,
}

impl std::fmt::Debug for RunLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLock")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl RunLock {
    /// What is wrong with the lock now (lost to someone, or renewals failing), if anything.
    pub fn trouble(&self) -> Option<String> {
        self.renewer.trouble()
    }

    /// Stop renewing and release it. The note says what happened: released, or lost (with
    /// the take-over mark, when another console took it over).
    pub async fn release(self) -> RunLockNote {
        match self.renewer.release().await {
            Ok(()) => RunLockNote::Released,
            Err(LockError::Lost { now_held_by }) => {
                lost_note(&self.client, &self.run_id, now_held_by).await
            }
            Err(e) => RunLockNote::Lost {
                now_held_by: format!("unknown: the release could not be written ({e})"),
            },
        }
    }
}

/// What a run journals when it finds its lock gone: who took it over and why (the Lease's
/// take-over mark names this run), else who holds it now.
pub async fn lost_note(client: &Client, run_id: &str, now_held_by: String) -> RunLockNote {
    match lock::takeover_of(client, run_id).await {
        Ok(Some(m)) => RunLockNote::TakenOverBy {
            by: m.by,
            by_run: m.by_run,
            reason: m.reason,
            at: m.at,
        },
        _ => RunLockNote::Lost { now_held_by },
    }
}

/// Take the lock for a mutating run of `me` (its run id, runbook and environment) on
/// `client` (Err: why no client could be made: the run does not start). Disabled: nothing
/// is asked of the cluster, and the note says the run goes without it.
pub async fn take(
    client: Result<Client, String>,
    me: &Claimant,
    policy: &LockPolicy,
) -> Result<(Option<RunLock>, RunLockNote), RunLockError> {
    let duration_s = match policy {
        LockPolicy::Disabled => {
            return Ok((
                None,
                RunLockNote::Disabled {
                    by: me.holder.clone(),
                },
            ))
        }
        LockPolicy::Cluster { duration_s } => *duration_s,
    };
    let client = client.map_err(|why| RunLockError::Unreachable { why })?;
    let held = lock::acquire(&client, me, duration_s)
        .await
        .map_err(|e| from_lock(&me.env, e))?;
    let note = RunLockNote::Taken {
        holder: me.holder.clone(),
        duration_s,
    };
    Ok((
        Some(RunLock {
            renewer: held.keep_renewed(),
            client,
            run_id: me.run_id.clone(),
        }),
        note,
    ))
}

/// Take over a stale lock for `me`: `typed` must be the environment's name and `reason`
/// must say why (both checked again by `cluster::lock::take_over`). The note names whose
/// lock it was and its last renewal; the Lease carries the mark the other run reads.
pub async fn take_over(
    client: Result<Client, String>,
    me: &Claimant,
    duration_s: u64,
    typed: &str,
    reason: &str,
) -> Result<(RunLock, RunLockNote), RunLockError> {
    let client = client.map_err(|why| RunLockError::Unreachable { why })?;
    let (held, t) = lock::take_over(&client, me, duration_s, typed, reason)
        .await
        .map_err(|e| from_lock(&me.env, e))?;
    let note = RunLockNote::TookOver {
        from: t.previous.holder,
        from_run: t.previous.run_id,
        last_renewed: t.previous.renewed,
        by: t.by.holder,
        typed: typed.trim().to_string(),
        reason: t.reason,
    };
    Ok((
        RunLock {
            renewer: held.keep_renewed(),
            client,
            run_id: me.run_id.clone(),
        },
        note,
    ))
}

/// How long a lock call may take before the cluster counts as unreachable. The calls run
/// where the operator asked to start (a GET and a write, milliseconds on a LAN); this
/// bounds how long a console waits on a cluster that does not answer.
pub const LOCK_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);

/// What a console (or a headless run) locks with: the policy, the lock's duration and how
/// to reach each environment's cluster (the kubeconfig the executors use).
#[derive(Debug, Clone)]
pub struct RunLocking {
    pub policy: LockPolicy,
    targets: std::collections::BTreeMap<String, Result<crate::cluster::KubeTarget, String>>,
}

impl RunLocking {
    /// Every environment of `repo`, reached the way the kube executors reach it (`ov`:
    /// --kubeconfig/--context); `no_cluster_lock` turns the lock off; else its duration is
    /// hk-console.yaml's `run_lock.duration_s`.
    pub fn for_repo(
        repo: &crate::repo::Repo,
        ov: &crate::cluster::KubeOverrides,
        no_cluster_lock: bool,
    ) -> RunLocking {
        let policy = if no_cluster_lock {
            LockPolicy::Disabled
        } else {
            LockPolicy::Cluster {
                duration_s: repo.config.run_lock.duration_s,
            }
        };
        let targets = repo
            .environments
            .iter()
            .map(|e| {
                (
                    e.name.clone(),
                    crate::cluster::kube_target(repo, &e.name, ov).map_err(|x| x.to_string()),
                )
            })
            .collect();
        RunLocking { policy, targets }
    }

    async fn client(&self, env: &str) -> Result<Client, String> {
        let target = self
            .targets
            .get(env)
            .ok_or_else(|| format!("no environment `{env}` in hk-console.yaml"))?
            .clone()?;
        crate::cluster::client(&target)
            .await
            .map_err(|e| e.to_string())
    }

    /// [`take`] for `me`, from synchronous code on the runtime (the session's start).
    pub fn take_now(&self, me: &Claimant) -> Result<(Option<RunLock>, RunLockNote), RunLockError> {
        if self.policy.is_disabled() {
            return Ok((
                None,
                RunLockNote::Disabled {
                    by: me.holder.clone(),
                },
            ));
        }
        blocking(async {
            let client = self.client(&me.env).await;
            take(client, me, &self.policy).await
        })?
    }

    /// [`take_over`] for `me`, from synchronous code on the runtime.
    pub fn take_over_now(
        &self,
        me: &Claimant,
        typed: &str,
        reason: &str,
    ) -> Result<(RunLock, RunLockNote), RunLockError> {
        let LockPolicy::Cluster { duration_s } = self.policy else {
            return Err(RunLockError::TakeoverRefused(
                "--no-cluster-lock: this console takes no lock, so it takes none over".into(),
            ));
        };
        blocking(async {
            let client = self.client(&me.env).await;
            take_over(client, me, duration_s, typed, reason).await
        })?
    }
}

impl RunLock {
    /// [`RunLock::release`] from synchronous code on the runtime (the run's end).
    pub fn release_now(self) -> RunLockNote {
        match blocking(self.release()) {
            Ok(note) => note,
            Err(e) => RunLockNote::Lost {
                now_held_by: format!("unknown: {e}"),
            },
        }
    }
}

/// Run `f` to its end from synchronous code inside the multi-threaded runtime, bounded by
/// [`LOCK_CALL_TIMEOUT`]. Outside a runtime (a test app with no cluster) it cannot reach
/// a cluster, and says so.
fn blocking<F: std::future::Future>(f: F) -> Result<F::Output, RunLockError> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| RunLockError::Unreachable {
        why: "no async runtime to reach the cluster from".into(),
    })?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Err(RunLockError::Unreachable {
            why: "the cluster is reached from a multi-threaded runtime only".into(),
        });
    }
    tokio::task::block_in_place(|| handle.block_on(tokio::time::timeout(LOCK_CALL_TIMEOUT, f)))
        .map_err(|_| RunLockError::Unreachable {
            why: format!(
                "the cluster did not answer within {} s",
                LOCK_CALL_TIMEOUT.as_secs()
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Claimant {
        Claimant {
            holder: "ann@console-a".into(),
            run_id: "r1".into(),
            runbook: "etcd-io-priority".into(),
            env: "prod".into(),
        }
    }

    #[tokio::test]
    async fn no_cluster_means_the_run_does_not_start_unless_the_lock_is_off() {
        let policy = LockPolicy::Cluster { duration_s: 60 };
        match take(Err("no kubeconfig for prod".into()), &me(), &policy).await {
            Err(e @ RunLockError::Unreachable { .. }) => assert_eq!(
                e.to_string(),
                "the run does not start: no kubeconfig for prod (the cluster's run lock could not be taken; `--no-cluster-lock` runs without it, journaled)"
            ),
            other => panic!("{other:?}"),
        }
        let (lock, note) = take(Err("unreachable".into()), &me(), &LockPolicy::Disabled)
            .await
            .expect("off: nothing asked");
        assert!(lock.is_none());
        assert_eq!(
            note,
            RunLockNote::Disabled {
                by: "ann@console-a".into()
            }
        );
    }

    #[test]
    fn outside_a_runtime_the_cluster_is_unreachable_not_a_panic() {
        match blocking(async { 1 }) {
            Err(RunLockError::Unreachable { why }) => assert!(why.contains("runtime"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

/// A session's side of the lock: how to take it, the lock it holds while its run lives,
/// the notes its journal still has to record, and the stale lock its last start was
/// refused on (what the take-over prompt shows).
#[derive(Debug, Default)]
pub struct SessionLock {
    locking: Option<std::sync::Arc<RunLocking>>,
    held: Option<RunLock>,
    notes: Vec<RunLockNote>,
    /// The stale lock the last start met: its record and how long since it was renewed.
    pub stale: Option<(LockRecord, u64)>,
}

/// Whether a run of `plan` takes the lock: one that can change systems.
pub fn needs_lock(plan: &crate::runbook::plan::Plan) -> bool {
    plan.steps.iter().any(|s| s.mutates)
}

fn claimant(
    plan: &crate::runbook::plan::Plan,
    now: crate::runbook::machine::Timestamp,
) -> Claimant {
    // The id the journal about to be created gets (same time, runbook, environment).
    let run_id = crate::journal::run_id_for(now, &plan.runbook, &plan.env);
    Claimant::this_console(&run_id, &plan.runbook, &plan.env)
}

impl SessionLock {
    pub fn new(locking: Option<std::sync::Arc<RunLocking>>) -> SessionLock {
        SessionLock {
            locking,
            ..SessionLock::default()
        }
    }

    /// Before a run of `plan` starts at `now`: a mutating one takes the lock (or notes that
    /// `--no-cluster-lock` leaves it). Err: why the run does not start; a stale lock is
    /// kept in [`SessionLock::stale`] for the take-over prompt.
    pub fn before_start(
        &mut self,
        plan: &crate::runbook::plan::Plan,
        now: crate::runbook::machine::Timestamp,
    ) -> Result<(), RunLockError> {
        self.stale = None;
        let Some(locking) = self.locking.clone() else {
            return Ok(());
        };
        if !needs_lock(plan) {
            return Ok(());
        }
        match locking.take_now(&claimant(plan, now)) {
            Ok((held, note)) => {
                self.held = held;
                self.notes.push(note);
                Ok(())
            }
            Err(e) => {
                if let RunLockError::Stale { record, age_ms, .. } = &e {
                    self.stale = Some(((**record).clone(), *age_ms));
                }
                Err(e)
            }
        }
    }

    /// Before an interrupted run `run_id` of `plan` resumes: a mutating one takes the lock
    /// again under its own run id (a lock this console's run still holds is re-taken; one
    /// held by another run, stale or unreachable refuses the resume).
    pub fn before_resume(
        &mut self,
        plan: &crate::runbook::plan::Plan,
        run_id: &str,
    ) -> Result<(), RunLockError> {
        self.stale = None;
        let Some(locking) = self.locking.clone() else {
            return Ok(());
        };
        if !needs_lock(plan) {
            return Ok(());
        }
        let me = Claimant::this_console(run_id, &plan.runbook, &plan.env);
        match locking.take_now(&me) {
            Ok((held, note)) => {
                self.held = held;
                self.notes.push(note);
                Ok(())
            }
            Err(e) => {
                if let RunLockError::Stale { record, age_ms, .. } = &e {
                    self.stale = Some(((**record).clone(), *age_ms));
                }
                Err(e)
            }
        }
    }

    /// Take over the stale lock for a run of `plan` starting at `now`, with the operator's
    /// typed environment name and reason.
    pub fn take_over(
        &mut self,
        plan: &crate::runbook::plan::Plan,
        now: crate::runbook::machine::Timestamp,
        typed: &str,
        reason: &str,
    ) -> Result<(), RunLockError> {
        let Some(locking) = self.locking.clone() else {
            return Err(RunLockError::TakeoverRefused(
                "this console takes no run lock (nothing here runs for real)".into(),
            ));
        };
        let (held, note) = locking.take_over_now(&claimant(plan, now), typed, reason)?;
        self.stale = None;
        self.held = Some(held);
        self.notes.push(note);
        Ok(())
    }

    /// The notes the journal has yet to record, oldest first.
    pub fn take_notes(&mut self) -> Vec<RunLockNote> {
        std::mem::take(&mut self.notes)
    }

    /// The run is over: release the lock (the note says released, lost, or taken over).
    pub fn at_end(&mut self) {
        if let Some(l) = self.held.take() {
            let note = l.release_now();
            self.notes.push(note);
        }
    }

    /// Whether a lock is held now.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// What is wrong with the held lock now, if anything.
    pub fn trouble(&self) -> Option<String> {
        self.held.as_ref().and_then(RunLock::trouble)
    }
}
