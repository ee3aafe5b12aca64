//! One failing fixture per rule, end to end: the bundled sample copied and broken in one
//! place, loaded, gathered and checked. Each asserts the rule, the environment and file:line.

use std::path::{Path, PathBuf};

use hk_console::checks::parity::{check, exit_code, rules, Finding, Severity};
use hk_console::repo::Repo;

use crate::fs_common;

/// The facts of `repo`, overlays built as `check` builds them.
fn gather(repo: &Repo) -> hk_console::checks::parity::ParityInput {
    hk_console::gather::parity_input(repo, hk_console::exec::kustomize::Kustomize::shared())
}
use fs_common::copy_dir;

struct Broken {
    dir: tempfile::TempDir,
}

impl Broken {
    fn sample() -> Broken {
        let dir = tempfile::tempdir().expect("tempdir");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
            dir.path(),
        );
        Broken { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Replace `from` (which must be there) by `to` in one file.
    fn edit(self, rel: &str, from: &str, to: &str) -> Broken {
        let text = std::fs::read_to_string(self.path(rel)).expect("read");
        assert!(text.contains(from), "{rel} has no `{from}`");
        std::fs::write(self.path(rel), text.replacen(from, to, 1)).expect("write");
        self
    }

    fn write(self, rel: &str, text: &str) -> Broken {
        std::fs::create_dir_all(self.path(rel).parent().expect("parent")).expect("mkdir");
        std::fs::write(self.path(rel), text).expect("write");
        self
    }

    fn remove(self, rel: &str) -> Broken {
        std::fs::remove_file(self.path(rel)).expect("remove");
        self
    }

    fn findings(&self) -> Vec<Finding> {
        let repo = Repo::load(self.dir.path()).expect("the broken sample still loads");
        check(&gather(&repo))
    }
}

const OVERLAY: &str = "clusters/prod/kustomization.yaml";
const ALL: &str = "infra/ansible/inventory/group_vars/all.yml";
const PROD_VARS: &str = "infra/ansible/inventory/group_vars/k3s_prod/vars.yml";
const TEMPLATE: &str = "infra/ansible/roles/cilium/templates/cilium-values.yaml.j2";
const SITE: &str = "infra/ansible/playbooks/site.yml";

fn find<'a>(findings: &'a [Finding], rule: &str, env: Option<&str>) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.rule == rule && f.env.as_deref() == env)
        .unwrap_or_else(|| panic!("no {rule} finding for {env:?} in {findings:#?}"))
}

fn assert_at(f: &Finding, file: &str, line: usize) {
    assert_eq!((f.file.as_path(), f.line), (Path::new(file), line), "{f}");
    assert_eq!(f.severity, Severity::Violation, "{f}");
}

#[test]
fn prod_overlay_on_the_founder() {
    let findings = Broken::sample()
        .edit(OVERLAY, "value: 192.168.2.9", "value: 192.168.2.10")
        .findings();
    for rule in [
        rules::OVERLAY_ENDPOINT,
        rules::OVERLAY_VIP,
        rules::OVERLAY_NODE_IP,
    ] {
        assert_at(find(&findings, rule, Some("prod")), OVERLAY, 14);
    }
    assert!(find(&findings, rules::OVERLAY_NODE_IP, Some("prod"))
        .message
        .contains("k3s-prod-1"));
    assert!(findings
        .iter()
        .all(|f| f.env.as_deref() != Some("dev") || f.severity == Severity::Warning));
    assert_eq!(exit_code(&findings), 1);
}

#[test]
fn prod_overlay_that_does_not_build() {
    let findings = Broken::sample()
        .remove("clusters/prod/platform.yaml")
        .findings();
    // kustomize refuses this build, so Flux would too: nobody can say what prod gets, which
    // is "cannot tell" (exit 2), at the resource entry that does not exist.
    let f = find(&findings, rules::OVERLAY_RESOLVES, Some("prod"));
    assert_eq!((f.file.as_path(), f.line), (Path::new(OVERLAY), 6), "{f}");
    assert_eq!(f.severity, Severity::CannotTell, "{f}");
    assert_eq!(exit_code(&findings), 2);
}

#[test]
fn endpoint_restated_in_all_yml() {
    let findings = Broken::sample()
        .edit(
            ALL,
            "k3s_apiserver_endpoint: \"{{ kube_vip_address }}\"",
            "k3s_apiserver_endpoint: 192.168.1.49",
        )
        .findings();
    assert_at(
        find(&findings, rules::ENDPOINT_DERIVED, Some("dev")),
        ALL,
        17,
    );
    // Prod inherits the restated dev value: its overlay no longer equals its endpoint.
    assert_at(
        find(&findings, rules::OVERLAY_ENDPOINT, Some("prod")),
        OVERLAY,
        14,
    );
}

#[test]
fn founder_derived_from_the_vip_in_prod() {
    let findings = Broken::sample()
        .edit(
            PROD_VARS,
            "k3s_api_host: 192.168.2.10",
            "k3s_api_host: \"{{ kube_vip_address }}\"",
        )
        .findings();
    assert_at(
        find(&findings, rules::API_HOST_NOT_VIP, Some("prod")),
        PROD_VARS,
        3,
    );
}

#[test]
fn tls_sans_without_the_vip_in_prod() {
    let findings = Broken::sample()
        .edit(PROD_VARS, "  - \"{{ kube_vip_address }}\"\n", "")
        .findings();
    let f = find(&findings, rules::TLS_SANS, Some("prod"));
    assert_at(f, PROD_VARS, 6);
    assert!(f.message.contains("192.168.2.9"), "{f}");
}

#[test]
fn cilium_template_on_the_founder() {
    let findings = Broken::sample()
        .edit(
            TEMPLATE,
            "k8sServiceHost: {{ k3s_apiserver_endpoint }}",
            "k8sServiceHost: {{ k3s_api_host }}",
        )
        .findings();
    assert_at(find(&findings, rules::CILIUM_ENDPOINT, None), TEMPLATE, 5);
}

#[test]
fn site_yml_with_cilium_before_kube_vip() {
    let findings = Broken::sample()
        .edit(
            SITE,
            "- import_playbook: kube-vip.yml\n- import_playbook: cilium.yml\n",
            "- import_playbook: cilium.yml\n- import_playbook: kube-vip.yml\n",
        )
        .findings();
    assert_at(find(&findings, rules::SITE_ORDER, None), SITE, 8);
}

#[test]
fn site_yml_without_kube_vip() {
    let findings = Broken::sample()
        .edit(SITE, "- import_playbook: kube-vip.yml\n", "")
        .findings();
    let f = find(&findings, rules::SITE_ORDER, None);
    assert_at(f, SITE, 0);
    assert!(f.message.contains("kube-vip.yml"), "{f}");
}

#[test]
fn prod_vault_file_in_plaintext() {
    let vault = "infra/ansible/inventory/group_vars/k3s_prod/vault.yml";
    let findings = Broken::sample()
        .write(vault, "---\nansible_become_password: not-a-real-password\n")
        .findings();
    let f = find(&findings, rules::VAULT_PLAINTEXT, Some("prod"));
    assert_at(f, vault, 1);
    assert!(!f.to_string().contains("not-a-real-password"), "{f}");
    assert!(findings.iter().all(|f| f.rule != rules::VAULT_MISSING));
}

#[test]
fn prod_servers_disagreeing_on_the_vip() {
    let findings = Broken::sample()
        .write(
            "infra/ansible/inventory/host_vars/k3s-prod-2.yml",
            "---\nkube_vip_address: 192.168.2.8\n",
        )
        .findings();
    let f = find(&findings, rules::ENV_FACTS, Some("prod"));
    assert!(f.message.contains("kube_vip_address"), "{f}");
    assert!(f.message.contains("k3s-prod-2"), "{f}");
    // Not compared against a guessed VIP.
    assert!(findings
        .iter()
        .all(|f| !(f.rule == rules::OVERLAY_VIP && f.env.as_deref() == Some("prod"))));
}

#[test]
fn helm_release_with_a_literal_service_host() {
    let helm = "platform/cilium/helmrelease.yaml";
    let findings = Broken::sample()
        .edit(
            helm,
            "k8sServiceHost: ${K3S_API_HOST}",
            "k8sServiceHost: 192.168.2.10",
        )
        .findings();
    // Both environments' overlays point their Flux Kustomization at ./platform.
    for env in ["dev", "prod"] {
        assert_at(
            find(&findings, rules::HELM_CONSUMES_VAR, Some(env)),
            helm,
            19,
        );
    }
}

#[test]
fn helm_release_and_template_ports() {
    let helm = "platform/cilium/helmrelease.yaml";
    let findings = Broken::sample()
        .edit(helm, "k8sServicePort: 6443", "k8sServicePort: 6444")
        .edit(
            TEMPLATE,
            "k8sServicePort: {{ k3s_api_port }}",
            "k8sServicePort: 6443",
        )
        .findings();
    assert_at(find(&findings, rules::HELM_PORT, Some("prod")), helm, 20);
    assert_at(find(&findings, rules::CILIUM_PORT, None), TEMPLATE, 6);
}
