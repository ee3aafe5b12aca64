//! Every shipped runbook, planned for every environment it names on the bundled sample
//! repo, driven through the real state machine and journal by an operator who approves
//! everything and executors that succeed. This ties the planner's output to the machine's
//! expectations (gates where the machine wants them, host sets it can check), and proves
//! the journal replays to the same run.
use std::path::Path;

use hk_console::context::{load_runbooks, plan_runbook};
use hk_console::journal::{replay, Journal};
use hk_console::repo::Repo;
use hk_console::runbook::machine::{
    Effect, Event, GateAnswer, Input, Mode, Outcome, Run, RunOutcome, StepState, Timestamp,
};
use hk_console::runbook::plan::{Gate, Plan};

fn sample() -> Repo {
    Repo::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")).expect("sample")
}

/// Plans for every (runbook, env) pair; single-host runbooks get the env's first host of
/// their target (its first server, or its first VPN gateway).
fn all_plans() -> Vec<Plan> {
    let repo = sample();
    let set = load_runbooks(None).expect("runbooks");
    let mut plans = Vec::new();
    for loaded in set.iter() {
        let rb = &loaded.runbook;
        for env in &rb.environments {
            let single = rb.target.as_ref().is_some_and(|t| t.single);
            // The first host of its target: a gateway for a runbook on the VPN gateways.
            let e = repo.environment(env).expect("env");
            let on_gateways = rb
                .target
                .as_ref()
                .is_some_and(|t| t.group == "vpn_gateways");
            let host = single.then(|| {
                if on_gateways {
                    e.vpn_gateways[0].name.clone()
                } else {
                    e.servers[0].name.clone()
                }
            });
            let plan = plan_runbook(&repo, &set, &rb.id, env, host.as_deref())
                .unwrap_or_else(|e| panic!("{} for {env}: {e}", rb.id));
            plans.push(plan);
        }
    }
    assert!(
        plans.len() >= 14,
        "expected every runbook for each of its envs, got {}",
        plans.len()
    );
    plans
}

/// Answers every effect the way a willing operator and working executors would.
fn respond(plan: &Plan, effect: &Effect, clock: &mut u64) -> Vec<Input> {
    *clock += 1000;
    let by = "tester".to_string();
    match effect {
        Effect::AskGate { n, gate } => vec![match gate {
            Gate::TypedConfirm { phrase } => Input::TypedText {
                n: *n,
                by,
                text: phrase.clone(),
                note: None,
            },
            Gate::ConfirmHosts { expected } => Input::TypedText {
                n: *n,
                by,
                text: expected.len().to_string(),
                note: None,
            },
            _ => Input::GateAnswered {
                n: *n,
                answer: GateAnswer::Approved { by, note: None },
            },
        }],
        Effect::GateNotPassed { n, why } => panic!("{}: gate {n} not passed: {why}", plan.runbook),
        Effect::Execute(x) => {
            vec![
                Input::StepStarted {
                    n: x.n(),
                    attempt: x.attempt(),
                },
                Input::StepFinished {
                    n: x.n(),
                    attempt: x.attempt(),
                    exit_code: Some(0),
                    error: None,
                },
            ]
        }
        Effect::Verify { n, attempt } => {
            let step = plan.steps.iter().find(|s| s.n == *n).expect("step");
            match step.expect.as_ref().and_then(|e| e.hosts.clone()) {
                // A list-hosts step is verified by the host set ansible printed, which is a
                // Python set: hand it back in another order.
                Some(mut hosts) => {
                    hosts.reverse();
                    vec![Input::HostSetObserved {
                        n: *n,
                        attempt: *attempt,
                        hosts,
                    }]
                }
                None => vec![Input::VerifyResult {
                    n: *n,
                    attempt: *attempt,
                    ok: true,
                    detail: "ok".into(),
                }],
            }
        }
        Effect::Cancel { .. } => panic!("nobody asked to cancel"),
        Effect::RunFinished { .. } => Vec::new(),
    }
}

/// Drive a run to its end; returns the events fed, in order.
fn drive(run: &mut Run, mut sink: impl FnMut(&mut Run, Event) -> Vec<Effect>) -> Vec<Event> {
    let plan = run.plan().clone();
    let mut clock = 1_789_000_000_000u64;
    let mut fed = Vec::new();
    let mut queue = vec![Input::Start];
    let mut guard = 0;
    while let Some(input) = queue.first().cloned() {
        queue.remove(0);
        guard += 1;
        assert!(guard < 10_000, "{}: the run does not end", plan.runbook);
        let event = Event {
            at: Timestamp(clock),
            input,
        };
        fed.push(event.clone());
        for effect in sink(run, event) {
            queue.extend(respond(&plan, &effect, &mut clock));
        }
    }
    fed
}

#[test]
fn every_shipped_plan_runs_to_success_and_the_journal_replays_it() {
    let dir = tempfile::tempdir().expect("tmp");
    for plan in all_plans() {
        let label = format!("{} for {}", plan.runbook, plan.env);
        let (mut journal, mut run) = Journal::begin(
            dir.path(),
            plan.clone(),
            Mode::Operate,
            "tester",
            Timestamp(1_789_000_000_000),
        )
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        drive(&mut run, |run, ev| {
            journal
                .record(run, ev)
                .unwrap_or_else(|e| panic!("{label}: {e}"))
        });
        assert_eq!(run.outcome(), RunOutcome::Succeeded, "{label}");
        for (step, rec) in run.steps() {
            assert!(
                matches!(rec.state, StepState::Done),
                "{label}: step {} is {:?}",
                step.n,
                rec.state
            );
        }
        let replayed = replay(journal.path()).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(
            replayed.run, run,
            "{label}: replay differs from the live run"
        );
        assert!(
            replayed.warnings.is_empty(),
            "{label}: {:?}",
            replayed.warnings
        );
    }
}

#[test]
fn observe_mode_never_executes_a_mutating_step_of_any_shipped_plan() {
    for plan in all_plans() {
        let label = format!("{} for {}", plan.runbook, plan.env);
        let mut run = Run::with_mode(plan.clone(), Mode::Observe).expect("observe run");
        let mut executed_mutating = Vec::new();
        drive(&mut run, |run, ev| {
            let effects = run.step(&ev).unwrap_or_else(|e| panic!("{label}: {e}"));
            for e in &effects {
                if let Effect::Execute(x) = e {
                    if x.mutates() {
                        executed_mutating.push(x.n());
                    }
                }
            }
            effects
        });
        assert!(
            executed_mutating.is_empty(),
            "{label}: executed mutating steps {executed_mutating:?}"
        );
        if plan.mutates {
            assert!(
                run.steps()
                    .any(|(s, r)| s.mutates && matches!(r.state, StepState::Skipped { .. })),
                "{label}: mutating steps should end skipped in observe mode"
            );
        }
    }
}

#[test]
fn a_host_set_that_differs_blocks_the_real_etcd_plan() {
    let repo = sample();
    let set = load_runbooks(None).expect("runbooks");
    let plan = plan_runbook(&repo, &set, "etcd-io-priority", "prod", None).expect("plan");
    let mut run = Run::new(plan.clone()).expect("run");
    let first = &plan.steps[0];
    assert_eq!(first.host.as_deref(), Some("k3s-prod-3"));
    let t = Timestamp(1);
    let mut effects = run
        .step(&Event {
            at: t,
            input: Input::Start,
        })
        .expect("start");
    let Some(Effect::Execute(x)) = effects.pop() else {
        panic!("expected the list-hosts to run first")
    };
    run.step(&Event {
        at: t,
        input: Input::StepStarted {
            n: x.n(),
            attempt: x.attempt(),
        },
    })
    .expect("started");
    run.step(&Event {
        at: t,
        input: Input::StepFinished {
            n: x.n(),
            attempt: x.attempt(),
            exit_code: Some(0),
            error: None,
        },
    })
    .expect("finished");
    // The blast-radius incident: the play would have hit all three prod hosts.
    let out = run
        .step(&Event {
            at: t,
            input: Input::HostSetObserved {
                n: x.n(),
                attempt: x.attempt(),
                hosts: vec![
                    "k3s-prod-1".into(),
                    "k3s-prod-2".into(),
                    "k3s-prod-3".into(),
                ],
            },
        })
        .expect("observed");
    let failed = out.iter().find_map(|e| match e {
        Effect::RunFinished {
            outcome: Outcome::Failed { n, reason },
        } => Some((*n, reason.clone())),
        _ => None,
    });
    let (n, reason) = failed.unwrap_or_else(|| panic!("the run must halt, got {out:?}"));
    assert_eq!(n, first.n);
    assert!(
        reason.contains("k3s-prod-1") && reason.contains("k3s-prod-2"),
        "{reason}"
    );
    // Nothing after it ran.
    assert!(run
        .steps()
        .skip(1)
        .all(|(_, r)| matches!(r.state, StepState::Pending)));
}
