//! The parity rules over hand-built facts: one failing case per rule (asserting rule, env and
//! file:line), and the clean case. The addresses are the documented homelab's, as test data.

use std::path::{Path, PathBuf};

use hk_engine::checks::parity::{
    check, exit_code, rules, to_json, EnvFacts, Finding, Loc, Located, NodeAddr, OverlayFact,
    ParityInput, Problem, Severity, TextFile, VarFact, VaultNeed, VaultState,
};
use hk_engine::checks::parity::{summary, HelmFacts};
use hk_engine::repo::flux::{HelmValue, OverlayValue, SetBy, SourceLoc};

const VARS: &str = "infra/ansible/inventory/group_vars/k3s_prod/vars.yml";
const ALL: &str = "infra/ansible/inventory/group_vars/all.yml";
const OVERLAY: &str = "clusters/prod/kustomization.yaml";

fn loc(file: &str, line: usize) -> Loc {
    Loc::new(file, line)
}

fn at<T>(value: T, file: &str, line: usize) -> Option<Located<T>> {
    Some(Located::new(value, loc(file, line)))
}

fn raw(value: &str, file: &str, line: usize) -> Vec<Located<String>> {
    vec![Located::new(value.to_string(), loc(file, line))]
}

fn overlay(value: &str, line: usize) -> Option<OverlayFact> {
    Some(OverlayFact::Resolved(OverlayValue {
        var: "K3S_API_HOST".into(),
        value: value.into(),
        at: SourceLoc {
            file: OVERLAY.into(),
            line,
            col: 21,
        },
        set_by: SetBy::Substitute,
        kustomization: "flux-system/platform".into(),
        kustomization_at: SourceLoc {
            file: OVERLAY.into(),
            line: 1,
            col: 1,
        },
        kustomization_path: Some("./platform".into()),
        unread_sources: vec![],
    }))
}

fn fixture(rel: &str) -> TextFile {
    let path = hk_test_support::root()
        .join("tests/fixtures/check/parity")
        .join(rel);
    TextFile {
        path: PathBuf::from(rel),
        text: Some(std::fs::read_to_string(&path).expect("fixture")),
    }
}

fn prod() -> EnvFacts {
    let nodes = [
        ("k3s-prod-1", "192.168.2.10"),
        ("k3s-prod-2", "192.168.2.11"),
        ("k3s-prod-3", "192.168.2.12"),
    ];
    EnvFacts {
        name: "prod".into(),
        overlay: overlay("192.168.2.9", 12),
        endpoint: at("192.168.2.9".into(), ALL, 7),
        vip: at("192.168.2.9".into(), VARS, 4),
        founder: at("192.168.2.10".into(), VARS, 3),
        api_port: at("6443".into(), ALL, 8),
        nodes: nodes
            .iter()
            .map(|(h, a)| NodeAddr {
                host: h.to_string(),
                address: a.to_string(),
            })
            .collect(),
        endpoint_raw: raw("{{ kube_vip_address }}", ALL, 7),
        api_host_raw: raw("192.168.2.10", VARS, 3),
        tls_sans: at(
            [
                "192.168.2.10",
                "192.168.2.9",
                "127.0.0.1",
                "192.168.2.11",
                "192.168.2.12",
            ]
            .map(String::from)
            .to_vec(),
            ALL,
            9,
        ),
        vault: VaultState::Present {
            file: "infra/ansible/inventory/group_vars/k3s_prod/vault.yml".into(),
            vaulted: true,
        },
        vars: vec![VarFact {
            name: "node_baseline_longhorn_device".into(),
            value: "/dev/sdb".into(),
            at: loc(VARS, 20),
        }],
        helm: None,
        problems: vec![],
        ..EnvFacts::default()
    }
}

fn clean() -> ParityInput {
    ParityInput {
        envs: vec![prod()],
        cilium_template: Some(fixture("cilium/good.yaml.j2")),
        site_yml: Some(fixture("site/good.yml")),
        engine_line: None,
        not_applicable: Vec::new(),
        off: Vec::new(),
    }
}

fn only(findings: &[Finding], rule: &str) -> Finding {
    let hits: Vec<&Finding> = findings.iter().filter(|f| f.rule == rule).collect();
    assert_eq!(
        hits.len(),
        1,
        "expected one {rule} finding, got: {findings:#?}"
    );
    hits[0].clone()
}

fn assert_finding(f: &Finding, env: Option<&str>, file: &str, line: usize, severity: Severity) {
    assert_eq!(f.env.as_deref(), env, "{f}");
    assert_eq!((f.file.as_path(), f.line), (Path::new(file), line), "{f}");
    assert_eq!(f.severity, severity, "{f}");
}

#[test]
fn clean_facts_give_no_findings_and_exit_0() {
    let findings = check(&clean());
    assert!(findings.is_empty(), "{findings:#?}");
    assert_eq!(exit_code(&findings), 0);
    assert_eq!(to_json(&findings)["clean"], true);
}

#[test]
fn overlay_on_the_founder_breaks_three_rules() {
    // The 2026-09-06 incident: prod agents dialled the founder.
    let mut input = clean();
    input.envs[0].overlay = overlay("192.168.2.10", 12);
    let findings = check(&input);
    for rule in [
        rules::OVERLAY_ENDPOINT,
        rules::OVERLAY_VIP,
        rules::OVERLAY_NODE_IP,
    ] {
        let f = only(&findings, rule);
        assert_finding(&f, Some("prod"), OVERLAY, 12, Severity::Violation);
    }
    let node = only(&findings, rules::OVERLAY_NODE_IP);
    assert!(node.message.contains("k3s-prod-1"), "{node}");
    assert_eq!(exit_code(&findings), 1);
    assert_eq!(
        node.to_string(),
        format!("{OVERLAY}:12: [overlay-not-node-ip] prod: {}", node.message)
    );
}

#[test]
fn overlay_differing_from_the_endpoint_only() {
    // An endpoint overridden away from the VIP: the overlay still equals the VIP.
    let mut input = clean();
    input.envs[0].endpoint = at("192.168.2.20".into(), VARS, 8);
    let findings = check(&input);
    let f = only(&findings, rules::OVERLAY_ENDPOINT);
    assert_finding(&f, Some("prod"), OVERLAY, 12, Severity::Violation);
    assert!(f.message.contains(&format!("{VARS}:8")), "{f}");
    assert!(
        findings.iter().all(|f| f.rule != rules::OVERLAY_VIP),
        "{findings:#?}"
    );
}

#[test]
fn overlay_that_cannot_be_resolved() {
    let mut input = clean();
    input.envs[0].overlay = Some(OverlayFact::Failed {
        message: "K3S_API_HOST is not set".into(),
        at: loc(OVERLAY, 3),
    });
    let f = only(&check(&input), rules::OVERLAY_RESOLVES);
    assert_finding(&f, Some("prod"), OVERLAY, 3, Severity::Violation);
}

#[test]
fn endpoint_restated_instead_of_derived() {
    let mut input = clean();
    input.envs[0].endpoint_raw = raw("192.168.2.9", VARS, 6);
    let f = only(&check(&input), rules::ENDPOINT_DERIVED);
    assert_finding(&f, Some("prod"), VARS, 6, Severity::Violation);
}

#[test]
fn endpoint_template_with_filters_still_counts_as_derived() {
    let mut input = clean();
    input.envs[0].endpoint_raw = raw("{{ kube_vip_address | ansible.utils.ipaddr }}", ALL, 7);
    assert!(check(&input).is_empty());
    // ...but a string literal mentioning the name does not.
    input.envs[0].endpoint_raw = raw("{{ 'kube_vip_address' }}", ALL, 7);
    only(&check(&input), rules::ENDPOINT_DERIVED);
}

#[test]
fn founder_derived_from_the_vip() {
    let mut input = clean();
    input.envs[0].api_host_raw = raw("{{ kube_vip_address }}", VARS, 3);
    input.envs[0].founder = at("192.168.2.9".into(), VARS, 3);
    let f = only(&check(&input), rules::API_HOST_NOT_VIP);
    assert_finding(&f, Some("prod"), VARS, 3, Severity::Violation);
}

#[test]
fn founder_restating_the_vip() {
    let mut input = clean();
    input.envs[0].api_host_raw = raw("192.168.2.9", VARS, 3);
    input.envs[0].founder = at("192.168.2.9".into(), VARS, 3);
    let f = only(&check(&input), rules::API_HOST_NOT_VIP);
    assert_finding(&f, Some("prod"), VARS, 3, Severity::Violation);
}

#[test]
fn tls_sans_without_the_vip() {
    let mut input = clean();
    input.envs[0].tls_sans = at(vec!["192.168.2.10".into(), "127.0.0.1".into()], ALL, 9);
    let f = only(&check(&input), rules::TLS_SANS);
    assert_finding(&f, Some("prod"), ALL, 9, Severity::Violation);
    assert!(f.message.contains("the VIP 192.168.2.9"), "{f}");
}

#[test]
fn tls_sans_without_the_founder() {
    let mut input = clean();
    input.envs[0].tls_sans = at(vec!["192.168.2.9".into()], ALL, 9);
    let f = only(&check(&input), rules::TLS_SANS);
    assert!(f.message.contains("the founder 192.168.2.10"), "{f}");
}

#[test]
fn cilium_template_consuming_the_founder() {
    let mut input = clean();
    input.cilium_template = Some(fixture("cilium/founder.yaml.j2"));
    let f = only(&check(&input), rules::CILIUM_ENDPOINT);
    assert_finding(&f, None, "cilium/founder.yaml.j2", 3, Severity::Violation);
    assert!(f.message.contains("k3s_api_host"), "{f}");
}

#[test]
fn cilium_template_with_a_literal() {
    let mut input = clean();
    input.cilium_template = Some(fixture("cilium/literal.yaml.j2"));
    let f = only(&check(&input), rules::CILIUM_ENDPOINT);
    assert_finding(&f, None, "cilium/literal.yaml.j2", 3, Severity::Violation);
    assert!(f.message.contains("literal"), "{f}");
}

#[test]
fn cilium_template_without_the_key_or_missing() {
    let mut input = clean();
    input.cilium_template = Some(fixture("cilium/missing-key.yaml.j2"));
    let f = only(&check(&input), rules::CILIUM_ENDPOINT);
    assert_finding(
        &f,
        None,
        "cilium/missing-key.yaml.j2",
        0,
        Severity::Violation,
    );
    input.cilium_template = Some(TextFile {
        path: "roles/cilium/templates/cilium-values.yaml.j2".into(),
        text: None,
    });
    let f = only(&check(&input), rules::CILIUM_ENDPOINT);
    assert!(f.message.contains("does not exist"), "{f}");
}

#[test]
fn site_yml_missing_kube_vip() {
    let mut input = clean();
    input.site_yml = Some(fixture("site/missing-kube-vip.yml"));
    let f = only(&check(&input), rules::SITE_ORDER);
    assert_finding(
        &f,
        None,
        "site/missing-kube-vip.yml",
        0,
        Severity::Violation,
    );
    assert!(f.message.contains("kube-vip.yml"), "{f}");
    assert!(f.message.contains("2026-09-01"), "{f}");
}

#[test]
fn site_yml_cilium_before_kube_vip() {
    let mut input = clean();
    input.site_yml = Some(fixture("site/wrong-order.yml"));
    let f = only(&check(&input), rules::SITE_ORDER);
    // Points at the cilium import that comes too early.
    assert_finding(&f, None, "site/wrong-order.yml", 4, Severity::Violation);
    assert!(f.message.contains("cilium.yml before kube-vip.yml"), "{f}");
}

#[test]
fn site_yml_malformed_is_a_finding_not_a_panic() {
    let mut input = clean();
    input.site_yml = Some(fixture("site/malformed.yml"));
    let f = only(&check(&input), rules::SITE_ORDER);
    assert_eq!(f.file, Path::new("site/malformed.yml"));
    assert!(f.line >= 3, "{f}");
}

/// An absent vault nothing needs stops no play: not a finding (it was a warning that turned
/// every healthy prod amber while its `--check` previews ran fine).
#[test]
fn vault_missing_and_needed_by_nothing_is_no_finding() {
    let mut input = clean();
    input.envs[0].vault = VaultState::Missing {
        expected: "infra/ansible/inventory/group_vars/k3s_prod/vault.yml".into(),
        needed_by: vec![],
    };
    let findings = check(&input);
    assert!(findings.is_empty(), "{findings:#?}");
    assert_eq!(exit_code(&findings), 0);
}

/// Absent while a become password names a variable nothing defines: every escalating play
/// stops, so it is a violation at the password variable's line, naming the vault file.
#[test]
fn vault_missing_and_needed_by_the_become_password_is_a_violation() {
    let mut input = clean();
    input.envs[0].vault = VaultState::Missing {
        expected: "infra/ansible/inventory/group_vars/k3s_prod/vault.yml".into(),
        needed_by: vec![VaultNeed {
            var: "ansible_become_password".into(),
            at: loc(VARS, 30),
            reason: "`vault_become_password` is not defined for this host".into(),
        }],
    };
    let findings = check(&input);
    let f = only(&findings, rules::VAULT_MISSING);
    assert_finding(&f, Some("prod"), VARS, 30, Severity::Violation);
    assert!(f.message.contains("vault_become_password"), "{f}");
    assert!(f.message.contains("k3s_prod/vault.yml"), "{f}");
    assert_eq!(exit_code(&findings), 1);
    let json = to_json(&findings);
    assert_eq!(json["findings"][0]["rule"], "vault-missing");
}

#[test]
fn vault_file_in_plaintext_is_a_violation() {
    let mut input = clean();
    input.envs[0].vault = VaultState::Present {
        file: "infra/ansible/inventory/group_vars/k3s_prod/vault.yml".into(),
        vaulted: false,
    };
    let findings = check(&input);
    let f = only(&findings, rules::VAULT_PLAINTEXT);
    assert_finding(
        &f,
        Some("prod"),
        "infra/ansible/inventory/group_vars/k3s_prod/vault.yml",
        1,
        Severity::Violation,
    );
    assert_eq!(exit_code(&findings), 1);
}

#[test]
fn device_placeholder_is_a_warning_naming_the_var() {
    let mut input = clean();
    input.envs[0].vars.push(VarFact {
        name: "node_baseline_data_device".into(),
        value: "/dev/BLOCKED-pending-disk-decision-see-PROD-PROVISIONING-2".into(),
        at: loc(VARS, 22),
    });
    let findings = check(&input);
    let f = only(&findings, rules::DEVICE_PLACEHOLDER);
    assert_finding(&f, Some("prod"), VARS, 22, Severity::Warning);
    assert!(f.message.contains("node_baseline_data_device"), "{f}");
    assert_eq!(exit_code(&findings), 0);
}

#[test]
fn underivable_facts_are_reported_not_guessed() {
    let mut input = clean();
    input.envs[0].vip = None;
    input.envs[0].problems.push(Problem {
        fact: "kube_vip_address".into(),
        message: "hosts disagree: k3s-prod-1 has 192.168.2.9, k3s-prod-2 has 192.168.2.8".into(),
        at: Some(loc("infra/ansible/inventory/host_vars/k3s-prod-2.yml", 2)),
    });
    let findings = check(&input);
    let f = only(&findings, rules::ENV_FACTS);
    assert_finding(
        &f,
        Some("prod"),
        "infra/ansible/inventory/host_vars/k3s-prod-2.yml",
        2,
        Severity::Violation,
    );
    // Nothing compared against the unknown VIP.
    assert!(
        findings.iter().all(|f| f.rule != rules::OVERLAY_VIP),
        "{findings:#?}"
    );
    assert_eq!(exit_code(&findings), 1);

    // A fact that is simply absent is reported too.
    let mut input = clean();
    input.envs[0].endpoint = None;
    let f = only(&check(&input), rules::ENV_FACTS);
    assert!(f.message.contains("k3s_apiserver_endpoint"), "{f}");
}

#[test]
fn every_rule_name_is_listed_once() {
    let mut names = rules::ALL.to_vec();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rules::ALL.len());
}

#[test]
fn an_overlay_error_becomes_a_finding_at_its_place_without_repeating_it() {
    let root = hk_test_support::root().join("tests/fixtures/check/flux/missing_resource");
    let result = hk_engine::repo::flux::effective_substitution(
        &root,
        Path::new("clusters/prod"),
        hk_engine::repo::config::DEFAULT_FLUX_API_HOST_VAR,
    );
    let mut input = clean();
    input.envs[0].overlay = Some(OverlayFact::from_result(Path::new("clusters/prod"), result));
    let findings = check(&input);
    let f = only(&findings, rules::OVERLAY_RESOLVES);
    // An overlay kustomize would refuse to build has no value anyone can state: not clean,
    // not a violation of the contract either, but "cannot tell" (exit 2).
    assert_finding(&f, Some("prod"), OVERLAY, 5, Severity::CannotTell);
    assert_eq!(exit_code(&findings), 2);
    assert!(f.to_string().contains("cannot tell: prod: resource"), "{f}");
    assert!(
        f.message
            .starts_with("resource `../../platform/nowhere.yaml`"),
        "{f}"
    );
}

fn helm(value: &str) -> Option<HelmFacts> {
    Some(HelmFacts {
        path: "./platform".into(),
        service_hosts: vec![HelmValue {
            release: "kube-system/cilium".into(),
            value: value.into(),
            at: SourceLoc {
                file: "platform/cilium/helmrelease.yaml".into(),
                line: 19,
                col: 21,
            },
            substitution_disabled: false,
        }],
        service_ports: vec![HelmValue {
            release: "kube-system/cilium".into(),
            value: "6443".into(),
            at: SourceLoc {
                file: "platform/cilium/helmrelease.yaml".into(),
                line: 20,
                col: 21,
            },
            substitution_disabled: false,
        }],
    })
}

#[test]
fn helm_release_consuming_the_overlay_variable_is_clean() {
    let mut input = clean();
    input.envs[0].helm = helm("${K3S_API_HOST}");
    assert!(check(&input).is_empty());
    input.envs[0].helm = helm("${K3S_API_HOST:=192.168.2.9}");
    assert!(check(&input).is_empty());
}

#[test]
fn helm_release_with_a_literal_host() {
    let mut input = clean();
    input.envs[0].helm = helm("192.168.2.10");
    let f = only(&check(&input), rules::HELM_CONSUMES_VAR);
    assert_finding(
        &f,
        Some("prod"),
        "platform/cilium/helmrelease.yaml",
        19,
        Severity::Violation,
    );
    assert!(f.message.contains("${K3S_API_HOST}"), "{f}");
    // A different variable is no better.
    input.envs[0].helm = helm("${K3S_API_HOSTNAME}");
    only(&check(&input), rules::HELM_CONSUMES_VAR);
}

#[test]
fn no_helm_release_setting_the_host_is_a_warning() {
    let mut input = clean();
    input.envs[0].helm = Some(HelmFacts {
        path: "./platform".into(),
        service_hosts: vec![],
        service_ports: vec![],
    });
    let findings = check(&input);
    let f = only(&findings, rules::HELM_CONSUMES_VAR);
    assert_finding(&f, Some("prod"), OVERLAY, 1, Severity::Warning);
    assert_eq!(exit_code(&findings), 0);
}

#[test]
fn helm_release_with_another_port() {
    let mut input = clean();
    input.envs[0].helm = helm("${K3S_API_HOST}");
    if let Some(h) = input.envs[0].helm.as_mut() {
        h.service_ports[0].value = "6444".into();
    }
    let f = only(&check(&input), rules::HELM_PORT);
    assert_finding(
        &f,
        Some("prod"),
        "platform/cilium/helmrelease.yaml",
        20,
        Severity::Violation,
    );
    assert!(f.message.contains(&format!("{ALL}:8")), "{f}");
}

#[test]
fn cilium_template_with_a_literal_port() {
    let mut input = clean();
    input.cilium_template = Some(fixture("cilium/literal.yaml.j2"));
    let f = only(&check(&input), rules::CILIUM_PORT);
    assert_finding(&f, None, "cilium/literal.yaml.j2", 2, Severity::Violation);
}

#[test]
fn env_filter_and_summary() {
    let mut input = clean();
    let mut dev = prod();
    dev.name = "dev".into();
    dev.overlay = overlay("192.168.2.10", 12);
    input.envs.push(dev);
    let all = check(&input);
    assert_eq!(summary(&all), "parity: 3 violations, 0 warnings");
    let prod_only = input.clone().only_env("prod").expect("prod exists");
    assert_eq!(prod_only.envs.len(), 1);
    assert_eq!(summary(&check(&prod_only)), "parity: clean");
    assert!(input.only_env("staging").is_none());
}

/// Issue 28: a repo laid out otherwise switches the seed's Ansible-side contract rules off in
/// hk-console.yaml (`contract:`); they are then not reported, and `check` says why.
#[test]
fn contract_rules_switched_off_are_not_reported() {
    let mut input = clean();
    input.site_yml = None;
    input.cilium_template = None;
    input.envs[0].tls_sans = None;
    let before: Vec<String> = check(&input).iter().map(|f| f.rule.to_string()).collect();
    for rule in ["site-order", "cilium-consumes-endpoint", "tls-sans"] {
        assert!(before.iter().any(|r| r == rule), "{rule}: {before:?}");
    }
    input.off = vec!["site-order", "cilium-consumes-endpoint", "tls-sans"];
    let after: Vec<String> = check(&input).iter().map(|f| f.rule.to_string()).collect();
    for rule in ["site-order", "cilium-consumes-endpoint", "tls-sans"] {
        assert!(!after.iter().any(|r| r == rule), "{rule}: {after:?}");
    }
}

#[test]
fn api_urls_are_read_by_use_and_comments_are_not_uses() {
    use hk_engine::checks::parity::{api_uses_in, ApiUseKind};
    let kubeconfig = "clusters:\n- cluster:\n    # server: https://{{ old }}:6443\n    server: https://{{ api_vip }}:6443\n";
    let uses = api_uses_in(Path::new("k.j2"), kubeconfig);
    assert_eq!(uses.len(), 1, "{uses:?}");
    assert_eq!(
        (uses[0].var.as_str(), uses[0].kind, uses[0].at.line),
        ("api_vip", ApiUseKind::SteadyState, 4)
    );
    // k3s's own config file: `server:` is where the node joins.
    let k3s_config = "token: \"{{ k3s_token }}\"\nserver: \"https://{{ founder_ip }}:6443\"\n";
    let uses = api_uses_in(Path::new("config.yaml.j2"), k3s_config);
    assert_eq!(
        uses.iter()
            .map(|u| (u.var.as_str(), u.kind))
            .collect::<Vec<_>>(),
        [("founder_ip", ApiUseKind::Join)]
    );
    let tasks = "- command: k3s agent --server=https://{{ a }}:6443\n- shell: K3S_URL=https://{{ b }}:6443 sh install.sh\n- command: kubectl config set-cluster lab --server=https://{{ c }}:6443\n";
    let uses = api_uses_in(Path::new("t.yml"), tasks);
    assert_eq!(
        uses.iter()
            .map(|u| (u.var.as_str(), u.kind))
            .collect::<Vec<_>>(),
        [
            ("a", ApiUseKind::AgentJoin),
            ("b", ApiUseKind::AgentJoin),
            ("c", ApiUseKind::SteadyState)
        ]
    );
}

#[test]
fn the_rules_speak_the_repos_own_names() {
    use hk_engine::checks::parity::FactNames;
    let names = FactNames {
        vip: "cluster_vip".into(),
        endpoint: "{{ cluster_vip }}".into(),
        founder: "first_server_ip".into(),
        api_port: "apiserver_port".into(),
        tls_sans: "api_sans".into(),
    };
    // The endpoint's expression consumes the VIP's variable: derived, clean.
    let mut env = prod();
    env.names = names.clone();
    env.endpoint_raw = raw("{{ cluster_vip }}", "hk-console.yaml", 5);
    let mut input = clean();
    input.envs = vec![env.clone()];
    input.cilium_template = Some(TextFile {
        path: "values.yaml.j2".into(),
        text: Some(
            "k8sServiceHost: \"{{ cluster_vip }}\"\nk8sServicePort: \"{{ apiserver_port }}\"\n"
                .into(),
        ),
    });
    let findings = check(&input);
    assert!(findings.is_empty(), "{findings:#?}");
    // The seed's variable names mean nothing to this repo: a template consuming them does
    // not consume its endpoint.
    input.cilium_template = Some(fixture("cilium/good.yaml.j2"));
    let f = check(&input);
    let f = only(&f, rules::CILIUM_ENDPOINT);
    assert!(f.message.contains("must consume {{ cluster_vip }}"), "{f}");
    // A founder derived from the VIP is named by the repo's names.
    env.api_host_raw = raw("{{ cluster_vip }}", VARS, 3);
    input.envs = vec![env];
    input.cilium_template = None;
    input.off = vec![rules::CILIUM_ENDPOINT];
    let f = check(&input);
    let f = only(&f, rules::API_HOST_NOT_VIP);
    assert!(
        f.message
            .starts_with("first_server_ip is `{{ cluster_vip }}`, derived from cluster_vip"),
        "{f}"
    );
}

#[test]
fn an_endpoint_on_one_node_and_a_cluster_without_ha_endpoint_are_violations() {
    use hk_engine::checks::parity::{ApiUseKind, SingleNodeUse};
    let mut env = prod();
    env.endpoint = at("192.168.2.10".into(), ALL, 7);
    env.vip = at("192.168.2.10".into(), VARS, 4);
    let mut input = clean();
    input.envs = vec![env.clone()];
    let findings = check(&input);
    let ha: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.rule == rules::HA_ENDPOINT)
        .collect();
    assert_eq!(ha.len(), 2, "{findings:#?}");
    assert_finding(ha[0], Some("prod"), ALL, 7, Severity::Violation);
    assert!(
        ha[0].message.contains("the own address of k3s-prod-1"),
        "{}",
        ha[0]
    );
    assert!(
        ha[1]
            .message
            .starts_with("an HA cluster (3 servers) with no HA endpoint"),
        "{}",
        ha[1]
    );
    // One server: no HA cluster to speak of; the endpoint on its node is still named.
    env.nodes.truncate(1);
    input.envs = vec![env];
    let findings = check(&input);
    assert_eq!(
        findings
            .iter()
            .filter(|f| f.rule == rules::HA_ENDPOINT)
            .count(),
        1,
        "{findings:#?}"
    );
    // Uses by kind: a steady-state client is a violation, a join a warning.
    let mut env = prod();
    for (kind, line) in [(ApiUseKind::SteadyState, 3), (ApiUseKind::Join, 9)] {
        env.single_node_uses.push(SingleNodeUse {
            at: loc("roles/x/templates/t.j2", line),
            var: "first_server_ip".into(),
            kind,
            address: "192.168.2.10".into(),
            node: "k3s-prod-1".into(),
        });
    }
    input.envs = vec![env];
    let findings = check(&input);
    let ha: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.rule == rules::HA_ENDPOINT)
        .collect();
    assert_eq!(ha.len(), 2, "{findings:#?}");
    assert_finding(
        ha[0],
        Some("prod"),
        "roles/x/templates/t.j2",
        3,
        Severity::Violation,
    );
    assert_finding(
        ha[1],
        Some("prod"),
        "roles/x/templates/t.j2",
        9,
        Severity::Warning,
    );
    assert_eq!(exit_code(&findings), 1);
}

#[test]
fn cilium_on_the_k3s_supervisor_balancer_is_ha_and_its_port_is_6444() {
    let mut input = clean();
    input.cilium_template = Some(TextFile {
        path: "values.yaml.j2".into(),
        text: Some("k8sServiceHost: \"127.0.0.1\"\nk8sServicePort: 6444\n".into()),
    });
    let findings = check(&input);
    assert!(findings.is_empty(), "{findings:#?}");
    // 6444 is the balancer's port, not any port: elsewhere it must be the API port.
    input.cilium_template = Some(TextFile {
        path: "values.yaml.j2".into(),
        text: Some("k8sServiceHost: \"127.0.0.1\"\nk8sServicePort: 7443\n".into()),
    });
    let f = check(&input);
    let f = only(&f, rules::CILIUM_PORT);
    assert_finding(&f, None, "values.yaml.j2", 2, Severity::Violation);
    input.cilium_template = Some(TextFile {
        path: "values.yaml.j2".into(),
        text: Some("k8sServiceHost: \"192.168.2.10\"\nk8sServicePort: 6444\n".into()),
    });
    let f = check(&input);
    assert_eq!(
        f.iter()
            .filter(|f| f.rule == rules::CILIUM_ENDPOINT || f.rule == rules::CILIUM_PORT)
            .count(),
        2,
        "{f:#?}"
    );
}
