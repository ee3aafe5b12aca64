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
    assert_eq!(app.runs().len(), 2);
    assert_eq!(
        app.runs()[0].path,
        damaged,
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
    assert_eq!(app.screen(), Screen::Run);
    let a = app.active().expect("opened");
    assert!(
        a.view_only && a.journal.is_none(),
        "read-only, no journal open"
    );
    let status = app.status().map(str::to_string).unwrap_or_default();
    assert!(
        status.contains("damaged at line 5") && status.contains("never resumed"),
        "{status}"
    );
    assert_eq!(fs::read(&damaged).expect("read"), before);
}

/// `hk-console runs ARGS` with its state under `state`: (exit code, stdout, stderr).
fn runs_cmd(
    state: &Path,
    args: &[&str],
    stdout: std::process::Stdio,
) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hk-console"))
        .arg("runs")
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env_remove("HK_REPO")
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run hk-console");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn piped() -> std::process::Stdio {
    std::process::Stdio::piped()
}

/// What a journal's gate answer held in issue 34: it retitled and cleared the terminal.
const ATTACK: &str = "mallory\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{202e}";

/// A run whose gate was answered by (and noted with) [`ATTACK`].
fn hostile_run(dir: &Path) -> String {
    use hk_console::runbook::machine::GateAnswer;
    let path = record_health_run(
        dir,
        1_000,
        vec![
            Input::Start,
            Input::GateAnswered {
                n: 1,
                answer: GateAnswer::Approved {
                    by: ATTACK.into(),
                    note: Some(format!("{ATTACK} | ### not a heading")),
                },
            },
        ],
    );
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .expect("run id")
}

/// Issue 34: `runs show` wrote a journal's control characters raw (text and md): they are
/// written out, in every format; `runs list` too.
#[test]
fn runs_show_writes_out_a_journals_control_characters() {
    let state = tempfile::tempdir().expect("tempdir");
    let runs = state.path().join("runs");
    let id = hostile_run(&runs);
    let dir = runs.to_str().expect("utf-8 path");
    for format in ["text", "md", "json"] {
        let (code, out, err) = runs_cmd(
            state.path(),
            &["show", &id, "--format", format, "--dir", dir],
            piped(),
        );
        assert_eq!(code, Some(0), "{format}: {err}");
        for c in ['\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(!out.contains(c), "{format}: raw {c:?} in:\n{out}");
        }
        assert!(
            out.contains("PWNED"),
            "{format}: the value is shown:\n{out}"
        );
    }
    let (_, md, _) = runs_cmd(
        state.path(),
        &["show", &id, "--format", "md", "--dir", dir],
        piped(),
    );
    assert!(
        !md.lines()
            .any(|l| l.starts_with("###") && l.contains("not a heading")),
        "{md}"
    );
    let (code, list, err) = runs_cmd(state.path(), &["list", "--dir", dir], piped());
    assert_eq!(code, Some(0), "{err}");
    assert!(!list.contains('\u{1b}'), "{list}");
}

/// Issue 34: `runs list` / `runs show` panicked (exit 101) when stdout could not be
/// written; like every other command they exit 2 saying so.
#[test]
fn runs_commands_say_they_cannot_write_to_a_full_stdout() {
    let state = tempfile::tempdir().expect("tempdir");
    let runs = state.path().join("runs");
    let id = hostile_run(&runs);
    let dir = runs.to_str().expect("utf-8 path");
    for args in [
        vec!["list", "--dir", dir],
        vec!["list", "--json", "--dir", dir],
        vec!["show", id.as_str(), "--dir", dir],
        vec!["show", id.as_str(), "--format", "md", "--dir", dir],
    ] {
        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let (code, _, err) = runs_cmd(state.path(), &args, full.into());
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to stdout") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 34: a journal that is a symlink (here to a file outside the runs directory, as
/// `x.jsonl -> /etc/shadow`) had its target's bytes copied into the runs directory as
/// `x.jsonl.damaged`. It is listed as refused, never read or copied.
#[test]
fn a_symlinked_journal_is_refused_and_never_copied() {
    let state = tempfile::tempdir().expect("tempdir");
    let runs = state.path().join("runs");
    hostile_run(&runs);
    let secret = state.path().join("secret");
    fs::write(&secret, "root:$6$secret-hash:19000:0:99999:7:::\n").expect("secret");
    std::os::unix::fs::symlink(&secret, runs.join("x.jsonl")).expect("symlink");
    let before: Vec<_> = fs::read_dir(&runs)
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    let dir = runs.to_str().expect("utf-8 path");
    for json in [false, true] {
        let args = if json {
            vec!["list", "--json", "--dir", dir]
        } else {
            vec!["list", "--dir", dir]
        };
        let (code, out, err) = runs_cmd(state.path(), &args, piped());
        assert_eq!(code, Some(0), "{err}");
        assert!(
            out.contains("x.jsonl") && out.contains("a symlink, not a journal: refused"),
            "{out}"
        );
        assert!(!out.contains("secret-hash"), "{out}");
    }
    let after: Vec<_> = fs::read_dir(&runs)
        .expect("ls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(before, after, "nothing was written into the runs directory");
    assert!(!runs.join("x.jsonl.damaged").exists());
    // The engine's own calls: salvage and the copy refuse the link too.
    assert!(journal::salvage(&runs.join("x.jsonl")).is_err());
    let copy = journal::keep_damaged_copy(&runs.join("x.jsonl"));
    assert!(
        copy.as_ref()
            .is_err_and(|e| e.to_string().contains("a symlink, not a journal")),
        "{copy:?}"
    );
    // An output log or journal opened for appending through a link is refused.
    let appended = journal::open_private_append(&runs.join("x.jsonl"));
    assert!(appended.is_err(), "appended through a symlink");
    // Resume and the output log reader refuse it too.
    let resumed = journal::Journal::resume(&runs.join("x.jsonl"), journal::now());
    assert!(
        resumed
            .as_ref()
            .is_err_and(|e| e.to_string().contains("a symlink, not a journal")),
        "resumed through a symlink"
    );
    std::os::unix::fs::symlink(&secret, runs.join("y.output.jsonl")).expect("symlink");
    let output = journal::read_output(&runs.join("y.jsonl"));
    assert!(
        output
            .as_ref()
            .is_err_and(|e| e.to_string().contains("a symlink, not a journal")),
        "{output:?}"
    );
    assert_eq!(
        fs::read_to_string(&secret).expect("secret"),
        "root:$6$secret-hash:19000:0:99999:7:::\n"
    );
}

/// Issue 34: a runs directory that is a symlink was written through and its target
/// chmod'ed to 0700; a `--dir` that does not exist read as "no runs" (exit 0).
#[test]
fn a_symlinked_or_missing_runs_directory_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let state = tempfile::tempdir().expect("tempdir");
    let target = state.path().join("shared");
    fs::create_dir(&target).expect("mkdir");
    fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).expect("chmod");
    let link = state.path().join("runs-link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let mode = || fs::metadata(&target).expect("stat").permissions().mode() & 0o777;

    let (code, _, err) = runs_cmd(
        state.path(),
        &["list", "--dir", link.to_str().expect("utf-8")],
        piped(),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("runs-link") && err.contains("a symlink"),
        "{err}"
    );

    let made = journal::create_private_dir(&link);
    assert!(
        made.as_ref()
            .is_err_and(|e| e.to_string().contains("a symlink, not a runs directory")),
        "{made:?}"
    );
    assert!(journal::list_runs(&link).is_err());
    assert!(journal::open_private_append(&link.join("r.out.jsonl")).is_err());
    assert_eq!(mode(), 0o755, "the link's target was chmod'ed");
    assert_eq!(
        fs::read_dir(&target).expect("ls").count(),
        0,
        "written through"
    );

    let missing = state.path().join("no-such-runs");
    let (code, out, err) = runs_cmd(
        state.path(),
        &["list", "--dir", missing.to_str().expect("utf-8")],
        piped(),
    );
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("no-such-runs"), "{err}");
}
