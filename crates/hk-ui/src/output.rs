//! The output pane's buffer: a bounded ring of lines with scrollback and follow mode.
//!
//! Owns: keeping at most [`OutputBuffer::capacity`] lines of at most
//! [`MAX_LINE_BYTES`] bytes each, so a step that prints forever costs a fixed amount of
//! memory (the bound is stated in docs/perf.md), and the scroll position.
//! Must not: know where lines come from or how they are drawn.

use std::collections::VecDeque;

/// Lines kept by default.
pub const DEFAULT_CAPACITY: usize = 20_000;
/// Longer lines are cut here (at a char boundary) and marked with `…`.
pub const MAX_LINE_BYTES: usize = 512;

#[derive(Debug, Clone)]
pub struct OutputBuffer {
    lines: VecDeque<String>,
    capacity: usize,
    /// Lines pushed out of the front since the step began.
    dropped: u64,
    /// Lines scrolled up from the bottom; 0 = at the bottom.
    offset: usize,
    /// Follow mode: stay at the bottom as lines arrive.
    pub follow: bool,
}

impl Default for OutputBuffer {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl OutputBuffer {
    pub fn with_capacity(capacity: usize) -> Self {
        OutputBuffer {
            lines: VecDeque::with_capacity(capacity.min(1024)),
            capacity: capacity.max(1),
            dropped: 0,
            offset: 0,
            follow: true,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Upper bound of the text bytes this buffer can hold (lines are cut to
    /// [`MAX_LINE_BYTES`] plus the 3-byte `…`).
    pub fn max_text_bytes(&self) -> usize {
        self.capacity * (MAX_LINE_BYTES + 3)
    }

    /// Heap bytes held by the lines now (their capacities plus the ring's slots): what the
    /// perf notes measure against [`OutputBuffer::max_text_bytes`].
    pub fn heap_bytes(&self) -> usize {
        self.lines.iter().map(String::capacity).sum::<usize>()
            + self.lines.capacity() * std::mem::size_of::<String>()
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn clear(&mut self) {
        self.lines.clear();
        self.dropped = 0;
        self.offset = 0;
        self.follow = true;
    }

    /// Append one line. Tabs become spaces (a terminal cell per char keeps the layout
    /// exact); every other control character, and the bidi controls, are written out
    /// visibly ([`hk_engine::text::visible`]: `\e`, `\r`, `\u{202e}`), so a host's output can
    /// neither move the terminal's cursor nor hide or reorder what the operator reads.
    pub fn push(&mut self, line: &str) {
        let mut clean = hk_engine::text::output_line(line).into_owned();
        if clean.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            while !clean.is_char_boundary(cut) {
                cut -= 1;
            }
            clean.truncate(cut);
            clean.push('…');
        }
        if self.lines.len() == self.capacity {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(clean);
        // Scrolled back: keep the same lines in view while new ones arrive below.
        if !self.follow {
            self.offset = (self.offset + 1).min(self.lines.len().saturating_sub(1));
        }
    }

    pub fn scroll_up(&mut self, n: usize) {
        self.follow = false;
        self.offset = (self.offset + n).min(self.lines.len().saturating_sub(1));
    }

    pub fn scroll_down(&mut self, n: usize) {
        self.offset = self.offset.saturating_sub(n);
        if self.offset == 0 {
            self.follow = true;
        }
    }

    pub fn top(&mut self) {
        self.follow = false;
        self.offset = self.lines.len().saturating_sub(1);
    }

    pub fn bottom(&mut self) {
        self.offset = 0;
        self.follow = true;
    }

    pub fn toggle_follow(&mut self) {
        if self.follow {
            self.follow = false;
        } else {
            self.bottom();
        }
    }

    /// The `height` lines to show, oldest first, honouring the scroll position. Touches only
    /// those lines, so drawing costs the same with 10 or 100k lines buffered.
    pub fn window(&self, height: usize) -> impl Iterator<Item = &str> {
        let end = self.lines.len().saturating_sub(self.offset);
        let start = end.saturating_sub(height);
        self.lines.range(start..end).map(String::as_str)
    }

    /// The lines from absolute line number `abs` (counting every line ever pushed) on, as
    /// far as the ring still holds them.
    pub fn since(&self, abs: u64) -> impl Iterator<Item = &str> {
        let skip = usize::try_from(abs.saturating_sub(self.dropped)).unwrap_or(usize::MAX);
        self.lines.iter().skip(skip).map(String::as_str)
    }

    /// Absolute number of the next line pushed.
    pub fn total(&self) -> u64 {
        self.dropped + self.lines.len() as u64
    }

    /// Search: the last `height` lines containing `needle` (case-insensitive) at or above
    /// the scroll position (the newest ones when following), oldest first, and how many
    /// lines match in all. Scans the ring (bounded), not the window.
    pub fn matching(&self, height: usize, needle: &str) -> (Vec<&str>, usize) {
        let (lines, total) = self.matching_numbered(height, needle);
        (lines.into_iter().map(|(_, l)| l).collect(), total)
    }

    /// [`OutputBuffer::matching`] with each line's absolute number (to mark the current
    /// match of `n`/`N`).
    pub fn matching_numbered(&self, height: usize, needle: &str) -> (Vec<(u64, &str)>, usize) {
        let needle = needle.to_lowercase();
        let end = self.lines.len().saturating_sub(self.offset);
        let mut total = 0;
        let mut last: Vec<(u64, &str)> = Vec::with_capacity(height.min(1024));
        for (i, l) in self.lines.iter().enumerate().rev() {
            if l.to_lowercase().contains(&needle) {
                total += 1;
                if i < end && last.len() < height {
                    last.push((self.dropped + i as u64, l));
                }
            }
        }
        last.reverse();
        (last, total)
    }

    /// Absolute numbers (see [`OutputBuffer::total`]) of the lines the ring holds that
    /// contain `needle` (case-insensitive), oldest first.
    pub fn match_lines(&self, needle: &str) -> Vec<u64> {
        let needle = needle.to_lowercase();
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.to_lowercase().contains(&needle))
            .map(|(i, _)| self.dropped + i as u64)
            .collect()
    }

    /// Absolute number of the bottom line of the window (`None` when empty).
    pub fn window_bottom(&self) -> Option<u64> {
        let end = self.lines.len().checked_sub(self.offset)?;
        end.checked_sub(1).map(|i| self.dropped + i as u64)
    }

    /// Scroll so absolute line `abs` is the bottom line of the window, and stop following
    /// so new output does not move it away. Returns false (nothing moves) when the ring no
    /// longer (or not yet) holds that line.
    pub fn jump_to(&mut self, abs: u64) -> bool {
        let Some(i) = abs
            .checked_sub(self.dropped)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < self.lines.len())
        else {
            return false;
        };
        self.follow = false;
        self.offset = self.lines.len() - 1 - i;
        true
    }

    /// Lines below the window (0 when at the bottom).
    pub fn below(&self) -> usize {
        self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_lines_and_counts_the_dropped() {
        let mut b = OutputBuffer::with_capacity(3);
        for i in 0..10 {
            b.push(&format!("line {i}"));
        }
        assert_eq!(b.len(), 3);
        assert_eq!(b.dropped(), 7);
        let w: Vec<&str> = b.window(10).collect();
        assert_eq!(w, vec!["line 7", "line 8", "line 9"]);
    }

    #[test]
    fn long_lines_are_cut_at_a_char_boundary() {
        let mut b = OutputBuffer::with_capacity(2);
        b.push(&"é".repeat(MAX_LINE_BYTES));
        let line = b.window(1).next().expect("one line");
        assert!(line.len() <= MAX_LINE_BYTES + 3, "{}", line.len());
        assert!(line.ends_with('…'));
    }

    #[test]
    fn scrollback_holds_its_place_while_output_arrives() {
        let mut b = OutputBuffer::with_capacity(100);
        for i in 0..20 {
            b.push(&format!("{i}"));
        }
        b.scroll_up(5);
        assert!(!b.follow);
        let before: Vec<String> = b.window(3).map(str::to_string).collect();
        b.push("new");
        let after: Vec<String> = b.window(3).map(str::to_string).collect();
        assert_eq!(before, after);
        assert_eq!(before, vec!["12", "13", "14"]);
        b.scroll_down(100);
        assert!(b.follow);
        assert_eq!(b.window(1).next(), Some("new"));
    }

    #[test]
    fn jumping_to_a_match_scrolls_the_window_and_the_search_view() {
        let mut b = OutputBuffer::with_capacity(50);
        for i in 0..120 {
            b.push(&format!("{} {i}", if i % 10 == 3 { "HIT" } else { "miss" }));
        }
        // The ring holds 70..119: matches 73, 83, ..., 113.
        let m = b.match_lines("hit");
        assert_eq!(m, vec![73, 83, 93, 103, 113]);
        assert!(b.jump_to(83));
        assert!(!b.follow);
        assert_eq!(b.window_bottom(), Some(83));
        assert_eq!(b.window(2).collect::<Vec<_>>(), vec!["miss 82", "HIT 83"]);
        // The search view ends at the scroll position too.
        let (shown, total) = b.matching_numbered(10, "hit");
        assert_eq!(total, 5);
        assert_eq!(shown, vec![(73, "HIT 73"), (83, "HIT 83")]);
        // New output does not move the jumped-to line.
        b.push("miss 120");
        assert_eq!(b.window_bottom(), Some(83));
        // A line the ring dropped cannot be jumped to.
        assert!(!b.jump_to(10));
        assert!(!b.jump_to(10_000));
        assert_eq!(b.window_bottom(), Some(83));
    }

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        let mut b = OutputBuffer::with_capacity(2);
        b.push("a\x1b[2Jb\r");
        assert_eq!(b.window(1).next(), Some("a\\e[2Jb\\r"));
        b.push("\x1b]0;title\x07\u{202e}cba\tx");
        assert_eq!(
            b.window(1).next(),
            Some("\\e]0;title\\x07\\u{202e}cba    x")
        );
        assert!(!b
            .window(2)
            .flat_map(str::chars)
            .any(hk_engine::text::needs_escape));
    }
}
