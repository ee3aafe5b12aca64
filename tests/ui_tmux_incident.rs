//! The incident console end to end in tmux on the demo: every environment on the strip with
//! its next step, one key from a verdict to the plan that fixes it, the etcd pane.

mod tmux_common;

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

/// agents-on-node-ip: dev is selected, yet within 3 s of the first frame the strip says
/// prod is critical and names cilium-endpoint-rollout; `x` opens its plan for prod.
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
        },
    );
    let took = first.elapsed();
    println!(
        "agents-on-node-ip: prod critical + runbook on the strip {took:?} after the first frame"
    );
    assert!(took < Duration::from_secs(3), "{took:?}\n{s}");
    assert!(s.contains("env dev"), "dev stays selected:\n{s}");
    tmux.send(&["x"]);
    let s = tmux.wait_for("cilium-endpoint-rollout on prod");
    assert!(s.contains("Flux reconciles platform/cilium"), "{s}");
    tmux.send(&["q"]);
}

/// etcd-io-starvation: the Live screen's etcd section names the starving servers.
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
    let s = tmux.wait_until(Duration::from_secs(30), "the etcd section judged", |s| {
        s.contains("11.36") && s.contains("starvation")
    });
    assert!(s.contains("k3s-prod-1"), "{s}");
    assert!(s.contains("leader"), "{s}");
    tmux.send(&["q"]);
}
