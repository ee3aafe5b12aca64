//! The incident console end to end in tmux on the demo: every environment on the strip with
//! its next step, one key from a verdict to the plan that fixes it, the etcd pane.

use crate::tmux_common;

use std::path::Path;
use std::time::{Duration, Instant};

use tmux_common::Tmux;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

fn demo(scenario: &str, state: &Path, w: &str, h: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} demo --scenario {scenario}; echo EXIT=$?; sleep 60",
        st = shell_quote(state),
        bin = shell_quote(Path::new(bin)),
    );
    Tmux::launch(
        format!("hk-e2e-{}-{scenario}", std::process::id()),
        &cmd,
        w,
        h,
    )
}

/// agents-on-node-ip: the console opens on dev, and within 3 s of the first frame the strip
/// says prod is critical and names cilium-endpoint-rollout, and prod is brought into view
/// (no environment was chosen yet); `x` opens its plan for prod.
#[test]
fn agents_on_node_ip_names_prod_and_its_runbook_one_key_away() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("agents-on-node-ip", state.path(), "160", "45");
    tmux.wait_for("SIMULATED homelab");
    let first = Instant::now();
    let s = tmux.wait_until(
        Duration::from_secs(10),
        "prod critical with its runbook",
        |s| {
            s.lines()
                .any(|l| l.contains("✗ prod") && l.contains("cilium-endpoint-rollout"))
                // The header names the critical environment, not the selected one.
                && s.contains("hk-console ✗ prod critical")
        },
    );
    let took = first.elapsed();
    println!(
        "agents-on-node-ip: prod critical + runbook on the strip {took:?} after the first frame"
    );
    assert!(took < Duration::from_secs(3), "{took:?}\n{s}");
    // Nobody chose an environment yet: the console brings the critical one into view
    // (issue 26), while the SIMULATED notice keeps the status line.
    assert!(s.contains("env prod"), "prod brought into view:\n{s}");
    assert!(s.contains("Live · prod"), "{s}");
    assert!(s.contains("SIMULATED homelab"), "{s}");
    tmux.send(&["x"]);
    // Both at once: a capture can fall mid-frame, with the new header over the old screen
    // (seen once in clean-clone CI run 21).
    tmux.wait_until(
        Duration::from_secs(20),
        "the rollout's plan for prod",
        |s| {
            s.contains("cilium-endpoint-rollout on prod")
                && s.contains("Flux reconciles platform/cilium")
        },
    );
    // Issue 29: started, the approval before the reconcile shows the one value the run
    // exists to change, from what the pods run now to what the overlay renders, first.
    tmux.send(&["s"]);
    let s = approval_with_its_diff(&tmux);
    the_approval_shows_the_endpoint_change(&s);
    tmux.send(&["Escape"]);
    tmux.send(&["q"]);
}

/// The approval before the reconcile, waited for whole: the Output pane shows the preview's
/// lines before the gate opens over it, and a capture can fall between the two.
fn approval_with_its_diff(tmux: &Tmux) -> String {
    tmux.wait_until(Duration::from_secs(60), "the approval with its diff", |s| {
        s.contains("Gate · step 4") && s.contains("k8sServiceHost: 127.0.11.1 -> 127.0.11.100")
    })
}

fn the_approval_shows_the_endpoint_change(s: &str) {
    assert!(
        s.contains("Approve the reconcile of helmrelease/cilium in prod"),
        "{s}"
    );
    // The demo's prod: k3s-prod-1 is 127.0.11.1, the VIP 127.0.11.100.
    assert!(
        s.contains("k8sServiceHost: 127.0.11.1 -> 127.0.11.100"),
        "{s}"
    );
    let object = s
        .find("object: HelmRelease kube-system/cilium")
        .expect("object line");
    let diff = s.find("values that change").expect("diff");
    let rolls = s.find("rolls: every cilium-agent").unwrap_or(usize::MAX);
    assert!(
        object < diff && diff < rolls,
        "the change is read first:\n{s}"
    );
}

/// The same approval on an 80x24 terminal: the change is on the first screen of the gate.
#[test]
fn the_reconcile_approval_shows_the_endpoint_change_at_80x24() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("agents-on-node-ip", state.path(), "80", "24");
    // The strip's line, not the runbook list (which names the runbook from the first frame):
    // `x` takes the worst environment's next step, and until prod is critical that can be
    // dev's (its parity warnings open `:check`).
    tmux.wait_until(
        Duration::from_secs(10),
        "prod critical with its runbook",
        |s| {
            s.lines()
                .any(|l| l.contains("✗ prod") && l.contains("cilium-endpoint-rollout"))
                && s.contains("hk-console ✗ prod critical")
        },
    );
    tmux.send(&["x"]);
    tmux.wait_for("cilium-endpoint-rollout on prod");
    tmux.send(&["s"]);
    let s = approval_with_its_diff(&tmux);
    println!("{s}");
    the_approval_shows_the_endpoint_change(&s);
    tmux.send(&["Escape"]);
    tmux.send(&["q"]);
}

/// etcd-io-starvation: the Live screen's etcd section names the starving server (the
/// scenario's server 1, k3s-prod-1 in the sample) and only that one: its peers read their
/// own pressure (k3s-prod-3 contended at 1.29, k3s-prod-2 quiet).
#[test]
fn etcd_io_starvation_lights_the_etcd_pane() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("etcd-io-starvation", state.path(), "160", "45");
    tmux.wait_for("SIMULATED homelab");
    tmux.send(&[":"]);
    tmux.send(&["env prod", "Enter"]);
    tmux.send(&["l"]);
    tmux.wait_for("Live · prod");
    // The etcd section is below the kube panes: scroll down to it.
    for _ in 0..30 {
        tmux.send(&["j"]);
    }
    // The member table: one row per server, its mark first, its PSI last.
    fn row(s: &str, host: &str) -> String {
        s.lines()
            .map(|l| l.trim_start_matches('│'))
            .find(|l| {
                let mut c = l.chars();
                c.next().is_some_and(|m| "✗✓!".contains(m))
                    && c.as_str().starts_with(&format!(" {host} "))
            })
            .unwrap_or_default()
            .to_string()
    }
    let judged = |s: &str| {
        let (one, two, three) = (
            row(s, "k3s-prod-1"),
            row(s, "k3s-prod-2"),
            row(s, "k3s-prod-3"),
        );
        let starving: Vec<&str> = s.lines().filter(|l| l.contains("(starvation)")).collect();
        one.starts_with('✗')
            && one.contains("11.36/11.36%")
            && two.starts_with('✓')
            && two.contains("0.10/0.10%")
            && three.starts_with('!')
            && three.contains("1.29/1.29%")
            && starving.len() == 1
            && starving[0].contains("✗ k3s-prod-1 IO pressure")
            && s.contains("the disk is contended")
    };
    // Waited for whole: a capture taken mid-redraw can hold half a frame. Keys sent while
    // the screen was still opening can be lost on a loaded machine: scroll again until the
    // whole section is in view (scrolling stops at the end; it scrolled only while the
    // starving line was out of view, and CI once stopped with k3s-prod-3's line below it).
    let s = tmux.wait_until(
        Duration::from_secs(30),
        "the etcd section: k3s-prod-1 starving (11.36), k3s-prod-2 quiet, k3s-prod-3 contended (1.29)",
        |s| {
            let ok = judged(s);
            let whole = s.contains("(starvation)") && s.contains("the disk is contended");
            if !ok && !whole {
                // Past the section (only what follows it in view: the VPN's reconnects,
                // CI once scrolled to the last line while the looks were still coming):
                // back up; else on down.
                let past = s.contains("(re)connect(s)") && row(s, "k3s-prod-1").is_empty();
                for _ in 0..5 {
                    tmux.send(&[if past { "k" } else { "j" }]);
                }
            }
            ok
        },
    );
    assert!(judged(&s), "{s}");
    assert!(s.contains("leader"), "{s}");
    tmux.send(&["q"]);
}

/// rollout-stuck: the reconcile run halts at server 2's unready agent, and the stuck pod's
/// events and log lines are one key away (`x`), read from the simulated cluster, with a
/// describe-like view next to them.
#[test]
fn rollout_stuck_pod_events_and_logs_are_one_key_away() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("rollout-stuck", state.path(), "160", "45");
    tmux.wait_for("SIMULATED homelab");
    tmux.wait_until(
        Duration::from_secs(10),
        "prod's runbook on the strip",
        |s| {
            s.lines()
                .any(|l| l.contains("✗ prod") && l.contains("cilium-endpoint-rollout"))
        },
    );
    tmux.send(&["x"]);
    tmux.wait_for("cilium-endpoint-rollout on prod");
    tmux.send(&["s"]);
    tmux.wait_for("Gate · step 4");
    tmux.send(&["Enter"]);
    // The demo judges a rollout stuck after 15 s of an unready updated pod.
    let s = tmux.wait_until(Duration::from_secs(60), "the halt names its look", |s| {
        s.contains("x look: pod cilium-g2-n2")
    });
    assert!(s.contains("HALTED at step 6"), "{s}");
    let halted = Instant::now();
    tmux.send(&["x"]);
    let s = tmux.wait_until(Duration::from_secs(10), "the pod's events", |s| {
        s.contains("events pod kube-system/cilium-g2-n2") && s.contains("Readiness probe failed")
    });
    println!(
        "rollout-stuck: events of the stuck pod on screen {:?} after the halt was shown",
        halted.elapsed()
    );
    assert!(s.contains("Scheduled"), "{s}");
    tmux.send(&["g"]);
    // Each waited for whole: a capture can fall mid-frame (title drawn, body not yet).
    tmux.wait_until(Duration::from_secs(20), "the pod's log lines", |s| {
        s.contains("logs pod kube-system/cilium-g2-n2") && s.contains("level=info")
    });
    tmux.send(&["d"]);
    tmux.wait_until(Duration::from_secs(20), "the pod described", |s| {
        s.contains("describe pod kube-system/cilium-g2-n2")
            && s.contains("k3s-prod-2")
            && s.contains("Ready            False")
    });
    // Esc closes the look; the halted run is still there, untouched.
    tmux.send(&["Escape"]);
    tmux.wait_gone("describe pod kube-system/cilium-g2-n2");
    assert!(tmux.screen().contains("HALTED at step 6"));
    tmux.send(&["A"]);
    tmux.send(&["done looking", "Enter"]);
    tmux.send(&["q"]);
}

/// healthy, then `:fault prod holder-dies` on the Live screen: the VIP pane warns while the
/// dead holder still holds the lease, and the timeline beside the panes records the node
/// going NotReady and, once the lease expires, the lease moving to the next server.
#[test]
fn holder_dies_the_vip_warns_and_the_timeline_records_the_move() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("healthy", state.path(), "160", "45");
    tmux.wait_for("SIMULATED homelab");
    tmux.send(&[":"]);
    tmux.send(&["env prod", "Enter"]);
    tmux.send(&["l"]);
    tmux.wait_for("Live · prod");
    tmux.wait_for("nothing changed yet this session");
    tmux.wait_for("holder k3s-prod-1 is Ready");
    tmux.send(&[":"]);
    tmux.send(&["fault prod holder-dies", "Enter"]);
    let fault = Instant::now();
    let s = tmux.wait_until(Duration::from_secs(10), "the VIP pane warns", |s| {
        s.contains("! holder k3s-prod-1 is NotReady")
    });
    let warned = fault.elapsed();
    println!("holder-dies: VIP pane warned {warned:?} after the fault");
    // At once, not after the lease goes stale: the console once showed ✓ for ~5 s here.
    assert!(warned < Duration::from_secs(3), "{warned:?}\n{s}");
    assert!(s.contains("! VIP lease"), "{s}");
    // The timeline is the right-hand column (48 wide at 160); its events wrap there.
    let trail = |s: &str| {
        let rows: Vec<String> = s
            .lines()
            .map(|l| l.chars().skip(112).collect::<String>().replace('│', " "))
            .collect();
        rows.join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Both on one capture: a capture taken while the console redraws can hold half a frame
    // (the move drawn, the older events not yet), so the node going down is waited for
    // with the move rather than asserted on the first capture that shows the move.
    let s = tmux.wait_until(
        Duration::from_secs(60),
        "the lease move and the node going down on the timeline",
        |s| {
            let t = trail(s);
            t.contains("lease moved k3s-prod-1 -> k3s-prod-2")
                && t.contains("node k3s-prod-1 Ready -> NotReady")
        },
    );
    println!(
        "holder-dies: the timeline recorded the move {:?} after the fault",
        fault.elapsed()
    );
    assert!(
        trail(&s).contains("lease moved k3s-prod-1 -> k3s-prod-2")
            && trail(&s).contains("node k3s-prod-1 Ready -> NotReady"),
        "{s}"
    );
    tmux.send(&["q"]);
}

/// healthy, then `:fault prod holder-dies` twice (the first holder, then the server the
/// lease moved to): two of prod's three etcd members are down. The strip turns prod's etcd
/// ✗ and the Live screen's etcd section names the quorum lost and both members, read
/// through prod's API endpoint (`/readyz/etcd` and the nodes), within one etcd look (15 s).
#[test]
fn two_holder_dies_turn_etcd_red_with_quorum_named() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("healthy", state.path(), "160", "45");
    tmux.wait_for("SIMULATED homelab");
    tmux.send(&[":"]);
    tmux.send(&["env prod", "Enter"]);
    tmux.send(&["l"]);
    tmux.wait_for("Live · prod");
    tmux.wait_for("holder k3s-prod-1 is Ready");
    // The etcd section is below the kube panes: scroll down to it.
    for _ in 0..30 {
        tmux.send(&["j"]);
    }
    tmux.wait_for("quorum: 3 of 3 members up");
    tmux.send(&[":"]);
    tmux.send(&["fault prod holder-dies", "Enter"]);
    tmux.wait_for("k3s-prod-1 (lease holder) died");
    // The panes' column (the timeline is the right-hand 48 at 160), wrapped lines joined.
    let panes = |s: &str| {
        s.lines()
            .map(|l| l.chars().take(112).collect::<String>().replace('│', " "))
            .collect::<Vec<_>>()
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Issue 38: the dead holder's member does not answer and is never the leader; the
    // two left elected k3s-prod-2 (within one etcd look, 15 s).
    let s = tmux.wait_until(
        Duration::from_secs(30),
        "k3s-prod-2 leading etcd and k3s-prod-1 not answering",
        |s| {
            let p = panes(s);
            p.contains("k3s-prod-2 leads (2 of 3 members seen)")
                && p.contains("k3s-prod-1 not answering since")
        },
    );
    assert!(!panes(&s).contains("k3s-prod-1 leads"), "{s}");
    tmux.wait_until(
        Duration::from_secs(40),
        "the lease moved to k3s-prod-2",
        |s| s.contains("held by k3s-prod-2"),
    );
    tmux.send(&[":"]);
    tmux.send(&["fault prod holder-dies", "Enter"]);
    tmux.wait_for("k3s-prod-2 (lease holder) died");
    let second = Instant::now();
    let etcd_red = |s: &str| {
        s.lines()
            .any(|l| l.contains("prod") && l.contains("etcd ✗"))
    };
    let named = "2 of 3 members down (k3s-prod-1 NotReady, k3s-prod-2 NotReady): no quorum";
    let s = tmux.wait_until(
        Duration::from_secs(20),
        "the strip's etcd ✗ and the quorum lost named",
        |s| etcd_red(s) && panes(s).contains(named),
    );
    println!(
        "two holder-dies: etcd ✗ with quorum named {:?} after the second fault",
        second.elapsed()
    );
    assert!(!s.contains("leads; every member's disk keeps up"), "{s}");
    tmux.send(&["q"]);
}

/// `demo --dir D` frozen (SIGSTOP) while a second console (`hk-console --repo D`) watches
/// it: within 15 s the second console's strip says its kube panes are stale since the last
/// answer, and shows no ✓ on them; the frozen server's panes are never vouched for.
#[test]
fn a_frozen_api_server_turns_the_strip_stale_within_15_s() {
    let state = tempfile::tempdir().expect("temp dir");
    let dir = state.path().join("lab");
    let bin = shell_quote(Path::new(env!("CARGO_BIN_EXE_hk-console")));
    let st = shell_quote(state.path());
    let demo = Tmux::launch(
        format!("hk-e2e-{}-frozen-demo", std::process::id()),
        &format!(
            "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} demo --dir {}; echo EXIT=$?; sleep 60",
            shell_quote(&dir)
        ),
        "160",
        "45",
    );
    demo.wait_for("SIMULATED homelab");
    let console = Tmux::launch(
        format!("hk-e2e-{}-frozen-console", std::process::id()),
        &format!(
            "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} --repo {}; echo EXIT=$?; sleep 60",
            shell_quote(&dir)
        ),
        "160",
        "45",
    );
    let vip_line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with(" VIP lease "))
            .unwrap_or_default()
            .to_string()
    };
    console.wait_until(
        Duration::from_secs(30),
        "the VIP lease ✓ on the second console",
        |s| vip_line(s).starts_with(" VIP lease  ✓"),
    );
    // The SSH-polled panes too (issue 38: they stayed ✓ on a frozen homelab): seen ✓ first,
    // so their turning is the freeze's doing.
    console.wait_until(
        Duration::from_secs(40),
        "VPN ✓ and etcd ✓ on the second console's strip",
        |s| s.contains("VPN ✓") && s.contains("etcd ✓"),
    );
    // The demo process: the tmux pane's shell's child (`env` execs hk-console).
    let shell = demo.run(&["display", "-p", "-t", "e2e", "#{pane_pid}"]);
    let out = std::process::Command::new("pgrep")
        .args(["-P", shell.trim()])
        .output()
        .expect("pgrep");
    let pid = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no demo process under the pane's shell {shell}"))
        .trim()
        .to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill");
        assert!(ok.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    let frozen = Instant::now();
    let stale = |s: &str| {
        let l = vip_line(s);
        l.contains("stale since") && !l.contains('✓')
    };
    let s = console.wait_until(Duration::from_secs(20), "the VIP lease stale since", stale);
    let took = frozen.elapsed();
    println!("frozen API server: the second console's strip stale {took:?} after SIGSTOP");
    assert!(took < Duration::from_secs(15), "{took:?}\n{s}");
    for pane in [" Agent env ", " Nodes "] {
        let l = s.lines().find(|l| l.starts_with(pane)).unwrap_or_default();
        assert!(!l.contains('✓'), "{pane}: {l}\n{s}");
    }
    // Nothing ✓ from a source that stopped answering: the VPN gateways and the etcd
    // members (polled over SSH every 15 s, a look bounded by 25 s) are `?` within one
    // refresh budget (40 s) of their last answer, which came at most 15 s before the freeze.
    let s = console.wait_until(
        Duration::from_secs(60),
        "VPN and etcd no longer ✓ on the strip",
        |s| {
            !s.contains("VPN ✓")
                && !s.contains("etcd ✓")
                && s.contains("etcd ?")
                && s.contains("VPN ?")
        },
    );
    let took = frozen.elapsed();
    signal("-CONT");
    println!("frozen homelab: VPN and etcd `?` {took:?} after SIGSTOP");
    assert!(took < Duration::from_secs(45), "{took:?}\n{s}");
    console.send(&["q"]);
    demo.send(&["q"]);
}
