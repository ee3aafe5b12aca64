//! `:fault` injected live into the running demo (issue 6), seen through hk-console's REAL
//! clients: the kube client built from the kubeconfig the inventory names (the Lease, the
//! nodes, the cilium pods) and the VPN look over SSH (the tunnel unit's state).

use std::time::{Duration, Instant};

use hk_effects::cluster::{client, kube_target, KubeOverrides};
use hk_effects::exec::settings::{SshConfig, SshDefaults};
use hk_effects::observe::once::KubePanes;
use hk_effects::observe::vpn::{look, Gateways};
use hk_engine::checks::live::{ConditionStatus, Endpoint, Rule, Severity};
use hk_sim::demo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

async fn start() -> (tempfile::TempDir, demo::Demo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", dir.path())
        .await
        .unwrap_or_else(|e| panic!("demo healthy: {e}"));
    (dir, d)
}

/// The kube panes of `env` as `observe --once` sees them.
async fn kube_look(d: &demo::Demo, env: &str) -> KubePanes {
    let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
    let c = client(&t).await.expect("client");
    let topo = hk_effects::cluster::env_topology(&d.repo, env).expect("topology");
    let settings = hk_effects::cluster::watch_settings(&d.repo, env).expect("settings");
    hk_effects::observe::once::look_once(&c, &topo, &settings).await
}

/// Poll the kube panes of `env` until `ok` holds (or fail after `secs`, showing the last).
async fn until(d: &demo::Demo, env: &str, secs: u64, ok: impl Fn(&KubePanes) -> bool) -> KubePanes {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let p = kube_look(d, env).await;
        if ok(&p) {
            return p;
        }
        if Instant::now() > deadline {
            panic!("{env}: condition not reached in {secs}s; last look: {p:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn node_ready(p: &KubePanes, node: &str) -> Option<ConditionStatus> {
    p.nodes
        .nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.ready)
}

/// (node, KUBERNETES_SERVICE_HOST) of every cilium pod of `env`, read with the kube client.
async fn agent_hosts(d: &demo::Demo, env: &str) -> Vec<(String, String)> {
    let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
    let pods: Api<Pod> = Api::namespaced(client(&t).await.expect("client"), "kube-system");
    let list = pods
        .list(&ListParams::default().labels("k8s-app=cilium"))
        .await
        .expect("list cilium pods");
    let mut out: Vec<(String, String)> = list
        .items
        .iter()
        .map(|p| {
            let spec = p.spec.as_ref().expect("spec");
            let host = spec.containers[0]
                .env
                .clone()
                .unwrap_or_default()
                .into_iter()
                .find(|e| e.name == "KUBERNETES_SERVICE_HOST")
                .and_then(|e| e.value)
                .unwrap_or_default();
            (spec.node_name.clone().unwrap_or_default(), host)
        })
        .collect();
    out.sort();
    out
}

/// (node, Ready) of every kube-vip pod (the kube-vip-ds DaemonSet's) of `env`.
async fn vip_pods_ready(d: &demo::Demo, env: &str) -> Vec<(String, bool)> {
    let t = kube_target(&d.repo, env, &KubeOverrides::default()).expect("target");
    let pods: Api<Pod> = Api::namespaced(client(&t).await.expect("client"), "kube-system");
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=kube-vip-ds"))
        .await
        .expect("list kube-vip pods");
    let mut out: Vec<(String, bool)> = list
        .items
        .iter()
        .map(|p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            (node.unwrap_or_default(), ready)
        })
        .collect();
    out.sort();
    out
}

fn vip(d: &demo::Demo, env: &str) -> String {
    d.repo
        .environment(env)
        .expect("env")
        .vip
        .get()
        .expect("vip")
        .to_string()
}

fn gateway(d: &demo::Demo, env: &str) -> String {
    d.repo.environment(env).expect("env").vpn_gateways[0]
        .name
        .clone()
}

/// The tunnel unit's ActiveState on `host`, as the console's VPN look reads it over SSH.
async fn tunnel_state(d: &demo::Demo, host: &str) -> Option<String> {
    let g = Gateways::for_repo_with(
        &d.repo,
        d.ssh_options(),
        &SshConfig::empty(),
        &SshDefaults::from_env(),
    );
    let v = look(&d.repo, &[], &g).await;
    g.close().await;
    v.gateways
        .iter()
        .find(|p| p.host == host)
        .unwrap_or_else(|| panic!("no gateway {host} in {v:#?}"))
        .active_state
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_dies_the_node_goes_not_ready_and_the_lease_moves_once_it_expires() {
    let (_dir, d) = start().await;
    let faults = d.fault_injector();
    let duration = d.scenario.env_state("prod").lease_duration_s;
    let before = kube_look(&d, "prod").await;
    let holder = before.vip.holder.clone().expect("prod has a lease holder");
    assert_eq!(before.vip.transitions, Some(0), "{:#?}", before.vip);
    let dev_before = kube_look(&d, "dev").await.vip.holder;

    let t0 = Instant::now();
    let said = faults
        .inject("prod", "holder-dies")
        .expect("holder-dies is accepted");
    assert!(
        said.starts_with("prod: ")
            && said.contains(&format!("{holder} (lease holder) died"))
            && said.contains(&format!("({duration} s)")),
        "{said}"
    );
    let dead = until(&d, "prod", 5, |p| {
        node_ready(p, &holder) == Some(ConditionStatus::Unknown)
    })
    .await;
    assert!(
        dead.nodes
            .verdicts
            .iter()
            .any(|v| v.subject.contains(&holder) && v.severity != Severity::Ok),
        "the dead holder's node is judged: {:#?}",
        dead.nodes
    );
    // While the lease has not expired, the dead node still holds it, and killing it again
    // changes nothing.
    assert_eq!(dead.vip.holder.as_deref(), Some(holder.as_str()));
    let again = faults.inject("prod", "holder-dies").expect("accepted");
    assert!(
        again.contains("already dead") && again.contains("nothing changed"),
        "{again}"
    );

    let moved = until(&d, "prod", duration + 10, |p| {
        p.vip.holder.as_deref().is_some_and(|h| h != holder)
    })
    .await;
    let took = t0.elapsed();
    println!("prod: lease moved from {holder} to {:?} {took:?} after holder-dies (lease duration {duration} s)", moved.vip.holder);
    assert_eq!(moved.vip.transitions, Some(1), "{:#?}", moved.vip);
    assert!(
        took >= Duration::from_secs(duration),
        "the lease moved before it expired: {took:?} < {duration} s"
    );
    let new_holder = moved.vip.holder.clone().expect("holder");
    assert_eq!(
        node_ready(&moved, &new_holder),
        Some(ConditionStatus::True),
        "the lease went to a live server: {:#?}",
        moved.nodes
    );
    // kube-vip's own pods: the dead holder's is not Ready, the others are; the agents
    // pane counts only the cilium agents.
    let vips = vip_pods_ready(&d, "prod").await;
    assert_eq!(vips.len(), 3, "{vips:?}");
    for (node, ready) in &vips {
        assert_eq!(*ready, *node != holder, "{vips:?}");
    }
    assert_eq!(moved.agents.agents.len(), 3, "{:#?}", moved.agents);
    assert!(
        moved
            .agents
            .agents
            .iter()
            .all(|a| a.pod.starts_with("cilium-")),
        "{:#?}",
        moved.agents
    );
    // dev is untouched.
    let dev = kube_look(&d, "dev").await;
    assert_eq!(dev.vip.holder, dev_before);
    assert_eq!(dev.vip.transitions, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_drifts_recreates_that_agent_dialling_its_own_node() {
    let (_dir, d) = start().await;
    let faults = d.fault_injector();
    let vip = vip(&d, "prod");
    let before = agent_hosts(&d, "prod").await;
    assert_eq!(before.len(), 3);
    assert!(before.iter().all(|(_, h)| *h == vip), "{before:#?}");
    let node2 = d.repo.environment("prod").expect("prod").servers[1]
        .name
        .clone();
    let own = d.plan.hosts[&node2].to_string();

    let said = faults.inject("prod", "agent-drifts 2").expect("accepted");
    assert!(
        said.contains(&node2) && said.contains(&own) && said.contains("server 2"),
        "{said}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        let a = agent_hosts(&d, "prod").await;
        if a.iter().any(|(n, h)| *n == node2 && *h == own) {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "{node2} still dials the VIP: {a:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(after.len(), 3, "one agent per node: {after:#?}");
    for (n, h) in &after {
        if *n != node2 {
            assert_eq!(*h, vip, "{n} was not asked to drift: {after:#?}");
        }
    }
    // The console's agents pane names it as a single-node dependency.
    let p = kube_look(&d, "prod").await;
    let row = p
        .agents
        .agents
        .iter()
        .find(|a| a.node.as_deref() == Some(node2.as_str()))
        .expect("agent row");
    assert!(
        matches!(&row.endpoint, Endpoint::NodeAddress { node, .. } if *node == node2),
        "{row:#?}"
    );
    assert!(
        p.agents.verdicts.iter().any(|v| v.rule == Rule::AgentHost
            && v.severity != Severity::Ok
            && v.message.contains(&node2)),
        "{:#?}",
        p.agents.verdicts
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vpn_down_fails_the_tunnel_unit_and_vpn_up_brings_it_back() {
    let (_dir, d) = start().await;
    let faults = d.fault_injector();
    let gw = gateway(&d, "prod");
    let dev_gw = gateway(&d, "dev");
    assert_eq!(tunnel_state(&d, &gw).await.as_deref(), Some("active"));

    let said = faults.inject("prod", "vpn-down").expect("accepted");
    assert!(said.contains(&gw) && said.contains("failed"), "{said}");
    assert_eq!(tunnel_state(&d, &gw).await.as_deref(), Some("failed"));
    assert_eq!(
        tunnel_state(&d, &dev_gw).await.as_deref(),
        Some("active"),
        "dev's gateway is untouched"
    );
    let again = faults.inject("prod", "vpn-down").expect("accepted");
    assert!(again.contains("already failed"), "{again}");

    let said = faults.inject("prod", "vpn-up").expect("accepted");
    assert!(
        said.contains(&gw) && said.contains("active again"),
        "{said}"
    );
    assert_eq!(tunnel_state(&d, &gw).await.as_deref(), Some("active"));
    let again = faults.inject("prod", "vpn-up").expect("accepted");
    assert!(again.contains("already active"), "{again}");
    // The node's own journal has the fault and the restart, as systemd logs them.
    let st = d.node_state(&gw).expect("gateway node");
    let journal: Vec<String> = st
        .lock()
        .expect("lock")
        .journal
        .iter()
        .map(|e| e.message.clone())
        .collect();
    let failed = journal
        .iter()
        .position(|m| m.contains("Failed with result 'exit-code'"))
        .expect("the failure is in the journal");
    assert!(
        journal[failed..]
            .iter()
            .any(|m| m == "Initialization Sequence Completed"),
        "the tunnel reconnected after the failure: {journal:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_what_was_expected_and_changes_nothing() {
    let (_dir, d) = start().await;
    let faults = d.fault_injector();
    let vip = vip(&d, "prod");
    let gw = gateway(&d, "prod");
    let holder = kube_look(&d, "prod").await.vip.holder;

    let e = faults
        .inject("staging", "holder-dies")
        .expect_err("unknown env")
        .to_string();
    assert!(e.contains("`staging`") && e.contains("dev, prod"), "{e}");
    let e = faults
        .inject("prod", "node-explodes")
        .expect_err("unknown fault")
        .to_string();
    assert!(
        e.contains("`node-explodes`")
            && ["holder-dies", "agent-drifts N", "vpn-down", "vpn-up"]
                .iter()
                .all(|f| e.contains(f)),
        "{e}"
    );
    let e = faults
        .inject("prod", "agent-drifts 9")
        .expect_err("no server 9")
        .to_string();
    assert!(e.contains("1 to 3") && e.contains("k3s-prod-3"), "{e}");
    let e = faults
        .inject("prod", "agent-drifts")
        .expect_err("no number")
        .to_string();
    assert!(e.contains("agent-drifts N"), "{e}");
    let e = faults
        .inject("prod", "agent-drifts x")
        .expect_err("not a number")
        .to_string();
    assert!(e.contains("`x`"), "{e}");
    let e = faults.inject("prod", "").expect_err("no fault").to_string();
    assert!(e.contains("holder-dies"), "{e}");
    let e = faults
        .inject("prod", "vpn-down now")
        .expect_err("extra word")
        .to_string();
    assert!(e.contains("`now`"), "{e}");
    let usage = faults.usage();
    assert!(
        usage.contains("dev, prod") && usage.contains("agent-drifts N"),
        "{usage}"
    );

    // Give a wrongly sent fault time to land, then check nothing moved.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p = kube_look(&d, "prod").await;
    assert_eq!(p.vip.holder, holder);
    assert!(
        p.nodes
            .nodes
            .iter()
            .all(|n| n.ready == Some(ConditionStatus::True)),
        "{:#?}",
        p.nodes
    );
    assert!(
        agent_hosts(&d, "prod").await.iter().all(|(_, h)| *h == vip),
        "no agent drifted"
    );
    assert_eq!(tunnel_state(&d, &gw).await.as_deref(), Some("active"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injector_outliving_its_demo_says_the_simulation_has_stopped() {
    let (_dir, d) = start().await;
    let faults = d.fault_injector();
    drop(d);
    // The controllers notice the cancel on their next poll; until then the fault would
    // still be queued, so wait for the refusal.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match faults.inject("prod", "agent-drifts 1") {
            Err(e) => {
                assert!(e.to_string().contains("simulation has stopped"), "{e}");
                break;
            }
            Ok(said) => assert!(Instant::now() < deadline, "still accepted: {said}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
