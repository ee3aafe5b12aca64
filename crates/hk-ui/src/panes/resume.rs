//! The resume decision over a step that changes systems whose outcome is unknown
//! (interrupted, or failed or cancelled after its work went out): what is known (when
//! and by whom the run started, why the step stopped, its last output, whether its process
//! still runs, the probe's look at the live state), then the choices the state allows.
use crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::pointer;
use crate::state::field::GateField;
use crate::state::overlay::{ResumeModal, ResumeStage};
use crate::state::run::ActiveRun;
use hk_engine::runbook::machine::{self, StepState};
use hk_session::resume::{ProbeRun, ProcessCheck, ResumeInfo};

use super::{centered, Ctx};

/// The modal over the open run `active` (nothing without one).
pub fn draw(f: &mut Frame, area: Rect, cx: &Ctx, active: Option<&ActiveRun>, m: &ResumeModal) {
    let t = cx.theme;
    let Some(a) = active else {
        return;
    };
    let info: Option<&ResumeInfo> = a.resume.as_ref();
    let plan = a.run.plan();
    let step = plan.steps.iter().find(|s| s.n == m.n);
    let rec = a.run.step_record(m.n);
    let mut lines: Vec<Line> = Vec::new();
    let on = step
        .and_then(|s| s.host.clone())
        .map_or(String::new(), |h| format!(" on {h}"));
    lines.push(Line::from(Span::styled(
        format!(
            "Step {} ({}{on}) changes systems and was {}: what it did is unknown.",
            m.n,
            step.map_or("?", |s| s.kind.as_str()),
            match rec.map(|r| &r.state) {
                Some(StepState::Failed { .. }) => "STOPPED AFTER ITS WORK WENT OUT",
                _ => "INTERRUPTED",
            },
        ),
        t.warn(),
    )));
    if let Some(r) = rec {
        let started = r
            .started_at
            .or(a.run.started_at())
            .map_or("?".to_string(), |ts| ts.to_string());
        let by = info
            .and_then(|i| i.started_by.clone())
            .unwrap_or_else(|| "?".into());
        lines.push(Line::from(Span::styled(
            format!("started {started} by {by} · attempt {}", r.attempt),
            t.text(),
        )));
        if let Some(why) = &r.interrupted_why {
            lines.push(Line::from(Span::styled(format!("why: {why}"), t.text())));
        }
        if let StepState::Failed { reason } = &r.state {
            lines.push(Line::from(Span::styled(format!("why: {reason}"), t.text())));
        }
        if r.never_started {
            lines.push(Line::from(Span::styled(
                "the executor never started its work: nothing to probe; the re-run still asks \
                 its preview and gates afresh",
                t.text(),
            )));
        }
    }
    let process = match info.map(|i| &i.process) {
        Some(ProcessCheck::Alive(c)) => (
            format!(
                "process: pid {} (start {}) STILL RUNNING{}",
                c.pid,
                c.start_time,
                if info.is_some_and(|i| i.stopping.is_some()) {
                    " · stopping…"
                } else if info.is_some_and(|i| i.waiting) {
                    " · waiting for it…"
                } else {
                    ""
                }
            ),
            t.critical(),
        ),
        Some(ProcessCheck::Unknown(c, why)) => (
            format!(
                "process: pid {} cannot be looked up ({why}): treated as running",
                c.pid
            ),
            t.critical(),
        ),
        Some(ProcessCheck::Gone(how)) => (format!("process: gone ({how})"), t.ok()),
        Some(ProcessCheck::NoProcess) | None => (
            "process: none was journaled for this attempt".into(),
            t.muted(),
        ),
    };
    lines.push(Line::from(Span::styled(process.0, process.1)));
    let probe = match (info.map(|i| &i.probe), rec.and_then(|r| r.probe.as_ref())) {
        (_, Some(p)) => (
            format!(
                "probe (step {}): {} · {}",
                p.probe,
                if p.ok { "OK" } else { "NOT OK" },
                p.detail
            ),
            if p.ok { t.ok() } else { t.critical() },
        ),
        (Some(ProbeRun::Running { probe, .. }), None) => {
            (format!("probe (step {probe}): running…"), t.running())
        }
        (Some(ProbeRun::Pending { probe }), None) => (
            format!("probe (step {probe}): runs once the process is gone"),
            t.muted(),
        ),
        _ => (
            "probe: the runbook has no read-back after this step".into(),
            t.muted(),
        ),
    };
    lines.push(Line::from(Span::styled(probe.0, probe.1)));
    let last = info.map(|i| i.last_lines.as_slice()).unwrap_or_default();
    if !last.is_empty() {
        lines.push(Line::from(Span::styled("last output:", t.muted())));
        for l in last {
            lines.push(Line::from(Span::styled(format!("  {l}"), t.text())));
        }
    }
    lines.push(Line::from(""));
    let alive = info.is_some_and(|i| {
        matches!(
            i.process,
            ProcessCheck::Alive(_) | ProcessCheck::Unknown(..)
        )
    });
    let from = plan
        .steps
        .iter()
        .position(|s| s.n == m.n)
        .map(|i| plan.steps[machine::rerun_from(plan, i)].n);
    // One button a row: a choice is never cut or wrapped across rows, and a click on one is
    // its key (the resume decision itself still needs what each choice asks to be typed).
    let choices: Vec<pointer::Button> = match m.stage {
        _ if alive => vec![
            ("w wait for it".into(), pointer::key(KeyCode::Char('w'))),
            (
                "K stop it (SIGINT, SIGTERM, SIGKILL)".into(),
                pointer::key(KeyCode::Char('K')),
            ),
            ("esc hide".into(), pointer::key(KeyCode::Esc)),
        ],
        ResumeStage::Choose => vec![
            (
                format!(
                    "R re-run from step {} (fresh preview, typed confirmation)",
                    from.unwrap_or(m.n)
                ),
                pointer::key(KeyCode::Char('R')),
            ),
            (
                "D mark done (typed, with a reason)".into(),
                pointer::key(KeyCode::Char('D')),
            ),
            ("A abort".into(), pointer::key(KeyCode::Char('A'))),
            ("esc hide".into(), pointer::key(KeyCode::Esc)),
        ],
        ResumeStage::Rerun => vec![
            (
                format!("Re-run: type the environment's name `{}`", plan.env),
                None,
            ),
            ("enter confirm".into(), pointer::key(KeyCode::Enter)),
            ("esc back".into(), pointer::key(KeyCode::Esc)),
        ],
        ResumeStage::MarkDone => vec![
            (
                format!(
                    "Mark done: type `{}`, tab, the reason",
                    step.map_or(plan.env.clone(), |s| machine::done_confirmation(plan, s))
                ),
                None,
            ),
            ("enter confirm".into(), pointer::key(KeyCode::Enter)),
            ("esc back".into(), pointer::key(KeyCode::Esc)),
        ],
    };
    if rec.is_some() && !a.run.needs_decision(m.n) {
        lines.push(Line::from(Span::styled("(decided)", t.muted())));
    }

    let inputs: u16 = match m.stage {
        ResumeStage::Choose => 0,
        ResumeStage::Rerun => 3,
        ResumeStage::MarkDone => 6,
    };
    let w = area.width.saturating_sub(4).min(100);
    let body_h = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .saturating_add(2);
    let buttons = u16::try_from(choices.len()).unwrap_or(u16::MAX);
    let h = body_h
        .saturating_add(buttons)
        .saturating_add(inputs)
        .saturating_add(3);
    let r = centered(area, w, h);
    f.render_widget(Clear, r);
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(t.focus())
        .title(Span::styled(format!(" Resume step {} ", m.n), t.title()))
        .style(t.background());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [body, btns, ins, err] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(buttons),
        Constraint::Length(inputs),
        Constraint::Length(1),
    ])
    .areas(inner);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), body);
    for (row, button) in (btns.y..btns.bottom()).zip(&choices) {
        let at = Rect {
            y: row,
            height: 1,
            ..btns
        };
        pointer::draw_buttons(f, at, cx.zones, std::slice::from_ref(button), t.focus());
    }
    let input =
        |f: &mut Frame, area: Rect, label: &str, text: &tui_textarea::TextArea, on: bool| {
            let b = Block::default()
                .borders(Borders::ALL)
                .border_style(if on { t.focus() } else { t.border() })
                .title(Span::styled(label.to_string(), t.muted()));
            let inner = b.inner(area);
            f.render_widget(b, area);
            f.render_widget(text, inner);
        };
    match m.stage {
        ResumeStage::Choose => {}
        ResumeStage::Rerun => input(f, ins, " environment name ", &m.typed, true),
        ResumeStage::MarkDone => {
            let [a1, a2] =
                Layout::vertical([Constraint::Length(3), Constraint::Length(3)]).areas(ins);
            input(f, a1, " confirm ", &m.typed, m.field == GateField::Answer);
            input(
                f,
                a2,
                " reason (journaled) ",
                &m.reason,
                m.field == GateField::Note,
            );
        }
    }
    if let Some(e) = &m.error {
        f.render_widget(Paragraph::new(Span::styled(e.clone(), t.critical())), err);
    }
}
