//! The Live screen's timeline: what changed and when, newest first, each event in the
//! colour of the state it changed into; "N earlier" when the area cannot hold them all.
//!
//! Owns: the layout of [`Timeline`]'s events. Must not: decide what changed (the timeline
//! did) or read the clock.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::theme::Theme;
use hk_effects::observe::timeline::{Timeline, TrailEvent};

use super::fit;
use super::live::glyph;

/// One event's rows: `12:03:19 prod ! lease moved k3s-prod-1 -> k3s-prod-2`, the text
/// wrapped under itself (a host name in it is never cut).
pub fn event_lines<'a>(e: &TrailEvent, env_w: usize, width: usize, t: &Theme) -> Vec<Line<'a>> {
    let head = format!(
        "{} {:<env_w$} {} ",
        e.clock(),
        e.env,
        glyph(Some(e.severity))
    );
    let head_w = fit::width(&head);
    // Too narrow to indent: the text goes under the head, full width.
    let (indent, room) = if width > head_w + 12 {
        (head_w, width - head_w)
    } else {
        (0, width.max(1))
    };
    let mut rows = fit::wrap(&e.text, room).into_iter();
    let mut out = Vec::new();
    if indent > 0 {
        out.push(Line::from(vec![
            Span::styled(head, t.severity(e.severity)),
            Span::styled(rows.next().unwrap_or_default(), t.text()),
        ]));
    } else {
        out.push(Line::styled(
            fit::clip(&head, width),
            t.severity(e.severity),
        ));
    }
    for r in rows {
        out.push(Line::from(vec![
            Span::raw(" ".repeat(indent)),
            Span::styled(r, t.text()),
        ]));
    }
    out
}

/// The lines for `rows` rows of `width` columns, newest first; `filter` keeps events whose
/// environment or text contains it. Whole events only; "N earlier" ends the list when the
/// rest do not fit.
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
    let mut shown = 0;
    for (i, e) in kept.iter().enumerate() {
        let block = event_lines(e, env_w, width, t);
        let reserve = usize::from(i + 1 < kept.len());
        if out.len() + block.len() + reserve <= rows {
            out.extend(block);
            shown += 1;
            continue;
        }
        if out.is_empty() {
            // The newest event always shows, as much of it as fits.
            out.extend(block.into_iter().take(rows.saturating_sub(reserve).max(1)));
            shown = 1;
        }
        break;
    }
    if shown < kept.len() && out.len() < rows {
        let n = kept.len() - shown + usize::try_from(tl.dropped()).unwrap_or(usize::MAX);
        out.push(fit::more(n, "earlier event", t));
    }
    out
}

pub fn draw(f: &mut Frame, area: Rect, tl: &Timeline, filter: &str, t: &Theme) {
    let title = if filter.is_empty() {
        format!(
            " Timeline · {} event{} ",
            tl.len(),
            if tl.len() == 1 { "" } else { "s" }
        )
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
