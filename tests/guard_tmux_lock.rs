//! `--no-cluster-lock` is shown on every frame: the real binary's demo console in tmux, at
//! 160x45 and at 80x24, carries the banner line on Home and after a resize; without the
//! flag there is none; a command that starts no run refuses the flag (exit 2).
mod tmux_common;

use std::path::Path;
use std::process::Command;

use hk_console::session::lock::NO_LOCK_BANNER;
use tmux_common::Tmux;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn demo(args: &str, state: &Path, w: &str, h: &str, tag: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} {args}; echo EXIT=$?; sleep 60",
        st = shell_quote(state),
        bin = shell_quote(Path::new(bin)),
    );
    Tmux::launch(
        format!("hk-e2e-{}-lock-{tag}", std::process::id()),
        &cmd,
        w,
        h,
    )
}

#[test]
fn the_no_cluster_lock_banner_is_on_every_frame_at_160x45_and_80x24() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo(
        "demo --no-cluster-lock",
        state.path(),
        "160",
        "45",
        "banner",
    );
    let s = tmux.wait_for("Recent runs");
    println!("160x45:\n{s}");
    assert!(s.contains(NO_LOCK_BANNER), "{s}");
    // The banner is the top line, above the title.
    assert!(
        s.lines().next().is_some_and(|l| l.contains(NO_LOCK_BANNER)),
        "{s}"
    );
    tmux.run(&["resize-window", "-t", "e2e", "-x", "80", "-y", "24"]);
    let s = tmux.wait_until(
        std::time::Duration::from_secs(10),
        "the banner at 80x24",
        |s| s.lines().count() <= 24 && s.contains(NO_LOCK_BANNER),
    );
    println!("80x24:\n{s}");
    assert!(
        s.lines().next().is_some_and(|l| l.contains(NO_LOCK_BANNER)),
        "{s}"
    );
    // Another screen: the Live screen keeps it.
    tmux.send(&["l"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s = tmux.screen();
    assert!(s.contains(NO_LOCK_BANNER), "{s}");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");

    // Without the flag: no banner.
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = demo("demo", state.path(), "160", "45", "plain");
    let s = tmux.wait_for("Recent runs");
    assert!(!s.contains("NO CLUSTER RUN LOCK"), "{s}");
    tmux.send(&["q"]);
    tmux.wait_for("EXIT=");
}

#[test]
fn a_command_that_starts_no_run_refuses_the_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["--no-cluster-lock", "envs"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--no-cluster-lock cannot apply: this command starts no run"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["--no-cluster-lock", "observe", "--once"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("observe mode never takes the run lock"),
        "{err}"
    );
}
