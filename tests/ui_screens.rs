//! Every screen at the four sizes an operator meets (160x45, 120x40, 80x24, 60x15), with
//! the incident's data in it: Home, the run view mid-run, Live and Check. Snapshots (insta,
//! TestBackend), and what must hold at each size: no host name cut at 120 columns and more,
//! the Step pane keeps host, "next" and the command at 80x24, and at 60x15 nothing panics
//! and what is hidden is said.

mod ui_common;

use hk_console::checks::parity::{Finding, Severity};
use hk_console::runbook::machine::{Input, Timestamp};
use hk_console::session::exec::{ExecReply, ExecRequest};
use hk_console::ui::action::Action;
use hk_console::ui::app::{App, Screen};
use hk_console::ui::panes::check::CheckView;
use ui_common::live::*;
use ui_common::*;

const SIZES: [(u16, u16); 4] = [(160, 45), (120, 40), (80, 24), (60, 15)];

fn ago(ms: u64) -> Timestamp {
    Timestamp(T0.0 - ms)
}

fn check_view() -> CheckView {
    CheckView {
        findings: Some(Ok(vec![
            Finding {
                rule: "helmrelease-port-equals-api-port",
                severity: Severity::Violation,
                env: Some("prod".into()),
                file: "platform/cilium/helmrelease.yaml".into(),
                line: 20,
                message: "HelmRelease kube-system/cilium sets k8sServicePort to 6443, but \
                          k3s_api_port is 6444"
                    .into(),
            },
            Finding {
                rule: "k3s-api-host",
                severity: Severity::Violation,
                env: Some("prod".into()),
                file: "clusters/prod/kustomization.yaml".into(),
                line: 7,
                message: "k8sServiceHost is 192.168.2.11 (k3s-prod-1's node IP), not the VIP \
                          192.168.2.9"
                    .into(),
            },
        ])),
        engine_line: Some("engine: builtin".into()),
        ran_at: Some("10:14:58".into()),
    }
}

/// The 2026-09-06 incident on prod (agents on a node IP, a node NotReady) while dev is
/// healthy; the check found two violations.
fn incident_app(dir: &std::path::Path) -> App {
    let mut a = App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS));
    let mut updates = healthy("dev", ago(2_000));
    updates.push(vip("prod", ago(2_000)));
    updates.push(agents_on_node_ip(ago(2_000)));
    updates.push(nodes_one_not_ready(ago(2_000)));
    updates.push(vpn_healthy(ago(2_000)));
    for u in updates {
        a.handle_update(u);
    }
    a.check = check_view();
    a
}

/// etcd-io-priority on prod, step 2 (the check run) running with its output.
fn mid_run(dir: &std::path::Path) -> App {
    let mut a = incident_app(dir);
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(a.screen, Screen::Run, "{:?}", a.status);
    a.update(Action::StartRun);
    play_one(&mut a, &["hosts (1):", "  k3s-prod-3"]);
    play_one(&mut a, &[]);
    answer_gate(&mut a);
    let Some(ExecRequest::Execute {
        step, attempt, tag, ..
    }) = a.outbox.pop_front()
    else {
        panic!("step 2 goes to its executor: {:?}", a.status);
    };
    a.handle_exec(ExecReply::Outcome {
        tag,
        input: Input::StepStarted { n: step.n, attempt },
    });
    for l in [
        "TASK [etcd-io-priority : Set the BFQ scheduler] ****",
        "--- before: /sys/block/sda/queue/scheduler",
        "+++ after: /sys/block/sda/queue/scheduler",
        "-[mq-deadline] bfq none",
        "+mq-deadline [bfq] none",
        "changed: [k3s-prod-3] => (item=sda) verdict: scheduler bfq set, nr_requests 64 -> 32, \
         read_ahead_kb 128 -> 128, the read-back follows in step 5",
    ] {
        a.handle_exec(ExecReply::Output {
            tag,
            n: step.n,
            attempt,
            line: l.into(),
        });
    }
    a.now = Timestamp(T0.0 + 13_000);
    a.status = None;
    a
}

fn screen(dir: &std::path::Path, which: Screen) -> App {
    match which {
        Screen::Run => mid_run(dir),
        Screen::Home => incident_app(dir),
        Screen::Live => {
            let mut a = incident_app(dir);
            a.update(Action::Live);
            a
        }
        Screen::Check => {
            let mut a = incident_app(dir);
            a.update(Action::Check);
            a
        }
    }
}

#[test]
fn every_screen_at_every_size() {
    for which in [Screen::Home, Screen::Run, Screen::Live, Screen::Check] {
        for (w, h) in SIZES {
            let dir = tempfile::tempdir().expect("tmp");
            let mut a = screen(dir.path(), which);
            assert_eq!(a.screen, which);
            let frame = text(&render(&mut a, w, h));
            let name = format!("{which:?}").to_lowercase();
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), frame);
        }
    }
}

/// At 80x24 the Step pane keeps the step's host, what comes next and its whole command
/// (the output shrinks for them).
#[test]
fn step_pane_keeps_host_next_and_command_at_80x24() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = mid_run(dir.path());
    let frame = text(&render(&mut a, 80, 24));
    for want in [
        "node 1 of 3: k3s-prod-3",
        "next: 3 gate Approve the diff",
        "$ ansible-playbook -i inventory/hosts.ini playbooks/etcd-io-priority.yml",
        "k3s_hosts=k3s_prod --limit k3s-prod-3 --check --diff",
    ] {
        assert!(frame.contains(want), "80x24 hides `{want}`:\n{frame}");
    }
    // Narrower, the command no longer fits whole: it is cut with a marker, never silently.
    let frame = text(&render(&mut a, 60, 15));
    assert!(
        frame.contains("more rows: a taller terminal shows them") || frame.contains('…'),
        "60x15 hides rows without saying so:\n{frame}"
    );
}

/// `w` in the run view: long output lines wrap (the default), or are cut at the pane's edge
/// with a marker, and the Output pane's title says which.
#[test]
fn w_toggles_wrapping_the_output() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut a = mid_run(dir.path());
    assert!(a.output_wrap, "output wraps by default");
    let frame = text(&render(&mut a, 80, 24));
    assert!(frame.contains("w:wrap"), "{frame}");
    assert!(frame.contains("the read-back follows in step 5"), "{frame}");
    a.handle_key(key('w'));
    assert!(!a.output_wrap);
    let frame = text(&render(&mut a, 80, 24));
    assert!(frame.contains("w:cut (1 cut …)"), "{frame}");
    let verdict = frame
        .lines()
        .find(|l| l.contains("changed: [k3s-prod-3] => (item=sda)"))
        .unwrap_or_else(|| panic!("the verdict line is in view:\n{frame}"));
    assert!(verdict.contains("…│"), "cut with a marker: {verdict}");
    assert!(!frame.contains("follows in step 5"), "{frame}");
    a.handle_key(key('w'));
    assert!(a.output_wrap);
    assert!(text(&render(&mut a, 80, 24)).contains("the read-back follows in step 5"));
}
