//! The guard rails in the plan: the health gate between hosts (`between_hosts:`, and the
//! default every `serial: 1` runbook gets in a protected environment) and the look before
//! a `disrupts: node` step; and the validator's file:line:col for both fields.

use hk_test_support::runbooks as runbooks_common;

use hk_engine::runbook::embedded::load;
use hk_engine::runbook::plan::{
    plan, GateSource, HealthGate, LeaderAway, NodeDisruption, Plan, StepKind, HEALTH_GATE,
};
use hk_engine::runbook::schema::Runbook;
use hk_engine::runbook::validate::validate_text;
use runbooks_common::{dev, homelab, prod};

fn shipped(id: &str) -> Runbook {
    load(&[])
        .expect("embedded set loads")
        .get(id)
        .expect("shipped")
        .clone()
}

fn parse(text: &str) -> Runbook {
    validate_text("t.yaml", text).unwrap_or_else(|d| {
        panic!(
            "{}",
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn errors(text: &str) -> Vec<String> {
    validate_text("t.yaml", text)
        .map(|_| ())
        .expect_err("invalid")
        .iter()
        .map(|d| d.to_string())
        .collect()
}

fn gates(p: &Plan) -> Vec<(usize, String, Option<GateSource>)> {
    p.steps
        .iter()
        .filter(|s| {
            s.expect
                .as_ref()
                .and_then(|e| e.condition.as_deref())
                .is_some_and(|c| c.starts_with(HEALTH_GATE))
        })
        .map(|s| {
            (
                s.n,
                s.expect
                    .as_ref()
                    .and_then(|e| e.condition.clone())
                    .unwrap_or_default(),
                s.source,
            )
        })
        .collect()
}

/// The host of each step, in plan order, with a marker for the gates.
fn hosts_in_order(p: &Plan) -> Vec<String> {
    p.steps
        .iter()
        .map(|s| format!("{} {}", s.id, s.host.as_deref().unwrap_or("-")))
        .collect()
}

#[test]
fn etcd_io_priority_in_protected_prod_gets_a_health_gate_between_each_pair_of_hosts() {
    let p = plan(&shipped("etcd-io-priority"), &prod(), &homelab()).expect("plans");
    let g = gates(&p);
    assert_eq!(
        g.iter()
            .map(|(_, c, s)| (c.as_str(), *s))
            .collect::<Vec<_>>(),
        vec![
            (
                "health-between-hosts k3s-prod-3 k3s-prod-1 stable_for=30 soak=60",
                Some(GateSource::Policy)
            ),
            (
                "health-between-hosts k3s-prod-1 k3s-prod-2 stable_for=30 soak=60",
                Some(GateSource::Policy)
            ),
        ]
    );
    // Each gate sits after the last step of one host and before anything of the next,
    // the next host's list-hosts included.
    for (n, cond, _) in &g {
        let gate = HealthGate::parse(cond).expect("a gate").expect("parses");
        let before = &p.steps[n - 2];
        let after = &p.steps[*n];
        assert_eq!(
            before.host.as_deref(),
            Some(gate.after.as_str()),
            "{:#?}",
            hosts_in_order(&p)
        );
        assert_eq!(before.id, "read-back");
        assert_eq!(after.host.as_deref(), Some(gate.before.as_str()));
        assert_eq!(after.kind, StepKind::ListHosts);
        let step = &p.steps[n - 1];
        assert_eq!(step.kind, StepKind::KubeWait);
        assert!(!step.mutates);
        assert!(
            step.gate.is_none(),
            "it fails by its cause, it is not answered"
        );
        assert_eq!(step.expect.as_ref().and_then(|e| e.timeout_s), Some(900));
        assert!(
            step.title.contains("every node Ready") && step.title.contains("192.168.2.9"),
            "{}",
            step.title
        );
    }
    // No gate before the first host.
    assert!(
        g[0].0
            > p.steps
                .iter()
                .position(|s| s.host.as_deref() == Some("k3s-prod-1"))
                .unwrap_or(0)
    );
    // plan --json carries it like every other step, marked as the policy's.
    let json = serde_json::to_value(&p).expect("json");
    let step = &json["steps"][g[0].0 - 1];
    assert_eq!(step["kind"], "kube-wait");
    assert_eq!(step["source"], "policy");
    assert_eq!(step["id"], "health-gate");
}

#[test]
fn memattr_survey_gets_the_gate_too_and_single_host_runbooks_never_do() {
    let p = plan(&shipped("memattr-survey"), &prod(), &homelab()).expect("plans");
    assert_eq!(gates(&p).len(), 2, "{:#?}", hosts_in_order(&p));
    let mut env = prod();
    env.host = Some("k3s-prod-1".into());
    let p = plan(&shipped("packages-baseline"), &env, &homelab()).expect("plans");
    assert!(gates(&p).is_empty());
}

const SERIAL: &str = r#"
id: roll
environments: [dev, prod]
target:
  group: servers
  serial: 1
BETWEEN
steps:
  - id: restart
    kind: ssh
    command: systemctl restart k3s
    mutates: true
    DISRUPTS
"#;

fn serial(between: &str, disrupts: &str) -> String {
    SERIAL
        .replace("BETWEEN", between)
        .replace("DISRUPTS", disrupts)
}

#[test]
fn an_unprotected_environment_gets_the_gate_only_where_the_runbook_declares_it() {
    let plain = parse(&serial("", ""));
    assert!(gates(&plan(&plain, &dev(), &homelab()).expect("plans")).is_empty());
    assert_eq!(
        gates(&plan(&plain, &prod(), &homelab()).expect("plans")).len(),
        2
    );
    let declared = parse(&serial(
        "  between_hosts:\n    stable_for_s: 10\n    soak_s: 120\n    timeout_s: 600",
        "",
    ));
    let p = plan(&declared, &dev(), &homelab()).expect("plans");
    let g = gates(&p);
    assert_eq!(
        g.iter()
            .map(|(_, c, s)| (c.as_str(), *s))
            .collect::<Vec<_>>(),
        vec![
            (
                "health-between-hosts k3s-dev-1 k3s-dev-2 stable_for=10 soak=120",
                Some(GateSource::Runbook)
            ),
            (
                "health-between-hosts k3s-dev-2 k3s-dev-3 stable_for=10 soak=120",
                Some(GateSource::Runbook)
            ),
        ]
    );
    assert_eq!(
        p.steps[g[0].0 - 1]
            .expect
            .as_ref()
            .and_then(|e| e.timeout_s),
        Some(600)
    );
    // In prod the declared values hold, and the policy is what requires the gate.
    let p = plan(&declared, &prod(), &homelab()).expect("plans");
    assert!(gates(&p)
        .iter()
        .all(|(_, c, s)| c.ends_with("stable_for=10 soak=120") && *s == Some(GateSource::Policy)));
}

#[test]
fn a_disrupting_step_is_preceded_by_the_look_at_what_its_node_carries() {
    let rb = parse(&serial("", "disrupts: node"));
    let p = plan(&rb, &dev(), &homelab()).expect("plans");
    let order: Vec<String> = hosts_in_order(&p);
    assert_eq!(
        order,
        // Each server taken away has etcd's leadership moved off it first (issue 39),
        // after its confirmation; the operator's presence is asked before the first
        // change.
        vec![
            "restart.disrupts k3s-dev-1",
            "etcd-snapshot.save -",
            "restart.list-hosts k3s-dev-1",
            "etcd-leader.look k3s-dev-1",
            "operator-present -",
            "etcd-leader.move k3s-dev-1",
            "restart k3s-dev-1",
            "restart.disrupts k3s-dev-2",
            "restart.list-hosts k3s-dev-2",
            "etcd-leader.look k3s-dev-2",
            "etcd-leader.move k3s-dev-2",
            "restart k3s-dev-2",
            "restart.disrupts k3s-dev-3",
            "restart.list-hosts k3s-dev-3",
            "etcd-leader.look k3s-dev-3",
            "etcd-leader.move k3s-dev-3",
            "restart k3s-dev-3",
        ]
    );
    let look = &p.steps[0];
    assert_eq!(look.kind, StepKind::KubeWait);
    assert!(!look.mutates);
    let cond = look
        .expect
        .as_ref()
        .and_then(|e| e.condition.clone())
        .unwrap_or_default();
    assert_eq!(
        NodeDisruption::parse(&cond)
            .expect("a look")
            .expect("parses"),
        NodeDisruption {
            node: "k3s-dev-1".into()
        }
    );
    // In protected prod: the look, etcd's snapshot, the host confirmed, etcd's leader
    // moved off it (looked at, approved, moved), then the policy's typed confirmation,
    // then the step, with the health gate between hosts.
    let p = plan(&rb, &prod(), &homelab()).expect("plans");
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        &ids[..9],
        &[
            "restart.disrupts",
            "etcd-snapshot.save",
            "restart.list-hosts",
            "etcd-leader.look",
            "etcd-leader.approve",
            "etcd-leader.move",
            "restart.confirm",
            "restart",
            "health-gate"
        ]
    );
}

#[test]
fn the_conditions_round_trip_and_malformed_ones_are_named() {
    let g = HealthGate {
        after: "a".into(),
        before: "b".into(),
        stable_for_s: 3,
        soak_s: 4,
    };
    assert_eq!(HealthGate::parse(&g.condition()), Some(Ok(g)));
    assert_eq!(HealthGate::parse("node-ready x"), None);
    let err = HealthGate::parse("health-between-hosts a b stable_for=x soak=4")
        .expect("ours")
        .expect_err("malformed")
        .to_string();
    assert!(err.contains("stable_for=SECONDS"), "{err}");
    assert!(NodeDisruption::parse("node-disruption")
        .expect("ours")
        .is_err());
}

#[test]
fn the_validator_names_each_wrong_use() {
    assert_eq!(
        errors(&serial("", "disrupts: cluster")),
        vec!["t.yaml:13:15: unknown `disrupts: cluster`\n  hint: `disrupts` takes: node (the step restarts, reboots or reprovisions its host)"]
    );
    let ro = serial("", "disrupts: node").replace("mutates: true", "mutates: false");
    assert_eq!(
        errors(&ro),
        vec!["t.yaml:13:15: step `restart` declares `disrupts: node` but does not mutate\n  hint: a step that restarts, reboots or reprovisions a node changes it: remove `disrupts` or make the step mutating"]
    );
    let once = r#"
id: once
environments: [dev]
steps:
  - id: m
    kind: manual
    title: reboot it
    disrupts: node
"#;
    assert_eq!(
        errors(once),
        vec!["t.yaml:8:15: `disrupts: node` needs a per-host step: the node is the step's host\n  hint: leave the step per-host (the runbook needs a target)"]
    );
    let single = serial("  single: true\n  between_hosts: {}", "").replace("  serial: 1\n", "");
    assert_eq!(
        errors(&single),
        vec!["t.yaml:7:18: `between_hosts` cannot be combined with `single: true`\n  hint: a single-host target has no next host to gate"]
    );
    assert_eq!(
        errors(&serial("  between_hosts:\n    soak_s: 60\n    timeout_s: 60", "")),
        vec!["t.yaml:9:16: `between_hosts.timeout_s` (60) is not longer than the soak (60 s): the gate could never pass\n  hint: give the gate more time than the soak it must see"]
    );
    assert_eq!(
        errors(&serial("  between_hosts:\n    skip: true", "")),
        vec!["t.yaml:8:5: target.between_hosts: unknown field `skip`\n  hint: expected one of `stable_for_s`, `soak_s`, `timeout_s` (see docs/runbooks.md)"]
    );
}

#[test]
fn a_guard_step_is_skipped_only_with_a_typed_reason() {
    use hk_engine::runbook::machine::{Event, Input, MachineError, Run, Timestamp};
    let p = plan(&shipped("etcd-io-priority"), &prod(), &homelab()).expect("plans");
    let n = gates(&p)[0].0;
    let mut run = Run::new(p).expect("run");
    let skip = |reason: &str| {
        Event::new(
            Timestamp(1),
            Input::Skip {
                n,
                by: "ann".into(),
                reason: reason.into(),
            },
        )
    };
    match run.step(&skip("  ")) {
        Err(MachineError::CannotSkip { n: m, why }) => {
            assert_eq!(m, n);
            assert!(why.contains("typed reason"), "{why}");
        }
        other => panic!("an empty reason went through: {other:?}"),
    }
    run.step(&skip("node 1 is in maintenance, checked by hand"))
        .expect("a reason is enough");
}

/// The etcd-leader steps of `p`: (n, id, host, mutates, condition).
fn leader_steps(p: &Plan) -> Vec<(usize, String, String, bool, String)> {
    p.steps
        .iter()
        .filter(|s| s.kind == StepKind::EtcdLeader)
        .map(|s| {
            (
                s.n,
                s.id.clone(),
                s.host.clone().unwrap_or_default(),
                s.mutates,
                s.expect
                    .as_ref()
                    .and_then(|e| e.condition.clone())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// Issue 39, the leader moved first: before the first step that touches each server (its
/// preview, its approval or its change) a rolling runbook over the servers holds a look at
/// who leads, the policy's approval in a protected environment, and the move; after the
/// host's confirmation, so the exact host is confirmed before anything runs on it.
#[test]
fn each_server_of_a_rolling_run_gets_the_leader_moved_off_it_first() {
    let p = plan(&shipped("etcd-io-priority"), &prod(), &homelab()).expect("plans");
    let moves = leader_steps(&p);
    assert_eq!(
        moves
            .iter()
            .map(|(_, id, h, m, c)| format!("{id} {h} {m} {c}"))
            .collect::<Vec<_>>(),
        vec![
            "etcd-leader.look k3s-prod-3 false etcd-leader-preview k3s-prod-3 later=k3s-prod-1,k3s-prod-2",
            "etcd-leader.move k3s-prod-3 true etcd-leader-away k3s-prod-3 later=k3s-prod-1,k3s-prod-2",
            "etcd-leader.look k3s-prod-1 false etcd-leader-preview k3s-prod-1 later=k3s-prod-2",
            "etcd-leader.move k3s-prod-1 true etcd-leader-away k3s-prod-1 later=k3s-prod-2",
            "etcd-leader.look k3s-prod-2 false etcd-leader-preview k3s-prod-2",
            "etcd-leader.move k3s-prod-2 true etcd-leader-away k3s-prod-2",
        ]
    );
    for (n, _, host, mutates, cond) in &moves {
        let parsed = LeaderAway::parse(cond)
            .expect("an etcd-leader condition")
            .expect("parses");
        assert_eq!(&parsed.host, host);
        assert_eq!(parsed.preview, !mutates);
        assert_eq!(parsed.condition(), *cond, "round trip");
        let i = n - 1;
        if *mutates {
            // Approved by the policy, the approval naming it, right before it.
            let g = &p.steps[i - 1];
            assert_eq!(g.kind, StepKind::Gate);
            assert_eq!(g.source, Some(GateSource::Policy));
            assert_eq!(g.blast_radius.as_ref().map(|b| b.step), Some(*n));
            // The host's change comes after, with its own preview and approval.
            let next = &p.steps[i + 1];
            assert_eq!(next.host.as_deref(), Some(host.as_str()));
            assert!(next
                .command
                .as_ref()
                .is_some_and(|c| c.iter().any(|a| a == "--check")));
        } else {
            // The host is confirmed first (before the first host, then etcd's snapshot).
            let mut before = &p.steps[i - 1];
            if before.kind == StepKind::EtcdSnapshot {
                before = &p.steps[i - 2];
            }
            assert_eq!(
                before.kind,
                StepKind::ListHosts,
                "{:#?}",
                hosts_in_order(&p)
            );
            assert_eq!(before.host.as_deref(), Some(host.as_str()));
        }
    }
    // A re-run of the move asks its look and its approval again.
    let mv = moves.iter().find(|m| m.3).expect("a move").0 - 1;
    assert_eq!(
        hk_engine::runbook::machine::rerun_from(&p, mv),
        mv - 2,
        "the look and the approval before the move"
    );
}

/// Issue 39, a snapshot before the first server: one etcd-snapshot step per run, before
/// anything touches the first server (its confirmation, its leader look), read-only for
/// every system, its condition naming the servers the run changes in order; going past it
/// is a typed skip.
#[test]
fn a_rolling_run_snapshots_etcd_once_before_its_first_server() {
    use hk_engine::runbook::machine::{Event, Input, MachineError, Run, Timestamp};
    use hk_engine::runbook::plan::SnapshotFirst;
    let p = plan(&shipped("etcd-io-priority"), &prod(), &homelab()).expect("plans");
    let snaps: Vec<&hk_engine::runbook::plan::PlannedStep> = p
        .steps
        .iter()
        .filter(|s| s.kind == StepKind::EtcdSnapshot)
        .collect();
    assert_eq!(snaps.len(), 1, "{:#?}", hosts_in_order(&p));
    let s = snaps[0];
    assert_eq!(
        (s.id.as_str(), s.mutates, s.host.as_deref()),
        ("etcd-snapshot.save", false, None)
    );
    let cond = s
        .expect
        .as_ref()
        .and_then(|e| e.condition.clone())
        .expect("a condition");
    assert_eq!(
        cond,
        "etcd-snapshot changed=k3s-prod-3,k3s-prod-1,k3s-prod-2"
    );
    let parsed = SnapshotFirst::parse(&cond)
        .expect("a snapshot condition")
        .expect("parses");
    assert_eq!(parsed.condition(), cond, "round trip");
    // Before every step that changes, previews or approves anything, and before the first
    // leader look (the runbook's own host confirmation may come first: it only lists).
    let first_touch = p
        .steps
        .iter()
        .position(|x| {
            x.kind != StepKind::ListHosts
                && (x.mutates || x.gate.is_some() || x.kind == StepKind::EtcdLeader)
        })
        .expect("a step on a host");
    assert!(
        s.n - 1 < first_touch,
        "the snapshot is step {} of {:#?}",
        s.n,
        hosts_in_order(&p)
    );
    assert!(matches!(
        SnapshotFirst::parse("etcd-snapshot changed=a,,b"),
        Some(Err(_))
    ));
    assert!(SnapshotFirst::parse("etcd-leader-away a").is_none());
    // Skipping it: only with a typed reason.
    let mut run = Run::new(p.clone()).expect("run");
    let skip = |reason: &str| {
        Event::new(
            Timestamp(1),
            Input::Skip {
                n: s.n,
                by: "ann".into(),
                reason: reason.into(),
            },
        )
    };
    match run.step(&skip("")) {
        Err(MachineError::CannotSkip { why, .. }) => {
            assert!(why.contains("etcd snapshot"), "{why}")
        }
        other => panic!("a snapshot was skipped without a reason: {other:?}"),
    }
    run.step(&skip("snapshot taken by hand at 09:12, /srv/etcd-0912.db"))
        .expect("a reason is enough");
    // An observe-mode run asks etcd for no snapshot: nothing it does needs one, and the
    // stream loads a cluster an incident may already starve.
    let mut only = p.clone();
    only.steps = vec![hk_engine::runbook::plan::PlannedStep { n: 1, ..s.clone() }];
    only.mutates = false;
    let mut observe = Run::new_read_only(only).expect("run");
    let fx = observe
        .step(&Event::new(Timestamp(1), Input::Start))
        .expect("starts");
    assert!(
        !fx.iter()
            .any(|e| matches!(e, hk_engine::runbook::machine::Effect::Execute(_))),
        "the snapshot was asked for: {fx:?}"
    );
    match observe.step_record(1).map(|r| r.state.clone()) {
        Some(hk_engine::runbook::machine::StepState::Skipped { reason }) => {
            assert!(
                reason.starts_with("observe mode: no change follows it"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A one-host runbook that changes no server takes none.
    for rb in ["node-health", "vpn-egress-verify"] {
        let p = plan(&shipped(rb), &prod(), &homelab()).expect("plans");
        assert!(
            p.steps.iter().all(|s| s.kind != StepKind::EtcdSnapshot),
            "{rb}"
        );
    }
}

#[test]
fn no_leader_move_where_no_server_is_changed_or_there_is_no_other_member() {
    // Unprotected: the look and the move, no approval.
    let p = plan(
        &shipped("etcd-io-priority").clone(),
        &dev_etcd(),
        &homelab(),
    )
    .expect("plans");
    assert!(leader_steps(&p).len() == 6, "{:#?}", hosts_in_order(&p));
    assert!(p
        .steps
        .iter()
        .all(|s| !(s.kind == StepKind::Gate && s.id.starts_with("etcd-leader"))));
    // Read-only runbooks and runbooks on the gateways (not a roll over the servers) get none.
    for (id, env) in [("node-health", prod()), ("vpn-eviction-fix", prod())] {
        let p = plan(&shipped(id), &env, &homelab()).expect("plans");
        assert_eq!(leader_steps(&p), vec![], "{id}");
    }
    // One server: no other member to take over.
    let one = homelab().group("k3s_prod", &["k3s-prod-1"]);
    let mut rb = shipped("etcd-io-priority");
    if let Some(t) = rb.target.as_mut() {
        t.order = None;
    }
    let p = plan(&rb, &prod(), &one).expect("plans");
    assert_eq!(leader_steps(&p), vec![]);
}

/// dev as a runbook for prod only would see it: etcd-io-priority allowed on dev.
fn dev_etcd() -> hk_engine::runbook::plan::PlanEnv {
    let mut d = dev();
    d.name = "prod".into();
    d.servers = "k3s_prod".into();
    d.operator_present = false;
    d
}
