//! Observe mode: a read-only run cannot produce an Execute for a mutating step.

use hk_test_support::machine as machine_common;

use hk_engine::runbook::machine::{Effect, Input, Mode, Outcome, Run, StepState};
use machine_common::*;

#[test]
fn read_only_run_skips_mutating_steps_and_runs_the_rest() {
    let mut run = Run::new_read_only(etcd_plan()).expect("plan");
    assert_eq!(run.mode(), Mode::Observe);
    let mut executed = Vec::new();
    let inputs = vec![
        Input::Start,
        typed(1, "prod"),
        Input::StepFinished {
            n: 2,
            attempt: 1,
            exit_code: Some(0),
            error: None,
        },
        Input::HostSetObserved {
            n: 2,
            attempt: 1,
            hosts: vec!["k3s-prod-3".into()],
        },
        typed(2, "1"),
        Input::StepFinished {
            n: 3,
            attempt: 1,
            exit_code: Some(0),
            error: None,
        },
        approve(3),
    ];
    let mut last = Vec::new();
    for (i, input) in inputs.into_iter().enumerate() {
        for input in started_first(&run, input) {
            last = run.step(&ev(i as u64, input)).expect("accepted");
        }
        for e in &last {
            if let Effect::Execute(x) = e {
                executed.push((x.n(), x.mutates()));
            }
        }
    }
    // After approving the diff, the apply (4) is skipped and the read-back (5) runs.
    assert_eq!(executed, vec![(2, false), (3, false), (5, false)]);
    assert_eq!(
        run.step_record(4).map(|r| r.state.clone()),
        Some(StepState::Skipped {
            reason: "observe mode".into()
        })
    );
    assert_eq!(
        run.step_record(4).map(|r| r.attempt),
        Some(0),
        "never entered"
    );
    assert!(last
        .iter()
        .any(|e| matches!(e, Effect::Execute(x) if x.n() == 5)));
}

#[test]
fn a_plan_of_only_mutating_steps_yields_no_execute_at_all() {
    let mut plan = etcd_plan();
    for s in &mut plan.steps {
        s.mutates = true;
        s.gate = None;
    }
    let mut run = Run::new_read_only(plan).expect("plan");
    let fx = run.step(&ev(0, Input::Start)).expect("start");
    assert_eq!(
        fx,
        vec![Effect::RunFinished {
            outcome: Outcome::Succeeded
        }]
    );
    assert!(run.steps().all(
        |(_, r)| matches!(&r.state, StepState::Skipped { reason } if reason == "observe mode")
    ));
}

#[test]
fn no_sequence_of_inputs_gets_an_execute_for_a_mutating_step_in_observe_mode() {
    for plan in all_plans() {
        for seed in 0..300 {
            let mut rng = Rng::new(seed);
            let mut run = Run::new_read_only(plan.clone()).expect("plan");
            for t in 0..80 {
                let input = next_input(&run, &mut rng);
                if let Ok(fx) = run.step(&ev(t, input)) {
                    for e in fx {
                        if let Effect::Execute(x) = e {
                            assert!(
                                !x.mutates(),
                                "{}: seed {seed}: Execute of step {}",
                                plan.runbook,
                                x.n()
                            );
                            let planned = run
                                .plan()
                                .steps
                                .iter()
                                .find(|s| s.n == x.n())
                                .expect("step");
                            assert!(!planned.mutates);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn retry_or_skip_cannot_reach_a_mutating_step_in_observe_mode() {
    let mut run = Run::new_read_only(etcd_plan()).expect("plan");
    run.step(&ev(0, Input::Start)).expect("start");
    // The mutating step stays pending until the run reaches it (then it is skipped); a retry
    // cannot pull it forward.
    let err = run
        .step(&ev(
            1,
            Input::RetryApproved {
                n: 4,
                by: "op".into(),
            },
        ))
        .expect_err("nothing to retry");
    assert!(err.to_string().contains("step 4"));
}
