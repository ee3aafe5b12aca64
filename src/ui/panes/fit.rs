//! Text that fits: clipping with a visible mark, "N more" lines, and how wide a column of
//! names must be so no name is cut.
//!
//! Owns: the small helpers every new pane shares. Must not: draw whole panes.

use ratatui::text::{Line, Span};

use crate::ui::theme::Theme;

/// Columns `s` takes on screen (ratatui's own measure, so it agrees with the drawing).
pub fn width(s: &str) -> usize {
    Span::raw(s).width()
}

/// `s` cut to at most `w` columns, ending in `…` when something was cut.
pub fn clip(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let mut b = [0u8; 4];
        let cw = width(c.encode_utf8(&mut b));
        if used + cw + 1 > w {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push('…');
    out
}

/// ` … 3 more environments`.
pub fn more(n: usize, what: &str, t: &Theme) -> Line<'static> {
    Line::styled(
        format!(" … {n} more {what}{}", if n == 1 { "" } else { "s" }),
        t.muted(),
    )
}

/// The widest of `items` (in columns), at least `min`.
pub fn widest<'a>(items: impl IntoIterator<Item = &'a str>, min: usize) -> usize {
    items.into_iter().map(width).fold(min, usize::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_marks_what_it_cut() {
        assert_eq!(clip("k3s-prod-1", 20), "k3s-prod-1");
        assert_eq!(clip("k3s-prod-1", 10), "k3s-prod-1");
        assert_eq!(clip("k3s-prod-1", 6), "k3s-p…");
        assert_eq!(clip("abc", 0), "");
        assert_eq!(widest(["a", "abcd", "ab"], 2), 4);
    }
}
