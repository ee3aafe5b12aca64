//! The all-environments strip: one line per environment (VIP, agents, VPN, nodes, etcd,
//! parity) in the colour of its worst facet, worst first; the expanded environment (the
//! selected one, or the one a run is on) shows each facet's headline and its next step.
//!
//! Owns: the wording and layout of [`observe::summary::Summary`](hk_effects::observe::summary)
//! on screen, the height it needs ([`height`]) and the header's alert ([`header_alert`]).
//! Must not: judge or choose next steps (the summary did), or read the clock.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::theme::Theme;
use hk_effects::observe::summary::{EnvSummary, Facet, NextStep, Summary};
use hk_engine::checks::live::Severity;

use super::fit;
use super::live::{glyph, style};

/// What the strip shows.
#[derive(Debug, Clone, Copy)]
pub struct StripView<'a> {
    pub summary: &'a Summary,
    /// The environment shown expanded (its facets one per line).
    pub expanded: Option<&'a str>,
}

/// The header's alert when any environment is critical: `✗ prod critical`.
pub fn header_alert(summary: &Summary) -> Option<String> {
    summary
        .critical_env()
        .map(|e| format!("✗ {} critical", e.env))
}

/// Lines the strip wants: one per environment, plus one per facet of the expanded one;
/// at most `max`.
pub fn height(view: &StripView<'_>, max: u16) -> u16 {
    let envs = view.summary.envs.len();
    let extra = if view
        .expanded
        .is_some_and(|x| view.summary.envs.iter().any(|e| e.env == x))
    {
        Facet::ALL.len()
    } else {
        0
    };
    u16::try_from(envs + extra)
        .unwrap_or(u16::MAX)
        .min(max)
        .max(1)
}

fn env_style(t: &Theme, e: &EnvSummary) -> Style {
    if e.protected {
        t.warn()
    } else {
        t.title()
    }
}

/// The compact line of one environment: its worst glyph and name (padded to `env_w`), each
/// facet's glyph, and the first next step. When that is wider than the line, the facets that
/// are ok fold into one `✓N`, so the bad ones and the next step stay readable.
fn env_line<'a>(
    t: &Theme,
    e: &'a EnvSummary,
    env_w: usize,
    width: u16,
    expanded: bool,
) -> Line<'a> {
    let worst = e.worst();
    let head = vec![
        Span::styled(format!(" {} ", glyph(worst)), style(t, worst)),
        Span::styled(format!("{:<env_w$}", e.env), env_style(t, e)),
        Span::styled(if expanded { " ▾ " } else { "   " }, t.muted()),
    ];
    let full: Vec<Span> = e
        .facets
        .iter()
        .map(|f| {
            Span::styled(
                format!("{} {} ", f.facet.label(), glyph(f.severity)),
                style(t, f.severity),
            )
        })
        .collect();
    let next = e.first_next().map(NextStep::short);
    let w = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
    let next_w = next.as_deref().map_or(0, fit::width);
    let width = usize::from(width);
    let mut spans = head;
    if w(&spans) + w(&full) + next_w <= width {
        spans.extend(full);
    } else {
        let oks = e
            .facets
            .iter()
            .filter(|f| f.severity == Some(Severity::Ok))
            .count();
        for f in e.facets.iter().filter(|f| f.severity != Some(Severity::Ok)) {
            if f.severity.is_none() {
                continue;
            }
            spans.push(Span::styled(
                format!("{} {} ", f.facet.label(), glyph(f.severity)),
                style(t, f.severity),
            ));
        }
        if oks > 0 {
            spans.push(Span::styled(format!("✓{oks} "), t.ok()));
        }
    }
    if let Some(n) = next {
        if w(&spans) + fit::width(&n) <= width {
            spans.push(Span::styled(n, t.focus()));
        }
    }
    Line::from(spans)
}

/// One facet's expanded line: glyph, label, headline, next step.
fn facet_line<'a>(t: &Theme, e: &'a EnvSummary, f: Facet, width: u16) -> Line<'a> {
    let Some(s) = e.facet(f) else {
        return Line::default();
    };
    let head = match (&s.headline, s.severity) {
        (Some(h), _) => h.clone(),
        (None, None) => "no data yet".to_string(),
        (None, Some(_)) => String::new(),
    };
    let next = s.next.as_ref().map(next_words).unwrap_or_default();
    let label = format!("   {} {:<7}", glyph(s.severity), f.label());
    let room = usize::from(width)
        .saturating_sub(label.chars().count())
        .saturating_sub(next.chars().count() + 1);
    // The next step is what the operator acts on: the headline gives way to it.
    let head = fit::clip(&head, room);
    let mut spans = vec![
        Span::styled(label, style(t, s.severity)),
        Span::styled(head, t.text()),
    ];
    if !next.is_empty() {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(next, t.focus()));
    }
    Line::from(spans)
}

/// The words of a next step on the expanded line, with the key that takes it.
pub fn next_words(n: &NextStep) -> String {
    match n {
        NextStep::Runbook { id, env, fixes, .. } => {
            let verb = if *fixes { "fix" } else { "verify" };
            format!("x {verb}: {id} ({env})")
        }
        NextStep::Look(l) => format!("x look: {} {}", l.object.kind.to_lowercase(), l.object.name),
        NextStep::Check { .. } => "x :check".to_string(),
    }
}

/// Draw the strip into `area` (one environment per line, the expanded one's facets under
/// it; environments that do not fit are counted as "N more").
pub fn draw(f: &mut Frame, area: Rect, view: &StripView<'_>, t: &Theme) {
    let rows = usize::from(area.height);
    let envs = &view.summary.envs;
    let env_w = fit::widest(envs.iter().map(|e| e.env.as_str()), 3);
    let mut lines: Vec<Line> = Vec::new();
    for (i, e) in envs.iter().enumerate() {
        let expanded = view.expanded == Some(e.env.as_str());
        let mut block = vec![env_line(t, e, env_w, area.width, expanded)];
        if expanded {
            block.extend(Facet::ALL.iter().map(|x| facet_line(t, e, *x, area.width)));
        }
        let after = envs.len() - i - 1;
        let room = rows.saturating_sub(lines.len());
        let reserve = usize::from(after > 0);
        if block.len() + reserve <= room {
            lines.extend(block);
        } else if expanded && room > reserve {
            // The expanded environment is the one the operator is on: as much of it as fits.
            lines.extend(block.into_iter().take(room - reserve));
            if after > 0 {
                lines.push(fit::more(after, "environment", t));
            }
            break;
        } else {
            if room > 0 {
                lines.push(fit::more(envs.len() - i, "environment", t));
            }
            break;
        }
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// The severity the header takes: the worst over every environment.
pub fn worst(summary: &Summary) -> Option<Severity> {
    summary
        .envs
        .iter()
        .filter_map(EnvSummary::worst)
        .reduce(Severity::worst)
}
