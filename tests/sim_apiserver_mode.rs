//! `demo --apiserver DIR`: the simulated homelab's controllers on a REAL kube-apiserver and
//! etcd (tests/apiserver/build.sh's) instead of the built-in API server.
//! - A halted rollout driven headless through the real binary ends the same way in both
//!   modes (same steps, same states, exit 1), and no etcd or kube-apiserver outlives the
//!   demo (the other runbooks run in both modes in sim_headless.rs and guard_headless.rs).
//! - The real kubectl against the demo in that mode: nodes Ready, the kube-vip Lease held
//!   and renewed, a deleted agent pod replaced by the DaemonSet controller (a kube watch),
//!   `rollout restart` rolled to the end, the Flux CRDs served, `kubectl logs` failing
//!   loudly (no kubelet is simulated), and a live fault (holder-dies) moving the Lease.
//! - A missing or broken DIR is a named error with exit code 2.
//!
//! Needs etcd, kube-apiserver and kubectl in $HK_APISERVER_BIN_DIR (default
//! target/apiserver-bin) and ansible-playbook: missing = FAIL with the hint, never a skip.

use crate::demo_common;

use demo_common::until;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

fn bin_dir() -> PathBuf {
    demo_common::apiserver_bin_dir()
}

fn require_ansible() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
}

fn processes_mentioning(needle: &str) -> Vec<String> {
    demo_common::processes_mentioning(needle)
}

/// `hk-console demo --headless --json ...` in a fresh directory, with `--apiserver` or not:
/// the report, the exit code, and how long it took.
fn headless(
    scenario: &str,
    runbook: &str,
    env: &str,
    host: Option<&str>,
    apiserver: Option<&Path>,
) -> (Value, Option<i32>, Duration) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    cmd.args([
        "demo",
        "--scenario",
        scenario,
        "--headless",
        "--run",
        runbook,
        "--env",
        env,
        "--json",
        "--timeout",
        "300",
    ])
    .arg("--dir")
    .arg(&dir)
    .env("XDG_STATE_HOME", tmp.path().join("state"));
    if let Some(h) = host {
        cmd.args(["--host", h]);
    }
    if let Some(a) = apiserver {
        cmd.arg("--apiserver").arg(a);
    }
    let t0 = Instant::now();
    let out = cmd.output().expect("run hk-console");
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{runbook} {env} (apiserver {apiserver:?}): not a JSON report: {e}\n{stdout}\n{stderr}"
        )
    });
    // Nothing of the real servers outlives the command: no process, no files.
    let left = processes_mentioning(&dir.display().to_string());
    assert!(left.is_empty(), "left running after the demo: {left:#?}");
    assert!(
        !dir.join(".apiserver").exists(),
        "{} left behind",
        dir.join(".apiserver").display()
    );
    (report, out.status.code(), took)
}

fn steps(report: &Value) -> Vec<(u64, String, String)> {
    report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["n"].as_u64().expect("n"),
                s["kind"].as_str().expect("kind").to_string(),
                s["state"].as_str().expect("state").to_string(),
            )
        })
        .collect()
}

/// A halted run through the binary, built-in vs real API server: the same outcome, step for
/// step (the stuck rollout halts at the same unready pod on both), exit 1 on both, nothing
/// left of the real servers. The succeeding runbooks this once also compared
/// (packages-baseline on dev, the agents-on-node-ip rollout) run in both modes, with their
/// full assertions, in tests/sim_headless.rs, which also runs the binary with `--apiserver`.
#[test]
fn a_stuck_rollout_halts_the_same_on_the_real_apiserver_as_on_the_builtin_one() {
    let bin = bin_dir();
    require_ansible();
    let (scenario, runbook, env) = ("rollout-stuck", "cilium-endpoint-rollout", "prod");
    let (builtin, code_b, took_b) = headless(scenario, runbook, env, None, None);
    let (real, code_r, took_r) = headless(scenario, runbook, env, None, Some(&bin));
    eprintln!("{scenario} {runbook} {env}: built-in {took_b:?}, --apiserver {took_r:?}");
    assert_eq!(builtin["succeeded"], false, "built-in: {builtin:#}");
    assert_eq!(real["succeeded"], false, "--apiserver: {real:#}");
    assert_eq!((code_b, code_r), (Some(1), Some(1)));
    assert_eq!(steps(&builtin), steps(&real), "{scenario} {runbook} {env}");
    assert!(
        steps(&real).iter().any(|(_, _, s)| s == "failed"),
        "{real:#}"
    );
}

/// `demo --once` on the real servers: every pane of both environments filled from them,
/// nothing critical, nothing left running.
#[test]
fn one_look_at_every_pane_reads_the_real_apiservers() {
    let bin = bin_dir();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["demo", "--once", "--json", "--apiserver"])
        .arg(&bin)
        .arg("--dir")
        .arg(&dir)
        .env("XDG_STATE_HOME", tmp.path().join("state"))
        .output()
        .expect("run hk-console");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let snap: Value = serde_json::from_str(&stdout).expect("snapshot json");
    let text = snap.to_string();
    for needle in ["plndr-cp-lock", "cilium-g1-n3", "k3s-prod-3", "k3s-dev-3"] {
        assert!(text.contains(needle), "{needle} in {stdout}");
    }
    let left = processes_mentioning(&dir.display().to_string());
    assert!(left.is_empty(), "left running: {left:#?}");
}

fn kubectl(kc: &Path, args: &[&str]) -> (String, String, Option<i32>) {
    demo_common::kubectl(kc, args)
}

/// The real kubectl against the demo's real API servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_the_simulated_cluster_on_the_real_apiserver() {
    let bin = bin_dir();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let t0 = Instant::now();
    let d = hk_console::sim::demo::start_with("healthy", &dir, None, Some(&bin))
        .await
        .unwrap_or_else(|e| panic!("demo --apiserver: {e}"));
    eprintln!("demo --apiserver started in {:?}", t0.elapsed());
    assert!(d.kubes.is_empty(), "no built-in server in this mode");
    let real = d.real.as_ref().expect("real API servers");
    let pids: Vec<u32> = real
        .servers
        .values()
        .map(|s| s.pid())
        .chain(real.cluster.etcd_pids())
        .collect();
    assert_eq!(
        pids.len(),
        8,
        "two kube-apiservers and an etcd member per server (three each)"
    );
    let kc = demo_common::kubeconfig(&dir, "prod");
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let kc = kc2;
        // The server is the real one: its /version is kube-apiserver's.
        let (out, err, code) = kubectl(&kc, &["version", "-o", "json"]);
        assert_eq!(code, Some(0), "{err}");
        let v: Value = serde_json::from_str(&out).expect("version json");
        assert_eq!(v["serverVersion"]["gitVersion"], "v1.34.4", "{out}");

        let (out, err, code) = kubectl(&kc, &["get", "nodes", "--no-headers"]);
        assert_eq!(code, Some(0), "{err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        for (l, n) in lines.iter().zip(["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]) {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!((cols[0], cols[1]), (n, "Ready"), "{out}");
        }

        // kube-vip holds its Lease and renews it.
        let lease = |kc: &Path| {
            let (out, err, code) = kubectl(
                kc,
                &[
                    "get",
                    "lease",
                    "-n",
                    "kube-system",
                    "plndr-cp-lock",
                    "-o",
                    "jsonpath={.spec.holderIdentity} {.spec.renewTime}",
                ],
            );
            assert_eq!(code, Some(0), "{err}");
            let (h, t) = out.split_once(' ').expect("holder and renewTime");
            (h.to_string(), t.to_string())
        };
        let (holder, first) = lease(&kc);
        assert_eq!(holder, "k3s-prod-1");
        let (_, later) = until(15, "the lease renewed", || {
            let l = lease(&kc);
            (l.1 != first).then_some(l)
        });
        assert!(later > first, "{later} after {first}");
        let (out, err, code) = kubectl(&kc, &["get", "lease", "-n", "kube-system"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(
            out.contains("plndr-cp-lock") && out.contains("k3s-prod-1"),
            "{out}"
        );
        // The kubelets' node Leases too.
        let (out, err, code) = kubectl(&kc, &["get", "lease", "-n", "kube-node-lease"]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.lines().count(), 4, "{out}");

        // The CRDs the built-in server serves are installed; the release is there.
        let (out, err, code) = kubectl(&kc, &["get", "helmreleases", "-n", "kube-system"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("cilium"), "{out}");

        // A deleted agent pod goes after its grace period; the DaemonSet controller (which
        // learns of it through a kube watch) makes another on that node.
        let (out, err, code) =
            kubectl(&kc, &["delete", "pod", "-n", "kube-system", "cilium-g1-n2"]);
        assert_eq!(code, Some(0), "{out}{err}");
        until(30, "a new agent pod Running on k3s-prod-2", || {
            let (out, _, _) = kubectl(
                &kc,
                &[
                    "get",
                    "pods",
                    "-n",
                    "kube-system",
                    "--field-selector",
                    "spec.nodeName=k3s-prod-2",
                    "-o",
                    "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}",
                ],
            );
            out.lines()
                .any(|l| l.starts_with("cilium-g1-n2-1 Running"))
                .then_some(())
        });
        let (out, err, code) = kubectl(&kc, &["get", "events", "-n", "kube-system"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("SuccessfulCreate"), "{out}");

        // `rollout restart` (a client's change of the template, seen through a watch) rolls
        // a new generation, node by node, to the end `rollout status` waits for.
        let (out, err, code) = kubectl(
            &kc,
            &[
                "rollout",
                "restart",
                "-n",
                "kube-system",
                "daemonset/cilium",
            ],
        );
        assert_eq!(code, Some(0), "{out}{err}");
        let (out, err, code) = kubectl(
            &kc,
            &[
                "rollout",
                "status",
                "-n",
                "kube-system",
                "daemonset/cilium",
                "--timeout=60s",
            ],
        );
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(out.contains("successfully rolled out"), "{out}");
        let (out, err, code) = kubectl(
            &kc,
            &[
                "get",
                "pods",
                "-n",
                "kube-system",
                "-l",
                "pod-template-generation=2",
                "--no-headers",
            ],
        );
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(out.lines().count(), 3, "every node on generation 2: {out}");

        // Logs live with a kubelet, which the simulation does not run: a loud failure.
        let (out, err, code) = kubectl(&kc, &["logs", "-n", "kube-system", "cilium-g2-n1"]);
        assert_ne!(code, Some(0), "kubectl logs must fail: {out}");
        assert!(out.trim().is_empty(), "no lines on a failure: {out}");
        assert!(err.contains("10250"), "the kubelet's port named: {err}");
    })
    .await
    .expect("kubectl checks");

    // A fault reaches the real server too: the holder's node goes NotReady, and once its
    // Lease has run out the next server holds it.
    let said = d
        .fault_injector()
        .inject("prod", "holder-dies")
        .expect("holder-dies");
    assert!(said.contains("k3s-prod-1"), "{said}");
    let kc2 = kc.clone();
    tokio::task::spawn_blocking(move || {
        let kc = kc2;
        until(10, "k3s-prod-1 NotReady", || {
            let (out, _, _) = kubectl(&kc, &["get", "node", "k3s-prod-1", "--no-headers"]);
            out.contains("NotReady").then_some(())
        });
        let holder = until(40, "the lease moved to k3s-prod-2", || {
            let (out, _, _) = kubectl(
                &kc,
                &[
                    "get",
                    "lease",
                    "-n",
                    "kube-system",
                    "plndr-cp-lock",
                    "-o",
                    "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}",
                ],
            );
            out.starts_with("k3s-prod-2").then_some(out)
        });
        assert_eq!(holder, "k3s-prod-2 1");
    })
    .await
    .expect("fault checks");
    drop(d);
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z ")),
            "pid {pid} still runs after the demo was dropped"
        );
    }
    assert!(!dir.join(".apiserver").exists());
}

/// A directory without the binaries, and a kube-apiserver that cannot start: named errors,
/// exit 2, nothing left running.
#[test]
fn a_broken_apiserver_dir_is_a_named_error() {
    let real = bin_dir();
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = |bins: &Path, dir: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
            .args(["demo", "--once", "--apiserver"])
            .arg(bins)
            .arg("--dir")
            .arg(tmp.path().join(dir))
            .env("XDG_STATE_HOME", tmp.path().join("state"))
            .output()
            .expect("run hk-console");
        (
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code(),
        )
    };
    let (err, code) = run(&tmp.path().join("nothing-here"), "d1");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("not a directory") && err.contains("etcd"),
        "{err}"
    );

    let bins = tmp.path().join("bins");
    std::fs::create_dir_all(&bins).expect("bins");
    std::os::unix::fs::symlink(real.join("etcd"), bins.join("etcd")).expect("link etcd");
    let (err, code) = run(&bins, "d2");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("kube-apiserver is missing"), "{err}");

    // An apiserver that exits at once: the wait names it, and the etcd is stopped.
    std::fs::write(
        bins.join("kube-apiserver"),
        "#!/bin/sh\necho refusing >&2\nexit 3\n",
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        bins.join("kube-apiserver"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let (err, code) = run(&bins, "d3");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("did not become ready") && err.contains("exited") && err.contains("refusing"),
        "{err}"
    );
    let left = processes_mentioning(&tmp.path().display().to_string());
    assert!(left.is_empty(), "left running: {left:#?}");
}

/// hk-console SIGKILLed while its real servers run: their watchdogs stop them and remove
/// their files (PKI and tokens included).
#[test]
fn a_sigkilled_demo_leaves_no_server_behind() {
    let bin = bin_dir();
    require_ansible();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args([
            "demo",
            "--scenario",
            "rollout-stuck",
            "--headless",
            "--run",
            "cilium-endpoint-rollout",
            "--env",
            "prod",
            "--apiserver",
        ])
        .arg(&bin)
        .arg("--dir")
        .arg(&dir)
        .env("XDG_STATE_HOME", tmp.path().join("state"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn hk-console");
    let needle = dir.display().to_string();
    until(120, "both kube-apiservers running", || {
        let n = processes_mentioning(&needle)
            .iter()
            .filter(|p| p.contains("kube-apiserver") && !p.contains("hk-console-watchdog"))
            .count();
        (n == 2).then_some(())
    });
    child.kill().expect("SIGKILL hk-console");
    let _ = child.wait();
    until(20, "no process of the demo left", || {
        processes_mentioning(&needle).is_empty().then_some(())
    });
    until(10, "the servers' files removed", || {
        (!dir.join(".apiserver").exists()).then_some(())
    });
}
