//! Text that fits: on a terminal of 120 columns or more, every step row of the plan pane
//! shows the host it acts on whole.

mod ui_common;

use hk_console::ui::app::App;
use ui_common::*;

#[test]
fn no_host_name_is_cut_in_the_plan_at_120_columns_and_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    let plan = a.active.as_ref().expect("plan open").run.plan().clone();
    let with_host: Vec<_> = plan.steps.iter().filter(|s| s.host.is_some()).collect();
    assert!(
        with_host.len() >= 6,
        "a multi-host plan: {}",
        with_host.len()
    );
    for (w, h) in [(120u16, 40u16), (160, 45)] {
        let screen = text(&render(&mut a, w, h));
        for s in &with_host {
            let host = s.host.as_deref().unwrap_or_default();
            let row = screen
                .lines()
                .find(|l| {
                    l.contains(&format!(
                        "{:>2} {} ",
                        s.n,
                        if s.mutates { "M" } else { "r" }
                    ))
                })
                .unwrap_or_else(|| panic!("{w}x{h}: no row for step {}:\n{screen}", s.n));
            assert!(
                row.contains(host),
                "{w}x{h}: step {} row cuts its host {host}:\n{row}",
                s.n
            );
        }
    }
}
