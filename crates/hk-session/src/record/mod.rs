//! The change record of a run: what ran, where, in what order, each gate with who answered
//! it, when and the note, every operator decision, the previews (diffs) and the last lines
//! of each step's output, the health-gate results, what changed on the platform while it
//! ran (the Live screen's event trail, kept beside the journal) and the final state.
//!
//! Owns: [`RunRecord`] built from a journal, its output log and its event trail (a damaged journal is
//! salvaged: the record says where the damage is and shows what the intact lines say), and
//! its three renderings: text (the terminal), Markdown (what the operator pastes into the
//! infra repo's change log) and JSON (`serde`). `hk-console runs list|show` and the
//! console's Recent runs read runs through here.
//! Must not: write anything (a damaged journal's copy is `journal::salvage`'s business) or
//! resume a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use hk_engine::journal::{self, JournalError, OutputRecord, Replayed};
use hk_engine::runbook::machine::{
    GateAnswer, Input, Mode, RunLockNote, RunOutcome, StepState, Timestamp,
};
use hk_engine::runbook::plan::{
    Gate, GateSource, PlannedStep, StepKind, HEALTH_GATE, NODE_DISRUPTION,
};
use hk_engine::text::visible;

/// How many of a step's last output lines a record keeps.
pub const TAIL_LINES: usize = 8;
/// How many lines of a preview (a `--check --diff` run) a record keeps: the diff is the
/// point of the preview.
pub const PREVIEW_LINES: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Journal(#[from] JournalError),
    #[error("no run `{run}` in {dir} (`hk-console runs list` shows the runs there)")]
    NoSuchRun { run: String, dir: PathBuf },
    #[error("`{run}` names {count} runs in {dir}: {ids}; give more of the id")]
    Ambiguous {
        run: String,
        dir: PathBuf,
        count: usize,
        ids: String,
    },
}

/// One gate as it was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GateEntry {
    /// The kind of gate (`approve-diff`, `typed-confirm`, ...).
    pub kind: String,
    /// Whose gate: the runbook's or the environment's policy.
    pub source: Option<String>,
    pub by: String,
    pub at: Timestamp,
    pub note: Option<String>,
}

/// One operator decision, in journal order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub at: Timestamp,
    pub step: Option<usize>,
    pub by: String,
    /// `approved`, `rejected`, `typed`, `skipped`, `retry`, `rerun`, `marked-done`,
    /// `cancel`, `aborted`, `run-lock` (the cluster's run lock taken, taken over, lost,
    /// released or not used).
    pub what: String,
    /// The note or reason given, if any.
    pub note: Option<String>,
}

/// One step of the plan and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepEntry {
    pub n: usize,
    pub id: String,
    pub kind: String,
    pub host: Option<String>,
    pub title: String,
    pub mutates: bool,
    /// `done`, `failed`, `skipped`, `interrupted`, `pending`, ...
    pub state: String,
    /// Why it failed, was skipped or interrupted.
    pub reason: Option<String>,
    pub attempts: u32,
    pub started: Option<Timestamp>,
    pub finished: Option<Timestamp>,
    pub exit_code: Option<i32>,
    /// The verification's last word (a health gate's verdict, a host set that matched).
    pub detail: Option<String>,
    pub gate: Option<GateEntry>,
    /// What the step's gate showed of the live cluster when it was answered or refused (the
    /// live blast radius: VIP holder, etcd leader, quorum), as journaled; empty when it
    /// showed none (a step that changes no host, or a journal from before gates showed it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gate_live: Vec<String>,
    /// A preview (`--check --diff`, a Flux preview): its output is kept in full (capped).
    pub preview: bool,
    /// A guard-rail step (the health gate between hosts, the look before a disruption).
    pub guard: Option<String>,
    /// The last lines of its output (of its last attempt), or the whole preview.
    pub output: Vec<String>,
    /// Lines of output left out above.
    pub output_cut: usize,
}

/// A run, as a change record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    pub run_id: String,
    pub runbook: String,
    pub env: String,
    pub mode: String,
    pub operator: String,
    pub started: Timestamp,
    pub finished: Option<Timestamp>,
    pub outcome: String,
    pub journal: PathBuf,
    /// Where the journal is damaged: the record shows what the lines before it say.
    pub damage: Option<String>,
    pub warnings: Vec<String>,
    /// Why the output log could not be read, if it could not (the record is still shown).
    pub output_error: Option<String>,
    pub steps: Vec<StepEntry>,
    /// What the operator went past, per step (marked done, skipped, quorum overridden),
    /// with who and why: any makes the outcome "succeeded with overrides".
    pub overrides: Vec<String>,
    pub decisions: Vec<Decision>,
    /// What changed on the platform while the run was active (the Live screen's event
    /// trail for its environment), in time order.
    pub events: Vec<hk_effects::observe::timeline::TrailEvent>,
    /// Why the event trail could not be read, if it could not (the record is still shown).
    pub events_error: Option<String>,
}

fn gate_kind(g: &Gate) -> &'static str {
    match g {
        Gate::OperatorPresent => "operator-present",
        Gate::TypedConfirm { .. } => "typed-confirm",
        Gate::Authorise { .. } => "authorise",
        Gate::ConfirmHosts { .. } => "confirm-hosts",
        Gate::ApproveDiff => "approve-diff",
        Gate::ConfirmDone => "confirm-done",
    }
}

fn is_preview(s: &PlannedStep) -> bool {
    let check = s.kind == StepKind::Ansible
        && !s.mutates
        && s.command
            .as_ref()
            .is_some_and(|c| c.iter().any(|a| a == "--check"));
    let flux = s
        .expect
        .as_ref()
        .and_then(|e| e.condition.as_deref())
        .is_some_and(|c| c.starts_with(hk_engine::runbook::plan::FLUX_PREVIEW));
    check || flux
}

fn guard_of(s: &PlannedStep) -> Option<String> {
    let c = s.expect.as_ref()?.condition.as_deref()?;
    if c.starts_with(HEALTH_GATE) {
        Some("health gate between hosts".into())
    } else if c.starts_with(NODE_DISRUPTION) {
        Some("what the node carries before it is taken away".into())
    } else if c.starts_with(hk_engine::runbook::plan::ETCD_SNAPSHOT) {
        Some("etcd's snapshot before the first server changes".into())
    } else {
        match hk_engine::runbook::plan::LeaderAway::parse(c) {
            Some(Ok(a)) if a.preview => Some("who leads etcd before the server changes".into()),
            Some(Ok(_)) => Some("etcd's leadership off the server before it changes".into()),
            _ => None,
        }
    }
}

fn state_and_reason(s: &StepState) -> (String, Option<String>) {
    match s {
        StepState::Done => ("done".into(), None),
        StepState::Failed { reason } => ("failed".into(), Some(reason.clone())),
        StepState::Skipped { reason } => ("skipped".into(), Some(reason.clone())),
        StepState::Interrupted { during } => (
            "interrupted".into(),
            Some(
                match during {
                    hk_engine::runbook::machine::InFlight::Running => "while running",
                    hk_engine::runbook::machine::InFlight::Verifying => "while verifying",
                }
                .to_string(),
            ),
        ),
        other => (other.name().to_string(), None),
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Operate => "operate",
        Mode::Observe => "observe",
    }
}

/// The operator decision a journaled input is, if it is one: (its step, who, what, the
/// note). `operator` answers for what the run's lock did on its own (lost, released): the
/// lock's holder where the journal says who took it.
fn decision_of<'a>(
    input: &'a Input,
    operator: &'a str,
) -> Option<(Option<usize>, &'a str, &'static str, Option<String>)> {
    Some(match input {
        Input::GateAnswered { n, answer } => match answer {
            GateAnswer::Approved { by, note } => (Some(*n), by, "approved", note.clone()),
            GateAnswer::Rejected { by, reason } => (Some(*n), by, "rejected", Some(reason.clone())),
        },
        Input::TypedText { n, by, note, .. } => (Some(*n), by, "typed", note.clone()),
        Input::Skip { n, by, reason } => (Some(*n), by, "skipped", Some(reason.clone())),
        Input::RetryApproved { n, by } => (Some(*n), by, "retry", None),
        Input::RerunApproved { n, by, typed } => {
            (Some(*n), by, "rerun", Some(format!("typed {typed}")))
        }
        Input::MarkedDone {
            n,
            by,
            typed,
            reason,
        } => (
            Some(*n),
            by,
            "marked-done",
            Some(format!("typed {typed}: {reason}")),
        ),
        // What the console learnt and how the run stopped are in the same order as what
        // the operator decided on them.
        Input::ProbeResult {
            n,
            probe,
            ok,
            detail,
        } => (
            Some(*n),
            "hk-console",
            "probe",
            Some(format!(
                "step {probe} said {}: {detail}",
                if *ok { "OK" } else { "NOT OK" }
            )),
        ),
        Input::Abandoned { reason } => (None, operator, "abandoned", Some(reason.clone())),
        Input::Resumed => (None, operator, "resumed", None),
        Input::CancelRequested { n, by } => (Some(*n), by, "cancel", None),
        Input::Abort { by, reason } => (None, by, "aborted", Some(reason.clone())),
        Input::RunLock { note } => {
            let by = match note {
                RunLockNote::Taken { holder, .. } => holder.as_str(),
                RunLockNote::TookOver { by, .. }
                | RunLockNote::TakenOverBy { by, .. }
                | RunLockNote::Disabled { by } => by.as_str(),
                RunLockNote::Lost { .. } | RunLockNote::Released => operator,
            };
            (None, by, "run-lock", Some(note.to_string()))
        }
        _ => return None,
    })
}

/// The record of a replayed run, with its output log (or why it could not be read).
pub fn build(
    r: &Replayed,
    damage: Option<&journal::Damage>,
    output: Result<Vec<OutputRecord>, JournalError>,
) -> RunRecord {
    let (output, output_error) = match output {
        Ok(o) => (o, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let mut by_step: BTreeMap<usize, Vec<&OutputRecord>> = BTreeMap::new();
    for o in &output {
        by_step.entry(o.n).or_default().push(o);
    }
    // What each gate showed of the live cluster: the last look journaled before its answer.
    let mut shown: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for rec in &r.records {
        if let Input::GateShown { n, lines } = &rec.input {
            shown.insert(*n, lines.clone());
        }
    }
    let mut steps = Vec::new();
    for (p, rec) in r.run.steps() {
        let (state, reason) = state_and_reason(&rec.state);
        let preview = is_preview(p);
        // The last attempt's lines only: an earlier attempt's output is not what stands.
        let lines: Vec<String> = by_step
            .get(&p.n)
            .map(|v| {
                let last = v.iter().map(|o| o.attempt).max().unwrap_or(0);
                v.iter()
                    .filter(|o| o.attempt == last)
                    .map(|o| hk_engine::text::output_line(&o.line).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let keep = if preview { PREVIEW_LINES } else { TAIL_LINES };
        let cut = lines.len().saturating_sub(keep);
        let gate = match (&p.gate, &rec.gate) {
            (Some(g), Some(answer)) => Some(GateEntry {
                kind: gate_kind(g).into(),
                source: p.source.map(|s| match s {
                    GateSource::Policy => "policy".into(),
                    GateSource::Runbook => "runbook".into(),
                }),
                by: answer.by.clone(),
                at: answer.at,
                note: answer.note.clone(),
            }),
            _ => None,
        };
        steps.push(StepEntry {
            n: p.n,
            id: p.id.clone(),
            kind: p.kind.as_str().into(),
            host: p.host.clone(),
            title: visible(&p.title).into_owned(),
            mutates: p.mutates,
            state,
            reason,
            attempts: rec.attempt,
            started: rec.started_at,
            finished: rec.finished_at,
            exit_code: rec.exit_code,
            detail: rec.detail.clone(),
            gate,
            gate_live: shown.get(&p.n).cloned().unwrap_or_default(),
            preview,
            guard: guard_of(p),
            output: lines[cut..].to_vec(),
            output_cut: cut,
        });
    }
    // A lock released or lost is the doing of whoever holds it (`login@host`, as the take
    // recorded), not of the run's operator name (a headless run's `simulated-operator`).
    let mut holder: Option<String> = None;
    let mut decisions = Vec::new();
    for rec in &r.records {
        if let Input::RunLock { note } = &rec.input {
            match note {
                RunLockNote::Taken { holder: h, .. } => holder = Some(h.clone()),
                RunLockNote::TookOver { by, .. } => holder = Some(by.clone()),
                _ => {}
            }
        }
        let who = holder.as_deref().unwrap_or(&r.header.operator);
        if let Some((step, by, what, note)) = decision_of(&rec.input, who) {
            decisions.push(Decision {
                at: rec.at,
                step,
                by: by.to_string(),
                what: what.to_string(),
                note,
            });
        }
    }
    RunRecord {
        run_id: r.header.run_id.clone(),
        runbook: r.header.runbook.clone(),
        env: r.header.env.clone(),
        mode: mode_name(r.header.mode).into(),
        operator: r.header.operator.clone(),
        started: r.header.started_at,
        finished: r.run.finished_at(),
        outcome: r.run.outcome().to_string(),
        journal: r.path.clone(),
        damage: damage.map(|d| d.to_string()),
        warnings: r.warnings.iter().map(|w| w.to_string()).collect(),
        output_error,
        steps,
        overrides: r
            .run
            .overrides()
            .into_iter()
            .map(|(n, what)| format!("step {n}: {what}"))
            .collect(),
        decisions,
        events: Vec::new(),
        events_error: None,
    }
}

/// The record of the journal at `path` (salvaged if damaged).
pub fn load_path(path: &Path) -> Result<RunRecord, RecordError> {
    let (r, damage) = journal::salvage(path)?;
    let mut rec = build(&r, damage.as_ref(), journal::read_output(path));
    match hk_effects::observe::timeline::read_trail(path) {
        Ok(mut events) => {
            // Written as each look answered; a look may answer late: shown by time.
            events.sort_by_key(|e| e.at);
            rec.events = events;
        }
        Err(e) => rec.events_error = Some(e.to_string()),
    }
    Ok(rec)
}

/// The record of run `run` in `dir`: its id, or a unique prefix of it.
pub fn load(dir: &Path, run: &str) -> Result<RunRecord, RecordError> {
    let list = journal::list_runs(dir)?;
    let exact: Vec<_> = list.runs.iter().filter(|s| s.run_id == run).collect();
    let found: Vec<_> = if exact.is_empty() {
        list.runs
            .iter()
            .filter(|s| s.run_id.starts_with(run))
            .collect()
    } else {
        exact
    };
    match found.as_slice() {
        [one] => load_path(&one.path),
        [] => Err(RecordError::NoSuchRun {
            run: run.to_string(),
            dir: dir.to_path_buf(),
        }),
        many => Err(RecordError::Ambiguous {
            run: run.to_string(),
            dir: dir.to_path_buf(),
            count: many.len(),
            ids: many
                .iter()
                .map(|s| s.run_id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// One line of `runs list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedRun {
    pub run_id: String,
    pub runbook: String,
    pub env: String,
    pub mode: String,
    pub operator: String,
    pub started: Timestamp,
    pub outcome: String,
    pub damage: Option<String>,
    /// Why the outcome is not what the journal's last line says (a run no console holds
    /// any more is interrupted, not in progress).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub journal: PathBuf,
}

/// Every run in `dir`, newest first, and the journals that could not be read (named).
pub fn list(dir: &Path) -> Result<(Vec<ListedRun>, Vec<String>), RecordError> {
    let l = journal::list_runs(dir)?;
    let runs = l
        .runs
        .into_iter()
        .map(|s| ListedRun {
            run_id: s.run_id,
            runbook: s.runbook,
            env: s.env,
            mode: mode_name(s.mode).into(),
            operator: s.operator,
            started: s.started,
            outcome: s.outcome.to_string(),
            damage: s.damage.map(|d| d.to_string()),
            why: s.why,
            journal: s.path,
        })
        .collect();
    Ok((runs, l.unreadable.iter().map(|e| e.to_string()).collect()))
}

/// `runs list` as text: one line per run.
pub fn render_list(runs: &[ListedRun], unreadable: &[String]) -> String {
    let mut out = String::new();
    for r in runs {
        let _ = write!(
            out,
            "{}  {:<11}  {} {} by {} ({})",
            r.started,
            plain(&r.outcome),
            plain(&r.runbook),
            plain(&r.env),
            plain(&r.operator),
            plain(&r.run_id)
        );
        if let Some(w) = &r.why {
            let _ = write!(out, "  ({})", plain(w));
        }
        if let Some(d) = &r.damage {
            let _ = write!(out, "  DAMAGED: {}", plain(d));
        }
        out.push('\n');
    }
    for u in unreadable {
        let _ = writeln!(out, "unreadable: {}", plain(u));
    }
    out
}

fn on(host: &Option<String>) -> String {
    host.as_ref()
        .map(|h| format!(" on {h}"))
        .unwrap_or_default()
}

/// How a rendering writes a value that came from the journal: [`plain`] for the terminal,
/// [`md_cell`] for Markdown.
type Esc = fn(&str) -> String;

/// A journal value for the terminal: every control and bidi character written out
/// ([`visible`]; a line break too, so a note cannot forge a line of the record).
fn plain(s: &str) -> String {
    visible(s).into_owned()
}

fn gate_line(g: &GateEntry, esc: Esc) -> String {
    let from = match g.source.as_deref() {
        Some("policy") => " (from the gate policy)",
        _ => "",
    };
    let note = g
        .note
        .as_ref()
        .filter(|n| !n.trim().is_empty())
        .map(|n| format!(": \"{}\"", esc(n)))
        .unwrap_or_default();
    format!(
        "{}{from} answered by {} at {}{note}",
        esc(&g.kind),
        esc(&g.by),
        g.at
    )
}

impl RunRecord {
    fn headline(&self) -> String {
        format!("{} on {}: {}", self.runbook, self.env, self.outcome)
    }

    /// For the terminal.
    pub fn render_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}", plain(&self.headline()));
        let _ = writeln!(
            o,
            "run {} · {} mode · operator {} · started {}{}",
            plain(&self.run_id),
            plain(&self.mode),
            plain(&self.operator),
            self.started,
            self.finished
                .map(|t| format!(" · finished {t}"))
                .unwrap_or_default()
        );
        let _ = writeln!(o, "journal {}", plain(&self.journal.display().to_string()));
        if let Some(d) = &self.damage {
            let _ = writeln!(
                o,
                "DAMAGED JOURNAL: {}; what follows is what the lines before it say",
                plain(d)
            );
        }
        for w in &self.warnings {
            let _ = writeln!(o, "warning: {}", plain(w));
        }
        if let Some(e) = &self.output_error {
            let _ = writeln!(o, "output log unreadable: {}", plain(e));
        }
        for s in &self.steps {
            let _ = writeln!(
                o,
                "{:>3} {:<11} {:<14} {}{}{}",
                s.n,
                plain(&s.state),
                plain(&s.kind),
                plain(&s.title),
                plain(&on(&s.host)),
                if s.mutates { " [mutates]" } else { "" }
            );
            if let Some(r) = &s.reason {
                let _ = writeln!(o, "      {}", plain(r));
            }
            if let Some(g) = &s.gate {
                let _ = writeln!(o, "      gate: {}", gate_line(g, plain));
            }
            if !s.gate_live.is_empty() {
                let _ = writeln!(o, "      live at its gate:");
                for l in &s.gate_live {
                    let _ = writeln!(o, "        {}", plain(l));
                }
            }
            if let Some(d) = &s.detail {
                let _ = writeln!(o, "      {}", plain(d));
            }
            if s.output_cut > 0 {
                let _ = writeln!(o, "      | ... {} line(s) before", s.output_cut);
            }
            for l in &s.output {
                let _ = writeln!(o, "      | {}", plain(l));
            }
        }
        if !self.overrides.is_empty() {
            let _ = writeln!(o, "overrides:");
            for v in &self.overrides {
                let _ = writeln!(o, "  {}", plain(v));
            }
        }
        if !self.decisions.is_empty() {
            let _ = writeln!(o, "decisions:");
            for d in &self.decisions {
                let _ = writeln!(o, "  {}", decision_line(d, plain));
            }
        }
        if let Some(e) = &self.events_error {
            let _ = writeln!(o, "event trail unreadable: {}", plain(e));
        }
        if !self.events.is_empty() {
            let _ = writeln!(o, "events during the run:");
            for e in &self.events {
                let _ = writeln!(o, "  {}", plain(&event_line(e)));
            }
        }
        o
    }

    /// For the infra repo's change log.
    pub fn render_md(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "### {}", md_cell(&self.headline()));
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "- run: `{}` ({} mode)",
            md_code(&self.run_id),
            md_cell(&self.mode)
        );
        let _ = writeln!(o, "- operator: {}", md_cell(&self.operator));
        let _ = writeln!(o, "- started: {}", self.started);
        if let Some(t) = self.finished {
            let _ = writeln!(o, "- finished: {t}");
        }
        if let Some(d) = &self.damage {
            let _ = writeln!(
                o,
                "- **damaged journal**: {}; the record shows what the lines before it say",
                md_cell(d)
            );
        }
        for w in &self.warnings {
            let _ = writeln!(o, "- warning: {}", md_cell(w));
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "| # | step | host | state | gate |");
        let _ = writeln!(o, "|---|---|---|---|---|");
        for s in &self.steps {
            let gate = s
                .gate
                .as_ref()
                .map(|g| gate_line(g, md_cell))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "| {} | {}{} | {} | {} | {} |",
                s.n,
                md_cell(&s.title),
                if s.mutates { " **(mutates)**" } else { "" },
                md_cell(s.host.as_deref().unwrap_or("-")),
                md_cell(&s.state),
                gate
            );
        }
        let live: Vec<&StepEntry> = self
            .steps
            .iter()
            .filter(|s| !s.gate_live.is_empty())
            .collect();
        if !live.is_empty() {
            let _ = writeln!(o);
            let _ = writeln!(o, "#### What the gates showed of the live cluster");
            for s in live {
                let _ = writeln!(o);
                let answered = s
                    .gate
                    .as_ref()
                    .map(|g| {
                        format!(
                            "{} answered by {} at {}",
                            md_cell(&g.kind),
                            md_cell(&g.by),
                            g.at
                        )
                    })
                    .unwrap_or_else(|| "not answered".into());
                let _ = writeln!(o, "Step {}{} ({answered}):", s.n, md_cell(&on(&s.host)));
                let _ = writeln!(o);
                for l in &s.gate_live {
                    let _ = writeln!(o, "- {}", md_cell(l));
                }
            }
        }
        let guards: Vec<&StepEntry> = self.steps.iter().filter(|s| s.guard.is_some()).collect();
        if !guards.is_empty() {
            let _ = writeln!(o);
            let _ = writeln!(o, "#### Guard rails");
            let _ = writeln!(o);
            for s in guards {
                let verdict = s
                    .detail
                    .clone()
                    .or_else(|| s.reason.clone())
                    .unwrap_or_else(|| s.state.clone());
                let _ = writeln!(
                    o,
                    "- step {} ({}{}): {}: {}",
                    s.n,
                    md_cell(s.guard.as_deref().unwrap_or_default()),
                    md_cell(&on(&s.host)),
                    md_cell(&s.state),
                    md_cell(&verdict)
                );
            }
        }
        if !self.overrides.is_empty() {
            let _ = writeln!(o);
            let _ = writeln!(o, "#### Overrides");
            let _ = writeln!(o);
            for v in &self.overrides {
                let _ = writeln!(o, "- {}", md_cell(v));
            }
        }
        if !self.decisions.is_empty() {
            let _ = writeln!(o);
            let _ = writeln!(o, "#### Decisions");
            let _ = writeln!(o);
            for d in &self.decisions {
                let _ = writeln!(o, "- {}", decision_line(d, md_cell));
            }
        }
        if self.events_error.is_some() || !self.events.is_empty() {
            let _ = writeln!(o);
            let _ = writeln!(o, "#### Events during the run");
            let _ = writeln!(o);
            if let Some(e) = &self.events_error {
                let _ = writeln!(o, "- event trail unreadable: {}", md_cell(e));
            }
            for e in &self.events {
                let _ = writeln!(o, "- {}", md_cell(&event_line(e)));
            }
        }
        let shown: Vec<&StepEntry> = self
            .steps
            .iter()
            .filter(|s| !s.output.is_empty() || s.reason.is_some())
            .collect();
        if !shown.is_empty() {
            let _ = writeln!(o);
            let _ = writeln!(o, "#### Output");
            for s in shown {
                let _ = writeln!(o);
                let what = if s.preview { "preview" } else { "last lines" };
                let _ = writeln!(
                    o,
                    "Step {} `{}`{} ({}), {what}:",
                    s.n,
                    md_code(&s.id),
                    md_cell(&on(&s.host)),
                    md_cell(&s.state)
                );
                if let Some(r) = &s.reason {
                    let _ = writeln!(o, "{}", md_cell(r));
                }
                if !s.output.is_empty() {
                    let _ = writeln!(o);
                    let _ = writeln!(o, "```text");
                    if s.output_cut > 0 {
                        let _ = writeln!(o, "... {} line(s) before", s.output_cut);
                    }
                    for l in &s.output {
                        // A line of output cannot end the fence: backtick runs are broken up.
                        let _ = writeln!(o, "{}", visible(l).replace('`', "'"));
                    }
                    let _ = writeln!(o, "```");
                }
            }
        }
        o
    }
}

fn event_line(e: &hk_effects::observe::timeline::TrailEvent) -> String {
    let kind = serde_json::to_value(e.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{:?}", e.kind));
    format!(
        "{} {} {} [{}]: {}",
        e.at,
        e.env,
        kind,
        e.severity,
        visible(&e.text)
    )
}

fn decision_line(d: &Decision, esc: Esc) -> String {
    let step = d.step.map(|n| format!("step {n}: ")).unwrap_or_default();
    let note = d
        .note
        .as_ref()
        .filter(|n| !n.trim().is_empty())
        .map(|n| format!(": \"{}\"", esc(n)))
        .unwrap_or_default();
    format!("{} {step}{} by {}{note}", d.at, esc(&d.what), esc(&d.by))
}

/// A journal value safe inside Markdown (a table cell, a list item, a heading): one line,
/// every control and bidi character written out ([`visible`]), and the characters
/// Markdown acts on (table pipes, emphasis, code spans, links, HTML) escaped, so a value
/// cannot end its cell, open a code block or a link, or hide itself in a tag.
fn md_cell(s: &str) -> String {
    let one_line = s.replace(['\n', '\r'], " ");
    let shown = visible(&one_line);
    let mut out = String::with_capacity(shown.len() + 8);
    let mut prev = None;
    for (i, c) in shown.chars().enumerate() {
        match c {
            '\\' | '|' | '`' | '*' | '#' => {
                out.push('\\');
                out.push(c);
            }
            // Tags and autolinks need `<`: `[warn]` and `->` stay as they read.
            '<' => out.push_str("&lt;"),
            // A link needs `](`; a reference definition needs a `[` that starts the line.
            '(' if prev == Some(']') => out.push_str("\\("),
            '[' if i == 0 => out.push_str("\\["),
            c => out.push(c),
        }
        prev = Some(c);
    }
    out
}

/// A journal value inside a Markdown code span (`` `id` ``): one line, visible, and no
/// backtick to end the span early.
fn md_code(s: &str) -> String {
    visible(&s.replace(['\n', '\r'], " ")).replace('`', "'")
}

/// Whether the run is over (the record is final).
pub fn is_final(r: &RunRecord) -> bool {
    r.outcome != RunOutcome::InProgress.to_string()
}

/// The header a step's output starts under, on the live run view and on a reopened one.
pub fn step_header(step: &PlannedStep) -> String {
    format!(
        "── step {} · {} · {} ──",
        step.n,
        step.kind.as_str(),
        step.title
    )
}

/// One attempt of a step's output, as the console's output pane shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOutput {
    pub n: usize,
    pub attempt: u32,
    pub header: String,
    pub lines: Vec<String>,
}

/// The whole output log of a run for the console's output pane when the run is reopened
/// from Recent runs: every attempt of every step, in the order it was written, under the
/// header the live run printed (a later attempt says which it was). Nothing is cut: the
/// record keeps tails, the pane keeps what its ring holds. Lines of a step the plan does
/// not have (a journal from another version) keep a header naming only the step number.
pub fn console_output(steps: &[PlannedStep], output: &[OutputRecord]) -> Vec<StepOutput> {
    let mut out: Vec<StepOutput> = Vec::new();
    for o in output {
        let same = out
            .last()
            .is_some_and(|s| s.n == o.n && s.attempt == o.attempt);
        if !same {
            let base = match steps.iter().find(|p| p.n == o.n) {
                Some(p) => step_header(p),
                None => format!("── step {} (not in this plan) ──", o.n),
            };
            let header = if o.attempt > 1 {
                format!("{base} attempt {}", o.attempt)
            } else {
                base
            };
            out.push(StepOutput {
                n: o.n,
                attempt: o.attempt,
                header,
                lines: Vec::new(),
            });
        }
        if let Some(s) = out.last_mut() {
            s.lines.push(o.line.clone());
        }
    }
    out
}

/// `runs show --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Md,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Format::Text),
            "md" | "markdown" => Ok(Format::Md),
            "json" => Ok(Format::Json),
            other => Err(format!(
                "unknown format `{other}` (expected one of: text, md, json)"
            )),
        }
    }
}

/// What `hk-console runs show RUN --format F` prints.
pub fn show(dir: &Path, run: &str, format: Format) -> Result<String, RecordError> {
    let r = load(dir, run)?;
    Ok(match format {
        Format::Text => r.render_text(),
        Format::Md => r.render_md(),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&r).unwrap_or_else(|e| {
                // Every field is a plain string, number or list: this cannot fail; if it
                // ever does, say so in the output rather than print nothing.
                format!("{{\"error\": \"cannot serialise the record: {e}\"}}")
            });
            s.push('\n');
            // The same JSON with the bidi and C1 characters serde_json leaves raw escaped.
            hk_engine::text::json_visible(&s).into_owned()
        }
    })
}

/// What `hk-console runs list [--json]` prints. Unreadable journals are listed (never
/// hidden): in the text after the runs, in JSON under `unreadable`.
pub fn show_list(dir: &Path, json: bool) -> Result<String, RecordError> {
    let (runs, unreadable) = list(dir)?;
    if json {
        let v = serde_json::json!({ "runs": runs, "unreadable": unreadable });
        Ok(hk_engine::text::json_visible(&format!("{v:#}\n")).into_owned())
    } else if runs.is_empty() && unreadable.is_empty() {
        Ok(format!("no runs in {}\n", dir.display()))
    } else {
        Ok(render_list(&runs, &unreadable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_an_unknown_one_is_named() {
        assert_eq!("md".parse::<Format>(), Ok(Format::Md));
        assert_eq!("json".parse::<Format>(), Ok(Format::Json));
        assert_eq!("text".parse::<Format>(), Ok(Format::Text));
        assert_eq!(
            "html".parse::<Format>(),
            Err("unknown format `html` (expected one of: text, md, json)".into())
        );
    }

    #[test]
    fn markdown_cells_stay_in_their_cell() {
        assert_eq!(md_cell("a | b\nc"), "a \\| b c");
        assert_eq!(
            md_cell("<img src=x> [l](u) `c` *e* # h -> [warn]"),
            "&lt;img src=x> [l]\\(u) \\`c\\` \\*e\\* \\# h -> [warn]"
        );
        assert_eq!(md_cell("[r]: https://x"), "\\[r]: https://x");
        assert_eq!(md_code("a`b\nc"), "a'b c");
    }

    /// Issue 34: what a journal holds (a gate's `by` and note, a decision's note, a step's
    /// title, the operator) reaches the terminal and the change log written out, never as
    /// the control characters that retitle or clear a terminal or reorder text, and never
    /// as Markdown that ends its table cell or starts a heading.
    #[test]
    fn journal_text_is_written_out_in_text_and_markdown() {
        let attack = "ann\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{202e}gnp.exe | x\n### forged";
        let gate = GateEntry {
            kind: "approve-diff".into(),
            source: Some("runbook".into()),
            by: attack.into(),
            at: Timestamp(1_788_782_400_000),
            note: Some(attack.into()),
        };
        let step = StepEntry {
            n: 1,
            id: "step`1".into(),
            kind: "ansible".into(),
            host: Some("k3s-prod-1".into()),
            title: "apply".into(),
            mutates: true,
            state: "failed".into(),
            reason: Some(attack.into()),
            attempts: 1,
            started: None,
            finished: None,
            exit_code: Some(2),
            detail: Some(attack.into()),
            gate: Some(gate),
            gate_live: vec![attack.into()],
            preview: false,
            guard: None,
            output: vec![format!("```{attack}")],
            output_cut: 0,
        };
        let rec = RunRecord {
            run_id: "r1".into(),
            runbook: "rb".into(),
            env: "prod".into(),
            mode: "operate".into(),
            operator: attack.into(),
            started: Timestamp(1_788_782_400_000),
            finished: None,
            outcome: "failed".into(),
            journal: PathBuf::from("/runs/r1.jsonl"),
            damage: None,
            warnings: vec![attack.into()],
            output_error: None,
            steps: vec![step],
            overrides: Vec::new(),
            decisions: vec![Decision {
                at: Timestamp(1_788_782_400_000),
                step: Some(1),
                by: attack.into(),
                what: "approved".into(),
                note: Some(attack.into()),
            }],
            events: Vec::new(),
            events_error: None,
        };
        for (name, out) in [("text", rec.render_text()), ("md", rec.render_md())] {
            for c in ['\u{1b}', '\u{7}', '\u{202e}', '\r'] {
                assert!(!out.contains(c), "{name}: raw {c:?} in:\n{out}");
            }
            let shown = if name == "md" {
                // Markdown escapes the backslashes of the written-out form.
                "\\\\e]0;PWNED\\\\x07\\\\e[2J\\\\u{202e}"
            } else {
                "\\e]0;PWNED\\x07\\e[2J\\u{202e}"
            };
            assert!(out.contains(shown), "{name}: {shown} not in:\n{out}");
            // The attack's line break is written out: no line of the record starts with it.
            assert!(
                !out.lines().any(|l| l.starts_with("### forged")),
                "{name}:\n{out}"
            );
        }
        let md = rec.render_md();
        let row = md
            .lines()
            .find(|l| l.starts_with("| 1 |"))
            .expect("the step's row");
        // Five cells: the row's own six pipes, every pipe of the data escaped.
        let bare = row.replace("\\|", "");
        assert_eq!(bare.matches('|').count(), 6, "{row}");
        assert!(
            !md.contains("\n```ann"),
            "the output cannot end its fence:\n{md}"
        );
    }
}
