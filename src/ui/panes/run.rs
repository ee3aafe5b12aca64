//! The run view: the plan's steps with state glyphs, the current step (host progress,
//! command, elapsed, what comes next) and its output with scrollback and follow.
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use crate::runbook::machine::{Run, RunStatus, StepRecord, StepState, Timestamp};
use crate::runbook::plan::PlannedStep;
use crate::ui::app::{ActiveRun, App, RunFocus};
use crate::ui::theme::Theme;

use super::age;

/// The glyph and style of a step state.
pub fn glyph(state: &StepState, t: &Theme) -> (&'static str, Style) {
    match state {
        StepState::Pending => ("·", t.muted()),
        StepState::AwaitingGate { .. } => ("?", t.warn()),
        StepState::Running {
            cancel_requested: true,
            ..
        } => ("⊘", t.warn()),
        StepState::Running { .. } => ("▶", t.running()),
        StepState::Verifying => ("…", t.running()),
        StepState::Done => ("✓", t.ok()),
        StepState::Failed { .. } => ("✗", t.critical()),
        StepState::Skipped { .. } => ("↷", t.muted()),
        StepState::Interrupted { .. } => ("!", t.warn()),
    }
}

pub fn draw(f: &mut Frame, area: Rect, app: &App) {
    let Some(a) = &app.active else {
        f.render_widget(Paragraph::new("no run open"), area);
        return;
    };
    let [left, right] = if area.width >= 120 {
        // The plan takes the width its rows need, up to what leaves the step and output
        // panes 72 columns (the step's halt, its look and its command stay in view); the
        // host column comes first, so it is whole at any of these widths.
        let need = u16::try_from(plan_width(a)).unwrap_or(u16::MAX);
        let floor = area.width * 42 / 100;
        let left_w = need.clamp(floor, area.width.saturating_sub(72).max(floor));
        Layout::horizontal([Constraint::Length(left_w), Constraint::Min(0)]).areas(area)
    } else if area.width >= 90 {
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(area)
    } else {
        Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area)
    };
    draw_steps(f, left, app, a);
    let detail_h = if right.height >= 20 {
        10
    } else {
        right.height / 2
    };
    let [detail, output] =
        Layout::vertical([Constraint::Length(detail_h), Constraint::Min(0)]).areas(right);
    draw_detail(f, detail, app, a);
    draw_output(f, output, app, a);
}

fn status_text(run: &Run) -> String {
    match run.status() {
        RunStatus::NotStarted => "not started".into(),
        RunStatus::Active { n } => format!("at step {n}"),
        RunStatus::Halted { n } => format!("HALTED at step {n}"),
        RunStatus::Succeeded => "succeeded".into(),
        RunStatus::Aborted { by, reason } => format!("aborted by {by}: {reason}"),
    }
}

fn draw_steps(f: &mut Frame, area: Rect, app: &App, a: &ActiveRun) {
    let t = &app.theme;
    let run = &a.run;
    let mut title = format!(
        " {} · {} · {} ",
        run.plan().runbook,
        run.plan().env,
        status_text(run)
    );
    if let Some(start) = run.started_at() {
        let end = run.finished_at().unwrap_or(app.now);
        title.push_str(&format!("· {} ", age(end.0.saturating_sub(start.0))));
    }
    let host_w = host_width(a);
    let items: Vec<ListItem> = run
        .steps()
        .map(|(s, r)| {
            let (g, gs) = glyph(&r.state, t);
            let (m, ms) = if s.mutates {
                ("M", t.mutating())
            } else {
                ("r", t.read_only())
            };
            let mut spans = vec![
                Span::styled(format!("{g} "), gs),
                Span::styled(format!("{:>2} ", s.n), t.muted()),
                Span::styled(format!("{m} "), ms),
            ];
            // The host before the title: on a narrow pane the title gives way, never the
            // host a step acts on.
            if host_w > 0 {
                spans.push(Span::styled(
                    format!("{:<host_w$} ", s.host.as_deref().unwrap_or("")),
                    t.focus(),
                ));
            }
            spans.push(Span::styled(step_label(s), t.text()));
            if let Some(why) = app.capabilities().blocker(s) {
                if r.state == StepState::Pending {
                    spans.push(Span::styled(format!("  ({why})"), t.warn()));
                }
            }
            if let Some(e) = elapsed(r, app.now) {
                spans.push(Span::styled(format!("  {e}"), t.muted()));
            }
            ListItem::new(Line::from(spans))
        })
        .collect();
    let mut st = ListState::default();
    st.select(Some(
        a.selected.min(run.plan().steps.len().saturating_sub(1)),
    ));
    let border = if app.run_focus == RunFocus::Steps {
        t.focus()
    } else {
        t.border()
    };
    f.render_stateful_widget(
        List::new(items)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(border)
                    .title(Span::styled(title, t.title())),
            )
            .highlight_style(t.selected()),
        area,
        &mut st,
    );
}

/// The widest host a step of the plan acts on (0: no step names one).
fn host_width(a: &ActiveRun) -> usize {
    a.run
        .plan()
        .steps
        .iter()
        .filter_map(|s| s.host.as_deref())
        .map(super::fit::width)
        .max()
        .unwrap_or(0)
}

/// Columns the plan pane needs to show every row whole (borders and elapsed included).
fn plan_width(a: &ActiveRun) -> usize {
    let host_w = host_width(a);
    let host = if host_w > 0 { host_w + 1 } else { 0 };
    a.run
        .plan()
        .steps
        .iter()
        .map(|s| 2 + 3 + 2 + host + super::fit::width(&step_label(s)))
        .max()
        .unwrap_or(0)
        + 2
        + 9
}

fn step_label(s: &PlannedStep) -> String {
    let title = if s.title.is_empty() { &s.id } else { &s.title };
    format!("{} {}", s.kind.as_str(), title)
}

/// Elapsed of a step: from its start to its end, or to now while it runs.
fn elapsed(r: &StepRecord, now: Timestamp) -> Option<String> {
    let start = r.started_at?;
    let end = r.finished_at.unwrap_or(now);
    Some(age(end.0.saturating_sub(start.0)))
}

/// The step the detail pane shows: the selected one. The selection follows the run to its
/// active step as the run moves; the operator can move it to look at any other.
fn current(a: &ActiveRun) -> Option<(&PlannedStep, &StepRecord)> {
    a.run.steps().nth(a.selected)
}

/// "node 2 of 3: k3s-prod-1": the host's place among the plan's hosts, in plan order.
pub fn host_progress(a: &ActiveRun, host: &str) -> String {
    let mut hosts: Vec<&str> = Vec::new();
    for s in &a.run.plan().steps {
        if let Some(h) = &s.host {
            if !hosts.contains(&h.as_str()) {
                hosts.push(h);
            }
        }
    }
    match hosts.iter().position(|h| *h == host) {
        Some(i) => format!("node {} of {}: {host}", i + 1, hosts.len()),
        None => host.to_string(),
    }
}

fn draw_detail(f: &mut Frame, area: Rect, app: &App, a: &ActiveRun) {
    let t = &app.theme;
    let mut lines: Vec<Line> = Vec::new();
    if let Some((s, r)) = current(a) {
        let (g, gs) = glyph(&r.state, t);
        lines.push(Line::from(vec![
            Span::styled(format!("{g} step {} ", s.n), gs),
            Span::styled(r.state.name(), gs),
            Span::styled(
                if s.mutates {
                    "  mutates"
                } else {
                    "  read-only"
                },
                if s.mutates {
                    t.mutating()
                } else {
                    t.read_only()
                },
            ),
            Span::styled(
                elapsed(r, app.now).map_or(String::new(), |e| format!("  elapsed {e}")),
                t.muted(),
            ),
        ]));
        lines.push(Line::from(Span::styled(step_label(s), t.text())));
        if let Some(h) = &s.host {
            lines.push(Line::from(Span::styled(host_progress(a, h), t.focus())));
        }
        match &r.state {
            StepState::Failed { reason } => {
                lines.push(Line::from(Span::styled(reason.clone(), t.critical())))
            }
            StepState::Skipped { reason } => lines.push(Line::from(Span::styled(
                format!("skipped: {reason}"),
                t.muted(),
            ))),
            _ => {
                if let Some(d) = &r.detail {
                    lines.push(Line::from(Span::styled(d.clone(), t.muted())));
                }
            }
        }
        if let Some(why) = app.capabilities().blocker(s) {
            lines.push(Line::from(Span::styled(
                format!("cannot start: {why}"),
                t.warn(),
            )));
        }
        if let Some(p) = &r.process {
            lines.push(Line::from(Span::styled(
                format!(
                    "process: pid {} (start {}){}",
                    p.pid,
                    p.start_time,
                    p.ended
                        .as_ref()
                        .map_or(String::new(), |how| format!(" · {how}"))
                ),
                t.muted(),
            )));
        }
        if let Some(p) = &r.probe {
            lines.push(Line::from(Span::styled(
                format!(
                    "probe (step {}): {} · {}",
                    p.probe,
                    if p.ok { "OK" } else { "NOT OK" },
                    p.detail
                ),
                if p.ok { t.ok() } else { t.critical() },
            )));
        }
        let waiting_gate = matches!(r.state, StepState::AwaitingGate { .. })
            && !matches!(app.overlay, Some(crate::ui::app::Overlay::Gate(_)));
        if waiting_gate && !a.view_only && a.journal.is_some() {
            lines.push(Line::from(Span::styled(
                "gate waiting: enter answers it",
                t.warn(),
            )));
        }
        if matches!(a.run.status(), RunStatus::Halted { .. }) && !a.view_only {
            let decide = s.mutates && matches!(r.state, StepState::Interrupted { .. });
            lines.push(Line::from(Span::styled(
                if decide {
                    "interrupted change: enter decides (re-run with a fresh preview, mark \
                     done, abort)"
                } else {
                    "run halted: r retry · S skip · A abort"
                },
                t.warn(),
            )));
            // What explains the halt is one key away: the look at the object it names.
            if let Some(crate::observe::summary::NextStep::Look(l)) = app.run_env_next() {
                lines.push(Line::from(Span::styled(
                    format!(
                        "x look: {} {} ({})",
                        l.object.kind.to_lowercase(),
                        l.object.name,
                        l.kinds
                            .iter()
                            .map(|k| crate::ui::panes::look::key_of(*k).1)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    t.focus(),
                )));
            }
        }
        let next = a
            .run
            .steps()
            .skip_while(|(x, _)| x.n != s.n)
            .skip(1)
            .find(|(_, r)| !r.state.is_terminal());
        lines.push(Line::from(match next {
            Some((x, _)) => vec![
                Span::styled("next: ", t.muted()),
                Span::styled(
                    format!(
                        "{} {}{}{}",
                        x.n,
                        step_label(x),
                        x.host
                            .as_ref()
                            .filter(|h| !x.title.contains(h.as_str()))
                            .map_or(String::new(), |h| format!(" on {h}")),
                        if x.mutates { " (mutates)" } else { "" }
                    ),
                    t.text(),
                ),
            ],
            None => vec![Span::styled("next: nothing (last step)", t.muted())],
        }));
        if let Some(cmd) = &s.command {
            lines.push(Line::from(vec![
                Span::styled("$ ", t.muted()),
                Span::styled(cmd.join(" "), t.text()),
            ]));
        }
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.border())
                .title(Span::styled(" Step ", t.title())),
        ),
        area,
    );
}

fn draw_output(f: &mut Frame, area: Rect, app: &App, a: &ActiveRun) {
    let t = &app.theme;
    let o = &a.output;
    let inner_h = usize::from(area.height.saturating_sub(2));
    let (lines, matches): (Vec<Line>, Option<usize>) = match &app.filter {
        Some(flt) => {
            let (v, n) = o.matching_numbered(inner_h, flt);
            // The match `n`/`N` jumped to stands out among the others.
            let lines = v
                .into_iter()
                .map(|(abs, l)| {
                    let style = if app.search_at == Some(abs) {
                        t.selected()
                    } else {
                        t.text()
                    };
                    Line::from(Span::styled(l, style))
                })
                .collect();
            (lines, Some(n))
        }
        None => (
            o.window(inner_h)
                .map(|l| Line::from(Span::styled(l, t.text())))
                .collect(),
            None,
        ),
    };
    let mut title = format!(" Output  {} lines", o.len());
    if let (Some(flt), Some(n)) = (&app.filter, matches) {
        title.push_str(&format!("  /{flt}: {n} matching"));
    }
    if o.dropped() > 0 {
        title.push_str(&format!(" (+{} older dropped)", o.dropped()));
    }
    title.push_str(if o.follow { "  follow " } else { "  scrolled " });
    if o.below() > 0 {
        title.push_str(&format!("· {} below ", o.below()));
    }
    let body = if lines.is_empty() {
        Paragraph::new(Span::styled("no output yet", t.muted()))
    } else {
        Paragraph::new(lines)
    };
    let border = if app.run_focus == RunFocus::Output {
        t.focus()
    } else {
        t.border()
    };
    f.render_widget(
        body.block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(border)
                .title(Span::styled(title, t.title())),
        ),
        area,
    );
}
