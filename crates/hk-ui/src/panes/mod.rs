//! One file per pane; each draws into its area from a small borrowed view of what it shows
//! (a [`Ctx`] and the pane's own view struct, which the app lends), and does nothing else.
//! Must not: import `app` (the panes know the state's types, `crate::state`, and nothing
//! of the loop that changes them).
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

use crate::pointer::Zones;
use crate::theme::Theme;
use hk_engine::runbook::machine::Timestamp;

/// What every pane draws with: the theme, the clock (ages), and where its clicks land.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub theme: &'a Theme,
    pub zones: &'a Zones,
    pub now: Timestamp,
}

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
