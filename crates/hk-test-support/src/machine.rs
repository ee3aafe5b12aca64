//! Shared by the machine and journal tests: hand-built plans shaped like the shipped
//! runbooks, and a seeded random driver that feeds a run plausible (and sometimes illegal)
//! inputs.

use hk_engine::runbook::machine::{Event, GateAnswer, Input, Run, RunStatus, StepState, Timestamp};
use hk_engine::runbook::plan::{Expect, Gate, Plan, PlannedStep, StepKind};

pub fn step(
    n: usize,
    id: &str,
    kind: StepKind,
    host: Option<&str>,
    mutates: bool,
    gate: Option<Gate>,
    expect: Option<Expect>,
) -> PlannedStep {
    let command = match kind {
        StepKind::Gate | StepKind::Manual => None,
        _ => Some(vec!["true".to_string()]),
    };
    PlannedStep {
        n,
        id: id.to_string(),
        kind,
        host: host.map(str::to_string),
        mutates,
        gate,
        command,
        expect,
        title: format!("{id} {}", host.unwrap_or("")),
        cwd: None,
        source: None,
        blast_radius: None,
        declared_read_only: None,
    }
}

pub fn hosts_expect(hosts: &[&str]) -> Expect {
    Expect {
        hosts: Some(hosts.iter().map(|h| h.to_string()).collect()),
        ..Expect::default()
    }
}

pub fn confirm_hosts(hosts: &[&str]) -> Gate {
    Gate::ConfirmHosts {
        expected: hosts.iter().map(|h| h.to_string()).collect(),
    }
}

/// Steps for one node of the etcd I/O priority rollout, starting at number `n`.
fn etcd_node(n: usize, host: &str) -> Vec<PlannedStep> {
    vec![
        step(
            n,
            "list-hosts",
            StepKind::ListHosts,
            Some(host),
            false,
            Some(confirm_hosts(&[host])),
            Some(hosts_expect(&[host])),
        ),
        step(
            n + 1,
            "check-diff",
            StepKind::Ansible,
            Some(host),
            false,
            Some(Gate::ApproveDiff),
            None,
        ),
        step(
            n + 2,
            "apply",
            StepKind::Ansible,
            Some(host),
            true,
            None,
            None,
        ),
        step(
            n + 3,
            "read-back",
            StepKind::Ssh,
            Some(host),
            false,
            None,
            Some(Expect {
                stdout_contains: Some("[bfq]".into()),
                ..Expect::default()
            }),
        ),
    ]
}

/// etcd-io-priority on prod: a typed confirm, then node 3 before node 1.
/// Steps: 1 typed-confirm; 2-5 k3s-prod-3 (list, check, apply, read back); 6-9 k3s-prod-1.
pub fn etcd_plan() -> Plan {
    let mut steps = vec![step(
        1,
        "confirm-env",
        StepKind::Gate,
        None,
        false,
        Some(Gate::TypedConfirm {
            phrase: "prod".into(),
        }),
        None,
    )];
    steps.extend(etcd_node(2, "k3s-prod-3"));
    steps.extend(etcd_node(6, "k3s-prod-1"));
    Plan {
        runbook: "etcd-io-priority".into(),
        env: "prod".into(),
        mutates: true,
        steps,
    }
}

/// memattr-survey: authorise the reboot flag, list the three hosts, run the survey, then a
/// manual confirmation and a TCP probe.
pub fn memattr_plan() -> Plan {
    let hosts = ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"];
    Plan {
        runbook: "memattr-survey".into(),
        env: "prod".into(),
        mutates: true,
        steps: vec![
            step(
                1,
                "authorise-reboots",
                StepKind::Gate,
                None,
                false,
                Some(Gate::Authorise {
                    flag: "memattr_survey_reboots_authorised".into(),
                }),
                None,
            ),
            step(
                2,
                "list-hosts",
                StepKind::ListHosts,
                None,
                false,
                Some(confirm_hosts(&hosts)),
                None,
            ),
            step(3, "survey", StepKind::Ansible, None, true, None, None),
            step(
                4,
                "confirm-console",
                StepKind::Manual,
                None,
                false,
                Some(Gate::ConfirmDone),
                None,
            ),
            step(
                5,
                "api-answers",
                StepKind::Probe,
                None,
                false,
                None,
                Some(Expect {
                    tcp: Some("vip:6443".into()),
                    ..Expect::default()
                }),
            ),
        ],
    }
}

/// node-health: read-only from start to end, with an operator-present gate and a step that
/// expects a non-zero exit code.
pub fn health_plan() -> Plan {
    Plan {
        runbook: "node-health".into(),
        env: "dev".into(),
        mutates: false,
        steps: vec![
            step(
                1,
                "present",
                StepKind::Gate,
                None,
                false,
                Some(Gate::OperatorPresent),
                None,
            ),
            step(
                2,
                "smart",
                StepKind::Ssh,
                Some("k3s-dev-1"),
                false,
                None,
                None,
            ),
            step(
                3,
                "no-oom",
                StepKind::Ssh,
                Some("k3s-dev-1"),
                false,
                None,
                Some(Expect {
                    exit_code: Some(1),
                    ..Expect::default()
                }),
            ),
            step(
                4,
                "rollout",
                StepKind::KubeWait,
                None,
                false,
                None,
                Some(Expect {
                    condition: Some("daemonset-rolled-out kube-system/cilium".into()),
                    ..Expect::default()
                }),
            ),
        ],
    }
}

pub fn all_plans() -> Vec<Plan> {
    vec![etcd_plan(), memattr_plan(), health_plan()]
}

pub fn ev(at: u64, input: Input) -> Event {
    Event::new(Timestamp(at), input)
}

pub fn approve(n: usize) -> Input {
    Input::GateAnswered {
        n,
        answer: GateAnswer::Approved {
            by: "op".into(),
            note: None,
        },
    }
}

pub fn typed(n: usize, text: &str) -> Input {
    Input::TypedText {
        n,
        by: "op".into(),
        text: text.into(),
        note: None,
    }
}

/// xorshift64*: deterministic, dependency-free randomness for property-style tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    // A seeded generator the tests call by hand, not an iterator: it never ends.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A plausible next input for `run`: mostly what the operator or executor would send in its
/// state, sometimes a random (likely illegal) one.
pub fn next_input(run: &Run, rng: &mut Rng) -> Input {
    if rng.chance(12) {
        return random_input(run, rng);
    }
    if rng.chance(3) {
        return Input::Resumed;
    }
    if rng.chance(2) {
        return Input::Abort {
            by: "op".into(),
            reason: "enough".into(),
        };
    }
    match run.status().clone() {
        RunStatus::NotStarted => Input::Start,
        RunStatus::Succeeded | RunStatus::Aborted { .. } => random_input(run, rng),
        RunStatus::Halted { n } => match rng.below(3) {
            0 | 1 => Input::RetryApproved { n, by: "op".into() },
            _ => Input::Skip {
                n,
                by: "op".into(),
                reason: "not needed".into(),
            },
        },
        RunStatus::Active { n } => {
            let Some(rec) = run.step_record(n) else {
                return Input::Start;
            };
            let planned = run
                .plan()
                .steps
                .iter()
                .find(|s| s.n == n)
                .cloned()
                .expect("active step is in the plan");
            let attempt = rec.attempt;
            match &rec.state {
                StepState::AwaitingGate { .. } => match (&planned.gate, rng.below(10)) {
                    (_, 0) => Input::GateAnswered {
                        n,
                        answer: GateAnswer::Rejected {
                            by: "op".into(),
                            reason: "no".into(),
                        },
                    },
                    (Some(Gate::TypedConfirm { phrase }), k) => {
                        typed(n, if k < 3 { "prd" } else { phrase })
                    }
                    (Some(Gate::ConfirmHosts { expected }), k) => {
                        let count = if k < 3 {
                            expected.len() + 1
                        } else {
                            expected.len()
                        };
                        typed(n, &count.to_string())
                    }
                    _ => approve(n),
                },
                // The session journals a step's start before its work leaves: an
                // executor's outcome only ever follows it.
                StepState::Running { started: false, .. } => Input::StepStarted { n, attempt },
                StepState::Running { started, .. } => match rng.below(10) {
                    0 => Input::CancelRequested { n, by: "op".into() },
                    1 => Input::Cancelled {
                        n,
                        attempt,
                        reason: "killed".into(),
                    },
                    2 => Input::StepFinished {
                        n,
                        attempt,
                        exit_code: Some(2),
                        error: None,
                    },
                    _ if !started => Input::StepStarted { n, attempt },
                    _ => Input::StepFinished {
                        n,
                        attempt,
                        exit_code: Some(
                            planned
                                .expect
                                .as_ref()
                                .and_then(|e| e.exit_code)
                                .unwrap_or(0),
                        ),
                        error: None,
                    },
                },
                StepState::Verifying => {
                    let expected = hk_engine::runbook::machine::expected_hosts(&planned);
                    match (expected, rng.below(6)) {
                        (Some(hosts), k) => {
                            let mut hosts = hosts.to_vec();
                            if k == 0 {
                                hosts.push("k3s-prod-2".into());
                            }
                            Input::HostSetObserved { n, attempt, hosts }
                        }
                        (None, k) => Input::VerifyResult {
                            n,
                            attempt,
                            ok: k != 0,
                            detail: "checked".into(),
                        },
                    }
                }
                _ => random_input(run, rng),
            }
        }
    }
}

/// Any input at all, aimed at a random step and attempt.
pub fn random_input(run: &Run, rng: &mut Rng) -> Input {
    let count = run.plan().steps.len() as u64;
    let n = rng.below(count + 2) as usize; // includes 0 and count+1: unknown steps
    let attempt = run.step_record(n).map_or(1, |r| r.attempt) + rng.below(3) as u32;
    let attempt = attempt.saturating_sub(1);
    match rng.below(13) {
        0 => Input::Start,
        1 => approve(n),
        2 => typed(n, "1"),
        3 => Input::StepStarted { n, attempt },
        4 => Input::StepFinished {
            n,
            attempt,
            exit_code: Some(0),
            error: None,
        },
        5 => Input::VerifyResult {
            n,
            attempt,
            ok: true,
            detail: "ok".into(),
        },
        6 => Input::HostSetObserved {
            n,
            attempt,
            hosts: vec!["k3s-prod-3".into()],
        },
        7 => Input::CancelRequested { n, by: "op".into() },
        8 => Input::Cancelled {
            n,
            attempt,
            reason: "late".into(),
        },
        9 => Input::RetryApproved { n, by: "op".into() },
        10 => Input::Skip {
            n,
            by: "op".into(),
            reason: "x".into(),
        },
        11 => Input::Resumed,
        _ => Input::Abort {
            by: "op".into(),
            reason: "x".into(),
        },
    }
}

/// `input` as the session feeds it: an executor's outcome for a step whose start is not
/// journaled yet comes after that start (the session records it before the work leaves).
/// A refusal that never started ("could not be started": no exit code, an error) stays
/// alone, as the session sends it.
pub fn started_first(run: &Run, input: Input) -> Vec<Input> {
    let needs_start = match &input {
        Input::StepFinished {
            n,
            exit_code,
            error,
            ..
        } => (exit_code.is_some() || error.is_none()).then_some(*n),
        Input::Cancelled { n, .. } => Some(*n),
        _ => None,
    };
    match needs_start.and_then(|n| run.step_record(n).map(|r| (n, r))) {
        Some((n, r)) if matches!(r.state, StepState::Running { started: false, .. }) => {
            vec![
                Input::StepStarted {
                    n,
                    attempt: r.attempt,
                },
                input,
            ]
        }
        _ => vec![input],
    }
}

/// A node-health journal by "alice" in `dir`, with `inputs` recorded one second apart
/// after `at` (the header's time): the seed the journal damage tests start from.
pub fn record_health_run(dir: &std::path::Path, at: u64, inputs: Vec<Input>) -> std::path::PathBuf {
    use hk_engine::journal::{Header, Journal};
    use hk_engine::runbook::machine::Mode;
    let plan = health_plan();
    let header = Header::new(plan.clone(), Mode::Operate, "alice", Timestamp(at));
    let mut journal = Journal::create(dir, &header).expect("create");
    let mut run = Run::with_mode(plan, Mode::Operate).expect("plan");
    let mut t = at;
    for input in inputs {
        for input in started_first(&run, input) {
            t += 1;
            journal.record(&mut run, ev(t, input)).expect("record");
        }
    }
    journal.path().to_path_buf()
}
