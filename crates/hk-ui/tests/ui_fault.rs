//! `:fault ENV FAULT [ARG]` on the console's command line: it reaches the fault sink the
//! demo gives the console, with the words typed; the reply is on the status line, a refusal
//! reopens the command line. Without a sink (not the demo) and in observe mode it is refused
//! and the sink is never called. The sink here records and answers; what the simulation does
//! with a fault is crates/hk-sim/tests/sim_fault.rs.
use crate::ui_common;

use std::sync::{Arc, Mutex};

use crossterm::event::KeyCode;
use hk_session::exec::ReadOnlyExecutors;
use hk_ui::app::{App, Overlay};
use hk_ui::{FaultRefused, FaultSink};
use ui_common::*;

/// Records every call; answers `holder-dies` and refuses anything else.
#[derive(Default)]
struct RecordingSink {
    calls: Mutex<Vec<(String, String)>>,
}

impl RecordingSink {
    fn calls(&self) -> Vec<(String, String)> {
        self.calls.lock().expect("lock").clone()
    }
}

impl FaultSink for RecordingSink {
    fn inject(&self, env: &str, words: &str) -> Result<String, FaultRefused> {
        self.calls
            .lock()
            .expect("lock")
            .push((env.to_string(), words.to_string()));
        match words {
            "holder-dies" => Ok(format!("{env}: k3s-{env}-1 (lease holder) died")),
            other => Err(FaultRefused(format!(
                "unknown fault `{other}`: expected one of holder-dies"
            ))),
        }
    }

    fn usage(&self) -> String {
        "usage: :fault ENV FAULT (ENV: dev, prod; FAULT: holder-dies)".into()
    }

    fn fault_names(&self) -> Vec<String> {
        ["holder-dies", "agent-drifts", "vpn-down", "vpn-up"]
            .map(String::from)
            .to_vec()
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn demo_app(dir: &std::path::Path, sink: &Arc<RecordingSink>) -> App {
    let mut p = parts(dir);
    p.faults = Some(sink.clone());
    App::operate(p, operate_caps(&ALL_KINDS, &ALL_KINDS))
}

/// Type `:LINE` and Enter, as the operator does.
fn command(app: &mut App, line: &str) {
    if matches!(app.overlay(), Some(Overlay::Command { .. })) {
        app.handle_key(code(KeyCode::Esc));
    }
    app.handle_key(key(':'));
    assert!(
        matches!(app.overlay(), Some(Overlay::Command { .. })),
        "`:` opens the command line"
    );
    type_str(app, line);
    app.handle_key(code(KeyCode::Enter));
}

/// A refused command: the prompt closed, the status line says why, and the next `:` opens
/// an empty prompt with the reason, Up bringing back the line. The recalled line and reason (None: not refused).
fn command_error(app: &mut App) -> Option<(String, Option<String>)> {
    app.refused_command()?;
    assert!(
        app.overlay().is_none(),
        "a refused command closes the prompt"
    );
    let said = app.status().map(str::to_string).unwrap_or_default();
    let (_, why) = app.refused_command().cloned().expect("refused");
    assert!(said.contains(&why), "the status line says why: {said}");
    app.handle_key(key(':'));
    // The prompt opens empty (what is typed next is a new command); Up recalls the line.
    match &app.overlay() {
        Some(Overlay::Command { text, .. }) => {
            assert_eq!(text.lines().join(""), "", "the prompt opens empty")
        }
        other => panic!("`:` opens the command line: {other:?}"),
    }
    app.handle_key(code(KeyCode::Up));
    let recalled = match &app.overlay() {
        Some(Overlay::Command { text, error }) => Some((text.lines().join(" "), error.clone())),
        _ => None,
    };
    app.handle_key(code(KeyCode::Esc));
    recalled
}

#[test]
fn fault_reaches_the_sink_and_its_reply_is_on_the_status_line() {
    let dir = tmp();
    let sink = Arc::new(RecordingSink::default());
    let mut app = demo_app(dir.path(), &sink);
    command(&mut app, "fault prod holder-dies");
    assert_eq!(
        sink.calls(),
        vec![("prod".to_string(), "holder-dies".to_string())]
    );
    assert!(app.overlay().is_none(), "the command line closes");
    assert_eq!(app.status(), Some("prod: k3s-prod-1 (lease holder) died"));
    let screen = text(&render(&mut app, 120, 30));
    assert!(
        screen.contains("prod: k3s-prod-1 (lease holder) died"),
        "{screen}"
    );

    // The argument goes with the fault name, spaces normalised.
    command(&mut app, "fault  dev   agent-drifts   2");
    assert_eq!(
        sink.calls()[1],
        ("dev".to_string(), "agent-drifts 2".to_string())
    );
    // The sink's refusal reopens the command line with the line and the reason.
    let (line, error) = command_error(&mut app).expect("command line reopened");
    assert_eq!(line, "fault  dev   agent-drifts   2");
    assert_eq!(
        error.as_deref(),
        Some("unknown fault `agent-drifts 2`: expected one of holder-dies")
    );
}

#[test]
fn fault_without_an_environment_shows_the_usage_and_calls_nothing() {
    let dir = tmp();
    let sink = Arc::new(RecordingSink::default());
    let mut app = demo_app(dir.path(), &sink);
    command(&mut app, "fault");
    let (_, error) = command_error(&mut app).expect("command line reopened");
    assert_eq!(error, Some(sink.usage()));
    assert!(sink.calls().is_empty());
}

#[test]
fn without_a_sink_fault_is_refused_as_demo_only() {
    let dir = tmp();
    let mut app = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    command(&mut app, "fault prod holder-dies");
    let (line, error) = command_error(&mut app).expect("command line reopened");
    assert_eq!(line, "fault prod holder-dies");
    assert_eq!(
        error.as_deref(),
        Some("`:fault` works only in the simulated demo (hk-console demo)")
    );
    // The status line holds the refusal, never a success.
    assert_eq!(
        app.status(),
        Some("✗ :fault prod holder-dies: `:fault` works only in the simulated demo (hk-console demo)")
    );
}

#[test]
fn observe_mode_refuses_fault_and_never_calls_the_sink() {
    let dir = tmp();
    let sink = Arc::new(RecordingSink::default());
    let refusal = "observe mode changes nothing, not even the simulation";

    // Built in observe mode.
    let mut p = parts(dir.path());
    p.faults = Some(sink.clone());
    let mut app = App::observe(p, ReadOnlyExecutors::default());
    command(&mut app, "fault prod holder-dies");
    let (_, error) = command_error(&mut app).expect("command line reopened");
    assert_eq!(error.as_deref(), Some(refusal));

    // The demo console switched to observe mode with `:observe`.
    let mut app = demo_app(dir.path(), &sink);
    command(&mut app, "observe");
    assert!(app.is_observe());
    command(&mut app, "fault prod holder-dies");
    let (_, error) = command_error(&mut app).expect("command line reopened");
    assert_eq!(error.as_deref(), Some(refusal));
    command(&mut app, "fault");
    assert_eq!(
        command_error(&mut app).expect("reopened").1.as_deref(),
        Some(refusal)
    );

    assert!(sink.calls().is_empty(), "{:?}", sink.calls());
}

#[test]
fn tab_completes_fault_its_environment_and_the_fault_name() {
    let dir = tmp();
    let sink = Arc::new(RecordingSink::default());
    let app = demo_app(dir.path(), &sink);
    assert_eq!(app.complete("fa"), "fault ");
    assert_eq!(app.complete("fault p"), "fault prod");
    assert_eq!(app.complete("fault prod h"), "fault prod holder-dies");
    assert_eq!(app.complete("fault prod ag"), "fault prod agent-drifts");
    assert_eq!(app.complete("fault prod vpn"), "fault prod vpn-");
    assert_eq!(app.complete("fault prod vpn-u"), "fault prod vpn-up");
    assert_eq!(app.complete("fault prod zz"), "fault prod zz");
    // Without a sink there is no fault name to offer.
    let plain = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    assert_eq!(plain.complete("fault prod h"), "fault prod h");
    assert!(sink.calls().is_empty(), "completion injects nothing");
}

#[test]
fn the_unknown_command_message_lists_fault_in_the_demo_only() {
    let dir = tmp();
    let sink = Arc::new(RecordingSink::default());
    let mut app = demo_app(dir.path(), &sink);
    command(&mut app, "frobnicate");
    let (_, error) = command_error(&mut app).expect("reopened");
    assert!(
        error.as_deref().is_some_and(|e| e.contains("fault")),
        "{error:?}"
    );
    let mut plain = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    command(&mut plain, "frobnicate");
    let (_, error) = command_error(&mut plain).expect("reopened");
    assert!(
        error.as_deref().is_some_and(|e| !e.contains("fault")),
        "{error:?}"
    );
}
