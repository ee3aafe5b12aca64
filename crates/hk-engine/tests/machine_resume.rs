//! The machine's resume inputs: an interrupted step that changes systems is decided on
//! (its process known gone, its probe run, then a typed re-run from its preview, a typed
//! mark-done with a reason, or an abort), never retried on one key; the console's own
//! abandonment and its processes are journaled; and every such run replays to itself.

use hk_test_support::machine as machine_common;

use hk_engine::runbook::machine::{
    Effect, InFlight, Input, MachineError, Outcome, Run, RunStatus, StepState,
};
use machine_common::*;

fn feed(
    run: &mut Run,
    events: &mut Vec<hk_engine::runbook::machine::Event>,
    inputs: Vec<Input>,
) -> Vec<Effect> {
    let mut last = Vec::new();
    for input in inputs {
        for input in started_first(run, input) {
            let name = input.name();
            let e = ev(2000 + events.len() as u64, input);
            last = run
                .step(&e)
                .unwrap_or_else(|err| panic!("{name} refused: {err}"));
            events.push(e);
        }
    }
    last
}

fn refused(run: &mut Run, input: Input) -> MachineError {
    let before = run.clone();
    let err = run.step(&ev(9999, input)).expect_err("refused");
    assert_eq!(*run, before, "a refused input leaves the run unchanged");
    err
}

fn finished(n: usize, attempt: u32) -> Input {
    Input::StepFinished {
        n,
        attempt,
        exit_code: Some(0),
        error: None,
    }
}

/// etcd on prod with step 4 (the apply on k3s-prod-3) running under pid 4242.
fn at_apply() -> (Run, Vec<hk_engine::runbook::machine::Event>) {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let mut events = Vec::new();
    feed(
        &mut run,
        &mut events,
        vec![
            Input::Start,
            typed(1, "prod"),
            finished(2, 1),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec!["k3s-prod-3".into()],
            },
            typed(2, "1"),
            finished(3, 1),
            approve(3),
            Input::StepStarted { n: 4, attempt: 1 },
            Input::ProcessStarted {
                n: 4,
                attempt: 1,
                pid: 4242,
                start_time: 777,
                program: "/venv/bin/ansible-playbook".into(),
                marker: "1-2-3".into(),
            },
        ],
    );
    (run, events)
}

fn replays_to_itself(run: &Run, events: &[hk_engine::runbook::machine::Event]) {
    let again = Run::replay(etcd_plan(), run.mode(), events).expect("replay");
    assert_eq!(&again, run, "replaying the events rebuilds the run exactly");
    // And through JSON, as the journal stores them.
    let json: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(e).expect("json"))
        .collect();
    let back: Vec<hk_engine::runbook::machine::Event> = json
        .iter()
        .map(|j| serde_json::from_str(j).expect("parse"))
        .collect();
    assert_eq!(back, events);
}

#[test]
fn the_process_is_recorded_and_abandonment_interrupts_with_the_reason() {
    let (mut run, mut events) = at_apply();
    let p = run
        .step_record(4)
        .and_then(|r| r.process.clone())
        .expect("process");
    assert_eq!((p.pid, p.start_time, p.ended), (4242, 777, None));
    // An attempt that never went out is refused; a stale one dropped.
    assert!(matches!(
        refused(
            &mut run,
            Input::ProcessStarted {
                n: 4,
                attempt: 2,
                pid: 1,
                start_time: 1,
                program: "x".into(),
                marker: String::new(),
            }
        ),
        MachineError::FutureAttempt { .. }
    ));
    let fx = feed(
        &mut run,
        &mut events,
        vec![Input::Abandoned {
            reason: "console lost its terminal (SIGHUP)".into(),
        }],
    );
    assert_eq!(
        fx,
        vec![
            Effect::Cancel { n: 4, attempt: 1 },
            Effect::RunFinished {
                outcome: Outcome::Interrupted { n: 4 }
            }
        ]
    );
    let r = run.step_record(4).expect("step");
    assert_eq!(
        r.state,
        StepState::Interrupted {
            during: InFlight::Running
        }
    );
    assert_eq!(
        r.interrupted_why.as_deref(),
        Some("abandoned: console lost its terminal (SIGHUP)")
    );
    // How the ladder ended it is kept with the process.
    feed(
        &mut run,
        &mut events,
        vec![
            Input::ProcessEnded {
                n: 4,
                attempt: 1,
                pid: 4242,
                how: "sent SIGINT: ended".into(),
            },
            // The killed process's own finish arrives late: absorbed.
            Input::StepFinished {
                n: 4,
                attempt: 1,
                exit_code: None,
                error: Some("ended by signal 2".into()),
            },
        ],
    );
    assert_eq!(
        run.step_record(4)
            .and_then(|r| r.process.clone())
            .and_then(|p| p.ended),
        Some("sent SIGINT: ended".into())
    );
    // A process the step never started is refused.
    assert!(matches!(
        refused(
            &mut run,
            Input::ProcessEnded {
                n: 4,
                attempt: 1,
                pid: 1,
                how: "x".into()
            }
        ),
        MachineError::WrongState { .. }
    ));
    // A restart finds it halted, not in flight: nothing changes.
    assert!(feed(&mut run, &mut events, vec![Input::Resumed]).is_empty());
    replays_to_itself(&run, &events);
}

#[test]
fn an_interrupted_change_is_decided_process_gone_and_probe_first() {
    let (mut run, mut events) = at_apply();
    feed(&mut run, &mut events, vec![Input::Resumed]);
    assert_eq!(*run.status(), RunStatus::Halted { n: 4 });
    // One key does not re-run it.
    assert_eq!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 4,
                by: "op".into()
            }
        ),
        MachineError::NeedsResumeDecision { n: 4 }
    );
    let rerun = |typed: &str| Input::RerunApproved {
        n: 4,
        by: "op".into(),
        typed: typed.into(),
    };
    // Its process may still run: nothing is decided until it is known gone.
    assert_eq!(
        refused(&mut run, rerun("prod")),
        MachineError::ProcessStillRunning { n: 4, pid: 4242 }
    );
    feed(
        &mut run,
        &mut events,
        vec![Input::ProcessEnded {
            n: 4,
            attempt: 1,
            pid: 4242,
            how: "not running when the run was resumed".into(),
        }],
    );
    // Then the probe (the read-back, step 5) first.
    assert_eq!(
        refused(&mut run, rerun("prod")),
        MachineError::ProbeFirst { n: 4, probe: 5 }
    );
    assert_eq!(
        refused(
            &mut run,
            Input::ProbeResult {
                n: 4,
                probe: 9,
                ok: true,
                detail: "x".into()
            }
        ),
        MachineError::NotTheProbe { n: 4, probe: 9 }
    );
    feed(
        &mut run,
        &mut events,
        vec![Input::ProbeResult {
            n: 4,
            probe: 5,
            ok: false,
            detail: "scheduler is mq-deadline".into(),
        }],
    );
    let probe = run
        .step_record(4)
        .and_then(|r| r.probe.clone())
        .expect("probe");
    assert!(!probe.ok && probe.detail.contains("mq-deadline"));
    // The typed confirmation is the environment's name.
    assert!(matches!(
        refused(&mut run, rerun("dev")),
        MachineError::WrongConfirmation { .. }
    ));
    let fx = feed(&mut run, &mut events, vec![rerun("prod")]);
    // From the preview: the check run (step 3) again, then its approval, then the apply.
    let ex: Vec<(usize, u32, bool)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Execute(x) => Some((x.n(), x.attempt(), x.mutates())),
            _ => None,
        })
        .collect();
    assert_eq!(ex, vec![(3, 2, false)]);
    assert_eq!(
        run.step_record(4).map(|r| r.state.clone()),
        Some(StepState::Pending)
    );
    let fx = feed(&mut run, &mut events, vec![finished(3, 2)]);
    assert!(
        fx.iter().any(|e| matches!(e, Effect::AskGate { n: 3, .. })),
        "the diff is approved again: {fx:?}"
    );
    let fx = feed(&mut run, &mut events, vec![approve(3)]);
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Execute(x) if x.n() == 4 && x.attempt() == 2 && x.mutates())));
    replays_to_itself(&run, &events);
}

#[test]
fn mark_done_is_typed_with_a_reason_and_moves_on() {
    let (mut run, mut events) = at_apply();
    feed(
        &mut run,
        &mut events,
        vec![
            Input::Resumed,
            Input::ProcessEnded {
                n: 4,
                attempt: 1,
                pid: 4242,
                how: "gone".into(),
            },
            Input::ProbeResult {
                n: 4,
                probe: 5,
                ok: true,
                detail: "[bfq] nr_requests=32".into(),
            },
        ],
    );
    let done = |typed: &str, reason: &str| Input::MarkedDone {
        n: 4,
        by: "op".into(),
        typed: typed.into(),
        reason: reason.into(),
    };
    assert!(matches!(
        refused(&mut run, done("prod", "read back fine")),
        MachineError::WrongConfirmation { .. }
    ));
    assert_eq!(
        refused(&mut run, done("k3s-prod-3", "  ")),
        MachineError::ReasonRequired { n: 4 }
    );
    let fx = feed(
        &mut run,
        &mut events,
        vec![done("k3s-prod-3", "read back fine")],
    );
    let r = run.step_record(4).expect("step");
    assert_eq!(r.state, StepState::Done);
    assert_eq!(
        r.detail.as_deref(),
        Some("marked done by op: read back fine")
    );
    // The run goes on: the read-back runs.
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Execute(x) if x.n() == 5 && !x.mutates())));
    // Nothing is left to decide.
    assert_eq!(
        refused(&mut run, done("k3s-prod-3", "again")),
        MachineError::NotInterrupted { n: 4 }
    );
    replays_to_itself(&run, &events);
}

#[test]
fn a_read_only_interrupted_step_still_retries_and_abort_ends_a_decision() {
    // The read-back (read-only) interrupted while verifying: a retry is fine.
    let (mut run, mut events) = at_apply();
    feed(
        &mut run,
        &mut events,
        vec![
            finished(4, 1),
            Input::StepStarted { n: 5, attempt: 1 },
            Input::Resumed,
        ],
    );
    assert!(matches!(
        run.step_record(5).map(|r| r.state.clone()),
        Some(StepState::Interrupted { .. })
    ));
    let fx = feed(
        &mut run,
        &mut events,
        vec![Input::RetryApproved {
            n: 5,
            by: "op".into(),
        }],
    );
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Execute(x) if x.n() == 5 && x.attempt() == 2)));
    replays_to_itself(&run, &events);

    // Abort is the third choice.
    let (mut run, mut events) = at_apply();
    feed(
        &mut run,
        &mut events,
        vec![
            Input::Resumed,
            Input::Abort {
                by: "op".into(),
                reason: "look at it by hand".into(),
            },
        ],
    );
    assert!(matches!(run.status(), RunStatus::Aborted { .. }));
    replays_to_itself(&run, &events);
}

/// etcd on prod with step 4's Execute gone out and nothing heard back yet.
fn apply_sent() -> (Run, Vec<hk_engine::runbook::machine::Event>) {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let mut events = Vec::new();
    let fx = feed(
        &mut run,
        &mut events,
        vec![
            Input::Start,
            typed(1, "prod"),
            finished(2, 1),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec!["k3s-prod-3".into()],
            },
            typed(2, "1"),
            finished(3, 1),
            approve(3),
        ],
    );
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Execute(x) if x.n() == 4 && x.mutates())));
    (run, events)
}

/// Step 4 ended without `Done` after its work went out: only the decision starts it again.
/// Checks the one-key retry and a skip are refused, then (process gone, probe run unless
/// `probe` is false) that a typed re-run goes back to the preview (step 3) with its
/// approval asked afresh, and that marking it done is offered too.
fn only_the_decision_starts_it_again(
    case: &str,
    mut run: Run,
    mut events: Vec<hk_engine::runbook::machine::Event>,
    probe: bool,
) {
    assert_eq!(*run.status(), RunStatus::Halted { n: 4 }, "{case}");
    assert!(run.needs_decision(4), "{case}: the outcome is unknown");
    assert_eq!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 4,
                by: "op".into()
            }
        ),
        MachineError::NeedsResumeDecision { n: 4 },
        "{case}"
    );
    assert!(
        matches!(
            refused(
                &mut run,
                Input::Skip {
                    n: 4,
                    by: "op".into(),
                    reason: "x".into()
                }
            ),
            MachineError::CannotSkip { n: 4, .. }
        ),
        "{case}"
    );
    let rerun = |typed: &str| Input::RerunApproved {
        n: 4,
        by: "op".into(),
        typed: typed.into(),
    };
    if run
        .step_record(4)
        .and_then(|r| r.process.as_ref())
        .is_some_and(|p| p.ended.is_none())
    {
        assert_eq!(
            refused(&mut run, rerun("prod")),
            MachineError::ProcessStillRunning { n: 4, pid: 4242 },
            "{case}"
        );
        feed(
            &mut run,
            &mut events,
            vec![Input::ProcessEnded {
                n: 4,
                attempt: 1,
                pid: 4242,
                how: "gone".into(),
            }],
        );
    }
    if probe {
        assert_eq!(
            refused(&mut run, rerun("prod")),
            MachineError::ProbeFirst { n: 4, probe: 5 },
            "{case}"
        );
        feed(
            &mut run,
            &mut events,
            vec![Input::ProbeResult {
                n: 4,
                probe: 5,
                ok: false,
                detail: "scheduler is mq-deadline".into(),
            }],
        );
    }
    assert!(
        matches!(
            refused(&mut run, rerun("dev")),
            MachineError::WrongConfirmation { .. }
        ),
        "{case}: the environment's name is typed"
    );
    // Marking it done is the other way on (typed host and a reason).
    let mut marked = run.clone();
    marked
        .step(&ev(
            9000,
            Input::MarkedDone {
                n: 4,
                by: "op".into(),
                typed: "k3s-prod-3".into(),
                reason: "read it back by hand".into(),
            },
        ))
        .unwrap_or_else(|e| panic!("{case}: mark done refused: {e}"));
    assert_eq!(
        marked.step_record(4).map(|r| r.state.clone()),
        Some(StepState::Done),
        "{case}"
    );
    let fx = feed(&mut run, &mut events, vec![rerun("prod")]);
    let ex: Vec<(usize, u32, bool)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Execute(x) => Some((x.n(), x.attempt(), x.mutates())),
            _ => None,
        })
        .collect();
    assert_eq!(ex, vec![(3, 2, false)], "{case}: from the preview");
    let fx = feed(&mut run, &mut events, vec![finished(3, 2)]);
    assert!(
        fx.iter().any(|e| matches!(e, Effect::AskGate { n: 3, .. })),
        "{case}: the diff is approved afresh: {fx:?}"
    );
    assert!(!run.needs_decision(4), "{case}: decided");
    replays_to_itself(&run, &events);
}

#[test]
fn every_way_a_mutating_step_ends_after_its_work_went_out_needs_the_decision() {
    let cases: Vec<(&str, Vec<Input>)> = vec![
        (
            "cancelled by the operator",
            vec![
                Input::CancelRequested {
                    n: 4,
                    by: "op".into(),
                },
                Input::Cancelled {
                    n: 4,
                    attempt: 1,
                    reason: "stopped at the operator's request".into(),
                },
            ],
        ),
        (
            "cancel asked, the work finished first",
            vec![
                Input::CancelRequested {
                    n: 4,
                    by: "op".into(),
                },
                finished(4, 1),
            ],
        ),
        (
            "failed with an exit code",
            vec![Input::StepFinished {
                n: 4,
                attempt: 1,
                exit_code: Some(2),
                error: None,
            }],
        ),
        (
            "killed (no exit code)",
            vec![Input::StepFinished {
                n: 4,
                attempt: 1,
                exit_code: None,
                error: None,
            }],
        ),
        (
            "lost its connection (an error after it started)",
            vec![Input::StepFinished {
                n: 4,
                attempt: 1,
                exit_code: None,
                error: Some("ssh: connection reset by peer".into()),
            }],
        ),
        ("interrupted (the console restarted)", vec![Input::Resumed]),
        (
            "abandoned (SIGHUP)",
            vec![Input::Abandoned {
                reason: "console lost its terminal (SIGHUP)".into(),
            }],
        ),
    ];
    for (case, inputs) in cases {
        let (mut run, mut events) = at_apply();
        feed(&mut run, &mut events, inputs);
        only_the_decision_starts_it_again(case, run, events, true);
    }

    // Its work went out but no step-started came back: the executor may still have begun,
    // so a cancel then is as unknown as any.
    let (mut run, mut events) = apply_sent();
    feed(
        &mut run,
        &mut events,
        vec![
            Input::CancelRequested {
                n: 4,
                by: "op".into(),
            },
            Input::Cancelled {
                n: 4,
                attempt: 1,
                reason: "stopped at the operator's request".into(),
            },
        ],
    );
    only_the_decision_starts_it_again("cancelled before step-started", run, events, true);

    // The executor said it never started it: nothing changed, so no probe is asked, but the
    // preview and the typed confirmation are.
    let (mut run, mut events) = apply_sent();
    feed(
        &mut run,
        &mut events,
        vec![Input::StepFinished {
            n: 4,
            attempt: 1,
            exit_code: None,
            error: Some("no executor for ansible steps; the step was not started".into()),
        }],
    );
    assert!(run.step_record(4).is_some_and(|r| r.never_started));
    only_the_decision_starts_it_again("never started", run, events, false);

    // Its verification failed after the work ran (a plan whose apply checks its output).
    let mut plan = etcd_plan();
    plan.steps[3].expect = Some(hk_engine::runbook::plan::Expect {
        stdout_contains: Some("ok=".into()),
        ..Default::default()
    });
    let mut run = Run::new(plan.clone()).expect("plan");
    for (i, input) in [
        Input::Start,
        typed(1, "prod"),
        finished(2, 1),
        Input::HostSetObserved {
            n: 2,
            attempt: 1,
            hosts: vec!["k3s-prod-3".into()],
        },
        typed(2, "1"),
        finished(3, 1),
        approve(3),
        Input::StepStarted { n: 4, attempt: 1 },
        finished(4, 1),
        Input::VerifyResult {
            n: 4,
            attempt: 1,
            ok: false,
            detail: "no ok= in the recap".into(),
        },
    ]
    .into_iter()
    .enumerate()
    {
        for input in started_first(&run, input) {
            run.step(&ev(3000 + i as u64, input)).expect("accepted");
        }
    }
    assert!(run.needs_decision(4), "verification failed");
    assert_eq!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 4,
                by: "op".into()
            }
        ),
        MachineError::NeedsResumeDecision { n: 4 }
    );

    // The deadline (headless) cancels and aborts: the run is over, nothing starts again.
    let (mut run, mut events) = at_apply();
    feed(
        &mut run,
        &mut events,
        vec![
            Input::CancelRequested {
                n: 4,
                by: "headless".into(),
            },
            Input::Abort {
                by: "headless".into(),
                reason: "deadline passed".into(),
            },
        ],
    );
    assert!(matches!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 4,
                by: "op".into()
            }
        ),
        MachineError::RunOver { .. }
    ));
    assert!(!run.needs_decision(4));
}

#[test]
fn a_read_only_step_that_failed_keeps_the_retry_and_a_done_step_needs_nothing() {
    // The check (read-only) failed before the apply went out: `r` retries it.
    let mut run2 = Run::new(etcd_plan()).expect("plan");
    let mut ev2 = Vec::new();
    feed(
        &mut run2,
        &mut ev2,
        vec![
            Input::Start,
            typed(1, "prod"),
            finished(2, 1),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec!["k3s-prod-3".into()],
            },
            typed(2, "1"),
            Input::StepFinished {
                n: 3,
                attempt: 1,
                exit_code: Some(2),
                error: None,
            },
        ],
    );
    assert!(!run2.needs_decision(3), "a read-only step is retried");
    let fx = feed(
        &mut run2,
        &mut ev2,
        vec![Input::RetryApproved {
            n: 3,
            by: "op".into(),
        }],
    );
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::Execute(x) if x.n() == 3 && x.attempt() == 2)));
    // A done step needs nothing.
    let (mut run, mut events) = at_apply();
    feed(&mut run, &mut events, vec![finished(4, 1)]);
    assert!(!run.needs_decision(4));
}

#[test]
fn journals_written_before_the_rule_replay_their_retry_as_it_ran() {
    // An old journal: the apply failed, then a one-key retry was journaled (accepted then).
    let (mut run, mut events) = at_apply();
    feed(
        &mut run,
        &mut events,
        vec![Input::StepFinished {
            n: 4,
            attempt: 1,
            exit_code: Some(2),
            error: None,
        }],
    );
    let retry = ev(
        5000,
        Input::RetryApproved {
            n: 4,
            by: "op".into(),
        },
    );
    // Live, it is refused now.
    assert_eq!(
        run.clone().step(&retry).expect_err("refused live"),
        MachineError::NeedsResumeDecision { n: 4 }
    );
    // Read back from the journal, it is what happened: the apply's second attempt.
    events.push(retry);
    let replayed = Run::replay(etcd_plan(), run.mode(), &events).expect("old journal replays");
    assert!(matches!(
        replayed.step_record(4).map(|r| (&r.state, r.attempt)),
        Some((StepState::Running { .. }, 2))
    ));
    // And what comes after it live follows the rule again (its start first, as the
    // session journals it).
    let mut live = replayed.clone();
    live.step(&ev(5001, Input::StepStarted { n: 4, attempt: 2 }))
        .expect("started");
    live.step(&ev(
        5001,
        Input::StepFinished {
            n: 4,
            attempt: 2,
            exit_code: Some(2),
            error: None,
        },
    ))
    .expect("finished");
    assert_eq!(
        live.step(&ev(
            5002,
            Input::RetryApproved {
                n: 4,
                by: "op".into()
            }
        ))
        .expect_err("refused live"),
        MachineError::NeedsResumeDecision { n: 4 }
    );
}
