//! Runs: the session drives them; the app opens them, forwards the operator's answers and
//! the executors' replies, and shows what the session says.
//!
//! Owns: opening a plan or a journal, starting, the run lock's answers as the screen sees
//! them, and [`App::apply`] (a session's effects onto the screen). Must not: journal,
//! dispatch or decide anything about a run (the session does).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use hk_engine::journal;
use hk_engine::runbook::machine::{Input, RunOutcome};
use hk_session::exec::ExecReply;
use hk_session::{Opened, Session, SessionEffect};

use super::{
    gate_reminder_text, ActiveRun, App, GateModal, Overlay, ResumeModal, Screen, TakeoverModal,
};
use crate::output::OutputBuffer;

impl App {
    /// Plan runbook `id` for `env` (or the current environment, or the runbook's only one)
    /// and show the plan. Nothing is journaled until it is started.
    pub fn open_runbook(&mut self, id: &str, env: Option<&str>, host: Option<&str>) {
        let env_named = env;
        if self.run_is_active() {
            self.status = Some("a run is active: finish or abort it (A) first".into());
            self.screen = Screen::Run;
            return;
        }
        let opened = hk_session::open_plan_or_blocked(
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
                // The runbook is not for the environment in view: say how to pick another.
                let other_env = env.is_none()
                    && self.runbook_set.get(id).is_some_and(|l| {
                        l.environments.len() > 1
                            && !self
                                .current_env
                                .as_deref()
                                .is_some_and(|c| l.environments.iter().any(|e| e == c))
                    });
                self.status = Some(if other_env {
                    format!("{} (:env or e)", e.0)
                } else {
                    e.0
                });
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
        let notice = match session.can_start() {
            hk_session::CanStart::Yes => "s starts the run",
            hk_session::CanStart::ObserveAllLook => {
                "observe mode: every step only looks; s starts the run"
            }
            hk_session::CanStart::ObserveLookOnly => "observe mode: the plan opens to look at only",
        };
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

    pub(super) fn set_active(&mut self, session: Session) {
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

    pub(super) fn open_journal(&mut self, path: PathBuf, outcome: RunOutcome) {
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

    pub(super) fn start_run(&mut self) {
        let Some(a) = self.active.as_mut() else {
            // Wording only: with no run open, nothing starts in either mode.
            self.status = Some(if self.is_observe() {
                OBSERVE_STARTS_NOTHING.into()
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
    pub(super) fn lock_refused(&mut self, why: String) {
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
    pub(super) fn take_lock_jobs(&mut self) {
        if let Some(a) = self.active.as_mut() {
            self.lock_outbox.extend(a.session.take_lock_jobs());
        }
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
    pub(super) fn apply(&mut self, effects: Vec<SessionEffect>) {
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
        // This run moved etcd's leadership: the etcd look taken before it no longer says
        // who leads (the next gate would name the old leader until the next look).
        if let ExecReply::Outcome {
            input:
                hk_engine::runbook::machine::Input::VerifyResult {
                    n,
                    ok: true,
                    detail,
                    ..
                },
            ..
        } = &reply
        {
            let plan = a.run.plan();
            let moved = plan.steps.iter().any(|s| {
                s.n == *n && s.mutates && s.kind == hk_engine::runbook::plan::StepKind::EtcdLeader
            }) && detail.starts_with(hk_engine::guard::leader::MOVED);
            if moved {
                let env = plan.env.clone();
                self.live
                    .supersede(&env, crate::live::LiveKind::Etcd, self.now);
            }
        }
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let fx = a.session.handle_reply(reply, self.now);
        self.apply(fx);
    }
}

/// What observe says to a start with no run open.
pub(crate) const OBSERVE_STARTS_NOTHING: &str =
    "observe mode: open a runbook first; only a runbook whose every step only looks can start";
