//! The look overlay's state: every kind a look lists is asked for at once, answers fill it
//! in the look's order whatever order they arrive in, an answer for a closed look is
//! dropped, and without a way to look the console says so instead of opening an empty pane.

use crate::ui_common;

use std::sync::Arc;

use crossterm::event::KeyCode;
use hk_effects::observe::look::{LookResult, LookSource};
use hk_effects::observe::summary::{Look, LookKind, ObjectRef};
use hk_ui::app::{App, Overlay};
use hk_ui::Capabilities;
use ui_common::*;

/// Never called: the loop takes looks, and these tests play the answers.
struct NoLooks;
impl LookSource for NoLooks {
    fn take(&self, _: Look, _: LookKind) -> futures::future::BoxFuture<'static, LookResult> {
        unreachable!("the tests answer looks themselves")
    }
}

fn pod_look() -> Look {
    Look {
        env: "prod".into(),
        object: ObjectRef {
            kind: "Pod".into(),
            namespace: Some("kube-system".into()),
            name: "cilium-g2-n2".into(),
        },
        kinds: vec![LookKind::Events, LookKind::Logs, LookKind::Describe],
        container: Some("cilium-agent".into()),
    }
}

fn answer(kind: LookKind, line: &str) -> LookResult {
    LookResult {
        kind,
        title: format!("{kind:?} pod kube-system/cilium-g2-n2"),
        lines: Ok(vec![line.to_string()]),
    }
}

fn app(dir: &std::path::Path) -> App {
    App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS))
}

fn shown(app: &App) -> Option<LookKind> {
    match &app.overlay() {
        Some(Overlay::Look(o)) => o.shown_kind(),
        _ => None,
    }
}

#[test]
fn answers_fill_the_look_in_its_order_and_stale_ones_are_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    a.set_looker(Some(Arc::new(NoLooks)));
    a.open_look(pod_look());
    let asked: Vec<LookKind> = a.look_outbox().iter().map(|r| r.kind).collect();
    assert_eq!(
        asked,
        vec![LookKind::Events, LookKind::Logs, LookKind::Describe]
    );
    let seq = a.look_outbox()[0].seq;
    // Logs answer first: shown, as the best there is so far.
    a.handle_look(
        seq,
        answer(LookKind::Logs, "level=info msg=\"Starting hive\""),
    );
    assert_eq!(shown(&a), Some(LookKind::Logs));
    // Then events, the look's first kind: it takes the view (the operator picked nothing).
    a.handle_look(
        seq,
        answer(
            LookKind::Events,
            "Warning Unhealthy: Readiness probe failed",
        ),
    );
    assert_eq!(shown(&a), Some(LookKind::Events));
    let screen = text(&render(&mut a, 120, 40));
    assert!(screen.contains("Readiness probe failed"), "{screen}");
    assert!(
        screen.contains("d describe…"),
        "describe still pending:\n{screen}"
    );
    // The operator picks logs; a later answer does not move the view.
    a.handle_key(key('g'));
    a.handle_look(seq, answer(LookKind::Describe, "Node:   k3s-prod-2"));
    assert_eq!(shown(&a), Some(LookKind::Logs));
    // An answer for another (closed) look changes nothing.
    a.handle_look(seq + 7, answer(LookKind::Events, "from another look"));
    let screen = text(&render(&mut a, 120, 40));
    assert!(!screen.contains("from another look"), "{screen}");
    a.handle_key(key('d'));
    assert_eq!(shown(&a), Some(LookKind::Describe));
    // Esc closes it; the screen under it is as it was.
    a.handle_key(code(KeyCode::Esc));
    assert!(a.overlay().is_none());
}

#[test]
fn without_a_cluster_the_look_says_so_and_opens_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = app(dir.path());
    assert!(matches!(
        a.capabilities().as_ref(),
        Capabilities::Operate { .. }
    ));
    a.open_look(pod_look());
    assert!(a.overlay().is_none());
    assert!(a.look_outbox().is_empty());
    let said = a.status().map(str::to_string).unwrap_or_default();
    assert!(
        said.contains("pod cilium-g2-n2") && said.contains("no cluster"),
        "{said}"
    );
}
