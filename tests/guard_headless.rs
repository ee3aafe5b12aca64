//! The guard rails in the simulation, headless (the console app driven by the simulated
//! operator with the real executors): `etcd-io-priority` on prod with k3s-prod-1 made
//! NotReady between node 3 and node 1 holds at the health gate naming the node and goes on
//! only after it recovers and the soak passes; `reprovision-node` on the VIP holder says
//! that the VIP lease will move, and it does: k3s.yml restarts k3s on the holder (over SSH,
//! a raw task) and another server takes the kube-vip Lease once it runs out (read from the
//! simulated cluster's API, with kube-vip's LeaderElection event); a node that a cilium-agent
//! dials alone is refused as a disruption target (the run halts before anything touches it).
//! Every case runs twice: on the built-in API server, and with `--apiserver` (the same
//! simulated controllers on a real kube-apiserver and etcd), read and written through the
//! interface both share, with one body of assertions.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin) and, for the second
//! mode, etcd, kube-apiserver and kubectl ($HK_APISERVER_BIN_DIR, else target/apiserver-bin):
//! missing = FAIL with the hint, never a skip.

mod demo_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use demo_common::{DemoDir, Mode};
use hk_console::sim::demo::Demo;
use hk_console::sim::headless::{drive, HeadlessRun, Report};
use hk_console::sim::kube::ObjRef;
use serde_json::{json, Value};

fn require_ansible() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
}

async fn start(mode: Mode, scenario: &str) -> (DemoDir, Demo) {
    require_ansible();
    demo_common::start_in(mode, scenario).await
}

/// One `#[tokio::test]` per mode for the case `$case(mode)`: `$case::built_in` and
/// `$case::real_apiserver`.
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

async fn run(d: &Demo, runs: &Path, runbook: &str, env: &str, host: Option<&str>) -> Report {
    let set = hk_console::runbook::embedded::load(&[]).expect("shipped runbooks");
    let req = HeadlessRun {
        runbook: runbook.into(),
        env: Some(env.into()),
        host: host.map(str::to_string),
        deadline: Duration::from_secs(400),
    };
    let mut lines = Vec::new();
    let report = drive(d, set, &req, runs, |l| lines.push(l.to_string()))
        .await
        .unwrap_or_else(|e| panic!("{runbook} {env}: {e}\n{}", lines.join("\n")));
    eprintln!("{}", report.render());
    report
}

/// A node's Ready condition set as a kubelet (or the node controller) would, on whichever
/// API server the demo runs.
async fn set_ready(d: &Demo, env: &str, node: &str, ready: bool) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    demo_common::cluster(d, env)
        .patch_status(
            &ObjRef::new("v1", "Node", None, node),
            json!({"conditions": [{
                "type": "Ready",
                "status": if ready { "True" } else { "Unknown" },
                "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" },
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}),
        )
        .await;
}

/// The kube-vip Lease of `env` as the cluster's API holds it, by the name the console's
/// watchers look for (a real kube-apiserver keeps its own identity Leases in kube-system
/// too).
async fn vip_lease(d: &Demo, env: &str) -> Value {
    let name = hk_console::cluster::watch_settings(&d.repo, env)
        .unwrap_or_else(|e| panic!("{env}: {e}"))
        .lease_name;
    let leases = demo_common::cluster(d, env)
        .objects("coordination.k8s.io/v1", "Lease", Some("kube-system"))
        .await;
    let names: Vec<&str> = leases
        .iter()
        .filter_map(|l| l.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    leases
        .iter()
        .find(|l| l.pointer("/metadata/name").and_then(Value::as_str) == Some(name.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("no kube-vip Lease {name} among {names:?}"))
}

/// The only journal under `runs`, once there is one.
fn journal_in(runs: &Path) -> Option<PathBuf> {
    std::fs::read_dir(runs)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && !p.to_string_lossy().ends_with(".output.jsonl")
        })
}

/// Whether the journal says step `n` has started.
fn started(journal: &Path, n: usize) -> bool {
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| {
            v.pointer("/input/type").and_then(Value::as_str) == Some("step-started")
                && v.pointer("/input/n").and_then(Value::as_u64) == Some(n as u64)
        })
}

/// The output lines of step `n` so far.
fn output_of(journal: &Path, n: usize) -> Vec<String> {
    hk_console::journal::read_output(journal)
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o.n == n)
        .map(|o| o.line)
        .collect()
}

both_modes!(etcd_io_priority_holds_at_the_health_gate_while_node_1_is_not_ready);
async fn etcd_io_priority_holds_at_the_health_gate_while_node_1_is_not_ready(mode: Mode) {
    let (dir, d) = start(mode, "healthy").await;
    let runs = dir.path().join("runs");
    let d = std::sync::Arc::new(d);
    let fault = {
        let d = std::sync::Arc::clone(&d);
        let runs = runs.clone();
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(120);
            // Step 6 is the gate between node 3 and node 1.
            let journal = loop {
                assert!(Instant::now() < deadline, "the gate never started");
                if let Some(j) = journal_in(&runs).filter(|j| started(j, 6)) {
                    break j;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            set_ready(&d, "prod", "k3s-prod-1", false).await;
            let went = Instant::now();
            // The gate names the node while it is down...
            let named = loop {
                assert!(Instant::now() < deadline, "the gate never named the node");
                if let Some(l) = output_of(&journal, 6)
                    .into_iter()
                    .find(|l| l.contains("k3s-prod-1 NotReady since"))
                {
                    break l;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            tokio::time::sleep(Duration::from_secs(3)).await;
            // ...and has not let the run past it.
            assert!(
                !started(&journal, 7),
                "the run went past the gate with node 1 NotReady"
            );
            set_ready(&d, "prod", "k3s-prod-1", true).await;
            (named, went.elapsed())
        })
    };
    let report = run(&d, &runs, "etcd-io-priority", "prod", None).await;
    let (named, down_for) = fault.await.expect("fault task");
    eprintln!("gate said: {named}; node down for {down_for:?}");
    assert!(report.succeeded, "{}", report.render());
    let gate = &report.steps[5];
    assert_eq!(gate.id, "health-gate");
    assert_eq!(gate.state, "done");
    // It passed only after a whole soak from the recovery.
    let journal = &report.journal;
    let rec = hk_console::record::load_path(journal).expect("record");
    let step7 = rec.steps[6].started.expect("step 7 started");
    let gate_started = rec.steps[5].started.expect("gate started");
    assert!(
        step7.0 - gate_started.0 >= 60_000 + down_for.as_millis() as u64,
        "the gate passed {} ms after it started, less than the node's {:?} down plus the 60 s soak",
        step7.0 - gate_started.0,
        down_for
    );
    // The change record names the halt in the gate's output.
    let md = rec.render_md();
    assert!(
        md.contains("health gate between hosts on k3s-prod-1"),
        "{md}"
    );
}

both_modes!(
    reprovisioning_the_vip_holder_says_the_vip_moves_and_a_node_agents_dial_alone_is_refused
);
async fn reprovisioning_the_vip_holder_says_the_vip_moves_and_a_node_agents_dial_alone_is_refused(
    mode: Mode,
) {
    let (dir, d) = start(mode, "healthy").await;
    let holder = vip_lease(&d, "prod")
        .await
        .pointer("/spec/holderIdentity")
        .and_then(Value::as_str)
        .map(str::to_string)
        .expect("a VIP lease holder");

    let r = run(
        &d,
        &dir.path().join("runs-a"),
        "reprovision-node",
        "prod",
        Some(&holder),
    )
    .await;
    assert!(r.succeeded, "{}", r.render());
    let look = r
        .steps
        .iter()
        .find(|s| s.id == "k3s.disrupts")
        .expect("the look before k3s.yml");
    let out = output_of(&r.journal, look.n).join("\n");
    assert!(
        out.contains(&format!("{holder} holds the VIP lease")) && out.contains("expect the VIP"),
        "{out}"
    );
    assert!(out.contains("leaves 2 of 3 etcd members"), "{out}");

    // ...and it does move: k3s.yml restarted k3s on the holder, whose kube-vip could not
    // renew through its own API server; another server took the Lease.
    let k3s = r
        .steps
        .iter()
        .find(|s| s.id == "k3s")
        .expect("the k3s step");
    assert_eq!(k3s.state, "done", "{}", r.render());
    let restarts = {
        let s = d.node_state(&holder).expect("holder node");
        let s = s.lock().expect("lock");
        s.units["k3s.service"].restarts
    };
    assert_eq!(restarts, 1, "k3s.yml restarts k3s on {holder} once");
    let waited = Instant::now();
    let (moved_to, transitions) = loop {
        let l = vip_lease(&d, "prod").await;
        let now_held = l
            .pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if now_held != holder && !now_held.is_empty() {
            break (
                now_held,
                l.pointer("/spec/leaseTransitions").and_then(Value::as_u64),
            );
        }
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the VIP lease stayed with {holder} a minute after its k3s restarted: {l}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!(
        "the VIP lease moved from {holder} to {moved_to} (transitions {transitions:?}), {:?} after the run ended",
        waited.elapsed()
    );
    assert!(moved_to.starts_with("k3s-prod-"), "{moved_to}");
    assert!(transitions.is_some_and(|t| t >= 1), "{transitions:?}");
    // kube-vip records the event after it has taken the Lease (as client-go's recorder
    // does, after the write): through a real API server that is a few requests later than
    // the Lease the loop above saw, so the event gets a moment to land.
    let asked = Instant::now();
    loop {
        let events = demo_common::cluster(&d, "prod")
            .objects("v1", "Event", Some("kube-system"))
            .await;
        let elected = events.iter().any(|e| {
            e.pointer("/reason").and_then(Value::as_str) == Some("LeaderElection")
                && e.pointer("/message")
                    .and_then(Value::as_str)
                    .is_some_and(|m| m == format!("{moved_to} became leader"))
        });
        if elected {
            eprintln!(
                "LeaderElection event read {:?} after the Lease was seen moved",
                asked.elapsed()
            );
            break;
        }
        let said: Vec<String> = events
            .iter()
            .filter_map(|e| {
                Some(format!(
                    "{}: {}",
                    e.pointer("/reason")?.as_str()?,
                    e.pointer("/message")?.as_str()?
                ))
            })
            .collect();
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "no LeaderElection event for {moved_to} ({mode}) 5 s after the Lease moved; kube-system's events: {said:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An agent drifts onto node 2's own address: node 2 may not be taken away.
    let said = d
        .fault_injector()
        .inject("prod", "agent-drifts 2")
        .expect("fault");
    eprintln!("{said}");
    let r = run(
        &d,
        &dir.path().join("runs-b"),
        "reprovision-node",
        "prod",
        Some("k3s-prod-2"),
    )
    .await;
    assert!(!r.succeeded, "{}", r.render());
    let failed = r
        .steps
        .iter()
        .find(|s| s.state == "failed")
        .expect("a failed step");
    assert_eq!(failed.id, "k3s.disrupts", "{}", r.render());
    let rec = hk_console::record::load_path(&r.journal).expect("record");
    let why = rec.steps[failed.n - 1]
        .reason
        .clone()
        .or_else(|| rec.steps[failed.n - 1].detail.clone())
        .unwrap_or_default();
    assert!(
        why.contains("k3s-prod-2 is the only API server 1 cilium-agent(s) dial"),
        "{why}\n{}",
        r.render()
    );
    // Nothing after the look ran: k3s.yml never touched the node.
    assert!(r
        .steps
        .iter()
        .filter(|s| s.n > failed.n)
        .all(|s| s.state == "pending"));
}
