//! The `yaml` inventory plugin's format (ansible-core 2.19 `plugins/inventory/yaml.py`), read
//! into the same [`Inventory`] model the INI reader builds.
//!
//! Owns: walking the loaded document (top-level keys are groups; each group's `vars`,
//! `children` and `hosts`), the plugin's own refusals and warnings, and telling a plugin
//! configuration (`plugin:`) apart. Typing scalars, anchors and merge keys belong to
//! `crate::yaml` (the loader Ansible's `DataLoader` stands for); host patterns to
//! `hostpattern`; the graph rules to the model in `mod.rs`.
//!
//! Must not: run a plugin a `plugin:` file names (it is refused by name), or decrypt
//! anything (a `!vault` value stays a secret placeholder).
//!
//! What the real tool does (checked by crates/hk-engine/tests/inventory_parity.rs, `inventories-yaml`):
//! - A group's data that is neither a mapping nor null is skipped with a warning; a
//!   `vars`/`children`/`hosts` that is a string names one entry; one that is a list fails.
//! - Another key of a group that is a mapping is skipped with a warning; null keys quietly.
//! - A host's data that is falsy (`""`, `0`, `[]`, `false`, null) is no variables; any other
//!   non-mapping fails. A host key must be a string (`10:` fails).
//! - A host variable goes to the GROUP of the same name when one exists (`set_variable`
//!   looks groups up first), as in INI.
//! - A child whose data was skipped is still added by name: it must be a known group (or
//!   host), else the file fails.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::hostpattern::{host_names, HostNames};
use super::{Inventory, InventoryError, LineVars};
use crate::repo::vars::{var_from_node, Origin, Var, VarFile};
use crate::yaml::{self, Mark, Node, Value};

/// Why the yaml plugin did not read a file.
pub(super) enum YamlFailure {
    /// Ansible goes on to the next plugin (ini): the text is not a YAML inventory. `mapping`
    /// says whether it loaded as a YAML mapping (then its error is the one to show first).
    NotRead {
        error: InventoryError,
        mapping: bool,
    },
    /// A plugin configuration file (`plugin: NAME`): refused, never run.
    Plugin(InventoryError),
}

/// Adds one file's groups and hosts to an inventory (also the toml plugin's walker's).
pub(super) struct Reader {
    pub(super) inv: Inventory,
    pub(super) file: PathBuf,
    pub(super) origin_file: VarFile,
    pub(super) warnings: Vec<String>,
    /// The toml plugin takes a host's data as it is (no `or {}`): only a mapping.
    pub(super) host_data_must_be_mapping: bool,
}

/// Add the text of a YAML (or JSON) inventory named `path` to `inv` (its own layers only:
/// no group_vars/host_vars; the graph is not finished).
pub(super) fn parse_yaml(
    inv: Inventory,
    text: &str,
    path: &Path,
) -> Result<Inventory, YamlFailure> {
    let not_read = |line: usize, message: String, mapping: bool| YamlFailure::NotRead {
        error: InventoryError::Syntax {
            file: path.to_path_buf(),
            line,
            message,
        },
        mapping,
    };
    // Ansible's loader tries JSON first, YAML only when that fails (they type `1e3` apart).
    let doc = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(json) => json_node(&json, yaml::parse_one(text).ok().as_ref())
            .map_err(|(mark, message)| not_read(mark.line, message, true))?,
        Err(_) => match yaml::parse_one(text) {
            Ok(doc) => doc,
            Err(e) => {
                return Err(not_read(
                    e.mark.line,
                    format!("not YAML: {}", e.message),
                    false,
                ))
            }
        },
    };
    let entries = match &doc.value {
        _ if is_falsy(&doc) => {
            return Err(not_read(
                doc.mark.line,
                "Parsed empty YAML file".into(),
                false,
            ))
        }
        Value::Map(entries) => unique(entries),
        other => {
            return Err(not_read(
                doc.mark.line,
                format!(
                    "YAML inventory has invalid structure, it should be a dictionary, got: {}",
                    py_type(other)
                ),
                false,
            ))
        }
    };
    if let Some((k, v)) = entries.iter().find(|(k, _)| k.as_str() == Some("plugin")) {
        if !is_falsy(v) {
            return Err(YamlFailure::Plugin(InventoryError::Syntax {
                file: path.to_path_buf(),
                line: k.mark.line,
                message: format!(
                    "a plugin inventory (`plugin: {}`): Ansible runs that plugin to make the hosts; hk-console reads only static inventories (INI, YAML, TOML), so it is refused, not read",
                    v.as_key().unwrap_or_else(|| v.to_json().to_string())
                ),
            }));
        }
    }
    let mut r = Reader {
        inv,
        file: path.to_path_buf(),
        origin_file: VarFile::from(path),
        warnings: Vec::new(),
        host_data_must_be_mapping: false,
    };
    for (k, v) in entries {
        r.group(k, v).map_err(|error| YamlFailure::NotRead {
            error,
            mapping: true,
        })?;
    }
    let mut inv = r.inv;
    inv.warnings.extend(r.warnings);
    Ok(inv)
}

impl Reader {
    pub(super) fn err(&self, at: Mark, message: impl Into<String>) -> InventoryError {
        InventoryError::Syntax {
            file: self.file.clone(),
            line: at.line,
            message: message.into(),
        }
    }

    pub(super) fn warn(&mut self, at: Mark, message: String) {
        self.warnings
            .push(format!("{}:{}: {message}", self.file.display(), at.line));
    }

    /// `_parse_group`: the group's name as Ansible would return it (also for a skipped one).
    fn group(&mut self, key: &Node, data: &Node) -> Result<String, InventoryError> {
        let shown = py_str(key);
        if !matches!(data.value, Value::Map(_) | Value::Null) {
            self.warn(
                key.mark,
                format!("Skipping '{shown}' as this is not a valid group definition"),
            );
            return Ok(shown);
        }
        let name = match &key.value {
            _ if is_falsy(key) => {
                return Err(self.err(
                    key.mark,
                    format!("Unable to add group {shown}: Invalid empty/false group name provided: {shown}"),
                ))
            }
            Value::Str(s) => s.clone(),
            other => {
                return Err(self.err(
                    key.mark,
                    format!(
                        "Unable to add group {shown}: Invalid group name supplied, expected a string but got {} for {shown}",
                        py_type(other)
                    ),
                ))
            }
        };
        let g = self.inv.add_group(&name);
        let Value::Map(entries) = &data.value else {
            return Ok(name);
        };
        let entries = unique(entries);
        // The three sections are checked before any key is read.
        let mut sections: Vec<(&Node, Node)> = Vec::with_capacity(entries.len());
        for &(k, v) in &entries {
            let section = matches!(k.as_str(), Some("vars" | "children" | "hosts"));
            let v = match &v.value {
                // A string names one entry with no data.
                Value::Str(_) if section => Node {
                    value: Value::Map(vec![(
                        v.clone(),
                        Node {
                            value: Value::Null,
                            mark: v.mark,
                        },
                    )]),
                    mark: v.mark,
                },
                Value::Map(_) | Value::Null => v.clone(),
                other if section => {
                    return Err(self.err(
                        k.mark,
                        format!(
                            "Invalid \"{}\" entry for \"{name}\" group, requires a dictionary, found \"{}\" instead.",
                            py_str(k),
                            py_type(other)
                        ),
                    ))
                }
                _ => v.clone(),
            };
            sections.push((k, v));
        }
        for (k, v) in &sections {
            let items = match &v.value {
                Value::Null => continue,
                Value::Map(items) => unique(items),
                other => {
                    self.warn(
                        k.mark,
                        format!(
                            "Skipping key ({}) in group ({name}) as it is not a mapping, it is a {}",
                            py_str(k),
                            py_type(other)
                        ),
                    );
                    continue;
                }
            };
            match k.as_str() {
                Some("vars") => {
                    for (var, value) in items {
                        self.set_group_var(g, var, value)?;
                    }
                }
                Some("children") => {
                    for (sub, subdata) in items {
                        let child = self.group(sub, subdata)?;
                        self.add_child(g, &child, sub.mark)?;
                    }
                }
                Some("hosts") => {
                    for (pattern, hvars) in items {
                        self.hosts(g, pattern, hvars)?;
                    }
                }
                _ => self.warn(
                    k.mark,
                    format!(
                        "Skipping unexpected key ({}) in group ({name}), only \"vars\", \"children\" and \"hosts\" are valid",
                        py_str(k)
                    ),
                ),
            }
        }
        Ok(name)
    }

    /// `InventoryData.add_child`: a group, else a host, by name.
    pub(super) fn add_child(
        &mut self,
        g: usize,
        child: &str,
        at: Mark,
    ) -> Result<(), InventoryError> {
        if let Some(&c) = self.inv.group_index.get(child) {
            return self.inv.add_child(g, c).map_err(|m| self.err(at, m));
        }
        if self.inv.host_index.contains_key(child) {
            self.inv.add_host(child, g, None);
            return Ok(());
        }
        Err(self.err(at, format!("{child} is not a known host nor group")))
    }

    pub(super) fn set_group_var(
        &mut self,
        g: usize,
        key: &Node,
        value: &Node,
    ) -> Result<(), InventoryError> {
        let name = py_key(key);
        if name == "ansible_group_priority" {
            let p = python_int(value).ok_or_else(|| {
                self.err(
                    key.mark,
                    format!(
                        "ansible_group_priority must be an integer, got: {}",
                        value.to_json()
                    ),
                )
            })?;
            self.inv.groups[g].priority = p;
            return Ok(());
        }
        let var = var_from_node(value, key.mark, &self.file);
        self.inv.groups[g].vars.insert(name, var);
        Ok(())
    }

    pub(super) fn hosts(
        &mut self,
        g: usize,
        pattern: &Node,
        data: &Node,
    ) -> Result<(), InventoryError> {
        let Value::Str(text) = &pattern.value else {
            return Err(self.err(
                pattern.mark,
                format!(
                    "Host pattern {} must be a string. Enclose integers/floats in quotation marks.",
                    py_str(pattern)
                ),
            ));
        };
        let (names, port) = host_names(text).map_err(|source| InventoryError::HostPattern {
            file: self.file.clone(),
            line: pattern.mark.line,
            source,
        })?;
        let names: Vec<String> = match names {
            HostNames::One(one) => vec![one.to_string()],
            HostNames::Many(many) => many,
        };
        let entries: Vec<(&Node, &Node)> = match &data.value {
            _ if is_falsy(data) && !self.host_data_must_be_mapping => Vec::new(),
            Value::Map(items) => unique(items),
            _ => {
                return Err(self.err(
                    pattern.mark,
                    format!(
                        "Invalid data from file, expected dictionary and got:\n\n{}",
                        py_str(data)
                    ),
                ))
            }
        };
        let line_vars: Vec<(String, Var)> = entries
            .iter()
            .map(|(k, v)| (py_key(k), var_from_node(v, k.mark, &self.file)))
            .collect();
        let port_origin = port.filter(|p| *p != 0).map(|p| {
            (
                p,
                Origin {
                    file: self.origin_file.clone(),
                    line: pattern.mark.line,
                    col: pattern.mark.col,
                },
            )
        });
        let shared = (!line_vars.is_empty()).then(|| {
            let line = LineVars::new(line_vars);
            (line.bytes, Arc::new(line))
        });
        for name in &names {
            if name.is_empty() {
                return Err(self.err(pattern.mark, format!("Invalid empty host name in: {text}")));
            }
            let as_group = self.inv.group_index.get(name.as_str()).copied();
            let h = self.inv.add_host(name, g, port_origin.as_ref());
            // `InventoryData.set_variable` looks a name up as a group first.
            if let Some(group) = as_group {
                for (k, v) in shared.iter().flat_map(|(_, m)| m.iter()) {
                    if k == "ansible_group_priority" {
                        return Err(self.err(
                            pattern.mark,
                            format!("`ansible_group_priority` on host {name}, which is also a group's name: refused (Ansible would set that group's priority)"),
                        ));
                    }
                    self.inv.groups[group].vars.insert(k.clone(), v.clone());
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

/// A mapping's entries as the Python dict PyYAML builds: each key once, at its first place,
/// with its last value.
fn unique(entries: &[(Node, Node)]) -> Vec<(&Node, &Node)> {
    let mut out: Vec<(&Node, &Node)> = Vec::with_capacity(entries.len());
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for (k, v) in entries {
        let key = format!("{:?}", k.value);
        match index.get(&key) {
            Some(&i) => out[i].1 = v,
            None => {
                index.insert(key, out.len());
                out.push((k, v));
            }
        }
    }
    out
}

/// Python's truth of a loaded value.
fn is_falsy(n: &Node) -> bool {
    match &n.value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Float(f) => *f == 0.0,
        Value::Str(s) => s.is_empty(),
        Value::Seq(items) => items.is_empty(),
        Value::Map(entries) => entries.is_empty(),
        Value::Vaulted => false,
    }
}

/// Python's name of a loaded value's type, as the plugin's messages print it (2.19 prints
/// its tagged subclasses; the base type is what is meant).
pub(super) fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<class 'NoneType'>",
        Value::Bool(_) => "<class 'bool'>",
        Value::Int(_) => "<class 'int'>",
        Value::Float(_) => "<class 'float'>",
        Value::Str(_) | Value::Vaulted => "<class 'str'>",
        Value::Seq(_) => "<class 'list'>",
        Value::Map(_) => "<class 'dict'>",
    }
}

/// `str()` of a scalar as Python prints it in a message.
pub(super) fn py_str(n: &Node) -> String {
    match &n.value {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Str(s) => s.clone(),
        _ => n.as_key().unwrap_or_else(|| n.to_json().to_string()),
    }
}

/// A variable name as `ansible-inventory` prints it (`json.dumps` of the key).
fn py_key(n: &Node) -> String {
    n.as_key().unwrap_or_else(|| n.to_json().to_string())
}

/// Python's `int(value)` for `ansible_group_priority`.
fn python_int(n: &Node) -> Option<i64> {
    match &n.value {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Int(i) => Some(*i),
        Value::Float(f) if f.is_finite() => Some(f.trunc() as i64),
        Value::Str(s) => super::pytext::int(s),
        _ => None,
    }
}

/// A JSON document as a node tree; positions are taken from the same text read as YAML
/// where it has the same key (JSON is YAML's flow style), else the enclosing one. An integer
/// beyond 64 bits (Python keeps it exact; serde_json would make it a float) is refused.
fn json_node(v: &serde_json::Value, yaml: Option<&Node>) -> Result<Node, (Mark, String)> {
    let mark = yaml.map_or(Mark { line: 1, col: 1 }, |n| n.mark);
    let value = match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), yaml.map(|y| &y.value)) {
            (Some(i), _) => Value::Int(i),
            // Written as a float: the same text read as YAML says so (a YAML 1.1 float, or
            // a plain scalar such as `1e3` with a fraction or an exponent).
            (None, Some(Value::Float(_))) if n.is_f64() => {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
            (None, Some(Value::Str(written)))
                if n.is_f64() && written.contains(['.', 'e', 'E']) =>
            {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
            _ => {
                return Err((
                    mark,
                    format!("the number {n} is an integer beyond 64 bits (or cannot be told from one): Ansible keeps it exact, hk-console cannot, so it is refused"),
                ))
            }
        },
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(items) => Value::Seq(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| json_node(item, yaml.and_then(|n| n.as_seq()?.get(i))))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(map) => Value::Map(
            map.iter()
                .map(|(k, item)| {
                    let entry = yaml.and_then(|n| n.entry(k));
                    let key = Node {
                        value: Value::Str(k.clone()),
                        mark: entry.map_or(mark, |(k, _)| k.mark),
                    };
                    Ok((key, json_node(item, entry.map(|(_, v)| v))?))
                })
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok(Node { value, mark })
}
