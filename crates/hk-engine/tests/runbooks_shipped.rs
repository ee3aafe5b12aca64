//! Every shipped runbook validates, loads by id, and plans for each environment it names.
use hk_test_support::runbooks as runbooks_common;

use hk_engine::runbook::embedded::{embedded, load, Origin};
use hk_engine::runbook::plan::plan;
use hk_engine::runbook::validate::validate_text;
use runbooks_common::{dev, homelab, prod};

const SHIPPED: &[&str] = &[
    "etcd-io-priority",
    "cilium-endpoint-rollout",
    "reprovision-node",
    "vpn-egress-verify",
    "packages-baseline",
    "cold-bringup",
    "memattr-survey",
    "node-health",
    "vpn-eviction-fix",
];

#[test]
fn every_embedded_runbook_validates() {
    assert!(embedded().len() >= SHIPPED.len());
    for (name, text) in embedded() {
        let rb = validate_text(name, text).unwrap_or_else(|d| {
            panic!(
                "{name} does not validate:\n{}",
                d.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        });
        assert_eq!(format!("{}.yaml", rb.id), *name, "file name matches id");
    }
}

#[test]
fn the_shipped_ids_are_all_there() {
    let set = load(&[]).expect("embedded set loads");
    for id in SHIPPED {
        let loaded = set.loaded(id).unwrap_or_else(|| panic!("{id} missing"));
        assert_eq!(loaded.origin, Origin::Embedded);
    }
}

#[test]
fn every_shipped_runbook_plans_for_its_environments() {
    let set = load(&[]).expect("embedded set loads");
    let topo = homelab();
    for id in SHIPPED {
        let rb = set.get(id).expect("present");
        for env_name in &rb.environments {
            let mut env = match env_name.as_str() {
                "prod" => prod(),
                "dev" => dev(),
                other => panic!("unexpected env {other}"),
            };
            if rb.target.as_ref().is_some_and(|t| t.single) {
                env.host = Some(
                    if env_name == "prod" {
                        "k3s-prod-3"
                    } else {
                        "k3s-dev-3"
                    }
                    .into(),
                );
            }
            let p = plan(rb, &env, &topo).unwrap_or_else(|e| panic!("{id} for {env_name}: {e}"));
            assert!(!p.steps.is_empty(), "{id} for {env_name}");
            for (i, s) in p.steps.iter().enumerate() {
                assert_eq!(s.n, i + 1);
            }
            assert_eq!(p.mutates, p.steps.iter().any(|s| s.mutates));
            if rb.read_only {
                assert!(!p.mutates, "{id} is read-only but its plan mutates");
            }
            // No address of any environment is written in a runbook: it comes from PlanEnv.
            let text = embedded()
                .iter()
                .find(|(n, _)| *n == format!("{id}.yaml"))
                .map(|(_, t)| *t)
                .expect("text");
            assert!(!text.contains("192.168."), "{id} restates an address");
        }
    }
}

#[test]
fn an_override_replaces_by_id_and_a_new_one_adds() {
    let over = "id: node-health\nenvironments: [dev]\nread_only: true\nsteps:\n  - id: w\n    kind: probe\n    tcp: \"{{ env.vip }}:22\"\n";
    let extra = "id: my-probe\nenvironments: [prod]\nsteps:\n  - id: p\n    kind: probe\n    tcp: \"{{ env.vip }}:{{ env.api_port }}\"\n";
    let set = load(&[
        ("node-health.yaml".into(), over.into()),
        ("mine.yaml".into(), extra.into()),
    ])
    .expect("loads");
    let nh = set.loaded("node-health").expect("present");
    assert_eq!(nh.origin, Origin::Override("node-health.yaml".into()));
    assert!(nh.overrides_embedded);
    assert_eq!(nh.runbook.environments, vec!["dev".to_string()]);
    assert!(set.get("my-probe").is_some());
    assert_eq!(set.len(), SHIPPED.len() + 1);
}

#[test]
fn a_broken_override_is_reported_with_its_position() {
    let bad = "id: x\nenvironments: [dev]\nsteps:\n  - id: a\n    kind: probe\n    tcp: [1\n";
    let err = load(&[("bad.yaml".into(), bad.into())]).expect_err("must fail");
    assert_eq!(err.len(), 1);
    assert!(err[0].to_string().starts_with("bad.yaml:"), "{}", err[0]);
}

#[test]
fn two_overrides_with_one_id_are_an_error() {
    let a = "id: twin\nenvironments: [dev]\nsteps:\n  - id: a\n    kind: gate\n    gate: operator-present\n";
    let err = load(&[("a.yaml".into(), a.into()), ("b.yaml".into(), a.into())]).expect_err("dup");
    assert!(
        err[0]
            .to_string()
            .contains("runbook id `twin` is also defined in a.yaml"),
        "{}",
        err[0]
    );
}

#[test]
fn the_docs_name_every_kind_field_condition_and_template_variable() {
    use hk_engine::runbook::schema::{
        KINDS, KIND_FIELDS, KUBE_CONDITIONS, REPO_CONDITIONS, VPN_CONDITIONS,
    };
    use hk_engine::runbook::validate::ENV_TEMPLATE_KEYS;
    let docs = std::fs::read_to_string(hk_test_support::root().join("docs/runbooks.md"))
        .expect("docs/runbooks.md");
    for k in KINDS {
        assert!(
            docs.contains(&format!("`{}`", k.kind)),
            "kind {} undocumented",
            k.kind
        );
    }
    for f in KIND_FIELDS {
        assert!(docs.contains(&format!("`{f}`")), "field {f} undocumented");
    }
    for (c, _) in KUBE_CONDITIONS
        .iter()
        .chain(REPO_CONDITIONS)
        .chain(VPN_CONDITIONS)
    {
        assert!(docs.contains(c), "condition {c} undocumented");
    }
    for k in ENV_TEMPLATE_KEYS {
        assert!(docs.contains(&format!("`env.{k}`")), "env.{k} undocumented");
    }
    for id in SHIPPED {
        assert!(
            docs.contains(&format!("`{id}`")),
            "runbook {id} undocumented"
        );
    }
}
