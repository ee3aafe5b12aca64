//! Home: environments (host count, VIP), runbooks (read-only or mutating, and where they
//! apply), recent runs (the run this console drives now as "running", Enter goes back to
//! it; an interrupted run first, with "resume"; a damaged journal listed
//! with "damaged at line N", never hidden; journals that cannot be read at all named below
//! the list). A list longer than its pane says how many rows are out of sight, above and
//! below, on its bottom border.
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use crate::pointer::ListId;
use crate::state::screens::{EnvSummary, HomeFocus, RunbookSummary};
use crate::theme::Theme;
use hk_engine::journal::RunSummary;
use hk_engine::runbook::machine::{Mode, RunOutcome};

use super::Ctx;

/// What Home draws: its three lists, their selections and the filter.
pub struct HomeView<'a> {
    pub cx: Ctx<'a>,
    pub envs: &'a [EnvSummary],
    /// The environment runbooks open in.
    pub current_env: Option<&'a str>,
    pub focus: HomeFocus,
    pub env_sel: usize,
    pub runbook_sel: usize,
    pub run_sel: usize,
    /// The runbooks the list shows (the `/` filter applied), of `runbooks_total` (those
    /// for the repo's environments).
    pub runbooks: Vec<&'a RunbookSummary>,
    pub runbooks_total: usize,
    /// Runbooks written for none of the repo's environments: not listed, counted in the
    /// title.
    pub runbooks_elsewhere: usize,
    /// The runs the list shows (the `/` filter applied), of `runs_total`.
    pub runs: Vec<&'a RunSummary>,
    pub runs_total: usize,
    pub runs_error: Option<&'a str>,
    pub filter: Option<&'a str>,
    /// The journal of the run this console drives right now (it is running, not
    /// interrupted).
    pub active_journal: Option<&'a std::path::Path>,
}

impl HomeView<'_> {
    /// Whether `r` is the run this console drives right now.
    fn is_active_run(&self, r: &RunSummary) -> bool {
        self.active_journal == Some(r.path.as_path())
    }
}

/// The rows of a bordered list pane: where clicks select.
fn inner(area: Rect) -> Rect {
    Block::default().borders(Borders::ALL).inner(area)
}

pub fn draw(f: &mut Frame, area: Rect, v: &HomeView) {
    let env_h = (v.envs.len() as u16 + 2).clamp(3, 8);
    let [envs, rest] =
        Layout::vertical([Constraint::Length(env_h), Constraint::Min(0)]).areas(area);
    let [runbooks, runs] = if rest.width >= 100 {
        Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)]).areas(rest)
    } else {
        Layout::vertical([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(rest)
    };
    draw_envs(f, envs, v);
    draw_runbooks(f, runbooks, v);
    draw_runs(f, runs, v);
}

fn block<'a>(t: &Theme, title: &'a str, focused: bool) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(if focused { t.focus() } else { t.border() })
        .title(Span::styled(title, t.title()))
}

fn list_state(sel: usize, len: usize, focused: bool) -> ListState {
    let mut s = ListState::default();
    if focused && len > 0 {
        s.select(Some(sel.min(len - 1)));
    }
    s
}

/// What a list of `len` rows drawn from `offset` in `rows` lines leaves out of sight:
/// `↑ N more` / `↓ N more`, or nothing when everything shows.
pub fn more_marker(len: usize, offset: usize, rows: usize) -> Option<String> {
    let above = offset.min(len);
    let below = len.saturating_sub(offset + rows);
    match (above, below) {
        (0, 0) => None,
        (0, b) => Some(format!(" ↓ {b} more ")),
        (a, 0) => Some(format!(" ↑ {a} more ")),
        (a, b) => Some(format!(" ↑ {a} · ↓ {b} more ")),
    }
}

/// Writes [`more_marker`] right-aligned on the bottom border of `area` (a bordered pane
/// whose list shows `rows` lines).
pub(crate) fn draw_more(
    f: &mut Frame,
    area: Rect,
    t: &Theme,
    len: usize,
    offset: usize,
    rows: usize,
) {
    let Some(text) = more_marker(len, offset, rows) else {
        return;
    };
    let w = u16::try_from(text.chars().count()).unwrap_or(u16::MAX);
    if area.height < 3 || area.width < w + 2 {
        return;
    }
    let at = Rect {
        x: area.x + area.width - 1 - w,
        y: area.y + area.height - 1,
        width: w,
        height: 1,
    };
    f.render_widget(Paragraph::new(Span::styled(text, t.warn())), at);
}

fn inner_rows(area: Rect) -> usize {
    usize::from(area.height.saturating_sub(2))
}

fn draw_envs(f: &mut Frame, area: Rect, v: &HomeView) {
    let t = v.cx.theme;
    let focused = v.focus == HomeFocus::Environments;
    // The names' column: as wide as the longest (a public repo's `k3s_cluster` ran into its
    // host count), at least the sample's eight.
    let width = v
        .envs
        .iter()
        .map(|e| e.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let items: Vec<ListItem> = v
        .envs
        .iter()
        .map(|e| {
            let current = v.current_env == Some(e.name.as_str());
            let mut spans = vec![
                Span::styled(if current { "● " } else { "  " }, t.focus()),
                Span::styled(format!("{:<width$}  ", e.name), t.text()),
                Span::styled(format!("{} hosts  ", e.hosts), t.text()),
                Span::styled("VIP ", t.muted()),
                match &e.vip {
                    Some(v) => Span::styled(v.clone(), t.text()),
                    None => Span::styled("unknown", t.warn()),
                },
            ];
            if !e.problems.is_empty() {
                spans.push(Span::styled(
                    format!("  ⚠ {}", e.problems.join("; ")),
                    t.warn(),
                ));
            }
            ListItem::new(Line::from(spans))
        })
        .collect();
    let items = if items.is_empty() {
        vec![ListItem::new(Span::styled(
            "no environments (hk-console.yaml defines them)",
            t.muted(),
        ))]
    } else {
        items
    };
    let mut st = list_state(v.env_sel, v.envs.len(), focused);
    f.render_stateful_widget(
        List::new(items)
            .block(block(t, " Environments ", focused))
            .highlight_style(t.selected()),
        area,
        &mut st,
    );
    draw_more(f, area, t, v.envs.len(), st.offset(), inner_rows(area));
    v.cx.zones.rows(
        inner(area),
        ListId::Environments,
        st.offset(),
        v.envs.len(),
        false,
    );
}

fn draw_runbooks(f: &mut Frame, area: Rect, v: &HomeView) {
    let t = v.cx.theme;
    let focused = v.focus == HomeFocus::Runbooks;
    let visible = &v.runbooks;
    let width = visible.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let items: Vec<ListItem> = visible
        .iter()
        .map(|r| {
            let (mark, style) = if r.mutates {
                ("mutating ", t.mutating())
            } else {
                ("read-only", t.read_only())
            };
            let usable = v
                .current_env
                .is_none_or(|c| r.environments.iter().any(|e| e == c));
            let id_style = if usable { t.text() } else { t.muted() };
            ListItem::new(Line::from(vec![
                Span::styled(format!("{:<width$}  ", r.id), id_style),
                Span::styled(mark, style),
                Span::styled(format!("  [{}]", r.environments.join(", ")), t.muted()),
            ]))
        })
        .collect();
    if visible.is_empty() && v.filter.is_none() && v.runbooks_elsewhere > 0 {
        let msg = format!(
            "no runbook for this repo ({} not offered here: written for other \
             environments, or built in for playbooks it lacks; `runbooks list --all` says \
             which); `hk-console runbooks new --playbook P` scaffolds one from a playbook",
            v.runbooks_elsewhere
        );
        f.render_widget(
            Paragraph::new(Span::styled(msg, t.muted()))
                .wrap(Wrap { trim: true })
                .block(block(t, " Runbooks ", focused)),
            area,
        );
        return;
    }
    let mut st = list_state(v.runbook_sel, visible.len(), focused);
    let elsewhere = match v.runbooks_elsewhere {
        0 => String::new(),
        n => format!("{n} not for this repo hidden; "),
    };
    let title = match v.filter {
        Some(flt) => format!(
            " Runbooks  /{flt}  ({} of {}; {elsewhere}) ",
            visible.len(),
            v.runbooks_total
        )
        .replace("; ) ", ") "),
        None => format!(" Runbooks  ({elsewhere}enter: open in env, e: next env) "),
    };
    f.render_stateful_widget(
        List::new(items)
            .block(block(t, &title, focused))
            .highlight_style(t.selected()),
        area,
        &mut st,
    );
    draw_more(f, area, t, visible.len(), st.offset(), inner_rows(area));
    v.cx.zones.rows(
        inner(area),
        ListId::Runbooks,
        st.offset(),
        visible.len(),
        false,
    );
}

fn draw_runs(f: &mut Frame, area: Rect, v: &HomeView) {
    let t = v.cx.theme;
    let focused = v.focus == HomeFocus::Runs;
    let b = block(t, " Recent runs ", focused);
    let visible = &v.runs;
    if visible.is_empty() {
        let msg = v
            .runs_error
            .map(str::to_string)
            .unwrap_or_else(|| match v.filter {
                Some(flt) if v.runs_total > 0 => format!("no run matches /{flt}"),
                _ => "no runs journaled yet".into(),
            });
        let style = if v.runs_error.is_some() {
            t.warn()
        } else {
            t.muted()
        };
        f.render_widget(Paragraph::new(Span::styled(msg, style)).block(b), area);
        return;
    }
    let items: Vec<ListItem> = visible
        .iter()
        .map(|r| {
            let style: Style = match r.outcome {
                RunOutcome::Succeeded => t.ok(),
                RunOutcome::Failed | RunOutcome::Aborted => t.critical(),
                // Never green: the operator went past something on the way.
                RunOutcome::Interrupted | RunOutcome::SucceededWithOverrides => t.warn(),
                RunOutcome::InProgress => t.running(),
            };
            let active = v.is_active_run(r);
            // The journal of the run driven right now reads as unfinished, like an
            // interrupted one; it is neither interrupted nor to be resumed.
            let outcome = if active {
                "active".to_string()
            } else {
                r.outcome.to_string()
            };
            let style = if active { t.running() } else { style };
            let mut spans = vec![Span::styled(format!("{outcome:<12}"), style)];
            if active {
                spans.push(Span::styled("▶ running  ", t.running()));
            } else if let Some(d) = &r.damage {
                // Never offered for resume: the lines after the damage are unknown.
                spans.push(Span::styled(
                    format!("✖ damaged at line {} (read-only)  ", d.line),
                    t.critical(),
                ));
            } else if matches!(r.outcome, RunOutcome::Interrupted | RunOutcome::InProgress) {
                spans.push(Span::styled("▶ resume  ", t.warn()));
            }
            spans.push(Span::styled(
                format!("{} on {}", r.runbook, r.env),
                t.text(),
            ));
            if r.mode == Mode::Observe {
                spans.push(Span::styled(" (observe)", t.read_only()));
            }
            // `2026-09-07T10:15` -> `09-07 10:15`: enough to tell runs apart at a glance.
            let started = r.started.to_string();
            let short = match (started.get(5..10), started.get(11..16)) {
                (Some(d), Some(h)) => format!("{d} {h}"),
                _ => started,
            };
            spans.push(Span::styled(format!("  {short}"), t.muted()));
            ListItem::new(Line::from(spans))
        })
        .collect();

    let mut st = list_state(v.run_sel, visible.len(), focused);
    // Journals that could not be read at all are named even when other runs exist (an
    // interrupted run must never simply disappear): wrapped below the list.
    let inner = b.inner(area);
    f.render_widget(b, area);
    let list_area = match v.runs_error {
        Some(err) if inner.width > 0 && inner.height > 1 => {
            let msg = format!("⚠ {err}");
            let width = usize::from(inner.width);
            let needed = msg.chars().count().div_ceil(width);
            let h = u16::try_from(needed)
                .unwrap_or(u16::MAX)
                .clamp(1, (inner.height / 2).max(1));
            let [list_area, err_area] =
                Layout::vertical([Constraint::Min(0), Constraint::Length(h)]).areas(inner);
            f.render_widget(
                Paragraph::new(Span::styled(msg, t.warn())).wrap(Wrap { trim: false }),
                err_area,
            );
            list_area
        }
        _ => inner,
    };
    let len = items.len();
    f.render_stateful_widget(
        List::new(items).highlight_style(t.selected()),
        list_area,
        &mut st,
    );
    v.cx.zones
        .rows(list_area, ListId::Runs, st.offset(), len, false);
    // The rows the list area (not the whole pane: error lines may sit below it) leaves out.
    draw_more(f, area, t, len, st.offset(), usize::from(list_area.height));
}

#[cfg(test)]
mod tests {
    use super::more_marker;

    #[test]
    fn the_marker_counts_what_is_out_of_sight() {
        assert_eq!(more_marker(5, 0, 5), None);
        assert_eq!(more_marker(3, 0, 5), None);
        assert_eq!(more_marker(8, 0, 5).as_deref(), Some(" ↓ 3 more "));
        assert_eq!(more_marker(8, 3, 5).as_deref(), Some(" ↑ 3 more "));
        assert_eq!(more_marker(8, 1, 5).as_deref(), Some(" ↑ 1 · ↓ 2 more "));
        assert_eq!(more_marker(0, 0, 0), None);
    }
}
