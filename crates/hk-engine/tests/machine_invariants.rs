//! Property-style: thousands of generated input sequences over real-shaped plans, checking
//! the rules that must hold whatever the operator and the executor send.

use hk_test_support::machine as machine_common;

use std::collections::{BTreeMap, BTreeSet};

use hk_engine::runbook::machine::{Effect, Input, Outcome, Run, RunStatus, StepState};
use machine_common::*;

#[test]
fn safety_rules_hold_for_generated_sequences() {
    let mut accepted_total = 0usize;
    let mut refused_total = 0usize;
    let mut executes_total = 0usize;
    let mut retried_executes = 0usize;
    for plan in all_plans() {
        // 450 seeds: outcomes of work whose start was never recorded are refused now, so
        // fewer sequences fail and retry; more seeds keep the machine as exercised.
        for seed in 0..450 {
            let mut rng = Rng::new(seed);
            let mut run = Run::new(plan.clone()).expect("plan");
            // Steps that failed or were interrupted and have not had a RetryApproved since.
            let mut needs_retry: BTreeSet<usize> = BTreeSet::new();
            let mut last_attempt: BTreeMap<usize, u32> = BTreeMap::new();
            for t in 0..120 {
                let input = next_input(&run, &mut rng);
                let before = run.clone();
                match run.step(&ev(t, input.clone())) {
                    Err(_) => {
                        refused_total += 1;
                        assert_eq!(run, before, "refused input changed the run");
                    }
                    Ok(fx) => {
                        accepted_total += 1;
                        if let Input::RetryApproved { n, .. } = input {
                            needs_retry.remove(&n);
                        }
                        for e in &fx {
                            if let Effect::Execute(x) = e {
                                executes_total += 1;
                                let n = x.n();
                                assert!(
                                    !needs_retry.contains(&n),
                                    "{} seed {seed}: step {n} re-executed without RetryApproved",
                                    plan.runbook
                                );
                                let prev = last_attempt.insert(n, x.attempt()).unwrap_or(0);
                                assert!(x.attempt() > prev, "attempts only go up");
                                if prev > 0 {
                                    retried_executes += 1;
                                }
                                // Nothing after a failed step runs: every earlier step is
                                // done or skipped.
                                for (s, r) in run.steps() {
                                    if s.n == n {
                                        break;
                                    }
                                    assert!(
                                        matches!(
                                            r.state,
                                            StepState::Done | StepState::Skipped { .. }
                                        ),
                                        "{} seed {seed}: step {n} executes while step {} is {:?}",
                                        plan.runbook,
                                        s.n,
                                        r.state
                                    );
                                }
                                let planned =
                                    run.plan().steps.iter().find(|s| s.n == n).expect("step");
                                assert_eq!(x.mutates(), planned.mutates);
                            }
                            if let Effect::RunFinished { outcome } = e {
                                match outcome {
                                    Outcome::Succeeded => {
                                        assert!(run.steps().all(|(_, r)| matches!(
                                            r.state,
                                            StepState::Done | StepState::Skipped { .. }
                                        )))
                                    }
                                    Outcome::Failed { n, .. } | Outcome::Interrupted { n } => {
                                        assert_eq!(*run.status(), RunStatus::Halted { n: *n });
                                    }
                                    Outcome::Aborted { .. } => {}
                                }
                            }
                        }
                        for (s, r) in run.steps() {
                            if matches!(
                                r.state,
                                StepState::Failed { .. } | StepState::Interrupted { .. }
                            ) {
                                needs_retry.insert(s.n);
                            }
                        }
                        // At most one step is between pending and a terminal state.
                        let open = run
                            .steps()
                            .filter(|(_, r)| {
                                !r.state.is_terminal() && r.state != StepState::Pending
                            })
                            .count();
                        assert!(open <= 1, "{open} steps open at once");
                    }
                }
            }
        }
    }
    // The generator must actually exercise the machine, or the rules above prove nothing.
    assert!(accepted_total > 20_000, "accepted {accepted_total}");
    assert!(refused_total > 1_000, "refused {refused_total}");
    assert!(executes_total > 5_000, "executes {executes_total}");
    assert!(
        retried_executes > 200,
        "retried executes {retried_executes}"
    );
}
