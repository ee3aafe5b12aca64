//! One invalid runbook per validation error, each with the exact diagnostic it must give
//! (file:line:col, message and hint), like bottom's tests/invalid_configs.
use std::fs;

use hk_engine::runbook::validate::validate_text;

fn dir() -> std::path::PathBuf {
    hk_test_support::fixture("runbooks/invalid")
}

/// (fixture, the one diagnostic it gives, as printed).
const EXPECTED: &[(&str, &str)] = &[
    (
        "ansible-timeout-zero.yaml",
        "ansible-timeout-zero.yaml:9:16: `timeout_s: 0` would stop the play before it could answer\n  hint: give the seconds the play may take, e.g. `timeout_s: 1800`; left out, ansible steps get 30 min and list-hosts 5 min",
    ),
    (
        "bad-id.yaml",
        "bad-id.yaml:1:5: runbook id `Broken_Runbook` is not a valid id\n  hint: ids are lower-case letters, digits and `-`, e.g. `etcd-io-priority`",
    ),
    (
        "check-and-check-first.yaml",
        "check-and-check-first.yaml:9:5: `check_first` and `check` exclude each other\n  hint: `check: true` only previews; `check_first: true` previews, then applies",
    ),
    (
        "check-first-on-ssh.yaml",
        "check-first-on-ssh.yaml:10:5: check_first is only for ansible steps, not `ssh`\n  hint: only ansible-playbook has a check mode to run first",
    ),
    (
        "condition-without-object.yaml",
        "condition-without-object.yaml:6:16: kube-wait condition `daemonset-rolled-out` needs what to wait for\n  hint: e.g. `daemonset-rolled-out kube-system/cilium`, `node-ready {{ host }}`",
    ),
    (
        "duplicate-step-id.yaml",
        "duplicate-step-id.yaml:9:9: duplicate step id `apply` (first used at line 6)\n  hint: every step needs its own id: the journal names steps by it",
    ),
    (
        "empty-steps.yaml",
        "empty-steps.yaml:3:8: a runbook needs at least one step",
    ),
    (
        "extra-var-not-scalar.yaml",
        "extra-var-not-scalar.yaml:10:18: extra var `k3s_hosts` must be a string, number or boolean\n  hint: hk-console passes extra vars as `-e key=value`",
    ),
    (
        "field-not-on-kind.yaml",
        "field-not-on-kind.yaml:7:5: `command` is not a field of a step of kind `probe`\n  hint: a step of kind `probe` takes: tcp, timeout_s, on_fail",
    ),
    (
        "flag-authorised-after.yaml",
        "flag-authorised-after.yaml:10:7: extra var `memattr_survey_reboots_authorised: yes` is not authorised by a preceding `authorise memattr_survey_reboots_authorised` gate\n  hint: add a step `{ kind: gate, gate: authorise memattr_survey_reboots_authorised }` before this one: a flag like this (a reboot) is never passed silently",
    ),
    (
        "flux-object-bad.yaml",
        "flux-object-bad.yaml:6:13: flux object `cilium` is not <kind>/<name>\n  hint: e.g. `object: helmrelease/cilium` with `namespace: kube-system`",
    ),
    (
        "gate-without-flag.yaml",
        "gate-without-flag.yaml:6:11: gate `authorise` without the flag it authorises\n  hint: write `gate: authorise <extra var>`, e.g. `gate: authorise memattr_survey_reboots_authorised`",
    ),
    (
        "host-in-once-step.yaml",
        "host-in-once-step.yaml:6:10: `host` is only defined in a per-host step\n  hint: give the runbook a target and the step `scope: host`",
    ),
    (
        "host-scope-without-target.yaml",
        "host-scope-without-target.yaml:7:12: a per-host step needs a runbook `target`\n  hint: add `target: { group: servers }` or make the step `scope: once`",
    ),
    (
        "kube-wait-without-timeout.yaml",
        "kube-wait-without-timeout.yaml:5:5: a step of kind `kube-wait` needs `timeout_s`\n  hint: say how long to wait, in seconds, e.g. `timeout_s: 600`",
    ),
    (
        "malformed-yaml.yaml",
        "malformed-yaml.yaml:7:1: malformed YAML: while parsing a flow sequence, expected ',' or ']'\n  hint: check the indentation and quoting around this position",
    ),
    (
        "manual-without-title.yaml",
        "manual-without-title.yaml:5:5: a step of kind `manual` needs a `title`\n  hint: the title is what the operator is asked to do, e.g. `title: Run tofu -replace on the node`",
    ),
    (
        "missing-required.yaml",
        "missing-required.yaml:7:5: a step of kind `ansible` needs `playbook`\n  hint: a step of kind `ansible` needs: playbook (see docs/runbooks.md)",
    ),
    (
        "missing-steps.yaml",
        "missing-steps.yaml:1:1: missing field `steps`\n  hint: see docs/runbooks.md for the runbook format",
    ),
    (
        "mutates-on-ansible.yaml",
        "mutates-on-ansible.yaml:9:5: whether an ansible step mutates is derived, not declared\n  hint: an ansible step mutates unless it has `check: true`; remove `mutates`",
    ),
    (
        "mutating-in-read-only.yaml",
        "mutating-in-read-only.yaml:12:11: step `fix` mutates but the runbook is read_only (an ansible step without `check: true` mutates)\n  hint: remove the step, make it non-mutating, or drop `read_only: true`",
    ),
    (
        "no-environments.yaml",
        "no-environments.yaml:2:15: a runbook must name the environments it is meant for\n  hint: e.g. `environments: [prod]`",
    ),
    (
        "not-a-mapping.yaml",
        "not-a-mapping.yaml:1:1: a runbook must be a mapping\n  hint: start with `id:`, `environments:` and `steps:` (see docs/runbooks.md)",
    ),
    (
        "only-on-once.yaml",
        "only-on-once.yaml:9:5: `only_on` applies to per-host steps only\n  hint: remove it or make the step per-host",
    ),
    (
        "opt-out-check-first-false.yaml",
        "opt-out-check-first-false.yaml:10:5: `check_first: false` would skip the preview the gate policy requires in a protected environment\n  hint: remove it: left out, the step runs as written where the environment is not protected and is previewed and approved where it is; `check_first: true` previews it everywhere",
    ),
    (
        "opt-out-skip-gates.yaml",
        "opt-out-skip-gates.yaml:4:1: `skip_gates` would opt out of the gate policy: a runbook can add gates, never remove them\n  hint: the gate policy comes from hk-console.yaml (`protected: true`): every mutating step there is previewed and approved whatever the runbook says; remove this field (docs/runbooks.md, \"The gate policy\")",
    ),
    (
        "order-duplicate-host.yaml",
        "order-duplicate-host.yaml:5:35: host `k3s-prod-3` is named twice in order\n  hint: an order names every target host exactly once",
    ),
    (
        "order-unknown-word.yaml",
        "order-unknown-word.yaml:5:10: order `agents_first` is not a named order\n  hint: a list of hosts, a map environment -> list of hosts, or one of: servers_first",
    ),
    (
        "order-unknown-env.yaml",
        "order-unknown-env.yaml:7:5: order names environment `staging`, which the runbook is not meant for\n  hint: environments: [prod]",
    ),
    (
        "order-with-single.yaml",
        "order-with-single.yaml:6:10: `order` cannot be combined with `single: true`\n  hint: a single-host target runs on the one host named at plan time",
    ),
    (
        "probe-not-host-port.yaml",
        "probe-not-host-port.yaml:6:10: probe target `{{ env.vip }}` is not host:port\n  hint: e.g. `tcp: \"{{ env.vip }}:{{ env.api_port }}\"`",
    ),
    (
        "serial-two.yaml",
        "serial-two.yaml:5:11: serial: 2 is not supported\n  hint: hk-console runs one node at a time: use `serial: 1` or leave it out",
    ),
    (
        "ssh-once.yaml",
        "ssh-once.yaml:8:12: an ssh step runs on a host, so it cannot be `scope: once`\n  hint: give the runbook a target and leave the step per-host",
    ),
    (
        "ssh-without-mutates.yaml",
        "ssh-without-mutates.yaml:7:5: a step of kind `ssh` needs `mutates`\n  hint: ssh cannot know what a command does: say `mutates: true` or `mutates: false`",
    ),
    (
        "template-syntax.yaml",
        "template-syntax.yaml:6:10: template syntax error: unexpected `:`, expected end of variable block\n  hint: templates use minijinja syntax: `{{ env.vip }}`",
    ),
    (
        "unauthorised-flag.yaml",
        "unauthorised-flag.yaml:11:7: extra var `memattr_survey_reboots_authorised: true` is not authorised by a preceding `authorise memattr_survey_reboots_authorised` gate\n  hint: add a step `{ kind: gate, gate: authorise memattr_survey_reboots_authorised }` before this one: a flag like this (a reboot) is never passed silently",
    ),
    (
        "unknown-condition.yaml",
        "unknown-condition.yaml:6:16: unknown kube-wait condition `cluster-happy`\n  hint: the conditions are: daemonset-rolled-out <what>, node-ready <what>, agents-dial-vip, lease-held <what>",
    ),
    (
        "unknown-gate.yaml",
        "unknown-gate.yaml:6:11: unknown gate `ask-nicely`\n  hint: the gates are: operator-present, typed-confirm [phrase], authorise <flag>",
    ),
    (
        "unknown-kind.yaml",
        "unknown-kind.yaml:5:11: unknown step kind `shell`\n  hint: the kinds are: list-hosts, ansible, ssh, kube-wait, repo-wait, vpn-wait, probe, gate, manual, flux-reconcile",
    ),
    (
        "unknown-scope.yaml",
        "unknown-scope.yaml:8:12: unknown scope `each`\n  hint: scope is `host` (once per target host) or `once`",
    ),
    (
        "unknown-step-field.yaml",
        "unknown-step-field.yaml:9:5: steps[0]: unknown field `comand`\n  hint: expected one of `id`, `kind`, `title`, `scope`, `only_on`, `disrupts`, `playbook`, `extra_vars`, `tags`, `limit`, `check_first`, `check`, `expect_hosts`, `command`, `expect`, `mutates`, `condition`, `timeout_s`, `tcp`, `on_fail`, `gate`, `object`, `namespace` (see docs/runbooks.md)",
    ),
    (
        "unknown-template-var.yaml",
        "unknown-template-var.yaml:6:10: unknown template variable `env.vipp`\n  hint: the environment variables are env.name, env.servers, env.vpn_gateways, env.agents, env.primary_group, env.secondary_group, env.vip, env.api_port, env.kube_vip_lease, env.vpn_unit, env.vpn_interface, env.vpn_exit_ip_url",
    ),
    (
        "unknown-top-field.yaml",
        "unknown-top-field.yaml:3:1: unknown field `owner`\n  hint: expected one of `id`, `title`, `description`, `environments`, `read_only`, `target`, `defaults`, `steps` (see docs/runbooks.md)",
    ),
    (
        "wrong-type.yaml",
        "wrong-type.yaml:7:16: steps[0].timeout_s: invalid type: string \"soon\"\n  hint: expected u64 (see docs/runbooks.md)",
    ),
];

#[test]
fn every_invalid_fixture_gives_its_diagnostic() {
    let mut failures = Vec::new();
    for (name, expected) in EXPECTED {
        let text = fs::read_to_string(dir().join(name)).expect("fixture exists");
        match validate_text(name, &text) {
            Ok(_) => failures.push(format!("{name}: validated, expected `{expected}`")),
            Err(diags) => {
                let got: Vec<String> = diags.iter().map(ToString::to_string).collect();
                if got != [expected.to_string()] {
                    failures.push(format!(
                        "{name}:\n  expected {expected:?}\n  got      {got:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fixture_in_the_folder_is_asserted() {
    let mut on_disk: Vec<String> = fs::read_dir(dir())
        .expect("fixtures dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = EXPECTED.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn diagnostics_print_as_file_line_col_then_the_hint() {
    for (name, expected) in EXPECTED {
        let first = expected.lines().next().expect("a line");
        let rest = first
            .strip_prefix(&format!("{name}:"))
            .expect("starts with the file");
        let mut parts = rest.splitn(3, ':');
        let line: usize = parts.next().expect("line").parse().expect("a line number");
        let col: usize = parts.next().expect("col").parse().expect("a column");
        assert!(line >= 1 && col >= 1, "{first}");
        if let Some(hint) = expected.lines().nth(1) {
            assert!(hint.starts_with("  hint: "), "{hint}");
        }
    }
}

#[test]
fn garbage_never_panics() {
    let inputs = [
        "",
        "\t",
        "[",
        "{",
        "- - -",
        "id: [",
        "steps: {",
        "\u{0}",
        ": :",
        "&a [*a]",
        "*nope",
        "id: x\nenvironments: [p]\nsteps:\n  - !!binary x\n",
        "id: x\nsteps:\n  - id: a\n    kind: 3\n",
    ];
    for text in inputs {
        let r = validate_text("g.yaml", text);
        let diags = r.expect_err("garbage is invalid");
        assert!(!diags.is_empty());
        assert!(diags[0].to_string().starts_with("g.yaml:"), "{}", diags[0]);
    }
}

#[test]
fn mangled_shipped_runbooks_never_panic_and_always_point_into_the_file() {
    for (name, text) in hk_engine::runbook::embedded::embedded() {
        let lines: Vec<&str> = text.lines().collect();
        for cut in 0..lines.len() {
            // Drop one line, or truncate the file there: either way a result, never a panic.
            let dropped = [&lines[..cut], &lines[cut + 1..]].concat().join("\n");
            let truncated = lines[..cut].join("\n");
            for mangled in [dropped, truncated] {
                if let Err(diags) = validate_text(name, &mangled) {
                    for d in diags {
                        assert!(d.line >= 1 && d.line <= lines.len() + 1, "{d}");
                        assert!(d.col >= 1, "{d}");
                    }
                }
            }
        }
    }
}
