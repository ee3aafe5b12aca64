//! The banners drawn on every frame: observe mode's, `--no-cluster-lock`'s (mutating runs
//! take no cluster run lock), and the open run's lock trouble (lost to another console, or
//! not renewed), one line each.
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::state::run::ActiveRun;
use crate::theme::Theme;
pub const TEXT: &str = "OBSERVE MODE · read-only · nothing here can change the platform";

/// The banner line every frame shows while mutating runs take no cluster run lock.
pub const NO_LOCK_BANNER: &str =
    "NO CLUSTER RUN LOCK · --no-cluster-lock · another console may run here too";

/// What the banners are drawn from.
#[derive(Clone, Copy)]
pub struct BannerView<'a> {
    /// The console is in observe mode.
    pub observe: bool,
    /// `--no-cluster-lock` was given.
    pub no_cluster_lock: bool,
    /// The open run (its lock's trouble).
    pub active: Option<&'a ActiveRun>,
}

/// The banner lines `b` shows, in order.
fn texts(b: &BannerView) -> Vec<String> {
    let mut v = Vec::new();
    if b.observe {
        v.push(TEXT.to_string());
    }
    if b.no_cluster_lock {
        v.push(NO_LOCK_BANNER.to_string());
    }
    // A run that lost its lock mid-run may share the environment with another console's:
    // the operator sees it at once, not when the run's journal is read afterwards.
    if let Some(t) = b.active.and_then(|a| a.session.lock.trouble()) {
        v.push(format!("RUN LOCK: {t}"));
    }
    v
}

/// How many lines the banners take.
pub fn lines(b: &BannerView) -> u16 {
    u16::try_from(texts(b).len()).unwrap_or(u16::MAX)
}

pub fn draw(f: &mut Frame, area: Rect, b: &BannerView, theme: &Theme) {
    let lines: Vec<Line> = texts(b)
        .into_iter()
        .map(|t| Line::from(format!(" {t}")))
        .collect();
    f.render_widget(Paragraph::new(lines).style(theme.banner()), area);
}
