//! The console's executors (crates/hk-ui/src/executors.rs), end to end: a plan over three real sshd nodes (tests/support)
//! driven by the real state machine through the real backends (russh, ansible-playbook,
//! TCP probe), the way the console drives them: Execute/Verify requests on one side,
//! output and outcomes on the other, outcomes fed back to the machine.
use crate::support;

use std::sync::Arc;

use hk_effects::exec::process::AnsibleRunner;
use hk_effects::exec::{Executor, Mutating, Redactor};
use hk_engine::journal::{Header, Journal};
use hk_engine::runbook::machine::{
    Effect, Event, GateAnswer, Input, Run, RunOutcome, StepState, Timestamp,
};
use hk_engine::runbook::plan::{Expect, Gate, Plan, PlannedStep, StepKind};
use hk_session::exec::{
    Capabilities, ExecReply, ExecRequest, MutatingExecutors, ReadOnlyExecutors,
};
use hk_session::executors::{ProbeExecutor, RealExecutor, KINDS};
use support::Cluster;
use tokio::sync::mpsc;

fn runner(c: &Cluster) -> AnsibleRunner {
    let mut r = AnsibleRunner::from_env();
    r.env = c.ansible_env();
    r
}

fn step(n: usize, id: &str, kind: StepKind, host: Option<&str>, mutates: bool) -> PlannedStep {
    PlannedStep {
        n,
        id: id.into(),
        kind,
        host: host.map(str::to_string),
        mutates,
        gate: None,
        command: None,
        expect: None,
        title: id.into(),
        cwd: None,
        source: None,
        blast_radius: None,
        declared_read_only: None,
    }
}

fn plan(c: &Cluster, marker_dir: &std::path::Path) -> Plan {
    let inv = c.write_inventory();
    let playbook = support::fixtures().join("marker.yml");
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec![
            "ansible-playbook".into(),
            "-i".into(),
            inv.display().to_string(),
            playbook.display().to_string(),
            "-e".into(),
            format!("marker_dir={}", marker_dir.display()),
            "-e".into(),
            "hold=0.1".into(),
            "--limit".into(),
            "node3".into(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let node1 = &c.nodes[0];
    let mut s1 = step(1, "list-hosts", StepKind::ListHosts, Some("node3"), false);
    s1.command = Some(base(&["--list-hosts"]));
    s1.expect = Some(Expect {
        hosts: Some(vec!["node3".into()]),
        ..Expect::default()
    });
    s1.gate = Some(Gate::ConfirmHosts {
        expected: vec!["node3".into()],
    });
    let mut s2 = step(2, "apply", StepKind::Ansible, Some("node3"), true);
    s2.command = Some(base(&[]));
    let mut s3 = step(3, "read-back", StepKind::Ssh, Some("node3"), false);
    s3.command = Some(vec![
        "ssh".into(),
        "node3".into(),
        format!(
            "cat {}/node3.end >/dev/null && echo marker-present",
            marker_dir.display()
        ),
    ]);
    s3.expect = Some(Expect {
        stdout_equals: Some("marker-present".into()),
        ..Expect::default()
    });
    let mut s4 = step(4, "probe", StepKind::Probe, None, false);
    s4.expect = Some(Expect {
        tcp: Some(format!("{}:{}", node1.addr, node1.port)),
        timeout_s: Some(5),
        ..Expect::default()
    });
    Plan {
        runbook: "exec-e2e".into(),
        env: "lab".into(),
        mutates: true,
        steps: vec![s1, s2, s3, s4],
    }
}

fn capabilities(c: &Cluster, observe: bool) -> Capabilities {
    // Built the way `capabilities_for_repo` builds them, over this cluster's pool.
    let pool = Arc::new(c.pool());
    let ro = Arc::new(Executor::read_only(
        pool.clone(),
        runner(c),
        Redactor::none(),
    ));
    let mut read_only = ReadOnlyExecutors::default();
    for kind in KINDS {
        read_only
            .add(Arc::new(RealExecutor::read_only(kind, ro.clone())))
            .expect("read-only");
    }
    read_only
        .add(Arc::new(ProbeExecutor::default()))
        .expect("probe");
    if observe {
        return Capabilities::Observe { read_only };
    }
    let mu = Arc::new(Executor::mutating(
        pool,
        runner(c),
        Redactor::none(),
        Mutating::grant("test"),
    ));
    let mut mutating = MutatingExecutors::default();
    for kind in [StepKind::Ansible, StepKind::Ssh] {
        mutating.add(Arc::new(RealExecutor::mutating(kind, mu.clone())));
    }
    Capabilities::Operate {
        read_only,
        mutating,
    }
}

/// Drives `run` to its end as the session does, journal before effect (each input
/// journaled, each step's start recorded before its request leaves); returns every output
/// line seen.
async fn drive(run: &mut Run, caps: &Capabilities) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut journal = Journal::create(
        dir.path(),
        &Header::new(run.plan().clone(), run.mode(), "t", Timestamp(1)),
    )
    .expect("journal");
    let (tx, mut rx) = mpsc::channel::<ExecReply>(256);
    let mut output = Vec::new();
    let mut clock = 1u64;
    let mut pending: Vec<Input> = vec![Input::Start];
    let mut in_flight = 0usize;
    loop {
        while let Some(input) = (!pending.is_empty()).then(|| pending.remove(0)) {
            clock += 1;
            let effects = journal
                .record(
                    run,
                    Event {
                        at: Timestamp(clock),
                        input,
                    },
                )
                .expect("machine accepts");
            for e in effects {
                match e {
                    Effect::AskGate { n, gate } => pending.push(match gate {
                        Gate::ConfirmHosts { expected } => Input::TypedText {
                            n,
                            by: "t".into(),
                            text: expected.len().to_string(),
                            note: None,
                        },
                        _ => Input::GateAnswered {
                            n,
                            answer: GateAnswer::Approved {
                                by: "t".into(),
                                note: None,
                            },
                        },
                    }),
                    Effect::Execute(x) => {
                        let step = run
                            .plan()
                            .steps
                            .iter()
                            .find(|s| s.n == x.n())
                            .expect("step")
                            .clone();
                        let exec = caps
                            .executor_for(&step)
                            .expect("an executor for every step");
                        clock += 1;
                        let (_, start) = journal
                            .record_start(run, Timestamp(clock), x.n(), x.attempt())
                            .expect("start recorded");
                        in_flight += 1;
                        exec.handle(
                            ExecRequest::Execute {
                                tag: 1,
                                step,
                                attempt: x.attempt(),
                                authorised: x.authorised().to_vec(),
                                env: run.plan().env.clone(),
                                start,
                            },
                            tx.clone(),
                        );
                    }
                    Effect::Verify { n, attempt } => {
                        let step = run
                            .plan()
                            .steps
                            .iter()
                            .find(|s| s.n == n)
                            .expect("step")
                            .clone();
                        in_flight += 1;
                        caps.executor_for(&step).expect("executor").handle(
                            ExecRequest::Verify {
                                tag: 1,
                                step,
                                attempt,
                            },
                            tx.clone(),
                        );
                    }
                    Effect::GateNotPassed { why, .. } => panic!("gate not passed: {why}"),
                    Effect::Cancel { .. } | Effect::RunFinished { .. } => {}
                }
            }
        }
        if in_flight == 0 {
            return output;
        }
        let reply = tokio::time::timeout(std::time::Duration::from_secs(120), rx.recv())
            .await
            .expect("an executor answers in time")
            .expect("channel open");
        match reply {
            ExecReply::Output { line, .. } => output.push(line),
            ExecReply::Outcome { input, .. } => {
                if matches!(
                    input,
                    Input::StepFinished { .. }
                        | Input::Cancelled { .. }
                        | Input::VerifyResult { .. }
                        | Input::HostSetObserved { .. }
                ) {
                    in_flight -= 1;
                }
                pending.push(input);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_runs_on_real_nodes_through_the_console_executors() {
    let c = Cluster::start();
    let markers = c.dir.path().join("markers");
    std::fs::create_dir_all(&markers).expect("mkdir");
    let plan = plan(&c, &markers);
    let mut run = Run::new(plan).expect("run");
    let output = drive(&mut run, &capabilities(&c, false)).await;
    for (s, r) in run.steps() {
        assert!(
            matches!(r.state, StepState::Done),
            "step {} ({}) is {:?}",
            s.n,
            s.id,
            r.state
        );
    }
    assert_eq!(run.outcome(), RunOutcome::Succeeded);
    // The play ran on node3 only, and its output streamed through.
    assert!(markers.join("node3.end").exists());
    assert!(!markers.join("node1.start").exists() && !markers.join("node2.start").exists());
    assert!(
        output.iter().any(|l| l.contains("PLAY RECAP")),
        "{output:?}"
    );
    assert!(output.iter().any(|l| l == "marker-present"), "{output:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_capabilities_have_no_executor_for_the_mutating_step() {
    let c = Cluster::start_n(1);
    let markers = c.dir.path().join("markers");
    std::fs::create_dir_all(&markers).expect("mkdir");
    let plan = plan(&c, &markers);
    let caps = capabilities(&c, true);
    let apply = plan
        .steps
        .iter()
        .find(|s| s.mutates)
        .expect("a mutating step");
    let err = caps
        .executor_for(apply)
        .expect_err("observe must not run it");
    assert!(err.to_string().contains("observe mode"), "{err}");
    // The read-only ones are there.
    for s in plan.steps.iter().filter(|s| !s.mutates) {
        assert!(caps.executor_for(s).is_ok(), "step {} ({})", s.n, s.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_that_fails_halts_the_run_and_a_refused_probe_fails() {
    let c = Cluster::start_n(3);
    let markers = c.dir.path().join("markers");
    std::fs::create_dir_all(&markers).expect("mkdir");
    let mut plan = plan(&c, &markers);
    // Read back the wrong thing: the marker was never written on node1.
    plan.steps[2].command = Some(vec![
        "ssh".into(),
        "node1".into(),
        format!("cat {}/node1.end 2>&1; echo done", markers.display()),
    ]);
    plan.steps[2].host = Some("node1".into());
    let mut run = Run::new(plan.clone()).expect("run");
    drive(&mut run, &capabilities(&c, false)).await;
    let (s3, r3) = run.steps().nth(2).expect("step 3");
    assert!(
        matches!(r3.state, StepState::Failed { .. }),
        "step {} is {:?}",
        s3.n,
        r3.state
    );
    assert!(
        matches!(run.steps().nth(3).expect("4").1.state, StepState::Pending),
        "nothing after a failure runs"
    );

    // A probe to a port nothing listens on (loopback only).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let mut p = plan.clone();
    p.steps = vec![p.steps[3].clone()];
    p.steps[0].n = 1;
    p.steps[0].expect.as_mut().expect("expect").tcp = Some(format!("127.0.0.1:{port}"));
    p.mutates = false;
    let mut run = Run::new(p).expect("run");
    drive(&mut run, &capabilities(&c, false)).await;
    let (_, r) = run.steps().next().expect("probe");
    match &r.state {
        StepState::Failed { reason } => {
            assert!(reason.contains(&format!("127.0.0.1:{port}")), "{reason}")
        }
        other => panic!("probe should fail, is {other:?}"),
    }
}

/// Issue 25: an ansible step whose SSH peer accepts TCP and never says a word (a listener
/// on loopback that holds the connection) ends at its `timeout_s` through the stop
/// ladder, the failure naming the cause ("no answer within 3s: stopped (SIGINT...)"),
/// instead of hanging the step with no cause. Real ansible-playbook, the real executor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ansible_step_against_a_silent_ssh_peer_ends_at_its_timeout_naming_it() {
    let c = Cluster::start_n(1);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    // Accept and hold every connection, answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming() {
            match conn {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
    });
    let inv = c.dir.path().join("silent.ini");
    std::fs::write(
        &inv,
        format!("[nodes]\nsilent ansible_host=127.0.0.1 ansible_port={port} ansible_user=root\n"),
    )
    .expect("inventory");
    let markers = c.dir.path().join("markers");
    std::fs::create_dir_all(&markers).expect("mkdir");
    let mut s = step(1, "apply", StepKind::Ansible, Some("silent"), true);
    s.command = Some(vec![
        "ansible-playbook".into(),
        "-i".into(),
        inv.display().to_string(),
        support::fixtures().join("marker.yml").display().to_string(),
        "-e".into(),
        format!("marker_dir={}", markers.display()),
        // Ansible's own connection timeout is longer than the step's.
        "-T".into(),
        "60".into(),
    ]);
    s.expect = Some(Expect {
        timeout_s: Some(3),
        ..Expect::default()
    });
    let plan = Plan {
        runbook: "silent-peer".into(),
        env: "lab".into(),
        mutates: true,
        steps: vec![s],
    };
    let mut run = Run::new(plan).expect("run");
    let t0 = std::time::Instant::now();
    drive(&mut run, &capabilities(&c, false)).await;
    let took = t0.elapsed();
    let (_, r) = run.steps().next().expect("step");
    match &r.state {
        StepState::Failed { reason } => assert!(
            reason.contains("no answer within 3s: stopped (SIGINT"),
            "{reason}"
        ),
        other => panic!("the step should fail at its timeout, is {other:?}"),
    }
    assert!(
        took >= std::time::Duration::from_secs(3) && took < std::time::Duration::from_secs(25),
        "ended after {took:?}"
    );
    assert_eq!(run.outcome(), RunOutcome::Failed);
}
