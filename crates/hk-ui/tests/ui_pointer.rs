//! The host picker and mouse clicks, driven through the app as the terminal would
//! (synthetic crossterm key and mouse events), drawn on a TestBackend.
//! - A runbook that runs on one host, opened from Home, opens a picker of the hosts the
//!   planner itself names; enter plans for the selected host, esc cancels.
//! - A left click selects a list row (a second click opens it), presses a gate's or a
//!   question's button, and does nothing to the screen under an open overlay.

use crate::ui_common;

use crossterm::event::{KeyCode, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use hk_engine::runbook::plan::PlanError;
use hk_session::PlanSourceError;
use hk_ui::action::Action;
use hk_ui::app::{App, Control, HomeFocus, Overlay, Screen};
use hk_ui::PlanSource;
use ui_common::*;

fn app(dir: &std::path::Path) -> App {
    let mut a = App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS));
    a.update(Action::Resize(120, 40));
    a
}

fn click_at(a: &mut App, col: u16, row: u16) -> Control {
    a.handle_mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: col,
        row,
        modifiers: KeyModifiers::NONE,
    })
}

/// Where `needle` is drawn on `frame` (column, row), the first time.
fn find(frame: &str, needle: &str) -> (u16, u16) {
    for (row, line) in frame.lines().enumerate() {
        // Each line of the TestBackend's text is quoted: column 0 is after the quote.
        let line = line.strip_prefix('"').unwrap_or(line);
        if let Some(at) = line.find(needle) {
            let col = line[..at].chars().count();
            return (
                u16::try_from(col).expect("col"),
                u16::try_from(row).expect("row"),
            );
        }
    }
    panic!("`{needle}` is not on the screen:\n{frame}");
}

/// The hosts the planner names when a single-host runbook is planned without one.
fn planner_hosts(id: &str, env: &str) -> Vec<String> {
    let set = hk_engine::runbook::embedded::load(&[]).expect("runbooks");
    let rb = set.get(id).expect("runbook");
    match FakePlans.plan(rb, env, None) {
        Err(PlanSourceError::Plan(PlanError::NoHostChosen { hosts, .. })) => {
            hosts.split(", ").map(str::to_string).collect()
        }
        other => panic!("{id} on {env} should want a host: {:?}", other.map(|_| ())),
    }
}

fn select_runbook(a: &mut App, id: &str) {
    let sel = a
        .visible_runbooks()
        .iter()
        .position(|r| r.id == id)
        .unwrap_or_else(|| panic!("{id} listed"));
    a.select_home(HomeFocus::Runbooks, sel);
}

#[test]
fn a_single_host_runbook_opens_a_picker_of_the_planners_hosts() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = app(dir.path());
    a.set_current_env(Some("prod".into()));
    select_runbook(&mut a, "reprovision-node");
    a.handle_key(code(KeyCode::Enter));
    let Some(Overlay::HostPicker(p)) = &a.overlay() else {
        panic!("no picker: {:?}", a.status());
    };
    let want = planner_hosts("reprovision-node", "prod");
    assert!(want.len() >= 2, "{want:?}");
    assert_eq!(p.hosts, want, "the planner's own hosts");
    assert_eq!(p.env, "prod");
    assert!(a.active().is_none(), "nothing planned yet");
    for (w, h) in [(120, 40), (80, 24), (60, 15)] {
        let frame = text(&render(&mut a, w, h));
        for host in &want {
            assert!(frame.contains(host.as_str()), "{w}x{h}: {host}:\n{frame}");
        }
        assert!(frame.contains("esc cancel"), "{frame}");
        insta::assert_snapshot!(format!("picker_{w}x{h}"), frame);
    }
    // Down, enter: the plan is for the second host.
    a.handle_key(code(KeyCode::Down));
    a.handle_key(code(KeyCode::Enter));
    assert!(a.overlay().is_none());
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
    let plan = a.active().expect("planned").run.plan().clone();
    assert_eq!(plan.env, "prod");
    let hosts: Vec<&str> = plan
        .steps
        .iter()
        .filter_map(|s| s.host.as_deref())
        .collect();
    assert!(!hosts.is_empty());
    assert!(hosts.iter().all(|h| *h == want[1]), "{hosts:?}");
}

#[test]
fn esc_on_the_picker_plans_nothing_and_says_so() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = app(dir.path());
    a.handle_key(key(':'));
    type_str(&mut a, "run reprovision-node dev");
    a.handle_key(code(KeyCode::Enter));
    let Some(Overlay::HostPicker(p)) = &a.overlay() else {
        panic!(":run without a host opens the picker: {:?}", a.status());
    };
    assert_eq!(p.hosts, planner_hosts("reprovision-node", "dev"));
    a.handle_key(code(KeyCode::Esc));
    assert!(a.overlay().is_none());
    assert!(a.active().is_none());
    assert_eq!(a.screen(), Screen::Home);
    let said = a.status().map(str::to_string).unwrap_or_default();
    assert!(said.contains("no host picked"), "{said}");
    // A runbook that plans without a host opens at once, no picker.
    select_runbook(&mut a, "node-health");
    a.handle_key(code(KeyCode::Enter));
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
}

#[test]
fn a_click_selects_a_list_row_and_a_second_click_opens_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = app(dir.path());
    let (env_sel, _, _) = a.home_selection();
    a.select_home(HomeFocus::Environments, env_sel);
    let frame = text(&render(&mut a, 120, 40));
    let id = "node-health";
    let want = a
        .visible_runbooks()
        .iter()
        .position(|r| r.id == id)
        .expect("listed");
    assert_ne!(a.home_selection().1, want, "starts elsewhere");
    let (col, row) = find(&frame, id);
    click_at(&mut a, col, row);
    assert_eq!(
        a.home_focus(),
        HomeFocus::Runbooks,
        "the click focuses the list"
    );
    assert_eq!(a.home_selection().1, want);
    assert_eq!(a.screen(), Screen::Home, "one click only selects");
    // The environments list: a click on prod's row selects it.
    let (col, row) = find(&frame, "prod    ");
    click_at(&mut a, col, row);
    assert_eq!(a.home_focus(), HomeFocus::Environments);
    assert_eq!(a.home_selection().0, 1);
    // Back to the runbook, clicked twice: opened as enter would.
    let frame = text(&render(&mut a, 120, 40));
    let (col, row) = find(&frame, id);
    click_at(&mut a, col, row);
    click_at(&mut a, col, row);
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
    // In the run view a click on a step row selects that step.
    let frame = text(&render(&mut a, 120, 40));
    let (col, row) = find(&frame, " 2 r ");
    click_at(&mut a, col, row);
    assert_eq!(a.active().expect("run").selected, 1);
}

#[test]
fn clicks_on_a_picker_row_and_on_buttons_act_as_their_keys() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = app(dir.path());
    a.set_current_env(Some("prod".into()));
    select_runbook(&mut a, "reprovision-node");
    a.handle_key(code(KeyCode::Enter));
    let frame = text(&render(&mut a, 120, 40));
    let hosts = planner_hosts("reprovision-node", "prod");
    let (col, row) = find(&frame, &format!("  {}", hosts[2]));
    click_at(&mut a, col + 2, row);
    assert!(
        matches!(&a.overlay(), Some(Overlay::HostPicker(p)) if p.sel == 2),
        "a click selects the row"
    );
    // With the picker open, a click on the screen under it does nothing.
    let before = (a.home_focus(), a.home_selection().1, a.home_selection().0);
    click_at(&mut a, 1, 2);
    assert_eq!(
        before,
        (a.home_focus(), a.home_selection().1, a.home_selection().0)
    );
    assert!(matches!(a.overlay(), Some(Overlay::HostPicker(_))));
    // "esc cancel" is a button.
    let (col, row) = find(&frame, "esc cancel");
    click_at(&mut a, col + 1, row);
    assert!(a.overlay().is_none(), "esc clicked");
    assert!(a.active().is_none());

    // A gate's buttons: esc hide, then (reopened) ctrl-r reject.
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    a.update(Action::StartRun);
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
    let frame = text(&render(&mut a, 120, 40));
    let (col, row) = find(&frame, "esc hide");
    click_at(&mut a, col, row);
    assert!(a.overlay().is_none(), "esc hide clicked: {frame}");
    a.handle_key(code(KeyCode::Enter));
    assert!(
        matches!(a.overlay(), Some(Overlay::Gate(_))),
        "enter reopens"
    );
    let frame = text(&render(&mut a, 120, 40));
    let (col, row) = find(&frame, "ctrl-r reject");
    click_at(&mut a, col + 3, row);
    let status = a.active().expect("run").run.status().clone();
    assert!(
        matches!(
            status,
            hk_engine::runbook::machine::RunStatus::Halted { .. }
                | hk_engine::runbook::machine::RunStatus::Aborted { .. }
        ),
        "the rejection is the run's: {status:?}"
    );

    // A question's buttons: quit asks (a run is active), "y yes" quits.
    a.update(Action::Quit);
    assert!(
        matches!(a.overlay(), Some(Overlay::Confirm(_))),
        "{:?}",
        a.status()
    );
    let frame = text(&render(&mut a, 120, 40));
    let (col, row) = find(&frame, "y yes");
    assert_eq!(click_at(&mut a, col, row), Control::Quit);
}

/// A look's tabs (events, logs, describe) are buttons: a click shows that look.
#[test]
fn a_click_on_a_look_tab_switches_to_it() {
    use hk_effects::observe::look::LookResult;
    use hk_effects::observe::summary::{Look, LookKind, ObjectRef};
    use hk_ui::app::LookOverlay;
    use hk_ui::panes::look::LookView;
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = app(dir.path());
    let result = |kind: LookKind, line: &str| LookResult {
        kind,
        title: format!("{kind:?} pod kube-system/cilium-x"),
        lines: Ok(vec![line.to_string()]),
    };
    a.set_overlay(Some(Overlay::Look(Box::new(LookOverlay {
        seq: 1,
        look: Look {
            env: "prod".into(),
            object: ObjectRef {
                kind: "Pod".into(),
                namespace: Some("kube-system".into()),
                name: "cilium-x".into(),
            },
            kinds: vec![LookKind::Events, LookKind::Logs],
            container: Some("cilium-agent".into()),
        },
        view: LookView {
            results: vec![
                result(LookKind::Events, "Warning BackOff restarting"),
                result(LookKind::Logs, "level=error msg=dial 192.168.2.10"),
            ],
            shown: 0,
            pending: Vec::new(),
        },
        scroll: 0,
        picked: None,
    }))));
    let frame = text(&render(&mut a, 120, 40));
    assert!(frame.contains("Warning BackOff"), "{frame}");
    let (col, row) = find(&frame, " g logs ");
    click_at(&mut a, col + 2, row);
    let frame = text(&render(&mut a, 120, 40));
    assert!(frame.contains("level=error msg=dial"), "{frame}");
    assert!(
        matches!(&a.overlay(), Some(Overlay::Look(o)) if o.view.shown == 1),
        "the logs tab is shown"
    );
}
