//! `--no-cluster-lock` is shown on every frame: the real binary's demo console in tmux, at
//! 160x45 and at 80x24, carries the banner line on Home and after a resize; without the
//! flag there is none; a command that starts no run refuses the flag (exit 2).
//! The take-over prompt end to end: a stale lock written into the demo's kube API, a
//! mutating run started in the real console gets the prompt (holder, run, since, last
//! renewal), a wrong environment name is refused, the right one with a reason takes it over
//! and the run goes on; the new run's journal and the Lease's mark for the old run say so.
//! The `run` command's start screen (`hk-console --repo DEMO run RUNBOOK --env prod`) takes
//! the lock when its run starts, as Home's `:run` does; a second such console is refused.
use crate::tmux_common;

use std::path::Path;
use std::process::Command;

use hk_console::ui::panes::banner::NO_LOCK_BANNER;
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

/// The demo's dev cluster, as its kubeconfig under `demo` reaches it (once the demo wrote
/// it).
async fn demo_client(demo: &Path) -> kube::Client {
    demo_env_client(demo, "dev").await
}

/// The demo's cluster of `env`, as its kubeconfig under `demo` reaches it.
async fn demo_env_client(demo: &Path, env: &str) -> kube::Client {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let repo = loop {
        match hk_console::repo::Repo::load(demo) {
            Ok(r) => break r,
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "the demo repo: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    let ov = hk_console::cluster::KubeOverrides::default();
    let t = loop {
        match hk_console::cluster::kube_target(&repo, env, &ov) {
            Ok(t) => break t,
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{env}'s kubeconfig: {e}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    hk_console::cluster::client(&t).await.expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lock_gets_the_take_over_prompt_in_the_real_console() {
    use hk_console::cluster::lock::{self, Claimant};
    let base = tempfile::tempdir().expect("temp dir");
    let demo = base.path().join("demo");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} demo --dir {demo}; echo EXIT=$?; sleep 60",
        st = shell_quote(&base.path().join("state")),
        bin = shell_quote(Path::new(bin)),
        demo = shell_quote(&demo),
    );
    let tmux = Tmux::launch(
        format!("hk-e2e-{}-lock-takeover", std::process::id()),
        &cmd,
        "160",
        "45",
    );
    tmux.wait_for("SIMULATED homelab");
    // Ann's console took dev's lock for 1 s and died.
    let c = demo_client(&demo).await;
    let ann = Claimant {
        holder: "ann@console-a".into(),
        run_id: "20261203T110000000Z-etcd-io-priority-dev".into(),
        runbook: "etcd-io-priority".into(),
        env: "dev".into(),
    };
    drop(lock::acquire(&c, &ann, 1).await.expect("ann takes it"));
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;

    tmux.send(&[":"]);
    tmux.send(&["run packages-baseline dev k3s-dev-2", "Enter"]);
    tmux.wait_for("s starts the run");
    // First sight: this console has not yet watched the record unchanged for its 1 s
    // duration (Ann's clock decides nothing), so it is held, and the console says when
    // it would call it stale (the whole message is in the log, M).
    tmux.send(&["s"]);
    tmux.wait_for("another console holds the run lock of `dev`: ann@console-a");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    tmux.send(&["s"]);
    let s = tmux.wait_for("is STALE");
    println!("{s}");
    for fact in [
        "holder: ann@console-a",
        "run: 20261203T110000000Z-etcd-io-priority-dev (etcd-io-priority)",
        "held since: ",
        "last renewed: ",
    ] {
        assert!(s.contains(fact), "{fact} not in\n{s}");
    }
    let runs = demo.join("runs");
    let journals = || {
        std::fs::read_dir(&runs).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.ends_with(".jsonl") && !n.ends_with(hk_console::journal::OUTPUT_SUFFIX)
                })
                .count()
        })
    };
    assert_eq!(journals(), 0, "nothing journaled before the lock is held");

    // The wrong environment: refused in the prompt; the Lease is still ann's.
    tmux.send(&["prod", "Tab", "ann's laptop died", "Enter"]);
    let s = tmux.wait_for("type the environment's name `dev`");
    assert!(s.contains("is STALE"), "{s}");
    let held_by = |l: Option<k8s_openapi::api::coordination::v1::Lease>| {
        l.and_then(|l| l.spec).and_then(|s| s.holder_identity)
    };
    let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        c.clone(),
        lock::LOCK_NAMESPACE,
    );
    assert_eq!(
        held_by(api.get_opt(lock::LOCK_NAME).await.expect("lease")).as_deref(),
        Some("ann@console-a")
    );
    assert_eq!(journals(), 0);

    // The right one: taken over, and the run goes on.
    tmux.send(&["BTab", "BSpace", "BSpace", "BSpace", "BSpace", "dev"]);
    // Submitted by a click on the prompt's `enter take over` button.
    tmux.click("enter take over");
    tmux.wait_gone("is STALE");
    let me = format!("e2e@{}", lock::host_name());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let journal = loop {
        let found = std::fs::read_dir(&runs).ok().and_then(|d| {
            d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".jsonl") && !n.ends_with(hk_console::journal::OUTPUT_SUFFIX)
            })
        });
        if let Some(j) = found {
            let t = std::fs::read_to_string(&j).unwrap_or_default();
            if t.contains("\"type\":\"step-started\"") {
                break j;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never went on; the screen was:\n{}",
            tmux.screen()
        );
        // Whatever gate comes first (operator present): answer it.
        let s = tmux.screen();
        if s.contains("operator present") || s.contains("enter approve") {
            tmux.send(&["Enter"]);
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let l = api.get_opt(lock::LOCK_NAME).await.expect("lease");
    assert_eq!(held_by(l).as_deref(), Some(me.as_str()));
    let rec = hk_console::record::load_path(&journal).expect("record");
    let notes: Vec<String> = rec
        .decisions
        .iter()
        .filter(|d| d.what == "run-lock")
        .filter_map(|d| d.note.clone())
        .collect();
    println!("{notes:?}");
    assert!(
        notes.first().is_some_and(|n| n.starts_with(
            "stale run lock of ann@console-a (run 20261203T110000000Z-etcd-io-priority-dev), last renewed "
        ) && n.ends_with(&format!("taken over by {me} (typed `dev`): ann's laptop died"))),
        "{notes:?}"
    );
    // What ann's console journals when it finds out: the Lease's mark names her run.
    let note = hk_console::session::lock::lost_note(&c, &ann.run_id, "?".into()).await;
    assert!(
        note.to_string().starts_with(&format!(
            "run lock taken over by {me} (run {}) at ",
            rec.run_id
        )) && note.to_string().ends_with(": ann's laptop died"),
        "{note}"
    );
}

/// `hk-console run etcd-io-priority --env prod` over the demo's repo: `s` takes prod's run
/// lock before the run's first gate, its confirm-hosts (the Lease names this console, the run and the
/// runbook); a second `run` console pressing `s` meanwhile is refused, naming the holder,
/// and journals nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_command_takes_the_lock_and_a_second_run_console_is_refused() {
    use hk_console::cluster::lock;
    let base = tempfile::tempdir().expect("temp dir");
    let demo = base.path().join("demo");
    let bin = env!("CARGO_BIN_EXE_hk-console");
    // The demo serves the clusters; the consoles under test are `run` over its repo.
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} demo --dir {demo}; echo EXIT=$?; sleep 60",
        st = shell_quote(&base.path().join("state")),
        bin = shell_quote(Path::new(bin)),
        demo = shell_quote(&demo),
    );
    let _served = Tmux::launch(
        format!("hk-e2e-{}-lock-runcmd-demo", std::process::id()),
        &cmd,
        "160",
        "45",
    );
    _served.wait_for("SIMULATED homelab");
    let c = demo_env_client(&demo, "prod").await;
    let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        c.clone(),
        lock::LOCK_NAMESPACE,
    );
    let run_console = |name: &str, state: &Path| {
        let cmd = format!(
            "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} --repo {demo} run etcd-io-priority --env prod; echo EXIT=$?; sleep 60",
            st = shell_quote(state),
            bin = shell_quote(Path::new(bin)),
            demo = shell_quote(&demo),
        );
        Tmux::launch(
            format!("hk-e2e-{}-lock-runcmd-{name}", std::process::id()),
            &cmd,
            "160",
            "45",
        )
    };
    let journals = |state: &Path| {
        std::fs::read_dir(state.join("hk-console").join("runs")).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.ends_with(".jsonl") && !n.ends_with(hk_console::journal::OUTPUT_SUFFIX)
                })
                .count()
        })
    };

    let first_state = base.path().join("first");
    let first = run_console("first", &first_state);
    first.wait_for("s starts the run");
    let before = api.get_opt(lock::LOCK_NAME).await.expect("lease");
    assert!(
        before
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
            .is_none(),
        "nobody holds prod's lock before the run starts"
    );
    first.send(&["s"]);
    let s = first.wait_for("number of hosts");
    println!("first console:\n{s}");
    let me = format!("e2e@{}", lock::host_name());
    let l = api
        .get_opt(lock::LOCK_NAME)
        .await
        .expect("lease")
        .expect("the run started from `run` holds prod's lock");
    assert_eq!(
        l.spec.as_ref().and_then(|s| s.holder_identity.clone()),
        Some(me.clone())
    );
    let ann = l.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get(lock::RUNBOOK_ANNOTATION).map(String::as_str),
        Some("etcd-io-priority")
    );
    assert_eq!(journals(&first_state), 1);

    // A second `run` console on prod: refused, naming the holder; nothing journaled.
    let second_state = base.path().join("second");
    let second = run_console("second", &second_state);
    second.wait_for("s starts the run");
    second.send(&["s"]);
    let s = second.wait_for("another console holds the run lock of `prod`");
    println!("second console:\n{s}");
    assert!(s.contains(&me), "{s}");
    assert!(!s.contains("number of hosts"), "no gate: not started\n{s}");
    assert_eq!(
        journals(&second_state),
        0,
        "a refused start journals nothing"
    );
}
