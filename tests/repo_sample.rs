//! The bundled sample repo, loaded end to end: environments derived from the inventory,
//! and plans made with the real inventory as the planner's topology.
use std::path::Path;

use hk_console::context::{load_runbooks, plan_env, plan_runbook, ContextError};
use hk_console::repo::Repo;

fn sample() -> Repo {
    Repo::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory")).expect("sample loads")
}

#[test]
fn environments_are_derived_from_the_inventory() {
    let repo = sample();
    let prod = repo.environment("prod").expect("prod");
    assert_eq!(prod.vip.get(), Some("192.168.2.9"));
    // The endpoint is a template in group_vars/all.yml; for prod hosts it renders to
    // prod's VIP, not dev's.
    assert_eq!(prod.endpoint.get(), Some("192.168.2.9"));
    assert_eq!(prod.founder.get(), Some("192.168.2.10"));
    assert_eq!(prod.api_port.get(), Some("6443"));
    assert_eq!(prod.primary_group.get(), Some("k3s_prod_primary"));
    assert_eq!(prod.kubeconfig_name.get(), Some("prod.kubeconfig"));
    let names: Vec<&str> = prod.servers.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]);
    assert_eq!(prod.servers[2].address, "192.168.2.12");
    assert!(prod.problems.is_empty(), "{:?}", prod.problems);
    let origin = prod.endpoint.origin.as_ref().expect("origin");
    assert!(origin.file.ends_with("group_vars/all.yml"), "{origin:?}");

    let dev = repo.environment("dev").expect("dev");
    assert_eq!(dev.vip.get(), Some("192.168.1.49"));
    assert_eq!(dev.endpoint.get(), Some("192.168.1.49"));
    assert_eq!(dev.vpn_gateways.len(), 1);
    assert!(dev.operator_present);
}

#[test]
fn etcd_io_priority_plans_node_3_then_1_then_2_on_the_real_inventory() {
    let repo = sample();
    let runbooks = load_runbooks(None).expect("runbooks");
    let plan = plan_runbook(&repo, &runbooks, "etcd-io-priority", "prod", None).expect("plan");
    let mut order: Vec<&str> = Vec::new();
    for s in &plan.steps {
        if let Some(h) = s.host.as_deref() {
            if order.last() != Some(&h) {
                order.push(h);
            }
        }
    }
    assert_eq!(order, ["k3s-prod-3", "k3s-prod-1", "k3s-prod-2"]);
    let first = &plan.steps[0];
    let argv = first.command.as_ref().expect("argv");
    assert!(
        argv.windows(2).any(|w| w == ["-i", "inventory/hosts.ini"]),
        "{argv:?}"
    );
    assert!(
        argv.windows(2).any(|w| w == ["--limit", "k3s-prod-3"]),
        "{argv:?}"
    );
    assert!(argv.contains(&"--list-hosts".to_string()), "{argv:?}");
}

#[test]
fn an_environment_without_a_vip_cannot_be_planned_for() {
    let dir = tempfile::tempdir().expect("tmp");
    let inv = dir.path().join("infra/ansible/inventory");
    std::fs::create_dir_all(&inv).expect("mkdir");
    std::fs::write(
        dir.path().join("hk-console.yaml"),
        "environments:\n  lab: { servers: nodes }\n",
    )
    .expect("write");
    std::fs::write(inv.join("hosts.ini"), "[nodes]\nn1\nn2\n").expect("write");
    let repo = Repo::load(dir.path()).expect("loads");
    let err = plan_env(&repo, "lab", None).expect_err("no facts");
    let text = err.to_string();
    assert!(matches!(err, ContextError::UnknownFact { .. }), "{text}");
    assert!(
        text.starts_with("cannot plan for `lab`: its primary group is unknown: this repo neither defines nor uses `k3s_primary_group` (the seed's name); map its own variable under `facts:`"),
        "{text}"
    );
}
