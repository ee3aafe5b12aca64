//! The change record (`hk-console runs show`) of real runs: a headless demo run of
//! `packages-baseline` on prod (the gate policy's preview, approval and list-hosts; real
//! ansible over SSH to the simulated node) rendered as Markdown, held to a golden with the
//! times, run ids and temporary paths filtered; every gate with its answerer and every
//! step's final state are in it; the JSON form carries the same; `runs list` finds it by
//! a prefix of its id; a damaged journal is shown with the damage marked. What the Live
//! screen's event trail saw change while a console's run was active (its environment's
//! lease moved, a node NotReady) is in that run's record, in order with its times, in the
//! text, Markdown and JSON forms; what changed before or after the run, or elsewhere, is not.
//! Needs ansible-playbook (HK_ANSIBLE_BIN_DIR, PATH or /opt/hk-venv/bin): fails, not skips.

use std::time::Duration;

use hk_console::record;
use hk_console::sim::demo;
use hk_console::sim::headless::{drive, HeadlessRun, OPERATOR};
use regex::Regex;

use crate::ui_common;

fn filtered(text: &str) -> String {
    let rules = [
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[time]"),
        (r"\d{8}T\d{9}Z", "[stamp]"),
        (r"/tmp/\.tmp[A-Za-z0-9]+", "[tmp]"),
        (r"\b\d+(\.\d+)? ?(ms|s)\b", "[dur]"),
        // The simulated members' raft index grows with the demo's clock.
        (r"applied index \d+", "applied index [n]"),
        // How far a member trails, within the catch-up distance: the looks' timing.
        (r"caught up|\b\d+ entr(y|ies) behind", "[lag]"),
    ];
    // Who took the run lock: this machine's login@host.
    let me = hk_console::cluster::lock::Claimant::this_console("", "", "").holder;
    let mut out = text.replace(&me, "[login@host]");
    for (re, to) in rules {
        out = Regex::new(re)
            .expect("regex")
            .replace_all(&out, to)
            .into_owned();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_show_md_of_a_headless_demo_run_lists_every_gate_and_state() {
    let dirs = hk_console::exec::ansible::search_dirs();
    assert!(
        hk_console::exec::ansible::find_binary("ansible-playbook", &dirs).is_some(),
        "ansible-playbook not found: {}",
        hk_console::exec::ansible::INSTALL_HINT
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let d = demo::start("healthy", &dir.path().join("repo"))
        .await
        .unwrap_or_else(|e| panic!("demo: {e}"));
    let set = hk_console::runbook::embedded::load(&[]).expect("shipped runbooks");
    let req = HeadlessRun {
        runbook: "packages-baseline".into(),
        env: Some("prod".into()),
        host: Some("k3s-prod-2".into()),
        deadline: Duration::from_secs(180),
    };
    let runs = dir.path().join("runs");
    let report = drive(&d, set, &req, &runs, |_| {})
        .await
        .unwrap_or_else(|e| panic!("headless run: {e}"));
    assert!(report.succeeded, "{}", report.render());

    let id = report
        .journal
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .expect("run id");
    // Found by a prefix of its id, as the operator types it.
    let rec = record::load(&runs, &id[..20]).expect("the run's record");
    assert_eq!(rec.outcome, "succeeded");
    let gated: Vec<_> = rec.steps.iter().filter(|s| s.gate.is_some()).collect();
    assert!(!gated.is_empty());
    for s in &rec.steps {
        assert_eq!(s.state, "done", "step {}", s.n);
    }
    for s in &gated {
        assert_eq!(s.gate.as_ref().map(|g| g.by.as_str()), Some(OPERATOR));
    }
    // The preview's diff is in the record, not just its last lines.
    assert!(rec.steps.iter().any(|s| s.preview && !s.output.is_empty()));

    let md = rec.render_md();
    for s in &rec.steps {
        assert!(
            md.contains(&format!("| {} | ", s.n)),
            "step {} missing from:\n{md}",
            s.n
        );
    }
    // The golden holds the table and the decisions; the output section (ansible's own
    // words) is asserted above, not frozen.
    let head = md.split("#### Output").next().unwrap_or_default();
    insta::assert_snapshot!("runs_show_md_packages_baseline_prod", filtered(head));

    let json = serde_json::to_value(&rec).expect("json");
    assert_eq!(
        json["steps"].as_array().map(Vec::len),
        Some(rec.steps.len())
    );
    assert_eq!(json["outcome"], "succeeded");

    let (listed, unreadable) = record::list(&runs).expect("list");
    assert_eq!(listed.len(), 1);
    assert!(unreadable.is_empty());
    assert_eq!(listed[0].run_id, id);
    let text = record::show_list(&runs, false).expect("list text");
    assert!(
        text.contains("succeeded    packages-baseline prod by simulated-operator"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&record::show_list(&runs, true).expect("list json")).expect("json");
    assert_eq!(json["runs"][0]["run_id"], id.as_str());
    let shown: serde_json::Value =
        serde_json::from_str(&record::show(&runs, &id, record::Format::Json).expect("show json"))
            .expect("json");
    assert_eq!(shown["run_id"], id.as_str());
    assert_eq!(
        record::show(&runs, &id, record::Format::Md).expect("show md"),
        md
    );

    // Damage: a line of garbage after the first records. The record is still shown, with
    // the damage named and what the lines before it say.
    let text = std::fs::read_to_string(&report.journal).expect("journal");
    let lines: Vec<&str> = text.lines().collect();
    let cut = 4.min(lines.len());
    let damaged = format!("{}\n{{not json\n", lines[..cut].join("\n"));
    std::fs::write(&report.journal, damaged).expect("damage");
    let rec = record::load_path(&report.journal).expect("salvaged");
    let damage = rec.damage.clone().expect("damage named");
    assert!(
        damage.starts_with(&format!("damaged at line {}", cut + 1)),
        "{damage}"
    );
    let text = rec.render_text();
    assert!(text.contains("DAMAGED JOURNAL: damaged at line"), "{text}");
    assert!(rec.render_md().contains("**damaged journal**"));
    assert_ne!(rec.outcome, "succeeded");
}

#[test]
fn an_unknown_or_ambiguous_run_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    match record::load(dir.path(), "2026") {
        Err(e) => assert!(e.to_string().starts_with("no run `2026` in "), "{e}"),
        Ok(_) => panic!("an empty directory holds no run"),
    }
}

#[test]
fn the_event_trail_seen_while_a_run_is_active_is_in_its_record() {
    use hk_console::checks::live::{vip_lease, Timestamp};
    use hk_console::observe::feed::{Feed, Update};
    use hk_console::ui::app::{App, Screen};
    use ui_common::live::{nodes_one_not_ready, nodes_update, topo, vip_input};
    use ui_common::*;

    let at = |s: u64| Timestamp(T0.0 + s * 1000);
    let vip = |env: &str, holder: &str, t: Timestamp| Update {
        env: env.into(),
        at: t,
        feed: Feed::Vip(vip_lease(&topo(env), &vip_input(holder, t))),
    };
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &[]));
    // Before any run: on the Live timeline, in no run's record.
    app.handle_update(vip("prod", "k3s-prod-1", at(1)));
    app.handle_update(vip("prod", "k3s-prod-2", at(2)));
    app.handle_update(vip("dev", "k3s-dev-1", at(2)));
    app.handle_update(nodes_update("prod", at(3)));
    assert_eq!(app.timeline().len(), 1);

    app.open_runbook("node-health", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    app.handle_key(key('s'));
    let journal = app
        .active()
        .and_then(|a| a.journal.as_ref())
        .map(|j| j.path().to_path_buf())
        .expect("the run started");
    // While it runs: prod's lease moves and a node goes NotReady (recorded); dev's lease
    // moves (another environment: not this run's record). Seen out of order: a late look.
    app.handle_update(nodes_one_not_ready(at(12)));
    app.handle_update(vip("prod", "k3s-prod-3", at(10)));
    app.handle_update(vip("dev", "k3s-dev-2", at(11)));
    for _ in 0..200 {
        if answer_gate(&mut app) {
            continue;
        }
        if play_one(&mut app, &["ok"]).is_none() {
            break;
        }
    }
    assert!(
        !app.active().expect("run").is_active(),
        "node-health did not end: {:?}",
        app.status()
    );
    // After the run: the timeline has it, the record does not.
    app.handle_update(vip("prod", "k3s-prod-1", at(30)));
    assert_eq!(app.timeline().len(), 5);

    let rec = record::load_path(&journal).expect("record");
    assert_eq!(rec.events_error, None);
    let seen: Vec<(u64, &str)> = rec
        .events
        .iter()
        .map(|e| ((e.at.0 - T0.0) / 1000, e.text.as_str()))
        .collect();
    println!("{seen:?}");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], (10, "lease moved k3s-prod-2 -> k3s-prod-3"));
    assert_eq!(seen[1].0, 12);
    assert!(
        seen[1].1.contains("k3s-prod-2") && seen[1].1.contains("NotReady"),
        "{seen:?}"
    );

    let text = rec.render_text();
    println!("{text}");
    let lease =
        "2026-09-07T10:15:10.000Z prod lease-moved [warn]: lease moved k3s-prod-2 -> k3s-prod-3";
    let after = text
        .split("events during the run:\n")
        .nth(1)
        .expect("the events section");
    let lines: Vec<&str> = after.lines().collect();
    assert_eq!(lines[0].trim(), lease, "{text}");
    assert!(
        lines[1]
            .trim()
            .starts_with("2026-09-07T10:15:12.000Z prod node-not-ready "),
        "{text}"
    );
    assert!(
        !text.contains("k3s-dev-2") && !text.contains("-> k3s-prod-1"),
        "{text}"
    );

    let md = rec.render_md();
    let after = md
        .split("#### Events during the run\n\n")
        .nth(1)
        .expect("the md section");
    assert!(after.starts_with(&format!("- {lease}\n")), "{md}");

    let json = serde_json::to_value(&rec).expect("json");
    assert_eq!(json["events"][0]["kind"], "lease-moved");
    assert_eq!(json["events"][0]["at"], T0.0 + 10_000);
    assert_eq!(json["events"][1]["kind"], "node-not-ready");
}

/// `hk-console runs list --dir DIR`, bounded in time: (exit code, stdout, stderr).
fn runs_list(dir: &std::path::Path) -> (Option<i32>, String, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .args(["runs", "list", "--dir"])
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run hk-console");
    let t0 = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`runs list` still running after 20 s: blocked opening the FIFO?");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 25: a run at a gate is `in progress` while its console lives, and `interrupted`
/// (saying why) once that console is gone, even though its journal's last line is the
/// same; before, it stayed `in progress` forever.
#[test]
fn a_run_whose_console_is_gone_is_listed_interrupted_not_in_progress() {
    use hk_console::ui::app::App;
    use ui_common::*;

    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &[]));
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let journal = app
        .active()
        .and_then(|a| a.journal.as_ref())
        .map(|j| j.path().to_path_buf())
        .expect("the run started");
    // Up to its first gate: nothing in flight, the run waits on the operator.
    for _ in 0..50 {
        if app.active().and_then(|a| a.open_gate()).is_some() {
            break;
        }
        if play_one(&mut app, &["ok"]).is_none() {
            break;
        }
    }
    assert!(
        app.active().and_then(|a| a.open_gate()).is_some(),
        "node-health reaches a gate: {:?}",
        app.status()
    );
    let runs = journal.parent().expect("runs dir").to_path_buf();
    let (code, live, err) = runs_list(&runs);
    assert_eq!(code, Some(0), "{err}");
    assert!(live.contains("in progress"), "its console lives:\n{live}");
    // The console goes without a word (as SIGKILL takes it): its journal unchanged.
    let before = std::fs::read(&journal).expect("journal");
    drop(app);
    assert_eq!(std::fs::read(&journal).expect("journal"), before);
    let (code, gone, err) = runs_list(&runs);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        gone.contains("interrupted") && !gone.contains("in progress"),
        "its console is gone:\n{gone}"
    );
    assert!(gone.contains("no console holds this run"), "{gone}");
}

/// Issue 25/26: `runs list` reads journals only. A run's event trail
/// (`<run>.trail.jsonl`) and output log beside it are never read as journals (before, the
/// trail was reported "invalid journal header: missing field 'format'" and a `.damaged`
/// copy of it made); a FIFO named `*.jsonl` is listed as unreadable, "not a regular file",
/// and never opened (opening one blocks); a really damaged journal is still listed as
/// damaged. Through the real binary, bounded in time.
#[test]
fn runs_list_reads_journals_only_and_never_blocks_on_a_fifo() {
    use hk_console::checks::live::{vip_lease, Timestamp};
    use hk_console::observe::feed::{Feed, Update};
    use hk_console::ui::app::App;
    use ui_common::live::{topo, vip_input};
    use ui_common::*;

    let at = |s: u64| Timestamp(T0.0 + s * 1000);
    let vip = |holder: &str, t: Timestamp| Update {
        env: "prod".into(),
        at: t,
        feed: Feed::Vip(vip_lease(&topo("prod"), &vip_input(holder, t))),
    };
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &[]));
    app.handle_update(vip("k3s-prod-1", at(1)));
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    let journal = app
        .active()
        .and_then(|a| a.journal.as_ref())
        .map(|j| j.path().to_path_buf())
        .expect("the run started");
    app.handle_update(vip("k3s-prod-2", at(10)));
    for _ in 0..200 {
        if answer_gate(&mut app) {
            continue;
        }
        if play_one(&mut app, &["ok"]).is_none() {
            break;
        }
    }
    let trail = hk_console::observe::timeline::trail_path(&journal);
    assert!(trail.is_file(), "the run kept a trail: {}", trail.display());
    let runs = journal.parent().expect("runs dir").to_path_buf();
    // A really damaged journal: a copy of the run's with a line that is not JSON.
    let damaged = runs.join("20260907T101500000Z-damaged-prod.jsonl");
    let mut bytes = std::fs::read(&journal).expect("journal");
    bytes.extend_from_slice(b"{not json\n");
    std::fs::write(&damaged, bytes).expect("damaged copy");
    let fifo = runs.join("a-fifo.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());

    let (code, stdout, stderr) = runs_list(&runs);
    println!("{stdout}{stderr}");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stdout.contains("trail"),
        "the trail read as a journal:\n{stdout}"
    );
    assert!(!stdout.contains("output.jsonl"), "{stdout}");
    let leftovers: Vec<String> = std::fs::read_dir(&runs)
        .expect("runs")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".damaged") && !n.starts_with("20260907T101500000Z-damaged"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "damaged copies of non-journals: {leftovers:?}"
    );
    let fifo_line = stdout
        .lines()
        .find(|l| l.contains("a-fifo.jsonl"))
        .unwrap_or_else(|| panic!("the FIFO is not listed:\n{stdout}"));
    assert!(
        fifo_line.starts_with("unreadable: ") && fifo_line.contains("not a regular file"),
        "{fifo_line}"
    );
    let damaged_line = stdout
        .lines()
        .find(|l| l.contains("DAMAGED"))
        .unwrap_or_else(|| panic!("the damaged journal is not marked:\n{stdout}"));
    assert!(damaged_line.contains("line"), "{damaged_line}");
    assert_eq!(
        stdout.lines().filter(|l| l.contains("node-health")).count(),
        2,
        "the run and its damaged copy:\n{stdout}"
    );
}

/// Issue 25: a run whose cluster run lock another run took over is listed `interrupted`,
/// naming who took it and why, even while its own console still holds its journal.
#[test]
fn a_run_whose_lock_was_taken_over_is_listed_interrupted_naming_the_taker() {
    use hk_console::journal::Journal;
    use hk_console::runbook::machine::{Event, Input, Mode, RunLockNote, Timestamp};
    use hk_console::ui::app::App;
    use ui_common::*;

    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &[]));
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    // Up to its first gate: nothing in flight, the run waits on the operator.
    for _ in 0..50 {
        if app.active().and_then(|a| a.open_gate()).is_some()
            || play_one(&mut app, &["ok"]).is_none()
        {
            break;
        }
    }
    let (journal, plan) = app
        .active()
        .and_then(|a| {
            a.journal
                .as_ref()
                .map(|j| (j.path().to_path_buf(), a.run.plan().clone()))
        })
        .expect("the run started");
    let first = journal
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .expect("run id");
    let runs = journal.parent().expect("runs dir").to_path_buf();
    let (_, live, _) = runs_list(&runs);
    assert!(live.contains("in progress"), "{live}");
    // Another console takes the stale lock over for its own run of the same plan.
    let at = Timestamp(T0.0 + 3_600_000);
    let (mut j, mut run) = Journal::begin(&runs, plan, Mode::Operate, "bob", at).expect("journal");
    j.record(
        &mut run,
        Event::new(
            at,
            Input::RunLock {
                note: RunLockNote::TookOver {
                    from: "alice@laptop".into(),
                    from_run: Some(first.clone()),
                    last_renewed: None,
                    by: "bob@desk".into(),
                    typed: "prod".into(),
                    reason: "alice's laptop died".into(),
                },
            },
        ),
    )
    .expect("journaled");
    let (code, out, err) = runs_list(&runs);
    assert_eq!(code, Some(0), "{err}");
    let line = out
        .lines()
        .find(|l| l.contains(&first))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("interrupted")
            && line.contains("taken over by bob@desk")
            && line.contains("alice's laptop died"),
        "{line}"
    );
    drop(app);
}

#[test]
fn a_tab_in_a_steps_output_reads_as_spaces_in_every_form_of_the_record() {
    use hk_console::ui::app::{App, Screen};
    use ui_common::*;

    let dir = tempfile::tempdir().expect("tmp");
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &[]));
    app.open_runbook("node-health", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    app.handle_key(key('s'));
    let journal = app
        .active()
        .and_then(|a| a.journal.as_ref())
        .map(|j| j.path().to_path_buf())
        .expect("the run started");
    // Columns a command aligned with a tab (as `kubectl get` or `lsblk` can), and an ESC
    // that must still be written out.
    for _ in 0..200 {
        if answer_gate(&mut app) {
            continue;
        }
        if play_one(&mut app, &["NAME\tSTATUS", "k3s-prod-1\tReady\u{1b}[2J"]).is_none() {
            break;
        }
    }
    let runs = journal.parent().expect("runs dir");
    let id = journal
        .file_name()
        .and_then(|f| f.to_str())
        .and_then(|f| f.strip_suffix(".jsonl"))
        .expect("run id");
    for format in [record::Format::Md, record::Format::Text] {
        let shown = record::show(runs, id, format).expect("show");
        assert!(
            shown.contains("NAME    STATUS") && shown.contains("k3s-prod-1    Ready\\e[2J"),
            "{shown}"
        );
        assert!(!shown.contains("\\t"), "a tab is not shown as \\t: {shown}");
        assert!(!shown.contains('\u{1b}'), "ESC written out: {shown}");
    }
}

/// Issue 38: a run that got to its end past a quorum override, a step marked done over a
/// failed probe, and a skipped read-back is "succeeded with overrides" everywhere (the
/// run's outcome, `runs list`, the text, JSON and Markdown records), and the change log
/// keeps every decision with who and why, in order: the interruption, the probe's NOT OK,
/// the typed confirmations and each reason.
#[test]
fn a_run_with_overrides_says_so_and_keeps_every_decision_and_reason() {
    use crate::machine_common::{approve, etcd_plan, typed};
    use hk_console::journal::{self, Header, Journal};
    use hk_console::runbook::machine::{
        Event, GateAnswer, Input, Mode, Run, RunOutcome, Timestamp,
    };
    let dir = tempfile::tempdir().expect("tmp");
    let plan = etcd_plan();
    let header = Header::new(plan.clone(), Mode::Operate, "op", Timestamp(1_000));
    let mut j = Journal::create(dir.path(), &header).expect("journal");
    let mut run = Run::new(plan).expect("plan");
    let started = |n: usize| Input::StepStarted { n, attempt: 1 };
    let finished = |n: usize, code: i32| Input::StepFinished {
        n,
        attempt: 1,
        exit_code: Some(code),
        error: None,
    };
    let observed = |n: usize, host: &str| Input::HostSetObserved {
        n,
        attempt: 1,
        hosts: vec![host.into()],
    };
    let inputs = vec![
        Input::Start,
        Input::TypedText {
            n: 1,
            by: "op".into(),
            text: "prod".into(),
            note: Some("override quorum: k3s-prod-2 is being replaced".into()),
        },
        started(2),
        finished(2, 0),
        observed(2, "k3s-prod-3"),
        typed(2, "1"),
        started(3),
        finished(3, 0),
        approve(3),
        started(4),
        // The console dies mid-apply; the probe says the change is not there; the operator
        // marks it done anyway, with a reason.
        Input::Resumed,
        Input::ProbeResult {
            n: 4,
            probe: 5,
            ok: false,
            detail: "the scheduler is not bfq".into(),
        },
        Input::MarkedDone {
            n: 4,
            by: "op".into(),
            typed: "k3s-prod-3".into(),
            reason: "set by hand from the console of the BMC".into(),
        },
        started(5),
        finished(5, 1),
        Input::Skip {
            n: 5,
            by: "op".into(),
            reason: "read back by hand: [bfq]".into(),
        },
        started(6),
        finished(6, 0),
        observed(6, "k3s-prod-1"),
        typed(6, "1"),
        started(7),
        finished(7, 0),
        Input::GateAnswered {
            n: 7,
            answer: GateAnswer::Approved {
                by: "op".into(),
                note: None,
            },
        },
        started(8),
        finished(8, 0),
        started(9),
        finished(9, 0),
        Input::VerifyResult {
            n: 9,
            attempt: 1,
            ok: true,
            detail: "[bfq]".into(),
        },
    ];
    for (i, input) in inputs.into_iter().enumerate() {
        let name = input.name();
        j.record(&mut run, Event::new(Timestamp(2_000 + i as u64), input))
            .unwrap_or_else(|e| panic!("input {i} ({name}): {e}"));
    }
    assert_eq!(run.outcome(), RunOutcome::SucceededWithOverrides);
    let path = j.path().to_path_buf();
    drop(j);

    let listed = journal::list_runs(dir.path()).expect("list");
    assert_eq!(listed.runs[0].outcome, RunOutcome::SucceededWithOverrides);
    let replayed = journal::replay(&path).expect("replay");
    let rec = record::build(&replayed, None, Ok(Vec::new()));
    assert_eq!(rec.outcome, "succeeded with overrides");
    let md = rec.render_md();
    assert!(
        md.lines()
            .next()
            .is_some_and(|l| l.contains("succeeded with overrides")),
        "{md}"
    );
    for want in [
        "#### Overrides",
        "step 1: quorum override by op: k3s-prod-2 is being replaced",
        "step 4: marked done by op (its probe said NOT OK: the scheduler is not bfq): set by hand from the console of the BMC",
        "step 5: skipped by op: read back by hand: [bfq]",
        "#### Decisions",
        "resumed",
        "probe",
        "step 5 said NOT OK",
        "marked-done",
        "typed k3s-prod-3: set by hand from the console of the BMC",
    ] {
        assert!(md.contains(want), "missing {want:?} in:\n{md}");
    }
    // In order: the interruption, then the probe, then the decision on it.
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} in {md}"));
    assert!(
        at("resumed") < at("step 5 said NOT OK") && at("step 5 said NOT OK") < at("marked-done")
    );
    let text = rec.render_text();
    assert!(text.contains("overrides:"), "{text}");
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("succeeded with overrides")),
        "{text}"
    );
    let json = serde_json::to_value(&rec).expect("json");
    assert_eq!(json["outcome"], "succeeded with overrides");
    assert_eq!(json["overrides"].as_array().map(Vec::len), Some(3));
}
