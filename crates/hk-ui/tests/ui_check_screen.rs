//! The Check screen is reachable: `c` from Home and Live, `:check` (which runs the check
//! again), `x` on a parity verdict; Back returns where it came from; a filter typed on it
//! is its own and goes when it is left.

use crate::ui_common;

use std::sync::Arc;

use crossterm::event::KeyCode;
use hk_engine::checks::parity::{Finding, Severity};
use hk_ui::app::{App, Screen};
use hk_ui::panes::check::CheckView;
use ui_common::*;

fn view() -> CheckView {
    CheckView {
        findings: Some(Ok(vec![Finding {
            rule: "helmrelease-port-equals-api-port",
            severity: Severity::Violation,
            env: Some("prod".into()),
            file: "platform/cilium/helmrelease.yaml".into(),
            line: 20,
            message: "HelmRelease kube-system/cilium sets k8sServicePort to 6443, but \
                      k3s_api_port is 6444"
                .into(),
        }])),
        engine_line: Some("engine: builtin".into()),
        ran_at: Some("12:00:01".into()),
    }
}

fn app(dir: &std::path::Path) -> App {
    let mut a = App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS));
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&runs);
    a.set_checker(Some(Arc::new(move || {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        view()
    })));
    a
}

#[test]
fn c_opens_the_findings_with_file_and_line_and_back_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.run_check();
    a.handle_key(key('c'));
    assert_eq!(a.screen(), Screen::Check);
    let s = text(&render(&mut a, 160, 45));
    assert!(
        s.contains("platform/cilium/helmrelease.yaml:20: [helmrelease-port-equals-api-port]"),
        "{s}"
    );
    assert!(s.contains("· check"), "the header names the screen:\n{s}");
    a.handle_key(code(KeyCode::Esc));
    assert_eq!(a.screen(), Screen::Home);
    // From Live, back to Live.
    a.handle_key(key('l'));
    assert_eq!(a.screen(), Screen::Live);
    a.handle_key(key('c'));
    assert_eq!(a.screen(), Screen::Check);
    a.handle_key(key('c'));
    assert_eq!(a.screen(), Screen::Live);
}

#[test]
fn colon_check_runs_it_again_and_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    assert!(a.check().findings.is_none());
    a.handle_key(key(':'));
    type_str(&mut a, "check");
    a.handle_key(code(KeyCode::Enter));
    assert_eq!(a.screen(), Screen::Check);
    assert!(a.check().findings.is_some(), "the check ran");
    let said = a.status().map(str::to_string).unwrap_or_default();
    assert!(said.contains("1 violation"), "{said}");
}

#[test]
fn a_filter_on_the_check_screen_is_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.run_check();
    a.handle_key(key('c'));
    a.handle_key(key('/'));
    type_str(&mut a, "no-such-rule");
    a.handle_key(code(KeyCode::Enter));
    let s = text(&render(&mut a, 160, 45));
    assert!(!s.contains("helmrelease.yaml:20"), "filtered out:\n{s}");
    a.handle_key(key('c'));
    assert_eq!(a.screen(), Screen::Home);
    assert!(
        a.filter().is_none(),
        "the Check screen's filter stays with it"
    );
    let s = text(&render(&mut a, 160, 45));
    assert!(
        s.contains("cilium-endpoint-rollout"),
        "home lists unfiltered:\n{s}"
    );
}
