//! The approve gate tells what the preview could not show: a check run whose PLAY RECAP
//! says `changed=0 skipped=2` did not exercise two tasks, and the gate says so in the
//! warning colour, with the blast radius, above the diff, on a big and on an 80x24 terminal.
use crate::ui_common;

use crossterm::event::KeyCode;
use hk_engine::runbook::plan::StepKind;
use hk_session::exec::ExecRequest;
use hk_ui::app::{App, Overlay, Screen};
use ratatui::backend::TestBackend;
use ui_common::*;

/// etcd-io-priority on prod, run up to the approval of node 3's diff, whose check run
/// printed `recap` after a diff that shows nothing changing.
fn at_the_approval(dir: &std::path::Path, recap: &str) -> App {
    let mut app = App::operate(
        parts(dir),
        operate_caps(
            &[
                StepKind::ListHosts,
                StepKind::Ansible,
                StepKind::Ssh,
                StepKind::EtcdLeader,
                StepKind::EtcdSnapshot,
            ],
            &[StepKind::EtcdLeader],
        ),
    );
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    app.handle_key(key('s'));
    play_one(
        &mut app,
        &[
            "playbook: playbooks/etcd-io-priority.yml",
            "  play #1 (k3s_prod): etcd I/O priority\tTAGS: []",
            "    pattern: ['k3s_prod']",
            "    hosts (1):",
            "      k3s-prod-3",
        ],
    );
    play_one(&mut app, &[]); // verify: the host set matches
    type_str(&mut app, "1");
    app.handle_key(code(KeyCode::Enter));
    assert!(app.overlay().is_none(), "the host count opened the gate");
    // 2: etcd's snapshot; 3-5: etcd's leader looked at, the move approved and run (issue 39).
    while play_one(&mut app, &[]).is_some() {}
    assert!(
        matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.n == 4),
        "the move's approval is open"
    );
    // Its approval shows the server's live blast radius too: the run it lets go on
    // disrupts k3s-prod-3 next.
    assert!(
        app.live_blast(4).is_some(),
        "the move's approval shows the server's blast"
    );
    assert!(answer_gate(&mut app));
    play_one(&mut app, &[]).expect("the move went out");
    play_one(&mut app, &[]).expect("the move verified");
    let req = play_one(
        &mut app,
        &[
            "PLAY [etcd I/O priority] *****",
            "TASK [etcd-io-priority : Find the k3s data disk] *****",
            "skipping: [k3s-prod-3]",
            "TASK [etcd-io-priority : Set the BFQ scheduler] *****",
            "skipping: [k3s-prod-3]",
            "TASK [etcd-io-priority : IOWeight for system.slice] *****",
            "ok: [k3s-prod-3]",
            "PLAY RECAP *****",
            recap,
        ],
    )
    .expect("the check run went out");
    assert!(
        matches!(&req, ExecRequest::Execute { step, .. } if step.n == 6),
        "{req:?}"
    );
    while play_one(&mut app, &[]).is_some() {}
    assert!(
        matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.n == 7),
        "the approval is open"
    );
    app
}

/// The row of `needle` in the frame, and the style of its first cell.
fn find(b: &TestBackend, needle: &str) -> Option<(u16, ratatui::style::Style)> {
    let buf = b.buffer();
    let area = buf.area;
    for y in 0..area.height {
        let row: String = (0..area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        if let Some(i) = row.find(needle) {
            // Byte index to column: the frame is box-drawing chars, so count chars.
            let col = row[..i].chars().count() as u16;
            return Some((y, buf[(col, y)].style()));
        }
    }
    None
}

#[test]
fn a_check_run_that_skipped_tasks_says_so_above_the_fold() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = at_the_approval(
        dir.path(),
        "k3s-prod-3 : ok=1 changed=0 unreachable=0 failed=0 skipped=2 rescued=0 ignored=0",
    );
    let warn = app.theme().warn().fg;
    for (w, h, name) in [
        (160, 45, "gate_preview_skipped_160x45"),
        (80, 24, "gate_preview_skipped_80x24"),
    ] {
        let frame = render(&mut app, w, h);
        insta::assert_snapshot!(name, text(&frame));
        let (row, style) = find(&frame, "! changed=0 with skipped=2")
            .unwrap_or_else(|| panic!("{w}x{h}: the warning is not on screen:\n{}", text(&frame)));
        assert_eq!(
            style.fg, warn,
            "{w}x{h}: the warning is in the warning colour"
        );
        assert!(row < h, "above the fold");
        // Before the diff and with the blast radius, which come first.
        let (blast, _) = find(&frame, "Blast radius (gate policy)").expect("blast radius shown");
        assert!(blast < row, "{w}x{h}: the blast radius comes first");
        if let Some((task, _)) = find(&frame, "TASK [") {
            assert!(
                row < task,
                "{w}x{h}: the warning is above the preview's output"
            );
        }
    }
    // The words a person reads, whole on the big terminal.
    let big = text(&render(&mut app, 160, 45));
    assert!(
        big.contains("the preview did not exercise 2 task(s)"),
        "{big}"
    );
    assert!(big.contains("changes 1 host in prod:"), "{big}");
}

#[test]
fn a_full_preview_shows_no_warning_and_an_unreachable_host_is_named() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = at_the_approval(
        dir.path(),
        "k3s-prod-3 : ok=3 changed=2 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0",
    );
    let frame = text(&render(&mut app, 160, 45));
    assert!(!frame.contains("! "), "nothing to warn about:\n{frame}");

    let dir = tempfile::tempdir().expect("tmp");
    let mut app = at_the_approval(
        dir.path(),
        "k3s-prod-3 : ok=0 changed=0 unreachable=1 failed=0 skipped=0 rescued=0 ignored=0",
    );
    let frame = text(&render(&mut app, 80, 24));
    assert!(
        frame.contains("! 1 host(s) unreachable in the preview"),
        "{frame}"
    );
}

/// Issue 29: the approval before a host names what disrupting it does, from the live panes:
/// it holds the VIP lease (and where the VIP goes), it leads etcd, and the quorum arithmetic;
/// with another server already down, the arithmetic says quorum is lost. Facts from a stale
/// look are unknown with their age. (Each line is matched by its start, which begins a row
/// of the gate whatever the wrapping.)
fn texts(lines: Vec<hk_engine::guard::blast::BlastLine>) -> Vec<String> {
    lines.into_iter().map(|l| l.text).collect()
}

#[test]
fn the_approval_names_the_vip_holder_the_etcd_leader_and_the_quorum_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut app = at_the_approval(
        dir.path(),
        "k3s-prod-3 : ok=3 changed=1 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0",
    );
    let quiet = text(&render(&mut app, 160, 45));
    assert!(
        quiet.contains("? unknown: no live look at the VIP lease, etcd or the nodes yet"),
        "{quiet}"
    );
    for u in live::prod_cluster("k3s-prod-3", "k3s-prod-3", &[], app.now()) {
        app.live_mut().apply(u);
    }
    let frame = render(&mut app, 160, 45);
    let screen = text(&frame);
    for want in [
        "! k3s-prod-3 holds the VIP lease (192.168.2.9): while it is disrupted",
        "! k3s-prod-3 leads etcd: an election follows when it is disrupted",
        "! 3 of 3 etcd members healthy; while k3s-prod-3 is disrupted 2 remain",
    ] {
        assert!(screen.contains(want), "{want}\n{screen}");
    }
    let (_, style) = find(&frame, "! k3s-prod-3 holds the VIP lease").expect("the holder line");
    assert_eq!(style.fg, app.theme().warn().fg, "the holder is a warning");
    insta::assert_snapshot!("gate_live_blast_160x45", screen);
    insta::assert_snapshot!("gate_live_blast_80x24", text(&render(&mut app, 80, 24)));

    // One server already down: disrupting k3s-prod-3 leaves one of three.
    for u in live::prod_cluster("k3s-prod-2", "k3s-prod-2", &["k3s-prod-1"], app.now()) {
        app.live_mut().apply(u);
    }
    let screen = text(&render(&mut app, 160, 45));
    for want in [
        "  k3s-prod-3 does not hold the VIP lease (k3s-prod-2 does)",
        "✗ 2 of 3 etcd members healthy (k3s-prod-1 down); while k3s-prod-3 is",
        "LOSES",
    ] {
        assert!(screen.contains(want), "{want}\n{screen}");
    }

    // Enter alone is refused: the gate stays, naming why and how to override.
    app.handle_key(code(KeyCode::Enter));
    assert!(
        matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.n == 7),
        "the approval is still open"
    );
    let screen = text(&render(&mut app, 160, 45));
    assert!(
        screen.contains("✗ refused: 2 of 3 etcd members healthy"),
        "{screen}"
    );
    // A note that is no override is refused too.
    type_str(&mut app, "looks fine");
    app.handle_key(code(KeyCode::Enter));
    assert!(matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.n == 7));
    // Snapshot the refusal before the clock moves.
    let refused = text(&render(&mut app, 80, 24));
    assert!(refused.contains("refused"), "{refused}");

    // A minute later with nothing new: the kube panes are stale, their facts unknown.
    app.set_now(hk_engine::runbook::machine::Timestamp(app.now().0 + 60_000));
    let screen = text(&render(&mut app, 160, 45));
    assert!(
        screen.contains("? VIP lease holder: unknown (the last look is 1m old, stale)"),
        "{screen}"
    );
    // The live lines say nothing of quorum from a stale look (the refusal shown under the
    // note is the last Enter's, kept until the next).
    assert!(
        !screen.contains("✗ 2 of 3 etcd members healthy"),
        "{screen}"
    );
    assert!(!screen.contains("does not hold the VIP"), "{screen}");
}

/// Issue 29: with one prod server down, the approval before another one passes only with
/// `override quorum: REASON` in its note, and that note is journaled with the approval.
#[test]
fn a_step_that_would_lose_quorum_needs_a_typed_override_which_is_journaled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut app = at_the_approval(
        dir.path(),
        "k3s-prod-3 : ok=3 changed=1 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0",
    );
    for u in live::prod_cluster("k3s-prod-2", "k3s-prod-2", &["k3s-prod-1"], app.now()) {
        app.live_mut().apply(u);
    }
    app.handle_key(code(KeyCode::Enter));
    assert!(
        matches!(&app.overlay(), Some(Overlay::Gate(m)) if m.n == 7 && m.error.as_deref().is_some_and(|e| e.starts_with("refused:"))),
        "refused without an override"
    );
    let reason = "override quorum: k3s-prod-1 is being replaced, prod traffic drained";
    type_str(&mut app, reason);
    app.handle_key(code(KeyCode::Enter));
    assert!(app.overlay().is_none(), "the override passes the gate");
    let journals: Vec<String> = walk(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    assert!(
        journals
            .iter()
            .any(|j| j.contains("\"type\":\"gate-answered\"") && j.contains(reason)),
        "the override's reason is journaled with the approval: {journals:#?}"
    );
    // What the gate showed of the live cluster is journaled with the answer, and the change
    // record (`runs show`, text and md) says it under the gate.
    let journal = walk(dir.path())
        .into_iter()
        .find(|p| {
            let s = p.to_string_lossy();
            s.ends_with(".jsonl") && !s.ends_with(".output.jsonl") && !s.ends_with(".trail.jsonl")
        })
        .expect("the run's journal");
    let rec = hk_session::record::load_path(&journal).expect("record");
    let step = rec.steps.iter().find(|s| s.n == 7).expect("step 7");
    assert!(step.gate.is_some(), "step 7's gate is answered");
    assert!(
        step.gate_live.iter().any(|l| l
            .starts_with("CRITICAL: 2 of 3 etcd members healthy (k3s-prod-1 down)")
            && l.ends_with("[refuses the step without an override]")),
        "{:#?}",
        step.gate_live
    );
    let text = rec.render_text();
    assert!(text.contains("      live at its gate:\n        "), "{text}");
    assert!(
        text.contains("k3s-prod-3 does not hold the VIP lease (k3s-prod-2 does)"),
        "{text}"
    );
    let md = rec.render_md();
    assert!(
        md.contains("#### What the gates showed of the live cluster"),
        "{md}"
    );
    assert!(
        md.contains("- CRITICAL: 2 of 3 etcd members healthy"),
        "{md}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Plans that stop before step 1: the planner's blockers for every runbook.
struct BlockedPlans;

impl hk_ui::app::PlanSource for BlockedPlans {
    fn plan(
        &self,
        runbook: &hk_engine::runbook::schema::Runbook,
        env: &str,
        _host: Option<&str>,
    ) -> Result<hk_engine::runbook::plan::Plan, hk_session::PlanSourceError> {
        use hk_engine::runbook::plan::{Blocker, PlanError};
        Err(PlanError::Blocked {
            runbook: runbook.id.clone(),
            env: env.to_string(),
            blockers: vec![
                Blocker {
                    kind: "role-not-found".into(),
                    at: "infra/ansible/playbooks/etcd-io-priority.yml:12:7".into(),
                    message: "the role `etcd_io_priority` is not where ansible-playbook looks"
                        .into(),
                    fix: "add its parent directory to `roles_path` in infra/ansible/ansible.cfg"
                        .into(),
                },
                Blocker {
                    kind: "vault-locked".into(),
                    at: "infra/ansible/inventory/group_vars/k3s_prod/vault.yml".into(),
                    message: "vaulted, and no vault password is configured".into(),
                    fix: "name the password file in `vault_password_file`".into(),
                },
            ],
        }
        .into())
    }
}

/// The run view shows every blocker, with what to do, where the steps would be; there is
/// no run, so `s` starts nothing and no executor is handed anything.
#[test]
fn a_blocked_runbook_shows_its_blockers_in_the_run_view_and_cannot_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut p = parts(dir.path());
    p.plans = std::sync::Arc::new(BlockedPlans);
    let mut app = App::operate(p, operate_caps(&ALL_KINDS, &ALL_KINDS));
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    assert!(app.active().is_none());
    let status = app.status().map(str::to_string).unwrap_or_default();
    assert!(
        status.contains("cannot start on `prod`: 2 blockers before step 1"),
        "{status}"
    );
    let screen = text(&render(&mut app, 120, 30));
    for want in [
        "etcd-io-priority · prod · blocked",
        "cannot start: 2 blockers before step 1",
        "1. infra/ansible/playbooks/etcd-io-priority.yml:12:7 [role-not-found]",
        "fix: add its parent directory to `roles_path`",
        "2. infra/ansible/inventory/group_vars/k3s_prod/vault.yml [vault-locked]",
        "fix: name the password file in `vault_password_file`",
    ] {
        assert!(screen.contains(want), "missing {want:?} in:\n{screen}");
    }
    app.handle_key(key('s'));
    assert!(app.active().is_none(), "nothing to start past the blockers");
    let status = app.status().map(str::to_string).unwrap_or_default();
    assert!(status.contains("fix the blockers listed"), "{status}");
    assert!(
        !text(&render(&mut app, 120, 30)).contains("running"),
        "no step runs"
    );
}

/// Issue 29: before the run starts, the plan says where it takes the VIP holder and the
/// etcd leader (etcd-io-priority's order is node 3, node 1, node 2): a warning while the
/// holder comes before the last place, unknown before any look.
#[test]
fn the_plan_says_where_it_takes_the_vip_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut app = App::operate(
        parts(dir.path()),
        operate_caps(
            &[StepKind::ListHosts, StepKind::Ansible, StepKind::Ssh],
            &[],
        ),
    );
    app.open_runbook("etcd-io-priority", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run, "{:?}", app.status());
    let screen = text(&render(&mut app, 160, 45));
    assert!(
        screen.contains("live: which of these hosts holds the VIP and leads etcd: VIP lease"),
        "{screen}"
    );
    assert_eq!(
        texts(app.holder_advice()),
        vec!["which of these hosts holds the VIP and leads etcd: VIP lease holder: unknown (no look yet)".to_string()]
    );
    for u in live::prod_cluster("k3s-prod-1", "k3s-prod-1", &[], app.now()) {
        app.live_mut().apply(u);
    }
    let frame = render(&mut app, 160, 45);
    let screen = text(&frame);
    assert!(
        screen.contains("live: k3s-prod-1 holds the VIP lease and leads etcd now; the plan"),
        "{screen}"
    );
    assert_eq!(
        texts(app.holder_advice()),
        vec!["k3s-prod-1 holds the VIP lease and leads etcd now; the plan takes it 2nd of 3: taking it last moves the VIP once (the runbook's target.order sets the order)".to_string()]
    );
    let (_, style) = find(&frame, "live: k3s-prod-1 holds").expect("the line");
    assert_eq!(
        style.fg,
        app.theme().warn().fg,
        "the holder early is a warning"
    );
    insta::assert_snapshot!("plan_holder_160x45", screen);
    insta::assert_snapshot!("plan_holder_80x24", text(&render(&mut app, 80, 24)));
    // Held by node 2, taken last: said plainly.
    for u in live::prod_cluster("k3s-prod-2", "k3s-prod-2", &[], app.now()) {
        app.live_mut().apply(u);
    }
    assert_eq!(
        texts(app.holder_advice()),
        vec![
            "k3s-prod-2 holds the VIP lease and leads etcd now; the plan takes it last (3rd of 3)"
                .to_string()
        ]
    );
    // Issue 39: what etcd's pre-flight refuses now is said with the plan, before any gate.
    for u in live::prod_cluster_with("k3s-prod-2", "k3s-prod-2", &[], app.now(), true) {
        app.live_mut().apply(u);
    }
    let advice = texts(app.holder_advice());
    assert_eq!(advice.len(), 2, "{advice:#?}");
    assert!(
        advice[1].starts_with("etcd pre-flight: unstarted member 63 at https://192.0.2.250:2380 is a learner that has not started"),
        "{advice:#?}"
    );
    let screen = text(&render(&mut app, 80, 24));
    assert!(
        screen.contains("live: etcd pre-flight: unstarted member 63"),
        "{screen}"
    );
    for u in live::prod_cluster("k3s-prod-2", "k3s-prod-2", &[], app.now()) {
        app.live_mut().apply(u);
    }
    // Started, the line goes (the gates say it per host from then on).
    app.handle_key(key('s'));
    assert!(app.holder_advice().is_empty());
    let screen = text(&render(&mut app, 160, 45));
    assert!(!screen.contains("live: k3s-prod-2 holds"), "{screen}");
}
