//! One file per pane; each draws from `&App` into its area and does nothing else.
pub mod banner;
pub mod check;
pub mod etcd;
pub mod fit;
pub mod home;
pub mod init_offer;
pub mod live;
pub mod live_screen;
pub mod look;
pub mod overlay;
pub mod picker;
pub mod resume;
pub mod run;
pub mod strip;
pub mod takeover;
pub mod timeline;

use ratatui::layout::{Constraint, Flex, Layout, Rect};

/// Age as `5s`, `2m05s`, `1h03m`.
pub fn age(ms: u64) -> String {
    hk_engine::time::span_ms(ms, hk_engine::time::Style::Compact)
}

/// A rectangle of at most `w` x `h`, centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    r
}
