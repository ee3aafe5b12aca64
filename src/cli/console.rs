//! The interactive console (no command on a terminal, `run`, `observe` without --once):
//! its executors, its live sources, and the console itself.

use std::path::PathBuf;
use std::sync::Arc;

use super::{kube_overrides, load_repo, Cli, CmdResult, Status};
use crate::repo::Repo;
use crate::ui::StartScreen;

/// Whether there is a terminal to draw on.
pub(super) fn possible() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// The interactive console on the command's repo. Observe mode is built with read-only
/// capabilities only.
pub(super) fn console(
    cli: &Cli,
    rt: &tokio::runtime::Runtime,
    start: StartScreen,
    observe: bool,
    env: Option<&str>,
) -> CmdResult {
    let (repo, mut notices) = match load_repo(cli) {
        Ok(r) => (r, Vec::new()),
        Err(e) => offer_init(cli)?.ok_or(e)?,
    };
    // On screen too: stderr is behind the console's screen.
    notices.extend(
        repo.inventory
            .warnings()
            .iter()
            .map(|w| format!("inventory: {w}")),
    );
    let extras = Extras {
        notices,
        ..Extras::default()
    };
    console_on(cli, rt, repo, start, observe, env, extras)
}

/// A repo without hk-console.yaml: the console shows what `init` would write and offers to
/// write it (then opens on the repo, saying it wrote it). `None` when the repo has one (the load failed for
/// another reason), no proposal can be made, or the operator leaves: the caller's error
/// (exit 2 with the hint) stands.
fn offer_init(cli: &Cli) -> Result<Option<(Repo, Vec<String>)>, super::Failure> {
    use crate::ui::panes::init_offer::{ask, InitChoice, InitOffer};
    let Ok(root) = super::repo_root(cli.repo.as_deref()) else {
        return Ok(None);
    };
    let path = root.join(crate::repo::config::CONFIG_FILE);
    if !root.is_dir() || path.exists() {
        return Ok(None);
    }
    let proposal = match crate::repo::init::propose(&root) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(repo = %root.display(), error = %e, "init: no proposal to offer");
            return Ok(None);
        }
    };
    let mut offer = InitOffer::new(path, proposal.text.clone(), proposal.questions.len());
    let choice = {
        let mut tui = crate::tui::Tui::enter()
            .map_err(|e| super::Failure::msg(format!("cannot open the terminal: {e}")))?;
        let choice = ask(&mut tui.terminal, &mut offer)
            .map_err(|e| super::Failure::msg(format!("terminal: {e}")))?;
        tui.exit()
            .map_err(|e| super::Failure::msg(format!("cannot restore the terminal: {e}")))?;
        choice
    };
    if choice == InitChoice::Quit {
        return Ok(None);
    }
    let written = super::init::write_proposal(&root, &proposal.text)?;
    tracing::info!(path = %written.display(), "init: wrote the proposal from the console");
    let mut notices = vec![format!(
        "init: wrote {} (the proposal shown before the console opened)",
        written.display()
    )];
    if !proposal.questions.is_empty() {
        notices.push(format!(
            "init: {} question(s) left in it (# QUESTION:); answer them before relying on it",
            proposal.questions.len()
        ));
    }
    Ok(Some((load_repo(cli)?, notices)))
}

/// What the demo changes about the console; the default changes nothing.
#[derive(Default)]
pub(super) struct Extras {
    /// Shown first (the demo's SIMULATED banner).
    pub notices: Vec<String>,
    /// The executors' SSH trust and stuck threshold; the live panes use the same.
    pub exec: crate::session::executors::ExecSetup,
    /// Where `:fault` goes.
    pub faults: Option<Arc<dyn crate::ui::FaultSink>>,
    /// Run journals here instead of the operator's journal directory.
    pub runs_dir: Option<PathBuf>,
    /// The clusters are the demo's own: the operator's --kubeconfig/KUBECONFIG never apply.
    pub own_clusters: bool,
    /// The journals go when the console exits (the demo without --dir): what is lost.
    pub runs_discarded: Option<String>,
}

/// The plans of the one loaded repo, shared with the live sources.
struct SharedPlans(Arc<Repo>);

impl crate::ui::PlanSource for SharedPlans {
    fn plan(
        &self,
        runbook: &crate::runbook::schema::Runbook,
        env: &str,
        host: Option<&str>,
    ) -> Result<crate::runbook::plan::Plan, crate::session::PlanSourceError> {
        let penv = crate::context::plan_env(&self.0, env, host)?;
        Ok(crate::runbook::plan::plan(runbook, &penv, &*self.0)?)
    }
}

/// The console on `repo`; `env`: the environment the command is about (the one an
/// operator's kubeconfig points at).
pub(super) fn console_on(
    cli: &Cli,
    rt: &tokio::runtime::Runtime,
    repo: Repo,
    start: StartScreen,
    observe: bool,
    env: Option<&str>,
    extras: Extras,
) -> CmdResult {
    let Extras {
        notices: extra,
        exec,
        faults,
        runs_dir,
        own_clusters,
        runs_discarded,
    } = extras;
    let repo = Arc::new(repo);
    let runbooks = super::runbooks_of(cli)?;
    let environments = repo
        .environments
        .iter()
        .map(|e| crate::ui::EnvSummary {
            // The objects the panes watch, so a next step looks at the same ones (a repo
            // whose settings cannot be read has that said by the panes themselves).
            objects: crate::cluster::watch_settings(&repo, &e.name)
                .ok()
                .map(|s| crate::observe::summary::Objects::of(&s)),
            ..crate::ui::EnvSummary::from(e)
        })
        .collect();
    let mut notices = Vec::new();
    let overrides = if own_clusters {
        crate::cluster::KubeOverrides::default()
    } else {
        let (ov, why) = kube_overrides(cli, &repo, env, true)?;
        notices.extend(why);
        ov
    };
    // The real executors (ansible-playbook, SSH, TCP probe); observe mode gets the read-only
    // ones only. Kinds without an executor (kube-wait, flux-reconcile) are refused by the UI.
    // A dry run has no executor at all: plans, gates and the journal, nothing touched.
    // The bundled sample's addresses are documentation values, not the operator's hosts:
    // on it the console rehearses, and says so.
    let on_sample = repo.is_bundled_sample();
    let capabilities = if cli.dry_run || on_sample {
        use crate::ui::{Capabilities, MutatingExecutors, ReadOnlyExecutors};
        let caps = if observe {
            Capabilities::Observe {
                read_only: ReadOnlyExecutors::default(),
            }
        } else {
            Capabilities::Operate {
                read_only: ReadOnlyExecutors::default(),
                mutating: MutatingExecutors::default(),
            }
        };
        let why = if on_sample && !cli.dry_run {
            "the bundled sample repo: rehearsal only, no executor runs (point --repo or HK_REPO at your infra repo to run for real)"
        } else {
            "dry run: no executor runs anything (no SSH, no ansible-playbook, no probe)"
        };
        notices.push(why.to_string());
        caps
    } else {
        let clusters = crate::session::executors::Clusters::for_repo(&repo, &overrides);
        let (caps, why) =
            crate::session::executors::capabilities_with(&repo, observe, Arc::new(clusters), &exec);
        notices.extend(why);
        caps
    };
    // Live panes: kube watchers per environment and the VPN look over SSH, on the command's
    // runtime for as long as the console runs. Not on the bundled sample (documentation
    // addresses) nor in a dry run (nothing is dialled).
    let live_cancel = tokio_util::sync::CancellationToken::new();
    let observations = if cli.dry_run || on_sample {
        None
    } else {
        let started = rt.block_on(crate::observe::sources::spawn(
            &repo,
            &overrides,
            exec.ssh.clone(),
            exec.stuck_after,
            &live_cancel,
        ));
        if started.watched == 0 && !repo.environments.is_empty() {
            // No cluster of this repo is set up here: say so first, and where the panes
            // can be seen; the reasons per environment follow.
            notices.insert(
                0,
                "no cluster of this repo is set up on this machine (`hk-console demo` shows \
                 every pane and runbook on a simulated homelab)"
                    .into(),
            );
        }
        notices.extend(started.notices);
        Some(started.updates)
    };
    // Mutating runs take the cluster's run lock, reached as the kube executors reach the
    // cluster; nothing runs in a dry run, on the sample or in observe mode, so nothing locks.
    let locking = (!(cli.dry_run || on_sample || observe)).then(|| {
        Arc::new(crate::session::lock::RunLocking::for_repo(
            &repo,
            &overrides,
            cli.no_cluster_lock,
        ))
    });
    let notices = extra.into_iter().chain(notices).collect();
    let protected = repo
        .environments
        .iter()
        .filter(|e| e.protected)
        .map(|e| e.name.clone())
        .collect();
    let root = repo.root.clone();
    // The looks a next step opens go to the clusters the live panes watch, and only then.
    let looker: Option<Arc<dyn crate::observe::look::LookSource>> =
        observations.is_some().then(|| {
            Arc::new(crate::observe::look::Looker::new(
                Arc::clone(&repo),
                overrides.clone(),
            )) as Arc<dyn crate::observe::look::LookSource>
        });
    let checker: crate::ui::app::Checker = Arc::new(move || super::check::console_check(&root));
    // What Home does not offer on this repo, and why: the decision `runbooks list` makes.
    let not_offered = runbooks
        .iter()
        .filter_map(|l| {
            crate::context::not_offered(&repo, l).map(|why| (l.runbook.id.clone(), why.to_string()))
        })
        .collect();
    let opts = crate::ui::UiOptions {
        environments,
        runbooks,
        not_offered,
        plans: Arc::new(SharedPlans(repo)),
        runs_dir: runs_dir.or_else(|| crate::journal::default_runs_dir().ok()),
        start,
        theme: cli.theme.clone(),
        capabilities,
        observations,
        notices,
        faults,
        protected,
        checker: Some(checker),
        locking,
        no_cluster_lock: cli.no_cluster_lock,
        runs_discarded,
        looker,
    };
    let result = rt.block_on(crate::ui::run(opts));
    live_cancel.cancel();
    Ok(match result? {
        crate::ui::ExitStatus::Clean => Status::Clean,
        crate::ui::ExitStatus::RunNotSucceeded => Status::Violations,
    })
}
