//! The planner against a fake inventory shaped like the sample homelab.
use crate::runbooks_common;

use hk_console::runbook::embedded::load;
use hk_console::runbook::plan::{plan, Gate, Plan, PlanEnv, PlanError, PlannedStep, StepKind};
use hk_console::runbook::schema::Runbook;
use hk_console::runbook::validate::validate_text;
use runbooks_common::{dev, homelab, prod};

fn shipped(id: &str) -> Runbook {
    load(&[])
        .expect("embedded set loads")
        .get(id)
        .expect("shipped")
        .clone()
}

fn parse(text: &str) -> Runbook {
    validate_text("test.yaml", text).unwrap_or_else(|d| {
        panic!(
            "{}",
            d.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn argv(s: &PlannedStep) -> String {
    s.command.as_ref().expect("has a command").join(" ")
}

/// The hosts in the order their steps first appear.
fn host_order(p: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in &p.steps {
        if let Some(h) = &s.host {
            if out.last() != Some(h) {
                assert!(!out.contains(h), "steps of {h} are split by another host's");
                out.push(h.clone());
            }
        }
    }
    out
}

/// Every host's first mutating (or ansible) step has a list-hosts limited to it before it.
fn assert_listed_before_first_mutation(p: &Plan) {
    let mut seen_first = std::collections::HashSet::new();
    for (i, s) in p.steps.iter().enumerate() {
        let Some(h) = &s.host else { continue };
        if (s.mutates || s.kind == StepKind::Ansible) && seen_first.insert(h.clone()) {
            let listed = p.steps[..i].iter().any(|e| {
                e.kind == StepKind::ListHosts
                    && e.host.as_ref() == Some(h)
                    && e.expect.as_ref().and_then(|x| x.hosts.clone()) == Some(vec![h.clone()])
            });
            assert!(
                listed,
                "step {} on {h} is not preceded by a list-hosts limited to {h}",
                s.n
            );
        }
    }
}

#[test]
fn etcd_io_priority_runs_node_3_then_1_then_2_one_at_a_time() {
    let p = plan(&shipped("etcd-io-priority"), &prod(), &homelab()).expect("plans");
    assert_eq!(host_order(&p), ["k3s-prod-3", "k3s-prod-1", "k3s-prod-2"]);
    assert!(p.mutates);
    assert_listed_before_first_mutation(&p);
    // The first step is the blast-radius check: node 3 only.
    let first = &p.steps[0];
    assert_eq!(first.kind, StepKind::ListHosts);
    assert_eq!(
        argv(first),
        "ansible-playbook -i inventory/hosts.ini playbooks/etcd-io-priority.yml -e k3s_hosts=k3s_prod --limit k3s-prod-3 --list-hosts"
    );
    assert_eq!(
        first.gate,
        Some(Gate::ConfirmHosts {
            expected: vec!["k3s-prod-3".into()]
        })
    );
    assert_eq!(first.cwd.as_deref(), Some("infra/ansible"));
    // Per node: list-hosts, etcd's leader looked at, approved and moved off it (issue 39),
    // then check-diff, approve, apply, read back.
    let all3: Vec<&PlannedStep> = p
        .steps
        .iter()
        .filter(|s| s.host.as_deref() == Some("k3s-prod-3"))
        .collect();
    let kinds: Vec<(&str, bool)> = all3.iter().map(|s| (s.kind.as_str(), s.mutates)).collect();
    assert_eq!(
        kinds,
        [
            ("list-hosts", false),
            ("etcd-leader", false),
            ("gate", false),
            ("etcd-leader", true),
            ("ansible", false),
            ("gate", false),
            ("ansible", true),
            ("ssh", false)
        ]
    );
    let node3: Vec<&PlannedStep> = all3
        .iter()
        .copied()
        .filter(|s| !s.id.starts_with("etcd-leader"))
        .collect();
    assert!(
        argv(node3[1]).ends_with("--limit k3s-prod-3 --check --diff"),
        "{}",
        argv(node3[1])
    );
    assert_eq!(node3[2].gate, Some(Gate::ApproveDiff));
    assert!(
        argv(node3[3]).ends_with("-e k3s_hosts=k3s_prod --limit k3s-prod-3"),
        "{}",
        argv(node3[3])
    );
    let readback = node3[4].command.as_ref().expect("ssh argv");
    assert_eq!(readback[..2], ["ssh".to_string(), "k3s-prod-3".to_string()]);
    for must in [
        "bfq",
        "nr_requests",
        "32",
        "IOWeight",
        "10000",
        "system.slice",
        "k3s.service",
    ] {
        assert!(
            readback[2].contains(must),
            "read-back does not check {must}"
        );
    }
    // Eight steps per node (five of the runbook's, three moving etcd's leader off it), the
    // health gate between node 3 and 1 and between 1 and 2, and etcd's snapshot before
    // the first (issue 39).
    assert_eq!(p.steps.len(), 27);
    assert_eq!(p.steps[1].kind, StepKind::EtcdSnapshot);
}

#[test]
fn etcd_io_priority_is_not_for_dev() {
    let err = plan(&shipped("etcd-io-priority"), &dev(), &homelab()).expect_err("prod only");
    assert!(matches!(err, PlanError::NotForEnv { .. }));
    assert_eq!(
        err.to_string(),
        "runbook `etcd-io-priority` is not meant for environment `dev` (it is for: prod)"
    );
}

const ORDERED: &str = "id: ordered
environments: [prod]
target:
  group: servers
  order: [ORDER]
steps:
  - id: apply
    kind: ansible
    playbook: playbooks/node-baseline.yml
    extra_vars: { k3s_hosts: \"{{ env.servers }}\" }
";

#[test]
fn an_order_naming_a_host_outside_the_target_fails_naming_it() {
    let rb = parse(&ORDERED.replace("ORDER", "k3s-prod-3, k3s-prod-1, k3s-prod-2, k3s-dev-1"));
    let err = plan(&rb, &prod(), &homelab()).expect_err("outsider");
    assert_eq!(
        err.to_string(),
        "runbook `ordered`: order names `k3s-dev-1`, which is not in target group `k3s_prod`"
    );
}

#[test]
fn an_order_missing_a_host_fails_naming_it() {
    let rb = parse(&ORDERED.replace("ORDER", "k3s-prod-3, k3s-prod-1"));
    let err = plan(&rb, &prod(), &homelab()).expect_err("missing");
    assert_eq!(
        err.to_string(),
        "runbook `ordered`: order for `prod` is missing `k3s-prod-2` of target group `k3s_prod`"
    );
}

#[test]
fn the_planner_inserts_a_list_hosts_the_runbook_left_out() {
    let rb = parse(&ORDERED.replace("ORDER", "k3s-prod-2, k3s-prod-1, k3s-prod-3"));
    // Unprotected, so the only steps added are the planner's list-hosts, etcd's snapshot
    // before the first server and, per server, its look at etcd's leader and the move (the
    // gate policy's previews and approvals are tested in runbooks_policy.rs).
    let env = PlanEnv {
        protected: false,
        ..prod()
    };
    let p = plan(&rb, &env, &homelab()).expect("plans");
    assert_eq!(host_order(&p), ["k3s-prod-2", "k3s-prod-1", "k3s-prod-3"]);
    assert_listed_before_first_mutation(&p);
    assert_eq!(p.steps.len(), 13);
    // etcd's snapshot (read-only) first, then the host's confirmation before anything
    // touches it.
    assert_eq!(p.steps[0].id, "etcd-snapshot.save");
    assert_eq!(p.steps[1].id, "apply.list-hosts");
    assert_eq!(
        argv(&p.steps[1]),
        "ansible-playbook -i inventory/hosts.ini playbooks/node-baseline.yml -e k3s_hosts=k3s_prod --limit k3s-prod-2 --list-hosts"
    );
}

#[test]
fn dev_gets_an_operator_present_gate_before_the_first_mutating_step() {
    let p = plan(&shipped("cilium-endpoint-rollout"), &dev(), &homelab()).expect("plans");
    let first_mut = p.steps.iter().position(|s| s.mutates).expect("mutates");
    let gate = p
        .steps
        .iter()
        .position(|s| s.gate == Some(Gate::OperatorPresent))
        .expect("gate");
    assert!(
        gate < first_mut,
        "gate at {gate}, first mutating step at {first_mut}"
    );
    assert_eq!(
        p.steps
            .iter()
            .filter(|s| s.gate == Some(Gate::OperatorPresent))
            .count(),
        1
    );
    // The VIP must answer before anything changes.
    let probe = p
        .steps
        .iter()
        .position(|s| s.kind == StepKind::Probe)
        .expect("probe");
    assert!(probe < first_mut);
    assert_eq!(
        p.steps[probe]
            .expect
            .as_ref()
            .and_then(|e| e.tcp.clone())
            .as_deref(),
        Some("192.168.1.49:6443")
    );
    assert_eq!(
        argv(&p.steps[first_mut]),
        "flux reconcile helmrelease cilium -n kube-system --with-source --kubeconfig .cache/dev.kubeconfig"
    );
    let waits: Vec<String> = p.steps[first_mut..]
        .iter()
        .filter_map(|s| s.expect.as_ref().and_then(|e| e.condition.clone()))
        .collect();
    assert_eq!(
        waits,
        ["daemonset-rolled-out kube-system/cilium", "agents-dial-vip"]
    );
}

#[test]
fn prod_gets_no_operator_present_gate() {
    let p = plan(&shipped("cilium-endpoint-rollout"), &prod(), &homelab()).expect("plans");
    assert!(p
        .steps
        .iter()
        .all(|s| s.gate != Some(Gate::OperatorPresent)));
    assert!(p.mutates);
}

#[test]
fn memattr_survey_fails_for_a_host_outside_the_required_group() {
    // k3s-prod-2 says its required group is the primary group, which it is not in.
    let topo = homelab().var(
        "k3s-prod-2",
        "memattr_survey_required_group",
        "k3s_prod_primary".into(),
    );
    let err = plan(&shipped("memattr-survey"), &prod(), &topo).expect_err("outsider");
    assert_eq!(
        err.to_string(),
        "runbook `memattr-survey`: host `k3s-prod-2` is not a member of `k3s_prod_primary` (required by require_member_of: memattr_survey_required_group)"
    );
}

#[test]
fn memattr_survey_authorises_before_passing_the_reboot_flag() {
    let p = plan(&shipped("memattr-survey"), &prod(), &homelab()).expect("plans");
    let auth = p
        .steps
        .iter()
        .position(|s| {
            s.gate
                == Some(Gate::Authorise {
                    flag: "memattr_survey_reboots_authorised".into(),
                })
        })
        .expect("authorise gate");
    let with_flag: Vec<usize> = p
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.command
                .as_ref()
                .is_some_and(|c| c.contains(&"memattr_survey_reboots_authorised=true".to_string()))
        })
        .map(|(i, _)| i)
        .collect();
    // Prod is protected: each node's run is previewed (--check) with the same flag first.
    let runs: Vec<&usize> = with_flag.iter().filter(|i| p.steps[**i].mutates).collect();
    assert_eq!(runs.len(), 3, "one run per node");
    assert_eq!(with_flag.len(), 6, "and one preview per node");
    assert!(with_flag.iter().all(|i| *i > auth));
    assert_eq!(host_order(&p), ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]);
    assert_listed_before_first_mutation(&p);
}

#[test]
fn a_required_group_that_is_neither_group_nor_var_fails() {
    let mut topo = homelab();
    topo.vars.clear();
    let err = plan(&shipped("memattr-survey"), &prod(), &topo).expect_err("unknown");
    assert!(
        matches!(err, PlanError::RequiredGroupUnknown { ref host, .. } if host == "k3s-prod-1"),
        "{err}"
    );
}

#[test]
fn packages_baseline_runs_on_the_one_named_node_with_the_packages_tag() {
    let mut env = prod();
    let err = plan(&shipped("packages-baseline"), &env, &homelab()).expect_err("no host");
    assert!(
        err.to_string()
            .contains("k3s-prod-1, k3s-prod-2, k3s-prod-3"),
        "{err}"
    );
    env.host = Some("k3s-dev-1".into());
    let err = plan(&shipped("packages-baseline"), &env, &homelab()).expect_err("wrong env's host");
    assert!(matches!(err, PlanError::HostNotInTarget { ref host, .. } if host == "k3s-dev-1"));
    env.host = Some("k3s-prod-1".into());
    let p = plan(&shipped("packages-baseline"), &env, &homelab()).expect("plans");
    let run = p
        .steps
        .iter()
        .find(|s| s.mutates && s.kind == StepKind::Ansible)
        .expect("a real run");
    assert_eq!(
        argv(run),
        "ansible-playbook -i inventory/hosts.ini playbooks/node-baseline.yml -e k3s_hosts=k3s_prod --limit k3s-prod-1 --tags packages"
    );
    assert_eq!(p.steps[0].kind, StepKind::ListHosts);
    assert!(argv(&p.steps[0]).ends_with("--limit k3s-prod-1 --tags packages --list-hosts"));
}

#[test]
fn cold_bringup_lists_every_server_and_names_the_cause_at_the_vip() {
    let p = plan(&shipped("cold-bringup"), &prod(), &homelab()).expect("plans");
    let list = p
        .steps
        .iter()
        .find(|s| s.kind == StepKind::ListHosts)
        .expect("list-hosts");
    assert_eq!(
        list.expect
            .as_ref()
            .and_then(|e| e.hosts.clone())
            .expect("hosts"),
        ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
    );
    let site = p.steps.iter().find(|s| s.mutates).expect("site.yml");
    assert_eq!(
        argv(site),
        "ansible-playbook -i inventory/hosts.ini playbooks/site.yml -e k3s_hosts=k3s_prod -e k3s_primary_hosts=k3s_prod_primary -e k3s_secondary_hosts=k3s_prod_secondary"
    );
    let probe = p.steps.last().expect("steps");
    assert_eq!(probe.kind, StepKind::Probe);
    let expect = probe.expect.as_ref().expect("expect");
    assert_eq!(expect.tcp.as_deref(), Some("192.168.2.9:6443"));
    assert!(expect
        .on_fail
        .as_deref()
        .is_some_and(|c| c.contains("kube-vip")));
    assert!(matches!(p.steps[0].gate, Some(Gate::TypedConfirm { ref phrase }) if phrase == "prod"));
}

#[test]
fn reprovision_runs_the_vpn_layer_only_on_a_gateway() {
    let mut env = dev();
    env.host = Some("k3s-dev-2".into());
    let p = plan(&shipped("reprovision-node"), &env, &homelab()).expect("plans");
    assert!(p.steps.iter().all(|s| !s.id.starts_with("vpn")));
    env.host = Some("k3s-dev-3".into());
    let p = plan(&shipped("reprovision-node"), &env, &homelab()).expect("plans");
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    let pos = |id: &str| {
        ids.iter()
            .position(|x| *x == id)
            .unwrap_or_else(|| panic!("{id} missing: {ids:?}"))
    };
    assert!(pos("node-baseline") < pos("k3s") && pos("k3s") < pos("kube-vip"));
    assert!(
        pos("kube-vip") < pos("vpn-egress-gateway")
            && pos("vpn-egress-gateway") < pos("vpn-tunnel-active")
    );
    assert!(pos("operator-present") < pos("node-baseline"));
    assert_listed_before_first_mutation(&p);
}

#[test]
fn vpn_egress_verify_is_read_only_and_targets_the_gateways() {
    let p = plan(&shipped("vpn-egress-verify"), &prod(), &homelab()).expect("plans");
    assert!(!p.mutates);
    assert_eq!(host_order(&p), ["k3s-prod-3"]);
    assert_eq!(
        argv(&p.steps[0]),
        "ssh k3s-prod-3 systemctl is-active vpn-egress-tunnel.service"
    );
    assert!(argv(&p.steps[1]).contains("--interface tun0"));
    // Read-only: no operator gate even where the environment asks for one.
    let p = plan(&shipped("vpn-egress-verify"), &dev(), &homelab()).expect("plans");
    assert!(p.steps.iter().all(|s| s.gate.is_none()));
}

#[test]
fn node_health_is_read_only_everywhere() {
    for env in [dev(), prod()] {
        let p = plan(&shipped("node-health"), &env, &homelab()).expect("plans");
        assert!(!p.mutates);
        let run = p
            .steps
            .iter()
            .find(|s| s.kind == StepKind::Ansible)
            .expect("play");
        assert!(argv(run).ends_with("--check --diff"));
    }
}

#[test]
fn an_undefined_template_variable_is_a_plan_error() {
    let rb = parse(
        "id: t\nenvironments: [prod]\ntarget: { group: servers }\nsteps:\n  - id: s\n    kind: ssh\n    mutates: false\n    command: \"echo {{ vars.no_such_var }}\"\n",
    );
    let err = plan(&rb, &prod(), &homelab()).expect_err("undefined");
    // Named: the variable, the step, the host and where the runbook uses it.
    assert!(
        matches!(&err, PlanError::UndefinedVar(u)
            if u.step == "s" && u.var == "no_such_var" && u.host == "k3s-prod-1" && u.line == 8),
        "{err}"
    );
    let topo = homelab()
        .var("k3s-prod-1", "no_such_var", "x1".into())
        .var("k3s-prod-2", "no_such_var", "x2".into())
        .var("k3s-prod-3", "no_such_var", "x3".into());
    let p = plan(&rb, &prod(), &topo).expect("defined now");
    assert_eq!(argv(&p.steps[0]), "ssh k3s-prod-1 echo x1");
    assert_eq!(p.steps.len(), 3, "read-only ssh needs no list-hosts");
    // A missing optional environment value is undefined too, never an empty string.
    let mut env = prod();
    env.secondary_group = None;
    let err = plan(&shipped("cold-bringup"), &env, &homelab()).expect_err("no secondary group");
    assert!(
        err.to_string()
            .contains("cannot render `{{ env.secondary_group }}`"),
        "{err}"
    );
}

#[test]
fn an_extra_var_with_spaces_is_passed_as_json() {
    let rb = parse(
        "id: t\nenvironments: [prod]\ntarget: { group: primary }\nsteps:\n  - id: a\n    kind: ansible\n    playbook: playbooks/x.yml\n    extra_vars: { remote: \"158.173.241.135 1198\" }\n",
    );
    let p = plan(&rb, &prod(), &homelab()).expect("plans");
    let c = p.steps[1].command.as_ref().expect("argv");
    assert!(
        c.contains(&r#"{"remote":"158.173.241.135 1198"}"#.to_string()),
        "{c:?}"
    );
}

#[test]
fn the_plan_json_has_the_documented_shape() {
    let p = plan(&shipped("etcd-io-priority"), &prod(), &homelab()).expect("plans");
    let json = serde_json::to_value(&p).expect("json");
    for key in ["runbook", "env", "mutates", "steps"] {
        assert!(json.get(key).is_some(), "{key}");
    }
    let step = &json["steps"][0];
    for key in [
        "n", "id", "kind", "host", "mutates", "gate", "command", "expect",
    ] {
        assert!(step.get(key).is_some(), "step lacks {key}: {step}");
    }
    assert_eq!(step["kind"], "list-hosts");
    assert_eq!(step["n"], 1);
    let back: Plan = serde_json::from_value(json).expect("round trip");
    assert_eq!(back, p);
}

#[test]
fn an_only_on_group_missing_from_the_inventory_fails_instead_of_skipping() {
    let rb = parse(
        "id: t\nenvironments: [prod]\ntarget: { group: servers }\nsteps:\n  - id: s\n    kind: ssh\n    only_on: vpn_gatewayz\n    mutates: false\n    command: uptime\n",
    );
    let err = plan(&rb, &prod(), &homelab()).expect_err("unknown group");
    assert_eq!(
        err.to_string(),
        "runbook `t`: group `vpn_gatewayz` is not in the inventory"
    );
}

#[test]
fn a_target_group_missing_from_the_inventory_fails() {
    let rb = parse("id: t\nenvironments: [prod]\ntarget: { group: k3s_nope }\nsteps:\n  - id: s\n    kind: ssh\n    mutates: false\n    command: uptime\n");
    let err = plan(&rb, &prod(), &homelab()).expect_err("unknown group");
    assert_eq!(
        err.to_string(),
        "runbook `t`: group `k3s_nope` is not in the inventory"
    );
}

#[test]
fn memattr_survey_refuses_dev_hosts_even_if_asked_to() {
    // The sample's required group is k3s_prod for every host: a dev server is not in it.
    let mut rb = shipped("memattr-survey");
    rb.environments.push("dev".into());
    let err = plan(&rb, &dev(), &homelab()).expect_err("dev hosts are outside k3s_prod");
    assert!(
        matches!(err, PlanError::NotAMember { ref host, ref group, .. } if host == "k3s-dev-1" && group == "k3s_prod"),
        "{err}"
    );
}

/// Issue 25: `timeout_s` on an ansible step bounds its preview and its run; on a
/// list-hosts step, the listing. Left out, the plan carries none (the executor's
/// defaults apply: `exec::step_timeout`).
#[test]
fn timeout_s_on_ansible_and_list_hosts_steps_is_planned() {
    let text = "id: bounded
environments: [prod]
target:
  group: servers
steps:
  - id: listed
    kind: list-hosts
    playbook: playbooks/node-baseline.yml
    timeout_s: 45
  - id: apply
    kind: ansible
    playbook: playbooks/node-baseline.yml
    check_first: true
    timeout_s: 600
";
    let p = plan(&parse(text), &prod(), &homelab()).expect("plans");
    let limit = |s: &PlannedStep| s.expect.as_ref().and_then(|e| e.timeout_s);
    let listed: Vec<_> = p.steps.iter().filter(|s| s.id == "listed").collect();
    assert!(!listed.is_empty());
    assert!(listed.iter().all(|s| limit(s) == Some(45)), "{listed:#?}");
    let plays: Vec<_> = p
        .steps
        .iter()
        .filter(|s| s.kind == StepKind::Ansible)
        .collect();
    assert!(plays.len() >= 2, "the preview and the run: {plays:#?}");
    assert!(plays.iter().all(|s| limit(s) == Some(600)), "{plays:#?}");
    let unbounded = plan(
        &parse(
            ORDERED
                .replace("ORDER", "k3s-prod-1, k3s-prod-2, k3s-prod-3")
                .as_str(),
        ),
        &prod(),
        &homelab(),
    )
    .expect("plans");
    // The planner's own etcd-leader and etcd-snapshot steps carry theirs.
    assert!(unbounded
        .steps
        .iter()
        .filter(|s| !matches!(s.kind, StepKind::EtcdLeader | StepKind::EtcdSnapshot))
        .all(|s| limit(s).is_none()));
    let d = hk_console::exec::step_timeout(
        unbounded
            .steps
            .iter()
            .find(|s| s.kind == StepKind::Ansible)
            .expect("a play"),
    );
    assert_eq!(d, Some(hk_console::exec::ANSIBLE_TIMEOUT));
}

fn blocker(kind: &str, at: &str) -> hk_console::runbook::plan::Blocker {
    hk_console::runbook::plan::Blocker {
        kind: kind.into(),
        at: at.into(),
        message: format!("{kind} here"),
        fix: format!("undo the {kind}"),
    }
}

/// Blockers make the plan an error naming every one of them, with its fix; the topology is
/// asked about the runbook's playbooks (tagged or not) on the hosts the plan touches.
#[test]
fn blockers_stop_the_plan_and_every_one_is_named() {
    use hk_console::runbook::plan::PlaybookUse;
    let mut topo = homelab();
    topo.blocked = vec![
        blocker(
            "role-not-found",
            "infra/ansible/playbooks/etcd-io-priority.yml:12:7",
        ),
        blocker(
            "vault-locked",
            "infra/ansible/inventory/group_vars/k3s_prod/vault.yml",
        ),
    ];
    let err = plan(&shipped("etcd-io-priority"), &prod(), &topo).expect_err("blocked");
    let PlanError::Blocked {
        runbook,
        env,
        blockers,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!(
        (runbook.as_str(), env.as_str(), blockers.len()),
        ("etcd-io-priority", "prod", 2)
    );
    let text = err.to_string();
    assert!(
        text.starts_with(
            "runbook `etcd-io-priority` cannot start on `prod`: 2 blockers before step 1\n"
        ),
        "{text}"
    );
    assert!(text.contains("infra/ansible/playbooks/etcd-io-priority.yml:12:7: [role-not-found] role-not-found here\n    fix: undo the role-not-found"), "{text}");
    assert!(
        text.contains("k3s_prod/vault.yml: [vault-locked]"),
        "{text}"
    );
    let asked = topo.asked.lock().expect("lock").clone();
    assert_eq!(
        asked.last().expect("asked"),
        &(
            vec![PlaybookUse {
                playbook: "playbooks/etcd-io-priority.yml".into(),
                tagged: false
            }],
            vec![
                "k3s-prod-3".to_string(),
                "k3s-prod-1".into(),
                "k3s-prod-2".into()
            ]
        )
    );

    // A run limited by --tags says so (a variable's use is then the tags' to decide).
    let mut env = prod();
    env.host = Some("k3s-prod-2".into());
    let err = plan(&shipped("packages-baseline"), &env, &topo).expect_err("blocked");
    assert!(matches!(err, PlanError::Blocked { .. }), "{err}");
    let asked = topo.asked.lock().expect("lock").clone();
    assert_eq!(
        asked.last().expect("asked"),
        &(
            vec![PlaybookUse {
                playbook: "playbooks/node-baseline.yml".into(),
                tagged: true
            }],
            vec!["k3s-prod-2".to_string()]
        )
    );

    // Refusals that are not about the repo's files stay what they are (the console's host
    // picker reads this one).
    let err = plan(&shipped("packages-baseline"), &prod(), &topo).expect_err("no host");
    assert!(matches!(err, PlanError::NoHostChosen { .. }), "{err}");
    // No blockers: it plans.
    assert!(plan(&shipped("etcd-io-priority"), &prod(), &homelab()).is_ok());
}

/// A one-host runbook whose target group holds exactly one host plans on it without being
/// told (issue 38: `plan vpn-eviction-fix --env prod` refused with one candidate); with two
/// or more the host must still be named, and a named host must still be in the group.
#[test]
fn the_only_host_that_qualifies_is_taken_and_two_must_be_named() {
    let topo = homelab();
    for (env, gateway) in [(prod(), "k3s-prod-3"), (dev(), "k3s-dev-3")] {
        let p = plan(&shipped("vpn-eviction-fix"), &env, &topo)
            .unwrap_or_else(|e| panic!("{}: {e}", env.name));
        let listed: Vec<&PlannedStep> = p
            .steps
            .iter()
            .filter(|s| s.kind == StepKind::ListHosts)
            .collect();
        assert!(
            !listed.is_empty(),
            "the host set is still confirmed: {p:#?}"
        );
        for s in &listed {
            assert!(
                argv(s).contains(&format!("--limit {gateway}")),
                "{}",
                argv(s)
            );
        }
        let applies: Vec<String> = p
            .steps
            .iter()
            .filter(|s| s.kind == StepKind::Ansible)
            .map(argv)
            .collect();
        assert!(!applies.is_empty(), "{p:#?}");
        for a in &applies {
            assert!(a.contains(&format!("--limit {gateway}")), "{a}");
        }
    }
    // Three servers: nothing to take, the operator names one.
    let err = plan(&shipped("packages-baseline"), &prod(), &topo).expect_err("three servers");
    assert!(matches!(err, PlanError::NoHostChosen { .. }), "{err}");
    // A named host outside the one-host group is refused as before.
    let mut env = prod();
    env.host = Some("k3s-prod-1".into());
    let err = plan(&shipped("vpn-eviction-fix"), &env, &topo).expect_err("not a gateway");
    assert!(matches!(err, PlanError::HostNotInTarget { .. }), "{err}");
}

/// Every undefined variable a template needs, sorted, in one error.
#[test]
fn every_undefined_variable_is_named_sorted() {
    let rb = parse(
        "id: t\nenvironments: [prod]\ntarget: { group: servers }\nsteps:\n  - id: s\n    kind: ssh\n    mutates: false\n    command: \"echo {{ vars.zz }} {{ vars.aa }} {{ vars.k3s_data_dir }} {{ vars.mm }}\"\n",
    );
    for _ in 0..5 {
        let err = plan(&rb, &prod(), &homelab()).expect_err("undefined");
        let PlanError::UndefinedVar(u) = &err else {
            panic!("{err}");
        };
        assert_eq!(u.vars, ["aa", "mm", "zz"], "{err}");
        assert_eq!(u.var, "aa");
        assert!(
            err.to_string()
                .contains("`vars.aa`, `vars.mm` and `vars.zz` are not defined for k3s-prod-1"),
            "{err}"
        );
    }
}

/// `order: servers_first` on a group holding servers and agents, listed agents first in
/// the inventory: the servers one at a time, then the agents, each part in inventory
/// order; a host the inventory gains is in the next plan (nothing is named in the runbook
/// to go stale).
#[test]
fn servers_first_puts_the_environments_servers_before_its_other_hosts() {
    let rb = parse(
        "id: rolling
environments: [prod]
target:
  group: cluster
  serial: 1
  order: servers_first
steps:
  - id: apply
    kind: ansible
    playbook: playbooks/node-baseline.yml
",
    );
    let env = PlanEnv {
        agents: Some("agents".into()),
        ..prod()
    };
    // The plan's host order for a `cluster` group listed as given.
    let order = |cluster: &[&str]| {
        let topo = homelab()
            .group("agents", &["k3s-prod-a1", "k3s-prod-a2"])
            .group("cluster", cluster);
        let p = plan(&rb, &env, &topo).expect("plans");
        assert_listed_before_first_mutation(&p);
        host_order(&p)
    };
    assert_eq!(
        order(&[
            "k3s-prod-a1",
            "k3s-prod-2",
            "k3s-prod-a2",
            "k3s-prod-1",
            "k3s-prod-3"
        ]),
        [
            "k3s-prod-2",
            "k3s-prod-1",
            "k3s-prod-3",
            "k3s-prod-a1",
            "k3s-prod-a2"
        ]
    );
    assert_eq!(
        order(&[
            "k3s-prod-a1",
            "k3s-prod-2",
            "k3s-prod-a9",
            "k3s-prod-1",
            "k3s-prod-3"
        ]),
        [
            "k3s-prod-2",
            "k3s-prod-1",
            "k3s-prod-3",
            "k3s-prod-a1",
            "k3s-prod-a9"
        ]
    );
}
