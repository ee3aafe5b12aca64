//! Every screen at the four sizes an operator meets (160x45, 120x40, 80x24, 60x15), with
//! the incident's data in it: Home, the run view mid-run, Live and Check. Snapshots (insta,
//! TestBackend), and what must hold at each size: no host name cut at 120 columns and more,
//! the Step pane keeps host, "next" and the command at 80x24, and at 60x15 nothing panics
//! and what is hidden is said.

use crate::ui_common;

use hk_ui::app::{App, Screen};
use ui_common::screens::*;
use ui_common::*;

#[test]
fn every_screen_at_every_size() {
    for which in [Screen::Home, Screen::Run, Screen::Live, Screen::Check] {
        for (w, h) in SIZES {
            let dir = tempfile::tempdir().expect("tmp");
            let mut a = screen(dir.path(), which);
            assert_eq!(a.screen(), which);
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
        "next: 7 gate Approve the diff",
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
    assert!(a.output_wrap(), "output wraps by default");
    let frame = text(&render(&mut a, 80, 24));
    assert!(frame.contains("w:wrap"), "{frame}");
    assert!(frame.contains("the read-back follows in step 9"), "{frame}");
    a.handle_key(key('w'));
    assert!(!a.output_wrap());
    let frame = text(&render(&mut a, 80, 24));
    assert!(frame.contains("w:cut (1 cut …)"), "{frame}");
    let verdict = frame
        .lines()
        .find(|l| l.contains("changed: [k3s-prod-3] => (item=sda)"))
        .unwrap_or_else(|| panic!("the verdict line is in view:\n{frame}"));
    assert!(verdict.contains("…│"), "cut with a marker: {verdict}");
    assert!(!frame.contains("follows in step 8"), "{frame}");
    a.handle_key(key('w'));
    assert!(a.output_wrap());
    assert!(text(&render(&mut a, 80, 24)).contains("the read-back follows in step 9"));
}

/// A runbook the caller found not offered on this repo (`context::not_offered`: a built-in
/// one whose playbooks the repo lacks, on an environment that happens to be called `prod`)
/// is not on Home and not completed by `:run`, and the title counts it; the others stay.
#[test]
fn home_leaves_out_what_is_not_offered_on_the_repo() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut p = parts(dir.path());
    p.not_offered.insert(
        "etcd-io-priority".into(),
        "built in, and this repo has no playbooks/etcd-io-priority.yml".into(),
    );
    let mut a = App::operate(p, operate_caps(&ALL_KINDS, &ALL_KINDS));
    let ids: Vec<&str> = a.visible_runbooks().iter().map(|r| r.id.as_str()).collect();
    assert!(!ids.contains(&"etcd-io-priority"), "{ids:?}");
    assert!(ids.contains(&"node-health"), "{ids:?}");
    assert!(!a
        .candidates("run ")
        .contains(&"etcd-io-priority".to_string()));
    assert_eq!(a.runbooks_elsewhere(), 1);
    let frame = text(&render(&mut a, 160, 45));
    assert!(
        frame.contains("Runbooks  (1 not for this repo hidden;"),
        "{frame}"
    );
    assert!(!frame.contains("etcd-io-priority"), "{frame}");
}

/// A repo whose environments are not the sample's (a public repo's `master`): Home does not
/// offer the built-in runbooks, written for `prod` and `dev`, and says how many it left out
/// and how to make one; a runbook of the repo's own is listed, the count in the title.
#[test]
fn home_offers_only_the_runbooks_for_the_repos_environments() {
    use hk_engine::runbook::embedded;
    let dir = tempfile::tempdir().expect("tmp");
    let mut p = parts(dir.path());
    let mut master = envs().remove(1);
    master.name = "k3s_cluster".into();
    p.environments = vec![master];
    let builtins = embedded::load(&[]).expect("shipped").iter().count();
    let mut a = App::operate(p, operate_caps(&ALL_KINDS, &ALL_KINDS));
    assert!(a.visible_runbooks().is_empty());
    assert_eq!(a.runbooks_elsewhere(), builtins);
    let frame = text(&render(&mut a, 80, 24));
    assert!(
        frame.contains(&format!(
            "no runbook for this repo ({builtins} not offered here"
        )),
        "{frame}"
    );
    assert!(!frame.contains("etcd-io-priority"), "{frame}");
    // A name longer than the sample's keeps its gap before the host count.
    assert!(frame.contains("● k3s_cluster  3 hosts"), "{frame}");

    // With one of its own.
    let own = "id: reboot-one-server\ntitle: Reboot one server\nenvironments: [master]\n\
               target:\n  group: servers\n  single: true\nsteps:\n  - id: list-hosts\n    \
               kind: list-hosts\n    playbook: reboot.yml\n";
    let mut p = parts(dir.path());
    let mut master = envs().remove(1);
    master.name = "master".into();
    p.environments = vec![master];
    p.runbooks =
        embedded::load(&[("reboot-one-server.yaml".into(), own.into())]).expect("runbooks load");
    let mut a = App::operate(p, operate_caps(&ALL_KINDS, &ALL_KINDS));
    let ids: Vec<&str> = a.visible_runbooks().iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["reboot-one-server"]);
    // `:run` completes the same list.
    assert_eq!(a.candidates("run "), ["reboot-one-server"]);
    let frame = text(&render(&mut a, 80, 24));
    assert!(
        frame.contains(&format!("Runbooks  ({builtins} not for this repo hidden;")),
        "{frame}"
    );
    assert!(
        frame.contains("reboot-one-server  read-only  [master]"),
        "{frame}"
    );
}
