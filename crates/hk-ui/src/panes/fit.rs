//! Text that fits: clipping with a visible mark, "N more" lines, and how wide a column of
//! names must be so no name is cut.
//!
//! Owns: the small helpers every new pane shares. Must not: draw whole panes.

use ratatui::text::{Line, Span};

use crate::theme::Theme;

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

/// A line's spans cut to at most `w` columns, the cut marked with `…` in the style of the
/// span it falls in (a line the terminal would cut silently at its edge).
pub fn clip_spans(spans: Vec<Span<'static>>, w: usize) -> Vec<Span<'static>> {
    let total: usize = spans.iter().map(|s| s.width()).sum();
    if total <= w {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for s in spans {
        let sw = s.width();
        if used + sw < w {
            used += sw;
            out.push(s);
            continue;
        }
        let room = w - used;
        if room > 0 {
            out.push(Span::styled(clip(&s.content, room), s.style));
        }
        break;
    }
    out
}

/// `s` cut to at most `w` columns as [`clip`] cuts it, except never inside one of
/// `whole` (host names): a cut that would fall inside one moves to its start, so the name
/// is shown whole or not at all.
pub fn clip_keeping(s: &str, w: usize, whole: &[&str]) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    let cut = clip(s, w);
    let mut n = cut.strip_suffix('…').unwrap_or(&cut).len();
    loop {
        let inside = whole
            .iter()
            .filter(|x| !x.is_empty())
            .flat_map(|x| s.match_indices(*x).map(|(at, m)| (at, at + m.len())))
            .find(|&(start, end)| start < n && n < end);
        match inside {
            Some((start, _)) => n = start,
            None => break,
        }
    }
    format!("{}…", &s[..n])
}

/// `s` broken into rows of at most `w` columns, at spaces where it can and inside a word
/// only when the word alone is wider than a row: nothing is cut.
pub fn wrap(s: &str, w: usize) -> Vec<String> {
    let w = w.max(1);
    let mut rows = Vec::new();
    let mut row = String::new();
    for word in s.split(' ') {
        let sep = usize::from(!row.is_empty());
        if width(&row) + sep + width(word) <= w {
            if sep == 1 {
                row.push(' ');
            }
            row.push_str(word);
            continue;
        }
        if !row.is_empty() {
            rows.push(std::mem::take(&mut row));
        }
        for c in word.chars() {
            let mut b = [0u8; 4];
            if width(&row) + width(c.encode_utf8(&mut b)) > w {
                rows.push(std::mem::take(&mut row));
            }
            row.push(c);
        }
    }
    if !row.is_empty() || rows.is_empty() {
        rows.push(row);
    }
    rows
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
    fn a_line_of_spans_is_cut_with_a_mark_in_the_span_it_falls_in() {
        use ratatui::style::{Color, Style};
        let red = Style::default().fg(Color::Red);
        let spans = vec![
            Span::raw(" VIP lease  "),
            Span::styled("✓ held by k3s-dev-1", red),
            Span::raw(" · 0s ago"),
        ];
        let cut = clip_spans(spans.clone(), 20);
        let text: String = cut.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(width(&text), 20, "{text}");
        assert!(text.ends_with('…'), "{text}");
        assert_eq!(cut.last().map(|s| s.style), Some(red));
        // Wide enough: unchanged.
        assert_eq!(clip_spans(spans.clone(), 80), spans);
    }

    #[test]
    fn clip_marks_what_it_cut() {
        assert_eq!(clip("k3s-prod-1", 20), "k3s-prod-1");
        assert_eq!(clip("k3s-prod-1", 10), "k3s-prod-1");
        assert_eq!(clip("k3s-prod-1", 6), "k3s-p…");
        assert_eq!(clip("abc", 0), "");
        assert_eq!(widest(["a", "abcd", "ab"], 2), 4);
        let hosts = ["k3s-prod-3"];
        let s = "Apply x.yml to k3s-prod-3 now";
        assert_eq!(clip_keeping(s, 40, &hosts), s);
        assert_eq!(clip_keeping(s, 20, &hosts), "Apply x.yml to …");
        assert_eq!(clip_keeping(s, 9, &hosts), "Apply x.…");
        assert_eq!(clip_keeping(s, 27, &hosts), "Apply x.yml to k3s-prod-3 …");
    }

    #[test]
    fn wrap_cuts_nothing() {
        assert_eq!(
            wrap("lease moved k3s-prod-1 -> k3s-prod-2", 14),
            ["lease moved", "k3s-prod-1 ->", "k3s-prod-2"]
        );
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(wrap("", 5), [""]);
        let long = "node k3s-prod-1 Ready -> NotReady (Unknown: kubelet stopped posting)";
        assert_eq!(wrap(long, 20).join(" "), long);
    }
}
