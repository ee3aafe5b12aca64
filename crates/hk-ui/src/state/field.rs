//! The text fields the modals type into.
//!
//! Owns: [`GateField`] (which of a modal's two fields has the keyboard) and the one-line
//! text area every modal field is. Must not: import the app or the panes.

use tui_textarea::TextArea;

/// Which field of a gate modal has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateField {
    Answer,
    Note,
}

/// A one-line text field (no line highlight).
pub fn single_line() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}
