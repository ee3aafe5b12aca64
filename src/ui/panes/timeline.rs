//! The Live screen's timeline: what changed and when, newest first, each event in the
//! colour of the state it changed into; "N earlier" when the area cannot hold them all.
//!
//! Owns: the layout of [`Timeline`]'s events. Must not: decide what changed (the timeline
//! did) or read the clock.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::observe::timeline::{Timeline, TrailEvent};
use crate::ui::theme::Theme;

use super::fit;
use super::live::glyph;

/// One event's line: `12:03:19 prod ! lease moved k3s-prod-1 -> k3s-prod-2`.
pub fn event_line<'a>(e: &TrailEvent, env_w: usize, width: usize, t: &Theme) -> Line<'a> {
    let head = format!(
        "{} {:<env_w$} {} ",
        e.clock(),
        e.env,
        glyph(Some(e.severity))
    );
    let room = width.saturating_sub(fit::width(&head));
    Line::from(vec![
        Span::styled(head, t.severity(e.severity)),
        Span::styled(fit::clip(&e.text, room), t.text()),
    ])
}

/// The lines for `rows` rows of `width` columns, newest first; `filter` keeps events whose
/// environment or text contains it.
pub fn lines<'a>(
    tl: &Timeline,
    rows: usize,
    width: usize,
    filter: &str,
    t: &Theme,
) -> Vec<Line<'a>> {
    let kept: Vec<&TrailEvent> = tl
        .events()
        .rev()
        .filter(|e| filter.is_empty() || e.env.contains(filter) || e.text.contains(filter))
        .collect();
    if kept.is_empty() {
        let why = if tl.is_empty() {
            "nothing changed yet this session"
        } else {
            "no event matches the filter"
        };
        return vec![Line::styled(why, t.muted())];
    }
    let env_w = fit::widest(kept.iter().map(|e| e.env.as_str()), 3);
    let mut out: Vec<Line> = Vec::new();
    // One row holds the newest event (the title counts them all); more rows end in "N
    // earlier" when the events do not fit.
    let room = if kept.len() > rows && rows > 1 {
        rows - 1
    } else {
        rows
    };
    for e in kept.iter().take(room) {
        out.push(event_line(e, env_w, width, t));
    }
    if kept.len() > room && rows > 1 {
        let n = kept.len() - room + usize::try_from(tl.dropped()).unwrap_or(usize::MAX);
        out.push(fit::more(n, "earlier event", t));
    }
    out
}

pub fn draw(f: &mut Frame, area: Rect, tl: &Timeline, filter: &str, t: &Theme) {
    let title = if filter.is_empty() {
        format!(" Timeline · {} events ", tl.len())
    } else {
        format!(" Timeline · /{filter} ")
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border())
        .title(Span::styled(title, t.title()));
    let inner = block.inner(area);
    let body = lines(
        tl,
        usize::from(inner.height),
        usize::from(inner.width),
        filter,
        t,
    );
    f.render_widget(Paragraph::new(body).block(block), area);
}
