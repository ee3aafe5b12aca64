//! The live panes in the console: the strip on every screen and the Live screen (`l`), fed
//! `observe::feed::Update`s judged by the real `checks::live` rules (crates/hk-ui/tests/ui_common/live.rs).
//! Insta snapshots on fixed-size TestBackends for each state (no data yet, healthy, the
//! 2026-09-06 incident, a stuck rollout, the 2026-09-12 eviction loop, could-not-look, stale),
//! and the behaviour behind them: latest per (environment, kind), stale thresholds, the last
//! good look, the worst verdict's colour, keys, help, observe mode.
use crate::ui_common;

use hk_effects::observe::feed::Update;
use hk_engine::runbook::machine::Timestamp;
use hk_ui::app::{App, Overlay, Screen};
use hk_ui::keymap::KeyMode;
use hk_ui::live::{STALE_AFTER_MS, VPN_STALE_AFTER_MS};
use hk_ui::panes::live::{strip_lines, StripPane};
use hk_ui::theme::Theme;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use ui_common::live::*;
use ui_common::*;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn ago(ms: u64) -> Timestamp {
    Timestamp(T0.0 - ms)
}

/// An operating console on the prod environment at T0, fed `updates` in order.
fn app_with(dir: &std::path::Path, updates: Vec<Update>) -> App {
    let mut app = App::operate(parts(dir), operate_caps(&[], &[]));
    app.set_current_env(Some("prod".into()));
    for u in updates {
        app.handle_update(u);
    }
    app
}

/// Every pane of both environments healthy, seen `ms` ago.
fn healthy_all(ms: u64) -> Vec<Update> {
    let mut v = healthy("prod", ago(ms));
    v.extend(healthy("dev", ago(ms)));
    v.push(vpn_healthy(ago(ms)));
    v
}

/// The named states the snapshots cover.
fn state(name: &str) -> Vec<Update> {
    match name {
        "no_data" => Vec::new(),
        "healthy" => healthy_all(3_000),
        "incident_2026_09_06" => {
            let mut v = healthy_all(3_000);
            v.push(agents_on_node_ip(ago(2_000)));
            v
        }
        "stuck_rollout" => {
            let mut v = healthy_all(3_000);
            v.push(rollout_stuck(ago(2_000)));
            v
        }
        "eviction_loop" => {
            let mut v = healthy_all(3_000);
            v.push(vpn_eviction_loop(ago(2_000)));
            v
        }
        "could_not_look" => {
            let mut v = healthy_all(150_000);
            v.extend(could_not_look(ago(10_000)));
            v
        }
        "stale" => healthy_all(120_000),
        "no_quorum" => {
            let mut v = healthy_all(3_000);
            v.extend(etcd_no_quorum(ago(2_000)));
            v
        }
        other => panic!("no state {other}"),
    }
}

const STATES: [&str; 7] = [
    "no_data",
    "healthy",
    "incident_2026_09_06",
    "stuck_rollout",
    "eviction_loop",
    "could_not_look",
    "stale",
];

fn strip_text(app: &App, pane: StripPane) -> String {
    strip_lines(&app.live_view())
        .into_iter()
        .find(|l| l.pane == pane)
        .map(|l| l.text)
        .expect("a strip line per pane")
}

/// The row of the frame that starts with the strip line's title.
fn strip_row(b: &TestBackend, title: &str) -> u16 {
    let area = b.buffer().area;
    (0..area.height)
        .find(|y| {
            let row: String = (0..area.width)
                .map(|x| b.buffer()[(x, *y)].symbol().to_string())
                .collect();
            row.starts_with(&format!(" {title}"))
        })
        .unwrap_or_else(|| panic!("no strip row for {title}"))
}

/// The glyph cell of a strip line (after " {title:<10} ") and its foreground colour.
fn strip_glyph(b: &TestBackend, title: &str) -> (String, Option<Color>) {
    let y = strip_row(b, title);
    let cell = &b.buffer()[(12, y)];
    (cell.symbol().to_string(), cell.fg.into())
}

fn open_live(app: &mut App) {
    app.handle_key(key('l'));
    assert_eq!(app.screen(), Screen::Live);
}

// ------------------------------------------------------------------------------------------
// Snapshots

#[test]
fn strip_in_each_state() {
    for name in STATES {
        let dir = tmp();
        let mut app = app_with(dir.path(), state(name));
        let frame = text(&render(&mut app, 120, 30));
        insta::assert_snapshot!(format!("strip_{name}"), frame);
    }
}

#[test]
fn live_screen_in_each_state() {
    for name in STATES {
        let dir = tmp();
        let mut app = app_with(dir.path(), state(name));
        open_live(&mut app);
        let frame = text(&render(&mut app, 150, 64));
        insta::assert_snapshot!(format!("live_{name}"), frame);
        // Small terminals: the strip folds to one line, the screen scrolls, nothing panics.
        let small = text(&render(&mut app, 60, 15));
        insta::assert_snapshot!(format!("live_{name}_60x15"), small);
    }
}

/// Issue 26: the no-quorum and stale states at the operator's three terminal sizes.
#[test]
fn no_quorum_and_stale_at_three_sizes() {
    for name in ["no_quorum", "stale"] {
        for (w, h) in [(160, 45), (80, 24), (60, 15)] {
            let dir = tmp();
            let mut app = app_with(dir.path(), state(name));
            open_live(&mut app);
            if name == "no_quorum" {
                // Scroll to the etcd section (below the kube panes): its title's line in
                // the whole screen, less the border above it.
                let whole = text(&render(&mut app, w, 400));
                let at = whole
                    .lines()
                    .position(|l| {
                        l.trim_start_matches('"')
                            .trim_start_matches('│')
                            .starts_with("✗ etcd ")
                    })
                    .unwrap_or_else(|| panic!("no etcd section:\n{whole}"));
                app.set_live_scroll(at.saturating_sub(2));
            }
            let frame = text(&render(&mut app, w, h));
            insta::assert_snapshot!(format!("issue26_{name}_{w}x{h}"), frame);
        }
    }
}

/// Two of three servers dead: etcd is ✗ with the quorum named, the members counted down
/// named, the lease's holder said NotReady on the VIP line, and no rollout claimed.
#[test]
fn two_servers_dead_is_no_quorum_a_notready_holder_and_no_rollout() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("no_quorum"));
    assert_eq!(
        strip_text(&app, StripPane::Vip),
        "held by k3s-prod-2, its node NotReady, renewed 2s ago of 15s · 192.168.2.9:6443 answers in 3 ms"
    );
    assert_eq!(
        strip_text(&app, StripPane::Agents),
        "3/3 agents on the VIP · no rollout; 1/3 agents available"
    );
    let frame = text(&render(&mut app, 160, 45));
    assert!(
        frame
            .lines()
            .any(|l| l.contains("prod") && l.contains("etcd ✗")),
        "{frame}"
    );
    open_live(&mut app);
    let frame = text(&render(&mut app, 160, 200));
    // The panes' column (the timeline is the right-hand 48 at 160), wrapped lines joined.
    let flat = frame
        .lines()
        .map(|l| l.chars().take(112).collect::<String>().replace('│', " "))
        .collect::<Vec<_>>()
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for needle in [
        "2 of 3 members down (k3s-prod-1 NotReady, k3s-prod-2 NotReady): no quorum (etcd needs 2 of 3)",
        // A member counted down is never the leader (issue 38).
        "no leader known: k3s-prod-1's metrics say it leads, but k3s-prod-1 is NotReady and counted down",
        "no rollout (3 of 3 on the current template), 1 of 3 available",
    ] {
        assert!(flat.contains(needle), "{needle:?} missing:\n{frame}");
    }
    assert!(!flat.contains("rolling"), "{frame}");
    assert!(!flat.contains("every member's disk keeps up"), "{frame}");
}

// ------------------------------------------------------------------------------------------
// What each state says

#[test]
fn no_data_yet_everywhere() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("no_data"));
    let frame = text(&render(&mut app, 120, 30));
    assert_eq!(frame.matches("no data yet").count(), 4, "{frame}");
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    assert_eq!(frame.matches("no data yet").count(), 6 + 4, "{frame}");
}

#[test]
fn healthy_says_who_holds_the_vip_and_that_every_agent_dials_it() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("healthy"));
    assert_eq!(
        strip_text(&app, StripPane::Vip),
        "held by k3s-prod-2, renewed 2s ago of 15s · 192.168.2.9:6443 answers in 3 ms"
    );
    assert_eq!(
        strip_text(&app, StripPane::Agents),
        "3/3 agents on the VIP · rollout: rolled out"
    );
    assert_eq!(
        strip_text(&app, StripPane::Vpn),
        "k3s-prod-3: exit 158.173.241.41"
    );
    assert_eq!(strip_text(&app, StripPane::Nodes), "3/3 Ready");
    let b = render(&mut app, 120, 30);
    let ok = Some(Theme::fallback().palette.ok);
    for title in ["VIP lease", "Agent env", "VPN egress", "Nodes"] {
        assert_eq!(strip_glyph(&b, title), ("✓".to_string(), ok), "{title}");
    }
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    for needle in [
        "k3s-prod-2 (server k3s-prod-2)",
        "2s ago (lease duration 15s)",
        "answers in 3 ms",
        "cilium-4xk2p  k3s-prod-1  192.168.2.9:6443",
        "✓ the VIP",
        "control-plane,etcd,master",
        "rolled out: 3 of 3 updated and available",
        "158.173.241.135:1198",
        "10.72.192.7 255.255.192.0",
    ] {
        assert!(frame.contains(needle), "{needle:?} missing:\n{frame}");
    }
    // dev's own gateway is not prod's business.
    assert!(!frame.contains("k3s-dev-3"), "{frame}");
}

#[test]
fn the_2026_09_06_incident_is_critical_and_names_the_node() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("incident_2026_09_06"));
    assert_eq!(
        strip_text(&app, StripPane::Agents),
        "CRITICAL 3 of 3 agents dial node IPs, not the VIP: k3s-prod-1 192.168.2.10 · rollout: rolled out"
    );
    let b = render(&mut app, 120, 30);
    assert_eq!(
        strip_glyph(&b, "Agent env"),
        ("✗".to_string(), Some(Theme::fallback().palette.critical))
    );
    // The other panes keep their own colour.
    assert_eq!(strip_glyph(&b, "VIP lease").0, "✓");
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    assert_eq!(frame.matches("192.168.2.10:6443").count(), 3, "{frame}");
    assert_eq!(
        frame.matches("✗ node IP of k3s-prod-1").count(),
        3,
        "{frame}"
    );
    assert!(
        frame.contains("3 of 3 agents dial k3s-prod-1's own address 192.168.2.10"),
        "{frame}"
    );
    // Dev is healthy: its strip says so.
    app.handle_key(key('e'));
    assert_eq!(app.current_env(), Some("dev"));
    assert_eq!(
        strip_text(&app, StripPane::Agents),
        "3/3 agents on the VIP · rollout: rolled out"
    );
}

#[test]
fn a_stuck_rollout_names_the_pod_its_node_and_how_long() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("stuck_rollout"));
    assert_eq!(
        strip_text(&app, StripPane::Agents),
        "3/3 agents on the VIP · rollout STUCK: cilium-9fzq7 on k3s-prod-2 not ready 12m00s"
    );
    let b = render(&mut app, 120, 30);
    assert_eq!(strip_glyph(&b, "Agent env").0, "✗");
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    for needle in [
        "STUCK: cilium-9fzq7 on k3s-prod-2 not ready for 12m00s",
        "3 · updated 2 · ready 2 · not ready 1",
        "k3s-prod-3  cilium-b7lmd  old",
        "rollout stuck: updated pod cilium-9fzq7 on k3s-prod-2 not ready for 12m",
    ] {
        assert!(frame.contains(needle), "{needle:?} missing:\n{frame}");
    }
}

#[test]
fn the_eviction_loop_names_both_gateways_in_both_environments() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("eviction_loop"));
    for env in ["prod", "dev"] {
        app.set_current_env(Some(env.into()));
        let line = strip_text(&app, StripPane::Vpn);
        assert!(
            line.starts_with("EVICTION LOOP dev/k3s-dev-3 + prod/k3s-prod-3 · "),
            "{env}: {line}"
        );
        assert!(line.contains("restarts every 2m00s"), "{env}: {line}");
        let b = render(&mut app, 120, 30);
        assert_eq!(
            strip_glyph(&b, "VPN egress"),
            ("✗".to_string(), Some(Theme::fallback().palette.critical))
        );
    }
    app.set_current_env(Some("prod".into()));
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    for needle in [
        "EVICTION LOOP: k3s-dev-3 (dev) and k3s-prod-3 (prod)",
        "158.173.241.112:1198",
        "4, every 2m00s",
    ] {
        assert!(frame.contains(needle), "{needle:?} missing:\n{frame}");
    }
}

#[test]
fn could_not_look_says_why_and_keeps_the_last_good_look() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("could_not_look"));
    // One watch failing for both: said once.
    assert_eq!(
        strip_text(&app, StripPane::Agents),
        format!("agents and rollout: could not look: {API_DOWN} · last good look 2m30s ago")
    );
    assert_eq!(
        strip_text(&app, StripPane::Nodes),
        format!("could not look: {API_DOWN} · last good look 2m30s ago")
    );
    // The lease could not be read but the probe ran: the silent VIP is critical.
    let vip = strip_text(&app, StripPane::Vip);
    assert!(
        vip.contains("192.168.2.9:6443 does NOT answer: connection refused"),
        "{vip}"
    );
    assert!(
        vip.ends_with(&format!("lease: could not look: {API_DOWN}")),
        "{vip}"
    );
    let b = render(&mut app, 120, 30);
    let unknown = Some(Theme::fallback().palette.unknown);
    assert_eq!(strip_glyph(&b, "Nodes"), ("?".to_string(), unknown));
    assert_eq!(strip_glyph(&b, "VIP lease").0, "✗");
    assert_eq!(
        strip_text(&app, StripPane::Vpn),
        "k3s-prod-3: could not look: ssh k3s-prod-3: connection refused"
    );
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    assert!(frame.contains("last good look 2m30s ago"), "{frame}");
}

#[test]
fn stale_looks_say_so_with_their_age() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("stale"));
    // Issue 26: since when (the clock the operator reads) and never a ✓ on a stale look;
    // the words changed from `stale 2m00s`, which said how long but not since when.
    let frame = text(&render(&mut app, 120, 30));
    assert_eq!(
        frame.matches("stale since 10:13:00 (2m00s)").count(),
        4,
        "{frame}"
    );
    assert!(!frame.contains('✓'), "{frame}");
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    assert_eq!(
        frame.matches("stale since 10:13:00 (2m00s)").count(),
        5 + 4,
        "{frame}"
    );
    assert!(!frame.contains("✓ VIP lease"), "{frame}");
}

#[test]
fn warnings_leaks_and_unready_nodes_take_their_colour() {
    let dir = tmp();
    let palette = Theme::fallback().palette;
    let mut app = app_with(
        dir.path(),
        vec![
            vip_stale_renew(ago(1_000)),
            vpn_leak(ago(1_000)),
            nodes_one_not_ready(ago(1_000)),
        ],
    );
    assert_eq!(
        strip_text(&app, StripPane::Vip),
        "held by k3s-prod-1, renewed 45s ago of 15s STALE · 192.168.2.9:6443 answers in 3 ms"
    );
    assert_eq!(
        strip_text(&app, StripPane::Vpn),
        "k3s-prod-3: LEAK, exits from 203.0.113.7 without the tunnel"
    );
    assert_eq!(
        strip_text(&app, StripPane::Nodes),
        "2/3 Ready · not Ready: k3s-prod-2"
    );
    let b = render(&mut app, 120, 30);
    assert_eq!(
        strip_glyph(&b, "VIP lease"),
        ("!".to_string(), Some(palette.warn))
    );
    assert_eq!(
        strip_glyph(&b, "VPN egress"),
        ("✗".to_string(), Some(palette.critical))
    );
    assert_eq!(
        strip_glyph(&b, "Nodes"),
        ("✗".to_string(), Some(palette.critical))
    );
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    for needle in [
        "k3s-prod-2  ✗ Unknown",
        "LEAK: traffic through tun0 on k3s-prod-3 exits from 203.0.113.7",
        "stale: k3s-prod-1 last renewed 45s ago",
    ] {
        assert!(frame.contains(needle), "{needle:?} missing:\n{frame}");
    }
}

// ------------------------------------------------------------------------------------------
// Behaviour

#[test]
fn stale_thresholds_per_kind() {
    let dir = tmp();
    let mut app = app_with(dir.path(), vec![nodes_update("prod", ago(STALE_AFTER_MS))]);
    assert!(
        !strip_lines(&app.live_view())[3].stale,
        "at the threshold: still fresh"
    );
    app.set_now(Timestamp(T0.0 + 1));
    assert!(strip_lines(&app.live_view())[3].stale, "past it: stale");

    let mut app = app_with(dir.path(), vec![vpn_healthy(ago(STALE_AFTER_MS + 1))]);
    assert!(
        !strip_lines(&app.live_view())[2].stale,
        "the VPN poll may be older"
    );
    app.set_now(Timestamp(T0.0 - STALE_AFTER_MS + VPN_STALE_AFTER_MS + 1));
    assert!(strip_lines(&app.live_view())[2].stale);
}

/// The kube watcher sends a pane only when it changed: an agent pane from ten minutes ago
/// still holds while the same environment's watcher keeps talking (the VIP pane changes
/// every tick), and goes stale with it.
#[test]
fn an_unchanged_pane_holds_while_its_environments_watcher_talks() {
    let dir = tmp();
    let mut app = app_with(
        dir.path(),
        vec![agents("prod", ago(600_000)), vip("prod", ago(1_000))],
    );
    let line = &strip_lines(&app.live_view())[1];
    assert_eq!((line.stale, line.age_ms), (false, 1_000), "{line:?}");
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    assert!(
        frame.contains("1s ago · unchanged since 2026-09-07T10:05:00.000Z (10m00s)"),
        "{frame}"
    );
    // dev's watcher says nothing for prod.
    app.handle_update(vip("dev", Timestamp(T0.0)));
    // The prod watcher falls silent: everything it vouched for goes stale together.
    app.set_now(Timestamp(T0.0 + STALE_AFTER_MS));
    assert!(strip_lines(&app.live_view())[0].stale && strip_lines(&app.live_view())[1].stale);
}

#[test]
fn latest_per_environment_and_kind_and_older_updates_change_nothing() {
    let dir = tmp();
    let mut app = app_with(dir.path(), vec![agents("prod", ago(3_000))]);
    // An older look arriving late does not replace the newer one.
    app.handle_update(agents_on_node_ip(ago(10_000)));
    assert!(strip_text(&app, StripPane::Agents).starts_with("3/3 agents on the VIP"));
    // A newer one does.
    app.handle_update(agents_on_node_ip(ago(1_000)));
    assert!(strip_text(&app, StripPane::Agents).starts_with("CRITICAL 3 of 3"));
    // The agent pane and the rollout are separate sources of the same line.
    assert!(strip_text(&app, StripPane::Agents).ends_with("rollout: no data yet"));
    app.handle_update(rollout_done("prod", ago(1_000)));
    assert!(strip_text(&app, StripPane::Agents).ends_with("rollout: rolled out"));
    // Another environment's updates stay there.
    app.set_current_env(Some("dev".into()));
    assert_eq!(strip_text(&app, StripPane::Agents), "no data yet");
    assert_eq!(app.live().len(), 2);
}

#[test]
fn l_opens_the_live_screen_from_home_and_run_and_goes_back() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("healthy"));
    app.set_filter(Some("etcd".into()));
    open_live(&mut app);
    assert!(text(&render(&mut app, 120, 40)).contains("hk-console env prod · live"));
    app.handle_key(code(crossterm::event::KeyCode::Esc));
    assert_eq!(app.screen(), Screen::Home, "esc leaves the Live screen");
    assert_eq!(app.filter(), Some("etcd"), "the home filter is kept");

    app.open_runbook("node-health", Some("prod"), None);
    assert_eq!(app.screen(), Screen::Run);
    open_live(&mut app);
    app.handle_key(key('l'));
    assert_eq!(
        app.screen(),
        Screen::Run,
        "l again goes back where it came from"
    );

    app.update(hk_ui::action::Action::Command("live".into()));
    assert_eq!(app.screen(), Screen::Live);
    assert_eq!(app.complete("li"), "live ");
}

#[test]
fn help_lists_the_live_bindings_from_the_keymap() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("healthy"));
    let home_help = {
        app.handle_key(key('?'));
        let f = text(&render(&mut app, 120, 40));
        app.handle_key(code(crossterm::event::KeyCode::Esc));
        f
    };
    assert!(home_help.contains("live panes in detail"), "{home_help}");
    open_live(&mut app);
    app.handle_key(key('?'));
    assert!(matches!(app.overlay(), Some(Overlay::Help)));
    let frame = text(&render(&mut app, 120, 40));
    let rows = app
        .keymaps()
        .get(KeyMode::Live)
        .expect("live keymap")
        .help_rows();
    assert!(rows.len() >= 10);
    for (keys, what) in rows {
        assert!(
            frame.contains(&keys) && frame.contains(what),
            "{keys} {what} missing:\n{frame}"
        );
    }
    assert!(frame.contains("Help · Live"), "{frame}");
}

#[test]
fn the_live_screen_works_in_observe_mode() {
    let dir = tmp();
    let mut app = App::observe(parts(dir.path()), read_only_recorders(&[]));
    app.set_current_env(Some("prod".into()));
    for u in state("incident_2026_09_06") {
        app.handle_update(u);
    }
    open_live(&mut app);
    let frame = text(&render(&mut app, 150, 64));
    assert!(frame.contains(hk_ui::panes::banner::TEXT), "{frame}");
    assert!(frame.contains("✗ node IP of k3s-prod-1"), "{frame}");
    assert!(app.outbox().is_empty());
}

#[test]
fn scrolling_stays_within_the_screen() {
    let dir = tmp();
    let mut app = app_with(dir.path(), state("eviction_loop"));
    open_live(&mut app);
    render(&mut app, 60, 15);
    app.handle_key(key('G'));
    let bottom = app.live_scroll();
    assert!(bottom > 20, "{bottom}");
    app.handle_key(key('j'));
    assert_eq!(app.live_scroll(), bottom, "no scrolling past the end");
    let frame = text(&render(&mut app, 60, 15));
    assert!(frame.contains(&format!("of {}", bottom + 1)), "{frame}");
    app.handle_key(key('g'));
    assert_eq!(app.live_scroll(), 0);
    app.handle_key(key('j'));
    assert_eq!(app.live_scroll(), 1);
    app.handle_key(key('e'));
    assert_eq!(app.live_scroll(), 0, "a new environment starts at the top");
}

#[test]
fn without_colour_the_glyphs_still_say_how_bad() {
    let dir = tmp();
    let mut p = parts(dir.path());
    p.no_color = true;
    let mut app = App::operate(p, operate_caps(&[], &[]));
    app.set_current_env(Some("prod".into()));
    for u in state("could_not_look") {
        app.handle_update(u);
    }
    let b = render(&mut app, 120, 30);
    assert_eq!(
        strip_glyph(&b, "VIP lease"),
        ("✗".to_string(), Some(Color::Reset))
    );
    assert_eq!(
        strip_glyph(&b, "Nodes"),
        ("?".to_string(), Some(Color::Reset))
    );
}

#[test]
fn every_builtin_theme_sets_every_slot() {
    for (file, body) in hk_ui::theme::builtin_files() {
        for slot in hk_ui::theme::SLOTS {
            assert!(
                body.lines().any(|l| l.starts_with(&format!("{slot}:"))),
                "themes/{file} does not set `{slot}`"
            );
        }
    }
}

#[test]
fn the_console_brings_a_critical_environment_into_view_until_the_operator_chooses() {
    let dir = tmp();
    let mut app = App::operate(parts(dir.path()), operate_caps(&[], &[]));
    assert_eq!(app.current_env(), Some("dev"), "opens on the first");
    for u in healthy_all(3_000) {
        app.handle_update(u);
    }
    assert_eq!(app.current_env(), Some("dev"), "nothing critical: stays");
    // prod's agents dial a node's own address (2026-09-06): prod comes into view.
    app.handle_update(agents_on_node_ip(ago(1_000)));
    assert_eq!(app.current_env(), Some("prod"));
    let said = app.status().map(str::to_string).unwrap_or_default();
    assert!(
        said.contains("prod is critical: showing prod (was dev"),
        "{said}"
    );
    let s = ui_common::text(&ui_common::render(&mut app, 160, 45));
    assert!(s.contains("Live · prod"), "{s}");
    // `:run` with no environment names the one it planned for.
    app.open_runbook("cilium-endpoint-rollout", None, None);
    let said = app.status().map(str::to_string).unwrap_or_default();
    assert!(
        said.starts_with("planned for `prod`, the environment in view"),
        "{said}"
    );

    // The operator's own choice stands: e to dev, and prod staying critical moves nothing.
    let mut app = App::operate(parts(dir.path()), operate_caps(&[], &[]));
    app.handle_key(key('e'));
    app.handle_key(key('e'));
    assert_eq!(app.current_env(), Some("dev"));
    for u in healthy_all(3_000) {
        app.handle_update(u);
    }
    app.handle_update(agents_on_node_ip(ago(1_000)));
    assert_eq!(app.current_env(), Some("dev"), "the operator chose dev");
}

/// Issue 28: the summary's next step looks at the Lease the environment's panes watch
/// (hk-console.yaml `names.kube_vip_lease`, carried on its `EnvSummary`), not the seed's.
#[test]
fn the_next_step_looks_at_the_environments_own_lease() {
    use hk_effects::observe::summary::{Facet, NextStep, Objects};
    let dir = tmp();
    let mut parts = parts(dir.path());
    let defaults = Objects::of(&hk_effects::cluster::WatchSettings::default());
    for e in &mut parts.environments {
        if e.name == "prod" {
            e.objects = Some(Objects {
                lease_name: "my-cp-lock".into(),
                ..defaults.clone()
            });
        }
    }
    let mut app = App::operate(parts, operate_caps(&[], &[]));
    app.set_current_env(Some("prod".into()));
    app.handle_update(vip_stale_renew(ago(1_000)));
    let s = app.summary();
    let prod = s.envs.iter().find(|e| e.env == "prod").expect("prod");
    match prod.facet(Facet::Vip).and_then(|f| f.next.clone()) {
        Some(NextStep::Look(l)) => {
            assert_eq!(
                (l.object.kind.as_str(), l.object.name.as_str()),
                ("Lease", "my-cp-lock")
            );
        }
        other => panic!("{other:?}"),
    }
}
