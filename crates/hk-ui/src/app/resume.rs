//! Abandoning, and resuming an interrupted step that changes systems: the session decides
//! what is known and journals the decision; the app shows the modal and reads its keys.
//!
//! Owns: the app's side of the resume decision (opening it, its ticks, the modal's keys)
//! and of abandoning the console. Must not: journal or decide (the session does).

use crossterm::event::{KeyCode, KeyEvent};

use hk_effects::exec::process::StopReport;
use hk_engine::runbook::machine::Input;
use hk_session::supervise;

use super::{single_line, App, Control, GateField, Overlay, ReasonFor, ResumeModal, ResumeStage};

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
    // Resuming an interrupted step that changes systems.

    /// Whether step `n` is an interrupted step that changes systems (decided on, never
    /// retried on one key).
    pub fn needs_decision(&self, n: usize) -> bool {
        self.active
            .as_ref()
            .is_some_and(|a| a.session.needs_decision(n))
    }

    pub(super) fn open_resume(&mut self, n: usize) {
        if let Some(a) = self.active.as_mut() {
            let fx = a.session.open_resume(n, self.now);
            self.apply(fx);
        }
    }

    pub(super) fn resume_tick(&mut self) {
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

    pub(super) fn resume_key(&mut self, mut m: Box<ResumeModal>, key: KeyEvent) -> Control {
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
