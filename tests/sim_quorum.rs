//! The simulation keeps Kubernetes' own invariants while etcd has no quorum (issue 38):
//! nothing is committed, so no Lease is acquired or renewed and no status is posted, on
//! the built-in API server as on a real kube-apiserver (`demo --apiserver`). The console
//! once showed `✓ held by k3s-prod-3, renewed 0s ago` beside `etcd ✗ no quorum`.

use crate::demo_common::{self, Mode};

use std::time::{Duration, Instant};

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

/// What the panes read that only a write can change: every Lease's spec (kube-vip's and
/// the kubelets' node Leases: holder, renewTime, transitions) and every Node's status.
async fn written(c: &demo_common::Cluster) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for l in c.objects("coordination.k8s.io/v1", "Lease", None).await {
        let lease = l
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if lease.starts_with("apiserver-") {
            // A real kube-apiserver's own identity Lease: written by the real server over
            // its real etcd, which the simulated servers' deaths do not reach.
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
    for n in c.objects("v1", "Node", None).await {
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

    let before = written(&c).await;
    tokio::time::sleep(LEASE_RUNS_OUT).await;
    let after = written(&c).await;
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
    // offered (without the lock every write the run makes fails the same way). Only the
    // built-in server refuses the write: on a real kube-apiserver the simulated deaths do
    // not reach the real etcd (docs/simulation.md), so its lock would be taken.
    if mode == Mode::BuiltIn {
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
    }
}
both_modes!(no_write_without_quorum);

/// The control for the case above: with quorum the same window does see writes (kube-vip's
/// renewals and the kubelets'), so an unchanged snapshot there means something.
async fn with_quorum_the_leases_are_renewed(mode: Mode) {
    let (_dir, d) = demo_common::start_in(mode, "healthy").await;
    let c = demo_common::cluster(&d, "prod");
    let before = written(&c).await;
    tokio::time::sleep(WINDOW).await;
    let after = written(&c).await;
    let moved = changed(&before, &after);
    assert!(
        moved.contains(&"Lease kube-system/plndr-cp-lock".to_string()),
        "{mode}: {moved:?}"
    );
}
both_modes!(with_quorum_the_leases_are_renewed);
