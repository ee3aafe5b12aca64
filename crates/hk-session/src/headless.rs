//! A run with no terminal: one runbook driven through the same [`Session`] the console
//! drives, its gates answered by an [`Operator`], and its journal summarised. `hk-console
//! demo --headless --run RUNBOOK` uses it with the [`Scripted`] operator against the
//! simulated homelab; the tests use it to rehearse end to end.
//!
//! Owns: the loop between the session and the executor task (the same requests and replies
//! the console's event loop carries), asking the operator at each gate, and the summary of
//! the journal it leaves. Its way out is the console's: SIGTERM, SIGHUP and SIGINT journal the
//! run abandoned with the true cause and stop the children ([`crate::supervise`]); the
//! deadline is journaled as itself; a journal that cannot be written stops the run at once.
//! Before any gate of a step that changes hosts it takes the live blast radius, and a step
//! the live look refuses (quorum, the last Ready server) is aborted: no operator here can
//! override it (the console's person types `override quorum:` in the gate's note).
//! Must not: be handed anything but a rehearsal target. The [`Scripted`] operator says yes to
//! every gate, so the binary composes it only for `demo` (its target: the demo's repo and
//! executor setup), never for a real environment. It retries nothing: a failed step halts
//! the run there, as it would for a person.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::exec::ExecRequest;
use crate::executors::{capabilities_with, Clusters, ExecSetup};
use crate::pump::Pump;
use crate::{supervise, RepoPlans, RunCore, Session, SessionEffect};
use hk_effects::cluster::KubeOverrides;
use hk_engine::repo::Repo;
use hk_engine::runbook::embedded::RunbookSet;
use hk_engine::runbook::machine::{GateAnswer, Input, RunOutcome, RunStatus, StepState};
use hk_engine::runbook::plan::Gate;

/// Who the [`Scripted`] operator is, as the journal records it.
pub const OPERATOR: &str = "simulated-operator";

/// Where a headless run goes: the repo it plans from and what its executors change there.
#[derive(Debug, Clone)]
pub struct Target {
    /// The repo's root (the demo's copy of the sample, or a rehearsal's).
    pub repo: PathBuf,
    /// The executors' setup (the demo: its own known_hosts, scaled times).
    pub setup: ExecSetup,
}

/// Who answers a headless run's gates. The live refusal is not theirs to answer: a step
/// the live look refuses is aborted before the operator is asked.
pub trait Operator {
    /// The name the journal records for every answer.
    fn name(&self) -> &str;
    /// The answer to step `n`'s open `gate`, as a person reading the modal would give it.
    fn answer(&mut self, run: &RunCore, n: usize, gate: &Gate) -> Input;
}

/// The rehearsal's operator: types the host count the list-hosts step printed, types the
/// phrase asked, approves and confirms. Never overrides anything.
#[derive(Debug, Clone)]
pub struct Scripted {
    name: String,
    note: String,
}

impl Default for Scripted {
    fn default() -> Self {
        Self {
            name: OPERATOR.into(),
            note: "answered by hk-console demo --headless (simulated operator)".into(),
        }
    }
}

impl Operator for Scripted {
    fn name(&self) -> &str {
        &self.name
    }

    fn answer(&mut self, run: &RunCore, n: usize, gate: &Gate) -> Input {
        answer(run, n, gate, &self.name, &self.note)
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct HeadlessRun {
    pub runbook: String,
    /// `None`: the runbook's only environment (a runbook for several must be told).
    pub env: Option<String>,
    /// The one host, for runbooks that run on a single host.
    pub host: Option<String>,
    /// The whole run must end within this; past it the step in flight is cancelled and the
    /// run aborted, both journaled.
    pub deadline: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum HeadlessError {
    /// The runbook could not be opened (unknown id, wrong environment, missing host...).
    #[error("cannot run `{runbook}`: {why}")]
    Open { runbook: String, why: String },
    #[error("cannot start `{runbook}`: {why}")]
    Start { runbook: String, why: String },
    #[error("the executor task ended while step {step} was in flight")]
    ExecutorGone { step: usize },
    /// An append to the journal failed: the run stopped there (its children stopped).
    #[error("{why}")]
    JournalBroken { why: String },
    /// A signal ended the run: journaled abandoned with this reason, children stopped.
    #[error("{reason}; the run was journaled abandoned and its children stopped")]
    Signalled {
        signal: supervise::Caught,
        reason: String,
    },
}

/// One step of the summary.
#[derive(Debug, Clone, Serialize)]
pub struct StepLine {
    pub n: usize,
    pub id: String,
    pub kind: String,
    pub host: Option<String>,
    pub title: String,
    pub mutates: bool,
    pub state: String,
    pub attempts: u32,
    pub seconds: Option<f64>,
    /// The last verification detail or why it failed or was skipped.
    pub detail: Option<String>,
    /// Who passed the step's gate, and which gate.
    pub gate: Option<String>,
}

/// What a headless run leaves: the journal and its summary.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub runbook: String,
    pub env: String,
    pub outcome: String,
    pub succeeded: bool,
    pub journal: PathBuf,
    pub seconds: f64,
    pub steps: Vec<StepLine>,
    /// The last output lines of the step the run halted on (empty when it succeeded).
    pub failed_output: Vec<String>,
}

impl Report {
    /// The summary as text, one line per step.
    pub fn render(&self) -> String {
        let mut out = format!(
            "run {} · {} · {} in {:.1} s\njournal {}\n",
            self.runbook,
            self.env,
            self.outcome,
            self.seconds,
            self.journal.display()
        );
        for s in &self.steps {
            let glyph = match s.state.as_str() {
                "done" => "✓",
                "failed" | "interrupted" => "✗",
                "skipped" => "↷",
                "pending" => "·",
                _ => "…",
            };
            let took = s.seconds.map(|t| format!("{t:.1} s")).unwrap_or_default();
            out.push_str(&format!(
                "{:>3} {glyph} {:<15} {:<12} {:<9} {}{}\n",
                s.n,
                s.kind,
                s.host.as_deref().unwrap_or("-"),
                took,
                s.title,
                if s.mutates { " [mutates]" } else { "" },
            ));
            if let Some(g) = &s.gate {
                out.push_str(&format!("      gate: {g}\n"));
            }
            if let Some(d) = s.detail.as_deref().filter(|d| !d.is_empty()) {
                if s.state != "done" || d.lines().count() == 1 {
                    for l in d.lines().take(6) {
                        out.push_str(&format!("      {l}\n"));
                    }
                }
            }
        }
        if !self.failed_output.is_empty() {
            out.push_str("last output of the step it halted on:\n");
            for l in &self.failed_output {
                out.push_str(&format!("  │ {l}\n"));
            }
        }
        out
    }
}

/// The simulated operator's side of one run: the session, the requests for the pump, the
/// gate it was asked, the output of each step.
struct Driver {
    session: Session,
    queue: VecDeque<ExecRequest>,
    /// The gate asked and still open: step, gate, why the last answer did not pass.
    gate: Option<(usize, Gate, Option<String>)>,
    /// The last lines of each step's output (for the step a run halts on).
    output: BTreeMap<usize, VecDeque<String>>,
    at: Option<usize>,
    /// The last thing the session said.
    said: Option<String>,
    /// Who answers (the journal's name for the operator's aborts).
    by: String,
}

/// How many lines of the halted step's output the report keeps.
const FAILED_OUTPUT: usize = 20;

impl Driver {
    fn feed(&mut self, input: Input) {
        let fx = self.session.feed(input, hk_engine::journal::now());
        self.apply(fx);
    }

    fn apply(&mut self, effects: Vec<SessionEffect>) {
        for fx in effects {
            match fx {
                SessionEffect::AskGate { n, gate } => self.gate = Some((n, gate, None)),
                SessionEffect::GateNotPassed { n, why } => match self.gate.as_mut() {
                    Some((open, _, error)) if *open == n => *error = Some(why),
                    _ => self.said = Some(format!("step {n}: {why}")),
                },
                SessionEffect::Request(r) => self.queue.push_back(*r),
                SessionEffect::StepBegins { n, header } => {
                    self.at = Some(n);
                    self.output.insert(n, VecDeque::from([header]));
                }
                SessionEffect::Output(line) => {
                    if let Some(lines) = self.at.and_then(|n| self.output.get_mut(&n)) {
                        if lines.len() == FAILED_OUTPUT {
                            lines.pop_front();
                        }
                        lines.push_back(line);
                    }
                }
                SessionEffect::Notice(said) => self.said = Some(said),
                SessionEffect::Finished { .. } => self.gate = None,
                SessionEffect::AtStep { .. } | SessionEffect::AskDecision { .. } => {}
            }
        }
        if let Some((n, ..)) = &self.gate {
            if !self.session.gate_is_open(*n) {
                self.gate = None;
            }
        }
    }
}

/// How a headless run is opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct How {
    /// As `hk-console observe` would: the executors are the read-only set only, so a
    /// runbook with a mutating step is refused at start ([`HeadlessError::Start`], naming
    /// the step) and a read-only one runs through `Executor<ReadOnly>`, journaled in observe
    /// mode.
    pub observe: bool,
    /// `--no-cluster-lock`: the run takes no lock, and its journal says so.
    pub no_cluster_lock: bool,
}

/// Drive `req` through the console's run session on `target`, journaling under `runs_dir`,
/// its gates answered by `operator`. `progress` gets one line per step change and per gate
/// answered, as they happen. A mutating run takes the cluster's run lock, as the console
/// does (unless `how.no_cluster_lock`).
pub async fn drive(
    target: &Target,
    runbooks: RunbookSet,
    req: &HeadlessRun,
    runs_dir: &Path,
    how: How,
    operator: &mut dyn Operator,
    progress: impl FnMut(&str),
) -> Result<Report, HeadlessError> {
    let How {
        observe,
        no_cluster_lock,
    } = how;
    let open_err = |why: String| HeadlessError::Open {
        runbook: req.runbook.clone(),
        why,
    };
    let repo = Repo::load(&target.repo).map_err(|e| open_err(e.to_string()))?;
    // The live look at a gate dials as the executors do.
    let ssh = target
        .setup
        .ssh
        .clone()
        .unwrap_or_else(|| hk_effects::context::ssh_options(&repo));
    let clusters = Arc::new(Clusters::for_repo(&repo, &KubeOverrides::default()));
    let (caps, notices) = capabilities_with(&repo, observe, clusters, &target.setup);
    // Progress names steps by their titles, where a runbook may have pasted a secret.
    let mask = caps.read_only().redactor().without_withholding();
    // The summary printed at the end names steps by their titles too.
    let report_mask = mask.clone();
    let mut unmasked = progress;
    let mut progress = move |l: &str| unmasked(&mask.redact(l));
    for n in &notices {
        progress(&format!("notice: {n}"));
    }
    let locking = Arc::new(crate::lock::RunLocking::for_repo(
        &repo,
        &KubeOverrides::default(),
        no_cluster_lock,
    ));
    // As the console opens it: the repo's first environment is the current one.
    let current = repo.environments.first().map(|e| e.name.clone());
    let plans = RepoPlans { repo };
    let (plan, env) = crate::open_plan(
        &runbooks,
        &plans,
        &req.runbook,
        req.env.as_deref(),
        current.as_deref(),
        req.host.as_deref(),
    )
    .map_err(|e| open_err(e.0))?;
    let caps = Arc::new(caps);
    let session = Session::plan(plan, &caps, operator.name(), Some(locking))
        .map_err(|e| open_err(format!("cannot run `{}` for `{env}`: {e}", req.runbook)))?;
    let mut d = Driver {
        session,
        queue: VecDeque::new(),
        gate: None,
        output: BTreeMap::new(),
        at: None,
        said: None,
        by: operator.name().to_string(),
    };
    // Each step's (state, attempt) as last reported: every step starts pending.
    let mut seen: Vec<(&'static str, u32)> = d
        .session
        .run
        .steps()
        .map(|(_, r)| (r.state.name(), r.attempt))
        .collect();
    match d.session.start(Some(runs_dir), hk_engine::journal::now()) {
        Ok(fx) => d.apply(fx),
        Err(e) => {
            return Err(HeadlessError::Start {
                runbook: req.runbook.clone(),
                why: e.0,
            })
        }
    }
    let journal = match d.session.journal.as_ref() {
        Some(j) => j.path().to_path_buf(),
        None => {
            return Err(HeadlessError::Start {
                runbook: req.runbook.clone(),
                why: d.said.clone().unwrap_or_else(|| "no journal".into()),
            })
        }
    };
    let env = d.session.run.plan().env.clone();
    progress(&format!(
        "{}: {} for {env}, journal {}",
        operator.name(),
        req.runbook,
        journal.display()
    ));

    let mut pump = Pump::spawn(caps);
    // The signals that end a console end this run the same way: journaled abandoned with
    // the true cause, the children stopped by the ladder.
    let mut signals = supervise::Signals::new().map_err(|e| HeadlessError::Start {
        runbook: req.runbook.clone(),
        why: format!("cannot watch for SIGTERM/SIGHUP/SIGINT: {e}"),
    })?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + req.deadline;
    let mut answered: Vec<usize> = Vec::new();
    let mut result = Ok(());
    loop {
        // A lost run lock is journaled when it is learnt; what it refuses says so.
        let fx = d.session.lock_tick(hk_engine::journal::now());
        d.apply(fx);
        report_changes(&d.session, &mut seen, &mut progress);
        if pump.flush(&mut d.queue).is_err() {
            break;
        }
        if let Some(why) = d.session.journal_broken().map(str::to_string) {
            progress(&why);
            stop_after_broken_journal(&mut d, &mut pump).await;
            result = Err(HeadlessError::JournalBroken { why });
            break;
        }
        let status = d.session.run.status().clone();
        let in_flight = !d.session.run.in_flight().is_empty();
        if !in_flight && !matches!(status, RunStatus::Active { .. } | RunStatus::NotStarted) {
            break;
        }
        if let Some((n, gate, error)) = d.gate.clone() {
            if answered.contains(&n) {
                // The same gate is still open after an answer: say why and stop.
                let why = error.unwrap_or_else(|| "still open".into());
                abort(
                    &mut d,
                    &format!("the simulated answer to step {n}'s gate did not open it: {why}"),
                );
                continue;
            }
            answered.push(n);
            // Issue 29: before answering, the simulated operator looks at the live cluster as
            // the console's gate shows it; a step that would leave etcd without quorum (or
            // the last Ready server) is refused, and this operator never overrides.
            if !observe {
                if let Some(lines) =
                    live_blast_at_gate(&d.session, n, &plans.repo, ssh.clone()).await
                {
                    let journaled = hk_engine::guard::blast::journal_lines(&lines);
                    for l in &journaled {
                        progress(&format!("step {n}: live: {l}"));
                    }
                    d.feed(Input::GateShown {
                        n,
                        lines: journaled,
                    });
                    if let Some(why) = lines.iter().find(|l| l.blocks) {
                        let reason = format!(
                            "step {n}'s gate is refused: {}; the simulated operator does not \
                             override (in the console: `{} REASON` in the gate's note)",
                            why.text,
                            hk_engine::guard::blast::OVERRIDE
                        );
                        progress(&reason);
                        abort(&mut d, &reason);
                        continue;
                    }
                }
            }
            let input = operator.answer(&d.session, n, &gate);
            progress(&format!(
                "step {n}: gate {} answered by {}",
                gate_name(&gate),
                operator.name()
            ));
            d.feed(input);
            continue;
        }
        let got = tokio::select! {
            r = pump.recv() => Ok(r),
            () = tokio::time::sleep_until(deadline) => Err(None),
            sig = signals.next() => Err(Some(sig)),
        };
        match got {
            Err(Some(signal)) => {
                let reason = format!("the headless run was {}", signal_cause(signal));
                progress(&format!(
                    "{reason}: abandoning the run and stopping its children"
                ));
                let fx = supervise::abandon_and_stop(
                    Some(&mut d.session),
                    &reason,
                    supervise::ABANDON_INT_GRACE,
                    supervise::ABANDON_TERM_GRACE,
                    hk_engine::journal::now(),
                );
                d.apply(fx);
                report_changes(&d.session, &mut seen, &mut progress);
                result = Err(HeadlessError::Signalled { signal, reason });
                break;
            }
            Ok(Some(reply)) => {
                let fx = d.session.handle_reply(reply, hk_engine::journal::now());
                d.apply(fx);
            }
            Ok(None) => {
                let step = match status {
                    RunStatus::Active { n } | RunStatus::Halted { n } => n,
                    _ => 0,
                };
                result = Err(HeadlessError::ExecutorGone { step });
                break;
            }
            Err(None) => {
                let cause = format!(
                    "the headless deadline of {} s passed",
                    req.deadline.as_secs()
                );
                progress(&format!("{cause}: cancelling and aborting the run"));
                // Cancel what is in flight, wait briefly for the executor to say so, abort.
                let fx = d
                    .session
                    .cancel_in_flight_because(&cause, hk_engine::journal::now());
                d.apply(fx);
                let grace = tokio::time::Instant::now() + Duration::from_secs(10);
                while d.session.has_in_flight() {
                    if pump.flush(&mut d.queue).is_err() {
                        break;
                    }
                    match tokio::time::timeout_at(grace, pump.recv()).await {
                        Ok(Some(reply)) => {
                            let fx = d.session.handle_reply(reply, hk_engine::journal::now());
                            d.apply(fx);
                        }
                        _ => break,
                    }
                }
                abort(&mut d, &cause);
                report_changes(&d.session, &mut seen, &mut progress);
                break;
            }
        }
    }
    drop(pump);
    result?;
    Ok(summarise(&d, journal, env, started.elapsed(), &report_mask))
}

/// How a signal ended a headless run, as its abandonment's reason says it.
fn signal_cause(signal: supervise::Caught) -> &'static str {
    match signal {
        supervise::Caught::Hup => "hung up on (SIGHUP)",
        supervise::Caught::Term => "told to stop (SIGTERM)",
        supervise::Caught::Int => "interrupted (SIGINT)",
    }
}

/// How long the steps asked to stop when the journal broke get to answer before the
/// ladder is run on every supervised child from here.
const BROKEN_JOURNAL_GRACE: Duration = Duration::from_secs(10);

/// The journal broke: hand the executors the stops the session asked for, wait (bounded)
/// for them to answer, then make sure no supervised child outlives the run.
async fn stop_after_broken_journal(d: &mut Driver, pump: &mut Pump) {
    let grace = tokio::time::Instant::now() + BROKEN_JOURNAL_GRACE;
    while d.session.still_stopping() {
        if pump.flush(&mut d.queue).is_err() {
            break;
        }
        match tokio::time::timeout_at(grace, pump.recv()).await {
            Ok(Some(reply)) => {
                let fx = d.session.handle_reply(reply, hk_engine::journal::now());
                d.apply(fx);
            }
            _ => break,
        }
    }
    let stops = tokio::task::spawn_blocking(|| {
        hk_effects::exec::process::stop_all(
            supervise::ABANDON_INT_GRACE,
            supervise::ABANDON_TERM_GRACE,
        )
    })
    .await
    .unwrap_or_default();
    for stop in stops {
        tracing::error!(report = %stop.describe(), "child stopped after the journal broke");
    }
}

/// Journal an abort by the simulated operator.
fn abort(d: &mut Driver, reason: &str) {
    d.feed(Input::Abort {
        by: d.by.clone(),
        reason: reason.into(),
    });
}

/// The live blast radius of the hosts step `n` changes, from one look at its environment's
/// VIP lease, nodes and etcd taken now (`None`: the step changes no host).
async fn live_blast_at_gate(
    session: &RunCore,
    n: usize,
    repo: &Repo,
    ssh: hk_effects::exec::SshOptions,
) -> Option<Vec<hk_engine::guard::blast::BlastLine>> {
    use hk_engine::guard::blast::{live_blast, LivePanes, Seen};
    let plan = session.run.plan();
    let hosts = hk_engine::guard::blast::gate_hosts(plan, n)?;
    let servers: Vec<String> = repo
        .environment(&plan.env)
        .map(|e| e.servers.iter().map(|h| h.name.clone()).collect())
        .unwrap_or_default();
    let look =
        hk_effects::observe::gate_look::look(repo, &plan.env, &KubeOverrides::default(), ssh).await;
    fn seen<T>(p: Option<&T>) -> Seen<&T> {
        p.map_or(Seen::NotSeen, |pane| Seen::Fresh { pane, age_ms: 0 })
    }
    Some(live_blast(
        hosts,
        &servers,
        &LivePanes {
            vip: seen(look.vip.as_ref()),
            etcd: seen(look.etcd.as_ref()),
            nodes: seen(look.nodes.as_ref()),
        },
    ))
}

/// What the scripted operator answers to step `n`'s gate: what a person reading the modal
/// would type or press.
fn answer(session: &RunCore, n: usize, gate: &Gate, by: &str, note: &str) -> Input {
    let note = Some(note.to_string());
    match gate {
        Gate::ConfirmHosts { expected } => {
            // The count of the hosts the list-hosts step printed, as shown in the modal.
            let shown = session
                .run
                .step_record(n)
                .and_then(|r| r.observed_hosts.as_ref())
                .map_or(expected.len(), Vec::len);
            Input::TypedText {
                n,
                by: by.into(),
                text: shown.to_string(),
                note,
            }
        }
        Gate::TypedConfirm { phrase } => Input::TypedText {
            n,
            by: by.into(),
            text: phrase.clone(),
            note,
        },
        Gate::OperatorPresent | Gate::Authorise { .. } | Gate::ApproveDiff | Gate::ConfirmDone => {
            Input::GateAnswered {
                n,
                answer: GateAnswer::Approved {
                    by: by.into(),
                    note,
                },
            }
        }
    }
}

fn gate_name(g: &Gate) -> String {
    match g {
        Gate::OperatorPresent => "operator-present".into(),
        Gate::TypedConfirm { phrase } => format!("typed-confirm `{phrase}`"),
        Gate::Authorise { flag } => format!("authorise {flag}"),
        Gate::ConfirmHosts { expected } => format!("confirm-hosts ({})", expected.join(", ")),
        Gate::ApproveDiff => "approve-diff".into(),
        Gate::ConfirmDone => "confirm-done".into(),
    }
}

/// One progress line per step whose state or attempt changed since the last call.
fn report_changes(a: &RunCore, seen: &mut [(&'static str, u32)], progress: &mut impl FnMut(&str)) {
    let total = a.run.plan().steps.len();
    for ((step, rec), last) in a.run.steps().zip(seen.iter_mut()) {
        let now = (rec.state.name(), rec.attempt);
        if *last == now {
            continue;
        }
        let why = match &rec.state {
            StepState::Failed { reason } | StepState::Skipped { reason } => format!(": {reason}"),
            _ => String::new(),
        };
        progress(&format!(
            "step {}/{total} {} {}{}: {}{why}",
            step.n,
            step.kind.as_str(),
            step.title,
            step.host
                .as_deref()
                .map(|h| format!(" [{h}]"))
                .unwrap_or_default(),
            now.0
        ));
        *last = now;
    }
}

fn summarise(
    d: &Driver,
    journal: PathBuf,
    env: String,
    took: Duration,
    mask: &hk_engine::redact::Redactor,
) -> Report {
    let a = &d.session;
    let outcome = a.run.outcome();
    let steps = a
        .run
        .steps()
        .map(|(s, r)| StepLine {
            n: s.n,
            id: s.id.clone(),
            kind: s.kind.as_str().to_string(),
            host: s.host.clone(),
            title: mask.redact(&s.title),
            mutates: s.mutates,
            state: r.state.name().to_string(),
            attempts: r.attempt,
            seconds: match (r.started_at, r.finished_at) {
                (Some(s), Some(f)) => Some(f.0.saturating_sub(s.0) as f64 / 1000.0),
                _ => None,
            },
            detail: match &r.state {
                StepState::Failed { reason } | StepState::Skipped { reason } => {
                    Some(mask.redact(reason))
                }
                _ => r.detail.as_deref().map(|d| mask.redact(d)),
            },
            gate: r.gate.as_ref().map(|g| {
                let kind = s
                    .gate
                    .as_ref()
                    .map(gate_name)
                    .unwrap_or_else(|| "gate".into());
                format!("{kind} by {}", g.by)
            }),
        })
        .collect();
    let failed_output = match a.run.status() {
        RunStatus::Halted { n } => d
            .output
            .get(n)
            .map(|lines| lines.iter().cloned().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Report {
        runbook: a.run.plan().runbook.clone(),
        env,
        outcome: outcome.to_string(),
        succeeded: matches!(
            outcome,
            RunOutcome::Succeeded | RunOutcome::SucceededWithOverrides
        ),
        journal,
        seconds: took.as_secs_f64(),
        steps,
        failed_output,
    }
}
