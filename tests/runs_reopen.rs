//! The console's Recent runs opens a run with the same record `hk-console runs show` reads,
//! output included: a node-health run on prod is driven through the console (its steps'
//! output lines go to the run's output log), then a second console on the same runs
//! directory opens it from Recent runs and its output pane holds every line the log holds,
//! under each step's header, where before it said "no output yet". An interrupted run
//! reopened for resume shows its earlier output too, and the resumed attempt's output
//! follows it. A run halted on a failed change reopens into the decision, never a retry.
use crate::ui_common;

use hk_console::journal;
use hk_console::record;
use hk_console::runbook::machine::{RunOutcome, StepState};
use hk_console::ui::action::Action;
use hk_console::ui::app::{App, Screen};
use ui_common::*;

fn console(dir: &std::path::Path) -> App {
    App::operate(parts(dir), operate_caps(&ALL_KINDS, &[]))
}

/// Every line the output pane holds now.
fn pane(app: &App) -> Vec<String> {
    let a = app.active().expect("a run is open");
    a.output
        .window(a.output.len())
        .map(str::to_string)
        .collect()
}

/// Drive node-health on prod to its end: every step's work prints two lines naming it.
fn run_node_health(dir: &std::path::Path) -> Vec<String> {
    let mut app = console(dir);
    app.open_runbook("node-health", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    app.handle_key(key('s'));
    let mut printed = Vec::new();
    for _ in 0..200 {
        if answer_gate(&mut app) {
            continue;
        }
        let Some(req) = app.outbox().front() else {
            break;
        };
        let lines = match req {
            hk_console::session::exec::ExecRequest::Execute { step, .. } => vec![
                format!("step {} says hello", step.n),
                format!("step {} is done", step.n),
            ],
            _ => vec![],
        };
        printed.extend(lines.iter().cloned());
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        play_one(&mut app, &refs);
    }
    let a = app.active().expect("run");
    assert!(
        a.run
            .steps()
            .all(|(_, r)| matches!(r.state, StepState::Done)),
        "node-health did not finish: {:?}",
        a.run.steps().map(|(_, r)| &r.state).collect::<Vec<_>>()
    );
    assert!(!printed.is_empty());
    printed
}

#[test]
fn recent_runs_opens_a_finished_run_with_its_output() {
    let dir = tempfile::tempdir().expect("tmp");
    let printed = run_node_health(dir.path());

    // Another console on the same runs directory.
    let mut app = console(dir.path());
    assert_eq!(app.runs().len(), 1);
    assert_eq!(app.runs()[0].outcome, RunOutcome::Succeeded);
    app.update(Action::FocusNext); // runbooks -> runs
    app.update(Action::Open);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    let shown = pane(&app);
    for l in &printed {
        assert!(shown.contains(l), "`{l}` is not in the pane: {shown:#?}");
    }
    // Each step's lines sit under the header the live run printed.
    let a = app.active().expect("run");
    for (p, _) in a.run.steps() {
        if let Some(at) = shown
            .iter()
            .position(|l| l == &format!("step {} says hello", p.n))
        {
            assert_eq!(shown[at - 1], record::step_header(p), "{shown:#?}");
        }
    }
    // What `runs show` prints of each step's output is in the pane: one record.
    let rec = record::load_path(&app.runs()[0].path).expect("record");
    let tails: Vec<&String> = rec.steps.iter().flat_map(|s| &s.output).collect();
    assert!(!tails.is_empty());
    for l in tails {
        assert!(shown.contains(l), "runs show has `{l}`, the pane has not");
    }
    let frame = text(&render(&mut app, 160, 45));
    assert!(!frame.contains("no output yet"), "{frame}");
    assert!(
        frame.contains("says hello") || frame.contains("is done"),
        "{frame}"
    );
}

#[test]
fn an_interrupted_run_reopened_shows_its_earlier_output_then_the_new_attempts() {
    let dir = tempfile::tempdir().expect("tmp");
    // A console that dies with step 1 running, having printed two lines.
    {
        let mut app = console(dir.path());
        app.open_runbook("node-health", Some("prod"), None);
        app.handle_key(key('s'));
        while answer_gate(&mut app) {}
        let Some(hk_console::session::exec::ExecRequest::Execute {
            step, attempt, tag, ..
        }) = app.outbox_mut().pop_front()
        else {
            panic!("step 1 should have gone to its executor");
        };
        for l in ["first attempt line 1", "first attempt line 2"] {
            app.handle_exec(hk_console::session::exec::ExecReply::Output {
                tag,
                n: step.n,
                attempt,
                line: l.into(),
            });
        }
    }
    let mut app = console(dir.path());
    assert_eq!(app.runs()[0].outcome, RunOutcome::Interrupted);
    let path = app.runs()[0].path.clone();
    app.update(Action::FocusNext);
    app.update(Action::Open);
    let a = app.active().expect("resumed");
    assert!(a.journal.is_some(), "an interrupted run reopens for resume");
    let shown = pane(&app);
    let at = shown
        .iter()
        .position(|l| l == "first attempt line 1")
        .unwrap_or_else(|| panic!("earlier output missing: {shown:#?}"));
    assert_eq!(shown[at + 1], "first attempt line 2");
    // The retry's output comes after it, under its own header.
    app.update(Action::Retry);
    play_one(&mut app, &["second attempt line"]);
    let shown = pane(&app);
    let retry = shown
        .iter()
        .position(|l| l == "second attempt line")
        .unwrap_or_else(|| panic!("retry output missing: {shown:#?}"));
    assert!(retry > at + 1, "{shown:#?}");
    // Reopened again, the log's two attempts are told apart.
    let log = journal::read_output(&path).expect("output log");
    let a = app.active().expect("run");
    let grouped = record::console_output(&a.run.plan().steps, &log);
    assert_eq!(grouped.len(), 2, "{grouped:#?}");
    assert!(grouped[1].header.ends_with("attempt 2"), "{grouped:#?}");
    assert_eq!(grouped[1].lines, ["second attempt line"]);
}

#[test]
fn console_output_of_a_step_the_plan_lacks_still_shows_it() {
    let out = record::console_output(
        &[],
        &[journal::OutputRecord {
            n: 9,
            attempt: 1,
            at: T0,
            line: "x".into(),
        }],
    );
    assert_eq!(out[0].header, "── step 9 (not in this plan) ──");
    assert_eq!(out[0].lines, ["x"]);
}

/// A run halted on a change that failed (here the apply, which this console has no
/// executor for: it was never started) reopened from Recent runs opens the decision, not a
/// one-key retry: `r` journals no retry and no attempt of the apply goes out; with nothing
/// started there is no probe to wait for, and the typed re-run goes back to the preview.
#[test]
fn a_failed_change_reopened_from_recent_runs_is_decided_not_retried() {
    use hk_console::runbook::machine::RunStatus;
    use hk_console::session::exec::ExecRequest;
    use hk_console::ui::app::Overlay;
    let dir = tempfile::tempdir().expect("tmp");
    let apply = {
        let mut app = console(dir.path());
        app.open_runbook("etcd-io-priority", Some("prod"), None);
        app.handle_key(key('s'));
        for _ in 0..200 {
            if answer_gate(&mut app) {
                continue;
            }
            if play_one(&mut app, &[]).is_none() {
                break;
            }
        }
        let a = app.active().expect("run");
        let &RunStatus::Halted { n } = a.run.status() else {
            panic!("not halted: {:?} ({:?})", a.run.status(), app.status());
        };
        assert!(a.run.plan().steps.iter().any(|s| s.n == n && s.mutates));
        n
    };
    let mut app = console(dir.path());
    assert_eq!(app.runs()[0].outcome, RunOutcome::Failed);
    let path = app.runs()[0].path.clone();
    app.update(Action::FocusNext);
    app.update(Action::Open);
    assert!(
        matches!(&app.overlay(), Some(Overlay::Resume(m)) if m.n == apply),
        "{:?}",
        app.status()
    );
    let frame = text(&render(&mut app, 160, 45));
    assert!(
        frame.contains("the executor never started its work") && frame.contains("R re-run"),
        "{frame}"
    );
    // Hidden, then `r`: the decision again, nothing journaled, nothing handed out.
    app.handle_key(code(crossterm::event::KeyCode::Esc));
    let before = std::fs::read_to_string(&path).expect("journal");
    app.handle_key(key('r'));
    assert!(
        matches!(&app.overlay(), Some(Overlay::Resume(_))),
        "{:?}",
        app.status()
    );
    assert!(
        app.status()
            .is_some_and(|s| s.contains("not re-run on one key")),
        "{:?}",
        app.status()
    );
    assert_eq!(std::fs::read_to_string(&path).expect("journal"), before);
    assert!(app.outbox().is_empty(), "{:?}", app.outbox());
    // The typed re-run: from the preview, never the apply first.
    app.handle_key(key('R'));
    type_str(&mut app, "prod");
    app.handle_key(code(crossterm::event::KeyCode::Enter));
    let text = std::fs::read_to_string(&path).expect("journal");
    assert!(text.contains(r#""type":"rerun-approved""#), "{text}");
    let first = app.outbox().front().expect("the preview goes out");
    assert!(
        matches!(first, ExecRequest::Execute { step, .. } if !step.mutates && step.n < apply),
        "{first:?}"
    );
}

/// The run active right now is listed in Recent runs as running, not as an interrupted run
/// to resume (this console holds its journal open), and Enter on it goes back to its run
/// view instead of refusing with "a run is active".
#[test]
fn the_active_run_is_listed_as_running_and_enter_goes_to_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = console(dir.path());
    app.open_runbook("node-health", Some("prod"), None);
    app.handle_key(key('s'));
    while answer_gate(&mut app) {}
    // Step 1 has gone to its executor and started: the run is mid-step.
    let Some(hk_console::session::exec::ExecRequest::Execute { .. }) = app.outbox_mut().pop_front()
    else {
        panic!("step 1 should have gone to its executor");
    };
    assert!(app.run_is_active());
    app.update(Action::Back);
    assert_eq!(app.screen(), Screen::Home);
    assert_eq!(app.runs().len(), 1, "the journal is listed");
    let frame = text(&render(&mut app, 160, 45));
    let row = frame
        .lines()
        .find(|l| l.contains("node-health on prod"))
        .unwrap_or_else(|| panic!("the run is not listed:\n{frame}"));
    assert!(row.contains("▶ running"), "{row}");
    assert!(!row.contains("resume"), "{row}");
    assert!(!row.contains("interrupted"), "{row}");
    app.update(Action::FocusNext); // runbooks -> runs
    app.update(Action::Open);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    assert!(
        !app.status().unwrap_or_default().contains("a run is active"),
        "{:?}",
        app.status()
    );
    let a = app.active().expect("still the same run");
    assert!(a.journal.is_some() && a.session.is_active());
}

/// Where the journals do not outlive the console (the demo without `--dir` deletes its
/// directory on exit), the quit question says what quitting loses instead of promising a
/// resume from Home; elsewhere it still says the journal keeps the run.
#[test]
fn the_quit_question_says_what_a_throwaway_demo_loses() {
    fn quit_question(discarded: Option<&str>) -> String {
        let dir = tempfile::tempdir().expect("tmp");
        let mut app = console(dir.path());
        app.set_runs_discarded(discarded.map(str::to_string));
        app.open_runbook("node-health", Some("prod"), None);
        app.handle_key(key('s'));
        while answer_gate(&mut app) {}
        assert!(app.run_is_active());
        app.handle_key(key('q'));
        let frame = text(&render(&mut app, 160, 45));
        // The modal wraps: its words, borders and line ends dropped.
        frame
            .replace(['│', '┌', '┐', '└', '┘', '─'], " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
    let lost = "this demo's directory, its journals with it, is deleted when the console \
                exits: no run in it can be resumed or shown again (`demo --dir DIR` keeps them)";
    let said = quit_question(Some(lost));
    assert!(said.contains("Quit anyway?"), "{said}");
    assert!(said.contains("no run in it can be resumed"), "{said}");
    assert!(!said.contains("resume it from Home"), "{said}");
    let said = quit_question(None);
    assert!(
        said.contains("the journal keeps the run (resume it from Home)"),
        "{said}"
    );
}

/// Issue 38: quitting a throwaway demo whose run has finished asked nothing, although its
/// journals go with it. With journals in the directory `q` asks, naming how many and the
/// loss; `n` keeps the console; with none it quits at once.
#[test]
fn quitting_a_throwaway_demo_with_finished_runs_names_the_journals_lost() {
    let lost = "this demo's directory, its journals with it, is deleted when the console \
                exits: no run in it can be resumed or shown again (`demo --dir DIR` keeps them)";
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = console(dir.path());
    app.set_runs_discarded(Some(lost.to_string()));
    assert_eq!(app.runs().len(), 0);
    assert!(
        matches!(app.update(Action::Quit), hk_console::ui::app::Control::Quit),
        "no journal: nothing is lost, no question"
    );
    run_node_health(dir.path());
    let mut app = console(dir.path());
    app.set_runs_discarded(Some(lost.to_string()));
    app.refresh_runs();
    assert_eq!(app.runs().len(), 1, "the finished run's journal");
    app.handle_key(key('q'));
    let frame = text(&render(&mut app, 80, 24))
        .replace(['│', '┌', '┐', '└', '┘', '─'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        frame.contains("Quit? This demo's directory and its 1 run journal(s) are")
            && frame.contains("deleted when the console exits (`demo --dir DIR` keeps them)."),
        "{frame}"
    );
}
