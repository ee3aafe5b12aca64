//! The run view: the plan's steps with state glyphs, the current step (host progress,
//! command, elapsed, what comes next) and its output with scrollback and follow.
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph};
use ratatui::Frame;

use crate::state::run::ActiveRun;
use crate::state::screens::RunFocus;
use crate::theme::Theme;
use hk_engine::runbook::machine::{Run, RunStatus, StepRecord, StepState, Timestamp};
use hk_engine::runbook::plan::PlannedStep;

use super::{age, Ctx};

/// What the run view draws: the open run (or the blockers of the runbook that cannot
/// start), the pane in focus, the output's search and wrapping.
pub struct RunView<'a> {
    pub cx: Ctx<'a>,
    pub active: Option<&'a ActiveRun>,
    /// The runbook last asked for that cannot start, shown in place of steps.
    pub blocked: Option<&'a hk_session::Blocked>,
    /// What can run here (a step's blocker).
    pub caps: &'a hk_session::exec::Capabilities,
    pub focus: RunFocus,
    /// The `/` search over the output, and the match `n`/`N` last jumped to.
    pub filter: Option<&'a str>,
    pub search_at: Option<u64>,
    pub output_wrap: bool,
    /// A gate modal is up over the run.
    pub gate_shown: bool,
    /// The `--runbooks` file that replaced the shipped runbook of the run, if one did.
    pub overrides_shipped: Option<&'a str>,
    /// Before the run starts: where its plan takes the VIP holder and the etcd leader.
    pub holder_advice: Vec<hk_engine::guard::blast::BlastLine>,
    /// Every environment at a glance (the next step of the run's environment).
    pub summary: &'a hk_effects::observe::summary::Summary,
}

impl RunView<'_> {
    /// The next step of the open run's environment, if its verdicts ask for one.
    fn run_env_next(&self) -> Option<&hk_effects::observe::summary::NextStep> {
        let env = &self.active?.run.plan().env;
        self.summary.env(env)?.first_next()
    }
}

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

pub fn draw(f: &mut Frame, area: Rect, rv: &RunView) {
    let Some(a) = rv.active else {
        match rv.blocked {
            Some(b) => draw_blocked(f, area, rv, b),
            None => f.render_widget(Paragraph::new("no run open"), area),
        }
        return;
    };
    if area.width < 90 {
        draw_narrow(f, area, rv, a);
        return;
    }
    let [left, right] = if area.width >= 120 {
        // The plan takes the width its rows need, up to what leaves the step and output
        // panes 72 columns (the step's halt, its look and its command stay in view); the
        // host column comes first, so it is whole at any of these widths.
        let need = u16::try_from(plan_width(a)).unwrap_or(u16::MAX);
        let floor = area.width * 42 / 100;
        let left_w = need.clamp(floor, area.width.saturating_sub(72).max(floor));
        Layout::horizontal([Constraint::Length(left_w), Constraint::Min(0)]).areas(area)
    } else {
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(area)
    };
    draw_steps(f, left, rv, a);
    // Output keeps a third of a tall column; on a short one it shrinks to one line so
    // the step's host, what comes next and its command stay in view.
    let out_min = if right.height >= 20 {
        right.height / 3
    } else {
        3
    };
    let detail_h = detail_height(rv, a, right.width, right.height.saturating_sub(out_min));
    let [detail, output] =
        Layout::vertical([Constraint::Length(detail_h), Constraint::Min(0)]).areas(right);
    draw_detail(f, detail, rv, a);
    draw_output(f, output, rv, a);
}

/// A runbook that cannot start: every blocker with where it is and what to do, wrapped to
/// the width (nothing cut), in place of the steps. There is no run, so nothing to start.
fn draw_blocked(f: &mut Frame, area: Rect, rv: &RunView, b: &hk_session::Blocked) {
    let t = rv.cx.theme;
    let w = usize::from(area.width.saturating_sub(2)).max(10);
    let mut lines: Vec<Line> = vec![Line::styled(
        format!(
            "cannot start: {} before step 1. Fix each, then open the runbook again.",
            if b.blockers.len() == 1 {
                "1 blocker".to_string()
            } else {
                format!("{} blockers", b.blockers.len())
            }
        ),
        t.critical(),
    )];
    for (i, x) in b.blockers.iter().enumerate() {
        lines.push(Line::raw(""));
        let head = format!("{}. {} [{}]", i + 1, x.at, x.kind);
        for l in hard_wrap(&head, w) {
            lines.push(Line::styled(l, t.critical()));
        }
        for l in hard_wrap(&format!("   {}", x.message), w) {
            lines.push(Line::raw(l));
        }
        for l in hard_wrap(&format!("   fix: {}", x.fix), w) {
            lines.push(Line::styled(l, t.warn()));
        }
    }
    let title = format!(" {} · {} · blocked ", b.runbook, b.env);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}

/// Below 90 columns the plan, the step and the output are stacked. The step pane is
/// budgeted first (what it needs, leaving the plan and the output one row each: at 80x24
/// its host, "next" and command stay in view), then the plan and the output share the rest.
fn draw_narrow(f: &mut Frame, area: Rect, rv: &RunView, a: &ActiveRun) {
    let detail_h = detail_height(rv, a, area.width, area.height.saturating_sub(6));
    let rest = area.height.saturating_sub(detail_h);
    let steps_h = (rest * 45 / 100).max(3.min(rest));
    let [steps, detail, output] = Layout::vertical([
        Constraint::Length(steps_h),
        Constraint::Length(detail_h),
        Constraint::Min(0),
    ])
    .areas(area);
    draw_steps(f, steps, rv, a);
    draw_detail(f, detail, rv, a);
    draw_output(f, output, rv, a);
}

fn status_text(run: &Run) -> String {
    match run.status() {
        RunStatus::NotStarted => "not started".into(),
        RunStatus::Active { n } => format!("at step {n}"),
        RunStatus::Halted { n } => format!("HALTED at step {n}"),
        RunStatus::Succeeded => run.outcome().to_string(),
        RunStatus::Aborted { by, reason } => format!("aborted by {by}: {reason}"),
    }
}

fn draw_steps(f: &mut Frame, area: Rect, rv: &RunView, a: &ActiveRun) {
    let t = rv.cx.theme;
    let run = &a.run;
    // A run whose journal broke is halted whatever its last recorded state says.
    let status = match a.journal_broken() {
        Some(_) => "HALTED: the journal cannot be written".to_string(),
        None => status_text(run),
    };
    let mut title = format!(" {} · {} · {} ", run.plan().runbook, run.plan().env, status);
    if let Some(start) = run.started_at() {
        let end = run.finished_at().unwrap_or(rv.cx.now);
        title.push_str(&format!("· {} ", age(end.0.saturating_sub(start.0))));
    }
    // A `--runbooks` file with a shipped id is not the runbook the operator knows.
    if rv.overrides_shipped.is_some() {
        title.push_str("· overrides the shipped runbook ");
    }
    let host_w = host_width(a);
    let inner_w = usize::from(area.width.saturating_sub(2));
    let hosts: Vec<&str> = run
        .plan()
        .steps
        .iter()
        .filter_map(|s| s.host.as_deref())
        .collect();
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
            let blocker = rv
                .caps
                .blocker(s)
                .filter(|_| r.state == StepState::Pending)
                .map(|why| format!("  ({why})"))
                .unwrap_or_default();
            let took = elapsed(r, rv.cx.now).map_or(String::new(), |e| format!("  {e}"));
            // What does not fit ends in `…`: the title keeps at least its first columns,
            // a blocker the rest (the Step pane says it whole), the elapsed time stays;
            // a title is never cut inside a host name (the host column has it whole).
            let used: usize = spans.iter().map(Span::width).sum();
            let room = inner_w.saturating_sub(used + super::fit::width(&took));
            let label = step_label(s);
            let (label_w, blocker_w) = (super::fit::width(&label), super::fit::width(&blocker));
            let title_room = if label_w + blocker_w <= room {
                label_w
            } else {
                room.saturating_sub(blocker_w)
                    .max(label_w.min(24))
                    .min(room)
            };
            let title = super::fit::clip_keeping(&label, title_room, &hosts);
            let left = room.saturating_sub(super::fit::width(&title));
            spans.push(Span::styled(title, t.text()));
            if !blocker.is_empty() && left > 0 {
                spans.push(Span::styled(super::fit::clip(&blocker, left), t.warn()));
            }
            spans.push(Span::styled(took, t.muted()));
            ListItem::new(Line::from(spans))
        })
        .collect();
    let mut st = ListState::default();
    st.select(Some(
        a.selected.min(run.plan().steps.len().saturating_sub(1)),
    ));
    let border = if rv.focus == RunFocus::Steps {
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
    // A plan taller than its pane says what it hides (at 80x24 it shows two rows).
    let inner = Block::default().borders(Borders::ALL).inner(area);
    super::home::draw_more(
        f,
        area,
        rv.cx.theme,
        run.plan().steps.len(),
        st.offset(),
        usize::from(inner.height),
    );
    rv.cx.zones.rows(
        Block::default().borders(Borders::ALL).inner(area),
        crate::pointer::ListId::Steps,
        st.offset(),
        run.plan().steps.len(),
        false,
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

/// How much a Step pane line matters when its rows are short: the lowest goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// Process ids, a step's detail: the journal and `runs show` keep them.
    Aside,
    /// A probe's result, a skip reason.
    Useful,
    /// The step's title (its row in the plan shows it too), "gate waiting".
    Context,
    /// State, host, failure, what blocks it, the halt and its keys, the look, next, command.
    Essential,
}

/// One logical line of the Step pane.
struct StepLine {
    line: Line<'static>,
    rank: Rank,
    /// The command: when rows are short it keeps the rows left and is cut with a marker.
    command: bool,
}

impl StepLine {
    fn new(line: Line<'static>, rank: Rank) -> StepLine {
        StepLine {
            line,
            rank,
            command: false,
        }
    }
}

/// The Step pane's lines, every one whole (wrapping comes later, at the pane's width).
fn detail_lines(rv: &RunView, a: &ActiveRun) -> Vec<StepLine> {
    let t = rv.cx.theme;
    let mut lines: Vec<StepLine> = Vec::new();
    // Stays on screen (the status line is overwritten by the next notice).
    if let Some(why) = a.journal_broken() {
        lines.push(StepLine::new(
            Line::from(Span::styled(why.to_string(), t.critical())),
            Rank::Essential,
        ));
    }
    // Before the run starts: where the plan takes the VIP holder and the etcd leader.
    for l in &rv.holder_advice {
        use hk_engine::checks::live::Severity;
        let style = match l.severity {
            Severity::Ok => t.muted(),
            Severity::Warn | Severity::Unknown => t.warn(),
            Severity::Critical => t.critical(),
        };
        // The holder taken early is what the operator should see even on a small terminal.
        let rank = if l.severity == Severity::Warn || l.blocks {
            Rank::Essential
        } else {
            Rank::Useful
        };
        lines.push(StepLine::new(
            Line::from(Span::styled(format!("live: {}", l.text), style)),
            rank,
        ));
    }
    if let Some((s, r)) = current(a) {
        let (g, gs) = glyph(&r.state, t);
        lines.push(StepLine::new(
            Line::from(vec![
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
                    elapsed(r, rv.cx.now).map_or(String::new(), |e| format!("  elapsed {e}")),
                    t.muted(),
                ),
            ]),
            Rank::Essential,
        ));
        lines.push(StepLine::new(
            Line::from(Span::styled(step_label(s), t.text())),
            Rank::Context,
        ));
        // A --check preview that runs tasks for real says which, with file:line.
        for task in s.blast_radius.iter().flat_map(|b| &b.runs_for_real) {
            lines.push(StepLine::new(
                Line::from(Span::styled(
                    format!("runs for real under --check: {}", task.line()),
                    t.mutating(),
                )),
                Rank::Useful,
            ));
        }
        if let Some(h) = &s.host {
            lines.push(StepLine::new(
                Line::from(Span::styled(host_progress(a, h), t.focus())),
                Rank::Essential,
            ));
        }
        match &r.state {
            StepState::Failed { reason } => lines.push(StepLine::new(
                Line::from(Span::styled(reason.clone(), t.critical())),
                Rank::Essential,
            )),
            StepState::Skipped { reason } => lines.push(StepLine::new(
                Line::from(Span::styled(format!("skipped: {reason}"), t.muted())),
                Rank::Useful,
            )),
            _ => {
                if let Some(d) = &r.detail {
                    lines.push(StepLine::new(
                        Line::from(Span::styled(d.clone(), t.muted())),
                        Rank::Aside,
                    ));
                }
            }
        }
        if let Some(why) = rv.caps.blocker(s) {
            lines.push(StepLine::new(
                Line::from(Span::styled(format!("cannot start: {why}"), t.warn())),
                Rank::Essential,
            ));
        }
        if let Some(p) = &r.process {
            lines.push(StepLine::new(
                Line::from(Span::styled(
                    format!(
                        "process: pid {} (start {}){}",
                        p.pid,
                        p.start_time,
                        p.ended
                            .as_ref()
                            .map_or(String::new(), |how| format!(" · {how}"))
                    ),
                    t.muted(),
                )),
                Rank::Aside,
            ));
        }
        if let Some(p) = &r.probe {
            lines.push(StepLine::new(
                Line::from(Span::styled(
                    format!(
                        "probe (step {}): {} · {}",
                        p.probe,
                        if p.ok { "OK" } else { "NOT OK" },
                        p.detail
                    ),
                    if p.ok { t.ok() } else { t.critical() },
                )),
                Rank::Useful,
            ));
        }
        let waiting_gate = matches!(r.state, StepState::AwaitingGate { .. }) && !rv.gate_shown;
        if waiting_gate && !a.view_only && a.journal.is_some() {
            lines.push(StepLine::new(
                Line::from(Span::styled("gate waiting: enter answers it", t.warn())),
                Rank::Context,
            ));
        }
        if matches!(a.run.status(), RunStatus::Halted { .. }) && !a.view_only {
            let decide = a.run.needs_decision(s.n);
            lines.push(StepLine::new(
                Line::from(Span::styled(
                    if decide && r.never_started {
                        "mutating step not started: enter decides (re-run with a fresh \
                     preview, mark done, abort)"
                    } else if decide {
                        "change of unknown outcome: enter decides (re-run with a fresh preview, \
                     mark done, abort)"
                    } else {
                        "run halted: r retry · S skip · A abort"
                    },
                    t.warn(),
                )),
                Rank::Essential,
            ));
            // What explains the halt is one key away: the look at the object it names.
            if let Some(hk_effects::observe::summary::NextStep::Look(l)) = rv.run_env_next() {
                lines.push(StepLine::new(
                    Line::from(Span::styled(
                        format!(
                            "x look: {} {} ({})",
                            l.object.kind.to_lowercase(),
                            l.object.name,
                            l.kinds
                                .iter()
                                .map(|k| crate::panes::look::key_of(*k).1)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        t.focus(),
                    )),
                    Rank::Essential,
                ));
            }
        }
        let next = a
            .run
            .steps()
            .skip_while(|(x, _)| x.n != s.n)
            .skip(1)
            .find(|(_, r)| !r.state.is_terminal());
        lines.push(StepLine::new(
            Line::from(match next {
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
            }),
            Rank::Essential,
        ));
        if let Some(cmd) = &s.command {
            lines.push(StepLine {
                line: Line::from(vec![
                    Span::styled("$ ", t.muted()),
                    Span::styled(cmd.join(" "), t.text()),
                ]),
                rank: Rank::Essential,
                command: true,
            });
        }
    }
    lines
}

/// The Step pane's height at `width` columns, at most `max` (borders included): its lines
/// as [`fit_detail`] fits them into that, so no row is left empty while the output could
/// have it; at least 3 where there is room.
fn detail_height(rv: &RunView, a: &ActiveRun, width: u16, max: u16) -> u16 {
    let w = usize::from(width.saturating_sub(2)).max(1);
    let rows = fit_detail(
        detail_lines(rv, a),
        w,
        usize::from(max.saturating_sub(2)),
        rv.cx.theme,
    )
    .len();
    u16::try_from(rows)
        .unwrap_or(u16::MAX)
        .saturating_add(2)
        .min(max)
        .max(3)
}

/// A line broken into rows of at most `w` columns: whole when it fits, otherwise its text
/// wrapped (nothing cut) in the style of its last span (the value, not its label).
fn wrap_line(line: &Line<'static>, w: usize) -> Vec<Line<'static>> {
    if line.width() <= w {
        return vec![line.clone()];
    }
    let style = line.spans.last().map(|s| s.style).unwrap_or_default();
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    super::fit::wrap(&text, w)
        .into_iter()
        .map(|r| Line::from(Span::styled(r, style)))
        .collect()
}

/// The Step pane's lines fitted into `rows` rows of `w` columns. Whole lines first; when
/// short, the asides go (least useful first), then each essential line keeps one row cut
/// with `…` and the command keeps the rows left, its last one marked `…` where it was
/// cut; what still does not fit is counted on the last row. Nothing is cut silently.
fn fit_detail(lines: Vec<StepLine>, w: usize, rows: usize, t: &Theme) -> Vec<Line<'static>> {
    let w = w.max(1);
    let total = |ls: &[StepLine]| -> usize { ls.iter().map(|l| wrap_line(&l.line, w).len()).sum() };
    let mut lines = lines;
    while total(&lines) > rows {
        let Some(lowest) = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.rank < Rank::Essential)
            .min_by_key(|(i, l)| (l.rank, usize::MAX - i))
            .map(|(i, _)| i)
        else {
            break;
        };
        lines.remove(lowest);
    }
    if total(&lines) <= rows {
        return lines.iter().flat_map(|l| wrap_line(&l.line, w)).collect();
    }
    // Essentials only, and still too many rows: one row each, the command the rest.
    let others = lines.iter().filter(|l| !l.command).count();
    let cmd_rows = rows.saturating_sub(others).max(1);
    let mut out: Vec<Line<'static>> = Vec::new();
    for l in &lines {
        let wrapped = wrap_line(&l.line, w);
        let keep = if l.command { cmd_rows } else { 1 };
        if wrapped.len() <= keep {
            out.extend(wrapped);
            continue;
        }
        let style = wrapped
            .last()
            .and_then(|r| r.spans.last())
            .map(|s| s.style)
            .unwrap_or_default();
        let mut kept: Vec<Line<'static>> = wrapped.into_iter().take(keep).collect();
        if let Some(last) = kept.pop() {
            let text: String = last.spans.iter().map(|s| s.content.as_ref()).collect();
            // Room for the marker: the row is cut one column short of the pane.
            let cut = super::fit::clip(&text, super::fit::width(&text).min(w.saturating_sub(1)));
            let cut = cut.trim_end_matches('…').to_string();
            kept.push(Line::from(vec![
                Span::styled(cut, style),
                Span::styled("…", t.warn()),
            ]));
        }
        out.extend(kept);
    }
    if out.len() > rows {
        let hidden = out.len() - (rows.saturating_sub(1));
        out.truncate(rows.saturating_sub(1));
        out.push(Line::from(Span::styled(
            format!("… {hidden} more rows: a taller terminal shows them"),
            t.warn(),
        )));
    }
    out
}

fn draw_detail(f: &mut Frame, area: Rect, rv: &RunView, a: &ActiveRun) {
    let t = rv.cx.theme;
    let w = usize::from(area.width.saturating_sub(2));
    let rows = usize::from(area.height.saturating_sub(2));
    let lines = fit_detail(detail_lines(rv, a), w, rows, t);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.border())
                .title(Span::styled(" Step ", t.title())),
        ),
        area,
    );
}

/// The output lines as rows of `w` columns, the last `h` of them: wrapped (a long line
/// takes the rows it needs, every character kept, indentation included), or cut at the
/// pane's edge with a `…` in the warning colour. Also how many lines in view were cut.
fn output_rows(
    lines: &[(String, Style)],
    w: usize,
    h: usize,
    wrap: bool,
    t: &Theme,
) -> (Vec<Line<'static>>, usize) {
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut cut = 0;
    for (l, style) in lines {
        let lw = super::fit::width(l);
        if lw <= w {
            rows.push(Line::from(Span::styled(l.clone(), *style)));
        } else if wrap {
            rows.extend(
                hard_wrap(l, w)
                    .into_iter()
                    .map(|r| Line::from(Span::styled(r, *style))),
            );
        } else {
            cut += 1;
            let kept = super::fit::clip(l, w);
            let kept = kept.strip_suffix('…').unwrap_or(&kept).to_string();
            rows.push(Line::from(vec![
                Span::styled(kept, *style),
                Span::styled("…", t.warn()),
            ]));
        }
    }
    let skip = rows.len().saturating_sub(h);
    (rows.split_off(skip), cut)
}

/// `s` in rows of at most `w` columns, every character kept (indentation and runs of
/// spaces too): a row breaks after the last space that fits, so a word (a host name, a
/// path) stays whole unless it alone is wider than a row; then it breaks where the row is
/// full.
pub fn hard_wrap(s: &str, w: usize) -> Vec<String> {
    let w = w.max(1);
    let mut rows = Vec::new();
    let mut row: Vec<(char, usize)> = Vec::new();
    let mut used = 0;
    for c in s.chars() {
        let mut b = [0u8; 4];
        let cw = super::fit::width(c.encode_utf8(&mut b));
        if used + cw > w && !row.is_empty() {
            // Break after the row's last space, if it has one past its indentation.
            let indent = row.iter().take_while(|(c, _)| *c == ' ').count();
            let split = row
                .iter()
                .rposition(|(c, _)| *c == ' ')
                .filter(|&i| i >= indent && i + 1 < row.len() && c != ' ')
                .map_or(row.len(), |i| i + 1);
            let carry = row.split_off(split);
            rows.push(row.iter().map(|(c, _)| *c).collect::<String>());
            row = carry;
            used = row.iter().map(|(_, w)| w).sum();
        }
        row.push((c, cw));
        used += cw;
    }
    if !row.is_empty() || rows.is_empty() {
        rows.push(row.iter().map(|(c, _)| *c).collect());
    }
    rows
}

fn draw_output(f: &mut Frame, area: Rect, rv: &RunView, a: &ActiveRun) {
    let t = rv.cx.theme;
    let o = &a.output;
    let inner_h = usize::from(area.height.saturating_sub(2));
    let inner_w = usize::from(area.width.saturating_sub(2)).max(1);
    let (lines, matches): (Vec<(String, Style)>, Option<usize>) = match rv.filter {
        Some(flt) => {
            let (v, n) = o.matching_numbered(inner_h, flt);
            // The match `n`/`N` jumped to stands out among the others.
            let lines = v
                .into_iter()
                .map(|(abs, l)| {
                    let style = if rv.search_at == Some(abs) {
                        t.selected()
                    } else {
                        t.text()
                    };
                    (l.to_string(), style)
                })
                .collect();
            (lines, Some(n))
        }
        None => (
            o.window(inner_h)
                .map(|l| (l.to_string(), t.text()))
                .collect(),
            None,
        ),
    };
    let (lines, cut) = output_rows(&lines, inner_w, inner_h, rv.output_wrap, t);
    let mut title = format!(" Output  {} lines", o.len());
    if let (Some(flt), Some(n)) = (rv.filter, matches) {
        title.push_str(&format!("  /{flt}: {n} matching"));
    }
    if o.dropped() > 0 {
        title.push_str(&format!(" (+{} older dropped)", o.dropped()));
    }
    title.push_str(if o.follow { "  follow" } else { "  scrolled" });
    // Whether long lines wrap or are cut (and how many are cut in view): `w` toggles.
    if rv.output_wrap {
        title.push_str("  w:wrap ");
    } else if cut > 0 {
        title.push_str(&format!("  w:cut ({cut} cut …) "));
    } else {
        title.push_str("  w:cut ");
    }
    if o.below() > 0 {
        title.push_str(&format!("· {} below ", o.below()));
    }
    let body = if lines.is_empty() {
        Paragraph::new(Span::styled("no output yet", t.muted()))
    } else {
        Paragraph::new(lines)
    };
    let border = if rv.focus == RunFocus::Output {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str, rank: Rank) -> StepLine {
        StepLine::new(Line::from(s.to_string()), rank)
    }

    fn rows(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn short_rows_drop_the_asides_first_and_cut_the_command_with_a_marker() {
        let t = crate::theme::ThemeSet::builtin().load("default", true).0;
        let cmd = StepLine {
            line: Line::from("$ ansible-playbook -i inventory/hosts.ini site.yml --limit h1"),
            rank: Rank::Essential,
            command: true,
        };
        let lines = || {
            vec![
                plain("step 2 running", Rank::Essential),
                plain("ansible Apply", Rank::Context),
                plain("node 1 of 3: h1", Rank::Essential),
                plain("process: pid 42", Rank::Aside),
                plain("next: 3 ssh", Rank::Essential),
                StepLine {
                    line: cmd.line.clone(),
                    rank: cmd.rank,
                    command: true,
                },
            ]
        };
        // Room for all: every line whole, the command wrapped.
        let all = rows(&fit_detail(lines(), 30, 20, &t));
        assert_eq!(all.len(), 8, "{all:?}");
        assert!(all.iter().any(|r| r.contains("pid 42")));
        // Five rows: the aside and the title go; host, next and the command stay.
        let five = rows(&fit_detail(lines(), 30, 5, &t));
        assert_eq!(
            five,
            [
                "step 2 running",
                "node 1 of 3: h1",
                "next: 3 ssh",
                "$ ansible-playbook -i",
                "inventory/hosts.ini site.yml…"
            ]
        );
        // Never silently: a cut command ends in the marker.
        let four = rows(&fit_detail(lines(), 30, 4, &t));
        assert_eq!(four.len(), 4, "{four:?}");
        assert!(four[3].ends_with('…'), "{four:?}");
        // Fewer rows than essentials: the last row counts what is out of sight.
        let two = rows(&fit_detail(lines(), 30, 2, &t));
        assert_eq!(two[0], "step 2 running");
        assert!(two[1].contains("more rows"), "{two:?}");
    }

    #[test]
    fn output_rows_wrap_or_cut_with_a_marker() {
        let t = crate::theme::ThemeSet::builtin().load("default", true).0;
        let lines = vec![("  indented and rather long".to_string(), Style::default())];
        let (wrapped, cut) = output_rows(&lines, 10, 10, true, &t);
        assert_eq!(cut, 0);
        assert_eq!(
            rows(&wrapped),
            ["  indented", " and ", "rather ", "long"],
            "every character kept, words whole"
        );
        assert_eq!(wrapped.iter().map(|l| l.width()).sum::<usize>(), 26);
        // A word wider than a row breaks where the row is full.
        assert_eq!(hard_wrap("ab k3s-prod-1", 5), ["ab ", "k3s-p", "rod-1"]);
        assert_eq!(
            hard_wrap("--limit k3s-prod-1 x", 12),
            ["--limit ", "k3s-prod-1 x"]
        );
        let (cut_rows, cut) = output_rows(&lines, 10, 10, false, &t);
        assert_eq!(cut, 1);
        assert_eq!(rows(&cut_rows), ["  indente…"]);
        // Only the last `h` rows are shown (the newest output).
        let (tail, _) = output_rows(&lines, 10, 2, true, &t);
        assert_eq!(rows(&tail), ["rather ", "long"]);
    }
}
