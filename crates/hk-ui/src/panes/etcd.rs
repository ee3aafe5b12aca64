//! The etcd pane: one row per member (the environment's k3s servers): leader or follower,
//! DB size, WAL fsync p99 and IO pressure, each in the colour of its verdict, then every
//! verdict that is not ok in words (the starving server named).
//!
//! Owns: the layout of a [`EtcdPane`]. Must not: judge (the verdicts come with the pane).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use crate::theme::Theme;
use hk_engine::checks::live::{self, EtcdPane, Rule, Severity, Verdict};

use super::fit;
use super::live::{glyph, style};

fn verdict_of<'a>(p: &'a EtcdPane, rule: Rule, subject: &str) -> Option<&'a Verdict> {
    p.verdicts
        .iter()
        .find(|v| v.rule == rule && v.subject == subject)
}

/// The member table's lines (one per member and a header), never wrapped: at `width`
/// columns the DB column goes first, then the 60 s PSI, so host, role, fsync and PSI stay.
pub fn table(p: &EtcdPane, width: usize, t: &Theme) -> Vec<Line<'static>> {
    let name_w = fit::widest(p.members.iter().map(|m| m.host.as_str()), 6);
    let with_db = 2 + name_w + 2 + 9 + 11 + 12 + 15 <= width;
    let both_psi = 2 + name_w + 2 + 9 + 12 + 15 <= width;
    let psi_head = if both_psi { "IO PSI 10s/60s" } else { "IO PSI" };
    let db_head = if with_db {
        format!("{:>10} ", "DB")
    } else {
        String::new()
    };
    let mut out = vec![Line::styled(
        format!(
            "  {:<name_w$}  {:<8} {db_head}{:>11} {:>14}",
            "member", "role", "fsync p99", psi_head
        ),
        t.muted(),
    )];
    for m in &p.members {
        let mv = verdict_of(p, Rule::EtcdMember, &format!("member {}", m.host))
            .or_else(|| verdict_of(p, Rule::CouldNotLook, &format!("member {}", m.host)));
        let iv = verdict_of(p, Rule::EtcdIoPressure, &format!("server {}", m.host))
            .or_else(|| verdict_of(p, Rule::CouldNotLook, &format!("server {}", m.host)));
        let msev = mv.map(|v| v.severity);
        let isev = iv.map(|v| v.severity);
        // A member counted down by quorum (its node NotReady) is no ✓ row, whatever its
        // last metrics said.
        let qsev =
            verdict_of(p, Rule::EtcdQuorum, &format!("member {}", m.host)).map(|v| v.severity);
        let row_sev = [msev, isev, qsev]
            .into_iter()
            .flatten()
            .reduce(Severity::worst);
        // The role in etcd's own word (its status) where its client API was read.
        let said = p.client.as_ref().and_then(|c| {
            c.status.get(&m.host).map(|s| {
                if c.leader_id.is_some()
                    && s.leader == c.leader_id
                    && c.leader_host.as_deref() == Some(m.host.as_str())
                {
                    "leader"
                } else if s.learner {
                    "learner"
                } else {
                    "follower"
                }
            })
        });
        let (role, db, fsync) = match &m.metrics {
            Some(x) => (
                said.unwrap_or(if x.is_leader { "leader" } else { "follower" }),
                x.db_size_bytes
                    .map(live::human_bytes)
                    .unwrap_or_else(|| "?".into()),
                x.wal_fsync_p99_ms
                    .map(live::human_fsync)
                    .unwrap_or_else(|| "no samples".into()),
            ),
            None => ("?", "?".to_string(), "?".to_string()),
        };
        let psi = m
            .io_pressure
            .map(|x| {
                if both_psi {
                    format!("{:.2}/{:.2}%", x.some_avg10, x.some_avg60)
                } else {
                    format!("{:.2}%", x.some_avg10)
                }
            })
            .unwrap_or_else(|| "?".into());
        let db = if with_db {
            format!("{db:>10} ")
        } else {
            String::new()
        };
        out.push(Line::from(vec![
            Span::styled(format!("{} ", glyph(row_sev)), style(t, row_sev)),
            Span::styled(format!("{:<name_w$}  ", m.host), t.text()),
            Span::styled(
                format!("{role:<8} "),
                if role == "leader" {
                    t.focus()
                } else {
                    t.text()
                },
            ),
            Span::styled(db, t.text()),
            Span::styled(format!("{fsync:>11} "), style(t, msev)),
            Span::styled(format!("{psi:>14}"), style(t, isev)),
        ]));
    }
    out
}

/// The verdict lines under the table: every verdict that is not ok, worst first (or one ✓
/// line naming the leader).
pub fn verdict_lines(p: &EtcdPane, t: &Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut notable: Vec<&Verdict> = p
        .verdicts
        .iter()
        .filter(|v| v.severity != Severity::Ok)
        .collect();
    notable.sort_by_key(|v| std::cmp::Reverse(v.severity.rank()));
    if notable.is_empty() && !p.verdicts.is_empty() {
        out.push(Line::styled(
            format!(
                "✓ {}",
                match (p.leader.as_deref(), p.client.as_ref()) {
                    (Some(l), Some(c)) => format!(
                        "{l} leads (term {}); {} voting members agree, no alarm, quorum reads answer; every member's disk keeps up",
                        c.status.get(l).map(|s| s.raft_term.to_string()).unwrap_or_else(|| "?".into()),
                        c.members.iter().filter(|m| !m.learner).count()
                    ),
                    (Some(l), None) => format!("{l} leads; every member's disk keeps up"),
                    (None, _) => "nothing to report".into(),
                }
            ),
            t.ok(),
        ));
    }
    for v in notable {
        out.push(Line::from(vec![
            Span::styled(
                format!("{} ", glyph(Some(v.severity))),
                t.severity(v.severity),
            ),
            Span::styled(v.message.clone(), t.severity(v.severity)),
        ]));
    }
    out
}

/// Draw the pane with its border: the table unwrapped, the verdicts under it wrapped.
pub fn draw(f: &mut Frame, area: Rect, p: Option<&EtcdPane>, t: &Theme) {
    let title = match p {
        Some(p) => format!(" etcd · {} ", p.env),
        None => " etcd ".to_string(),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border())
        .title(Span::styled(title, t.title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let Some(p) = p else {
        f.render_widget(
            Paragraph::new(Line::styled(
                "no data yet: the servers have not been looked at",
                t.muted(),
            ))
            .wrap(Wrap { trim: false }),
            inner,
        );
        return;
    };
    let rows = table(p, usize::from(inner.width), t);
    let table_h = u16::try_from(rows.len())
        .unwrap_or(u16::MAX)
        .min(inner.height);
    let [top, rest] =
        Layout::vertical([Constraint::Length(table_h), Constraint::Min(0)]).areas(inner);
    f.render_widget(Paragraph::new(rows), top);
    f.render_widget(
        Paragraph::new(verdict_lines(p, t)).wrap(Wrap { trim: false }),
        rest,
    );
}
