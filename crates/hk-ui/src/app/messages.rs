//! Messages: every status line this console showed, readable whole (`M`, `:messages`).
//!
//! Owns: the messages log and its overlay's opening. Must not: draw (`panes::overlay`).

use super::{App, Overlay, MESSAGES_KEPT};

impl App {
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
    pub(super) fn log_message(&mut self, text: String) {
        if self.messages.len() == MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back((self.now, text));
    }

    /// The messages overlay, on its newest messages.
    pub(super) fn open_messages(&mut self) {
        self.keep_status();
        self.messages_scroll = usize::MAX;
        self.overlay = Some(Overlay::Messages);
    }
}
