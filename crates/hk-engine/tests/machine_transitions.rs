//! Every transition of the run state machine, and every kind of illegal input.

use hk_test_support::machine as machine_common;

use hk_engine::runbook::machine::{
    Effect, Event, GateAnswer, GatePhase, InFlight, Input, MachineError, Outcome, Run, RunOutcome,
    RunStatus, StepState, Timestamp,
};
use hk_engine::runbook::plan::{Gate, Plan, StepKind};
use machine_common::*;

/// Feed inputs that must all be accepted; returns the effects of the last one.
fn feed(run: &mut Run, inputs: Vec<Input>) -> Vec<Effect> {
    let mut last = Vec::new();
    for (i, input) in inputs.into_iter().enumerate() {
        for input in started_first(run, input) {
            let name = input.name();
            last = run
                .step(&ev(1000 + i as u64, input))
                .unwrap_or_else(|e| panic!("input {i} ({name}) refused: {e}"));
        }
    }
    last
}

/// Feed one input that must be refused; checks the run did not change.
fn refused(run: &mut Run, input: Input) -> MachineError {
    let before = run.clone();
    let err = run
        .step(&ev(9999, input))
        .expect_err("input should have been refused");
    assert_eq!(*run, before, "a refused input must leave the run unchanged");
    err
}

fn state(run: &Run, n: usize) -> StepState {
    run.step_record(n).expect("step exists").state.clone()
}

fn execute_of(effects: &[Effect]) -> Option<(usize, u32, bool)> {
    effects.iter().find_map(|e| match e {
        Effect::Execute(x) => Some((x.n(), x.attempt(), x.mutates())),
        _ => None,
    })
}

fn finished(n: usize, attempt: u32, code: i32) -> Input {
    Input::StepFinished {
        n,
        attempt,
        exit_code: Some(code),
        error: None,
    }
}

/// etcd plan driven to the point where step 4 (the mutating apply on k3s-prod-3) runs.
fn etcd_at_apply() -> Run {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let fx = feed(
        &mut run,
        vec![
            Input::Start,
            typed(1, "prod"),
            Input::StepStarted { n: 2, attempt: 1 },
            finished(2, 1, 0),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec!["k3s-prod-3".into()],
            },
            typed(2, "1"),
            finished(3, 1, 0),
            approve(3),
        ],
    );
    assert_eq!(execute_of(&fx), Some((4, 1, true)));
    run
}

#[test]
fn start_asks_the_first_gate_and_start_twice_is_refused() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    assert_eq!(run.outcome(), RunOutcome::InProgress);
    let fx = feed(&mut run, vec![Input::Start]);
    assert_eq!(
        fx,
        vec![Effect::AskGate {
            n: 1,
            gate: Gate::TypedConfirm {
                phrase: "prod".into()
            }
        }]
    );
    assert_eq!(
        state(&run, 1),
        StepState::AwaitingGate {
            phase: GatePhase::BeforeWork
        }
    );
    assert_eq!(*run.status(), RunStatus::Active { n: 1 });
    assert_eq!(run.started_at(), Some(Timestamp(1000)));
    assert_eq!(
        refused(&mut run, Input::Start),
        MachineError::AlreadyStarted
    );
}

#[test]
fn empty_plan_succeeds_at_once() {
    let mut run = Run::new(Plan {
        runbook: "x".into(),
        env: "dev".into(),
        mutates: false,
        steps: vec![],
    })
    .expect("plan");
    let fx = feed(&mut run, vec![Input::Start]);
    assert_eq!(
        fx,
        vec![Effect::RunFinished {
            outcome: Outcome::Succeeded
        }]
    );
    assert_eq!(run.outcome(), RunOutcome::Succeeded);
}

#[test]
fn typed_confirm_needs_the_exact_phrase() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(&mut run, vec![Input::Start]);
    let fx = feed(&mut run, vec![typed(1, "prd")]);
    assert!(
        matches!(&fx[..], [Effect::GateNotPassed { n: 1, why }] if why.contains("\"prd\"")),
        "{fx:?}"
    );
    assert!(matches!(state(&run, 1), StepState::AwaitingGate { .. }));
    // Neither a case change nor surrounding spaces pass.
    feed(&mut run, vec![typed(1, "PROD"), typed(1, " prod")]);
    assert!(matches!(state(&run, 1), StepState::AwaitingGate { .. }));
    // An approval cannot stand in for typing.
    assert_eq!(
        refused(&mut run, approve(1)),
        MachineError::GateNeedsTypedText { n: 1 }
    );
    let fx = feed(&mut run, vec![typed(1, "prod")]);
    assert_eq!(state(&run, 1), StepState::Done);
    assert_eq!(
        run.step_record(1)
            .and_then(|r| r.gate.as_ref())
            .map(|g| g.by.as_str()),
        Some("op")
    );
    // Next: the list-hosts step runs, read-only, first attempt.
    assert_eq!(execute_of(&fx), Some((2, 1, false)));
    assert_eq!(
        state(&run, 2),
        StepState::Running {
            started: false,
            cancel_requested: false
        }
    );
}

#[test]
fn list_hosts_blocks_on_any_difference_and_names_it() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let fx = feed(
        &mut run,
        vec![Input::Start, typed(1, "prod"), finished(2, 1, 0)],
    );
    assert_eq!(fx, vec![Effect::Verify { n: 2, attempt: 1 }]);
    assert_eq!(state(&run, 2), StepState::Verifying);
    // A list-hosts step is verified by its host set, never by a bare "ok".
    assert_eq!(
        refused(
            &mut run,
            Input::VerifyResult {
                n: 2,
                attempt: 1,
                ok: true,
                detail: "looks fine".into()
            }
        ),
        MachineError::VerifyNeedsHostSet { n: 2 }
    );
    let fx = feed(
        &mut run,
        vec![Input::HostSetObserved {
            n: 2,
            attempt: 1,
            hosts: vec!["k3s-prod-1".into(), "k3s-prod-2".into()],
        }],
    );
    let StepState::Failed { reason } = state(&run, 2) else {
        panic!("expected failed, got {:?}", state(&run, 2));
    };
    assert!(reason.contains("missing k3s-prod-3"), "{reason}");
    assert!(
        reason.contains("not expected k3s-prod-1, k3s-prod-2"),
        "{reason}"
    );
    assert!(matches!(
        &fx[..],
        [Effect::RunFinished {
            outcome: Outcome::Failed { n: 2, .. }
        }]
    ));
    assert_eq!(*run.status(), RunStatus::Halted { n: 2 });
    assert_eq!(run.outcome(), RunOutcome::Failed);
    // Nothing after the failed step runs.
    let err = refused(&mut run, finished(3, 1, 0));
    assert!(
        matches!(err, MachineError::FutureAttempt { n: 3, .. }),
        "{err:?}"
    );
    let err = refused(&mut run, approve(3));
    assert!(
        matches!(
            err,
            MachineError::WrongState {
                n: 3,
                state: "pending",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_subset_or_superset_of_hosts_also_blocks() {
    for observed in [vec![], vec!["k3s-prod-3", "k3s-prod-1"]] {
        let mut run = Run::new(etcd_plan()).expect("plan");
        feed(
            &mut run,
            vec![
                Input::Start,
                typed(1, "prod"),
                finished(2, 1, 0),
                Input::HostSetObserved {
                    n: 2,
                    attempt: 1,
                    hosts: observed.iter().map(|s| s.to_string()).collect(),
                },
            ],
        );
        assert!(
            matches!(state(&run, 2), StepState::Failed { .. }),
            "{observed:?}"
        );
    }
}

#[test]
fn exact_host_set_goes_on_to_the_confirm_hosts_gate_which_needs_the_count() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let fx = feed(
        &mut run,
        vec![
            Input::Start,
            typed(1, "prod"),
            finished(2, 1, 0),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec!["k3s-prod-3".into()],
            },
        ],
    );
    assert_eq!(
        fx,
        vec![Effect::AskGate {
            n: 2,
            gate: confirm_hosts(&["k3s-prod-3"])
        }]
    );
    assert_eq!(
        state(&run, 2),
        StepState::AwaitingGate {
            phase: GatePhase::AfterWork
        }
    );
    assert_eq!(
        run.step_record(2).and_then(|r| r.observed_hosts.clone()),
        Some(vec!["k3s-prod-3".to_string()])
    );
    for wrong in ["3", "one", ""] {
        let fx = feed(&mut run, vec![typed(2, wrong)]);
        assert!(
            matches!(&fx[..], [Effect::GateNotPassed { n: 2, .. }]),
            "{wrong}: {fx:?}"
        );
    }
    assert_eq!(
        refused(&mut run, approve(2)),
        MachineError::GateNeedsTypedText { n: 2 }
    );
    let fx = feed(&mut run, vec![typed(2, "1")]);
    assert_eq!(state(&run, 2), StepState::Done);
    assert_eq!(execute_of(&fx), Some((3, 1, false)));
}

#[test]
fn approve_diff_is_asked_after_the_check_run_and_gates_the_mutation() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let fx = feed(
        &mut run,
        vec![
            Input::Start,
            typed(1, "prod"),
            finished(2, 1, 0),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec!["k3s-prod-3".into()],
            },
            typed(2, "1"),
            finished(3, 1, 0),
        ],
    );
    assert_eq!(
        fx,
        vec![Effect::AskGate {
            n: 3,
            gate: Gate::ApproveDiff
        }]
    );
    assert_eq!(
        refused(&mut run, typed(3, "yes")),
        MachineError::GateNotTyped { n: 3 }
    );
    let fx = feed(&mut run, vec![approve(3)]);
    assert_eq!(execute_of(&fx), Some((4, 1, true)));
}

#[test]
fn rejecting_a_gate_fails_the_step_and_halts() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(&mut run, vec![Input::Start]);
    let fx = feed(
        &mut run,
        vec![Input::GateAnswered {
            n: 1,
            answer: GateAnswer::Rejected {
                by: "alice".into(),
                reason: "wrong env".into(),
            },
        }],
    );
    assert_eq!(
        state(&run, 1),
        StepState::Failed {
            reason: "gate rejected by alice: wrong env".into()
        }
    );
    assert!(matches!(
        &fx[..],
        [Effect::RunFinished {
            outcome: Outcome::Failed { n: 1, .. }
        }]
    ));
}

#[test]
fn started_finished_verified_read_back_completes_and_advances() {
    let mut run = etcd_at_apply();
    let fx = feed(&mut run, vec![Input::StepStarted { n: 4, attempt: 1 }]);
    assert!(fx.is_empty());
    assert_eq!(
        state(&run, 4),
        StepState::Running {
            started: true,
            cancel_requested: false
        }
    );
    let err = refused(&mut run, Input::StepStarted { n: 4, attempt: 1 });
    assert!(matches!(
        err,
        MachineError::WrongState {
            n: 4,
            state: "running",
            ..
        }
    ));
    // A verification result before the work finished is out of order.
    let err = refused(
        &mut run,
        Input::VerifyResult {
            n: 4,
            attempt: 1,
            ok: true,
            detail: String::new(),
        },
    );
    assert!(matches!(err, MachineError::WrongState { n: 4, .. }));
    // The apply has no expectations beyond its exit code: done on exit 0.
    let fx = feed(&mut run, vec![finished(4, 1, 0)]);
    assert_eq!(state(&run, 4), StepState::Done);
    assert_eq!(execute_of(&fx), Some((5, 1, false)));
    // The read-back has a stdout expectation: verified.
    let fx = feed(&mut run, vec![finished(5, 1, 0)]);
    assert_eq!(fx, vec![Effect::Verify { n: 5, attempt: 1 }]);
    let err = refused(
        &mut run,
        Input::HostSetObserved {
            n: 5,
            attempt: 1,
            hosts: vec![],
        },
    );
    assert_eq!(err, MachineError::NoHostExpectation { n: 5 });
    let fx = feed(
        &mut run,
        vec![Input::VerifyResult {
            n: 5,
            attempt: 1,
            ok: true,
            detail: "[bfq] seen".into(),
        }],
    );
    assert_eq!(state(&run, 5), StepState::Done);
    assert_eq!(
        run.step_record(5).and_then(|r| r.detail.clone()),
        Some("[bfq] seen".into())
    );
    // Next node: its list-hosts.
    assert_eq!(execute_of(&fx), Some((6, 1, false)));
}

#[test]
fn failed_verification_fails_the_step() {
    let mut run = etcd_at_apply();
    feed(
        &mut run,
        vec![
            finished(4, 1, 0),
            finished(5, 1, 0),
            Input::VerifyResult {
                n: 5,
                attempt: 1,
                ok: false,
                detail: "scheduler is mq-deadline".into(),
            },
        ],
    );
    assert_eq!(
        state(&run, 5),
        StepState::Failed {
            reason: "verification failed: scheduler is mq-deadline".into()
        }
    );
}

#[test]
fn wrong_exit_code_missing_exit_code_and_spawn_error_fail() {
    let cases = [
        (Some(2), None, "exit code 2, expected 0"),
        (None, None, "no exit code"),
        (
            None,
            Some("ssh: connect refused".to_string()),
            "could not complete: ssh: connect refused",
        ),
    ];
    for (exit_code, error, want) in cases {
        let mut run = etcd_at_apply();
        feed(
            &mut run,
            vec![Input::StepFinished {
                n: 4,
                attempt: 1,
                exit_code,
                error,
            }],
        );
        let StepState::Failed { reason } = state(&run, 4) else {
            panic!("not failed");
        };
        assert!(reason.contains(want), "{reason} should contain {want}");
        assert_eq!(run.step_record(4).and_then(|r| r.exit_code), exit_code);
    }
}

#[test]
fn an_expected_nonzero_exit_code_passes_and_zero_fails() {
    let mut run = Run::new(health_plan()).expect("plan");
    let fx = feed(
        &mut run,
        vec![
            Input::Start,
            approve(1),
            finished(2, 1, 0),
            finished(3, 1, 1),
        ],
    );
    assert_eq!(state(&run, 3), StepState::Done);
    assert_eq!(execute_of(&fx), Some((4, 1, false)));

    let mut run = Run::new(health_plan()).expect("plan");
    feed(
        &mut run,
        vec![
            Input::Start,
            approve(1),
            finished(2, 1, 0),
            finished(3, 1, 0),
        ],
    );
    assert_eq!(
        state(&run, 3),
        StepState::Failed {
            reason: "exit code 0, expected 1".into()
        }
    );
}

#[test]
fn a_failed_mutating_step_runs_again_only_through_the_resume_decision() {
    let mut run = etcd_at_apply();
    feed(
        &mut run,
        vec![Input::StepStarted { n: 4, attempt: 1 }, finished(4, 1, 2)],
    );
    assert!(matches!(state(&run, 4), StepState::Failed { .. }));
    // Late or repeated executor events do not restart it.
    for input in [
        Input::StepStarted { n: 4, attempt: 1 },
        finished(4, 1, 0),
        Input::Cancelled {
            n: 4,
            attempt: 1,
            reason: "late".into(),
        },
    ] {
        let before = run.clone();
        let fx = run.step(&ev(5000, input)).expect("absorbed");
        assert!(fx.is_empty());
        assert_eq!(run, before);
    }
    // A resume does not re-run it either.
    let fx = feed(&mut run, vec![Input::Resumed]);
    assert!(execute_of(&fx).is_none());
    // Skipping it is refused: it mutates.
    let err = refused(
        &mut run,
        Input::Skip {
            n: 4,
            by: "op".into(),
            reason: "meh".into(),
        },
    );
    assert!(matches!(err, MachineError::CannotSkip { n: 4, why } if why.contains("mutates")));
    // Retrying anything but the halted step is refused.
    assert_eq!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 3,
                by: "op".into()
            }
        ),
        MachineError::NothingToRetry { n: 3 }
    );
    assert_eq!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 5,
                by: "op".into()
            }
        ),
        MachineError::NothingToRetry { n: 5 }
    );
    // Its work went out and it did not end done: what it changed is unknown, so one key
    // does not run it again; the decision does (probe, then a typed re-run from its
    // preview, whose approval is asked afresh).
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
    assert!(run.needs_decision(4));
    let fx = feed(
        &mut run,
        vec![
            Input::ProbeResult {
                n: 4,
                probe: 5,
                ok: false,
                detail: "mq-deadline".into(),
            },
            Input::RerunApproved {
                n: 4,
                by: "op".into(),
                typed: "prod".into(),
            },
        ],
    );
    assert_eq!(execute_of(&fx), Some((3, 2, false)));
    let fx = feed(&mut run, vec![finished(3, 2, 0), approve(3)]);
    assert_eq!(execute_of(&fx), Some((4, 2, true)));
    assert_eq!(*run.status(), RunStatus::Active { n: 4 });
    assert_eq!(run.finished_at(), None);
    // The first attempt's outcome arriving now is stale: dropped.
    let before = run.clone();
    assert!(run
        .step(&ev(6000, finished(4, 1, 0)))
        .expect("stale")
        .is_empty());
    assert_eq!(run, before);
    // An outcome for an attempt that never went out is refused.
    assert_eq!(
        refused(&mut run, finished(4, 3, 0)),
        MachineError::FutureAttempt {
            n: 4,
            got: 3,
            current: 2
        }
    );
    feed(&mut run, vec![finished(4, 2, 0)]);
    assert_eq!(state(&run, 4), StepState::Done);
}

#[test]
fn a_failed_read_only_step_is_not_retried_unasked_and_may_be_skipped() {
    let mut run = Run::new(health_plan()).expect("plan");
    feed(&mut run, vec![Input::Start, approve(1), finished(2, 1, 7)]);
    assert!(matches!(state(&run, 2), StepState::Failed { .. }));
    let fx = feed(&mut run, vec![Input::Resumed]);
    assert!(fx.is_empty());
    let fx = feed(
        &mut run,
        vec![Input::Skip {
            n: 2,
            by: "op".into(),
            reason: "smartctl missing".into(),
        }],
    );
    assert_eq!(
        state(&run, 2),
        StepState::Skipped {
            reason: "skipped by op: smartctl missing".into()
        }
    );
    assert_eq!(execute_of(&fx), Some((3, 1, false)));
}

#[test]
fn skip_rules() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    let skip = |n| Input::Skip {
        n,
        by: "op".into(),
        reason: "r".into(),
    };
    // Gates guard what follows; list-hosts confirms the blast radius; mutations are assumed.
    let err = refused(&mut run, skip(1));
    assert!(matches!(err, MachineError::CannotSkip { n: 1, why } if why.contains("gate")));
    let err = refused(&mut run, skip(2));
    assert!(matches!(err, MachineError::CannotSkip { n: 2, .. }));
    let err = refused(&mut run, skip(4));
    assert!(matches!(err, MachineError::CannotSkip { n: 4, why } if why.contains("mutates")));
    // A read-only, ungated step ahead may be skipped, even before the run starts.
    feed(&mut run, vec![skip(5)]);
    assert!(matches!(state(&run, 5), StepState::Skipped { .. }));
    // Skipped twice: refused, it is no longer pending.
    let err = refused(&mut run, skip(5));
    assert!(matches!(
        err,
        MachineError::WrongState {
            n: 5,
            state: "skipped",
            ..
        }
    ));
    // The run passes over it: after the apply (4) comes node 1's list-hosts (6).
    let mut run2 = etcd_at_apply();
    feed(&mut run2, vec![skip(5)]);
    let fx = feed(&mut run2, vec![finished(4, 1, 0)]);
    assert_eq!(execute_of(&fx), Some((6, 1, false)));
    // A running step cannot be skipped.
    let mut run3 = Run::new(health_plan()).expect("plan");
    feed(&mut run3, vec![Input::Start, approve(1)]);
    let err = refused(&mut run3, skip(2));
    assert!(matches!(
        err,
        MachineError::WrongState {
            n: 2,
            state: "running",
            ..
        }
    ));
}

#[test]
fn cancel_request_then_cancelled_fails_and_absorbs_a_late_finish() {
    let mut run = etcd_at_apply();
    feed(&mut run, vec![Input::StepStarted { n: 4, attempt: 1 }]);
    let fx = feed(
        &mut run,
        vec![Input::CancelRequested {
            n: 4,
            by: "op".into(),
        }],
    );
    assert_eq!(fx, vec![Effect::Cancel { n: 4, attempt: 1 }]);
    assert_eq!(
        state(&run, 4),
        StepState::Running {
            started: true,
            cancel_requested: true
        }
    );
    // Asking again sends nothing new.
    assert!(feed(
        &mut run,
        vec![Input::CancelRequested {
            n: 4,
            by: "op".into()
        }]
    )
    .is_empty());
    let fx = feed(
        &mut run,
        vec![Input::Cancelled {
            n: 4,
            attempt: 1,
            reason: "SIGTERM".into(),
        }],
    );
    assert_eq!(
        state(&run, 4),
        StepState::Failed {
            reason: "cancelled: SIGTERM".into()
        }
    );
    assert!(matches!(
        &fx[..],
        [Effect::RunFinished {
            outcome: Outcome::Failed { n: 4, .. }
        }]
    ));
    let before = run.clone();
    assert!(run
        .step(&ev(7000, finished(4, 1, 0)))
        .expect("absorbed")
        .is_empty());
    // The operator's cancel of a step that already ended is not absorbed (it would be
    // journaled as a cancel that reached nothing): refused, the run unchanged.
    let err = refused(
        &mut run,
        Input::CancelRequested {
            n: 4,
            by: "op".into(),
        },
    );
    assert!(
        matches!(err, MachineError::NothingToCancel { n: 4, .. }),
        "{err:?}"
    );
    assert_eq!(run, before);
}

#[test]
fn a_finish_racing_a_cancel_request_still_fails_the_step() {
    let mut run = etcd_at_apply();
    feed(
        &mut run,
        vec![
            Input::CancelRequested {
                n: 4,
                by: "op".into(),
            },
            finished(4, 1, 0),
        ],
    );
    let StepState::Failed { reason } = state(&run, 4) else {
        panic!("not failed");
    };
    assert!(
        reason.contains("cancel requested") && reason.contains("exit code 0"),
        "{reason}"
    );
}

#[test]
fn cancel_is_refused_where_nothing_runs() {
    let mut run = etcd_at_apply();
    let err = refused(
        &mut run,
        Input::CancelRequested {
            n: 5,
            by: "op".into(),
        },
    );
    assert!(matches!(
        err,
        MachineError::NothingToCancel {
            n: 5,
            state: "pending",
        }
    ));
    feed(&mut run, vec![finished(4, 1, 0), finished(5, 1, 0)]);
    // Step 4 ended while a "cancel the running step 4?" question was on the screen: the
    // cancel is refused (said, not journaled), never absorbed as if it had reached it.
    let err = refused(
        &mut run,
        Input::CancelRequested {
            n: 4,
            by: "op".into(),
        },
    );
    assert!(
        matches!(
            err,
            MachineError::NothingToCancel {
                n: 4,
                state: "done"
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("nothing is running to cancel"),
        "{err}"
    );
    let err = refused(
        &mut run,
        Input::CancelRequested {
            n: 5,
            by: "op".into(),
        },
    );
    assert!(matches!(
        err,
        MachineError::NothingToCancel {
            n: 5,
            state: "verifying",
        }
    ));
    let err = refused(
        &mut run,
        Input::Cancelled {
            n: 5,
            attempt: 1,
            reason: "x".into(),
        },
    );
    assert!(matches!(err, MachineError::WrongState { n: 5, .. }));
}

#[test]
fn abort_while_running_cancels_and_ends_the_run() {
    let mut run = etcd_at_apply();
    let fx = feed(
        &mut run,
        vec![Input::Abort {
            by: "op".into(),
            reason: "VIP lost".into(),
        }],
    );
    assert_eq!(
        fx,
        vec![
            Effect::Cancel { n: 4, attempt: 1 },
            Effect::RunFinished {
                outcome: Outcome::Aborted {
                    by: "op".into(),
                    reason: "VIP lost".into()
                }
            }
        ]
    );
    assert!(matches!(state(&run, 4), StepState::Failed { .. }));
    assert_eq!(run.outcome(), RunOutcome::Aborted);
    // Late executor events are absorbed; anything that would move the run is refused.
    assert!(run
        .step(&ev(8000, finished(4, 1, 0)))
        .expect("absorbed")
        .is_empty());
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
    assert!(matches!(
        refused(&mut run, approve(5)),
        MachineError::RunOver { .. }
    ));
    assert!(matches!(
        refused(
            &mut run,
            Input::Abort {
                by: "op".into(),
                reason: "again".into()
            }
        ),
        MachineError::RunOver { status } if status.contains("VIP lost")
    ));
    assert!(matches!(
        refused(
            &mut run,
            Input::Skip {
                n: 5,
                by: "op".into(),
                reason: "x".into()
            }
        ),
        MachineError::RunOver { .. }
    ));
    assert_eq!(
        refused(&mut run, Input::Start),
        MachineError::AlreadyStarted
    );
}

#[test]
fn abort_at_a_gate_or_while_verifying_or_before_start() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(&mut run, vec![Input::Start]);
    let fx = feed(
        &mut run,
        vec![Input::Abort {
            by: "op".into(),
            reason: "later".into(),
        }],
    );
    assert!(matches!(state(&run, 1), StepState::Skipped { .. }));
    assert_eq!(fx.len(), 1, "no cancel when nothing runs: {fx:?}");
    // Late gate answer after the abort: absorbed.
    assert!(run
        .step(&ev(1, typed(1, "prod")))
        .expect("absorbed")
        .is_empty());

    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(
        &mut run,
        vec![Input::Start, typed(1, "prod"), finished(2, 1, 0)],
    );
    let fx = feed(
        &mut run,
        vec![Input::Abort {
            by: "op".into(),
            reason: "x".into(),
        }],
    );
    assert!(matches!(state(&run, 2), StepState::Failed { .. }));
    assert!(!fx.iter().any(|e| matches!(e, Effect::Cancel { .. })));

    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(
        &mut run,
        vec![Input::Abort {
            by: "op".into(),
            reason: "x".into(),
        }],
    );
    assert_eq!(run.outcome(), RunOutcome::Aborted);
    assert!(run.steps().all(|(_, r)| r.state == StepState::Pending));
}

#[test]
fn authorise_gate_records_the_flag_and_execute_carries_it() {
    let mut run = Run::new(memattr_plan()).expect("plan");
    feed(&mut run, vec![Input::Start]);
    assert!(!run.is_authorised("memattr_survey_reboots_authorised"));
    assert_eq!(
        refused(&mut run, typed(1, "yes")),
        MachineError::GateNotTyped { n: 1 }
    );
    let fx = feed(
        &mut run,
        vec![Input::GateAnswered {
            n: 1,
            answer: GateAnswer::Approved {
                by: "alice".into(),
                note: Some("maintenance window".into()),
            },
        }],
    );
    assert!(run.is_authorised("memattr_survey_reboots_authorised"));
    let grant = &run.authorised()["memattr_survey_reboots_authorised"];
    assert_eq!(grant.by, "alice");
    assert_eq!(grant.at, Timestamp(1000));
    assert_eq!(grant.note.as_deref(), Some("maintenance window"));
    // The list-hosts step's expected set comes from its confirm-hosts gate.
    assert_eq!(execute_of(&fx), Some((2, 1, false)));
    let fx = feed(
        &mut run,
        vec![
            finished(2, 1, 0),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec![
                    "k3s-prod-3".into(),
                    "k3s-prod-1".into(),
                    "k3s-prod-2".into(),
                ],
            },
            typed(2, "3"),
        ],
    );
    let Some(Effect::Execute(x)) = fx.first() else {
        panic!("{fx:?}");
    };
    assert_eq!((x.n(), x.mutates()), (3, true));
    assert_eq!(
        x.authorised(),
        ["memattr_survey_reboots_authorised".to_string()]
    );
}

#[test]
fn manual_step_is_done_by_confirmation_and_never_executes() {
    let mut run = Run::new(memattr_plan()).expect("plan");
    let fx = feed(
        &mut run,
        vec![
            Input::Start,
            approve(1),
            finished(2, 1, 0),
            Input::HostSetObserved {
                n: 2,
                attempt: 1,
                hosts: vec![
                    "k3s-prod-1".into(),
                    "k3s-prod-2".into(),
                    "k3s-prod-3".into(),
                ],
            },
            typed(2, "3"),
            finished(3, 1, 0),
        ],
    );
    assert_eq!(
        fx,
        vec![Effect::AskGate {
            n: 4,
            gate: Gate::ConfirmDone
        }]
    );
    let fx = feed(&mut run, vec![approve(4)]);
    assert_eq!(state(&run, 4), StepState::Done);
    assert_eq!(execute_of(&fx), Some((5, 1, false)));
    // The probe verifies, then the run succeeds.
    feed(&mut run, vec![finished(5, 1, 0)]);
    let fx = feed(
        &mut run,
        vec![Input::VerifyResult {
            n: 5,
            attempt: 1,
            ok: true,
            detail: "connected".into(),
        }],
    );
    assert_eq!(
        fx,
        vec![Effect::RunFinished {
            outcome: Outcome::Succeeded
        }]
    );
    assert_eq!(*run.status(), RunStatus::Succeeded);
    assert!(run.steps().all(|(_, r)| r.state == StepState::Done));
    // Late events after success are absorbed; others are refused.
    assert!(run
        .step(&ev(1, finished(5, 1, 0)))
        .expect("absorbed")
        .is_empty());
}

#[test]
fn a_gate_step_without_a_gate_passes_with_nothing_to_do() {
    let mut plan = health_plan();
    plan.steps[0].gate = None;
    let mut run = Run::new(plan).expect("plan");
    let fx = feed(&mut run, vec![Input::Start]);
    assert_eq!(state(&run, 1), StepState::Done);
    assert_eq!(execute_of(&fx), Some((2, 1, false)));
}

#[test]
fn resume_interrupts_in_flight_work_and_reasks_open_gates() {
    // Running -> interrupted.
    let mut run = etcd_at_apply();
    feed(&mut run, vec![Input::StepStarted { n: 4, attempt: 1 }]);
    assert_eq!(run.in_flight(), vec![4]);
    let fx = feed(&mut run, vec![Input::Resumed]);
    assert_eq!(
        fx,
        vec![Effect::RunFinished {
            outcome: Outcome::Interrupted { n: 4 }
        }]
    );
    assert_eq!(
        state(&run, 4),
        StepState::Interrupted {
            during: InFlight::Running
        }
    );
    assert_eq!(run.outcome(), RunOutcome::Interrupted);
    assert!(run.in_flight().is_empty());
    // The dead process's finish is absorbed; the apply changed systems, so only the resume
    // decision (probe first, then a typed re-run from its preview) runs it again.
    assert!(run
        .step(&ev(1, finished(4, 1, 0)))
        .expect("absorbed")
        .is_empty());
    assert_eq!(
        refused(
            &mut run,
            Input::RetryApproved {
                n: 4,
                by: "op".into(),
            }
        ),
        MachineError::NeedsResumeDecision { n: 4 }
    );
    let fx = feed(
        &mut run,
        vec![
            Input::ProbeResult {
                n: 4,
                probe: 5,
                ok: true,
                detail: "[bfq]".into(),
            },
            Input::RerunApproved {
                n: 4,
                by: "op".into(),
                typed: "prod".into(),
            },
        ],
    );
    assert_eq!(execute_of(&fx), Some((3, 2, false)));

    // Verifying -> interrupted.
    let mut run = etcd_at_apply();
    feed(
        &mut run,
        vec![finished(4, 1, 0), finished(5, 1, 0), Input::Resumed],
    );
    assert_eq!(
        state(&run, 5),
        StepState::Interrupted {
            during: InFlight::Verifying
        }
    );

    // Awaiting a gate: asked again, nothing lost.
    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(&mut run, vec![Input::Start]);
    let fx = feed(&mut run, vec![Input::Resumed]);
    assert!(matches!(&fx[..], [Effect::AskGate { n: 1, .. }]));
    assert!(matches!(state(&run, 1), StepState::AwaitingGate { .. }));

    // Not started, or over: nothing.
    let mut run = Run::new(etcd_plan()).expect("plan");
    assert!(feed(&mut run, vec![Input::Resumed]).is_empty());
    assert_eq!(*run.status(), RunStatus::NotStarted);
}

#[test]
fn unknown_steps_are_refused() {
    let mut run = Run::new(etcd_plan()).expect("plan");
    feed(&mut run, vec![Input::Start]);
    for input in [
        approve(42),
        finished(0, 1, 0),
        Input::RetryApproved {
            n: 99,
            by: "op".into(),
        },
        Input::Skip {
            n: 10,
            by: "op".into(),
            reason: "x".into(),
        },
    ] {
        let err = refused(&mut run, input);
        assert!(matches!(err, MachineError::UnknownStep { .. }), "{err:?}");
        assert!(err.to_string().contains("no step"));
    }
}

#[test]
fn plans_with_duplicate_steps_or_disagreeing_host_sets_are_refused() {
    let mut plan = etcd_plan();
    plan.steps[3].n = 2;
    assert_eq!(
        Run::new(plan).expect_err("dup"),
        MachineError::DuplicateStep { n: 2 }
    );
    let mut plan = etcd_plan();
    plan.steps[1].gate = Some(confirm_hosts(&["k3s-prod-1"]));
    assert!(matches!(
        Run::new(plan).expect_err("mismatch"),
        MachineError::InvalidPlan { n: 2, .. }
    ));
}

#[test]
fn a_list_hosts_step_without_an_expected_host_set_is_refused() {
    let mut plan = etcd_plan();
    plan.steps[1].gate = None;
    plan.steps[1].expect = None;
    let err = Run::new(plan).expect_err("no expectation");
    assert!(
        matches!(&err, MachineError::InvalidPlan { n: 2, why } if why.contains("expected host set")),
        "{err}"
    );
    // Either statement alone is enough.
    let mut plan = etcd_plan();
    plan.steps[1].expect = None;
    Run::new(plan).expect("gate alone");
    let mut plan = etcd_plan();
    plan.steps[1].gate = None;
    Run::new(plan).expect("expect alone");
}

#[test]
fn inputs_serialise_tagged_and_round_trip() {
    let inputs = vec![
        Input::Start,
        approve(1),
        Input::GateAnswered {
            n: 1,
            answer: GateAnswer::Rejected {
                by: "a".into(),
                reason: "b".into(),
            },
        },
        typed(2, "1"),
        Input::StepStarted { n: 2, attempt: 1 },
        finished(2, 1, 0),
        Input::StepFinished {
            n: 2,
            attempt: 1,
            exit_code: None,
            error: Some("spawn".into()),
        },
        Input::VerifyResult {
            n: 2,
            attempt: 1,
            ok: false,
            detail: "d".into(),
        },
        Input::HostSetObserved {
            n: 2,
            attempt: 1,
            hosts: vec!["h".into()],
        },
        Input::CancelRequested {
            n: 2,
            by: "op".into(),
        },
        Input::Cancelled {
            n: 2,
            attempt: 1,
            reason: "r".into(),
        },
        Input::Abort {
            by: "op".into(),
            reason: "r".into(),
        },
        Input::RetryApproved {
            n: 2,
            by: "op".into(),
        },
        Input::Skip {
            n: 2,
            by: "op".into(),
            reason: "r".into(),
        },
        Input::Resumed,
    ];
    for input in inputs {
        let event = Event::new(Timestamp(5), input);
        let json = serde_json::to_value(&event).expect("serialise");
        assert_eq!(json["input"]["type"], event.input.name(), "{json}");
        let back: Event = serde_json::from_value(json).expect("deserialise");
        assert_eq!(back, event);
    }
    let approved = serde_json::to_string(&approve(3)).expect("serialise");
    assert_eq!(
        approved,
        r#"{"type":"gate-answered","n":3,"answer":{"kind":"approved","by":"op"}}"#
    );
    // A misspelt field is an error, not silently dropped.
    let bad = r#"{"type":"retry-approved","n":4,"by":"op","surprize":1}"#;
    assert!(serde_json::from_str::<Input>(bad).is_err());
}

#[test]
fn timestamps_display_as_rfc3339_utc() {
    assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00.000Z");
    // 2026-09-07T10:15:00.123Z
    assert_eq!(
        Timestamp(1_788_776_100_123).to_string(),
        "2026-09-07T10:15:00.123Z"
    );
    // A leap day.
    assert_eq!(
        Timestamp(951_782_400_000).to_string(),
        "2000-02-29T00:00:00.000Z"
    );
}

#[test]
fn step_kinds_decide_work_and_gate_phase() {
    use hk_engine::runbook::machine::{gate_phase, has_work, needs_verify};
    let plan = etcd_plan();
    assert!(!has_work(&plan.steps[0]));
    assert_eq!(gate_phase(&plan.steps[0]), Some(GatePhase::BeforeWork));
    assert_eq!(gate_phase(&plan.steps[1]), Some(GatePhase::AfterWork));
    assert_eq!(gate_phase(&plan.steps[2]), Some(GatePhase::AfterWork));
    assert_eq!(gate_phase(&plan.steps[3]), None);
    assert!(needs_verify(&plan.steps[1]) && !needs_verify(&plan.steps[2]));
    // A review gate on a step without work is simply asked first.
    let s = step(
        1,
        "g",
        StepKind::Gate,
        None,
        false,
        Some(Gate::ApproveDiff),
        None,
    );
    assert_eq!(gate_phase(&s), Some(GatePhase::BeforeWork));
}
