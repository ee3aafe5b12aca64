//! `hk-console demo --headless --run`: every shipped runbook driven through the console app
//! against the simulated homelab by the simulated operator, with the real executors (real
//! ansible-playbook over SSH to the simulated nodes, the real kube client against the
//! simulated API servers), in every scenario where the issue says what must happen.
//! Every case runs twice: on the built-in API server, and with `--apiserver` (the same
//! simulated controllers on a real kube-apiserver and etcd), read through the interface both
//! share, with one body of assertions.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin) and, for the second
//! mode, etcd, kube-apiserver and kubectl ($HK_APISERVER_BIN_DIR, else target/apiserver-bin):
//! missing = FAIL with the hint, never a skip.

#[path = "../crates/hk-sim/tests/demo_common/mod.rs"]
mod demo_common;

use std::path::Path;
use std::time::Duration;

use demo_common::{DemoDir, Mode};
use hk_console::runbook::machine::Input;
use hk_console::sim::demo::Demo;
use hk_console::sim::headless::{drive, HeadlessRun, Report, OPERATOR};
use serde_json::Value;

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

/// Drive `runbook` for `env` (on `host`, for single-host runbooks) on the demo `d`,
/// journaling under `dir`/runs, within [`LONG`].
async fn run(d: &Demo, dir: &Path, runbook: &str, env: &str, host: Option<&str>) -> Report {
    run_with(d, dir, runbook, env, host, &[]).await
}

/// The shipped runbook `id` with a 5 s soak and lease stability between hosts instead of
/// the defaults' 60 s and 30 s, as an override for [`run_with`]. For the tests about what a
/// run changes, one node at a time; the gate's own durations are guard_headless's (which
/// holds the 60 s), and these idle minutes, two per mode, were most of this binary's wall
/// time in CI.
fn short_soak(id: &str) -> Vec<(String, String)> {
    let (name, shipped) = hk_console::runbook::embedded::embedded()
        .iter()
        .find(|(name, _)| name.strip_suffix(".yaml") == Some(id))
        .unwrap_or_else(|| panic!("{id} shipped"));
    let short = shipped.replacen(
        "  serial: 1\n",
        "  serial: 1\n  between_hosts:\n    stable_for_s: 5\n    soak_s: 5\n",
        1,
    );
    assert_ne!(&short, shipped, "{id}'s target has `serial: 1`");
    vec![(name.to_string(), short)]
}

/// [`run`] with `overrides` over the shipped runbooks, as `--runbooks` gives them.
async fn run_with(
    d: &Demo,
    dir: &Path,
    runbook: &str,
    env: &str,
    host: Option<&str>,
    overrides: &[(String, String)],
) -> Report {
    let set = hk_console::runbook::embedded::load(overrides).expect("shipped runbooks");
    let req = HeadlessRun {
        runbook: runbook.into(),
        env: Some(env.into()),
        host: host.map(str::to_string),
        deadline: LONG,
    };
    let mut lines = Vec::new();
    let report = drive(d, set, &req, &dir.join("runs"), |l| {
        lines.push(l.to_string())
    })
    .await
    .unwrap_or_else(|e| panic!("{runbook} {env}: {e}\n{}", lines.join("\n")));
    eprintln!("{}", report.render());
    report
}

/// The run succeeded, every step is done, and the journal (read back from disk) says so,
/// with every gate answered by the simulated operator.
fn assert_succeeded(r: &Report) {
    assert!(r.succeeded, "{}", r.render());
    for s in &r.steps {
        assert_eq!(s.state, "done", "step {}: {}", s.n, r.render());
    }
    let replay = hk_console::journal::replay(&r.journal).expect("journal replays");
    assert_eq!(
        replay.run.outcome(),
        hk_console::runbook::machine::RunOutcome::Succeeded
    );
    let gated = r.steps.iter().filter(|s| s.gate.is_some()).count();
    let answers = replay
        .records
        .iter()
        .filter(|rec| match &rec.input {
            Input::TypedText { by, .. } => by == OPERATOR,
            Input::GateAnswered { answer, .. } => {
                matches!(answer, hk_console::runbook::machine::GateAnswer::Approved { by, .. } if by == OPERATOR)
            }
            _ => false,
        })
        .count();
    assert!(answers >= gated, "{answers} answers for {gated} gates");
}

/// The cilium agents' pods (kube-system also runs kube-vip's), from whichever API server
/// the demo runs.
async fn pods(d: &Demo, env: &str) -> Vec<Value> {
    demo_common::cluster(d, env)
        .objects("v1", "Pod", Some("kube-system"))
        .await
        .into_iter()
        .filter(|p| p.pointer("/metadata/labels/k8s-app") == Some(&Value::from("cilium")))
        .collect()
}

fn dials(pod: &Value) -> String {
    pod.pointer("/spec/containers/0/env")
        .and_then(Value::as_array)
        .and_then(|e| {
            e.iter()
                .find(|v| v["name"] == "KUBERNETES_SERVICE_HOST")
                .and_then(|v| v["value"].as_str())
        })
        .unwrap_or_default()
        .to_string()
}

fn vip(d: &Demo, env: &str) -> String {
    d.repo
        .environment(env)
        .and_then(|e| e.vip.get())
        .expect("vip")
        .to_string()
}

const LONG: Duration = Duration::from_secs(240);

both_modes!(read_only_runbooks_complete_and_cold_bringup_is_refused_on_live_prod);
/// The read-only runbooks complete everywhere; cold-bringup completes in dev. In prod (gate
/// policy) its approval before site.yml on all three live, healthy servers at once is refused
/// (issue 29: 0 of 3 etcd members would remain); the simulated operator never overrides, so
/// nothing mutates. A cold bring-up of a cluster that is not up sees no live quorum to lose.
async fn read_only_runbooks_complete_and_cold_bringup_is_refused_on_live_prod(mode: Mode) {
    let (dir, d) = start(mode, "healthy").await;
    for env in ["dev", "prod"] {
        for rb in ["node-health", "vpn-egress-verify"] {
            assert_succeeded(&run(&d, dir.path(), rb, env, None).await);
        }
    }
    assert_succeeded(&run(&d, dir.path(), "cold-bringup", "dev", None).await);
    let r = run(&d, dir.path(), "cold-bringup", "prod", None).await;
    assert!(!r.succeeded, "{}", r.render());
    let site = r
        .steps
        .iter()
        .find(|s| s.id == "site")
        .expect("the site step");
    assert_ne!(site.state, "done", "{}", r.render());
    let rec = hk_console::record::load_path(&r.journal).expect("record");
    assert!(
        rec.steps
            .iter()
            .filter(|s| s.mutates)
            .all(|s| s.started.is_none()),
        "{}",
        rec.render_text()
    );
    let live: Vec<&String> = rec.steps.iter().flat_map(|s| &s.gate_live).collect();
    assert!(
        live.iter()
            .any(|l| l.contains("0 remain: etcd LOSES QUORUM")),
        "{live:?}"
    );
}

both_modes!(etcd_io_priority_completes_and_changes_every_prod_node_through_ansible);
async fn etcd_io_priority_completes_and_changes_every_prod_node_through_ansible(mode: Mode) {
    let (dir, d) = start(mode, "healthy").await;
    let before = |h: &str| {
        let s = d.node_state(h).expect("node");
        let s = s.lock().expect("lock");
        (
            s.disks
                .values()
                .map(|x| x.scheduler.clone())
                .collect::<Vec<_>>(),
            s.units["k3s.service"].io_weight,
        )
    };
    let dev_before = before("k3s-dev-1");
    assert_ne!(before("k3s-prod-3").1, Some(10_000), "starts unmitigated");
    let r = run_with(
        &d,
        dir.path(),
        "etcd-io-priority",
        "prod",
        None,
        &short_soak("etcd-io-priority"),
    )
    .await;
    assert_succeeded(&r);
    // One node at a time in the runbook's order, each confirmed, previewed, applied, read back.
    let hosts: Vec<&str> = r
        .steps
        .iter()
        .filter(|s| s.kind == "list-hosts")
        .filter_map(|s| s.host.as_deref())
        .collect();
    assert_eq!(hosts, ["k3s-prod-3", "k3s-prod-1", "k3s-prod-2"]);
    // Hosts 2 and 3 each still had their own list-hosts, started while the previous host's
    // gate was open and used because the files were unchanged (its output says so).
    let output = r.journal.with_extension("output.jsonl");
    let text =
        std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
    let ahead = text
        .lines()
        .filter(|l| l.contains("list-hosts ran ahead while the previous gate was open"))
        .count();
    assert_eq!(ahead, 2, "{}", output.display());
    // etcd's leadership moved off each server that led when its turn came (issue 39), and
    // only then: each move step says it moved, or that the server did not lead.
    let mut moved = 0;
    for h in &hosts {
        let said_nothing = format!("{h} does not lead etcd (");
        let said_moved = format!("etcd's leadership moved from {h} to ");
        assert!(
            text.contains(&said_nothing) || text.contains(&said_moved),
            "{h}: no leader move verdict in {}",
            output.display()
        );
        moved += usize::from(text.contains(&said_moved));
    }
    assert!(
        moved >= 1,
        "the leader is one of the three servers, each touched: {}",
        output.display()
    );
    // The change record says it too, among its guard rails.
    let md = hk_console::record::load_path(&r.journal)
        .expect("record")
        .render_md();
    assert!(
        md.contains("(etcd's leadership off the server before it changes on k3s-prod-")
            && md.contains("etcd's leadership moved from "),
        "{md}"
    );
    // etcd's snapshot was taken before the first server, from the member the run changes
    // last (it changes them all), beside the journal, and the record names it (issue 39).
    let snap = r.journal.with_file_name(format!(
        "{}.etcd-k3s-prod-2.1.db",
        r.journal
            .file_stem()
            .expect("a journal name")
            .to_string_lossy()
    ));
    let bytes = std::fs::read(&snap).unwrap_or_else(|e| panic!("{}: {e}; {md}", snap.display()));
    assert!(bytes.len() > 64, "{}", snap.display());
    assert!(
        md.contains("(etcd's snapshot before the first server changes): done: etcd snapshot saved from k3s-prod-2 ")
            && md.contains(&format!("{}, {} bytes, sha256 ", snap.display(), bytes.len())),
        "{md}"
    );
    let first_snapshot = r
        .steps
        .iter()
        .position(|s| s.kind == "etcd-snapshot")
        .expect("a snapshot step");
    let first_change = r.steps.iter().position(|s| s.mutates).expect("a change");
    assert!(first_snapshot < first_change, "{md}");
    // The values the read-back saw are the simulated kernel's, set by ansible's raw tasks.
    for h in hosts {
        let s = d.node_state(h).expect("node");
        let s = s.lock().expect("lock");
        let disk = s
            .disks
            .values()
            .find(|x| x.scheduler == "bfq")
            .unwrap_or_else(|| panic!("{h}: no disk on bfq: {:?}", s.disks));
        assert_eq!(disk.nr_requests, 32, "{h}");
        for u in ["system.slice", "k3s.service"] {
            assert_eq!(s.units[u].io_weight, Some(10_000), "{h} {u}");
        }
    }
    // Prod only: dev is untouched.
    assert_eq!(before("k3s-dev-1"), dev_before);
}

both_modes!(memattr_packages_and_reprovision_complete_in_healthy);
async fn memattr_packages_and_reprovision_complete_in_healthy(mode: Mode) {
    let (dir, d) = start(mode, "healthy").await;
    assert_succeeded(
        &run_with(
            &d,
            dir.path(),
            "memattr-survey",
            "prod",
            None,
            &short_soak("memattr-survey"),
        )
        .await,
    );
    for env in ["dev", "prod"] {
        let host = format!("k3s-{env}-2");
        assert_succeeded(&run(&d, dir.path(), "packages-baseline", env, Some(&host)).await);
        // The VPN gateway of the environment: its tunnel steps run too.
        let gw = d
            .repo
            .environment(env)
            .and_then(|e| e.vpn_gateways.first())
            .map(|g| g.name.clone())
            .expect("a gateway");
        let restarts = || {
            let s = d.node_state(&gw).expect("gateway node");
            let s = s.lock().expect("lock");
            s.units["vpn-egress-tunnel.service"].restarts
        };
        let before = restarts();
        let r = run(&d, dir.path(), "reprovision-node", env, Some(&gw)).await;
        assert_succeeded(&r);
        // Prod is protected: each of its plays was previewed (--check --diff) and approved.
        let previewed: Vec<&str> = r
            .steps
            .iter()
            .filter(|s| s.id.ends_with(".check") || s.id.ends_with(".approve"))
            .map(|s| s.id.as_str())
            .collect();
        if env == "prod" {
            // The gateway is a server: etcd's leadership moves off it first, approved.
            assert_eq!(
                previewed,
                [
                    "etcd-leader.approve",
                    "node-baseline.check",
                    "node-baseline.approve",
                    "k3s.check",
                    "k3s.approve",
                    "kube-vip.check",
                    "kube-vip.approve",
                    "vpn-egress-gateway.check",
                    "vpn-egress-gateway.approve"
                ],
                "{}",
                r.render()
            );
        } else {
            assert!(previewed.is_empty(), "{}", r.render());
        }
        // vpn.egress.gateway.yml reached the node over SSH and restarted its tunnel; the
        // checks after it saw the tunnel active again.
        assert_eq!(restarts(), before + 1, "{gw}");
        assert!(
            r.steps.iter().any(|s| s.id == "vpn-exit-ip"),
            "{}",
            r.render()
        );
    }
}

both_modes!(cilium_endpoint_rollout_completes_in_healthy_for_both_environments);
async fn cilium_endpoint_rollout_completes_in_healthy_for_both_environments(mode: Mode) {
    let (dir, d) = start(mode, "healthy").await;
    for env in ["prod", "dev"] {
        let r = run(&d, dir.path(), "cilium-endpoint-rollout", env, None).await;
        assert_succeeded(&r);
        // Prod is protected: a read-only preview of the reconcile, then an approval, before
        // the reconcile; the preview read the DaemonSet it rolls off the cluster.
        let ids: Vec<&str> = r.steps.iter().map(|s| s.id.as_str()).collect();
        let at = ids
            .iter()
            .position(|i| *i == "reconcile")
            .expect("reconcile");
        if env == "prod" {
            assert_eq!(
                ids[at - 2..at],
                ["reconcile.preview", "reconcile.approve"],
                "{}",
                r.render()
            );
            let preview = r.steps[at - 2].n;
            let out = hk_console::journal::read_output(&r.journal).expect("output log");
            assert!(
                out.iter().any(|o| o.n == preview
                    && o.line.contains("every cilium-agent on 3 nodes")
                    && o.line.contains("one at a time (maxUnavailable 1)")),
                "{:?}",
                out.iter().filter(|o| o.n == preview).collect::<Vec<_>>()
            );
        } else {
            assert!(!ids.contains(&"reconcile.preview"), "{}", r.render());
        }
        // Dev asks for the operator at the keyboard before anything mutates.
        assert_eq!(
            r.steps.iter().any(|s| s
                .gate
                .as_deref()
                .is_some_and(|g| g.starts_with("operator-present"))),
            env == "dev"
        );
    }
}

both_modes!(agents_on_node_ip_end_on_the_vip_one_node_at_a_time);
/// The 2026-09-06 incident: every prod agent dials the founder. The runbook's reconcile
/// rolls them onto the VIP one node at a time, and the run ends with all of them there.
async fn agents_on_node_ip_end_on_the_vip_one_node_at_a_time(mode: Mode) {
    let (dir, d) = start(mode, "agents-on-node-ip").await;
    let vip = vip(&d, "prod");
    assert!(
        pods(&d, "prod").await.iter().all(|p| dials(p) != vip),
        "the scenario starts with the agents off the VIP"
    );
    let r = run(&d, dir.path(), "cilium-endpoint-rollout", "prod", None).await;
    assert_succeeded(&r);
    let now = pods(&d, "prod").await;
    assert_eq!(now.len(), 3);
    for p in &now {
        assert_eq!(dials(p), vip, "{}", p["metadata"]["name"]);
    }
    // The rollout as kube-wait streamed it: never more than one agent unavailable, the
    // updated count only going up, ending 3/3.
    let rolled = r.steps.iter().find(|s| s.id == "rolled-out").expect("step");
    let out = hk_console::journal::read_output(&r.journal).expect("output log");
    let mut last_updated = 0;
    let mut seen = 0;
    for o in out.iter().filter(|o| o.n == rolled.n) {
        // A status the controller wrote for the spec before the reconcile counts the old
        // template's pods (3/3 of it): kube-wait says so, and the new rollout's count starts
        // from 0 after it (seen on a loaded machine: the wait looked before the controller
        // had observed the new spec).
        if o.line.contains("(controller at generation") {
            continue;
        }
        let Some((counts, _)) = o.line.split_once(" unavailable") else {
            continue;
        };
        let Some((upd, unavail)) = counts.split_once(" updated, ") else {
            continue;
        };
        let (Some(u), Ok(down)) = (
            upd.split('/')
                .next()
                .and_then(|x| x.trim().parse::<u32>().ok()),
            unavail.trim().parse::<u32>(),
        ) else {
            continue;
        };
        seen += 1;
        assert!(down <= 1, "more than one agent down: {}", o.line);
        assert!(u >= last_updated, "updated count went back: {}", o.line);
        last_updated = u;
    }
    assert!(
        seen >= 2,
        "the rollout's progress was streamed ({seen} lines)"
    );
    assert!(
        out.iter()
            .any(|o| o.n == rolled.n && o.line.contains("3 of 3 updated")),
        "ends rolled out"
    );
}

both_modes!(rollout_stuck_halts_the_run_at_the_unready_pod);
/// Server 2's updated agent never becomes ready: kube-wait fails naming it once it has been
/// unready past the (time-scaled) threshold, the run halts there, and nothing after it runs.
async fn rollout_stuck_halts_the_run_at_the_unready_pod(mode: Mode) {
    let (dir, d) = start(mode, "rollout-stuck").await;
    let stuck = d.stuck_after();
    assert!(stuck <= Duration::from_secs(30), "{stuck:?}");
    let t0 = std::time::Instant::now();
    let r = run(&d, dir.path(), "cilium-endpoint-rollout", "prod", None).await;
    let took = t0.elapsed();
    assert!(!r.succeeded);
    assert_eq!(r.outcome, "failed", "{}", r.render());
    let rolled = r.steps.iter().find(|s| s.id == "rolled-out").expect("step");
    assert_eq!(rolled.state, "failed", "{}", r.render());
    let why = rolled.detail.as_deref().unwrap_or_default();
    assert!(
        why.contains("stuck") && why.contains("cilium-g2-n2") && why.contains("k3s-prod-2"),
        "{why}"
    );
    assert!(
        took >= stuck && took < stuck + Duration::from_secs(30),
        "halted after {took:?} (stuck after {stuck:?})"
    );
    let after = r
        .steps
        .iter()
        .find(|s| s.id == "agents-dial-vip")
        .expect("step");
    assert_eq!(after.state, "pending", "nothing after the halt runs");
    // The DaemonSet never passed the unready pod: server 3 still runs the old agent.
    let p3: Vec<Value> = pods(&d, "prod")
        .await
        .into_iter()
        .filter(|p| p["spec"]["nodeName"] == "k3s-prod-3")
        .collect();
    assert_eq!(p3.len(), 1);
    assert_eq!(p3[0]["metadata"]["labels"]["pod-template-generation"], "1");
    // The halted run's journal is kept, resumable (failed, not aborted).
    let list = hk_console::journal::list_runs(&dir.path().join("runs")).expect("runs");
    assert_eq!(list.runs.len(), 1);
}

both_modes!(the_binary_runs_headless_and_exits_by_the_outcome);
/// The binary: `demo --headless --run` prints the summary (JSON here) and exits 0 on a
/// succeeded run; a runbook it does not know is exit 2 naming the ones it has; --headless
/// without --run is refused by the argument parser. With `--apiserver`, nothing of the real
/// servers outlives the command.
async fn the_binary_runs_headless_and_exits_by_the_outcome(mode: Mode) {
    require_ansible();
    let apiserver = (mode == Mode::Real).then(demo_common::apiserver_bin_dir);
    // The binary's real servers count among the test binary's real demos.
    let _slot = match mode {
        Mode::BuiltIn => None,
        Mode::Real => Some(demo_common::real_demo_slot().await),
    };
    let state = tempfile::tempdir().expect("tempdir");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = |args: &[&str]| {
        let mut c = std::process::Command::new(bin);
        c.args(args)
            .env("XDG_STATE_HOME", state.path())
            .stdin(std::process::Stdio::null());
        if let Some(a) = &apiserver {
            c.arg("--apiserver").arg(a);
        }
        let out = c.output().expect("run hk-console");
        let left = demo_common::processes_mentioning(&state.path().display().to_string());
        assert!(
            left.is_empty(),
            "left running after the demo ({mode}): {left:#?}"
        );
        out
    };
    let out = cmd(&[
        "demo",
        "--headless",
        "--run",
        "node-health",
        "--env",
        "prod",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(v["succeeded"], true);
    assert_eq!(v["runbook"], "node-health");
    assert_eq!(v["steps"].as_array().map(Vec::len), Some(8));
    assert!(
        stderr.contains("gate confirm-hosts"),
        "progress on stderr: {stderr}"
    );
    // The demo's directory (and the journal in it) is removed on exit without --dir.
    let left: Vec<_> = std::fs::read_dir(state.path().join("hk-console"))
        .map(|r| r.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.to_string_lossy().starts_with("demo-")),
        "{left:?}"
    );

    let out = cmd(&[
        "demo",
        "--headless",
        "--run",
        "no-such-runbook",
        "--env",
        "prod",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no-such-runbook") && stderr.contains("node-health"),
        "{stderr}"
    );
    let out = cmd(&["demo", "--headless"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--run"));
}

both_modes!(vpn_egress_verify_halts_on_the_eviction_loop_and_passes_when_healthy);
/// The 2026-09-12 eviction loop: both gateways on one PIA server and tunnel address,
/// reconnecting every ~2 min. Each up-window looks green (active, exits through tun0); the
/// runbook's last step counts the connects in the journal and halts the run there.
async fn vpn_egress_verify_halts_on_the_eviction_loop_and_passes_when_healthy(mode: Mode) {
    let (dir, d) = start(mode, "vpn-eviction-loop").await;
    let r = run(&d, dir.path(), "vpn-egress-verify", "prod", None).await;
    assert_eq!(r.outcome, "failed", "{}", r.render());
    let states: Vec<(&str, &str)> = r
        .steps
        .iter()
        .map(|s| (s.id.as_str(), s.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("tunnel-active", "done"),
            ("exit-ip", "done"),
            ("not-reconnecting", "failed")
        ]
    );
    assert!(
        r.failed_output
            .iter()
            .any(|l| l.starts_with("connects in the last 30 min: ")),
        "{}",
        r.render()
    );
    drop(d);
    drop(dir);
    // The same runbook in healthy: one connect an hour ago, nothing since.
    let (dir, d) = start(mode, "healthy").await;
    let r = run(&d, dir.path(), "vpn-egress-verify", "prod", None).await;
    assert_succeeded(&r);
    let out = hk_console::journal::read_output(&r.journal).expect("output");
    assert!(
        out.iter()
            .any(|o| o.line == "connects in the last 30 min: 0"),
        "{out:?}"
    );
    // A journal the SSH user cannot read (here: empty) is not "no reconnects": it fails.
    d.node_state("k3s-prod-3")
        .expect("gateway")
        .lock()
        .expect("lock")
        .journal
        .clear();
    let r = run(&d, dir.path(), "vpn-egress-verify", "prod", None).await;
    assert_eq!(r.outcome, "failed", "{}", r.render());
    assert!(
        r.failed_output
            .iter()
            .any(|l| l.starts_with("cannot read the tunnel unit's journal")),
        "{}",
        r.render()
    );
}

both_modes!(vpn_eviction_fix_waits_for_the_repo_edit_then_applies_and_the_loop_stops);
/// The eviction loop's fix, end to end: the run shows the shared server now, waits at its
/// repo step while the repo still pins prod's gateway to dev's server, goes on only after
/// the operator's edit of the demo repo, applies vpn.egress.gateway.yml to that one gateway
/// (list-hosts, preview, approval), and ends when the live gateways show the loop gone;
/// afterwards the VPN pane's eviction verdict is gone and dev's gateway stopped restarting.
async fn vpn_eviction_fix_waits_for_the_repo_edit_then_applies_and_the_loop_stops(mode: Mode) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let (dir, d) = start(mode, "vpn-eviction-loop").await;
    let inv = d.repo.inventory_path.parent().expect("inventory dir");
    let pin = inv.join("host_vars").join("k3s-prod-3.yml");
    let pinned = std::fs::read_to_string(&pin).expect("the scenario pins prod's gateway");
    assert!(
        pinned.contains("vpn_egress_gateway_pia_remote: \"198.51.100.30 1198\""),
        "{pinned}"
    );
    let waiting = Arc::new(AtomicBool::new(false));
    let edited = Arc::new(AtomicBool::new(false));
    // The operator: once the repo step runs, a few looks later, points prod elsewhere.
    let editor = {
        let (waiting, edited, pin) = (Arc::clone(&waiting), Arc::clone(&edited), pin.clone());
        tokio::spawn(async move {
            while !waiting.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
            // One line changed, as an operator would; the demo's connection keys stay.
            let text = std::fs::read_to_string(&pin).expect("read the repo");
            std::fs::write(
                &pin,
                text.replace("198.51.100.30 1198", "198.51.100.31 1198"),
            )
            .expect("edit the repo");
            edited.store(true, Ordering::SeqCst);
        })
    };
    let dev_gw = d.node_state("k3s-dev-3").expect("dev gateway");
    let set = hk_console::runbook::embedded::load(&[]).expect("shipped runbooks");
    let req = HeadlessRun {
        runbook: "vpn-eviction-fix".into(),
        env: Some("prod".into()),
        host: Some("k3s-prod-3".into()),
        deadline: LONG,
    };
    let mut lines = Vec::new();
    let mut left_repo_step_before_edit = false;
    let r = drive(&d, set, &req, &dir.path().join("runs"), |l| {
        if l.starts_with("step 1/") && l.ends_with(": running") {
            waiting.store(true, Ordering::SeqCst);
        }
        if l.starts_with("step 2/") && !edited.load(Ordering::SeqCst) {
            left_repo_step_before_edit = true;
        }
        lines.push(l.to_string());
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", lines.join("\n")));
    editor.await.expect("editor");
    eprintln!("{}", r.render());
    assert!(!left_repo_step_before_edit, "{}", lines.join("\n"));
    assert_succeeded(&r);
    let ids: Vec<&str> = r.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "remote-changed",
            "list-hosts",
            "apply.check",
            "apply.approve",
            "apply",
            "tunnel-active",
            "exit-ip",
            "loop-gone"
        ]
    );
    let out = hk_console::journal::read_output(&r.journal).expect("output");
    let step = |n: usize| -> Vec<&str> {
        out.iter()
            .filter(|o| o.n == n)
            .map(|o| o.line.as_str())
            .collect()
    };
    let repo_step = step(1);
    let pos = |pred: &dyn Fn(&str) -> bool| {
        repo_step
            .iter()
            .position(|l| pred(l))
            .unwrap_or_else(|| panic!("{repo_step:#?}"))
    };
    // Now: both on one server and tunnel address, the eviction named.
    let now_prod = pos(&|l| {
        l == "now: prod/k3s-prod-3 on server 198.51.100.30:1198, tunnel address 10.7.0.10"
    });
    let now_loop =
        pos(&|l| l.starts_with("now: EVICTION LOOP: k3s-dev-3 (dev) and k3s-prod-3 (prod)"));
    let waited = pos(&|l| {
        l.starts_with("waiting: k3s-prod-3 shares \"198.51.100.30 1198\" with k3s-dev-3 (dev)")
    });
    let held = pos(&|l| {
        l == "k3s-prod-3's remote \"198.51.100.31 1198\" differs from every other gateway's in the repo"
    });
    assert!(
        now_prod < waited && now_loop < waited && waited < held,
        "{repo_step:#?}"
    );
    let last = step(8);
    assert!(
        last.last()
            .is_some_and(|l| l.starts_with("the loop is gone")),
        "{last:#?}"
    );
    // The simulated gateway dials the new server, and the loop has stopped: no eviction
    // verdict, and dev's gateway does not restart any more.
    let prod_gw = d.node_state("k3s-prod-3").expect("prod gateway");
    let server = prod_gw.lock().expect("lock").vpn.as_ref().map(|v| v.server);
    assert_eq!(server, Some("198.51.100.31:1198".parse().expect("addr")));
    let restarts = |s: &std::sync::Arc<std::sync::Mutex<hk_console::sim::node::NodeState>>| {
        s.lock().expect("lock").units["vpn-egress-tunnel.service"].restarts
    };
    let before = (restarts(&dev_gw), restarts(&prod_gw));
    // Two of the loop's periods (120 s / 30).
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!((restarts(&dev_gw), restarts(&prod_gw)), before);
    let g = hk_console::observe::vpn::Gateways::for_repo_with(
        &d.repo,
        d.ssh_options(),
        &hk_console::exec::settings::SshConfig::empty(),
        &hk_console::exec::settings::SshDefaults::from_env(),
    );
    let v = hk_console::observe::vpn::look(&d.repo, &[], &g).await;
    assert!(
        !v.across
            .iter()
            .any(|x| x.rule == hk_console::checks::live::Rule::VpnEvictionLoop),
        "{:#?}",
        v.across
    );
    assert_eq!(v.gateways.len(), 2, "{v:#?}");
    // Each on its own server now: its own exit and tunnel address, as the verdict says
    // (issue 38: both gateways still showed one tunnel and one exit after the fix).
    let (a, b) = (&v.gateways[0], &v.gateways[1]);
    assert!(a.tunnel_exit.is_some() && a.tunnel_addr.is_some(), "{a:#?}");
    assert_ne!(a.tunnel_exit, b.tunnel_exit, "{v:#?}");
    assert_ne!(a.tunnel_addr, b.tunnel_addr, "{v:#?}");
}

fn out_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A public repo's own playbook rehearsed through the console's gates (issue 37's "done"):
/// myles-coleman--k3s-ansible, unedited but for its README's first step and `init --write`
/// (which finds its first server's group by the repo's own use), with the operator's runbook around the
/// repo's `reboot.yml` (gather_facts, `ansible.builtin.reboot`, no serial of its own): the
/// host confirmed, the blast radius read, Ansible's own check-mode preview, the reboot for
/// real on one server's sandbox, and the health gate seeing the node NotReady and back only
/// once its kubelet is heard from again (a Ready from before the reboot does not count).
#[test]
fn a_public_repos_reboot_is_rehearsed_through_the_gates() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("myles-coleman");
    demo_common::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/public-repos/myles-coleman--k3s-ansible"),
        &repo,
    );
    let sh = std::process::Command::new("sh")
        .arg("SETUP.sh")
        .current_dir(&repo)
        .output()
        .expect("SETUP.sh");
    assert!(sh.status.success(), "{}", out_text(&sh));
    let hk = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hk-console"))
            .arg("--repo")
            .arg(&repo)
            .args(args)
            .env("XDG_STATE_HOME", tmp.path().join("state"))
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .env("NO_COLOR", "1")
            .env_remove("HK_REPO")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("hk-console")
    };
    let o = hk(&["init", "--write"]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o));
    // Its first server's group, found by the repo's own use (`groups[...][0]`), not asked.
    let mapping = std::fs::read_to_string(repo.join("hk-console.yaml")).expect("hk-console.yaml");
    assert!(
        mapping.contains("primary_group: \"{{ group_name_master | default('master') }}\""),
        "{mapping}"
    );
    std::fs::create_dir_all(repo.join("runbooks")).expect("runbooks");
    std::fs::write(
        repo.join("runbooks/reboot-one-server.yaml"),
        r#"id: reboot-one-server
title: Reboot one server (the repo's reboot.yml)
environments: [master]
target:
  group: servers
  single: true
steps:
  - id: list-hosts
    kind: list-hosts
    playbook: reboot.yml
  - id: reboot
    kind: ansible
    title: "reboot.yml on {{ host }}"
    disrupts: node
    playbook: reboot.yml
    check_first: true
  - id: node-ready
    kind: kube-wait
    condition: "node-ready {{ host }}"
    timeout_s: 300
"#,
    )
    .expect("runbook");
    let dir = tmp.path().join("demo");
    let dir_s = dir.display().to_string();
    // The repo names its hosts by address: in the demo's copy the second server is
    // 127.0.10.2 (not the VIP holder).
    let o = hk(&[
        "demo",
        "--userland",
        "--headless",
        "--run",
        "reboot-one-server",
        "--env",
        "master",
        "--host",
        "127.0.10.2",
        "--dir",
        &dir_s,
    ]);
    let t = out_text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("run reboot-one-server · master · succeeded"),
        "{t}"
    );
    assert!(t.contains("reboot.yml on 127.0.10.2 [mutates]"), "{t}");
    let runs = dir.join("runs");
    let output = std::fs::read_dir(&runs)
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".output.jsonl"))
        .expect("the run's output");
    let lines: Vec<String> = std::fs::read_to_string(&output)
        .expect("output")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["line"].as_str().map(str::to_string))
        .collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in\n{}", lines.join("\n")))
    };
    // The real modules ran on the node: facts, then the reboot (previewed, then applied).
    assert!(at("TASK [Gathering Facts]") < at("ok: [127.0.10.2]"));
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("changed: [127.0.10.2]"))
            .count()
            >= 2
    );
    // The health gate saw it go and come back, the kubelet heard from after the reboot.
    let not_ready = at("127.0.10.2 NotReady");
    let back = at("its kubelet renewed its Lease at");
    assert!(not_ready < back, "{}", lines.join("\n"));
}
