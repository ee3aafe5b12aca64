//! `init` on a repo laid out like neither sample: the server and agent groups by their
//! names and by which hosts they share, and each environment fact's variable by what it
//! renders to (an address no node has but every server shares is the VIP candidate) and by
//! where the repo's own templates use it (`--tls-san`, `--server`, kube-vip's `address`).
//!
//! Owns: the evidence and the `facts:`/`agents:` it amounts to, with file:line for each.
//! Must not: write anything or run a tool; a choice it cannot make is a `QUESTION`, never a
//! silent pick.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::{origin, string_var, Found, ProposedEnv};
use crate::repo::config::{FactKey, FactsConfig};
use crate::repo::Repo;

/// Group names that read as the k3s servers, and as the agents.
const SERVER_LIKE: &[&str] = &[
    "server",
    "control_plane",
    "controlplane",
    "control-plane",
    "master",
];
const AGENT_LIKE: &[&str] = &["worker", "agent"];
/// Agent groups named by a word too common to match inside other names (`turingpi_nodes`
/// is every node): these only as the whole group name.
const AGENT_NAMES: &[&str] = &["node", "nodes", "minion", "minions"];
/// Where a k3s repo's templates use the API's address: the VIP in the certificate, the
/// address agents join, kube-vip's manifest.
const VIP_USES: &[&str] = &[
    "--tls-san",
    "--server",
    "K3S_URL",
    "k8sServiceHost",
    "KUBERNETES_SERVICE_HOST",
    "vip_address",
    "address",
];
/// The uses that say a variable is the API address clients dial or kube-vip announces
/// (`address` alone is also a BGP peer's, a load balancer pool's...).
const API_USES: &[&str] = &[
    "--tls-san",
    "--server",
    "K3S_URL",
    "k8sServiceHost",
    "KUBERNETES_SERVICE_HOST",
    "vip_address",
];
/// k3s's own API port, when the repo has no variable for it.
const K3S_DEFAULT_PORT: u16 = 6443;
/// Files larger than this are not read when looking for uses (no template is).
const MAX_TEMPLATE_BYTES: u64 = 512 * 1024;

fn like(group: &str, words: &[&str]) -> bool {
    let g = group.to_ascii_lowercase();
    words.iter().any(|w| g.contains(w))
}

/// Server groups by name (`control_plane`, `k3s_servers`, `masters`, ...): each one an
/// environment; named after a `cluster_name` its hosts share, else the group.
pub(super) fn environments_by_group_names(
    repo: &Repo,
    notes: &mut Vec<String>,
    questions: &mut Vec<String>,
) -> Vec<Found> {
    let groups: Vec<String> = repo
        .inventory
        .group_names()
        .into_iter()
        .filter(|g| like(g, SERVER_LIKE) && !like(g, AGENT_LIKE))
        .filter(|g| !repo.inventory.hosts_in(g).unwrap_or_default().is_empty())
        .collect();
    // A server-like group inside another (`k3s_server_primary` in `k3s_server`) is not an
    // environment of its own.
    let outer: Vec<String> = groups
        .iter()
        .filter(|g| {
            let mine = repo.inventory.hosts_in(g).unwrap_or_default();
            !groups.iter().any(|o| {
                let theirs = repo.inventory.hosts_in(o).unwrap_or_default();
                o != *g && theirs.len() > mine.len() && mine.iter().all(|h| theirs.contains(h))
            })
        })
        .cloned()
        .collect();
    if outer.is_empty() {
        return Vec::new();
    }
    notes.push(format!(
        "no host sets `{}` or `{}`: servers found by group name ({})",
        super::VAR_SERVERS_GROUP,
        super::VAR_VIP,
        outer.join(", ")
    ));
    if outer.len() > 1 {
        questions.push(format!(
            "environments: {} server-like groups ({}): is each one an environment, or are some not k3s servers?",
            outer.len(),
            outer.join(", ")
        ));
    }
    outer
        .into_iter()
        .map(|group| {
            let members = repo.inventory.hosts_in(&group).unwrap_or_default();
            let mut evidence = vec![format!(
                "`{group}` ({}) reads as the k3s servers by its name",
                members.join(", ")
            )];
            let names: BTreeSet<Option<String>> = members
                .iter()
                .map(|h| string_var(repo, h, "cluster_name"))
                .collect();
            let name = match names.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(n)]
                    if !n.is_empty()
                        && n.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')) =>
                {
                    evidence.push(format!(
                        "named `{n}` after cluster_name: {n} ({})",
                        origin(repo, &members[0], "cluster_name")
                    ));
                    n.clone()
                }
                _ => {
                    evidence.push(
                        "named after the group (its hosts share no `cluster_name`)".to_string(),
                    );
                    group.clone()
                }
            };
            Found {
                name,
                group,
                evidence,
            }
        })
        .collect()
}

/// Every node's address (`ansible_host`, else its name) in the inventory.
fn node_addresses(repo: &Repo) -> BTreeSet<String> {
    repo.inventory
        .hosts()
        .into_iter()
        .map(|h| string_var(repo, &h, "ansible_host").unwrap_or(h))
        .collect()
}

/// The variables every one of `members` resolves to the same scalar, with that value.
fn shared_vars(repo: &Repo, members: &[String]) -> BTreeMap<String, String> {
    let mut shared: Option<BTreeMap<String, String>> = None;
    for h in members {
        let mine: BTreeMap<String, String> = repo
            .resolve_all(h)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, r)| {
                let v = match r.value()? {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    _ => return None,
                };
                Some((k, v))
            })
            .collect();
        shared = Some(match shared {
            None => mine,
            Some(s) => s
                .into_iter()
                .filter(|(k, v)| mine.get(k) == Some(v))
                .collect(),
        });
    }
    shared.unwrap_or_default()
}

/// A line of the repo's Ansible files (not its inventory) that uses a variable in `{{ }}`.
#[derive(Debug, Clone)]
struct Use {
    at: String,
    keyword: &'static str,
}

/// Where the repo's playbooks, roles and templates use each of `vars` next to one of
/// [`VIP_USES`] (`--tls-san {{ cluster_vip }}`).
fn uses(repo: &Repo, vars: &BTreeSet<String>) -> BTreeMap<String, Vec<Use>> {
    let mut out: BTreeMap<String, Vec<Use>> = BTreeMap::new();
    for (rel, text) in text_files(repo) {
        for (i, line) in text.lines().enumerate() {
            if !line.contains("{{") {
                continue;
            }
            let Some(keyword) = VIP_USES.iter().find(|k| line.contains(*k)) else {
                continue;
            };
            for v in vars {
                if jinja_mentions(line, v) {
                    out.entry(v.clone()).or_default().push(Use {
                        at: format!("{rel}:{}", i + 1),
                        keyword,
                    });
                }
            }
        }
    }
    out
}

/// The repo's playbooks, roles and templates (not its inventory or variable files), each
/// with its path relative to the repo, in path order.
fn text_files(repo: &Repo) -> Vec<(String, String)> {
    let inventory_dir = repo.inventory_path.parent().map(Path::to_path_buf);
    let mut stack: Vec<(PathBuf, usize)> = vec![(repo.ansible_dir.clone(), 0)];
    let mut files: Vec<PathBuf> = Vec::new();
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                // Variables are defined in group_vars/host_vars: definitions, not uses.
                let skip = name.starts_with('.')
                    || matches!(name.as_str(), "group_vars" | "host_vars")
                    || Some(&p) == inventory_dir.as_ref() && p != repo.ansible_dir;
                if !skip && depth < 8 {
                    stack.push((p, depth + 1));
                }
            } else if ft.is_file()
                && !repo.inventory_sources.contains(&p)
                && e.metadata().is_ok_and(|m| m.len() <= MAX_TEMPLATE_BYTES)
            {
                files.push(p);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(&f).ok()?;
            let rel = f
                .strip_prefix(&repo.root)
                .unwrap_or(&f)
                .display()
                .to_string();
            Some((rel, text))
        })
        .collect()
}

/// A single server named by a variable, as the repo's own roles choose it: a task or
/// template compares `VAR == inventory_hostname` (either way round), and VAR is, for every
/// host, the name of one inventory host (gilesknap's `control_plane: node01` and
/// `k3s_is_control_plane: "{{ control_plane == inventory_hostname }}"`). The environment is
/// that host (`servers: node01`), named after the group of the play that applies the role
/// the comparison is in, whose other hosts are proposed as its agents.
pub(super) fn environments_by_host_variable(
    repo: &Repo,
    notes: &mut Vec<String>,
) -> Vec<(Found, Option<(String, String)>)> {
    let hosts = repo.inventory.hosts();
    let files = text_files(repo);
    let mut out: Vec<(Found, Option<(String, String)>)> = Vec::new();
    for (file, text) in &files {
        for (i, line) in text.lines().enumerate() {
            let Some(var) = compared_with_inventory_hostname(line) else {
                continue;
            };
            // One value, the same for every host, naming a host of the inventory.
            let values: BTreeSet<Option<String>> =
                hosts.iter().map(|h| string_var(repo, h, &var)).collect();
            let values: Vec<Option<String>> = values.into_iter().collect();
            let [Some(server)] = values.as_slice() else {
                continue;
            };
            let server = server.clone();
            if !hosts.contains(&server) || out.iter().any(|(f, _)| f.group == server) {
                continue;
            }
            let mut evidence = vec![
                format!(
                    "`{var}` names {server} for every host ({})",
                    super::origin(repo, &server, &var)
                ),
                format!(
                    "{file}:{}: the repo's role takes it as the server: `{}`",
                    i + 1,
                    line.trim()
                ),
            ];
            // The play that applies this file's role: its group is the cluster's nodes.
            let role = Path::new(file)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .windows(2)
                .find(|w| w[0] == "roles")
                .map(|w| w[1].clone());
            let nodes = role.and_then(|r| play_group_of_role(repo, &files, &r, &server));
            let name = nodes
                .as_ref()
                .map(|(g, _)| g.clone())
                .unwrap_or_else(|| server.clone());
            if let Some((g, at)) = &nodes {
                evidence.push(format!(
                    "named after `{g}`, the hosts the role's play runs on ({at})"
                ));
            }
            notes.push(format!(
                "no server group: the server is the host `{var}` names ({server})"
            ));
            out.push((
                Found {
                    name,
                    group: server.clone(),
                    evidence,
                },
                nodes,
            ));
        }
    }
    out
}

/// `VAR` of a `VAR == inventory_hostname` (or `inventory_hostname == VAR`) comparison.
fn compared_with_inventory_hostname(line: &str) -> Option<String> {
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    let (left, right) = line.split_once("==")?;
    let l = left
        .trim_end()
        .rsplit([' ', '(', '{', '"', '\''])
        .next()?
        .trim();
    let r = right
        .trim_start()
        .split([' ', ')', '}', '"', '\''])
        .next()?
        .trim();
    match (l, r) {
        ("inventory_hostname", v) | (v, "inventory_hostname")
            if ident(v) && v != "inventory_hostname" =>
        {
            Some(v.to_string())
        }
        _ => None,
    }
}

/// The group a playbook's play that applies `role` runs on (`hosts: GROUP`, one group
/// holding `server` and other hosts), with its file:line.
fn play_group_of_role(
    repo: &Repo,
    files: &[(String, String)],
    role: &str,
    server: &str,
) -> Option<(String, String)> {
    for (file, text) in files {
        if !(file.ends_with(".yml") || file.ends_with(".yaml")) || file.contains("roles/") {
            continue;
        }
        let mut hosts: Option<(String, usize)> = None;
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if let Some(h) = t
                .strip_prefix("- hosts:")
                .or_else(|| t.strip_prefix("hosts:"))
            {
                let h = h
                    .split('#')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .trim_matches(['"', '\'']);
                hosts = Some((h.to_string(), i + 1));
                continue;
            }
            let named = t == format!("- role: {role}")
                || t == format!("- {role}")
                || t == format!("role: {role}");
            if let (true, Some((g, at))) = (named, &hosts) {
                let members = repo.inventory.hosts_in(g).unwrap_or_default();
                if members.len() > 1 && members.iter().any(|h| h == server) {
                    return Some((g.clone(), format!("{file}:{at}")));
                }
            }
        }
    }
    None
}

/// The expressions the repo indexes `groups[...][0]` with (its first server, the one the
/// others join), each with where it is used, most used first.
fn first_of_group_uses(repo: &Repo) -> Vec<(String, Vec<String>)> {
    let Ok(re) = regex::Regex::new(r"groups\[\s*([^\]\[]+?)\s*\]\s*\[\s*0\s*\]") else {
        return Vec::new();
    };
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (rel, text) in text_files(repo) {
        for (i, line) in text.lines().enumerate() {
            for c in re.captures_iter(line) {
                found
                    .entry(c[1].trim().to_string())
                    .or_default()
                    .push(format!("{rel}:{}", i + 1));
            }
        }
    }
    let mut v: Vec<(String, Vec<String>)> = found.into_iter().collect();
    v.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Whether `var` appears as a whole name inside a `{{ ... }}` of `line`.
fn jinja_mentions(line: &str, var: &str) -> bool {
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").unwrap_or(after.len());
        let expr = &after[..end];
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if expr.split(|c: char| !ident(c)).any(|word| word == var) {
            return true;
        }
        rest = &after[end..];
    }
    false
}

/// One fact's proposal: the source (`None`: the default), why, and a question if any.
fn choose(
    key: &str,
    candidates: &[(String, String)],
    used: &BTreeMap<String, Vec<Use>>,
    what: &str,
) -> (Option<String>, Vec<String>, Option<String>) {
    let used_ones: Vec<&(String, String)> = candidates
        .iter()
        .filter(|(v, _)| used.contains_key(v))
        .collect();
    // Used where an API client dials it (`--server`, K3S_URL, k8sServiceHost) or the API
    // certificate names it (`--tls-san`): stronger than any other use.
    let api_ones: Vec<&(String, String)> = candidates
        .iter()
        .filter(|(v, _)| {
            used.get(v)
                .is_some_and(|us| us.iter().any(|u| API_USES.contains(&u.keyword)))
        })
        .collect();
    let pick = match (candidates, api_ones.as_slice(), used_ones.as_slice()) {
        ([one], _, _) => Some(one),
        (_, [one], _) => Some(*one),
        (_, [], [one]) => Some(*one),
        _ => None,
    };
    let shown = |(v, why): &(String, String)| {
        let mut s = format!("{v} ({why})");
        for u in used.get(v).into_iter().flatten().take(3) {
            s.push_str(&format!("; used as `{}` at {}", u.keyword, u.at));
        }
        s
    };
    match pick {
        Some(c) => (
            Some(c.0.clone()),
            vec![format!("{key}: {what}: {}", shown(c))],
            None,
        ),
        None if candidates.is_empty() => (None, Vec::new(), None),
        None => (
            None,
            Vec::new(),
            Some(format!(
                "facts.{key}: several variables could be {what}: {}: which one?",
                candidates.iter().map(shown).collect::<Vec<_>>().join(" | ")
            )),
        ),
    }
}

/// `facts:` for an environment whose servers do not define the seed's variables: each fact
/// from a variable the servers share, by its value and its uses. Written only where the
/// seed's variable is missing.
pub(super) fn propose_facts(repo: &Repo, e: &mut ProposedEnv, questions: &mut Vec<String>) {
    let members = repo
        .inventory
        .pattern_hosts(&e.cfg.servers)
        .unwrap_or_default();
    let Some(first) = members.first().cloned() else {
        return;
    };
    let has = |k: FactKey| {
        repo.resolve_var(&first, FactsConfig::default_source(k))
            .is_some()
    };
    if FactKey::ALL.iter().all(|k| has(*k)) {
        return;
    }
    let shared = shared_vars(repo, &members);
    let nodes = node_addresses(repo);
    let server_addrs: Vec<String> = members
        .iter()
        .map(|h| string_var(repo, h, "ansible_host").unwrap_or_else(|| h.clone()))
        .collect();
    let ip = |v: &str| v.parse::<IpAddr>().is_ok();
    let at = |v: &str| origin(repo, &first, v);
    let skip = |v: &str| v.starts_with("ansible_") || v.starts_with("hk_");
    let vip_cands: Vec<(String, String)> = shared
        .iter()
        .filter(|(k, v)| !skip(k) && ip(v) && !nodes.contains(*v))
        .map(|(k, v)| {
            (
                k.clone(),
                format!("{v}, no node's address, shared by every server, {}", at(k)),
            )
        })
        .collect();
    let founder_cands: Vec<(String, String)> = shared
        .iter()
        .filter(|(k, v)| !skip(k) && server_addrs.contains(v))
        .map(|(k, v)| (k.clone(), format!("{v}, a server's address, {}", at(k))))
        .collect();
    let group_names: BTreeSet<String> = repo.inventory.group_names().into_iter().collect();
    let primary_cands: Vec<(String, String)> = shared
        .iter()
        .filter(|(k, v)| {
            !skip(k) && group_names.contains(*v) && **v != e.cfg.servers && {
                let hs = repo.inventory.hosts_in(v).unwrap_or_default();
                !hs.is_empty() && hs.iter().all(|h| members.contains(h))
            }
        })
        .map(|(k, v)| (k.clone(), format!("{v}, a group of servers, {}", at(k))))
        .collect();
    let port_cands: Vec<(String, String)> = shared
        .iter()
        .filter(|(k, v)| {
            !skip(k)
                && k.contains("port")
                && v.parse::<u16>().is_ok()
                && (k.contains("api") || **v == K3S_DEFAULT_PORT.to_string())
        })
        .map(|(k, v)| (k.clone(), format!("{v}, {}", at(k))))
        .collect();
    let kube_cands: Vec<(String, String)> = shared
        .iter()
        .filter(|(k, v)| !skip(k) && k.contains("kubeconfig") && !v.is_empty() && !v.contains('/'))
        .map(|(k, v)| (k.clone(), format!("{v}, {}", at(k))))
        .collect();
    let all: BTreeSet<String> = shared.keys().cloned().collect();
    let used = uses(repo, &all);
    let mut facts = FactsConfig::default();
    let mut why: Vec<String> = Vec::new();
    let mut set = |k: FactKey,
                   source: Option<String>,
                   w: Vec<String>,
                   q: Option<String>,
                   facts: &mut FactsConfig| {
        if has(k) {
            return;
        }
        why.extend(w);
        if let Some(q) = q {
            questions.push(format!("environments.{}.{q}", e.name));
        }
        let slot = match k {
            FactKey::PrimaryGroup => &mut facts.primary_group,
            FactKey::Founder => &mut facts.founder,
            FactKey::Vip => &mut facts.vip,
            FactKey::Endpoint => &mut facts.endpoint,
            FactKey::ApiPort => &mut facts.api_port,
            FactKey::Kubeconfig => &mut facts.kubeconfig,
        };
        *slot = source;
    };
    let (vip, w, q) = choose("vip", &vip_cands, &used, "the VIP");
    const NO_VIP: &str = "facts.vip: no variable renders to an address that is no node's but every server's: which one holds the VIP?";
    let vq = q.or_else(|| vip.is_none().then(|| NO_VIP.to_string()));
    set(FactKey::Vip, vip.clone(), w, vq, &mut facts);
    // The endpoint the kubeconfigs dial: the VIP when the repo has no variable of its own.
    let endpoint_w = vip
        .as_ref()
        .map(|v| {
            vec![format!(
                "endpoint: the VIP `{v}` (no endpoint variable of its own)"
            )]
        })
        .unwrap_or_default();
    set(
        FactKey::Endpoint,
        vip.clone(),
        endpoint_w,
        // Without a VIP the vip question above stands for both.
        None,
        &mut facts,
    );
    let (f, w, q) = choose(
        "founder",
        &founder_cands,
        &used,
        "the founder (the address the other servers join)",
    );
    let fq = q.or_else(|| f.is_none().then(|| "facts.founder: no variable renders to a server's address: which server do the others join?".to_string()));
    set(FactKey::Founder, f, w, fq, &mut facts);
    let (p, w, q) = choose(
        "primary_group",
        &primary_cands,
        &used,
        "the primary server's group",
    );
    // No variable names it: the group the repo's own playbooks take their first server
    // from (`groups[group_name_master | default('master')][0]`), found by its use.
    let (p, w, q) = match (p, q) {
        (None, None) => match by_use_primary(repo, &first, &members) {
            Some((expr, why)) => (Some(format!("{{{{ {expr} }}}}")), vec![why], None),
            None => (None, w, None),
        },
        other => (other.0, w, other.1),
    };
    // A server that is a host, not a group (found by the variable that names it): it is
    // its own primary.
    let (p, w, q) = match (p, q) {
        (None, None) if !repo.inventory.has_group(&e.cfg.servers) && members.len() == 1 => (
            Some(format!("{{{{ '{}' }}}}", e.cfg.servers)),
            vec![format!(
                "the one server {} is its own primary (no group holds it alone)",
                e.cfg.servers
            )],
            None,
        ),
        other => (other.0, w, other.1),
    };
    let pq = q.or_else(|| p.is_none().then(|| "facts.primary_group: no variable names a group of servers: which group holds the first server?".to_string()));
    set(FactKey::PrimaryGroup, p, w, pq, &mut facts);
    let (port, w, q) = choose("api_port", &port_cands, &used, "the API port");
    let (port, w, q) = match (port, q) {
        (Some(p), _) => (Some(p), w, None),
        // k3s's default serves envs/check/plan; `demo --repo` points the port at its
        // simulated API server by rewriting a variable and refuses an expression.
        (None, None) => (
            Some(format!("{{{{ {K3S_DEFAULT_PORT} }}}}")),
            vec![format!(
                "api_port: no port variable; k3s's own default {K3S_DEFAULT_PORT}"
            )],
            Some(format!("facts.api_port: no variable holds the API port; k3s's default {K3S_DEFAULT_PORT} is written, but `demo --repo` rewrites a variable: name the one your k3s config reads")),
        ),
        (None, Some(q)) => (None, w, Some(q)),
    };
    set(FactKey::ApiPort, port, w, q, &mut facts);
    let (kc, w, q) = choose("kubeconfig", &kube_cands, &used, "the kubeconfig name");
    let (kc, w, q) = match (kc, q) {
        (Some(k), _) => (Some(k), w, None),
        (None, Some(q)) => (None, w, Some(q)),
        (None, None) => (
            Some(format!("{{{{ '{}.kubeconfig' }}}}", e.name)),
            vec![format!("kubeconfig: no kubeconfig-name variable; .cache/{}.kubeconfig", e.name)],
            Some(format!("facts.kubeconfig: no variable names the kubeconfig file: is `{}.kubeconfig` (under .cache/) right?", e.name)),
        ),
    };
    set(FactKey::Kubeconfig, kc, w, q, &mut facts);
    e.cfg.facts = facts;
    if !why.is_empty() {
        e.why.insert("facts", why);
    }
}

/// The primary group by its use: the most used `groups[EXPR][0]` whose EXPR renders, for
/// the first server, to a group of servers only. Its source (EXPR) and why.
fn by_use_primary(repo: &Repo, first: &str, members: &[String]) -> Option<(String, String)> {
    use crate::repo::env::HostFacts;
    for (expr, at) in first_of_group_uses(repo) {
        let Some(group) = repo.rendered(first, &format!("{{{{ {expr} }}}}")).as_text() else {
            continue;
        };
        let hosts = repo.inventory.hosts_in(&group).unwrap_or_default();
        if hosts.is_empty() || !hosts.iter().all(|h| members.contains(h)) {
            continue;
        }
        let more = match at.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        return Some((
            expr.clone(),
            format!(
                "primary_group: `{expr}` renders to `{group}` (servers only); the repo takes its \
                 first server as groups[{expr}][0] at {}{more}",
                at[0]
            ),
        ));
    }
    None
}

/// `agents:` when one agent-like group (`workers`, `k3s_agents`) holds no server.
pub(super) fn propose_agents(repo: &Repo, e: &mut ProposedEnv, questions: &mut Vec<String>) {
    if e.cfg.agents.is_some() {
        return;
    }
    let servers = repo
        .inventory
        .pattern_hosts(&e.cfg.servers)
        .unwrap_or_default();
    let cands: Vec<(String, Vec<String>)> = repo
        .inventory
        .group_names()
        .into_iter()
        .filter(|g| like(g, AGENT_LIKE) || AGENT_NAMES.contains(&g.to_ascii_lowercase().as_str()))
        .filter_map(|g| {
            let hs = repo.inventory.hosts_in(&g).unwrap_or_default();
            (!hs.is_empty() && hs.iter().all(|h| !servers.contains(h))).then_some((g, hs))
        })
        .collect();
    match cands.as_slice() {
        [] => {}
        [(g, hs)] => {
            e.cfg.agents = Some(g.clone());
            e.why.insert(
                "agents",
                vec![format!(
                    "`{g}` ({}) reads as the k3s agents by its name and holds no server",
                    hs.join(", ")
                )],
            );
        }
        many => {
            questions.push(format!(
            "environments.{}.agents: several worker-like groups ({}): which one are its agents?",
            e.name,
            many.iter().map(|(g, _)| g.as_str()).collect::<Vec<_>>().join(", ")
        ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{compared_with_inventory_hostname as cmp, jinja_mentions};

    #[test]
    fn a_variable_compared_with_inventory_hostname_is_read_either_way_round() {
        assert_eq!(
            cmp(r#"    k3s_is_control_plane: "{{ control_plane == inventory_hostname }}""#),
            Some("control_plane".into())
        );
        assert_eq!(
            cmp("  when: inventory_hostname == first_server"),
            Some("first_server".into())
        );
        assert_eq!(cmp("  when: inventory_hostname == 'node01'"), None);
        assert_eq!(cmp("  when: a == b"), None);
        assert_eq!(cmp("  when: inventory_hostname in groups['x']"), None);
    }

    #[test]
    fn a_variable_is_used_only_as_a_whole_name_inside_braces() {
        assert!(jinja_mentions("--tls-san {{ cluster_vip }}", "cluster_vip"));
        assert!(jinja_mentions(
            "a: \"{{ x | default(cluster_vip) }}\"",
            "cluster_vip"
        ));
        assert!(!jinja_mentions(
            "--tls-san {{ cluster_vip2 }}",
            "cluster_vip"
        ));
        assert!(!jinja_mentions("cluster_vip: {{ other }}", "cluster_vip"));
    }
}
