//! Python's `ast.literal_eval`, as Ansible's INI plugin uses it: a value that is a Python
//! literal becomes that value (`True`, `None`, `5`, `1.5`, `'x'`, `[1, 2]`, `{'a': 1}`),
//! anything else stays the string it was. Then Ansible's coercion: tuples and sets become
//! lists, bytes become text, `...` and complex numbers become their string form.
//!
//! One file (over 800 lines, a sixth of it tests): the tokenizer and the evaluator of one small
//! language, with its coercions, kept together.

use serde_json::Value as J;

use super::pyset;

/// A Python value as `ast.literal_eval` returns it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Py {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Complex(f64, f64),
    Str(String),
    Ellipsis,
    List(Vec<Py>),
    /// Hashable when its items are (a list is not): matters inside sets and as dict keys.
    Tuple(Vec<Py>),
    Set(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

/// Python's tokenizer refuses brackets nested deeper than this ("too many nested
/// parentheses"), so Ansible keeps such a value as the string it was.
pub const PYTHON_MAX_NESTING: i32 = 200;
/// Literals nested deeper than this are refused (`inventory.max_literal_depth`):
/// ansible-core itself fails on them ("maximum recursion depth exceeded", from about
/// 165 levels on ansible-core 2.19 / Python 3.11), so no inventory that works has one.
pub const MAX_LITERAL_DEPTH: usize = 100;

/// Type an INI value like Ansible's `_parse_value`. Errs (with the reason) where Ansible
/// itself fails on the value (an unhashable set item or dict key; nesting past what its
/// recursion allows, see [`MAX_LITERAL_DEPTH`] and [`MAX_OPERATOR_CHAIN`]) and where what
/// Ansible does is an accident hk-console refuses to guess: a set whose order Python
/// randomises per process, or infinity, which ansible-inventory prints as non-JSON.
pub fn parse_value(v: &str) -> Result<J, LiteralError> {
    if let Some(j) = plain_value(v) {
        return Ok(j);
    }
    evaluated_value(v)
}

/// Why a value Ansible would evaluate as a Python literal is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    #[error("a value nested {depth} levels deep, more than {max} (limit inventory.max_literal_depth); ansible-core fails on such values with 'maximum recursion depth exceeded' (from about 161 levels with ansible-core 2.19 on Python 3.11)", max = MAX_LITERAL_DEPTH)]
    TooDeep { depth: usize },
    #[error("a chain of {ops} `+`/`-` operators, more than {max} (limit inventory.max_operator_chain); ansible-core fails on such values with 'maximum recursion depth exceeded during ast construction'", max = MAX_OPERATOR_CHAIN)]
    OperatorChain { ops: usize },
    #[error("a number too large for a float ({sign}infinity in Python): ansible-inventory prints it as `{sign}Infinity`, which is not JSON, and a play would see a float infinity; quote it if text is meant", sign = if *negative { "-" } else { "" })]
    Infinity { negative: bool },
    #[error("a dict key that is a {kind}: Python refuses it (unhashable type: '{kind}'), and so does Ansible")]
    UnhashableKey { kind: &'static str },
    /// A set Python refuses or iterates in no fixed order (`pyset` says which).
    #[error("{0}")]
    Set(String),
}

/// The shapes most host-line values have, typed without tokenizing: a decimal integer
/// (`slot=12`), a name-like word (`role=worker`, `ansible_user=root`) and a dotted quad
/// (`ansible_host=10.0.0.1`). Each is what [`evaluated_value`] gives for it (a unit test
/// compares them); anything else, or any doubt, goes the long way. This runs for every
/// value of every host line, related to the command or not.
fn plain_value(v: &str) -> Option<J> {
    let b = v.as_bytes();
    let first = *b.first()?;
    if b.iter().all(u8::is_ascii_digit) {
        // Python refuses leading zeros ("012" stays text) except in "0" itself.
        if (first != b'0' || b.len() == 1) && b.len() <= 18 {
            return v.parse::<i64>().ok().map(J::from);
        }
        return None;
    }
    if first.is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.')
        && !matches!(v, "True" | "False" | "None")
    {
        // A name, or names joined by dots: never a literal, so Ansible keeps the text.
        return Some(J::String(v.to_string()));
    }
    let mut parts = 0;
    for p in v.split('.') {
        if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        parts += 1;
    }
    // Three or more dotted numbers are two number tokens in a row for Python: text.
    (parts >= 3).then(|| J::String(v.to_string()))
}

/// [`parse_value`] through the tokenizer and the parser.
fn evaluated_value(v: &str) -> Result<J, LiteralError> {
    match literal_eval(v) {
        Ok(Some(py)) => {
            let depth = py_depth(&py);
            if depth > MAX_LITERAL_DEPTH {
                return Err(LiteralError::TooDeep { depth });
            }
            to_json(&py)
        }
        Ok(None) => Ok(J::String(v.to_string())),
        Err(e) => Err(e),
    }
}

/// A chain of this many `+`/`-` operators in one value is refused: Python parses such a
/// chain (`1+1+...`, `----1`) and then fails building its syntax tree ("maximum recursion
/// depth exceeded during ast construction", about 2,800-3,000 deep here, depending on the
/// interpreter's stack at that point), so Ansible fails on the file; where exactly is an
/// accident, so hk-console refuses from well below it (`inventory.max_operator_chain`).
pub const MAX_OPERATOR_CHAIN: usize = 1000;

/// `[+-]* atom ([+-]+ atom)*` with more than [`MAX_OPERATOR_CHAIN`] operators: a value
/// Python parses into a tree that deep.
fn operator_chain_too_long(tokens: &[Tok]) -> Option<usize> {
    let is_op = |t: &Tok| matches!(t, Tok::Op('+') | Tok::Op('-'));
    let is_atom = |t: &Tok| matches!(t, Tok::Num(_) | Tok::Str { .. } | Tok::Name(_));
    let ops = tokens.iter().filter(|t| is_op(t)).count();
    if ops <= MAX_OPERATOR_CHAIN {
        return None;
    }
    let mut want_atom = true;
    for t in tokens {
        if is_op(t) {
            want_atom = true;
        } else if is_atom(t) && want_atom {
            want_atom = false;
        } else {
            return None;
        }
    }
    (!want_atom).then_some(ops)
}

/// How many containers deep a value goes (a scalar is 0).
fn py_depth(v: &Py) -> usize {
    match v {
        Py::List(items) | Py::Tuple(items) | Py::Set(items) => {
            1 + items.iter().map(py_depth).max().unwrap_or(0)
        }
        Py::Dict(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| py_depth(k).max(py_depth(v)))
                .max()
                .unwrap_or(0)
        }
        _ => 0,
    }
}

/// `Ok(None)`: not a literal (the value stays a string).
fn literal_eval(v: &str) -> Result<Option<Py>, LiteralError> {
    let src = v.trim_start_matches([' ', '\t']);
    let Some(tokens) = tokenize(src) else {
        return Ok(None);
    };
    if let Some(ops) = operator_chain_too_long(&tokens) {
        return Err(LiteralError::OperatorChain { ops });
    }
    let mut p = Parser { t: &tokens, i: 0 };
    Ok(p.expr_list().filter(|_| p.i == tokens.len()))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Py),
    Str { text: String, bytes: bool },
    Name(String),
    Op(char),
    Ellipsis,
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth = 0i32;
    while i < chars.len() {
        let c = chars[i];
        if c == ' ' || c == '\t' || c == '\x0c' {
            i += 1;
        } else if c == '\n' || c == '\r' {
            // A newline outside brackets ends the expression; only trailing blank lines
            // may follow.
            if depth == 0 && chars[i..].iter().any(|c| !c.is_whitespace()) {
                return None;
            }
            i += 1;
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '.' && chars.get(i + 1) == Some(&'.') && chars.get(i + 2) == Some(&'.') {
            out.push(Tok::Ellipsis);
            i += 3;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric()
                    || chars[i] == '_'
                    || chars[i] == '.'
                    || ((chars[i] == '+' || chars[i] == '-')
                        && matches!(chars[i - 1], 'e' | 'E')
                        && !is_hex_or_prefixed(&chars[start..i])))
            {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok::Num(number(&text)?));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            // String prefixes.
            if matches!(chars.get(i), Some('\'') | Some('"')) && word.len() <= 2 {
                let lw = word.to_ascii_lowercase();
                let (raw, bytes) = match lw.as_str() {
                    "r" => (true, false),
                    "u" => (false, false),
                    "b" => (false, true),
                    "br" | "rb" => (true, true),
                    // f-strings are not literals; anything else is a syntax error.
                    _ => return None,
                };
                let (text, next) = string(&chars, i, raw, bytes)?;
                out.push(Tok::Str { text, bytes });
                i = next;
            } else {
                out.push(Tok::Name(word));
            }
        } else if c == '\'' || c == '"' {
            let (text, next) = string(&chars, i, false, false)?;
            out.push(Tok::Str { text, bytes: false });
            i = next;
        } else if "()[]{},:+-".contains(c) {
            match c {
                '(' | '[' | '{' => {
                    depth += 1;
                    // Python's "too many nested parentheses": not a literal, and the
                    // parser below never recurses deeper than this.
                    if depth > PYTHON_MAX_NESTING {
                        return None;
                    }
                }
                ')' | ']' | '}' => depth -= 1,
                _ => {}
            }
            out.push(Tok::Op(c));
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

fn is_hex_or_prefixed(chars: &[char]) -> bool {
    chars.len() > 1 && chars[0] == '0' && matches!(chars[1], 'x' | 'X' | 'o' | 'O' | 'b' | 'B')
}

fn digits_ok(s: &str, radix: u32) -> bool {
    // Underscores only between digits (one at a time).
    !s.is_empty()
        && !s.starts_with('_')
        && !s.ends_with('_')
        && !s.contains("__")
        && s.chars().all(|c| c == '_' || c.is_digit(radix))
}

fn number(text: &str) -> Option<Py> {
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower.strip_suffix('j') {
        let f = float_text(rest)?;
        return Some(Py::Complex(0.0, f));
    }
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(body) = lower.strip_prefix(prefix) {
            // Python allows one underscore right after the prefix.
            let body = body.strip_prefix('_').unwrap_or(body);
            if !digits_ok(body, radix) {
                return None;
            }
            return i128::from_str_radix(&body.replace('_', ""), radix)
                .ok()
                .map(Py::Int);
        }
    }
    if lower.contains(['.', 'e']) {
        return float_text(&lower).map(Py::Float);
    }
    if !digits_ok(&lower, 10) {
        return None;
    }
    let plain = lower.replace('_', "");
    // Leading zeros are a syntax error unless the number is all zeros.
    if plain.len() > 1 && plain.starts_with('0') && plain.chars().any(|c| c != '0') {
        return None;
    }
    plain.parse().ok().map(Py::Int)
}

fn float_text(s: &str) -> Option<f64> {
    // digits [. digits] [e [+-] digits], with underscores only between digits.
    let (mantissa, exp) = match s.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (s, None),
    };
    let (int_part, frac) = match mantissa.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (mantissa, None),
    };
    if int_part.is_empty() && frac.is_none_or(str::is_empty) {
        return None;
    }
    if !int_part.is_empty() && !digits_ok(int_part, 10) {
        return None;
    }
    if let Some(f) = frac {
        if !f.is_empty() && !digits_ok(f, 10) {
            return None;
        }
    }
    if let Some(e) = exp {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if !digits_ok(e, 10) {
            return None;
        }
    }
    s.replace('_', "").parse().ok()
}

/// A quoted string starting at `chars[i]`; returns its value and the index after it.
fn string(chars: &[char], i: usize, raw: bool, bytes: bool) -> Option<(String, usize)> {
    let q = chars[i];
    let triple = chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q);
    let mut j = if triple { i + 3 } else { i + 1 };
    let mut out = String::new();
    loop {
        let c = *chars.get(j)?;
        if bytes && !c.is_ascii() {
            return None;
        }
        if c == q {
            if !triple {
                return Some((out, j + 1));
            }
            if chars.get(j + 1) == Some(&q) && chars.get(j + 2) == Some(&q) {
                return Some((out, j + 3));
            }
            out.push(c);
            j += 1;
            continue;
        }
        if (c == '\n' || c == '\r') && !triple {
            return None;
        }
        if c == '\\' {
            let n = *chars.get(j + 1)?;
            if raw {
                // Raw strings keep the backslash; it still protects the next quote.
                out.push('\\');
                out.push(n);
                j += 2;
                continue;
            }
            j += 2;
            match n {
                '\n' => {}
                '\\' => out.push('\\'),
                '\'' => out.push('\''),
                '"' => out.push('"'),
                'a' => out.push('\x07'),
                'b' => out.push('\x08'),
                'f' => out.push('\x0c'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'v' => out.push('\x0b'),
                '0'..='7' => {
                    let mut val = n.to_digit(8)?;
                    let mut k = 0;
                    while k < 2 {
                        match chars.get(j).and_then(|c| c.to_digit(8)) {
                            Some(d) => {
                                val = val * 8 + d;
                                j += 1;
                                k += 1;
                            }
                            None => break,
                        }
                    }
                    out.push(char::from_u32(val)?);
                }
                'x' => {
                    let hex: String = chars.get(j..j + 2)?.iter().collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    j += 2;
                }
                'u' | 'U' if !bytes => {
                    let len = if n == 'u' { 4 } else { 8 };
                    let hex: String = chars.get(j..j + len)?.iter().collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    j += len;
                }
                // \N{NAME} needs the Unicode name table; treat as not a literal.
                'N' if !bytes => return None,
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
            continue;
        }
        out.push(c);
        j += 1;
    }
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Op(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Top level: `1, 2` is a tuple.
    fn expr_list(&mut self) -> Option<Py> {
        let first = self.expr()?;
        if self.peek() != Some(&Tok::Op(',')) {
            return Some(first);
        }
        let mut items = vec![first];
        while self.eat(',') {
            if self.i == self.t.len() {
                break;
            }
            items.push(self.expr()?);
        }
        Some(Py::Tuple(items))
    }

    /// `signed_num [(+|-) imaginary]` or an atom.
    fn expr(&mut self) -> Option<Py> {
        let (left, is_num) = self.signed()?;
        if let Some(Tok::Op(op)) = self.peek() {
            let op = *op;
            if op == '+' || op == '-' {
                self.i += 1;
                let (right, right_num) = self.atom()?;
                // Only `real (+|-) imaginary` is a literal.
                let re = match (is_num, &left) {
                    (true, Py::Int(i)) => *i as f64,
                    (true, Py::Float(f)) => *f,
                    _ => return None,
                };
                let Py::Complex(_, im) = (right_num.then_some(right))? else {
                    return None;
                };
                return Some(Py::Complex(re, if op == '-' { -im } else { im }));
            }
        }
        Some(left)
    }

    fn signed(&mut self) -> Option<(Py, bool)> {
        let sign = if self.eat('-') {
            Some(-1.0)
        } else if self.eat('+') {
            Some(1.0)
        } else {
            None
        };
        let (v, is_num) = self.atom()?;
        let Some(sign) = sign else {
            return Some((v, is_num));
        };
        if !is_num {
            return None;
        }
        let negate = sign < 0.0;
        let v = match v {
            Py::Int(i) => Py::Int(if negate { -i } else { i }),
            Py::Float(f) => Py::Float(if negate { -f } else { f }),
            Py::Complex(re, im) => {
                if negate {
                    Py::Complex(-re, -im)
                } else {
                    Py::Complex(re, im)
                }
            }
            _ => return None,
        };
        // A signed number is a literal but cannot be signed again or be the imaginary
        // right-hand side; it may still be the real left-hand side.
        Some((v, true))
    }

    /// Returns the value and whether it is a plain numeric constant.
    fn atom(&mut self) -> Option<(Py, bool)> {
        let tok = self.peek()?.clone();
        self.i += 1;
        match tok {
            Tok::Num(n) => Some((n, true)),
            Tok::Ellipsis => Some((Py::Ellipsis, false)),
            Tok::Str { mut text, bytes } => {
                // Adjacent literals concatenate; mixing bytes and text is an error.
                while let Some(Tok::Str {
                    text: more,
                    bytes: b2,
                }) = self.peek()
                {
                    if *b2 != bytes {
                        return None;
                    }
                    text.push_str(more);
                    self.i += 1;
                }
                Some((Py::Str(text), false))
            }
            Tok::Name(n) => match n.as_str() {
                "True" => Some((Py::Bool(true), false)),
                "False" => Some((Py::Bool(false), false)),
                "None" => Some((Py::None, false)),
                "set" if self.eat('(') && self.eat(')') => Some((Py::Set(Vec::new()), false)),
                _ => None,
            },
            Tok::Op('(') => {
                if self.eat(')') {
                    return Some((Py::Tuple(Vec::new()), false));
                }
                let (first, is_num) = self.expr_num()?;
                if self.eat(')') {
                    // Parentheses do not make a node: `-(1)` is still -1.
                    return Some((first, is_num));
                }
                let mut items = vec![first];
                while self.eat(',') {
                    if self.peek() == Some(&Tok::Op(')')) {
                        break;
                    }
                    items.push(self.expr()?);
                }
                self.eat(')').then_some((Py::Tuple(items), false))
            }
            Tok::Op('[') => {
                let items = self.items(']')?;
                Some((Py::List(items), false))
            }
            Tok::Op('{') => {
                if self.eat('}') {
                    return Some((Py::Dict(Vec::new()), false));
                }
                let first = self.expr()?;
                if self.eat(':') {
                    let mut entries = vec![(first, self.expr()?)];
                    while self.eat(',') {
                        if self.peek() == Some(&Tok::Op('}')) {
                            break;
                        }
                        let k = self.expr()?;
                        if !self.eat(':') {
                            return None;
                        }
                        entries.push((k, self.expr()?));
                    }
                    self.eat('}').then_some((Py::Dict(entries), false))
                } else {
                    let mut items = vec![first];
                    while self.eat(',') {
                        if self.peek() == Some(&Tok::Op('}')) {
                            break;
                        }
                        items.push(self.expr()?);
                    }
                    self.eat('}').then_some((Py::Set(items), false))
                }
            }
            _ => None,
        }
    }

    /// An expression inside parentheses, remembering whether it is a bare number.
    fn expr_num(&mut self) -> Option<(Py, bool)> {
        let start = self.i;
        if let Some(Tok::Num(_)) = self.peek() {
            let (v, is_num) = self.atom()?;
            if matches!(self.peek(), Some(Tok::Op(')')) | Some(Tok::Op(','))) {
                return Some((v, is_num));
            }
            self.i = start;
        }
        Some((self.expr()?, false))
    }

    fn items(&mut self, close: char) -> Option<Vec<Py>> {
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(items);
            }
            items.push(self.expr()?);
            if !self.eat(',') {
                return self.eat(close).then_some(items);
            }
        }
    }
}

fn to_json(v: &Py) -> Result<J, LiteralError> {
    Ok(match v {
        Py::None => J::Null,
        Py::Bool(b) => J::Bool(*b),
        Py::Int(i) => i64::try_from(*i)
            .map(J::from)
            .or_else(|_| u64::try_from(*i).map(J::from))
            .unwrap_or_else(|_| J::from(*i as f64)),
        Py::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => J::Number(n),
            None => return Err(LiteralError::Infinity { negative: *f < 0.0 }),
        },
        Py::Complex(re, im) => J::String(complex_repr(*re, *im)),
        Py::Str(s) => J::String(s.clone()),
        Py::Ellipsis => J::String("...".into()),
        Py::List(items) | Py::Tuple(items) => {
            J::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Py::Set(items) => J::Array(
            pyset::iteration_order(items)
                .map_err(LiteralError::Set)?
                .into_iter()
                .map(to_json)
                .collect::<Result<_, _>>()?,
        ),
        Py::Dict(entries) => {
            let mut map = serde_json::Map::new();
            for (k, v) in entries {
                if let Some(kind) = pyset::unhashable(k) {
                    return Err(LiteralError::UnhashableKey { kind });
                }
                map.insert(json_key(k)?, to_json(v)?);
            }
            J::Object(map)
        }
    })
}

/// What `json.dumps` writes for a non-string key.
fn json_key(k: &Py) -> Result<String, LiteralError> {
    Ok(match k {
        Py::Str(s) => s.clone(),
        Py::None => "null".into(),
        Py::Bool(b) => b.to_string(),
        Py::Int(i) => i.to_string(),
        Py::Float(f) => format!("{f:?}"),
        other => to_json(other)?.to_string(),
    })
}

fn float_part(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e16 {
        format!("{}", f as i64)
    } else {
        format!("{f:?}")
    }
}

/// Python's `str(complex)`.
fn complex_repr(re: f64, im: f64) -> String {
    let imag = float_part(im);
    if re == 0.0 && re.is_sign_positive() {
        return format!("{imag}j");
    }
    let sign = if im.is_sign_negative() { "" } else { "+" };
    let real = if re == 0.0 {
        "-0".to_string()
    } else {
        float_part(re)
    };
    format!("({real}{sign}{imag}j)")
}

#[cfg(test)]
mod tests {

    /// The shortcut gives exactly what the tokenizer and parser give, on the shapes it takes
    /// and on the near misses it must leave to them.
    #[test]
    fn plain_values_are_typed_as_literal_eval_types_them() {
        let cases = [
            "0",
            "7",
            "12",
            "123456789012345678",
            "1234567890123456789",
            "012",
            "00",
            "10.100.1.12",
            "1.2.3",
            "1.2",
            "1.",
            ".5",
            "1..2",
            "1.2.",
            "worker",
            "k3s_prod",
            "a.b.c",
            "x1.5",
            "True",
            "False",
            "None",
            "true",
            "none",
            "e5",
            "inf",
            "nan",
            "lambda",
            "not",
            "j",
            "abc.",
            "a..b",
            "A",
            "Z9",
            "1e5",
            "1_000",
            "0x10",
            "-1",
            "+1",
            "1j",
            "True.real",
        ];
        for v in cases {
            let slow = evaluated_value(v);
            if let Some(fast) = plain_value(v) {
                assert_eq!(Ok(fast), slow, "{v:?}");
            }
            assert_eq!(parse_value(v), slow, "{v:?}");
        }
        // The shortcut does take the common shapes.
        for v in ["12", "0", "worker", "a.b", "10.100.1.12"] {
            assert!(plain_value(v).is_some(), "{v:?}");
        }
        for v in ["012", "1.2", "True", "None", "1e5", "-1", "1_000"] {
            assert!(plain_value(v).is_none(), "{v:?}");
        }
    }
    use super::*;
    use serde_json::json;

    #[test]
    fn literal_eval_like_python() {
        let cases = [
            ("1", json!(1)),
            ("-5", json!(-5)),
            ("1.5", json!(1.5)),
            ("1e3", json!(1000.0)),
            ("1.", json!(1.0)),
            ("0x1F", json!(31)),
            ("0o17", json!(15)),
            ("0b101", json!(5)),
            ("1_000", json!(1000)),
            ("0_0", json!(0)),
            ("True", json!(true)),
            ("None", json!(null)),
            ("'x y'", json!("x y")),
            ("\"a\" 'b'", json!("ab")),
            ("b'by'", json!("by")),
            ("'\\x41\\n'", json!("A\n")),
            ("r'\\n'", json!("\\n")),
            ("[1, 2,]", json!([1, 2])),
            ("(1, (2, 3))", json!([1, [2, 3]])),
            ("(1,)", json!([1])),
            ("1, 2", json!([1, 2])),
            ("{'a': [1, 2], 'b': None}", json!({"a": [1, 2], "b": null})),
            ("{1: 2, 1: 3}", json!({"1": 3})),
            ("{4, 5, 4}", json!([4, 5])),
            ("set()", json!([])),
            ("-(1)", json!(-1)),
            ("  5", json!(5)),
            ("'a' # comment", json!("a")),
            ("...", json!("...")),
            ("1+2j", json!("(1+2j)")),
            ("2j", json!("2j")),
            ("-1-2j", json!("(-1-2j)")),
        ];
        for (src, want) in cases {
            assert_eq!(parse_value(src), Ok(want), "literal_eval({src:?})");
        }
    }

    #[test]
    fn non_literals_stay_strings() {
        for src in [
            "yes",
            "true",
            "0755",
            "1e",
            "1__0",
            "hello # comment",
            "{k:1}",
            "1+2",
            "--1",
            "-True",
            "f'x'",
            "foo(1)",
            "'unterminated",
            "[1, 2",
            "1 2",
            "a b",
            "192.168.1.50",
            "1.2.3",
            "{{ kube_vip_address }}",
            "",
            "01",
            "1_",
            "0x",
        ] {
            assert_eq!(
                parse_value(src),
                Ok(J::String(src.to_string())),
                "literal_eval({src:?})"
            );
        }
    }
}
