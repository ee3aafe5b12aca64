//! The real executors (`crate::exec`) behind the UI's [`StepExecutor`] boundary.
//!
//! Owns: adapting `exec::Executor<ReadOnly>` / `Executor<Mutating>` to the request/reply
//! channel: each request runs on its own task (the executor task never blocks), output lines
//! stream back as they come, the outcome comes back as journalable inputs (StepStarted,
//! StepFinished, then on Verify a HostSetObserved or VerifyResult), and a Cancel trips the
//! step's cancellation token (exec's SIGINT -> SIGTERM -> SIGKILL ladder / channel close),
//! answered with Cancelled. [`capabilities_for_repo`] builds the operate or observe set from
//! a loaded repo (SSH settings per host from its hostvars, as Ansible would connect).
//! Must not: decide anything about the run; the machine does. Observe mode: only
//! `Executor<ReadOnly>` exists in it, and a step `exec::classify` calls mutating is refused
//! there even if the plan said otherwise.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{
    self, ansible::ListHostsVerdict, AnsibleRunner, Classified, Executor, Mutating, ReadOnly,
    Redactor, RunOptions, SshPool, StepOutcome,
};
use crate::repo::Repo;
use crate::runbook::machine::Input;
use crate::runbook::plan::{PlannedStep, StepKind};

use super::exec::{
    Capabilities, ExecReply, ExecRequest, MutatingExecutors, ReadOnlyExecutors, RunTag,
    StepExecutor,
};

/// The step kinds `crate::exec` runs (probe steps are run by [`ProbeExecutor`]).
pub const KINDS: [StepKind; 3] = [StepKind::ListHosts, StepKind::Ansible, StepKind::Ssh];

type Key = (RunTag, usize, u32);

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
        }
    }

    pub fn mutating(kind: StepKind, exec: Arc<Executor<Mutating>>) -> Self {
        RealExecutor {
            kind,
            which: Which::Mutating(exec),
            state: Arc::default(),
        }
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
        send(Input::StepStarted { n, attempt }).await;
        let (sink_tx, mut sink_rx) = mpsc::unbounded_channel::<exec::OutputLine>();
        let forward = {
            let replies = replies.clone();
            tokio::spawn(async move {
                while let Some(l) = sink_rx.recv().await {
                    let reply = ExecReply::Output {
                        tag,
                        n,
                        attempt,
                        line: l.text,
                    };
                    if replies.send(reply).await.is_err() {
                        break;
                    }
                }
            })
        };
        let opts = RunOptions {
            cancel: cancel.clone(),
            sink: Some(sink_tx),
        };
        let result = match (&self.which, &classified) {
            (Which::ReadOnly(e), Classified::ReadOnly(s)) => e.run(s, &opts).await,
            (Which::Mutating(e), Classified::ReadOnly(s)) => e.run(s, &opts).await,
            (Which::Mutating(e), Classified::Mutating(s)) => e.run_mutating(s, &opts).await,
            (Which::ReadOnly(_), Classified::Mutating(_)) => Err(exec::ExecError::Mutates {
                n,
                id: step.id.clone(),
            }),
        };
        drop(opts);
        // Every output line is delivered before the outcome, so the diff a gate shows is
        // whole; bounded, in case a sender clone outlives the run somewhere below.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), forward).await;
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
                    Some("timed out".to_string())
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

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Execute {
                tag, step, attempt, ..
            } => {
                tokio::spawn(self.clone().execute(tag, step, attempt, replies));
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

/// The executors for a loaded repo: SSH settings for every inventory host (from its
/// hostvars, `~/.ssh/config` and OpenSSH's defaults), ansible-playbook from the usual
/// places. Observe mode builds `Executor<ReadOnly>` only; operate also grants the mutating
/// capability. Hosts whose settings cannot be read are returned as warnings (steps on them
/// fail with the SSH pool's "no settings" error).
pub fn capabilities_for_repo(repo: &Repo, observe: bool) -> (Capabilities, Vec<String>) {
    let mut warnings = Vec::new();
    let pool = Arc::new(SshPool::new(crate::context::ssh_options(repo)));
    let defaults = exec::settings::SshDefaults::from_env();
    let ssh_config = match crate::context::load_ssh_config(&defaults) {
        Ok(c) => c,
        Err(e) => {
            warnings.push(e.to_string());
            exec::settings::SshConfig::empty()
        }
    };
    // The same settings `hk-console ssh trust` uses: a connection variable that cannot be
    // rendered leaves the host without settings (its steps fail naming it), never dialled
    // at some other address.
    for host in repo.inventory.hosts() {
        match crate::context::connect_settings_with(repo, &host, &ssh_config, &defaults) {
            Ok(s) => pool.add_host(s),
            Err(e) => warnings.push(e.to_string()),
        }
    }
    let ro_exec = Arc::new(Executor::read_only(
        Arc::clone(&pool),
        AnsibleRunner::from_env(),
        Redactor::none(),
    ));
    let mut read_only = ReadOnlyExecutors::default();
    for kind in KINDS {
        // A read-only adapter never reports itself as mutating, so this cannot fail.
        if let Err(e) = read_only.add(Arc::new(RealExecutor::read_only(
            kind,
            Arc::clone(&ro_exec),
        ))) {
            warnings.push(e);
        }
    }
    if let Err(e) = read_only.add(Arc::new(ProbeExecutor::default())) {
        warnings.push(e);
    }
    if observe {
        return (Capabilities::Observe { read_only }, warnings);
    }
    let mu_exec = Arc::new(Executor::mutating(
        pool,
        AnsibleRunner::from_env(),
        Redactor::none(),
        Mutating::grant("interactive console (operate mode)"),
    ));
    let mut mutating = MutatingExecutors::default();
    for kind in [StepKind::Ansible, StepKind::Ssh] {
        mutating.add(Arc::new(RealExecutor::mutating(kind, Arc::clone(&mu_exec))));
    }
    (
        Capabilities::Operate {
            read_only,
            mutating,
        },
        warnings,
    )
}

/// TCP probe steps: `expect.tcp` (host:port) must accept a connection within the step's
/// timeout (default 5 s). Read-only by nature: it opens a connection and closes it.
#[derive(Debug, Default)]
pub struct ProbeExecutor {
    state: Arc<Mutex<HashMap<Key, Result<std::time::Duration, String>>>>,
    cancels: Arc<Mutex<HashMap<Key, CancellationToken>>>,
}

impl StepExecutor for ProbeExecutor {
    fn kind(&self) -> StepKind {
        StepKind::Probe
    }

    fn mutates(&self) -> bool {
        false
    }

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Cancel { tag, step, attempt } => {
                let key = (tag, step.n, attempt);
                if let Some(t) = self
                    .cancels
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&key)
                {
                    t.cancel();
                }
            }
            ExecRequest::Verify { tag, step, attempt } => {
                let key = (tag, step.n, attempt);
                let result = self
                    .state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                let (n, ok, detail) = match result {
                    Some(Ok(t)) => (step.n, true, format!("connected in {} ms", t.as_millis())),
                    Some(Err(e)) => (step.n, false, e),
                    None => (step.n, false, "the probe's result was not kept".to_string()),
                };
                tokio::spawn(async move {
                    let input = Input::VerifyResult {
                        n,
                        attempt,
                        ok,
                        detail,
                    };
                    let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                });
            }
            ExecRequest::Execute {
                tag, step, attempt, ..
            } => {
                let state = Arc::clone(&self.state);
                let cancels = Arc::clone(&self.cancels);
                tokio::spawn(async move {
                    let (n, key) = (step.n, (tag, step.n, attempt));
                    let send = |input: Input| {
                        let replies = replies.clone();
                        async move {
                            let _ = replies.send(ExecReply::Outcome { tag, input }).await;
                        }
                    };
                    let expect = step.expect.clone().unwrap_or_default();
                    let Some(target) = expect.tcp.clone() else {
                        send(Input::StepFinished {
                            n,
                            attempt,
                            exit_code: None,
                            error: Some("a probe step needs expect.tcp (host:port); the step was not started".into()),
                        })
                        .await;
                        return;
                    };
                    let cancel = CancellationToken::new();
                    cancels
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key, cancel.clone());
                    send(Input::StepStarted { n, attempt }).await;
                    let timeout = std::time::Duration::from_secs(expect.timeout_s.unwrap_or(5));
                    let t0 = std::time::Instant::now();
                    let result = tokio::select! {
                        r = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(target.clone())) => match r {
                            Ok(Ok(_)) => Ok(t0.elapsed()),
                            Ok(Err(e)) => Err(format!("{target} refused or unreachable: {e}")),
                            Err(_) => Err(format!("{target} did not answer within {} s", timeout.as_secs())),
                        },
                        _ = cancel.cancelled() => Err("stopped at the operator's request".to_string()),
                    };
                    cancels
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&key);
                    // The runbook's named cause travels with the failure (e.g. "the VIP is not
                    // answering: kube-vip is not announcing it yet").
                    let result = result.map_err(|e| match &expect.on_fail {
                        Some(cause) => format!("{e}: {cause}"),
                        None => e,
                    });
                    let input = if cancel.is_cancelled() {
                        Input::Cancelled {
                            n,
                            attempt,
                            reason: "stopped at the operator's request".into(),
                        }
                    } else {
                        match &result {
                            Ok(_) => Input::StepFinished {
                                n,
                                attempt,
                                exit_code: Some(0),
                                error: None,
                            },
                            Err(e) => Input::StepFinished {
                                n,
                                attempt,
                                exit_code: None,
                                error: Some(e.clone()),
                            },
                        }
                    };
                    state
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key, result);
                    send(input).await;
                });
            }
        }
    }
}
