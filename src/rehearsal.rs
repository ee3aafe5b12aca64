//! The demo's rehearsals, composed: the simulated homelab ([`hk_sim::demo::Demo`]) as the
//! target of the session's headless run driver ([`hk_session::headless`]) with its scripted
//! operator, and the demo's fault injector behind the session's plain fault port. Here, in
//! the composition root, because neither the simulation nor the session may know the other.
//! Must not: hand the scripted operator (it says yes to every gate) any target but a demo.

use std::path::Path;

use hk_engine::runbook::embedded::RunbookSet;
use hk_session::fault::{FaultRefused, FaultSink};
pub use hk_session::headless::{HeadlessError, HeadlessRun, Report, StepLine, OPERATOR};
use hk_session::headless::{How, Scripted, Target};
use hk_sim::demo::{Demo, FaultInjector};

/// The demo as a headless run's target: its repo, its executors' setup.
pub fn target(demo: &Demo) -> Target {
    Target {
        repo: demo.dir.clone(),
        setup: demo.exec_setup(),
    }
}

/// Drive `req` on `demo` with the scripted operator, journaling under `runs_dir`; a
/// mutating run takes the demo cluster's run lock, as the console does.
pub async fn drive(
    demo: &Demo,
    runbooks: RunbookSet,
    req: &HeadlessRun,
    runs_dir: &Path,
    progress: impl FnMut(&str),
) -> Result<Report, HeadlessError> {
    drive_with(demo, runbooks, req, runs_dir, How::default(), progress).await
}

/// [`drive`] as `hk-console observe` would: read-only executors only, a runbook with a
/// mutating step refused at start.
pub async fn drive_observe(
    demo: &Demo,
    runbooks: RunbookSet,
    req: &HeadlessRun,
    runs_dir: &Path,
    progress: impl FnMut(&str),
) -> Result<Report, HeadlessError> {
    let how = How {
        observe: true,
        no_cluster_lock: false,
    };
    drive_with(demo, runbooks, req, runs_dir, how, progress).await
}

/// [`drive`], with `no_cluster_lock` (`--no-cluster-lock`: the run takes no lock, and its
/// journal says so).
pub async fn drive_with_lock(
    demo: &Demo,
    runbooks: RunbookSet,
    req: &HeadlessRun,
    runs_dir: &Path,
    no_cluster_lock: bool,
    progress: impl FnMut(&str),
) -> Result<Report, HeadlessError> {
    let how = How {
        observe: false,
        no_cluster_lock,
    };
    drive_with(demo, runbooks, req, runs_dir, how, progress).await
}

async fn drive_with(
    demo: &Demo,
    runbooks: RunbookSet,
    req: &HeadlessRun,
    runs_dir: &Path,
    how: How,
    progress: impl FnMut(&str),
) -> Result<Report, HeadlessError> {
    let mut operator = Scripted::default();
    hk_session::headless::drive(
        &target(demo),
        runbooks,
        req,
        runs_dir,
        how,
        &mut operator,
        progress,
    )
    .await
}

/// The demo's fault injector behind the session's fault port: the console's `:fault` reaches
/// the simulation through it, each refusal in the simulation's own words.
#[derive(Debug, Clone)]
pub struct DemoFaults(pub FaultInjector);

impl FaultSink for DemoFaults {
    fn inject(&self, target: &str, words: &str) -> Result<String, FaultRefused> {
        self.0
            .inject(target, words)
            .map_err(|e| FaultRefused(e.to_string()))
    }

    fn usage(&self) -> String {
        self.0.usage()
    }

    fn fault_names(&self) -> Vec<String> {
        self.0.fault_names()
    }
}
