//! The run session: where a run is driven, with no terminal in it.
//!
//! Owns: [`RunSession`], one open run (its [`Run`], its [`Journal`], the capabilities it
//! executes with, the resume decision over an interrupted step). Every input goes through
//! [`RunSession::feed`]: journaled first, then applied, and what the machine wants done
//! comes back as [`SessionEffect`]s (ask a gate, request an execution, a line of output,
//! finished...). The console (`ui::app::App`) and the headless rehearsal
//! (`sim::headless`) both drive a session the same way: they answer its `AskGate`, hand
//! its `Request`s to the one executor [`pump`], and feed the replies back.
//! Also here: the executor boundary ([`exec`]) and the real executors behind it
//! ([`executors`]), the resume decision ([`resume`]), and the supervision of the
//! children when the console must go (SIGHUP, SIGTERM, a panic: [`supervise`]).
//! Future run-safety features belong here too: health gates between hosts, the cluster
//! run lock, the list-hosts prefetch.
//! Must not: know the terminal, ratatui or crossterm, keys or overlays; decide what runs
//! next (the machine in `runbook::machine` does); do blocking IO on the caller's task
//! beyond the journal's appends.

pub mod exec;
pub mod executors;
pub mod lock;
pub mod pump;
pub mod resume;
pub mod supervise;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::journal::{self, Journal};
use crate::runbook::embedded::RunbookSet;
use crate::runbook::machine::{
    Effect, Event, Input, Outcome, Run, RunOutcome, RunStatus, StepState, Timestamp,
};
use crate::runbook::plan::{Gate, Plan, PlannedStep};
use crate::runbook::schema::Runbook;

use exec::{Capabilities, ExecReply, ExecRequest, RunTag};
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

/// Plans a runbook for an environment: the model side of opening a run.
pub trait PlanSource: Send + Sync {
    fn plan(&self, runbook: &Runbook, env: &str, host: Option<&str>) -> Result<Plan, String>;
}

/// Plans over a loaded infra repo: its environments' facts and its inventory.
pub struct RepoPlans {
    pub repo: crate::repo::Repo,
}

impl PlanSource for RepoPlans {
    fn plan(&self, runbook: &Runbook, env: &str, host: Option<&str>) -> Result<Plan, String> {
        let penv = crate::context::plan_env(&self.repo, env, host).map_err(|e| e.to_string())?;
        crate::runbook::plan::plan(runbook, &penv, &self.repo).map_err(|e| e.to_string())
    }
}

/// Plan runbook `id` for `env`, else the `current` environment when the runbook is for it,
/// else the runbook's only one. Returns the plan and the environment it is for.
pub fn plan_runbook(
    runbooks: &RunbookSet,
    plans: &dyn PlanSource,
    id: &str,
    env: Option<&str>,
    current: Option<&str>,
    host: Option<&str>,
) -> Result<(Plan, String), NotOpened> {
    let Some(rb) = runbooks.get(id) else {
        return Err(NotOpened(format!(
            "no runbook `{id}` (have: {})",
            runbooks
                .iter()
                .map(|l| l.runbook.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let env = match env {
        Some(e) => e.to_string(),
        None => match current {
            Some(c) if rb.environments.iter().any(|e| e == c) => c.to_string(),
            _ if rb.environments.len() == 1 => rb.environments[0].clone(),
            Some(c) => {
                return Err(NotOpened(format!(
                    "`{id}` is not for `{c}` (it is for: {}); pick one with :env or e",
                    rb.environments.join(", ")
                )))
            }
            None => return Err(NotOpened("no environment chosen".into())),
        },
    };
    match plans.plan(rb, &env, host) {
        Ok(p) => Ok((p, env)),
        Err(e) => Err(NotOpened(format!("cannot plan `{id}` for `{env}`: {e}"))),
    }
}

/// A journal opened from the run list: the session, and what to show first.
pub struct Opened {
    pub session: RunSession,
    pub effects: Vec<SessionEffect>,
}

/// One open run, and everything that drives it.
#[derive(Debug)]
pub struct RunSession {
    /// The tag its requests and replies carry.
    pub tag: RunTag,
    pub run: Run,
    /// `None` for a plan not started yet, or a finished run opened to look at.
    pub journal: Option<Journal>,
    /// Opened from a journal of a finished run (or a run this session may not continue).
    pub view_only: bool,
    /// The resume decision in progress over an interrupted step that changes systems.
    pub resume: Option<ResumeInfo>,
    caps: Arc<Capabilities>,
    /// Who answers (journaled with what they decide).
    operator: String,
}

impl RunSession {
    fn new(run: Run, journal: Option<Journal>, view_only: bool, caps: Arc<Capabilities>) -> Self {
        RunSession {
            tag: next_tag(),
            run,
            journal,
            view_only,
            resume: None,
            caps,
            operator: String::new(),
        }
    }

    /// A plan, not started: read-only when the capabilities are observe's (the machine
    /// then refuses every mutating step too).
    pub fn plan(
        plan: Plan,
        caps: Arc<Capabilities>,
        operator: &str,
    ) -> Result<RunSession, NotOpened> {
        let run = match caps.as_ref() {
            Capabilities::Observe { .. } => Run::new_read_only(plan),
            Capabilities::Operate { .. } => Run::new(plan),
        }
        .map_err(|e| NotOpened(e.to_string()))?;
        Ok(Self::new(run, None, false, caps).by(operator))
    }

    /// What to say once a plan is open.
    pub fn opened_notice(&self) -> &'static str {
        match self.caps.as_ref() {
            Capabilities::Observe { .. } => "observe mode: the plan opens to look at only",
            Capabilities::Operate { .. } => "s starts the run",
        }
    }

    /// A run to look at only (no journal, nothing can change it).
    pub fn view(run: Run, caps: Arc<Capabilities>) -> RunSession {
        Self::new(run, None, true, caps)
    }

    fn by(mut self, operator: &str) -> Self {
        self.operator = operator.to_string();
        self
    }

    /// Open the journal at `path` from the run list: a damaged one read-only up to the
    /// damage, a finished one to look at, an interrupted or failed one resumed (observe
    /// capabilities journal nothing, so there it opens to look at too). Err: why nothing
    /// opened.
    pub fn open_journal(
        path: &Path,
        outcome: RunOutcome,
        caps: Arc<Capabilities>,
        operator: &str,
        now: Timestamp,
    ) -> Result<Opened, NotOpened> {
        let looked_at = |session: RunSession, notice: String| Opened {
            session: session.by(operator),
            effects: vec![SessionEffect::Notice(notice)],
        };
        if let Ok((r, Some(damage))) = journal::salvage(path) {
            return Ok(looked_at(
                Self::view(r.run, caps),
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
            return Ok(looked_at(Self::view(r.run, caps), notice));
        }
        let r = journal::replay(path).map_err(|e| NotOpened(e.to_string()))?;
        if caps.is_observe() {
            return Ok(looked_at(
                Self::view(r.run, caps),
                "observe mode: the run opens to look at only; resume it outside observe mode"
                    .into(),
            ));
        }
        let (j, replayed, effects) =
            Journal::resume(path, now).map_err(|e| NotOpened(format!("cannot resume: {e}")))?;
        let started_by = replayed.header.operator.clone();
        let mut session = Self::new(replayed.run, Some(j), false, caps).by(operator);
        let warn: Vec<String> = replayed.warnings.iter().map(|w| w.to_string()).collect();
        let mut out = vec![SessionEffect::Notice(if warn.is_empty() {
            "resumed".into()
        } else {
            format!("resumed: {}", warn.join("; "))
        })];
        let next = session.dispatch(effects, &mut out);
        for input in next {
            out.extend(session.feed(input, now));
        }
        if let Some(n) = session.halted_step().filter(|n| session.needs_decision(*n)) {
            out.extend(session.begin_resume(n, Some(started_by), now));
        }
        Ok(Opened {
            session,
            effects: out,
        })
    }

    /// The capabilities this session executes with.
    pub fn capabilities(&self) -> &Arc<Capabilities> {
        &self.caps
    }

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

    /// Start the plan: its journal under `runs_dir`, then the machine's `Start`.
    pub fn start(
        &mut self,
        runs_dir: Option<&Path>,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, NotOpened> {
        if self.caps.is_observe() {
            return Err(NotOpened(OBSERVE_STARTS_NOTHING.into()));
        }
        if self.view_only || !matches!(self.run.status(), RunStatus::NotStarted) {
            return Err(NotOpened("this run has already started".into()));
        }
        let Some(dir) = runs_dir else {
            return Err(NotOpened("cannot start: no run journal directory".into()));
        };
        let plan = self.run.plan().clone();
        let (j, run) = Journal::begin(dir, plan, self.run.mode(), &self.operator, now)
            .map_err(|e| NotOpened(format!("cannot start: no journal: {e}")))?;
        self.journal = Some(j);
        self.run = run;
        let mut out = vec![SessionEffect::Notice("run started".into())];
        out.extend(self.feed(Input::Start, now));
        Ok(out)
    }

    /// Journal `input` and apply it; then turn the machine's effects into session effects
    /// (which may journal more: a step with no executor finishes at once, unstarted).
    pub fn feed(&mut self, input: Input, now: Timestamp) -> Vec<SessionEffect> {
        let mut out = Vec::new();
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let Some(j) = self.journal.as_mut() else {
                out.push(SessionEffect::Notice(
                    "this run is not open for changes".into(),
                ));
                return out;
            };
            tracing::info!(run = %j.path().display(), input = ?input, "journal");
            match j.record(&mut self.run, Event::new(now, input)) {
                Ok(effects) => {
                    if let RunStatus::Active { n } | RunStatus::Halted { n } = self.run.status() {
                        out.push(SessionEffect::AtStep { n: *n });
                    }
                    queue.extend(self.dispatch(effects, &mut out));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "event refused or not journaled");
                    out.push(SessionEffect::Notice(format!("not recorded: {e}")));
                    return out;
                }
            }
        }
        out
    }

    /// The machine's effects as session effects; returns the inputs to journal next.
    fn dispatch(&mut self, effects: Vec<Effect>, out: &mut Vec<SessionEffect>) -> Vec<Input> {
        let mut next = Vec::new();
        let tag = self.tag;
        for fx in effects {
            match fx {
                Effect::AskGate { n, gate } => out.push(SessionEffect::AskGate { n, gate }),
                Effect::GateNotPassed { n, why } => {
                    out.push(SessionEffect::GateNotPassed { n, why })
                }
                Effect::Execute(e) => {
                    let Some(step) = step_of(&self.run, e.n()) else {
                        continue;
                    };
                    out.push(SessionEffect::StepBegins {
                        n: step.n,
                        header: format!(
                            "── step {} · {} · {} ──",
                            step.n,
                            step.kind.as_str(),
                            step.title
                        ),
                    });
                    match self.caps.executor_for(&step) {
                        Ok(_) => out.push(SessionEffect::Request(Box::new(ExecRequest::Execute {
                            tag,
                            attempt: e.attempt(),
                            authorised: e.authorised().to_vec(),
                            env: self.run.plan().env.clone(),
                            step,
                        }))),
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
                        Outcome::Succeeded => "run succeeded".to_string(),
                        other => format!("run {other}"),
                    }));
                    out.push(SessionEffect::Finished { outcome });
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
            ExecReply::Outcome { tag, input } if tag == self.tag => self.feed(input, now),
            ExecReply::Output { tag, line, .. } if self.probe_tag() == Some(tag) => {
                vec![SessionEffect::Output(format!("probe │ {line}"))]
            }
            ExecReply::Outcome { tag, input } if self.probe_tag() == Some(tag) => {
                self.probe_reply(input, now)
            }
            _ => Vec::new(),
        }
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

    /// Going away with work in flight: journal a cancel request for every running step
    /// (the executors stop their processes and answer Cancelled, journaled too).
    pub fn cancel_in_flight(&mut self, now: Timestamp) -> Vec<SessionEffect> {
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
            let by = self.operator.clone();
            out.extend(self.feed(Input::CancelRequested { n, by }, now));
        }
        out
    }

    /// The same plan under read-only capabilities: a plan not started reopens read-only, a
    /// run already going opens to look at only.
    pub fn into_observe(self, caps: Arc<Capabilities>) -> Result<RunSession, NotOpened> {
        let operator = self.operator.clone();
        if matches!(self.run.status(), RunStatus::NotStarted) {
            Self::plan(self.run.plan().clone(), caps, &operator)
        } else {
            Ok(Self::view(self.run, caps).by(&operator))
        }
    }
}

/// Why observe capabilities start nothing.
pub const OBSERVE_STARTS_NOTHING: &str =
    "observe mode: runbooks open as plans only; nothing can start";

pub(crate) fn step_of(run: &Run, n: usize) -> Option<PlannedStep> {
    run.plan().steps.iter().find(|s| s.n == n).cloned()
}
