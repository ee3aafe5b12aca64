//! The real executors (`hk_effects::exec`) behind the session's [`StepExecutor`] boundary, one
//! file per adapter, and the builder that assembles them for a loaded repo.
//!
//! Owns: [`capabilities_for_repo`] / [`capabilities_with`], which build the operate or
//! observe set (SSH settings per host from its hostvars, as Ansible would connect; the
//! vault's redactor; each environment's cluster), and the adapters: [`real`] (SSH,
//! ansible-playbook and list-hosts over `exec::Executor<ReadOnly | Mutating>`), [`probe`]
//! (TCP probes), [`waits`] (repo-wait and vpn-wait), [`kube`] (kube-wait and flux-reconcile) over [`clusters`] (which
//! environment's kubeconfig a step reaches). No environment with a kubeconfig: both kube
//! kinds are absent and their steps say why; one environment without one: its steps fail
//! unstarted, saying the same. The dispatch from a request to its executor is
//! `session::exec` (`Capabilities::executor_for`, `executor_task`).
//! Must not: decide anything about the run; the machine does. Observe mode: only
//! `Executor<ReadOnly>` exists in it.

pub mod clusters;
pub mod etcd;
pub mod kube;
pub mod probe;
pub mod real;
pub mod waits;

use std::sync::Arc;

use hk_effects::cluster::KubeOverrides;
use hk_effects::exec::{self, AnsibleRunner, Executor, Mutating, SshPool};
use hk_engine::repo::Repo;
use hk_engine::runbook::plan::StepKind;

use super::exec::{Capabilities, MutatingExecutors, ReadOnlyExecutors, RunTag};

pub use clusters::Clusters;
pub use etcd::EtcdExecutor;
pub use kube::KubeExecutor;
pub use probe::ProbeExecutor;
pub use real::RealExecutor;
pub use waits::WaitExecutor;

/// The step kinds `hk_effects::exec` runs (probe steps are run by [`ProbeExecutor`]).
/// A step's output lines on their way to the session: `T` handed to the sender as the work
/// prints it, each sent on as an [`ExecReply::Output`] of step `n`'s `attempt`, in order.
/// Before the step's outcome goes out, [`OutputForward::finish`] (the sender dropped) lets
/// the last lines through first. Shared by the executors whose work prints as it runs.
pub(crate) struct OutputForward {
    task: tokio::task::JoinHandle<()>,
}

impl OutputForward {
    pub(crate) fn start<T: Send + 'static>(
        replies: &tokio::sync::mpsc::Sender<super::exec::ExecReply>,
        (tag, n, attempt): (RunTag, usize, u32),
        text: fn(T) -> String,
    ) -> (tokio::sync::mpsc::UnboundedSender<T>, Self) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<T>();
        let replies = replies.clone();
        let task = tokio::spawn(async move {
            while let Some(l) = rx.recv().await {
                let reply = super::exec::ExecReply::Output {
                    tag,
                    n,
                    attempt,
                    line: text(l),
                };
                if replies.send(reply).await.is_err() {
                    break;
                }
            }
        });
        (tx, OutputForward { task })
    }

    /// Waits (up to 5 s) for every line sent so far to reach the session; the sender must
    /// be dropped first.
    pub(crate) async fn finish(self) {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.task).await;
    }
}

pub const KINDS: [StepKind; 3] = [StepKind::ListHosts, StepKind::Ansible, StepKind::Ssh];

/// One attempt of one step of one run: what an adapter keeps its cancel token and its
/// verdict under, for the Cancel and Verify that follow.
type Key = (RunTag, usize, u32);

/// How a step's own work (a probe, a wait) ended, as the run machine takes it: cancelled
/// when the operator stopped it, else finished with exit 0 or with the failure's words.
fn finished_input<T>(
    n: usize,
    attempt: u32,
    cancelled: bool,
    result: &Result<T, String>,
) -> hk_engine::runbook::machine::Input {
    use hk_engine::runbook::machine::Input;
    if cancelled {
        return Input::Cancelled {
            n,
            attempt,
            reason: "stopped at the operator's request".into(),
        };
    }
    match result {
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

/// Where the executors depart from the operator's own settings (defined with the effects it
/// configures, so the simulation can say what it needs without the session).
pub use hk_effects::exec::ExecSetup;

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
            .unwrap_or_else(|| hk_effects::context::ssh_options(repo)),
    ));
    let defaults = exec::settings::SshDefaults::from_env();
    let ssh_config = if setup.ignore_ssh_config {
        exec::settings::SshConfig::empty()
    } else {
        match hk_effects::context::load_ssh_config(&defaults) {
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
        match hk_effects::context::connect_settings_with(repo, &host, &ssh_config, &defaults) {
            Ok(s) => pool.add_host(s),
            Err(e) => warnings.push(e.to_string()),
        }
    }
    // The vaulted values, learned with the repo's vault password only to be masked in
    // every line either executor shows, journals or logs (or, without the password, every
    // diff line withheld).
    // A password file that is a script is run as ansible-playbook runs it.
    let vault = hk_effects::vault_script::scan_repo(repo);
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
    // The run's journal masks what the executors mask.
    read_only.set_redactor(redactor.clone());
    for kind in KINDS {
        // A read-only adapter never reports itself as mutating, so this cannot fail.
        if let Err(e) = read_only.add(Arc::new(RealExecutor::read_only(
            kind,
            Arc::clone(&ro_exec),
        ))) {
            warnings.push(e.to_string());
        }
    }
    if let Err(e) = read_only.add(Arc::new(ProbeExecutor::default())) {
        warnings.push(e.to_string());
    }
    // The waits read the repo from disk again and look at the gateways read-only.
    for kind in [StepKind::RepoWait, StepKind::VpnWait] {
        let wait = WaitExecutor::new(kind, repo.root.clone(), Arc::clone(&ro_exec))
            .with_time_scale(setup.time_scale.unwrap_or(1));
        if let Err(e) = read_only.add(Arc::new(wait)) {
            warnings.push(e.to_string());
        }
    }
    warnings.extend(clusters.problems());
    // The health gate and the etcd-leader steps read etcd's members over SSH as the etcd
    // pane does, with the same settings as every other connection to the servers.
    let etcd = {
        let probe = hk_effects::observe::etcd::EtcdProbe::for_repo_with(
            repo,
            setup
                .ssh
                .clone()
                .unwrap_or_else(|| hk_effects::context::ssh_options(repo)),
            &ssh_config,
            &defaults,
        );
        Arc::new(hk_effects::observe::etcd::EtcdSource::new(
            repo,
            Arc::new(probe),
        ))
    };
    for ex in [
        EtcdExecutor::read_only(Arc::clone(&etcd)),
        EtcdExecutor::snapshot(Arc::clone(&etcd)),
    ] {
        if let Err(e) = read_only.add(Arc::new(ex)) {
            warnings.push(e.to_string());
        }
    }
    let kube = clusters.usable().then(|| Arc::clone(&clusters));
    match &kube {
        Some(c) => {
            let etcd: Arc<dyn hk_effects::cluster::health_probe::EtcdMembers> = etcd.clone();
            let mut wait = KubeExecutor::kube_wait(Arc::clone(c)).with_etcd(etcd);
            if let Some(d) = setup.stuck_after {
                wait = wait.with_stuck_after(d);
            }
            if let Some(s) = setup.time_scale {
                wait = wait.with_time_scale(s);
            }
            if let Err(e) = read_only.add(Arc::new(wait)) {
                warnings.push(e.to_string());
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
    let vips = clusters.vip_by_server();
    for kind in [StepKind::Ansible, StepKind::Ssh] {
        mutating.add(Arc::new(
            RealExecutor::mutating(kind, Arc::clone(&mu_exec)).with_vips(vips.clone()),
        ));
    }
    mutating.add(Arc::new(EtcdExecutor::mutating(etcd, Arc::clone(&mu_exec))));
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
