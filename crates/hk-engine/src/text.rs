//! Text from data, made safe to print on a terminal.
//!
//! Owns: [`visible`], the one way a string that came from a repo file, a host's output, a
//! cluster object or a journal is turned into something a terminal only displays. A repo
//! value holding `ESC [2J` would otherwise clear the screen and forge what the operator
//! reads; a bidi override would reorder what follows it.
//! Also owns the bound on template expressions ([`template_within_bounds`]): text from a
//! runbook or a repo value is measured here before the template engine parses it.
//! Must not: touch the colour the program itself adds (callers escape the data, then style).

use std::borrow::Cow;

/// `s` with every character a terminal would act on instead of showing written out
/// visibly: ESC as `\e`, tab, newline and CR as `\t`, `\n`, `\r` (each moves the cursor),
/// the other C0 controls, DEL and the C1 controls as `\xNN`, and the bidi embeddings,
/// overrides and isolates (U+202A-U+202E, U+2066-U+2069) and the line and paragraph
/// separators (U+2028, U+2029) as `\u{NNNN}`.
/// A backslash is left as is: the escapes are for reading, not for parsing back.
/// Borrowed when nothing needs escaping, which is nearly always.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c) {
            out.push(c);
            continue;
        }
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// A line of a step's output as the console and the change record show it: a tab is four
/// spaces (what a reader expects where a command aligned its columns; one terminal cell per
/// char keeps the layout exact), every other control character written out by [`visible`].
pub fn output_line(line: &str) -> Cow<'_, str> {
    if !line.contains('\t') {
        return visible(line);
    }
    Cow::Owned(visible(&line.replace('\t', "    ")).into_owned())
}

/// Like [`visible`] for text of several lines: each line escaped, the line breaks kept
/// (a lone `\r` inside a line is still shown, so it cannot overwrite what precedes it).
pub fn visible_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.split('\n')
            .map(|l| visible(l).into_owned())
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// JSON text (as serde_json writes it) with the characters [`visible`] escapes and
/// serde_json leaves raw (DEL, C1, bidi, U+2028/2029) written as `\uNNNN` escapes: the
/// same JSON value, safe on a terminal. serde_json already escapes C0 inside strings, so a
/// raw line break here is the pretty-printer's own and is kept.
pub fn json_visible(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if c != '\n' && needs_escape(c) {
            // Every escaped character is in the Basic Multilingual Plane: one \u escape.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One visible character for a control character, for where only one terminal cell is
/// free: the Unicode control picture of a C0 control or DEL (`␛`, `␇`, `␍`), else `�`.
pub fn stand_in(c: char) -> &'static str {
    const PICTURES: [&str; 32] = [
        "␀", "␁", "␂", "␃", "␄", "␅", "␆", "␇", "␈", "␉", "␊", "␋", "␌", "␍", "␎", "␏", "␐", "␑",
        "␒", "␓", "␔", "␕", "␖", "␗", "␘", "␙", "␚", "␛", "␜", "␝", "␞", "␟",
    ];
    match c as u32 {
        u @ 0..=0x1f => PICTURES[u as usize],
        0x7f => "␡",
        _ => "\u{fffd}",
    }
}

/// Whether a terminal could act on `c` instead of showing it.
pub fn needs_escape(c: char) -> bool {
    let u = c as u32;
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        || (0x202a..=0x202e).contains(&u)
        || (0x2066..=0x2069).contains(&u)
        || u == 0x2028
        || u == 0x2029
}

/// The most operators (and filter bars, dots, brackets, `and`/`or`/`not`/`in`/`is`) one
/// `{{ }}` or `{% %}` tag may hold. minijinja parses a long chain such as `a ~ b ~ c ~ ...`
/// into a tree as deep as the chain and drops it recursively: a few thousand links
/// overflow a thread's stack (found by tests/fuzz_parsers.rs). No runbook needs a hundred.
pub const MAX_TEMPLATE_OPERATORS: usize = 1_000;

/// The operator count of the busiest tag in `text` (see [`MAX_TEMPLATE_OPERATORS`]).
pub fn busiest_tag_operators(text: &str) -> usize {
    let mut busiest = 0;
    let mut rest = text;
    loop {
        let open = match (rest.find("{{"), rest.find("{%")) {
            (Some(x), Some(y)) => x.min(y),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => break,
        };
        let body = &rest[open + 2..];
        let end = [body.find("}}"), body.find("%}")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(body.len());
        let tag = &body[..end];
        let marks = tag
            .chars()
            .filter(|c| "+-*/%~<>=!|.[(".contains(*c))
            .count();
        let words = tag
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| matches!(*w, "and" | "or" | "not" | "in" | "is" | "if" | "else"))
            .count();
        busiest = busiest.max(marks + words);
        rest = &body[end..];
    }
    busiest
}

/// `Err` naming the count when a tag of `text` is busier than [`MAX_TEMPLATE_OPERATORS`]:
/// checked before minijinja sees a runbook template or an inventory value.
pub fn template_within_bounds(text: &str) -> Result<(), TemplateTooDeep> {
    let operators = busiest_tag_operators(text);
    if operators > MAX_TEMPLATE_OPERATORS {
        return Err(TemplateTooDeep { operators });
    }
    Ok(())
}

/// A template tag busier than [`MAX_TEMPLATE_OPERATORS`], refused before minijinja sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a template tag with {operators} operators, more than {max}: refused \
     (the template engine would exhaust its stack on so deep an expression)",
    max = MAX_TEMPLATE_OPERATORS
)]
pub struct TemplateTooDeep {
    pub operators: usize,
}

/// What one evaluation of a template from the repo may spend (`jinja.max_fuel`): minijinja
/// instructions, each loop iteration, lookup and filter call one or a few. Ansible's
/// variables spend tens; a loop of 10^8 iterations (`{% for i in range(100000) %}{% for j
/// in range(100000) %}`) would run for minutes: it stops here with a named error. Each
/// render has its own budget, so a chain of variables (at most `repo::resolve::MAX_CHAIN` deep) spends at
/// most that many budgets. A budget spent on a nested loop is about 0.1 s of a debug
/// build's CPU (measured: 3 servers each spending it, `envs` 0.3 s user).
pub const MAX_FUEL: u64 = 100_000;

/// What a template that spent its budget is refused with.
pub fn out_of_fuel_reason() -> String {
    format!(
        "its evaluation took more than {MAX_FUEL} steps (limit jinja.max_fuel): stopped, as a loop this long would not end in useful time"
    )
}

/// Whether a rendering failed because a template spent its budget ([`out_of_fuel_reason`]).
pub fn is_out_of_fuel(reason: &str) -> bool {
    reason.contains("(limit jinja.max_fuel)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_too_busy_tag_is_refused_in_the_words_it_always_used() {
        let tag = format!(
            "{{{{ {} }}}}",
            vec!["a"; MAX_TEMPLATE_OPERATORS + 2].join(" + ")
        );
        let e = template_within_bounds(&tag).expect_err("too busy");
        assert_eq!(
            e.to_string(),
            format!(
                "a template tag with {} operators, more than {MAX_TEMPLATE_OPERATORS}: refused (the template engine would exhaust its stack on so deep an expression)",
                e.operators
            )
        );
        assert!(e.operators > MAX_TEMPLATE_OPERATORS);
        assert_eq!(template_within_bounds("{{ a + b }}"), Ok(()));
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let s = "k3s-prod-1: ok, 32 — ünïcode";
        assert!(matches!(visible(s), Cow::Borrowed(_)));
        assert_eq!(visible(s), s);
    }

    #[test]
    fn controls_and_bidi_are_written_out() {
        assert_eq!(
            visible("\u{1b}[2J\u{1b}[Hparity: clean\u{1b}[8m"),
            "\\e[2J\\e[Hparity: clean\\e[8m"
        );
        assert_eq!(visible("\u{1b}]0;pwned\u{7}"), "\\e]0;pwned\\x07");
        assert_eq!(visible("ok\rFAIL\u{8}"), "ok\\rFAIL\\x08");
        assert_eq!(visible("a\u{7f}b\u{9b}c"), "a\\x7fb\\x9bc");
        assert_eq!(
            visible("x\u{202e}gnp.exe\u{2066}\u{2069}\u{2028}"),
            "x\\u{202e}gnp.exe\\u{2066}\\u{2069}\\u{2028}"
        );
        assert_eq!(visible("a\nb\tc"), "a\\nb\\tc");
        let out = visible("\u{1b}\u{7}\u{9d}\u{202d}");
        assert!(!out.chars().any(needs_escape), "{out}");
    }

    #[test]
    fn json_stays_the_same_json() {
        let v = serde_json::json!({"k": "a\u{1b}[2J\u{7f}\u{9b}\u{202e}b\nc"});
        let text = serde_json::to_string_pretty(&v).expect("json");
        let safe = json_visible(&text);
        assert!(
            !safe.chars().any(|c| c != '\n' && needs_escape(c)),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).expect("still JSON");
        assert_eq!(back, v);
    }

    #[test]
    fn lines_keep_their_breaks() {
        assert_eq!(visible_lines("a\nb"), "a\nb");
        assert_eq!(visible_lines("a\u{1b}[31m\nb\r"), "a\\e[31m\nb\\r");
    }
}
