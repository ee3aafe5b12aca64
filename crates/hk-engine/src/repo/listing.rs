//! What `ansible-inventory -i FILE --list` prints, built from an [`Inventory`].
//!
//! Owns: the JSON shape of `--list` (ansible-core 2.19): one entry per group that has direct
//! hosts or children (`all` never lists hosts; empty groups are left out as entries but stay
//! named in their parent's `children`), and `_meta.hostvars` with every host's merged
//! variables minus Ansible's internal ones, hosts without variables left out, plus
//! `_meta.profile`.
//!
//! Must not: print anything secret. A `!vault` value shows Ansible's `{"__ansible_vault": ..}`
//! shape with a placeholder instead of the ciphertext; vaulted files are not read, so their
//! variables are absent.

use std::io::Write;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

use super::inventory::Inventory;
use super::vars::{self, Var};

/// Variables `ansible-inventory` strips from its output (`C.INTERNAL_STATIC_VARS`).
pub const INTERNAL_STATIC_VARS: &[&str] = &[
    "ansible_async_path",
    "ansible_collection_name",
    "ansible_config_file",
    "ansible_dependent_role_names",
    "ansible_diff_mode",
    "ansible_facts",
    "ansible_forks",
    "ansible_inventory_sources",
    "ansible_limit",
    "ansible_play_batch",
    "ansible_play_hosts",
    "ansible_play_hosts_all",
    "ansible_play_role_names",
    "ansible_playbook_python",
    "ansible_role_name",
    "ansible_role_names",
    "ansible_run_tags",
    "ansible_skip_tags",
    "ansible_verbosity",
    "ansible_version",
    "inventory_dir",
    "inventory_file",
    "inventory_hostname",
    "inventory_hostname_short",
    "groups",
    "group_names",
    "hostvars",
    "playbook_dir",
    "play_hosts",
    "role_name",
    "role_names",
    "role_path",
    "role_uuid",
];

/// The JSON `ansible-inventory -i FILE --list` prints for this inventory.
pub fn list_json(inv: &Inventory) -> Value {
    let mut out = group_entries(inv);
    let mut hostvars = Map::new();
    for host in inv.hosts() {
        let Some(vars) = inv.host_vars_view(&host) else {
            continue;
        };
        let shown: Map<String, Value> = vars
            .iter()
            .filter(|(k, _)| !INTERNAL_STATIC_VARS.contains(k))
            .map(|(k, v)| (k.to_string(), vars::listing_value(v)))
            .collect();
        if !shown.is_empty() {
            hostvars.insert(host, Value::Object(shown));
        }
    }
    out.insert(
        "_meta".into(),
        json!({ "hostvars": hostvars, "profile": "inventory_legacy" }),
    );
    Value::Object(out)
}

/// `hk-console inventory --list` as printed: the pretty JSON of [`list_json`], made
/// terminal-safe as `crate::text::json_visible` does, and a final newline. Streamed: each
/// host's variables are merged, written and dropped in turn, so memory stays that of the
/// inventory itself, not of a second copy of every host's variables plus a JSON tree.
pub fn write_list(inv: &Inventory, out: &mut impl Write) -> std::io::Result<()> {
    let mut visible = VisibleJson {
        inner: &mut *out,
        pending: Vec::new(),
    };
    {
        let mut ser = serde_json::Serializer::with_formatter(
            &mut visible,
            serde_json::ser::PrettyFormatter::new(),
        );
        Listing {
            inv,
            groups: group_entries(inv),
        }
        .serialize(&mut ser)
        .map_err(std::io::Error::other)?;
    }
    visible.drain(true)?;
    out.write_all(b"\n")
}

/// The `--list` document, serialized straight from the model.
struct Listing<'a> {
    inv: &'a Inventory,
    groups: Map<String, Value>,
}

impl Serialize for Listing<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let meta = Meta { inv: self.inv };
        let mut map = s.serialize_map(None)?;
        // `list_json` inserts `_meta` last, which replaces a group of that name in place.
        for (name, entry) in &self.groups {
            if name == "_meta" {
                map.serialize_entry(name, &meta)?;
            } else {
                map.serialize_entry(name, entry)?;
            }
        }
        if !self.groups.contains_key("_meta") {
            map.serialize_entry("_meta", &meta)?;
        }
        map.end()
    }
}

struct Meta<'a> {
    inv: &'a Inventory,
}

impl Serialize for Meta<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("hostvars", &HostVars { inv: self.inv })?;
        map.serialize_entry("profile", "inventory_legacy")?;
        map.end()
    }
}

struct HostVars<'a> {
    inv: &'a Inventory,
}

impl Serialize for HostVars<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        // Unique names: each host comes once.
        for (host, vars) in self.inv.host_vars_views() {
            let shown: Vec<(&str, &Var)> = vars
                .into_iter()
                .filter(|(k, _)| !INTERNAL_STATIC_VARS.contains(k))
                .collect();
            if !shown.is_empty() {
                map.serialize_entry(host, &Shown(&shown))?;
            }
        }
        map.end()
    }
}

/// One host's shown variables, in name order, secrets masked as `list_json` masks them.
struct Shown<'a>(&'a [(&'a str, &'a Var)]);

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            if v.secret {
                map.serialize_entry(k, &vars::listing_value(v))?;
            } else {
                map.serialize_entry(k, &v.value)?;
            }
        }
        map.end()
    }
}

/// A writer applying `crate::text::json_visible` to the JSON passing through it, holding
/// back a character split across two writes.
struct VisibleJson<'w, W: Write> {
    inner: &'w mut W,
    pending: Vec<u8>,
}

impl<W: Write> VisibleJson<'_, W> {
    fn drain(&mut self, all: bool) -> std::io::Result<()> {
        let upto = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() && !all => e.valid_up_to(),
            Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        };
        let text = std::str::from_utf8(&self.pending[..upto])
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        self.inner
            .write_all(crate::text::json_visible(text).as_bytes())?;
        self.pending.drain(..upto);
        Ok(())
    }
}

impl<W: Write> Write for VisibleJson<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= 8192 {
            self.drain(false)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.drain(false)?;
        self.inner.flush()
    }
}

/// The group entries of `--list`, in the order `list_json` writes them.
fn group_entries(inv: &Inventory) -> Map<String, Value> {
    let mut out = Map::new();
    let mut seen = std::collections::HashSet::new();
    format_group(inv, "all", &mut out, &mut seen);
    out
}

/// Ansible's `json_inventory.format_group`: depth-first from `all`, each group once.
fn format_group(
    inv: &Inventory,
    group: &str,
    out: &mut Map<String, Value>,
    seen: &mut std::collections::HashSet<String>,
) {
    let mut entry = Map::new();
    if group != "all" {
        let hosts = inv.direct_hosts(group).unwrap_or_default();
        if !hosts.is_empty() {
            entry.insert("hosts".into(), json!(hosts));
        }
    }
    let children = inv.children_of(group).unwrap_or_default();
    if !children.is_empty() {
        entry.insert("children".into(), json!(children));
    }
    // Python builds the parent's entry before its children's and `dict.update`s them in.
    if entry.is_empty() {
        out.remove(group);
    } else {
        out.insert(group.to_string(), Value::Object(entry));
    }
    for child in children {
        if seen.insert(child.clone()) {
            format_group(inv, &child, out, seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn list_shape_matches_ansible() {
        let inv = Inventory::parse_ini(
            "lone a=1\n[p:children]\nc\n[c]\nh1\n[empty]\n[c:vars]\ninventory_dir=x\n",
            Path::new("hosts.ini"),
        )
        .expect("parse");
        let got = list_json(&inv);
        let want = json!({
            "_meta": {
                "hostvars": { "lone": { "a": 1 } },
                "profile": "inventory_legacy"
            },
            "all": { "children": ["ungrouped", "p", "empty"] },
            "ungrouped": { "hosts": ["lone"] },
            "p": { "children": ["c"] },
            "c": { "hosts": ["h1"] }
        });
        assert_eq!(got, want);
    }
}
