//! The look pane: the read-only look a next step opened (an object's events, a pod's last
//! log lines, a describe-like view), wrapped, with the keys that switch between them.
//!
//! Owns: the layout of [`hk_effects::observe::look::LookResult`]s. Must not: take the look (that is `observe::look`).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::theme::Theme;
use hk_effects::observe::summary::LookKind;

pub use crate::state::look::LookView;

pub fn key_of(k: LookKind) -> (&'static str, &'static str) {
    match k {
        LookKind::Events => ("e", "events"),
        LookKind::Logs => ("g", "logs"),
        LookKind::Describe => ("d", "describe"),
    }
}

/// The tabs on the pane's first line: each label, its key, and whether it is shown.
pub fn tabs(v: &LookView) -> Vec<(String, char, bool)> {
    let mut tabs = Vec::new();
    for (i, r) in v.results.iter().enumerate() {
        let (k, w) = key_of(r.kind);
        tabs.push((
            format!(" {k} {w} "),
            k.chars().next().unwrap_or(' '),
            i == v.shown,
        ));
    }
    for p in &v.pending {
        let (k, w) = key_of(*p);
        tabs.push((
            format!(" {k} {w}… "),
            k.chars().next().unwrap_or(' '),
            false,
        ));
    }
    tabs
}

pub fn lines<'a>(v: &'a LookView, t: &Theme) -> Vec<Line<'a>> {
    let mut out = Vec::new();
    let tabs: Vec<Span> = tabs(v)
        .into_iter()
        .map(|(label, _, shown)| Span::styled(label, if shown { t.selected() } else { t.muted() }))
        .collect();
    out.push(Line::from(tabs));
    match v.results.get(v.shown) {
        None => out.push(Line::styled("looking…", t.muted())),
        Some(r) => match &r.lines {
            Ok(ls) => out.extend(ls.iter().map(|l| Line::styled(l.clone(), t.text()))),
            Err(e) => out.push(Line::styled(format!("? could not look: {e}"), t.unknown())),
        },
    }
    out
}

/// Draw the pane over `area` (it is an overlay: the area is cleared first).
pub fn draw(f: &mut Frame, area: Rect, v: &LookView, scroll: u16, t: &Theme) {
    let title = v
        .results
        .get(v.shown)
        .map(|r| format!(" {} · read-only · Esc closes ", r.title))
        .unwrap_or_else(|| " look · read-only ".into());
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.focus())
        .title(Span::styled(title, t.title()));
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines(v, t))
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
}
