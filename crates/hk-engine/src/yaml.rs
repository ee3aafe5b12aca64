//! A YAML loader that keeps where every node came from.
//!
//! Owns: turning YAML text into a tree of [`Node`]s, each with its 1-based line and column,
//! and typing plain scalars the way Ansible does (PyYAML's YAML 1.1 resolvers: `yes`/`on`
//! are booleans, `0755` is octal, `1:20` is sexagesimal, `1e3` is a string). Checks and
//! validation use the marks to name `file:line:col`; the inventory uses the typing so that
//! `hk-console inventory --list` agrees with `ansible-inventory --list`.
//!
//! Must not: read files (callers pass text and a name), or decrypt anything. A `!vault`
//! value stays an opaque [`Value::Vaulted`].
//!
//! Why one file over 800 lines: the code is under 750 lines (one loader and one scalar
//! resolver); the rest is unit tests of the YAML 1.1 typing.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use regex::Regex;
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in a source text, both 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

impl From<Marker> for Mark {
    fn from(m: Marker) -> Self {
        Mark {
            line: m.line(),
            col: m.col() + 1,
        }
    }
}

/// A YAML node with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub mark: Mark,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// An inline `!vault` value: opaque, never decrypted or shown.
    Vaulted,
    Seq(Vec<Node>),
    /// Keys keep their source order; a duplicate key keeps the last value, as PyYAML does.
    Map(Vec<(Node, Node)>),
}

/// What a parse failure says: where, and what the parser expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{mark}: {message}")]
pub struct YamlError {
    pub mark: Mark,
    pub message: String,
}

/// Collections nested deeper than this are refused (`yaml.max_depth`). Every consumer of a
/// [`Node`] walks it recursively, and no repo file a person writes comes near it.
pub const MAX_DEPTH: usize = 100;
/// Nodes (scalars and collections, counting every copy an alias makes) one text may load
/// into (`yaml.max_nodes`): bounds memory whatever the shape.
pub const MAX_NODES: usize = 1_000_000;
/// Nodes aliases may copy in one text (`yaml.max_alias_nodes`). Aliases are copied, not
/// shared, so nested aliases (the "billion laughs" shape) grow exponentially; this stops
/// them at the alias that crosses the line, long before memory runs out. Repo files use
/// aliases for small shared maps (`<<: *defaults`); ten thousand copied nodes is far past
/// that, and small enough that reaching it costs milliseconds.
pub const MAX_ALIAS_NODES: usize = 10_000;

/// Parse every document in `text`. An empty text is zero documents.
///
/// Bounded: nesting, node count and alias expansion are capped (see the constants above),
/// and the parser is driven one event at a time so a refusal stops it at once.
pub fn parse_documents(text: &str) -> Result<Vec<Node>, YamlError> {
    let mut builder = Builder::new(text);
    let mut parser = Parser::new_from_str(text);
    loop {
        let (ev, marker) = parser.next_token().map_err(|e| YamlError {
            mark: Mark::from(*e.marker()),
            // yaml-rust2's scanner stops flow nesting at 255 levels, ahead of our own count.
            message: if e.info() == "recursion limit exceeded" {
                format!("nested more than {MAX_DEPTH} levels deep (limit yaml.max_depth): refused")
            } else {
                e.info().to_string()
            },
        })?;
        if ev == Event::StreamEnd {
            break;
        }
        builder.on_event(ev, marker)?;
    }
    Ok(builder.docs)
}

/// Parse exactly one document (an empty text is `Null` at 1:1).
pub fn parse_one(text: &str) -> Result<Node, YamlError> {
    let mut docs = parse_documents(text)?;
    match docs.len() {
        0 => Ok(Node {
            value: Value::Null,
            mark: Mark { line: 1, col: 1 },
        }),
        1 => Ok(docs.remove(0)),
        _ => Err(YamlError {
            mark: docs[1].mark,
            message: "expected a single YAML document, found more than one".into(),
        }),
    }
}

impl Node {
    /// The value under a string key of a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key node and value node under a string key of a mapping.
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.as_key().as_deref() == Some(key))
                .map(|(k, v)| (k, v)),
            _ => None,
        }
    }

    /// Follow a path of mapping keys.
    pub fn path(&self, keys: &[&str]) -> Option<&Node> {
        keys.iter().try_fold(self, |node, key| node.get(key))
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    /// A scalar as the string a mapping key stands for (what `json.dumps` would write).
    pub fn as_key(&self) -> Option<String> {
        match &self.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(python_float_repr(*f)),
            Value::Bool(b) => Some(if *b { "true" } else { "false" }.into()),
            Value::Null => Some("null".into()),
            _ => None,
        }
    }

    /// The JSON a Python `json.dumps` of the loaded value would give.
    /// Vaulted values become the string `"<vaulted>"` so nothing secret can leak through.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(J::Number)
                .unwrap_or_else(|| J::String(python_float_repr(*f))),
            Value::Str(s) => J::String(s.clone()),
            Value::Vaulted => J::String(VAULTED_PLACEHOLDER.into()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    let key = k.as_key().unwrap_or_else(|| k.to_json().to_string());
                    map.insert(key, v.to_json());
                }
                J::Object(map)
            }
        }
    }

    /// Whether any value in this tree is a `!vault` value.
    pub fn contains_vaulted(&self) -> bool {
        match &self.value {
            Value::Vaulted => true,
            Value::Seq(items) => items.iter().any(Node::contains_vaulted),
            Value::Map(entries) => entries.iter().any(|(_, v)| v.contains_vaulted()),
            _ => false,
        }
    }
}

/// What a vaulted value prints as, anywhere.
pub const VAULTED_PLACEHOLDER: &str = "<vaulted>";

fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        format!("{f:?}")
    }
}

/// A finished node with what it costs: how many nodes it holds (itself included) and how
/// many collection levels deep it goes (a scalar is 0).
struct Built {
    node: Node,
    nodes: usize,
    height: usize,
}

/// A mapping under construction. Entries are slots so a duplicate key can retire the earlier
/// one in O(1) (PyYAML keeps the last value); `index` finds a key's live slot.
#[derive(Default)]
struct MapEntries {
    slots: Vec<Option<(Node, Node)>>,
    index: HashMap<String, usize>,
}

impl MapEntries {
    /// Keep `(key, value)` as the last entry, retiring an earlier entry with the same key.
    fn replace(&mut self, key: Node, value: Node) {
        if let Some(text) = key.as_key() {
            if let Some(old) = self.index.insert(text, self.slots.len()) {
                self.slots[old] = None;
            }
        }
        self.slots.push(Some((key, value)));
    }

    fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn into_entries(self) -> Vec<(Node, Node)> {
        self.slots.into_iter().flatten().collect()
    }
}

struct Frame {
    mark: Mark,
    anchor: usize,
    nodes: usize,
    /// The deepest child's height.
    child_height: usize,
    kind: FrameKind,
}

enum FrameKind {
    Seq(Vec<Node>),
    Map {
        entries: MapEntries,
        /// Non-scalar keys (never deduplicated among explicit entries).
        has_unkeyed: bool,
        pending_key: Option<Node>,
        /// Entries brought in by `<<` merge keys; explicit keys win over them.
        merged: Vec<Option<(Node, Node)>>,
        merged_index: HashMap<Option<String>, usize>,
    },
}

struct Builder<'t> {
    text: &'t str,
    docs: Vec<Node>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Node, usize, usize)>,
    nodes: usize,
    alias_nodes: usize,
}

impl<'t> Builder<'t> {
    fn new(text: &'t str) -> Self {
        Builder {
            text,
            docs: Vec::new(),
            stack: Vec::new(),
            anchors: HashMap::new(),
            nodes: 0,
            alias_nodes: 0,
        }
    }

    /// Count `n` more nodes against the text's budget.
    fn count(&mut self, mark: Mark, n: usize) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(YamlError {
                mark,
                message: format!(
                    "more than {MAX_NODES} YAML nodes (limit yaml.max_nodes, counting the \
                     copies aliases make): refused rather than loaded"
                ),
            });
        }
        Ok(())
    }

    fn push_value(&mut self, built: Built) -> Result<(), YamlError> {
        let Built {
            node,
            nodes,
            height,
        } = built;
        let Some(frame) = self.stack.last_mut() else {
            self.docs.push(node);
            return Ok(());
        };
        frame.nodes = frame.nodes.saturating_add(nodes);
        frame.child_height = frame.child_height.max(height);
        match &mut frame.kind {
            FrameKind::Seq(items) => items.push(node),
            FrameKind::Map {
                entries,
                has_unkeyed,
                pending_key,
                merged,
                merged_index,
            } => match pending_key.take() {
                None => *pending_key = Some(node),
                Some(key) => {
                    if key.as_str() == Some("<<") {
                        let sources: Vec<Node> = match node.value {
                            Value::Map(_) => vec![node],
                            Value::Seq(items) => items,
                            _ => {
                                return Err(YamlError {
                                    mark: node.mark,
                                    message:
                                        "a merge key `<<` needs a mapping or a list of mappings"
                                            .into(),
                                })
                            }
                        };
                        for source in sources {
                            if let Value::Map(pairs) = source.value {
                                // PyYAML (what Ansible uses) appends every merged pair in
                                // order, so a later source overrides an earlier one.
                                for (k, v) in pairs {
                                    if let Some(old) = merged_index.insert(k.as_key(), merged.len())
                                    {
                                        merged[old] = None;
                                    }
                                    merged.push(Some((k, v)));
                                }
                            }
                        }
                    } else {
                        if key.as_key().is_none() {
                            *has_unkeyed = true;
                        }
                        entries.replace(key, node);
                    }
                }
            },
        }
        Ok(())
    }

    fn close(&mut self, built: Built, anchor: usize) -> Result<(), YamlError> {
        if anchor != 0 {
            self.anchors
                .insert(anchor, (built.node.clone(), built.nodes, built.height));
        }
        self.push_value(built)
    }

    fn open(&mut self, mark: Mark, anchor: usize, kind: FrameKind) -> Result<(), YamlError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError {
                mark,
                message: format!(
                    "nested more than {MAX_DEPTH} levels deep (limit yaml.max_depth): refused"
                ),
            });
        }
        self.count(mark, 1)?;
        self.stack.push(Frame {
            mark,
            anchor,
            nodes: 1,
            child_height: 0,
            kind,
        });
        Ok(())
    }

    /// The `*name` written at `mark`, for messages (the parser only hands out an id).
    fn alias_name(&self, mark: Mark) -> String {
        let line = self
            .text
            .lines()
            .nth(mark.line.saturating_sub(1))
            .unwrap_or("");
        let rest: String = line.chars().skip(mark.col.saturating_sub(1)).collect();
        let name: String = rest
            .trim_start_matches('*')
            .chars()
            .take_while(|c| !c.is_whitespace() && !",[]{}".contains(*c))
            .take(64)
            .collect();
        format!("*{name}")
    }

    fn on_event(&mut self, ev: Event, marker: Marker) -> Result<(), YamlError> {
        let mark = Mark::from(marker);
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve_scalar(
                    &text,
                    style,
                    tag.as_ref().map(|t| (t.handle.as_str(), t.suffix.as_str())),
                )
                .map_err(|message| YamlError { mark, message })?;
                self.count(mark, 1)?;
                self.close(
                    Built {
                        node: Node { value, mark },
                        nodes: 1,
                        height: 0,
                    },
                    anchor,
                )
            }
            Event::SequenceStart(anchor, _) => self.open(mark, anchor, FrameKind::Seq(Vec::new())),
            Event::MappingStart(anchor, _) => self.open(
                mark,
                anchor,
                FrameKind::Map {
                    entries: MapEntries::default(),
                    has_unkeyed: false,
                    pending_key: None,
                    merged: Vec::new(),
                    merged_index: HashMap::new(),
                },
            ),
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else {
                    return Ok(());
                };
                let value = match frame.kind {
                    FrameKind::Seq(items) => Value::Seq(items),
                    FrameKind::Map {
                        mut entries,
                        has_unkeyed,
                        merged,
                        ..
                    } => {
                        for (k, v) in merged.into_iter().flatten() {
                            let present = match k.as_key() {
                                Some(text) => entries.contains(&text),
                                None => has_unkeyed,
                            };
                            if !present {
                                entries.replace(k, v);
                            }
                        }
                        Value::Map(entries.into_entries())
                    }
                };
                self.close(
                    Built {
                        node: Node {
                            value,
                            mark: frame.mark,
                        },
                        nodes: frame.nodes,
                        height: frame.child_height + 1,
                    },
                    frame.anchor,
                )
            }
            Event::Alias(id) => {
                let Some((nodes, height)) = self.anchors.get(&id).map(|(_, n, h)| (*n, *h)) else {
                    return Err(YamlError {
                        mark,
                        message: "alias to an anchor that is not defined".into(),
                    });
                };
                if self.stack.len() + height > MAX_DEPTH {
                    return Err(YamlError {
                        mark,
                        message: format!(
                            "alias `{}` would nest this value more than {MAX_DEPTH} levels \
                             deep (limit yaml.max_depth): refused",
                            self.alias_name(mark)
                        ),
                    });
                }
                self.alias_nodes = self.alias_nodes.saturating_add(nodes);
                if self.alias_nodes > MAX_ALIAS_NODES {
                    return Err(YamlError {
                        mark,
                        message: format!(
                            "alias `{}` copies {nodes} node(s), taking the aliases in this file \
                             past {MAX_ALIAS_NODES} copied nodes (limit yaml.max_alias_nodes): \
                             refused, as aliases nested in aliases grow exponentially",
                            self.alias_name(mark)
                        ),
                    });
                }
                self.count(mark, nodes)?;
                let Some(mut node) = self.anchors.get(&id).map(|(n, _, _)| n.clone()) else {
                    return Ok(());
                };
                node.mark = mark;
                self.push_value(Built {
                    node,
                    nodes,
                    height,
                })
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => Ok(()),
        }
    }
}

fn resolve_scalar(
    text: &str,
    style: TScalarStyle,
    tag: Option<(&str, &str)>,
) -> Result<Value, String> {
    match tag {
        Some(("!", "vault")) => return Ok(Value::Vaulted),
        Some(("!", "unsafe")) => return Ok(Value::Str(text.to_string())),
        Some(("tag:yaml.org,2002:", "str")) | Some(("!!", "str")) => {
            return Ok(Value::Str(text.to_string()))
        }
        Some(("tag:yaml.org,2002:", kind)) | Some(("!!", kind)) => {
            let v = resolve_plain(text);
            let ok = matches!(
                (kind, &v),
                ("int", Value::Int(_))
                    | ("float", Value::Float(_))
                    | ("bool", Value::Bool(_))
                    | ("null", Value::Null)
            );
            if ok {
                return Ok(v);
            }
            if kind == "float" {
                if let Value::Int(i) = v {
                    return Ok(Value::Float(i as f64));
                }
            }
            return Err(format!("`{text}` cannot be read as !!{kind}"));
        }
        _ => {}
    }
    if style != TScalarStyle::Plain {
        return Ok(Value::Str(text.to_string()));
    }
    Ok(resolve_plain(text))
}

struct Resolvers {
    bool_: Regex,
    int: Regex,
    float: Regex,
    null: Regex,
    timestamp: Regex,
}

fn resolvers() -> &'static Resolvers {
    static R: OnceLock<Resolvers> = OnceLock::new();
    R.get_or_init(|| {
        // PyYAML's YAML 1.1 implicit resolvers, which Ansible's loader inherits.
        #[allow(clippy::unwrap_used)] // constant patterns, covered by tests
        Resolvers {
            bool_: Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$").unwrap(),
            int: Regex::new(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$").unwrap(),
            float: Regex::new(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$").unwrap(),
            null: Regex::new(r"^(?:~|null|Null|NULL|)$").unwrap(),
            // PyYAML's timestamp resolver and constructor pattern in one.
            timestamp: Regex::new(r"^(?:([0-9]{4})-([0-9]{2})-([0-9]{2})|([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:[Tt]|[ \t]+)([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]*))?(?:[ \t]*(Z|([-+])([0-9]{1,2})(?::([0-9]{2}))?))?)$").unwrap(),
        }
    })
}

fn resolve_plain(text: &str) -> Value {
    let r = resolvers();
    if r.null.is_match(text) {
        return Value::Null;
    }
    if r.bool_.is_match(text) {
        return Value::Bool(
            matches!(text.as_bytes()[0], b'y' | b'Y' | b't' | b'T')
                || text.eq_ignore_ascii_case("on"),
        );
    }
    if r.int.is_match(text) {
        if let Some(i) = parse_yaml11_int(text) {
            return Value::Int(i);
        }
    }
    if r.float.is_match(text) {
        if let Some(f) = parse_yaml11_float(text) {
            return Value::Float(f);
        }
    }
    if let Some(iso) = yaml11_timestamp(text) {
        return Value::Str(iso);
    }
    Value::Str(text.to_string())
}

/// A YAML 1.1 timestamp as the ISO 8601 text Ansible prints for the `date`/`datetime`
/// PyYAML builds (`2001-12-14 21:59:43.10 -5` becomes `2001-12-14T21:59:43.100000-05:00`).
/// Kept a string: JSON has no date type.
fn yaml11_timestamp(text: &str) -> Option<String> {
    let c = resolvers().timestamp.captures(text)?;
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    if c.get(1).is_some() {
        let (y, m, d) = (num(1)?, num(2)?, num(3)?);
        valid_date(y, m, d)?;
        return Some(format!("{y:04}-{m:02}-{d:02}"));
    }
    let (y, mo, d, h, mi, s) = (num(4)?, num(5)?, num(6)?, num(7)?, num(8)?, num(9)?);
    valid_date(y, mo, d)?;
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let mut out = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if let Some(frac) = c.get(10).map(|m| m.as_str()) {
        let mut digits: String = frac.chars().take(6).collect();
        while digits.len() < 6 {
            digits.push('0');
        }
        if digits != "000000" {
            out.push('.');
            out.push_str(&digits);
        }
    }
    match (c.get(11).map(|m| m.as_str()), c.get(12).map(|m| m.as_str())) {
        (Some("Z"), _) => out.push_str("+00:00"),
        (Some(_), Some(sign)) => {
            let (th, tm) = (num(13)?, num(14).unwrap_or(0));
            out.push_str(&format!("{sign}{th:02}:{tm:02}"));
        }
        _ => {}
    }
    Some(out)
}

fn valid_date(y: u32, m: u32, d: u32) -> Option<()> {
    let leap = (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (y >= 1 && (1..=days).contains(&d)).then_some(())
}

fn split_sign(text: &str) -> (i64, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (-1, &text[1..]),
        Some(b'+') => (1, &text[1..]),
        _ => (1, text),
    }
}

fn parse_yaml11_int(text: &str) -> Option<i64> {
    let cleaned = text.replace('_', "");
    let (sign, body) = split_sign(&cleaned);
    let magnitude = if let Some(bin) = body.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()?
    } else if let Some(hex) = body.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if body.contains(':') {
        body.split(':').try_fold(0i64, |acc, part| {
            Some(acc.checked_mul(60)? + part.parse::<i64>().ok()?)
        })?
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse::<i64>().ok()?
    };
    magnitude.checked_mul(sign)
}

fn parse_yaml11_float(text: &str) -> Option<f64> {
    let cleaned = text.replace('_', "").to_ascii_lowercase();
    let (sign, body) = split_sign(&cleaned);
    let sign = sign as f64;
    if body == ".inf" {
        return Some(sign * f64::INFINITY);
    }
    if body == ".nan" {
        return Some(f64::NAN);
    }
    if body.contains(':') {
        let mut parts = body.split(':').peekable();
        let mut acc = 0f64;
        while let Some(part) = parts.next() {
            let v: f64 = part.parse().ok()?;
            acc = if parts.peek().is_some() {
                (acc + v) * 60.0
            } else {
                acc + v
            };
        }
        return Some(sign * acc);
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(text: &str) -> Value {
        parse_one(&format!("v: {text}\n"))
            .expect("parse")
            .get("v")
            .expect("v")
            .value
            .clone()
    }

    #[test]
    fn yaml11_typing_matches_pyyaml() {
        assert_eq!(scalar("yes"), Value::Bool(true));
        assert_eq!(scalar("Off"), Value::Bool(false));
        assert_eq!(scalar("y"), Value::Str("y".into()));
        assert_eq!(scalar("0755"), Value::Int(493));
        assert_eq!(scalar("08"), Value::Str("08".into()));
        assert_eq!(scalar("0x1F"), Value::Int(31));
        assert_eq!(scalar("0b101"), Value::Int(5));
        assert_eq!(scalar("1_000"), Value::Int(1000));
        assert_eq!(scalar("1:20"), Value::Int(80));
        assert_eq!(scalar("6443"), Value::Int(6443));
        assert_eq!(scalar("-3"), Value::Int(-3));
        assert_eq!(scalar("1.5"), Value::Float(1.5));
        assert_eq!(scalar("1e3"), Value::Str("1e3".into()));
        assert_eq!(scalar("1.0e+3"), Value::Float(1000.0));
        assert_eq!(scalar("~"), Value::Null);
        assert_eq!(scalar(""), Value::Null);
        assert_eq!(scalar("'yes'"), Value::Str("yes".into()));
        assert_eq!(scalar("192.168.2.9"), Value::Str("192.168.2.9".into()));
        assert_eq!(
            scalar("\"{{ kube_vip_address }}\""),
            Value::Str("{{ kube_vip_address }}".into())
        );
    }

    #[test]
    fn timestamps_become_the_iso_text_ansible_prints() {
        let s = |t: &str| scalar(t);
        assert_eq!(s("2001-12-14"), Value::Str("2001-12-14".into()));
        assert_eq!(
            s("2001-12-14 21:59:43.10 -5"),
            Value::Str("2001-12-14T21:59:43.100000-05:00".into())
        );
        assert_eq!(
            s("2001-12-15T02:59:43.1Z"),
            Value::Str("2001-12-15T02:59:43.100000+00:00".into())
        );
        assert_eq!(
            s("2002-12-14 21:59:43"),
            Value::Str("2002-12-14T21:59:43".into())
        );
        assert_eq!(s("2001-1-14x"), Value::Str("2001-1-14x".into()));
        assert_eq!(
            s("'2001-12-14 21:59:43'"),
            Value::Str("2001-12-14 21:59:43".into())
        );
    }

    #[test]
    fn marks_are_one_based_line_and_column() {
        let doc = parse_one("a: 1\nb:\n  c: [x, y]\n").expect("parse");
        let c = doc.path(&["b", "c"]).expect("c");
        assert_eq!(c.mark, Mark { line: 3, col: 6 });
        let (key, _) = doc.entry("b").expect("b");
        assert_eq!(key.mark, Mark { line: 2, col: 1 });
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let doc = parse_one("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n").expect("parse");
        let other = doc.get("other").expect("other").to_json();
        assert_eq!(other, serde_json::json!({"y": 3, "x": 1}));
    }

    #[test]
    fn merge_key_later_sources_win_like_pyyaml() {
        let text = "a: &a {p: 1, q: 1}\nb: &b {p: 2, r: 2}\nm: {<<: [*a, *b]}\nn: {<<: *a, <<: *b}\no: {<<: [*a, *b], p: 9}\n";
        let doc = parse_one(text).expect("parse");
        assert_eq!(
            doc.get("m").expect("m").to_json(),
            serde_json::json!({"p": 2, "q": 1, "r": 2})
        );
        assert_eq!(
            doc.get("n").expect("n").to_json(),
            serde_json::json!({"p": 2, "q": 1, "r": 2})
        );
        assert_eq!(doc.get("o").expect("o").to_json()["p"], 9);
    }

    #[test]
    fn vault_tag_is_opaque() {
        let doc =
            parse_one("secret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n").expect("parse");
        assert_eq!(doc.get("secret").expect("secret").value, Value::Vaulted);
        assert!(doc.contains_vaulted());
        assert_eq!(doc.to_json()["secret"], VAULTED_PLACEHOLDER);
    }

    #[test]
    fn errors_carry_a_position() {
        let err = parse_one("a: [1, 2\nb: 3\n").expect_err("must fail");
        assert!(err.mark.line >= 1, "{err}");
        assert!(!err.message.is_empty());
    }

    #[test]
    fn limits_are_named_at_the_line_that_crosses_them() {
        let mut bomb = String::from("l0: &l0 [a, a, a, a, a, a, a, a, a]\n");
        for i in 1..9 {
            let refs = vec![format!("*l{}", i - 1); 9].join(", ");
            bomb.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
        }
        let err = parse_one(&bomb).expect_err("alias bomb");
        assert!(err.message.contains("limit yaml.max_alias_nodes"), "{err}");
        assert!(err.message.contains("`*l3`"), "{err}");
        // `*l3` is written on l4's line, the fifth.
        assert_eq!(err.mark.line, 5, "{err}");

        let err = parse_one(&format!("a: {}", "[".repeat(50_000))).expect_err("deep");
        assert!(err.message.contains("limit yaml.max_depth"), "{err}");
        let deep = format!(
            "a: {}1{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(parse_one(&deep).is_ok(), "just inside the limit");

        let nested = format!(
            "a: &a {}1{}\nb: [{}*a{}]\n",
            "[".repeat(60),
            "]".repeat(60),
            "[".repeat(60),
            "]".repeat(60)
        );
        let err = parse_one(&nested).expect_err("depth through an alias");
        assert!(err.message.contains("alias `*a`"), "{err}");
    }

    #[test]
    fn duplicate_and_merged_keys_keep_pyyaml_order_on_wide_maps() {
        let mut text = String::from("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n");
        for i in 0..50_000 {
            text.push_str(&format!("  k{i}: {i}\n"));
        }
        text.push_str("  k0: last\n  y: 9\n");
        let doc = parse_one(&text).expect("parse");
        let m = doc.get("m").expect("m").as_map().expect("map");
        assert_eq!(m.len(), 50_002);
        assert_eq!(doc.path(&["m", "k0"]).and_then(Node::as_str), Some("last"));
        // Explicit keys win over merged ones; merged keys not given explicitly come last.
        assert_eq!(m[m.len() - 1].0.as_str(), Some("x"));
        assert_eq!(
            doc.path(&["m", "y"]).map(|n| n.value.clone()),
            Some(Value::Int(9))
        );
    }

    #[test]
    fn duplicate_keys_keep_the_last() {
        let doc = parse_one("a: 1\na: 2\n").expect("parse");
        assert_eq!(doc.to_json(), serde_json::json!({"a": 2}));
    }
}
