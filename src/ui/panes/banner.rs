//! The banners drawn on every frame: observe mode's, and `--no-cluster-lock`'s (mutating
//! runs take no cluster run lock), one line each.
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::session::lock::NO_LOCK_BANNER;
use crate::ui::app::App;

pub const TEXT: &str = "OBSERVE MODE · read-only · nothing here can change the platform";

/// The banner lines `app` shows, in order.
fn texts(app: &App) -> Vec<&'static str> {
    let mut v = Vec::new();
    if app.is_observe() {
        v.push(TEXT);
    }
    if app.no_cluster_lock {
        v.push(NO_LOCK_BANNER);
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
