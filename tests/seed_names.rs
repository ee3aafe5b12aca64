//! Issue 28: the seed repo's names (its variables, groups, file layout, Lease, unit, label,
//! Flux variable) are defaults of hk-console.yaml's mapping, never constants a rule or a
//! message uses directly. In the sources of every crate (comments and the unit-test module
//! at a file's end aside), a seed name may appear only as the value of a named constant:
//! the one place its default is kept, which the code then uses by name.
use std::path::{Path, PathBuf};

/// The seed repo's names, as DOMAIN.md and the sample repo spell them.
const SEED_NAMES: &[&str] = &[
    // Variables.
    "kube_vip_address",
    "k3s_apiserver_endpoint",
    "k3s_api_host",
    "k3s_api_port",
    "k3s_primary_group",
    "cluster_kubeconfig_name",
    "k3s_servers_group",
    "k3s_tls_sans",
    "kube_vip_lease_name",
    "vpn_egress_gateway_service",
    "vpn_egress_gateway_interface",
    "K3S_API_HOST",
    // Groups.
    "k3s_servers",
    "k3s_prod",
    "vpn_egress_gateway",
    // Layout.
    "infra/ansible",
    "playbooks/site.yml",
    "cilium-values.yaml.j2",
    // Names the live panes look for.
    "plndr-cp-lock",
    "vpn-egress-tunnel",
    "k8s-app=cilium",
];

/// The lines of `text` that use a seed name other than as a constant's value.
fn offending_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        // The unit tests live at the end of a file, after `#[cfg(test)]`: test data.
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let t = line.trim_start();
        if t.starts_with("//") || !SEED_NAMES.iter().any(|n| line.contains(n)) {
            continue;
        }
        if is_const_value(t) {
            continue;
        }
        out.push((i + 1, t.to_string()));
    }
    out
}

/// `[pub[(crate)]] const NAME: &str = "..."` (or a `&[&str]` table) on one line.
fn is_const_value(t: &str) -> bool {
    let t = t
        .strip_prefix("pub(crate) ")
        .or_else(|| t.strip_prefix("pub "))
        .unwrap_or(t);
    let Some(rest) = t.strip_prefix("const ") else {
        return false;
    };
    let Some((name, ty)) = rest.split_once(':') else {
        return false;
    };
    name.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && (ty.trim_start().starts_with("&str =") || ty.trim_start().starts_with("&[&str] ="))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_scan_finds_a_seed_name_used_directly_and_lets_a_default_constant_be() {
    let text = "pub const DEFAULT_LEASE: &str = \"plndr-cp-lock\";\n\
                // kube_vip_address in a comment\n\
                let v = repo.var(\"kube_vip_address\");\n\
                #[cfg(test)]\n\
                mod tests { const X: u8 = 0; fn t() { let _ = \"k3s_prod\"; } }\n";
    assert_eq!(
        offending_lines(text),
        vec![(3, "let v = repo.var(\"kube_vip_address\");".to_string())]
    );
}

#[test]
fn seed_names_are_in_the_sources_only_as_named_defaults() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    // The product's sources; hk-test-support is the tests' fixtures in code (a fake
    // inventory shaped like the sample is made of the sample's names).
    files.retain(|p| {
        p.components().any(|c| c.as_os_str() == "src")
            && !p.components().any(|c| c.as_os_str() == "hk-test-support")
    });
    files.sort();
    assert!(files.len() > 100, "found only {} sources", files.len());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        for (line, t) in offending_lines(&text) {
            found.push(format!(
                "{}:{line}: {t}",
                f.strip_prefix(root).unwrap_or(f).display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "seed names used directly (make each a named default of the mapping, and use it by name):\n{}",
        found.join("\n")
    );
}
