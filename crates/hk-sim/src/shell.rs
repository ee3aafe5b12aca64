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
//!
//! One file (over 800 lines): the parser and the evaluator share one AST and its error
//! wording, and a construct is read with its evaluation.

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
    /// The command (or one of its options) is not modelled: the whole script stops with
    /// exit 2 and [`not_simulated`]'s message, whatever the construct around it.
    pub unsimulated: bool,
}

/// The one message every unmodelled construct, command or option fails with.
pub fn not_simulated(what: &str) -> String {
    format!("hk-console simulation: `{what}` is not simulated")
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

    /// Exit 2: `what` is not modelled by the simulation (never a guess that passes).
    pub fn unsimulated(what: &str) -> Self {
        Output {
            stderr: format!("{}\n", not_simulated(what)).into_bytes(),
            status: 2,
            unsimulated: true,
            ..Output::default()
        }
    }
}

/// What `stat` tells the shell about a path (for `test -e/-f/-d/...` and globbing).
pub use super::fs::{FileKind, FsError, Stat};

/// What the commands run on: the node's utilities and files.
pub trait System {
    /// Runs a command that is not a shell builtin; None when the simulation has no such
    /// command (the shell answers exit 127).
    fn exec(&mut self, argv: &[String], stdin: &[u8]) -> Option<Output>;
    /// Reads a file (for `<` redirections).
    fn read_file(&mut self, path: &str) -> Result<String, FsError>;
    /// Writes (or appends to) a file, for `>`/`>>` redirections.
    fn write_file(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), FsError>;
    /// The login user's home, for `~`.
    fn home(&self) -> String;
    /// True once the command was signalled or its channel closed: the shell stops.
    fn cancelled(&self) -> bool;
    /// A path's metadata (following links), None when it does not exist.
    fn stat(&mut self, _path: &str) -> Option<Stat> {
        None
    }
    /// True for a path the simulation does not model (most of /proc and /sys): a test
    /// of it is not simulated rather than false.
    fn unmodelled(&mut self, _path: &str) -> bool {
        false
    }
    /// The names in a directory (for pathname expansion).
    fn list_dir(&mut self, _path: &str) -> Result<Vec<String>, FsError> {
        Err(FsError::NotFound)
    }
    /// The working directory.
    fn cwd(&self) -> String {
        "/".into()
    }
    /// Changes the working directory (`cd`); Err is the reason.
    fn chdir(&mut self, _path: &str) -> Result<(), FsError> {
        Err(FsError::NotFound)
    }
    /// The login session's environment (HOME, USER, LOGNAME, SHELL, PATH, PWD).
    fn login_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Runs what follows as root (`sudo`) when true; returns whether it was root before.
    fn set_root(&mut self, _root: bool) -> bool {
        false
    }
    /// Where `command -v NAME` finds a utility, None when the simulation has none.
    fn which(&self, _name: &str) -> Option<String> {
        None
    }
    /// The uid commands run as (root 0): `test -r/-w/-x` check the mode bits against it.
    fn uid(&self) -> u32 {
        0
    }
}

/// How a script ended: normally with a status, or killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exit(i32),
    Killed,
}

/// Parses and runs `script` the way `sh -c script` would in a login session. Output goes
/// to `out`.
pub fn run_script(sys: &mut dyn System, script: &str, out: &mut Output) -> Ending {
    let mut st = ShellState::login(sys);
    run_in(sys, &mut st, script, &[], out)
}

/// True when `script` stops in the middle of a construct (an open quote, `if` without
/// `fi`, a trailing `&&`): an interactive shell asks for the next line (`> `).
pub fn incomplete(script: &str) -> bool {
    match Parser::new(script).parse_program() {
        Ok(_) => false,
        Err(e) => e.0.contains("at end of input") || e.0.contains("unterminated"),
    }
}

/// Runs `script` in a shell whose variables and options live in `st` (an interactive
/// session's lines share one). An unmodelled construct ends it with exit 2 and its message
/// on stderr, whatever redirection or condition it stood in.
pub fn run_in(
    sys: &mut dyn System,
    st: &mut ShellState,
    script: &str,
    stdin: &[u8],
    out: &mut Output,
) -> Ending {
    let list = match Parser::new(script).parse_program() {
        Ok(l) => l,
        Err(e) => {
            let msg = if e.0.starts_with("hk-console simulation:") {
                format!("{e}\n")
            } else {
                format!("sh: {e}\n")
            };
            out.stderr.extend_from_slice(msg.as_bytes());
            out.status = 2;
            st.status = 2;
            return Ending::Exit(2);
        }
    };
    let mut sh = Shell::new(sys, std::mem::take(st));
    let r = sh.list(&list, stdin, out);
    *st = sh.st;
    let ending = match r {
        Ok(s) => Ending::Exit(s),
        Err(Stop::Exit(s)) => {
            st.exited = true;
            Ending::Exit(s)
        }
        Err(Stop::Killed) => Ending::Killed,
        Err(Stop::Unsimulated(msg)) => {
            out.stderr.extend_from_slice(msg.as_bytes());
            out.stderr.push(b'\n');
            out.unsimulated = true;
            Ending::Exit(2)
        }
    };
    if let Ending::Exit(s) = ending {
        out.status = s;
        st.status = s;
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

/// A construct the simulation does not model: the parse fails with its message.
fn unsim_err<T>(what: &str) -> Result<T, SyntaxError> {
    Err(SyntaxError(not_simulated(what)))
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

    /// `while`, `until`, `function`, `select` at the cursor: keywords of constructs the
    /// simulation does not model.
    fn peek_unmodelled_keyword(&self) -> Option<&'static str> {
        ["while", "until", "function", "select"]
            .into_iter()
            .find(|k| {
                self.starts_with(k)
                    && self
                        .peek_at(k.len())
                        .is_none_or(|c| c.is_whitespace() || is_op_char(c))
            })
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
                Some('&') => return unsim_err("background jobs (`&`)"),
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
                return unsim_err("arithmetic commands ((...))");
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
            None => {
                if let Some(w) = self.peek_unmodelled_keyword() {
                    return unsim_err(&format!("{w} loops and definitions"));
                }
                self.simple()
            }
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
            return unsim_err("for without in");
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
                        return unsim_err("shell functions");
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
            let target = n
                .parse::<u32>()
                .map_err(|_| SyntaxError(not_simulated(">&WORD (only N>&M)")))?;
            return Ok(Some(Redir {
                fd: fd.unwrap_or(1),
                op: RedirOp::Dup(target),
                target: Vec::new(),
            }));
        } else if self.starts_with("<<") {
            return unsim_err("here-documents (<<)");
        } else if self.starts_with(">|") {
            self.i += 2;
            RedirOp::Out
        } else if self.peek() == Some('>') {
            self.i += 1;
            RedirOp::Out
        } else if self.peek() == Some('<') {
            self.i += 1;
            if self.peek() == Some('&') {
                return unsim_err("<&");
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
                '`' => return unsim_err("backquote command substitution (use $(...))"),
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
                Some('`') => return unsim_err("backquote command substitution (use $(...))"),
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
                    return unsim_err("arithmetic expansion $((...))");
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
                    return unsim_err(
                        "parameter expansion other than ${name}, ${name:-word}, ${name-word}",
                    );
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
    /// An unmodelled construct: the message; the whole script ends with exit 2.
    Unsimulated(String),
}

type Flow = Result<i32, Stop>;

fn unsim(what: &str) -> Stop {
    Stop::Unsimulated(not_simulated(what))
}

/// What a shell keeps between commands: variables (and which are exported), positional
/// parameters, options and `$?`. An interactive session keeps one across its lines.
#[derive(Debug, Clone, Default)]
pub struct ShellState {
    vars: HashMap<String, String>,
    exported: std::collections::BTreeSet<String>,
    args: Vec<String>,
    errexit: bool,
    nounset: bool,
    pipefail: bool,
    status: i32,
    /// `exit` ran: an interactive session ends.
    pub exited: bool,
}

impl ShellState {
    /// A login shell's: the session's environment exported, `$0` = `-sh`.
    pub fn login(sys: &dyn System) -> Self {
        let mut st = ShellState {
            args: vec!["sh".into()],
            ..ShellState::default()
        };
        for (k, v) in sys.login_env() {
            st.exported.insert(k.clone());
            st.vars.insert(k, v);
        }
        st
    }

    /// `$?`.
    pub fn status(&self) -> i32 {
        self.status
    }

    /// A variable's value.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }
}

struct Shell<'a> {
    sys: &'a mut dyn System,
    st: ShellState,
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
    fn new(sys: &'a mut dyn System, st: ShellState) -> Self {
        Shell {
            sys,
            st,
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
        self.st.status = status;
        Ok(status)
    }

    fn pipeline(&mut self, p: &Pipeline, stdin: &[u8], out: &mut Output) -> Flow {
        if p.bang {
            self.no_errexit += 1;
        }
        let mut input = stdin.to_vec();
        let mut status = 0;
        let mut failed = 0;
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
                    Ok(s) | Err(Stop::Exit(s)) => {
                        if s != 0 {
                            failed = s;
                        }
                    }
                    Err(e) => {
                        result = Err(e);
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
        // `set -o pipefail`: the last command that failed decides, else 0.
        if self.st.pipefail && status == 0 {
            status = failed;
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
        self.st.status = status;
        if status != 0 && self.st.errexit && self.no_errexit == 0 && !p.bang {
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
                let saved = (self.st.vars.clone(), self.st.errexit, self.st.nounset);
                let r = self.with_redirs(redirs, stdin, out, |sh, input, o| {
                    match sh.list(body, input, o) {
                        Err(Stop::Exit(s)) => Ok(s),
                        other => other,
                    }
                });
                (self.st.vars, self.st.errexit, self.st.nounset) = saved;
                r
            }
            Command::For { var, items, body } => {
                let mut values = Vec::new();
                for w in items {
                    values.extend(self.expand_fields(w, out)?);
                }
                let mut status = 0;
                for v in values {
                    self.st.vars.insert(var.clone(), v);
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
                        return Err(unsim(&format!("{fd}>&{m} (only 1 and 2 are modelled)")));
                    }
                    sinks[fd - 1] = sinks[m - 1].clone();
                }
                RedirOp::In => {
                    if fd != 0 {
                        return Err(unsim(&format!("{fd}< (input redirection of fd {fd})")));
                    }
                    let path = self.expand_one(&r.target, out)?;
                    match self.sys.read_file(&path) {
                        Ok(s) => input = Some(s.into_bytes()),
                        Err(FsError::NotSimulated) => return Err(unsim(&format!("< {path}"))),
                        Err(e) => {
                            return Ok(self.fail(out, 1, &format!("sh: cannot open {path}: {e}")))
                        }
                    }
                }
                RedirOp::Out | RedirOp::Append => {
                    if !(1..=2).contains(&fd) {
                        return Err(unsim(&format!("redirection of fd {fd}")));
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
                        match self.sys.write_file(&path, b"", append) {
                            Ok(()) => {}
                            Err(FsError::NotSimulated) => {
                                return Err(unsim(&format!("> {path}")));
                            }
                            Err(e) => {
                                return Ok(self.fail(
                                    out,
                                    2,
                                    &format!("sh: cannot create {path}: {e}"),
                                ));
                            }
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
            Err(Stop::Unsimulated(_)) => 2,
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
            Err(e) => Err(e),
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
                self.st.vars.insert(n, v);
            }
            return self.with_redirs(redirs, stdin, out, move |_, _, _| Ok(subst_status));
        }
        // Prefix assignments hold for this command only (its environment).
        let saved: Vec<(String, Option<String>, bool)> = values
            .iter()
            .map(|(n, _)| {
                (
                    n.clone(),
                    self.st.vars.get(n).cloned(),
                    self.st.exported.contains(n),
                )
            })
            .collect();
        for (n, v) in values {
            self.st.exported.insert(n.clone());
            self.st.vars.insert(n, v);
        }
        let r = self.with_redirs(redirs, stdin, out, |sh, input, o| {
            sh.run_argv(&argv, input, o)
        });
        for (n, old, exported) in saved {
            match old {
                Some(v) => self.st.vars.insert(n.clone(), v),
                None => self.st.vars.remove(&n),
            };
            if !exported {
                self.st.exported.remove(&n);
            }
        }
        r
    }

    /// Runs one expanded command line: a builtin, a re-entry (`sh -c`, `sudo`), or the
    /// node's utility. A command the node does not have is not simulated: exit 2.
    fn run_argv(&mut self, argv: &[String], stdin: &[u8], out: &mut Output) -> Flow {
        let Some(name) = argv.first() else {
            return Ok(0);
        };
        let args = &argv[1..];
        match name.as_str() {
            ":" | "true" => Ok(0),
            "false" => Ok(1),
            "cd" => {
                let target = match args {
                    [] => self
                        .st
                        .vars
                        .get("HOME")
                        .cloned()
                        .unwrap_or_else(|| "/".into()),
                    [d] if d == "-" => {
                        return Err(unsim("cd -"));
                    }
                    [d] => d.clone(),
                    _ => return Ok(self.fail(out, 2, "sh: cd: too many arguments")),
                };
                match self.sys.chdir(&target) {
                    Ok(()) => {
                        let pwd = self.sys.cwd();
                        if let Some(old) = self.st.vars.insert("PWD".into(), pwd) {
                            self.st.vars.insert("OLDPWD".into(), old);
                        }
                        Ok(0)
                    }
                    Err(e) => Ok(self.fail(out, 2, &format!("sh: cd: can't cd to {target}: {e}"))),
                }
            }
            "pwd" => {
                if let Some(a) = args.iter().find(|a| *a != "-L" && *a != "-P") {
                    return Err(unsim(&format!("pwd {a}")));
                }
                out.stdout.extend_from_slice(self.sys.cwd().as_bytes());
                out.stdout.push(b'\n');
                Ok(0)
            }
            "exit" => {
                let s = match args.first() {
                    Some(a) => match a.parse::<i32>() {
                        Ok(n) => n,
                        Err(_) => {
                            return Ok(self.fail(out, 2, &format!("sh: exit: Illegal number: {a}")))
                        }
                    },
                    None => self.st.status,
                };
                Err(Stop::Exit(s & 0xff))
            }
            "set" => self.set(args, out),
            "export" | "readonly" => {
                for a in args {
                    if a.starts_with('-') {
                        return Err(unsim(&format!("{name} {a}")));
                    }
                    match a.split_once('=') {
                        Some((n, v)) => {
                            self.st.vars.insert(n.to_string(), v.to_string());
                            self.st.exported.insert(n.to_string());
                        }
                        None => {
                            self.st.exported.insert(a.clone());
                        }
                    }
                }
                Ok(0)
            }
            "unset" => {
                for a in args {
                    if a == "-v" {
                        continue;
                    }
                    if a.starts_with('-') {
                        return Err(unsim(&format!("unset {a}")));
                    }
                    self.st.vars.remove(a);
                    self.st.exported.remove(a);
                }
                Ok(0)
            }
            "env" | "printenv" | "/usr/bin/env" | "/usr/bin/printenv" => {
                self.env_cmd(name, args, stdin, out)
            }
            "command" | "type" | "which" | "/usr/bin/which" => self.which(name, args, out),
            "echo" => {
                let (newline, rest) = match args.first().map(String::as_str) {
                    Some("-n") => (false, &args[1..]),
                    _ => (true, args),
                };
                // dash's echo (Debian's /bin/sh) interprets backslash escapes.
                let (text, stop) = echo_escapes(&rest.join(" "));
                out.stdout.extend_from_slice(text.as_bytes());
                if newline && !stop {
                    out.stdout.push(b'\n');
                }
                Ok(0)
            }
            "printf" => printf(args, out),
            "test" => self.test(args, out),
            "[" => match args.split_last() {
                Some((last, inner)) if last == "]" => self.test(inner, out),
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
                        "-u" if args.get(k + 1).map(String::as_str) == Some("root") => k += 2,
                        s if s.starts_with('-') => return Err(unsim(&format!("sudo {s}"))),
                        _ => break,
                    }
                }
                if k >= args.len() {
                    return Err(unsim("sudo without a command"));
                }
                let was = self.sys.set_root(true);
                let r = self.run_argv(&args[k..], stdin, out);
                self.sys.set_root(was);
                r
            }
            _ => match self.sys.exec(argv, stdin) {
                Some(o) => {
                    out.stdout.extend_from_slice(&o.stdout);
                    out.reads_stdin |= o.reads_stdin;
                    if o.unsimulated {
                        let msg = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
                        return Err(Stop::Unsimulated(msg));
                    }
                    out.stderr.extend_from_slice(&o.stderr);
                    if self.sys.cancelled() {
                        return Err(Stop::Killed);
                    }
                    Ok(o.status)
                }
                None => Err(unsim(name)),
            },
        }
    }

    /// The exported variables, sorted: the environment a command gets.
    fn environment(&self) -> Vec<(String, String)> {
        self.st
            .exported
            .iter()
            .filter_map(|n| self.st.vars.get(n).map(|v| (n.clone(), v.clone())))
            .collect()
    }

    /// `env [NAME=VALUE...] [COMMAND...]`, `printenv [NAME...]`.
    fn env_cmd(&mut self, name: &str, args: &[String], stdin: &[u8], out: &mut Output) -> Flow {
        let base = name.rsplit('/').next().unwrap_or(name);
        if let Some(a) = args.iter().find(|a| a.starts_with('-')) {
            return Err(unsim(&format!("{base} {a}")));
        }
        if base == "printenv" {
            let env = self.environment();
            if args.is_empty() {
                for (k, v) in env {
                    out.stdout
                        .extend_from_slice(format!("{k}={v}\n").as_bytes());
                }
                return Ok(0);
            }
            let mut status = 0;
            for a in args {
                match env.iter().find(|(k, _)| k == a) {
                    Some((_, v)) => out.stdout.extend_from_slice(format!("{v}\n").as_bytes()),
                    None => status = 1,
                }
            }
            return Ok(status);
        }
        let split = args
            .iter()
            .position(|a| !a.contains('='))
            .unwrap_or(args.len());
        let (assigns, command) = args.split_at(split);
        if command.is_empty() {
            let mut env = self.environment();
            for a in assigns {
                if let Some((k, v)) = a.split_once('=') {
                    env.retain(|(n, _)| n != k);
                    env.push((k.to_string(), v.to_string()));
                }
            }
            env.sort();
            for (k, v) in env {
                out.stdout
                    .extend_from_slice(format!("{k}={v}\n").as_bytes());
            }
            return Ok(0);
        }
        let saved = self.st.clone();
        for a in assigns {
            if let Some((k, v)) = a.split_once('=') {
                self.st.vars.insert(k.to_string(), v.to_string());
                self.st.exported.insert(k.to_string());
            }
        }
        // A utility, not a builtin: the shell's own state comes back untouched.
        let r = self.run_argv(command, stdin, out);
        let status = self.st.status;
        self.st = saved;
        self.st.status = status;
        r
    }

    /// `command -v NAME`, `type NAME`, `which NAME`: where a command is found.
    fn which(&mut self, name: &str, args: &[String], out: &mut Output) -> Flow {
        let base = name.rsplit('/').next().unwrap_or(name);
        let names: &[String] = match (base, args.first().map(String::as_str)) {
            ("command", Some("-v")) => &args[1..],
            ("command", Some(a)) if !a.starts_with('-') => {
                // `command NAME ARGS`: run it, bypassing functions (there are none).
                let argv = args.to_vec();
                return self.run_argv(&argv, &[], out);
            }
            ("command", a) => return Err(unsim(&format!("command {}", a.unwrap_or("")))),
            (_, Some(a)) if a.starts_with('-') => return Err(unsim(&format!("{base} {a}"))),
            _ => args,
        };
        let mut status = 0;
        for n in names {
            let builtin = BUILTINS.contains(&n.as_str());
            let found = if builtin {
                Some(n.clone())
            } else {
                self.sys.which(n)
            };
            match (found, base) {
                (Some(p), "type") if builtin => {
                    out.stdout
                        .extend_from_slice(format!("{p} is a shell builtin\n").as_bytes());
                }
                (Some(p), "type") => {
                    out.stdout
                        .extend_from_slice(format!("{n} is {p}\n").as_bytes());
                }
                (Some(_), "which")
                    if builtin
                        && !matches!(
                            n.as_str(),
                            "echo"
                                | "test"
                                | "["
                                | "printf"
                                | "true"
                                | "false"
                                | "pwd"
                                | "env"
                                | "printenv"
                        ) =>
                {
                    status = 1;
                }
                (Some(p), "which") if builtin => {
                    out.stdout
                        .extend_from_slice(format!("/usr/bin/{p}\n").as_bytes());
                }
                (Some(p), _) => {
                    out.stdout.extend_from_slice(p.as_bytes());
                    out.stdout.push(b'\n');
                }
                (None, "type") => {
                    out.stderr
                        .extend_from_slice(format!("sh: type: {n}: not found\n").as_bytes());
                    status = 127;
                }
                (None, _) => status = 1,
            }
        }
        Ok(status)
    }

    /// `sh -c 'script' [name args...]` in a fresh shell (variables not shared, the
    /// environment inherited).
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
                    return Err(unsim(&format!(
                        "{name} {} (only `{name} -c SCRIPT`)",
                        args.join(" ")
                    )))
                }
            }
            k += 1;
        }
        let Some(script) = args.get(k + 1) else {
            if k >= args.len() {
                return Err(unsim(&format!("{name} reading a script from stdin")));
            }
            return Ok(self.fail(out, 2, &format!("{name}: -c: option requires an argument")));
        };
        let list = match Parser::new(script).parse_program() {
            Ok(l) => l,
            Err(e) if e.0.starts_with("hk-console simulation:") => {
                return Err(Stop::Unsimulated(e.0))
            }
            Err(e) => return Ok(self.fail(out, 2, &format!("{name}: {e}"))),
        };
        let mut positional = vec![args.get(k + 2).cloned().unwrap_or_else(|| name.to_string())];
        positional.extend(args.iter().skip(k + 3).cloned());
        let mut st = ShellState {
            args: positional,
            errexit,
            nounset,
            ..ShellState::default()
        };
        for (n, v) in self.environment() {
            st.exported.insert(n.clone());
            st.vars.insert(n, v);
        }
        let cwd = self.sys.cwd();
        let mut inner = Shell::new(&mut *self.sys, st);
        let r = match inner.list(&list, stdin, out) {
            Ok(s) | Err(Stop::Exit(s)) => Ok(s),
            Err(e) => Err(e),
        };
        // A child process's `cd` does not move its parent.
        let _ = self.sys.chdir(&cwd);
        r
    }

    fn set(&mut self, args: &[String], out: &mut Output) -> Flow {
        let _ = &out;
        let mut k = 0;
        while let Some(a) = args.get(k) {
            let (on, flags) = if let Some(f) = a.strip_prefix('-') {
                (true, f)
            } else if let Some(f) = a.strip_prefix('+') {
                (false, f)
            } else {
                return Err(unsim(&format!("set {a} (positional parameters)")));
            };
            if flags == "o" || flags.is_empty() {
                let opt = args.get(k + 1).map(String::as_str).unwrap_or_default();
                match opt {
                    "errexit" => self.st.errexit = on,
                    "nounset" => self.st.nounset = on,
                    "pipefail" => self.st.pipefail = on,
                    _ => return Err(unsim(&format!("set -o {opt}"))),
                }
                k += 2;
                continue;
            }
            for f in flags.chars() {
                match f {
                    'e' => self.st.errexit = on,
                    'u' => self.st.nounset = on,
                    _ => return Err(unsim(&format!("set -{f}"))),
                }
            }
            k += 1;
        }
        Ok(0)
    }

    /// `test` / `[`: the POSIX unary and binary operators, `!`, `-a`, `-o`, `( )`.
    fn test(&mut self, args: &[String], out: &mut Output) -> Flow {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        match eval_test(&mut *self.sys, &a) {
            Ok(true) => Ok(0),
            Ok(false) => Ok(1),
            Err(TestError::Usage(e)) => Ok(self.fail(out, 2, &format!("sh: test: {e}"))),
            Err(TestError::Unsimulated(what)) => Err(unsim(&what)),
        }
    }

    // ---- expansion ----

    fn param(&self, name: &str) -> Option<String> {
        let v = match name {
            "?" => Some(self.st.status.to_string()),
            "$" => Some("4242".to_string()),
            "#" => Some(self.st.args.len().saturating_sub(1).to_string()),
            "@" | "*" => Some(
                self.st
                    .args
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
                .and_then(|k| self.st.args.get(k).cloned()),
            n => self.st.vars.get(n).cloned(),
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
                        None if self.st.nounset && name != "@" && name != "*" => {
                            return Err(Self::unset_error(name, out))
                        }
                        None => vec![(String::new(), *quoted)],
                    }
                }
            }
            Part::Subst { list, quoted } => {
                // A subshell: its assignments and `set` do not reach this shell.
                let saved = (self.st.vars.clone(), self.st.errexit, self.st.nounset);
                let mut inner = Output::default();
                let r = self.list(list, &[], &mut inner);
                (self.st.vars, self.st.errexit, self.st.nounset) = saved;
                out.stderr.append(&mut inner.stderr);
                let status = match r {
                    Ok(s) | Err(Stop::Exit(s)) => s,
                    Err(e) => return Err(e),
                };
                self.st.status = status;
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
        // Each field as (char, may it be a pattern character) pairs: unquoted text can glob.
        let mut fields: Vec<Vec<(char, bool)>> = Vec::new();
        let mut cur: Option<Vec<(char, bool)>> = None;
        for p in w {
            let splittable = matches!(
                p,
                Part::Param { quoted: false, .. } | Part::Subst { quoted: false, .. }
            );
            let literal_text = matches!(p, Part::Lit(_));
            for (text, quoted) in self.expand_part(p, out)? {
                if splittable && !quoted {
                    for c in text.chars() {
                        if c == ' ' || c == '\t' || c == '\n' {
                            if let Some(f) = cur.take() {
                                fields.push(f);
                            }
                        } else {
                            cur.get_or_insert_with(Vec::new).push((c, true));
                        }
                    }
                } else {
                    let f = cur.get_or_insert_with(Vec::new);
                    f.extend(text.chars().map(|c| (c, literal_text)));
                }
            }
        }
        fields.extend(cur);
        let mut result = Vec::new();
        for f in fields {
            let text: String = f.iter().map(|(c, _)| *c).collect();
            if f.iter()
                .any(|&(c, special)| special && matches!(c, '*' | '?' | '['))
            {
                // Pattern characters are literal in glob_match when flagged `true`.
                let pat: Vec<(char, bool)> = f.iter().map(|&(c, special)| (c, !special)).collect();
                let hits = self.glob(&pat);
                if hits.is_empty() {
                    result.push(text);
                } else {
                    result.extend(hits);
                }
            } else {
                result.push(text);
            }
        }
        Ok(result)
    }

    /// Pathname expansion over the node's files: the sorted matches (none = keep the word).
    fn glob(&mut self, pat: &[(char, bool)]) -> Vec<String> {
        let absolute = pat.first().map(|p| p.0) == Some('/');
        let comps: Vec<&[(char, bool)]> = pat
            .split(|&(c, _)| c == '/')
            .filter(|c| !c.is_empty())
            .collect();
        let cwd = self.sys.cwd();
        // (path shown, real absolute path)
        let mut paths: Vec<(String, String)> = vec![if absolute {
            (String::new(), String::new())
        } else {
            (String::new(), if cwd == "/" { String::new() } else { cwd })
        }];
        for (k, comp) in comps.iter().enumerate() {
            let has_pattern = comp
                .iter()
                .any(|&(c, lit)| !lit && matches!(c, '*' | '?' | '['));
            let mut next = Vec::new();
            for (shown, real) in &paths {
                let join = |name: &str| {
                    let shown = if shown.is_empty() && !absolute {
                        name.to_string()
                    } else {
                        format!("{shown}/{name}")
                    };
                    (shown, format!("{real}/{name}"))
                };
                if has_pattern {
                    let dir = if real.is_empty() {
                        "/".to_string()
                    } else {
                        real.clone()
                    };
                    let Ok(names) = self.sys.list_dir(&dir) else {
                        continue;
                    };
                    for n in names {
                        let chars: Vec<char> = n.chars().collect();
                        if n.starts_with('.') && comp.first().map(|p| p.0) != Some('.') {
                            continue;
                        }
                        if glob_match(comp, &chars) {
                            next.push(join(&n));
                        }
                    }
                } else {
                    let name: String = comp.iter().map(|p| p.0).collect();
                    next.push(join(&name));
                }
            }
            // Only the last component may name a file; the others must be directories.
            let last = k + 1 == comps.len();
            next.retain(|(_, real)| match self.sys.stat(real) {
                Some(st) => last || st.kind == FileKind::Dir,
                None => false,
            });
            paths = next;
        }
        let mut out: Vec<String> = paths.into_iter().map(|(shown, _)| shown).collect();
        out.sort();
        out
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

/// Why `test` could not decide.
enum TestError {
    /// What the real `test` calls a usage error (exit 2).
    Usage(String),
    /// An operator the simulation does not model.
    Unsimulated(String),
}

/// The builtins `command -v` finds as themselves.
const BUILTINS: [&str; 22] = [
    ":", "true", "false", "cd", "pwd", "exit", "set", "export", "readonly", "unset", "echo",
    "printf", "test", "[", "command", "type", "env", "printenv", "sh", "sudo", "which", "bash",
];

fn eval_test(sys: &mut dyn System, a: &[&str]) -> Result<bool, TestError> {
    // POSIX decides by the number of arguments first (so `[ -n ]` is a string test).
    match a {
        [] => return Ok(false),
        [s] => return Ok(!s.is_empty()),
        ["!", rest @ ..] if rest.len() <= 3 => return eval_test(sys, rest).map(|b| !b),
        ["(", inner @ .., ")"] if inner.len() <= 2 => return eval_test(sys, inner),
        _ => {}
    }
    if a.len() > 3 || (a.len() == 3 && matches!(a[1], "-a" | "-o")) {
        // `-o` binds looser than `-a`: split at the last `-o`, then the last `-a`.
        for op in ["-o", "-a"] {
            if let Some(k) = a
                .iter()
                .rposition(|x| *x == op)
                .filter(|k| *k > 0 && *k + 1 < a.len())
            {
                let l = eval_test(sys, &a[..k])?;
                let r = eval_test(sys, &a[k + 1..])?;
                return Ok(if op == "-o" { l || r } else { l && r });
            }
        }
        if a.len() > 3 {
            return Err(TestError::Unsimulated(format!("test {}", a.join(" "))));
        }
    }
    match a {
        [op, s] => unary(sys, op, s),
        [x, op, y] => binary(sys, x, op, y),
        _ => Err(TestError::Usage(format!(
            "{}: unexpected operator",
            a.join(" ")
        ))),
    }
}

fn unary(sys: &mut dyn System, op: &str, s: &str) -> Result<bool, TestError> {
    if op == "-n" {
        return Ok(!s.is_empty());
    }
    if op == "-z" {
        return Ok(s.is_empty());
    }
    if op == "-t" {
        return Err(TestError::Unsimulated(format!("test -t {s}")));
    }
    let st = match op {
        "-b" | "-c" | "-d" | "-e" | "-f" | "-g" | "-h" | "-L" | "-p" | "-r" | "-S" | "-s"
        | "-u" | "-w" | "-x" | "-k"
            if sys.unmodelled(s) =>
        {
            return Err(TestError::Unsimulated(format!("test {op} {s}")));
        }
        "-b" | "-c" | "-d" | "-e" | "-f" | "-g" | "-h" | "-L" | "-p" | "-r" | "-S" | "-s"
        | "-u" | "-w" | "-x" | "-k" => sys.stat(s),
        _ => return Err(TestError::Usage(format!("{op}: unexpected operator"))),
    };
    let Some(st) = st else {
        return Ok(false);
    };
    let uid = sys.uid();
    let perm = |want: u32| {
        if uid == 0 {
            // root reads and writes anything; executes what has any x bit (or a directory).
            want != 1 || st.kind == FileKind::Dir || st.mode & 0o111 != 0
        } else {
            let bits = if st.uid == uid { st.mode >> 6 } else { st.mode };
            bits & want == want
        }
    };
    Ok(match op {
        "-b" => st.kind == FileKind::BlockDev,
        "-c" => st.kind == FileKind::CharDev,
        "-d" => st.kind == FileKind::Dir,
        "-e" => true,
        "-f" => st.kind == FileKind::File,
        "-g" => st.mode & 0o2000 != 0,
        "-u" => st.mode & 0o4000 != 0,
        "-k" => st.mode & 0o1000 != 0,
        "-h" | "-L" => st.symlink,
        // The simulated tree has no FIFOs or sockets.
        "-p" | "-S" => false,
        "-r" => perm(4),
        "-w" => perm(2),
        "-x" => perm(1),
        _ => st.size > 0,
    })
}

fn binary(sys: &mut dyn System, x: &str, op: &str, y: &str) -> Result<bool, TestError> {
    Ok(match op {
        "=" | "==" => x == y,
        "!=" => x != y,
        "<" | ">" => return Err(TestError::Unsimulated(format!("test {x} {op} {y}"))),
        "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge" => {
            let n = |s: &str| {
                s.trim()
                    .parse::<i64>()
                    .map_err(|_| TestError::Usage(format!("Illegal number: {s}")))
            };
            let (x, y) = (n(x)?, n(y)?);
            match op {
                "-eq" => x == y,
                "-ne" => x != y,
                "-lt" => x < y,
                "-le" => x <= y,
                "-gt" => x > y,
                _ => x >= y,
            }
        }
        "-nt" | "-ot" | "-ef" if sys.unmodelled(x) || sys.unmodelled(y) => {
            return Err(TestError::Unsimulated(format!("test {x} {op} {y}")));
        }
        "-nt" | "-ot" => {
            let (a, b) = (sys.stat(x), sys.stat(y));
            match (a, b, op) {
                (Some(a), Some(b), "-nt") => a.mtime_ms > b.mtime_ms,
                (Some(_), None, "-nt") => true,
                (Some(a), Some(b), _) => a.mtime_ms < b.mtime_ms,
                (None, Some(_), _) => op == "-ot",
                _ => false,
            }
        }
        "-ef" => {
            let cwd = sys.cwd();
            sys.stat(x).is_some() && super::fs::normalize(&cwd, x) == super::fs::normalize(&cwd, y)
        }
        "-a" | "-o" => {
            let (l, r) = (!x.is_empty(), !y.is_empty());
            if op == "-a" {
                l && r
            } else {
                l || r
            }
        }
        _ => return Err(TestError::Usage(format!("{op}: unexpected operator"))),
    })
}

/// dash's `echo` escapes: `\n \t \\ \c` (stop, no newline), `\0NNN` octal; returns the
/// text and whether `\c` cut it short.
fn echo_escapes(s: &str) -> (String, bool) {
    let mut out = String::new();
    let mut cs = s.chars().peekable();
    while let Some(c) = cs.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match cs.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\x07'),
            Some('b') => out.push('\x08'),
            Some('f') => out.push('\x0c'),
            Some('v') => out.push('\x0b'),
            Some('\\') => out.push('\\'),
            Some('c') => return (out, true),
            Some('0') => {
                let mut n = 0u32;
                for _ in 0..3 {
                    match cs.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            n = n * 8 + d;
                            cs.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(n).unwrap_or('\0'));
            }
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    (out, false)
}

/// `printf FORMAT [ARG...]`: `%s`, `%d`, `%%`, `\n`, `\t`, `\\`; the format is reused
/// while arguments remain.
fn printf(args: &[String], out: &mut Output) -> Flow {
    let Some(fmt) = args.first() else {
        out.stderr
            .extend_from_slice(b"printf: usage: printf format [arguments]\n");
        return Ok(2);
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
                    Some(o) => return Err(unsim(&format!("printf %{o}"))),
                    None => out.stdout.push(b'%'),
                },
                c => out.stdout.extend_from_slice(c.to_string().as_bytes()),
            }
        }
        if !used || rest.len() == 0 {
            return Ok(0);
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
        fn read_file(&mut self, path: &str) -> Result<String, FsError> {
            self.files.get(path).cloned().ok_or(FsError::NotFound)
        }
        fn write_file(&mut self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
            if !path.starts_with("/sys/") {
                return Err(FsError::ReadOnly);
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
        fn stat(&mut self, path: &str) -> Option<Stat> {
            let dir = path == "/sys" || path == "/sys/block";
            (dir || self.files.contains_key(path)).then(|| Stat {
                kind: if dir { FileKind::Dir } else { FileKind::File },
                mode: 0o644,
                uid: 0,
                size: self.files.get(path).map_or(0, |f| f.len() as u64),
                mtime_ms: 0,
                symlink: false,
            })
        }
        fn list_dir(&mut self, path: &str) -> Result<Vec<String>, FsError> {
            let prefix = format!("{}/", path.trim_end_matches('/'));
            let mut names: Vec<String> = self
                .files
                .keys()
                .filter_map(|k| k.strip_prefix(&prefix))
                .filter(|r| !r.contains('/'))
                .map(String::from)
                .collect();
            names.sort();
            Ok(names)
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
        let (_, e, s) = sh("nosuch -rf /");
        assert_eq!(s, 2);
        assert_eq!(e, "hk-console simulation: `nosuch` is not simulated\n");
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

    /// Every unmodelled construct ends the whole script with exit 2 and the one message,
    /// whatever condition, redirection, subshell or `sh -c` it stood in.
    #[test]
    fn unmodelled_constructs_stop_the_script_with_exit_2() {
        for (script, what) in [
            (
                "if [ -t 1 ]; then echo a; else echo b; fi; echo after",
                "test -t 1",
            ),
            ("[ a \\< b ] 2>/dev/null || echo no", "test a < b"),
            ("nosuch 2>/dev/null || true", "nosuch"),
            ("x=$(nosuch); echo $x", "nosuch"),
            ("(nosuch) ; echo after", "nosuch"),
            ("sh -c 'nosuch' || echo after", "nosuch"),
            (
                "sh -c 'a=`id`'; echo after",
                "backquote command substitution (use $(...))",
            ),
            ("set -x; echo a", "set -x"),
            ("printf '%5s' a", "printf %5"),
            ("echo a 3>/dev/null", "redirection of fd 3"),
            ("while true; do echo; done", "while loops and definitions"),
            ("f() { echo; }", "shell functions"),
            ("cat <<EOF\nx\nEOF", "here-documents (<<)"),
            (
                "echo ${x#y}",
                "parameter expansion other than ${name}, ${name:-word}, ${name-word}",
            ),
            ("sudo -u other true", "sudo -u"),
            ("true | nosuch | true; echo after", "nosuch"),
            ("cd -", "cd -"),
            ("env -i true", "env -i"),
        ] {
            let (o, e, s) = sh(script);
            assert_eq!(s, 2, "{script}: {o} {e}");
            assert!(!o.contains("after"), "{script} went on: {o}");
            assert_eq!(
                e,
                format!("hk-console simulation: `{what}` is not simulated\n"),
                "{script}"
            );
        }
    }

    #[test]
    fn file_tests_and_globs_ask_the_system() {
        let mut f = Fake::default();
        f.files.insert("/sys/block/sda".into(), String::new());
        f.files.insert("/sys/block/sdb".into(), "x".into());
        let script = "if [ -e /sys/block/sda ]; then echo yes; else echo no; fi";
        assert_eq!(run(&mut f, script).0, "yes\n");
        assert_eq!(
            run(&mut f, "[ -e /sys/block/nvme0n1 ] || echo none").0,
            "none\n"
        );
        assert_eq!(
            run(
                &mut f,
                "[ -d /sys/block ] && [ -f /sys/block/sda ] && echo ok"
            )
            .0,
            "ok\n"
        );
        assert_eq!(
            run(&mut f, "[ -s /sys/block/sda ] || echo empty").0,
            "empty\n"
        );
        assert_eq!(
            run(
                &mut f,
                "[ -n x -a -z '' ] && [ ! -e /x -o -e /y ] && echo both"
            )
            .0,
            "both\n"
        );
        assert_eq!(
            run(&mut f, "argv /sys/block/sd*").0,
            "</sys/block/sda></sys/block/sdb>\n"
        );
        assert_eq!(
            run(&mut f, "argv '/sys/block/sd*' /nope/*").0,
            "</sys/block/sd*></nope/*>\n"
        );
        assert_eq!(run(&mut f, "echo 'a\\tb\\c' x").0, "a\tb");
        assert_eq!(run(&mut f, "set -o pipefail; fail | cat; echo $?").0, "3\n");
        assert_eq!(run(&mut f, "fail | cat; echo $?").0, "0\n");
    }
}
