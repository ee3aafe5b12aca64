//! The observe-mode banner, drawn on every frame of an observe app.
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::ui::app::App;

pub const TEXT: &str = "OBSERVE MODE · read-only · nothing here can change the platform";

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    f.render_widget(
        Paragraph::new(format!(" {TEXT}")).style(app.theme.banner()),
        area,
    );
}
