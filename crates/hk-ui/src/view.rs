//! Drawing: the whole frame from `&App`, nothing else.
//!
//! Owns: the frame's layout (observe banner, title, the screen, the live strip, the status
//! line, overlays on top) and how it degades on small terminals (the live strip folds to
//! one line, then goes; nothing panics at any size). Each pane draws in `panes/`, from the
//! small view of the app's state the app lends it (`App::home_view`, ...).
//! Must not: change state, do IO or read the clock (ages use `app.now`).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use super::app::{App, Screen};
use super::panes;

/// Below this height the live strip is one summary line.
const FULL_STRIP_MIN_HEIGHT: u16 = 24;

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    // Clicks act on what this frame shows: the panes register their rows and buttons anew.
    app.zones().clear();
    f.render_widget(Block::default().style(app.theme().background()), area);
    if area.width < 10 || area.height < 4 {
        f.render_widget(Paragraph::new("hk-console: terminal too small"), area);
        return;
    }
    let banner_view = app.banner_view();
    let banner = panes::banner::lines(&banner_view);
    let strip = if area.height >= FULL_STRIP_MIN_HEIGHT {
        5
    } else if area.height >= 10 {
        1
    } else {
        0
    };
    // Every environment, one line each, worst first (the strip's own env is the 5 lines
    // below): on every screen that has room.
    let summary = app.summary();
    let all_view = panes::strip::StripView {
        summary: &summary,
        expanded: None,
    };
    let all = if area.height >= FULL_STRIP_MIN_HEIGHT {
        panes::strip::height(&all_view, 4)
    } else if area.height >= 14 {
        panes::strip::height(&all_view, 2)
    } else {
        0
    };
    let [banner_area, title_area, body, all_area, strip_area, status_area] = Layout::vertical([
        Constraint::Length(banner),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(all),
        Constraint::Length(strip),
        Constraint::Length(1),
    ])
    .areas(area);

    draw_title(f, title_area, app, &summary);
    if all > 0 {
        panes::strip::draw(f, all_area, &all_view, app.theme());
    }
    match app.screen() {
        Screen::Home => panes::home::draw(f, body, &app.home_view()),
        Screen::Run => panes::run::draw(f, body, &app.run_view(&summary)),
        Screen::Live => panes::live_screen::draw(f, body, &app.live_screen_view()),
        Screen::Check => {
            let c = app.check_screen_view();
            let rows = panes::check::draw(
                f,
                body,
                c.check,
                c.filter.unwrap_or_default(),
                u16::try_from(c.scroll).unwrap_or(u16::MAX),
                app.theme(),
            );
            c.rows.set(rows);
        }
    }
    if strip == 5 {
        panes::live::draw(f, strip_area, &app.live_view());
    } else if strip == 1 {
        panes::live::draw_summary(f, strip_area, &app.live_view());
    }
    draw_status(f, status_area, app);
    panes::overlay::draw(f, area, &app.overlay_view());
    // Last, so no overlay can hide it.
    if banner > 0 {
        panes::banner::draw(f, banner_area, &banner_view, app.theme());
    }
    scrub(f.buffer_mut());
}

/// The frame's last line of defence: a repo value, a host's line, a cluster object or a
/// journal text drawn by any pane reaches the terminal through these cells, and ratatui
/// writes a span's control characters into them as they are. Each cell keeps its
/// printable part; a cell that held only such characters shows one visible stand-in
/// (`␛` for ESC, `�` for the rest), so the layout is unchanged. The panes that show data
/// at length (the output pane) escape it in full first ([`hk_engine::text::visible`]).
fn scrub(buf: &mut ratatui::buffer::Buffer) {
    for cell in buf.content.iter_mut() {
        let symbol = cell.symbol();
        if !symbol.chars().any(hk_engine::text::needs_escape) {
            continue;
        }
        let kept: String = symbol
            .chars()
            .filter(|c| !hk_engine::text::needs_escape(*c))
            .collect();
        if kept.is_empty() {
            let first = symbol.chars().next().unwrap_or('\u{fffd}');
            cell.set_symbol(hk_engine::text::stand_in(first));
        } else {
            cell.set_symbol(&kept);
        }
    }
}

fn draw_title(
    f: &mut Frame,
    area: Rect,
    app: &App,
    summary: &hk_effects::observe::summary::Summary,
) {
    let t = app.theme();
    let mut spans = vec![Span::styled(" hk-console ", t.title())];
    // A critical verdict anywhere turns the header red, naming the environment.
    if let Some(alert) = panes::strip::header_alert(summary) {
        spans.push(Span::styled(format!("{alert} "), t.critical()));
    }
    if let Some(env) = app.current_env() {
        spans.push(Span::styled("env ", t.text()));
        let st = if app.is_protected(env) {
            t.warn()
        } else {
            t.text()
        };
        spans.push(Span::styled(format!("{env} "), st));
    }
    match app.screen() {
        Screen::Home => spans.push(Span::styled("· home", t.muted())),
        Screen::Live => spans.push(Span::styled("· live", t.muted())),
        Screen::Check => spans.push(Span::styled("· check", t.muted())),
        Screen::Run => {
            if let Some(a) = app.active() {
                let p = a.run.plan();
                spans.push(Span::styled(
                    format!("· {} on {}", p.runbook, p.env),
                    t.text(),
                ));
            }
        }
    }
    spans.push(Span::styled("   ? help  : command  q quit", t.muted()));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_status(f: &mut Frame, area: Rect, app: &App) {
    let t = app.theme();
    // What just happened wins; otherwise a config or theme problem stays in view.
    let line = if let Some(s) = app.status() {
        // A message wider than the terminal is cut, and says where to read it whole.
        let w = usize::from(area.width);
        if super::panes::fit::width(s) > w {
            const WHOLE: &str = " M: read it whole";
            let keep = w.saturating_sub(super::panes::fit::width(WHOLE));
            Line::from(vec![
                Span::styled(super::panes::fit::clip(s, keep), t.text()),
                Span::styled(WHOLE, t.muted()),
            ])
        } else {
            Line::from(Span::styled(s.to_string(), t.text()))
        }
    } else if let Some(w) = app.theme_warnings().first() {
        let more = app.theme_warnings().len() - 1;
        let extra = if more > 0 {
            format!(" (+{more} more)")
        } else {
            String::new()
        };
        Line::from(Span::styled(format!("⚠ {w}{extra}"), t.warn()))
    } else {
        Line::from("")
    };
    f.render_widget(Paragraph::new(line), area);
}
