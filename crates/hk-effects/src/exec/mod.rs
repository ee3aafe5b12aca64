//! Effects: the executors that make runbook steps do real work on real hosts.
//!
//! Owns: SSH over russh ([`ssh`]), ansible-playbook as a supervised process ([`process`],
//! with its output read back by [`ansible`]), host key checking ([`known_hosts`]),
//! connection settings ([`settings`]), secret redaction ([`redact`]), and the capability
//! types that make observe mode read-only by construction (this file).
//! Must not: decide what runs next (the pure engine in `runbook` does), touch the terminal,
//! or hold a password or passphrase.
//!
//! # Observe mode is a type
//!
//! A [`PlannedStep`] becomes either a [`ReadOnlyStep`] or a [`MutatingStep`] through
//! [`classify`]. An [`Executor<ReadOnly>`] only has a method for read-only steps. Running a
//! mutating step needs an [`Executor<Mutating>`], which can only be built from a [`Mutating`]
//! capability value, and the observe app never holds one:
//!
//! ```compile_fail
//! use hk_effects::exec::{Executor, ReadOnly, MutatingStep};
//! use hk_engine::journal::StartRecorded;
//! async fn observe(ex: &Executor<ReadOnly>, step: &MutatingStep, start: &StartRecorded) {
//!     // error[E0599]: no method named `run_mutating` for `Executor<ReadOnly>`
//!     let _ = ex.run_mutating(step, &Default::default(), start).await;
//! }
//! ```
//!
//! # Journal before effect is a type
//!
//! A mutating step runs only with the proof that its start is on disk
//! ([`StartRecorded`], which only the journal's `record_start` makes, after its fsync):
//!
//! ```compile_fail
//! use hk_effects::exec::{Executor, Mutating, MutatingStep};
//! async fn unrecorded(ex: &Executor<Mutating>, step: &MutatingStep) {
//!     // error[E0061]: this method takes 3 arguments
//!     let _ = ex.run_mutating(step, &Default::default()).await;
//! }
//! ```
//!
//! and no code outside the journal can make one:
//!
//! ```compile_fail
//! // error[E0451]: fields `journal`, `seq`, `n` and `attempt` are private
//! let _ = hk_engine::journal::StartRecorded { journal: "x".into(), seq: 1, n: 1, attempt: 1 };
//! ```
//!
//! The call with the capability and a proof compiles:
//!
//! ```no_run
//! use hk_effects::exec::{Executor, Mutating, MutatingStep};
//! use hk_engine::journal::StartRecorded;
//! async fn operate(ex: &Executor<Mutating>, step: &MutatingStep, start: &StartRecorded) {
//!     let _ = ex.run_mutating(step, &Default::default(), start).await;
//! }
//! ```

pub mod ansible;
pub mod ansible_prefetch;
pub mod known_hosts;
pub mod kube;
pub mod kustomize;
pub mod process;
pub mod settings;
pub mod ssh;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use hk_engine::journal::StartRecorded;
use hk_engine::runbook::plan::{PlannedStep, StepKind};

/// The redactor is crate-wide (`hk_engine::redact`: repo/ learns the secrets, exec/ masks them);
/// re-exported here so `exec::redact::…` and `exec::Redactor` keep naming it.
pub use hk_engine::redact;
pub use hk_engine::redact::Redactor;
pub use process::{AnsibleOutcome, AnsibleRunner, ChildId, OutputLine, Stream};
pub use settings::ConnectSettings;
pub use ssh::{CommandOutput, SshError, SshOptions, SshPool};

/// Where the executors depart from the operator's own settings. The default is none: the
/// repo's known_hosts and OpenSSH's, `~/.ssh/config`, each environment's stuck threshold.
#[derive(Debug, Clone, Default)]
pub struct ExecSetup {
    /// SSH options instead of the repo's (the demo trusts only its own known_hosts).
    pub ssh: Option<SshOptions>,
    /// Do not read `~/.ssh/config` (the demo's hosts are its own; an operator's
    /// `Host 127.*` block must not redirect them).
    pub ignore_ssh_config: bool,
    /// kube-wait's stuck-rollout threshold instead of the environment's (the demo scales
    /// it with its scenario's time compression).
    pub stuck_after: Option<std::time::Duration>,
    /// The health gate's stable_for and soak divided by this (the demo's scenario time
    /// scale); `None`: real time.
    pub time_scale: Option<u32>,
}

/// Errors carrying out a step.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("step {n} ({id}): {why}")]
    NotRunnable { n: usize, id: String, why: String },
    #[error("step {n} ({id}) mutates and cannot run as read-only")]
    Mutates { n: usize, id: String },
    #[error(transparent)]
    Ssh(Box<SshError>),
    #[error(transparent)]
    Process(#[from] process::ProcessError),
}

impl From<SshError> for ExecError {
    fn from(e: SshError) -> Self {
        ExecError::Ssh(Box::new(e))
    }
}

/// A step proven not to change anything: `mutates: false` in the plan (for a `--check`
/// preview, derived from its playbook's tasks: one that runs a `check_mode: false` task
/// which can write is planned mutating), and (for ansible) an argv that only looks
/// (`--check`, `--list-hosts`, ...).
#[derive(Debug, Clone)]
pub struct ReadOnlyStep(Work);

/// A step that changes hosts. Only an [`Executor<Mutating>`] runs it.
#[derive(Debug, Clone)]
pub struct MutatingStep(Work);

/// What a step runs, extracted from the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// `ssh HOST 'command'`.
    Ssh {
        n: usize,
        id: String,
        host: String,
        command: String,
        timeout: Option<Duration>,
    },
    /// ansible-playbook argv from `cwd`.
    Ansible {
        n: usize,
        id: String,
        argv: Vec<String>,
        cwd: Option<PathBuf>,
        timeout: Option<Duration>,
        /// list-hosts: the exact set the gate expects.
        expect_hosts: Option<Vec<String>>,
    },
}

impl ReadOnlyStep {
    pub fn work(&self) -> &Work {
        &self.0
    }
}

impl MutatingStep {
    pub fn work(&self) -> &Work {
        &self.0
    }
}

/// A planned step sorted by what it may do.
#[derive(Debug, Clone)]
pub enum Classified {
    ReadOnly(ReadOnlyStep),
    Mutating(MutatingStep),
}

/// How long an ansible step may run when its runbook does not say (`timeout_s:`): a play
/// whose SSH peer stops answering must still end, with the cause named.
pub const ANSIBLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long a list-hosts step may run when its runbook does not say: listing hosts reads
/// the inventory only, so minutes mean something is stuck.
pub const LIST_HOSTS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// How long the process of `step` may run before the stop ladder ends it: the plan's
/// `timeout_s`, else the kind's default (ansible and list-hosts always have one; an SSH
/// step without one is bounded by its client's own settings).
pub fn step_timeout(step: &PlannedStep) -> Option<Duration> {
    let planned = step
        .expect
        .as_ref()
        .and_then(|e| e.timeout_s)
        .map(Duration::from_secs);
    planned.or(match step.kind {
        StepKind::Ansible => Some(ANSIBLE_TIMEOUT),
        StepKind::ListHosts => Some(LIST_HOSTS_TIMEOUT),
        _ => None,
    })
}

/// Why a process the supervisor stopped for its timeout failed, naming the limit and the
/// signals it took: "no answer within 30m: stopped (SIGINT, then SIGTERM)".
pub fn timed_out_cause(timeout: Option<Duration>, signals: &[process::SentSignal]) -> String {
    let within = match timeout {
        Some(t) => hk_engine::time::span(t, hk_engine::time::Style::Words),
        None => "its time limit".to_string(),
    };
    let sent: Vec<String> = signals.iter().map(|s| format!("{:?}", s.signal)).collect();
    if sent.is_empty() {
        format!("no answer within {within}: stopped")
    } else {
        format!(
            "no answer within {within}: stopped ({})",
            sent.join(", then ")
        )
    }
}

/// Sorts a planned step into read-only or mutating. An ansible step counts as read-only
/// only if the plan says so AND its argv only looks; a plan that claims otherwise is not
/// believed. Steps without a process (gates, manual, kube-wait, probe) are not executors'.
pub fn classify(step: &PlannedStep) -> Result<Classified, ExecError> {
    let bad = |why: &str| ExecError::NotRunnable {
        n: step.n,
        id: step.id.clone(),
        why: why.to_string(),
    };
    let argv = step
        .command
        .clone()
        .ok_or_else(|| bad("no command to run"))?;
    let timeout = step_timeout(step);
    let (work, looks_only) = match step.kind {
        StepKind::Ssh => {
            let [prog, host, command] = argv.as_slice() else {
                return Err(bad("expected [\"ssh\", HOST, COMMAND]"));
            };
            if prog != "ssh" {
                return Err(bad("expected [\"ssh\", HOST, COMMAND]"));
            }
            (
                Work::Ssh {
                    n: step.n,
                    id: step.id.clone(),
                    host: host.clone(),
                    command: command.clone(),
                    timeout,
                },
                true,
            )
        }
        StepKind::Ansible | StepKind::ListHosts => {
            if !argv
                .first()
                .is_some_and(|a| a == "ansible-playbook" || a.ends_with("/ansible-playbook"))
            {
                return Err(bad("expected an ansible-playbook argv"));
            }
            let looks = ansible::argv_is_read_only(&argv);
            if step.kind == StepKind::ListHosts && !argv.iter().any(|a| a == "--list-hosts") {
                return Err(bad("a list-hosts step must pass --list-hosts"));
            }
            (
                Work::Ansible {
                    n: step.n,
                    id: step.id.clone(),
                    expect_hosts: step.expect.as_ref().and_then(|e| e.hosts.clone()),
                    argv,
                    cwd: step.cwd.as_ref().map(PathBuf::from),
                    timeout,
                },
                looks,
            )
        }
        other => {
            return Err(bad(&format!(
                "{} steps are not run by an executor",
                other.as_str()
            )))
        }
    };
    Ok(if step.mutates || !looks_only {
        Classified::Mutating(MutatingStep(work))
    } else {
        Classified::ReadOnly(ReadOnlyStep(work))
    })
}

/// Capability marker: this executor only looks.
#[derive(Debug, Clone, Copy)]
pub struct ReadOnly;

/// Capability value: this executor may change hosts. Built only by [`Mutating::grant`],
/// which the operate app calls and the observe app does not.
#[derive(Debug)]
pub struct Mutating {
    _private: (),
}

impl Mutating {
    /// The operator's grant to change hosts; `why` is for the log (e.g. the runbook id).
    pub fn grant(why: &str) -> Self {
        tracing::info!(why, "mutating capability granted");
        Mutating { _private: () }
    }
}

/// Per-run options for a step.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub cancel: CancellationToken,
    pub sink: Option<mpsc::UnboundedSender<OutputLine>>,
    /// Told each local child's pid and start time as it starts (the journal keeps them).
    pub spawned: Option<mpsc::UnboundedSender<process::ChildId>>,
}

/// What a step did.
#[derive(Debug, Clone)]
pub enum StepOutcome {
    Ssh(CommandOutput),
    Ansible {
        outcome: AnsibleOutcome,
        /// For list-hosts steps with an expected set: the gate's verdict.
        list_hosts: Option<ansible::ListHostsVerdict>,
    },
}

/// Runs steps. `C` is [`ReadOnly`] or [`Mutating`]; only the latter runs mutating steps.
pub struct Executor<C> {
    ssh: Arc<SshPool>,
    ansible: AnsibleRunner,
    redactor: Redactor,
    /// list-hosts runs started ahead of their steps (see [`ansible_prefetch`]).
    prefetched: Arc<std::sync::Mutex<ansible_prefetch::ListHostsCache<PrefetchRun>>>,
    _cap: C,
}

/// A list-hosts run started ahead: the files' hash taken as it started, and its outcome.
type PrefetchResult = (
    Option<ansible_prefetch::Fingerprint>,
    Result<AnsibleOutcome, process::ProcessError>,
);

struct PrefetchRun {
    handle: tokio::task::JoinHandle<PrefetchResult>,
    cancel: CancellationToken,
}

impl Drop for PrefetchRun {
    fn drop(&mut self) {
        // Not used (replaced, evicted, the executor gone): its ansible-playbook is stopped.
        self.cancel.cancel();
    }
}

impl Executor<ReadOnly> {
    /// The observe app's executor.
    pub fn read_only(ssh: Arc<SshPool>, ansible: AnsibleRunner, redactor: Redactor) -> Self {
        Executor {
            ssh,
            ansible,
            redactor,
            prefetched: Arc::default(),
            _cap: ReadOnly,
        }
    }
}

impl Executor<Mutating> {
    /// The operate app's executor; needs the capability value.
    pub fn mutating(
        ssh: Arc<SshPool>,
        ansible: AnsibleRunner,
        redactor: Redactor,
        cap: Mutating,
    ) -> Self {
        Executor {
            ssh,
            ansible,
            redactor,
            prefetched: Arc::default(),
            _cap: cap,
        }
    }

    /// Runs a step that changes hosts. `start` is the proof that the step's start is
    /// journaled (only the journal makes one, once the record is on disk): the spawn of a
    /// mutating process and a mutating SSH command are reachable only through it, and a
    /// proof for another step is refused before anything starts.
    pub async fn run_mutating(
        &self,
        step: &MutatingStep,
        opts: &RunOptions,
        start: &StartRecorded,
    ) -> Result<StepOutcome, ExecError> {
        let n = match &step.0 {
            Work::Ssh { n, .. } | Work::Ansible { n, .. } => *n,
        };
        if start.n() != n {
            let id = match &step.0 {
                Work::Ssh { id, .. } | Work::Ansible { id, .. } => id.clone(),
            };
            return Err(ExecError::NotRunnable {
                n,
                id,
                why: format!(
                    "its start record is step {}'s (seq {}), not this step's: nothing was started",
                    start.n(),
                    start.seq()
                ),
            });
        }
        self.run_work(&step.0, opts).await
    }
}

impl<C> Executor<C> {
    /// Runs a read-only step (both capabilities may).
    pub async fn run(
        &self,
        step: &ReadOnlyStep,
        opts: &RunOptions,
    ) -> Result<StepOutcome, ExecError> {
        self.run_work(&step.0, opts).await
    }

    /// The SSH pool (live panes probe through it too).
    pub fn ssh(&self) -> &Arc<SshPool> {
        &self.ssh
    }

    /// The masking every line this executor shows goes through.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Starts `step`'s `--list-hosts` run now, in the background, so that its answer may be
    /// ready when the step starts (used then only if the files it read are unchanged: see
    /// [`ansible_prefetch`]). False when the step is not a list-hosts step, one is already
    /// running ahead for it, or there is no runtime to run it on.
    pub fn prefetch_list_hosts(&self, step: &ReadOnlyStep) -> bool {
        let Work::Ansible {
            argv, cwd, timeout, ..
        } = &step.0
        else {
            return false;
        };
        if !argv.iter().any(|a| a == "--list-hosts") {
            return false;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let Ok(mut cache) = self.prefetched.lock() else {
            return false;
        };
        if cache.has(argv, cwd.as_deref()) {
            return false;
        }
        let mut runner = self.ansible.clone();
        if timeout.is_some() {
            runner.supervisor.timeout = *timeout;
        }
        let cancel = CancellationToken::new();
        let (argv2, cwd2, cancel2, redactor) = (
            argv.clone(),
            cwd.clone(),
            cancel.clone(),
            self.redactor.clone(),
        );
        let handle = rt.spawn(async move {
            let (a, c) = (argv2.clone(), cwd2.clone());
            let at_start = tokio::task::spawn_blocking(move || {
                ansible_prefetch::fingerprint_argv(&a, c.as_deref())
            })
            .await
            .ok()
            .flatten();
            let outcome = runner
                .run(&argv2, cwd2.as_deref(), &redactor, None, &cancel2)
                .await;
            (at_start, outcome)
        });
        // A replaced or evicted run is stopped when dropped.
        drop(cache.put(argv, cwd.as_deref(), PrefetchRun { handle, cancel }));
        true
    }

    /// [`Executor::prefetch_list_hosts`] for a planned step: only a read-only list-hosts
    /// step is run ahead (classified as [`Executor::run`] would).
    pub fn prefetch_planned(&self, step: &PlannedStep) -> bool {
        match classify(step) {
            Ok(Classified::ReadOnly(s)) => self.prefetch_list_hosts(&s),
            _ => false,
        }
    }

    /// The answer of a list-hosts run started ahead for this command line, if there is one
    /// and the files it read are unchanged; it is written to `sink` as if it ran now, after
    /// a line saying it ran ahead. Otherwise None (the caller runs it), after a line saying
    /// why when one was there but is not used.
    async fn prefetched_answer(
        &self,
        argv: &[String],
        cwd: Option<&std::path::Path>,
        opts: &RunOptions,
    ) -> Option<AnsibleOutcome> {
        let run = self.prefetched.lock().ok()?.take(argv, cwd)?;
        let (a, c) = (argv.to_vec(), cwd.map(std::path::Path::to_path_buf));
        let now = tokio::task::spawn_blocking(move || {
            ansible_prefetch::fingerprint_argv(&a, c.as_deref())
        })
        .await
        .ok()
        .flatten();
        let say = |text: String| {
            if let Some(s) = &opts.sink {
                let _ = s.send(OutputLine {
                    stream: Stream::Stderr,
                    text,
                });
            }
        };
        let mut run = run;
        let finished = tokio::select! {
            r = &mut run.handle => r.ok(),
            _ = opts.cancel.cancelled() => None,
        };
        let (at_start, outcome) = finished?;
        let outcome = match outcome {
            Ok(o) if o.process.success() && !o.process.cancelled && !o.process.timed_out => o,
            _ => {
                say(
                    "hk-console: the list-hosts run ahead did not finish cleanly: running it now"
                        .into(),
                );
                return None;
            }
        };
        if !ansible_prefetch::still_valid(at_start.as_ref(), now.as_ref()) {
            say("hk-console: the inventory, playbook or ansible.cfg changed since list-hosts ran ahead (or could not be hashed): running it now".into());
            return None;
        }
        if let Some(fp) = &now {
            say(format!(
                "hk-console: list-hosts ran ahead while the previous gate was open; inventory, playbook and ansible.cfg unchanged since (sha256 {}): its answer:",
                fp.short()
            ));
        }
        if let Some(s) = &opts.sink {
            for text in &outcome.process.stdout {
                let _ = s.send(OutputLine {
                    stream: Stream::Stdout,
                    text: text.clone(),
                });
            }
            for text in &outcome.process.stderr {
                let _ = s.send(OutputLine {
                    stream: Stream::Stderr,
                    text: text.clone(),
                });
            }
        }
        Some(outcome)
    }

    async fn run_work(&self, work: &Work, opts: &RunOptions) -> Result<StepOutcome, ExecError> {
        match work {
            Work::Ssh {
                host,
                command,
                timeout,
                ..
            } => {
                let eo = ssh::ExecOptions {
                    timeout: *timeout,
                    cancel: opts.cancel.clone(),
                    // Withheld diff lines are Ansible's `--diff`; an SSH step's `-rw-r--r--`
                    // line is not one. Its vaulted values are still masked.
                    redactor: self.redactor.without_withholding(),
                    sink: opts.sink.clone(),
                };
                Ok(StepOutcome::Ssh(self.ssh.exec(host, command, &eo).await?))
            }
            Work::Ansible {
                argv,
                cwd,
                timeout,
                expect_hosts,
                ..
            } => {
                let mut runner = self.ansible.clone();
                runner.spawned = opts.spawned.clone();
                if timeout.is_some() {
                    runner.supervisor.timeout = *timeout;
                }
                let is_list_hosts = argv.iter().any(|a| a == "--list-hosts");
                let ahead = if is_list_hosts {
                    self.prefetched_answer(argv, cwd.as_deref(), opts).await
                } else {
                    None
                };
                let outcome = match ahead {
                    Some(o) => o,
                    None => {
                        runner
                            .run(
                                argv,
                                cwd.as_deref(),
                                &self.redactor,
                                opts.sink.as_ref(),
                                &opts.cancel,
                            )
                            .await?
                    }
                };
                let list_hosts = if is_list_hosts {
                    expect_hosts
                        .as_ref()
                        .map(|exp| process::judge_list_hosts(&outcome, exp))
                } else {
                    None
                };
                Ok(StepOutcome::Ansible {
                    outcome,
                    list_hosts,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hk_engine::runbook::plan::Expect;

    fn step(kind: StepKind, mutates: bool, argv: &[&str]) -> PlannedStep {
        PlannedStep {
            n: 3,
            id: "s".into(),
            kind,
            host: None,
            mutates,
            gate: None,
            command: Some(argv.iter().map(|s| s.to_string()).collect()),
            expect: Some(Expect {
                timeout_s: Some(7),
                ..Expect::default()
            }),
            title: String::new(),
            cwd: Some("/repo/ansible".into()),
            source: None,
            blast_radius: None,
            declared_read_only: None,
        }
    }

    #[test]
    fn classification_does_not_believe_a_read_only_claim() {
        let apply = step(
            StepKind::Ansible,
            false,
            &["ansible-playbook", "-i", "i", "p.yml"],
        );
        assert!(matches!(classify(&apply), Ok(Classified::Mutating(_))));
        let check = step(
            StepKind::Ansible,
            false,
            &["ansible-playbook", "p.yml", "--check", "--diff"],
        );
        assert!(matches!(classify(&check), Ok(Classified::ReadOnly(_))));
        let lh = step(
            StepKind::ListHosts,
            false,
            &["ansible-playbook", "p.yml", "--list-hosts"],
        );
        match classify(&lh) {
            Ok(Classified::ReadOnly(s)) => match s.work() {
                Work::Ansible { cwd, timeout, .. } => {
                    assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/repo/ansible")));
                    assert_eq!(*timeout, Some(Duration::from_secs(7)));
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        let ssh_mut = step(StepKind::Ssh, true, &["ssh", "h", "systemctl restart x"]);
        assert!(matches!(classify(&ssh_mut), Ok(Classified::Mutating(_))));
        let ssh_ro = step(StepKind::Ssh, false, &["ssh", "h", "uptime"]);
        assert!(matches!(classify(&ssh_ro), Ok(Classified::ReadOnly(_))));
    }

    /// Issue 25: ansible and list-hosts steps always run bounded: the runbook's
    /// `timeout_s`, else the kind's default; the cause names the limit and the signals.
    #[test]
    fn ansible_steps_get_a_default_timeout_and_the_cause_names_it() {
        let timeout_of = |mut s: PlannedStep, planned: Option<u64>| {
            s.expect = planned.map(|t| Expect {
                timeout_s: Some(t),
                ..Expect::default()
            });
            let w = match classify(&s).expect("classified") {
                Classified::ReadOnly(r) => r.work().clone(),
                Classified::Mutating(m) => m.work().clone(),
            };
            match w {
                Work::Ansible { timeout, .. } | Work::Ssh { timeout, .. } => timeout,
            }
        };
        let apply = step(StepKind::Ansible, true, &["ansible-playbook", "p.yml"]);
        let lh = step(
            StepKind::ListHosts,
            false,
            &["ansible-playbook", "p.yml", "--list-hosts"],
        );
        assert_eq!(timeout_of(apply.clone(), None), Some(ANSIBLE_TIMEOUT));
        assert_eq!(timeout_of(lh.clone(), None), Some(LIST_HOSTS_TIMEOUT));
        assert_eq!(timeout_of(apply, Some(90)), Some(Duration::from_secs(90)));
        let ssh = step(StepKind::Ssh, false, &["ssh", "h", "uptime"]);
        assert_eq!(timeout_of(ssh, None), None, "ssh keeps its client's bounds");
        let sent = |signal, s| process::SentSignal {
            signal,
            after: Duration::from_secs(s),
        };
        use nix::sys::signal::Signal;
        assert_eq!(
            timed_out_cause(
                Some(ANSIBLE_TIMEOUT),
                &[sent(Signal::SIGINT, 1800), sent(Signal::SIGTERM, 1810)]
            ),
            "no answer within 30m: stopped (SIGINT, then SIGTERM)"
        );
    }

    #[test]
    fn malformed_steps_are_refused_with_the_step_named() {
        let e = classify(&step(StepKind::Ssh, false, &["ssh", "h"])).expect_err("bad");
        assert_eq!(
            e.to_string(),
            "step 3 (s): expected [\"ssh\", HOST, COMMAND]"
        );
        let e = classify(&step(
            StepKind::ListHosts,
            false,
            &["ansible-playbook", "p.yml"],
        ))
        .expect_err("bad");
        assert!(e.to_string().contains("--list-hosts"), "{e}");
        let e = classify(&step(StepKind::Gate, false, &["x"])).expect_err("bad");
        assert!(e.to_string().contains("gate steps"), "{e}");
    }
}
