//! The simulation keeps Kubernetes' own invariants while etcd has no quorum (issue 38):
//! nothing is committed, so no Lease is acquired or renewed and no status is posted, on
//! the built-in API server as on a real kube-apiserver (`demo --apiserver`). The console
//! once showed `✓ held by k3s-prod-3, renewed 0s ago` beside `etcd ✗ no quorum`.
//!
//! With `--apiserver` the quorum is real (issue 39): each server has a real etcd member,
//! a server that dies or whose k3s stops takes its member down (the process is killed), and
//! it is the real etcd that refuses the writes; a k3s started again starts its member.

use crate::demo_common::{self, Mode};

use std::time::{Duration, Instant};

use hk_console::sim::demo::Demo;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

/// One `#[tokio::test]` per mode for the case `$case(mode)`.
macro_rules! both_modes {
    ($case:ident) => {
        mod $case {
            use super::Mode;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn built_in() {
                super::$case(Mode::BuiltIn).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn real_apiserver() {
                super::$case(Mode::Real).await
            }
        }
    };
}

/// Every object of `T` (`api_version`, `kind`) as committed so far. On a real
/// kube-apiserver the list is its watch cache's (`resourceVersion=0`): a consistent list
/// asks etcd, which answers nothing without quorum; the cache holds exactly what etcd
/// committed and sent.
async fn committed<T>(
    d: &Demo,
    c: &demo_common::Cluster,
    api_version: &str,
    kind: &str,
) -> Vec<Value>
where
    T: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    match &d.real {
        None => c.objects(api_version, kind, None).await,
        Some(_) => {
            let api: Api<T> = Api::all(demo_common::client(d, "prod").await);
            api.list(&ListParams::default().match_any())
                .await
                .unwrap_or_else(|e| panic!("list {kind} from the watch cache: {e}"))
                .items
                .iter()
                .map(|o| serde_json::to_value(o).expect("object as JSON"))
                .collect()
        }
    }
}

/// What the panes read that only a write can change: every Lease's spec (kube-vip's and
/// the kubelets' node Leases: holder, renewTime, transitions) and every Node's status, as
/// committed.
async fn written(d: &Demo, c: &demo_common::Cluster) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for l in committed::<Lease>(d, c, "coordination.k8s.io/v1", "Lease").await {
        let lease = l
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if lease.starts_with("apiserver-") || lease.starts_with("hk-test-") {
            // A real kube-apiserver's own identity Lease (it renews it whenever etcd
            // commits), and the tests' own.
            continue;
        }
        let name = format!(
            "Lease {}/{}",
            l.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(""),
            l.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
        out.push((name, l.get("spec").cloned().unwrap_or(Value::Null)));
    }
    for n in committed::<Node>(d, c, "v1", "Node").await {
        let name = format!(
            "Node {}",
            n.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        );
        out.push((name, n.get("status").cloned().unwrap_or(Value::Null)));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The names whose written state differs between two snapshots.
fn changed(a: &[(String, Value)], b: &[(String, Value)]) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .filter(|(n, v)| b.iter().find(|(m, _)| m == n).map(|(_, w)| w) != Some(v))
        .map(|(n, _)| n.clone())
        .collect();
    out.extend(
        b.iter()
            .filter(|(n, _)| !a.iter().any(|(m, _)| m == n))
            .map(|(n, _)| n.clone()),
    );
    out
}

/// Three times kube-vip's renew period (2 s) and more than a node Lease renewal.
const WINDOW: Duration = Duration::from_secs(7);

/// Past the healthy scenario's Lease duration (15 s) and one renew period: long enough
/// for the live server to have taken the Lease, were anything written.
const LEASE_RUNS_OUT: Duration = Duration::from_secs(18);

/// Two `holder-dies` on prod (the first holder, then the server the Lease moved to): two of
/// three etcd members down. Before, the same window sees the Leases renewed (the
/// snapshot is no constant); after, nothing written moves: the third server neither takes
/// the Lease nor renews anything, and no Node status changes.
async fn no_write_without_quorum(mode: Mode) {
    let (_dir, d) = demo_common::start_in(mode, "healthy").await;
    let c = demo_common::cluster(&d, "prod");
    let faults = d.fault_injector();

    let first = faults.inject("prod", "holder-dies").expect("accepted");
    assert!(first.contains("k3s-prod-1"), "{first}");
    let deadline = Instant::now() + Duration::from_secs(45);
    let second = loop {
        // Until the controllers have seen the first fault and the Lease has moved, the
        // holder is k3s-prod-1 again ("already dead", or dying again before it lands).
        let said = faults.inject("prod", "holder-dies").expect("accepted");
        if !said.contains("k3s-prod-1") {
            break said;
        }
        assert!(Instant::now() < deadline, "the lease never moved: {said}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        second.contains("k3s-prod-2 (lease holder) died"),
        "{second}"
    );
    // The fault reaches the controllers over a channel: let it land.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let before = written(&d, &c).await;
    tokio::time::sleep(LEASE_RUNS_OUT).await;
    let after = written(&d, &c).await;
    let moved = changed(&before, &after);
    assert!(
        moved.is_empty(),
        "{mode}: written without quorum in {LEASE_RUNS_OUT:?}: {moved:?}\nbefore {before:#?}\nafter {after:#?}"
    );
    let holder = after
        .iter()
        .find(|(n, _)| n == "Lease kube-system/plndr-cp-lock")
        .and_then(|(_, s)| s.get("holderIdentity"))
        .and_then(Value::as_str)
        .map(str::to_string);
    assert_eq!(holder.as_deref(), Some("k3s-prod-2"), "{mode}: {after:#?}");

    // A run started now is refused for what is wrong: quorum, not the lock, and no bypass
    // offered (without the lock every write the run makes fails the same way). The
    // built-in server answers etcd's own error at once. A real kube-apiserver over the real
    // etcd (two of its three members killed) holds the call until its request timeout (a
    // minute): unanswered, the lock asks the server's own /readyz/etcd, which fails, and
    // says so (it once read as "the run lock could not be taken", offering the bypass).
    {
        let client = demo_common::client(&d, "prod").await;
        let me = hk_console::cluster::lock::Claimant {
            holder: "tester@sim-quorum".into(),
            run_id: "20261206T200000000Z-etcd-io-priority-prod".into(),
            runbook: "etcd-io-priority".into(),
            env: "prod".into(),
        };
        let policy = hk_console::session::lock::LockPolicy::Cluster { duration_s: 60 };
        let refused = hk_console::session::lock::take(Ok(client), &me, &policy)
            .await
            .expect_err("no run lock without quorum");
        let said = refused.to_string();
        assert!(
            matches!(
                refused,
                hk_console::session::lock::RunLockError::NoQuorum { .. }
            ),
            "{said}"
        );
        assert!(
            said.contains("etcd has no quorum") && said.contains("`prod`"),
            "{said}"
        );
        assert!(!said.contains("--no-cluster-lock"), "{said}");
        if mode == Mode::Real {
            assert!(said.contains("/readyz/etcd fails"), "{said}");
        }
    }
}
both_modes!(no_write_without_quorum);

/// The control for the case above: with quorum the same window does see writes (kube-vip's
/// renewals and the kubelets'), so an unchanged snapshot there means something.
async fn with_quorum_the_leases_are_renewed(mode: Mode) {
    let (_dir, d) = demo_common::start_in(mode, "healthy").await;
    let c = demo_common::cluster(&d, "prod");
    let before = written(&d, &c).await;
    tokio::time::sleep(WINDOW).await;
    let after = written(&d, &c).await;
    let moved = changed(&before, &after);
    assert!(
        moved.contains(&"Lease kube-system/plndr-cp-lock".to_string()),
        "{mode}: {moved:?}"
    );
}
both_modes!(with_quorum_the_leases_are_renewed);

/// `systemctl stop k3s` (`active` false) or `start` on `host`, as a playbook's would: the
/// node's unit changes, and the demo's look at it (every 200 ms) tells the controllers and,
/// with `--apiserver`, stops or starts the server's real etcd member.
fn set_k3s(d: &Demo, host: &str, active: bool) {
    let state = d
        .node_state(host)
        .unwrap_or_else(|| panic!("no node {host}"));
    let mut n = state.lock().expect("node state");
    let now = n.now_ms();
    let done = if active {
        n.start_unit_at("k3s.service", now)
    } else {
        n.stop_unit_at("k3s.service", now)
    };
    done.unwrap_or_else(|e| panic!("k3s.service on {host}: {e}"));
}

/// With `--apiserver`: waits until prod's real member on `host` runs (`running`) or not.
async fn member_runs(d: &Demo, host: &str, running: bool) {
    let Some(real) = &d.real else { return };
    let etcd = real.cluster.etcd("prod").expect("prod's etcd members");
    let deadline = Instant::now() + Duration::from_secs(5);
    while etcd.pid(host).is_some() != running {
        assert!(
            Instant::now() < deadline,
            "{host}'s etcd member {} within 5 s",
            if running { "running" } else { "stopped" }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Lease of the test's own, created in kube-system: an acquisition through the API.
/// `Err` when refused or unanswered within `wait`.
async fn acquire(d: &Demo, name: &str, wait: Duration) -> Result<(), String> {
    let leases: Api<Lease> = Api::namespaced(demo_common::client(d, "prod").await, "kube-system");
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"holderIdentity": "tester@sim-quorum", "leaseDurationSeconds": 15},
    }))
    .expect("a Lease");
    match tokio::time::timeout(wait, leases.create(&PostParams::default(), &lease)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {wait:?}")),
    }
}

/// The kube-vip Lease's spec as committed.
async fn vip_lease(d: &Demo, c: &demo_common::Cluster) -> Value {
    written(d, c)
        .await
        .into_iter()
        .find(|(n, _)| n == "Lease kube-system/plndr-cp-lock")
        .map(|(_, s)| s)
        .unwrap_or(Value::Null)
}

/// Two of prod's three servers' k3s stopped, their etcd members with them (in
/// `--apiserver` mode the real members are killed, and the real etcd is left with one of
/// three): no Lease renewal or acquisition succeeds, neither kube-vip's (its holder, the
/// first server, still runs and keeps trying) nor a client's. One server's k3s started
/// again (its member rejoins): quorum is back, kube-vip renews and a client's Lease is
/// taken.
async fn two_members_down_then_one_back(mode: Mode) {
    let (_dir, d) = demo_common::start_in(mode, "healthy").await;
    let c = demo_common::cluster(&d, "prod");
    // The control: with quorum a client's Lease is taken at once.
    acquire(&d, "hk-test-before", Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("{mode}: with quorum: {e}"));

    for host in ["k3s-prod-2", "k3s-prod-3"] {
        set_k3s(&d, host, false);
    }
    member_runs(&d, "k3s-prod-2", false).await;
    member_runs(&d, "k3s-prod-3", false).await;
    member_runs(&d, "k3s-prod-1", true).await;
    // What was on its way when the members went has landed (or failed) by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = written(&d, &c).await;
    let refused = acquire(&d, "hk-test-without-quorum", Duration::from_secs(20)).await;
    let said = refused.expect_err("a Lease acquired without quorum");
    eprintln!("{mode}: a Lease's create without quorum: {said}");
    // kube-vip renews every 2 s: three periods and more without one committed.
    tokio::time::sleep(WINDOW).await;
    let after = written(&d, &c).await;
    let moved = changed(&before, &after);
    assert!(
        moved.is_empty(),
        "{mode}: written with two of three members down: {moved:?}\nbefore {before:#?}\nafter {after:#?}"
    );
    let names: Vec<String> = committed::<Lease>(&d, &c, "coordination.k8s.io/v1", "Lease")
        .await
        .iter()
        .filter_map(|l| {
            l.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    assert!(
        !names.iter().any(|n| n == "hk-test-without-quorum"),
        "{mode}: the Lease was committed without quorum: {names:?}"
    );
    let held = vip_lease(&d, &c).await;
    assert_eq!(held["holderIdentity"], "k3s-prod-1", "{mode}: {held:#}");

    // One member back: two of three, a quorum again.
    set_k3s(&d, "k3s-prod-2", true);
    member_runs(&d, "k3s-prod-2", true).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = vip_lease(&d, &c).await;
        if now["renewTime"] != held["renewTime"] {
            assert_eq!(now["holderIdentity"], "k3s-prod-1", "{mode}: {now:#}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{mode}: kube-vip's Lease not renewed within 60 s of quorum's return: {now:#}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    acquire(&d, "hk-test-after", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{mode}: quorum back, yet: {e}"));
}
both_modes!(two_members_down_then_one_back);

/// `--apiserver`: `systemctl restart k3s` on a server restarts its real etcd member (a new
/// process on the same data), which rejoins: the cluster serves with all three again and a
/// Lease write commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_restart_restarts_its_real_member_which_rejoins() {
    let (_dir, d) = demo_common::start_in(Mode::Real, "healthy").await;
    let etcd = d
        .real
        .as_ref()
        .and_then(|r| r.cluster.etcd("prod"))
        .expect("prod's real etcd")
        .clone();
    let host = "k3s-prod-3";
    let before = etcd.pid(host).expect("the member runs");
    {
        let state = d.node_state(host).expect("node");
        let mut n = state.lock().expect("node state");
        let now = n.now_ms();
        n.restart_unit_at("k3s.service", now)
            .expect("k3s.service restarts");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        match etcd.pid(host) {
            Some(p) if p != before => break p,
            _ => {}
        }
        assert!(Instant::now() < deadline, "{host}'s member never restarted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        !std::path::Path::new(&format!("/proc/{before}/cmdline")).exists()
            || std::fs::read_to_string(format!("/proc/{before}/stat"))
                .is_ok_and(|s| s.contains(") Z ")),
        "the old member {before} is gone"
    );
    // Rejoined: its own /health says it sees a leader and serves a quorum read.
    let url = etcd.client_url(host).expect("its URL");
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().expect("IP:PORT");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !hk_console::sim::apiserver::etcd_healthy_at(addr).await {
        assert!(
            Instant::now() < deadline,
            "{host}'s member (pid {after}) not healthy within 20 s of its restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    acquire(&d, "hk-test-after-restart", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("a write after the member's restart: {e}"));
}
