//! Overlays over the screen: help (from the keymap), gate modals, yes/no questions,
//! reasons, and the `:` command line.
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;
use tui_textarea::TextArea;

use crate::keymap::{KeyMode, Keymaps};
use crate::pointer;
use crate::state::field::GateField;
use crate::state::overlay::{gate_is_typed, Confirm, GateModal, Overlay, ReasonFor};
use crate::state::run::ActiveRun;
use crate::state::screens::Screen;
use crate::theme::Theme;
use crossterm::event::KeyCode;
use hk_effects::exec::ansible;
use hk_engine::checks::live::Severity;
use hk_engine::guard::blast;
use hk_engine::runbook::plan::{Gate, GateSource, PlannedStep, StepKind};

use super::{centered, Ctx};

/// What the overlays draw from: the one open, and what each of them shows.
pub struct OverlayView<'a> {
    pub cx: Ctx<'a>,
    pub overlay: Option<&'a Overlay>,
    /// The screen under it (the help lists its keys).
    pub screen: Screen,
    pub keymaps: &'a Keymaps,
    pub key_mode: KeyMode,
    pub help_scroll: usize,
    /// Every status line of the session, oldest first, with when.
    pub messages: &'a std::collections::VecDeque<(hk_engine::runbook::machine::Timestamp, String)>,
    pub messages_scroll: usize,
    /// How far the open help or messages overlay can scroll, as drawn (reported back).
    pub scroll_max: &'a std::cell::Cell<usize>,
    /// The last `:` line refused and why.
    pub refused_command: Option<&'a (String, String)>,
    /// What quitting loses, where the journals do not outlive the console.
    pub runs_discarded: Option<&'a str>,
    /// Whether a run is in flight (the quit question says so), and how many run journals
    /// the console's runs directory holds.
    pub run_active: bool,
    pub journals: usize,
    pub operator: &'a str,
    pub active: Option<&'a ActiveRun>,
    /// The live blast radius of the open gate's step, as the live panes see it now.
    pub gate_blast: Option<Vec<blast::BlastLine>>,
}

pub fn draw(f: &mut Frame, area: Rect, ov: &OverlayView) {
    match ov.overlay {
        None => {}
        Some(Overlay::Help) => draw_help(f, area, ov),
        Some(Overlay::Messages) => draw_messages(f, area, ov),
        Some(Overlay::HostPicker(p)) => super::picker::draw(f, area, &ov.cx, p),
        Some(Overlay::Look(o)) => {
            // Most of the screen: log lines and events are long.
            let w = area.width.saturating_sub(4).max(20);
            let h = area.height.saturating_sub(4).max(6);
            let r = centered(area, w, h);
            super::look::draw(f, r, &o.view, o.scroll, ov.cx.theme);
            // The tabs (first line, in view when not scrolled) are buttons for their keys.
            if o.scroll == 0 && r.height > 2 {
                let mut x = r.x + 1;
                for (label, k, _) in super::look::tabs(&o.view) {
                    let tw = u16::try_from(super::fit::width(&label)).unwrap_or(u16::MAX);
                    let tw = tw.min(r.right().saturating_sub(1).saturating_sub(x));
                    ov.cx.zones.add(
                        Rect::new(x, r.y + 1, tw, 1),
                        pointer::Click::Key(crossterm::event::KeyEvent::from(KeyCode::Char(k))),
                        true,
                    );
                    x = x.saturating_add(tw);
                }
            }
        }
        Some(Overlay::Resume(m)) => super::resume::draw(f, area, &ov.cx, ov.active, m),
        Some(Overlay::Takeover(m)) => super::takeover::draw(f, area, &ov.cx, m),
        Some(Overlay::Gate(m)) => draw_gate(f, area, ov, m),
        Some(Overlay::Confirm(c)) => draw_confirm(f, area, ov, c),
        Some(Overlay::Reason { why, text, error }) => {
            draw_reason(f, area, ov, *why, text, error.as_deref())
        }
        Some(Overlay::Command { text, error }) => {
            let title = match ov.refused_command {
                Some((line, _)) => format!(
                    " : command (tab completes; ↑ brings back `:{}`) ",
                    hk_engine::text::visible(line.trim())
                ),
                None => " : command (tab completes) ".to_string(),
            };
            draw_command(f, area, ov, text, error.as_deref(), &title)
        }
        Some(Overlay::Filter { text }) => draw_command(
            f,
            area,
            ov,
            text,
            None,
            " / filter (lists on home, output in a run; enter apply, esc cancel) ",
        ),
    }
}

fn modal_block<'a>(t: &Theme, title: String) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(t.focus())
        .title(Span::styled(title, t.title()))
        .style(t.background())
}

fn draw_help(f: &mut Frame, area: Rect, ov: &OverlayView) {
    let t = ov.cx.theme;
    let rows = ov
        .keymaps
        .get(ov.key_mode)
        .map(|m| m.help_rows())
        .unwrap_or_default();
    let key_w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let notes = [
        " gates: enter answers (or reopens) · ctrl-r rejects · esc hides",
        " a look (x): e events · g logs · d describe · r look again · j/k scroll · esc closes",
        " : :env ENV · :theme NAME · :fault ENV FAULT [N] (demo) · :messages · :help · tab lists candidates",
    ];
    // Wide enough for the longest row (at least 72), as far as the terminal allows.
    let widest = rows
        .iter()
        .map(|(_, d)| key_w + d.chars().count() + 5)
        .max()
        .unwrap_or(0);
    let w = u16::try_from(widest).unwrap_or(u16::MAX).max(72);
    let inner_w = usize::from(w.min(area.width).saturating_sub(2)).max(1);
    // Every row wrapped to the width there is, nothing cut: a description continues under
    // itself, past the key column.
    let desc_w = inner_w.saturating_sub(key_w + 3).max(1);
    let mut lines: Vec<Line> = Vec::new();
    for (k, d) in &rows {
        for (i, part) in super::fit::wrap(d, desc_w).into_iter().enumerate() {
            let key = if i == 0 { k.as_str() } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!(" {key:<key_w$}  "), t.focus()),
                Span::styled(part, t.text()),
            ]));
        }
    }
    lines.push(Line::from(""));
    for n in notes {
        for part in super::fit::wrap(n, inner_w) {
            lines.push(Line::from(Span::styled(part, t.muted())));
        }
    }
    let title = format!(" Help · {} ", screen_name(ov));
    draw_scrolling(f, area, ov, w, title, lines, ov.help_scroll);
}

/// The screen's name for a title, in words.
fn screen_name(ov: &OverlayView) -> &'static str {
    match ov.screen {
        Screen::Home => "Home",
        Screen::Run => "Run",
        Screen::Live => "Live",
        Screen::Check => "Check",
    }
}

/// Every status line of the session, oldest first, each whole (wrapped) with its time.
fn draw_messages(f: &mut Frame, area: Rect, ov: &OverlayView) {
    let t = ov.cx.theme;
    let w = area.width.saturating_sub(4).max(20);
    let inner_w = usize::from(w.min(area.width).saturating_sub(2)).max(1);
    let mut lines: Vec<Line> = Vec::new();
    if ov.messages.is_empty() {
        lines.push(Line::from(Span::styled(" no messages yet", t.muted())));
    }
    for (at, m) in ov.messages {
        let clock = hk_engine::time::clock(*at);
        let pad = clock.chars().count() + 2;
        let text = hk_engine::text::visible(m);
        for (i, part) in super::fit::wrap(&text, inner_w.saturating_sub(pad).max(1))
            .into_iter()
            .enumerate()
        {
            let stamp = if i == 0 {
                format!("{clock}  ")
            } else {
                " ".repeat(pad)
            };
            lines.push(Line::from(vec![
                Span::styled(stamp, t.muted()),
                Span::styled(part, t.text()),
            ]));
        }
    }
    let title = format!(" Messages ({}) · esc closes ", ov.messages.len());
    draw_scrolling(f, area, ov, w, title, lines, ov.messages_scroll);
}

/// A modal of `lines` (already wrapped to its width) that scrolls when the terminal is too
/// short for them: the title says where the reader is and what is left below.
fn draw_scrolling(
    f: &mut Frame,
    area: Rect,
    ov: &OverlayView,
    w: u16,
    title: String,
    lines: Vec<Line>,
    scroll: usize,
) {
    let t = ov.cx.theme;
    let total = lines.len();
    let h = u16::try_from(total + 2).unwrap_or(u16::MAX);
    let r = centered(area, w, h);
    let shown = usize::from(r.height.saturating_sub(2));
    let max = total.saturating_sub(shown);
    ov.scroll_max.set(max);
    let top = scroll.min(max);
    let below = total.saturating_sub(top + shown);
    let title = if max == 0 {
        title
    } else {
        format!(
            "{title}· lines {}-{} of {total}{} · j/k pgup/pgdn ",
            top + 1,
            (top + shown).min(total),
            if below > 0 {
                format!(", {below} more below")
            } else {
                String::new()
            }
        )
    };
    let visible: Vec<Line> = lines.into_iter().skip(top).take(shown).collect();
    f.render_widget(Clear, r);
    f.render_widget(Paragraph::new(visible).block(modal_block(t, title)), r);
}

fn draw_confirm(f: &mut Frame, area: Rect, ov: &OverlayView, c: &Confirm) {
    let t = ov.cx.theme;
    let text = match c {
        Confirm::Quit => match ov.runs_discarded {
            // Short: the modal is four lines of 62 at 80x24, and the way to keep them must
            // show.
            Some(_) if !ov.run_active => format!(
                "Quit? This demo's directory and its {} run journal(s) are deleted when the \
                 console exits (`demo --dir DIR` keeps them).",
                ov.journals
            ),
            Some(lost) => format!(
                "A run is in progress. Quit anyway? A running step is cancelled first; {lost}."
            ),
            None => "A run is in progress. Quit anyway? A running step is cancelled first; the \
                     journal keeps the run (resume it from Home)."
                .to_string(),
        },
        Confirm::CancelStep { n } => {
            let what = ov
                .active
                .and_then(|a| a.run.plan().steps.iter().find(|s| s.n == *n))
                .map_or(String::new(), |s| {
                    format!(
                        " ({}{})",
                        s.kind.as_str(),
                        s.host
                            .as_ref()
                            .map_or(String::new(), |h| format!(" on {h}"))
                    )
                });
            format!("Cancel the running step {n}{what}? The outcome is journaled.")
        }
    };
    let r = centered(area, 64, 6);
    f.render_widget(Clear, r);
    let b = modal_block(t, " Confirm ".into());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [msg, keys] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(inner);
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(text, t.text()))).wrap(Wrap { trim: true }),
        msg,
    );
    pointer::draw_buttons(
        f,
        keys,
        ov.cx.zones,
        &[
            ("y yes".into(), pointer::key(KeyCode::Char('y'))),
            ("n no".into(), pointer::key(KeyCode::Char('n'))),
        ],
        t.focus(),
    );
}

fn draw_input(f: &mut Frame, area: Rect, t: &Theme, label: &str, text: &TextArea, focused: bool) {
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused { t.focus() } else { t.border() })
        .title(Span::styled(label.to_string(), t.muted()));
    let inner = b.inner(area);
    f.render_widget(b, area);
    f.render_widget(text, inner);
}

fn draw_reason(
    f: &mut Frame,
    area: Rect,
    ov: &OverlayView,
    why: ReasonFor,
    text: &TextArea,
    error: Option<&str>,
) {
    let t = ov.cx.theme;
    let title = match why {
        ReasonFor::Abort => " Abort the run ".to_string(),
        ReasonFor::Skip { n } => format!(" Skip step {n} "),
    };
    let r = centered(area, 64, 8);
    f.render_widget(Clear, r);
    let b = modal_block(t, title);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [msg, input, err] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(3),
        Constraint::Min(0),
    ])
    .areas(inner);
    pointer::draw_buttons(
        f,
        msg,
        ov.cx.zones,
        &[
            ("Why? (journaled)".into(), None),
            ("enter confirm".into(), pointer::key(KeyCode::Enter)),
            ("esc cancel".into(), pointer::key(KeyCode::Esc)),
        ],
        t.text(),
    );
    draw_input(f, input, t, " reason ", text, true);
    if let Some(e) = error {
        f.render_widget(Paragraph::new(Span::styled(e, t.critical())), err);
    }
}

fn draw_command(
    f: &mut Frame,
    area: Rect,
    ov: &OverlayView,
    text: &TextArea,
    error: Option<&str>,
    title: &str,
) {
    let t = ov.cx.theme;
    let h = if error.is_some() { 4 } else { 3 };
    let r = Rect {
        x: area.x,
        y: area.bottom().saturating_sub(h + 1),
        width: area.width,
        height: h.min(area.height),
    };
    f.render_widget(Clear, r);
    let b = modal_block(t, title.to_string());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [line, err] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    f.render_widget(text, line);
    if let Some(e) = error {
        f.render_widget(Paragraph::new(Span::styled(e, t.critical())), err);
    }
}

fn draw_gate(f: &mut Frame, area: Rect, ov: &OverlayView, m: &GateModal) {
    let t = ov.cx.theme;
    let step = ov
        .active
        .and_then(|a| a.run.plan().steps.iter().find(|s| s.n == m.n));
    let host = step
        .and_then(|s| s.host.clone())
        .map_or(String::new(), |h| format!(" · {h}"));
    let env = ov
        .active
        .map_or(String::new(), |a| a.run.plan().env.clone());
    let (name, mut body): (&str, Vec<Line>) = match &m.gate {
        Gate::ConfirmHosts { expected } => ("confirm hosts", hosts_body(ov, m.n, expected, t)),
        Gate::TypedConfirm { phrase } => {
            let mut body = vec![
                Line::from(Span::styled(
                    format!("This step changes environment `{env}`."),
                    t.mutating(),
                )),
                Line::from(Span::styled(format!("Type `{phrase}` to go on."), t.text())),
            ];
            body.extend(live_blast_lines(ov, t));
            ("typed confirm", body)
        }
        Gate::OperatorPresent => (
            "operator present",
            vec![
                Line::from(Span::styled(
                    "Confirm you are at the console for this run.",
                    t.text(),
                )),
                Line::from(Span::styled(
                    format!("Recorded as {} at {} (UTC).", ov.operator, ov.cx.now),
                    t.muted(),
                )),
            ],
        ),
        Gate::Authorise { flag } => (
            "authorise",
            vec![
                Line::from(Span::styled(format!("Authorise `{flag}`."), t.mutating())),
                Line::from(Span::styled(
                    format!("The steps after this pass -e {flag}=true."),
                    t.text(),
                )),
            ],
        ),
        Gate::ApproveDiff => {
            // What the approval covers and what the preview could not show come first, so
            // they are above the fold on a small terminal; the preview's lines follow.
            let mut body = approve_head(ov, step, m, t);
            body.extend(diff_body(ov, m, t));
            // A Flux reconcile's approval reviews a look at the cluster, not a diff.
            let rolls = step
                .and_then(|s| s.blast_radius.as_ref())
                .is_some_and(|b| b.nodes.is_some());
            (
                if rolls {
                    "approve reconcile"
                } else {
                    "approve diff"
                },
                body,
            )
        }
        Gate::ConfirmDone => (
            "confirm done",
            vec![
                Line::from(Span::styled("Do this by hand, then confirm:", t.text())),
                Line::from(Span::styled(
                    step.map_or(String::new(), |s| s.title.clone()),
                    t.focus(),
                )),
            ],
        ),
    };
    // The runbook's own words for this gate come first: they say why it is asked.
    if let Some(title) = step.map(|s| s.title.as_str()).filter(|t| !t.is_empty()) {
        if !matches!(m.gate, Gate::ConfirmDone) {
            body.insert(0, Line::from(Span::styled(title.to_string(), t.focus())));
        }
    }
    if let Some(e) = &m.error {
        body.push(Line::from(Span::styled(e.clone(), t.critical())));
    }
    let typed = gate_is_typed(&m.gate);
    // Each a button: a click presses its key.
    let mut keys: Vec<pointer::Button> = vec![(
        if typed {
            "enter submit"
        } else {
            "enter approve"
        }
        .into(),
        pointer::key(KeyCode::Enter),
    )];
    if typed {
        keys.push(("tab answer/note".into(), pointer::key(KeyCode::Tab)));
    }
    keys.push(("ctrl-r reject (note = reason)".into(), pointer::ctrl('r')));
    if matches!(m.gate, Gate::ApproveDiff) {
        keys.push(("↑↓ pgup pgdn scroll".into(), None));
    }
    keys.push(("esc hide".into(), pointer::key(KeyCode::Esc)));
    let inputs: u16 = if typed { 6 } else { 3 };
    let w = area.width.saturating_sub(4).min(90);
    // Rows as drawn: a long line (a blast radius, a warning) wraps onto more than one.
    let inner_w = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = body
        .iter()
        .map(|l| l.width().max(1).div_ceil(inner_w))
        .sum();
    let want_h = u16::try_from(rows)
        .unwrap_or(u16::MAX)
        .saturating_add(inputs + 3);
    let r = centered(area, w, want_h.max(10));
    f.render_widget(Clear, r);
    let b = modal_block(t, format!(" Gate · step {}{host} · {name} ", m.n));
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [body_a, answer_a, note_a, keys_a] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(if typed { 3 } else { 0 }),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(inner);
    let scroll = if matches!(m.gate, Gate::ApproveDiff) {
        m.scroll
    } else {
        0
    };
    f.render_widget(
        Paragraph::new(body)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        body_a,
    );
    if typed {
        let label = match &m.gate {
            Gate::ConfirmHosts { .. } => " number of hosts ",
            Gate::TypedConfirm { phrase } if phrase.contains(' ') => {
                " environment name and host count "
            }
            _ => " environment name ",
        };
        draw_input(
            f,
            answer_a,
            t,
            label,
            &m.answer,
            m.field == GateField::Answer,
        );
    }
    draw_input(
        f,
        note_a,
        t,
        " note (optional, journaled) ",
        &m.note,
        m.field == GateField::Note,
    );
    pointer::draw_buttons(f, keys_a, ov.cx.zones, &keys, t.muted());
}

fn hosts_body<'a>(ov: &OverlayView, n: usize, expected: &[String], t: &Theme) -> Vec<Line<'a>> {
    let observed = ov
        .active
        .and_then(|a| a.run.step_record(n))
        .and_then(|r| r.observed_hosts.clone());
    let mut v = vec![Line::from(Span::styled(
        format!("Expected ({}): {}", expected.len(), expected.join(", ")),
        t.text(),
    ))];
    match observed {
        Some(hosts) => {
            v.push(Line::from(Span::styled(
                format!("The step listed ({}):", hosts.len()),
                t.text(),
            )));
            for h in &hosts {
                let (mark, style) = if expected.contains(h) {
                    ("  ✓ ", t.ok())
                } else {
                    ("  + ", t.critical())
                };
                v.push(Line::from(Span::styled(format!("{mark}{h} "), style)));
            }
            for h in expected.iter().filter(|h| !hosts.contains(h)) {
                v.push(Line::from(Span::styled(
                    format!("  - {h} (expected, not listed)"),
                    t.critical(),
                )));
            }
        }
        None => v.push(Line::from(Span::styled(
            "The step has not listed hosts yet.",
            t.muted(),
        ))),
    }
    v.push(Line::from(Span::styled(
        "Count the hosts and type the number.",
        t.warn(),
    )));
    v
}

/// The approval's first lines: the blast radius the planner stated, then every gap of an
/// ansible preview (skipped tasks, unreachable or failed hosts, no recap) in the warning
/// colour.
fn approve_head<'a>(
    ov: &OverlayView,
    step: Option<&PlannedStep>,
    m: &GateModal,
    t: &Theme,
) -> Vec<Line<'a>> {
    let mut v = Vec::new();
    if let Some(b) = step.and_then(|s| s.blast_radius.as_ref()) {
        let from = match step.and_then(|s| s.source) {
            Some(GateSource::Policy) => " (gate policy)",
            _ => "",
        };
        v.push(Line::from(Span::styled(
            format!("Blast radius{from}: {}", b.summary),
            t.mutating(),
        )));
        // A --check preview that runs tasks for real: each, with its file:line.
        for task in &b.runs_for_real {
            v.push(Line::from(Span::styled(
                format!("Runs for real under --check: {}", task.line()),
                t.mutating(),
            )));
        }
        v.extend(live_blast_lines(ov, t));
    }
    let Some(a) = ov.active else { return v };
    let Some((&from_n, &start)) = a.step_output_start.range(..=m.n).next_back() else {
        return v;
    };
    let previewed_by_ansible = a
        .run
        .plan()
        .steps
        .iter()
        .any(|s| s.n == from_n && s.kind == StepKind::Ansible);
    if !previewed_by_ansible {
        return v;
    }
    let end = a
        .step_output_start
        .range(from_n + 1..)
        .next()
        .map_or(u64::MAX, |(_, &e)| e);
    let count = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
    let recap = ansible::parse_recap(a.output.since(start).take(count));
    for gap in ansible::preview_gaps(&recap) {
        v.push(Line::from(Span::styled(format!("! {gap}"), t.warn())));
    }
    v
}

/// The live blast radius of step `n`'s hosts (issue 29, `App::live_blast`) as gate lines:
/// each fact unknown with its age when its pane is stale or was never seen.
fn live_blast_lines<'a>(ov: &OverlayView, t: &Theme) -> Vec<Line<'a>> {
    let Some(lines) = ov.gate_blast.as_deref() else {
        return Vec::new();
    };
    let mut out = vec![Line::from(Span::styled(
        "Live, now (what the Live screen sees):",
        t.text(),
    ))];
    let refused = blast::refusal(lines);
    for l in lines {
        let (mark, style) = match l.severity {
            Severity::Ok => ("  ", t.muted()),
            Severity::Warn => ("! ", t.warn()),
            Severity::Critical => ("✗ ", t.mutating()),
            Severity::Unknown => ("? ", t.warn()),
        };
        out.push(Line::from(Span::styled(format!("{mark}{}", l.text), style)));
    }
    if let Some(r) = refused {
        out.push(Line::from(Span::styled(format!("✗ {r}"), t.critical())));
    }
    out
}

fn diff_body<'a>(ov: &OverlayView<'a>, m: &GateModal, t: &Theme) -> Vec<Line<'a>> {
    let Some(a) = ov.active else {
        return Vec::new();
    };
    // The diff is what the check run printed: this step's output if it ran one, else the
    // output of the closest step before it that did (an approve-diff gate step follows its
    // --check --diff step). Only that step's lines, not what came after.
    let Some((&from_n, &start)) = a.step_output_start.range(..=m.n).next_back() else {
        return vec![Line::from(Span::styled(
            "the check run printed no diff",
            t.muted(),
        ))];
    };
    let end = a
        .step_output_start
        .range(from_n + 1..)
        .next()
        .map_or(u64::MAX, |(_, &e)| e);
    let count = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
    let mut v: Vec<Line> = a
        .output
        .since(start)
        .take(count)
        .map(|l| {
            let style = if l.starts_with('+') {
                t.ok()
            } else if l.starts_with('-') {
                t.critical()
            } else {
                t.text()
            };
            Line::from(Span::styled(l, style))
        })
        .collect();
    if v.is_empty() {
        v.push(Line::from(Span::styled(
            "the check run printed no diff",
            t.muted(),
        )));
    }
    v
}
