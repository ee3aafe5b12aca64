//! Damaged journals are salvaged, never hidden: a corrupt, duplicated or deleted line in the
//! middle, a wrong sequence number, an impossible event or a bad header. The run is listed
//! with "damaged at line N", opens read-only up to the damage, is never resumed (and says
//! why), and a copy of the file as found is kept beside it before anything touches it.
use crate::machine_common;
use crate::ui_common;

use std::fs;
use std::path::{Path, PathBuf};

use hk_console::journal::{self, Journal, JournalError};
use hk_console::runbook::machine::{Input, Mode, RunOutcome, StepState, Timestamp};
use hk_console::ui::app::{App, Screen};
use machine_common::{approve, ev, health_plan, record_health_run};

/// A node-health run whose step 2 was in flight when the process stopped: header, Start,
/// gate approved, step 2 started (lines 1-4), then step 2 finished and step 3 started
/// (lines 5-6), so there are intact lines after any damage in the middle.
fn interrupted_run(dir: &Path, at: u64) -> PathBuf {
    record_health_run(
        dir,
        at,
        vec![
            Input::Start,
            approve(1),
            Input::StepStarted { n: 2, attempt: 1 },
            Input::StepFinished {
                n: 2,
                attempt: 1,
                exit_code: Some(0),
                error: None,
            },
            Input::StepStarted { n: 3, attempt: 1 },
        ],
    )
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn write(path: &Path, ls: &[String]) {
    fs::write(path, ls.join("\n") + "\n").expect("write");
}

/// Each kind of damage, applied to line 5 (where step 2 is in flight), the line it is
/// reported at.
/// Damages a journal's lines in place.
type Damager = fn(&mut Vec<String>);

fn damages() -> Vec<(&'static str, Damager)> {
    vec![
        ("corrupt line", |ls| {
            ls[4] = "{\"seq\":4,\"at\":1,\"inp".into()
        }),
        ("duplicated line", |ls| ls.insert(4, ls[3].clone())),
        ("deleted line", |ls| drop(ls.remove(4))),
        ("wrong sequence number", |ls| {
            ls[4] = ls[4].replacen("\"seq\":4", "\"seq\":7", 1)
        }),
        ("impossible event", |ls| {
            ls[4] = r#"{"seq":4,"at":9,"input":{"type":"retry-approved","n":2,"by":"x"}}"#.into()
        }),
    ]
}

#[test]
fn every_kind_of_damage_is_listed_salvaged_copied_and_never_resumed() {
    let at = 5;
    for (what, damage) in damages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = interrupted_run(dir.path(), 1_000);
        let mut ls = lines(&path);
        damage(&mut ls);
        write(&path, &ls);
        let found = fs::read(&path).expect("read");

        // Strict replay still refuses it, naming the line.
        let err = journal::replay(&path).expect_err(what);
        assert!(err.to_string().contains(&format!(":{at}")), "{what}: {err}");

        // Listed, with where the damage is, and what the intact lines say.
        let list = journal::list_runs(dir.path()).expect("list");
        assert!(list.unreadable.is_empty(), "{what}: {:?}", list.unreadable);
        assert_eq!(list.runs.len(), 1, "{what}: the damaged run is listed");
        let summary = &list.runs[0];
        let d = summary.damage.as_ref().expect("damage reported");
        assert_eq!(d.line, at, "{what}: {d}");
        assert!(
            d.to_string()
                .starts_with(&format!("damaged at line {at}: ")),
            "{d}"
        );
        // Step 2 was in flight at the damage: the run shows interrupted, so it sorts first.
        assert_eq!(summary.outcome, RunOutcome::Interrupted, "{what}");

        // A copy of the file as found, beside it, not listed as a run.
        let copy = d.copy.clone().expect("copy kept");
        assert_eq!(copy.parent(), path.parent());
        assert_eq!(fs::read(&copy).expect("copy"), found, "{what}");
        // Listing again reuses the copy.
        let again = journal::list_runs(dir.path()).expect("list");
        assert_eq!(again.runs.len(), 1);
        assert_eq!(
            again.runs[0]
                .damage
                .as_ref()
                .and_then(|d| d.copy.clone().ok()),
            Some(copy.clone())
        );
        let copies = fs::read_dir(dir.path())
            .expect("dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().contains(".damaged"))
            })
            .count();
        assert_eq!(copies, 1, "{what}");

        // Salvage: every record before the damaged line, nothing after it.
        let (replayed, damage) = journal::salvage(&path).expect("salvage");
        assert_eq!(damage.map(|d| d.line), Some(at));
        assert_eq!(replayed.records.len(), at - 2, "{what}");
        let (_, step2) = replayed.run.steps().nth(1).expect("step 2");
        assert!(
            matches!(step2.state, StepState::Interrupted { .. }),
            "{what}: {:?}",
            step2.state
        );

        // Never resumed, with the reason; the file is untouched.
        let err = Journal::resume(&path, Timestamp(9_999)).expect_err("no resume");
        let text = err.to_string();
        assert!(
            matches!(err, JournalError::Damaged { .. }),
            "{what}: {text}"
        );
        assert!(
            text.contains("cannot resume")
                && text.contains(&format!("damaged at line {at}"))
                && text.contains("never resumed"),
            "{what}: {text}"
        );
        assert_eq!(fs::read(&path).expect("read"), found, "{what}: untouched");
    }
}

#[test]
fn a_bad_header_is_named_and_copied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = interrupted_run(dir.path(), 1_000);
    let mut ls = lines(&path);
    ls[0] = ls[0].replacen("\"plan\"", "\"plan\":{},\"x\"", 1);
    write(&path, &ls);
    let found = fs::read(&path).expect("read");
    let list = journal::list_runs(dir.path()).expect("list");
    assert!(list.runs.is_empty());
    assert_eq!(list.unreadable.len(), 1);
    let text = list.unreadable[0].to_string();
    assert!(text.contains(":1:"), "{text}");
    let copy = PathBuf::from(format!("{}.damaged", path.display()));
    assert_eq!(fs::read(copy).expect("copy kept"), found);
}

fn app(dir: &Path) -> App {
    App::operate(
        ui_common::parts(dir),
        ui_common::operate_caps(&ui_common::ALL_KINDS, &ui_common::ALL_KINDS),
    )
}

#[test]
fn home_lists_damaged_runs_and_unreadable_journals_and_opens_them_read_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Older and interrupted, damaged in the middle.
    let damaged = interrupted_run(dir.path(), ui_common::T0.0 - 3_600_000);
    let mut ls = lines(&damaged);
    ls[4] = "garbage".into();
    write(&damaged, &ls);
    // Newer and finished: a readable run that once made Home hide the unreadable ones.
    let plan = health_plan();
    let (mut j, mut run) = Journal::begin(
        dir.path(),
        plan,
        Mode::Operate,
        "bob",
        Timestamp(ui_common::T0.0 - 60_000),
    )
    .expect("begin");
    for input in [
        Input::Start,
        Input::Abort {
            by: "bob".into(),
            reason: "wrong day".into(),
        },
    ] {
        j.record(&mut run, ev(ui_common::T0.0 - 59_000, input))
            .expect("record");
    }
    drop(j);
    // Not a journal at all.
    fs::write(dir.path().join("zz-broken.jsonl"), "hello\n").expect("write");

    let mut app = app(dir.path());
    let frame = ui_common::text(&ui_common::render(&mut app, 140, 34));
    assert_eq!(app.runs.len(), 2);
    assert_eq!(
        app.runs[0].path, damaged,
        "the interrupted (damaged) run stays first"
    );
    assert!(frame.contains("damaged at line 5"), "{frame}");
    assert!(
        frame.contains("zz-broken.jsonl"),
        "the unreadable journal is named although readable runs exist:\n{frame}"
    );
    assert!(
        !frame.contains("▶ resume"),
        "a damaged run is not offered for resume"
    );

    // Opening it: read-only, nothing resumed, the damage said.
    let before = fs::read(&damaged).expect("read");
    app.update(hk_console::ui::action::Action::FocusNext);
    app.update(hk_console::ui::action::Action::Open);
    assert_eq!(app.screen, Screen::Run);
    let a = app.active.as_ref().expect("opened");
    assert!(
        a.view_only && a.journal.is_none(),
        "read-only, no journal open"
    );
    let status = app.status.clone().unwrap_or_default();
    assert!(
        status.contains("damaged at line 5") && status.contains("never resumed"),
        "{status}"
    );
    assert_eq!(fs::read(&damaged).expect("read"), before);
}
