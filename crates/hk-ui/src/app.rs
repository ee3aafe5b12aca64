//! The app: what the screen needs, and `update` (action -> new state + answers out).
//!
//! Owns: the one [`App`] the event loop updates and the views draw from: the selection,
//! the overlays (gate modals, the resume decision, confirmations, help, command line), the
//! open run's output ring ([`ActiveRun`]), the status line. The run itself is its
//! [`RunSession`]'s: the app forwards every operator answer and executor reply to it and
//! shows the [`SessionEffect`]s that come back (requests queue in [`App::outbox`] for the
//! loop's pump).
//! Must not: journal, dispatch or decide anything about a run (the session does), do
//! terminal IO, await, or talk to hosts. Time comes in through [`App::now`], set by the
//! loop's tick, so tests are deterministic.
//!
//! One file (over 800 lines): `update` is one match over the app's state and the overlays it
//! opens; the pieces that grew apart live beside it (looks.rs, check_screen.rs, panes/).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use hk_effects::exec::process::StopReport;
use hk_effects::observe::feed::Update;
use hk_engine::journal::{self, RunSummary};
use hk_engine::runbook::embedded::RunbookSet;
use hk_engine::runbook::machine::{GateAnswer, Input, Mode, RunOutcome, Timestamp};
use hk_engine::runbook::plan::Gate;

use super::action::Action;
use super::keymap::{Key, KeyMode, Keymaps};
use super::live::LiveState;
use super::output::OutputBuffer;
use super::theme::{Theme, ThemeSet, ThemeWarning};
use hk_session::exec::{Capabilities, ExecReply, ExecRequest, ReadOnlyExecutors};
use hk_session::{supervise, Opened, Session, SessionEffect};

/// Plans a runbook for an environment: the session's port, implemented over the repo (its
/// `PlanEnv`s and `Topology`); tests use a fake inventory.
pub use hk_session::PlanSource;

// The state's types, where the app's users have always found them.
pub use crate::state::check::CheckView;
use crate::state::field::single_line;
pub use crate::state::field::GateField;
pub use crate::state::look::{LookOverlay, LookRequest, LookView};
pub use crate::state::overlay::{
    gate_is_typed, Confirm, GateModal, Overlay, ReasonFor, ResumeModal, ResumeStage,
};
pub use crate::state::picker::HostPicker;
pub use crate::state::run::ActiveRun;
pub use crate::state::screens::{EnvSummary, HomeFocus, RunFocus, RunbookSummary, Screen};
pub use crate::state::takeover::{TakeoverKey, TakeoverModal};

mod access;
mod check_screen;
mod looks;
mod views;

pub use views::CheckScreenView;

/// What the status line says while a gate the operator hid with Esc is still open.
fn gate_reminder_text(n: usize) -> String {
    format!("gate of step {n} still open: enter to answer")
}

/// How often Home re-reads the runs directory while it is in view.
const RUNS_REREAD_MS: u64 = 3_000;

/// How many status lines the messages log keeps (the oldest go first).
pub const MESSAGES_KEPT: usize = 500;

/// A scroll position moved by one of the reading keys, within `0..=max` (what the view
/// last drew).
fn scrolled(at: usize, action: &Action, height: u16, max: usize) -> usize {
    let page = usize::from(height.saturating_sub(6)).max(1);
    let at = at.min(max);
    match action {
        Action::Up => at.saturating_sub(1),
        Action::Down => at.saturating_add(1).min(max),
        Action::PageUp => at.saturating_sub(page),
        Action::PageDown => at.saturating_add(page).min(max),
        Action::Top => 0,
        Action::Bottom => max,
        _ => at,
    }
}

/// What the app wants the loop to do after an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Quit,
}

/// Everything the UI shows, and the only thing that changes it.
pub struct App {
    screen: Screen,
    overlay: Option<Overlay>,
    home_focus: HomeFocus,
    run_focus: RunFocus,
    env_sel: usize,
    runbook_sel: usize,
    run_sel: usize,
    /// The environment runbooks open in.
    current_env: Option<String>,
    envs: Vec<EnvSummary>,
    runbooks: Vec<RunbookSummary>,
    runbook_set: RunbookSet,
    plans: Arc<dyn PlanSource>,
    runs: Vec<RunSummary>,
    runs_error: Option<String>,
    runs_dir: Option<PathBuf>,
    active: Option<ActiveRun>,
    /// The runbook last asked for that cannot start: its blockers, shown by the run view
    /// in place of steps (no run exists to start past them). Cleared when a plan opens.
    blocked: Option<hk_session::Blocked>,
    live: LiveState,
    /// Where Back (or `l`) leaves the Live screen to.
    live_from: Screen,
    /// The Live screen's first shown line.
    live_scroll: usize,
    /// How many lines the Live screen laid out when last drawn (the scroll bound): the
    /// view reports it, so the state never asks the view to lay text out.
    live_lines: std::cell::Cell<usize>,
    theme: Theme,
    themes: ThemeSet,
    theme_warnings: Vec<ThemeWarning>,
    keymaps: Keymaps,
    caps: Arc<Capabilities>,
    /// Where `:fault` goes; `None` outside the simulated demo.
    faults: Option<Arc<dyn super::FaultSink>>,
    /// Requests for the executor task; the loop drains it after every update.
    outbox: VecDeque<ExecRequest>,
    operator: String,
    now: Timestamp,
    /// The `/` filter: narrows the home lists, searches the output in the run view.
    filter: Option<String>,
    /// The output line (absolute number) `n`/`N` last jumped to; cleared with the filter.
    search_at: Option<u64>,
    /// One line of feedback at the bottom (errors, refusals, what just happened).
    status: Option<String>,
    width: u16,
    height: u16,
    /// What changed on the platform this session (the Live screen's timeline).
    timeline: hk_effects::observe::timeline::Timeline,
    /// Environments marked `protected: true`.
    protected: Vec<String>,
    /// The static check's last result and how to run it again.
    check: CheckView,
    checker: Option<Checker>,
    /// `--no-cluster-lock`: mutating runs go without the cluster's run lock (a banner line
    /// on every frame says so).
    no_cluster_lock: bool,
    /// How mutating runs take the cluster's run lock (given to each operate session at its
    /// construction, asked off the UI task: [`App::lock_outbox`]). Set once, from
    /// [`AppParts::locking`], before any run can be opened (the `run` command's start
    /// screen included): no setter, so no session is opened before it is known.
    locking: Option<Arc<hk_session::lock::RunLocking>>,
    /// What quitting loses, where the journals do not outlive the console (the demo's
    /// throwaway directory): the quit question says this instead of "the journal keeps
    /// the run".
    runs_discarded: Option<String>,
    /// Calls on the cluster's run lock, for the loop's pump to run off the UI task; their
    /// answers come back to [`App::handle_lock`].
    lock_outbox: VecDeque<hk_session::lock::LockJob>,
    /// Takes the looks a next step opens; `None`: no cluster to look at (dry run, sample).
    looker: Option<Arc<dyn hk_effects::observe::look::LookSource>>,
    /// Looks asked for, for the loop to take off the UI task (`(which overlay, what)`).
    look_outbox: VecDeque<LookRequest>,
    /// Numbers each opened look, so an answer for a closed one is dropped.
    look_seq: u64,
    /// Where Back (or `c`) leaves the Check screen to.
    check_from: Screen,
    /// The Check screen's first shown line.
    check_scroll: usize,
    /// The last `:` line refused and why: the next `:` shows the reason, Up recalls it.
    refused_command: Option<(String, String)>,
    /// Every status line this console showed, oldest first, with when (`M` or `:messages`
    /// reads them whole: the status line cuts a long one at the terminal's width).
    messages: VecDeque<(Timestamp, String)>,
    /// The operator chose the environment in view (e, Enter on Home, `:env`): the console
    /// no longer brings the worst one into view by itself.
    env_chosen: bool,
    /// When the run list was last read (Home re-reads it on the tick while in view).
    runs_read_at: Timestamp,
    /// The gate the status line reminds of (hidden with Esc, still open): the reminder goes
    /// when that gate closes, however it closes.
    gate_reminder: Option<usize>,
    /// The help overlay's first shown line (it scrolls where the terminal is short).
    help_scroll: usize,
    /// The messages overlay's first shown line.
    messages_scroll: usize,
    /// How far the open help or messages overlay can scroll, as last drawn (the view
    /// reports it, as it does `live_lines`).
    overlay_scroll_max: std::cell::Cell<usize>,
    /// The run view's output: long lines wrap (on) or are cut with a marker (off); `w`.
    output_wrap: bool,
    /// Where a mouse click acts on the last frame drawn (the view registers them).
    zones: super::pointer::Zones,
    /// How many rows the Check screen's findings took when last drawn (its scroll bound,
    /// reported by the view as `live_lines` is).
    check_rows: std::cell::Cell<usize>,
}

/// The `:` commands, for Tab.
const COMMANDS: &[&str] = &[
    "run", "env", "theme", "check", "observe", "live", "fault", "help", "messages", "q",
];

/// What the app is built from.
/// Runs the static parity check (the repo read afresh each time) for the Check screen.
pub type Checker = Arc<dyn Fn() -> CheckView + Send + Sync>;

pub struct AppParts {
    pub environments: Vec<EnvSummary>,
    pub runbooks: RunbookSet,
    pub plans: Arc<dyn PlanSource>,
    pub runs_dir: Option<PathBuf>,
    pub themes: ThemeSet,
    pub theme: Option<String>,
    pub keymaps: Keymaps,
    /// Problems in the user config file, shown like theme warnings.
    pub config_warnings: Vec<ThemeWarning>,
    pub no_color: bool,
    pub operator: String,
    pub now: Timestamp,
    /// Where `:fault` goes (the simulated demo only).
    pub faults: Option<Arc<dyn super::FaultSink>>,
    /// How mutating runs take the cluster's run lock (`None`: nothing to lock: a dry run,
    /// the sample, observe mode).
    pub locking: Option<Arc<hk_session::lock::RunLocking>>,
}

impl App {
    /// An app that may run mutating steps (behind their gates).
    pub fn operate(parts: AppParts, caps: Capabilities) -> App {
        Self::build(parts, caps)
    }

    /// The observe app: built from read-only executors only, so nothing it holds can run a
    /// mutating step, and every run it opens is a read-only run.
    pub fn observe(parts: AppParts, read_only: ReadOnlyExecutors) -> App {
        Self::build(parts, Capabilities::Observe { read_only })
    }

    fn build(parts: AppParts, caps: Capabilities) -> App {
        let caps = Arc::new(caps);
        let runbooks = parts
            .runbooks
            .iter()
            .map(|l| RunbookSummary {
                id: l.runbook.id.clone(),
                title: l.runbook.title.clone(),
                mutates: l.runbook.mutates(),
                environments: l.runbook.environments.clone(),
            })
            .collect();
        let theme_name = parts
            .theme
            .as_deref()
            .unwrap_or(super::theme::DEFAULT_THEME);
        let (theme, mut theme_warnings) = parts.themes.load(theme_name, parts.no_color);
        theme_warnings.extend(parts.config_warnings);
        let mut app = App {
            screen: Screen::Home,
            overlay: None,
            home_focus: HomeFocus::Runbooks,
            run_focus: RunFocus::Steps,
            env_sel: 0,
            runbook_sel: 0,
            run_sel: 0,
            current_env: parts.environments.first().map(|e| e.name.clone()),
            envs: parts.environments,
            runbooks,
            runbook_set: parts.runbooks,
            plans: parts.plans,
            runs: Vec::new(),
            runs_error: None,
            runs_dir: parts.runs_dir,
            active: None,
            blocked: None,
            live: LiveState::default(),
            live_from: Screen::Home,
            live_scroll: 0,
            live_lines: std::cell::Cell::new(0),
            theme,
            themes: parts.themes,
            theme_warnings,
            keymaps: parts.keymaps,
            // Injecting a fault changes the simulation: an observe console is given no
            // sink to inject through.
            faults: match caps.as_ref() {
                Capabilities::Operate { .. } => parts.faults,
                Capabilities::Observe { .. } => None,
            },
            caps,
            outbox: VecDeque::new(),
            operator: parts.operator,
            now: parts.now,
            status: None,
            filter: None,
            search_at: None,
            width: 0,
            height: 0,
            timeline: hk_effects::observe::timeline::Timeline::default(),
            protected: Vec::new(),
            check: CheckView::default(),
            checker: None,
            no_cluster_lock: false,
            locking: parts.locking,
            runs_discarded: None,
            lock_outbox: VecDeque::new(),
            looker: None,
            look_outbox: VecDeque::new(),
            look_seq: 0,
            check_from: Screen::Home,
            check_scroll: 0,
            refused_command: None,
            messages: VecDeque::new(),
            gate_reminder: None,
            runs_read_at: Timestamp(0),
            env_chosen: false,
            help_scroll: 0,
            messages_scroll: 0,
            overlay_scroll_max: std::cell::Cell::new(0),
            output_wrap: true,
            zones: super::pointer::Zones::default(),
            check_rows: std::cell::Cell::new(0),
        };
        app.refresh_runs();
        app
    }

    pub fn capabilities(&self) -> &Arc<Capabilities> {
        &self.caps
    }

    pub fn is_observe(&self) -> bool {
        self.caps.is_observe()
    }

    pub fn mode(&self) -> Mode {
        if self.is_observe() {
            Mode::Observe
        } else {
            Mode::Operate
        }
    }

    /// Re-read the run list (newest first, interrupted runs moved to the front).
    pub fn refresh_runs(&mut self) {
        self.runs_read_at = self.now;
        let Some(dir) = &self.runs_dir else {
            self.runs.clear();
            self.runs_error = Some("no run journal directory".into());
            return;
        };
        match journal::list_runs(dir) {
            Ok(list) => {
                let mut runs = list.runs;
                // Stable: among equals, newest stays first.
                runs.sort_by_key(|r| r.outcome != RunOutcome::Interrupted);
                self.runs = runs;
                self.runs_error = if list.unreadable.is_empty() {
                    None
                } else {
                    Some(format!(
                        "{} journal(s) unreadable: {}",
                        list.unreadable.len(),
                        list.unreadable
                            .iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ))
                };
            }
            Err(e) => self.runs_error = Some(e.to_string()),
        }
    }

    fn matches_filter(&self, fields: &[&str]) -> bool {
        match &self.filter {
            None => true,
            Some(f) => {
                let f = f.to_lowercase();
                fields.iter().any(|x| x.to_lowercase().contains(&f))
            }
        }
    }

    /// The runbooks the home list shows (the `/` filter applied).
    pub fn visible_runbooks(&self) -> Vec<&RunbookSummary> {
        self.runbooks
            .iter()
            .filter(|r| self.matches_filter(&[&r.id, &r.title]))
            .collect()
    }

    /// The runs the home list shows (the `/` filter applied).
    pub fn visible_runs(&self) -> Vec<&RunSummary> {
        self.runs
            .iter()
            .filter(|r| self.matches_filter(&[&r.runbook, &r.env, &r.outcome.to_string()]))
            .collect()
    }

    /// The keymap mode for the current screen.
    pub fn key_mode(&self) -> KeyMode {
        match (&self.overlay, self.screen) {
            (Some(Overlay::Help), _) => KeyMode::Help,
            (_, Screen::Home) => KeyMode::Home,
            (_, Screen::Run) => KeyMode::Run,
            (_, Screen::Live) => KeyMode::Live,
            (_, Screen::Check) => KeyMode::Check,
        }
    }

    /// The screen's keymap mode under any overlay (what the help overlay lists).
    pub fn screen_key_mode(&self) -> KeyMode {
        match self.screen {
            Screen::Home => KeyMode::Home,
            Screen::Run => KeyMode::Run,
            Screen::Live => KeyMode::Live,
            Screen::Check => KeyMode::Check,
        }
    }

    /// The `--runbooks` file that replaced the shipped runbook `id`, if one did.
    pub fn overrides_shipped(&self, id: &str) -> Option<&str> {
        self.runbook_set.overrides_shipped(id)
    }

    /// Whether a run is open and not over.
    pub fn run_is_active(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.session.is_active())
    }

    /// Whether `summary` (a row of Recent runs) is the run this console drives right now:
    /// its journal is the one held open here, so it is running, not interrupted.
    pub fn is_active_run(&self, summary: &RunSummary) -> bool {
        self.run_is_active()
            && self
                .active
                .as_ref()
                .and_then(|a| a.journal.as_ref())
                .is_some_and(|j| j.path() == summary.path.as_path())
    }

    // ----------------------------------------------------------------------------------
    // Input.

    /// A key from the terminal: to the overlay's text field, else through the keymap.
    pub fn handle_key(&mut self, key: KeyEvent) -> Control {
        if key.kind != crossterm::event::KeyEventKind::Press {
            return Control::Continue;
        }
        let bound = Key::from_event(&key);
        match self.overlay.take() {
            Some(Overlay::Help) => {
                let Some(k) = bound else {
                    self.overlay = Some(Overlay::Help);
                    return Control::Continue;
                };
                // Help has its own small keymap; anything it does not bind leaves it open.
                match self.keymaps.get(KeyMode::Help).and_then(|m| m.get(&k)) {
                    Some(Action::Back) => self.help_scroll = 0,
                    Some(a) => {
                        self.help_scroll = scrolled(
                            self.help_scroll,
                            a,
                            self.height,
                            self.overlay_scroll_max.get(),
                        );
                        self.overlay = Some(Overlay::Help);
                    }
                    None => self.overlay = Some(Overlay::Help),
                }
                Control::Continue
            }
            Some(other) => self.overlay_key(other, key),
            None => {
                let Some(k) = bound else {
                    return Control::Continue;
                };
                let action = self
                    .keymaps
                    .get(self.key_mode())
                    .and_then(|m| m.get(&k))
                    .cloned();
                match action {
                    Some(a) => self.update(a),
                    None => Control::Continue,
                }
            }
        }
    }

    /// The mouse: a left click selects a list row or presses the button under it
    /// ([`App::click`]); the wheel scrolls the output (the Live screen, on it).
    pub fn handle_mouse(&mut self, ev: MouseEvent) -> Control {
        if let MouseEventKind::Down(crossterm::event::MouseButton::Left) = ev.kind {
            return self.click(ev.column, ev.row);
        }
        if self.screen == Screen::Live {
            match ev.kind {
                MouseEventKind::ScrollUp => self.scroll_live(-3),
                MouseEventKind::ScrollDown => self.scroll_live(3),
                _ => {}
            }
            return Control::Continue;
        }
        if let Some(a) = self.active.as_mut() {
            match ev.kind {
                MouseEventKind::ScrollUp => a.output.scroll_up(3),
                MouseEventKind::ScrollDown => a.output.scroll_down(3),
                _ => {}
            }
        }
        Control::Continue
    }

    fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Control {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Ctrl-C in any overlay closes it (an open gate stays open in the run, as with Esc);
        // a second Ctrl-C then asks about the running step or quitting.
        let key = if ctrl && key.code == KeyCode::Char('c') {
            KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)
        } else {
            key
        };
        match overlay {
            Overlay::Help => Control::Continue,
            Overlay::Messages => {
                match key.code {
                    KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('M') => {
                        self.messages_scroll = 0;
                        return Control::Continue;
                    }
                    _ => {
                        if let Some(k) = Key::from_event(&key) {
                            if let Some(a) = self.keymaps.get(KeyMode::Help).and_then(|m| m.get(&k))
                            {
                                self.messages_scroll = scrolled(
                                    self.messages_scroll,
                                    a,
                                    self.height,
                                    self.overlay_scroll_max.get(),
                                );
                            }
                        }
                    }
                }
                self.overlay = Some(Overlay::Messages);
                Control::Continue
            }
            Overlay::Look(l) => self.look_key(l, key),
            Overlay::HostPicker(p) => self.picker_key(p, key),
            Overlay::Resume(m) => self.resume_key(m, key),
            Overlay::Takeover(m) => self.takeover_key(m, key),
            Overlay::Confirm(c) => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => match c {
                    Confirm::Quit => Control::Quit,
                    Confirm::CancelStep { n } => {
                        let by = self.operator.clone();
                        self.feed(Input::CancelRequested { n, by });
                        Control::Continue
                    }
                },
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => Control::Continue,
                _ => {
                    self.overlay = Some(Overlay::Confirm(c));
                    Control::Continue
                }
            },
            Overlay::Reason {
                why,
                mut text,
                error,
            } => match key.code {
                KeyCode::Esc => Control::Continue,
                KeyCode::Enter => {
                    let reason = text.lines().join(" ").trim().to_string();
                    if reason.is_empty() {
                        self.overlay = Some(Overlay::Reason {
                            why,
                            text,
                            error: Some("a reason is required; it goes into the journal".into()),
                        });
                        return Control::Continue;
                    }
                    let by = self.operator.clone();
                    match why {
                        ReasonFor::Abort => self.feed(Input::Abort { by, reason }),
                        ReasonFor::Skip { n } => self.feed(Input::Skip { n, by, reason }),
                    }
                    Control::Continue
                }
                _ => {
                    text.input(key);
                    self.overlay = Some(Overlay::Reason { why, text, error });
                    Control::Continue
                }
            },
            Overlay::Filter { mut text } => match key.code {
                KeyCode::Esc => Control::Continue,
                KeyCode::Enter => {
                    let f = text.lines().join(" ").trim().to_string();
                    self.filter = (!f.is_empty()).then_some(f);
                    self.search_at = None;
                    self.env_sel = 0;
                    self.runbook_sel = 0;
                    self.run_sel = 0;
                    Control::Continue
                }
                _ => {
                    text.input(key);
                    self.overlay = Some(Overlay::Filter { text });
                    Control::Continue
                }
            },
            Overlay::Command { mut text, error } => match key.code {
                KeyCode::Esc => {
                    // Esc clears: the refused line is not offered again.
                    self.refused_command = None;
                    Control::Continue
                }
                KeyCode::Up if text.lines().iter().all(|l| l.is_empty()) => {
                    let mut t = single_line();
                    if let Some((line, _)) = &self.refused_command {
                        t.insert_str(line.trim());
                    }
                    self.overlay = Some(Overlay::Command {
                        text: Box::new(t),
                        error,
                    });
                    Control::Continue
                }
                KeyCode::Enter => {
                    let line = text.lines().join(" ");
                    self.update(Action::Command(line))
                }
                KeyCode::Tab => {
                    let line = text.lines().join(" ");
                    let completed = self.complete(&line);
                    // More than one way on: show them (as a shell's second Tab would).
                    let options = self.candidates(&completed);
                    let error = if options.len() > 1 {
                        Some(format!("tab: {}", options.join("  ")))
                    } else if options.is_empty() && completed == line {
                        error
                    } else {
                        None
                    };
                    let mut t = single_line();
                    t.insert_str(&completed);
                    self.overlay = Some(Overlay::Command {
                        text: Box::new(t),
                        error,
                    });
                    Control::Continue
                }
                _ => {
                    text.input(key);
                    self.overlay = Some(Overlay::Command { text, error });
                    Control::Continue
                }
            },
            Overlay::Gate(mut m) => {
                match key.code {
                    KeyCode::Esc => {
                        self.status = Some(gate_reminder_text(m.n));
                        self.gate_reminder = Some(m.n);
                        return Control::Continue;
                    }
                    // Typed gates have two fields, the typed answer and the note: Tab moves
                    // between them. Approval gates have only the note.
                    KeyCode::Tab | KeyCode::BackTab => {
                        if gate_is_typed(&m.gate) {
                            let next = match m.field {
                                GateField::Answer => GateField::Note,
                                GateField::Note => GateField::Answer,
                            };
                            m.focus(next);
                        }
                    }
                    KeyCode::Char('r') if ctrl => {
                        let reason = m.note.lines().join(" ").trim().to_string();
                        let reason = if reason.is_empty() {
                            "rejected at the gate".to_string()
                        } else {
                            reason
                        };
                        let by = self.operator.clone();
                        let n = m.n;
                        self.feed(Input::GateAnswered {
                            n,
                            answer: GateAnswer::Rejected { by, reason },
                        });
                        return Control::Continue;
                    }
                    KeyCode::Enter => return self.submit_gate(m),
                    KeyCode::Up if matches!(m.gate, Gate::ApproveDiff) => {
                        m.scroll = m.scroll.saturating_sub(1)
                    }
                    KeyCode::Down if matches!(m.gate, Gate::ApproveDiff) => {
                        m.scroll = m.scroll.saturating_add(1)
                    }
                    KeyCode::PageUp if matches!(m.gate, Gate::ApproveDiff) => {
                        m.scroll = m.scroll.saturating_sub(10)
                    }
                    KeyCode::PageDown if matches!(m.gate, Gate::ApproveDiff) => {
                        m.scroll = m.scroll.saturating_add(10)
                    }
                    _ => match m.field {
                        GateField::Answer => {
                            m.answer.input(key);
                        }
                        GateField::Note => {
                            m.note.input(key);
                        }
                    },
                }
                self.overlay = Some(Overlay::Gate(m));
                Control::Continue
            }
        }
    }

    fn submit_gate(&mut self, mut m: Box<GateModal>) -> Control {
        let by = self.operator.clone();
        let n = m.n;
        let note = m.note.lines().join(" ").trim().to_string();
        // Issue 29: a step whose hosts' disruption, given the health the live panes see
        // now, leaves etcd without quorum goes on only with a typed override and its
        // reason in the note (journaled with the answer).
        if let Some(refused) = self.live_refusal(n) {
            if hk_engine::checks::live::blast::override_reason(&note).is_none() {
                m.error = Some(refused);
                self.overlay = Some(Overlay::Gate(m));
                return Control::Continue;
            }
        }
        let note = (!note.is_empty()).then_some(note);
        // What the gate showed of the live cluster goes into the journal with the answer
        // (the change record says what the operator saw).
        if let Some(lines) = self.live_blast(n).filter(|l| !l.is_empty()) {
            self.feed(Input::GateShown {
                n,
                lines: hk_engine::checks::live::blast::journal_lines(&lines),
            });
        }
        if gate_is_typed(&m.gate) {
            let text = m.answer.lines().join("").trim().to_string();
            // Keep the modal up; a wrong answer comes back as GateNotPassed and is shown.
            self.overlay = Some(Overlay::Gate(m));
            self.feed(Input::TypedText { n, by, text, note });
        } else {
            self.feed(Input::GateAnswered {
                n,
                answer: GateAnswer::Approved { by, note },
            });
        }
        Control::Continue
    }

    /// Why the gate of step `n` refuses to pass without an override, from the live blast
    /// radius of the hosts the step guards (`None`: nothing blocks, or no step, or the step
    /// changes no host).
    fn live_refusal(&self, n: usize) -> Option<String> {
        hk_engine::checks::live::blast::refusal(&self.live_blast(n)?)
    }

    /// The live blast radius of the hosts step `n` of the open run changes, as the live
    /// panes show it now (`None`: no run, no such step, or it changes no host). What the
    /// gate shows and what its answer is refused on are this one reading.
    pub fn live_blast(&self, n: usize) -> Option<Vec<hk_engine::checks::live::blast::BlastLine>> {
        let plan = self.active.as_ref()?.run.plan();
        let step = plan.steps.iter().find(|s| s.n == n)?;
        let hosts = &step.blast_radius.as_ref()?.hosts;
        if hosts.is_empty() {
            return None;
        }
        let servers = self
            .envs
            .iter()
            .find(|e| e.name == plan.env)
            .map(|e| e.servers.clone())
            .unwrap_or_default();
        Some(self.live.blast(&plan.env, hosts, &servers, self.now))
    }

    /// Before the run starts: where its plan takes the environment's VIP holder and etcd
    /// leader, as the live panes see them now (issue 29; `None`: no run, started, or it
    /// changes fewer than two hosts).
    pub fn holder_advice(&self) -> Option<hk_engine::checks::live::blast::BlastLine> {
        let a = self.active.as_ref()?;
        if !matches!(
            a.run.status(),
            hk_engine::runbook::machine::RunStatus::NotStarted
        ) {
            return None;
        }
        let plan = a.run.plan();
        let mut order: Vec<String> = Vec::new();
        for s in plan.steps.iter().filter(|s| s.mutates) {
            if let Some(h) = &s.host {
                if !order.contains(h) {
                    order.push(h.clone());
                }
            }
        }
        self.live.holder_in_order(&plan.env, &order, self.now)
    }

    /// Apply one action.
    pub fn update(&mut self, action: Action) -> Control {
        match action {
            Action::Tick => {
                self.resume_tick();
                // Home's Recent runs follow the runs directory while it is in view (another
                // console's run, a run that ended): at most every few seconds.
                if self.screen == Screen::Home
                    && self.now.0.saturating_sub(self.runs_read_at.0) >= RUNS_REREAD_MS
                {
                    self.refresh_runs();
                }
            }
            Action::Resize(w, h) => {
                self.width = w;
                self.height = h;
            }
            Action::Quit => {
                if self.run_is_active() {
                    self.overlay = Some(Overlay::Confirm(Confirm::Quit));
                } else {
                    return Control::Quit;
                }
            }
            Action::Back => {
                // The Live screen has no filter: Back leaves it (a home filter stays).
                if self.overlay.is_none()
                    && self.screen != Screen::Live
                    && self.filter.take().is_some()
                {
                    self.search_at = None;
                    return Control::Continue;
                }
                if self.overlay.take().is_none() {
                    match self.screen {
                        Screen::Run => {
                            self.screen = Screen::Home;
                            self.refresh_runs();
                        }
                        Screen::Live => self.leave_live(),
                        Screen::Check => self.leave_check(),
                        Screen::Home => {}
                    }
                }
            }
            Action::Help => {
                self.help_scroll = 0;
                self.overlay = Some(Overlay::Help)
            }
            Action::Messages => self.open_messages(),
            Action::CommandLine => {
                // The prompt opens empty, as a shell's does: what the operator types next is
                // a new command, never appended to the refused one. The refusal stays in
                // sight (the prompt's title names its line), and Up brings the line back to be fixed.
                let error = self.refused_command.as_ref().map(|(_, why)| why.clone());
                self.overlay = Some(Overlay::Command {
                    text: Box::new(single_line()),
                    error,
                })
            }
            Action::Up => self.move_sel(-1),
            Action::Down => self.move_sel(1),
            Action::PageUp => self.page(-1),
            Action::PageDown => self.page(1),
            Action::Top => self.move_sel(isize::MIN / 2),
            Action::Bottom => self.move_sel(isize::MAX / 2),
            Action::FocusNext if self.screen == Screen::Run => {
                self.run_focus = match self.run_focus {
                    RunFocus::Steps => RunFocus::Output,
                    RunFocus::Output => RunFocus::Steps,
                }
            }
            Action::FocusNext => {
                self.home_focus = match self.home_focus {
                    HomeFocus::Environments => HomeFocus::Runbooks,
                    HomeFocus::Runbooks => HomeFocus::Runs,
                    HomeFocus::Runs => HomeFocus::Environments,
                }
            }
            Action::Open => self.open_selected(),
            Action::NextEnv => {
                if !self.envs.is_empty() {
                    let i = self
                        .current_env
                        .as_ref()
                        .and_then(|c| self.envs.iter().position(|e| &e.name == c))
                        .map_or(0, |i| (i + 1) % self.envs.len());
                    self.current_env = Some(self.envs[i].name.clone());
                    self.env_chosen = true;
                    self.env_sel = i;
                    self.live_scroll = 0;
                }
            }
            Action::StartRun => self.start_run(),
            Action::Interrupt => return self.interrupt(),
            Action::Abort => {
                if self.run_is_active() {
                    self.overlay = Some(Overlay::Reason {
                        why: ReasonFor::Abort,
                        text: Box::new(single_line()),
                        error: None,
                    });
                } else {
                    self.status = Some("no active run to abort".into());
                }
            }
            Action::Retry => match self.halted_step() {
                Some(n) if self.needs_decision(n) => {
                    self.status = Some(format!(
                        "step {n} changes systems and its work went out without ending done: \
                         it is not re-run on one key; decide here"
                    ));
                    self.open_resume(n);
                }
                Some(n) => {
                    let by = self.operator.clone();
                    self.feed(Input::RetryApproved { n, by });
                }
                None => self.status = Some("nothing to retry: the run is not halted".into()),
            },
            Action::Skip => match self.halted_step() {
                Some(n) => {
                    self.overlay = Some(Overlay::Reason {
                        why: ReasonFor::Skip { n },
                        text: Box::new(single_line()),
                        error: None,
                    })
                }
                None => self.status = Some("nothing to skip: the run is not halted".into()),
            },
            Action::ToggleFollow => {
                if let Some(a) = self.active.as_mut() {
                    a.output.toggle_follow();
                }
            }
            Action::ToggleWrap => {
                self.output_wrap = !self.output_wrap;
                self.status = Some(
                    if self.output_wrap {
                        "output: long lines wrap (w: cut them)"
                    } else {
                        "output: long lines are cut, marked … (w: wrap them)"
                    }
                    .into(),
                );
            }
            Action::Observe => self.enter_observe(),
            Action::Live => self.toggle_live(),
            Action::Check => self.toggle_check(),
            Action::NextStep => self.take_next_step(),
            Action::Filter => {
                let mut t = single_line();
                if let Some(f) = &self.filter {
                    t.insert_str(f);
                }
                self.overlay = Some(Overlay::Filter { text: Box::new(t) });
            }
            Action::NextMatch => self.jump_match(true),
            Action::PrevMatch => self.jump_match(false),
            Action::Command(line) => return self.command(&line),
        }
        Control::Continue
    }

    /// `n` / `N`: move the output's scrollback to the next (newer) or previous (older) line
    /// matching the active search, wrapping at the ends, and say "match i of k". The first
    /// jump starts from the bottom of the window, so `N` first lands on the newest match in
    /// view and `n` on the first one below it.
    fn jump_match(&mut self, forward: bool) {
        let Some(needle) = self.filter.clone() else {
            self.status = Some("no search: / searches the output, then n / N".into());
            return;
        };
        let Some(a) = self.active.as_mut().filter(|_| self.screen == Screen::Run) else {
            return;
        };
        let matches = a.output.match_lines(&needle);
        let Some(&newest) = matches.last() else {
            self.search_at = None;
            self.status = Some(format!("/{needle}: no matching line"));
            return;
        };
        let k = matches.len();
        let (from, inclusive) = match self.search_at {
            Some(at) => (Some(at), false),
            None => (a.output.window_bottom(), true),
        };
        let found = match (from, forward) {
            (None, true) => Some(0),
            (None, false) => Some(k - 1),
            (Some(at), true) => matches.iter().position(|&m| m > at),
            (Some(at), false) => matches
                .iter()
                .rposition(|&m| m < at || (inclusive && m == at)),
        };
        let (i, wrapped) = match found {
            Some(i) => (i, false),
            None if forward => (0, true),
            None => (k - 1, true),
        };
        let line = matches.get(i).copied().unwrap_or(newest);
        a.output.jump_to(line);
        self.search_at = Some(line);
        self.status = Some(format!(
            "/{needle}: match {} of {k}{}",
            i + 1,
            if wrapped { " (wrapped)" } else { "" }
        ));
    }

    /// Quitting with work in flight: journal a cancel request for every running step (the
    /// executors stop their processes and answer Cancelled, which is journaled too). Returns
    /// whether there is work to wait for before the process exits.
    pub fn cancel_in_flight(&mut self) -> bool {
        if let Some(a) = self.active.as_mut() {
            let fx = a.session.cancel_in_flight(self.now);
            self.apply(fx);
        }
        let waiting = self.has_in_flight();
        if waiting {
            self.status =
                Some("stopping the running step before quitting… (q again: quit now)".into());
        }
        waiting
    }

    /// Whether a step of the open, journaled run is running or verifying.
    pub fn has_in_flight(&self) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.session.has_in_flight())
    }

    fn halted_step(&self) -> Option<usize> {
        self.active.as_ref()?.session.halted_step()
    }

    fn interrupt(&mut self) -> Control {
        match self.active.as_ref().and_then(|a| a.session.running_step()) {
            Some(n) => self.overlay = Some(Overlay::Confirm(Confirm::CancelStep { n })),
            None => return self.update(Action::Quit),
        }
        Control::Continue
    }

    fn move_sel(&mut self, d: isize) {
        if self.screen == Screen::Live {
            self.scroll_live(d);
            return;
        }
        if self.screen == Screen::Check {
            self.scroll_check(d);
            return;
        }
        let step = |cur: usize, len: usize| -> usize {
            if len == 0 {
                return 0;
            }
            let next = cur as isize + d.clamp(-(len as isize), len as isize);
            next.clamp(0, len as isize - 1) as usize
        };
        match self.screen {
            Screen::Home => match self.home_focus {
                HomeFocus::Environments => self.env_sel = step(self.env_sel, self.envs.len()),
                HomeFocus::Runbooks => {
                    self.runbook_sel = step(self.runbook_sel, self.visible_runbooks().len())
                }
                HomeFocus::Runs => self.run_sel = step(self.run_sel, self.visible_runs().len()),
            },
            Screen::Live | Screen::Check => {}
            Screen::Run => {
                let focus = self.run_focus;
                if let Some(a) = self.active.as_mut() {
                    match focus {
                        RunFocus::Steps => {
                            let len = a.run.plan().steps.len();
                            a.selected = step(a.selected, len);
                        }
                        RunFocus::Output if d < -1 => a.output.top(),
                        RunFocus::Output if d > 1 => a.output.bottom(),
                        RunFocus::Output if d < 0 => a.output.scroll_up(1),
                        RunFocus::Output => a.output.scroll_down(1),
                    }
                }
            }
        }
    }

    fn page(&mut self, dir: isize) {
        if self.screen == Screen::Live {
            let h = isize::try_from(usize::from(self.height.max(20)) / 2).unwrap_or(10);
            self.scroll_live(dir * h);
            return;
        }
        match (self.screen, self.active.as_mut()) {
            (Screen::Run, Some(a)) => {
                let h = usize::from(self.height.max(20)) / 2;
                if dir < 0 {
                    a.output.scroll_up(h)
                } else {
                    a.output.scroll_down(h)
                }
            }
            _ => self.move_sel(dir * 10),
        }
    }

    fn open_selected(&mut self) {
        match self.screen {
            Screen::Live | Screen::Check => {}
            Screen::Run => self.reopen_gate(),
            Screen::Home => match self.home_focus {
                HomeFocus::Environments => {
                    if let Some(e) = self.envs.get(self.env_sel) {
                        self.current_env = Some(e.name.clone());
                        self.env_chosen = true;
                        self.status = Some(format!("environment: {}", e.name));
                    }
                }
                HomeFocus::Runbooks => {
                    if let Some(rb) = self.visible_runbooks().get(self.runbook_sel) {
                        let id = rb.id.clone();
                        self.open_runbook_or_pick(&id, None);
                    }
                }
                HomeFocus::Runs => {
                    if let Some(r) = self.visible_runs().get(self.run_sel) {
                        // The run driven right now: back to its view, nothing to reopen.
                        if self.is_active_run(r) {
                            self.screen = Screen::Run;
                            return;
                        }
                        let path = r.path.clone();
                        let outcome = r.outcome;
                        self.open_journal(path, outcome);
                    }
                }
            },
        }
    }

    /// Enter on the run view: show the gate the run waits on again.
    fn reopen_gate(&mut self) {
        let Some(a) = self.active.as_ref() else {
            return;
        };
        if a.view_only || a.journal.is_none() {
            return;
        }
        if let Some((n, g)) = a.session.open_gate() {
            self.overlay = Some(Overlay::Gate(Box::new(GateModal::new(n, g))));
            return;
        }
        if let Some(n) = self.halted_step().filter(|n| self.needs_decision(*n)) {
            self.open_resume(n);
        } else {
            self.status = Some("no gate or decision is waiting".into());
        }
    }

    // ----------------------------------------------------------------------------------
    // Runs: the session drives them; the app shows what it says and forwards answers.

    /// Plan runbook `id` for `env` (or the current environment, or the runbook's only one)
    /// and show the plan. Nothing is journaled until it is started.
    pub fn open_runbook(&mut self, id: &str, env: Option<&str>, host: Option<&str>) {
        let env_named = env;
        if self.run_is_active() {
            self.status = Some("a run is active: finish or abort it (A) first".into());
            self.screen = Screen::Run;
            return;
        }
        let opened = hk_session::plan_runbook_or_blocked(
            &self.runbook_set,
            self.plans.as_ref(),
            id,
            env,
            self.current_env.as_deref(),
            host,
        );
        let (plan, env) = match opened {
            Ok(p) => p,
            Err((e, blocked)) => {
                self.status = Some(e.0);
                if let Some(b) = blocked {
                    // Shown where the run would be: what stops it, before any gate.
                    self.blocked = Some(b);
                    self.screen = Screen::Run;
                }
                return;
            }
        };
        self.blocked = None;
        let session = match Session::plan(plan, &self.caps, &self.operator, self.session_locking())
        {
            Ok(s) => s,
            Err(e) => {
                self.status = Some(format!("cannot run `{id}` for `{env}`: {e}"));
                return;
            }
        };
        let notice = session.opened_notice();
        // No environment named, and the runbook has several: say which one it was planned
        // for, and how to plan another; never a silent pick.
        let several = self
            .runbook_set
            .get(id)
            .is_some_and(|l| l.environments.len() > 1);
        let notice = if env_named.is_none() && several {
            format!(
                "planned for `{env}`, the environment in view (`:run {id} ENV` for another); {notice}"
            )
        } else {
            notice.to_string()
        };
        self.current_env = Some(env);
        self.set_active(session);
        self.status = Some(notice);
    }

    fn set_active(&mut self, session: Session) {
        self.active = Some(ActiveRun {
            session,
            output: OutputBuffer::default(),
            step_output_start: BTreeMap::new(),
            selected: 0,
        });
        self.screen = Screen::Run;
        self.overlay = None;
        // A filter belongs to the pane it was typed on: a Home filter never hides output.
        self.filter = None;
        self.search_at = None;
    }

    fn open_journal(&mut self, path: PathBuf, outcome: RunOutcome) {
        if self.run_is_active() {
            self.status = Some("a run is active: finish or abort it (A) first".into());
            return;
        }
        match Session::open_journal(
            &path,
            outcome,
            &self.caps,
            &self.operator,
            self.now,
            self.session_locking(),
        ) {
            Ok(Opened { session, effects }) => {
                self.set_active(session);
                self.show_output_log(&path);
                self.apply(effects);
                // A resume refused on a stale lock: the take-over prompt (a take-over
                // resumes the run).
                if self
                    .active
                    .as_ref()
                    .is_some_and(|a| a.session.stale_lock().is_some())
                {
                    let said = self.status.clone().unwrap_or_default();
                    self.lock_refused(said);
                }
            }
            Err(e) => self.status = Some(e.0),
        }
    }

    /// A run reopened from Recent runs shows the output its log holds (what `runs show`
    /// reads), each step's lines under the header the live run printed; a resumed run's new
    /// output follows. An unreadable log is said in the pane, never shown as "no output".
    fn show_output_log(&mut self, journal_path: &std::path::Path) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        match journal::read_output(journal_path) {
            Ok(log) => {
                for s in hk_session::record::console_output(&a.run.plan().steps, &log) {
                    let total = a.output.dropped() + a.output.len() as u64;
                    a.step_output_start.insert(s.n, total);
                    a.output.push(&s.header);
                    for l in &s.lines {
                        a.output.push(l);
                    }
                }
            }
            Err(e) => a.output.push(&format!("output log unreadable: {e}")),
        }
    }

    /// The run lock as a session takes it here: off the UI task (the loop's pump runs the
    /// calls), so a cluster that does not answer never freezes the screen.
    fn session_locking(&self) -> Option<Arc<hk_session::lock::RunLocking>> {
        self.locking.as_ref().map(|l| {
            if l.is_off_task() {
                Arc::clone(l)
            } else {
                Arc::new(l.as_ref().clone().off_the_ui_task())
            }
        })
    }

    fn start_run(&mut self) {
        let Some(a) = self.active.as_mut() else {
            // Wording only: with no run open, nothing starts in either mode.
            self.status = Some(if self.is_observe() {
                hk_session::OBSERVE_STARTS_NOTHING.into()
            } else if let Some(b) = &self.blocked {
                format!(
                    "`{}` cannot start on `{}`: fix the blockers listed, then open it again",
                    b.runbook, b.env
                )
            } else {
                "open a runbook first".into()
            });
            return;
        };
        match a.session.start(self.runs_dir.as_deref(), self.now) {
            Ok(fx) => self.apply(fx),
            Err(e) => self.lock_refused(e.0),
        }
    }

    /// A start or resume refused (by the lock, among others): say why; a stale lock opens
    /// the take-over prompt with its holder, since and last renewal (the environment's
    /// name and a reason take it over).
    fn lock_refused(&mut self, why: String) {
        self.take_lock_jobs();
        if let Some(a) = self.active.as_ref() {
            if let Some((record, age_ms)) = a.session.stale_lock().cloned() {
                let env = a.run.plan().env.clone();
                self.overlay = Some(Overlay::Takeover(Box::new(TakeoverModal::new(
                    &env, record, age_ms,
                ))));
            }
        }
        self.status = Some(why);
    }

    /// The answer to a run lock call the pump ran off the UI task: the start or resume it
    /// held goes on, or the refusal is shown (a refused take-over stays in its prompt).
    pub fn handle_lock(&mut self, answer: hk_session::lock::LockAnswer) {
        let Some(a) = self.active.as_mut() else {
            // The run it was for is closed: what it took goes back.
            if let Some(job) = answer.orphan_release() {
                self.lock_outbox.push_back(job);
            }
            return;
        };
        let taking_over = matches!(self.overlay, Some(Overlay::Takeover(_)));
        match a
            .session
            .lock_answered(answer, self.runs_dir.as_deref(), self.now)
        {
            Ok(fx) => {
                if taking_over && a.session.stale_lock().is_none() {
                    self.overlay = None;
                }
                self.apply(fx);
            }
            Err(e) if taking_over => {
                self.take_lock_jobs();
                if let Some(Overlay::Takeover(m)) = self.overlay.as_mut() {
                    m.error = Some(e.0.clone());
                }
                self.status = Some(e.0);
            }
            Err(e) => self.lock_refused(e.0),
        }
    }

    /// The active session's lock calls, to the loop's pump.
    fn take_lock_jobs(&mut self) {
        if let Some(a) = self.active.as_mut() {
            self.lock_outbox.extend(a.session.take_lock_jobs());
        }
    }

    fn takeover_key(&mut self, mut m: Box<TakeoverModal>, key: KeyEvent) -> Control {
        match m.key(key) {
            TakeoverKey::Asking => self.overlay = Some(Overlay::Takeover(m)),
            TakeoverKey::Cancelled => {
                self.status = Some("the stale run lock was left as it is".into());
            }
            TakeoverKey::TakeOver { typed, reason } => {
                let Some(a) = self.active.as_mut() else {
                    return Control::Continue;
                };
                match a.session.take_over_and_start(
                    self.runs_dir.as_deref(),
                    self.now,
                    &typed,
                    &reason,
                ) {
                    Ok(fx) => {
                        // Asked off the UI task: the prompt stays (saying so) until the
                        // answer comes.
                        if a.session.lock.pending.is_some() {
                            m.error = None;
                            self.overlay = Some(Overlay::Takeover(m));
                        }
                        self.apply(fx);
                    }
                    Err(e) => {
                        m.error = Some(e.0);
                        self.overlay = Some(Overlay::Takeover(m));
                    }
                }
            }
        }
        Control::Continue
    }

    /// Forward `input` (an operator's answer) to the session, and show what it did.
    pub fn feed(&mut self, input: Input) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let fx = a.session.feed(input, self.now);
        self.apply(fx);
    }

    /// Show what the session did: the gate and decision overlays, the output ring, the
    /// status line, the selection; queue its requests for the loop's pump.
    fn apply(&mut self, effects: Vec<SessionEffect>) {
        for fx in effects {
            match fx {
                SessionEffect::AskGate { n, gate } => {
                    self.overlay = Some(Overlay::Gate(Box::new(GateModal::new(n, gate))));
                }
                SessionEffect::GateNotPassed { n, why } => match self.overlay.as_mut() {
                    Some(Overlay::Gate(m)) if m.n == n => m.error = Some(why),
                    _ => self.status = Some(format!("step {n}: {why}")),
                },
                SessionEffect::Request(req) => self.outbox.push_back(*req),
                SessionEffect::StepBegins { n, header } => {
                    if let Some(a) = self.active.as_mut() {
                        let total = a.output.dropped() + a.output.len() as u64;
                        a.step_output_start.insert(n, total);
                        a.output.push(&header);
                    }
                }
                SessionEffect::Output(line) => {
                    if let Some(a) = self.active.as_mut() {
                        a.output.push(&line);
                    }
                }
                // The step list's selection follows the run to the step it is at.
                SessionEffect::AtStep { n } => {
                    if let Some(a) = self.active.as_mut() {
                        if let Some(i) = a.run.plan().steps.iter().position(|s| s.n == n) {
                            a.selected = i;
                        }
                    }
                }
                SessionEffect::Notice(said) => self.status = Some(said),
                SessionEffect::Finished { .. } => {
                    if matches!(self.overlay, Some(Overlay::Gate(_))) {
                        self.overlay = None;
                    }
                    // The run's new state is what Home lists now.
                    self.refresh_runs();
                }
                SessionEffect::AskDecision { n } => {
                    self.overlay = Some(Overlay::Resume(Box::new(ResumeModal::new(n))));
                }
            }
        }
        // The lock calls the session asked for (a start's, a resume's, a release's) go
        // to the pump.
        self.take_lock_jobs();
        // A gate modal whose gate has closed (answered, or the step moved on) goes away.
        if let (Some(Overlay::Gate(m)), Some(a)) = (&self.overlay, &self.active) {
            if !a.session.gate_is_open(m.n) {
                self.overlay = None;
            }
        }
        // And so does the reminder that it was open: a status line true at every frame.
        if let Some(n) = self.gate_reminder {
            let open = self
                .active
                .as_ref()
                .is_some_and(|a| a.session.gate_is_open(n));
            if !open {
                if self.status.as_deref() == Some(gate_reminder_text(n).as_str()) {
                    self.status = None;
                }
                self.gate_reminder = None;
            }
        }
    }

    /// A reply from the executors, to the session. Stale replies (another run) are dropped.
    pub fn handle_exec(&mut self, reply: ExecReply) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let fx = a.session.handle_reply(reply, self.now);
        self.apply(fx);
    }

    /// Run the static parity check now (at start and on `:check`).
    pub fn run_check(&mut self) {
        if let Some(c) = self.checker.clone() {
            self.check = c();
        }
    }

    /// The environment the strip expands: the one a run is on during the run, else the
    /// selected one.
    pub fn strip_env(&self) -> Option<&str> {
        self.active
            .as_ref()
            .map(|a| a.run.plan().env.as_str())
            .or(self.current_env.as_deref())
    }

    /// Every environment at a glance, worst first, each verdict with its next step.
    pub fn summary(&self) -> hk_effects::observe::summary::Summary {
        let envs: Vec<_> = self
            .envs
            .iter()
            .map(|e| {
                (
                    e.name.clone(),
                    self.protected.contains(&e.name),
                    e.objects.as_ref(),
                )
            })
            .collect();
        let runbooks: Vec<&hk_engine::runbook::schema::Runbook> =
            self.runbook_set.iter().map(|l| &l.runbook).collect();
        let parity = match &self.check.findings {
            Some(Ok(f)) => Some(f.as_slice()),
            _ => None,
        };
        let objects = hk_effects::observe::summary::Objects::of(
            &hk_effects::cluster::WatchSettings::default(),
        );
        super::live::summary(&self.live, &envs, parity, &runbooks, &objects, self.now)
    }

    /// `x`: take the next step of the worst environment that has one: open the runbook's
    /// plan for that environment (nothing runs until `s`), or say what to look at.
    fn take_next_step(&mut self) {
        use hk_effects::observe::summary::NextStep;
        let s = self.summary();
        // On a run's screen its environment's verdicts come first (the pod a halted step
        // names); elsewhere the worst environment's.
        let run_env = self
            .active
            .as_ref()
            .filter(|_| self.screen == Screen::Run)
            .map(|a| a.run.plan().env.clone());
        let of_run = run_env.and_then(|r| {
            s.env(&r)
                .and_then(|e| e.first_next().map(|n| (e.env.clone(), n.clone())))
        });
        let Some((env, next)) = of_run.or_else(|| {
            s.envs
                .iter()
                .find_map(|e| e.first_next().map(|n| (e.env.clone(), n.clone())))
        }) else {
            self.status = Some("no verdict asks for a next step".into());
            return;
        };
        match next {
            NextStep::Runbook { id, env: on, .. } => self.open_runbook(&id, Some(&on), None),
            NextStep::Check { .. } => {
                self.open_check();
                self.status = Some(format!("{env}: the parity findings, file:line"));
            }
            NextStep::Look(l) => self.open_look(l),
        }
    }

    /// A live source's update: kept as the latest of its environment and kind (an update
    /// older than the one held changes nothing).
    pub fn handle_update(&mut self, update: Update) {
        let changed = self.timeline.observe(&update);
        // While a run is active, what changed goes into its record too.
        if let Some(a) = self.active.as_mut().filter(|_| !changed.is_empty()) {
            if let Err(e) = a.session.record_trail(&changed) {
                self.status = Some(format!("⚠ event trail not kept with the run: {e}"));
            }
        }
        if !self.live.apply(update) {
            tracing::debug!("live update older than the one held: ignored");
        }
        self.follow_the_worst();
    }

    /// Until the operator chooses an environment, the console looks at the one in the
    /// worst state: an environment turning critical while another is in view is brought into
    /// view (never during a run, never over the operator's own choice), and the status line
    /// says so.
    fn follow_the_worst(&mut self) {
        if self.env_chosen || self.active.is_some() {
            return;
        }
        let rank = |app: &App, env: &str| {
            crate::live::worst_of(app.live.env_verdicts(env).iter()).map(|s| s.rank())
        };
        let Some(worst) = self
            .envs
            .iter()
            .filter(|e| {
                rank(self, &e.name) == Some(hk_engine::checks::live::Severity::Critical.rank())
            })
            .map(|e| e.name.clone())
            .next()
        else {
            return;
        };
        let here = self.current_env.as_deref().and_then(|c| rank(self, c));
        if here == Some(hk_engine::checks::live::Severity::Critical.rank())
            || self.current_env.as_deref() == Some(worst.as_str())
        {
            return;
        }
        let from = self.current_env.clone().unwrap_or_default();
        self.current_env = Some(worst.clone());
        if let Some(i) = self.envs.iter().position(|e| e.name == worst) {
            self.env_sel = i;
        }
        self.live_scroll = 0;
        let said =
            format!("✗ {worst} is critical: showing {worst} (was {from}; e: next environment)");
        // The status line may hold what must be read first (the demo's SIMULATED notice, a
        // config warning): then this goes to the messages (M), and the header and strip show
        // the environment.
        if self.status.is_none() {
            self.status = Some(said);
        } else {
            self.keep_status();
            self.log_message(said);
        }
    }

    /// `l`: open the Live screen, or leave it.
    fn toggle_live(&mut self) {
        if self.screen == Screen::Live {
            self.leave_live();
        } else {
            self.live_from = self.screen;
            self.screen = Screen::Live;
            self.live_scroll = 0;
        }
    }

    fn leave_live(&mut self) {
        // A run opened from the Live screen (`:run`) is not left behind a stale return.
        self.screen = match self.live_from {
            Screen::Run if self.active.is_some() => Screen::Run,
            _ => Screen::Home,
        };
        if self.screen == Screen::Home {
            self.refresh_runs();
        }
    }

    /// Scroll the Live screen by `d` lines, within its content at the current width.
    fn scroll_live(&mut self, d: isize) {
        let last = self.live_lines.get().saturating_sub(1);
        let next = self.live_scroll.saturating_add_signed(d);
        self.live_scroll = next.min(last);
    }

    // ----------------------------------------------------------------------------------
    // Messages: every status line, readable whole.

    /// Keep the status line in the messages log if it is new (the loop calls this after
    /// every event, so a message replaced before the next frame is kept too).
    pub fn keep_status(&mut self) {
        let Some(s) = self.status.as_ref() else {
            return;
        };
        if self.messages.back().is_some_and(|(_, last)| last == s) {
            return;
        }
        let s = s.clone();
        self.log_message(s);
    }

    /// One line into the messages log, now, the oldest going past [`MESSAGES_KEPT`].
    fn log_message(&mut self, text: String) {
        if self.messages.len() == MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back((self.now, text));
    }

    /// The messages overlay, on its newest messages.
    fn open_messages(&mut self) {
        self.keep_status();
        self.messages_scroll = usize::MAX;
        self.overlay = Some(Overlay::Messages);
    }

    // ----------------------------------------------------------------------------------
    // The command line.

    fn command(&mut self, line: &str) -> Control {
        let mut words = line.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let arg = words.next();
        let arg2 = words.next();
        let arg3 = words.next();
        // A refusal closes the prompt (the keys after it go to the screen again) and says
        // why on the status line; the next `:` brings the line back to be fixed.
        let fail = |app: &mut App, msg: String| {
            app.overlay = None;
            app.status = Some(format!("✗ :{}: {msg}", line.trim()));
            app.refused_command = Some((line.to_string(), msg));
        };
        self.refused_command = None;
        match (cmd, arg) {
            ("q" | "quit" | "q!", _) => return self.update(Action::Quit),
            ("run", Some(id)) => match arg3 {
                Some(host) => self.open_runbook(id, arg2, Some(host)),
                None => self.open_runbook_or_pick(id, arg2),
            },
            ("run", None) => fail(self, "usage: :run RUNBOOK [ENV [HOST]]".into()),
            ("env", Some(name)) => {
                if self.envs.iter().any(|e| e.name == name) {
                    self.current_env = Some(name.to_string());
                    self.env_chosen = true;
                    self.status = Some(format!("environment: {name}"));
                } else {
                    let have: Vec<&str> = self.envs.iter().map(|e| e.name.as_str()).collect();
                    fail(
                        self,
                        format!("no environment `{name}` (have: {})", have.join(", ")),
                    );
                }
            }
            ("theme", Some(name)) => {
                let (theme, warnings) = self.themes.load(name, self.theme.no_color);
                self.theme = theme;
                self.theme_warnings = warnings;
                // With warnings, leave the status line to them.
                self.status = self
                    .theme_warnings
                    .is_empty()
                    .then(|| format!("theme: {}", self.theme.name));
            }
            ("fault", _) => {
                let rest: Vec<&str> = line.split_whitespace().skip(2).collect();
                if let Err(msg) = self.fault(arg, &rest.join(" ")) {
                    fail(self, msg);
                }
            }
            ("observe", _) => self.enter_observe(),
            ("live", _) => {
                if self.screen != Screen::Live {
                    self.toggle_live();
                }
            }
            ("help", _) => {
                self.help_scroll = 0;
                self.overlay = Some(Overlay::Help)
            }
            ("messages" | "msg", _) => self.open_messages(),
            ("check", _) => {
                if self.checker.is_none() {
                    fail(self, "no repo to check".into());
                } else {
                    self.run_check();
                    self.open_check();
                    self.status = Some(match &self.check.findings {
                        Some(Ok(f)) => hk_engine::checks::parity::summary(f),
                        Some(Err(e)) => format!("the check could not run: {e}"),
                        None => "the check did not run".into(),
                    });
                }
            }
            ("", _) => {}
            _ => fail(
                self,
                format!(
                    "unknown command `{}`: try run, env, theme, check, observe, live, help{}, q",
                    line.trim(),
                    if self.faults.is_some() { ", fault" } else { "" }
                ),
            ),
        }
        Control::Continue
    }

    /// `:fault ENV FAULT [ARG]`: to the simulation's fault injector, never in observe mode.
    /// Ok: what happened is on the status line; Err: the message for the command line.
    fn fault(&mut self, env: Option<&str>, words: &str) -> Result<(), String> {
        let Some(sink) = self.faults.clone() else {
            // Wording only: an observe console holds no sink at all.
            return Err(if self.is_observe() {
                "observe mode changes nothing, not even the simulation".into()
            } else {
                "`:fault` works only in the simulated demo (hk-console demo)".into()
            });
        };
        let Some(env) = env else {
            return Err(sink.usage());
        };
        self.status = Some(sink.inject(env, words).map_err(|e| e.to_string())?);
        Ok(())
    }

    /// What Tab could complete `line` with at the word it ends in.
    pub fn candidates(&self, line: &str) -> Vec<String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ends_space = line.ends_with(' ') || words.is_empty();
        let (prefix, options): (&str, Vec<String>) = match (words.as_slice(), ends_space) {
            ([], _) => ("", COMMANDS.iter().map(|s| s.to_string()).collect()),
            ([c], false) => (c, COMMANDS.iter().map(|s| s.to_string()).collect()),
            ([c], true) | ([c, _], false) => {
                let prefix = if ends_space { "" } else { words[1] };
                let options = match *c {
                    "run" => self.runbooks.iter().map(|r| r.id.clone()).collect(),
                    "env" | "fault" => self.envs.iter().map(|e| e.name.clone()).collect(),
                    "theme" => self.themes.names().map(str::to_string).collect(),
                    _ => Vec::new(),
                };
                (prefix, options)
            }
            (["run", _], true) | (["run", _, _], false) => {
                let prefix = if ends_space { "" } else { words[2] };
                (prefix, self.envs.iter().map(|e| e.name.clone()).collect())
            }
            (["fault", _], true) | (["fault", _, _], false) => {
                let prefix = if ends_space { "" } else { words[2] };
                let options = self
                    .faults
                    .as_ref()
                    .map(|f| f.fault_names())
                    .unwrap_or_default();
                (prefix, options)
            }
            _ => ("", Vec::new()),
        };
        options
            .into_iter()
            .filter(|o| o.starts_with(prefix))
            .collect()
    }

    /// Tab on the command line: complete the command, then its argument (`:fault`: its
    /// environment, then the fault).
    pub fn complete(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        let ends_space = line.ends_with(' ');
        let pick = |prefix: &str, options: Vec<String>| -> Option<String> {
            let m: Vec<String> = options
                .into_iter()
                .filter(|o| o.starts_with(prefix))
                .collect();
            match m.as_slice() {
                [one] => Some(one.clone()),
                [] => None,
                many => {
                    // The longest common prefix.
                    let first = &many[0];
                    let len = (0..first.len())
                        .take_while(|&i| {
                            many.iter()
                                .all(|o| o.as_bytes().get(i) == first.as_bytes().get(i))
                        })
                        .count();
                    Some(first[..len].to_string())
                }
            }
        };
        match (words.as_slice(), ends_space) {
            ([], _) => line.to_string(),
            ([c], false) => pick(c, COMMANDS.iter().map(|s| s.to_string()).collect()).map_or(
                line.to_string(),
                |c| {
                    if COMMANDS.contains(&c.as_str()) {
                        format!("{c} ")
                    } else {
                        c
                    }
                },
            ),
            ([c], true) | ([c, _], false) => {
                let prefix = if ends_space { "" } else { words[1] };
                let options: Vec<String> = match *c {
                    "run" => self.runbooks.iter().map(|r| r.id.clone()).collect(),
                    "env" => self.envs.iter().map(|e| e.name.clone()).collect(),
                    "theme" => self.themes.names().map(str::to_string).collect(),
                    "fault" => self.envs.iter().map(|e| e.name.clone()).collect(),
                    _ => Vec::new(),
                };
                pick(prefix, options).map_or(line.to_string(), |a| format!("{c} {a}"))
            }
            (["fault", env], true) | (["fault", env, _], false) => {
                let prefix = if ends_space { "" } else { words[2] };
                let options = self
                    .faults
                    .as_ref()
                    .map(|f| f.fault_names())
                    .unwrap_or_default();
                pick(prefix, options).map_or(line.to_string(), |a| format!("fault {env} {a}"))
            }
            _ => line.to_string(),
        }
    }

    /// Switch this app to observe mode: the mutating executors are dropped (the observe
    /// capabilities keep only the read-only half) and the open plan, if not started, is
    /// reopened read-only.
    fn enter_observe(&mut self) {
        if self.is_observe() {
            self.status = Some("already in observe mode".into());
            return;
        }
        if self.run_is_active() {
            self.status = Some("a run is active: finish or abort it before observe mode".into());
            return;
        }
        let read_only = self.caps.read_only().clone();
        self.faults = None;
        self.caps = Arc::new(Capabilities::Observe {
            read_only: read_only.clone(),
        });
        if let Some(a) = self.active.take() {
            match a.session.into_observe(read_only) {
                Ok(s) => self.set_active(s),
                Err(e) => self.status = Some(e.0),
            }
        }
        self.status = Some("observe mode: read-only; nothing can change".into());
    }
}

impl App {
    // ----------------------------------------------------------------------------------
    // Abandoning: the console goes away without finishing (the session journals it).

    /// The console is going away (lost terminal, SIGTERM, panic) and `stops` is what the
    /// ladder did to the supervised children: the session journals the run as abandoned.
    pub fn abandon(&mut self, reason: &str, stops: &[StopReport]) {
        let session = self.active.as_mut().map(|a| &mut a.session);
        let fx = supervise::abandon(session, reason, stops, self.now);
        self.apply(fx);
    }

    /// [`App::abandon`] with the ladder run here, after the abandonment is journaled.
    pub fn abandon_and_stop(
        &mut self,
        reason: &str,
        int_grace: std::time::Duration,
        term_grace: std::time::Duration,
    ) {
        let session = self.active.as_mut().map(|a| &mut a.session);
        let fx = supervise::abandon_and_stop(session, reason, int_grace, term_grace, self.now);
        self.apply(fx);
    }

    // ----------------------------------------------------------------------------------
    // Resuming an interrupted step that changes systems: the session decides what is
    // known and journals the decision; the app shows the modal and reads its keys.

    /// Whether step `n` is an interrupted step that changes systems (decided on, never
    /// retried on one key).
    pub fn needs_decision(&self, n: usize) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.session.needs_decision(n))
    }

    fn open_resume(&mut self, n: usize) {
        if let Some(a) = self.active.as_mut() {
            let fx = a.session.open_resume(n, self.now);
            self.apply(fx);
        }
    }

    fn resume_tick(&mut self) {
        if let Some(a) = self.active.as_mut() {
            // A lost run lock is journaled when it is learnt (the banner shows it too).
            let mut fx = a.session.lock_tick(self.now);
            fx.extend(a.session.resume_tick(self.now));
            self.apply(fx);
        }
    }

    /// `K`: the stop ladder on the interrupted step's process.
    fn stop_resumed_process(&mut self) {
        if let Some(a) = self.active.as_mut() {
            let fx = a.session.stop_resumed_process();
            self.apply(fx);
        }
    }

    /// `w`: wait for the interrupted step's process to end.
    fn wait_for_process(&mut self) {
        if let Some(a) = self.active.as_mut() {
            let fx = a.session.wait_for_process();
            self.apply(fx);
        }
    }

    fn resume_key(&mut self, mut m: Box<ResumeModal>, key: KeyEvent) -> Control {
        let n = m.n;
        let (alive, probing) = match self.active.as_ref().and_then(|a| a.resume.as_ref()) {
            Some(i) => (i.process_may_run(), i.probing()),
            None => (false, false),
        };
        match (m.stage, key.code) {
            (_, KeyCode::Esc) if m.stage != ResumeStage::Choose => {
                m.stage = ResumeStage::Choose;
                m.error = None;
            }
            (_, KeyCode::Esc) => {
                self.status = Some(format!(
                    "step {n} waits for a decision: enter shows it again"
                ));
                return Control::Continue;
            }
            // While its process runs, the only choices are to wait for it or stop it.
            (ResumeStage::Choose, KeyCode::Char('w')) if alive => self.wait_for_process(),
            (ResumeStage::Choose, KeyCode::Char('K')) if alive => self.stop_resumed_process(),
            (ResumeStage::Choose, _) if alive => {
                m.error = Some(
                    "its process still runs: w waits for it, K stops it; nothing else until \
                     it is gone"
                        .into(),
                );
            }
            (ResumeStage::Choose, _) if probing => {
                m.error = Some("the probe is running; its result comes first".into());
            }
            (ResumeStage::Choose, KeyCode::Char('R')) => {
                m.stage = ResumeStage::Rerun;
                m.typed = single_line();
                m.field = GateField::Answer;
                m.error = None;
            }
            (ResumeStage::Choose, KeyCode::Char('D')) => {
                m.stage = ResumeStage::MarkDone;
                m.typed = single_line();
                m.reason = single_line();
                m.field = GateField::Answer;
                m.error = None;
            }
            (ResumeStage::Choose, KeyCode::Char('A')) => {
                self.overlay = Some(Overlay::Reason {
                    why: ReasonFor::Abort,
                    text: Box::new(single_line()),
                    error: None,
                });
                return Control::Continue;
            }
            (ResumeStage::Choose, _) => {
                m.error = Some("R re-run · D mark done · A abort · esc hide".into());
            }
            (ResumeStage::MarkDone, KeyCode::Tab | KeyCode::BackTab) => {
                m.field = match m.field {
                    GateField::Answer => GateField::Note,
                    GateField::Note => GateField::Answer,
                };
            }
            (ResumeStage::Rerun, KeyCode::Enter) => {
                let typed = m.typed.lines().join("").trim().to_string();
                let by = self.operator.clone();
                self.overlay = Some(Overlay::Resume(m));
                self.decide(Input::RerunApproved { n, by, typed });
                return Control::Continue;
            }
            (ResumeStage::MarkDone, KeyCode::Enter) => {
                let typed = m.typed.lines().join("").trim().to_string();
                let reason = m.reason.lines().join(" ").trim().to_string();
                let by = self.operator.clone();
                self.overlay = Some(Overlay::Resume(m));
                self.decide(Input::MarkedDone {
                    n,
                    by,
                    typed,
                    reason,
                });
                return Control::Continue;
            }
            (_, _) => match m.field {
                GateField::Answer => {
                    m.typed.input(key);
                }
                GateField::Note => {
                    m.reason.input(key);
                }
            },
        }
        self.overlay = Some(Overlay::Resume(m));
        Control::Continue
    }

    /// Journal a resume decision; a refusal stays in the modal, saying why.
    fn decide(&mut self, input: Input) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        match a.session.decide(input, self.now) {
            Err(why) => {
                if let Some(Overlay::Resume(m)) = self.overlay.as_mut() {
                    m.error = Some(why.to_string());
                }
            }
            Ok(fx) => {
                self.overlay = None;
                self.apply(fx);
            }
        }
    }
}

impl App {
    // ----------------------------------------------------------------------------------
    // The host picker and mouse clicks.

    /// Open runbook `id` (in `env`, or as [`App::open_runbook`] picks it); a runbook that
    /// runs on one host of a group opens the host picker first, over the hosts the
    /// planner itself names, instead of refusing with "name it".
    pub fn open_runbook_or_pick(&mut self, id: &str, env: Option<&str>) {
        match self.host_choice(id, env) {
            Some(p) => {
                self.status = Some(format!(
                    "`{}` runs on one host of `{}` in {}: pick it (enter), esc cancels",
                    p.runbook, p.group, p.env
                ));
                self.overlay = Some(Overlay::HostPicker(Box::new(p)));
            }
            None => self.open_runbook(id, env, None),
        }
    }

    /// The picker for `id` when planning it without a host is refused for want of one:
    /// the planner's own list of the target group's hosts. `None`: anything else (it
    /// plans, or fails for another reason `open_runbook` will say).
    fn host_choice(&self, id: &str, env: Option<&str>) -> Option<HostPicker> {
        use hk_engine::runbook::plan::PlanError;
        use hk_session::PlanSourceError;
        if self.run_is_active() {
            return None;
        }
        let rb = self.runbook_set.get(id)?;
        // The environment as the session picks it (named, the current one, the only one).
        let env = match env {
            Some(e) => e.to_string(),
            None => match self.current_env.as_deref() {
                Some(c) if rb.environments.iter().any(|e| e == c) => c.to_string(),
                _ if rb.environments.len() == 1 => rb.environments[0].clone(),
                _ => return None,
            },
        };
        match self.plans.plan(rb, &env, None) {
            Err(PlanSourceError::Plan(PlanError::NoHostChosen { group, hosts, .. })) => {
                // The planner joins the group's members with ", " (host names hold no
                // comma or space).
                let hosts: Vec<String> = hosts
                    .split(", ")
                    .filter(|h| !h.is_empty())
                    .map(str::to_string)
                    .collect();
                (!hosts.is_empty()).then(|| HostPicker {
                    runbook: id.to_string(),
                    env,
                    group,
                    hosts,
                    sel: 0,
                })
            }
            _ => None,
        }
    }

    fn picker_key(&mut self, mut p: Box<HostPicker>, key: KeyEvent) -> Control {
        match key.code {
            KeyCode::Esc => {
                self.status = Some(format!("`{}`: no host picked, nothing planned", p.runbook));
                return Control::Continue;
            }
            KeyCode::Enter => {
                if let Some(host) = p.selected().map(str::to_string) {
                    self.open_runbook(&p.runbook, Some(&p.env), Some(&host));
                }
                return Control::Continue;
            }
            KeyCode::Up | KeyCode::Char('k') => p.step(-1),
            KeyCode::Down | KeyCode::Char('j') => p.step(1),
            KeyCode::Home | KeyCode::Char('g') => p.sel = 0,
            KeyCode::End | KeyCode::Char('G') => p.step(isize::MAX / 2),
            _ => {}
        }
        self.overlay = Some(Overlay::HostPicker(p));
        Control::Continue
    }

    /// A left click at (`col`, `row`): on a list row, select it (and focus its pane); on
    /// the row already selected, open it as enter does; on a button, press its key. With
    /// an overlay open only the overlay's rows and buttons take clicks.
    pub fn click(&mut self, col: u16, row: u16) -> Control {
        use super::pointer::{Click, ListId};
        let Some(click) = self.zones.at(col, row, self.overlay.is_some()) else {
            return Control::Continue;
        };
        let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
        match click {
            Click::Key(k) => return self.handle_key(k),
            Click::Row { list, index } => match list {
                ListId::Hosts => {
                    if let Some(Overlay::HostPicker(p)) = self.overlay.as_mut() {
                        if p.sel == index {
                            return self.handle_key(enter);
                        }
                        p.sel = index.min(p.hosts.len().saturating_sub(1));
                    }
                }
                ListId::Steps => {
                    self.run_focus = RunFocus::Steps;
                    if let Some(a) = self.active.as_mut() {
                        a.selected = index.min(a.run.plan().steps.len().saturating_sub(1));
                    }
                }
                ListId::Environments | ListId::Runbooks | ListId::Runs => {
                    let focus = match list {
                        ListId::Environments => HomeFocus::Environments,
                        ListId::Runbooks => HomeFocus::Runbooks,
                        _ => HomeFocus::Runs,
                    };
                    let sel = match focus {
                        HomeFocus::Environments => &mut self.env_sel,
                        HomeFocus::Runbooks => &mut self.runbook_sel,
                        HomeFocus::Runs => &mut self.run_sel,
                    };
                    let again = self.home_focus == focus && *sel == index;
                    *sel = index;
                    self.home_focus = focus;
                    if again {
                        self.open_selected();
                    }
                }
            },
        }
        Control::Continue
    }
}
