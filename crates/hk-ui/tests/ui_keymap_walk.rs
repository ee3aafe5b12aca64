//! Every key the help overlay lists, per screen, does something: for each binding `?`
//! shows, the app is put in a state where that key has work to do (a plan to start, a
//! halted run, a hidden gate, output to search) and pressing it must change what the
//! operator sees (screen, overlay, status line, selection, focus, the run) or quit.
//! A binding with no scenario here fails the test, so a new key cannot be listed unproven.

use crate::ui_common;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hk_engine::runbook::machine::Input;
use hk_session::exec::{ExecReply, ExecRequest};
use hk_ui::action::Action;
use hk_ui::app::{App, Control, Overlay, Screen};
use hk_ui::keymap::{Key, KeyCodeOrd, KeyMode};
use ui_common::*;

fn app(dir: &std::path::Path) -> App {
    let mut a = App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS));
    a.update(Action::Resize(160, 45));
    a
}

/// What the operator can see change.
fn fingerprint(a: &App) -> String {
    let run = a.active().map(|r| {
        format!(
            "{:?} sel={} out={:?} steps={:?}",
            r.run.status(),
            r.selected,
            r.output,
            r.run
                .steps()
                .map(|(_, x)| x.state.clone())
                .collect::<Vec<_>>()
        )
    });
    format!(
        "{:?} {:?} {:?} {:?} {} {} {} {:?} {:?} {:?} {:?} {} {} {} {:?} wrap={} help={}",
        a.screen(),
        a.overlay(),
        a.home_focus(),
        a.run_focus(),
        a.home_selection().0,
        a.home_selection().1,
        a.home_selection().2,
        a.current_env(),
        a.status(),
        a.filter(),
        a.search_at(),
        a.live_scroll(),
        a.check_scroll(),
        a.outbox().len(),
        run,
        a.output_wrap(),
        a.help_scroll()
    )
}

fn event(k: &Key) -> KeyEvent {
    let code = match k.code {
        KeyCodeOrd::Char(c) => KeyCode::Char(c),
        KeyCodeOrd::Enter => KeyCode::Enter,
        KeyCodeOrd::Esc => KeyCode::Esc,
        KeyCodeOrd::Tab => KeyCode::Tab,
        KeyCodeOrd::BackTab => KeyCode::BackTab,
        KeyCodeOrd::Up => KeyCode::Up,
        KeyCodeOrd::Down => KeyCode::Down,
        KeyCodeOrd::Left => KeyCode::Left,
        KeyCodeOrd::Right => KeyCode::Right,
        KeyCodeOrd::PageUp => KeyCode::PageUp,
        KeyCodeOrd::PageDown => KeyCode::PageDown,
        KeyCodeOrd::Home => KeyCode::Home,
        KeyCodeOrd::End => KeyCode::End,
    };
    let mut m = KeyModifiers::NONE;
    if k.ctrl {
        m |= KeyModifiers::CONTROL;
    }
    if k.alt {
        m |= KeyModifiers::ALT;
    }
    KeyEvent::new(code, m)
}

/// Home with the selection in the middle of the runbooks and a filter that matches all.
fn home(dir: &std::path::Path, action: &Action) -> App {
    let mut a = app(dir);
    a.select_home(hk_ui::app::HomeFocus::Runbooks, 2);
    if *action == Action::Back {
        a.set_filter(Some("e".into()));
    }
    a
}

/// A plan opened and not started (node-health on dev: read-only steps).
fn plan_open(dir: &std::path::Path) -> App {
    let mut a = app(dir);
    a.open_runbook("node-health", Some("dev"), None);
    assert_eq!(a.screen(), Screen::Run);
    a
}

/// etcd-io-priority on prod, started, its first gate answered and hidden again with Esc.
fn started(dir: &std::path::Path) -> App {
    let mut a = app(dir);
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    a.update(Action::StartRun);
    a
}

/// A started run whose gate modal was hidden with Esc.
fn hidden_gate(dir: &std::path::Path) -> App {
    let mut a = started(dir);
    // Play up to the first gate the run asks.
    for _ in 0..10 {
        if matches!(a.overlay(), Some(Overlay::Gate(_))) {
            break;
        }
        play_one(&mut a, &["hosts (1):", "  k3s-prod-3"]);
    }
    assert!(
        matches!(a.overlay(), Some(Overlay::Gate(_))),
        "a gate opens"
    );
    a.handle_key(code(KeyCode::Esc));
    assert!(a.overlay().is_none());
    a
}

/// A run halted on a failed read-only step (node-health's list-hosts failing).
fn halted(dir: &std::path::Path) -> App {
    let mut a = app(dir);
    a.open_runbook("node-health", Some("dev"), None);
    a.update(Action::StartRun);
    let req = a.outbox_mut().pop_front().expect("execute");
    let ExecRequest::Execute {
        tag, step, attempt, ..
    } = req
    else {
        panic!("{req:?}")
    };
    a.handle_exec(ExecReply::Outcome {
        tag,
        input: Input::StepFinished {
            n: step.n,
            attempt,
            exit_code: Some(4),
            error: None,
        },
    });
    a.set_status(None);
    a
}

/// A run with a step running and output to search (`/` applied).
fn running_with_output(dir: &std::path::Path, search: bool) -> App {
    let mut a = app(dir);
    a.open_runbook("node-health", Some("dev"), None);
    a.update(Action::StartRun);
    let req = a.outbox_mut().pop_front().expect("execute");
    let ExecRequest::Execute {
        tag, step, attempt, ..
    } = req
    else {
        panic!("{req:?}")
    };
    for i in 0..60 {
        a.handle_exec(ExecReply::Output {
            tag,
            n: step.n,
            attempt,
            line: if i % 10 == 0 {
                format!("match {i}")
            } else {
                format!("line {i}")
            },
        });
    }
    if search {
        a.set_filter(Some("match".into()));
    }
    a.set_status(None);
    a
}

fn scenario(mode: KeyMode, action: &Action, dir: &std::path::Path) -> Option<App> {
    let a = match (mode, action) {
        (KeyMode::Home, a) => home(dir, a),
        (KeyMode::Run, Action::Open) => hidden_gate(dir),
        (KeyMode::Run, Action::Retry | Action::Skip) => halted(dir),
        (KeyMode::Run, Action::Abort) => started(dir),
        (KeyMode::Run, Action::Interrupt) => running_with_output(dir, false),
        (KeyMode::Run, Action::ToggleFollow | Action::ToggleWrap) => {
            running_with_output(dir, false)
        }
        (KeyMode::Run, Action::NextMatch | Action::PrevMatch) => running_with_output(dir, true),
        (KeyMode::Run, Action::PageUp) => running_with_output(dir, false),
        (KeyMode::Run, Action::PageDown) => {
            // Scrolled up, so there is somewhere to page down to.
            let mut a = running_with_output(dir, false);
            if let Some(r) = a.active_mut() {
                r.output.scroll_up(40);
            }
            a
        }
        (KeyMode::Run, Action::Up | Action::Top) => {
            let mut a = plan_open(dir);
            if let Some(r) = a.active_mut() {
                r.selected = 2;
            }
            a
        }
        (KeyMode::Run, _) => plan_open(dir),
        (KeyMode::Live, a) => {
            let mut x = home(dir, a);
            x.update(Action::Live);
            x.set_live_scroll(1);
            x
        }
        (KeyMode::Check, a) => {
            let mut x = home(dir, a);
            x.update(Action::Check);
            // Findings enough to scroll through, one line down already.
            x.set_check(hk_ui::panes::check::CheckView {
                findings: Some(Ok((1..=40)
                    .map(|i| hk_engine::checks::parity::Finding {
                        rule: "k3s-api-host",
                        severity: hk_engine::checks::parity::Severity::Violation,
                        env: Some("prod".into()),
                        file: "clusters/prod/kustomization.yaml".into(),
                        line: i,
                        message: format!("finding {i}"),
                    })
                    .collect())),
                engine_line: None,
                ran_at: None,
            });
            x.set_check_scroll(1);
            x
        }
        (KeyMode::Help, _) => {
            let mut x = home(dir, action);
            x.update(Action::Help);
            // A short terminal, help drawn once and scrolled one line: every reading key
            // has somewhere to go.
            let _ = ui_common::render(&mut x, 80, 12);
            x.set_help_scroll(1);
            x
        }
    };
    Some(a)
}

#[test]
fn every_key_help_lists_does_something_on_every_screen() {
    let dir = tempfile::tempdir().expect("tmp");
    let maps = hk_ui::keymap::Keymaps::default();
    let mut checked = 0;
    for mode in [
        KeyMode::Home,
        KeyMode::Run,
        KeyMode::Live,
        KeyMode::Check,
        KeyMode::Help,
    ] {
        let map = maps.get(mode).expect("keymap");
        for (keys, what) in map.help_rows() {
            for k in keys.split(' ') {
                let key = Key::parse(k).expect("help prints parseable keys");
                let action = map.get(&key).cloned().expect("a listed key is bound");
                let runs = tempfile::tempdir_in(dir.path()).expect("runs dir");
                let mut a = scenario(mode, &action, runs.path())
                    .unwrap_or_else(|| panic!("{mode:?} {k}: no scenario for {action:?}"));
                let before = fingerprint(&a);
                let control = a.handle_key(event(&key));
                let after = fingerprint(&a);
                assert!(
                    control == Control::Quit || before != after,
                    "{mode:?}: `{k}` ({what}) did nothing.\nstatus: {:?}",
                    a.status()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "only {checked} bindings walked");
}

/// The case: Esc on a gate hides it, Enter brings it back.
#[test]
fn enter_reopens_a_hidden_gate() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = hidden_gate(dir.path());
    a.handle_key(code(KeyCode::Enter));
    assert!(
        matches!(a.overlay(), Some(Overlay::Gate(_))),
        "{:?}",
        a.status()
    );
}
