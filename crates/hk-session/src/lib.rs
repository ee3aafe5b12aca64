//! The run session: where a run is driven, with no terminal in it.
//!
//! Owns: [`RunSession`], one open run (its [`Run`], its [`Journal`], the capabilities it
//! executes with, the resume decision over an interrupted step). Every input goes through
//! [`RunSession::feed`]: journaled first, then applied, and what the machine wants done
//! comes back as [`SessionEffect`]s (ask a gate, request an execution, a line of output,
//! finished...). An append that fails halts the run for good in this process: nothing
//! more is journaled or asked, the steps in flight are sent Cancel, and the one message
//! ("the journal cannot be written: …; nothing more runs", [`RunCore::journal_broken`])
//! goes to whoever drives it. The console (`ui::app::App`) and the headless rehearsal
//! (`sim::headless`) both drive a session the same way: they answer its `AskGate`, hand
//! its `Request`s to the one executor [`pump`], and feed the replies back.
//! Also here: the executor boundary ([`exec`]) and the real executors behind it
//! ([`executors`]), the resume decision ([`resume`]), and the supervision of the
//! children when the console must go (SIGHUP, SIGTERM, a panic: [`supervise`]).
//! Future run-safety features belong here too: health gates between hosts, the cluster
//! run lock, the list-hosts prefetch.
//! Must not: know the terminal, ratatui or crossterm, keys or overlays; decide what runs
//! next (the machine in `runbook::machine` does); do blocking IO on the caller's task
//! beyond the journal's appends. The cluster run lock's calls (a run must not start or
//! resume before the lock is known to be held) go off the console's task as
//! `lock::LockJob`s its loop runs (`pump::LockPump`), the run going on when the answer
//! comes (`Session::lock_answered`); only a headless run, with no screen to keep
//! answering, waits for them in place (bounded by `lock::LOCK_CALL_TIMEOUT`).
//!
//! One file (over 800 lines): the two session types share one core whose `feed` and
//! dispatch are the journal-before-effect rule; the adapters and the lock live in sub-modules.

pub mod exec;
pub mod executors;
pub mod fault;
pub mod headless;
pub mod lock;
pub mod pump;
pub mod resume;
pub mod supervise;

/// The change record of a run (`runs list`/`runs show`), from its journal.
pub mod record;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use hk_engine::journal::{self, Journal};
use hk_engine::runbook::embedded::RunbookSet;
use hk_engine::runbook::machine::{
    Effect, Event, Input, MachineError, Mode, Outcome, Run, RunOutcome, RunStatus, StepState,
    Timestamp,
};
use hk_engine::runbook::plan::{Gate, Plan, PlannedStep, StepKind};
use hk_engine::runbook::schema::Runbook;

use exec::{
    Capabilities, ExecReply, ExecRequest, Executors, OperateExecutors, ReadOnlyExecutors, RunTag,
};
use resume::ResumeInfo;

/// What the session wants done after an input, for whoever drives it (the console shows
/// and asks; the headless rehearsal answers itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEffect {
    /// Ask the operator step `n`'s gate.
    AskGate { n: usize, gate: Gate },
    /// An answer to step `n`'s gate did not pass: why.
    GateNotPassed { n: usize, why: String },
    /// Hand this to the executors (through the [`pump`]).
    Request(Box<ExecRequest>),
    /// Step `n`'s work begins: its output starts with `header`.
    StepBegins { n: usize, header: String },
    /// A line of the run's output (a step's, or the resume probe's).
    Output(String),
    /// The run is at step `n` now.
    AtStep { n: usize },
    /// One line saying what happened, or why something did not.
    Notice(String),
    /// The run ended.
    Finished { outcome: Outcome },
    /// Interrupted step `n` changes systems: ask the resume decision.
    AskDecision { n: usize },
}

/// Run tags are unique in the process: a run's and its resume probe's replies never mix,
/// whichever session made them.
static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

pub fn next_tag() -> RunTag {
    NEXT_TAG.fetch_add(1, Ordering::Relaxed)
}

/// Why a plan could not be opened: one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotOpened(pub String);

/// Why a [`PlanSource`] could not plan: the environment's facts, or the planner's refusal.
/// The source chain stays with the error (the console shows its one line).
#[derive(Debug, thiserror::Error)]
pub enum PlanSourceError {
    #[error(transparent)]
    Env(#[from] hk_effects::context::ContextError),
    #[error(transparent)]
    Plan(#[from] hk_engine::runbook::plan::PlanError),
}

/// Plans a runbook for an environment: the model side of opening a run.
pub trait PlanSource: Send + Sync {
    fn plan(
        &self,
        runbook: &Runbook,
        env: &str,
        host: Option<&str>,
    ) -> Result<Plan, PlanSourceError>;
}

/// Plans over a loaded infra repo: its environments' facts and its inventory.
pub struct RepoPlans {
    pub repo: hk_engine::repo::Repo,
}

impl PlanSource for RepoPlans {
    fn plan(
        &self,
        runbook: &Runbook,
        env: &str,
        host: Option<&str>,
    ) -> Result<Plan, PlanSourceError> {
        hk_effects::context::plan_for(&self.repo, runbook, env, host).map_err(|e| match e {
            hk_effects::context::ContextError::Plan(p) => PlanSourceError::Plan(p),
            other => PlanSourceError::Env(other),
        })
    }
}

/// A runbook that plans, and cannot start: what stops it before step 1, each with what to
/// do (the console's run view shows them in place of the steps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub runbook: String,
    pub env: String,
    pub blockers: Vec<hk_engine::runbook::plan::Blocker>,
}

/// Plan runbook `id` for `env`, else the `current` environment when the runbook is for it,
/// else the runbook's only one. Returns the plan and the environment it is for.
pub fn open_plan(
    runbooks: &RunbookSet,
    plans: &dyn PlanSource,
    id: &str,
    env: Option<&str>,
    current: Option<&str>,
    host: Option<&str>,
) -> Result<(Plan, String), NotOpened> {
    open_plan_or_blocked(runbooks, plans, id, env, current, host).map_err(|(e, _)| e)
}

/// [`open_plan`], and when the planner refused for blockers, those too.
pub fn open_plan_or_blocked(
    runbooks: &RunbookSet,
    plans: &dyn PlanSource,
    id: &str,
    env: Option<&str>,
    current: Option<&str>,
    host: Option<&str>,
) -> Result<(Plan, String), (NotOpened, Option<Blocked>)> {
    let refused = |e: NotOpened| (e, None);
    let Some(rb) = runbooks.get(id) else {
        return Err(refused(NotOpened(format!(
            "no runbook `{id}` (have: {})",
            runbooks
                .iter()
                .map(|l| l.runbook.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))));
    };
    let env = match env {
        Some(e) => e.to_string(),
        None => match current {
            Some(c) if rb.environments.iter().any(|e| e == c) => c.to_string(),
            _ if rb.environments.len() == 1 => rb.environments[0].clone(),
            Some(c) => {
                return Err(refused(NotOpened(format!(
                    "`{id}` is not for `{c}` (it is for: {}); choose one of those environments",
                    rb.environments.join(", ")
                ))))
            }
            None => return Err(refused(NotOpened("no environment chosen".into()))),
        },
    };
    match plans.plan(rb, &env, host) {
        Ok(p) => Ok((p, env)),
        Err(PlanSourceError::Plan(hk_engine::runbook::plan::PlanError::Blocked {
            runbook,
            env,
            blockers,
        })) => Err((
            NotOpened(format!(
                "`{id}` cannot start on `{env}`: {} before step 1 (the run view lists {})",
                if blockers.len() == 1 {
                    "1 blocker".to_string()
                } else {
                    format!("{} blockers", blockers.len())
                },
                if blockers.len() == 1 { "it" } else { "them" }
            )),
            Some(Blocked {
                runbook,
                env,
                blockers,
            }),
        )),
        Err(e) => Err(refused(NotOpened(format!(
            "cannot plan `{id}` for `{env}`: {e}"
        )))),
    }
}

/// A journal opened from the run list: the session, and what to show first.
pub struct Opened {
    pub session: Session,
    pub effects: Vec<SessionEffect>,
}

/// What every open run has, whichever executors drive it: the run, its journal, and what
/// the screen reads of it (a [`RunSession`] and a [`Session`] deref to it).
#[derive(Debug)]
pub struct RunCore {
    /// The tag its requests and replies carry.
    pub tag: RunTag,
    pub run: Run,
    /// `None` for a plan not started yet, or a finished run opened to look at.
    pub journal: Option<Journal>,
    /// Opened from a journal of a finished run (or a run this session may not continue).
    pub view_only: bool,
    /// The resume decision in progress over an interrupted step that changes systems.
    pub resume: Option<ResumeInfo>,
    /// The cluster's run lock: how this run takes it, and the lock while the run lives.
    pub lock: lock::SessionLock,
    /// The run's event trail file (opened with the first event seen while it is active).
    trail: Option<hk_effects::observe::timeline::TrailWriter>,
    /// Who answers (journaled with what they decide).
    operator: String,
    /// Set once an append failed: why the journal cannot be written. Nothing more runs
    /// (every later input is refused, unjournaled), and the steps in flight were asked
    /// to stop.
    broken: Option<String>,
    /// Steps asked to stop because the journal broke whose executor has not answered yet.
    stopping: Vec<usize>,
    /// Why the driver cancels, per step, when it is not the operator (a deadline): the
    /// executor only knows it was asked, so its `Cancelled` reason is given the cause here.
    cancel_causes: std::collections::BTreeMap<usize, String>,
    /// Work the machine handed out whose `step-started` is being journaled: it becomes an
    /// executor request only with the proof that record returns (journal before effect).
    launching: std::collections::BTreeMap<(usize, u32), Launch>,
}

/// A step's work waiting for its start record.
#[derive(Debug, Clone)]
struct Launch {
    step: PlannedStep,
    authorised: Vec<String>,
}

/// One open run, and everything that drives it, on the executor set `X`: an
/// [`ObserveSession`] holds [`ReadOnlyExecutors`] and nothing else, so no request it makes
/// can reach a mutating executor; an [`OperateSession`] holds both halves.
///
/// An observe session cannot be given a mutating executor set:
///
/// ```compile_fail
/// use hk_session::exec::{MutatingExecutors, OperateExecutors};
/// use hk_session::ObserveSession;
/// # fn plan() -> hk_engine::runbook::plan::Plan { unimplemented!() }
/// let mutating = OperateExecutors::default();
/// let _ = ObserveSession::plan(plan(), mutating, "op");
/// ```
///
/// nor a mutating executor's half on its own:
///
/// ```compile_fail
/// use hk_session::exec::MutatingExecutors;
/// use hk_session::ObserveSession;
/// # fn plan() -> hk_engine::runbook::plan::Plan { unimplemented!() }
/// let _ = ObserveSession::plan(plan(), MutatingExecutors::default(), "op");
/// ```
///
/// and it has no way to its executors other than the read-only set:
///
/// ```compile_fail
/// use hk_session::exec::MutatingExecutors;
/// use hk_session::ObserveSession;
/// fn mutating_of(s: &ObserveSession) -> &MutatingExecutors {
///     &s.executors().mutating
/// }
/// ```
///
/// while the same calls with read-only executors compile:
///
/// ```no_run
/// use hk_session::exec::ReadOnlyExecutors;
/// use hk_session::ObserveSession;
/// # fn plan() -> hk_engine::runbook::plan::Plan { unimplemented!() }
/// let s = ObserveSession::plan(plan(), ReadOnlyExecutors::default(), "op");
/// let _: Option<&ReadOnlyExecutors> = s.as_ref().ok().map(|s| s.executors());
/// ```
#[derive(Debug)]
pub struct RunSession<X: Executors = OperateExecutors> {
    core: RunCore,
    exec: X,
}

/// A run in observe mode: read-only executors only.
pub type ObserveSession = RunSession<ReadOnlyExecutors>;
/// A run in operate mode: read-only and mutating executors.
pub type OperateSession = RunSession<OperateExecutors>;

impl<X: Executors> std::ops::Deref for RunSession<X> {
    type Target = RunCore;
    fn deref(&self) -> &RunCore {
        &self.core
    }
}

impl<X: Executors> std::ops::DerefMut for RunSession<X> {
    fn deref_mut(&mut self) -> &mut RunCore {
        &mut self.core
    }
}

impl RunCore {
    /// Whether this run is journaled and not over: closing it now would leave it unfinished.
    pub fn is_active(&self) -> bool {
        self.journal.is_some()
            && matches!(
                self.run.status(),
                RunStatus::Active { .. } | RunStatus::Halted { .. }
            )
    }

    /// Whether closing now leaves nothing undone: never journaled, or succeeded.
    pub fn left_clean(&self) -> bool {
        self.journal.is_none()
            || matches!(
                self.run.status(),
                RunStatus::Succeeded | RunStatus::NotStarted
            )
    }

    /// Why the journal cannot be written, once an append failed: the run is halted
    /// for good in this process (nothing more runs; resume it once the disk is fixed).
    pub fn journal_broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Whether a step asked to stop when the journal broke has not answered yet.
    pub fn still_stopping(&self) -> bool {
        !self.stopping.is_empty()
    }

    /// The gate step `n` waits on, if it waits on one.
    pub fn open_gate(&self) -> Option<(usize, Gate)> {
        self.run
            .steps()
            .find_map(|(s, r)| match (&r.state, &s.gate) {
                (StepState::AwaitingGate { .. }, Some(g)) => Some((s.n, g.clone())),
                _ => None,
            })
    }

    /// Whether step `n` still waits on its gate.
    pub fn gate_is_open(&self, n: usize) -> bool {
        self.run
            .step_record(n)
            .is_some_and(|r| matches!(r.state, StepState::AwaitingGate { .. }))
    }

    /// The step a journaled run is halted at.
    pub fn halted_step(&self) -> Option<usize> {
        self.journal.as_ref()?;
        match self.run.status() {
            RunStatus::Halted { n } => Some(*n),
            _ => None,
        }
    }

    /// Whether a step of this journaled run is running or verifying.
    pub fn has_in_flight(&self) -> bool {
        self.journal.is_some() && !self.run.in_flight().is_empty()
    }

    /// The step running with no cancel asked yet (what an interrupt would cancel).
    pub fn running_step(&self) -> Option<usize> {
        self.run.steps().find_map(|(s, r)| match r.state {
            StepState::Running {
                cancel_requested: false,
                ..
            } => Some(s.n),
            _ => None,
        })
    }
}

impl RunCore {
    /// What the Live screen's trail saw change (`events`), kept with this run while it is
    /// active: its environment's events go to the trail file beside its journal, which
    /// `runs show` reads. Err: why they could not be kept.
    pub fn record_trail(
        &mut self,
        events: &[hk_effects::observe::timeline::TrailEvent],
    ) -> Result<(), hk_effects::observe::timeline::TrailError> {
        if !self.is_active() {
            return Ok(());
        }
        let env = self.run.plan().env.clone();
        let mine: Vec<_> = events.iter().filter(|e| e.env == env).cloned().collect();
        if mine.is_empty() {
            return Ok(());
        }
        if self.trail.is_none() {
            let Some(j) = self.journal.as_ref() else {
                return Ok(());
            };
            let w = hk_effects::observe::timeline::TrailWriter::open(j.path())?;
            self.trail = Some(w);
        }
        match self.trail.as_mut() {
            Some(w) => w.append(&mine),
            None => Ok(()),
        }
    }
}

impl<X: Executors> RunSession<X> {
    fn new(run: Run, journal: Option<Journal>, view_only: bool, exec: X) -> Self {
        RunSession {
            core: RunCore {
                tag: next_tag(),
                run,
                journal,
                view_only,
                resume: None,
                lock: lock::SessionLock::default(),
                trail: None,
                operator: String::new(),
                broken: None,
                stopping: Vec::new(),
                cancel_causes: Default::default(),
                launching: Default::default(),
            },
            exec,
        }
    }

    /// A plan, not started, in the mode of its executor set (observe's machine refuses
    /// every mutating step too, a second wall behind the missing executors). Each typed
    /// session's `plan` builds it: an operate one with its lock.
    fn plan_in_mode(plan: Plan, exec: X, operator: &str) -> Result<Self, NotOpened> {
        let run = Run::with_mode(plan, X::MODE).map_err(|e| NotOpened(e.to_string()))?;
        Ok(Self::new(run, None, false, exec).by(operator))
    }

    /// A run to look at only (no journal, nothing can change it).
    pub fn view(run: Run, exec: X) -> Self {
        Self::new(run, None, true, exec)
    }

    fn by(mut self, operator: &str) -> Self {
        self.core.operator = operator.to_string();
        self
    }

    /// The executors this session's requests can reach: exactly these, by type.
    pub fn executors(&self) -> &X {
        &self.exec
    }

    /// Open the journal at `path` from the run list: a damaged one read-only up to the
    /// damage, a finished one to look at, an interrupted or failed one resumed (an
    /// observe session resumes nothing, so there it opens to look at too). Err: why
    /// nothing opened.
    pub fn open_journal(
        path: &Path,
        outcome: RunOutcome,
        exec: X,
        operator: &str,
        now: Timestamp,
        mut lock: lock::SessionLock,
    ) -> Result<(Self, Vec<SessionEffect>), NotOpened> {
        let looked_at = |session: Self, notice: String| {
            (session.by(operator), vec![SessionEffect::Notice(notice)])
        };
        if let Ok((r, Some(damage))) = journal::salvage(path) {
            return Ok(looked_at(
                Self::view(r.run, exec),
                format!(
                    "run {}: {damage}; opened read-only up to line {}; {}",
                    r.header.run_id,
                    damage.line.saturating_sub(1),
                    journal::Damage::NOT_RESUMABLE
                ),
            ));
        }
        let resumable = matches!(
            outcome,
            RunOutcome::Interrupted | RunOutcome::InProgress | RunOutcome::Failed
        );
        if !resumable {
            let r = journal::replay(path).map_err(|e| NotOpened(e.to_string()))?;
            let notice = format!("run {} ({outcome})", r.header.run_id);
            return Ok(looked_at(Self::view(r.run, exec), notice));
        }
        let r = journal::replay(path).map_err(|e| NotOpened(e.to_string()))?;
        // Resuming journals on, and what it resumes may be a mutating step: never from a
        // read-only set.
        if X::MODE == Mode::Observe {
            return Ok(looked_at(
                Self::view(r.run, exec),
                "observe mode: the run opens to look at only; resume it outside observe mode"
                    .into(),
            ));
        }
        // The journal masks secrets in the plan it keeps: a command holding a mask would run
        // the mask in the secret's place, so such a run is not resumed from its record.
        if let Some(s) = r.run.plan().steps.iter().find(|s| {
            s.command
                .iter()
                .flatten()
                .any(|a| a.contains(hk_engine::redact::MASK))
        }) {
            let notice = format!(
                "run {}: step {} `{}` holds a masked secret in its journaled command, which \
                 cannot run again from the record; opened to look at only (start the runbook \
                 again to go on)",
                r.header.run_id, s.n, s.id
            );
            return Ok(looked_at(Self::view(r.run, exec), notice));
        }
        // A resumed run changes systems again, so it holds the cluster's run lock as a
        // started one does (under its own run id: the same console re-takes its own lock),
        // or it does not resume: held by another run or unreachable, it opens to look at
        // only and says why; stale, it opens to look at with the take-over prompt's facts
        // kept (a take-over resumes it). Asked off the console's task, it opens to look at
        // until the answer comes (`lock_answered`).
        let run_id = r.header.run_id.clone();
        let tag = next_tag();
        match lock.before_resume(r.run.plan(), path, &run_id, tag) {
            Ok(None | Some(lock::Asked::Done(_))) => {}
            Ok(Some(lock::Asked::Pending)) => {
                let notice = format!(
                    "run {run_id}: taking the run lock on {} to resume it…",
                    r.run.plan().env
                );
                let (mut s, fx) = looked_at(Self::view(r.run, exec), notice);
                s.core.tag = tag;
                s.core.lock = lock;
                return Ok((s, fx));
            }
            Err(e) => {
                let notice = format!(
                    "run {run_id}: not resumed: {}; opened to look at only",
                    e.reason()
                );
                let (mut s, fx) = looked_at(Self::view(r.run, exec), notice);
                s.core.lock = lock;
                return Ok((s, fx));
            }
        }
        Self::resume_journal(path, exec, operator, now, &mut lock)
    }

    /// Resume the interrupted run journaled at `path` holding `lock` (taken, or not
    /// needed): the session that goes on with it, and what to show first. Err: the
    /// journal could not be resumed (a lock taken for it goes back).
    fn resume_journal(
        path: &Path,
        exec: X,
        operator: &str,
        now: Timestamp,
        lock: &mut lock::SessionLock,
    ) -> Result<(Self, Vec<SessionEffect>), NotOpened> {
        let (mut j, replayed, effects) = match Journal::resume(path, now) {
            Ok(x) => x,
            Err(e) => {
                lock.at_end(next_tag());
                return Err(NotOpened(format!("cannot resume: {e}")));
            }
        };
        j.mask_with(exec.redactor());
        let started_by = replayed.header.operator.clone();
        let mut session = Self::new(replayed.run, Some(j), false, exec).by(operator);
        session.core.lock = std::mem::take(lock);
        let warn: Vec<String> = replayed.warnings.iter().map(|w| w.to_string()).collect();
        let mut out = vec![SessionEffect::Notice(if warn.is_empty() {
            "resumed".into()
        } else {
            format!("resumed: {}", warn.join("; "))
        })];
        for note in session.core.lock.take_notes() {
            out.extend(session.feed(Input::RunLock { note }, now));
        }
        let next = session.dispatch(effects, &mut out);
        for input in next {
            out.extend(session.feed(input, now));
        }
        if let Some(n) = session.halted_step().filter(|n| session.needs_decision(*n)) {
            out.extend(session.begin_resume(n, Some(started_by), now));
        }
        Ok((session, out))
    }

    /// The lock is held for the interrupted run this session shows: resume it (this
    /// session becomes the resumed run's).
    fn resume_now(&mut self, path: &Path, now: Timestamp) -> Result<Vec<SessionEffect>, NotOpened> {
        let mut lock = std::mem::take(&mut self.core.lock);
        let operator = self.core.operator.clone();
        match Self::resume_journal(path, self.exec.clone(), &operator, now, &mut lock) {
            Ok((s, fx)) => {
                *self = s;
                Ok(fx)
            }
            Err(e) => {
                // What goes back (the lock taken for it) is asked from here.
                self.core.lock = lock;
                Err(e)
            }
        }
    }

    /// What the lock was asked for goes on now that it is held: the start (at the time
    /// its run id was made from), the resume, or, at the end, the release's note into
    /// the journal.
    fn go_on(
        &mut self,
        purpose: lock::LockPurpose,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        match purpose {
            lock::LockPurpose::Start { at } => self.begin(runs_dir, at),
            lock::LockPurpose::Resume { path, .. } => self.resume_now(&path, now),
            lock::LockPurpose::End => {
                let mut out = Vec::new();
                let notes = self.core.lock.take_notes();
                if self.journal.is_some() {
                    for note in notes {
                        out.extend(self.feed(Input::RunLock { note }, now));
                    }
                } else {
                    for note in notes {
                        tracing::warn!(%note, "run lock note with no journal open to keep it");
                    }
                }
                Ok(out)
            }
        }
    }

    /// The cluster's answer to a lock call this session asked off its driver's task
    /// ([`lock::LockJob`]): what was waiting on it goes on (the start, the resume, the
    /// release's note), or Err says why it does not (a stale lock keeps the take-over
    /// prompt's facts, [`Session::stale_lock`]). An answer for another run gives back
    /// what it took.
    pub fn lock_answered(
        &mut self,
        answer: lock::LockAnswer,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        if answer.tag != self.tag {
            self.core.lock.give_back(answer);
            return Ok(Vec::new());
        }
        let resume_of = match &answer.purpose {
            lock::LockPurpose::Resume { run_id, .. } => Some(run_id.clone()),
            _ => None,
        };
        match self.core.lock.answered(answer) {
            Ok(purpose) => self.go_on(purpose, runs_dir, now),
            Err(e) => Err(NotOpened(match resume_of {
                Some(id) => format!(
                    "run {id}: not resumed: {}; opened to look at only",
                    e.reason()
                ),
                None => e.to_string(),
            })),
        }
    }

    /// The journal under `runs_dir`, then the machine's `Start`: what both sessions'
    /// `start` do once they have decided the run may begin.
    fn begin(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        if self.view_only || !matches!(self.run.status(), RunStatus::NotStarted) {
            return Err(NotOpened("this run has already started".into()));
        }
        let Some(dir) = runs_dir else {
            return Err(NotOpened("cannot start: no run journal directory".into()));
        };
        let plan = self.run.plan().clone();
        let (j, run) = match Journal::begin_masked(
            dir,
            plan,
            self.run.mode(),
            &self.operator,
            now,
            self.exec.redactor(),
        ) {
            Ok(x) => x,
            Err(e) => {
                // Not started: a lock taken for it goes back.
                self.core.lock.at_end(self.core.tag);
                self.core.lock.take_notes();
                return Err(NotOpened(format!("cannot start: no journal: {e}")));
            }
        };
        self.journal = Some(j);
        self.run = run;
        let mut out = vec![SessionEffect::Notice("run started".into())];
        // What the lock did for this run comes first in its journal.
        for note in self.core.lock.take_notes() {
            out.extend(self.feed(Input::RunLock { note }, now));
        }
        out.extend(self.feed(Input::Start, now));
        Ok(out)
    }

    /// Journal `input` and apply it; then turn the machine's effects into session effects
    /// (which may journal more: a step with no executor finishes at once, unstarted).
    /// An operator's go-ahead (an approval, a typed answer, a retry, a resume decision, a
    /// skip) is refused while the run's lock is lost or lapsed: nothing is journaled but
    /// the loss, and the notice says why.
    pub fn feed(&mut self, input: Input, now: Timestamp) -> Vec<SessionEffect> {
        if goes_ahead(&input) {
            if let Some(refused) = self.lock_refuses(&input, now) {
                return refused;
            }
        }
        self.feed_unchecked(input, now)
    }

    /// The run lock's standing before `input` goes ahead: a loss learnt now is journaled at
    /// once; Some: the effects saying why `input` was refused.
    fn lock_refuses(&mut self, input: &Input, now: Timestamp) -> Option<Vec<SessionEffect>> {
        let check = self.core.lock.check();
        let why = check.stop?;
        let mut out = Vec::new();
        if let Some(note) = check.note {
            out.extend(self.feed_unchecked(Input::RunLock { note }, now));
        }
        out.push(SessionEffect::Notice(format!(
            "refused ({}): {why}",
            input.name()
        )));
        Some(out)
    }

    /// Each tick: a loss of the run's lock is journaled when it is learnt, not at the run's
    /// end (the banner says it from the same look).
    pub fn lock_tick(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        if self.core.journal.is_none() {
            return Vec::new();
        }
        match self.core.lock.check().note {
            Some(note) => {
                let said = note.to_string();
                let mut out = self.feed_unchecked(Input::RunLock { note }, now);
                out.push(SessionEffect::Notice(format!(
                    "{said} · {}",
                    lock::LOST_STOPS
                )));
                out
            }
            None => Vec::new(),
        }
    }

    fn feed_unchecked(&mut self, input: Input, now: Timestamp) -> Vec<SessionEffect> {
        let mut out = Vec::new();
        if let Some(why) = self.broken.as_deref() {
            tracing::error!(input = ?input, "not journaled: {why}");
            out.push(SessionEffect::Notice(why.to_string()));
            return out;
        }
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let Some(j) = self.core.journal.as_mut() else {
                out.push(SessionEffect::Notice(
                    "this run is not open for changes".into(),
                ));
                return out;
            };
            tracing::info!(run = %j.path().display(), input = ?input, "journal");
            // A step's start is recorded through the one call that hands back the proof
            // its executor needs: the request below exists only once the line is on disk.
            let recorded = match &input {
                Input::StepStarted { n, attempt }
                    if self.core.launching.contains_key(&(*n, *attempt)) =>
                {
                    j.record_start(&mut self.core.run, now, *n, *attempt)
                        .map(|(fx, start)| (fx, Some(start)))
                }
                _ => j
                    .record(&mut self.core.run, Event::new(now, input.clone()))
                    .map(|fx| (fx, None)),
            };
            match recorded {
                Ok((effects, start)) => {
                    if let RunStatus::Active { n } | RunStatus::Halted { n } = self.run.status() {
                        out.push(SessionEffect::AtStep { n: *n });
                    }
                    if let Some(start) = start {
                        self.launch(start, &mut out);
                    }
                    queue.extend(self.dispatch(effects, &mut out));
                }
                Err(e @ journal::JournalError::Machine(_)) => {
                    tracing::warn!(error = %e, "event refused");
                    if let Input::StepStarted { n, attempt } = &input {
                        self.core.launching.remove(&(*n, *attempt));
                    }
                    out.push(SessionEffect::Notice(format!("not recorded: {e}")));
                    return out;
                }
                Err(e) => {
                    self.journal_failed(&e, &input, now, &mut out);
                    return out;
                }
            }
        }
        out
    }

    /// An append failed: the run halts here. Work not yet handed out is dropped, the
    /// steps in flight are asked to stop (the executors' cancel ladder), the halt is
    /// journaled if the journal still takes a line, and the one message says why in the
    /// log and to whoever drives the session.
    fn journal_failed(
        &mut self,
        e: &journal::JournalError,
        failed: &Input,
        now: Timestamp,
        out: &mut Vec<SessionEffect>,
    ) {
        let why = format!("the journal cannot be written: {e}; nothing more runs");
        tracing::error!(input = ?failed, "{why}");
        self.core.broken = Some(why.clone());
        // Work whose start was not recorded never leaves: there is no proof to send it with.
        self.core.launching.clear();
        // Requests made by this feed would start (or verify) work nothing can record.
        out.retain(|fx| {
            !matches!(fx, SessionEffect::Request(r)
                if matches!(**r, ExecRequest::Execute { .. } | ExecRequest::Verify { .. }))
        });
        // The executor's own last word for a step (its work ended) needs no stop.
        let ended = match failed {
            Input::StepFinished { n, .. }
            | Input::Cancelled { n, .. }
            | Input::VerifyResult { n, .. }
            | Input::HostSetObserved { n, .. } => Some(*n),
            _ => None,
        };
        let in_flight: Vec<(usize, u32)> = self
            .run
            .in_flight()
            .into_iter()
            .filter(|n| Some(*n) != ended)
            .filter_map(|n| self.run.step_record(n).map(|r| (n, r.attempt)))
            .collect();
        // Journaled where the journal still takes a line (a transient failure, a small
        // line into the last bytes): the run reads as abandoned, resumable, not running.
        if let Some(j) = self.core.journal.as_mut() {
            let abandoned = Event::new(
                now,
                Input::Abandoned {
                    reason: why.clone(),
                },
            );
            if let Err(e2) = j.record(&mut self.core.run, abandoned) {
                tracing::error!(error = %e2, "the halt could not be journaled either");
            }
        }
        let tag = self.tag;
        for (n, attempt) in in_flight {
            if let Some(step) = step_of(&self.run, n) {
                out.push(SessionEffect::Request(Box::new(ExecRequest::Cancel {
                    tag,
                    step,
                    attempt,
                })));
                self.core.stopping.push(n);
            }
        }
        out.push(SessionEffect::Notice(why));
    }

    /// While the operator reads a gate of host N, the next host's list-hosts may already
    /// run: each host still gets its own, and its step uses the answer only if the
    /// inventory and playbook are unchanged when it starts (`exec::ansible_prefetch`).
    fn prefetch_next_host(&self, n: usize) {
        let steps = &self.run.plan().steps;
        let Some(host) = steps
            .iter()
            .find(|s| s.n == n)
            .and_then(|s| s.host.as_deref())
        else {
            return;
        };
        let next = steps.iter().filter(|s| s.n > n).find(|s| {
            s.kind == StepKind::ListHosts && s.host.as_deref().is_some_and(|h| h != host)
        });
        if let Some(next) = next {
            if let Ok(e) = self.exec.executor_for(next) {
                if e.prefetch(next) {
                    tracing::info!(step = next.n, host = ?next.host, "list-hosts started ahead");
                }
            }
        }
    }

    /// Step work whose `step-started` is now on disk leaves for its executor, with the
    /// proof of that record.
    fn launch(&mut self, start: journal::StartRecorded, out: &mut Vec<SessionEffect>) {
        let Some(l) = self.core.launching.remove(&(start.n(), start.attempt())) else {
            return;
        };
        // The header a reopened run shows its output under too (one format).
        out.push(SessionEffect::StepBegins {
            n: l.step.n,
            header: crate::record::step_header(&l.step),
        });
        out.push(SessionEffect::Request(Box::new(ExecRequest::Execute {
            tag: self.tag,
            attempt: start.attempt(),
            authorised: l.authorised,
            env: self.run.plan().env.clone(),
            step: l.step,
            start,
        })));
    }

    /// The machine's effects as session effects; returns the inputs to journal next.
    fn dispatch(&mut self, effects: Vec<Effect>, out: &mut Vec<SessionEffect>) -> Vec<Input> {
        let mut next = Vec::new();
        let tag = self.tag;
        for fx in effects {
            match fx {
                Effect::AskGate { n, gate } => {
                    self.prefetch_next_host(n);
                    out.push(SessionEffect::AskGate { n, gate })
                }
                Effect::GateNotPassed { n, why } => {
                    out.push(SessionEffect::GateNotPassed { n, why })
                }
                Effect::Execute(e) => {
                    let Some(step) = step_of(&self.run, e.n()) else {
                        continue;
                    };
                    // A mutating step's work never leaves while the run's lock is lost or
                    // lapsed: another console may be changing the same environment. It
                    // ends unstarted (its re-run is the resume decision's, typed).
                    if e.mutates() {
                        let check = self.core.lock.check();
                        if let Some(why) = check.stop {
                            if let Some(note) = check.note {
                                next.push(Input::RunLock { note });
                            }
                            out.push(SessionEffect::Notice(format!(
                                "step {} not started: {why}",
                                step.n
                            )));
                            next.push(Input::StepFinished {
                                n: step.n,
                                attempt: e.attempt(),
                                exit_code: None,
                                error: Some(format!("{why}; the step was not started")),
                            });
                            continue;
                        }
                    }
                    match self.exec.executor_for(&step) {
                        Ok(_) => {
                            // Journal before effect: the start is recorded first; the
                            // request leaves with that record's proof (`launch`).
                            self.core.launching.insert(
                                (step.n, e.attempt()),
                                Launch {
                                    step: step.clone(),
                                    authorised: e.authorised().to_vec(),
                                },
                            );
                            next.push(Input::StepStarted {
                                n: step.n,
                                attempt: e.attempt(),
                            });
                        }
                        Err(why) => {
                            out.push(SessionEffect::Notice(format!(
                                "step {} cannot be started: {why}",
                                step.n
                            )));
                            next.push(Input::StepFinished {
                                n: step.n,
                                attempt: e.attempt(),
                                exit_code: None,
                                error: Some(format!("{why}; the step was not started")),
                            });
                        }
                    }
                }
                Effect::Verify { n, attempt } => {
                    if let Some(step) = step_of(&self.run, n) {
                        out.push(SessionEffect::Request(Box::new(ExecRequest::Verify {
                            tag,
                            step,
                            attempt,
                        })));
                    }
                }
                Effect::Cancel { n, attempt } => {
                    if let Some(step) = step_of(&self.run, n) {
                        out.push(SessionEffect::Request(Box::new(ExecRequest::Cancel {
                            tag,
                            step,
                            attempt,
                        })));
                        out.push(SessionEffect::Notice(format!("cancelling step {n}…")));
                    }
                }
                Effect::RunFinished { outcome } => {
                    out.push(SessionEffect::Notice(match &outcome {
                        Outcome::Succeeded => format!("run {}", self.run.outcome()),
                        other => format!("run {other}"),
                    }));
                    // Over for good (not halted at a step a retry can continue): its
                    // lock goes back, and the journal says how.
                    let over = matches!(outcome, Outcome::Succeeded | Outcome::Aborted { .. });
                    out.push(SessionEffect::Finished { outcome });
                    if over {
                        self.core.lock.at_end(tag);
                    }
                    next.extend(
                        self.core
                            .lock
                            .take_notes()
                            .into_iter()
                            .map(|note| Input::RunLock { note }),
                    );
                }
            }
        }
        next
    }

    /// A reply from the executors. Replies of another run are stale and change nothing.
    pub fn handle_reply(&mut self, reply: ExecReply, now: Timestamp) -> Vec<SessionEffect> {
        match reply {
            ExecReply::Output {
                tag,
                n,
                attempt,
                line,
            } if tag == self.tag => {
                let mut out = Vec::new();
                // The output log beside the journal keeps every line, past any screen's bound.
                if let Some(j) = self.journal.as_mut() {
                    if let Err(e) = j.append_output(n, attempt, now, &line) {
                        tracing::error!(error = %e, "output log");
                        out.push(SessionEffect::Notice(format!("⚠ output not kept: {e}")));
                    }
                }
                out.insert(0, SessionEffect::Output(line));
                out
            }
            ExecReply::Outcome { tag, input } if tag == self.tag && self.broken.is_some() => {
                // Nothing is journaled any more: only whether a step asked to stop has.
                if let Input::StepFinished { n, .. } | Input::Cancelled { n, .. } = &input {
                    self.core.stopping.retain(|s| s != n);
                }
                tracing::error!(input = ?input, "executor outcome not journaled: the journal is broken");
                Vec::new()
            }
            ExecReply::Outcome {
                input: Input::StepStarted { n, attempt },
                ..
            } => {
                // Only the session records a start, before the work leaves; an executor
                // saying so is out of turn and changes nothing.
                tracing::warn!(n, attempt, "a step-started from an executor: ignored");
                Vec::new()
            }
            ExecReply::Outcome { tag, input } if tag == self.tag => {
                let input = match input {
                    Input::Cancelled { n, attempt, reason } => {
                        let reason = match self.core.cancel_causes.remove(&n) {
                            Some(cause) if reason.contains("at the operator's request") => {
                                reason.replace("at the operator's request", &format!("as {cause}"))
                            }
                            Some(cause) => format!("{reason} (as {cause})"),
                            None => reason,
                        };
                        Input::Cancelled { n, attempt, reason }
                    }
                    other => {
                        // A step that ended on its own leaves no cause for a later cancel.
                        if let Input::StepFinished { n, .. } = &other {
                            self.core.cancel_causes.remove(n);
                        }
                        other
                    }
                };
                self.feed(input, now)
            }
            ExecReply::Output { tag, line, .. } if self.probe_tag() == Some(tag) => {
                vec![SessionEffect::Output(format!("probe │ {line}"))]
            }
            ExecReply::Outcome { tag, input } if self.probe_tag() == Some(tag) => {
                self.probe_reply(input, now)
            }
            _ => Vec::new(),
        }
    }

    /// Going away with work in flight: journal a cancel request for every running step
    /// (the executors stop their processes and answer Cancelled, journaled too).
    pub fn cancel_in_flight(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        let by = self.operator.clone();
        self.cancel_in_flight_by(by, None, now)
    }

    /// [`RunSession::cancel_in_flight`] for a cause that is not the operator (a driver's
    /// deadline): the cancel is journaled as asked by hk-console for `cause`, and each
    /// step's `Cancelled` names it instead of the operator.
    pub fn cancel_in_flight_because(&mut self, cause: &str, now: Timestamp) -> Vec<SessionEffect> {
        self.cancel_in_flight_by(format!("hk-console ({cause})"), Some(cause), now)
    }

    fn cancel_in_flight_by(
        &mut self,
        by: String,
        cause: Option<&str>,
        now: Timestamp,
    ) -> Vec<SessionEffect> {
        let running: Vec<usize> = if self.journal.is_some() {
            self.run
                .steps()
                .filter(|(_, r)| {
                    matches!(
                        r.state,
                        StepState::Running {
                            cancel_requested: false,
                            ..
                        }
                    )
                })
                .map(|(s, _)| s.n)
                .collect()
        } else {
            Vec::new()
        };
        let mut out = Vec::new();
        for n in running {
            if let Some(cause) = cause {
                self.core.cancel_causes.insert(n, cause.to_string());
            }
            out.extend(self.feed(Input::CancelRequested { n, by: by.clone() }, now));
        }
        out
    }
}

impl OperateSession {
    /// A plan, not started, that will take the cluster's run lock through `locking` when it
    /// starts (`None`: nothing to lock, a dry run or the sample; `--no-cluster-lock` is a
    /// [`lock::RunLocking`] that journals going without). Given here, at construction, so no
    /// driver (Home's `:run`, the `run` command's start screen, headless) can open an
    /// operate session and forget to give it the console's locking before it starts.
    pub fn plan(
        plan: Plan,
        exec: OperateExecutors,
        operator: &str,
        locking: Option<std::sync::Arc<lock::RunLocking>>,
    ) -> Result<Self, NotOpened> {
        let mut s = Self::plan_in_mode(plan, exec, operator)?;
        s.core.lock = lock::SessionLock::new(locking);
        Ok(s)
    }

    /// What an open plan can do (the console words it, with its own keys).
    pub fn can_start(&self) -> CanStart {
        CanStart::Yes
    }

    /// Start the plan. The one path by which a mutating run begins. Asked off the
    /// console's task, the lock's answer starts it (`lock_answered`): until then this
    /// says it is being taken.
    pub fn start(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        match self.before_mutating_run(runs_dir, now)? {
            Some(lock::Asked::Pending) => Ok(vec![SessionEffect::Notice(format!(
                "taking the run lock on {}…",
                self.run.plan().env
            ))]),
            _ => self.begin(runs_dir, now),
        }
    }

    /// Runs before a mutating run starts, after the operator asked for it and before
    /// anything is journaled or executed; Err refuses the start with the reason shown.
    /// The cluster run lock (one mutating run per environment) is taken here
    /// (`lock::SessionLock::before_start`): held, stale (the take-over prompt, see
    /// [`OperateSession::take_over_and_start`]) or unreachable, the run does not start.
    fn before_mutating_run(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Option<lock::Asked>, NotOpened> {
        // What `begin` would refuse anyway is refused before the cluster is asked.
        if self.view_only
            || !matches!(self.run.status(), RunStatus::NotStarted)
            || runs_dir.is_none()
        {
            return Ok(None);
        }
        let plan = self.run.plan().clone();
        let tag = self.tag;
        self.core
            .lock
            .before_start(&plan, now, tag)
            .map_err(|e| NotOpened(e.to_string()))
    }

    /// Take over the stale run lock the last start (or resume) was refused on (the
    /// environment's name typed and a reason, journaled first in this run and marked on
    /// the Lease for the other), then start (or resume).
    pub fn take_over_and_start(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
        typed: &str,
        reason: &str,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        let resuming = self.core.lock.stale_on_resume();
        if !resuming && (self.view_only || !matches!(self.run.status(), RunStatus::NotStarted)) {
            return Err(NotOpened("this run has already started".into()));
        }
        let plan = self.run.plan().clone();
        let tag = self.tag;
        let asked = self
            .core
            .lock
            .take_over(&plan, now, typed, reason, tag)
            .map_err(|e| NotOpened(e.to_string()))?;
        match asked {
            lock::Asked::Pending => Ok(vec![SessionEffect::Notice(format!(
                "taking over the run lock on {}…",
                plan.env
            ))]),
            lock::Asked::Done(purpose) => self.go_on(purpose, runs_dir, now),
        }
    }

    /// The same plan on read-only executors: a plan not started reopens read-only, a run
    /// already going opens to look at only. The mutating half is dropped with `self`.
    pub fn into_observe(self, read_only: ReadOnlyExecutors) -> Result<ObserveSession, NotOpened> {
        let operator = self.core.operator.clone();
        if matches!(self.run.status(), RunStatus::NotStarted) {
            ObserveSession::plan(self.core.run.plan().clone(), read_only, &operator)
        } else {
            Ok(ObserveSession::view(self.core.run, read_only).by(&operator))
        }
    }
}

impl ObserveSession {
    /// A plan, not started, on the read-only executors (observe starts nothing mutating,
    /// so it takes no lock).
    pub fn plan(plan: Plan, exec: ReadOnlyExecutors, operator: &str) -> Result<Self, NotOpened> {
        Self::plan_in_mode(plan, exec, operator)
    }

    /// What an open plan can do in observe mode: start, when every step only looks.
    pub fn can_start(&self) -> CanStart {
        match (self.first_mutating_step(), self.first_unverified_step()) {
            (None, None) => CanStart::ObserveAllLook,
            _ => CanStart::ObserveLookOnly,
        }
    }

    /// The first step of the plan that changes systems, as the planner derived it: an
    /// ansible step without `check: true`, a `--check` preview whose playbook runs tasks
    /// for real under --check (`check_mode: false` on a module that can write), an ssh or manual step not declared
    /// `mutates: false`, a flux-reconcile, every policy step the planner adds in front of
    /// one. A runbook's own `read_only: true` is never asked.
    pub fn first_mutating_step(&self) -> Option<&PlannedStep> {
        self.run.plan().steps.iter().find(|s| s.mutates)
    }

    /// The first step read-only only by a user runbook's word (`mutates: false` on an ssh
    /// step of a `--runbooks` file): nothing verifies what its command does.
    pub fn first_unverified_step(&self) -> Option<&PlannedStep> {
        self.run
            .plan()
            .steps
            .iter()
            .find(|s| s.declared_read_only.is_some())
    }

    /// Start the plan if every step only looks, on the read-only executors this session
    /// holds (journaled in observe mode); else refuse, naming the first step that would
    /// change something.
    pub fn start(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        if let Some(s) = self.first_mutating_step() {
            // A `--check` preview mutates when tasks in its playbook run for real under
            // --check: the refusal names them (the planner derived them from the playbook).
            let real = s
                .blast_radius
                .as_ref()
                .map(|b| b.runs_for_real.as_slice())
                .unwrap_or_default();
            if !real.is_empty() {
                let tasks: Vec<String> = real.iter().map(|t| t.line()).collect();
                return Err(NotOpened(format!(
                    "observe mode: step {} `{}` ({}) runs tasks for real under --check, \
                     whatever the runbook says: {}; runbooks with a mutating step open as \
                     plans only",
                    s.n,
                    s.id,
                    s.kind.as_str(),
                    tasks.join("; ")
                )));
            }
            return Err(NotOpened(format!(
                "observe mode: step {} `{}` ({}) changes systems; runbooks with a \
                 mutating step open as plans only",
                s.n,
                s.id,
                s.kind.as_str()
            )));
        }
        // Observe's promise is that nothing here changes the platform: a command only a
        // user's `mutates: false` calls read-only is not run on that word.
        if let Some(s) = self.first_unverified_step() {
            return Err(NotOpened(format!(
                "observe mode: step {} `{}` ({}) is declared read-only by {}, not verified; \
                 observe runs only steps hk-console can tell only look",
                s.n,
                s.id,
                s.kind.as_str(),
                s.declared_read_only.as_deref().unwrap_or_default()
            )));
        }
        self.begin(runs_dir, now)
    }
}

/// The session a console holds: observe's or operate's, chosen once from the console's
/// [`Capabilities`] when the run opens. Everything a driver asks goes to the typed session
/// inside; nothing here looks at the mode to decide what is safe.
#[derive(Debug)]
pub enum Session {
    Operate(OperateSession),
    Observe(ObserveSession),
}

/// Call the same method on whichever typed session this is.
macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            Session::Operate($s) => $e,
            Session::Observe($s) => $e,
        }
    };
}

impl std::ops::Deref for Session {
    type Target = RunCore;
    fn deref(&self) -> &RunCore {
        each!(self, s => &s.core)
    }
}

impl Session {
    /// A plan, not started, on the executors `caps` has: observe's get the read-only set
    /// only (it is all that value holds); operate's take the run lock through `locking`
    /// (the console's, as it was built: [`OperateSession::plan`]).
    pub fn plan(
        plan: Plan,
        caps: &Capabilities,
        operator: &str,
        locking: Option<std::sync::Arc<lock::RunLocking>>,
    ) -> Result<Session, NotOpened> {
        Ok(match caps {
            Capabilities::Observe { read_only } => {
                Session::Observe(ObserveSession::plan(plan, read_only.clone(), operator)?)
            }
            Capabilities::Operate {
                read_only,
                mutating,
            } => Session::Operate(OperateSession::plan(
                plan,
                OperateExecutors {
                    read_only: read_only.clone(),
                    mutating: mutating.clone(),
                },
                operator,
                locking,
            )?),
        })
    }

    /// [`RunSession::open_journal`] on the executors `caps` has.
    pub fn open_journal(
        path: &Path,
        outcome: RunOutcome,
        caps: &Capabilities,
        operator: &str,
        now: Timestamp,
        locking: Option<std::sync::Arc<lock::RunLocking>>,
    ) -> Result<Opened, NotOpened> {
        let (session, effects) = match caps {
            Capabilities::Observe { read_only } => {
                // Observe resumes nothing, so it takes no lock.
                let (s, fx) = RunSession::open_journal(
                    path,
                    outcome,
                    read_only.clone(),
                    operator,
                    now,
                    lock::SessionLock::new(None),
                )?;
                (Session::Observe(s), fx)
            }
            Capabilities::Operate {
                read_only,
                mutating,
            } => {
                let exec = OperateExecutors {
                    read_only: read_only.clone(),
                    mutating: mutating.clone(),
                };
                let (s, fx) = RunSession::open_journal(
                    path,
                    outcome,
                    exec,
                    operator,
                    now,
                    lock::SessionLock::new(locking),
                )?;
                (Session::Operate(s), fx)
            }
        };
        Ok(Opened { session, effects })
    }

    /// The same run on `read_only` executors (operate's mutating half dropped).
    pub fn into_observe(self, read_only: ReadOnlyExecutors) -> Result<Session, NotOpened> {
        match self {
            Session::Operate(s) => Ok(Session::Observe(s.into_observe(read_only)?)),
            Session::Observe(s) => Ok(Session::Observe(s)),
        }
    }

    pub fn can_start(&self) -> CanStart {
        each!(self, s => s.can_start())
    }

    /// [`RunSession::lock_answered`] (observe asks nothing: what an answer took goes back).
    pub fn lock_answered(
        &mut self,
        answer: lock::LockAnswer,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        match self {
            Session::Operate(s) => s.lock_answered(answer, runs_dir, now),
            Session::Observe(s) => {
                s.core.lock.give_back(answer);
                Ok(Vec::new())
            }
        }
    }

    /// [`RunCore::record_trail`].
    pub fn record_trail(
        &mut self,
        events: &[hk_effects::observe::timeline::TrailEvent],
    ) -> Result<(), hk_effects::observe::timeline::TrailError> {
        each!(self, s => s.core.record_trail(events))
    }

    /// The lock calls for the driver to run off its task ([`pump::LockPump::run`]).
    pub fn take_lock_jobs(&mut self) -> Vec<lock::LockJob> {
        each!(self, s => s.core.lock.take_jobs())
    }

    /// The stale lock the last start was refused on, and how long since it was renewed.
    pub fn stale_lock(&self) -> Option<&(hk_effects::cluster::lock::LockRecord, u64)> {
        self.lock.stale.as_ref()
    }

    /// [`OperateSession::take_over_and_start`]; observe takes nothing over.
    pub fn take_over_and_start(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
        typed: &str,
        reason: &str,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        match self {
            Session::Operate(s) => s.take_over_and_start(runs_dir, now, typed, reason),
            Session::Observe(_) => Err(NotOpened(
                "observe mode starts no take-over: nothing here changes the platform".into(),
            )),
        }
    }

    pub fn start(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        each!(self, s => s.start(runs_dir, now))
    }

    pub fn feed(&mut self, input: Input, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.feed(input, now))
    }

    pub fn handle_reply(&mut self, reply: ExecReply, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.handle_reply(reply, now))
    }

    pub fn cancel_in_flight(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.cancel_in_flight(now))
    }

    pub fn cancel_in_flight_because(&mut self, cause: &str, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.cancel_in_flight_because(cause, now))
    }

    pub fn needs_decision(&self, n: usize) -> bool {
        each!(self, s => s.needs_decision(n))
    }

    pub fn open_resume(&mut self, n: usize, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.open_resume(n, now))
    }

    pub fn resume_tick(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.resume_tick(now))
    }

    pub fn lock_tick(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        each!(self, s => s.lock_tick(now))
    }

    pub fn wait_for_process(&mut self) -> Vec<SessionEffect> {
        each!(self, s => s.wait_for_process())
    }

    pub fn stop_resumed_process(&mut self) -> Vec<SessionEffect> {
        each!(self, s => s.stop_resumed_process())
    }

    pub fn decide(
        &mut self,
        input: Input,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, MachineError> {
        each!(self, s => s.decide(input, now))
    }
}

/// What an open plan can do, for the console to say in its own words and keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanStart {
    /// The plan can start.
    Yes,
    /// Observe mode, and every step only looks: it can start.
    ObserveAllLook,
    /// Observe mode, and a step changes systems: the plan opens to look at only.
    ObserveLookOnly,
}

use hk_engine::guard::lock::goes_ahead;

pub(crate) fn step_of(run: &Run, n: usize) -> Option<PlannedStep> {
    run.plan().steps.iter().find(|s| s.n == n).cloned()
}
