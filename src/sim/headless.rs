//! `hk-console demo --headless --run RUNBOOK`: one runbook driven through the console's own
//! [`App`] against the simulation, with no terminal, and its journal summarised.
//!
//! Owns: the loop between the app and the executor task (the same requests and replies the
//! console's event loop carries), the simulated operator who answers each gate the way the
//! runbook asks (types the host count the list-hosts step printed, types the environment's
//! name, approves, confirms a manual step), and the summary of the journal it leaves.
//! Must not: run anywhere but a [`Demo`]: the operator it simulates says yes to every gate,
//! so it is a rehearsal and an end-to-end test, never a way to run prod unattended. It
//! retries nothing: a failed step halts the run there, as it would for a person.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc;

use super::demo::Demo;
use crate::cluster::KubeOverrides;
use crate::repo::Repo;
use crate::runbook::embedded::RunbookSet;
use crate::runbook::machine::{GateAnswer, Input, RunOutcome, RunStatus, StepState};
use crate::runbook::plan::Gate;
use crate::session::exec::{executor_task, ExecReply, ExecRequest};
use crate::session::executors::{capabilities_with, Clusters};
use crate::ui::app::{App, AppParts, EnvSummary, Overlay};
use crate::ui::RepoPlans;

/// Who answers the gates of a headless run, as the journal records it.
pub const OPERATOR: &str = "simulated-operator";

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

/// Drive `req` through a console app on `demo`, journaling under `runs_dir`. `progress`
/// gets one line per step change and per gate answered, as they happen.
pub async fn drive(
    demo: &Demo,
    runbooks: RunbookSet,
    req: &HeadlessRun,
    runs_dir: &Path,
    mut progress: impl FnMut(&str),
) -> Result<Report, HeadlessError> {
    let open_err = |why: String| HeadlessError::Open {
        runbook: req.runbook.clone(),
        why,
    };
    let repo = Repo::load(&demo.dir).map_err(|e| open_err(e.to_string()))?;
    let clusters = Arc::new(Clusters::for_repo(&repo, &KubeOverrides::default()));
    let (caps, notices) = capabilities_with(&repo, false, clusters, &demo.exec_setup());
    for n in &notices {
        progress(&format!("notice: {n}"));
    }
    let parts = AppParts {
        environments: repo.environments.iter().map(EnvSummary::from).collect(),
        runbooks,
        plans: Arc::new(RepoPlans { repo }),
        runs_dir: Some(runs_dir.to_path_buf()),
        themes: crate::ui::theme::ThemeSet::builtin(),
        theme: None,
        keymaps: Default::default(),
        config_warnings: Vec::new(),
        no_color: true,
        operator: OPERATOR.to_string(),
        now: crate::journal::now(),
        // The simulated operator runs the runbook; it injects no faults.
        faults: None,
    };
    let mut app = App::operate(parts, caps);
    app.open_runbook(&req.runbook, req.env.as_deref(), req.host.as_deref());
    if app.active.is_none() {
        return Err(open_err(
            app.status.clone().unwrap_or_else(|| "no plan".into()),
        ));
    }
    // Each step's (state, attempt) as last reported: every step starts pending.
    let mut seen: Vec<(&'static str, u32)> = app
        .active
        .as_ref()
        .map(|a| {
            a.run
                .steps()
                .map(|(_, r)| (r.state.name(), r.attempt))
                .collect()
        })
        .unwrap_or_default();
    app.now = crate::journal::now();
    app.update(crate::ui::action::Action::StartRun);
    let journal = match app.active.as_ref().and_then(|a| a.journal.as_ref()) {
        Some(j) => j.path().to_path_buf(),
        None => {
            return Err(HeadlessError::Start {
                runbook: req.runbook.clone(),
                why: app.status.clone().unwrap_or_else(|| "no journal".into()),
            })
        }
    };
    let env = app
        .active
        .as_ref()
        .map(|a| a.run.plan().env.clone())
        .unwrap_or_default();
    progress(&format!(
        "{}: {} for {env}, journal {}",
        OPERATOR,
        req.runbook,
        journal.display()
    ));

    let (req_tx, req_rx) = mpsc::channel::<ExecRequest>(64);
    let (rep_tx, mut rep_rx) = mpsc::channel::<ExecReply>(1024);
    let task = tokio::spawn(executor_task(
        Arc::clone(app.capabilities()),
        req_rx,
        rep_tx,
    ));
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + req.deadline;
    let mut answered: Vec<usize> = Vec::new();
    let mut result = Ok(());
    loop {
        app.now = crate::journal::now();
        report_changes(&app, &mut seen, &mut progress);
        while let Some(r) = app.outbox.pop_front() {
            if req_tx.send(r).await.is_err() {
                break;
            }
        }
        let Some(a) = app.active.as_ref() else { break };
        let status = a.run.status().clone();
        let in_flight = !a.run.in_flight().is_empty();
        if !in_flight && !matches!(status, RunStatus::Active { .. } | RunStatus::NotStarted) {
            break;
        }
        if let Some(Overlay::Gate(m)) = &app.overlay {
            let (n, gate) = (m.n, m.gate.clone());
            if answered.contains(&n) {
                // The same gate is still open after an answer: say why and stop.
                let why = m.error.clone().unwrap_or_else(|| "still open".into());
                abort(
                    &mut app,
                    &format!("the simulated answer to step {n}'s gate did not open it: {why}"),
                );
                continue;
            }
            answered.push(n);
            let input = answer(&app, n, &gate);
            progress(&format!(
                "step {n}: gate {} answered by {OPERATOR}",
                gate_name(&gate)
            ));
            app.feed(input);
            continue;
        }
        match tokio::time::timeout_at(deadline, rep_rx.recv()).await {
            Ok(Some(reply)) => {
                app.now = crate::journal::now();
                app.handle_exec(reply);
            }
            Ok(None) => {
                let step = match status {
                    RunStatus::Active { n } | RunStatus::Halted { n } => n,
                    _ => 0,
                };
                result = Err(HeadlessError::ExecutorGone { step });
                break;
            }
            Err(_) => {
                progress(&format!(
                    "deadline of {} s passed: cancelling and aborting the run",
                    req.deadline.as_secs()
                ));
                // Cancel what is in flight, wait briefly for the executor to say so, abort.
                app.now = crate::journal::now();
                if app.cancel_in_flight() {
                    let grace = tokio::time::Instant::now() + Duration::from_secs(10);
                    while app.has_in_flight() {
                        while let Some(r) = app.outbox.pop_front() {
                            let _ = req_tx.send(r).await;
                        }
                        match tokio::time::timeout_at(grace, rep_rx.recv()).await {
                            Ok(Some(reply)) => {
                                app.now = crate::journal::now();
                                app.handle_exec(reply);
                            }
                            _ => break,
                        }
                    }
                }
                abort(
                    &mut app,
                    &format!(
                        "the headless run's deadline ({} s) passed",
                        req.deadline.as_secs()
                    ),
                );
                report_changes(&app, &mut seen, &mut progress);
                break;
            }
        }
    }
    task.abort();
    result?;
    Ok(summarise(&app, journal, env, started.elapsed()))
}

/// Journal an abort by the simulated operator.
fn abort(app: &mut App, reason: &str) {
    app.now = crate::journal::now();
    app.feed(Input::Abort {
        by: OPERATOR.into(),
        reason: reason.into(),
    });
}

/// What the simulated operator answers to step `n`'s gate: what a person reading the
/// modal would type or press.
fn answer(app: &App, n: usize, gate: &Gate) -> Input {
    let note = Some("answered by hk-console demo --headless (simulated operator)".to_string());
    match gate {
        Gate::ConfirmHosts { expected } => {
            // The count of the hosts the list-hosts step printed, as shown in the modal.
            let shown = app
                .active
                .as_ref()
                .and_then(|a| a.run.step_record(n))
                .and_then(|r| r.observed_hosts.as_ref())
                .map_or(expected.len(), Vec::len);
            Input::TypedText {
                n,
                by: OPERATOR.into(),
                text: shown.to_string(),
                note,
            }
        }
        Gate::TypedConfirm { phrase } => Input::TypedText {
            n,
            by: OPERATOR.into(),
            text: phrase.clone(),
            note,
        },
        Gate::OperatorPresent | Gate::Authorise { .. } | Gate::ApproveDiff | Gate::ConfirmDone => {
            Input::GateAnswered {
                n,
                answer: GateAnswer::Approved {
                    by: OPERATOR.into(),
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
fn report_changes(app: &App, seen: &mut [(&'static str, u32)], progress: &mut impl FnMut(&str)) {
    let Some(a) = app.active.as_ref() else { return };
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

fn summarise(app: &App, journal: PathBuf, env: String, took: Duration) -> Report {
    let Some(a) = app.active.as_ref() else {
        return Report {
            runbook: String::new(),
            env,
            outcome: "no run".into(),
            succeeded: false,
            journal,
            seconds: took.as_secs_f64(),
            steps: Vec::new(),
            failed_output: Vec::new(),
        };
    };
    let outcome = a.run.outcome();
    let steps = a
        .run
        .steps()
        .map(|(s, r)| StepLine {
            n: s.n,
            id: s.id.clone(),
            kind: s.kind.as_str().to_string(),
            host: s.host.clone(),
            title: s.title.clone(),
            mutates: s.mutates,
            state: r.state.name().to_string(),
            attempts: r.attempt,
            seconds: match (r.started_at, r.finished_at) {
                (Some(s), Some(f)) => Some(f.0.saturating_sub(s.0) as f64 / 1000.0),
                _ => None,
            },
            detail: match &r.state {
                StepState::Failed { reason } | StepState::Skipped { reason } => {
                    Some(reason.clone())
                }
                _ => r.detail.clone(),
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
        RunStatus::Halted { n } => {
            let from = a.step_output_start.get(n).copied().unwrap_or(0);
            let lines: Vec<String> = a.output.since(from).map(str::to_string).collect();
            lines[lines.len().saturating_sub(20)..].to_vec()
        }
        _ => Vec::new(),
    };
    Report {
        runbook: a.run.plan().runbook.clone(),
        env,
        outcome: outcome.to_string(),
        succeeded: outcome == RunOutcome::Succeeded,
        journal,
        seconds: took.as_secs_f64(),
        steps,
        failed_output,
    }
}
