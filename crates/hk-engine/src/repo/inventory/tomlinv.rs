//! The `toml` inventory plugin's format (ansible-core 2.19 `plugins/inventory/toml.py`), read
//! into the same [`Inventory`] model as INI and YAML.
//!
//! Owns: loading TOML with positions (each value's line), the plugin's own rules (top-level
//! tables are groups; `vars` and `hosts` tables, `children` a list of names; other keys
//! skipped with a warning; a non-table group skipped with a warning). Groups, host patterns
//! and variables go through the yaml reader's [`Reader`], which holds Ansible's
//! `InventoryData` rules once.
//!
//! Must not: guess a value Ansible would print differently: a TOML date or time (Python
//! prints its `isoformat()`) and `nan`/`inf` are refused, naming the line.

use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::yamlinv::{py_str, py_type, Reader};
use super::{Inventory, InventoryError};
use crate::repo::vars::VarFile;
use crate::yaml::{Mark, Node, Value};

/// Add the text of a TOML inventory named `path` to `inv` (the graph is not finished).
pub(super) fn parse_toml(
    inv: Inventory,
    text: &str,
    path: &Path,
) -> Result<Inventory, InventoryError> {
    let err = |at: usize, message: String| InventoryError::Syntax {
        file: path.to_path_buf(),
        line: mark_at(text, at).line,
        message,
    };
    let table = DeTable::parse(text).map_err(|e| {
        err(
            e.span().map_or(0, |s| s.start),
            format!("not TOML: {}", e.message()),
        )
    })?;
    let doc = table_node(table.get_ref(), 0, &Lines::new(text)).map_err(|(at, m)| err(at, m))?;
    let Value::Map(entries) = &doc.value else {
        return Err(err(0, "not a TOML table".into()));
    };
    if entries.is_empty() {
        return Err(err(0, "Parsed empty TOML file".into()));
    }
    if let Some((k, v)) = entries.iter().find(|(k, _)| k.as_str() == Some("plugin")) {
        if !matches!(&v.value, Value::Str(s) if s.is_empty())
            && !matches!(v.value, Value::Bool(false) | Value::Int(0))
        {
            return Err(InventoryError::Syntax {
                file: path.to_path_buf(),
                line: k.mark.line,
                message: format!(
                    "Plugin configuration TOML file, not TOML inventory (`plugin = {}`): hk-console reads only static inventories, so it is refused",
                    py_str(v)
                ),
            });
        }
    }
    let mut r = Reader {
        inv,
        file: path.to_path_buf(),
        origin_file: VarFile::from(path),
        warnings: Vec::new(),
        host_data_must_be_mapping: true,
    };
    for (k, v) in entries {
        group(&mut r, k, v)?;
    }
    let mut inv = r.inv;
    inv.warnings.extend(r.warnings);
    Ok(inv)
}

/// The plugin's `_parse_group`.
fn group(r: &mut Reader, key: &Node, data: &Node) -> Result<(), InventoryError> {
    let Value::Str(name) = &key.value else {
        // TOML keys are strings; a `children` entry may not be.
        return Err(r.err(
            key.mark,
            format!(
                "Invalid group name supplied, expected a string but got {} for {}",
                py_type(&key.value),
                py_str(key)
            ),
        ));
    };
    let Value::Map(entries) = &data.value else {
        r.warn(
            key.mark,
            format!("Skipping '{name}' as this is not a valid group definition"),
        );
        return Ok(());
    };
    if name.is_empty() {
        return Err(r.err(
            key.mark,
            "Invalid empty/false group name provided: ".to_string(),
        ));
    }
    let g = r.inv.add_group(name);
    for (k, v) in entries {
        match (k.as_str(), &v.value) {
            (Some("vars"), Value::Map(vars)) => {
                for (var, value) in vars {
                    r.set_group_var(g, var, value)?;
                }
            }
            (Some("children"), Value::Seq(children)) => {
                for child in children {
                    let empty = Node {
                        value: Value::Map(Vec::new()),
                        mark: child.mark,
                    };
                    group(r, child, &empty)?;
                    let child_name = py_str(child);
                    r.add_child(g, &child_name, child.mark)?;
                }
            }
            (Some("hosts"), Value::Map(hosts)) => {
                for (pattern, hvars) in hosts {
                    r.hosts(g, pattern, hvars)?;
                }
            }
            (Some(section @ ("vars" | "hosts")), other) => {
                return Err(r.err(
                    k.mark,
                    format!(
                        "Invalid \"{section}\" entry for \"{name}\" group, requires a dict, found \"{}\" instead.",
                        py_type(other)
                    ),
                ))
            }
            (Some("children"), other) => {
                return Err(r.err(
                    k.mark,
                    format!(
                        "Invalid \"children\" entry for \"{name}\" group, requires a list, found \"{}\" instead.",
                        py_type(other)
                    ),
                ))
            }
            _ => r.warn(
                k.mark,
                format!(
                    "Skipping unexpected key \"{}\" in group \"{name}\", only \"vars\", \"children\" and \"hosts\" are valid",
                    py_str(k)
                ),
            ),
        }
    }
    Ok(())
}

/// Line and column (1-based) of byte offsets in one text. The line starts are found once:
/// counting newlines from the start for every value made a large file quadratic (600 hosts
/// took 25 ms, 2,400 took 290 ms).
struct Lines<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Lines<'t> {
    fn new(text: &'t str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { text, starts }
    }

    fn mark(&self, at: usize) -> Mark {
        let mut end = at.min(self.text.len());
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        // The last line starting at or before `end`.
        let line = self.starts.partition_point(|&s| s <= end).max(1);
        let start = self.starts[line - 1];
        let col = self.text[start..end].chars().count() + 1;
        Mark { line, col }
    }
}

/// Line and column (1-based) of a byte offset (for the one-off error positions).
fn mark_at(text: &str, at: usize) -> Mark {
    Lines::new(text).mark(at)
}

type Refusal = (usize, String);

fn table_node(table: &DeTable<'_>, at: usize, text: &Lines<'_>) -> Result<Node, Refusal> {
    let mut entries = Vec::with_capacity(table.len());
    for (k, v) in table {
        let key = Node {
            value: Value::Str(k.get_ref().to_string()),
            mark: text.mark(k.span().start),
        };
        entries.push((key, value_node(v, text)?));
    }
    Ok(Node {
        value: Value::Map(entries),
        mark: text.mark(at),
    })
}

fn value_node(v: &Spanned<DeValue<'_>>, text: &Lines<'_>) -> Result<Node, Refusal> {
    let at = v.span().start;
    let value = match v.get_ref() {
        DeValue::String(s) => Value::Str(s.to_string()),
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => Value::Int(n),
            Err(_) => return Err((at, format!("the integer {i} does not fit 64 bits"))),
        },
        DeValue::Float(f) => match f.as_str().parse::<f64>() {
            Ok(x) if x.is_finite() => Value::Float(x),
            _ => {
                return Err((
                    at,
                    format!("the float {f}: Ansible prints it as JSON cannot (NaN/Infinity): refused"),
                ))
            }
        },
        DeValue::Datetime(d) => {
            return Err((
                at,
                format!("the date/time {d}: Ansible prints Python's isoformat() of it, which hk-console does not model: refused (quote it to make it a string)"),
            ))
        }
        DeValue::Array(items) => Value::Seq(
            items
                .iter()
                .map(|item| value_node(item, text))
                .collect::<Result<_, _>>()?,
        ),
        DeValue::Table(t) => return table_node(t, at, text),
    };
    Ok(Node {
        value,
        mark: text.mark(at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newline count from the start, as the marks were computed before the index.
    fn naive(text: &str, at: usize) -> (usize, usize) {
        let mut end = at.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &text[..end];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }

    #[test]
    fn the_line_index_gives_every_offset_the_mark_a_count_from_the_start_gives() {
        let text = "[k3s]\nhosts = { \"nœud-1\" = {} }\n\n# é\nvars = { a = 1 }";
        let lines = Lines::new(text);
        for at in 0..=text.len() + 2 {
            let m = lines.mark(at);
            assert_eq!((m.line, m.col), naive(text, at), "offset {at}");
        }
        assert_eq!((lines.mark(0).line, lines.mark(0).col), (1, 1));
    }
}
