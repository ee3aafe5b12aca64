//! What the app lends the panes: one small borrowed view per pane, made from its private
//! state at draw time, and the few reads the frame's own lines (title, status) need.
//!
//! Owns: the app's side of drawing. Must not: change state (the counts the panes report
//! back, such as the Live screen's line count, go through `Cell`s the views lend), or
//! draw (`view` lays the frame out, `panes` draw).

use std::cell::Cell;

use crate::panes::banner::BannerView;
use crate::panes::home::HomeView;
use crate::panes::live::LiveView;
use crate::panes::live_screen::LiveScreenView;
use crate::panes::overlay::OverlayView;
use crate::panes::run::RunView;
use crate::panes::Ctx;
use crate::pointer::Zones;
use crate::theme::{Theme, ThemeWarning};

use super::{ActiveRun, App, CheckView, Overlay, Screen};

/// What the Check screen draws from.
pub struct CheckScreenView<'a> {
    pub check: &'a CheckView,
    pub filter: Option<&'a str>,
    /// The first shown line.
    pub scroll: usize,
    /// How many rows the findings took, as drawn (the scroll bound, reported back).
    pub rows: &'a Cell<usize>,
}

impl App {
    pub fn theme(&self) -> &Theme {
        &self.theme
    }

    /// Where a click acts on the last frame drawn (the panes register their rows).
    pub fn zones(&self) -> &Zones {
        &self.zones
    }

    pub fn theme_warnings(&self) -> &[ThemeWarning] {
        &self.theme_warnings
    }

    /// Whether `env` is marked `protected: true`.
    pub fn is_protected(&self, env: &str) -> bool {
        self.protected.iter().any(|p| p == env)
    }

    /// What every pane draws with.
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            theme: &self.theme,
            zones: &self.zones,
            now: self.now,
        }
    }

    pub fn banner_view(&self) -> BannerView<'_> {
        BannerView {
            observe: self.is_observe(),
            no_cluster_lock: self.no_cluster_lock,
            active: self.active.as_ref(),
        }
    }

    pub fn home_view(&self) -> HomeView<'_> {
        HomeView {
            cx: self.ctx(),
            envs: &self.envs,
            current_env: self.current_env.as_deref(),
            focus: self.home_focus,
            env_sel: self.env_sel,
            runbook_sel: self.runbook_sel,
            run_sel: self.run_sel,
            runbooks: self.visible_runbooks(),
            runbooks_total: self.runbooks.len() - self.runbooks_elsewhere(),
            runbooks_elsewhere: self.runbooks_elsewhere(),
            runs: self.visible_runs(),
            runs_total: self.runs.len(),
            runs_error: self.runs_error.as_deref(),
            filter: self.filter.as_deref(),
            active_journal: self
                .active
                .as_ref()
                .filter(|_| self.run_is_active())
                .and_then(|a| a.journal.as_ref())
                .map(|j| j.path()),
        }
    }

    /// The run view, with `summary` (the frame's: the next step of the run's environment).
    pub fn run_view<'a>(
        &'a self,
        summary: &'a hk_effects::observe::summary::Summary,
    ) -> RunView<'a> {
        let active = self.active.as_ref();
        RunView {
            cx: self.ctx(),
            active,
            blocked: self.blocked.as_ref(),
            caps: &self.caps,
            focus: self.run_focus,
            filter: self.filter.as_deref(),
            search_at: self.search_at,
            output_wrap: self.output_wrap,
            gate_shown: matches!(self.overlay, Some(Overlay::Gate(_))),
            overrides_shipped: active.and_then(|a| self.overrides_shipped(&a.run.plan().runbook)),
            holder_advice: self.holder_advice(),
            summary,
        }
    }

    /// The strip's view: the environment it expands, now.
    pub fn live_view(&self) -> LiveView<'_> {
        LiveView {
            live: &self.live,
            env: self.strip_env(),
            now: self.now,
            theme: &self.theme,
        }
    }

    pub fn live_screen_view(&self) -> LiveScreenView<'_> {
        LiveScreenView {
            live: &self.live,
            env: self.current_env.as_deref(),
            timeline: &self.timeline,
            now: self.now,
            theme: &self.theme,
            scroll: self.live_scroll,
            lines: &self.live_lines,
        }
    }

    pub fn check_screen_view(&self) -> CheckScreenView<'_> {
        CheckScreenView {
            check: &self.check,
            filter: self.filter.as_deref(),
            scroll: self.check_scroll,
            rows: &self.check_rows,
        }
    }

    pub fn overlay_view(&self) -> OverlayView<'_> {
        OverlayView {
            cx: self.ctx(),
            overlay: self.overlay.as_ref(),
            screen: self.screen,
            keymaps: &self.keymaps,
            key_mode: self.screen_key_mode(),
            help_scroll: self.help_scroll,
            messages: &self.messages,
            messages_scroll: self.messages_scroll,
            scroll_max: &self.overlay_scroll_max,
            refused_command: self.refused_command.as_ref(),
            runs_discarded: self.runs_discarded.as_deref(),
            run_active: self.run_is_active(),
            journals: self.runs.len(),
            operator: &self.operator,
            active: self.active.as_ref(),
            gate_blast: match &self.overlay {
                Some(Overlay::Gate(m)) => self.live_blast(m.n),
                _ => None,
            },
        }
    }

    /// The screen in view.
    pub fn screen(&self) -> Screen {
        self.screen
    }

    /// The open run, if any.
    pub fn active(&self) -> Option<&ActiveRun> {
        self.active.as_ref()
    }

    /// The environment runbooks open in.
    pub fn current_env(&self) -> Option<&str> {
        self.current_env.as_deref()
    }

    /// The status line (what just happened).
    pub fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }
}
