//! What a playbook file imports: its `import_playbook` entries in file order, each by its
//! normalised name (the file stem, `_` read as `-`), for the site-order rule and for `init`,
//! which applies that rule only where a site playbook imports the playbooks it orders.

use crate::yaml::{self, Value};

/// The playbooks the seed's `site.yml` must import, in this order (by normalised name).
pub const SITE_ORDER: [&str; 3] = ["k3s", "kube-vip", "cilium"];

/// A playbook's name as the site-order rule compares it: the file stem, `_` as `-`.
pub fn normalise(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    let stem = base
        .strip_suffix(".yml")
        .or_else(|| base.strip_suffix(".yaml"))
        .unwrap_or(base);
    stem.replace('_', "-")
}

/// The playbooks `text` imports (normalised name, line), in file order; `None` when it is
/// not a YAML list of plays.
pub fn imports(text: &str) -> Option<Vec<(String, usize)>> {
    let doc = yaml::parse_one(text).ok()?;
    let Value::Seq(entries) = &doc.value else {
        return None;
    };
    Some(
        entries
            .iter()
            .filter_map(|e| {
                let node = e
                    .get("import_playbook")
                    .or_else(|| e.get("ansible.builtin.import_playbook"))?;
                Some((normalise(node.as_str()?), node.mark.line))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_read_in_order_by_stem() {
        let text = "- import_playbook: playbooks/k3s.yml\n- hosts: all\n  roles: [x]\n- ansible.builtin.import_playbook: kube_vip.yaml\n";
        assert_eq!(
            imports(text),
            Some(vec![("k3s".to_string(), 1), ("kube-vip".to_string(), 4)])
        );
        assert_eq!(imports("a: 1\n"), None);
        assert_eq!(imports("- hosts: all\n  roles: [k3s]\n"), Some(vec![]));
    }
}
