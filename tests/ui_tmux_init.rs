//! End to end: the real `hk-console` binary in tmux, started on a repo shaped like the
//! operator's (tests/fixtures/operator-repo: no hk-console.yaml). The console shows what
//! `init` would write and its keys instead of exiting with the hint; `q` leaves with exit 2
//! and nothing written; `w` writes exactly the proposal `init` prints and opens the console.
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::tmux_common;
use tmux_common::Tmux;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

fn launch(state: &Path, repo: &Path, tag: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} --repo {repo} --dry-run; echo EXIT=$?; sleep 60",
        st = shell_quote(state),
        bin = shell_quote(Path::new(bin)),
        repo = shell_quote(repo),
    );
    Tmux::launch(
        format!("hk-e2e-init-{tag}-{}", std::process::id()),
        &cmd,
        "140",
        "40",
    )
}

#[test]
fn a_console_on_a_repo_without_its_config_offers_init() {
    let state = tempfile::tempdir().expect("temp dir");
    let repo = state.path().join("repo");
    hk_test_support::fs::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/operator-repo"),
        &repo,
    );
    let config = repo.join("hk-console.yaml");
    assert!(!config.exists());
    let printed = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["init", "--repo"])
        .arg(&repo)
        .output()
        .expect("init runs");
    assert!(printed.status.success(), "{printed:?}");
    let proposal = String::from_utf8_lossy(&printed.stdout).into_owned();

    // Leave: exit 2 with the hint, nothing written.
    let tmux = launch(state.path(), &repo, "q");
    // The whole screen, not its first line: a capture can catch the frame half drawn (seen
    // under load).
    let s = tmux.wait_until(
        std::time::Duration::from_secs(20),
        "the init offer, whole",
        |s| {
            s.contains("No hk-console.yaml in this repo")
                && s.contains("write it and open the console")
                && (s.contains("environments:") || s.contains('#'))
        },
    );
    assert!(s.contains("write it and open the console"), "{s}");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=2"), "{s}");
    assert!(
        s.contains("hk-console init"),
        "the hint is still printed:\n{s}"
    );
    assert!(!config.exists(), "nothing written on q");
    drop(tmux);

    // Write: the file is the proposal, and the console opens on the repo.
    let tmux = launch(state.path(), &repo, "w");
    tmux.wait_for("No hk-console.yaml in this repo");
    tmux.send(&["w"]);
    let s = tmux.wait_until(Duration::from_secs(30), "the console", |s| {
        s.contains("init: wrote") && s.contains("hk-console")
    });
    assert!(!s.contains("EXIT="), "the console is running:\n{s}");
    let written = std::fs::read_to_string(&config).expect("written");
    assert_eq!(written.trim_end(), proposal.trim_end());
    tmux.send(&["q"]);
}
