//! The console driving the real executors (no terminal): node-health on the sample prod
//! inventory runs the real `ansible-playbook --list-hosts` through the executor task, the
//! output streams into the run view, and the confirm-hosts gate shows the host set
//! ansible printed. Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin):
//! fails, not skips, without it.
use crate::ui_common;

use std::sync::Arc;
use std::time::Duration;

use hk_engine::repo::Repo;
use hk_engine::runbook::machine::{Input, StepState};
use hk_engine::runbook::plan::Gate;
use hk_session::exec::{executor_task, ExecReply};
use hk_session::executors::capabilities_for_repo;
use hk_ui::app::{App, EnvSummary, Overlay};
use hk_ui::RepoPlans;
use tokio::sync::mpsc;
use ui_common::*;

fn sample_repo() -> Repo {
    Repo::load(&hk_test_support::root().join("inventory")).expect("the sample inventory loads")
}

/// Pump requests to the executor task and replies back until `done(app)` or the deadline.
async fn pump(
    app: &mut App,
    req_tx: &mpsc::Sender<hk_session::exec::ExecRequest>,
    rep_rx: &mut mpsc::Receiver<ExecReply>,
    done: impl Fn(&App) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while !done(app) {
        while let Some(r) = app.outbox_mut().pop_front() {
            req_tx.send(r).await.expect("executor task alive");
        }
        match tokio::time::timeout_at(deadline, rep_rx.recv()).await {
            Ok(Some(reply)) => app.handle_exec(reply),
            Ok(None) => panic!("executor task ended"),
            Err(_) => panic!(
                "timed out; status {:?}; output:\n{}",
                app.status(),
                app.active()
                    .map(|a| a.output.window(40).collect::<Vec<_>>().join("\n"))
                    .unwrap_or_default()
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_list_hosts_feeds_the_confirm_hosts_gate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = sample_repo();
    let (caps, _notices) = capabilities_for_repo(&repo, false);
    let mut p = parts(dir.path());
    p.environments = repo.environments.iter().map(EnvSummary::from).collect();
    p.plans = Arc::new(RepoPlans { repo });
    let mut app = App::operate(p, caps);
    app.open_runbook("node-health", Some("prod"), None);
    assert!(app.active().is_some(), "{:?}", app.status());
    app.handle_key(key('s'));

    let (req_tx, req_rx) = mpsc::channel(64);
    let (rep_tx, mut rep_rx) = mpsc::channel(1024);
    let task = tokio::spawn(executor_task(
        Arc::clone(app.capabilities()),
        req_rx,
        rep_tx,
    ));
    pump(&mut app, &req_tx, &mut rep_rx, |a| {
        matches!(a.overlay(), Some(Overlay::Gate(_)))
            || a.active().is_some_and(|r| {
                r.run
                    .step_record(1)
                    .is_some_and(|s| matches!(s.state, StepState::Failed { .. }))
            })
    })
    .await;

    let a = app.active().expect("run");
    let rec = a.run.step_record(1).expect("step 1");
    assert!(
        matches!(rec.state, StepState::AwaitingGate { .. }),
        "list-hosts did not reach its gate: {:?} (is ansible-playbook installed? set HK_ANSIBLE_BIN_DIR)",
        rec.state
    );
    let mut listed = rec.observed_hosts.clone().expect("hosts observed");
    listed.sort();
    assert_eq!(listed, ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]);
    assert!(
        a.output.window(100).any(|l| l.contains("hosts (3)")),
        "ansible's own output streamed into the pane"
    );
    let Some(Overlay::Gate(m)) = &app.overlay() else {
        panic!("gate modal");
    };
    assert!(matches!(m.gate, Gate::ConfirmHosts { .. }));
    let frame = text(&render(&mut app, 120, 40));
    assert!(frame.contains("✓ k3s-prod-2"), "{frame}");

    // Type the count: journaled, and the check-mode step goes to the read-only ansible
    // executor; abort before anything else runs against hosts that do not exist.
    type_str(&mut app, "3");
    app.handle_key(code(crossterm::event::KeyCode::Enter));
    let a = app.active().expect("run");
    assert_eq!(
        a.run.step_record(1).map(|r| r.state.clone()),
        Some(StepState::Done)
    );
    app.outbox_mut().clear();
    app.update(hk_ui::action::Action::Command("q".into()));
    task.abort();
    let runs = hk_engine::journal::list_runs(dir.path()).expect("runs");
    assert!(
        runs.unreadable.is_empty(),
        "the output log is not a journal: {:?}",
        runs.unreadable
    );
    // ansible's output is kept beside the journal, line by line, under its step.
    let kept = hk_engine::journal::read_output(&runs.runs[0].path).expect("output log");
    assert!(
        kept.iter()
            .any(|o| o.n == 1 && o.attempt == 1 && o.line.contains("hosts (3)")),
        "{kept:?}"
    );
    let replay = hk_engine::journal::replay(&runs.runs[0].path).expect("replay");
    assert!(replay.records.iter().any(
        |r| matches!(&r.input, Input::HostSetObserved { n: 1, hosts, .. } if hosts.len() == 3)
    ));
}

/// `hk-console observe` builds its executors with `capabilities_for_repo(.., true)`: only
/// `Executor<ReadOnly>` behind them, and no step that mutates, in any shipped runbook for
/// any environment of the sample, finds an executor.
#[test]
fn observe_capabilities_from_the_repo_cannot_run_a_mutating_step() {
    let repo = sample_repo();
    let (caps, _) = capabilities_for_repo(&repo, true);
    assert!(caps.is_observe() && !caps.can_mutate());
    let plans = RepoPlans { repo };
    let set = hk_engine::runbook::embedded::load(&[]).expect("runbooks");
    let mut mutating = 0;
    for loaded in set.iter() {
        for env in ["dev", "prod"] {
            use hk_ui::PlanSource;
            let host = (loaded.runbook.id == "reprovision-node").then(|| format!("k3s-{env}-2"));
            let Ok(plan) = plans.plan(&loaded.runbook, env, host.as_deref()) else {
                continue;
            };
            for s in plan.steps.iter().filter(|s| s.mutates) {
                mutating += 1;
                assert!(
                    caps.executor_for(s).is_err(),
                    "{} step {}",
                    plan.runbook,
                    s.n
                );
            }
            for s in plan.steps.iter().filter(|s| !s.mutates) {
                if hk_session::executors::KINDS.contains(&s.kind) {
                    let e = caps.executor_for(s).expect("a read-only executor");
                    assert!(!e.mutates());
                }
            }
        }
    }
    assert!(mutating > 10, "{mutating}");
}

/// A host whose `ansible_host` cannot be rendered gets no connection settings and a notice
/// naming the variable: it is never dialled at its inventory name instead.
#[test]
fn an_unrenderable_connection_variable_is_named_never_replaced() {
    let dir = tempfile::tempdir().expect("temp dir");
    let inv = dir.path().join("infra/ansible/inventory");
    std::fs::create_dir_all(&inv).expect("mkdir");
    std::fs::write(
        dir.path().join("hk-console.yaml"),
        "environments:\n  lab: { servers: nodes }\n",
    )
    .expect("config");
    std::fs::write(
        inv.join("hosts.ini"),
        "[nodes]\nn1 ansible_host=\"{{ no_such_var }}\"\nn2 ansible_host=127.0.0.1\n",
    )
    .expect("inventory");
    let repo = Repo::load(dir.path()).expect("repo");
    let (_caps, notices) = capabilities_for_repo(&repo, true);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("host n1") && n.contains("`ansible_host` cannot be rendered")),
        "{notices:?}"
    );
    assert!(
        !notices.iter().any(|n| n.contains("host n2")),
        "{notices:?}"
    );
}

/// Issue 25: the console's journal becomes unwritable (`chattr +i`) while a step runs
/// (its start is journaled before its request leaves). The executor's report of the
/// process it started cannot be journaled: the run halts there, the status line says "the journal cannot be written: …; nothing more runs", the
/// step is sent a Cancel (the executors' stop ladder), nothing new is requested after, and
/// the journal is unchanged. Before, the refused event was only logged and the step went
/// on unjournaled, shown running.
#[test]
fn an_unwritable_journal_halts_the_console_run_and_says_so() {
    use hk_session::exec::ExecRequest;
    // ext4 under target/: tmpfs has no immutable flag.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &[]));
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let journal = app
        .active()
        .and_then(|a| a.journal.as_ref())
        .map(|j| j.path().to_path_buf())
        .expect("the run started");
    let req = app
        .outbox_mut()
        .pop_front()
        .expect("the first step's request");
    let ExecRequest::Execute {
        tag, step, attempt, ..
    } = req
    else {
        panic!("expected an Execute first, got {req:?}");
    };
    let n = step.n;
    struct Immutable(std::path::PathBuf);
    impl Drop for Immutable {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        }
    }
    let st = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&journal)
        .status()
        .expect("run chattr");
    assert!(st.success(), "chattr +i {}", journal.display());
    let _undo = Immutable(journal.clone());
    let before = std::fs::read(&journal).expect("journal");
    app.handle_exec(ExecReply::Outcome {
        tag,
        input: Input::ProcessStarted {
            n,
            attempt,
            pid: std::process::id(),
            start_time: 1,
            program: "ansible-playbook".into(),
            marker: String::new(),
        },
    });
    let status = app.status().map(str::to_string).unwrap_or_default();
    assert!(
        status.contains("the journal cannot be written")
            && status.contains("Operation not permitted")
            && status.contains("nothing more runs"),
        "{status}"
    );
    let sent: Vec<ExecRequest> = app.outbox_mut().drain(..).collect();
    assert!(
        matches!(sent.as_slice(), [ExecRequest::Cancel { step, .. }] if step.n == n),
        "the step is stopped, nothing else is asked: {sent:?}"
    );
    assert!(app.active().is_some_and(|a| a.still_stopping()));
    // The executor stops it; that and whatever comes next journal nothing, ask nothing.
    app.handle_exec(ExecReply::Outcome {
        tag,
        input: Input::Cancelled {
            n,
            attempt,
            reason: "stopped".into(),
        },
    });
    assert!(app.active().is_some_and(|a| !a.still_stopping()));
    app.handle_key(key('s'));
    assert!(app.outbox().is_empty(), "{:?}", app.outbox());
    assert_eq!(std::fs::read(&journal).expect("journal"), before);
    // On screen for good, not only on the status line the next notice replaces.
    let screen = text(&render(&mut app, 160, 40));
    assert!(
        screen.contains("HALTED: the journal cannot be written")
            && screen.contains("nothing more runs"),
        "{screen}"
    );
    assert!(
        app.active()
            .and_then(|a| a.journal_broken())
            .is_some_and(|w| w.contains("nothing more runs")),
        "{:?}",
        app.status()
    );
}
