//! Text that fits: on a terminal of 120 columns or more, every step row of the plan pane
//! shows the host it acts on whole, and no screen (Home, the run view, Live, Check) cuts a
//! host name anywhere; at 60x15 every screen draws and says what it leaves out.

use crate::ui_common;

use hk_ui::app::{App, Screen};
use ui_common::screens::*;
use ui_common::*;

#[test]
fn no_host_name_is_cut_in_the_plan_at_120_columns_and_more() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = App::operate(parts(dir.path()), operate_caps(&ALL_KINDS, &ALL_KINDS));
    a.open_runbook("etcd-io-priority", Some("prod"), None);
    let plan = a.active().expect("plan open").run.plan().clone();
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

/// Each `k3s-…`-like word on the screen: the run of host-name characters from where a
/// known host's prefix starts.
fn host_words<'a>(screen: &'a str, prefix: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    for (row, line) in screen.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find(prefix) {
            let start = from + at;
            let word: &str = {
                let rest = &line[start..];
                let end = rest
                    .find(|c: char| {
                        !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
                    })
                    .unwrap_or(rest.len());
                &rest[..end]
            };
            out.push((row, word));
            from = start + prefix.len();
        }
    }
    out
}

#[test]
fn no_screen_cuts_a_host_name_at_120_columns_and_more() {
    let hosts = all_hosts();
    assert!(hosts.len() >= 6, "{hosts:?}");
    // The hosts' common prefix: any word that starts like a host must be a whole one.
    let prefix: String = hosts[0]
        .chars()
        .zip(hosts[hosts.len() - 1].chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    assert!(prefix.len() >= 3, "a shared prefix: {prefix:?}");
    for which in [Screen::Home, Screen::Run, Screen::Live, Screen::Check] {
        for (w, h) in [(120u16, 40u16), (160, 45)] {
            let dir = tempfile::tempdir().expect("tmp");
            let mut a = screen(dir.path(), which);
            let frame = text(&render(&mut a, w, h));
            let words = host_words(&frame, &prefix);
            assert!(
                words.iter().any(|(_, w)| hosts.iter().any(|h| h == w)),
                "{which:?} {w}x{h}: no host on the screen to check:\n{frame}"
            );
            for (row, word) in words {
                // A word that starts like a host but is only part of one is a cut host
                // (`k3s-pr`, `k3s-prod-`); other words (a rule `k3s-api-host`) are not
                // hosts at all.
                let part_of_one = hosts.iter().any(|h| h.starts_with(word));
                assert!(
                    !part_of_one || hosts.iter().any(|h| h == word),
                    "{which:?} {w}x{h}: row {row} shows `{word}`, not a whole host name:\n{frame}"
                );
            }
        }
    }
}

#[test]
fn at_60x15_every_screen_draws_and_says_what_it_hides() {
    for which in [Screen::Home, Screen::Run, Screen::Live, Screen::Check] {
        let dir = tempfile::tempdir().expect("tmp");
        let mut a = screen(dir.path(), which);
        let frame = text(&render(&mut a, 60, 15));
        assert!(
            frame.contains("more")
                || frame.contains('…')
                || (frame.contains("lines ") && frame.contains(" of ")),
            "{which:?} 60x15 hides rows without a word:\n{frame}"
        );
    }
}
