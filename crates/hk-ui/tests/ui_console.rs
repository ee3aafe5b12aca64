//! The console without a terminal: whole screens as insta snapshots on a fixed-size
//! TestBackend, and the behaviour behind them (journaled gate answers, no executor means
//! not started, observe mode by construction, themes, the command line, tiny terminals).
use crate::ui_common;

use crossterm::event::KeyCode;
use hk_engine::journal;
use hk_engine::runbook::machine::{GateAnswer, Input, Mode, RunStatus, StepState, Timestamp};
use hk_engine::runbook::plan::StepKind;
use hk_session::exec::{Capabilities, ExecRequest, ReadOnlyExecutors};
use hk_ui::app::{App, Control, Overlay, Screen};
use hk_ui::panes::banner;
use hk_ui::{build_app, StartScreen};
use ui_common::*;

fn operate_app(dir: &std::path::Path, ro: &[StepKind], muts: &[StepKind]) -> App {
    App::operate(parts(dir), operate_caps(ro, muts))
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The journal of the one run in `dir`, as (input name, input) pairs.
fn journaled(dir: &std::path::Path) -> Vec<Input> {
    let runs = journal::list_runs(dir).expect("list runs");
    let run = runs.runs.first().expect("one run journaled");
    let r = journal::replay(&run.path).expect("replay");
    r.records.into_iter().map(|rec| rec.input).collect()
}

// ---------------------------------------------------------------------------------------
// Home

fn seed_runs(dir: &std::path::Path) {
    // An interrupted run (older): its first step was in flight when the process stopped.
    let plan = FakePlans
        .plan_for("node-health", "prod")
        .expect("node-health plans");
    let (mut j, mut run) = journal::Journal::begin(
        dir,
        plan,
        Mode::Operate,
        "alice",
        Timestamp(T0.0 - 3_600_000),
    )
    .expect("begin");
    j.record(
        &mut run,
        hk_engine::runbook::machine::Event::new(Timestamp(T0.0 - 3_599_000), Input::Start),
    )
    .expect("start");
    // A finished run (newer): cold-bringup prod aborted at its first gate.
    let plan = FakePlans
        .plan_for("cold-bringup", "prod")
        .expect("cold-bringup plans");
    let (mut j, mut run) =
        journal::Journal::begin(dir, plan, Mode::Operate, "bob", Timestamp(T0.0 - 60_000))
            .expect("begin");
    for input in [
        Input::Start,
        Input::Abort {
            by: "bob".into(),
            reason: "wrong day".into(),
        },
    ] {
        j.record(
            &mut run,
            hk_engine::runbook::machine::Event::new(Timestamp(T0.0 - 59_000), input),
        )
        .expect("record");
    }
}

trait PlanFor {
    fn plan_for(&self, id: &str, env: &str) -> Result<hk_engine::runbook::plan::Plan, String>;
}

impl PlanFor for FakePlans {
    fn plan_for(&self, id: &str, env: &str) -> Result<hk_engine::runbook::plan::Plan, String> {
        use hk_ui::app::PlanSource;
        let set = hk_engine::runbook::embedded::load(&[]).map_err(|_| "runbooks".to_string())?;
        let rb = set.get(id).ok_or("no runbook")?;
        self.plan(rb, env, None).map_err(|e| e.to_string())
    }
}

#[test]
fn home_lists_envs_runbooks_and_runs_with_the_interrupted_one_first() {
    let dir = tmp();
    seed_runs(dir.path());
    let mut app = operate_app(dir.path(), &[], &[]);
    let frame = text(&render(&mut app, 120, 34));
    insta::assert_snapshot!("home", frame);
    assert_eq!(app.runs().len(), 2);
    assert_eq!(
        app.runs()[0].outcome,
        hk_engine::runbook::machine::RunOutcome::Interrupted,
        "the interrupted run comes first although it is older"
    );
    assert!(frame.contains("▶ resume"));
    assert!(frame.contains("mutating") && frame.contains("read-only"));
    assert!(frame.contains("192.168.2.9"));
}

#[test]
fn resuming_the_interrupted_run_journals_it_and_shows_the_step_interrupted() {
    let dir = tmp();
    seed_runs(dir.path());
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.update(hk_ui::action::Action::FocusNext); // runbooks -> runs
    app.update(hk_ui::action::Action::Open);
    assert_eq!(app.screen(), Screen::Run);
    let a = app.active().expect("resumed run");
    assert!(a.journal.is_some(), "a resumed run is open for changes");
    let (_, rec) = a.run.steps().next().expect("step 1");
    assert!(
        matches!(rec.state, StepState::Interrupted { .. }),
        "{:?}",
        rec.state
    );
    // Retry: journaled, and the step's work goes out again.
    app.update(hk_ui::action::Action::Retry);
    assert!(matches!(
        app.outbox().front(),
        Some(ExecRequest::Execute { attempt: 2, .. })
    ));
}

// ---------------------------------------------------------------------------------------
// Run view and gates

/// etcd-io-priority on prod with read-only executors for list-hosts, ansible and ssh, and
/// both for etcd-leader (its look and its move).
fn etcd_app(dir: &std::path::Path) -> App {
    let mut app = operate_app(
        dir,
        &[
            StepKind::ListHosts,
            StepKind::Ansible,
            StepKind::Ssh,
            StepKind::EtcdLeader,
            StepKind::EtcdSnapshot,
        ],
        &[StepKind::EtcdLeader],
    );
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    app
}

#[test]
fn run_view_through_every_state_of_a_prod_run() {
    let dir = tmp();
    let mut app = etcd_app(dir.path());
    insta::assert_snapshot!("run_not_started", text(&render(&mut app, 120, 36)));

    app.handle_key(key('s'));
    play_one(
        &mut app,
        &[
            "playbook: playbooks/etcd-io-priority.yml",
            "  play #1 (k3s_prod): etcd I/O priority\tTAGS: []",
            "    pattern: ['k3s_prod']",
            "    hosts (1):",
            "      k3s-prod-3",
        ],
    );
    play_one(&mut app, &[]); // verify: the host set matches
    let frame = text(&render(&mut app, 120, 36));
    insta::assert_snapshot!("gate_confirm_hosts", frame);
    assert!(frame.contains("k3s-prod-3"));

    // A wrong count keeps the gate closed and says why.
    type_str(&mut app, "3");
    app.handle_key(code(KeyCode::Enter));
    assert!(
        matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.error.as_deref().is_some_and(|e| e.contains("count them again")))
    );
    app.handle_key(code(KeyCode::Backspace));
    type_str(&mut app, "1");
    app.handle_key(code(KeyCode::Enter));
    assert!(app.overlay().is_none(), "the gate opened");

    // Step 2: etcd's snapshot; steps 3-5: etcd's leader looked at, the move approved and
    // run (issue 39).
    while play_one(&mut app, &[]).is_some() {}
    assert!(
        matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.n == 4),
        "the move's approval"
    );
    assert!(answer_gate(&mut app));
    play_one(&mut app, &[]).expect("the move");
    play_one(&mut app, &[]).expect("its verdict");

    // Step 6: the check run, caught while running.
    let Some(ExecRequest::Execute {
        step, attempt, tag, ..
    }) = app.outbox_mut().pop_front()
    else {
        panic!("step 6 should have gone to its executor");
    };
    assert_eq!(step.n, 6);
    app.set_now(Timestamp(T0.0 + 1_000));
    for l in [
        "TASK [etcd-io-priority : Set the BFQ scheduler] ****",
        "--- before: /sys/block/sda/queue/scheduler",
        "+++ after: /sys/block/sda/queue/scheduler",
        "-[mq-deadline] bfq none",
        "+mq-deadline [bfq] none",
        "changed: [k3s-prod-3]",
    ] {
        app.handle_exec(hk_session::exec::ExecReply::Output {
            tag,
            n: 6,
            attempt,
            line: l.into(),
        });
    }
    app.set_now(Timestamp(T0.0 + 13_000));
    let frame = text(&render(&mut app, 120, 36));
    insta::assert_snapshot!("run_running", frame);
    // The README's text capture of the run view is this frame; keep them the same.
    let capture: String = frame
        .lines()
        .map(|l| l.trim_start_matches('"').trim_end_matches('"').to_string() + "\n")
        .collect();
    let asset = std::fs::read_to_string(hk_test_support::root().join("assets/run-view.txt"))
        .expect("assets/run-view.txt");
    assert_eq!(
        capture, asset,
        "assets/run-view.txt is stale: regenerate it from this frame"
    );
    assert!(frame.contains("node 1 of 3: k3s-prod-3"), "{frame}");
    // Elapsed since its start was journaled, as the work was handed out (T0).
    assert!(frame.contains("elapsed 13s"), "{frame}");
    assert!(frame.contains("next: 7"), "{frame}");

    app.handle_exec(hk_session::exec::ExecReply::Outcome {
        tag,
        input: Input::StepFinished {
            n: 6,
            attempt,
            exit_code: Some(0),
            error: None,
        },
    });
    while play_one(&mut app, &[]).is_some() {}
    let frame = text(&render(&mut app, 120, 36));
    insta::assert_snapshot!("gate_approve_diff", frame);
    assert!(frame.contains("+mq-deadline [bfq] none"));

    // Approve with a note: step 8 mutates and there is no mutating ansible executor.
    type_str(&mut app, "diff as expected");
    app.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut app, 120, 36));
    insta::assert_snapshot!("run_failed_no_executor", frame);
    assert!(frame.contains("no executor for ansible yet"), "{frame}");
    let a = app.active().expect("run");
    assert_eq!(a.run.status(), &RunStatus::Halted { n: 8 });
    assert!(
        !app.outbox()
            .iter()
            .any(|r| matches!(r, ExecRequest::Execute { step, .. } if step.n == 8)),
        "a step with no executor is never handed out"
    );

    // Abort asks a reason; the reason is journaled.
    app.handle_key(key('A'));
    insta::assert_snapshot!("abort_reason", text(&render(&mut app, 120, 36)));
    app.handle_key(code(KeyCode::Enter));
    assert!(
        matches!(&app.overlay(), Some(Overlay::Reason { error: Some(_), .. })),
        "empty reason refused"
    );
    type_str(&mut app, "disk decision pending");
    app.handle_key(code(KeyCode::Enter));

    let inputs = journaled(dir.path());
    assert!(inputs.contains(&Input::TypedText {
        n: 1,
        by: "alice".into(),
        text: "1".into(),
        note: None
    }));
    assert!(inputs.contains(&Input::GateAnswered {
        n: 7,
        answer: GateAnswer::Approved {
            by: "alice".into(),
            note: Some("diff as expected".into())
        }
    }));
    assert!(inputs.iter().any(|i| matches!(i, Input::StepFinished { n: 8, error: Some(e), .. } if e.contains("not started"))));
    assert!(inputs.contains(&Input::Abort {
        by: "alice".into(),
        reason: "disk decision pending".into()
    }));
}

#[test]
fn typed_confirm_needs_the_environment_name() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[], &[]);
    app.open_runbook("cold-bringup", Some("prod"), None);
    app.handle_key(key('s'));
    insta::assert_snapshot!("gate_typed_confirm", text(&render(&mut app, 100, 30)));
    type_str(&mut app, "dev");
    app.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut app, 100, 30));
    assert!(frame.contains("not the confirmation phrase"), "{frame}");
    for _ in 0..3 {
        app.handle_key(code(KeyCode::Backspace));
    }
    type_str(&mut app, "prod");
    app.handle_key(code(KeyCode::Enter));
    // The gate opened; the next step (list-hosts) has no executor: it is not started.
    let a = app.active().expect("run");
    let states: Vec<&StepState> = a.run.steps().map(|(_, r)| &r.state).collect();
    assert_eq!(states[0], &StepState::Done);
    assert!(
        matches!(states[1], StepState::Failed { reason } if reason.contains("no executor for list-hosts yet"))
    );
    let inputs = journaled(dir.path());
    assert!(
        inputs.contains(&Input::TypedText {
            n: 1,
            by: "alice".into(),
            text: "dev".into(),
            note: None
        }),
        "a wrong answer is journaled too"
    );
}

#[test]
fn operator_present_records_who_and_when() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::Probe, StepKind::KubeWait], &[]);
    app.open_runbook("cilium-endpoint-rollout", Some("dev"), None);
    app.handle_key(key('s'));
    while play_one(&mut app, &["ok"]).is_some() {}
    let frame = text(&render(&mut app, 100, 30));
    insta::assert_snapshot!("gate_operator_present", frame);
    assert!(frame.contains("alice") && frame.contains("2026-09-07T10:15:00.000Z"));
    type_str(&mut app, "at the desk");
    app.handle_key(code(KeyCode::Enter));
    let a = app.active().expect("run");
    let rec = a.run.step_record(3).expect("step 3");
    let g = rec.gate.as_ref().expect("gate record");
    assert_eq!((g.by.as_str(), g.at), ("alice", T0));
    assert_eq!(g.note.as_deref(), Some("at the desk"));
}

#[test]
fn authorise_and_confirm_done_and_reject() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[], &[]);
    app.open_runbook("memattr-survey", Some("prod"), None);
    app.handle_key(key('s'));
    assert!(answer_gate(&mut app), "typed-confirm first");
    insta::assert_snapshot!("gate_authorise", text(&render(&mut app, 100, 30)));
    // Reject with a reason: the step fails with it, journaled.
    type_str(&mut app, "not today");
    app.handle_key(ctrl('r'));
    let a = app.active().expect("run");
    assert!(
        matches!(&a.run.step_record(2).expect("2").state, StepState::Failed { reason } if reason.contains("not today"))
    );

    let dir2 = tmp();
    let mut app = operate_app(dir2.path(), &[], &[]);
    app.open_runbook("reprovision-node", Some("dev"), Some("k3s-dev-2"));
    app.handle_key(key('s'));
    insta::assert_snapshot!("gate_confirm_done", text(&render(&mut app, 100, 30)));
    assert!(matches!(&app.overlay(), Some(Overlay::Gate(_))));
}

#[test]
fn help_is_generated_from_the_keymap() {
    let dir = tmp();
    let mut app = etcd_app(dir.path());
    app.handle_key(key('?'));
    let frame = text(&render(&mut app, 100, 34));
    insta::assert_snapshot!("help_run", frame);
    let rows = app
        .keymaps()
        .get(hk_ui::keymap::KeyMode::Run)
        .expect("run keymap")
        .help_rows();
    for (keys, what) in rows {
        assert!(frame.contains(what), "help misses `{what}`");
        assert!(frame.contains(&keys), "help misses keys `{keys}`");
    }
    app.handle_key(code(KeyCode::Esc));
    assert!(app.overlay().is_none());
}

#[test]
fn ctrl_c_asks_before_cancelling_the_running_step_and_journals_it() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let Some(ExecRequest::Execute { .. }) = app.outbox_mut().pop_front() else {
        panic!("step 1 out");
    };
    app.handle_key(ctrl('c'));
    let frame = text(&render(&mut app, 100, 30));
    assert!(frame.contains("Cancel the running step 1"), "{frame}");
    app.handle_key(key('n'));
    assert!(app.outbox().is_empty(), "no means no");
    app.handle_key(ctrl('c'));
    app.handle_key(key('y'));
    assert!(matches!(
        app.outbox().front(),
        Some(ExecRequest::Cancel { .. })
    ));
    play_one(&mut app, &[]);
    let inputs = journaled(dir.path());
    assert!(inputs
        .iter()
        .any(|i| matches!(i, Input::CancelRequested { n: 1, by } if by == "alice")));
    assert!(inputs
        .iter()
        .any(|i| matches!(i, Input::Cancelled { n: 1, .. })));
    // q while the run is halted asks first.
    assert_eq!(app.handle_key(key('q')), Control::Continue);
    assert!(matches!(app.overlay(), Some(Overlay::Confirm(_))));
    assert_eq!(app.handle_key(key('y')), Control::Quit);
}

/// Issue 38: the step ends while "Cancel the running step 1?" is on the screen; `y` then
/// says there is nothing to cancel, sends no cancel, and journals none.
#[test]
fn a_cancel_that_reaches_no_running_step_is_said_and_not_journaled() {
    use hk_session::exec::ExecReply;
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let Some(ExecRequest::Execute { tag, attempt, .. }) = app.outbox_mut().pop_front() else {
        panic!("step 1 out");
    };
    app.handle_key(ctrl('c'));
    assert!(text(&render(&mut app, 100, 30)).contains("Cancel the running step 1"));
    // Meanwhile its executor finishes it: it goes on to its verification.
    app.handle_exec(ExecReply::Outcome {
        tag,
        input: Input::StepFinished {
            n: 1,
            attempt,
            exit_code: Some(0),
            error: None,
        },
    });
    app.outbox_mut().clear();
    app.handle_key(key('y'));
    let status = app.status().map(str::to_string).unwrap_or_default();
    assert!(status.contains("nothing is running to cancel"), "{status}");
    assert!(
        !app.outbox()
            .iter()
            .any(|r| matches!(r, ExecRequest::Cancel { .. })),
        "{:?}",
        app.outbox()
    );
    assert!(
        !journaled(dir.path())
            .iter()
            .any(|i| matches!(i, Input::CancelRequested { .. })),
        "a cancel that reached nothing was journaled"
    );
}

// ---------------------------------------------------------------------------------------
// Observe mode

#[test]
fn observe_banner_is_on_every_frame() {
    let dir = tmp();
    let mut app = App::observe(parts(dir.path()), ReadOnlyExecutors::default());
    let frame = text(&render(&mut app, 100, 30));
    insta::assert_snapshot!("observe_home", frame);
    assert!(frame.contains(banner::TEXT));
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    assert!(text(&render(&mut app, 100, 30)).contains(banner::TEXT));
    app.handle_key(key('?'));
    assert!(text(&render(&mut app, 100, 30)).contains(banner::TEXT));
    assert!(text(&render(&mut app, 60, 15)).contains("OBSERVE MODE"));
}

/// The observe app is built from read-only executors only (the Observe capabilities have
/// no slot for a mutating one, and a mutating executor cannot pass as read-only), every
/// runbook opens as a read-only plan, and starting is refused for every shipped runbook
/// with a mutating step in every environment: no request leaves the app, no gate is asked,
/// nothing is journaled. (A runbook whose every step only looks does start in observe
/// mode since issue 16: tests/observe_headless.rs runs them.)
#[test]
fn observe_app_cannot_reach_a_mutating_executor() {
    let dir = tmp();
    let mut app = App::observe(parts(dir.path()), read_only_recorders(&ALL_KINDS));
    assert!(!app.capabilities().can_mutate());
    assert!(matches!(
        app.capabilities().as_ref(),
        Capabilities::Observe { .. }
    ));
    let mut ro = ReadOnlyExecutors::default();
    let sneaky = std::sync::Arc::new(Recorder {
        kind: StepKind::Ansible,
        mutates: true,
        seen: Default::default(),
    });
    assert!(
        ro.add(sneaky).is_err(),
        "a mutating executor is refused as read-only"
    );

    let ids: Vec<String> = app.runbooks().iter().map(|r| r.id.clone()).collect();
    let mut opened = 0;
    let mut mutating_steps = 0;
    let mut read_only_plans = 0;
    for id in ids {
        for env in ["dev", "prod"] {
            let host = (id == "reprovision-node").then(|| format!("k3s-{env}-2"));
            app.close_run();
            app.open_runbook(&id, Some(env), host.as_deref());
            let Some(a) = app.active() else {
                continue;
            };
            opened += 1;
            assert_eq!(a.run.mode(), Mode::Observe, "{id}/{env}");
            mutating_steps += a.run.plan().steps.iter().filter(|s| s.mutates).count();
            if !a.run.plan().steps.iter().any(|s| s.mutates) {
                read_only_plans += 1;
                continue;
            }
            for s in &a.run.plan().steps {
                if s.mutates {
                    assert!(
                        app.capabilities().executor_for(s).is_err(),
                        "{id}/{env}: step {} would find a mutating executor",
                        s.n
                    );
                }
            }
            app.handle_key(key('s'));
            assert!(
                app.status().is_some_and(|s| s.contains("plans only")),
                "{id}/{env}: {:?}",
                app.status()
            );
            app.handle_key(key('r'));
            app.handle_key(code(KeyCode::Enter));
            assert!(
                app.outbox().is_empty(),
                "{id}/{env}: a request left the app"
            );
            assert!(app.overlay().is_none(), "{id}/{env}: a gate was asked");
            let a = app.active().expect("run");
            assert_eq!(a.run.status(), &RunStatus::NotStarted, "{id}/{env}");
            assert!(a.journal.is_none());
        }
    }
    assert!(opened >= 12, "opened {opened} plans");
    assert!(
        opened - read_only_plans >= 8,
        "{} plans with a mutating step refused",
        opened - read_only_plans
    );
    assert!(
        mutating_steps > 10,
        "the shipped runbooks hold mutating steps to refuse"
    );
    assert!(
        journal::list_runs(dir.path())
            .expect("list")
            .runs
            .is_empty(),
        "observe mode journals nothing"
    );
}

/// Issue 16: in observe mode a runbook whose every planned step only looks starts, is
/// journaled as an observe run, and its requests carry read-only steps only.
#[test]
fn observe_app_starts_a_runbook_whose_every_step_only_looks() {
    let dir = tmp();
    let mut app = App::observe(parts(dir.path()), read_only_recorders(&ALL_KINDS));
    app.open_runbook("vpn-egress-verify", Some("prod"), None);
    let a = app.active().expect("plan");
    assert!(a.run.plan().steps.iter().all(|s| !s.mutates));
    app.handle_key(key('s'));
    let a = app.active().expect("run");
    assert!(a.journal.is_some(), "{:?}", app.status());
    assert_eq!(a.run.mode(), Mode::Observe);
    assert!(!matches!(a.run.status(), RunStatus::NotStarted));
    assert!(!app.outbox().is_empty(), "the first step was handed out");
    for req in app.outbox() {
        if let ExecRequest::Execute { step, .. } = req {
            assert!(!step.mutates, "step {} mutates", step.n);
        }
    }
    let runs = journal::list_runs(dir.path()).expect("list").runs;
    assert_eq!(runs.len(), 1);
}

#[test]
fn switching_to_observe_drops_the_mutating_executors() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::Ssh], &[StepKind::Ansible]);
    assert!(app.capabilities().can_mutate());
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    app.update(hk_ui::action::Action::Command("observe".into()));
    assert!(app.is_observe());
    assert!(!app.capabilities().can_mutate());
    let a = app.active().expect("plan reopened");
    assert_eq!(a.run.mode(), Mode::Observe);
}

#[test]
fn build_app_opens_the_start_screen() {
    let dir = tmp();
    let app = build_app(
        parts(dir.path()),
        Capabilities::Observe {
            read_only: ReadOnlyExecutors::default(),
        },
        &StartScreen::Run {
            runbook: "node-health".into(),
            env: "prod".into(),
            host: None,
        },
    );
    assert!(app.is_observe());
    assert_eq!(app.screen(), Screen::Run);
}

// ---------------------------------------------------------------------------------------
// Small terminals, themes, command line

#[test]
fn tiny_terminals_degrade_without_panicking() {
    let dir = tmp();
    let mut app = etcd_app(dir.path());
    app.handle_key(key('s'));
    play_one(&mut app, &["line"; 50]);
    play_one(&mut app, &[]);
    let frame = text(&render(&mut app, 60, 15));
    insta::assert_snapshot!("tiny_run_gate", frame);
    assert!(frame.contains("Gate"));
    for (w, h) in [
        (1, 1),
        (5, 3),
        (20, 5),
        (40, 10),
        (60, 15),
        (80, 12),
        (250, 70),
    ] {
        render(&mut app, w, h);
        app.handle_key(code(KeyCode::Esc));
        render(&mut app, w, h);
        app.handle_key(key('?'));
        render(&mut app, w, h);
        app.handle_key(code(KeyCode::Esc));
        app.update(hk_ui::action::Action::Back);
        render(&mut app, w, h);
        app.set_screen(Screen::Run);
    }
}

#[test]
fn command_line_runs_switches_env_and_theme_and_completes() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[], &[]);
    app.handle_key(key(':'));
    type_str(&mut app, "th");
    app.handle_key(code(KeyCode::Tab));
    type_str(&mut app, "hi");
    app.handle_key(code(KeyCode::Tab));
    let frame = text(&render(&mut app, 100, 30));
    assert!(frame.contains("theme high-contrast"), "{frame}");
    app.handle_key(code(KeyCode::Enter));
    assert_eq!(app.theme().name, "high-contrast");
    assert!(app.theme_warnings().is_empty());

    app.handle_key(key(':'));
    type_str(&mut app, "env nowhere");
    app.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut app, 100, 30));
    assert!(frame.contains("no environment `nowhere`"), "{frame}");
    app.handle_key(code(KeyCode::Esc));

    app.update(hk_ui::action::Action::Command("env prod".into()));
    assert_eq!(app.current_env(), Some("prod"));
    app.update(hk_ui::action::Action::Command(
        "run etcd-io-priority".into(),
    ));
    assert_eq!(app.screen(), Screen::Run);
    assert_eq!(
        app.active().map(|a| a.run.plan().env.as_str()),
        Some("prod")
    );
    assert_eq!(
        app.update(hk_ui::action::Action::Command("q".into())),
        Control::Quit,
        "nothing started: quit does not ask"
    );
}

#[test]
fn every_builtin_theme_loads_cleanly() {
    let set = hk_ui::theme::ThemeSet::builtin();
    let names: Vec<&str> = set.names().collect();
    assert_eq!(names, vec!["default", "high-contrast", "light"]);
    for n in names {
        let (t, w) = set.load(n, false);
        assert_eq!(t.name, n);
        assert!(w.is_empty(), "{n}: {w:?}");
    }
    // The default file says what the code falls back to.
    let (t, _) = set.load("default", false);
    assert_eq!(t.palette, hk_ui::theme::fallback_palette());
}

#[test]
fn bad_user_theme_warns_with_file_and_key_and_falls_back() {
    let dir = tmp();
    std::fs::write(
        dir.path().join("mine.yaml"),
        "ok: \"#00ff00\"\nwarn: not-a-colour\nshiny: red\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("light.yaml"), "ok: blue\n").expect("write");
    let set = hk_ui::theme::ThemeSet::with_user_dir(Some(dir.path()));
    let (t, w) = set.load("mine", false);
    let shown: Vec<String> = w.iter().map(|w| w.to_string()).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown[0].ends_with("mine.yaml:2:7: key `warn`: `not-a-colour` is not a colour (use #rrggbb or a name such as red, light-blue, dark-gray, reset); using the default colour"), "{}", shown[0]);
    assert!(
        shown[1].contains("mine.yaml:3:1: key `shiny`: unknown slot"),
        "{}",
        shown[1]
    );
    assert_eq!(t.palette.ok, ratatui::style::Color::Rgb(0, 255, 0));
    assert_eq!(t.palette.warn, hk_ui::theme::fallback_palette().warn);
    // A user file overrides the built-in of the same name.
    let (t, _) = set.load("light", false);
    assert_eq!(t.palette.ok, ratatui::style::Color::Blue);
    // The warning reaches the screen.
    let dirr = tmp();
    let mut p = parts(dirr.path());
    p.themes = set;
    p.theme = Some("mine".into());
    let mut app = App::operate(
        p,
        Capabilities::Operate {
            read_only: Default::default(),
            mutating: Default::default(),
        },
    );
    let frame = text(&render(&mut app, 140, 30));
    assert!(frame.contains("mine.yaml:2:7: key `warn`"), "{frame}");
    // Not YAML at all: one warning, the whole default.
    let (_, w) = hk_ui::theme::parse_theme("x.yaml", "a: [", hk_ui::theme::fallback_palette());
    assert_eq!(w.len(), 1);
    assert!(w[0].to_string().starts_with("x.yaml:"));
}

#[test]
fn no_color_draws_without_colours() {
    let dir = tmp();
    let mut p = parts(dir.path());
    p.no_color = true;
    let mut app = App::operate(p, operate_caps(&[], &[]));
    let b = render(&mut app, 100, 30);
    for cell in b.buffer().content() {
        assert_eq!(cell.fg, ratatui::style::Color::Reset, "{cell:?}");
        assert_eq!(cell.bg, ratatui::style::Color::Reset, "{cell:?}");
    }
}

#[test]
fn slash_filters_the_home_lists_and_searches_the_output() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.update(hk_ui::action::Action::Command("env prod".into()));
    app.handle_key(key('/'));
    type_str(&mut app, "ETCD");
    app.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut app, 120, 34));
    assert!(frame.contains("/ETCD  (1 of 9)"), "{frame}");
    assert!(!frame.contains("node-health"), "{frame}");
    // Enter opens the one runbook the filter left, not the first of the full list.
    app.handle_key(code(KeyCode::Enter));
    assert_eq!(
        app.active().map(|a| a.run.plan().runbook.as_str()),
        Some("etcd-io-priority")
    );
    // The Home filter stays with Home: the run view opens unfiltered (it once hid the
    // apply's output); a filter typed here searches the output.
    assert!(app.filter().is_none());
    app.handle_key(key('s'));
    let lines: Vec<String> = (0..500).map(|i| format!("line {i}")).collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    play_one(&mut app, &refs);
    app.handle_key(key('/'));
    type_str(&mut app, "line 49");
    app.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut app, 120, 40));
    assert!(frame.contains("/line 49: 11 matching"), "{frame}");
    assert!(
        frame.contains("line 499") && !frame.contains("line 300"),
        "{frame}"
    );
}

/// Issue 38: `/` filters as it is typed (k9s does; it once waited for Enter), and Esc in
/// the prompt clears the filter.
#[test]
fn slash_filters_as_it_is_typed_and_esc_clears() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.update(hk_ui::action::Action::Command("env prod".into()));
    app.handle_key(key('/'));
    type_str(&mut app, "ETC");
    assert_eq!(app.filter(), Some("ETC"));
    let frame = text(&render(&mut app, 120, 34));
    assert!(frame.contains("(1 of 9)"), "{frame}");
    assert!(!frame.contains("node-health"), "{frame}");
    app.handle_key(code(KeyCode::Backspace));
    app.handle_key(code(KeyCode::Backspace));
    app.handle_key(code(KeyCode::Backspace));
    assert_eq!(app.filter(), None, "an emptied prompt filters nothing");
    type_str(&mut app, "vpn");
    assert_eq!(app.filter(), Some("vpn"));
    app.handle_key(code(KeyCode::Esc));
    assert!(app.overlay().is_none());
    assert_eq!(app.filter(), None, "Esc clears the filter");
    let frame = text(&render(&mut app, 120, 34));
    assert!(frame.contains("node-health"), "{frame}");
}

#[test]
fn replies_for_another_run_are_dropped() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let Some(ExecRequest::Execute { tag, attempt, .. }) = app.outbox_mut().pop_front() else {
        panic!("step 1 out");
    };
    let stale = tag + 1_000;
    app.handle_exec(hk_session::exec::ExecReply::Output {
        tag: stale,
        n: 1,
        attempt,
        line: "from a run that is gone".into(),
    });
    app.handle_exec(hk_session::exec::ExecReply::Outcome {
        tag: stale,
        input: Input::StepFinished {
            n: 1,
            attempt,
            exit_code: Some(0),
            error: None,
        },
    });
    let a = app.active().expect("run");
    assert_eq!(
        a.output.window(10).filter(|l| l.contains("gone")).count(),
        0
    );
    // Still running: the stale finish moved nothing (its start is journaled, as the
    // session records every start before the work leaves).
    assert!(matches!(
        a.run.step_record(1).expect("1").state,
        StepState::Running { started: true, .. }
    ));
}

#[test]
fn tab_moves_the_arrows_from_the_steps_to_the_output() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('j'));
    assert_eq!(app.active().map(|a| a.selected), Some(1));
    app.handle_key(key('s'));
    let lines: Vec<String> = (0..100).map(|i| format!("out {i}")).collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    play_one(&mut app, &refs);
    play_one(&mut app, &[]); // verification: the confirm-hosts gate opens
    assert!(matches!(app.overlay(), Some(Overlay::Gate(_))));
    let selected = app.active().map(|a| a.selected);
    assert_eq!(
        selected,
        Some(0),
        "the selection followed the run to its gate"
    );
    app.handle_key(code(KeyCode::Esc)); // hide the confirm-hosts gate
    app.handle_key(code(KeyCode::Tab));
    app.handle_key(key('k'));
    app.handle_key(key('k'));
    let a = app.active().expect("run");
    assert_eq!(
        Some(a.selected),
        selected,
        "the step selection did not move"
    );
    assert!(!a.output.follow);
    assert_eq!(a.output.below(), 2);
    app.handle_key(key('G'));
    assert!(app.active().expect("run").output.follow);
}

#[test]
fn observe_mode_opens_an_interrupted_run_to_look_at_and_writes_nothing() {
    let dir = tmp();
    seed_runs(dir.path());
    let before: Vec<String> = journal::list_runs(dir.path())
        .expect("list")
        .runs
        .iter()
        .map(|r| std::fs::read_to_string(&r.path).expect("journal"))
        .collect();
    let mut app = App::observe(parts(dir.path()), ReadOnlyExecutors::default());
    app.update(hk_ui::action::Action::FocusNext); // runbooks -> runs
    app.update(hk_ui::action::Action::Open);
    let a = app.active().expect("opened");
    assert!(a.view_only && a.journal.is_none());
    app.handle_key(key('r'));
    app.handle_key(key('A'));
    assert!(app.outbox().is_empty());
    let after: Vec<String> = journal::list_runs(dir.path())
        .expect("list")
        .runs
        .iter()
        .map(|r| std::fs::read_to_string(&r.path).expect("journal"))
        .collect();
    assert_eq!(before, after, "observe mode appended to a journal");
}

#[test]
fn quitting_with_a_step_running_cancels_it_first_and_journals_both() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[StepKind::ListHosts], &[]);
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let Some(ExecRequest::Execute { .. }) = app.outbox().front().cloned() else {
        panic!("step 1 out");
    };
    app.outbox_mut().clear();
    app.handle_key(key('q'));
    assert_eq!(app.handle_key(key('y')), Control::Quit);
    // What the loop does on Quit: cancel, then wait for the executor's answer.
    assert!(app.cancel_in_flight(), "there is a step to wait for");
    assert!(matches!(
        app.outbox().front(),
        Some(ExecRequest::Cancel { .. })
    ));
    play_one(&mut app, &[]);
    assert!(!app.has_in_flight(), "the cancelled step settled");
    assert!(!app.cancel_in_flight(), "nothing left to wait for");
    let inputs = journaled(dir.path());
    assert!(inputs
        .iter()
        .any(|i| matches!(i, Input::CancelRequested { n: 1, .. })));
    assert!(inputs
        .iter()
        .any(|i| matches!(i, Input::Cancelled { n: 1, .. })));
}

#[test]
fn a_typed_gate_takes_an_optional_note_that_is_journaled_and_replayed() {
    let dir = tmp();
    let mut app = etcd_app(dir.path());
    app.handle_key(key('s'));
    play_one(&mut app, &["      k3s-prod-3"]);
    play_one(&mut app, &[]); // verify: the host set matches, the confirm-hosts gate opens
    assert!(matches!(app.overlay(), Some(Overlay::Gate(_))));
    // The answer, Tab to the note, the note, Tab back: typing goes to the answer again.
    type_str(&mut app, "7");
    app.handle_key(code(KeyCode::Tab));
    type_str(&mut app, "counted twice");
    app.handle_key(code(KeyCode::Tab));
    app.handle_key(code(KeyCode::Backspace));
    type_str(&mut app, "1");
    let Some(Overlay::Gate(m)) = &app.overlay() else {
        panic!("the gate is open");
    };
    assert_eq!(m.answer.lines().join(""), "1");
    assert_eq!(m.note.lines().join(""), "counted twice");
    // Only the field that has the keyboard shows a cursor.
    assert_eq!(m.field, hk_ui::app::GateField::Answer);
    assert_ne!(m.answer.cursor_style(), ratatui::style::Style::default());
    assert_eq!(m.note.cursor_style(), ratatui::style::Style::default());
    let frame = text(&render(&mut app, 120, 36));
    assert!(frame.contains("counted twice"), "{frame}");
    assert!(
        frame.contains("tab answer/note"),
        "the hint says how: {frame}"
    );
    app.handle_key(code(KeyCode::Enter));
    assert!(app.overlay().is_none(), "the gate opened");

    let note = Some("counted twice".to_string());
    let inputs = journaled(dir.path());
    assert!(
        inputs.contains(&Input::TypedText {
            n: 1,
            by: "alice".into(),
            text: "1".into(),
            note: note.clone()
        }),
        "{inputs:?}"
    );
    let live = app
        .active()
        .and_then(|a| a.run.step_record(1))
        .and_then(|r| r.gate.clone())
        .expect("gate record");
    assert_eq!((live.by.as_str(), &live.note), ("alice", &note));
    // Replaying the journal restores the note with who and when.
    let runs = journal::list_runs(dir.path()).expect("list runs");
    let replayed = journal::replay(&runs.runs[0].path).expect("replay");
    let g = replayed
        .run
        .step_record(1)
        .and_then(|r| r.gate.clone())
        .expect("replayed gate record");
    assert_eq!(g, live);
}

#[test]
fn n_and_shift_n_jump_the_scrollback_between_matches_of_the_search() {
    let dir = tmp();
    let mut app = etcd_app(dir.path());
    app.handle_key(key('s'));
    // A small ring so lines are dropped: 1000 lines through a 300-line ring, far more than
    // the window shows. Line i is absolute line i; the ring keeps 700..999.
    app.active_mut().expect("run").output = hk_ui::output::OutputBuffer::with_capacity(300);
    let lines: Vec<String> = (0..1000)
        .map(|i| {
            if i % 100 == 7 {
                format!("line {i} ERROR")
            } else {
                format!("line {i}")
            }
        })
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    play_one(&mut app, &refs); // the verification stays outstanding: no gate on top
    assert!(app.overlay().is_none());

    // No search yet: n says how to start one and moves nothing.
    app.handle_key(key('n'));
    assert!(app.status().is_some_and(|s| s.contains("no search")));
    assert!(app.active().expect("run").output.follow);

    app.handle_key(key('/'));
    type_str(&mut app, "error");
    app.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut app, 120, 40));
    assert!(frame.contains("/error: 3 matching"), "{frame}");

    let bottom = |app: &App| app.active().expect("run").output.window_bottom();
    for (k, want_line, want_status) in [
        ('N', 907, "match 3 of 3"),
        ('N', 807, "match 2 of 3"),
        ('N', 707, "match 1 of 3"),
        ('N', 907, "match 3 of 3 (wrapped)"),
        ('n', 707, "match 1 of 3 (wrapped)"),
        ('n', 807, "match 2 of 3"),
    ] {
        app.handle_key(key(k));
        assert_eq!(bottom(&app), Some(want_line), "after {k}");
        assert_eq!(app.search_at(), Some(want_line));
        let status = app.status().map(str::to_string).unwrap_or_default();
        assert_eq!(status, format!("/error: {want_status}"));
    }
    assert!(!app.active().expect("run").output.follow);
    // The status line says where we are; the filtered output ends at the current match.
    let frame = text(&render(&mut app, 120, 40));
    assert!(frame.contains("/error: match 2 of 3"), "{frame}");
    assert!(
        frame.contains("line 807 ERROR") && !frame.contains("line 907 ERROR"),
        "{frame}"
    );
    // Esc clears the search; the scrollback stays at the match, with its context around it.
    app.handle_key(code(KeyCode::Esc));
    assert!(app.filter().is_none() && app.search_at().is_none());
    let frame = text(&render(&mut app, 120, 40));
    assert!(
        frame.contains("line 807 ERROR")
            && frame.contains("line 806")
            && !frame.contains("line 999"),
        "{frame}"
    );
    // A search with no match says so and leaves the scrollback where it is.
    app.handle_key(key('/'));
    type_str(&mut app, "no such text");
    app.handle_key(code(KeyCode::Enter));
    app.handle_key(key('n'));
    assert_eq!(bottom(&app), Some(807));
    assert!(app.status().is_some_and(|s| s.contains("no matching line")));
    // The help overlay lists both keys, from the keymap.
    app.handle_key(key('?'));
    let frame = text(&render(&mut app, 120, 40));
    assert!(frame.contains("search: next matching line"), "{frame}");
    assert!(frame.contains("search: previous matching line"), "{frame}");
}

/// A home list longer than its pane says how many rows are out of sight (issue 16: "the
/// runbook list shows 6 of 8 with no more"): at 80x24 the shipped runbooks do not fit, and
/// the count follows the selection down the list.
#[test]
fn home_lists_name_the_rows_out_of_sight() {
    let dir = tmp();
    let mut app = operate_app(dir.path(), &[], &[]);
    let frame = text(&render(&mut app, 80, 24));
    let shown = app.runbooks().len();
    assert!(shown > 5, "the sample ships {shown} runbooks");
    assert!(frame.contains("↓ 4 more"), "{frame}");
    let big = text(&render(&mut app, 160, 45));
    assert!(!big.contains(" more "), "{big}");
    // Down to the last runbook (the runbook list has the keys at start): what is out of
    // sight is now above.
    for _ in 0..shown {
        app.handle_key(key('j'));
    }
    let frame = text(&render(&mut app, 80, 24));
    assert!(
        frame.contains("↑ 4 more") && !frame.contains("↓"),
        "{frame}"
    );
}
