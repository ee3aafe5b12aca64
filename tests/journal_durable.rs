//! Journal before effect, tested the way it was broken (issue 34): through the binary, a
//! headless prod re-provision on the demo, with
//! an LD_PRELOAD shim (tests/fixtures/fsync_shim/fsync_shim.c, built here with `cc`) that
//! - makes every sync of the journal slow (30 ms) and, from the Nth on, fail with ENOSPC, and
//! - in each `ansible-playbook` the console starts (children inherit it), reads the run's
//!   journal before the program's first instruction (a library constructor), logging what
//!   its last line was at that instant.
//!
//! Before the fix the mutating playbook was already running while the journal's last line
//! was still the gate's answer, and a failed fdatasync of `step-started` still let it
//! start. Now the session journals a step's start before the request leaves, and the
//! executors can only start work with the proof that record returns.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support;

/// How slow each journal sync is made: wider than any spawn, so a child that could start
/// before its record is durable would be seen doing so every time.
const SLOW_MS: &str = "30";

/// The shim, built once per test binary run into the target's temp dir.
fn shim() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/fsync_shim/fsync_shim.c");
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fsync_shim.so");
            let st = Command::new("cc")
                .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
                .arg(&out)
                .arg(&src)
                .arg("-ldl")
                .status()
                .expect("cc (the C compiler) builds the fsync shim: apt-get install gcc");
            assert!(st.success(), "cc failed on {}", src.display());
            out
        })
        .clone()
}

/// What one headless run left: its exit code, stderr, what each playbook saw as it started, and the journal.
struct Ran {
    code: Option<i32>,
    stderr: String,
    started: Vec<(String, String)>,
    journal: Vec<String>,
}

fn run(runbook: &str, fail_from: Option<usize>, count: Option<&Path>) -> Ran {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).expect("state dir");
    let log = dir.path().join("started.log");
    let demo = dir.path().join("demo");
    let mut c = Command::new(env!("CARGO_BIN_EXE_hk-console"));
    c.args([
        "demo",
        "--dir",
        &demo.display().to_string(),
        "--headless",
        "--run",
        runbook,
        "--env",
        "prod",
        "--host",
        "k3s-prod-2",
        "--timeout",
        "240",
    ])
    .env("XDG_STATE_HOME", &state)
    .env("HK_ANSIBLE_BIN_DIR", support::ansible_bin_dir())
    .env("LD_PRELOAD", shim())
    .env("HK_WATCH_LOG", &log)
    .env("HK_WATCH_JOURNALS", demo.join("runs/*.jsonl"))
    .env("HK_SHIM_SLOW_MS", SLOW_MS)
    .stdin(std::process::Stdio::null());
    if let Some(n) = fail_from {
        c.env("HK_SHIM_FAIL_FROM", n.to_string());
    }
    if let Some(p) = count {
        c.env("HK_SHIM_COUNT", p);
    }
    let out = c.output().expect("run hk-console");
    let started = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (k, rest) = l.split_once('\t').unwrap_or((l, ""));
            (k.to_string(), rest.to_string())
        })
        .collect();
    let journals: Vec<PathBuf> = walk(&demo)
        .into_iter()
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".jsonl") && !n.ends_with(".output.jsonl") && !n.ends_with(".trail.jsonl")
        })
        .collect();
    assert!(journals.len() <= 1, "one run, one journal: {journals:?}");
    let journal = journals
        .first()
        .map(|p| {
            std::fs::read_to_string(p)
                .expect("journal")
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ran {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        started,
        journal,
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Every ansible-playbook this run started saw, as the journal's last line, its step's
/// `step-started` (or the `process-started` journaled when the console's supervisor,
/// which then execs the playbook, was spawned), and that step's start is in the journal
/// as it was left: on disk (a line whose sync failed is cut off again).
/// Returns how many applies started.
fn assert_every_start_was_durable(r: &Ran, what: &str) -> usize {
    for (kind, last) in &r.started {
        let seen: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| {
            panic!(
                "{what}: an ansible-playbook ({kind}) started while the journal's last line \
                 was {last:?} ({e})\nstderr:\n{}",
                r.stderr
            )
        });
        let input = &seen["input"];
        let ty = input["type"].as_str().unwrap_or_default();
        assert!(
            ty == "step-started" || ty == "process-started",
            "{what}: an ansible-playbook ({kind}) started while the journal's last line was \
             {last}\nstderr:\n{}",
            r.stderr
        );
        // The step's start is on disk: the line the child saw, when it is the start; the
        // start before it, when it is the supervisor's process-started (written just after
        // the spawn, so its own sync may still fail).
        let started = r.journal.iter().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| {
                v["input"]["type"] == "step-started"
                    && v["input"]["n"] == input["n"]
                    && v["input"]["attempt"] == input["attempt"]
                    && (ty != "step-started" || l == last)
            })
        });
        assert!(
            started,
            "{what}: an ansible-playbook ({kind}) started behind a step-started that is not \
             durable (its sync failed and the line was cut); it saw {last}\njournal:\n{}",
            r.journal.join("\n")
        );
    }
    r.started.iter().filter(|(k, _)| k == "apply").count()
}

/// The clean run, watched from inside the child: every playbook, preview or apply, starts
/// only once its step-started is the journal's last line, on disk.
#[test]
fn a_playbook_starts_only_after_its_step_started_is_durable() {
    let r = run("reprovision-node", None, None);
    assert_eq!(r.code, Some(0), "the re-provision succeeds:\n{}", r.stderr);
    let applies = assert_every_start_was_durable(&r, "clean run");
    assert!(
        applies >= 3,
        "reprovision-node applies three playbooks: {:?}",
        r.started
    );
}

/// Runs `runbook` once clean (counting the journal's syncs), then once for each N the
/// `pick` keeps with the Nth sync failing (ENOSPC) and every later one, two runs at a time;
/// each must halt, name the journal, keep nothing from the failed record on, and start no
/// playbook behind a record that is not durable. Returns how many of the failed syncs were
/// a step's start.
fn sweep(runbook: &str, pick: &dyn Fn(&serde_json::Value, &str) -> bool) -> usize {
    let dir = tempfile::tempdir().expect("temp dir");
    let count = dir.path().join("count");
    let clean = run(runbook, None, Some(&count));
    assert_eq!(clean.code, Some(0), "{runbook}: {}", clean.stderr);
    let total = std::fs::read_to_string(&count)
        .expect("the shim counted")
        .lines()
        .count();
    assert_eq!(
        total,
        clean.journal.len(),
        "{runbook}: one sync per journal line (the header's and each record's)"
    );
    // Sync N is line N's (the header is line 1).
    let header: serde_json::Value = serde_json::from_str(&clean.journal[0]).expect("header");
    let ns: Vec<usize> = (1..=total)
        .filter(|n| pick(&header, &clean.journal[n - 1]))
        .collect();
    assert!(!ns.is_empty(), "{runbook}: nothing to sweep");
    let check = |n: usize| {
        let r = run(runbook, Some(n), None);
        let what = format!("{runbook}: sync {n} of {total} failed");
        assert_ne!(
            r.code,
            Some(0),
            "{what}, yet the run succeeded:\n{}",
            r.stderr
        );
        assert!(
            r.stderr.contains("the journal cannot be written") || r.stderr.contains("no journal"),
            "{what}: the refusal names the journal:\n{}",
            r.stderr
        );
        assert_every_start_was_durable(&r, &what);
        // The record whose sync failed is not in the journal, and nothing after it is.
        assert!(
            r.journal.len() < n,
            "{what}: the journal keeps {} lines",
            r.journal.len()
        );
        // And what it keeps is the clean run's beginning, record for record.
        let kinds = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .skip(1)
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).map_or(String::new(), |v| {
                        v["input"]["type"].as_str().unwrap_or_default().to_string()
                    })
                })
                .collect()
        };
        let kept = kinds(&r.journal);
        assert_eq!(
            kept,
            kinds(&clean.journal)[..kept.len()],
            "{what}: the journal kept other records than the clean run's first ones"
        );
    };
    std::thread::scope(|s| {
        for pair in ns.chunks(2) {
            let handles: Vec<_> = pair.iter().map(|&n| s.spawn(move || check(n))).collect();
            for h in handles {
                if let Err(e) = h.join() {
                    std::panic::resume_unwind(e);
                }
            }
        }
    });
    ns.iter()
        .filter(|&&n| clean.journal[n - 1].contains(r#""type":"step-started""#))
        .count()
}

/// Every sync of a packages-only baseline on prod (one node, a preview, an approval and a
/// mutating apply) fails in turn: nothing starts behind a record that is not on disk.
#[test]
fn a_failed_journal_sync_at_any_record_starts_nothing_after_it() {
    let starts = sweep("packages-baseline", &|_, _| true);
    assert!(
        starts >= 2,
        "the sweep failed the preview's and the apply's start: {starts}"
    );
}

/// The re-provision's syncs that are a mutating step's start (each of its three applies
/// started before the fix) fail in turn: none starts its step.
#[test]
fn a_failed_apply_start_sync_starts_nothing_in_a_reprovision() {
    let mutating_start = |header: &serde_json::Value, line: &str| {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return false;
        };
        v["input"]["type"] == "step-started"
            && header["plan"]["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["n"] == v["input"]["n"] && s["mutates"] == true)
    };
    let starts = sweep("reprovision-node", &mutating_start);
    assert!(
        starts >= 3,
        "the three applies' starts were failed: {starts}"
    );
}
