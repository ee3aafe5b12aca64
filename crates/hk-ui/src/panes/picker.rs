//! The host picker: a runbook that runs on one host of a group, opened without naming the
//! host, lists the hosts the planner itself offers; enter plans for the selected one, esc
//! cancels.
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph};
use ratatui::Frame;

use crossterm::event::KeyCode;

use crate::pointer::{self, ListId};
use crate::state::picker::HostPicker;

use super::{centered, Ctx};

pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx, p: &HostPicker) {
    let t = cx.theme;
    let widest = p
        .hosts
        .iter()
        .map(|h| super::fit::width(h))
        .max()
        .unwrap_or(0);
    let head = format!("`{}` runs on one host of `{}`:", p.runbook, p.group);
    let want_w = super::fit::width(&head).max(widest + 6).max(44) + 2;
    let w = u16::try_from(want_w).unwrap_or(u16::MAX);
    let rows = u16::try_from(p.hosts.len()).unwrap_or(u16::MAX);
    let r = centered(area, w, rows.saturating_add(4));
    f.render_widget(Clear, r);
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(t.focus())
        .title(Span::styled(
            format!(" Pick a host · {} on {} ", p.runbook, p.env),
            t.title(),
        ))
        .style(t.background());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [head_a, list_a, keys_a] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(head, t.text()))),
        head_a,
    );
    let items: Vec<ListItem> = p
        .hosts
        .iter()
        .map(|h| ListItem::new(Line::from(Span::styled(h.clone(), t.text()))))
        .collect();
    let mut st = ListState::default();
    st.select(Some(p.sel));
    f.render_stateful_widget(
        // The marker shows the selection without colour too (NO_COLOR).
        List::new(items)
            .highlight_style(t.selected())
            .highlight_symbol("› ")
            .highlight_spacing(ratatui::widgets::HighlightSpacing::Always),
        list_a,
        &mut st,
    );
    // The rows out of sight on a short terminal are said, never silently dropped.
    let shown = usize::from(list_a.height);
    if let Some(more) = super::home::more_marker(p.hosts.len(), st.offset(), shown) {
        let mw = u16::try_from(super::fit::width(&more)).unwrap_or(u16::MAX);
        if r.width > mw + 2 {
            f.render_widget(
                Paragraph::new(Span::styled(more, t.warn())),
                Rect {
                    x: r.right() - 1 - mw,
                    y: r.bottom() - 1,
                    width: mw,
                    height: 1,
                },
            );
        }
    }
    cx.zones
        .rows(list_a, ListId::Hosts, st.offset(), p.hosts.len(), true);
    pointer::draw_buttons(
        f,
        keys_a,
        cx.zones,
        &[
            ("enter plan for it".into(), pointer::key(KeyCode::Enter)),
            ("↑↓ move".into(), None),
            ("esc cancel".into(), pointer::key(KeyCode::Esc)),
        ],
        t.muted(),
    );
}
