//! The real executors (`crate::exec`) behind the UI's [`StepExecutor`] boundary.
//!
//! Owns: adapting `exec::Executor<ReadOnly>` / `Executor<Mutating>` to the request/reply
//! channel: each request runs on its own task (the executor task never blocks), output lines
//! stream back as they come, the outcome comes back as journalable inputs (StepStarted,
//! StepFinished, then on Verify a HostSetObserved or VerifyResult), and a Cancel trips the
//! step's cancellation token (exec's SIGINT -> SIGTERM -> SIGKILL ladder / channel close),
//! answered with Cancelled. [`capabilities_for_repo`] builds the operate or observe set from
//! a loaded repo (SSH settings per host from its hostvars, as Ansible would connect).
//! The kube-backed steps run on [`KubeExecutor`]: `kube-wait` (read-only, also in observe
//! mode) through `exec::kube::wait`, `flux-reconcile` (mutating, operate mode only) through
//! `exec::kube::flux`, each against its environment's cluster ([`Clusters`]: the kubeconfig
//! the inventory names, `cluster::kube_target`). No environment with a kubeconfig: both are
//! absent and their steps say why (the file and where its name came from); one environment
//! without one: its steps fail unstarted, saying the same.
//! Must not: decide anything about the run; the machine does. Observe mode: only
//! `Executor<ReadOnly>` exists in it, and a step `exec::classify` calls mutating is refused
//! there even if the plan said otherwise.
//!
//! Why one file over 800 lines: the three adapters share the request/reply plumbing and the
//! per-(tag, step, attempt) state their Verify reads back; it moved here from ui/ whole, and
//! a split (one file per adapter under `executors/`) is the next step.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::checks::live::EnvTopology;
use crate::cluster::{KubeOverrides, KubeTarget, WatchSettings};
use crate::exec::kube::flux::{self, FluxObject};
use crate::exec::kube::wait::{self, Condition, WaitEnd, WaitOptions};
use crate::exec::{
    self, ansible::ListHostsVerdict, AnsibleRunner, Classified, Executor, Mutating, ReadOnly,
    RunOptions, SshPool, StepOutcome,
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
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), spawned).await;
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
    // The console runs steps for any environment, so each uses the kubeconfig its own
    // inventory names: a `KUBECONFIG` in the operator's shell names ONE cluster and must
    // not become every environment's.
    let clusters = Clusters::for_repo(repo, &KubeOverrides::default());
    capabilities_with_clusters(repo, observe, Arc::new(clusters))
}

/// [`capabilities_for_repo`] with the kube-backed executors reaching `clusters`.
pub fn capabilities_with_clusters(
    repo: &Repo,
    observe: bool,
    clusters: Arc<Clusters>,
) -> (Capabilities, Vec<String>) {
    capabilities_with(repo, observe, clusters, &ExecSetup::default())
}

/// Where the executors depart from the operator's own settings. The default is none: the
/// repo's known_hosts and OpenSSH's, `~/.ssh/config`, each environment's stuck threshold.
#[derive(Debug, Clone, Default)]
pub struct ExecSetup {
    /// SSH options instead of the repo's (the demo trusts only its own known_hosts).
    pub ssh: Option<crate::exec::SshOptions>,
    /// Do not read `~/.ssh/config` (the demo's hosts are its own; an operator's
    /// `Host 127.*` block must not redirect them).
    pub ignore_ssh_config: bool,
    /// kube-wait's stuck-rollout threshold instead of the environment's (the demo scales
    /// it with its scenario's time compression).
    pub stuck_after: Option<Duration>,
}

/// [`capabilities_with_clusters`] with `setup` applied.
pub fn capabilities_with(
    repo: &Repo,
    observe: bool,
    clusters: Arc<Clusters>,
    setup: &ExecSetup,
) -> (Capabilities, Vec<String>) {
    let mut warnings = Vec::new();
    let pool = Arc::new(SshPool::new(
        setup
            .ssh
            .clone()
            .unwrap_or_else(|| crate::context::ssh_options(repo)),
    ));
    let defaults = exec::settings::SshDefaults::from_env();
    let ssh_config = if setup.ignore_ssh_config {
        exec::settings::SshConfig::empty()
    } else {
        match crate::context::load_ssh_config(&defaults) {
            Ok(c) => c,
            Err(e) => {
                warnings.push(e.to_string());
                exec::settings::SshConfig::empty()
            }
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
    // The vaulted values, learned with the repo's vault password only to be masked in
    // every line either executor shows, journals or logs (or, without the password, every
    // diff line withheld).
    let vault = crate::repo::vault::scan_repo(repo);
    if let Some(why) = &vault.locked {
        warnings.push(format!(
            "vault: {why}; every --diff line is withheld from the screen and the run's files"
        ));
    }
    warnings.extend(vault.problems.iter().map(|p| format!("vault: {p}")));
    let redactor = vault.redactor();
    let ro_exec = Arc::new(Executor::read_only(
        Arc::clone(&pool),
        AnsibleRunner::from_env(),
        redactor.clone(),
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
    warnings.extend(clusters.problems());
    let kube = clusters.usable().then(|| Arc::clone(&clusters));
    match &kube {
        Some(c) => {
            let mut wait = KubeExecutor::kube_wait(Arc::clone(c));
            if let Some(d) = setup.stuck_after {
                wait = wait.with_stuck_after(d);
            }
            if let Err(e) = read_only.add(Arc::new(wait)) {
                warnings.push(e);
            }
        }
        None => read_only.absent(StepKind::KubeWait, clusters.why_none()),
    }
    if observe {
        return (Capabilities::Observe { read_only }, warnings);
    }
    let mu_exec = Arc::new(Executor::mutating(
        pool,
        AnsibleRunner::from_env(),
        redactor,
        Mutating::grant("interactive console (operate mode)"),
    ));
    let mut mutating = MutatingExecutors::default();
    for kind in [StepKind::Ansible, StepKind::Ssh] {
        mutating.add(Arc::new(RealExecutor::mutating(kind, Arc::clone(&mu_exec))));
    }
    match kube {
        Some(c) => mutating.add(Arc::new(KubeExecutor::flux_reconcile(c))),
        None => mutating.absent(StepKind::FluxReconcile, clusters.why_none()),
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

// ---------------------------------------------------------------------------------------
// The kube-backed steps

/// One environment's cluster as the kube executors reach it.
#[derive(Debug, Clone)]
struct EnvCluster {
    /// The kubeconfig, or why there is none (naming the file and where its name came from).
    target: Result<KubeTarget, String>,
    topology: Result<EnvTopology, String>,
    /// What the panes read (the agents' namespace, selector, container; the stuck
    /// threshold): a kube-wait reads the same.
    settings: Result<WatchSettings, String>,
    /// Inventory hosts of the environment (servers, VPN gateways): a step bound to a host
    /// belongs to the environment that has it.
    hosts: Vec<String>,
    /// The kubeconfig path the planner writes into a `flux reconcile` argv for it.
    planned_kubeconfig: Option<String>,
}

/// The clusters of a repo's environments.
#[derive(Debug, Clone)]
pub struct Clusters {
    envs: BTreeMap<String, EnvCluster>,
}

impl Clusters {
    /// Every environment of `repo`: its kubeconfig (`cluster::kube_target` with `ov`) and
    /// topology (`cluster::env_topology`). Nothing is read from the network here.
    pub fn for_repo(repo: &Repo, ov: &KubeOverrides) -> Clusters {
        let envs = repo
            .environments
            .iter()
            .map(|e| {
                let hosts = e
                    .servers
                    .iter()
                    .chain(e.vpn_gateways.iter())
                    .map(|h| h.name.clone())
                    .collect();
                let c = EnvCluster {
                    target: crate::cluster::kube_target(repo, &e.name, ov)
                        .map_err(|x| x.to_string()),
                    topology: crate::cluster::env_topology(repo, &e.name)
                        .map_err(|x| x.to_string()),
                    settings: crate::cluster::watch_settings(repo, &e.name)
                        .map_err(|x| x.to_string()),
                    hosts,
                    planned_kubeconfig: e
                        .kubeconfig_name
                        .get()
                        .map(|k| repo.root.join(".cache").join(k).display().to_string()),
                };
                (e.name.clone(), c)
            })
            .collect();
        Clusters { envs }
    }

    /// Whether any environment has a kubeconfig to reach.
    pub fn usable(&self) -> bool {
        self.envs.values().any(|c| c.target.is_ok())
    }

    /// Why no kube executor exists (every environment's reason).
    pub fn why_none(&self) -> String {
        if self.envs.is_empty() {
            return "the repo has no environments, so no cluster to reach".into();
        }
        let whys: Vec<&str> = self
            .envs
            .values()
            .filter_map(|c| c.target.as_ref().err())
            .map(String::as_str)
            .collect();
        format!("no environment has a kubeconfig: {}", whys.join("; "))
    }

    /// One notice per environment whose cluster cannot be reached (when others can).
    pub fn problems(&self) -> Vec<String> {
        if !self.usable() {
            return vec![format!("kube-wait and flux-reconcile: {}", self.why_none())];
        }
        self.envs
            .values()
            .filter_map(|c| c.target.as_ref().err())
            .map(|why| format!("kube-wait and flux-reconcile: {why}"))
            .collect()
    }

    /// Which environment a planned step is for: the one whose kubeconfig its `flux` argv
    /// names, else the one that has its host, else the repo's only environment. The executor
    /// runs a step on the run's environment (it travels with `ExecRequest::Execute`) and
    /// uses this only to refuse a step whose own host or kubeconfig says another one.
    pub fn env_of(&self, step: &PlannedStep) -> Result<String, String> {
        let one = |found: Vec<&String>, by: &str| -> Option<Result<String, String>> {
            match found.as_slice() {
                [] => None,
                [env] => Some(Ok((*env).clone())),
                many => Some(Err(format!(
                    "step {} ({}): {by} belongs to several environments ({})",
                    step.n,
                    step.kind.as_str(),
                    many.iter()
                        .map(|e| e.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        };
        if let Some(argv) = &step.command {
            if let Some(i) = argv.iter().position(|a| a == "--kubeconfig") {
                if let Some(path) = argv.get(i + 1) {
                    let found = self
                        .envs
                        .iter()
                        .filter(|(_, c)| c.planned_kubeconfig.as_deref() == Some(path.as_str()))
                        .map(|(e, _)| e)
                        .collect();
                    if let Some(r) = one(found, &format!("kubeconfig {path}")) {
                        return r;
                    }
                }
            }
        }
        if let Some(host) = &step.host {
            let found = self
                .envs
                .iter()
                .filter(|(_, c)| c.hosts.iter().any(|h| h == host))
                .map(|(e, _)| e)
                .collect();
            if let Some(r) = one(found, &format!("host {host}")) {
                return r;
            }
        }
        if self.envs.len() == 1 {
            if let Some(env) = self.envs.keys().next() {
                return Ok(env.clone());
            }
        }
        Err(format!(
            "step {} ({}) is bound to no host and names no kubeconfig, and the repo has {} \
             environments ({}): hk-console cannot tell which cluster it is for",
            step.n,
            step.kind.as_str(),
            self.envs.len(),
            self.envs.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    }

    /// A client, the topology and the watch settings for `env`, or why not.
    async fn connect(
        &self,
        env: &str,
    ) -> Result<(kube::Client, EnvTopology, WatchSettings), String> {
        let c = self
            .envs
            .get(env)
            .ok_or_else(|| format!("no environment `{env}` in hk-console.yaml"))?;
        let target = c.target.clone()?;
        let topology = c.topology.clone()?;
        let settings = c.settings.clone()?;
        let client = crate::cluster::client(&target)
            .await
            .map_err(|e| e.to_string())?;
        Ok((client, topology, settings))
    }
}

#[derive(Debug, Default)]
struct KubeState {
    cancels: HashMap<Key, CancellationToken>,
    /// kube-wait verdicts, kept for the Verify that follows.
    ends: HashMap<Key, WaitEnd>,
}

/// `kube-wait` (read-only) or `flux-reconcile` (mutating) against the step's environment.
/// Progress lines stream as step output; a kube-wait's verdict comes back on Verify (met,
/// failed, timed out), a reconcile's as the step's outcome; a Cancel stops either promptly.
#[derive(Debug, Clone)]
pub struct KubeExecutor {
    kind: StepKind,
    clusters: Arc<Clusters>,
    /// None: the environment's `WatchSettings::stuck_after`, as the rollout pane uses.
    stuck_after: Option<Duration>,
    flux_timeout: Duration,
    state: Arc<Mutex<KubeState>>,
}

impl KubeExecutor {
    pub fn kube_wait(clusters: Arc<Clusters>) -> Self {
        Self::new(StepKind::KubeWait, clusters)
    }

    pub fn flux_reconcile(clusters: Arc<Clusters>) -> Self {
        Self::new(StepKind::FluxReconcile, clusters)
    }

    fn new(kind: StepKind, clusters: Arc<Clusters>) -> Self {
        KubeExecutor {
            kind,
            clusters,
            stuck_after: None,
            flux_timeout: flux::DEFAULT_TIMEOUT,
            state: Arc::default(),
        }
    }

    /// How long an updated pod may stay unready before a rollout wait fails.
    pub fn with_stuck_after(mut self, d: Duration) -> Self {
        self.stuck_after = Some(d);
        self
    }

    /// How long a reconcile may take.
    pub fn with_flux_timeout(mut self, d: Duration) -> Self {
        self.flux_timeout = d;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KubeState> {
        // Plain inserts and removes: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn execute(
        self,
        tag: RunTag,
        step: PlannedStep,
        attempt: u32,
        env: String,
        cancel: CancellationToken,
        replies: mpsc::Sender<ExecReply>,
    ) {
        let (n, key) = (step.n, (tag, step.n, attempt));
        let input = self.run(tag, &step, attempt, &env, &cancel, &replies).await;
        self.lock().cancels.remove(&key);
        let _ = replies
            .send(ExecReply::Outcome {
                tag,
                input: input.unwrap_or_else(|why| Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(format!("{why}; the step was not started")),
                }),
            })
            .await;
    }

    /// The step's final input, or (Err) why it could not start.
    async fn run(
        &self,
        tag: RunTag,
        step: &PlannedStep,
        attempt: u32,
        run_env: &str,
        cancel: &CancellationToken,
        replies: &mpsc::Sender<ExecReply>,
    ) -> Result<Input, String> {
        let n = step.n;
        enum Work {
            Wait(Condition, Duration),
            Reconcile(FluxObject),
        }
        let work = match self.kind {
            StepKind::FluxReconcile => {
                let argv = step.command.as_deref().unwrap_or_default();
                Work::Reconcile(FluxObject::from_argv(argv)?)
            }
            _ => {
                let expect = step.expect.clone().unwrap_or_default();
                let text = expect
                    .condition
                    .ok_or("a kube-wait step without a condition")?;
                // The gate policy's read-only look before a reconcile (the planner writes it).
                let words: Vec<&str> = text.split_whitespace().collect();
                if let [crate::runbook::plan::FLUX_PREVIEW, object, ns] = words.as_slice() {
                    return self
                        .preview(
                            tag,
                            step,
                            attempt,
                            run_env,
                            FluxObject::parse(object, Some(ns))?,
                            cancel,
                            replies,
                        )
                        .await;
                }
                let timeout = expect
                    .timeout_s
                    .ok_or("a kube-wait step without timeout_s")?;
                Work::Wait(Condition::parse(&text)?, Duration::from_secs(timeout))
            }
        };
        // The run's environment; a step whose own host or kubeconfig says otherwise is
        // refused rather than sent to either cluster.
        let env = match self.clusters.env_of(step) {
            Ok(own) if own != run_env => {
                return Err(format!(
                    "step {n} belongs to environment `{own}` but the run is for `{run_env}`"
                ))
            }
            _ => run_env.to_string(),
        };
        let (client, topology, settings) = self.clusters.connect(&env).await?;
        if cancel.is_cancelled() {
            return Ok(Input::Cancelled {
                n,
                attempt,
                reason: "stopped at the operator's request before it started".into(),
            });
        }
        let _ = replies
            .send(ExecReply::Outcome {
                tag,
                input: Input::StepStarted { n, attempt },
            })
            .await;
        // Progress lines go out in order, all of them before the outcome.
        let (line_tx, mut line_rx) = mpsc::unbounded_channel::<String>();
        let forward = {
            let replies = replies.clone();
            tokio::spawn(async move {
                while let Some(line) = line_rx.recv().await {
                    let reply = ExecReply::Output {
                        tag,
                        n,
                        attempt,
                        line,
                    };
                    if replies.send(reply).await.is_err() {
                        break;
                    }
                }
            })
        };
        let progress = move |line: String| {
            let _ = line_tx.send(line);
        };
        let input = match work {
            Work::Wait(condition, timeout) => {
                let mut opts = WaitOptions::new(timeout, &settings);
                if let Some(d) = self.stuck_after {
                    opts.stuck_after = d;
                }
                match wait::wait(
                    client, &topology, &settings, &condition, &opts, cancel, &progress,
                )
                .await
                {
                    Ok(WaitEnd::Cancelled { last }) => Input::Cancelled {
                        n,
                        attempt,
                        reason: format!("stopped at the operator's request; last seen: {last}"),
                    },
                    Ok(end) => {
                        progress(format!("verdict: {end}"));
                        self.lock().ends.insert((tag, n, attempt), end);
                        Input::StepFinished {
                            n,
                            attempt,
                            exit_code: Some(0),
                            error: None,
                        }
                    }
                    Err(e) => Input::StepFinished {
                        n,
                        attempt,
                        exit_code: None,
                        error: Some(format!("{env}: {e}")),
                    },
                }
            }
            Work::Reconcile(obj) => {
                match flux::reconcile(client, &obj, self.flux_timeout, cancel, &progress).await {
                    Ok(r) => match r.end {
                        WaitEnd::Met(detail) => {
                            progress(format!("verdict: {detail}"));
                            Input::StepFinished {
                                n,
                                attempt,
                                exit_code: Some(0),
                                error: None,
                            }
                        }
                        WaitEnd::Cancelled { last } => Input::Cancelled {
                            n,
                            attempt,
                            reason: format!(
                                "stopped waiting at the operator's request; the reconcile was \
                                 already requested ({} = {}) and Flux carries it out anyway; \
                                 last seen: {last}",
                                flux::REQUESTED_AT_ANNOTATION,
                                r.requested_at
                            ),
                        },
                        end => {
                            progress(format!("verdict: {end}"));
                            Input::StepFinished {
                                n,
                                attempt,
                                exit_code: None,
                                error: Some(end.to_string()),
                            }
                        }
                    },
                    Err(e) => Input::StepFinished {
                        n,
                        attempt,
                        exit_code: None,
                        error: Some(format!("{env}: {e}")),
                    },
                }
            }
        };
        drop(progress);
        let _ = tokio::time::timeout(Duration::from_secs(5), forward).await;
        Ok(input)
    }

    /// The preview of a Flux reconcile: every line as step output, the blast radius as
    /// the verdict the Verify reports.
    #[allow(clippy::too_many_arguments)]
    async fn preview(
        &self,
        tag: RunTag,
        step: &PlannedStep,
        attempt: u32,
        env: &str,
        obj: FluxObject,
        cancel: &CancellationToken,
        replies: &mpsc::Sender<ExecReply>,
    ) -> Result<Input, String> {
        let n = step.n;
        let (client, _, _) = self.clusters.connect(env).await?;
        let _ = replies
            .send(ExecReply::Outcome {
                tag,
                input: Input::StepStarted { n, attempt },
            })
            .await;
        let looked = tokio::select! {
            r = flux::preview(client, &obj) => r,
            () = cancel.cancelled() => {
                return Ok(Input::Cancelled {
                    n,
                    attempt,
                    reason: "stopped at the operator's request".into(),
                })
            }
        };
        let (input, lines) = match looked {
            Ok(p) => {
                let summary = p.summary(&obj.to_string());
                self.lock()
                    .ends
                    .insert((tag, n, attempt), WaitEnd::Met(summary.clone()));
                let mut lines = p.lines;
                lines.push(format!("verdict: {summary}"));
                (
                    Input::StepFinished {
                        n,
                        attempt,
                        exit_code: Some(0),
                        error: None,
                    },
                    lines,
                )
            }
            Err(e) => (
                Input::StepFinished {
                    n,
                    attempt,
                    exit_code: None,
                    error: Some(format!("{env}: {e}")),
                },
                Vec::new(),
            ),
        };
        // Every line goes out before the outcome, so the approval shows the whole preview.
        for line in lines {
            let _ = replies
                .send(ExecReply::Output {
                    tag,
                    n,
                    attempt,
                    line,
                })
                .await;
        }
        Ok(input)
    }

    fn verify(&self, step: &PlannedStep, key: Key) -> Input {
        let (n, attempt) = (key.1, key.2);
        match self.lock().ends.remove(&key) {
            Some(end) => Input::VerifyResult {
                n,
                attempt,
                ok: end.is_met(),
                detail: end.to_string(),
            },
            None => Input::VerifyResult {
                n,
                attempt,
                ok: false,
                detail: format!(
                    "nothing to verify a {} step against (its verdict was not kept)",
                    step.kind.as_str()
                ),
            },
        }
    }
}

impl StepExecutor for KubeExecutor {
    fn kind(&self) -> StepKind {
        self.kind
    }

    fn mutates(&self) -> bool {
        self.kind == StepKind::FluxReconcile
    }

    fn handle(&self, req: ExecRequest, replies: mpsc::Sender<ExecReply>) {
        match req {
            ExecRequest::Execute {
                tag,
                step,
                attempt,
                env,
                ..
            } => {
                // Registered before the task runs, so a Cancel right behind finds it.
                let cancel = CancellationToken::new();
                self.lock()
                    .cancels
                    .insert((tag, step.n, attempt), cancel.clone());
                tokio::spawn(
                    self.clone()
                        .execute(tag, step, attempt, env, cancel, replies),
                );
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
