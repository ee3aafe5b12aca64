//! Mouse clicks: where on the last frame a click acts, and as what.
//!
//! Owns: [`Zones`], the clickable rectangles the view registers while it draws (list rows,
//! the buttons of gates and other overlays), and [`Click`], what a click on one does (select
//! a row, or press the key the button names). The view writes them through `&App` (a
//! `RefCell`, as the Live screen reports its line count), the app reads them on a click.
//! Must not: decide what a row or a key does (the app does, through its own key path).

use std::cell::RefCell;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

/// A list whose rows a click selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListId {
    Environments,
    Runbooks,
    Runs,
    Steps,
    /// The host picker's hosts.
    Hosts,
}

/// What a click on a zone does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Click {
    /// Select row `index` of `list` (a second click on the selected row opens it, as enter).
    Row { list: ListId, index: usize },
    /// The key a button names, pressed.
    Key(KeyEvent),
}

#[derive(Debug, Clone)]
struct Zone {
    area: Rect,
    click: Click,
    /// Drawn by an overlay: while one is open, only its zones take clicks.
    overlay: bool,
}

/// The clickable zones of the last frame drawn.
#[derive(Debug, Default)]
pub struct Zones(RefCell<Vec<Zone>>);

impl Zones {
    /// A new frame: the last one's zones are gone.
    pub fn clear(&self) {
        self.0.borrow_mut().clear();
    }

    pub fn add(&self, area: Rect, click: Click, overlay: bool) {
        if area.width > 0 && area.height > 0 {
            self.0.borrow_mut().push(Zone {
                area,
                click,
                overlay,
            });
        }
    }

    /// One zone per row a list shows in `area` (its inner area, no border), rows from
    /// `offset` on, `len` rows in all.
    pub fn rows(&self, area: Rect, list: ListId, offset: usize, len: usize, overlay: bool) {
        for (i, y) in (area.y..area.bottom()).enumerate() {
            let index = offset + i;
            if index >= len {
                break;
            }
            self.add(
                Rect {
                    x: area.x,
                    y,
                    width: area.width,
                    height: 1,
                },
                Click::Row { list, index },
                overlay,
            );
        }
    }

    /// What a click at (`col`, `row`) does: the topmost zone there (drawn last); with an
    /// overlay open, only the overlay's zones count (the screen under it takes no click).
    pub fn at(&self, col: u16, row: u16, overlay_open: bool) -> Option<Click> {
        let pos = ratatui::layout::Position { x: col, y: row };
        self.0
            .borrow()
            .iter()
            .rev()
            .filter(|z| z.overlay || !overlay_open)
            .find(|z| z.area.contains(pos))
            .map(|z| z.click.clone())
    }

    /// How many zones the last frame registered (tests).
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A button: its label and the key a click on it presses (`None`: a hint, not clickable).
pub type Button = (String, Option<KeyEvent>);

pub fn key(code: KeyCode) -> Option<KeyEvent> {
    Some(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ctrl(c: char) -> Option<KeyEvent> {
    Some(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

/// Draw `buttons` on the first row of `area` as `label · label`, each clickable where it is
/// drawn (an overlay's zones).
pub fn draw_buttons(
    f: &mut Frame,
    area: Rect,
    zones: &Zones,
    buttons: &[Button],
    style: ratatui::style::Style,
) {
    if area.height == 0 {
        return;
    }
    let mut spans: Vec<Span> = Vec::new();
    let mut x = area.x;
    for (i, (label, key)) in buttons.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", style));
            x = x.saturating_add(3);
        }
        let w = u16::try_from(Span::raw(label.as_str()).width()).unwrap_or(u16::MAX);
        if let Some(k) = key {
            let right = area.right();
            let shown = w.min(right.saturating_sub(x));
            zones.add(
                Rect {
                    x,
                    y: area.y,
                    width: shown,
                    height: 1,
                },
                Click::Key(*k),
                true,
            );
        }
        spans.push(Span::styled(label.clone(), style));
        x = x.saturating_add(w);
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topmost_zone_takes_the_click_and_an_overlay_hides_the_screen() {
        let z = Zones::default();
        z.rows(Rect::new(0, 1, 10, 3), ListId::Runbooks, 5, 7, false);
        assert_eq!(
            z.at(3, 2, false),
            Some(Click::Row {
                list: ListId::Runbooks,
                index: 6
            })
        );
        // Rows past the list's end are not zones.
        assert_eq!(z.at(3, 3, false), None);
        z.add(
            Rect::new(2, 2, 4, 1),
            Click::Key(KeyEvent::from(KeyCode::Esc)),
            true,
        );
        assert_eq!(
            z.at(3, 2, false),
            Some(Click::Key(KeyEvent::from(KeyCode::Esc)))
        );
        // With an overlay open, a click beside it does nothing.
        assert_eq!(z.at(0, 1, true), None);
        z.clear();
        assert!(z.is_empty());
    }
}
