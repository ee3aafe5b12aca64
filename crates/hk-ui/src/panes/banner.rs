//! The banners drawn on every frame: observe mode's, `--no-cluster-lock`'s (mutating runs
//! take no cluster run lock), and the open run's lock trouble (lost to another console, or
//! not renewed), one line each.
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::app::App;
use hk_session::lock::NO_LOCK_BANNER;

pub const TEXT: &str = "OBSERVE MODE · read-only · nothing here can change the platform";

/// The banner lines `app` shows, in order.
fn texts(app: &App) -> Vec<String> {
    let mut v = Vec::new();
    if app.is_observe() {
        v.push(TEXT.to_string());
    }
    if app.no_cluster_lock {
        v.push(NO_LOCK_BANNER.to_string());
    }
    // A run that lost its lock mid-run may share the environment with another console's:
    // the operator sees it at once, not when the run's journal is read afterwards.
    if let Some(t) = app.active.as_ref().and_then(|a| a.session.lock.trouble()) {
        v.push(format!("RUN LOCK: {t}"));
    }
    v
}

/// How many lines the banners take.
pub fn lines(app: &App) -> u16 {
    u16::try_from(texts(app).len()).unwrap_or(u16::MAX)
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let lines: Vec<Line> = texts(app)
        .into_iter()
        .map(|t| Line::from(format!(" {t}")))
        .collect();
    f.render_widget(Paragraph::new(lines).style(app.theme.banner()), area);
}
