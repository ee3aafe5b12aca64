//! The `:` prompt and the `/` filter as an operator meets them: a refused command closes
//! the prompt with the reason on the status line and the next key reaches the screen; Tab
//! shows the candidates; a filter typed on Home does not follow into the run's output.

mod ui_common;

use crossterm::event::KeyCode;
use hk_console::ui::app::{App, Overlay, Screen};
use ui_common::*;

fn app(dir: &std::path::Path) -> App {
    App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS))
}

fn prompt_hint(a: &App) -> Option<String> {
    match &a.overlay {
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
    assert!(a.overlay.is_none(), "{:?}", a.overlay);
    let said = a.status.clone().unwrap_or_default();
    assert!(said.contains("unknown command `nope`"), "{said}");
    let s = text(&render(&mut a, 120, 40));
    assert!(s.contains("unknown command `nope`"), "{s}");
    // `l` now opens the Live screen: it is not typed into a prompt nobody sees.
    a.handle_key(key('l'));
    assert_eq!(a.screen, Screen::Live);
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
    match &a.overlay {
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
    assert_eq!(a.filter.as_deref(), Some("node"));
    a.handle_key(code(KeyCode::Enter));
    assert_eq!(a.screen, Screen::Run, "{:?}", a.status);
    assert_eq!(
        a.filter, None,
        "the run's output is not filtered by Home's /node"
    );
}
