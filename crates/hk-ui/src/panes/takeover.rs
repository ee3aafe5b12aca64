//! Taking over a stale run lock, drawn: who held it (login@host, their run and runbook),
//! since when, when it was last renewed and how long ago, then the two fields a take-over
//! needs (the environment's name typed, and a reason). The modal's state and how it judges
//! the answers are `state::takeover`'s.
//! Must not: change the modal, reach the cluster or journal.
use crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;
use tui_textarea::TextArea;

use crate::state::field::GateField;
use crate::state::takeover::TakeoverModal;

use super::{centered, Ctx};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx, m: &TakeoverModal) {
    let t = cx.theme;
    let facts = m.facts();
    let mut lines: Vec<Line> = Vec::new();
    for (i, l) in facts.iter().enumerate() {
        let style = if i == 0 || i + 1 == facts.len() {
            t.warn()
        } else {
            t.text()
        };
        lines.push(Line::from(Span::styled(l.clone(), style)));
    }
    lines.push(Line::from(Span::styled(
        format!("type `{}`, tab, the reason", m.env),
        t.focus(),
    )));
    let w = area.width.saturating_sub(4).min(100);
    let body_h = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let h = body_h.saturating_add(1 + 6).saturating_add(3);
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(t.critical())
        .title(Span::styled(" Take over the run lock ", t.title()))
        .style(t.background());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [body, btns, a1, a2, err] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(1),
        Constraint::Length(3),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(inner);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), body);
    // The keys as buttons: a click presses the key (the typed name and reason are still
    // what takes the lock over).
    crate::pointer::draw_buttons(
        f,
        btns,
        cx.zones,
        &[
            ("tab next field".into(), crate::pointer::key(KeyCode::Tab)),
            (
                "enter take over".into(),
                crate::pointer::key(KeyCode::Enter),
            ),
            ("esc leave it".into(), crate::pointer::key(KeyCode::Esc)),
        ],
        t.focus(),
    );
    let input = |f: &mut Frame, area: Rect, label: &str, text: &TextArea, on: bool| {
        let b = Block::default()
            .borders(Borders::ALL)
            .border_style(if on { t.focus() } else { t.border() })
            .title(Span::styled(label.to_string(), t.muted()));
        let inner = b.inner(area);
        f.render_widget(b, area);
        f.render_widget(text, inner);
    };
    input(
        f,
        a1,
        " environment name ",
        &m.typed,
        m.field == GateField::Answer,
    );
    input(
        f,
        a2,
        " reason (journaled in both runs) ",
        &m.reason,
        m.field == GateField::Note,
    );
    if let Some(e) = &m.error {
        f.render_widget(Paragraph::new(Span::styled(e.clone(), t.critical())), err);
    }
}
