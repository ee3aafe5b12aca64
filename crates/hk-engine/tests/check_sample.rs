//! End to end on the bundled sample infra repo (`inventory/`): load, check.

use std::path::{Path, PathBuf};

use hk_engine::checks::parity::{check, exit_code, rules, Finding, Severity};
use hk_engine::repo::Repo;

/// The facts of `repo`, overlays built as `check` builds them.
fn gather(repo: &Repo) -> hk_engine::checks::parity::ParityInput {
    hk_engine::gather::parity_input(repo, hk_test_support::kustomize::runner())
}

fn sample() -> PathBuf {
    hk_test_support::root().join("inventory")
}

#[test]
fn the_bundled_sample_is_clean_apart_from_the_prod_blockers() {
    let repo = Repo::load(&sample()).expect("the sample loads");
    let input = gather(&repo);
    let findings = check(&input);
    let violations: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.severity == Severity::Violation)
        .collect();
    assert!(violations.is_empty(), "{violations:#?}");
    assert_eq!(exit_code(&findings), 0);

    // Exactly the documented prod blockers, as warnings with their places.
    let mut warnings: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
    warnings.sort();
    let vars = "infra/ansible/inventory/group_vars/k3s_prod/vars.yml";
    assert_eq!(findings.len(), 4, "{warnings:#?}");
    // The founder's own address, which the k3s playbook joins through (joins only: a
    // warning), once per environment.
    let joins: Vec<(Option<&str>, &Path, usize, Severity)> = findings
        .iter()
        .filter(|f| f.rule == rules::HA_ENDPOINT)
        .map(|f| (f.env.as_deref(), f.file.as_path(), f.line, f.severity))
        .collect();
    let k3s = Path::new("infra/ansible/playbooks/k3s.yml");
    assert_eq!(
        joins,
        vec![
            (Some("dev"), k3s, 25, Severity::Warning),
            (Some("prod"), k3s, 25, Severity::Warning)
        ],
        "{warnings:#?}"
    );
    assert!(
        findings.iter().all(|f| f.file.is_relative()),
        "{warnings:#?}"
    );
    // The prod vault file is absent, and nothing the servers carry needs it (no password
    // variable names a vaulted one): the sample's prod previews run without it.
    assert!(
        findings.iter().all(|f| f.rule != rules::VAULT_MISSING),
        "{warnings:#?}"
    );
    let mut placeholders: Vec<(usize, bool)> = findings
        .iter()
        .filter(|f| f.rule == rules::DEVICE_PLACEHOLDER)
        .map(|f| {
            assert_eq!(f.env.as_deref(), Some("prod"), "{f}");
            assert_eq!(f.file, Path::new(vars), "{f}");
            (f.line, f.message.starts_with("node_baseline_"))
        })
        .collect();
    placeholders.sort_unstable();
    assert_eq!(placeholders, vec![(26, true), (27, true)]);
}

#[test]
fn a_relative_root_gives_the_same_repo_relative_findings() {
    // Tests run in their package's directory (crates/hk-engine), so the sample is
    // `../../inventory` from here: a relative root, as an operator's `--repo infra` is.
    let rel = Path::new("../../inventory");
    assert!(
        rel.is_relative() && rel.join("infra").is_dir(),
        "run from crates/hk-engine"
    );
    let repo = Repo::load(rel).expect("the sample loads");
    let findings = check(&gather(&repo));
    assert_eq!(exit_code(&findings), 0, "{findings:#?}");
    // The two device placeholders (the absent prod vault is needed by nothing), and the
    // founder's address the k3s playbook joins through (a warning per environment).
    assert_eq!(findings.len(), 4, "{findings:#?}");
    for f in findings.iter().filter(|f| f.rule != rules::HA_ENDPOINT) {
        assert!(
            f.file
                .starts_with("infra/ansible/inventory/group_vars/k3s_prod"),
            "{f}"
        );
    }
}

#[test]
fn the_sample_facts_are_each_environments_own() {
    let repo = Repo::load(&sample()).expect("the sample loads");
    let input = gather(&repo);
    let prod = input.envs.iter().find(|e| e.name == "prod").expect("prod");
    assert_eq!(
        prod.vip.as_ref().map(|v| v.value.as_str()),
        Some("192.168.2.9")
    );
    assert_eq!(
        prod.founder.as_ref().map(|v| v.value.as_str()),
        Some("192.168.2.10")
    );
    assert_eq!(
        prod.endpoint.as_ref().map(|v| v.value.as_str()),
        Some("192.168.2.9")
    );
    assert_eq!(prod.endpoint_raw.len(), 1);
    assert_eq!(
        prod.endpoint_raw[0].at.to_string(),
        "infra/ansible/inventory/group_vars/all.yml:17"
    );
    let helm = prod.helm.as_ref().expect("prod's Flux path was built");
    assert_eq!(helm.path, "./platform");
    assert_eq!(helm.service_hosts.len(), 1);
    assert_eq!(helm.service_hosts[0].value, "${K3S_API_HOST}");
    assert_eq!(helm.service_hosts[0].release, "kube-system/cilium");
    let dev = input.envs.iter().find(|e| e.name == "dev").expect("dev");
    assert_eq!(
        dev.vip.as_ref().map(|v| v.value.as_str()),
        Some("192.168.1.49")
    );
    assert_eq!(
        dev.tls_sans.as_ref().map(|s| s.value.clone()),
        Some(
            [
                "192.168.1.50",
                "192.168.1.49",
                "127.0.0.1",
                "192.168.1.51",
                "192.168.1.52"
            ]
            .map(String::from)
            .to_vec()
        )
    );
}
