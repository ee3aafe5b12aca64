//! Python's text primitives as Ansible's INI plugin meets them: `str.splitlines`,
//! `str.strip`, `int(str)` and the `surrogateescape` decoding of bytes that are not UTF-8.
//! Rust's own versions differ exactly on the characters an inventory written by another tool
//! may carry (`\x1c`-`\x1f`, vertical tab, U+2028, digits of other scripts).

/// Python's `str.isspace()`: Unicode White_Space plus the four C0 separators
/// `\x1c`-`\x1f`, which Python counts as whitespace and Rust does not.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.strip()`.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Whether `str.splitlines()` breaks a line at `c`.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\x0b'
            | '\x0c'
            | '\x1c'
            | '\x1d'
            | '\x1e'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Python's `str.splitlines()`: `\r\n` is one break; a final break makes no empty line.
pub fn splitlines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.char_indices().find(|&(_, c)| is_line_break(c)) {
            Some((i, c)) => {
                out.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") {
                    2
                } else {
                    c.len_utf8()
                };
                rest = &rest[i + skip..];
            }
            None => {
                out.push(rest);
                rest = "";
            }
        }
    }
    out
}

/// The first code point of every run of ten decimal digits (Unicode category Nd) as Python
/// 3.11's `unicodedata` (Unicode 14.0) knows them: `int()` accepts any of these digits.
const DECIMAL_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// The value of a decimal digit of any script (`unicodedata.decimal`).
pub fn decimal(c: char) -> Option<u32> {
    let u = c as u32;
    let i = DECIMAL_ZEROS.partition_point(|&z| z <= u);
    let zero = *DECIMAL_ZEROS.get(i.checked_sub(1)?)?;
    (u - zero < 10).then_some(u - zero)
}

/// Python's `int(s)` for a base-10 string: surrounding whitespace, one sign, digits of any
/// script, single underscores between digits. `None` where Python raises ValueError (or the
/// value does not fit in an i64, which no host range reaches).
pub fn int(s: &str) -> Option<i64> {
    let t = strip(s);
    let (negative, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if body.is_empty() || body.starts_with('_') || body.ends_with('_') || body.contains("__") {
        return None;
    }
    let mut value: i64 = 0;
    for c in body.chars().filter(|&c| c != '_') {
        let d = i64::from(decimal(c)?);
        value = value.checked_mul(10)?.checked_add(d)?;
    }
    Some(if negative { -value } else { value })
}

/// Bytes read as Ansible reads an inventory file (`surrogateescape`) and then prints it:
/// each run of bytes that are not valid UTF-8, however long (`\xe2\x82` before an ASCII
/// letter, `\xff\xfe`), becomes one `?`, as ansible-inventory prints it (checked on the
/// non_utf8 fixture). Returns the text and the 1-based
/// line numbers where that happened.
pub fn decode_lossy_like_ansible(bytes: &[u8]) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(bytes.len());
    // Where in `out` each run of undecodable bytes starts.
    let mut at = Vec::new();
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                // The prefix is valid by construction.
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                let n = e.error_len().unwrap_or(bad.len());
                // Back to back runs are one `?`: nothing valid came between them.
                if !(good.is_empty() && at.last().is_some_and(|&a| a + 1 == out.len())) {
                    at.push(out.len());
                    out.push('?');
                }
                rest = &bad[n..];
            }
        }
    }
    let mut lines: Vec<usize> = Vec::new();
    let (mut line, mut next) = (1, at.iter().peekable());
    let mut prev = '\0';
    for (i, c) in out.char_indices() {
        while next.peek().is_some_and(|&&o| o == i) {
            next.next();
            if lines.last() != Some(&line) {
                lines.push(line);
            }
        }
        if is_line_break(c) && !(prev == '\r' && c == '\n') {
            line += 1;
        }
        prev = c;
    }
    (out, lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_and_strip_like_python() {
        assert_eq!(
            splitlines("a\r\nb\x0bc\x0cd\x1ce\u{85}f\u{2028}g\u{2029}h\x1fi\n"),
            ["a", "b", "c", "d", "e", "f", "g", "h\x1fi"]
        );
        assert_eq!(splitlines("a\n\nb"), ["a", "", "b"]);
        assert_eq!(strip("\x1f\u{a0} x y\u{3000}\x1c"), "x y");
    }

    #[test]
    fn int_like_python() {
        assert_eq!(int("\u{661}\u{662}"), Some(12));
        assert_eq!(int("\u{ff13}"), Some(3));
        assert_eq!(int(" -1_0 "), Some(-10));
        assert_eq!(int("1__0"), None);
        assert_eq!(int("a"), None);
        assert_eq!(int("\u{b2}"), None, "superscript two is not decimal");
    }

    #[test]
    fn undecodable_bytes_become_question_marks() {
        let (text, lines) = decode_lossy_like_ansible(b"ok\ncaf\xe9 \xe2\x82x\n\xff\xfe");
        assert_eq!(text, "ok\ncaf? ?x\n?");
        assert_eq!(lines, [2, 3]);
    }
}
