//! The console end to end in tmux on `demo --apiserver DIR`: the real hk-console binary
//! whose simulated controllers write to a REAL kube-apiserver and etcd. Home is healthy,
//! Live's panes for prod fill from the real server (VIP holder, the agents' dials, etcd),
//! a runbook reaches its first gate, and a live fault (holder-dies) moves the VIP Lease,
//! which the screen reports.
//!
//! Needs etcd and kube-apiserver in $HK_APISERVER_BIN_DIR (default target/apiserver-bin)
//! and tmux: missing = FAIL with the hint, never a skip.

use crate::tmux_common;

use std::path::Path;
use std::time::{Duration, Instant};

use tmux_common::{apiserver_bin_dir, processes_mentioning, Tmux};

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// The strip line of `env` on the Home/Live screens (` ✓ prod   VIP ✓ agents ✓ ...`).
fn strip_line(s: &str, env: &str) -> Option<String> {
    s.lines()
        .find(|l| {
            let t = l.trim_start();
            t.chars().next().is_some_and(|m| "✓!✗".contains(m))
                && t.chars()
                    .skip(1)
                    .collect::<String>()
                    .trim_start()
                    .starts_with(env)
                && l.contains("VIP ")
        })
        .map(str::to_string)
}

/// Every pane of `env` on the strip judged and none critical (the parity column compares
/// the repo with the sample inventory and is no health verdict).
fn strip_healthy(s: &str, env: &str) -> bool {
    strip_line(s, env).is_some_and(|l| {
        ["VIP ✓", "agents ✓", "VPN ✓", "nodes ✓", "etcd ✓"]
            .iter()
            .all(|p| l.contains(p))
            && !l.contains('✗')
    })
}

#[test]
fn console_on_the_real_apiserver_fills_live_reaches_a_gate_and_reports_the_vip_move() {
    let bin = apiserver_bin_dir(&["etcd", "kube-apiserver"]);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let state = tmp.path().join("state");
    let exe = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {exe} demo --apiserver {bin} --dir {dir}; echo EXIT=$?; sleep 120",
        st = shell_quote(&state),
        exe = shell_quote(Path::new(exe)),
        bin = shell_quote(&bin),
        dir = shell_quote(&dir),
    );
    let t0 = Instant::now();
    let tmux = Tmux::launch(
        format!("hk-apiserver-tmux-{}", std::process::id()),
        &cmd,
        "160",
        "45",
    );
    // Two kube-apiservers and an etcd start first: minutes on a cold, shared machine.
    let s = tmux.wait_until(Duration::from_secs(240), "the console's first frame", |s| {
        s.contains("SIMULATED homelab") || s.contains("EXIT=")
    });
    assert!(!s.contains("EXIT="), "the demo exited:\n{s}");
    let first_frame = t0.elapsed();
    println!("demo --apiserver: first frame {first_frame:?} after launch");

    // Home: both environments healthy, nothing critical.
    let s = tmux.wait_until(Duration::from_secs(60), "Home: dev and prod healthy", |s| {
        strip_healthy(s, "prod") && strip_healthy(s, "dev")
    });
    assert!(!s.contains("critical"), "{s}");
    assert!(s.contains("Environments") && s.contains("Runbooks"), "{s}");
    println!(
        "demo --apiserver: Home healthy {:?} after launch",
        t0.elapsed()
    );

    // Live · prod: the VIP pane names its holder, every agent dials the VIP.
    tmux.send(&[":"]);
    tmux.send(&["env prod", "Enter"]);
    tmux.send(&["l"]);
    let s = tmux.wait_until(
        Duration::from_secs(30),
        "Live · prod with its VIP holder and the agents on the VIP",
        |s| {
            s.contains("Live · prod")
                && s.contains("holder       k3s-prod-1 (server k3s-prod-1)")
                && s.contains("✓ holder k3s-prod-1 is Ready")
                && s.contains("✓ 3 of 3 agents dial the VIP 127.0.11.100")
        },
    );
    for pod in ["cilium-g1-n1", "cilium-g1-n2", "cilium-g1-n3"] {
        assert!(
            s.lines()
                .any(|l| l.contains(pod) && l.contains("✓ the VIP") && l.contains("Running")),
            "{pod} on the VIP and Running:\n{s}"
        );
    }
    // The etcd section is below the kube panes.
    for _ in 0..30 {
        tmux.send(&["j"]);
    }
    let s = tmux.wait_until(
        Duration::from_secs(30),
        "Live · prod's etcd section",
        |s| {
            // The leader is whichever member the real etcd elected (each server's etcd
            // endpoint is its real member in this mode).
            ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]
                .iter()
                .any(|h| s.contains(&format!("{h} leads (3 of 3 members seen)")))
                && ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"].iter().all(|h| {
                    s.lines()
                        .any(|l| l.contains(&format!("✓ {h} ")) && l.contains("IO pressure"))
                })
        },
    );
    assert!(
        s.contains("✓ k3s-prod-1 Ready") && s.contains("✓ k3s-prod-3 Ready"),
        "the nodes pane above etcd:\n{s}"
    );

    // A runbook from Home: click its row, open it in prod, start it: its first gate.
    tmux.send(&["Escape"]);
    tmux.wait_for("Runbooks");
    tmux.click("cilium-endpoint-rollout");
    tmux.send(&["Enter"]);
    // Waited for whole: a capture taken mid-redraw can hold the title and half of Home.
    let s = tmux.wait_until(Duration::from_secs(15), "the run view, drawn", |s| {
        s.contains("cilium-endpoint-rollout · prod · not started")
            && s.contains("4 r gate Approve the reconcile")
    });
    assert!(s.contains("4 r gate Approve the reconcile"), "{s}");
    tmux.send(&["s"]);
    let s = tmux.wait_until(Duration::from_secs(60), "the run at its first gate", |s| {
        s.contains("Gate · step 4") && s.contains("cilium-endpoint-rollout · prod · at step 4")
    });
    assert!(
        s.contains("✓  2 r kube-wait The kube-vip lease is held"),
        "the steps before the gate passed on the real server:\n{s}"
    );
    // The gate stays open (unanswered) while the fault plays out.
    tmux.send(&["Escape"]);
    tmux.wait_for("gate waiting: enter answers it");

    // holder-dies: the holder's node goes NotReady and, once its Lease runs out, the next
    // server takes it; the console says both.
    tmux.send(&[":"]);
    tmux.send(&["fault prod holder-dies", "Enter"]);
    let fault = Instant::now();
    let s = tmux.wait_until(
        Duration::from_secs(15),
        "prod critical: k3s-prod-1 down",
        |s| {
            strip_line(s, "prod").is_some_and(|l| l.contains("nodes ✗"))
                && s.contains("not Ready: k3s-prod-1")
        },
    );
    println!(
        "holder-dies: node down on the strip {:?} after the fault",
        fault.elapsed()
    );
    assert!(s.contains("k3s-prod-1 (lease holder) died"), "{s}");
    let s = tmux.wait_until(
        Duration::from_secs(60),
        "the Live bar: the lease held by k3s-prod-2",
        |s| s.contains("VIP lease  ✓ held by k3s-prod-2"),
    );
    println!(
        "holder-dies: the VIP moved on screen {:?} after the fault",
        fault.elapsed()
    );
    assert!(s.contains("Nodes      ✗ 2/3 Ready"), "{s}");
    // Live · prod: its timeline records the move, its VIP pane the new holder.
    tmux.send(&["l"]);
    let s = tmux.wait_until(
        Duration::from_secs(15),
        "Live · prod: the new holder and the move on the timeline",
        |s| {
            let trail: String = s
                .lines()
                .map(|l| l.chars().skip(112).collect::<String>().replace('│', " "))
                .collect::<Vec<_>>()
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            s.contains("holder       k3s-prod-2 (server k3s-prod-2)")
                && s.contains("transitions  1")
                && trail.contains("lease moved k3s-prod-1 -> k3s-prod-2")
        },
    );
    assert!(s.contains("hk-console ✗ prod critical"), "{s}");
    println!("demo --apiserver console test: {:?} in all", t0.elapsed());

    drop(tmux);
    // The console gone (tmux killed it), its servers follow: nothing of the demo remains.
    let needle = dir.display().to_string();
    let t = Instant::now();
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "left running after the console: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
