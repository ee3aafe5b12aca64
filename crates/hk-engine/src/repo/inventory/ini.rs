//! The INI inventory parser: sections, `[g:children]`, `[g:vars]`, host lines with inline
//! variables, Ansible's pending declarations, and the text decoding and line splitting that
//! come before it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use regex::Regex;

use super::hostpattern::{host_names, HostNames};
use super::pyliteral;
use super::pytext;
use super::shlex::shlex_split_borrowed;
use super::{Inventory, InventoryError, LineVars, MAX_MERGED_BYTES, UNGROUPED};
use crate::repo::vars::{Origin, Var, VarFile};

// ----- the INI parser -----

#[derive(Debug)]
enum PendingState {
    Vars,
    Children { parents: Vec<usize> },
}

#[derive(Debug)]
struct Pending {
    name: String,
    line: usize,
    state: PendingState,
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Hosts,
    Children,
    Vars,
}

pub(super) struct IniParser {
    pub(super) inv: Inventory,
    file: PathBuf,
    /// `file` as every variable's origin holds it (shared, not copied per variable).
    origin_file: VarFile,
    line: usize,
    /// Ansible's `pending_declarations`, in insertion order (the first one is reported).
    pending: Vec<Pending>,
}

struct Patterns {
    section: Regex,
    groupname: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        #[allow(clippy::unwrap_used)] // constant patterns, exercised by every test
        Patterns {
            section: Regex::new(r"^\[([^:\]\s\x1c-\x1f]+)(?::(\w+))?\][\s\x1c-\x1f]*(?:#.*)?$")
                .unwrap(),
            groupname: Regex::new(r"^([^:\]\s\x1c-\x1f]+)[\s\x1c-\x1f]*(?:#.*)?$").unwrap(),
        }
    })
}

impl IniParser {
    /// A parser adding the file at `path` to `inv` (the groups and hosts earlier sources of
    /// one inventory made; Ansible's plugins all add to one `InventoryData`).
    pub(super) fn adding_to(inv: Inventory, path: &Path) -> Self {
        IniParser {
            inv,
            file: path.to_path_buf(),
            origin_file: VarFile::from(path),
            line: 0,
            pending: Vec::new(),
        }
    }

    fn err(&self, message: impl Into<String>) -> InventoryError {
        self.err_at(self.line, message)
    }

    fn err_at(&self, line: usize, message: impl Into<String>) -> InventoryError {
        InventoryError::Syntax {
            file: self.file.clone(),
            line,
            message: message.into(),
        }
    }

    fn origin(&self, col: usize) -> Origin {
        Origin {
            file: self.origin_file.clone(),
            line: self.line,
            col,
        }
    }

    fn pending_pos(&self, name: &str) -> Option<usize> {
        self.pending.iter().position(|p| p.name == name)
    }

    pub(super) fn parse(&mut self, text: &str) -> Result<(), InventoryError> {
        let mut group = UNGROUPED;
        let mut state = State::Hosts;
        let lines = pytext::splitlines(text);
        // Most lines of a large inventory are one host each: the index grows once, not by
        // rehashing every name it holds at each doubling.
        self.inv.host_index.reserve(lines.len());
        for raw in lines {
            self.line += 1;
            let line = pytext::strip(raw);
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            // The section pattern starts with `[`: no other line is tried against it.
            let section = if line.starts_with('[') {
                patterns().section.captures(line)
            } else {
                None
            };
            if let Some(caps) = section {
                // Ansible's INI plugin calls `to_safe_group_name` without `force`, and the
                // default TRANSFORM_INVALID_GROUP_CHARS is "never": `k3s-dev` stays as is.
                let name = caps.get(1).map_or("", |m| m.as_str()).to_string();
                let kind = caps.get(2).map(|m| m.as_str());
                state = match kind {
                    None | Some("hosts") => State::Hosts,
                    Some("children") => State::Children,
                    Some("vars") => State::Vars,
                    Some(other) => {
                        return Err(self.err(format!(
                            "Section [{}:{other}] has unknown type: {other} (expected [group], [group:children] or [group:vars])",
                            caps.get(1).map_or("", |m| m.as_str())
                        )))
                    }
                };
                if !self.inv.group_index.contains_key(&name) {
                    if state == State::Vars && self.pending_pos(&name).is_none() {
                        self.pending.push(Pending {
                            name: name.clone(),
                            line: self.line,
                            state: PendingState::Vars,
                        });
                    }
                    self.inv.add_group(&name);
                }
                group = self.inv.group_index[&name];
                if state != State::Vars {
                    if let Some(pos) = self.pending_pos(&name) {
                        match self.pending[pos].state {
                            PendingState::Children { .. } => self.add_pending_children(&name)?,
                            PendingState::Vars => {
                                self.pending.remove(pos);
                            }
                        }
                    }
                }
                continue;
            }
            if line.starts_with('[') && line.ends_with(']') {
                return Err(self.err(format!(
                    "Invalid section entry: '{line}'. Please make sure that there are no spaces in the section entry, and that there are no other invalid characters (expected [group], [group:children] or [group:vars])"
                )));
            }
            match state {
                State::Hosts => self.host_line(line, raw, group)?,
                State::Vars => self.vars_line(line, raw, group)?,
                State::Children => self.children_line(line, group)?,
            }
        }
        if let Some(decl) = self.pending.first() {
            let message = match &decl.state {
                PendingState::Vars => format!(
                    "Section [{0}:vars] not valid for undefined group '{0}' (declare it with [{0}] or [{0}:children])",
                    decl.name
                ),
                PendingState::Children { parents } => {
                    let parent = parents
                        .last()
                        .map(|&p| self.inv.groups[p].name.clone())
                        .unwrap_or_default();
                    format!(
                        "Section [{parent}:children] includes undefined group '{}' (expected a group declared with [{}] or [{}:children])",
                        decl.name, decl.name, decl.name
                    )
                }
            };
            return Err(self.err_at(decl.line, message));
        }
        Ok(())
    }

    fn add_pending_children(&mut self, name: &str) -> Result<(), InventoryError> {
        let Some(pos) = self.pending_pos(name) else {
            return Ok(());
        };
        let parents = match &self.pending[pos].state {
            PendingState::Children { parents } => parents.clone(),
            PendingState::Vars => Vec::new(),
        };
        let child = self.inv.group_index[name];
        for parent in parents {
            self.inv.add_child(parent, child).map_err(|m| self.err(m))?;
            let parent_name = self.inv.groups[parent].name.clone();
            if let Some(pp) = self.pending_pos(&parent_name) {
                if matches!(self.pending[pp].state, PendingState::Children { .. }) {
                    self.add_pending_children(&parent_name)?;
                }
            }
        }
        if let Some(pos) = self.pending_pos(name) {
            self.pending.remove(pos);
        }
        Ok(())
    }

    fn children_line(&mut self, line: &str, group: usize) -> Result<(), InventoryError> {
        let Some(child) = patterns()
            .groupname
            .captures(line)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_string())
        else {
            return Err(self.err(format!("Expected group name, got: {line}")));
        };
        match self.inv.group_index.get(&child) {
            Some(&c) => self.inv.add_child(group, c).map_err(|m| self.err(m)),
            None => {
                match self.pending_pos(&child) {
                    None => self.pending.push(Pending {
                        name: child,
                        line: self.line,
                        state: PendingState::Children {
                            parents: vec![group],
                        },
                    }),
                    Some(pos) => match &mut self.pending[pos].state {
                        PendingState::Children { parents } => parents.push(group),
                        // Python would raise a KeyError on 'parents' here.
                        PendingState::Vars => {
                            return Err(
                                self.err(format!("group '{child}' is pending as a vars section"))
                            )
                        }
                    },
                }
                Ok(())
            }
        }
    }

    fn vars_line(&mut self, line: &str, raw: &str, group: usize) -> Result<(), InventoryError> {
        let Some((k, v)) = line.split_once('=') else {
            return Err(self.err(format!("Expected key=value, got: {line}")));
        };
        let (k, v) = (pytext::strip(k), pytext::strip(v));
        let value = pyliteral::parse_value(v).map_err(|m| self.err(format!("{k}: {m}")))?;
        let col = column_of(raw, k);
        self.set_group_var(group, k, value, col)
    }

    fn set_group_var(
        &mut self,
        group: usize,
        k: &str,
        value: serde_json::Value,
        col: usize,
    ) -> Result<(), InventoryError> {
        if k == "ansible_group_priority" {
            let p = python_int(&value).ok_or_else(|| {
                self.err(format!(
                    "ansible_group_priority must be an integer, got: {value}"
                ))
            })?;
            self.inv.groups[group].priority = p;
            return Ok(());
        }
        let var = Var {
            value,
            origin: self.origin(col),
            secret: false,
        };
        self.inv.groups[group].vars.insert(k.to_string(), var);
        Ok(())
    }

    fn host_line(&mut self, line: &str, raw: &str, group: usize) -> Result<(), InventoryError> {
        let tokens = shlex_split_borrowed(line)
            .map_err(|e| self.err(format!("Error parsing host definition '{line}': {e}")))?;
        let Some(pattern) = tokens.first() else {
            return Err(self.err(format!("Expected a host name, got: {line}")));
        };
        let (names, port) = host_names(pattern).map_err(|source| InventoryError::HostPattern {
            file: self.file.clone(),
            line: self.line,
            source,
        })?;
        let expanded: Vec<&str>;
        let names: &[&str] = match &names {
            HostNames::One(one) => std::slice::from_ref(one),
            HostNames::Many(many) => {
                expanded = many.iter().map(String::as_str).collect();
                &expanded
            }
        };
        // Each host gets its own copy of the line's variables.
        if names.len().saturating_mul(line.len()) > MAX_MERGED_BYTES {
            return Err(self.err(format!(
                "{} hosts each copying this {}-byte line's variables exceed {} MiB (limit inventory.max_merged_bytes)",
                names.len(),
                line.len(),
                MAX_MERGED_BYTES / (1024 * 1024)
            )));
        }
        // One set for every host of the line (a range of a thousand hosts shares it): a
        // repeated key keeps its last value and column.
        let mut line_vars = Vec::with_capacity(tokens.len() - 1);
        // Tokens come in line order: each `k=` is searched for after the previous one, so a
        // long line is scanned once, not once per variable.
        let mut cursor = 0;
        for t in &tokens[1..] {
            let Some((k, v)) = t.split_once('=') else {
                return Err(self.err(format!(
                    "Expected key=value host variable assignment, got: {t}"
                )));
            };
            let value = pyliteral::parse_value(v).map_err(|m| self.err(format!("{k}: {m}")))?;
            let col = match find_assignment(raw, cursor, k) {
                Some(i) => {
                    cursor = i + k.len() + 1;
                    raw[..i].chars().count() + 1
                }
                // Not written as-is (a quoted key): no column to point at.
                None => 1,
            };
            let var = Var {
                value,
                origin: self.origin(col),
                secret: false,
            };
            line_vars.push((k.to_string(), var));
        }
        // Only a host created here with a port keeps an origin of its own.
        let port_origin = port
            .filter(|p| *p != 0)
            .map(|p| (p, self.origin(column_of(raw, pattern))));
        let shared = (!line_vars.is_empty()).then(|| {
            let line = LineVars::new(line_vars);
            (line.bytes, Arc::new(line))
        });
        for &name in names {
            if name.is_empty() {
                return Err(self.err(format!("Invalid empty host name in: {line}")));
            }
            let as_group = self.inv.group_index.get(name).copied();
            let h = self.inv.add_host(name, group, port_origin.as_ref());
            // Ansible's `InventoryData.set_variable` looks the name up as a group first:
            // `bastion x=1` under any section, once a group `bastion` exists, sets a
            // variable of that group (for all its hosts), not of the host `bastion`.
            if let Some(g) = as_group {
                for (k, v) in shared.iter().flat_map(|(_, m)| m.iter()) {
                    self.set_group_var(g, k, v.value.clone(), v.origin.col)?;
                }
                continue;
            }
            if let Some((bytes, shared)) = &shared {
                let host = &mut self.inv.hosts[h];
                host.vars.push(shared.clone());
                host.vars_bytes = host.vars_bytes.saturating_add(*bytes);
            }
        }
        Ok(())
    }
}

/// Where `k=` first starts in `raw` at or after byte `from` (the `str::find` of `"{k}="`,
/// without building that needle for every variable of every host line).
fn find_assignment(raw: &str, from: usize, k: &str) -> Option<usize> {
    let rest = raw.get(from..)?.as_bytes();
    let key = k.as_bytes();
    rest.iter()
        .enumerate()
        .filter(|&(e, &b)| b == b'=' && e >= key.len())
        .map(|(e, _)| e - key.len())
        .find(|&at| &rest[at..at + key.len()] == key)
        .map(|at| from + at)
}

/// Python's `int(value)` for `ansible_group_priority`.
fn python_int(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Bool(b) => Some(i64::from(*b)),
        serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        serde_json::Value::String(s) => pytext::int(s),
        _ => None,
    }
}

/// 1-based column of `needle` in the raw line (for provenance), 1 if not found.
fn column_of(raw: &str, needle: &str) -> usize {
    raw.find(needle).map_or(1, |i| raw[..i].chars().count() + 1)
}

/// The file as text, read as Ansible reads it: bytes that are not UTF-8 are kept (Python's
/// `surrogateescape`) and shown by ansible-inventory as `?` each, which is what they become
/// here. The warnings name the lines where that happened.
pub(super) fn decode_ini(bytes: Vec<u8>, path: &Path) -> (String, Vec<String>) {
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return (text, Vec::new()),
        Err(e) => e.into_bytes(),
    };
    let (text, lines) = pytext::decode_lossy_like_ansible(&bytes);
    let warnings = lines
        .into_iter()
        .map(|line| {
            format!(
                "{}:{line}: bytes that are not UTF-8, read as `?` each (what ansible-inventory prints for them; a play would see the raw bytes)",
                path.display()
            )
        })
        .collect();
    (text, warnings)
}

#[cfg(test)]
mod tests {
    use super::find_assignment;

    /// The column search is `str::find` of `"{k}="` from the cursor, quirks included (a key
    /// met first inside an earlier value is where the column points).
    #[test]
    fn find_assignment_is_find_of_the_key_and_equals() {
        let cases = [
            ("h a=xb=1 b=2", 0, "b"),
            ("h a=xb=1 b=2", 6, "b"),
            ("h aa=aaa=1", 0, "aa"),
            ("h aaa=1", 0, "aa"),
            ("h =1 x=2", 0, ""),
            ("h x=1", 0, ""),
            ("h x", 0, ""),
            ("h café=1 é=2", 0, "é"),
            ("h café=1 é=2", 3, "é"),
            ("h k=1", 99, "k"),
            ("h kk", 0, "k"),
        ];
        for (raw, from, k) in cases {
            let want = raw
                .get(from..)
                .and_then(|rest| rest.find(&format!("{k}=")))
                .map(|i| from + i);
            assert_eq!(find_assignment(raw, from, k), want, "{raw:?} {from} {k:?}");
        }
    }
}
