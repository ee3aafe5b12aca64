//! Supervised children cannot outlive the console: the journaled identity (pid + kernel
//! start time) tells a live process from a gone or reused one; a descendant that leaves the
//! process group (setsid, as ansible's workers do) is still stopped through the marker it
//! inherits; `stop_all` (the console's way out on SIGHUP/SIGTERM/panic) runs the ladder on
//! every registered child and says how each ended.
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use hk_effects::exec::process::{
    self, liveness, run_supervised, ChildId, Liveness, ProcessSpec, SupervisorConfig,
};
use hk_effects::exec::Redactor;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// `stop_all` stops every child of this test process: the tests that start children take
/// turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn liveness_tells_the_same_process_from_a_gone_or_reused_pid() {
    let _turn = SERIAL.blocking_lock();
    let mut child = Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let pid = child.id();
    let start = process::start_time(pid).expect("start time of a running process");
    let me = ChildId {
        pid,
        start_time: start,
        program: "sleep".into(),
        marker: String::new(),
    };
    assert_eq!(liveness(&me), Liveness::Alive);
    let reused = ChildId {
        start_time: start + 1,
        ..me.clone()
    };
    assert!(
        matches!(liveness(&reused), Liveness::Gone(ref why) if why.contains("another process")),
        "{:?}",
        liveness(&reused)
    );
    child.kill().expect("kill");
    child.wait().expect("reap");
    assert!(matches!(liveness(&me), Liveness::Gone(_)));
}

/// A process tree like ansible's: the leader ignores SIGINT, and a descendant moves to a
/// session of its own. Cancelling reaches both: the descendant by its marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descendant_that_left_the_group_is_stopped_by_its_marker() {
    let _turn = SERIAL.lock().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (lines_tx, mut lines) = mpsc::unbounded_channel();
    let spec = ProcessSpec {
        program: "/bin/sh".into(),
        args: strings(&[
            "-c",
            "trap '' INT; setsid sleep 300 & echo \"escaped $!\"; wait",
        ]),
        spawned: Some(tx),
        ..ProcessSpec::default()
    };
    let cancel = CancellationToken::new();
    let cfg = SupervisorConfig {
        int_grace: Duration::from_millis(300),
        term_grace: Duration::from_millis(300),
        ..SupervisorConfig::default()
    };
    let c2 = cancel.clone();
    let run = tokio::spawn(async move {
        run_supervised(&spec, &Redactor::none(), Some(&lines_tx), &c2, &cfg).await
    });
    let id = rx.recv().await.expect("spawned is told the child");
    assert!(id.start_time > 0 && !id.marker.is_empty(), "{id:?}");
    assert!(process::live_children().contains(&id));
    let escaped: u32 = loop {
        let l = lines.recv().await.expect("line");
        if let Some(p) = l.text.strip_prefix("escaped ") {
            break p.parse().expect("pid");
        }
    };
    // It really leaves the group (setsid runs just after the shell forked it).
    let pgrp_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    };
    let t0 = Instant::now();
    while pgrp_of(escaped) == Some(id.pid) {
        assert!(t0.elapsed() < Duration::from_secs(3), "setsid never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(pgrp_of(escaped).is_some(), "the escaped sleep runs");
    assert!(process::marked(&id.marker).contains(&escaped));
    cancel.cancel();
    let out = run.await.expect("join").expect("run");
    let sigs: Vec<Signal> = out.signals_sent.iter().map(|s| s.signal).collect();
    assert_eq!(sigs[..2], [Signal::SIGINT, Signal::SIGTERM]);
    let t0 = Instant::now();
    while !process::marked(&id.marker).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "the escaped sleep outlived its supervisor"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!process::live_children().contains(&id), "deregistered");
}

/// The console's way out: `stop_all` from a plain thread, with the runtime still running
/// the supervisor; the report names the rungs it took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_all_runs_the_ladder_on_every_registered_child() {
    let _turn = SERIAL.lock().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let spec = ProcessSpec {
        program: "/bin/sh".into(),
        args: strings(&["-c", "trap '' INT; setsid sleep 300 & wait"]),
        spawned: Some(tx),
        ..ProcessSpec::default()
    };
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let run = tokio::spawn(async move {
        run_supervised(
            &spec,
            &Redactor::none(),
            None,
            &c2,
            &SupervisorConfig::default(),
        )
        .await
    });
    let id = rx.recv().await.expect("spawned");
    // Let the setsid'd sleep start.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reports = tokio::task::spawn_blocking(|| {
        process::stop_all(Duration::from_millis(500), Duration::from_millis(500))
    })
    .await
    .expect("join");
    let mine = reports
        .iter()
        .find(|r| r.child.pid == id.pid)
        .expect("the child is in the report");
    assert!(mine.ended, "{}", mine.describe());
    assert_eq!(mine.signals, vec![Signal::SIGINT, Signal::SIGTERM]);
    assert!(
        mine.describe().contains("sent SIGINT, SIGTERM: ended"),
        "{}",
        mine.describe()
    );
    assert!(process::marked(&id.marker).is_empty());
    let out = run.await.expect("join").expect("run");
    assert!(!out.success());
}
