//! The app: what the screen needs, and `update` (action -> new state + answers out).
//!
//! Owns: the one [`App`] the event loop updates and the views draw from: the selection,
//! the overlays (gate modals, the resume decision, confirmations, help, command line), the
//! open run's output ring ([`ActiveRun`]), the status line. The run itself is its
//! [`hk_session::RunSession`]'s: the app forwards every operator answer and executor reply
//! to it and shows the [`hk_session::SessionEffect`]s that come back (requests queue in
//! [`App::outbox`] for the loop's pump).
//! Must not: journal, dispatch or decide anything about a run (the session does), do
//! terminal IO, await, or talk to hosts. Time comes in through [`App::now`], set by the
//! loop's tick, so tests are deterministic.
//!
//! The state's types live in `crate::state`; `App`'s fields are private, and the app is
//! split by concern into child modules that share them: `keys` (one handler per overlay,
//! the mouse), `run` (opening, starting, a session's effects), `live`, `resume`, `picker`,
//! `looks`, `check_screen`, `command`, `messages`; `views` lends each pane the small view it
//! draws from, `access` is what the loop, the composition root and tests read and set.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use hk_engine::journal::{self, RunSummary};
use hk_engine::runbook::embedded::RunbookSet;
use hk_engine::runbook::machine::{Input, Mode, RunOutcome, Timestamp};

use super::action::Action;
use super::keymap::{KeyMode, Keymaps};
use super::live::LiveState;
use super::theme::{Theme, ThemeSet, ThemeWarning};
use hk_session::exec::{Capabilities, ExecRequest, ReadOnlyExecutors};

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
mod command;
mod keys;
mod live;
mod looks;
mod messages;
mod picker;
mod resume;
mod run;
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

/// What the app is built from.
/// Runs the static parity check (the repo read afresh each time) for the Check screen.
pub type Checker = Arc<dyn Fn() -> CheckView + Send + Sync>;

pub struct AppParts {
    pub environments: Vec<EnvSummary>,
    pub runbooks: RunbookSet,
    /// Runbook id -> why it is not offered on this repo (`context::not_offered`): not
    /// listed on Home, not completed by `:run`, counted in the list's title.
    pub not_offered: std::collections::BTreeMap<String, String>,
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
                not_offered: parts.not_offered.get(&l.runbook.id).cloned(),
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

    /// Whether `r` is written for one of the repo's environments (with none loaded, every
    /// runbook is). The built-in runbooks name the sample's `prod` and `dev`: on a repo whose
    /// environments are others, they cannot run there and the list does not offer them
    /// (`runbooks list` names them apart).
    fn for_this_repo(&self, r: &RunbookSummary) -> bool {
        r.not_offered.is_none()
            && (self.envs.is_empty()
                || r.environments
                    .iter()
                    .any(|e| self.envs.iter().any(|s| &s.name == e)))
    }

    /// The runbooks the home list shows: those for the repo's environments, the `/` filter
    /// applied.
    pub fn visible_runbooks(&self) -> Vec<&RunbookSummary> {
        self.runbooks
            .iter()
            .filter(|r| self.for_this_repo(r))
            .filter(|r| self.matches_filter(&[&r.id, &r.title]))
            .collect()
    }

    /// How many runbooks are not offered on this repo (written for none of its
    /// environments, or built in for playbooks it lacks): not listed.
    pub fn runbooks_elsewhere(&self) -> usize {
        self.runbooks
            .iter()
            .filter(|r| !self.for_this_repo(r))
            .count()
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
    // Actions (keys reach them through the keymap, in `keys`).

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
                // Asked when a run is in flight, and when quitting deletes journals (a demo
                // without --dir): the question names the loss either way.
                if self.run_is_active() || (self.runs_discarded.is_some() && !self.runs.is_empty())
                {
                    self.overlay = Some(Overlay::Confirm(Confirm::Quit));
                } else {
                    return Control::Quit;
                }
            }
            Action::Back => self.back(),
            Action::Help => {
                self.help_scroll = 0;
                self.overlay = Some(Overlay::Help)
            }
            Action::Messages => self.open_messages(),
            Action::CommandLine => self.open_command_line(),
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
            Action::NextEnv => self.next_env(),
            Action::StartRun => self.start_run(),
            Action::Interrupt => return self.interrupt(),
            Action::Abort => self.ask_abort(),
            Action::Retry => self.retry(),
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
            Action::ToggleWrap => self.toggle_wrap(),
            Action::Observe => self.enter_observe(),
            Action::Live => self.toggle_live(),
            Action::Check => self.toggle_check(),
            Action::NextStep => self.take_next_step(),
            Action::Filter => self.open_filter(),
            Action::NextMatch => self.jump_match(true),
            Action::PrevMatch => self.jump_match(false),
            Action::Command(line) => return self.command(&line),
        }
        Control::Continue
    }

    /// Back: clears a filter first (the Live screen has none: Back leaves it, a home
    /// filter stays), else closes the overlay, else leaves the screen.
    fn back(&mut self) {
        if self.overlay.is_none() && self.screen != Screen::Live && self.filter.take().is_some() {
            self.search_at = None;
            return;
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

    /// `:`: the prompt opens empty, as a shell's does: what the operator types next is a
    /// new command, never appended to the refused one. The refusal stays in sight (the
    /// prompt's title names its line), and Up brings the line back to be fixed.
    fn open_command_line(&mut self) {
        let error = self.refused_command.as_ref().map(|(_, why)| why.clone());
        self.overlay = Some(Overlay::Command {
            text: Box::new(single_line()),
            error,
        })
    }

    /// `e`: the next environment, chosen (the console no longer follows the worst).
    fn next_env(&mut self) {
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

    /// `A`: ask the reason to abort the active run.
    fn ask_abort(&mut self) {
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

    /// `r`: retry the halted step, unless it changes systems and its work went out (then
    /// the resume decision, never a re-run on one key).
    fn retry(&mut self) {
        match self.halted_step() {
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
        }
    }

    /// `w`: long output lines wrap, or are cut with a marker.
    fn toggle_wrap(&mut self) {
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

    /// `/`: the filter prompt, holding the filter there is.
    fn open_filter(&mut self) {
        let mut t = single_line();
        if let Some(f) = &self.filter {
            t.insert_str(f);
        }
        self.overlay = Some(Overlay::Filter { text: Box::new(t) });
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

    /// Run the static parity check now (at start and on `:check`).
    pub fn run_check(&mut self) {
        if let Some(c) = self.checker.clone() {
            self.check = c();
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
