//! The `:` prompt and the `/` filter as an operator meets them: a refused command closes
//! the prompt with the reason on the status line and the next key reaches the screen; Tab
//! shows the candidates; a filter typed on Home does not follow into the run's output.

use crate::ui_common;

use crossterm::event::KeyCode;
use hk_ui::app::{App, Overlay, Screen};
use ui_common::*;

fn app(dir: &std::path::Path) -> App {
    App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS))
}

fn prompt_hint(a: &App) -> Option<String> {
    match &a.overlay() {
        Some(Overlay::Command { error, .. }) => error.clone(),
        _ => None,
    }
}

#[test]
fn a_refused_command_closes_the_prompt_and_later_keys_reach_the_screen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.handle_key(key(':'));
    type_str(&mut a, "nope");
    a.handle_key(code(KeyCode::Enter));
    assert!(a.overlay().is_none(), "{:?}", a.overlay());
    let said = a.status().map(str::to_string).unwrap_or_default();
    assert!(said.contains("unknown command `nope`"), "{said}");
    let s = text(&render(&mut a, 120, 40));
    assert!(s.contains("unknown command `nope`"), "{s}");
    // `l` now opens the Live screen: it is not typed into a prompt nobody sees.
    a.handle_key(key('l'));
    assert_eq!(a.screen(), Screen::Live);
}

#[test]
fn tab_shows_the_candidates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.handle_key(key(':'));
    type_str(&mut a, "run ");
    a.handle_key(code(KeyCode::Tab));
    let hint = prompt_hint(&a).expect("candidates shown");
    for id in [
        "cilium-endpoint-rollout",
        "node-health",
        "vpn-egress-verify",
    ] {
        assert!(hint.contains(id), "{hint}");
    }
    let s = text(&render(&mut a, 160, 45));
    assert!(s.contains("node-health"), "{s}");
    // One candidate: completed, no list.
    a.handle_key(code(KeyCode::Esc));
    a.handle_key(key(':'));
    type_str(&mut a, "chec");
    a.handle_key(code(KeyCode::Tab));
    match &a.overlay() {
        Some(Overlay::Command { text, error }) => {
            assert_eq!(text.lines().join(""), "check ");
            assert_eq!(error, &None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_home_filter_does_not_follow_into_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.handle_key(key('/'));
    type_str(&mut a, "node");
    a.handle_key(code(KeyCode::Enter));
    assert_eq!(a.filter(), Some("node"));
    a.handle_key(code(KeyCode::Enter));
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
    assert_eq!(
        a.filter(),
        None,
        "the run's output is not filtered by Home's /node"
    );
}

#[test]
fn after_a_refusal_the_next_command_is_typed_fresh_and_esc_forgets_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.handle_key(key(':'));
    type_str(&mut a, "env staging");
    a.handle_key(code(KeyCode::Enter));
    assert!(a.overlay().is_none());
    a.handle_key(code(KeyCode::Esc));
    // The next `:` opens empty, the refusal in sight: what is typed is a new command, not
    // `env stagingrun node-health`.
    a.handle_key(key(':'));
    let hint = prompt_hint(&a).expect("the refusal is shown");
    assert!(hint.contains("no environment `staging`"), "{hint}");
    let s = text(&render(&mut a, 120, 40));
    assert!(s.contains("↑ brings back `:env staging`"), "{s}");
    type_str(&mut a, "run node-health prod");
    match &a.overlay() {
        Some(Overlay::Command { text, .. }) => {
            assert_eq!(text.lines().join(""), "run node-health prod")
        }
        other => panic!("{other:?}"),
    }
    a.handle_key(code(KeyCode::Enter));
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
    assert!(a.refused_command().is_none());

    // Refused again; this time Esc in the prompt forgets it: the prompt after that is clean.
    a.handle_key(key(':'));
    type_str(&mut a, "env staging");
    a.handle_key(code(KeyCode::Enter));
    a.handle_key(key(':'));
    a.handle_key(code(KeyCode::Up));
    match &a.overlay() {
        Some(Overlay::Command { text, .. }) => assert_eq!(text.lines().join(""), "env staging"),
        other => panic!("Up recalls the refused line: {other:?}"),
    }
    a.handle_key(code(KeyCode::Esc));
    a.handle_key(key(':'));
    assert_eq!(prompt_hint(&a), None, "Esc cleared the refusal");
    a.handle_key(code(KeyCode::Up));
    match &a.overlay() {
        Some(Overlay::Command { text, .. }) => assert_eq!(text.lines().join(""), ""),
        other => panic!("{other:?}"),
    }
}

#[test]
fn help_scrolls_and_every_message_can_be_read_whole_at_80x24() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    // Help on the run view has more rows than 24 lines hold: the title says so, and the
    // last line is reached with G.
    a.open_runbook("node-health", Some("prod"), None);
    a.handle_key(key('?'));
    let s = text(&render(&mut a, 80, 24));
    assert!(s.contains("more below"), "{s}");
    assert!(
        !s.contains(":messages · :help"),
        "the last note is below: {s}"
    );
    a.handle_key(key('G'));
    let s = text(&render(&mut a, 80, 24));
    assert!(s.contains(":help"), "G shows the last lines: {s}");
    assert!(!s.contains("more below"), "{s}");
    a.handle_key(key('g'));
    let s = text(&render(&mut a, 80, 24));
    assert!(s.contains("more below"), "g is back at the top: {s}");
    a.handle_key(code(KeyCode::Esc));
    assert!(a.overlay().is_none());

    // A message wider than the terminal: cut on the status line, which says where to
    // read it; M shows it whole, with every runbook it lists.
    a.handle_key(key(':'));
    type_str(&mut a, "run cilium-rollout");
    a.handle_key(code(KeyCode::Enter));
    a.keep_status();
    let said = a.status().map(str::to_string).expect("refused");
    assert!(said.len() > 80, "{said}");
    let s = text(&render(&mut a, 80, 24));
    assert!(s.contains("M: read it whole"), "{s}");
    assert!(
        !s.contains("vpn-egress-verify"),
        "cut on the status line: {s}"
    );
    a.handle_key(key('M'));
    assert!(
        matches!(a.overlay(), Some(Overlay::Messages)),
        "{:?}",
        a.overlay()
    );
    let s = text(&render(&mut a, 80, 24));
    for id in [
        "cilium-endpoint-rollout",
        "node-health",
        "vpn-egress-verify",
    ] {
        assert!(s.contains(id), "{id} in the messages: {s}");
    }
    assert!(s.contains("no runbook `cilium-rollout`"), "{s}");
}

#[test]
fn the_reminder_of_a_hidden_gate_goes_when_the_gate_is_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
    a.handle_key(key('s'));
    // Play until the first gate, hide it, read the reminder.
    let mut hidden = None;
    for _ in 0..50 {
        if let Some(Overlay::Gate(m)) = &a.overlay() {
            hidden = Some(m.n);
            break;
        }
        if play_one(&mut a, &["ok"]).is_none() {
            break;
        }
    }
    let n = hidden.expect("a gate opened");
    a.handle_key(code(KeyCode::Esc));
    assert_eq!(
        a.status(),
        Some(format!("gate of step {n} still open: enter to answer").as_str())
    );
    // Enter brings it back; answered, the run goes on and the reminder is gone.
    a.handle_key(code(KeyCode::Enter));
    assert!(answer_gate(&mut a), "{:?}", a.overlay());
    let s = text(&render(&mut a, 160, 45));
    assert!(!s.contains("still open"), "{s}");
    assert!(
        !a.status().unwrap_or_default().contains("still open"),
        "{:?}",
        a.status()
    );
}

#[test]
fn home_lists_a_run_that_ended_elsewhere_without_leaving_home() {
    use hk_engine::runbook::machine::{RunOutcome, Timestamp};
    use hk_ui::action::Action;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut home = app(dir.path());
    assert_eq!(home.screen(), Screen::Home);
    assert!(home.runs().is_empty());
    // Another console on the same runs directory runs node-health to its end.
    let mut other = app(dir.path());
    other.open_runbook("node-health", Some("prod"), None);
    other.handle_key(key('s'));
    for _ in 0..200 {
        if answer_gate(&mut other) {
            continue;
        }
        if play_one(&mut other, &["ok"]).is_none() {
            break;
        }
    }
    assert!(!other.run_is_active(), "node-health ended");
    // Home, never left, lists it within a few seconds of ticks.
    for s in 1..=5u64 {
        home.set_now(Timestamp(T0.0 + s * 1000));
        home.update(Action::Tick);
    }
    assert_eq!(home.runs().len(), 1, "{:?}", home.runs());
    assert_eq!(home.runs()[0].outcome, RunOutcome::Succeeded);
    let s = text(&render(&mut home, 160, 45));
    assert!(s.contains("node-health"), "{s}");
}
