//! The Check screen: the static parity contract's findings, each with its file:line, rule
//! and environment, worst first, wrapped (a file path is never cut); the engine line and
//! when the check ran on top.
//!
//! Owns: the layout of a parity check's result. Must not: run the check.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::theme::Theme;
use hk_engine::checks::live::Severity;
use hk_engine::checks::parity::{self, Finding};

use super::live::glyph;

pub use crate::state::check::CheckView;

/// The live severity the strip gives a finding.
pub fn severity(f: &Finding) -> Severity {
    match f.severity {
        parity::Severity::Violation => Severity::Critical,
        parity::Severity::Warning => Severity::Warn,
        parity::Severity::CannotTell => Severity::Unknown,
    }
}

pub fn lines<'a>(v: &'a CheckView, filter: &str, t: &Theme) -> Vec<Line<'a>> {
    let mut out = Vec::new();
    match &v.findings {
        None => out.push(Line::styled(
            "the check has not run yet (:check runs it)",
            t.muted(),
        )),
        Some(Err(e)) => out.push(Line::styled(
            format!("? the check could not run: {e}"),
            t.unknown(),
        )),
        Some(Ok(fs)) => {
            let head = format!(
                "{}{}",
                parity::summary(fs),
                v.ran_at
                    .as_deref()
                    .map(|a| format!(" · ran at {a}"))
                    .unwrap_or_default()
            );
            out.push(Line::styled(head, t.title()));
            if let Some(e) = &v.engine_line {
                out.push(Line::styled(e.clone(), t.muted()));
            }
            let mut sorted: Vec<&Finding> = fs
                .iter()
                .filter(|f| filter.is_empty() || f.to_string().contains(filter))
                .collect();
            sorted.sort_by_key(|f| std::cmp::Reverse(severity(f).rank()));
            if fs.is_empty() {
                out.push(Line::styled(
                    "✓ the parity contract holds in every environment",
                    t.ok(),
                ));
            }
            for f in sorted {
                let s = severity(f);
                out.push(Line::from(vec![
                    Span::styled(format!("{} ", glyph(Some(s))), t.severity(s)),
                    Span::styled(f.to_string(), t.severity(s)),
                ]));
            }
        }
    }
    out
}

/// Draws the findings from row `scroll` on; returns how many rows they take at this width
/// (the scroll bound).
pub fn draw(
    f: &mut Frame,
    area: Rect,
    v: &CheckView,
    filter: &str,
    scroll: u16,
    t: &Theme,
) -> usize {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border())
        .title(Line::from(vec![
            Span::styled(" Check · static parity (L0) ", t.title()),
            Span::styled(
                ":check re-runs · / filter · j/k scroll · esc back ",
                t.muted(),
            ),
        ]));
    // Wrapped here, at the pane's width, so the rows out of sight can be counted: a file
    // path or a host is never cut, and what does not fit is said on the border.
    let inner = block.inner(area);
    let w = usize::from(inner.width).max(1);
    let rows: Vec<Line> = lines(v, filter, t)
        .into_iter()
        .flat_map(|l| {
            let style = l.spans.last().map(|s| s.style).unwrap_or(l.style);
            let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
            super::fit::wrap(&text, w)
                .into_iter()
                .map(move |r| Line::styled(r, style))
        })
        .collect();
    let total = rows.len();
    let shown = usize::from(inner.height);
    let from = usize::from(scroll).min(total.saturating_sub(1));
    f.render_widget(Paragraph::new(rows).block(block).scroll((scroll, 0)), area);
    if total > shown || from > 0 {
        let last = (from + shown).min(total);
        let marker = format!(" lines {}-{last} of {total} ", from + 1);
        let mw = u16::try_from(super::fit::width(&marker)).unwrap_or(u16::MAX);
        if area.height >= 2 && area.width > mw + 2 {
            f.render_widget(
                Paragraph::new(Span::styled(marker, t.warn())),
                Rect {
                    x: area.right() - 1 - mw,
                    y: area.bottom() - 1,
                    width: mw,
                    height: 1,
                },
            );
        }
    }
    total
}
