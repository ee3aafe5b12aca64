//! The first screen of a console started on a repo without hk-console.yaml: what
//! `hk-console init` would write there (the whole proposal, every choice commented with its
//! evidence and every doubt a `# QUESTION:`), a key to write it and go on to the console,
//! and a key to leave without writing anything (exit 2 with the hint, as before).
//!
//! Owns: [`InitOffer`] (the text and the scroll), [`InitOffer::key`] (what a key means),
//! [`draw`], and [`ask`], a small loop of its own on the terminal, run before the console
//! (there is no repo to give the console yet).
//! Must not: write the file (the caller does, only after [`InitChoice::Write`]) or guess an
//! answer to one of the proposal's questions.

use std::path::PathBuf;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

/// What the operator chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitChoice {
    /// Write the proposal to [`InitOffer::path`] and open the console on the repo.
    Write,
    /// Leave; nothing written.
    Quit,
}

/// The proposal on screen.
#[derive(Debug, Clone)]
pub struct InitOffer {
    /// Where it would be written (`<repo>/hk-console.yaml`).
    pub path: PathBuf,
    /// The file `init` proposes, as it would be written.
    pub text: String,
    /// Its `# QUESTION:` lines (asked in the file, never guessed).
    pub questions: usize,
    scroll: u16,
}

impl InitOffer {
    pub fn new(path: PathBuf, text: String, questions: usize) -> Self {
        InitOffer {
            path,
            text,
            questions,
            scroll: 0,
        }
    }

    fn lines(&self) -> u16 {
        u16::try_from(self.text.lines().count()).unwrap_or(u16::MAX)
    }

    /// `w` writes, `q`/Esc/Ctrl-C leave; j/k, arrows, PgUp/PgDn, g/G scroll.
    pub fn key(&mut self, k: KeyEvent) -> Option<InitChoice> {
        if k.kind == KeyEventKind::Release {
            return None;
        }
        let max = self.lines().saturating_sub(1);
        match k.code {
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                return Some(InitChoice::Quit)
            }
            KeyCode::Char('w') => return Some(InitChoice::Write),
            KeyCode::Char('q') | KeyCode::Esc => return Some(InitChoice::Quit),
            KeyCode::Char('j') | KeyCode::Down => self.scroll = (self.scroll + 1).min(max),
            KeyCode::Char('k') | KeyCode::Up => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll = (self.scroll + 20).min(max),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(20),
            KeyCode::Char('g') | KeyCode::Home => self.scroll = 0,
            KeyCode::Char('G') | KeyCode::End => self.scroll = max,
            _ => {}
        }
        None
    }
}

/// The offer: a heading saying why, the proposal, the keys.
pub fn draw(f: &mut Frame, area: Rect, offer: &InitOffer) {
    let [head, body, keys] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut why = vec![Line::from(vec![
        Span::styled("No hk-console.yaml in this repo. ", bold),
        Span::raw(format!(
            "`hk-console init` proposes this {} (read from the inventory and the Flux tree):",
            offer.path.display()
        )),
    ])];
    why.push(Line::from(if offer.questions == 0 {
        "Each choice is commented with its evidence (file:line).".to_string()
    } else {
        format!(
            "{} QUESTION(s) in it: answer them in the file before relying on it.",
            offer.questions
        )
    }));
    f.render_widget(Paragraph::new(why).wrap(Wrap { trim: false }), head);
    let text: Vec<Line> = offer
        .text
        .lines()
        .map(|l| Line::raw(l.to_string()))
        .collect();
    let title = format!(
        " proposed {} · line {}/{} ",
        offer.path.display(),
        offer.scroll.saturating_add(1),
        offer.lines().max(1)
    );
    f.render_widget(
        Paragraph::new(text)
            .block(Block::default().borders(Borders::ALL).title(title))
            .scroll((offer.scroll, 0)),
        body,
    );
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" w ", bold),
            Span::raw("write it and open the console   "),
            Span::styled(" q ", bold),
            Span::raw("leave (nothing written)   "),
            Span::styled(" j/k ", bold),
            Span::raw("scroll"),
        ])),
        keys,
    );
}

/// Shows the offer on `terminal` until the operator chooses.
pub fn ask<B: ratatui::backend::Backend>(
    terminal: &mut ratatui::Terminal<B>,
    offer: &mut InitOffer,
) -> std::io::Result<InitChoice> {
    loop {
        terminal
            .draw(|f| draw(f, f.area(), offer))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Event::Key(k) = crossterm::event::read()? {
            if let Some(choice) = offer.key(k) {
                return Ok(choice);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn offer() -> InitOffer {
        let text = (0..60)
            .map(|i| format!("# line {i}"))
            .chain(["environments:".to_string(), "  prod: {}".to_string()])
            .collect::<Vec<_>>()
            .join("\n");
        InitOffer::new(PathBuf::from("/r/hk-console.yaml"), text, 1)
    }

    fn screen(o: &InitOffer) -> String {
        let mut t = Terminal::new(TestBackend::new(100, 20)).expect("terminal");
        t.draw(|f| draw(f, f.area(), o)).expect("draw");
        let b = t.backend().buffer().clone();
        (0..b.area.height)
            .map(|y| {
                (0..b.area.width)
                    .map(|x| b[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_offer_shows_the_proposal_the_question_count_and_the_keys() {
        let mut o = offer();
        let s = screen(&o);
        assert!(s.contains("No hk-console.yaml in this repo"), "{s}");
        assert!(s.contains("/r/hk-console.yaml"), "{s}");
        assert!(s.contains("1 QUESTION(s)"), "{s}");
        assert!(s.contains("# line 0"), "{s}");
        assert!(s.contains(" w write it and open the console"), "{s}");
        assert!(!s.contains("prod: {}"), "below the fold at first");
        o.key(KeyEvent::from(KeyCode::Char('G')));
        let s = screen(&o);
        assert!(s.contains("prod: {}"), "{s}");
    }

    #[test]
    fn keys_choose_write_or_quit_and_scroll_stays_in_the_text() {
        let mut o = offer();
        assert_eq!(o.key(KeyEvent::from(KeyCode::Char('k'))), None);
        assert_eq!(o.scroll, 0);
        for _ in 0..500 {
            o.key(KeyEvent::from(KeyCode::Char('j')));
        }
        assert_eq!(o.scroll, 61);
        assert_eq!(o.key(KeyEvent::from(KeyCode::Char('x'))), None);
        assert_eq!(
            o.key(KeyEvent::from(KeyCode::Char('w'))),
            Some(InitChoice::Write)
        );
        assert_eq!(o.key(KeyEvent::from(KeyCode::Esc)), Some(InitChoice::Quit));
        assert_eq!(
            o.key(KeyEvent::from(KeyCode::Char('q'))),
            Some(InitChoice::Quit)
        );
        assert_eq!(
            o.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(InitChoice::Quit)
        );
    }
}
