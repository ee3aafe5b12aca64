//! The simulated nodes' shell: the POSIX `sh` subset the shipped runbooks' `ssh` steps,
//! hk-console's own probes and Ansible's `raw` tasks send, parsed with real shell word
//! rules and evaluated over a [`System`] (the node's simulated utilities and files).
//!
//! Supported: words with `'...'`, `"..."`, `\` escapes, `$name`, `${name}`, `${name:-word}`,
//! `$?`, `$$`, `$#`, `$0`..`$9`, `$(...)`, `~`; field splitting of unquoted expansions;
//! `;`, newlines, `&&`, `||`, `!`, `|`, `{ ...; }`, `( ... )`, `for ... in ... do ... done`,
//! `case ... in ... esac`, `if ... then ... elif ... else ... fi`; redirections `>`, `>>`,
//! `<`, `N>`, `N>&M`; assignments; `set -e`/`-u`; builtins `:` `true` `false` `echo`
//! `printf` `exit` `set` `test`/`[` `export` `cd`, and `sh -c`/`bash -c`/`sudo` re-entry.
//! Anything else (backticks, `$((...))`, here-documents, `&`, `while`) is a syntax error
//! saying so, exit 2. No pathname globbing: there is no file system to glob.
//!
//! Owns: parsing and evaluating that subset. Must not: run anything on the real host; every
//! command that is not a builtin goes to [`System::exec`], and an unknown one is exit 127.

use std::collections::HashMap;
use std::fmt;

/// What a command wrote and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub status: i32,
    /// The command read its standard input to the end (an interpreter given no script
    /// reads it from stdin): whoever feeds the input must let the client finish sending
    /// before answering, as a real process would have drained it.
    pub reads_stdin: bool,
}

impl Output {
    /// Exit 0 with this on stdout.
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Self {
        Output {
            stdout: stdout.into(),
            status: 0,
            ..Output::default()
        }
    }

    /// This status with this on stderr.
    pub fn fail(status: i32, stderr: impl Into<Vec<u8>>) -> Self {
        Output {
            stderr: stderr.into(),
            status,
            ..Output::default()
        }
    }
}

/// What the commands run on: the node's utilities and files.
pub trait System {
    /// Runs a command that is not a shell builtin; None when the simulation has no such
    /// command (the shell answers exit 127).
    fn exec(&mut self, argv: &[String], stdin: &[u8]) -> Option<Output>;
    /// Reads a file (for `<` redirections).
    fn read_file(&mut self, path: &str) -> Result<String, String>;
    /// Writes (or appends to) a file, for `>`/`>>` redirections.
    fn write_file(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), String>;
    /// The login user's home, for `~`.
    fn home(&self) -> String;
    /// True once the command was signalled or its channel closed: the shell stops.
    fn cancelled(&self) -> bool;
}

/// How a script ended: normally with a status, or killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exit(i32),
    Killed,
}

/// Parses and runs `script` the way `sh -c script` would. Output goes to `out`.
pub fn run_script(sys: &mut dyn System, script: &str, out: &mut Output) -> Ending {
    let list = match Parser::new(script).parse_program() {
        Ok(l) => l,
        Err(e) => {
            out.stderr
                .extend_from_slice(format!("sh: {e}\n").as_bytes());
            out.status = 2;
            return Ending::Exit(2);
        }
    };
    let mut sh = Shell::new(sys, vec!["sh".into()]);
    let ending = match sh.list(&list, &[], out) {
        Ok(s) => Ending::Exit(s),
        Err(Stop::Exit(s)) => Ending::Exit(s),
        Err(Stop::Killed) => Ending::Killed,
    };
    if let Ending::Exit(s) = ending {
        out.status = s;
    }
    ending
}

// ---------------------------------------------------------------------------------------
// Syntax
// ---------------------------------------------------------------------------------------

/// A shell syntax error (or a construct the simulation does not support).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// Unquoted literal text (subject to nothing: no globbing here).
    Lit(String),
    /// Quoted literal text.
    Quoted(String),
    /// `$name`, `${name}`, `${name:-word}`; `quoted` inside double quotes.
    Param {
        name: String,
        default: Option<(bool, Word)>,
        quoted: bool,
    },
    /// `$(...)`.
    Subst { list: List, quoted: bool },
    /// A leading `~` or `~user`.
    Tilde(String),
}

type Word = Vec<Part>;

#[derive(Debug, Clone, PartialEq)]
enum RedirOp {
    Out,
    Append,
    In,
    Dup(u32),
}

#[derive(Debug, Clone, PartialEq)]
struct Redir {
    fd: u32,
    op: RedirOp,
    target: Word,
}

#[derive(Debug, Clone, PartialEq)]
enum Command {
    Simple {
        assigns: Vec<(String, Word)>,
        words: Vec<Word>,
        redirs: Vec<Redir>,
    },
    Group(List, Vec<Redir>),
    Subshell(List, Vec<Redir>),
    For {
        var: String,
        items: Vec<Word>,
        body: List,
    },
    Case {
        word: Word,
        arms: Vec<(Vec<Word>, List)>,
    },
    If {
        branches: Vec<(List, List)>,
        otherwise: Option<List>,
    },
}

#[derive(Debug, Clone, PartialEq)]
struct Pipeline {
    bang: bool,
    cmds: Vec<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Connector {
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq)]
struct AndOr {
    first: Pipeline,
    rest: Vec<(Connector, Pipeline)>,
}

type List = Vec<AndOr>;

const RESERVED: [&str; 14] = [
    "{", "}", "!", "for", "in", "do", "done", "case", "esac", "if", "then", "elif", "else", "fi",
];

struct Parser {
    s: Vec<char>,
    i: usize,
}

fn is_op_char(c: char) -> bool {
    matches!(c, ';' | '&' | '|' | '(' | ')' | '<' | '>' | '\n')
}

fn is_name(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && cs.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn err<T>(msg: impl Into<String>) -> Result<T, SyntaxError> {
    Err(SyntaxError(msg.into()))
}

impl Parser {
    fn new(s: &str) -> Self {
        Parser {
            s: s.chars().collect(),
            i: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn starts_with(&self, t: &str) -> bool {
        t.chars()
            .enumerate()
            .all(|(k, c)| self.peek_at(k) == Some(c))
    }

    /// Skips blanks, comments and line continuations (not newlines).
    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.i += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.i += 2,
                Some('#') => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.i += 1;
                    }
                }
                _ => return,
            }
        }
    }

    /// Skips blanks and newlines (where a list may continue on the next line).
    fn skip_space(&mut self) {
        loop {
            self.skip_blanks();
            if self.peek() == Some('\n') {
                self.i += 1;
            } else {
                return;
            }
        }
    }

    /// The next plain word, if it is one unquoted literal word (for reserved words).
    fn peek_reserved(&mut self) -> Option<String> {
        self.skip_blanks();
        let mut j = self.i;
        let mut w = String::new();
        while let Some(&c) = self.s.get(j) {
            if c.is_whitespace() || is_op_char(c) {
                break;
            }
            if matches!(c, '\'' | '"' | '\\' | '$' | '`') {
                return None;
            }
            w.push(c);
            j += 1;
        }
        RESERVED.contains(&w.as_str()).then_some(w)
    }

    fn eat_reserved(&mut self, want: &str) -> Result<(), SyntaxError> {
        match self.peek_reserved() {
            Some(w) if w == want => {
                self.i += w.chars().count();
                Ok(())
            }
            Some(w) => err(format!("syntax error: `{w}` where `{want}` was expected")),
            None => err(format!(
                "syntax error: `{want}` expected {}",
                self.context()
            )),
        }
    }

    fn context(&self) -> String {
        match self.peek() {
            None => "at end of input".into(),
            Some(_) => {
                let rest: String = self.s[self.i..].iter().take(20).collect();
                format!("before `{rest}`")
            }
        }
    }

    fn parse_program(&mut self) -> Result<List, SyntaxError> {
        let list = self.list(&[])?;
        self.skip_space();
        if self.peek().is_some() {
            return err(format!("syntax error: unexpected {}", self.context()));
        }
        Ok(list)
    }

    /// A list, ending before one of `stops` (reserved words), `)`, `;;` or the end.
    fn list(&mut self, stops: &[&str]) -> Result<List, SyntaxError> {
        let mut list = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                None | Some(')') => break,
                _ if self.starts_with(";;") => break,
                _ => {}
            }
            if let Some(w) = self.peek_reserved() {
                if stops.contains(&w.as_str()) {
                    break;
                }
            }
            list.push(self.and_or()?);
            self.skip_blanks();
            match self.peek() {
                Some(';') if !self.starts_with(";;") => self.i += 1,
                Some('\n') => self.i += 1,
                Some('&') => return err("sim: background jobs (`&`) are not supported"),
                _ => {}
            }
        }
        Ok(list)
    }

    fn and_or(&mut self) -> Result<AndOr, SyntaxError> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            self.skip_blanks();
            let c = if self.starts_with("&&") {
                Connector::And
            } else if self.starts_with("||") {
                Connector::Or
            } else {
                break;
            };
            self.i += 2;
            self.skip_space();
            rest.push((c, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    fn pipeline(&mut self) -> Result<Pipeline, SyntaxError> {
        let mut bang = false;
        if self.peek_reserved().as_deref() == Some("!") {
            self.i += 1;
            bang = true;
        }
        let mut cmds = vec![self.command()?];
        loop {
            self.skip_blanks();
            if self.peek() == Some('|') && !self.starts_with("||") {
                self.i += 1;
                self.skip_space();
                cmds.push(self.command()?);
            } else {
                break;
            }
        }
        Ok(Pipeline { bang, cmds })
    }

    fn command(&mut self) -> Result<Command, SyntaxError> {
        self.skip_blanks();
        if self.peek() == Some('(') {
            if self.peek_at(1) == Some('(') {
                return err("sim: arithmetic commands `((...))` are not supported");
            }
            self.i += 1;
            let body = self.list(&[])?;
            self.skip_space();
            if self.peek() != Some(')') {
                return err(format!("syntax error: `)` expected {}", self.context()));
            }
            self.i += 1;
            let redirs = self.trailing_redirs()?;
            return Ok(Command::Subshell(body, redirs));
        }
        match self.peek_reserved().as_deref() {
            Some("{") => {
                self.i += 1;
                let body = self.list(&["}"])?;
                self.eat_reserved("}")?;
                let redirs = self.trailing_redirs()?;
                Ok(Command::Group(body, redirs))
            }
            Some("for") => self.for_loop(),
            Some("case") => self.case(),
            Some("if") => self.if_cmd(),
            Some(w) => err(format!("syntax error: unexpected `{w}`")),
            None => self.simple(),
        }
    }

    fn trailing_redirs(&mut self) -> Result<Vec<Redir>, SyntaxError> {
        let mut redirs = Vec::new();
        while let Some(r) = self.redir()? {
            redirs.push(r);
        }
        Ok(redirs)
    }

    fn for_loop(&mut self) -> Result<Command, SyntaxError> {
        self.eat_reserved("for")?;
        self.skip_blanks();
        let var = match self.word()? {
            Some(w) => literal(&w).filter(|v| is_name(v)),
            None => None,
        }
        .ok_or_else(|| SyntaxError("syntax error: bad `for` variable".into()))?;
        self.skip_blanks();
        let mut items = Vec::new();
        if self.peek_reserved().as_deref() == Some("in") {
            self.eat_reserved("in")?;
            loop {
                self.skip_blanks();
                if matches!(self.peek(), Some(';' | '\n') | None) {
                    break;
                }
                match self.word()? {
                    Some(w) => items.push(w),
                    None => return err(format!("syntax error in `for` {}", self.context())),
                }
            }
        } else {
            return err("sim: `for` without `in` (positional parameters) is not supported");
        }
        if matches!(self.peek(), Some(';' | '\n')) {
            self.i += 1;
        }
        self.skip_space();
        self.eat_reserved("do")?;
        let body = self.list(&["done"])?;
        self.eat_reserved("done")?;
        Ok(Command::For { var, items, body })
    }

    fn case(&mut self) -> Result<Command, SyntaxError> {
        self.eat_reserved("case")?;
        self.skip_blanks();
        let word = self
            .word()?
            .ok_or_else(|| SyntaxError("syntax error: `case` needs a word".into()))?;
        self.skip_space();
        self.eat_reserved("in")?;
        let mut arms = Vec::new();
        loop {
            self.skip_space();
            if self.peek_reserved().as_deref() == Some("esac") {
                self.eat_reserved("esac")?;
                break;
            }
            if self.peek() == Some('(') {
                self.i += 1;
            }
            let mut pats = Vec::new();
            loop {
                self.skip_blanks();
                let w = self.word()?.ok_or_else(|| {
                    SyntaxError(format!("syntax error in `case` {}", self.context()))
                })?;
                pats.push(w);
                self.skip_blanks();
                match self.peek() {
                    Some('|') => self.i += 1,
                    Some(')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return err(format!("syntax error in `case` {}", self.context())),
                }
            }
            let body = self.list(&["esac"])?;
            arms.push((pats, body));
            self.skip_space();
            if self.starts_with(";;") {
                self.i += 2;
            } else if self.peek_reserved().as_deref() != Some("esac") {
                return err(format!("syntax error: `;;` expected {}", self.context()));
            }
        }
        Ok(Command::Case { word, arms })
    }

    fn if_cmd(&mut self) -> Result<Command, SyntaxError> {
        self.eat_reserved("if")?;
        let mut branches = Vec::new();
        let mut otherwise = None;
        loop {
            let cond = self.list(&["then"])?;
            self.eat_reserved("then")?;
            let body = self.list(&["elif", "else", "fi"])?;
            branches.push((cond, body));
            match self.peek_reserved().as_deref() {
                Some("elif") => self.eat_reserved("elif")?,
                Some("else") => {
                    self.eat_reserved("else")?;
                    otherwise = Some(self.list(&["fi"])?);
                    self.eat_reserved("fi")?;
                    break;
                }
                _ => {
                    self.eat_reserved("fi")?;
                    break;
                }
            }
        }
        Ok(Command::If {
            branches,
            otherwise,
        })
    }

    fn simple(&mut self) -> Result<Command, SyntaxError> {
        let mut assigns = Vec::new();
        let mut words = Vec::new();
        let mut redirs = Vec::new();
        loop {
            self.skip_blanks();
            if let Some(r) = self.redir()? {
                redirs.push(r);
                continue;
            }
            match self.peek() {
                None => break,
                Some(c) if is_op_char(c) => {
                    if c == '(' && !words.is_empty() {
                        return err("sim: shell functions are not supported");
                    }
                    break;
                }
                _ => {}
            }
            let start = self.i;
            let Some(w) = self.word()? else { break };
            if words.is_empty() {
                if let Some((name, value)) = self.assignment(start, &w) {
                    assigns.push((name, value));
                    continue;
                }
            }
            words.push(w);
        }
        if assigns.is_empty() && words.is_empty() && redirs.is_empty() {
            return err(format!(
                "syntax error: a command expected {}",
                self.context()
            ));
        }
        Ok(Command::Simple {
            assigns,
            words,
            redirs,
        })
    }

    /// `NAME=value` at the start of a command: re-parses the value part of the word.
    fn assignment(&self, start: usize, w: &Word) -> Option<(String, Word)> {
        let Some(Part::Lit(first)) = w.first() else {
            return None;
        };
        let (name, _) = first.split_once('=')?;
        if !is_name(name) {
            return None;
        }
        let eq = start + name.chars().count() + 1;
        let text: String = self.s[eq..self.i].iter().collect();
        let mut p = Parser::new(&text);
        let value = p.word().ok().flatten().unwrap_or_default();
        Some((name.to_string(), value))
    }

    /// A redirection at the cursor (`>x`, `2>x`, `2>&1`, `>>x`, `<x`), if any.
    fn redir(&mut self) -> Result<Option<Redir>, SyntaxError> {
        let save = self.i;
        let mut fd = None;
        let mut digits = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() {
                digits.push(c);
                self.i += 1;
            } else {
                break;
            }
        }
        if !digits.is_empty() {
            if matches!(self.peek(), Some('<' | '>')) {
                fd = digits.parse::<u32>().ok();
            } else {
                self.i = save;
                return Ok(None);
            }
        }
        let op = if self.starts_with(">>") {
            self.i += 2;
            RedirOp::Append
        } else if self.starts_with(">&") {
            self.i += 2;
            self.skip_blanks();
            let mut n = String::new();
            while let Some(c) = self.peek().filter(char::is_ascii_digit) {
                n.push(c);
                self.i += 1;
            }
            let target = n.parse::<u32>().map_err(|_| {
                SyntaxError("sim: only `N>&M` (a file descriptor) is supported".into())
            })?;
            return Ok(Some(Redir {
                fd: fd.unwrap_or(1),
                op: RedirOp::Dup(target),
                target: Vec::new(),
            }));
        } else if self.starts_with("<<") {
            return err("sim: here-documents are not supported");
        } else if self.starts_with(">|") {
            self.i += 2;
            RedirOp::Out
        } else if self.peek() == Some('>') {
            self.i += 1;
            RedirOp::Out
        } else if self.peek() == Some('<') {
            self.i += 1;
            if self.peek() == Some('&') {
                return err("sim: `<&` is not supported");
            }
            RedirOp::In
        } else {
            self.i = save;
            return Ok(None);
        };
        self.skip_blanks();
        let target = self.word()?.ok_or_else(|| {
            SyntaxError("syntax error: a file name expected after a redirection".into())
        })?;
        let default_fd = if op == RedirOp::In { 0 } else { 1 };
        Ok(Some(Redir {
            fd: fd.unwrap_or(default_fd),
            op,
            target,
        }))
    }

    /// One word at the cursor, or None if the cursor is at an operator or the end.
    fn word(&mut self) -> Result<Option<Word>, SyntaxError> {
        let mut parts: Word = Vec::new();
        let mut lit = String::new();
        let begin = self.i;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || is_op_char(c) {
                break;
            }
            match c {
                '\'' => {
                    flush(&mut parts, &mut lit);
                    self.i += 1;
                    let mut q = String::new();
                    loop {
                        match self.peek() {
                            None => return err("syntax error: unterminated '...'"),
                            Some('\'') => {
                                self.i += 1;
                                break;
                            }
                            Some(c) => {
                                q.push(c);
                                self.i += 1;
                            }
                        }
                    }
                    parts.push(Part::Quoted(q));
                }
                '"' => {
                    flush(&mut parts, &mut lit);
                    self.i += 1;
                    self.double_quoted(&mut parts)?;
                }
                '\\' => {
                    self.i += 1;
                    match self.peek() {
                        Some('\n') => self.i += 1,
                        Some(c) => {
                            flush(&mut parts, &mut lit);
                            parts.push(Part::Quoted(c.to_string()));
                            self.i += 1;
                        }
                        None => lit.push('\\'),
                    }
                }
                '$' => {
                    flush(&mut parts, &mut lit);
                    self.dollar(&mut parts, false)?;
                }
                '`' => {
                    return err("sim: backquote command substitution is not supported; use $(...)")
                }
                '~' if self.i == begin => {
                    self.i += 1;
                    let mut user = String::new();
                    while let Some(c) = self.peek() {
                        if c == '/'
                            || c.is_whitespace()
                            || is_op_char(c)
                            || !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
                        {
                            break;
                        }
                        user.push(c);
                        self.i += 1;
                    }
                    parts.push(Part::Tilde(user));
                }
                _ => {
                    lit.push(c);
                    self.i += 1;
                }
            }
        }
        flush(&mut parts, &mut lit);
        Ok((self.i > begin).then_some(parts))
    }

    fn double_quoted(&mut self, parts: &mut Word) -> Result<(), SyntaxError> {
        let mut q = String::new();
        loop {
            match self.peek() {
                None => return err("syntax error: unterminated \"...\""),
                Some('"') => {
                    self.i += 1;
                    break;
                }
                Some('\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(c @ ('$' | '`' | '"' | '\\')) => {
                            q.push(c);
                            self.i += 1;
                        }
                        Some('\n') => self.i += 1,
                        _ => q.push('\\'),
                    }
                }
                Some('$') => {
                    if !q.is_empty() {
                        parts.push(Part::Quoted(std::mem::take(&mut q)));
                    }
                    self.dollar(parts, true)?;
                }
                Some('`') => {
                    return err("sim: backquote command substitution is not supported; use $(...)")
                }
                Some(c) => {
                    q.push(c);
                    self.i += 1;
                }
            }
        }
        // An empty "" still makes a (quoted, empty) word.
        parts.push(Part::Quoted(q));
        Ok(())
    }

    /// At a `$`: a parameter, `${...}` or `$(...)`.
    fn dollar(&mut self, parts: &mut Word, quoted: bool) -> Result<(), SyntaxError> {
        self.i += 1;
        match self.peek() {
            Some('(') => {
                if self.peek_at(1) == Some('(') {
                    return err("sim: arithmetic expansion $((...)) is not supported");
                }
                self.i += 1;
                let list = self.list(&[])?;
                self.skip_space();
                if self.peek() != Some(')') {
                    return err(format!("syntax error: `)` expected {}", self.context()));
                }
                self.i += 1;
                parts.push(Part::Subst { list, quoted });
            }
            Some('{') => {
                self.i += 1;
                let mut name = String::new();
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric()
                        || c == '_'
                        || (name.is_empty() && "?$#@*".contains(c))
                    {
                        name.push(c);
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                let mut default = None;
                if self.starts_with(":-") || self.peek() == Some('-') {
                    let colon = self.peek() == Some(':');
                    self.i += if colon { 2 } else { 1 };
                    let mut w = Vec::new();
                    let mut lit = String::new();
                    loop {
                        match self.peek() {
                            None => return err("syntax error: unterminated ${...}"),
                            Some('}') => break,
                            Some('$') => {
                                flush(&mut w, &mut lit);
                                self.dollar(&mut w, quoted)?;
                            }
                            Some('"') => {
                                flush(&mut w, &mut lit);
                                self.i += 1;
                                self.double_quoted(&mut w)?;
                            }
                            Some(c) => {
                                lit.push(c);
                                self.i += 1;
                            }
                        }
                    }
                    flush(&mut w, &mut lit);
                    default = Some((colon, w));
                }
                if self.peek() != Some('}') || name.is_empty() {
                    return err("sim: only ${name}, ${name:-word} and ${name-word} are supported");
                }
                self.i += 1;
                parts.push(Part::Param {
                    name,
                    default,
                    quoted,
                });
            }
            Some(c) if "?$#@*!-".contains(c) || c.is_ascii_digit() => {
                self.i += 1;
                parts.push(Part::Param {
                    name: c.to_string(),
                    default: None,
                    quoted,
                });
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                let mut name = String::new();
                while let Some(c) = self.peek() {
                    if c == '_' || c.is_ascii_alphanumeric() {
                        name.push(c);
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                parts.push(Part::Param {
                    name,
                    default: None,
                    quoted,
                });
            }
            // A lone `$` is literal.
            _ => parts.push(if quoted {
                Part::Quoted("$".into())
            } else {
                Part::Lit("$".into())
            }),
        }
        Ok(())
    }
}

fn flush(parts: &mut Word, lit: &mut String) {
    if !lit.is_empty() {
        parts.push(Part::Lit(std::mem::take(lit)));
    }
}

/// The text of a word made only of literal parts.
fn literal(w: &Word) -> Option<String> {
    let mut s = String::new();
    for p in w {
        match p {
            Part::Lit(t) | Part::Quoted(t) => s.push_str(t),
            _ => return None,
        }
    }
    Some(s)
}

// ---------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------

enum Stop {
    Exit(i32),
    Killed,
}

type Flow = Result<i32, Stop>;

struct Shell<'a> {
    sys: &'a mut dyn System,
    vars: HashMap<String, String>,
    args: Vec<String>,
    errexit: bool,
    nounset: bool,
    status: i32,
    /// Depth of contexts where `set -e` does not apply (conditions, `!`, left of && ||).
    no_errexit: usize,
    /// Status of the last `$(...)` of the command being expanded (an assignment-only
    /// command ends with it).
    subst_status: Option<i32>,
}

/// Where a file descriptor of a command writes.
#[derive(Debug, Clone, PartialEq)]
enum Sink {
    Out,
    Err,
    Null,
    File(String, bool),
}

impl<'a> Shell<'a> {
    fn new(sys: &'a mut dyn System, args: Vec<String>) -> Self {
        Shell {
            sys,
            vars: HashMap::new(),
            args,
            errexit: false,
            nounset: false,
            status: 0,
            no_errexit: 0,
            subst_status: None,
        }
    }

    fn list(&mut self, list: &List, stdin: &[u8], out: &mut Output) -> Flow {
        let mut status = 0;
        for ao in list {
            status = self.and_or(ao, stdin, out)?;
        }
        Ok(status)
    }

    fn and_or(&mut self, ao: &AndOr, stdin: &[u8], out: &mut Output) -> Flow {
        let guarded = !ao.rest.is_empty();
        if guarded {
            self.no_errexit += 1;
        }
        let first = self.pipeline(&ao.first, stdin, out);
        if guarded {
            self.no_errexit -= 1;
        }
        let mut status = first?;
        for (k, (conn, p)) in ao.rest.iter().enumerate() {
            let run = match conn {
                Connector::And => status == 0,
                Connector::Or => status != 0,
            };
            if !run {
                continue;
            }
            let last = k + 1 == ao.rest.len();
            if !last {
                self.no_errexit += 1;
            }
            let r = self.pipeline(p, stdin, out);
            if !last {
                self.no_errexit -= 1;
            }
            status = r?;
        }
        self.status = status;
        Ok(status)
    }

    fn pipeline(&mut self, p: &Pipeline, stdin: &[u8], out: &mut Output) -> Flow {
        if p.bang {
            self.no_errexit += 1;
        }
        let mut input = stdin.to_vec();
        let mut status = 0;
        let n = p.cmds.len();
        let mut result = Ok(0);
        for (k, c) in p.cmds.iter().enumerate() {
            if k + 1 < n {
                // Left of a pipe: stdout feeds the next command; stderr passes through.
                let mut piped = Output::default();
                let r = self.command(c, &input, &mut piped);
                out.stderr.append(&mut piped.stderr);
                out.reads_stdin |= piped.reads_stdin;
                match r {
                    Ok(_) | Err(Stop::Exit(_)) => {}
                    Err(Stop::Killed) => {
                        result = Err(Stop::Killed);
                        break;
                    }
                }
                input = piped.stdout;
            } else {
                match self.command(c, &input, out) {
                    Ok(s) => status = s,
                    Err(Stop::Exit(s)) if n > 1 => status = s,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
        }
        if p.bang {
            self.no_errexit -= 1;
        }
        result?;
        let status = if p.bang {
            i32::from(status == 0)
        } else {
            status
        };
        self.status = status;
        if status != 0 && self.errexit && self.no_errexit == 0 && !p.bang {
            return Err(Stop::Exit(status));
        }
        Ok(status)
    }

    fn command(&mut self, c: &Command, stdin: &[u8], out: &mut Output) -> Flow {
        if self.sys.cancelled() {
            return Err(Stop::Killed);
        }
        match c {
            Command::Simple {
                assigns,
                words,
                redirs,
            } => self.simple(assigns, words, redirs, stdin, out),
            Command::Group(body, redirs) => {
                self.with_redirs(redirs, stdin, out, |sh, input, o| sh.list(body, input, o))
            }
            Command::Subshell(body, redirs) => {
                let saved = (self.vars.clone(), self.errexit, self.nounset);
                let r = self.with_redirs(redirs, stdin, out, |sh, input, o| {
                    match sh.list(body, input, o) {
                        Err(Stop::Exit(s)) => Ok(s),
                        other => other,
                    }
                });
                (self.vars, self.errexit, self.nounset) = saved;
                r
            }
            Command::For { var, items, body } => {
                let mut values = Vec::new();
                for w in items {
                    values.extend(self.expand_fields(w, out)?);
                }
                let mut status = 0;
                for v in values {
                    self.vars.insert(var.clone(), v);
                    status = self.list(body, stdin, out)?;
                }
                Ok(status)
            }
            Command::Case { word, arms } => {
                let subject = self.expand_one(word, out)?;
                for (pats, body) in arms {
                    for p in pats {
                        let pat = self.expand_pattern(p, out)?;
                        if glob_match(&pat, &subject.chars().collect::<Vec<_>>()) {
                            return self.list(body, stdin, out);
                        }
                    }
                }
                Ok(0)
            }
            Command::If {
                branches,
                otherwise,
            } => {
                for (cond, body) in branches {
                    self.no_errexit += 1;
                    let r = self.list(cond, stdin, out);
                    self.no_errexit -= 1;
                    if r? == 0 {
                        return self.list(body, stdin, out);
                    }
                }
                match otherwise {
                    Some(body) => self.list(body, stdin, out),
                    None => Ok(0),
                }
            }
        }
    }

    /// Runs `f` with the redirections applied to its stdin, stdout and stderr.
    fn with_redirs<F>(&mut self, redirs: &[Redir], stdin: &[u8], out: &mut Output, f: F) -> Flow
    where
        F: FnOnce(&mut Self, &[u8], &mut Output) -> Flow,
    {
        if redirs.is_empty() {
            return f(self, stdin, out);
        }
        let mut sinks = [Sink::Out, Sink::Err];
        let mut input: Option<Vec<u8>> = None;
        for r in redirs {
            let fd = r.fd as usize;
            match &r.op {
                RedirOp::Dup(m) => {
                    let m = *m as usize;
                    if !(1..=2).contains(&fd) || !(1..=2).contains(&m) {
                        return Ok(self.fail(
                            out,
                            1,
                            &format!("sim: only 1 and 2 can be duplicated ({fd}>&{m})"),
                        ));
                    }
                    sinks[fd - 1] = sinks[m - 1].clone();
                }
                RedirOp::In => {
                    let path = self.expand_one(&r.target, out)?;
                    match self.sys.read_file(&path) {
                        Ok(s) => input = Some(s.into_bytes()),
                        Err(e) => {
                            return Ok(self.fail(out, 1, &format!("sh: cannot open {path}: {e}")))
                        }
                    }
                }
                RedirOp::Out | RedirOp::Append => {
                    if !(1..=2).contains(&fd) {
                        return Ok(self.fail(
                            out,
                            1,
                            &format!("sim: redirection of fd {fd} is not supported"),
                        ));
                    }
                    let path = self.expand_one(&r.target, out)?;
                    sinks[fd - 1] = if path == "/dev/null" {
                        Sink::Null
                    } else if path == "/dev/stderr" {
                        Sink::Err
                    } else if path == "/dev/stdout" {
                        Sink::Out
                    } else {
                        // Created (or truncated) now, as the shell opens it.
                        let append = r.op == RedirOp::Append;
                        if let Err(e) = self.sys.write_file(&path, b"", append) {
                            return Ok(self.fail(
                                out,
                                2,
                                &format!("sh: cannot create {path}: {e}"),
                            ));
                        }
                        Sink::File(path, true)
                    };
                }
            }
        }
        let mut inner = Output::default();
        let input = input.unwrap_or_else(|| stdin.to_vec());
        let r = f(self, &input, &mut inner);
        out.reads_stdin |= inner.reads_stdin;
        let mut status = match &r {
            Ok(s) | Err(Stop::Exit(s)) => *s,
            Err(Stop::Killed) => 137,
        };
        for (k, data) in [inner.stdout, inner.stderr].into_iter().enumerate() {
            match &sinks[k] {
                Sink::Out => out.stdout.extend_from_slice(&data),
                Sink::Err => out.stderr.extend_from_slice(&data),
                Sink::Null => {}
                Sink::File(path, append) => {
                    if let Err(e) = self.sys.write_file(path, &data, *append) {
                        out.stderr.extend_from_slice(
                            format!("sh: write error: {path}: {e}\n").as_bytes(),
                        );
                        status = 1;
                    }
                }
            }
        }
        match r {
            Ok(_) => Ok(status),
            Err(Stop::Exit(_)) => Err(Stop::Exit(status)),
            Err(Stop::Killed) => Err(Stop::Killed),
        }
    }

    fn fail(&mut self, out: &mut Output, status: i32, msg: &str) -> i32 {
        out.stderr.extend_from_slice(msg.as_bytes());
        out.stderr.push(b'\n');
        status
    }

    fn simple(
        &mut self,
        assigns: &[(String, Word)],
        words: &[Word],
        redirs: &[Redir],
        stdin: &[u8],
        out: &mut Output,
    ) -> Flow {
        self.subst_status = None;
        let mut argv = Vec::new();
        for w in words {
            argv.extend(self.expand_fields(w, out)?);
        }
        let mut values = Vec::new();
        for (name, w) in assigns {
            values.push((name.clone(), self.expand_one(w, out)?));
        }
        let subst_status = self.subst_status.unwrap_or(0);
        if argv.is_empty() {
            for (n, v) in values {
                self.vars.insert(n, v);
            }
            return self.with_redirs(redirs, stdin, out, move |_, _, _| Ok(subst_status));
        }
        // Prefix assignments only matter to builtins here (there is no environment).
        for (n, v) in values {
            self.vars.insert(n, v);
        }
        self.with_redirs(redirs, stdin, out, |sh, input, o| {
            sh.run_argv(&argv, input, o)
        })
    }

    /// Runs one expanded command line: a builtin, a re-entry (`sh -c`, `sudo`), or the
    /// node's utility.
    fn run_argv(&mut self, argv: &[String], stdin: &[u8], out: &mut Output) -> Flow {
        let Some(name) = argv.first() else {
            return Ok(0);
        };
        let args = &argv[1..];
        match name.as_str() {
            ":" | "true" | "cd" => Ok(0),
            "false" => Ok(1),
            "exit" => {
                let s = match args.first() {
                    Some(a) => a.parse::<i32>().unwrap_or(2),
                    None => self.status,
                };
                Err(Stop::Exit(s & 0xff))
            }
            "set" => self.set(args, out),
            "export" | "readonly" => {
                for a in args {
                    if let Some((n, v)) = a.split_once('=') {
                        self.vars.insert(n.to_string(), v.to_string());
                    }
                }
                Ok(0)
            }
            "echo" => {
                let (newline, rest) = match args.first().map(String::as_str) {
                    Some("-n") => (false, &args[1..]),
                    _ => (true, args),
                };
                out.stdout.extend_from_slice(rest.join(" ").as_bytes());
                if newline {
                    out.stdout.push(b'\n');
                }
                Ok(0)
            }
            "printf" => Ok(printf(args, out)),
            "test" => Ok(test(args, out)),
            "[" => match args.split_last() {
                Some((last, inner)) if last == "]" => Ok(test(inner, out)),
                _ => Ok(self.fail(out, 2, "sh: [: missing ]")),
            },
            "sh" | "bash" | "dash" | "/bin/sh" | "/bin/bash" | "/usr/bin/sh" | "/usr/bin/bash" => {
                self.reenter(name, args, stdin, out)
            }
            "sudo" | "/usr/bin/sudo" => {
                let mut k = 0;
                while let Some(a) = args.get(k) {
                    match a.as_str() {
                        "--" => {
                            k += 1;
                            break;
                        }
                        "-n" | "-H" | "-E" | "-S" => k += 1,
                        "-u" => {
                            if args.get(k + 1).map(String::as_str) != Some("root") {
                                return Ok(self.fail(
                                    out,
                                    1,
                                    "sim: sudo -u other than root is not supported",
                                ));
                            }
                            k += 2;
                        }
                        s if s.starts_with('-') => {
                            return Ok(self.fail(
                                out,
                                1,
                                &format!("sim: sudo option {s} is not supported"),
                            ))
                        }
                        _ => break,
                    }
                }
                self.run_argv(&args[k..], stdin, out)
            }
            "env" | "/usr/bin/env" if args.first().is_some_and(|a| !a.contains('=')) => {
                self.run_argv(args, stdin, out)
            }
            _ => match self.sys.exec(argv, stdin) {
                Some(o) => {
                    out.stdout.extend_from_slice(&o.stdout);
                    out.stderr.extend_from_slice(&o.stderr);
                    out.reads_stdin |= o.reads_stdin;
                    if self.sys.cancelled() {
                        return Err(Stop::Killed);
                    }
                    Ok(o.status)
                }
                None => {
                    let shown = argv.join(" ");
                    Ok(self.fail(out, 127, &format!("sim: command not supported: {shown}")))
                }
            },
        }
    }

    /// `sh -c 'script' [name args...]` in a fresh shell (variables not shared).
    fn reenter(&mut self, name: &str, args: &[String], stdin: &[u8], out: &mut Output) -> Flow {
        let mut k = 0;
        let mut errexit = false;
        let mut nounset = false;
        while let Some(a) = args.get(k) {
            match a.as_str() {
                "-c" => break,
                "-e" => errexit = true,
                "-u" => nounset = true,
                "-eu" | "-ue" => (errexit, nounset) = (true, true),
                "-l" | "--login" | "--noprofile" | "--norc" => {}
                _ => {
                    return Ok(self.fail(
                        out,
                        127,
                        &format!(
                            "sim: command not supported: {name} {} (only `{name} -c SCRIPT`)",
                            args.join(" ")
                        ),
                    ))
                }
            }
            k += 1;
        }
        let Some(script) = args.get(k + 1) else {
            return Ok(self.fail(out, 2, &format!("{name}: -c: option requires an argument")));
        };
        let list = match Parser::new(script).parse_program() {
            Ok(l) => l,
            Err(e) => return Ok(self.fail(out, 2, &format!("{name}: {e}"))),
        };
        let mut positional = vec![args.get(k + 2).cloned().unwrap_or_else(|| name.to_string())];
        positional.extend(args.iter().skip(k + 3).cloned());
        let mut inner = Shell::new(&mut *self.sys, positional);
        inner.errexit = errexit;
        inner.nounset = nounset;
        match inner.list(&list, stdin, out) {
            Ok(s) | Err(Stop::Exit(s)) => Ok(s),
            Err(Stop::Killed) => Err(Stop::Killed),
        }
    }

    fn set(&mut self, args: &[String], out: &mut Output) -> Flow {
        let mut k = 0;
        while let Some(a) = args.get(k) {
            let (on, flags) = if let Some(f) = a.strip_prefix('-') {
                (true, f)
            } else if let Some(f) = a.strip_prefix('+') {
                (false, f)
            } else {
                return Ok(self.fail(out, 2, "sim: set: positional parameters are not supported"));
            };
            if flags == "o" || flags.is_empty() {
                let opt = args.get(k + 1).map(String::as_str).unwrap_or_default();
                match opt {
                    "errexit" => self.errexit = on,
                    "nounset" => self.nounset = on,
                    "pipefail" => {}
                    _ => {
                        return Ok(self.fail(
                            out,
                            2,
                            &format!("sim: set -o {opt} is not supported"),
                        ))
                    }
                }
                k += 2;
                continue;
            }
            for f in flags.chars() {
                match f {
                    'e' => self.errexit = on,
                    'u' => self.nounset = on,
                    // Tracing and the like change nothing the simulation shows.
                    'x' | 'v' | 'f' | 'C' => {}
                    _ => return Ok(self.fail(out, 2, &format!("sim: set -{f} is not supported"))),
                }
            }
            k += 1;
        }
        Ok(0)
    }

    // ---- expansion ----

    fn param(&self, name: &str) -> Option<String> {
        let v = match name {
            "?" => Some(self.status.to_string()),
            "$" => Some("4242".to_string()),
            "#" => Some(self.args.len().saturating_sub(1).to_string()),
            "@" | "*" => Some(
                self.args
                    .iter()
                    .skip(1)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            "-" => Some(String::new()),
            "!" => None,
            n if n.chars().all(|c| c.is_ascii_digit()) => n
                .parse::<usize>()
                .ok()
                .and_then(|k| self.args.get(k).cloned()),
            n => self.vars.get(n).cloned(),
        };
        v
    }

    fn unset_error(name: &str, out: &mut Output) -> Stop {
        out.stderr
            .extend_from_slice(format!("sh: {name}: parameter not set\n").as_bytes());
        Stop::Exit(2)
    }

    /// Expands one part to (text, quoted).
    fn expand_part(&mut self, p: &Part, out: &mut Output) -> Result<Vec<(String, bool)>, Stop> {
        Ok(match p {
            Part::Lit(t) => vec![(t.clone(), true)],
            Part::Quoted(t) => vec![(t.clone(), true)],
            Part::Tilde(user) => {
                let home = if user.is_empty() {
                    self.sys.home()
                } else if user == "root" {
                    "/root".into()
                } else {
                    format!("/home/{user}")
                };
                vec![(home, true)]
            }
            Part::Param {
                name,
                default,
                quoted,
            } => {
                let v = self.param(name);
                let use_default = match (&v, default) {
                    (None, Some(_)) => true,
                    (Some(s), Some((true, _))) => s.is_empty(),
                    _ => false,
                };
                if use_default {
                    let mut r = Vec::new();
                    if let Some((_, w)) = default {
                        for p in w {
                            r.extend(self.expand_part(p, out)?);
                        }
                    }
                    r
                } else {
                    match v {
                        Some(s) => vec![(s, *quoted)],
                        None if self.nounset && name != "@" && name != "*" => {
                            return Err(Self::unset_error(name, out))
                        }
                        None => vec![(String::new(), *quoted)],
                    }
                }
            }
            Part::Subst { list, quoted } => {
                // A subshell: its assignments and `set` do not reach this shell.
                let saved = (self.vars.clone(), self.errexit, self.nounset);
                let mut inner = Output::default();
                let r = self.list(list, &[], &mut inner);
                (self.vars, self.errexit, self.nounset) = saved;
                out.stderr.append(&mut inner.stderr);
                let status = match r {
                    Ok(s) | Err(Stop::Exit(s)) => s,
                    Err(Stop::Killed) => return Err(Stop::Killed),
                };
                self.status = status;
                self.subst_status = Some(status);
                let mut text = String::from_utf8_lossy(&inner.stdout).to_string();
                while text.ends_with('\n') {
                    text.pop();
                }
                vec![(text, *quoted)]
            }
        })
    }

    /// A word to fields: unquoted expansion results split at blanks.
    fn expand_fields(&mut self, w: &Word, out: &mut Output) -> Result<Vec<String>, Stop> {
        let mut fields = Vec::new();
        let mut cur: Option<String> = None;
        for p in w {
            let splittable = matches!(
                p,
                Part::Param { quoted: false, .. } | Part::Subst { quoted: false, .. }
            );
            for (text, quoted) in self.expand_part(p, out)? {
                if splittable && !quoted {
                    for c in text.chars() {
                        if c == ' ' || c == '\t' || c == '\n' {
                            if let Some(f) = cur.take() {
                                fields.push(f);
                            }
                        } else {
                            cur.get_or_insert_with(String::new).push(c);
                        }
                    }
                } else {
                    cur.get_or_insert_with(String::new).push_str(&text);
                }
            }
        }
        fields.extend(cur);
        Ok(fields)
    }

    /// A word to one string (assignments, redirection targets, `case` subjects).
    fn expand_one(&mut self, w: &Word, out: &mut Output) -> Result<String, Stop> {
        let mut s = String::new();
        for p in w {
            for (t, _) in self.expand_part(p, out)? {
                s.push_str(&t);
            }
        }
        Ok(s)
    }

    /// A `case` pattern: (char, is it a literal) pairs.
    fn expand_pattern(&mut self, w: &Word, out: &mut Output) -> Result<Vec<(char, bool)>, Stop> {
        let mut pat = Vec::new();
        for p in w {
            let special = matches!(p, Part::Lit(_));
            for (t, _) in self.expand_part(p, out)? {
                pat.extend(t.chars().map(|c| (c, !special)));
            }
        }
        Ok(pat)
    }
}

/// Glob matching for `case`: `*`, `?` and `[...]` (with `!`/`^` negation and ranges),
/// unless the pattern character is literal (quoted).
fn glob_match(pat: &[(char, bool)], s: &[char]) -> bool {
    let Some(&(c, lit)) = pat.first() else {
        return s.is_empty();
    };
    if !lit && c == '*' {
        return (0..=s.len()).any(|k| glob_match(&pat[1..], &s[k..]));
    }
    let Some(&sc) = s.first() else {
        return false;
    };
    if !lit && c == '?' {
        return glob_match(&pat[1..], &s[1..]);
    }
    if !lit && c == '[' {
        if let Some(end) = pat
            .iter()
            .skip(2)
            .position(|&(x, l)| x == ']' && !l)
            .map(|p| p + 2)
        {
            let mut set = &pat[1..end];
            let negate = matches!(set.first(), Some(('!' | '^', false)));
            if negate {
                set = &set[1..];
            }
            let mut hit = false;
            let mut k = 0;
            while k < set.len() {
                if k + 2 < set.len() && set[k + 1].0 == '-' {
                    hit |= set[k].0 <= sc && sc <= set[k + 2].0;
                    k += 3;
                } else {
                    hit |= set[k].0 == sc;
                    k += 1;
                }
            }
            return hit != negate && glob_match(&pat[end + 1..], &s[1..]);
        }
    }
    c == sc && glob_match(&pat[1..], &s[1..])
}

/// `test` / `[`: `! E`, `-n S`, `-z S`, `S`, `S = S`, `S != S`, integer comparisons.
fn test(args: &[String], out: &mut Output) -> i32 {
    match eval_test(args) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            out.stderr
                .extend_from_slice(format!("sh: test: {e}\n").as_bytes());
            2
        }
    }
}

fn eval_test(args: &[String]) -> Result<bool, String> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        [] => Ok(false),
        ["!", rest @ ..] => {
            eval_test(&rest.iter().map(|s| s.to_string()).collect::<Vec<_>>()).map(|b| !b)
        }
        [s] => Ok(!s.is_empty()),
        ["-n", s] => Ok(!s.is_empty()),
        ["-z", s] => Ok(s.is_empty()),
        [x, "=" | "==", y] => Ok(x == y),
        [x, "!=", y] => Ok(x != y),
        [x, op @ ("-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"), y] => {
            let n = |s: &str| {
                s.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{s}: integer expression expected"))
            };
            let (x, y) = (n(x)?, n(y)?);
            Ok(match *op {
                "-eq" => x == y,
                "-ne" => x != y,
                "-lt" => x < y,
                "-le" => x <= y,
                "-gt" => x > y,
                _ => x >= y,
            })
        }
        _ => Err(format!("sim: unsupported test expression: {}", a.join(" "))),
    }
}

/// `printf FORMAT [ARG...]`: `%s`, `%d`, `%%`, `\n`, `\t`, `\\`; the format is reused
/// while arguments remain.
fn printf(args: &[String], out: &mut Output) -> i32 {
    let Some(fmt) = args.first() else {
        out.stderr
            .extend_from_slice(b"printf: usage: printf format [arguments]\n");
        return 2;
    };
    let mut rest = args[1..].iter();
    loop {
        let mut used = false;
        let mut cs = fmt.chars().peekable();
        while let Some(c) = cs.next() {
            match c {
                '\\' => match cs.next() {
                    Some('n') => out.stdout.push(b'\n'),
                    Some('t') => out.stdout.push(b'\t'),
                    Some('\\') => out.stdout.push(b'\\'),
                    Some(o) => {
                        out.stdout.push(b'\\');
                        out.stdout.extend_from_slice(o.to_string().as_bytes());
                    }
                    None => out.stdout.push(b'\\'),
                },
                '%' => match cs.next() {
                    Some('%') => out.stdout.push(b'%'),
                    Some('s') | Some('d') => {
                        used = true;
                        let v = rest.next().map(String::as_str).unwrap_or_default();
                        out.stdout.extend_from_slice(v.as_bytes());
                    }
                    Some(o) => {
                        out.stderr.extend_from_slice(
                            format!("sim: printf %{o} is not supported\n").as_bytes(),
                        );
                        return 1;
                    }
                    None => out.stdout.push(b'%'),
                },
                c => out.stdout.extend_from_slice(c.to_string().as_bytes()),
            }
        }
        if !used || rest.len() == 0 {
            return 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A System with a few files and an `argv` echo utility, recording what ran.
    #[derive(Default)]
    struct Fake {
        files: HashMap<String, String>,
        ran: Vec<Vec<String>>,
    }

    impl System for Fake {
        fn exec(&mut self, argv: &[String], stdin: &[u8]) -> Option<Output> {
            self.ran.push(argv.to_vec());
            match argv[0].as_str() {
                "argv" => Some(Output::ok(
                    argv[1..]
                        .iter()
                        .map(|a| format!("<{a}>"))
                        .collect::<String>()
                        + "\n",
                )),
                "cat" => match argv.get(1) {
                    Some(p) => Some(match self.files.get(p) {
                        Some(t) => Output::ok(t.clone()),
                        None => Output::fail(1, format!("cat: {p}: No such file or directory\n")),
                    }),
                    None => Some(Output::ok(stdin.to_vec())),
                },
                "fail" => Some(Output::fail(3, "failed\n")),
                _ => None,
            }
        }
        fn read_file(&mut self, path: &str) -> Result<String, String> {
            self.files
                .get(path)
                .cloned()
                .ok_or_else(|| "No such file".into())
        }
        fn write_file(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), String> {
            if !path.starts_with("/sys/") {
                return Err("Read-only file system".into());
            }
            let e = self.files.entry(path.to_string()).or_default();
            if !append {
                e.clear();
            }
            e.push_str(&String::from_utf8_lossy(data));
            Ok(())
        }
        fn home(&self) -> String {
            "/root".into()
        }
        fn cancelled(&self) -> bool {
            false
        }
    }

    fn run(fake: &mut Fake, script: &str) -> (String, String, i32) {
        let mut out = Output::default();
        run_script(fake, script, &mut out);
        (
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
            out.status,
        )
    }

    fn sh(script: &str) -> (String, String, i32) {
        run(&mut Fake::default(), script)
    }

    #[test]
    fn words_quotes_and_splitting() {
        assert_eq!(sh(r#"argv a 'b c' "d $x" e\ f"#).0, "<a><b c><d ><e f>\n");
        assert_eq!(
            sh("x='1  2'; argv $x \"$x\" a${x}b").0,
            "<1><2><1  2><a1><2b>\n"
        );
        assert_eq!(sh("argv \"\" ''").0, "<><>\n");
        assert_eq!(sh("e=; argv $e").0, "\n");
        assert_eq!(sh("argv ~ ~/x ~root").0, "</root></root/x></root>\n");
        assert_eq!(sh("argv ${u:-dflt} ${u-d2}").0, "<dflt><d2>\n");
    }

    #[test]
    fn and_or_lists_and_status() {
        assert_eq!(sh("true && echo a || echo b").0, "a\n");
        assert_eq!(sh("false && echo a || echo b").0, "b\n");
        assert_eq!(sh("fail; echo $?").0, "3\n");
        assert_eq!(sh("! true; echo $?").0, "1\n");
        assert_eq!(sh("exit 4; echo no"), (String::new(), String::new(), 4));
        assert_eq!(sh("fail").2, 3);
    }

    #[test]
    fn command_substitution_and_groups() {
        assert_eq!(
            sh("v=$(echo hi; echo there); echo \"[$v]\"").0,
            "[hi\nthere]\n"
        );
        assert_eq!(sh("v=$(fail); echo $?").0, "3\n");
        assert_eq!(sh("v=$(w=inner; echo $w); echo \"$v/$w\"").0, "inner/\n");
        let (o, _, s) = sh("false || { echo no; exit 1; }; echo after");
        assert_eq!((o.as_str(), s), ("no\n", 1));
        assert_eq!(sh("(exit 5); echo $?").0, "5\n");
        assert_eq!(
            sh("echo \"n: $(echo \"in $(echo deep)\")\"").0,
            "n: in deep\n"
        );
    }

    #[test]
    fn set_e_and_u() {
        let (o, _, s) = sh("set -eu; echo one; fail; echo two");
        assert_eq!((o.as_str(), s), ("one\n", 3));
        // Not in a condition, not left of && or ||.
        assert_eq!(sh("set -e; fail || true; fail && x; echo ok").0, "ok\n");
        assert_eq!(sh("set -e; if fail; then :; fi; ! fail; echo ok").0, "ok\n");
        let (_, e, s) = sh("set -u; echo $nope; echo reached");
        assert_eq!(s, 2);
        assert!(e.contains("nope: parameter not set"), "{e}");
        assert_eq!(sh("set -e; x=$(fail); echo no").2, 3);
    }

    #[test]
    fn for_case_if() {
        assert_eq!(sh("for u in a b; do echo $u; done").0, "a\nb\n");
        let c = "case \"$d\" in nvme*) echo nvme;; sd?|vd[a-c]) echo disk;; *) echo other;; esac";
        assert_eq!(sh(&format!("d=nvme0n1; {c}")).0, "nvme\n");
        assert_eq!(sh(&format!("d=sda; {c}")).0, "disk\n");
        assert_eq!(sh(&format!("d=vdb; {c}")).0, "disk\n");
        assert_eq!(sh(&format!("d=vdz; {c}")).0, "other\n");
        assert_eq!(sh("case x in 'x*') echo q;; x*) echo g;; esac").0, "g\n");
        assert_eq!(
            sh("if false; then echo a; elif true; then echo b; else echo c; fi").0,
            "b\n"
        );
    }

    #[test]
    fn redirections() {
        let mut f = Fake::default();
        assert_eq!(run(&mut f, "fail 2>/dev/null").1, "");
        assert_eq!(run(&mut f, "fail 2>&1").0, "failed\n");
        assert_eq!(run(&mut f, "echo x >&2").1, "x\n");
        assert_eq!(run(&mut f, "fail 2>&1 >/dev/null").0, "failed\n");
        assert_eq!(
            run(&mut f, "fail >/dev/null 2>&1"),
            (String::new(), String::new(), 3)
        );
        run(&mut f, "echo bfq > /sys/block/sda/queue/scheduler");
        assert_eq!(f.files["/sys/block/sda/queue/scheduler"], "bfq\n");
        run(&mut f, "echo more >> /sys/block/sda/queue/scheduler");
        assert_eq!(f.files["/sys/block/sda/queue/scheduler"], "bfq\nmore\n");
        let (_, e, s) = run(&mut f, "echo x > /etc/passwd");
        assert_eq!(s, 2);
        assert!(e.contains("cannot create /etc/passwd: Read-only"), "{e}");
        f.files.insert("/in".into(), "data\n".into());
        assert_eq!(run(&mut f, "cat < /in").0, "data\n");
        assert_eq!(run(&mut f, "echo piped | cat").0, "piped\n");
    }

    #[test]
    fn reentry_sudo_and_unsupported() {
        assert_eq!(sh("sh -c 'echo $0 $1' me arg").0, "me arg\n");
        assert_eq!(
            sh("sudo -n -- sh -c 'echo '\\''hi'\\'' && argv x'").0,
            "hi\n<x>\n"
        );
        let (_, e, s) = sh("rm -rf /");
        assert_eq!(s, 127);
        assert_eq!(e, "sim: command not supported: rm -rf /\n");
        let (_, e, s) = sh("echo `id`");
        assert_eq!(s, 2);
        assert!(e.contains("backquote"), "{e}");
        assert_eq!(sh("sleep 1 &").2, 2);
        assert_eq!(sh("echo $((1+2))").2, 2);
        assert_eq!(sh("if true; then echo").2, 2);
    }

    #[test]
    fn test_builtin() {
        assert_eq!(sh("[ -n \"\" ]").2, 1);
        assert_eq!(sh("[ -z \"\" ]").2, 0);
        assert_eq!(sh("[ a != b ] && [ 3 -gt 2 ] && test x = x").2, 0);
        assert_eq!(sh("[ 3 -gt x ]").2, 2);
        assert_eq!(sh("[ a = a").2, 2);
        assert_eq!(sh("printf '%s=%s\\n' a 1 b 2").0, "a=1\nb=2\n");
    }
}
