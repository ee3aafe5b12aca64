//! `hk-console init`: a proposed `hk-console.yaml` for a repo that has none, read from its
//! inventory and its Flux tree, every choice commented with the evidence (file:line).
//!
//! Owns: finding the INI inventory and the Ansible directory, finding the environments
//! (server groups), their VPN gateway groups, Flux overlays and vault files, and writing
//! the proposal as YAML text with comments. Where the evidence is ambiguous it says so in
//! a comment and asks; it never guesses silently.
//! Must not: write anything (the command does, after showing the text), or run a tool.
//!
//! How an environment is found: the variable `k3s_servers_group` names, per host, the group
//! that is "my servers" (the source README's convention: dev in group_vars/all.yml, prod in
//! group_vars/k3s_prod/vars.yml). A group whose every member names that same group is an
//! environment's server group. Its name comes from `cluster_kubeconfig_name`
//! (`prod.kubeconfig` -> `prod`), else from the group's name without `k3s_`. Without that
//! variable, groups whose members all resolve one `kube_vip_address` are the candidates,
//! the largest per VIP, and the proposal says it inferred them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod layout;

use super::ansible_cfg::{AnsibleCfg, AnsibleEnv};
use super::config::{Config, EnvConfig, FactKey, CONFIG_FILE, DEFAULT_INVENTORY};
use super::env::HostFacts;
use super::{Repo, RepoError};

/// The variables the proposal reads as evidence.
/// The group the seed repo's playbooks default to (`hosts: "{{ x | default('k3s_servers') }}"`):
/// the environment whose servers it is, is the one people develop on.
const SEED_PLAYBOOKS_SERVERS_GROUP: &str = "k3s_servers";
/// The seed repo's variable naming each server's own group (evidence only: no fact).
pub(crate) const VAR_SERVERS_GROUP: &str = "k3s_servers_group";
/// The seed's names of the facts, as `facts:` defaults them.
const VAR_KUBECONFIG: &str = super::config::VAR_KUBECONFIG;
pub(crate) const VAR_VIP: &str = super::config::VAR_VIP;
const VAR_FOUNDER: &str = super::config::VAR_FOUNDER;

/// Environment names that read as "someone is at the keyboard anyway" (dev-like) and as
/// "this is what people use" (prod-like).
const DEV_LIKE: &[&str] = &["dev", "development", "lab", "test", "staging", "sandbox"];
const PROD_LIKE: &[&str] = &["prod", "production", "live"];

/// Directories not searched for an inventory.
const SKIP_DIRS: &[&str] = &[".git", "target", "node_modules", ".terraform", ".cache"];

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("{path}: not a directory\n  hint: --repo names the infra repo's top directory")]
    NotADirectory { path: PathBuf },
    #[error("{path}: {CONFIG_FILE} already exists; init only proposes one for a repo without it\n  hint: move it aside to compare, or edit it by hand")]
    Exists { path: PathBuf },
    #[error("{root}: no inventory found (looked for {DEFAULT_INVENTORY}, then hosts.ini, hosts.yml, hosts.yaml, inventory.yml, inventory.yaml or inventory.ini up to {depth} directories down)\n  hint: write {CONFIG_FILE} by hand, naming `inventory:`")]
    NoInventory { root: PathBuf, depth: usize },
    #[error("{0}")]
    Repo(#[from] RepoError),
    #[error("{inventory}: no environment found: no group whose hosts name it in `{VAR_SERVERS_GROUP}`, and no group whose hosts share one `{VAR_VIP}`\n  hint: set {VAR_SERVERS_GROUP} per environment in group_vars (the source README's convention), or write {CONFIG_FILE} by hand")]
    NoEnvironment { inventory: PathBuf },
}

/// The proposal: the config it amounts to and the commented YAML text.
#[derive(Debug)]
pub struct Proposal {
    pub config: Config,
    pub text: String,
    /// Questions the operator must answer (also in the text as `# QUESTION:` comments).
    pub questions: Vec<String>,
}

/// How deep the inventory search goes below the repo root.
const SEARCH_DEPTH: usize = 6;

/// Propose `hk-console.yaml` for the repo at `root`.
pub fn propose(root: &Path) -> Result<Proposal, InitError> {
    if !root.is_dir() {
        return Err(InitError::NotADirectory {
            path: root.to_path_buf(),
        });
    }
    if root.join(CONFIG_FILE).exists() {
        return Err(InitError::Exists {
            path: root.join(CONFIG_FILE),
        });
    }
    let mut notes: Vec<String> = Vec::new();
    let mut questions: Vec<String> = Vec::new();
    // The inventory ansible-playbook would use: an ansible.cfg's `inventory =` (or
    // ANSIBLE_INVENTORY) first, as the repo's own runs do; a search only without.
    let mut missing = Vec::new();
    let named = cfg_dir_naming_inventory(root, &mut missing);
    notes.extend(missing);
    if let Some(dir) = named {
        let base = Config {
            ansible_dir: dir.clone(),
            inventory: None,
            known_hosts: None,
            kustomize_bin: None,
            environments: BTreeMap::new(),
            run_lock: Default::default(),
            facts: Default::default(),
            cni: Default::default(),
            contract: Default::default(),
            names: Default::default(),
            reviewed_read_only: Vec::new(),
        };
        let repo = Repo::load_with(root, base.clone())?;
        let mut origin = repo.inventory_origin.clone();
        if let super::ansible_cfg::InventoryOrigin::Cfg { file, .. } = &mut origin {
            if let Ok(rel) = file.strip_prefix(root) {
                *file = rel.to_path_buf();
            }
        }
        notes.push(format!(
            "inventory: {} as {} names it (not written: hk-console reads it the same way)",
            repo.inventory_sources
                .iter()
                .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            origin.describe()
        ));
        return finish(root, base, repo, notes, questions);
    }
    let (inventory, others) = find_inventory(root)?;
    if !others.is_empty() {
        let q = format!(
            "inventory: chose {} (first found); also found {}: which one is the repo's?",
            inventory.display(),
            others
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        questions.push(q);
    }
    let ansible_dir = ansible_dir_of(root, &inventory);
    let base = Config {
        ansible_dir: ansible_dir.clone(),
        inventory: Some(inventory.clone()),
        known_hosts: None,
        kustomize_bin: None,
        environments: BTreeMap::new(),
        run_lock: Default::default(),
        facts: Default::default(),
        cni: Default::default(),
        contract: Default::default(),
        names: Default::default(),
        reviewed_read_only: Vec::new(),
    };
    let repo = Repo::load_with(root, base.clone())?;
    finish(root, base, repo, notes, questions)
}

/// The environments, their facts and agents, from the loaded inventory.
fn finish(
    root: &Path,
    base: Config,
    repo: Repo,
    mut notes: Vec<String>,
    mut questions: Vec<String>,
) -> Result<Proposal, InitError> {
    let inventory = repo
        .inventory_path
        .strip_prefix(root)
        .unwrap_or(&repo.inventory_path)
        .to_path_buf();
    let mut found = environments_by_servers_group(&repo);
    if found.is_empty() {
        found = environments_by_vip(&repo);
        if !found.is_empty() {
            notes.push(format!(
                "no host sets `{VAR_SERVERS_GROUP}`: environments inferred from groups sharing one `{VAR_VIP}` (the largest group per VIP)"
            ));
        }
    }
    if found.is_empty() {
        found = layout::environments_by_group_names(&repo, &mut notes, &mut questions);
    }
    // The agents of a server found by a host variable: the rest of its role's play's group.
    let mut nodes_of: BTreeMap<String, (String, String)> = BTreeMap::new();
    if found.is_empty() {
        for (f, nodes) in layout::environments_by_host_variable(&repo, &mut notes) {
            if let Some(n) = nodes {
                nodes_of.insert(f.group.clone(), n);
            }
            found.push(f);
        }
    }
    if found.is_empty() {
        return Err(InitError::NoEnvironment {
            inventory: root.join(&inventory),
        });
    }
    // Names must be unique: two server groups both called `dev` are a question.
    let mut by_name: BTreeMap<String, Vec<&Found>> = BTreeMap::new();
    for f in &found {
        by_name.entry(f.name.clone()).or_default().push(f);
    }
    let mut envs: Vec<ProposedEnv> = Vec::new();
    for (name, fs) in by_name {
        for (i, f) in fs.iter().enumerate() {
            let name = if i == 0 {
                name.clone()
            } else {
                let n = format!("{name}-{}", f.group);
                questions.push(format!(
                    "environments.{n}: its servers ({}) are also called `{name}` by {VAR_KUBECONFIG}; named `{n}` here: which name is right?",
                    f.group
                ));
                n
            };
            envs.push(propose_env(root, &repo, &name, f, &mut questions));
        }
    }
    assign_gateways(&repo, &mut envs, &mut questions);
    for e in &mut envs {
        if let Some((group, at)) = nodes_of.get(&e.cfg.servers) {
            e.cfg.agents = Some(group.clone());
            e.why.insert(
                "agents",
                vec![format!(
                    "`{group}` without its server {}: the other hosts the k3s role's play runs on ({at})",
                    e.cfg.servers
                )],
            );
        }
        layout::propose_facts(&repo, e, &mut questions);
        layout::propose_agents(&repo, e, &mut questions);
    }
    // The seed's Ansible-side contract rules, for a repo that has no counterpart of them:
    // switched off in the proposal with the evidence, so `check` says "not applicable".
    let mut contract = base.contract.clone();
    let mut contract_why: Vec<String> = Vec::new();
    let site_rel = base.contract.site_playbook_path().to_string();
    let site = repo.ansible_dir.join(&site_rel);
    // The rule orders three imported playbooks; a site playbook that imports none of them
    // (its plays apply roles, as most k3s repos do) has no counterpart of it.
    let site_imports = crate::repo::read::read_to_string(&site)
        .ok()
        .and_then(|t| super::playbook::imports(&t));
    let imports_ordered = site_imports.as_ref().is_some_and(|i| {
        i.iter()
            .any(|(n, _)| super::playbook::SITE_ORDER.contains(&n.as_str()))
    });
    if !site.is_file() {
        contract.site_playbook = Some(super::config::ContractPart::Applies(false));
        contract_why.push(format!(
            "site_playbook: no {} under {}: the site-order rule (k3s, kube-vip, cilium imported in that order) does not apply; delete the line if your site playbook is there",
            site_rel,
            rel_display(root, &repo.ansible_dir)
        ));
    } else if !imports_ordered {
        contract.site_playbook = Some(super::config::ContractPart::Applies(false));
        contract_why.push(format!(
            "site_playbook: {}/{} imports no k3s, kube-vip or cilium playbook (its plays apply roles): the site-order rule does not apply",
            rel_display(root, &repo.ansible_dir),
            site_rel,
        ));
    }
    let template_rel = base.contract.cni_values_template_path().to_string();
    let template = repo.ansible_dir.join(&template_rel);
    if !template.is_file() {
        contract.cni_values_template = Some(super::config::ContractPart::Applies(false));
        contract_why.push(format!(
            "cni_values_template: no {} under {}: the rule that its k8sServiceHost consumes the endpoint does not apply",
            template_rel,
            rel_display(root, &repo.ansible_dir)
        ));
    }
    let sans = base.contract.tls_sans_var().to_string();
    let sans = sans.as_str();
    let has_sans = envs.iter().any(|e| {
        repo.inventory
            .pattern_hosts(&e.cfg.servers)
            .unwrap_or_default()
            .iter()
            .any(|h| repo.resolve_var(h, sans).is_some())
    });
    if !has_sans {
        contract.tls_sans = Some(super::config::ContractPart::Applies(false));
        contract_why.push(format!(
            "tls_sans: no server defines `{sans}`: the rule that the API certificate carries the VIP and the founder does not apply"
        ));
    }
    let config = Config {
        environments: envs
            .iter()
            .map(|e| (e.name.clone(), e.cfg.clone()))
            .collect(),
        contract,
        ..base
    };
    let mut text = render(&config, &envs, &notes, &questions);
    if !contract_why.is_empty() {
        text.push_str(
            "# The seed repo's Ansible-side rules this repo has no counterpart of:
",
        );
        text.push_str(
            "contract:
",
        );
        for (why, key) in contract_why.iter().zip(
            [
                (&config.contract.site_playbook, "site_playbook"),
                (&config.contract.cni_values_template, "cni_values_template"),
                (&config.contract.tls_sans, "tls_sans"),
            ]
            .iter()
            .filter(|(v, _)| super::config::ContractConfig::is_off(v))
            .map(|(_, k)| *k),
        ) {
            let _ = writeln!(text, "  # {why}");
            let _ = writeln!(text, "  {key}: false");
        }
    }
    Ok(Proposal {
        config,
        text,
        questions,
    })
}

/// `path` relative to `root` for messages (as written when it lies elsewhere).
fn rel_display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// One environment found in the inventory, with the evidence.
#[derive(Debug, Clone)]
struct Found {
    name: String,
    group: String,
    evidence: Vec<String>,
}

#[derive(Debug)]
struct ProposedEnv {
    name: String,
    cfg: EnvConfig,
    /// Comment lines per key (`servers`, `vpn_gateways`, ...), and for the environment.
    why: BTreeMap<&'static str, Vec<String>>,
}

/// Inventory file names a repo's README tells its users to create or copy.
const INVENTORY_NAMES: &[&str] = &[
    "hosts.ini",
    "hosts.yml",
    "hosts.yaml",
    "inventory.yml",
    "inventory.yaml",
    "inventory.ini",
];

/// The inventory: the default path, else every file named like one ([`INVENTORY_NAMES`]) up
/// to [`SEARCH_DEPTH`] levels down, the likeliest first: not a sample or an example, under
/// a directory called `inventory`, the shallowest, then by name.
fn find_inventory(root: &Path) -> Result<(PathBuf, Vec<PathBuf>), InitError> {
    let default = PathBuf::from(DEFAULT_INVENTORY);
    if root.join(&default).is_file() {
        return Ok((default, Vec::new()));
    }
    let mut hits: Vec<PathBuf> = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Ok(ft) = e.file_type() else { continue };
            let child = rel.join(&name);
            if ft.is_dir()
                && depth < SEARCH_DEPTH
                && !SKIP_DIRS.iter().any(|d| name == *d)
                && !name.to_string_lossy().starts_with('.')
            {
                stack.push((child, depth + 1));
            } else if ft.is_file() && INVENTORY_NAMES.iter().any(|n| name == *n) {
                hits.push(child);
            }
        }
    }
    let dirs = |p: &Path| -> Vec<String> {
        p.parent()
            .map(|d| {
                d.components()
                    .map(|c| c.as_os_str().to_string_lossy().to_lowercase())
                    .collect()
            })
            .unwrap_or_default()
    };
    hits.sort_by_key(|p| {
        let ds = dirs(p);
        let sample = ds
            .iter()
            .any(|d| d.contains("sample") || d.contains("example") || d == "molecule");
        let in_inventory = ds.iter().any(|d| d == "inventory" || d == "inventories");
        (sample, !in_inventory, p.components().count(), p.clone())
    });
    let mut it = hits.into_iter();
    match it.next() {
        Some(first) => Ok((first, it.collect())),
        None => Err(InitError::NoInventory {
            root: root.to_path_buf(),
            depth: SEARCH_DEPTH,
        }),
    }
}

/// The shallowest directory (the root first, then `ansible/`-like ones up to three levels
/// down) whose ansible.cfg names an inventory, as ansible-playbook run there would read it.
fn cfg_dir_naming_inventory(root: &Path, missing: &mut Vec<String>) -> Option<PathBuf> {
    let env = AnsibleEnv::from_process();
    let mut level: Vec<PathBuf> = vec![PathBuf::new()];
    for _ in 0..=3 {
        let mut next = Vec::new();
        level.sort();
        for rel in &level {
            let abs = root.join(rel);
            if abs.join("ansible.cfg").is_file() {
                let cfg = AnsibleCfg::load(&abs, &env);
                if let Some((named, _line)) = cfg.get("inventory") {
                    // A README that passes `-i` on every run may leave ansible.cfg naming
                    // a file it never makes: then the search decides, and says why.
                    let exists = named
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .any(|p| abs.join(p).exists());
                    if exists {
                        return Some(rel.clone());
                    }
                    missing.push(format!(
                        "{}: `inventory = {named}` names nothing that exists (the README's runs pass -i): the inventory was searched for instead",
                        rel.join("ansible.cfg").display()
                    ));
                }
            }
            for e in std::fs::read_dir(&abs).into_iter().flatten().flatten() {
                let name = e.file_name();
                if e.file_type().is_ok_and(|t| t.is_dir())
                    && !SKIP_DIRS.iter().any(|d| name == *d)
                    && !name.to_string_lossy().starts_with('.')
                {
                    next.push(rel.join(name));
                }
            }
        }
        level = next;
    }
    None
}

/// Where ansible-playbook runs: the nearest directory at or above the inventory's that
/// holds `ansible.cfg` or `playbooks/`, else the inventory's parent's parent.
fn ansible_dir_of(root: &Path, inventory: &Path) -> PathBuf {
    let mut dir = inventory.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        let abs = root.join(&d);
        if abs.join("ansible.cfg").is_file() || abs.join("playbooks").is_dir() {
            return d;
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    inventory
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn string_var(repo: &Repo, host: &str, var: &str) -> Option<String> {
    let r = repo.resolve_var(host, var)?;
    match r.value()? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Where `var` of `host` won, relative to the repo root (`file:line:col`).
fn origin(repo: &Repo, host: &str, var: &str) -> String {
    match repo.origin(host, var) {
        Some(mut o) => {
            if let Ok(rel) = o.file.strip_prefix(&repo.root) {
                o.file = rel.into();
            }
            o.to_string()
        }
        None => "?".into(),
    }
}

/// Environments by `k3s_servers_group`: a group every member of which names it.
fn environments_by_servers_group(repo: &Repo) -> Vec<Found> {
    let mut named: BTreeSet<String> = BTreeSet::new();
    for host in repo.inventory.hosts() {
        if let Some(g) = string_var(repo, &host, VAR_SERVERS_GROUP) {
            named.insert(g);
        }
    }
    let mut out = Vec::new();
    for group in named {
        let Some(members) = repo.inventory.hosts_in(&group) else {
            continue;
        };
        if members.is_empty() {
            continue;
        }
        let consistent = members
            .iter()
            .all(|h| string_var(repo, h, VAR_SERVERS_GROUP).as_deref() == Some(group.as_str()));
        if !consistent {
            continue;
        }
        let first = &members[0];
        let mut evidence = vec![format!(
            "every host of `{group}` ({}) has {VAR_SERVERS_GROUP}: {group} ({})",
            members.join(", "),
            origin(repo, first, VAR_SERVERS_GROUP)
        )];
        let name = match string_var(repo, first, VAR_KUBECONFIG) {
            Some(kc) if !kc.is_empty() => {
                let stem = kc
                    .strip_suffix(".kubeconfig")
                    .or_else(|| kc.strip_suffix(".yaml"))
                    .unwrap_or(&kc)
                    .to_string();
                evidence.push(format!(
                    "named `{stem}` after {VAR_KUBECONFIG}: {kc} ({})",
                    origin(repo, first, VAR_KUBECONFIG)
                ));
                stem
            }
            _ => {
                let n = group.strip_prefix("k3s_").unwrap_or(&group).to_string();
                evidence.push(format!(
                    "named `{n}` after the group (no {VAR_KUBECONFIG} on its hosts)"
                ));
                n
            }
        };
        out.push(Found {
            name,
            group,
            evidence,
        });
    }
    out
}

/// Without `k3s_servers_group`: for each distinct `kube_vip_address`, the largest group
/// whose members all resolve it (ties: the name that starts with `k3s_`, then the first).
fn environments_by_vip(repo: &Repo) -> Vec<Found> {
    let mut best: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for group in repo.inventory.group_names() {
        if group == "all" || group == "ungrouped" {
            continue;
        }
        let Some(members) = repo.inventory.hosts_in(&group) else {
            continue;
        };
        let vips: BTreeSet<Option<String>> = members
            .iter()
            .map(|h| string_var(repo, h, VAR_VIP))
            .collect();
        if members.is_empty() || vips.len() != 1 {
            continue;
        }
        let Some(Some(vip)) = vips.into_iter().next() else {
            continue;
        };
        let better = match best.get(&vip) {
            None => true,
            Some((g, n)) => {
                members.len() > *n
                    || (members.len() == *n && group.starts_with("k3s_") && !g.starts_with("k3s_"))
            }
        };
        if better {
            best.insert(vip, (group, members.len()));
        }
    }
    best.into_iter()
        .map(|(vip, (group, n))| Found {
            name: group.strip_prefix("k3s_").unwrap_or(&group).to_string(),
            evidence: vec![format!(
                "the largest group whose {n} hosts all have {VAR_VIP}: {vip}"
            )],
            group,
        })
        .collect()
}

fn propose_env(
    root: &Path,
    repo: &Repo,
    name: &str,
    f: &Found,
    questions: &mut Vec<String>,
) -> ProposedEnv {
    let mut why: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    why.insert("servers", f.evidence.clone());
    let members = repo.inventory.pattern_hosts(&f.group).unwrap_or_default();
    if let Some(first) = members.first() {
        let facts: Vec<String> = [VAR_VIP, VAR_FOUNDER]
            .iter()
            .filter_map(|v| {
                string_var(repo, first, v)
                    .map(|val| format!("{v}: {val} ({})", origin(repo, first, v)))
            })
            .collect();
        if !facts.is_empty() {
            why.entry("servers").or_default().push(facts.join("; "));
        }
    }
    // The Flux overlay: clusters/<name> is the default; else a single clusters/* directory
    // named like the group.
    let mut flux_overlay = None;
    let default_overlay = root.join("clusters").join(name);
    if !root.join("clusters").is_dir() {
        why.insert(
            "flux_overlay",
            vec![
                "no clusters/ directory: no Flux overlay (check says its Flux rules do not apply)"
                    .to_string(),
            ],
        );
    } else if default_overlay.is_dir() {
        why.insert(
            "flux_overlay",
            vec![format!(
                "clusters/{name}/ exists (the default, not written)"
            )],
        );
    } else {
        let dirs: Vec<String> = std::fs::read_dir(root.join("clusters"))
            .map(|rd| {
                let mut v: Vec<String> = rd
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                v.sort();
                v
            })
            .unwrap_or_default();
        if let Some(d) = dirs.iter().find(|d| f.group.contains(d.as_str())) {
            flux_overlay = Some(PathBuf::from("clusters").join(d));
            why.insert(
                "flux_overlay",
                vec![format!(
                    "clusters/{d}/ is the one directory of clusters/ the group `{}` names",
                    f.group
                )],
            );
        } else {
            questions.push(format!(
                "environments.{name}.flux_overlay: no clusters/{name}/ (clusters/ holds: {}); which overlay is this environment's?",
                if dirs.is_empty() { "nothing".to_string() } else { dirs.join(", ") }
            ));
        }
    }
    // The become password's vault, where the group's vars directory has one.
    let inv_dir = repo
        .inventory_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let vault_abs = inv_dir.join("group_vars").join(&f.group).join("vault.yml");
    let vault = vault_abs
        .strip_prefix(root)
        .ok()
        .filter(|_| vault_abs.is_file())
        .map(Path::to_path_buf);
    if let Some(v) = &vault {
        why.insert("vault", vec![format!("{} exists", v.display())]);
    }
    let lower = name.to_ascii_lowercase();
    let operator_present =
        DEV_LIKE.contains(&lower.as_str()) || f.group == SEED_PLAYBOOKS_SERVERS_GROUP;
    if operator_present {
        why.insert(
            "operator_present",
            vec![if f.group == SEED_PLAYBOOKS_SERVERS_GROUP {
                format!("its servers are `{SEED_PLAYBOOKS_SERVERS_GROUP}`, the playbooks' default group: a dev-like environment")
            } else {
                format!("`{name}` reads as a dev-like environment")
            }],
        );
    }
    let protected = PROD_LIKE.contains(&lower.as_str());
    if protected {
        why.insert(
            "protected",
            vec![format!(
                "`{name}` reads as production: every mutating step there is previewed and approved with its blast radius (the gate policy)"
            )],
        );
    } else if !operator_present {
        questions.push(format!(
            "environments.{name}: neither dev-like nor prod-like by name: is it production (protected: true), or should nothing mutate there unless the operator is present (operator_present: true)?"
        ));
    }
    ProposedEnv {
        name: name.to_string(),
        cfg: EnvConfig {
            servers: f.group.clone(),
            vpn_gateways: None,
            operator_present,
            protected,
            flux_overlay,
            vault,
            agents: None,
            facts: Default::default(),
            names: Default::default(),
        },
        why,
    }
}

/// VPN gateway groups: groups whose name mentions `vpn` and `gateway`. Each goes to the
/// environment whose servers hold its hosts, else the one its name ends with; a group no
/// environment claims, or two claiming one environment, is a question.
fn assign_gateways(repo: &Repo, envs: &mut [ProposedEnv], questions: &mut Vec<String>) {
    let groups: Vec<String> = repo
        .inventory
        .group_names()
        .into_iter()
        .filter(|g| g.contains("vpn") && g.contains("gateway"))
        .collect();
    for g in groups {
        let members = repo.inventory.hosts_in(&g).unwrap_or_default();
        if members.is_empty() {
            continue;
        }
        let by_servers: Vec<usize> = envs
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                let servers = repo
                    .inventory
                    .pattern_hosts(&e.cfg.servers)
                    .unwrap_or_default();
                members.iter().all(|m| servers.contains(m))
            })
            .map(|(i, _)| i)
            .collect();
        let by_name: Vec<usize> = envs
            .iter()
            .enumerate()
            .filter(|(_, e)| g.ends_with(&format!("_{}", e.name)))
            .map(|(i, _)| i)
            .collect();
        let (idx, reason) = match (by_servers.as_slice(), by_name.as_slice()) {
            ([i], _) => (
                *i,
                format!(
                    "`{g}` ({}) are servers of this environment",
                    members.join(", ")
                ),
            ),
            ([], [i]) => (*i, format!("`{g}` ends with `_{}`", envs[*i].name)),
            _ => {
                questions.push(format!(
                    "vpn_gateways: the group `{g}` ({}) belongs to which environment?",
                    members.join(", ")
                ));
                continue;
            }
        };
        if let Some(prev) = &envs[idx].cfg.vpn_gateways {
            questions.push(format!(
                "environments.{}.vpn_gateways: both `{prev}` and `{g}` look like its gateways; kept `{prev}`",
                envs[idx].name
            ));
            continue;
        }
        envs[idx].cfg.vpn_gateways = Some(g.clone());
        envs[idx].why.insert("vpn_gateways", vec![reason]);
    }
}

/// The proposal as YAML with comments. Keys are written only where they differ from the
/// defaults, so what remains is what the evidence says.
fn render(config: &Config, envs: &[ProposedEnv], notes: &[String], questions: &[String]) -> String {
    let mut t = String::new();
    t.push_str("# hk-console's view of this infra repo, proposed by `hk-console init` from the\n");
    t.push_str(
        "# inventory and the Flux tree. Every choice says its evidence (file:line). Read it,\n",
    );
    t.push_str("# answer the QUESTIONs, then run `hk-console check`.\n");
    t.push_str(
        "# Where a fact lives under another name, write it under the environment's `facts:`\n",
    );
    t.push_str("# as a variable or a Jinja expression (`vip: cluster_vip`, `api_port: \"{{ apiserver_port\n");
    t.push_str("# | default(6443) }}\"`); `agents:` names the worker group, `cni:` (namespace, selector,\n");
    t.push_str(
        "# container, daemonset) a CNI other than Cilium; `contract:` where the repo keeps its\n",
    );
    t.push_str(
        "# site playbook, CNI values template and SANs variable (or `false`); `names:` the\n",
    );
    t.push_str(
        "# kube-vip Lease, the VPN unit and interface, the Flux variable the CNI endpoint is in.\n",
    );
    t.push_str("# README: \"Another k3s Ansible layout\".\n");
    for n in notes {
        let _ = writeln!(t, "# NOTE: {n}");
    }
    for q in questions {
        let _ = writeln!(t, "# QUESTION: {q}");
    }
    let _ = writeln!(
        t,
        "ansible_dir: {}",
        yaml_str(&config.ansible_dir.display().to_string())
    );
    if let Some(inv) = &config.inventory {
        let _ = writeln!(t, "inventory: {}", yaml_str(&inv.display().to_string()));
    }
    t.push_str("environments:\n");
    for e in envs {
        let _ = writeln!(t, "  {}:", yaml_str(&e.name));
        let mut key = |k: &'static str, v: Option<String>| {
            for w in e.why.get(k).into_iter().flatten() {
                let _ = writeln!(t, "    # {w}");
            }
            if let Some(v) = v {
                let _ = writeln!(t, "    {k}: {v}");
            }
        };
        key("servers", Some(yaml_str(&e.cfg.servers)));
        key("agents", e.cfg.agents.as_deref().map(yaml_str));
        key("vpn_gateways", e.cfg.vpn_gateways.as_deref().map(yaml_str));
        key(
            "operator_present",
            e.cfg.operator_present.then(|| "true".to_string()),
        );
        key("protected", e.cfg.protected.then(|| "true".to_string()));
        key(
            "flux_overlay",
            e.cfg
                .flux_overlay
                .as_ref()
                .map(|p| yaml_str(&p.display().to_string())),
        );
        key(
            "vault",
            e.cfg
                .vault
                .as_ref()
                .map(|p| yaml_str(&p.display().to_string())),
        );
        let facts: Vec<(FactKey, &String)> = FactKey::ALL
            .iter()
            .filter_map(|k| e.cfg.facts.source_of(*k).map(|v| (*k, v)))
            .collect();
        for w in e.why.get("facts").into_iter().flatten() {
            let _ = writeln!(t, "    # {w}");
        }
        if !facts.is_empty() {
            t.push_str("    facts:\n");
            for (k, v) in facts {
                let _ = writeln!(t, "      {}: {}", k.key(), yaml_str(v));
            }
        }
    }
    t
}

/// A YAML scalar: plain where that reads back as the same string, else double-quoted
/// (JSON string syntax is valid YAML).
fn yaml_str(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        serde_json::Value::from(s).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::yaml_str;

    #[test]
    fn yaml_strings_read_back_as_strings() {
        assert_eq!(yaml_str("k3s_prod"), "k3s_prod");
        assert_eq!(yaml_str("yes"), "\"yes\"");
        assert_eq!(yaml_str("1.5"), "\"1.5\"");
        assert_eq!(yaml_str("a b"), "\"a b\"");
        assert_eq!(yaml_str(""), "\"\"");
    }
}
