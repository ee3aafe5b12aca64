//! Python's `shlex.split(line, comments=True)`, as Ansible's INI plugin splits a host line.

use std::borrow::Cow;

/// Python's `shlex.split(line, comments=True)` (POSIX mode): whitespace (only space, tab,
/// CR and LF: NBSP or EM SPACE are part of a word, as in Python) splits, `'...'` is
/// literal, `"..."` honours `\"` and `\\`, a backslash outside quotes escapes any character,
/// and `#` starts a comment even in the middle of a word.
pub fn shlex_split(line: &str) -> Result<Vec<String>, &'static str> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Space,
        Word,
        Quote(char),
        Escape(char),
    }
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut quoted = false;
    let mut state = S::Space;
    // The state an escape returns to: Word, or the quote it happened in.
    let mut back = S::Word;
    for c in line.chars() {
        match state {
            S::Space => {
                if is_shlex_space(c) {
                    continue;
                } else if c == '#' {
                    break;
                } else if c == '\\' {
                    back = S::Word;
                    state = S::Escape('\\');
                } else if c == '\'' || c == '"' {
                    state = S::Quote(c);
                } else {
                    token.push(c);
                    state = S::Word;
                }
            }
            S::Word => {
                if is_shlex_space(c) || c == '#' {
                    if !token.is_empty() || quoted {
                        tokens.push(std::mem::take(&mut token));
                    }
                    quoted = false;
                    state = S::Space;
                    if c == '#' {
                        return Ok(tokens);
                    }
                } else if c == '\'' || c == '"' {
                    state = S::Quote(c);
                } else if c == '\\' {
                    back = S::Word;
                    state = S::Escape('\\');
                } else {
                    token.push(c);
                }
            }
            S::Quote(q) => {
                quoted = true;
                if c == q {
                    state = S::Word;
                } else if c == '\\' && q == '"' {
                    back = S::Quote(q);
                    state = S::Escape('\\');
                } else {
                    token.push(c);
                }
            }
            S::Escape(_) => {
                if let S::Quote(q) = back {
                    if c != '\\' && c != q {
                        token.push('\\');
                    }
                }
                token.push(c);
                state = back;
            }
        }
    }
    match state {
        S::Quote(_) => Err("No closing quotation"),
        S::Escape(_) => Err("No escaped character"),
        _ => {
            if !token.is_empty() || quoted {
                tokens.push(token);
            }
            Ok(tokens)
        }
    }
}

/// [`shlex_split`] without copying the words of a line that has nothing for shlex to undo
/// (no quote, backslash or `#`): its words are then exactly the runs between shlex
/// whitespace. Host lines are mostly like that, and every one of them is split on every load.
pub fn shlex_split_borrowed(line: &str) -> Result<Vec<Cow<'_, str>>, &'static str> {
    if line.contains(['\'', '"', '\\', '#']) {
        return Ok(shlex_split(line)?.into_iter().map(Cow::Owned).collect());
    }
    Ok(line
        .split(is_shlex_space)
        .filter(|w| !w.is_empty())
        .map(Cow::Borrowed)
        .collect())
}

/// `shlex.whitespace`: ASCII only.
fn is_shlex_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shlex_like_python() {
        let s = |l: &str| shlex_split(l).expect("split");
        assert_eq!(s("h a=1#x b=2"), ["h", "a=1"]);
        assert_eq!(s("h a=\"x y\"z b='q\\'"), ["h", "a=x yz", "b=q\\"]);
        assert_eq!(s("h a=x\\ y"), ["h", "a=x y"]);
        assert_eq!(s("h a=\"x\\\"y\" b=\"\\n\""), ["h", "a=x\"y", "b=\\n"]);
        assert_eq!(s("h a=''"), ["h", "a="]);
        assert_eq!(s("h a=1 ;b=2"), ["h", "a=1", ";b=2"]);
        assert_eq!(s("h a=1\u{a0}b=2\x1fc"), ["h", "a=1\u{a0}b=2\x1fc"]);
        assert_eq!(
            shlex_split("h a='x").expect_err("open"),
            "No closing quotation"
        );
    }

    #[test]
    fn borrowed_split_gives_the_same_words() {
        for line in [
            "h a=1#x b=2",
            "h a=\"x y\"z b='q\\'",
            "h a=x\\ y",
            "  h\ta=1\r\nb=2  ",
            "h a=1\u{a0}b=2\x1fc ;d=3",
            "web[01:20]:2222 ansible_host=10.0.0.1 slot=12",
            "",
            "   ",
            "h a='x",
            "h a=\\",
        ] {
            let borrowed = shlex_split_borrowed(line)
                .map(|ws| ws.into_iter().map(|w| w.into_owned()).collect::<Vec<_>>());
            assert_eq!(borrowed, shlex_split(line), "{line:?}");
        }
    }
}
