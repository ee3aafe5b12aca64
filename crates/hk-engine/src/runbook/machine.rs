//! The pure state machine of one run over a [`Plan`].
//!
//! Owns: the run's state (per step and overall), the journalable [`Input`] events that move
//! it, and the [`Effect`]s it asks the outside world to carry out (raft-rs `Ready`/`advance`
//! style: `run.step(&event)` returns effects; `exec/` performs them and feeds the outcomes
//! back as inputs).
//! Must not: do IO, read the clock, spawn, or know the terminal. Times come in with the
//! events. The journal (`crate::journal`) persists events; this module only interprets them.
//!
//! Per step: `Pending -> AwaitingGate -> Running -> Verifying -> Done | Failed | Skipped`,
//! plus `Interrupted` for a step that was running or verifying when the process died.
//! Where a step's gate sits depends on what the gate asks: a gate that reviews what the
//! step's own work showed (`ConfirmHosts` on a list-hosts step, `ApproveDiff` on a check-mode
//! step) is asked after the work and its verification; every other gate before the work.
//!
//! Safety rules enforced here, not by callers:
//! - A failure halts the run: nothing after a failed step runs.
//! - A failed or interrupted step runs again only after an explicit [`Input::RetryApproved`].
//! - A mutating step whose work went out (an [`Execute`] left) and that did not end `Done`
//!   has an unknown outcome, however it ended (cancelled, failed, killed, verification
//!   failed, interrupted, abandoned): it is never retried on one key. It starts again only
//!   through the resume decision ([`Run::needs_decision`]): its probe (skipped when the
//!   executor said it never started the work), then [`Input::RerunApproved`] (its preview
//!   and gates asked afresh, the environment's name typed), [`Input::MarkedDone`] or an
//!   abort. [`Input::RetryApproved`] on it is refused ([`MachineError::NeedsResumeDecision`]).
//! - A run built with [`Run::new_read_only`] never produces an [`Execute`] for a mutating
//!   step: [`Execute`] can only be built inside this module, in one place that checks it.
//! - Terminal step states absorb late executor events without changing.
//!
//! Why one file over 800 lines: it is one transition function over (state, input); split by
//! state, a reader could no longer check in one place that every input is answered in every
//! state, which the replay-equality tests rely on.

use super::gate as guard;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::plan::{Gate, Plan, PlannedStep, StepKind};

/// The machine's clock value: milliseconds since the Unix epoch, UTC. It is time's type
/// (`crate::time` owns it, with its rendering); the machine never reads the clock, callers
/// stamp each event when it happens.
pub use crate::time::Timestamp;

/// Whether the run may change anything. Observe mode is fixed at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Mutating steps run (behind their gates).
    Operate,
    /// Read-only: every mutating step ends `Skipped` with reason "observe mode".
    Observe,
}

/// The run lock (`kube-system/hk-console-run-lock`) as a run's journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "lock", rename_all = "kebab-case", deny_unknown_fields)]
pub enum RunLockNote {
    /// This run took the lock (`holder` is `login@host`).
    Taken { holder: String, duration_s: u64 },
    /// This run took over a stale lock: whose it was, its last renewal, who took it over,
    /// what they typed (the environment's name) and why.
    TookOver {
        from: String,
        from_run: Option<String>,
        last_renewed: Option<Timestamp>,
        by: String,
        typed: String,
        reason: String,
    },
    /// Another console took this run's lock over (read from the Lease's take-over
    /// annotations when this run found its lock gone).
    TakenOverBy {
        by: String,
        by_run: Option<String>,
        reason: String,
        at: Option<Timestamp>,
    },
    /// The lock was lost to `now_held_by`, with no take-over recorded on the Lease.
    Lost { now_held_by: String },
    /// Released at the run's end.
    Released,
    /// The run goes without the lock: `--no-cluster-lock`, given by `by`.
    Disabled { by: String },
}

impl std::fmt::Display for RunLockNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunLockNote::Taken { holder, duration_s } => {
                write!(f, "run lock taken by {holder} ({duration_s} s, renewed while the run lives)")
            }
            RunLockNote::TookOver {
                from,
                from_run,
                last_renewed,
                by,
                typed,
                reason,
            } => {
                write!(f, "stale run lock of {from}")?;
                if let Some(r) = from_run {
                    write!(f, " (run {r})")?;
                }
                if let Some(t) = last_renewed {
                    write!(f, ", last renewed {t},")?;
                }
                write!(f, " taken over by {by} (typed `{typed}`): {reason}")
            }
            RunLockNote::TakenOverBy {
                by,
                by_run,
                reason,
                at,
            } => {
                write!(f, "run lock taken over by {by}")?;
                if let Some(r) = by_run {
                    write!(f, " (run {r})")?;
                }
                if let Some(t) = at {
                    write!(f, " at {t}")?;
                }
                write!(f, ": {reason}")
            }
            RunLockNote::Lost { now_held_by } => {
                write!(f, "run lock lost: {now_held_by} holds it now")
            }
            RunLockNote::Released => write!(f, "run lock released"),
            RunLockNote::Disabled { by } => write!(
                f,
                "run without the cluster's run lock (--no-cluster-lock, by {by}): another console may run here at the same time"
            ),
        }
    }
}

/// One journaled input: what happened and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub at: Timestamp,
    pub input: Input,
}

impl Event {
    pub fn new(at: Timestamp, input: Input) -> Self {
        Event { at, input }
    }
}

/// Everything that can move a run. Operator decisions and executor outcomes alike; all are
/// journaled, so replaying them through [`Run::step`] rebuilds the run exactly.
///
/// Executor outcomes carry the `attempt` they belong to (from [`Execute::attempt`]): an
/// outcome of an earlier attempt of a retried step is stale and absorbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Input {
    /// Begin the run at its first step.
    Start,
    /// The operator answered an approval gate (operator-present, authorise, approve-diff,
    /// confirm-done), or rejected any gate.
    GateAnswered { n: usize, answer: GateAnswer },
    /// The operator typed an answer to a typed gate: the phrase of a typed-confirm, the host
    /// count of a confirm-hosts. A wrong answer leaves the gate closed. `note` is the
    /// operator's optional free text, kept with the gate record like an approval's note
    /// (absent in journals written before typed gates took notes).
    TypedText {
        n: usize,
        by: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The step's work is handed to its executor. Journaled (and fsync'd) by the session
    /// BEFORE the work leaves it: the executor needs the proof of this record
    /// (`journal::StartRecorded`) to start anything, so a journal without it says the work
    /// never went out (journal format 2 on; see [`Run::starts_recorded_first`]).
    StepStarted { n: usize, attempt: u32 },
    /// The step's work ended. `error` says why it could not run or was killed, if it was.
    StepFinished {
        n: usize,
        attempt: u32,
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The executor checked the step's expectations.
    VerifyResult {
        n: usize,
        attempt: u32,
        ok: bool,
        detail: String,
    },
    /// A list-hosts step's verification: the host set the command printed.
    HostSetObserved {
        n: usize,
        attempt: u32,
        hosts: Vec<String>,
    },
    /// The operator asked to cancel the running step.
    CancelRequested { n: usize, by: String },
    /// The executor stopped the step's work.
    Cancelled {
        n: usize,
        attempt: u32,
        reason: String,
    },
    /// The operator ends the run.
    Abort { by: String, reason: String },
    /// The operator asks to run a failed or interrupted step again.
    RetryApproved { n: usize, by: String },
    /// The operator skips a step that changes nothing and guards nothing.
    Skip {
        n: usize,
        by: String,
        reason: String,
    },
    /// The process restarted: work that was in flight is lost (its steps become
    /// `Interrupted`), open gates are asked again.
    Resumed,
    /// The step's work started a local process: its pid and kernel start time, so a later
    /// console can tell whether that very process still runs.
    ProcessStarted {
        n: usize,
        attempt: u32,
        pid: u32,
        start_time: u64,
        program: String,
        /// The marker its environment carries (and every process it starts).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        marker: String,
    },
    /// The step's process is known to be gone: how (stopped by the ladder, found exited).
    ProcessEnded {
        n: usize,
        attempt: u32,
        pid: u32,
        how: String,
    },
    /// The console is going away without finishing its work (lost its terminal, told to
    /// stop, panicked): work in flight is interrupted, and its processes are stopped.
    Abandoned { reason: String },
    /// Resuming an interrupted step: the read-only probe of the live state (step `probe`,
    /// the step's read-back) ran, with this result.
    ProbeResult {
        n: usize,
        probe: usize,
        ok: bool,
        detail: String,
    },
    /// Resuming an interrupted step: its read-only probe (step `probe`) is about to be
    /// handed out. Journaled before the probe's command leaves the console, like
    /// [`Input::StepStarted`] before a step's work: a record, not a transition.
    ProbeStarted { n: usize, probe: usize },
    /// What the gate of step `n` showed of the live cluster when it was answered (the live
    /// blast radius, issue 29): journaled just before the answer, so the change record says
    /// what the operator saw. A record, not a transition.
    GateShown { n: usize, lines: Vec<String> },
    /// What became of the cluster's run lock for this run. It moves no step: it is
    /// journaled so the record says who held the environment, and a take-over is in both
    /// runs' journals (the taker's, and the taken-from run's once it learns of it).
    RunLock { note: RunLockNote },
    /// The resume decision "run it again": the step's preview and gates are asked afresh
    /// and it runs again behind them. `typed` must be the run's environment name.
    RerunApproved { n: usize, by: String, typed: String },
    /// The resume decision "it is done": the operator saw that the change is in place.
    /// `typed` must be the step's host (or the environment's name for a step on none).
    MarkedDone {
        n: usize,
        by: String,
        typed: String,
        reason: String,
    },
}

impl Input {
    /// Short name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Input::Start => "start",
            Input::GateAnswered { .. } => "gate-answered",
            Input::TypedText { .. } => "typed-text",
            Input::StepStarted { .. } => "step-started",
            Input::StepFinished { .. } => "step-finished",
            Input::VerifyResult { .. } => "verify-result",
            Input::HostSetObserved { .. } => "host-set-observed",
            Input::CancelRequested { .. } => "cancel-requested",
            Input::Cancelled { .. } => "cancelled",
            Input::Abort { .. } => "abort",
            Input::RetryApproved { .. } => "retry-approved",
            Input::Skip { .. } => "skip",
            Input::Resumed => "resumed",
            Input::ProcessStarted { .. } => "process-started",
            Input::ProcessEnded { .. } => "process-ended",
            Input::Abandoned { .. } => "abandoned",
            Input::ProbeResult { .. } => "probe-result",
            Input::ProbeStarted { .. } => "probe-started",
            Input::RerunApproved { .. } => "rerun-approved",
            Input::MarkedDone { .. } => "marked-done",
            Input::RunLock { .. } => "run-lock",
            Input::GateShown { .. } => "gate-shown",
        }
    }

    /// The attempt an executor outcome belongs to.
    fn attempt(&self) -> Option<u32> {
        match self {
            Input::StepStarted { attempt, .. }
            | Input::StepFinished { attempt, .. }
            | Input::VerifyResult { attempt, .. }
            | Input::HostSetObserved { attempt, .. }
            | Input::Cancelled { attempt, .. } => Some(*attempt),
            _ => None,
        }
    }
}

/// The operator's answer to a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum GateAnswer {
    Approved {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    Rejected {
        by: String,
        reason: String,
    },
}

/// What the machine asks the outside world to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Show the gate and wait for the operator.
    AskGate { n: usize, gate: Gate },
    /// The operator's typed answer did not open the gate; say why and keep asking.
    GateNotPassed { n: usize, why: String },
    /// Run the step's work.
    Execute(Execute),
    /// Check the step's expectations against what its work produced.
    Verify { n: usize, attempt: u32 },
    /// Stop the step's work.
    Cancel { n: usize, attempt: u32 },
    /// The run stopped: finished, halted on a failure or interruption, or aborted.
    RunFinished { outcome: Outcome },
}

/// Permission to run one step's work. Only this module can build one, and only through the
/// check that refuses a mutating step in observe mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute {
    n: usize,
    attempt: u32,
    mutates: bool,
    authorised: Vec<String>,
}

impl Execute {
    /// The step to run.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Which attempt this is (1 for the first run, +1 per approved retry). Outcomes fed back
    /// must carry it.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
    /// Whether the step changes the systems it touches.
    pub fn mutates(&self) -> bool {
        self.mutates
    }
    /// Flags the operator has authorised so far in this run (to pass as `-e FLAG=true`).
    pub fn authorised(&self) -> &[String] {
        &self.authorised
    }
}

/// How a run ended (or halted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    Succeeded,
    /// Step `n` failed; the run is halted there (a retry or skip can continue it).
    Failed {
        n: usize,
        reason: String,
    },
    /// Step `n` was in flight when the process died.
    Interrupted {
        n: usize,
    },
    Aborted {
        by: String,
        reason: String,
    },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Succeeded => write!(f, "succeeded"),
            Outcome::Failed { n, reason } => write!(f, "failed at step {n}: {reason}"),
            Outcome::Interrupted { n } => write!(f, "interrupted at step {n}"),
            Outcome::Aborted { by, reason } => write!(f, "aborted by {by}: {reason}"),
        }
    }
}

/// A run's outcome in one word, for lists of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunOutcome {
    Succeeded,
    /// Every step ended done or skipped, but the operator went past something on the way
    /// (a step marked done, a skip, a quorum override): [`Run::overrides`] says what.
    SucceededWithOverrides,
    Failed,
    Aborted,
    Interrupted,
    InProgress,
}

impl fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::SucceededWithOverrides => "succeeded with overrides",
            RunOutcome::Failed => "failed",
            RunOutcome::Aborted => "aborted",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::InProgress => "in progress",
        })
    }
}

/// Where a step's gate sits relative to its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatePhase {
    /// Asked before the work runs (or the step has no work).
    BeforeWork,
    /// Asked after the work ran and verified: the operator reviews what it showed.
    AfterWork,
}

/// What was in flight when the process died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    Running,
    Verifying,
}

/// The state of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepState {
    Pending,
    AwaitingGate {
        phase: GatePhase,
    },
    /// An [`Execute`] went out. `started` once the executor said so; the step counts as in
    /// flight from the moment the effect left, because the work may have begun.
    Running {
        started: bool,
        cancel_requested: bool,
    },
    Verifying,
    Done,
    Failed {
        reason: String,
    },
    Skipped {
        reason: String,
    },
    Interrupted {
        during: InFlight,
    },
}

impl StepState {
    pub fn name(&self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::AwaitingGate { .. } => "awaiting its gate",
            StepState::Running { .. } => "running",
            StepState::Verifying => "verifying",
            StepState::Done => "done",
            StepState::Failed { .. } => "failed",
            StepState::Skipped { .. } => "skipped",
            StepState::Interrupted { .. } => "interrupted",
        }
    }

    /// Nothing more happens to this step unless the operator retries it.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            StepState::Done
                | StepState::Failed { .. }
                | StepState::Skipped { .. }
                | StepState::Interrupted { .. }
        )
    }

    fn in_flight(&self) -> Option<InFlight> {
        match self {
            StepState::Running { .. } => Some(InFlight::Running),
            StepState::Verifying => Some(InFlight::Verifying),
            _ => None,
        }
    }
}

/// Who answered a gate (or authorised a flag) and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRecord {
    pub by: String,
    pub at: Timestamp,
    pub note: Option<String>,
}

/// One step's state plus what the run learned about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub state: StepState,
    /// 0 until the step is first entered; +1 per entry (first run and each retry).
    pub attempt: u32,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub exit_code: Option<i32>,
    /// The last verification detail or failure reason.
    pub detail: Option<String>,
    /// The host set a list-hosts step printed.
    pub observed_hosts: Option<Vec<String>>,
    /// Who passed this step's gate.
    pub gate: Option<GateRecord>,
    /// The local process the current attempt started, if any.
    pub process: Option<ProcessRecord>,
    /// Why the step was interrupted, when the console said (abandoned: ...).
    pub interrupted_why: Option<String>,
    /// The resume probe's result, since the step was last interrupted.
    pub probe: Option<ProbeRecord>,
    /// An [`Execute`] for the current attempt left the machine: its work may have run.
    /// Derived from the events (set where the effect is built), never journaled.
    pub work_out: bool,
    /// What the operator went past on this step, in order, with who and why: "marked done
    /// by X: REASON" (and what its probe had said), "skipped by X: REASON", "quorum
    /// override by X: REASON". Kept across attempts: it is the step's history.
    pub overrides: Vec<String>,
    /// The executor said it never started the current attempt's work: it finished with an
    /// error before any `step-started` ("the step was not started"). Such a step changed
    /// nothing, so its resume decision needs no probe.
    pub never_started: bool,
}

/// A step's local process as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRecord {
    pub pid: u32,
    pub start_time: u64,
    pub program: String,
    pub marker: String,
    pub started_at: Timestamp,
    /// How it is known to have ended, once it is.
    pub ended: Option<String>,
}

/// The result of the read-only probe run before an interrupted step is decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRecord {
    /// The probe step.
    pub probe: usize,
    pub ok: bool,
    pub detail: String,
    pub at: Timestamp,
}

impl StepRecord {
    fn new() -> Self {
        StepRecord {
            state: StepState::Pending,
            attempt: 0,
            started_at: None,
            finished_at: None,
            exit_code: None,
            detail: None,
            observed_hosts: None,
            gate: None,
            process: None,
            interrupted_why: None,
            probe: None,
            work_out: false,
            never_started: false,
            overrides: Vec::new(),
        }
    }
}

/// The run as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    NotStarted,
    /// Step `n` is the one in progress (awaiting its gate, running or verifying).
    Active {
        n: usize,
    },
    /// Step `n` failed or was interrupted; the run waits for a retry, a skip or an abort.
    Halted {
        n: usize,
    },
    Succeeded,
    Aborted {
        by: String,
        reason: String,
    },
}

/// Why an input was refused. The run is unchanged when `step` returns one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MachineError {
    #[error("plan step number {n} appears more than once; steps must be numbered uniquely")]
    DuplicateStep { n: usize },
    #[error("plan step {n}: {why}")]
    InvalidPlan { n: usize, why: String },
    #[error("there is no step {n} in this plan")]
    UnknownStep { n: usize },
    #[error("the run has already started")]
    AlreadyStarted,
    #[error("the run is over ({status}); nothing more can happen in it")]
    RunOver { status: String },
    #[error("step {n} is {state}: a {input} event does not apply to it")]
    WrongState {
        n: usize,
        state: &'static str,
        input: &'static str,
    },
    #[error("step {n}: event for attempt {got}, but the step has only reached attempt {current}")]
    FutureAttempt { n: usize, got: u32, current: u32 },
    #[error("step {n}: this gate opens only with typed text (the phrase or the host count), not an approval")]
    GateNeedsTypedText { n: usize },
    #[error("step {n}: this gate takes an approval, not typed text")]
    GateNotTyped { n: usize },
    #[error(
        "step {n} is verified by the host set it lists (host-set-observed), not by a verify-result"
    )]
    VerifyNeedsHostSet { n: usize },
    #[error("step {n} has no expected host set to compare a host-set-observed with")]
    NoHostExpectation { n: usize },
    #[error("step {n} cannot be skipped: {why}")]
    CannotSkip { n: usize, why: &'static str },
    #[error("step {n} has not failed and was not interrupted; only the step the run halted on can be retried")]
    NothingToRetry { n: usize },
    #[error(
        "step {n} changes systems and its work went out without ending done (interrupted, \
         cancelled, failed or not verified): what it did is unknown, so it is not retried on \
         one key; decide in the resume view (re-run with a fresh preview and a typed \
         confirmation, mark done with a reason, or abort)"
    )]
    NeedsResumeDecision { n: usize },
    #[error("step {n}'s outcome is not unknown (it was not interrupted, and did not fail after its work went out); the resume decision is for such a step the run halted on")]
    NotInterrupted { n: usize },
    #[error(
        "step {n}: its process (pid {pid}) may still be running; wait for it or stop it first"
    )]
    ProcessStillRunning { n: usize, pid: u32 },
    #[error("step {n}: run its probe (step {probe}) first, to see the live state before deciding")]
    ProbeFirst { n: usize, probe: usize },
    #[error("step {n}: typed {typed:?}, but the confirmation is {want:?}")]
    WrongConfirmation {
        n: usize,
        typed: String,
        want: String,
    },
    #[error("step {n}: a reason is required")]
    ReasonRequired { n: usize },
    #[error("step {probe} is not the probe of step {n}")]
    NotTheProbe { n: usize, probe: usize },
    #[error(
        "step {n}: a {input} without a step-started: the outcome of work whose start was \
         never recorded is not true"
    )]
    OutcomeWithoutStart { n: usize, input: &'static str },
    #[error(
        "step {n} is {state}: nothing is running to cancel (it ended before the cancel reached it)"
    )]
    NothingToCancel { n: usize, state: &'static str },
}

/// How an operator's answer to a gate overrides a refusal for lost quorum:
/// `override quorum: REASON` (the live checks' `blast::OVERRIDE` is this).
pub const QUORUM_OVERRIDE: &str = "override quorum:";

/// The reason of a quorum override when `note` is one (REASON not empty).
pub fn quorum_override_reason(note: &str) -> Option<&str> {
    let why = note.trim().strip_prefix(QUORUM_OVERRIDE)?.trim();
    (!why.is_empty()).then_some(why)
}

/// One run over a plan: the plan, the mode and every step's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    plan: Arc<Plan>,
    mode: Mode,
    status: RunStatus,
    steps: Vec<StepRecord>,
    authorised: BTreeMap<String, GateRecord>,
    started_at: Option<Timestamp>,
    finished_at: Option<Timestamp>,
    /// Set only while [`Run::step_recorded`] applies an event read back from a journal.
    recorded: bool,
    /// Whether every step's `step-started` was recorded before its work left (journal
    /// format 2 on; every run this build makes). Then a step still `running` without a
    /// start never went out, and a finish without a start is damage. Journals of format 1
    /// recorded the start after the work began, so there it proves nothing.
    starts_first: bool,
}

impl Run {
    /// A run that may mutate (behind its gates).
    pub fn new(plan: Plan) -> Result<Self, MachineError> {
        Self::with_mode(plan, Mode::Operate)
    }

    /// A read-only run: mutating steps end `Skipped` ("observe mode") and no [`Execute`] for
    /// them can come out of it.
    pub fn new_read_only(plan: Plan) -> Result<Self, MachineError> {
        Self::with_mode(plan, Mode::Observe)
    }

    pub fn with_mode(plan: Plan, mode: Mode) -> Result<Self, MachineError> {
        let mut seen = BTreeSet::new();
        for step in &plan.steps {
            if !seen.insert(step.n) {
                return Err(MachineError::DuplicateStep { n: step.n });
            }
            // A list-hosts step exists to confirm the blast radius; without an expected set
            // there is nothing to block on, so the plan is refused rather than waved through.
            if step.kind == StepKind::ListHosts && expected_hosts(step).is_none() {
                return Err(MachineError::InvalidPlan {
                    n: step.n,
                    why: "a list-hosts step needs an expected host set (expect.hosts or a \
                          confirm-hosts gate)"
                        .into(),
                });
            }
            // Two statements of one host set that disagree would make the typed count and the
            // comparison answer different questions.
            if let (Some(Gate::ConfirmHosts { expected }), Some(hosts)) = (
                &step.gate,
                step.expect.as_ref().and_then(|e| e.hosts.as_ref()),
            ) {
                let a: BTreeSet<&String> = expected.iter().collect();
                let b: BTreeSet<&String> = hosts.iter().collect();
                if a != b {
                    return Err(MachineError::InvalidPlan {
                        n: step.n,
                        why: "the confirm-hosts gate and expect.hosts name different host sets"
                            .into(),
                    });
                }
            }
        }
        let steps = plan.steps.iter().map(|_| StepRecord::new()).collect();
        Ok(Run {
            plan: Arc::new(plan),
            mode,
            status: RunStatus::NotStarted,
            steps,
            authorised: BTreeMap::new(),
            started_at: None,
            finished_at: None,
            recorded: false,
            starts_first: true,
        })
    }

    /// Whether this run records each step's start before the step's work leaves (true for
    /// every run this build makes; false for a journal of format 1 read back).
    pub fn starts_recorded_first(&self) -> bool {
        self.starts_first
    }

    /// A run read back from a journal written before starts were recorded first (format
    /// 1): a missing `step-started` proves nothing there.
    pub(crate) fn set_starts_recorded_after(&mut self) {
        self.starts_first = false;
    }

    /// Rebuild a run from its events (the journal's replay, without IO). Returns the index
    /// of the refused event with the error.
    pub fn replay(plan: Plan, mode: Mode, events: &[Event]) -> Result<Self, (usize, MachineError)> {
        let mut run = Self::with_mode(plan, mode).map_err(|e| (0, e))?;
        for (i, ev) in events.iter().enumerate() {
            run.step_recorded(ev).map_err(|e| (i, e))?;
        }
        Ok(run)
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn status(&self) -> &RunStatus {
        &self.status
    }
    pub fn started_at(&self) -> Option<Timestamp> {
        self.started_at
    }
    pub fn finished_at(&self) -> Option<Timestamp> {
        self.finished_at
    }

    /// The record of step `n`.
    pub fn step_record(&self, n: usize) -> Option<&StepRecord> {
        let i = self.plan.steps.iter().position(|s| s.n == n)?;
        self.steps.get(i)
    }

    /// Every step with its record, in plan order.
    pub fn steps(&self) -> impl Iterator<Item = (&PlannedStep, &StepRecord)> {
        self.plan.steps.iter().zip(self.steps.iter())
    }

    /// Whether the operator authorised `flag` in this run.
    pub fn is_authorised(&self, flag: &str) -> bool {
        self.authorised.contains_key(flag)
    }

    /// Every authorised flag with who granted it and when.
    pub fn authorised(&self) -> &BTreeMap<String, GateRecord> {
        &self.authorised
    }

    /// Steps whose work is in flight (running or verifying).
    pub fn in_flight(&self) -> Vec<usize> {
        self.steps()
            .filter(|(_, r)| r.state.in_flight().is_some())
            .map(|(s, _)| s.n)
            .collect()
    }

    /// The outcome so far, in one word.
    pub fn outcome(&self) -> RunOutcome {
        match &self.status {
            RunStatus::NotStarted | RunStatus::Active { .. } => RunOutcome::InProgress,
            RunStatus::Succeeded if self.steps.iter().any(|r| !r.overrides.is_empty()) => {
                RunOutcome::SucceededWithOverrides
            }
            RunStatus::Succeeded => RunOutcome::Succeeded,
            RunStatus::Aborted { .. } => RunOutcome::Aborted,
            RunStatus::Halted { n } => match self.step_record(*n).map(|r| &r.state) {
                Some(StepState::Interrupted { .. }) => RunOutcome::Interrupted,
                _ => RunOutcome::Failed,
            },
        }
    }

    /// Every override of this run, in plan order: (step, what, who and why).
    pub fn overrides(&self) -> Vec<(usize, String)> {
        self.steps()
            .flat_map(|(s, r)| r.overrides.iter().map(move |o| (s.n, o.clone())))
            .collect()
    }

    /// Feed one event. On error the run is unchanged and nothing should be journaled.
    pub fn step(&mut self, event: &Event) -> Result<Vec<Effect>, MachineError> {
        // Work on a copy so a refused input leaves no trace, whatever path refused it.
        let mut next = self.clone();
        let effects = next.apply(event)?;
        *self = next;
        Ok(effects)
    }

    /// Feed one event read back from a journal: what was accepted when it was written.
    /// The one difference from [`Run::step`]: a [`Input::RetryApproved`] on a mutating step
    /// of unknown outcome (refused since the resume decision covers every such step) is
    /// history in journals written before that rule, and replays as it ran then, so old
    /// journals rebuild identically. Live inputs never come through here.
    pub fn step_recorded(&mut self, event: &Event) -> Result<Vec<Effect>, MachineError> {
        self.recorded = true;
        let result = self.step(event);
        self.recorded = false;
        result
    }

    /// Whether step `n` is the halted step whose outcome is unknown and must be decided on
    /// (probe, then re-run from its preview, mark done, or abort), never retried on one key:
    /// an interrupted step that changes systems, or one that failed after its work went out.
    pub fn needs_decision(&self, n: usize) -> bool {
        self.index(n).is_ok_and(|i| {
            self.plan.steps[i].mutates && self.undecided_here(i).is_ok() && !self.is_over()
        })
    }

    fn apply(&mut self, event: &Event) -> Result<Vec<Effect>, MachineError> {
        let at = event.at;
        let mut fx = Vec::new();
        match &event.input {
            Input::Start => match self.status {
                RunStatus::NotStarted => {
                    self.started_at = Some(at);
                    self.advance(0, at, &mut fx);
                }
                _ => return Err(MachineError::AlreadyStarted),
            },
            Input::Resumed => self.resume(at, &mut fx),
            // A record, not a transition: accepted in every state, a finished run's release
            // and a halted run's lost lock included.
            Input::RunLock { .. } | Input::GateShown { .. } => {}
            Input::Abandoned { reason } => self.abandon(reason, at, &mut fx),
            Input::ProcessStarted {
                n,
                attempt,
                pid,
                start_time,
                program,
                marker,
            } => {
                let i = self.index(*n)?;
                if self.current_attempt(i, *n, *attempt)? {
                    self.steps[i].process = Some(ProcessRecord {
                        pid: *pid,
                        start_time: *start_time,
                        program: program.clone(),
                        marker: marker.clone(),
                        started_at: at,
                        ended: None,
                    });
                }
            }
            Input::ProcessEnded {
                n,
                attempt,
                pid,
                how,
            } => {
                let i = self.index(*n)?;
                if self.current_attempt(i, *n, *attempt)? {
                    match self.steps[i].process.as_mut() {
                        Some(p) if p.pid == *pid => p.ended = Some(how.clone()),
                        _ => {
                            return Err(MachineError::WrongState {
                                n: *n,
                                state: "without that process",
                                input: "process-ended",
                            })
                        }
                    }
                }
            }
            Input::ProbeStarted { n, probe } => {
                let i = self.index(*n)?;
                self.undecided_here(i)?;
                if probe_for(&self.plan, *n).map(|p| p.n) != Some(*probe) {
                    return Err(MachineError::NotTheProbe {
                        n: *n,
                        probe: *probe,
                    });
                }
            }
            Input::ProbeResult {
                n,
                probe,
                ok,
                detail,
            } => {
                let i = self.index(*n)?;
                self.undecided_here(i)?;
                if probe_for(&self.plan, *n).map(|p| p.n) != Some(*probe) {
                    return Err(MachineError::NotTheProbe {
                        n: *n,
                        probe: *probe,
                    });
                }
                self.steps[i].probe = Some(ProbeRecord {
                    probe: *probe,
                    ok: *ok,
                    detail: detail.clone(),
                    at,
                });
            }
            Input::RerunApproved { n, by, typed } => {
                let i = self.index(*n)?;
                self.decidable(i)?;
                let want = self.plan.env.clone();
                if typed.trim() != want {
                    return Err(MachineError::WrongConfirmation {
                        n: *n,
                        typed: typed.clone(),
                        want,
                    });
                }
                let _ = by;
                self.rerun(i, at, &mut fx);
            }
            Input::MarkedDone {
                n,
                by,
                typed,
                reason,
            } => {
                let i = self.index(*n)?;
                self.decidable(i)?;
                let want = done_confirmation(&self.plan, &self.plan.steps[i]);
                if typed.trim() != want {
                    return Err(MachineError::WrongConfirmation {
                        n: *n,
                        typed: typed.clone(),
                        want,
                    });
                }
                if reason.trim().is_empty() {
                    return Err(MachineError::ReasonRequired { n: *n });
                }
                self.steps[i].state = StepState::Done;
                self.steps[i].finished_at = Some(at);
                self.steps[i].detail = Some(format!("marked done by {by}: {reason}"));
                let probe = match &self.steps[i].probe {
                    Some(p) if !p.ok => format!(" (its probe said NOT OK: {})", p.detail),
                    Some(_) => String::new(),
                    None => " (no probe ran)".into(),
                };
                self.steps[i]
                    .overrides
                    .push(format!("marked done by {by}{probe}: {reason}"));
                self.finished_at = None;
                self.advance(i + 1, at, &mut fx);
            }
            Input::Abort { by, reason } => self.abort(by, reason, at, &mut fx)?,
            Input::RetryApproved { n, .. } => {
                let i = self.index(*n)?;
                self.retry(i, at, &mut fx)?;
            }
            Input::Skip { n, by, reason } => {
                let i = self.index(*n)?;
                self.skip(i, by, reason, at, &mut fx)?;
            }
            Input::GateAnswered { n, .. }
            | Input::TypedText { n, .. }
            | Input::StepStarted { n, .. }
            | Input::StepFinished { n, .. }
            | Input::VerifyResult { n, .. }
            | Input::HostSetObserved { n, .. }
            | Input::CancelRequested { n, .. }
            | Input::Cancelled { n, .. } => {
                let i = self.index(*n)?;
                self.step_input(i, &event.input, at, &mut fx)?;
            }
        }
        Ok(fx)
    }

    fn index(&self, n: usize) -> Result<usize, MachineError> {
        self.plan
            .steps
            .iter()
            .position(|s| s.n == n)
            .ok_or(MachineError::UnknownStep { n })
    }

    fn is_over(&self) -> bool {
        matches!(
            self.status,
            RunStatus::Succeeded | RunStatus::Aborted { .. }
        )
    }

    fn run_over(&self) -> MachineError {
        let status = match &self.status {
            RunStatus::Succeeded => "succeeded".to_string(),
            RunStatus::Aborted { by, reason } => format!("aborted by {by}: {reason}"),
            other => format!("{other:?}"),
        };
        MachineError::RunOver { status }
    }

    /// The transitions of one step: an explicit `match (state, input)`.
    fn step_input(
        &mut self,
        i: usize,
        input: &Input,
        at: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<(), MachineError> {
        let plan = Arc::clone(&self.plan);
        let step = &plan.steps[i];
        let n = step.n;
        let state = self.steps[i].state.clone();

        // An operator's cancel that reaches no running step (it ended, or moved on to its
        // verification, while the question was on the screen) is said, never journaled as
        // a cancel. Journals written before this rule absorbed such cancels on an ended
        // step: they replay as they ran.
        if matches!(input, Input::CancelRequested { .. })
            && !matches!(state, StepState::Running { .. })
            && !(self.recorded && state.is_terminal())
        {
            return Err(MachineError::NothingToCancel {
                n,
                state: state.name(),
            });
        }
        // Terminal states absorb late events: a finish after a cancel, a verification after an
        // abort, a gate answer racing an abort.
        if state.is_terminal() {
            return Ok(());
        }
        if self.is_over() {
            return Err(self.run_over());
        }
        if let Some(got) = input.attempt() {
            let current = self.steps[i].attempt;
            if got < current {
                // An outcome of an attempt that was superseded by a retry: stale, dropped.
                return Ok(());
            }
            if got > current {
                return Err(MachineError::FutureAttempt { n, got, current });
            }
        }

        let wrong = || MachineError::WrongState {
            n,
            state: state.name(),
            input: input.name(),
        };

        match (&state, input) {
            (StepState::AwaitingGate { phase }, Input::GateAnswered { answer, .. }) => match answer
            {
                GateAnswer::Rejected { by, reason } => {
                    self.fail(i, format!("gate rejected by {by}: {reason}"), at, fx);
                }
                GateAnswer::Approved { by, note } => match guard::by_approval(step.gate.as_ref()) {
                    guard::ByApproval::NeedsTyping => {
                        return Err(MachineError::GateNeedsTypedText { n });
                    }
                    guard::ByApproval::Opens => self.pass_gate(i, *phase, by, note.clone(), at, fx),
                },
            },
            (StepState::AwaitingGate { phase }, Input::TypedText { by, text, note, .. }) => {
                let verdict = match guard::typed(step.gate.as_ref(), text) {
                    guard::Typed::Opens => Ok(()),
                    guard::Typed::DoesNotOpen(why) => Err(why),
                    guard::Typed::NotAsked => return Err(MachineError::GateNotTyped { n }),
                };
                match verdict {
                    Ok(()) => self.pass_gate(i, *phase, by, note.clone(), at, fx),
                    Err(why) => fx.push(Effect::GateNotPassed { n, why }),
                }
            }
            (
                StepState::Running {
                    started: false,
                    cancel_requested,
                },
                Input::StepStarted { .. },
            ) => {
                self.steps[i].state = StepState::Running {
                    started: true,
                    cancel_requested: *cancel_requested,
                };
                self.steps[i].started_at = Some(at);
            }
            // An exit code of work whose start is not in the journal did not happen (no
            // format ever journaled one without its start). In a run that records every
            // start before the work leaves (format 2), neither did a clean finish or a
            // cancellation: only "could not be started" (no exit code, an error) may end a
            // step that never started.
            (
                StepState::Running { started: false, .. },
                Input::StepFinished {
                    exit_code: Some(_), ..
                },
            ) => {
                return Err(MachineError::OutcomeWithoutStart {
                    n,
                    input: input.name(),
                });
            }
            (
                StepState::Running { started: false, .. },
                Input::StepFinished { error: None, .. } | Input::Cancelled { .. },
            ) if self.starts_first => {
                return Err(MachineError::OutcomeWithoutStart {
                    n,
                    input: input.name(),
                });
            }
            (
                StepState::Running {
                    cancel_requested: false,
                    ..
                },
                Input::StepFinished {
                    exit_code, error, ..
                },
            ) => {
                self.steps[i].exit_code = *exit_code;
                let want = step.expect.as_ref().and_then(|e| e.exit_code).unwrap_or(0);
                if let Some(error) = error {
                    // Finished with an error before the executor said it started: it never
                    // ran (the executor could not be found or could not build the command).
                    self.steps[i].never_started = exit_code.is_none()
                        && matches!(state, StepState::Running { started: false, .. });
                    self.fail(i, format!("could not complete: {error}"), at, fx);
                } else if *exit_code != Some(want) {
                    let got = exit_code.map_or("no exit code (killed?)".to_string(), |c| {
                        format!("exit code {c}")
                    });
                    self.fail(i, format!("{got}, expected {want}"), at, fx);
                } else if needs_verify(step) {
                    self.steps[i].state = StepState::Verifying;
                    fx.push(Effect::Verify {
                        n,
                        attempt: self.steps[i].attempt,
                    });
                } else {
                    self.after_work(i, at, fx);
                }
            }
            (
                StepState::Running {
                    cancel_requested: true,
                    ..
                },
                Input::StepFinished { exit_code, .. },
            ) => {
                // The operator wanted it stopped; whatever it did, the run does not go on as if
                // it had been allowed to finish.
                self.steps[i].exit_code = *exit_code;
                let how = exit_code.map_or("without an exit code".to_string(), |c| {
                    format!("with exit code {c}")
                });
                self.fail(
                    i,
                    format!("cancel requested; the work ended {how} before the cancel landed"),
                    at,
                    fx,
                );
            }
            (
                StepState::Running {
                    started,
                    cancel_requested: false,
                },
                Input::CancelRequested { .. },
            ) => {
                self.steps[i].state = StepState::Running {
                    started: *started,
                    cancel_requested: true,
                };
                fx.push(Effect::Cancel {
                    n,
                    attempt: self.steps[i].attempt,
                });
            }
            (
                StepState::Running {
                    cancel_requested: true,
                    ..
                },
                Input::CancelRequested { .. },
            ) => {}
            (StepState::Running { .. }, Input::Cancelled { reason, .. }) => {
                self.fail(i, format!("cancelled: {reason}"), at, fx);
            }
            (StepState::Verifying, Input::VerifyResult { ok: true, .. })
                if expected_hosts(step).is_some() =>
            {
                return Err(MachineError::VerifyNeedsHostSet { n });
            }
            (StepState::Verifying, Input::VerifyResult { ok, detail, .. }) => {
                self.steps[i].detail = Some(detail.clone());
                if *ok {
                    self.after_work(i, at, fx);
                } else {
                    self.fail(i, format!("verification failed: {detail}"), at, fx);
                }
            }
            (StepState::Verifying, Input::HostSetObserved { hosts, .. }) => {
                let Some(expected) = expected_hosts(step) else {
                    return Err(MachineError::NoHostExpectation { n });
                };
                self.steps[i].observed_hosts = Some(hosts.clone());
                let want: BTreeSet<&String> = expected.iter().collect();
                let got: BTreeSet<&String> = hosts.iter().collect();
                let missing: Vec<&str> = want.difference(&got).map(|s| s.as_str()).collect();
                let extra: Vec<&str> = got.difference(&want).map(|s| s.as_str()).collect();
                if missing.is_empty() && extra.is_empty() {
                    self.steps[i].detail = Some(format!("host set matches ({})", hosts.len()));
                    self.after_work(i, at, fx);
                } else {
                    let mut parts = Vec::new();
                    if !missing.is_empty() {
                        parts.push(format!("missing {}", missing.join(", ")));
                    }
                    if !extra.is_empty() {
                        parts.push(format!("not expected {}", extra.join(", ")));
                    }
                    self.fail(
                        i,
                        format!(
                            "host set differs from the expected one: {}",
                            parts.join("; ")
                        ),
                        at,
                        fx,
                    );
                }
            }
            _ => return Err(wrong()),
        }
        Ok(())
    }

    /// Enter steps from index `from` on until one waits for the outside world, or the plan
    /// ends. Steps already skipped ahead of time are passed over.
    fn advance(&mut self, from: usize, at: Timestamp, fx: &mut Vec<Effect>) {
        let mut i = from;
        while i < self.steps.len() {
            if self.steps[i].state.is_terminal() {
                i += 1;
                continue;
            }
            if self.enter(i, at, fx) {
                self.status = RunStatus::Active {
                    n: self.plan.steps[i].n,
                };
                return;
            }
            i += 1;
        }
        self.status = RunStatus::Succeeded;
        self.finished_at = Some(at);
        fx.push(Effect::RunFinished {
            outcome: Outcome::Succeeded,
        });
    }

    /// Enter step `i`. Returns true when it now waits (gate or work), false when it ended at
    /// once (skipped in observe mode, or nothing to do).
    fn enter(&mut self, i: usize, at: Timestamp, fx: &mut Vec<Effect>) -> bool {
        let plan = Arc::clone(&self.plan);
        let step = &plan.steps[i];
        if self.mode == Mode::Observe && step.mutates {
            self.steps[i].state = StepState::Skipped {
                reason: "observe mode".into(),
            };
            self.steps[i].finished_at = Some(at);
            return false;
        }
        if self.mode == Mode::Observe && step.kind == StepKind::EtcdSnapshot {
            // A read, but one that streams a member's whole database (disk and network on
            // a cluster an incident may already starve) for changes this run will not make.
            self.steps[i].state = StepState::Skipped {
                reason:
                    "observe mode: no change follows it, so etcd is not made to stream its database"
                        .into(),
            };
            self.steps[i].finished_at = Some(at);
            return false;
        }
        self.steps[i].attempt += 1;
        self.steps[i].work_out = false;
        self.steps[i].never_started = false;
        match (gate_phase(step), &step.gate) {
            (Some(GatePhase::BeforeWork), Some(gate)) => {
                self.steps[i].state = StepState::AwaitingGate {
                    phase: GatePhase::BeforeWork,
                };
                fx.push(Effect::AskGate {
                    n: step.n,
                    gate: gate.clone(),
                });
                true
            }
            _ if has_work(step) => self.start_work(i, at, fx),
            _ => {
                self.steps[i].state = StepState::Done;
                self.steps[i].finished_at = Some(at);
                self.steps[i].detail = Some("nothing to do".into());
                false
            }
        }
    }

    /// Hand the step's work out. The one place an [`Execute`] is built.
    fn start_work(&mut self, i: usize, at: Timestamp, fx: &mut Vec<Effect>) -> bool {
        let step = &self.plan.steps[i];
        if self.mode == Mode::Observe && step.mutates {
            // `enter` already skips these; this guard keeps the promise even if a future
            // path reaches here another way.
            self.steps[i].state = StepState::Skipped {
                reason: "observe mode".into(),
            };
            self.steps[i].finished_at = Some(at);
            return false;
        }
        let exec = Execute {
            n: step.n,
            attempt: self.steps[i].attempt,
            mutates: step.mutates,
            authorised: self.authorised.keys().cloned().collect(),
        };
        self.steps[i].state = StepState::Running {
            started: false,
            cancel_requested: false,
        };
        self.steps[i].work_out = true;
        fx.push(Effect::Execute(exec));
        true
    }

    fn pass_gate(
        &mut self,
        i: usize,
        phase: GatePhase,
        by: &str,
        note: Option<String>,
        at: Timestamp,
        fx: &mut Vec<Effect>,
    ) {
        if let Some(why) = note.as_deref().and_then(quorum_override_reason) {
            self.steps[i]
                .overrides
                .push(format!("quorum override by {by}: {why}"));
        }
        let record = GateRecord {
            by: by.to_string(),
            at,
            note,
        };
        if let Some(Gate::Authorise { flag }) = &self.plan.steps[i].gate {
            self.authorised.insert(flag.clone(), record.clone());
        }
        self.steps[i].gate = Some(record);
        if phase == GatePhase::BeforeWork && has_work(&self.plan.steps[i]) {
            if !self.start_work(i, at, fx) {
                self.advance(i + 1, at, fx);
            }
        } else {
            self.complete(i, at, fx);
        }
    }

    /// The work ran and verified: ask the review gate if there is one, else done.
    fn after_work(&mut self, i: usize, at: Timestamp, fx: &mut Vec<Effect>) {
        let step = &self.plan.steps[i];
        if let (Some(GatePhase::AfterWork), Some(gate)) = (gate_phase(step), &step.gate) {
            self.steps[i].state = StepState::AwaitingGate {
                phase: GatePhase::AfterWork,
            };
            fx.push(Effect::AskGate {
                n: step.n,
                gate: gate.clone(),
            });
        } else {
            self.complete(i, at, fx);
        }
    }

    fn complete(&mut self, i: usize, at: Timestamp, fx: &mut Vec<Effect>) {
        self.steps[i].state = StepState::Done;
        self.steps[i].finished_at = Some(at);
        self.advance(i + 1, at, fx);
    }

    fn fail(&mut self, i: usize, reason: String, at: Timestamp, fx: &mut Vec<Effect>) {
        let n = self.plan.steps[i].n;
        self.steps[i].state = StepState::Failed {
            reason: reason.clone(),
        };
        self.steps[i].detail = Some(reason.clone());
        self.steps[i].finished_at = Some(at);
        self.status = RunStatus::Halted { n };
        fx.push(Effect::RunFinished {
            outcome: Outcome::Failed { n, reason },
        });
    }

    fn resume(&mut self, at: Timestamp, fx: &mut Vec<Effect>) {
        let RunStatus::Active { n } = self.status else {
            return;
        };
        let Some(i) = self.plan.steps.iter().position(|s| s.n == n) else {
            return;
        };
        match self.steps[i].state.clone() {
            StepState::AwaitingGate { .. } => {
                if let Some(gate) = &self.plan.steps[i].gate {
                    fx.push(Effect::AskGate {
                        n,
                        gate: gate.clone(),
                    });
                }
            }
            s => {
                if let Some(during) = s.in_flight() {
                    self.steps[i].state = StepState::Interrupted { during };
                    // Its start is recorded before its work leaves: without one, nothing
                    // went out, and what it changed is known (nothing).
                    let unstarted =
                        self.starts_first && matches!(s, StepState::Running { started: false, .. });
                    self.steps[i].never_started = unstarted;
                    self.steps[i].interrupted_why = Some(if unstarted {
                        "the console stopped before the step's start was recorded: its work \
                         never went out"
                            .into()
                    } else {
                        "the console stopped while it was in flight".into()
                    });
                    self.steps[i].finished_at = Some(at);
                    self.status = RunStatus::Halted { n };
                    fx.push(Effect::RunFinished {
                        outcome: Outcome::Interrupted { n },
                    });
                }
            }
        }
    }

    /// Whether an informational event of `attempt` is for the step's current attempt
    /// (true), stale (false: dropped), or from an attempt that never went out (refused).
    fn current_attempt(&self, i: usize, n: usize, attempt: u32) -> Result<bool, MachineError> {
        let current = self.steps[i].attempt;
        if attempt > current {
            return Err(MachineError::FutureAttempt {
                n,
                got: attempt,
                current,
            });
        }
        Ok(attempt == current)
    }

    /// Step `i` is the step the run halted on with an unknown outcome: interrupted, or a
    /// mutating step that failed after its work went out (however it ended: cancelled,
    /// an exit code, an error, its verification).
    fn undecided_here(&self, i: usize) -> Result<(), MachineError> {
        let n = self.plan.steps[i].n;
        if self.is_over() {
            return Err(self.run_over());
        }
        let rec = &self.steps[i];
        let unknown = match rec.state {
            StepState::Interrupted { .. } => true,
            StepState::Failed { .. } => self.plan.steps[i].mutates && rec.work_out,
            _ => false,
        };
        if !(unknown && self.status == RunStatus::Halted { n }) {
            return Err(MachineError::NotInterrupted { n });
        }
        Ok(())
    }

    /// Step `i` may be decided on: its outcome unknown here, its process known gone, its
    /// probe run (unless the executor said it never started the work).
    fn decidable(&self, i: usize) -> Result<(), MachineError> {
        self.undecided_here(i)?;
        let n = self.plan.steps[i].n;
        let rec = &self.steps[i];
        if let Some(p) = &rec.process {
            if p.ended.is_none() {
                return Err(MachineError::ProcessStillRunning { n, pid: p.pid });
            }
        }
        if let Some(probe) = probe_for(&self.plan, n).filter(|_| !rec.never_started) {
            if rec.probe.is_none() {
                return Err(MachineError::ProbeFirst { n, probe: probe.n });
            }
        }
        Ok(())
    }

    /// Re-run step `i` from its preview: the check run, its approval and the gates in front
    /// of it go back to pending and are asked again, as on a first run.
    fn rerun(&mut self, i: usize, at: Timestamp, fx: &mut Vec<Effect>) {
        let from = rerun_from(&self.plan, i);
        for rec in &mut self.steps[from..=i] {
            rec.state = StepState::Pending;
            rec.started_at = None;
            rec.finished_at = None;
            rec.exit_code = None;
            rec.observed_hosts = None;
            rec.gate = None;
            rec.process = None;
            rec.probe = None;
            rec.interrupted_why = None;
            rec.work_out = false;
            rec.never_started = false;
        }
        self.finished_at = None;
        self.advance(from, at, fx);
    }

    /// The console is going away: what is in flight is interrupted, saying why.
    fn abandon(&mut self, reason: &str, at: Timestamp, fx: &mut Vec<Effect>) {
        let RunStatus::Active { n } = self.status else {
            return;
        };
        let Some(i) = self.plan.steps.iter().position(|s| s.n == n) else {
            return;
        };
        let state = self.steps[i].state.clone();
        let Some(during) = state.in_flight() else {
            return;
        };
        if let StepState::Running { .. } = state {
            fx.push(Effect::Cancel {
                n,
                attempt: self.steps[i].attempt,
            });
        }
        self.steps[i].state = StepState::Interrupted { during };
        self.steps[i].never_started =
            self.starts_first && matches!(state, StepState::Running { started: false, .. });
        self.steps[i].finished_at = Some(at);
        self.steps[i].interrupted_why = Some(format!("abandoned: {reason}"));
        self.steps[i].detail = Some(format!("abandoned: {reason}"));
        self.status = RunStatus::Halted { n };
        fx.push(Effect::RunFinished {
            outcome: Outcome::Interrupted { n },
        });
    }

    fn abort(
        &mut self,
        by: &str,
        reason: &str,
        at: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<(), MachineError> {
        if self.is_over() {
            return Err(self.run_over());
        }
        if let RunStatus::Active { n } = self.status {
            let i = self.index(n)?;
            match self.steps[i].state.clone() {
                StepState::AwaitingGate { .. } => {
                    self.steps[i].state = StepState::Skipped {
                        reason: format!("run aborted: {reason}"),
                    };
                }
                StepState::Running { .. } => {
                    self.steps[i].state = StepState::Failed {
                        reason: format!("run aborted while the step was running: {reason}"),
                    };
                    fx.push(Effect::Cancel {
                        n,
                        attempt: self.steps[i].attempt,
                    });
                }
                StepState::Verifying => {
                    self.steps[i].state = StepState::Failed {
                        reason: format!("run aborted during verification: {reason}"),
                    };
                }
                _ => {}
            }
            self.steps[i].finished_at = Some(at);
        }
        self.status = RunStatus::Aborted {
            by: by.to_string(),
            reason: reason.to_string(),
        };
        self.finished_at = Some(at);
        fx.push(Effect::RunFinished {
            outcome: Outcome::Aborted {
                by: by.to_string(),
                reason: reason.to_string(),
            },
        });
        Ok(())
    }

    fn retry(&mut self, i: usize, at: Timestamp, fx: &mut Vec<Effect>) -> Result<(), MachineError> {
        let n = self.plan.steps[i].n;
        if self.is_over() {
            return Err(self.run_over());
        }
        let halted_here = self.status == RunStatus::Halted { n };
        let retryable = matches!(
            self.steps[i].state,
            StepState::Failed { .. } | StepState::Interrupted { .. }
        );
        if !(halted_here && retryable) {
            return Err(MachineError::NothingToRetry { n });
        }
        // One rule for every way a mutating step can end without `Done` once its work went
        // out: the decision, never one key. Journals written before the rule replay as
        // they ran (`step_recorded`).
        if self.plan.steps[i].mutates && self.undecided_here(i).is_ok() && !self.recorded {
            return Err(MachineError::NeedsResumeDecision { n });
        }
        let rec = &mut self.steps[i];
        rec.state = StepState::Pending;
        rec.started_at = None;
        rec.finished_at = None;
        rec.exit_code = None;
        rec.observed_hosts = None;
        rec.gate = None;
        self.finished_at = None;
        self.advance(i, at, fx);
        Ok(())
    }

    fn skip(
        &mut self,
        i: usize,
        by: &str,
        reason: &str,
        at: Timestamp,
        fx: &mut Vec<Effect>,
    ) -> Result<(), MachineError> {
        let step = &self.plan.steps[i];
        let n = step.n;
        if self.is_over() {
            return Err(self.run_over());
        }
        if step.mutates {
            return Err(MachineError::CannotSkip {
                n,
                why: "it mutates, and the steps after it assume its change; abort the run instead",
            });
        }
        if step.gate.is_some() {
            return Err(MachineError::CannotSkip {
                n,
                why: "its gate guards what follows; reject the gate or abort the run instead",
            });
        }
        if step.kind == StepKind::ListHosts {
            return Err(MachineError::CannotSkip {
                n,
                why: "it confirms the blast radius before a change",
            });
        }
        // The health gate between hosts and the look before a disruption hold a run for a
        // named cause: going past one is the operator's decision, and it says why.
        let guard = step
            .expect
            .as_ref()
            .and_then(|e| e.condition.as_deref())
            .is_some_and(|c| {
                c.starts_with(super::plan::HEALTH_GATE)
                    || c.starts_with(super::plan::NODE_DISRUPTION)
                    || c.starts_with(super::plan::ETCD_SNAPSHOT)
            });
        if guard && reason.trim().is_empty() {
            return Err(MachineError::CannotSkip {
                n,
                why: "it is a guard rail (the health gate, a disruption check or the etcd snapshot): skipping it needs a typed reason",
            });
        }
        let resume_after = match &self.steps[i].state {
            StepState::Pending => false,
            StepState::Failed { .. } | StepState::Interrupted { .. }
                if self.status == RunStatus::Halted { n } =>
            {
                true
            }
            other => {
                return Err(MachineError::WrongState {
                    n,
                    state: other.name(),
                    input: "skip",
                })
            }
        };
        self.steps[i].state = StepState::Skipped {
            reason: format!("skipped by {by}: {reason}"),
        };
        self.steps[i]
            .overrides
            .push(format!("skipped by {by}: {reason}"));
        self.steps[i].finished_at = Some(at);
        if resume_after {
            self.finished_at = None;
            self.advance(i + 1, at, fx);
        }
        Ok(())
    }
}

/// Whether a step has work for the executor (gate and manual steps have only their gate).
pub fn has_work(step: &PlannedStep) -> bool {
    !matches!(step.kind, StepKind::Gate | StepKind::Manual)
}

/// Where the step's gate is asked, if it has one.
pub fn gate_phase(step: &PlannedStep) -> Option<GatePhase> {
    match &step.gate {
        None => None,
        Some(Gate::ConfirmHosts { .. } | Gate::ApproveDiff) if has_work(step) => {
            Some(GatePhase::AfterWork)
        }
        Some(_) => Some(GatePhase::BeforeWork),
    }
}

/// The exact host set a step must list: `expect.hosts`, else a list-hosts step's
/// confirm-hosts gate.
pub fn expected_hosts(step: &PlannedStep) -> Option<&[String]> {
    if let Some(hosts) = step.expect.as_ref().and_then(|e| e.hosts.as_deref()) {
        return Some(hosts);
    }
    match (&step.kind, &step.gate) {
        (StepKind::ListHosts, Some(Gate::ConfirmHosts { expected })) => Some(expected),
        _ => None,
    }
}

/// Whether the step has expectations beyond its exit code, so a [`Effect::Verify`] follows
/// its work.
pub fn needs_verify(step: &PlannedStep) -> bool {
    if expected_hosts(step).is_some() {
        return true;
    }
    step.expect.as_ref().is_some_and(|e| {
        e.stdout_equals.is_some()
            || e.stdout_contains.is_some()
            || e.stdout_not_contains.is_some()
            || e.condition.is_some()
            || e.tcp.is_some()
    })
}

/// The read-only step that probes what step `n` changed: the first step after it, before
/// the next change, on the same host (or, for a step on no host, on none), that looks at
/// the live state (an ssh read-back, a probe, a kube-wait).
pub fn probe_for(plan: &Plan, n: usize) -> Option<&PlannedStep> {
    let i = plan.steps.iter().position(|s| s.n == n)?;
    let me = &plan.steps[i];
    plan.steps[i + 1..]
        .iter()
        .take_while(|s| !s.mutates)
        .find(|s| {
            s.host == me.host
                && matches!(s.kind, StepKind::Ssh | StepKind::Probe | StepKind::KubeWait)
        })
}

/// Where a re-run of step `i` starts: back over the steps in front of it that preview it
/// (a check run on its host) or guard it (gates), so they are asked again.
pub fn rerun_from(plan: &Plan, i: usize) -> usize {
    let host = &plan.steps[i].host;
    let mut from = i;
    while from > 0 {
        let s = &plan.steps[from - 1];
        let preview = s.kind == StepKind::Ansible
            && !s.mutates
            && (matches!(s.gate, Some(Gate::ApproveDiff))
                || s.command
                    .as_ref()
                    .is_some_and(|c| c.iter().any(|a| a == "--check")));
        // The look before a leader move is its preview too.
        let preview = preview || (s.kind == StepKind::EtcdLeader && !s.mutates);
        // Gates touch no host (operator-present is bound to none); a preview is this
        // host's own.
        let guards = s.kind == StepKind::Gate || (preview && &s.host == host);
        if !guards {
            break;
        }
        from -= 1;
    }
    from
}

/// What the operator types to mark step `step` done: its host, else the environment.
pub fn done_confirmation(plan: &Plan, step: &PlannedStep) -> String {
    step.host.clone().unwrap_or_else(|| plan.env.clone())
}
