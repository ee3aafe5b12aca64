//! Keys and the mouse: a key goes to the open overlay's handler (one per overlay), else
//! through the screen's keymap to [`App::update`]; a click selects a row or presses a
//! button's key.
//!
//! Owns: the overlays' keys (help, messages, confirm, reason, filter, command line, gate,
//! take-over; the look's, the resume decision's and the picker's live beside their state
//! in `looks`, `resume` and `picker`) and the mouse. Must not: draw, or decide anything
//! about a run (answers go to the session through [`App::feed`]).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use tui_textarea::TextArea;

use hk_engine::runbook::machine::{GateAnswer, Input};
use hk_engine::runbook::plan::Gate;

use super::{
    gate_is_typed, gate_reminder_text, single_line, App, Confirm, Control, GateField, GateModal,
    HomeFocus, Overlay, ReasonFor, RunFocus, Screen, TakeoverKey, TakeoverModal,
};
use crate::action::Action;
use crate::keymap::{Key, KeyMode};

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

impl App {
    /// A key from the terminal: to the overlay's text field, else through the keymap.
    pub fn handle_key(&mut self, key: KeyEvent) -> Control {
        if key.kind != crossterm::event::KeyEventKind::Press {
            return Control::Continue;
        }
        let bound = Key::from_event(&key);
        match self.overlay.take() {
            Some(Overlay::Help) => self.help_key(bound),
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

    /// Help has its own small keymap; anything it does not bind leaves it open.
    fn help_key(&mut self, bound: Option<Key>) -> Control {
        let Some(k) = bound else {
            self.overlay = Some(Overlay::Help);
            return Control::Continue;
        };
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

    /// A key with an overlay open: to that overlay's handler. Ctrl-C in any overlay closes
    /// it (an open gate stays open in the run, as with Esc); a second Ctrl-C then asks about
    /// the running step or quitting.
    fn overlay_key(&mut self, overlay: Overlay, key: KeyEvent) -> Control {
        let key = if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
        {
            KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)
        } else {
            key
        };
        match overlay {
            Overlay::Help => Control::Continue,
            Overlay::Messages => self.messages_key(key),
            Overlay::Look(l) => self.look_key(l, key),
            Overlay::HostPicker(p) => self.picker_key(p, key),
            Overlay::Resume(m) => self.resume_key(m, key),
            Overlay::Takeover(m) => self.takeover_key(m, key),
            Overlay::Confirm(c) => self.confirm_key(c, key),
            Overlay::Reason { why, text, error } => self.reason_key(why, text, error, key),
            Overlay::Filter { text } => self.filter_key(text, key),
            Overlay::Command { text, error } => self.command_key(text, error, key),
            Overlay::Gate(m) => self.gate_key(m, key),
        }
    }

    /// The messages overlay: scrolls with the help keymap's reading keys; Esc, `q` or `M`
    /// closes it.
    fn messages_key(&mut self, key: KeyEvent) -> Control {
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('M') => {
                self.messages_scroll = 0;
                return Control::Continue;
            }
            _ => {
                if let Some(k) = Key::from_event(&key) {
                    if let Some(a) = self.keymaps.get(KeyMode::Help).and_then(|m| m.get(&k)) {
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

    /// A yes/no question: `y` does it, `n` or Esc leaves it, anything else keeps asking.
    fn confirm_key(&mut self, c: Confirm, key: KeyEvent) -> Control {
        match key.code {
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
        }
    }

    /// A question answered with a reason (abort, skip): Enter gives it (a reason is
    /// required), Esc leaves it.
    fn reason_key(
        &mut self,
        why: ReasonFor,
        mut text: Box<TextArea<'static>>,
        error: Option<String>,
        key: KeyEvent,
    ) -> Control {
        match key.code {
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
        }
    }

    /// The `/` filter being typed: Enter applies it (the selections start over), Esc
    /// leaves the filter as it was.
    /// The `/` prompt filters as it is typed (as k9s does): each key applies what the
    /// prompt holds; Enter keeps it and closes the prompt, Esc clears the filter.
    fn filter_key(&mut self, mut text: Box<TextArea<'static>>, key: KeyEvent) -> Control {
        let apply = |app: &mut Self, f: Option<String>| {
            app.filter = f;
            app.search_at = None;
            app.env_sel = 0;
            app.runbook_sel = 0;
            app.run_sel = 0;
        };
        match key.code {
            KeyCode::Esc => {
                apply(self, None);
                Control::Continue
            }
            KeyCode::Enter => {
                let f = text.lines().join(" ").trim().to_string();
                apply(self, (!f.is_empty()).then_some(f));
                Control::Continue
            }
            _ => {
                text.input(key);
                let f = text.lines().join(" ").trim().to_string();
                apply(self, (!f.is_empty()).then_some(f));
                self.overlay = Some(Overlay::Filter { text });
                Control::Continue
            }
        }
    }

    /// The `:` prompt: Enter runs the line, Tab completes it, Up on an empty prompt brings
    /// back the refused line, Esc forgets it.
    fn command_key(
        &mut self,
        mut text: Box<TextArea<'static>>,
        error: Option<String>,
        key: KeyEvent,
    ) -> Control {
        match key.code {
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
        }
    }

    /// A gate modal: Enter answers, Ctrl-R rejects (the note is the reason), Esc hides it
    /// (the gate stays open; the status line reminds of it), Tab moves between a typed
    /// gate's two fields, the arrows scroll a diff.
    fn gate_key(&mut self, mut m: Box<GateModal>, key: KeyEvent) -> Control {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
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

    fn submit_gate(&mut self, mut m: Box<GateModal>) -> Control {
        let by = self.operator.clone();
        let n = m.n;
        let note = m.note.lines().join(" ").trim().to_string();
        // Issue 29: a step whose hosts' disruption, given the health the live panes see
        // now, leaves etcd without quorum goes on only with a typed override and its
        // reason in the note (journaled with the answer).
        if let Some(refused) = self.live_refusal(n) {
            if hk_engine::guard::blast::override_reason(&note).is_none() {
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
                lines: hk_engine::guard::blast::journal_lines(&lines),
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

    /// A left click at (`col`, `row`): on a list row, select it (and focus its pane); on
    /// the row already selected, open it as enter does; on a button, press its key. With
    /// an overlay open only the overlay's rows and buttons take clicks.
    pub fn click(&mut self, col: u16, row: u16) -> Control {
        use crate::pointer::{Click, ListId};
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
