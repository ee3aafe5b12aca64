//! The guard rails' look at a cluster, against the REAL kube-apiserver
//! (crates/hk-sim/tests/support/apiserver.rs): the health gate between hosts through `exec::kube::wait`
//! (the function the kube-wait executor calls) passing on a healthy cluster after its soak,
//! timing out naming a NotReady node, and passing once the node recovers; the real
//! `/readyz/etcd`; the look before a `disrupts: node` step (VIP holder: the VIP moves;
//! a node agents dial alone: refused naming the pod); and no write at all in the audit log.
//! Needs `bash tests/apiserver/build.sh`; fails with that hint.

use crate::support;

use std::time::Duration;

use hk_console::checks::live::{EnvTopology, Look};
use hk_console::cluster::health_probe::{look_before_disruption, snapshot};
use hk_console::cluster::WatchSettings;
use hk_console::exec::kube::wait::{self, Condition, WaitEnd, WaitOptions};
use hk_console::guard::health::{unhealthy, EtcdReady};
use hk_console::runbook::plan::{HealthGate, NodeDisruption};
use kube::Client;
use support::apiserver::*;
use support::three_servers::ThreeServers;
use tokio_util::sync::CancellationToken;

const LAB: ThreeServers = ThreeServers::named("lab", ["k3s-lab-1", "k3s-lab-2", "k3s-lab-3"]);

fn topo() -> EnvTopology {
    LAB.topo()
}

async fn healthy_cluster(admin: &Client) {
    LAB.create_nodes(admin).await;
    create_vip_lease(admin, &VipLease::held_by("k3s-lab-1", Duration::ZERO)).await;
    LAB.create_cilium(admin, ["cilium-0", "cilium-1", "cilium-2"], &[])
        .await;
}

/// kube-vip renewing its lease every second, as long as the test runs.
fn renew_forever(admin: Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let mut l = VipLease::held_by("k3s-lab-1", Duration::ZERO);
            // Keep the holder's acquire time: only the renewal moves.
            l.transitions = 0;
            update_vip_lease(&admin, &l).await;
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
    })
}

async fn gate_wait(client: Client, gate: &HealthGate, timeout_s: u64) -> (WaitEnd, Vec<String>) {
    let condition = Condition::parse(&gate.condition()).expect("the planner's condition parses");
    let settings = WatchSettings::default();
    let opts = WaitOptions::new(Duration::from_secs(timeout_s), &settings);
    let lines = std::sync::Mutex::new(Vec::new());
    let progress = |l: String| lines.lock().expect("lines").push(l);
    let end = wait::wait(
        client,
        &topo(),
        &settings,
        &condition,
        &opts,
        &CancellationToken::new(),
        &progress,
    )
    .await
    .expect("the wait could be carried out");
    let seen = lines.lock().expect("lines").clone();
    (end, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_gate_halts_on_a_not_ready_node_and_passes_once_it_recovers() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    healthy_cluster(&admin).await;
    let renewer = renew_forever(admin.clone());

    // One look: the real API server's /readyz/etcd, every node, every agent, the lease.
    let snap = snapshot(&admin, &topo(), &WatchSettings::default()).await;
    assert_eq!(snap.etcd, Look::seen(EtcdReady::Ok));
    assert_eq!(unhealthy(&topo(), &snap), Vec::<String>::new(), "{snap:#?}");

    let gate = HealthGate {
        after: "k3s-lab-3".into(),
        before: "k3s-lab-1".into(),
        stable_for_s: 0,
        soak_s: 2,
    };
    let t0 = std::time::Instant::now();
    let (end, lines) = gate_wait(admin.clone(), &gate, 20).await;
    let took = t0.elapsed();
    assert!(end.is_met(), "{end}\n{lines:#?}");
    assert!(
        took >= Duration::from_secs(2),
        "the soak was not waited: {took:?}"
    );
    eprintln!("healthy gate passed after {took:?}: {end}");

    // Node 1 goes NotReady between hosts: the gate does not pass and says which and since when.
    let went = set_node_ready(&admin, "k3s-lab-1", false).await;
    let since = went
        .status
        .and_then(|s| s.conditions)
        .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time)
        .map(|t| t.0.strftime("%H:%M:%S").to_string())
        .expect("transition time");
    let (end, lines) = gate_wait(admin.clone(), &gate, 3).await;
    match &end {
        WaitEnd::TimedOut { last, .. } => assert!(
            last.contains(&format!("k3s-lab-1 NotReady since {since}")),
            "{last}"
        ),
        other => panic!("expected a timeout naming the node: {other}\n{lines:#?}"),
    }

    // It recovers while the gate waits: the gate passes after a fresh soak.
    let recover = {
        let admin = admin.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            set_node_ready(&admin, "k3s-lab-1", true).await;
        })
    };
    let t0 = std::time::Instant::now();
    let (end, lines) = gate_wait(admin.clone(), &gate, 30).await;
    recover.await.expect("recover");
    assert!(end.is_met(), "{end}\n{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("k3s-lab-1 NotReady")),
        "the halt was said while it lasted: {lines:#?}"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(3500),
        "{:?}",
        t0.elapsed()
    );
    renewer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disruption_look_names_the_vip_move_and_refuses_a_node_agents_dial_alone() {
    let server = ApiServer::start();
    let admin = server.admin_client().await;
    healthy_cluster(&admin).await;
    let settings = WatchSettings::default();
    let quiet = |_: String| {};

    // The looks write nothing: the audit log between two settles shows no admin write.
    server.audit_settle().await;
    let writes_before_probe = server.writes_by(ADMIN_USER).len();

    let look = NodeDisruption {
        node: "k3s-lab-1".into(),
    };
    let (v, end) = look_before_disruption(&admin, &topo(), &settings, &look, &quiet).await;
    assert!(end.is_met(), "{end}");
    assert!(
        v.facts.iter().any(|f| f.starts_with(
            "k3s-lab-1 holds the VIP lease plndr-cp-lock now: expect the VIP 127.0.0.49 to move"
        )),
        "{v:#?}"
    );
    assert!(
        v.facts
            .iter()
            .any(|f| f == "losing k3s-lab-1 leaves 2 of 3 etcd members; quorum is 2"),
        "{v:#?}"
    );
    // Through the wait dispatch too, as the executor runs it.
    let condition = Condition::parse(&look.condition()).expect("parses");
    let end = wait::wait(
        admin.clone(),
        &topo(),
        &settings,
        &condition,
        &WaitOptions::new(Duration::from_secs(10), &settings),
        &CancellationToken::new(),
        &quiet,
    )
    .await
    .expect("carried out");
    assert!(end.is_met(), "{end}");
    server.audit_settle().await;
    assert_eq!(
        server.writes_by(ADMIN_USER).len(),
        writes_before_probe,
        "the looks wrote something"
    );

    // An agent that dials node 3's own address: node 3 is refused as a target.
    create_cilium_pod(
        &admin,
        &CiliumPod {
            name: "cilium-stray".into(),
            node: "k3s-lab-2".into(),
            env: AgentEnv::literal("127.0.0.53", 6443),
            ready: true,
        },
    )
    .await;
    let look = NodeDisruption {
        node: "k3s-lab-3".into(),
    };
    let (v, end) = look_before_disruption(&admin, &topo(), &settings, &look, &quiet).await;
    match end {
        WaitEnd::Failed(why) => assert!(
            why.contains("k3s-lab-3 is the only API server 1 cilium-agent(s) dial (127.0.0.53): cilium-stray on k3s-lab-2"),
            "{why}"
        ),
        other => panic!("expected a refusal: {other}"),
    }
    assert!(v.blocked());

    // Quorum: with node 2 down, losing node 1 leaves 1 of 3.
    set_node_ready(&admin, "k3s-lab-2", false).await;
    let look = NodeDisruption {
        node: "k3s-lab-1".into(),
    };
    let (v, _) = look_before_disruption(&admin, &topo(), &settings, &look, &quiet).await;
    assert_eq!(
        v.blockers,
        vec!["losing k3s-lab-1 leaves 1 of 3 etcd members (k3s-lab-2 not Ready already): etcd needs 2 for quorum. Blocked"]
    );
}
