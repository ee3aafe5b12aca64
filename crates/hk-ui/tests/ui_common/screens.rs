//! The four screens with the incident's data in them, for the snapshot and fit tests:
//! Home, the run view mid-run, Live and Check, on the fake homelab at T0.

use hk_engine::checks::parity::{Finding, Severity};
use hk_engine::runbook::machine::Timestamp;
use hk_session::exec::{ExecReply, ExecRequest};
use hk_ui::action::Action;
use hk_ui::app::{App, Screen};
use hk_ui::panes::check::CheckView;

use super::live::*;
use super::*;

pub const SIZES: [(u16, u16); 4] = [(160, 45), (120, 40), (80, 24), (60, 15)];

/// Every host of the fake inventory.
pub fn all_hosts() -> Vec<String> {
    let mut h: Vec<String> = homelab().groups.values().flatten().cloned().collect();
    h.sort();
    h.dedup();
    h
}

pub fn ago(ms: u64) -> Timestamp {
    Timestamp(T0.0 - ms)
}

pub fn check_view() -> CheckView {
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
pub fn incident_app(dir: &std::path::Path) -> App {
    let mut a = App::operate(parts(dir), operate_caps(&ALL_KINDS, &ALL_KINDS));
    let mut updates = healthy("dev", ago(2_000));
    updates.push(vip("prod", ago(2_000)));
    updates.push(agents_on_node_ip(ago(2_000)));
    updates.push(nodes_one_not_ready(ago(2_000)));
    updates.push(vpn_healthy(ago(2_000)));
    for u in updates {
        a.handle_update(u);
    }
    a.set_check(check_view());
    a
}

/// etcd-io-priority on prod, step 6 (the check run) running with its output, past etcd's
/// snapshot (step 2) and its leader looked at, approved and moved (steps 3-5).
pub fn mid_run(dir: &std::path::Path) -> App {
    let mut a = incident_app(dir);
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(a.screen(), Screen::Run, "{:?}", a.status());
    a.update(Action::StartRun);
    play_one(&mut a, &["hosts (1):", "  k3s-prod-3"]);
    play_one(&mut a, &[]);
    answer_gate(&mut a);
    play_one(
        &mut a,
        &["etcd snapshot saved from k3s-prod-2 (applied index 41; changed by this run, no member it leaves alone fit, caught up, WAL fsync p99 2.0 ms): runs/etcd-io-priority-prod.etcd-k3s-prod-2.1.db, 20512 bytes, sha256 0ddf50db1da17f19, checked (etcd's checksum, bbolt) in 0.1 s"],
    );
    play_one(&mut a, &[]);
    play_one(
        &mut a,
        &["k3s-prod-3 does not lead etcd (k3s-prod-1 does, term 2): nothing to move"],
    );
    play_one(&mut a, &[]);
    answer_gate(&mut a);
    play_one(
        &mut a,
        &["k3s-prod-3 does not lead etcd (k3s-prod-1 does, term 2): nothing to move"],
    );
    play_one(&mut a, &[]);
    let Some(ExecRequest::Execute {
        step, attempt, tag, ..
    }) = a.outbox_mut().pop_front()
    else {
        panic!("step 6 goes to its executor: {:?}", a.status());
    };
    assert_eq!(step.n, 6, "the check run");
    for l in [
        "TASK [etcd-io-priority : Set the BFQ scheduler] ****",
        "--- before: /sys/block/sda/queue/scheduler",
        "+++ after: /sys/block/sda/queue/scheduler",
        "-[mq-deadline] bfq none",
        "+mq-deadline [bfq] none",
        "changed: [k3s-prod-3] => (item=sda) verdict: scheduler bfq set, nr_requests 64 -> 32, \
         read_ahead_kb 128 -> 128, the read-back follows in step 9",
    ] {
        a.handle_exec(ExecReply::Output {
            tag,
            n: step.n,
            attempt,
            line: l.into(),
        });
    }
    a.set_now(Timestamp(T0.0 + 13_000));
    a.set_status(None);
    a
}

pub fn screen(dir: &std::path::Path, which: Screen) -> App {
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
