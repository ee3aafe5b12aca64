//! End to end, the real `hk-console` binary in tmux on the demo: an ansible apply (a
//! playbook that sleeps on a simulated node) is running when the console gets SIGHUP,
//! SIGTERM or SIGKILL. Within 5 s no ansible-playbook, ssh or lifeline process of it is
//! left, and the journal says what happened. A console restarted on that journal shows the
//! step interrupted with the probe's look at the live state and refuses a one-key re-run;
//! a process that ignores SIGINT and is still alive blocks the decision until it is stopped.
//! Ctrl-C and `y` during the apply end it cancelled, and `r` then opens the same decision
//! (probe, typed re-run from the preview), never a one-key retry.
//! Needs tmux and ansible-playbook; fails, not skips, without them.
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::tmux_common;
use tmux_common::Tmux;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// A runbook for one dev node: preview, approval, an apply that sleeps on the node, and a
/// read-back the resume probes with.
fn write_runbook(dir: &Path) -> PathBuf {
    let rb = dir.join("runbooks");
    std::fs::create_dir_all(&rb).expect("runbooks dir");
    let playbook = dir.join("sleepy.yml");
    std::fs::write(
        &playbook,
        "- name: a change that takes its time\n  hosts: \"{{ k3s_hosts }}\"\n  gather_facts: false\n  tasks:\n    - name: sleep on the node\n      raw: sleep 300\n",
    )
    .expect("playbook");
    std::fs::write(
        rb.join("sleepy-apply.yaml"),
        format!(
            "id: sleepy-apply\ntitle: A slow change (test)\nenvironments: [dev]\ntarget:\n  group: servers\n  single: true\nsteps:\n  - id: apply\n    kind: ansible\n    title: \"Sleepy apply on {{{{ host }}}}\"\n    playbook: {}\n    extra_vars:\n      k3s_hosts: \"{{{{ env.servers }}}}\"\n    check_first: true\n  - id: read-back\n    kind: ssh\n    title: \"Read back on {{{{ host }}}}\"\n    mutates: false\n    timeout_s: 20\n    command: echo probe-ok\n    expect:\n      stdout_contains: probe-ok\n",
            playbook.display()
        ),
    )
    .expect("runbook");
    rb
}

/// Every process whose command line mentions `marker`, as (pid, argv).
fn processes_with(marker: &str) -> Vec<(u32, Vec<String>)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
    {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        // A zombie has an empty command line: it is gone for every purpose here.
        let argv: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.iter().any(|a| a.contains(marker)) {
            found.push((pid, argv));
        }
    }
    found
}

/// The console's children on this demo: ansible-playbook (and its workers, which leave
/// its process group), ssh, and the lifeline watcher.
fn children_of(demo: &Path) -> Vec<(u32, Vec<String>)> {
    // The playbook sits beside the demo dir: the test's base dir names both.
    let base = demo.parent().unwrap_or(demo);
    let marker = base.display().to_string();
    processes_with(&marker)
        .into_iter()
        .filter(|(_, argv)| {
            let base = |a: &String| a.rsplit('/').next().unwrap_or("").to_string();
            let first_two: Vec<String> = argv.iter().take(2).map(base).collect();
            first_two
                .iter()
                .any(|b| b == "ansible-playbook" || b == "ssh")
                || argv.iter().any(|a| a == "hk-console-lifeline")
        })
        .collect()
}

fn console_pid(demo: &Path) -> u32 {
    let marker = demo.display().to_string();
    processes_with(&marker)
        .into_iter()
        .find(|(_, argv)| {
            argv.first().is_some_and(|a| a.ends_with("/hk-console"))
                && argv.iter().any(|a| a == "demo")
        })
        .map(|(p, _)| p)
        .expect("the console runs")
}

fn journal_of(runs: &Path) -> PathBuf {
    std::fs::read_dir(runs)
        .expect("runs dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && !p
                    .to_string_lossy()
                    .ends_with(hk_console::journal::OUTPUT_SUFFIX)
        })
        .expect("a journal")
}

/// Start the demo console, open the runbook, answer its gates and wait until the apply's
/// ansible-playbook and its ssh to the node run. Returns the tmux session and the demo dir.
fn start_apply(base: &Path, name: &str) -> (Tmux, PathBuf) {
    let rb = write_runbook(base);
    let demo = base.join("demo");
    let tmux = launch_demo(base, &rb, &demo, name);
    tmux.send(&[":"]);
    tmux.send(&["run sleepy-apply dev k3s-dev-1", "Enter"]);
    tmux.wait_for("s starts the run");
    tmux.send(&["s"]);
    answer_until_the_apply_runs(&tmux, &demo);
    (tmux, demo)
}

/// `hk-console --runbooks RB demo --dir DEMO` in a fresh tmux server, once its SIMULATED
/// banner shows.
fn launch_demo(base: &Path, rb: &Path, demo: &Path, name: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_hk-console");
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} --runbooks {rb} demo --dir {demo}; echo EXIT=$?; sleep 60",
        st = shell_quote(&base.join("state")),
        bin = shell_quote(Path::new(bin)),
        rb = shell_quote(rb),
        demo = shell_quote(demo),
    );
    let tmux = Tmux::launch(
        format!("hk-sig-{}-{name}", std::process::id()),
        &cmd,
        "160",
        "45",
    );
    tmux.wait_for("SIMULATED homelab");
    tmux
}

fn answer_until_the_apply_runs(tmux: &Tmux, demo: &Path) {
    // Whatever gates the plan has before the apply (operator present, the diff approval,
    // typed confirmations): answer each, until the apply's process is journaled.
    let runs = demo.join("runs");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = tmux.screen();
        let journaled = std::fs::read_dir(&runs).is_ok_and(|mut d| d.next().is_some())
            && std::fs::read_to_string(journal_of(&runs)).is_ok_and(|t| {
                t.lines()
                    .any(|l| l.contains("process-started") && is_apply_line(&t, l))
            });
        if journaled
            && children_of(demo)
                .iter()
                .any(|(_, a)| a.first().is_some_and(|x| x.ends_with("ssh")))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the apply never ran; the screen was:\n{s}"
        );
        if s.contains("type the environment") || s.contains("typed confirm") {
            tmux.send(&["dev", "Enter"]);
        } else if s.contains("number of hosts") {
            tmux.send(&["1", "Enter"]);
        } else if s.contains("enter approve")
            || s.contains("Approve")
            || s.contains("operator present")
        {
            tmux.send(&["Enter"]);
        }
        std::thread::sleep(Duration::from_millis(700));
    }
}

/// Whether the process-started line `l` is for the apply (a step whose attempt ran the
/// playbook without --check): the plan in the header names its number.
fn is_apply_line(journal: &str, l: &str) -> bool {
    let header: serde_json::Value =
        serde_json::from_str(journal.lines().next().unwrap_or("{}")).unwrap_or_default();
    let rec: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
    let n = rec["input"]["n"].as_u64();
    header["plan"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["n"].as_u64() == n && s["mutates"] == true)
}

fn wait_no_children(demo: &Path, signal: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        let left = children_of(demo);
        if left.is_empty() {
            return t0.elapsed();
        }
        if t0.elapsed() >= Duration::from_secs(5) {
            let journal =
                std::fs::read_to_string(journal_of(&demo.join("runs"))).unwrap_or_default();
            let tail: Vec<&str> = journal.lines().rev().take(6).collect();
            panic!(
                "{signal}: still alive after 5 s: {left:?}\njournal (last lines first):\n{}",
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
}

fn hup_or_term(sig: &str) {
    let base = tempfile::tempdir().expect("tmp");
    let (tmux, demo) = start_apply(base.path(), &sig.to_lowercase());
    let before = children_of(&demo);
    assert!(
        before
            .iter()
            .any(|(_, a)| a.iter().any(|x| x.ends_with("ansible-playbook"))),
        "{before:#?}"
    );
    kill(console_pid(&demo), sig);
    let took = wait_no_children(&demo, sig);
    println!("{sig}: no child of the console left {took:?} after the signal");
    // The console journals how each process ended right after the ladder.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(journal_of(&demo.join("runs"))).expect("journal");
        if text.contains(r#""type":"process-ended""#) || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(tmux);
    let cause = if sig == "HUP" {
        "console lost its terminal (SIGHUP)"
    } else {
        "console was told to stop (SIGTERM)"
    };
    assert!(
        text.contains(&format!(r#""type":"abandoned","reason":"{cause}""#)),
        "{text}"
    );
    assert!(
        text.contains(r#""type":"process-ended""#) && text.contains("sent SIGINT"),
        "how the apply's process was stopped is journaled:\n{text}"
    );
}

#[test]
fn sighup_during_an_apply_leaves_no_child_and_journals_it() {
    hup_or_term("HUP");
}

#[test]
fn sigterm_during_an_apply_leaves_no_child_and_journals_it() {
    hup_or_term("TERM");
}

/// The terminal goes away under the console (its tmux server killed: the pane's pty closes)
/// while an apply runs: the console journals the run abandoned, stops the apply and exits.
/// Once, a console this suite left behind (ui_tmux_incident's rollout-stuck) was found
/// spinning in crossterm's reader on its dead terminal, inside the event loop's poll: 12
/// minutes at 80% CPU, deaf to SIGHUP and SIGTERM until SIGKILL. This test did not make the
/// old loop spin in 7 tries (the SIGHUP won the race each time); it holds the ending itself.
#[test]
fn a_terminal_that_goes_away_ends_the_console_and_its_apply() {
    let base = tempfile::tempdir().expect("tmp");
    let (tmux, demo) = start_apply(base.path(), "gone");
    let pid = console_pid(&demo);
    drop(tmux);
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|st| st.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
            .is_some_and(|zombie| !zombie)
    };
    let t0 = Instant::now();
    while alive(pid) {
        if t0.elapsed() > Duration::from_secs(15) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the console outlived its terminal by 15 s (then SIGKILLed): {stat}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "the console exited {:?} after its terminal went",
        t0.elapsed()
    );
    wait_no_children(&demo, "terminal gone");
    let text = std::fs::read_to_string(journal_of(&demo.join("runs"))).expect("journal");
    // Whichever the console meets first: the hang-up (its SIGHUP, or its input ending), or
    // a frame it cannot write to the gone terminal (EIO). Either is journaled as the cause.
    assert!(
        text.contains(r#""type":"abandoned","reason":"console lost its terminal"#)
            || text.contains(r#""type":"abandoned","reason":"the console's terminal failed"#),
        "{text}"
    );
    assert!(
        text.contains(r#""type":"process-ended""#),
        "how the apply's process was stopped is journaled:\n{text}"
    );
}

/// The same without a SIGHUP: the console on a terminal that is not its controlling one
/// (its own session, standard input and output on a pty's slave), whose master is then
/// closed. Nothing signals it; it must see the hang-up and exit. (The old loop passed this
/// too: there the read fails rather than returning end-of-file. It holds the ending.)
#[test]
fn a_terminal_that_hangs_up_without_a_signal_ends_the_console() {
    let base = tempfile::tempdir().expect("tmp");
    let script = r#"
import fcntl, os, select, struct, subprocess, sys, termios, time
bin, demo, state = sys.argv[1:4]
m, s = os.openpty()
fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 160, 0, 0))
env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=state, TERM="xterm-256color")
p = subprocess.Popen([bin, "demo", "--dir", demo], stdin=s, stdout=s, stderr=s,
                     start_new_session=True, env=env)
os.close(s)
seen, t0 = b"", time.time()
while b"SIMULATED homelab" not in seen:
    if time.time() - t0 > 60:
        print("never drew its banner"); p.kill(); sys.exit(3)
    r, _, _ = select.select([m], [], [], 0.5)
    if r:
        try:
            seen = (seen + os.read(m, 65536))[-200000:]
        except OSError:
            break
os.close(m)
t1 = time.time()
try:
    code = p.wait(timeout=15)
    print(f"exited {code} {time.time() - t1:.1f}s after the hang-up")
except subprocess.TimeoutExpired:
    cpu = open(f"/proc/{p.pid}/stat").read().split()[13:15]
    p.kill()
    print(f"still running 15 s after the hang-up (utime, stime ticks: {cpu}); killed")
    sys.exit(1)
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_hk-console"))
        .arg(base.path().join("demo"))
        .arg(base.path().join("state"))
        .output()
        .expect("python3");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("exited"), "{said}");
}

/// SIGKILL: nothing of the console runs to clean up; the parent-death signal and the
/// lifeline take the group down. The restarted console then shows the interrupted step,
/// probes, refuses `r`, and a process of it still alive (one that ignores SIGINT, written
/// into the journal in the apply's place) blocks the decision until `K` stops it.
#[test]
fn sigkill_during_an_apply_then_resume_is_a_decision() {
    let base = tempfile::tempdir().expect("tmp");
    let (tmux, demo) = start_apply(base.path(), "kill");
    kill(console_pid(&demo), "KILL");
    let took = wait_no_children(&demo, "KILL");
    println!("KILL: no child of the console left {took:?} after the signal");
    drop(tmux);
    let journal = journal_of(&demo.join("runs"));
    let text = std::fs::read_to_string(&journal).expect("journal");
    assert!(text.contains(r#""type":"process-started""#), "{text}");
    assert!(
        !text.contains(r#""type":"abandoned""#),
        "SIGKILL leaves no time to say so"
    );

    // A process that ignores SIGINT, standing in for an apply that outlived its console:
    // the journal's process-started of the apply is pointed at it.
    let mut orphan = Command::new("/bin/sh")
        .args(["-c", "trap '' INT; while :; do sleep 1; done"])
        .process_group(0)
        .spawn()
        .expect("orphan");
    let pid = orphan.id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let start: u64 = stat[stat.rfind(')').expect(")") + 1..]
        .split_whitespace()
        .nth(19)
        .expect("starttime")
        .parse()
        .expect("number");
    let state = base.path().join("state2");
    let runs = state.join("hk-console").join("runs");
    std::fs::create_dir_all(&runs).expect("runs");
    let mut rewritten = Vec::new();
    for l in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(l).expect("line");
        if v["input"]["type"] == "process-started" && is_apply_line(&text, l) {
            v["input"]["pid"] = pid.into();
            v["input"]["start_time"] = start.into();
        }
        rewritten.push(serde_json::to_string(&v).expect("json"));
    }
    let name = journal.file_name().expect("name");
    std::fs::write(runs.join(name), rewritten.join("\n") + "\n").expect("journal copy");

    let bin = env!("CARGO_BIN_EXE_hk-console");
    // The demo died with the console, so its cluster cannot be reached: a resumed run takes
    // the cluster's run lock like a started one, and here it can only go without it.
    let cmd = format!(
        "env XDG_STATE_HOME={st} XDG_CONFIG_HOME={st} LOGNAME=e2e TERM=xterm-256color {bin} --runbooks {rb} --repo {demo} --no-cluster-lock; echo EXIT=$?; sleep 60",
        st = shell_quote(&state),
        bin = shell_quote(Path::new(bin)),
        rb = shell_quote(&base.path().join("runbooks")),
        demo = shell_quote(&demo),
    );
    let tmux = Tmux::launch(
        format!("hk-sig-{}-resume", std::process::id()),
        &cmd,
        "160",
        "45",
    );
    tmux.wait_for("Recent runs");
    tmux.wait_for("interrupted");
    // The runs list has the interrupted run first; Tab focuses it.
    tmux.send(&["Tab"]);
    tmux.send(&["Enter"]);
    let s = tmux.wait_for("Resume step");
    assert!(s.contains("INTERRUPTED"), "{s}");
    assert!(
        s.contains(&format!("pid {pid}")) && s.contains("STILL RUNNING"),
        "{s}"
    );
    assert!(
        s.contains("w wait for it") && s.contains("K stop it"),
        "{s}"
    );
    assert!(
        !s.contains("R re-run"),
        "no other choice while it runs:\n{s}"
    );
    // Any other key is refused while it runs.
    tmux.send(&["R"]);
    tmux.wait_for("its process still runs");
    // Hidden and asked for with `r`: the console refuses a one-key re-run.
    tmux.send(&["Escape"]);
    tmux.wait_for("waits for a decision");
    tmux.send(&["r"]);
    tmux.wait_for("not re-run on one");
    tmux.wait_for("Resume step");
    tmux.send(&["K"]);
    // SIGINT is ignored; SIGTERM after 3 s ends it.
    let s = tmux.wait_until(Duration::from_secs(20), "process gone", |s| {
        s.contains("process: gone")
    });
    assert!(s.contains("sent SIGINT, SIGTERM"), "{s}");
    let _ = orphan.wait();
    // The probe ran (the demo's simulation is gone with its console, so it cannot reach
    // the node: its result says so) and the three choices are offered.
    let s = tmux.wait_until(Duration::from_secs(40), "probe result", |s| {
        s.contains("probe (step") && (s.contains(": OK") || s.contains("NOT OK"))
    });
    assert!(s.contains("R re-run from step"), "{s}");
    // Re-run needs the environment's name typed; a wrong one is refused.
    tmux.send(&["R"]);
    tmux.wait_for("type the environment's name");
    tmux.send(&["prod", "Enter"]);
    tmux.wait_for("the confirmation is");
    // Back by a click on the modal's `esc back` button (each choice is a button).
    tmux.click("esc back");
    tmux.wait_for("D mark done");
    // Mark done, typed and with a reason.
    tmux.send(&["D"]);
    tmux.wait_for("Mark done: type `k3s-dev-1`");
    tmux.send(&["k3s-dev-1", "Tab", "checked by hand", "Enter"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = std::fs::read_to_string(runs.join(name)).expect("journal");
        if text.contains(r#""type":"marked-done""#) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "never marked done:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for want in [
        r#""type":"resumed""#,
        r#""type":"process-ended""#,
        "stopped by e2e: pid",
        r#""type":"probe-result""#,
        r#""type":"marked-done""#,
        r#""reason":"checked by hand""#,
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
}

/// Ctrl-C and `y` during the apply: the step ends cancelled, and its outcome is as unknown
/// as an interrupted one's. `r` does not start the apply again: the console says it is
/// decided, not re-run on one key, and opens the decision (the read-back as a probe, then a
/// re-run from the preview with the environment's name typed); the journal has no retry
/// and no second attempt of the apply until the preview's approval is given afresh.
#[test]
fn ctrl_c_y_during_an_apply_then_r_is_the_decision_not_a_retry() {
    let base = tempfile::tempdir().expect("tmp");
    let (tmux, demo) = start_apply(base.path(), "cancel");
    let journal = journal_of(&demo.join("runs"));
    let apply_attempts = |text: &str| {
        text.lines()
            .filter(|l| l.contains(r#""type":"process-started""#) && is_apply_line(text, l))
            .count()
    };
    tmux.send(&["C-c"]);
    tmux.wait_for("Cancel the running step");
    tmux.send(&["y"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&journal).expect("journal");
        if text.contains(r#""type":"cancelled""#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cancel never landed:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = tmux.wait_for("enter decides");
    println!("after the cancel:\n{s}");
    assert!(!s.contains("r retry"), "{s}");

    tmux.send(&["r"]);
    let s = tmux.wait_for("Resume step");
    println!("after r:\n{s}");
    assert!(s.contains("STOPPED AFTER ITS WORK WENT OUT"), "{s}");
    assert!(
        s.contains("cancelled: stopped at the operator's request"),
        "{s}"
    );
    let text = std::fs::read_to_string(&journal).expect("journal");
    assert!(!text.contains(r#""type":"retry-approved""#), "{text}");
    assert_eq!(apply_attempts(&text), 1, "the apply did not start again");

    // The read-back runs as the probe on the live node, then the choices.
    let s = tmux.wait_until(Duration::from_secs(60), "probe result", |s| {
        s.contains("probe (step") && (s.contains(": OK") || s.contains("NOT OK"))
    });
    assert!(s.contains("R re-run from step"), "{s}");
    // The re-run is typed (the environment's name) and goes back to the preview.
    tmux.send(&["R"]);
    tmux.wait_for("type the environment's name");
    tmux.send(&["dev", "Enter"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&journal).expect("journal");
        if text.contains(r#""type":"rerun-approved""#) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "never re-run:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(text.contains(r#""type":"probe-result""#), "{text}");
    // The preview runs again (its second attempt), and its approval is asked afresh
    // before the apply's second attempt. (Step 6: 1 is etcd's snapshot, 3-5 etcd's
    // leader looked at and moved off the server first, which the re-run of the apply does
    // not repeat.)
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&journal).expect("journal");
        if text.contains(r#""type":"step-finished","n":6,"attempt":2"#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the preview did not run again:\n{text}\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = tmux.wait_for("enter approve");
    println!("after the re-run:\n{s}");
    let text = std::fs::read_to_string(&journal).expect("journal");
    assert_eq!(apply_attempts(&text), 1, "not before its approval:\n{text}");
    drop(tmux);
}

/// The crash-and-resume rehearsal the demo promises: `demo --dir D`, an apply running, the
/// console SIGKILLed, then `demo --dir D` again. The second demo reopens D (its journals
/// kept, the simulation restarted on it) instead of refusing a directory that is not
/// empty: Home lists the run as interrupted, Enter opens the resume decision, and the
/// decision's read-only probe reaches the restarted simulation's node (its read-back
/// answers OK, where a console with no simulation behind it says NOT OK).
#[test]
fn a_killed_demo_reopened_on_its_dir_offers_the_resume_decision() {
    let base = tempfile::tempdir().expect("tmp");
    let (tmux, demo) = start_apply(base.path(), "reopen");
    kill(console_pid(&demo), "KILL");
    wait_no_children(&demo, "KILL");
    drop(tmux);
    let journal = journal_of(&demo.join("runs"));
    let before = std::fs::read_to_string(&journal).expect("journal");

    let tmux = launch_demo(
        base.path(),
        &base.path().join("runbooks"),
        &demo,
        "reopen-again",
    );
    let s = tmux.wait_for("Recent runs");
    assert!(!s.contains("no runs journaled yet"), "{s}");
    let s = tmux.wait_for("sleepy-apply on dev");
    let row = s
        .lines()
        .find(|l| l.contains("sleepy-apply on dev"))
        .expect("the row");
    assert!(
        row.contains("interrupted") && row.contains("resume"),
        "the killed run is offered for resume: {row}"
    );
    tmux.send(&["Tab"]);
    tmux.send(&["Enter"]);
    let s = tmux.wait_for("Resume step");
    assert!(s.contains("INTERRUPTED"), "{s}");
    let s = tmux.wait_until(Duration::from_secs(60), "probe result", |s| {
        s.contains("probe (step") && (s.contains(": OK") || s.contains("NOT OK"))
    });
    assert!(
        s.contains(": OK") && !s.contains("NOT OK"),
        "the probe reaches the restarted simulation:\n{s}"
    );
    assert!(s.contains("R re-run from step"), "{s}");
    // The same journal, reopened: the run's earlier lines are all still there.
    let after = std::fs::read_to_string(&journal).expect("journal");
    assert!(
        after.starts_with(&before),
        "the journal was kept, not rewritten"
    );
    assert!(after.contains(r#""type":"resumed""#), "{after}");
    drop(tmux);

    // A directory that is not empty and that no demo made is still refused, saying why.
    let foreign = base.path().join("foreign");
    std::fs::create_dir_all(&foreign).expect("dir");
    std::fs::write(foreign.join("notes.txt"), "mine").expect("file");
    let out = Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .env("XDG_STATE_HOME", base.path().join("state"))
        .env("XDG_CONFIG_HOME", base.path().join("state"))
        .args(["demo", "--once", "--dir"])
        .arg(&foreign)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&foreign.display().to_string()) && err.contains("not a demo directory"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(foreign.join("notes.txt")).expect("kept"),
        "mine",
        "nothing of it is touched"
    );
}
