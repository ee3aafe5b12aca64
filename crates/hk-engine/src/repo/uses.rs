//! Which variables a repo's Ansible files use: the identifiers in `{{ }}` and `{% %}`, and
//! on the condition lines Ansible evaluates as Jinja (`when:`, `that:`, ...). A fact's
//! variable counts for the repo when it is used; the seed's names ([`SEED_FACT_VARS`]) are
//! the mapping's defaults, and a repo that neither defines nor uses one has no counterpart
//! of that fact: its absence is no finding and no problem.

use std::collections::BTreeSet;
use std::path::Path;

use super::config::{
    VAR_API_PORT, VAR_ENDPOINT, VAR_FOUNDER, VAR_KUBECONFIG, VAR_PRIMARY_GROUP, VAR_VIP,
};

/// The seed repo's variable names for the environment facts.
pub const SEED_FACT_VARS: &[&str] = &[
    VAR_PRIMARY_GROUP,
    VAR_FOUNDER,
    VAR_VIP,
    VAR_ENDPOINT,
    VAR_API_PORT,
    VAR_KUBECONFIG,
];

/// Every variable name `text` uses. A key a vars file defines is not a use of it.
pub fn vars_used_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut words = |expr: &str| {
        for w in expr.split(|c: char| !ident(c)) {
            if w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                out.insert(w.to_string());
            }
        }
    };
    for line in text.lines() {
        let t = line.trim_start().trim_start_matches("- ");
        if t.starts_with('#') {
            continue;
        }
        for key in ["when:", "that:", "failed_when:", "changed_when:", "until:"] {
            if let Some(rest) = t.strip_prefix(key) {
                words(rest);
            }
        }
        for (open, close) in [("{{", "}}"), ("{%", "%}")] {
            let mut rest = line;
            while let Some(start) = rest.find(open) {
                let after = &rest[start + 2..];
                let end = after.find(close).unwrap_or(after.len());
                words(&after[..end]);
                rest = &after[end..];
            }
        }
    }
    out
}

/// Every variable the YAML and Jinja files under `dir` use (dot directories skipped; files
/// over 1 MiB and past the first 20,000 not read).
pub fn vars_used_under(dir: &Path) -> BTreeSet<String> {
    const MAX_FILES: usize = 20_000;
    const MAX_BYTES: u64 = 1 << 20;
    let files = super::read::files_under(dir, MAX_FILES, &|e, is_dir| {
        let path = e.path();
        !e.file_name().to_string_lossy().starts_with('.')
            && (is_dir
                || path
                    .extension()
                    .is_some_and(|x| x == "yml" || x == "yaml" || x == "j2"))
    });
    let mut used = BTreeSet::new();
    for path in files {
        if std::fs::metadata(&path).map_or(true, |m| m.len() > MAX_BYTES) {
            continue;
        }
        if let Ok(text) = super::read::read_to_string(&path) {
            used.extend(vars_used_in(&text));
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_are_names_in_jinja_and_conditions_not_definitions() {
        let text = "kube_vip_address: 10.0.0.9\nsan: \"--tls-san {{ vip | default(x) }}\"\n- name: t\n  when: k3s_control_node and not skip_it\n# {{ commented }}\n{% if founder %}{% endif %}\n";
        let used = vars_used_in(text);
        for v in [
            "vip",
            "x",
            "k3s_control_node",
            "skip_it",
            "founder",
            "default",
        ] {
            assert!(used.contains(v), "{v}: {used:?}");
        }
        assert!(!used.contains("kube_vip_address"), "{used:?}");
        assert!(!used.contains("commented"), "{used:?}");
    }
}
