//! The interactive console (ratatui + crossterm + tokio).
//!
//! Owns: the state's types ([`state`]), the app that changes them and its one `Action`
//! enum ([`app`], [`action`]), keymaps per screen ([`keymap`]), drawing ([`view`], one file
//! per pane under `panes/`, each from a borrowed view the app lends), themes ([`theme`]),
//! the live panes' state ([`live`]), the output ring ([`output`]), the event loop
//! ([`event_loop`]), the simulation's fault port ([`FaultSink`], `:fault`) and the entry
//! point [`run`], which runs on the caller's tokio runtime. The terminal itself (raw mode,
//! alternate screen, restore on drop and panic) is `crate::tui`'s; the run, its journal
//! and its executors are `hk_session`'s.
//! Must not: do network IO on the UI task (executors and live sources send on channels),
//! or touch the journal (the session does).
pub mod action;
pub mod app;
pub mod config;
pub mod event_loop;
pub mod keymap;
pub mod live;
pub mod output;
pub mod panes;
pub mod pointer;
pub mod state;
pub mod theme;
pub mod tui;
pub mod view;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use hk_effects::observe::feed::Update;
use hk_engine::runbook::embedded::RunbookSet;

pub use app::{EnvSummary, PlanSource};
pub use hk_session::exec::{Capabilities, MutatingExecutors, ReadOnlyExecutors};
pub use hk_session::RepoPlans;

/// The screen the console opens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartScreen {
    Home,
    /// `hk-console run RUNBOOK --env ENV`: the plan, ready to start.
    Run {
        runbook: String,
        env: String,
        host: Option<String>,
    },
}

/// The simulation's fault port lives with the session (the simulation depends on no UI):
/// the console takes it as given.
pub use hk_session::fault::{FaultRefused, FaultSink};

/// Everything the console is started with.
pub struct UiOptions {
    /// The repo's environments (`repo.environments.iter().map(EnvSummary::from)`).
    pub environments: Vec<EnvSummary>,
    pub runbooks: RunbookSet,
    /// Runbook id -> why it is not offered on this repo (`context::not_offered`).
    pub not_offered: std::collections::BTreeMap<String, String>,
    /// Plans a runbook for an environment (over the repo's `PlanEnv`s and `Topology`).
    pub plans: Arc<dyn PlanSource>,
    /// Where run journals live (`journal::default_runs_dir()`); `None`: nothing can start.
    pub runs_dir: Option<PathBuf>,
    pub start: StartScreen,
    /// A theme name (built-in or from the user theme dir); `None`: `default`.
    pub theme: Option<String>,
    /// What can run. `hk-console observe` passes [`Capabilities::Observe`]: the app then
    /// holds read-only executors only.
    pub capabilities: Capabilities,
    /// The live sources' updates (kube watchers, the VPN poller), each one judged pane
    /// (`observe::feed::Update`). The senders live with the sources; the console keeps the
    /// latest per (environment, kind). `None`: no source runs and the panes say "no data yet".
    pub observations: Option<mpsc::Receiver<Update>>,
    /// The cluster's run lock for mutating runs (`None`: nothing can run, so nothing locks:
    /// a dry run, the bundled sample, observe mode).
    pub locking: Option<Arc<hk_session::lock::RunLocking>>,
    /// `--no-cluster-lock` was given: a banner line on every frame says so.
    pub no_cluster_lock: bool,
    /// The journals are deleted when the console exits (the demo without `--dir`): what
    /// quitting during a run loses, said in the quit question.
    pub runs_discarded: Option<String>,
    /// Problems found while setting up (e.g. hosts whose SSH settings cannot be read),
    /// shown on the status line at start.
    pub notices: Vec<String>,
    /// The simulation's fault injector (`hk-console demo` only): `:fault` works with it and
    /// is refused without it.
    pub faults: Option<Arc<dyn FaultSink>>,
    /// The environments hk-console.yaml marks `protected: true` (their names in the header
    /// and on the strip are in the warning colour).
    pub protected: Vec<String>,
    /// Runs the static parity check on the repo (at start and on `:check`); `None`: there
    /// is no repo to check.
    pub checker: Option<app::Checker>,
    /// Takes the read-only looks (events, logs, describe) a next step opens; `None`: there
    /// is no cluster to look at, and `x` on a look says so.
    pub looker: Option<Arc<dyn hk_effects::observe::look::LookSource>>,
}

/// How the console ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Quit with no run open, or after the open run succeeded.
    Clean,
    /// Quit while the open run was halted, aborted, failed or still going (its journal
    /// keeps it; resume from Home).
    RunNotSucceeded,
}

impl ExitStatus {
    /// The process exit code: 0 clean, 1 the run did not succeed.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Clean => 0,
            ExitStatus::RunNotSucceeded => 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error("the interactive console needs a terminal on stdin and stdout (use a subcommand such as `check` or `plan` otherwise)")]
    NotATerminal,
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// Build the app `opts` describe (no terminal): what [`run`] drives, and what tests draw.
pub fn build_app(
    opts_parts: app::AppParts,
    capabilities: Capabilities,
    start: &StartScreen,
) -> app::App {
    let mut app = match capabilities {
        Capabilities::Observe { read_only } => app::App::observe(opts_parts, read_only),
        caps @ Capabilities::Operate { .. } => app::App::operate(opts_parts, caps),
    };
    if let StartScreen::Run { runbook, env, host } = start {
        app.open_runbook(runbook, Some(env), host.as_deref());
    }
    app
}

/// Run the interactive console until the operator quits, on the caller's tokio runtime.
pub async fn run(opts: UiOptions) -> Result<ExitStatus, UiError> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(UiError::NotATerminal);
    }
    let themes = theme::ThemeSet::with_user_dir(theme::user_theme_dir().as_deref());
    let config = config::config_path()
        .map(|p| config::UiConfig::load(&p))
        .unwrap_or_default();
    let parts = app::AppParts {
        environments: opts.environments,
        runbooks: opts.runbooks,
        not_offered: opts.not_offered,
        plans: opts.plans,
        runs_dir: opts.runs_dir,
        themes,
        // --theme wins over the config file's theme.
        theme: opts.theme.or(config.theme),
        keymaps: config.keymaps,
        config_warnings: config.warnings,
        no_color: theme::no_color_env(),
        operator: hk_engine::journal::operator_login(),
        now: hk_engine::journal::now(),
        faults: opts.faults,
        locking: opts.locking,
    };
    let mut app = build_app(parts, opts.capabilities, &opts.start);
    app.set_protected(opts.protected);
    app.set_checker(opts.checker);
    app.set_no_cluster_lock(opts.no_cluster_lock);
    app.set_runs_discarded(opts.runs_discarded);
    app.set_looker(opts.looker);
    app.run_check();
    for n in &opts.notices {
        tracing::warn!(notice = %n, "console setup");
    }
    // A bad theme or config file stays first: the status line would otherwise hide it;
    // what the start screen just said (e.g. "s starts the run") stays before both.
    app.add_setup_notices(&opts.notices);
    {
        // Without a source the receiver's sender lives as long as the loop, so the branch
        // simply never fires instead of spinning on a closed channel.
        let (_keep_obs_open, default_rx) = mpsc::channel(1);
        let observations = opts.observations.unwrap_or(default_rx);
        let mut tui = crate::tui::Tui::enter()?;
        let result = event_loop::run_loop(&mut tui, &mut app, observations).await;
        tui.exit()?;
        result?;
        let succeeded = app.active().is_none_or(|a| a.session.left_clean());
        Ok(if succeeded {
            ExitStatus::Clean
        } else {
            ExitStatus::RunNotSucceeded
        })
    }
}
