//! End to end: the real `hk-console` binary in tmux (send-keys, capture-pane). Opens a
//! runbook, starts it, answers its typed-confirm gate, lets the real ansible-playbook list
//! the hosts for the confirm-hosts gate, quits through the "run is active" question, and
//! checks the journal and the exit code. Needs tmux and ansible-playbook; fails, not skips,
//! without them.
use std::path::Path;
use std::time::{Duration, Instant};

use crate::tmux_common;
use tmux_common::Tmux;

/// A copy of the bundled sample under `dir`: on the bundled sample itself the console only
/// rehearses (its addresses are documentation values), so tests that exercise the real
/// executors point --repo at a copy. Nothing here gets past a local `--list-hosts`.
fn sample_copy(dir: &Path) -> std::path::PathBuf {
    let to = dir.join("repo");
    hk_test_support::fs::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory"),
        &to,
    );
    to
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

#[test]
fn open_a_runbook_answer_its_gate_and_quit() {
    let state = tempfile::tempdir().expect("temp dir");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} --repo {repo} --no-cluster-lock run memattr-survey --env prod; echo EXIT=$?; sleep 60",
        st = shell_quote(state.path()),
        bin = shell_quote(Path::new(bin)),
        repo = shell_quote(&sample_copy(state.path())),
    );
    // The copy has no cluster to take the run lock on, and every mutating run takes it:
    // this walk of the gates runs without it (`--no-cluster-lock`, its banner on screen).
    let tmux = Tmux::launch(format!("hk-e2e-{}", std::process::id()), &cmd, "120", "36");

    tmux.wait_for("memattr-survey · prod · not started");
    // The status line is drawn last: once it shows, the frame is complete.
    let s = tmux.wait_for("s starts the run");
    assert!(s.contains("VIP lease"), "the live strip is on screen:\n{s}");
    // The copy has no kubeconfig: nothing is watched, and the console says where the
    // panes can be seen instead.
    assert!(
        s.contains("no cluster of this repo is set up on this machine"),
        "{s}"
    );
    tmux.send(&["s"]);
    tmux.wait_for("typed confirm");
    tmux.send(&["prod"]);
    tmux.send(&["Enter"]);
    // The authorise gate: an approval, with a note.
    tmux.wait_for("Authorise `memattr_survey_reboots_authorised`");
    tmux.send(&["survey window"]);
    tmux.send(&["Enter"]);
    // Step 3 runs the real `ansible-playbook --list-hosts` (HK_ANSIBLE_BIN_DIR, PATH or
    // /opt/hk-venv/bin) and stops at its confirm-hosts gate; step 4 would reboot, so the
    // test quits here.
    // The gate's title is drawn before its body: wait for the body itself (a capture taken
    // mid-redraw showed the title without it).
    tmux.wait_for("confirm hosts");
    tmux.wait_for("The step listed (1):");
    tmux.wait_for("number of hosts");
    tmux.send(&["Escape"]);
    tmux.wait_gone("number of hosts");
    tmux.send(&["q"]);
    tmux.wait_for("Quit anyway?");
    tmux.send(&["y"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=1"), "a run left unfinished exits 1:\n{s}");
    assert!(!s.contains("OBSERVE"), "{s}");

    // The gate answer and the refusal are in the journal, by the operator's login.
    let runs = state.path().join("hk-console").join("runs");
    let (outputs, journal): (Vec<_>, Vec<_>) = std::fs::read_dir(&runs)
        .expect("runs dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .partition(|p| {
            p.to_string_lossy()
                .ends_with(hk_console::journal::OUTPUT_SUFFIX)
        });
    assert_eq!(journal.len(), 1, "{journal:?}");
    // The real list-hosts output is kept beside the journal, under step 3.
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let kept = hk_console::journal::read_output(&journal[0]).expect("output log");
    assert!(
        kept.iter()
            .any(|o| o.n == 3 && o.line.contains("hosts (1)")),
        "{kept:?}"
    );
    let text = std::fs::read_to_string(&journal[0]).expect("journal");
    assert!(
        text.contains(r#""type":"typed-text","n":1,"by":"e2e","text":"prod""#),
        "{text}"
    );
    assert!(
        text.contains(r#""type":"gate-answered","n":2,"answer":{"kind":"approved","by":"e2e","note":"survey window"}"#),
        "{text}"
    );
    assert!(
        text.contains(r#""type":"host-set-observed","n":3"#),
        "the host set ansible printed is journaled:\n{text}"
    );
}

/// Start the binary in a fresh tmux server; returns the server (killed on drop).
fn start(args: &str, state: &Path, w: &str, h: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} --repo {repo} {args}; echo EXIT=$?; sleep 60",
        st = shell_quote(state),
        bin = shell_quote(Path::new(bin)),
        repo = shell_quote(&sample_copy(state)),
    );
    Tmux::launch(
        format!("hk-e2e-{}-{}", std::process::id(), args.replace(' ', "_")),
        &cmd,
        w,
        h,
    )
}

#[test]
fn no_command_on_a_terminal_opens_the_console_home() {
    let state = tempfile::tempdir().expect("temp dir");
    // A bad theme in the user dir: the console starts anyway and says which file and key.
    let themes = state.path().join("hk-console").join("themes");
    std::fs::create_dir_all(&themes).expect("themes dir");
    std::fs::write(themes.join("mine.yaml"), "ok: nope\n").expect("theme");
    let tmux = start("--theme mine", state.path(), "120", "34");
    // Waiting for the status line means the whole first frame is on screen.
    let s = tmux.wait_for("mine.yaml:1:5: key `ok`");
    assert!(
        s.contains("Environments") && s.contains("Recent runs"),
        "{s}"
    );
    assert!(!s.contains("OBSERVE"), "{s}");
    tmux.send(&["?"]);
    tmux.wait_for("Help · Home");
    // Wait for Esc to land: an Esc followed at once by q reads as alt-q.
    tmux.send(&["Escape"]);
    tmux.wait_gone("Help · Home");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");
}

#[test]
fn observe_mode_shows_its_banner_and_quits_cleanly() {
    let state = tempfile::tempdir().expect("temp dir");
    let tmux = start("observe", state.path(), "100", "30");
    tmux.wait_for("OBSERVE MODE");
    tmux.wait_for("Runbooks");
    // Shrink to a tiny terminal and back: it redraws (the strip folds to one line), no panic.
    tmux.run(&["resize-window", "-t", "e2e", "-x", "60", "-y", "15"]);
    tmux.wait_for("VIP · –  Agents · –  VPN · –  Nodes · –");
    tmux.run(&["resize-window", "-t", "e2e", "-x", "100", "-y", "30"]);
    tmux.wait_for(" VIP lease  · no data yet");
    tmux.wait_for("OBSERVE MODE");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");
}

/// On the bundled sample the console only rehearses: it says so, and a step with work is
/// refused for want of an executor, so nothing ever dials the sample's documentation
/// addresses.
#[test]
fn the_bundled_sample_only_rehearses() {
    let state = tempfile::tempdir().expect("temp dir");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env -u HK_REPO XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} run memattr-survey --env prod; echo EXIT=$?; sleep 60",
        st = shell_quote(state.path()),
        bin = shell_quote(Path::new(bin)),
    );
    let tmux = Tmux::launch(
        format!("hk-e2e-sample-{}", std::process::id()),
        &cmd,
        "140",
        "36",
    );
    tmux.wait_for("rehearsal only");
    tmux.send(&["s"]);
    tmux.wait_for("typed confirm");
    tmux.send(&["prod"]);
    tmux.send(&["Enter"]);
    tmux.wait_for("Authorise `memattr_survey_reboots_authorised`");
    tmux.send(&["Enter"]);
    tmux.wait_for("no executor for list-hosts");
    tmux.send(&["q"]);
    tmux.wait_for("Quit anyway?");
    tmux.send(&["y"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=1"), "a halted run exits 1:\n{s}");
}

/// `hk-console demo` in a terminal: the simulated homelab's VIP lease, agent env and VPN
/// egress panes show data soon after the first frame (the issue's bar is 3 s; the figure is
/// printed and asserted under 10 s so a loaded CI machine does not flake it).
#[test]
fn the_demo_shows_the_live_panes_with_data() {
    let state = tempfile::tempdir().expect("temp dir");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} demo --scenario agents-on-node-ip; echo EXIT=$?; sleep 60",
        st = shell_quote(state.path()),
        bin = shell_quote(Path::new(bin)),
    );
    let launched = Instant::now();
    let tmux = Tmux::launch(
        format!("hk-e2e-{}-demo", std::process::id()),
        &cmd,
        "160",
        "45",
    );
    tmux.wait_for("SIMULATED homelab");
    let first = Instant::now();
    // Process start (the simulation's servers, keys and repo, then the console) to the
    // first frame on screen; printed for docs/perf.md, bounded loosely against a hang.
    let to_first = first.duration_since(launched);
    println!("demo: first frame {to_first:?} after launch");
    assert!(to_first < Duration::from_secs(20), "{to_first:?}");
    let s = tmux.wait_until(Duration::from_secs(10), "three panes with data", |s| {
        ["VIP lease", "Agent env", "VPN egress"].iter().all(|p| {
            s.lines()
                .any(|l| l.trim_start().starts_with(p) && !l.contains("no data yet"))
        })
    });
    println!(
        "demo: three panes with data {:?} after the first frame",
        first.elapsed()
    );
    // The demo's SIMULATED notice stays on the status line while the panes fill in.
    assert!(s.contains("SIMULATED homelab"), "{s}");
    // The dev environment is healthy; prod (the incident) turns critical, and with no
    // environment chosen yet the console brings it into view; `:env prod` chooses it, and
    // the Live screen names the single-node dependency.
    tmux.wait_for("env prod");
    tmux.send(&[":"]);
    tmux.send(&["env prod", "Enter"]);
    tmux.wait_for("agents dial node IPs");
    // `:fault` kills prod's lease holder in the simulation; the VIP pane shows the lease
    // move once it expires (the scenario's 15 s).
    tmux.wait_for("held by k3s-prod-1");
    tmux.send(&[":"]);
    tmux.send(&["fault prod holder-dies", "Enter"]);
    tmux.wait_for("k3s-prod-1 (lease holder) died");
    let killed = Instant::now();
    let s = tmux.wait_until(Duration::from_secs(30), "held by k3s-prod-2", |s| {
        s.contains("held by k3s-prod-2")
    });
    println!(
        "demo: :fault prod holder-dies, the VIP pane shows the new holder {:?} later",
        killed.elapsed()
    );
    assert!(!s.contains("held by k3s-prod-1"), "{s}");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");
}

/// Observe mode's promise (nothing here can change the platform) holds against a
/// `--runbooks` file whose ssh step declares `mutates: false` for `systemctl stop k3s`:
/// the start is refused, naming the file and line of that declaration, and no run is
/// journaled; the run view says the runbook replaced the shipped one.
#[test]
fn observe_refuses_a_user_runbook_step_declared_read_only() {
    let state = tempfile::tempdir().expect("temp dir");
    let rb = state.path().join("rb");
    std::fs::create_dir_all(&rb).expect("dir");
    std::fs::write(
        rb.join("node-health.yaml"),
        "id: node-health\ntitle: Node health, my way\nread_only: true\nenvironments: [dev, prod]\ntarget:\n  group: servers\nsteps:\n  - id: look\n    kind: ssh\n    title: \"Look at {{ host }}\"\n    command: systemctl stop k3s\n    mutates: false\n",
    )
    .expect("runbook");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} --repo {repo} --runbooks {rb} observe; echo EXIT=$?; sleep 60",
        st = shell_quote(state.path()),
        bin = shell_quote(Path::new(bin)),
        repo = shell_quote(&sample_copy(state.path())),
        rb = shell_quote(&rb),
    );
    let tmux = Tmux::launch(
        format!("hk-e2e-{}-observe-user-rb", std::process::id()),
        &cmd,
        "220",
        "40",
    );
    tmux.wait_for("OBSERVE MODE");
    tmux.send(&[":"]);
    tmux.send(&["run node-health dev", "Enter"]);
    let s = tmux.wait_for("node-health · dev · not started");
    assert!(
        s.contains("overrides the shipped runbook"),
        "the run view says the runbook replaced the shipped one:\n{s}"
    );
    tmux.send(&["s"]);
    let s = tmux.wait_for("not verified");
    assert!(
        s.contains(&format!(
            "declared read-only by {}:12, not verified",
            rb.join("node-health.yaml").display()
        )),
        "{s}"
    );
    assert!(s.contains("node-health · dev · not started"), "{s}");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");
    // Nothing started, so nothing is journaled.
    let runs = state.path().join("hk-console").join("runs");
    let journals = std::fs::read_dir(&runs)
        .map(|d| d.filter_map(Result::ok).count())
        .unwrap_or(0);
    assert_eq!(journals, 0, "no run is journaled");
}

/// Issue 26 in the real console: a runbook whose prod vault no configured password opens
/// shows that blocker (with what to do) in the run view before any gate, and `s` starts
/// nothing.
#[test]
fn a_blocked_runbook_shows_its_blockers_before_any_gate() {
    let state = tempfile::tempdir().expect("temp dir");
    let repo = sample_copy(state.path());
    let ansible = repo.join("infra/ansible");
    std::fs::copy(
        ansible.join("inventory/group_vars/vpn_egress_gateway/vault.yml"),
        ansible.join("inventory/group_vars/k3s_prod/vault.yml"),
    )
    .expect("vault");
    let cfg = std::fs::read_to_string(ansible.join("ansible.cfg")).expect("cfg");
    std::fs::write(
        ansible.join("ansible.cfg"),
        cfg.replace("vault_password_file", "# vault_password_file"),
    )
    .expect("cfg");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} TERM=xterm-256color {bin} --repo {repo} --no-cluster-lock; echo EXIT=$?; sleep 60",
        st = shell_quote(state.path()),
        bin = shell_quote(Path::new(bin)),
        repo = shell_quote(&repo),
    );
    let tmux = Tmux::launch(
        format!("hk-e2e-blocked-{}", std::process::id()),
        &cmd,
        "120",
        "36",
    );
    tmux.wait_for("Recent runs");
    tmux.send(&[":"]);
    tmux.send(&["run etcd-io-priority prod", "Enter"]);
    // Every line of the blocked view at once, not its title alone: a capture taken while
    // the frame was half drawn (the title there, the fix line not yet) failed once under
    // load.
    let wants = [
        "etcd-io-priority · prod · blocked",
        "cannot start: 1 blocker before step 1",
        "1. infra/ansible/inventory/group_vars/k3s_prod/vault.yml [vault-locked]",
        "no vault password is configured",
        "fix: name the password file in `vault_password_file`",
    ];
    let s = tmux.wait_until(
        std::time::Duration::from_secs(20),
        "the blocked view whole",
        |s| wants.iter().all(|w| s.contains(w)),
    );
    assert!(!s.contains("not started"), "no run opened:\n{s}");
    tmux.send(&["s"]);
    let s = tmux.wait_for("fix the blockers listed");
    assert!(!s.contains("running"), "{s}");
    tmux.send(&["q"]);
    let s = tmux.wait_for("EXIT=");
    assert!(s.contains("EXIT=0"), "{s}");
}
