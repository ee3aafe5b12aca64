//! Observe mode runs read-only runbooks (issue 16) and nothing else, driven headless the
//! way `hk-console observe` drives them: the executors are the read-only set only
//! (`capabilities_with(.., observe = true, ..)`), real ansible-playbook over SSH to the
//! simulated nodes. A runbook whose every planned step only looks runs to completion,
//! journaled in observe mode; one with a mutating step is refused before anything is
//! journaled, naming that step.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin): fails, not skips.

use std::time::Duration;

use hk_console::cluster::KubeOverrides;
use hk_console::repo::Repo;
use hk_console::runbook::machine::{Mode, RunOutcome};
use hk_console::session::exec::{Executors, NoExecutor};
use hk_console::session::executors::{capabilities_with, Clusters};
use hk_console::session::{open_plan, RepoPlans, Session};
use hk_console::sim::demo::{self, Demo};
use hk_console::sim::headless::{drive_observe, HeadlessError, HeadlessRun};

const LONG: Duration = Duration::from_secs(240);

async fn start(scenario: &str) -> (tempfile::TempDir, Demo) {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start(scenario, &dir.path().join("repo"))
        .await
        .unwrap_or_else(|e| panic!("demo {scenario}: {e}"));
    (dir, d)
}

fn req(runbook: &str, env: &str) -> HeadlessRun {
    HeadlessRun {
        runbook: runbook.into(),
        env: Some(env.into()),
        host: None,
        deadline: LONG,
    }
}

fn runbooks() -> hk_console::runbook::embedded::RunbookSet {
    hk_console::runbook::embedded::load(&[]).expect("shipped runbooks")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_runs_node_health_and_vpn_egress_verify_to_completion() {
    let (dir, d) = start("healthy").await;
    let runs = dir.path().join("runs");
    for rb in ["node-health", "vpn-egress-verify"] {
        let mut lines = Vec::new();
        let r = drive_observe(&d, runbooks(), &req(rb, "prod"), &runs, |l| {
            lines.push(l.to_string())
        })
        .await
        .unwrap_or_else(|e| panic!("{rb}: {e}\n{}", lines.join("\n")));
        eprintln!("{}", r.render());
        assert!(r.succeeded, "{rb}: {}", r.render());
        assert!(r.steps.len() >= 3, "{rb}: {}", r.render());
        for s in &r.steps {
            assert_eq!(s.state, "done", "{rb} step {}: {}", s.n, r.render());
        }
        let replay = hk_console::journal::replay(&r.journal).expect("journal replays");
        assert_eq!(replay.run.outcome(), RunOutcome::Succeeded, "{rb}");
        assert_eq!(
            replay.run.mode(),
            Mode::Observe,
            "{rb}: journaled as observe"
        );
        assert!(
            replay.run.plan().steps.iter().all(|s| !s.mutates),
            "{rb}: the planner derived a mutating step"
        );
    }
    let listed = hk_console::journal::list_runs(&runs).expect("runs");
    assert_eq!(listed.runs.len(), 2, "one journal per run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_refuses_a_mutating_runbook_naming_its_first_mutating_step() {
    let (dir, d) = start("healthy").await;
    let runs = dir.path().join("runs");
    // The step the planner itself marks mutating first, for the refusal to name.
    let repo = Repo::load(&d.dir).expect("demo repo");
    let plans = RepoPlans { repo };
    let (plan, _) = open_plan(
        &runbooks(),
        &plans,
        "etcd-io-priority",
        Some("prod"),
        None,
        None,
    )
    .expect("plan");
    let first = plan
        .steps
        .iter()
        .find(|s| s.mutates)
        .expect("etcd-io-priority changes systems");
    assert!(
        plan.steps.iter().any(|s| s.n < first.n),
        "read-only steps come before it (list-hosts): the refusal is not about step 1"
    );
    let err = drive_observe(
        &d,
        runbooks(),
        &req("etcd-io-priority", "prod"),
        &runs,
        |_| {},
    )
    .await
    .expect_err("observe must refuse etcd-io-priority");
    let HeadlessError::Start { runbook, why } = &err else {
        panic!("refused at start, not {err}");
    };
    assert_eq!(runbook, "etcd-io-priority");
    assert_eq!(
        why,
        &format!(
            "observe mode: step {} `{}` ({}) changes systems; runbooks with a mutating step \
             open as plans only",
            first.n,
            first.id,
            first.kind.as_str()
        )
    );
    let journaled = hk_console::journal::list_runs(&runs)
        .map(|l| l.runs.len())
        .unwrap_or(0);
    assert_eq!(journaled, 0, "nothing journaled for a refused run");
}

/// The observe session holds the read-only set and nothing else: every executor in it
/// says it does not mutate, and every mutating step of every shipped runbook finds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observe_sessions_executors_hold_no_mutating_executor() {
    let (_dir, d) = start("healthy").await;
    let repo = Repo::load(&d.dir).expect("demo repo");
    let clusters = std::sync::Arc::new(Clusters::for_repo(&repo, &KubeOverrides::default()));
    let (caps, _) = capabilities_with(&repo, true, clusters, &d.exec_setup());
    let plans = RepoPlans { repo };
    let (mut held, mut mutating) = (0, 0);
    for loaded in runbooks().iter() {
        for env in ["dev", "prod"] {
            let host = (loaded.runbook.id == "reprovision-node").then(|| format!("k3s-{env}-2"));
            let Ok((plan, _)) = open_plan(
                &runbooks(),
                &plans,
                &loaded.runbook.id,
                Some(env),
                None,
                host.as_deref(),
            ) else {
                continue;
            };
            let steps = plan.steps.clone();
            let session = Session::plan(plan, &caps, "t", None).expect("opens");
            let Session::Observe(s) = &session else {
                panic!("observe capabilities gave an operate session");
            };
            let ro = s.executors();
            assert!(!ro.can_mutate());
            held = ro.iter().count();
            for e in ro.iter() {
                assert!(!e.mutates(), "{:?} in the observe session", e.kind());
            }
            for st in steps.iter().filter(|st| st.mutates) {
                mutating += 1;
                assert_eq!(
                    ro.executor_for(st).err(),
                    Some(NoExecutor::ObserveMode {
                        kind: st.kind,
                        n: st.n
                    }),
                    "{} step {}",
                    loaded.runbook.id,
                    st.n
                );
            }
        }
    }
    // list-hosts, ansible, ssh, probe, kube-wait (the demo has kubeconfigs), repo-wait,
    // vpn-wait, etcd-leader (its look only) and etcd-snapshot (a read).
    assert_eq!(held, 9, "read-only executors held");
    assert!(mutating > 10, "{mutating} mutating steps refused");
}
