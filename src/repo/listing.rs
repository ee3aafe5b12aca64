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

use serde_json::{json, Map, Value};

use super::inventory::Inventory;
use super::vars;

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
    let mut out = Map::new();
    let mut seen = std::collections::HashSet::new();
    format_group(inv, "all", &mut out, &mut seen);

    let mut hostvars = Map::new();
    for host in inv.hosts() {
        let Some(vars) = inv.host_vars(&host) else {
            continue;
        };
        let shown: Map<String, Value> = vars
            .iter()
            .filter(|(k, _)| !INTERNAL_STATIC_VARS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), vars::listing_value(v)))
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
