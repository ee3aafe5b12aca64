//! Resuming a step that changes systems whose outcome is unknown (interrupted, or failed,
//! cancelled or not verified after its work went out): a decision, never one key.
//!
//! Owns: what is known about the interrupted step ([`ResumeInfo`]): whether its process
//! still runs ([`ProcessCheck`], by pid and start time), the read-only probe the runbook
//! names for it ([`ProbeRun`], run once the process is gone, its result journaled), the
//! step's last output lines; waiting for the process or stopping it (the stop ladder on a
//! thread); and journaling the decision (re-run, mark done) once the machine accepts it.
//! Must not: draw the decision (that is `ui::panes::resume`) or read keys (`ui::app`).

use std::sync::Arc;

use hk_effects::exec::process::{self, ChildId, Liveness, StopReport};
use hk_engine::journal;
use hk_engine::runbook::machine::{self, Event, Input, MachineError, Timestamp};

use super::exec::Executors;
use super::exec::{ExecRequest, RunTag};
use super::{next_tag, step_of, RunSession, SessionEffect};

/// Whether the interrupted step's process still runs, as last looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessCheck {
    /// The step started no local process (or none was journaled).
    NoProcess,
    /// That very process (pid and start time) still runs.
    Alive(ChildId),
    /// It is gone: how.
    Gone(String),
    /// This system cannot tell; treated as running.
    Unknown(ChildId, String),
}

/// The read-only probe run before the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeRun {
    /// The runbook has no read-back for this step.
    NoProbe,
    /// Waiting for the process to be gone before probing.
    Pending { probe: usize },
    /// Running (its replies carry `tag`).
    Running { probe: usize, tag: RunTag },
    /// Journaled (the machine's record has the result).
    Done,
}

/// What the session knows about the interrupted step it resumes.
#[derive(Debug)]
pub struct ResumeInfo {
    pub n: usize,
    pub process: ProcessCheck,
    pub probe: ProbeRun,
    /// Look again every tick until the process is gone.
    pub waiting: bool,
    /// The stop ladder, running on a thread; its report once done.
    pub stopping: Option<Arc<std::sync::Mutex<Option<Vec<StopReport>>>>>,
    /// The step's last output lines (from the output log beside the journal).
    pub last_lines: Vec<String>,
    /// Who started the run.
    pub started_by: Option<String>,
}

impl ResumeInfo {
    /// While its process may still run, the only choices are to wait for it or stop it.
    pub fn process_may_run(&self) -> bool {
        matches!(
            self.process,
            ProcessCheck::Alive(_) | ProcessCheck::Unknown(..)
        )
    }

    /// The probe's result comes before any decision.
    pub fn probing(&self) -> bool {
        matches!(
            self.probe,
            ProbeRun::Pending { .. } | ProbeRun::Running { .. }
        )
    }
}

impl<X: Executors> RunSession<X> {
    /// The tag the running resume probe's replies carry.
    pub fn probe_tag(&self) -> Option<RunTag> {
        match self.core.resume.as_ref().map(|r| &r.probe) {
            Some(ProbeRun::Running { tag, .. }) => Some(*tag),
            _ => None,
        }
    }

    /// Whether step `n` is a step that changes systems with an unknown outcome (decided
    /// on, never retried on one key): the machine's rule, [`machine::Run::needs_decision`].
    pub fn needs_decision(&self, n: usize) -> bool {
        self.core.run.needs_decision(n)
    }

    /// Start the resume of interrupted step `n`: look for its process, gather what is
    /// known, probe when the process is gone, and ask the decision.
    pub(super) fn begin_resume(
        &mut self,
        n: usize,
        started_by: Option<String>,
        now: Timestamp,
    ) -> Vec<SessionEffect> {
        let Some(rec) = self.core.run.step_record(n) else {
            return Vec::new();
        };
        let attempt = rec.attempt;
        let last_lines = self
            .journal
            .as_ref()
            .and_then(|j| journal::read_output(j.path()).ok())
            .map(|out| {
                let mine: Vec<String> = out
                    .into_iter()
                    .filter(|o| o.n == n && o.attempt == attempt)
                    .map(|o| o.line)
                    .collect();
                mine[mine.len().saturating_sub(6)..].to_vec()
            })
            .unwrap_or_default();
        let probe = match machine::probe_for(self.core.run.plan(), n) {
            // The executor never started its work: nothing changed, nothing to read back.
            _ if rec.never_started => ProbeRun::NoProbe,
            None => ProbeRun::NoProbe,
            Some(_) if rec.probe.is_some() => ProbeRun::Done,
            Some(p) => ProbeRun::Pending { probe: p.n },
        };
        self.core.resume = Some(ResumeInfo {
            n,
            process: ProcessCheck::NoProcess,
            probe,
            waiting: false,
            stopping: None,
            last_lines,
            started_by,
        });
        let mut out = self.check_process(now);
        out.push(SessionEffect::AskDecision { n });
        out
    }

    /// Ask the decision over interrupted step `n` (again), gathering what is known first
    /// when this is the first time.
    pub fn open_resume(&mut self, n: usize, now: Timestamp) -> Vec<SessionEffect> {
        if self.core.resume.as_ref().is_some_and(|r| r.n == n) {
            return vec![SessionEffect::AskDecision { n }];
        }
        let by = self
            .journal
            .as_ref()
            .and_then(|j| journal::replay(j.path()).ok())
            .map(|r| r.header.operator);
        self.begin_resume(n, by, now)
    }

    /// Look at the interrupted step's process; once it is known gone, journal that and
    /// start the probe.
    fn check_process(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        let Some(info) = self.core.resume.as_mut() else {
            return Vec::new();
        };
        let n = info.n;
        let Some(rec) = self.core.run.step_record(n) else {
            return Vec::new();
        };
        let attempt = rec.attempt;
        let check = match &rec.process {
            None => ProcessCheck::NoProcess,
            Some(p) => match &p.ended {
                Some(how) => ProcessCheck::Gone(how.clone()),
                None => {
                    let child = ChildId {
                        pid: p.pid,
                        start_time: p.start_time,
                        program: p.program.clone(),
                        marker: p.marker.clone(),
                    };
                    match process::liveness(&child) {
                        Liveness::Alive => ProcessCheck::Alive(child),
                        Liveness::Unknown(why) => ProcessCheck::Unknown(child, why),
                        Liveness::Gone(why) => {
                            let how = if info.waiting {
                                format!("ended while {} waited ({why})", self.core.operator)
                            } else {
                                format!("not running when the run was resumed ({why})")
                            };
                            info.process = ProcessCheck::Gone(how.clone());
                            info.waiting = false;
                            let pid = p.pid;
                            let mut out = self.feed(
                                Input::ProcessEnded {
                                    n,
                                    attempt,
                                    pid,
                                    how,
                                },
                                now,
                            );
                            out.extend(self.start_probe(now));
                            return out;
                        }
                    }
                }
            },
        };
        let gone = matches!(check, ProcessCheck::NoProcess | ProcessCheck::Gone(_));
        info.process = check;
        if gone {
            self.start_probe(now)
        } else {
            Vec::new()
        }
    }

    /// Send the probe step's read-only work, once, when the process is gone.
    fn start_probe(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        let Some(info) = self.core.resume.as_mut() else {
            return Vec::new();
        };
        let ProbeRun::Pending { probe } = info.probe else {
            return Vec::new();
        };
        let Some(step) = step_of(&self.core.run, probe) else {
            return Vec::new();
        };
        let n = info.n;
        match self.exec.executor_for(&step) {
            Ok(_) => {
                // Journal before effect, for the probe's command too: it leaves only with
                // the proof that its `probe-started` is on disk.
                let recorded = match self.core.journal.as_mut() {
                    Some(j) => j.record_probe_start(&mut self.core.run, now, n, probe),
                    None => return Vec::new(),
                };
                let start = match recorded {
                    Ok(start) => start,
                    Err(e) => {
                        let mut out = Vec::new();
                        if let Some(info) = self.core.resume.as_mut() {
                            info.probe = ProbeRun::Done;
                        }
                        self.journal_failed(&e, &Input::ProbeStarted { n, probe }, now, &mut out);
                        return out;
                    }
                };
                let tag = next_tag();
                if let Some(info) = self.core.resume.as_mut() {
                    info.probe = ProbeRun::Running { probe, tag };
                }
                vec![
                    SessionEffect::Output(format!(
                        "── probe for step {n}: step {probe} · {} · {} ──",
                        step.kind.as_str(),
                        step.title
                    )),
                    SessionEffect::Request(Box::new(ExecRequest::Execute {
                        tag,
                        step,
                        attempt: 1,
                        authorised: Vec::new(),
                        env: self.core.run.plan().env.clone(),
                        start,
                    })),
                ]
            }
            Err(why) => {
                info.probe = ProbeRun::Done;
                self.feed(
                    Input::ProbeResult {
                        n,
                        probe,
                        ok: false,
                        detail: format!("the probe could not run: {why}"),
                    },
                    now,
                )
            }
        }
    }

    /// A reply of the running probe: its outcome becomes one journaled probe result.
    pub(super) fn probe_reply(&mut self, input: Input, now: Timestamp) -> Vec<SessionEffect> {
        let Some(info) = self.core.resume.as_mut() else {
            return Vec::new();
        };
        let ProbeRun::Running { probe, tag } = info.probe else {
            return Vec::new();
        };
        let n = info.n;
        let Some(step) = step_of(&self.core.run, probe) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let result = match input {
            Input::StepFinished {
                exit_code, error, ..
            } => {
                let want = step.expect.as_ref().and_then(|e| e.exit_code).unwrap_or(0);
                match error {
                    Some(e) => Some((false, e)),
                    None if exit_code != Some(want) => Some((
                        false,
                        match exit_code {
                            Some(c) => format!("exit code {c}, expected {want}"),
                            None => format!("no exit code (killed by a signal?), expected {want}"),
                        },
                    )),
                    None if machine::needs_verify(&step) => {
                        out.push(SessionEffect::Request(Box::new(ExecRequest::Verify {
                            tag,
                            step,
                            attempt: 1,
                        })));
                        None
                    }
                    None => Some((true, format!("exit code {want}"))),
                }
            }
            Input::VerifyResult { ok, detail, .. } => Some((ok, detail)),
            Input::HostSetObserved { hosts, .. } => Some((true, hosts.join(", "))),
            Input::Cancelled { reason, .. } => Some((false, reason)),
            _ => None,
        };
        if let Some((ok, detail)) = result {
            info.probe = ProbeRun::Done;
            out.extend(self.feed(
                Input::ProbeResult {
                    n,
                    probe,
                    ok,
                    detail,
                },
                now,
            ));
        }
        out
    }

    /// Each tick: a waited-for process is looked at again; a finished stop is journaled.
    pub fn resume_tick(&mut self, now: Timestamp) -> Vec<SessionEffect> {
        let Some(info) = self.core.resume.as_mut() else {
            return Vec::new();
        };
        if let Some(slot) = &info.stopping {
            let done = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            let mut out = Vec::new();
            if let Some(reports) = done {
                info.stopping = None;
                let n = info.n;
                let attempt = self.core.run.step_record(n).map_or(0, |r| r.attempt);
                for r in reports {
                    if r.ended {
                        let how = format!("stopped by {}: {}", self.core.operator, r.describe());
                        out.extend(self.feed(
                            Input::ProcessEnded {
                                n,
                                attempt,
                                pid: r.child.pid,
                                how,
                            },
                            now,
                        ));
                    } else {
                        out.push(SessionEffect::Notice(r.describe()));
                    }
                }
                out.extend(self.check_process(now));
            }
            return out;
        }
        if info.waiting {
            return self.check_process(now);
        }
        Vec::new()
    }

    /// Look again at the interrupted step's process every tick until it is gone.
    pub fn wait_for_process(&mut self) -> Vec<SessionEffect> {
        let Some(info) = self.core.resume.as_mut() else {
            return Vec::new();
        };
        info.waiting = true;
        vec![SessionEffect::Notice(format!(
            "waiting for step {}'s process to end…",
            info.n
        ))]
    }

    /// Journal a resume decision. Err: the machine refused it, why (nothing journaled).
    pub fn decide(
        &mut self,
        input: Input,
        now: Timestamp,
    ) -> Result<Vec<SessionEffect>, MachineError> {
        let mut trial = self.core.run.clone();
        trial.step(&Event::new(now, input.clone()))?;
        // A lost lock refuses the decision too (the view stays open, saying why).
        if let Some(refused) = self.lock_refuses(&input, now) {
            return Ok(refused);
        }
        self.core.resume = None;
        Ok(self.feed(input, now))
    }

    /// The stop ladder on the interrupted step's process, on a thread so the caller keeps
    /// going; its report is journaled by [`RunSession::resume_tick`] once it is in.
    pub fn stop_resumed_process(&mut self) -> Vec<SessionEffect> {
        let Some(info) = self.core.resume.as_mut() else {
            return Vec::new();
        };
        let child = match &info.process {
            ProcessCheck::Alive(c) | ProcessCheck::Unknown(c, _) => c.clone(),
            _ => return Vec::new(),
        };
        if info.stopping.is_some() {
            return Vec::new();
        }
        let slot = Arc::new(std::sync::Mutex::new(None));
        info.stopping = Some(Arc::clone(&slot));
        let pid = child.pid;
        std::thread::spawn(move || {
            let reports = process::stop_groups(
                &[child],
                std::time::Duration::from_secs(3),
                std::time::Duration::from_secs(2),
            );
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(reports);
        });
        vec![SessionEffect::Notice(format!(
            "stopping pid {pid}: SIGINT, then SIGTERM after 3 s, then SIGKILL after 2 s more"
        ))]
    }
}
