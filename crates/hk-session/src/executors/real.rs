//! The SSH, ansible-playbook and list-hosts steps: one adapter over `hk_effects::exec`'s
//! `Executor<ReadOnly>` / `Executor<Mutating>`, which already runs all three kinds.
//!
//! Owns: each request on its own task, output lines streamed back as they come, the
//! outcome as journalable inputs (StepFinished, then on Verify a
//! HostSetObserved or VerifyResult), a Cancel tripping the step's token (exec's SIGINT ->
//! SIGTERM -> SIGKILL ladder / channel close), answered with Cancelled.
//! Must not: pick the capability. The builder hands a read-only adapter an
//! `Executor<ReadOnly>`, and a step `exec::classify` calls mutating is refused there even
//! if the plan said otherwise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{ExecReply, ExecRequest, RunTag, StepExecutor};
use hk_effects::exec::{
    self, ansible::ListHostsVerdict, Classified, Executor, Mutating, ReadOnly, RunOptions,
    StepOutcome,
};
use hk_engine::journal::StartRecorded;
use hk_engine::runbook::machine::Input;
use hk_engine::runbook::plan::{PlannedStep, StepKind};

use super::Key;

/// What a finished step left for its verification.
#[derive(Debug, Clone)]
enum Done {
    Stdout(String),
    ListHosts(Option<ListHostsVerdict>),
}

#[derive(Debug, Default)]
struct State {
    cancels: HashMap<Key, CancellationToken>,
    done: HashMap<Key, Done>,
}

#[derive(Clone)]
enum Which {
    ReadOnly(Arc<Executor<ReadOnly>>),
    Mutating(Arc<Executor<Mutating>>),
}

/// One step kind run by a real executor.
#[derive(Clone)]
pub struct RealExecutor {
    kind: StepKind,
    which: Which,
    state: Arc<Mutex<State>>,
    /// Each server's environment `VIP:PORT`: a mutating step on a server probes it while
    /// it runs and says how long it did not answer (issue 39).
    vips: Arc<std::collections::BTreeMap<String, hk_effects::observe::vip_outage::VipTarget>>,
}

impl std::fmt::Debug for RealExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealExecutor")
            .field("kind", &self.kind)
            .field("mutates", &self.mutates())
            .finish()
    }
}

impl RealExecutor {
    pub fn read_only(kind: StepKind, exec: Arc<Executor<ReadOnly>>) -> Self {
        RealExecutor {
            kind,
            which: Which::ReadOnly(exec),
            state: Arc::default(),
            vips: Arc::default(),
        }
    }

    pub fn mutating(kind: StepKind, exec: Arc<Executor<Mutating>>) -> Self {
        RealExecutor {
            kind,
            which: Which::Mutating(exec),
            state: Arc::default(),
            vips: Arc::default(),
        }
    }

    /// Probe the VIP of a server's environment while a mutating step on it runs.
    pub fn with_vips(
        mut self,
        vips: std::collections::BTreeMap<String, hk_effects::observe::vip_outage::VipTarget>,
    ) -> Self {
        self.vips = Arc::new(vips);
        self
    }

    /// The VIP a mutating step probes: its environment's, when one of its hosts is a server.
    fn vip_for(&self, step: &PlannedStep) -> Option<hk_effects::observe::vip_outage::VipTarget> {
        let radius = step.blast_radius.iter().flat_map(|b| b.hosts.iter());
        step.host
            .iter()
            .chain(radius)
            .find_map(|h| self.vips.get(h).cloned())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave it half-written (plain inserts and
        // removes), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn execute(
        self,
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
        start: StartRecorded,
        replies: mpsc::Sender<ExecReply>,
    ) {
        let key = (tag, step.n, attempt);
        let n = step.n;
        let cancel = CancellationToken::new();
        self.lock().cancels.insert(key, cancel.clone());
        let send = |input: Input| {
            let replies = replies.clone();
            async move {
                let _ = replies.send(ExecReply::Outcome { tag, input }).await;
            }
        };
        let classified = match exec::classify(&step) {
            Ok(c) => c,
            Err(e) => {
                self.lock().cancels.remove(&key);
                send(Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(format!("{e}; the step was not started")),
                })
                .await;
                return;
            }
        };
        let (sink_tx, forward) =
            super::OutputForward::start(&replies, (tag, n, attempt), |l: exec::OutputLine| l.text);
        // Each local process's pid and start time go to the journal as it starts.
        let (spawn_tx, mut spawn_rx) = mpsc::unbounded_channel::<exec::ChildId>();
        let spawned = {
            let replies = replies.clone();
            tokio::spawn(async move {
                while let Some(c) = spawn_rx.recv().await {
                    let input = Input::ProcessStarted {
                        n,
                        attempt,
                        pid: c.pid,
                        start_time: c.start_time,
                        program: c.program,
                        marker: c.marker,
                    };
                    if replies
                        .send(ExecReply::Outcome { tag, input })
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            })
        };
        let opts = RunOptions {
            cancel: cancel.clone(),
            sink: Some(sink_tx),
            spawned: Some(spawn_tx),
        };
        // While a mutating step on a server runs, its VIP is probed several times a second.
        let watch = match &classified {
            Classified::Mutating(_) => self.vip_for(&step).map(|vip| {
                let w = hk_effects::observe::vip_outage::VipWatch::start(
                    vip.addr,
                    hk_effects::observe::vip_outage::EVERY,
                );
                (w, vip)
            }),
            Classified::ReadOnly(_) => None,
        };
        let result = match (&self.which, &classified) {
            (Which::ReadOnly(e), Classified::ReadOnly(s)) => e.run(s, &opts).await,
            (Which::Mutating(e), Classified::ReadOnly(s)) => e.run(s, &opts).await,
            (Which::Mutating(e), Classified::Mutating(s)) => e.run_mutating(s, &opts, &start).await,
            (Which::ReadOnly(_), Classified::Mutating(_)) => Err(exec::ExecError::Mutates {
                n,
                id: step.id.clone(),
            }),
        };
        drop(opts);
        // Every output line is delivered before the outcome, so the diff a gate shows is
        // whole; bounded, in case a sender clone outlives the run somewhere below.
        forward.finish().await;
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), spawned).await;
        if let Some((w, vip)) = watch {
            // The step's last output line: how long its environment's VIP did not answer,
            // and who held the VIP's Lease once it ended.
            let outage = w.finish().await;
            let line = outage.line_with_holder(&vip.lease_name(), &vip.holder().await);
            let _ = replies
                .send(ExecReply::Output {
                    tag,
                    n,
                    attempt,
                    line,
                })
                .await;
        }
        self.lock().cancels.remove(&key);
        if cancel.is_cancelled() {
            send(Input::Cancelled {
                n,
                attempt,
                reason: "stopped at the operator's request".into(),
            })
            .await;
            return;
        }
        let (exit_code, error, done) = match result {
            Ok(StepOutcome::Ssh(out)) => (
                out.exit_status.and_then(|c| i32::try_from(c).ok()),
                out.exit_signal.map(|s| format!("ended by signal {s}")),
                Done::Stdout(out.stdout),
            ),
            Ok(StepOutcome::Ansible {
                outcome,
                list_hosts,
            }) => (
                outcome.process.exit_code,
                if outcome.process.timed_out {
                    Some(hk_effects::exec::timed_out_cause(
                        hk_effects::exec::step_timeout(&step),
                        &outcome.process.signals_sent,
                    ))
                } else {
                    // Name the hosts the PLAY RECAP says failed or could not be reached.
                    let bad: Vec<String> = outcome
                        .recap
                        .iter()
                        .filter(|(_, r)| r.failed > 0 || r.unreachable > 0)
                        .map(|(h, r)| {
                            format!("{h}: failed={} unreachable={}", r.failed, r.unreachable)
                        })
                        .collect();
                    (!bad.is_empty()).then(|| format!("PLAY RECAP: {}", bad.join("; ")))
                },
                Done::ListHosts(list_hosts),
            ),
            Err(e) => (None, Some(e.to_string()), Done::ListHosts(None)),
        };
        self.lock().done.insert(key, done);
        send(Input::StepFinished {
            n,
            attempt,
            exit_code,
            error,
        })
        .await;
    }

    fn verify(&self, step: &PlannedStep, key: Key) -> Input {
        let (n, attempt) = (key.1, key.2);
        let done = self.lock().done.remove(&key);
        let fail = |detail: String| Input::VerifyResult {
            n,
            attempt,
            ok: false,
            detail,
        };
        match (done, step.kind) {
            (Some(Done::ListHosts(Some(ListHostsVerdict::Pass { hosts }))), _) => {
                Input::HostSetObserved { n, attempt, hosts }
            }
            (Some(Done::ListHosts(Some(ListHostsVerdict::Block { reason }))), _) => fail(reason),
            (Some(Done::Stdout(stdout)), _) => {
                let e = step.expect.clone().unwrap_or_default();
                let out = stdout.trim();
                let mut problems = Vec::new();
                if let Some(want) = &e.stdout_equals {
                    if out != want.trim() {
                        problems.push(format!("stdout is {out:?}, expected {want:?}"));
                    }
                }
                if let Some(want) = &e.stdout_contains {
                    if !out.contains(want.as_str()) {
                        problems.push(format!("stdout does not contain {want:?}"));
                    }
                }
                if let Some(bad) = &e.stdout_not_contains {
                    if out.contains(bad.as_str()) {
                        problems.push(format!("stdout contains {bad:?}"));
                    }
                }
                if problems.is_empty() {
                    Input::VerifyResult {
                        n,
                        attempt,
                        ok: true,
                        detail: "expectations met".into(),
                    }
                } else {
                    let mut detail = problems.join("; ");
                    if let Some(cause) = &e.on_fail {
                        detail = format!("{cause}: {detail}");
                    }
                    fail(detail)
                }
            }
            (_, kind) => fail(format!(
                "nothing to verify a {} step against (its output was not kept)",
                kind.as_str()
            )),
        }
    }
}

impl StepExecutor for RealExecutor {
    fn kind(&self) -> StepKind {
        self.kind
    }

    fn mutates(&self) -> bool {
        matches!(self.which, Which::Mutating(_))
    }

    fn prefetch(&self, step: &PlannedStep) -> bool {
        if self.kind != StepKind::ListHosts || step.kind != StepKind::ListHosts {
            return false;
        }
        match &self.which {
            Which::ReadOnly(e) => e.prefetch_planned(step),
            Which::Mutating(e) => e.prefetch_planned(step),
        }
    }

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Execute {
                tag,
                step,
                attempt,
                start,
                ..
            } => {
                tokio::spawn(self.clone().execute(tag, step, attempt, start, replies));
            }
            ExecRequest::Verify { tag, step, attempt } => {
                let input = self.verify(&step, (tag, step.n, attempt));
                tokio::spawn(async move {
                    let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                });
            }
            ExecRequest::Cancel { tag, step, attempt } => {
                if let Some(t) = self.lock().cancels.get(&(tag, step.n, attempt)) {
                    t.cancel();
                }
            }
        }
    }
}
