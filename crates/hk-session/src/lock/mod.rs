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
//! too. While the run lives, [`SessionLock::check`] says whether the held lock may still be
//! counted on: lost (the renewal found another holder: its note, once, for the journal
//! now) or lapsed (not renewed for longer than it lasts) stops the run's next go-ahead and
//! every mutating step's work (the session refuses them).
//! Must not: journal (the session records the notes as `Input::RunLock`), decide which runs
//! mutate (the plan says), or write anything in observe mode (an observe session never
//! calls here: it cannot start a run).

use hk_engine::guard::lock as guard;
use kube::Client;

mod calls;
use calls::LockAsk;
pub use calls::{LockAnswer, LockJob, LockOutcome, LockPurpose};

use hk_effects::cluster::lock::{self, Claimant, LockError, LockRecord, Renewer, Standing};
use hk_engine::runbook::machine::RunLockNote;

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

/// Why a mutating run did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunLockError {
    /// The cluster could not be asked: the run does not start.
    #[error("the run does not start: {why} (the cluster's run lock could not be taken; `--no-cluster-lock` runs without it, journaled)")]
    Unreachable { why: String },
    /// The cluster answered but its etcd cannot write (no quorum, no leader): the run does
    /// not start, and going without the lock would not help (every write a run makes fails
    /// the same way), so no bypass is offered.
    #[error("the run does not start: etcd has no quorum (or no leader) in `{env}`: {why}. Nothing can be written to the cluster, the run lock included, until it has; the etcd pane names the members down")]
    NoQuorum { env: String, why: String },
    /// Another console holds it and renews it.
    #[error("the run does not start: another console holds the run lock of `{env}`: {record}")]
    Held {
        env: String,
        record: Box<LockRecord>,
    },
    /// Its holder stopped renewing: shown with its last renewal; taking it over needs the
    /// environment's name typed and a reason. `resuming`: met by a resume, not a start
    /// (the words say what the take-over then lets go on).
    #[error("{}the run lock of `{env}` is stale: {record}, seen unchanged by this console for {} s; {}", if *resuming { "" } else { START_REFUSED }, age_ms / 1000, if *resuming { "taking it over (the environment's name typed and a reason) resumes the run" } else { "starting again asks to take it over (the environment's name typed and a reason)" })]
    Stale {
        env: String,
        record: Box<LockRecord>,
        age_ms: u64,
        resuming: bool,
    },
    /// A call on the lock is on its way already: its answer comes first.
    #[error("the run lock of `{env}` is being asked for: wait for the cluster's answer")]
    Asking { env: String },
    /// A take-over was refused (the typed answer, or the lock changed meanwhile).
    #[error("take-over refused: {0}")]
    TakeoverRefused(String),
}

/// How a refused start's reason begins.
const START_REFUSED: &str = "the run does not start: ";

impl RunLockError {
    /// The reason alone, without "the run does not start" (what a refused resume says
    /// after its own "not resumed").
    pub fn reason(&self) -> String {
        let said = self.to_string();
        match said.strip_prefix(START_REFUSED) {
            Some(r) => r.to_string(),
            None => said,
        }
    }
}

fn from_lock(env: &str, e: LockError) -> RunLockError {
    match e {
        LockError::Unreachable(why) => RunLockError::Unreachable { why },
        LockError::NoQuorum(why) => RunLockError::NoQuorum {
            env: env.to_string(),
            why,
        },
        LockError::Held { record } => RunLockError::Held {
            env: env.to_string(),
            record,
        },
        LockError::Stale { record, age_ms } => RunLockError::Stale {
            env: env.to_string(),
            record,
            age_ms,
            resuming: false,
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
                clock_note: None,
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

    /// Whether the lock may still be counted on ([`Standing`]).
    pub fn standing(&self) -> Standing {
        self.renewer.standing()
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
    let held = named(
        &client,
        &me.env,
        tokio::time::timeout(LOCK_CALLS_BOUND, lock::acquire(&client, me, duration_s)).await,
    )
    .await?;
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
    let (held, t) = named(
        &client,
        &me.env,
        tokio::time::timeout(
            LOCK_CALLS_BOUND,
            lock::take_over(&client, me, duration_s, typed, reason),
        )
        .await,
    )
    .await?;
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

/// How long the lock's own calls may take, inside [`LOCK_CALL_TIMEOUT`], before the API
/// server's etcd check is asked why they did not answer ([`ETCD_CHECK_BOUND`]).
const LOCK_CALLS_BOUND: std::time::Duration = std::time::Duration::from_secs(6);

/// How long `/readyz/etcd` may take when a lock call failed to answer.
const ETCD_CHECK_BOUND: std::time::Duration = std::time::Duration::from_secs(3);

/// A lock call's outcome, its failure named for what it is. The built-in API server
/// answers etcd's own error at once (`etcdserver: ...`: no quorum). A real kube-apiserver
/// over an etcd without quorum holds the call until its own request timeout (a minute) and
/// then closes the connection: unanswered, it reads as an unreachable cluster. So when a
/// call does not answer, or the connection fails, the API server's own etcd check
/// (`/readyz/etcd`, which answers within its health-check timeout) is asked: failing, the
/// run does not start for want of quorum, with both answers quoted; ok or unanswered, the
/// cluster is unreachable as before.
async fn named<T>(
    client: &Client,
    env: &str,
    outcome: Result<Result<T, LockError>, tokio::time::error::Elapsed>,
) -> Result<T, RunLockError> {
    let why = match outcome {
        Ok(Ok(t)) => return Ok(t),
        Ok(Err(LockError::Unreachable(why))) => why,
        Ok(Err(e)) => return Err(from_lock(env, e)),
        Err(_) => format!(
            "the run lock's calls did not answer within {} s",
            LOCK_CALLS_BOUND.as_secs()
        ),
    };
    let settings = hk_effects::cluster::WatchSettings {
        request_timeout: ETCD_CHECK_BOUND,
        ..Default::default()
    };
    match hk_effects::cluster::health_probe::readyz_etcd(client, &settings).await {
        hk_engine::checks::live::Look::Seen {
            value: hk_engine::checks::live::EtcdReady::Failed { detail },
        } => Err(RunLockError::NoQuorum {
            env: env.to_string(),
            why: format!(
                "{why}, and the API server's /readyz/etcd fails: {}",
                etcd_lines(&detail)
            ),
        }),
        _ => Err(RunLockError::Unreachable { why }),
    }
}

/// The lines of a `/readyz` answer about etcd (`[-]etcd failed: ...`), or all of it.
fn etcd_lines(detail: &str) -> String {
    let lines: Vec<&str> = detail
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("etcd"))
        .collect();
    if lines.is_empty() {
        detail.trim().to_string()
    } else {
        lines.join("; ")
    }
}

/// How long a lock call may take before the cluster counts as unreachable. The calls run
/// where the operator asked to start (a GET and a write, milliseconds on a LAN); this
/// bounds how long a console waits on a cluster that does not answer.
pub const LOCK_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(12);

/// What a console (or a headless run) locks with: the policy, the lock's duration and how
/// to reach each environment's cluster (the kubeconfig the executors use).
#[derive(Debug, Clone)]
pub struct RunLocking {
    pub policy: LockPolicy,
    targets: std::collections::BTreeMap<String, Result<hk_effects::cluster::KubeTarget, String>>,
    off_task: bool,
}

impl RunLocking {
    /// Every environment of `repo`, reached the way the kube executors reach it (`ov`:
    /// --kubeconfig/--context); `no_cluster_lock` turns the lock off; else its duration is
    /// hk-console.yaml's `run_lock.duration_s`.
    pub fn for_repo(
        repo: &hk_engine::repo::Repo,
        ov: &hk_effects::cluster::KubeOverrides,
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
                    hk_effects::cluster::kube_target(repo, &e.name, ov).map_err(|x| x.to_string()),
                )
            })
            .collect();
        RunLocking {
            policy,
            targets,
            off_task: false,
        }
    }

    async fn client(&self, env: &str) -> Result<Client, String> {
        let target = self
            .targets
            .get(env)
            .ok_or_else(|| format!("no environment `{env}` in hk-console.yaml"))?
            .clone()?;
        hk_effects::cluster::client(&target)
            .await
            .map_err(|e| e.to_string())
    }

    /// [`take`] for `me`, bounded by [`LOCK_CALL_TIMEOUT`] (a cluster that does not answer
    /// is unreachable: the run does not start).
    pub async fn take(
        &self,
        me: &Claimant,
    ) -> Result<(Option<RunLock>, RunLockNote), RunLockError> {
        if self.policy.is_disabled() {
            return Ok((
                None,
                RunLockNote::Disabled {
                    by: me.holder.clone(),
                },
            ));
        }
        bounded(async {
            let client = self.client(&me.env).await;
            take(client, me, &self.policy).await
        })
        .await?
    }

    /// [`take_over`] for `me`, bounded by [`LOCK_CALL_TIMEOUT`].
    pub async fn take_over(
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
        bounded(async {
            let client = self.client(&me.env).await;
            take_over(client, me, duration_s, typed, reason).await
        })
        .await?
    }

    /// [`RunLocking::take`] from synchronous code on the runtime (a headless run's start:
    /// there is no screen to keep answering).
    pub fn take_now(&self, me: &Claimant) -> Result<(Option<RunLock>, RunLockNote), RunLockError> {
        if self.policy.is_disabled() {
            return self_disabled(me);
        }
        blocking(self.take(me))?
    }

    /// [`RunLocking::take_over`] from synchronous code on the runtime.
    pub fn take_over_now(
        &self,
        me: &Claimant,
        typed: &str,
        reason: &str,
    ) -> Result<(RunLock, RunLockNote), RunLockError> {
        blocking(self.take_over(me, typed, reason))?
    }

    /// The same, asked off the caller's task: a session on this locking never waits on
    /// the cluster, it hands [`LockJob`]s to its driver (the console's pump runs them) and
    /// is told the answer ([`LockAnswer`]). What the console uses: a cluster that does not
    /// answer must not freeze the screen.
    pub fn off_the_ui_task(mut self) -> RunLocking {
        self.off_task = true;
        self
    }

    /// Whether sessions on this locking ask the cluster off their driver's task.
    pub fn is_off_task(&self) -> bool {
        self.off_task
    }
}

fn self_disabled(me: &Claimant) -> Result<(Option<RunLock>, RunLockNote), RunLockError> {
    Ok((
        None,
        RunLockNote::Disabled {
            by: me.holder.clone(),
        },
    ))
}

/// `f` bounded by [`LOCK_CALL_TIMEOUT`]: past it, the cluster counts as unreachable.
async fn bounded<F: std::future::Future>(f: F) -> Result<F::Output, RunLockError> {
    tokio::time::timeout(LOCK_CALL_TIMEOUT, f)
        .await
        .map_err(|_| RunLockError::Unreachable {
            why: format!(
                "the cluster did not answer within {} s",
                LOCK_CALL_TIMEOUT.as_secs()
            ),
        })
}

impl RunLock {
    /// [`RunLock::release`] from synchronous code on the runtime (the run's end).
    pub fn release_now(self) -> RunLockNote {
        match blocking(bounded(self.release())).and_then(|r| r) {
            Ok(note) => note,
            Err(e) => RunLockNote::Lost {
                now_held_by: format!("unknown: {e}"),
            },
        }
    }
}

/// Run `f` to its end from synchronous code inside the multi-threaded runtime (the callers
/// bound it by [`LOCK_CALL_TIMEOUT`]). Outside a runtime (a test app with no cluster) it
/// cannot reach a cluster, and says so.
fn blocking<F: std::future::Future>(f: F) -> Result<F::Output, RunLockError> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| RunLockError::Unreachable {
        why: "no async runtime to reach the cluster from".into(),
    })?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Err(RunLockError::Unreachable {
            why: "the cluster is reached from a multi-threaded runtime only".into(),
        });
    }
    Ok(tokio::task::block_in_place(|| handle.block_on(f)))
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
/// the notes its journal still has to record, the calls on their way to the cluster, and
/// the stale lock its last start or resume was refused on (what the take-over prompt
/// shows).
#[derive(Debug, Default)]
pub struct SessionLock {
    locking: Option<std::sync::Arc<RunLocking>>,
    held: Option<RunLock>,
    notes: Vec<RunLockNote>,
    /// The stale lock the last start or resume met: its record and how long since it was
    /// renewed.
    pub stale: Option<(LockRecord, u64)>,
    /// What that stale lock stopped (what a take-over lets go on).
    stale_for: Option<LockPurpose>,
    /// The held lock's loss is journaled already (learnt while the run lived): its end
    /// journals it no second time.
    loss_noted: bool,
    /// Calls for the driver to run off its task (a console's locking only).
    jobs: Vec<LockJob>,
    /// What the call on its way to the cluster is for: a second ask waits for its answer.
    pub pending: Option<LockPurpose>,
}

/// Whether what was asked of the lock is done, or on its way (its answer comes to
/// `session::Session::lock_answered`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Done(LockPurpose),
    Pending,
}

/// Whether a run of `plan` takes the lock: one that can change systems.
pub fn needs_lock(plan: &hk_engine::runbook::plan::Plan) -> bool {
    plan.steps.iter().any(|s| s.mutates)
}

fn claimant(
    plan: &hk_engine::runbook::plan::Plan,
    now: hk_engine::runbook::machine::Timestamp,
) -> Claimant {
    // The id the journal about to be created gets (same time, runbook, environment).
    let run_id = hk_engine::journal::run_id_for(now, &plan.runbook, &plan.env);
    Claimant::this_console(&run_id, &plan.runbook, &plan.env)
}

impl SessionLock {
    pub fn new(locking: Option<std::sync::Arc<RunLocking>>) -> SessionLock {
        SessionLock {
            locking,
            ..SessionLock::default()
        }
    }

    /// Before a run of `plan` (run `tag`) starts at `now`: a mutating one takes the lock
    /// (or notes that `--no-cluster-lock` leaves it). `None`: nothing to take. Err: why
    /// the run does not start; a stale lock is kept in [`SessionLock::stale`] for the
    /// take-over prompt.
    pub fn before_start(
        &mut self,
        plan: &hk_engine::runbook::plan::Plan,
        now: hk_engine::runbook::machine::Timestamp,
        tag: super::exec::RunTag,
    ) -> Result<Option<Asked>, RunLockError> {
        if self.locking.is_none() || !needs_lock(plan) {
            return Ok(None);
        }
        self.ask(
            LockPurpose::Start { at: now },
            claimant(plan, now),
            None,
            tag,
        )
        .map(Some)
    }

    /// Before an interrupted run `run_id` of `plan` (journal `path`) resumes: a mutating
    /// one takes the lock again under its own run id (a lock this console's run still
    /// holds is re-taken; held by another run or unreachable refuses the resume; stale:
    /// the take-over prompt, whose take-over then resumes it).
    pub fn before_resume(
        &mut self,
        plan: &hk_engine::runbook::plan::Plan,
        path: &std::path::Path,
        run_id: &str,
        tag: super::exec::RunTag,
    ) -> Result<Option<Asked>, RunLockError> {
        if self.locking.is_none() || !needs_lock(plan) {
            return Ok(None);
        }
        let me = Claimant::this_console(run_id, &plan.runbook, &plan.env);
        let purpose = LockPurpose::Resume {
            path: path.to_path_buf(),
            run_id: run_id.to_string(),
        };
        self.ask(purpose, me, None, tag).map(Some)
    }

    /// Take over the stale lock the last start or resume met, with the operator's typed
    /// environment name and reason: for a start, as a run of `plan` starting at `now`;
    /// for a resume, under the resumed run's id.
    pub fn take_over(
        &mut self,
        plan: &hk_engine::runbook::plan::Plan,
        now: hk_engine::runbook::machine::Timestamp,
        typed: &str,
        reason: &str,
        tag: super::exec::RunTag,
    ) -> Result<Asked, RunLockError> {
        if self.locking.is_none() {
            return Err(RunLockError::TakeoverRefused(
                "this console takes no run lock (nothing here runs for real)".into(),
            ));
        }
        let (purpose, me) = match self.stale_for.clone() {
            Some(LockPurpose::Resume { path, run_id }) => {
                let me = Claimant::this_console(&run_id, &plan.runbook, &plan.env);
                (LockPurpose::Resume { path, run_id }, me)
            }
            _ => (LockPurpose::Start { at: now }, claimant(plan, now)),
        };
        self.ask(
            purpose,
            me,
            Some((typed.to_string(), reason.to_string())),
            tag,
        )
    }

    /// Whether the stale lock met was met by a resume.
    pub fn stale_on_resume(&self) -> bool {
        matches!(self.stale_for, Some(LockPurpose::Resume { .. }))
    }

    fn ask(
        &mut self,
        purpose: LockPurpose,
        me: Claimant,
        take_over: Option<(String, String)>,
        tag: super::exec::RunTag,
    ) -> Result<Asked, RunLockError> {
        let Some(locking) = self.locking.clone() else {
            return Ok(Asked::Done(purpose));
        };
        if self.pending.is_some() {
            return Err(RunLockError::Asking { env: me.env });
        }
        if locking.is_off_task() {
            let ask = match take_over {
                None => LockAsk::Take(locking),
                Some((typed, reason)) => LockAsk::TakeOver {
                    locking,
                    typed,
                    reason,
                },
            };
            self.pending = Some(purpose.clone());
            self.jobs.push(LockJob {
                tag,
                purpose,
                me,
                ask,
            });
            return Ok(Asked::Pending);
        }
        let taken = match take_over {
            None => locking.take_now(&me),
            Some((typed, reason)) => locking
                .take_over_now(&me, &typed, &reason)
                .map(|(l, n)| (Some(l), n)),
        };
        self.taken(purpose, taken)
    }

    fn taken(
        &mut self,
        purpose: LockPurpose,
        taken: Result<(Option<RunLock>, RunLockNote), RunLockError>,
    ) -> Result<Asked, RunLockError> {
        match taken {
            Ok((held, note)) => {
                self.stale = None;
                self.stale_for = None;
                self.held = held;
                self.notes.push(note);
                Ok(Asked::Done(purpose))
            }
            Err(mut e) => {
                let resuming = matches!(purpose, LockPurpose::Resume { .. });
                if let RunLockError::Stale {
                    record,
                    age_ms,
                    resuming: r,
                    ..
                } = &mut e
                {
                    *r = resuming;
                    self.stale = Some(((**record).clone(), *age_ms));
                    self.stale_for = Some(purpose);
                } else if !matches!(e, RunLockError::TakeoverRefused(_)) {
                    // A take-over refused keeps the prompt's facts; anything else clears them.
                    self.stale = None;
                    self.stale_for = None;
                }
                Err(e)
            }
        }
    }

    /// The cluster's answer to a job of this session's: the lock taken (what it was
    /// for: the caller goes on with it), refused (why), or released (its note joins the
    /// notes to journal; `LockPurpose::End`).
    pub fn answered(&mut self, answer: LockAnswer) -> Result<LockPurpose, RunLockError> {
        match answer.outcome {
            LockOutcome::Released(note) => {
                self.notes.push(note);
                Ok(LockPurpose::End)
            }
            LockOutcome::Taken(taken) => {
                self.pending = None;
                self.taken(answer.purpose.clone(), taken)
                    .map(|_| answer.purpose)
            }
        }
    }

    /// A lock taken for a run that is no longer this session's goes back.
    pub fn give_back(&mut self, answer: LockAnswer) {
        if let LockOutcome::Released(note) = &answer.outcome {
            // Its run's journal is closed (the run was replaced before the release
            // answered): the log keeps what it would have said.
            tracing::warn!(run_tag = answer.tag, %note, "run lock release answered after its run closed");
        }
        if let Some(job) = answer.orphan_release() {
            self.jobs.push(job);
        }
    }

    /// The calls for the driver to run off its task, oldest first.
    pub fn take_jobs(&mut self) -> Vec<LockJob> {
        std::mem::take(&mut self.jobs)
    }

    /// The notes the journal has yet to record, oldest first.
    pub fn take_notes(&mut self) -> Vec<RunLockNote> {
        std::mem::take(&mut self.notes)
    }

    /// The run (`tag`) is over: release the lock (the note says released, lost, or taken
    /// over; off the task, it comes with the release's answer).
    pub fn at_end(&mut self, tag: super::exec::RunTag) {
        let Some(l) = self.held.take() else {
            return;
        };
        if self.loss_noted {
            // Journaled when it was learnt; a lost lock is not ours to release.
            return;
        }
        if self.locking.as_ref().is_some_and(|x| x.is_off_task()) {
            let me = Claimant::this_console(&l.run_id, "", "");
            self.jobs.push(LockJob {
                tag,
                purpose: LockPurpose::End,
                me,
                ask: LockAsk::Release(l),
            });
        } else {
            let note = l.release_now();
            self.notes.push(note);
        }
    }

    /// Whether a lock is held now.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// What is wrong with the held lock now, if anything: lost (nothing more goes out in
    /// this run), lapsed (nothing goes out until a renewal succeeds), or renewals failing.
    pub fn trouble(&self) -> Option<String> {
        let held = self.held.as_ref()?;
        let standing = held.standing();
        guard::stop(&guarded(&standing)).or_else(|| held.trouble())
    }

    /// Before anything goes ahead in the run (an approval, an Execute of a mutating step):
    /// why it must not, if the held lock is lost or lapsed; and, the first time a loss is
    /// seen, its note for the journal (who took it over and why, else who holds it now).
    /// A run that holds no lock (none needed, `--no-cluster-lock`) is never stopped here.
    pub fn check(&mut self) -> LockCheck {
        let Some(held) = self.held.as_ref() else {
            return LockCheck::default();
        };
        let standing = held.standing();
        let Some(stop) = guard::stop(&guarded(&standing)) else {
            return LockCheck::default();
        };
        // The first time a loss is seen, its note for the journal: who took it over and why,
        // else who holds it now.
        let note = match standing {
            Standing::Lost { now_held_by, mark } if !self.loss_noted => Some(match mark {
                Some(m) => RunLockNote::TakenOverBy {
                    by: m.by,
                    by_run: m.by_run,
                    reason: m.reason,
                    at: m.at,
                },
                None => RunLockNote::Lost { now_held_by },
            }),
            _ => None,
        };
        if note.is_some() {
            self.loss_noted = true;
        }
        LockCheck {
            stop: Some(stop),
            note,
        }
    }
}

/// The renewer's standing as the guard's lock rule reads it.
fn guarded(standing: &Standing) -> guard::Standing {
    match standing {
        Standing::Held => guard::Standing::Held,
        Standing::Lapsed { for_s } => guard::Standing::Lapsed { for_s: *for_s },
        Standing::Lost { now_held_by, .. } => guard::Standing::Lost {
            now_held_by: now_held_by.clone(),
        },
    }
}

pub use hk_engine::guard::lock::LOST_STOPS;

/// What [`SessionLock::check`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LockCheck {
    /// Why nothing may go ahead now.
    pub stop: Option<String>,
    /// The loss, to journal now (once).
    pub note: Option<RunLockNote>,
}
