//! The machine's resume inputs: an interrupted step that changes systems is decided on
//! (its process known gone, its probe run, then a typed re-run from its preview, a typed
//! mark-done with a reason, or an abort), never retried on one key; the console's own
//! abandonment and its processes are journaled; and every such run replays to itself.

mod machine_common;

use hk_console::runbook::machine::{
    Effect, InFlight, Input, MachineError, Outcome, Run, RunStatus, StepState,
};
use machine_common::*;

fn feed(
    run: &mut Run,
    events: &mut Vec<hk_console::runbook::machine::Event>,
    inputs: Vec<Input>,
) -> Vec<Effect> {
    let mut last = Vec::new();
    for input in inputs {
        let name = input.name();
        let e = ev(2000 + events.len() as u64, input);
        last = run
            .step(&e)
            .unwrap_or_else(|err| panic!("{name} refused: {err}"));
        events.push(e);
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
fn at_apply() -> (Run, Vec<hk_console::runbook::machine::Event>) {
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

fn replays_to_itself(run: &Run, events: &[hk_console::runbook::machine::Event]) {
    let again = Run::replay(etcd_plan(), run.mode(), events).expect("replay");
    assert_eq!(&again, run, "replaying the events rebuilds the run exactly");
    // And through JSON, as the journal stores them.
    let json: Vec<String> = events
        .iter()
        .map(|e| serde_json::to_string(e).expect("json"))
        .collect();
    let back: Vec<hk_console::runbook::machine::Event> = json
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
