//! The app's state, read and set from outside: what the event loop drains and stamps
//! (the queues for the pump, the clock), what the composition root sets once at start, and
//! what tests read and arrange. The fields stay private; each concern has its few methods.
//!
//! Owns: nothing but these doors. Must not: decide anything (the key and update paths do).

use std::collections::VecDeque;
use std::sync::Arc;

use hk_effects::observe::timeline::Timeline;
use hk_engine::journal::RunSummary;
use hk_engine::runbook::machine::Timestamp;
use hk_session::exec::ExecRequest;

use super::{
    ActiveRun, App, CheckView, Checker, EnvSummary, HomeFocus, LookRequest, Overlay, RunFocus,
    RunbookSummary, Screen,
};
use crate::live::LiveState;

impl App {
    // ----------------------------------------------------------------------------------
    // The loop: the clock, and the queues it drains after every update.

    /// Now, as the loop's last tick set it (ages and journal times use it).
    pub fn now(&self) -> Timestamp {
        self.now
    }

    pub fn set_now(&mut self, now: Timestamp) {
        self.now = now;
    }

    /// Requests for the executor task (the loop's pump drains them).
    pub fn outbox(&self) -> &VecDeque<ExecRequest> {
        &self.outbox
    }

    pub fn outbox_mut(&mut self) -> &mut VecDeque<ExecRequest> {
        &mut self.outbox
    }

    /// Calls on the cluster's run lock, for the pump to run off the UI task.
    pub fn lock_outbox(&self) -> &VecDeque<hk_session::lock::LockJob> {
        &self.lock_outbox
    }

    pub fn lock_outbox_mut(&mut self) -> &mut VecDeque<hk_session::lock::LockJob> {
        &mut self.lock_outbox
    }

    /// Looks asked for, for the loop to take off the UI task.
    pub fn look_outbox(&self) -> &VecDeque<LookRequest> {
        &self.look_outbox
    }

    /// The next look to take, with what takes it (`None` for the source: no cluster).
    #[allow(clippy::type_complexity)]
    pub fn next_look(
        &mut self,
    ) -> Option<(
        LookRequest,
        Option<Arc<dyn hk_effects::observe::look::LookSource>>,
    )> {
        let req = self.look_outbox.pop_front()?;
        Some((req, self.looker.clone()))
    }

    /// Say `said` on the status line.
    pub fn set_status(&mut self, said: Option<String>) {
        self.status = said;
    }

    // ----------------------------------------------------------------------------------
    // Set once by the composition root, before the loop runs.

    /// Environments marked `protected: true`.
    pub fn set_protected(&mut self, envs: Vec<String>) {
        self.protected = envs;
    }

    /// How the static check runs again (`:check`).
    pub fn set_checker(&mut self, checker: Option<Checker>) {
        self.checker = checker;
    }

    /// `--no-cluster-lock` was given (a banner line says so).
    pub fn set_no_cluster_lock(&mut self, off: bool) {
        self.no_cluster_lock = off;
    }

    /// What quitting loses where the journals do not outlive the console.
    pub fn set_runs_discarded(&mut self, lost: Option<String>) {
        self.runs_discarded = lost;
    }

    /// What takes the looks a next step opens (`None`: no cluster to look at).
    pub fn set_looker(&mut self, looker: Option<Arc<dyn hk_effects::observe::look::LookSource>>) {
        self.looker = looker;
    }

    /// Problems found while setting up, on the status line after what the start screen
    /// said, a bad theme or config file first.
    pub fn add_setup_notices(&mut self, notices: &[String]) {
        if notices.is_empty() {
            return;
        }
        let mut all: Vec<String> = self.theme_warnings.iter().map(|w| w.to_string()).collect();
        all.extend(notices.iter().cloned());
        let warned = format!("⚠ {}", all.join("; "));
        self.status = Some(match self.status.take() {
            Some(said) => format!("{said} · {warned}"),
            None => warned,
        });
    }

    // ----------------------------------------------------------------------------------
    // Reads, by concern.

    pub fn keymaps(&self) -> &crate::keymap::Keymaps {
        &self.keymaps
    }

    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    pub fn active_mut(&mut self) -> Option<&mut ActiveRun> {
        self.active.as_mut()
    }

    pub fn envs(&self) -> &[EnvSummary] {
        &self.envs
    }

    pub fn runbooks(&self) -> &[RunbookSummary] {
        &self.runbooks
    }

    /// Home's Recent runs, as last read.
    pub fn runs(&self) -> &[RunSummary] {
        &self.runs
    }

    pub fn runs_error(&self) -> Option<&str> {
        self.runs_error.as_deref()
    }

    pub fn runs_discarded(&self) -> Option<&str> {
        self.runs_discarded.as_deref()
    }

    pub fn home_focus(&self) -> HomeFocus {
        self.home_focus
    }

    /// Home's selections: (environments, runbooks, runs).
    pub fn home_selection(&self) -> (usize, usize, usize) {
        (self.env_sel, self.runbook_sel, self.run_sel)
    }

    pub fn run_focus(&self) -> RunFocus {
        self.run_focus
    }

    /// The `/` filter.
    pub fn filter(&self) -> Option<&str> {
        self.filter.as_deref()
    }

    /// The output line `n`/`N` last jumped to.
    pub fn search_at(&self) -> Option<u64> {
        self.search_at
    }

    pub fn output_wrap(&self) -> bool {
        self.output_wrap
    }

    pub fn live(&self) -> &LiveState {
        &self.live
    }

    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The Live screen's first shown line.
    pub fn live_scroll(&self) -> usize {
        self.live_scroll
    }

    /// The Check screen's result and first shown line.
    pub fn check(&self) -> &CheckView {
        &self.check
    }

    pub fn check_scroll(&self) -> usize {
        self.check_scroll
    }

    pub fn help_scroll(&self) -> usize {
        self.help_scroll
    }

    /// The last `:` line refused, and why.
    pub fn refused_command(&self) -> Option<&(String, String)> {
        self.refused_command.as_ref()
    }

    /// The terminal's size, as the last resize said.
    pub fn size(&self) -> (u16, u16) {
        (self.width, self.height)
    }

    // ----------------------------------------------------------------------------------
    // Arranging a state directly (tests, benches): what keys would take longer to reach.

    pub fn set_screen(&mut self, screen: Screen) {
        self.screen = screen;
    }

    pub fn set_overlay(&mut self, overlay: Option<Overlay>) {
        self.overlay = overlay;
    }

    pub fn set_current_env(&mut self, env: Option<String>) {
        self.current_env = env;
    }

    pub fn set_filter(&mut self, filter: Option<String>) {
        self.filter = filter;
    }

    /// Focus Home's `focus` list and select its row `sel`.
    pub fn select_home(&mut self, focus: HomeFocus, sel: usize) {
        self.home_focus = focus;
        match focus {
            HomeFocus::Environments => self.env_sel = sel,
            HomeFocus::Runbooks => self.runbook_sel = sel,
            HomeFocus::Runs => self.run_sel = sel,
        }
    }

    pub fn set_live_scroll(&mut self, at: usize) {
        self.live_scroll = at;
    }

    pub fn set_check(&mut self, check: CheckView) {
        self.check = check;
    }

    pub fn set_check_scroll(&mut self, at: usize) {
        self.check_scroll = at;
    }

    pub fn set_help_scroll(&mut self, at: usize) {
        self.help_scroll = at;
    }

    pub fn live_mut(&mut self) -> &mut LiveState {
        &mut self.live
    }

    /// Forget the open run (its session is dropped, nothing is journaled).
    pub fn close_run(&mut self) {
        self.active = None;
    }
}
