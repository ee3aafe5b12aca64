//! The one [`Action`] enum: everything the operator (or the loop) can ask the app to do.
//!
//! Owns: the vocabulary keymaps bind. Serde-derived so a keymap file can name actions
//! (`quit`, `start-run`, ...); variants only the event loop makes are `#[serde(skip)]`.
//! Must not: carry behaviour; `app.rs` interprets actions.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Quit (asks first when a run is active).
    Quit,
    /// Close the overlay, or go back a screen.
    Back,
    /// The help overlay for the current screen.
    Help,
    /// The `:` command line.
    CommandLine,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// Cycle focus between the screen's panes.
    FocusNext,
    /// Open the selected item (a runbook in the chosen environment, a run to resume).
    Open,
    /// Pick the next environment for the selected runbook.
    NextEnv,
    /// Start the opened plan.
    StartRun,
    /// Ask whether to cancel the running step (Ctrl-C).
    Interrupt,
    /// Abort the run (asks for a reason).
    Abort,
    /// Run the failed or interrupted step again.
    Retry,
    /// Skip the step the run halted on (asks for a reason).
    Skip,
    /// Output: toggle follow mode.
    ToggleFollow,
    /// Output: long lines wrap, or are cut with a marker.
    ToggleWrap,
    /// Switch to observe mode (read-only).
    Observe,
    /// The Live screen (every live pane in detail); on it, back to where it was opened.
    Live,
    /// `/`: filter the lists (home) or the output (run view).
    Filter,
    /// While an output search is active: jump to the next (newer) matching line.
    NextMatch,
    /// While an output search is active: jump to the previous (older) matching line.
    PrevMatch,
    /// The strip's next step for the worst environment: open the runbook that fixes or
    /// verifies its verdict (its plan, for that environment), or name what to look at.
    NextStep,
    /// The Check screen (the static parity check's findings, file:line); on it, back.
    Check,
    /// Every status line of this session, whole (the status line cuts a long one).
    Messages,

    /// A command typed on the command line.
    #[serde(skip)]
    Command(String),
    /// The loop's tick: clocks and ages move on.
    #[serde(skip)]
    Tick,
    #[serde(skip)]
    Resize(u16, u16),
}

impl Action {
    /// What the action does, for the help overlay.
    pub fn describe(&self) -> &'static str {
        match self {
            Action::Quit => "quit (asks if a run is active)",
            Action::Back => "close / back",
            Action::Help => "this help",
            Action::CommandLine => {
                "commands: :run RUNBOOK [ENV [HOST]] :env :theme :check :observe :live :fault :messages :q"
            }
            Action::Up => "up",
            Action::Down => "down",
            Action::PageUp => "page up",
            Action::PageDown => "page down",
            Action::Top => "top",
            Action::Bottom => "bottom",
            Action::FocusNext => "next pane",
            Action::Open => "open (run view: the waiting gate or decision)",
            Action::NextEnv => "next environment",
            Action::StartRun => "start the run",
            Action::Interrupt => "cancel the running step (asks)",
            Action::Abort => "abort the run (asks a reason)",
            Action::Retry => "retry the failed step",
            Action::Skip => "skip the halted step (asks a reason)",
            Action::ToggleFollow => "output: follow on/off",
            Action::ToggleWrap => "output: wrap long lines on/off (off: cut, marked …)",
            Action::Observe => "observe mode (read-only)",
            Action::Live => "live panes in detail (VIP, agents, rollout, nodes, VPN)",
            Action::Filter => "filter lists / search output (esc clears)",
            Action::NextMatch => "search: next matching line",
            Action::PrevMatch => "search: previous matching line",
            Action::NextStep => {
                "next step of the worst verdict: its runbook's plan, or a look (events, logs, describe)"
            }
            Action::Check => "the Check screen: parity findings with file:line (:check re-runs)",
            Action::Messages => "every message of this session, whole (:messages)",
            Action::Command(_) => "command",
            Action::Tick => "tick",
            Action::Resize(..) => "resize",
        }
    }
}
