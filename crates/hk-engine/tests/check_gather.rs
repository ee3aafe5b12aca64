//! From a (hand-made) loaded repo to parity facts: what `gather` copies and how it reports
//! what it cannot derive.

use hk_engine::repo::flux::EngineChoice;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hk_engine::checks::parity::{
    check, gather_view, rules, Loc, Located, RawVar, RepoView, VaultState,
};
use hk_engine::repo::config::EnvConfig;
use hk_engine::repo::env::{derive, HostFacts};
use hk_engine::repo::resolve::Resolved;
use hk_engine::repo::vars::Origin;
use serde_json::{json, Value};

const ALL: &str = "inv/group_vars/all.yml";

/// Hosts with (var -> (raw, rendered, file, line)).
struct Lab {
    hosts: Vec<String>,
    vars: BTreeMap<(String, String), (Value, Value, String, usize)>,
}

impl Lab {
    fn new(hosts: &[&str]) -> Lab {
        let mut lab = Lab {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            vars: BTreeMap::new(),
        };
        for (i, h) in hosts.iter().enumerate() {
            let ip = format!("10.1.0.{}", 10 + i);
            lab.set(
                h,
                "ansible_host",
                json!(ip),
                json!(ip),
                "inv/hosts.ini",
                2 + i,
            );
            lab.set(
                h,
                "kube_vip_address",
                json!("10.1.0.9"),
                json!("10.1.0.9"),
                ALL,
                4,
            );
            lab.set(
                h,
                "k3s_api_host",
                json!("10.1.0.10"),
                json!("10.1.0.10"),
                ALL,
                3,
            );
            lab.set(
                h,
                "k3s_apiserver_endpoint",
                json!("{{ kube_vip_address }}"),
                json!("10.1.0.9"),
                ALL,
                5,
            );
            lab.set(
                h,
                "k3s_tls_sans",
                json!(["{{ k3s_api_host }}", "{{ kube_vip_address }}"]),
                json!(["10.1.0.10", "10.1.0.9"]),
                ALL,
                6,
            );
        }
        lab
    }

    fn set(&mut self, host: &str, var: &str, raw: Value, rendered: Value, file: &str, line: usize) {
        self.vars.insert(
            (host.into(), var.into()),
            (raw, rendered, file.into(), line),
        );
    }

    fn raw(&self, host: &str) -> Vec<RawVar> {
        self.vars
            .iter()
            .filter(|((h, _), _)| h == host)
            .map(|((_, name), (raw, _, file, line))| RawVar {
                name: name.clone(),
                value: raw.clone(),
                file: PathBuf::from(file),
                line: *line,
                secret: false,
            })
            .collect()
    }
}

impl HostFacts for Lab {
    fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
        (group == "servers").then(|| self.hosts.clone())
    }
    fn resolved(&self, host: &str, var: &str) -> Option<Resolved> {
        self.vars
            .get(&(host.to_string(), var.to_string()))
            .map(|(_, r, _, _)| Resolved::Value(r.clone()))
    }
    fn origin(&self, host: &str, var: &str) -> Option<Origin> {
        self.vars
            .get(&(host.to_string(), var.to_string()))
            .map(|(_, _, file, line)| Origin {
                file: file.into(),
                line: *line,
                col: 1,
            })
    }
}

fn facts(
    lab: &Lab,
    vault: Option<&str>,
    files: &[(&str, &str)],
) -> hk_engine::checks::parity::ParityInput {
    let cfg = EnvConfig {
        servers: "servers".into(),
        vpn_gateways: None,
        operator_present: false,
        protected: false,
        flux_overlay: Some("clusters/lab".into()),
        vault: vault.map(PathBuf::from),
        agents: None,
        facts: Default::default(),
        names: Default::default(),
    };
    let envs = vec![derive("lab", &cfg, lab)];
    let files: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(p, t)| (Path::new("/repo").join(p), t.to_string()))
        .collect();
    let host_vars = |h: &str| lab.raw(h);
    let resolved = |h: &str, v: &str| HostFacts::resolved(lab, h, v);
    let read = |p: &Path| files.get(p).cloned();
    let api_uses: Vec<_> = files
        .iter()
        .flat_map(|(p, t)| {
            hk_engine::checks::parity::api_uses_in(p.strip_prefix("/repo").unwrap_or(p), t)
        })
        .collect();
    gather_view(&RepoView {
        root: Path::new("/repo"),
        ansible_dir: Path::new("ansible"),
        environments: &envs,
        host_vars: &host_vars,
        resolved: &resolved,
        read: &read,
        flux: &|overlay: &Path, var: &str| {
            hk_engine::repo::flux::report(Path::new("/repo"), overlay, &EngineChoice::Builtin, var)
        },
        engine_line: None,
        rel: &|p: &Path| {
            p.strip_prefix("/repo")
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| p.to_path_buf())
        },
        contract: &Default::default(),
        api_uses: &api_uses,
        render: &|h: &str, t: &str| HostFacts::rendered(lab, h, t),
    })
}

#[test]
fn facts_come_from_the_servers_with_their_definitions() {
    let lab = Lab::new(&["a", "b"]);
    let input = facts(&lab, None, &[]);
    let env = &input.envs[0];
    assert_eq!(
        env.vip,
        Some(Located::new("10.1.0.9".to_string(), Loc::new(ALL, 4)))
    );
    assert_eq!(
        env.founder.as_ref().map(|f| f.value.as_str()),
        Some("10.1.0.10")
    );
    assert_eq!(env.nodes.len(), 2);
    assert_eq!(env.nodes[1].address, "10.1.0.11");
    // One definition shared by both servers is listed once.
    assert_eq!(env.endpoint_raw.len(), 1);
    assert_eq!(env.endpoint_raw[0].value, "{{ kube_vip_address }}");
    assert_eq!(
        env.tls_sans.as_ref().map(|s| s.value.clone()),
        Some(vec!["10.1.0.10".to_string(), "10.1.0.9".to_string()])
    );
    assert_eq!(env.vault, VaultState::NotExpected);
    // Missing files are reported by the rules, with their expected paths.
    let site = input.site_yml.as_ref().expect("site");
    assert_eq!(site.path, Path::new("ansible/playbooks/site.yml"));
    assert!(site.text.is_none());
    let findings = check(&input);
    assert!(findings
        .iter()
        .any(|f| f.rule == rules::SITE_ORDER && f.file == Path::new("ansible/playbooks/site.yml")));
    // No overlay exists in this lab: reported, not guessed.
    assert!(
        findings.iter().any(|f| f.rule == rules::OVERLAY_RESOLVES),
        "{findings:#?}"
    );
}

#[test]
fn a_host_var_restating_the_endpoint_is_seen_besides_the_template() {
    let mut lab = Lab::new(&["a", "b"]);
    lab.set(
        "b",
        "k3s_apiserver_endpoint",
        json!("10.1.0.9"),
        json!("10.1.0.9"),
        "inv/host_vars/b.yml",
        2,
    );
    let input = facts(&lab, None, &[]);
    assert_eq!(input.envs[0].endpoint_raw.len(), 2);
    let f = check(&input)
        .into_iter()
        .find(|f| f.rule == rules::ENDPOINT_DERIVED)
        .expect("the restated endpoint is a finding");
    assert_eq!(
        (f.file.as_path(), f.line),
        (Path::new("inv/host_vars/b.yml"), 2)
    );
    assert_eq!(f.env.as_deref(), Some("lab"));
}

#[test]
fn servers_disagreeing_on_the_vip_is_an_env_facts_finding() {
    let mut lab = Lab::new(&["a", "b"]);
    lab.set(
        "b",
        "kube_vip_address",
        json!("10.1.0.8"),
        json!("10.1.0.8"),
        "inv/host_vars/b.yml",
        1,
    );
    let input = facts(&lab, None, &[]);
    assert_eq!(input.envs[0].vip, None);
    let findings = check(&input);
    let f = findings
        .iter()
        .find(|f| f.rule == rules::ENV_FACTS && f.message.contains("kube_vip_address"))
        .expect("env-facts finding");
    assert!(f.message.contains("disagree"), "{f}");
    assert!(findings.iter().all(|f| f.rule != rules::OVERLAY_VIP));
}

#[test]
fn tls_sans_disagreement_is_reported_not_picked() {
    let mut lab = Lab::new(&["a", "b"]);
    lab.set(
        "b",
        "k3s_tls_sans",
        json!(["10.1.0.9"]),
        json!(["10.1.0.9"]),
        "inv/host_vars/b.yml",
        3,
    );
    let input = facts(&lab, None, &[]);
    assert_eq!(input.envs[0].tls_sans, None);
    assert!(check(&input)
        .iter()
        .any(|f| f.rule == rules::ENV_FACTS && f.message.contains("k3s_tls_sans")));
}

#[test]
fn vault_states_from_the_configured_path() {
    let lab = Lab::new(&["a"]);
    let missing = facts(&lab, Some("inv/group_vars/servers/vault.yml"), &[]);
    assert_eq!(
        missing.envs[0].vault,
        VaultState::Missing {
            expected: "inv/group_vars/servers/vault.yml".into(),
            needed_by: vec![],
        }
    );
    let vaulted = facts(
        &lab,
        Some("inv/group_vars/servers/vault.yml"),
        &[(
            "inv/group_vars/servers/vault.yml",
            "$ANSIBLE_VAULT;1.1;AES256\n6162\n",
        )],
    );
    assert!(matches!(
        vaulted.envs[0].vault,
        VaultState::Present { vaulted: true, .. }
    ));
    let plain = facts(
        &lab,
        Some("inv/group_vars/servers/vault.yml"),
        &[(
            "inv/group_vars/servers/vault.yml",
            "ansible_become_password: hunter2\n",
        )],
    );
    assert!(matches!(
        plain.envs[0].vault,
        VaultState::Present { vaulted: false, .. }
    ));
    let f = check(&plain)
        .into_iter()
        .find(|f| f.rule == rules::VAULT_PLAINTEXT)
        .expect("plaintext finding");
    assert!(
        !f.message.contains("hunter2"),
        "a finding must never show the secret: {f}"
    );
}
