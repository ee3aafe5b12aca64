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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::exec::{
    self, ansible::ListHostsVerdict, AnsibleRunner, Classified, Executor, Mutating, ReadOnly,
    Redactor, RunOptions, SshOptions, SshPool, StepOutcome,
};
use crate::repo::Repo;
use crate::runbook::machine::Input;
use crate::runbook::plan::{PlannedStep, StepKind};

use super::exec::{
    Capabilities, ExecReply, ExecRequest, MutatingExecutors, ReadOnlyExecutors, RunTag,
    StepExecutor,
};

/// The step kinds `crate::exec` runs.
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
                    None
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
    let pool = Arc::new(SshPool::new(SshOptions::from_env(None)));
    let defaults = exec::settings::SshDefaults::from_env();
    let ssh_config =
        match exec::settings::SshConfig::load(&defaults.home.join(".ssh").join("config")) {
            Ok(c) => c,
            Err(e) => {
                warnings.push(e.to_string());
                exec::settings::SshConfig::empty()
            }
        };
    for host in repo.inventory.hosts() {
        let vars: BTreeMap<String, serde_json::Value> = repo
            .resolve_all(&host)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| v.value().cloned().map(|v| (k, v)))
            .collect();
        match exec::settings::ConnectSettings::resolve(&host, &vars, &ssh_config, &defaults) {
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
