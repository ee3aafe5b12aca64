//! The Check screen's navigation: `c` (or `:check`, or `x` on a parity verdict) opens it,
//! Back or `c` leaves it to where it was opened from, j/k scroll it.
//!
//! Owns: the app's side of the screen. Must not: run the check (`App::run_check` does,
//! through the checker the console was given) or draw (`panes::check`).

use super::{App, Screen};

impl App {
    /// Open the Check screen (the check's last result; `:check` runs it again first).
    pub fn open_check(&mut self) {
        if self.screen != Screen::Check {
            self.check_from = self.screen;
            self.screen = Screen::Check;
            // The filter belongs to the pane it was typed on.
            self.filter = None;
            self.search_at = None;
        }
        self.check_scroll = 0;
    }

    /// `c`: open the Check screen, or leave it.
    pub(super) fn toggle_check(&mut self) {
        if self.screen == Screen::Check {
            self.leave_check();
        } else {
            self.open_check();
        }
    }

    pub(super) fn leave_check(&mut self) {
        self.filter = None;
        self.screen = match self.check_from {
            Screen::Run if self.active.is_some() => Screen::Run,
            Screen::Live => Screen::Live,
            _ => Screen::Home,
        };
        if self.screen == Screen::Home {
            self.refresh_runs();
        }
    }

    /// Scroll by `d` lines, within the findings.
    pub(super) fn scroll_check(&mut self, d: isize) {
        // The rows as last drawn (findings wrap), at least one per finding before then.
        let n = match &self.check.findings {
            Some(Ok(f)) => f.len() + 2,
            _ => 1,
        }
        .max(self.check_rows.get());
        let next = self.check_scroll.saturating_add_signed(d);
        self.check_scroll = next.min(n.saturating_sub(1));
    }
}
