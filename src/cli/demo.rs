//! `demo`: the simulated homelab, and the console, one look or a headless run on it.

use std::path::{Path, PathBuf};

use super::console::{console_on, Extras};
use super::observe::{render_snapshot, status_of};
use super::{print_json, Cli, CmdResult, Failure, Status};
use crate::repo::Repo;

/// A directory removed when dropped (the demo's repo, unless --dir keeps it: a directory
/// given with --dir is marked as the demo's and reopened by the next `demo --dir` on it).
struct DemoDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for DemoDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// How the simulation's parts are made: `--apiserver DIR` and `--userland`.
#[derive(Default)]
pub(super) struct SimParts<'a> {
    pub apiserver: Option<&'a Path>,
    pub options: crate::sim::demo::Options,
}

/// What `hk-console demo` does once the simulation runs.
pub(super) enum DemoMode {
    /// The console on the demo repo.
    Console,
    /// One look at every pane, printed.
    Once,
    /// One runbook driven by a simulated operator, its journal summarised.
    Headless(crate::sim::headless::HeadlessRun),
}

/// `hk-console demo`: start the simulation on the command's runtime, then one look at
/// every pane, a headless run, or the console on the demo repo with the real executors.
/// The operator's --kubeconfig/--context would point the console away from the simulation:
/// refused; KUBECONFIG (set in the shell for other work) is not read.
pub(super) fn demo_cmd(
    cli: &Cli,
    rt: &tokio::runtime::Runtime,
    scenario: &str,
    mode: DemoMode,
    json: bool,
    dir: Option<&Path>,
    sim: SimParts<'_>,
) -> CmdResult {
    let SimParts { apiserver, options } = sim;
    let mut reopened = None;
    // Held until `demo` returns: a second demo on this directory is refused meanwhile.
    let mut _held = None;
    let dir = match dir {
        Some(d) => {
            // A demo directory is reopened (journals kept) so a crash and its resume can be
            // rehearsed; anything else that is not empty is refused, untouched.
            match crate::sim::demo_repo::claim_dir(d, cli.repo.as_deref())
                .map_err(|why| Failure::msg(format!("demo: {why}")))?
            {
                crate::sim::demo_repo::Claimed::New => {}
                crate::sim::demo_repo::Claimed::Reopened { journals } => {
                    reopened = Some(format!(
                        "reopened the demo directory {}: its {journals} run journal(s) kept, \
                         its repo copy written again onto the restarted simulation",
                        d.display()
                    ));
                }
            }
            _held = Some(
                crate::sim::demo_repo::hold_dir(d)
                    .map_err(|why| Failure::msg(format!("demo: {why}")))?,
            );
            DemoDir {
                path: d.to_path_buf(),
                keep: true,
            }
        }
        None => {
            let base = crate::journal::default_runs_dir()
                .ok()
                .and_then(|r| r.parent().map(Path::to_path_buf))
                .unwrap_or_else(std::env::temp_dir);
            let path = base.join(format!("demo-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            DemoDir { path, keep: false }
        }
    };
    std::fs::create_dir_all(&dir.path)
        .map_err(|e| Failure::msg(format!("demo: cannot create {}: {e}", dir.path.display())))?;
    if let Some(said) = &reopened {
        errln!("demo: {said}");
    }
    // The simulation runs on the command's runtime for as long as `demo` is held.
    let demo = rt.block_on(crate::sim::demo::start_opts(
        scenario,
        &dir.path,
        cli.repo.as_deref(),
        apiserver,
        options,
    ))?;
    if let DemoMode::Headless(req) = &mode {
        let runbooks = super::runbooks_of(cli)?;
        let runs_dir = demo.dir.join("runs");
        let report = match rt.block_on(crate::sim::headless::drive_with_lock(
            &demo,
            runbooks,
            req,
            &runs_dir,
            cli.no_cluster_lock,
            |line| errln!("{line}"),
        )) {
            Ok(r) => r,
            // Stopped by a signal: its own exit status; the demo's directory goes (or a
            // --dir one stays) as `dir` drops on the way out.
            Err(crate::sim::headless::HeadlessError::Signalled { signal, reason }) => {
                errln!("error: {reason}; the run was journaled abandoned and its children stopped");
                if dir.keep {
                    errln!("the journal is kept under {}", runs_dir.display());
                }
                return Ok(match signal {
                    crate::session::supervise::Caught::Hup => Status::Hangup,
                    crate::session::supervise::Caught::Int => Status::Interrupted,
                    crate::session::supervise::Caught::Term => Status::Terminated,
                });
            }
            Err(e) => return Err(e.into()),
        };
        if json {
            print_json(&report)?;
        } else {
            outln!("{}", demo.banner());
            outln!("{}", report.render().trim_end());
            if !dir.keep {
                outln!("(the journal goes with the demo's directory; keep both with --dir)");
            }
        }
        return Ok(if report.succeeded {
            Status::Clean
        } else {
            Status::Violations
        });
    }
    if let DemoMode::Once = mode {
        let names: Vec<String> = demo
            .repo
            .environment_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let gateways = crate::observe::vpn::Gateways::for_repo_with(
            &demo.repo,
            demo.ssh_options(),
            &crate::exec::settings::SshConfig::empty(),
            &crate::exec::settings::SshDefaults::from_env(),
        );
        let etcd = crate::observe::etcd::EtcdProbe::for_repo_with(
            &demo.repo,
            demo.ssh_options(),
            &crate::exec::settings::SshConfig::empty(),
            &crate::exec::settings::SshDefaults::from_env(),
        );
        let taken = rt.block_on(crate::observe::snapshot::take(
            &demo.repo,
            &names,
            &crate::cluster::KubeOverrides::default(),
            &gateways,
            &etcd,
        ));
        if json {
            print_json(&taken.snapshot)?;
        } else {
            outln!("{}", demo.banner());
            outln!(
                "{}",
                render_snapshot(&taken.snapshot, &taken.targets).trim_end()
            );
        }
        for p in taken.problems.iter().chain(&taken.wrong_cluster) {
            errln!("error: {p}");
        }
        return Ok(status_of(&taken));
    }
    let repo = Repo::load(&demo.dir)?;
    let banner = demo.banner();
    console_on(
        cli,
        rt,
        repo,
        crate::ui::StartScreen::Home,
        false,
        None,
        Extras {
            notices: std::iter::once(banner).chain(reopened).collect(),
            exec: demo.exec_setup(),
            faults: Some(std::sync::Arc::new(crate::rehearsal::DemoFaults(
                demo.fault_injector(),
            ))),
            runs_dir: Some(demo.dir.join("runs")),
            own_clusters: true,
            // Without --dir the directory and its journals go with the console: the quit
            // question must not promise a resume from Home.
            runs_discarded: (!dir.keep).then(|| {
                "this demo's directory, its journals with it, is deleted when the console \
                 exits: no run in it can be resumed or shown again (`demo --dir DIR` keeps them)"
                    .to_string()
            }),
        },
    )
}
