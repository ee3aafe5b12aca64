//! The demo's infra repo: the bundled sample (or the operator's own repo, copied), written
//! out and moved onto loopback.
//!
//! Owns: writing the embedded sample repo into a directory ([`write_sample`]) or copying
//! the operator's repo there ([`copy_repo`], for `demo --repo DIR`), working out
//! from ITS inventory which addresses the console would dial (every host's `ansible_host`,
//! each environment's VIP and founder) and giving each a loopback address of its own
//! ([`plan_addresses`]), rewriting every such address in every text file of the copy
//! ([`rewrite_addresses`]) so the inventory, the Flux overlays and the parity check stay
//! consistent with each other, and proving afterwards that nothing the console can reach
//! is off this machine ([`verify_loopback`]).
//! Also owns the demo directory's claim ([`claim_dir`]): the marker `demo --dir` writes, so
//! a later `demo --dir` on it reopens it (its journals kept) and refuses any other
//! directory that is not empty.
//! Must not: know the homelab. Hosts, groups, addresses and variable names come from the
//! sample's own inventory and `repo::env`'s documented variables.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use hk_engine::repo::env::EnvProblem;
use hk_engine::repo::Repo;

mod table {
    // The other tables of the generated file are read by their own modules.
    #![allow(dead_code)]
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// The file `demo --dir` writes into its directory. A directory holding it is a demo's:
/// a later `demo --dir` reopens it. Its text names the repo the demo simulates there.
pub const DEMO_MARKER: &str = ".hk-console-demo";

/// What [`claim_dir`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// A new or empty directory, now marked.
    New,
    /// A directory an earlier demo made: its run journals are kept (how many there are);
    /// the repo copy is written again and moved onto the restarted simulation's ports.
    Reopened { journals: usize },
}

/// What the marker says: which repo the demo simulates in that directory.
fn marker_text(source: Option<&Path>) -> String {
    let what = match source {
        // One repo however its path was spelt.
        Some(src) => format!(
            "repo: {}",
            src.canonicalize()
                .unwrap_or_else(|_| src.to_path_buf())
                .display()
        ),
        None => "repo: the bundled sample".to_string(),
    };
    format!("hk-console demo directory (written by `hk-console demo --dir`)\n{what}\n")
}

/// Make `dir` the demo's directory (`demo --dir`), simulating `source` (`--repo`, else the
/// bundled sample). A missing or empty directory is created and marked; a marked one is
/// reopened, its `runs/` (the journals) untouched, so a crash and its resume can be
/// rehearsed across starts; a marked one that simulated another repo, or any other
/// directory that is not empty, is refused with the reason and left as it is.
/// The lock a running demo holds on its directory (`flock`, released when the process
/// ends however it ends), its pid written inside.
pub const DEMO_LOCK: &str = ".hk-demo.lock";

/// Hold `dir` for this demo while the returned file lives: a second demo on a directory a
/// running demo holds would write its repo copy and kubeconfigs again under it (the first
/// console then resumes onto ports that are gone). Refused naming the holder's pid; nothing
/// in the directory is changed.
pub fn hold_dir(dir: &Path) -> Result<std::fs::File, String> {
    use std::io::{Seek, Write};
    let path = dir.join(DEMO_LOCK);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(&path).unwrap_or_default();
            let pid = pid.trim();
            return Err(format!(
                "{} is held by a running demo ({}): a second demo would write its repo copy and kubeconfigs again under it; stop that one or name another directory (nothing was changed)",
                dir.display(),
                if pid.is_empty() {
                    "its pid not yet written".to_string()
                } else {
                    format!("pid {pid}")
                }
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(format!("cannot lock {}: {e}", path.display()))
        }
    }
    let pid = std::process::id().to_string();
    f.set_len(0)
        .and_then(|()| f.rewind())
        .and_then(|()| f.write_all(pid.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(f)
}

pub fn claim_dir(dir: &Path, source: Option<&Path>) -> Result<Claimed, String> {
    let shown = dir.display();
    let empty = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("{shown}: cannot read it: {e}")),
    };
    let want = marker_text(source);
    let marker = dir.join(DEMO_MARKER);
    if empty {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {shown}: {e}"))?;
        std::fs::write(&marker, &want)
            .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
        return Ok(Claimed::New);
    }
    let is_marker = std::fs::symlink_metadata(&marker).is_ok_and(|m| m.file_type().is_file());
    if !is_marker {
        return Err(format!(
            "{shown} is not empty and is not a demo directory (it has no {DEMO_MARKER}, which \
             `demo --dir` writes): the demo writes a whole repo there; name a new or empty \
             directory, or one an earlier `demo --dir` made"
        ));
    }
    let had = std::fs::read_to_string(&marker)
        .map_err(|e| format!("cannot read {}: {e}", marker.display()))?;
    if had != want {
        let said = |t: &str| {
            t.lines()
                .find_map(|l| l.strip_prefix("repo: "))
                .unwrap_or("an unknown repo")
                .to_string()
        };
        return Err(format!(
            "{shown} is the demo directory of {}, not of {}: reopen it with the same --repo, \
             or name another directory",
            said(&had),
            said(&want)
        ));
    }
    let journals = std::fs::read_dir(dir.join("runs"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.ends_with(".jsonl") && !name.ends_with(hk_engine::journal::OUTPUT_SUFFIX)
                })
                .count()
        })
        .unwrap_or(0);
    Ok(Claimed::Reopened { journals })
}

/// The bundled sample repo as `(path relative to its root, contents)`.
pub fn sample_files() -> &'static [(&'static str, &'static str)] {
    table::SAMPLE_REPO
}

/// The embedded scenario files as `(file name, text)`.
pub fn scenario_files() -> &'static [(&'static str, &'static str)] {
    table::SCENARIOS
}

#[derive(Debug, thiserror::Error)]
pub enum DemoRepoError {
    #[error("demo repo: cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("demo repo: cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("demo repo: the sample does not load: {0}")]
    Load(String),
    #[error("demo repo: {0}")]
    NotLoopback(String),
    #[error("demo --repo {path}: {why}")]
    Source { path: PathBuf, why: String },
}

/// What `demo --repo` copies at most: a repo this big is not an infra repo the demo can
/// simulate (its text is rewritten address by address), and a copy must not fill the disk.
pub const COPY_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// ... and at most this many files.
pub const COPY_MAX_FILES: usize = 20_000;

/// Directories `demo --repo` does not copy: version control and build output. Everything
/// else is copied, so whatever hk-console or ansible-playbook reads in the repo is there.
const SKIP_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "target",
    "node_modules",
    ".terraform",
];

/// Copy the operator's repo `source` into `dir` (which must be empty or missing) and return
/// the relative paths of the files copied. Symbolic links, sockets, FIFOs and devices are
/// refused by name: the demo rewrites what it copies, and a link could lead the rewrite
/// (or the simulated nodes) outside the copy.
pub fn copy_repo(source: &Path, dir: &Path) -> Result<Vec<PathBuf>, DemoRepoError> {
    let fail = |why: String| DemoRepoError::Source {
        path: source.to_path_buf(),
        why,
    };
    if !source.join(hk_engine::repo::config::CONFIG_FILE).is_file() {
        return Err(fail(format!(
            "no {} there: `hk-console init --repo {}` proposes one",
            hk_engine::repo::config::CONFIG_FILE,
            source.display()
        )));
    }
    let mut files = Vec::new();
    let mut bytes: u64 = 0;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let from = source.join(&rel);
        let entries = std::fs::read_dir(&from).map_err(|source| DemoRepoError::Read {
            path: from.clone(),
            source,
        })?;
        let mut entries: Vec<_> =
            entries
                .collect::<Result<_, _>>()
                .map_err(|source| DemoRepoError::Read {
                    path: from.clone(),
                    source,
                })?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            let rel = rel.join(&name);
            let path = source.join(&rel);
            let meta = std::fs::symlink_metadata(&path).map_err(|source| DemoRepoError::Read {
                path: path.clone(),
                source,
            })?;
            let ft = meta.file_type();
            if ft.is_dir() {
                if SKIP_DIRS.iter().any(|d| name == *d) {
                    continue;
                }
                std::fs::create_dir_all(dir.join(&rel)).map_err(|source| DemoRepoError::Write {
                    path: dir.join(&rel),
                    source,
                })?;
                stack.push(rel);
            } else if ft.is_file() {
                bytes += meta.len();
                if bytes > COPY_MAX_BYTES || files.len() >= COPY_MAX_FILES {
                    return Err(fail(format!(
                        "more than {} MiB or {COPY_MAX_FILES} files (outside {}): not a repo the demo copies",
                        COPY_MAX_BYTES / (1024 * 1024),
                        SKIP_DIRS.join(", ")
                    )));
                }
                let to = dir.join(&rel);
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(|source| DemoRepoError::Write {
                        path: parent.to_path_buf(),
                        source,
                    })?;
                }
                std::fs::copy(&path, &to).map_err(|source| DemoRepoError::Write {
                    path: to.clone(),
                    source,
                })?;
                files.push(rel);
            } else {
                let kind = if ft.is_symlink() {
                    "a symbolic link"
                } else {
                    "not a regular file (FIFO, socket or device)"
                };
                return Err(fail(format!(
                    "{} is {kind}: the demo copies regular files only; replace it by what it points to in a copy of the repo",
                    rel.display()
                )));
            }
        }
    }
    Ok(files)
}

/// Write the embedded sample repo under `dir` (created if missing).
pub fn write_sample(dir: &Path) -> Result<(), DemoRepoError> {
    for (rel, text) in sample_files() {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| DemoRepoError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| DemoRepoError::Write {
            path: path.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Where the demo puts each thing the console dials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPlan {
    /// Inventory host -> its loopback address (one per host).
    pub hosts: BTreeMap<String, Ipv4Addr>,
    /// Environment -> its VIP's loopback address.
    pub vips: BTreeMap<String, Ipv4Addr>,
    /// Every original address -> its replacement (hosts, VIPs, founders).
    pub rewrite: BTreeMap<IpAddr, Ipv4Addr>,
    /// The repo's files as written or copied (relative to its root): what the demo rewrites.
    pub files: Vec<PathBuf>,
    /// Every environment's `k3s_api_port` before the move (where the repo names one).
    pub api_ports: BTreeMap<String, String>,
}

/// Give every host and every environment's VIP a loopback address: environment `i`
/// (in hk-console.yaml's order) gets `127.0.(10+i).0/24`, its VIP `.100`, its hosts
/// `.1, .2, ...` in inventory order; hosts of no environment go to `127.0.9.x`. A host in
/// two environments keeps its first address.
pub fn plan_addresses(repo: &Repo) -> Result<AddressPlan, DemoRepoError> {
    let mut plan = AddressPlan::default();
    let mut spare: u8 = 1;
    for (i, env) in repo.environments.iter().enumerate() {
        let net = 10u8
            .checked_add(u8::try_from(i).unwrap_or(u8::MAX))
            .filter(|n| *n < 250)
            .ok_or_else(|| DemoRepoError::Load("too many environments for the demo".into()))?;
        let vip = Ipv4Addr::new(127, 0, net, 100);
        plan.vips.insert(env.name.clone(), vip);
        if let Some(old) = env.vip.get().and_then(|v| v.parse::<IpAddr>().ok()) {
            plan.rewrite.insert(old, vip);
        }
        let mut n: u8 = 1;
        for h in env.servers.iter().chain(env.vpn_gateways.iter()) {
            if plan.hosts.contains_key(&h.name) {
                continue;
            }
            let addr = Ipv4Addr::new(127, 0, net, n);
            n = n.saturating_add(1);
            plan.hosts.insert(h.name.clone(), addr);
            if let Ok(old) = h.address.parse::<IpAddr>() {
                plan.rewrite.entry(old).or_insert(addr);
            }
        }
    }
    // Hosts outside every environment still get an address of their own.
    for host in repo.inventory.hosts() {
        if !plan.hosts.contains_key(&host) {
            let addr = Ipv4Addr::new(127, 0, 9, spare);
            spare = spare.saturating_add(1);
            if let Some(old) = host_address(repo, &host) {
                plan.rewrite.entry(old).or_insert(addr);
            }
            plan.hosts.insert(host, addr);
        }
    }
    // The founder is one of the servers: it follows its host. A founder that is no host's
    // address would be dialled by nobody in the demo, but still must not stay off-machine.
    for env in &repo.environments {
        if let Some(old) = env.founder.get().and_then(|v| v.parse::<IpAddr>().ok()) {
            plan.rewrite.entry(old).or_insert_with(|| {
                let addr = Ipv4Addr::new(127, 0, 9, spare);
                spare = spare.saturating_add(1);
                addr
            });
        }
    }
    Ok(plan)
}

/// The prefix length of every network the plan hands out (one /24 per environment, and
/// one for hosts of no environment).
pub const PLAN_PREFIX: u8 = 24;

/// The LAN gateway of a planned host's network: its last usable address (`.254`), which
/// the plan gives to no host or VIP, so a node's `ip route` names a router of its own /24.
pub fn planned_gateway(host: Ipv4Addr) -> Ipv4Addr {
    let [a, b, c, _] = host.octets();
    Ipv4Addr::new(a, b, c, 254)
}

/// Where Ansible connects to `host`: its `ansible_host`, else its inventory name (Ansible's
/// own default), when either is an address.
fn host_address(repo: &Repo, host: &str) -> Option<IpAddr> {
    match repo.resolve_var(host, "ansible_host") {
        Some(v) => v.value()?.as_str()?.parse().ok(),
        None => host.parse().ok(),
    }
}

/// Replace every whole IPv4 address of `plan.rewrite` in every file of the sample under
/// `dir`. Dotted quads are matched whole (`192.168.1.5` does not match inside
/// `192.168.1.50`).
pub fn rewrite_addresses(dir: &Path, plan: &AddressPlan) -> Result<usize, DemoRepoError> {
    let files: Vec<PathBuf> = sample_files().iter().map(|(rel, _)| rel.into()).collect();
    rewrite_files(dir, &files, plan)
}

/// [`rewrite_addresses`] over the files `files` (relative to `dir`). A file that is not
/// UTF-8 text is left as it is: nothing hk-console or Ansible reads as an address is binary,
/// and [`verify_loopback`] afterwards proves every address the console dials was moved.
pub fn rewrite_files(
    dir: &Path,
    files: &[PathBuf],
    plan: &AddressPlan,
) -> Result<usize, DemoRepoError> {
    let mut changed = 0;
    for rel in files {
        let path = dir.join(rel);
        let bytes = std::fs::read(&path).map_err(|source| DemoRepoError::Read {
            path: path.clone(),
            source,
        })?;
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let new = rewrite_text(&text, &plan.rewrite);
        if new != text {
            std::fs::write(&path, new).map_err(|source| DemoRepoError::Write {
                path: path.clone(),
                source,
            })?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// The text with every mapped dotted quad replaced.
pub fn rewrite_text(text: &str, map: &BTreeMap<IpAddr, Ipv4Addr>) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts_token = i == 0 || !is_quad_char(bytes[i - 1]);
        if starts_token && bytes[i].is_ascii_digit() {
            let end = bytes[i..]
                .iter()
                .position(|b| !is_quad_char(*b))
                .map_or(bytes.len(), |p| i + p);
            let token = &text[i..end];
            if let Ok(ip) = token.parse::<Ipv4Addr>() {
                if let Some(new) = map.get(&IpAddr::V4(ip)) {
                    out.push_str(&new.to_string());
                    i = end;
                    continue;
                }
            }
            out.push_str(token);
            i = end;
            continue;
        }
        let ch_len = text[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&text[i..i + ch_len]);
        i += ch_len;
    }
    out
}

/// Point every literal `k8sServicePort` that names one of `from` (the environments' API
/// ports before the move) at `to`, the one port the demo's API servers listen on, in the
/// files `files` (relative to `dir`). Without it the demo's own copy would fail its parity
/// check (a shared HelmRelease saying 6443 while the inventory says the demo's port). A
/// literal naming no environment's port is left as it is: that mismatch is the repo's own,
/// and the check must still find it. Returns how many values were changed.
pub fn move_service_port(
    dir: &Path,
    files: &[PathBuf],
    from: &[String],
    to: u16,
) -> Result<usize, DemoRepoError> {
    let mut moved = 0;
    for rel in files {
        let path = dir.join(rel);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut n = 0;
        let new: Vec<String> = text
            .split_inclusive('\n')
            .map(|line| match service_port_value(line) {
                Some((start, end)) if from.iter().any(|p| p == &line[start..end]) => {
                    n += 1;
                    format!("{}{to}{}", &line[..start], &line[end..])
                }
                _ => line.to_string(),
            })
            .collect();
        if n > 0 {
            std::fs::write(&path, new.concat()).map_err(|source| DemoRepoError::Write {
                path: path.clone(),
                source,
            })?;
            moved += n;
        }
    }
    Ok(moved)
}

/// The byte range of the value on a `k8sServicePort: VALUE` line (quotes excluded), when
/// the line is one.
fn service_port_value(line: &str) -> Option<(usize, usize)> {
    const KEY: &str = "k8sServicePort";
    let body = line.trim_start().trim_start_matches('-').trim_start();
    let rest = body.strip_prefix(KEY)?.trim_start().strip_prefix(':')?;
    let value_at = line.len() - rest.len() + (rest.len() - rest.trim_start().len());
    let value = rest.trim_start();
    let value = value.split('#').next().unwrap_or("").trim_end();
    let quoted = value.len() >= 2
        && (value.starts_with('"') && value.ends_with('"')
            || value.starts_with('\'') && value.ends_with('\''));
    let (start, len) = if quoted {
        (value_at + 1, value.len() - 2)
    } else {
        (value_at, value.len())
    };
    (len > 0).then_some((start, start + len))
}

fn is_quad_char(b: u8) -> bool {
    b.is_ascii_digit() || b == b'.'
}

/// A host's connection plugin as Ansible resolves it (`None`: not set, ssh).
fn connection(repo: &Repo, host: &str) -> Option<String> {
    repo.resolve_var(host, "ansible_connection")
        .and_then(|r| r.value()?.as_str().map(str::to_string))
}

/// The directory of the first inventory source: where Ansible reads `host_vars/` for it.
fn inventory_dir(repo: &Repo) -> Option<PathBuf> {
    let first = repo
        .inventory_sources
        .first()
        .unwrap_or(&repo.inventory_path);
    if first.is_dir() {
        Some(first.clone())
    } else {
        first.parent().map(Path::to_path_buf)
    }
}

/// Hosts Ansible reaches by no address the plan can move (named by a DNS name or
/// `localhost`, with no `ansible_host`), or runs on the controller itself
/// (`ansible_connection: local`, e.g. a repo's `localhost` for its local plays): in the demo
/// each one is a simulated node of its own. A `host_vars/HOST.yml` beside the inventory
/// gives it its planned loopback address, and for a local connection SSH and the node's
/// own `python3` (its interpreter was the controller's); Ansible's precedence puts
/// inventory `host_vars/` over the inventory file's host variables, so Ansible and
/// hk-console both read the node's address. Nothing of a rehearsal runs on this machine.
/// Returns the files written (relative to `dir`). A host that already has a `host_vars`
/// file there is refused by name (the demo does not edit the repo's own variables).
fn give_nodes(dir: &Path, repo: &Repo, plan: &AddressPlan) -> Result<Vec<PathBuf>, DemoRepoError> {
    let mut written = Vec::new();
    let Some(inv_dir) = inventory_dir(repo) else {
        return Ok(written);
    };
    for host in repo.inventory.hosts() {
        let local = connection(repo, &host).as_deref() == Some("local");
        // The rewrite moves dotted quads; an IPv6 address is the node's in its host_vars.
        let moved = matches!(host_address(repo, &host), Some(IpAddr::V4(_)));
        if !local && moved {
            continue;
        }
        let Some(addr) = plan.hosts.get(&host) else {
            continue;
        };
        let vars = inv_dir.join("host_vars");
        let mut text = format!(
            "# Written by hk-console demo, in the demo's copy only: in the repo, {host}\n\
             # {}. Here it is a simulated node of its own,\n\
             # so a rehearsal runs nothing on this machine.\n\
             ansible_host: {addr}\n",
            match (local, host_address(repo, &host)) {
                (true, _) => "runs on the controller (ansible_connection: local)".to_string(),
                (false, Some(ip)) => format!("is reached at {ip}, which the demo does not rewrite"),
                (false, None) => "has no address to move onto loopback".to_string(),
            }
        );
        if local {
            text.push_str(
                "ansible_connection: ssh\n# The repo's interpreter was the controller's own.\n\
                 ansible_python_interpreter: /usr/bin/python3\n",
            );
        }
        let existing = ["", ".yml", ".yaml", ".json"]
            .iter()
            .map(|ext| vars.join(format!("{host}{ext}")))
            .find(|p| p.exists());
        let path = match existing {
            Some(d) if d.is_dir() => d.join("zz-hk-console-demo.yml"),
            Some(f) => {
                return Err(DemoRepoError::NotLoopback(format!(
                    "refusing to start: {host} {} and its {} is the repo's own: the demo does not edit it (give it an `ansible_host`)",
                    if local {
                        "runs on the controller (ansible_connection: local)"
                    } else {
                        "has no ansible_host address"
                    },
                    f.strip_prefix(dir).unwrap_or(&f).display()
                )))
            }
            None => vars.join(format!("{host}.yml")),
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| DemoRepoError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| DemoRepoError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path.strip_prefix(dir).unwrap_or(&path).to_path_buf());
    }
    Ok(written)
}

/// After the rewrite: every host's `ansible_host` and every environment's VIP, founder and
/// API endpoint must be a loopback address, or the demo refuses to start. A host whose
/// connection is not SSH (local, docker, ...) would run its tasks on this machine, whatever
/// its address: refused too.
pub fn verify_loopback(repo: &Repo) -> Result<(), DemoRepoError> {
    let mut bad = Vec::new();
    for host in repo.inventory.hosts() {
        match connection(repo, &host).as_deref() {
            None
            | Some(
                "ssh"
                | "ansible.builtin.ssh"
                | "paramiko"
                | "paramiko_ssh"
                | "ansible.builtin.paramiko_ssh"
                | "smart",
            ) => {}
            Some(other) => bad.push(format!(
                "{host} ansible_connection={other} (runs on this machine, not a node)"
            )),
        }
        match host_address(repo, &host) {
            Some(ip) if ip.is_loopback() => {}
            Some(ip) => bad.push(format!("{host} ansible_host={ip}")),
            None => bad.push(format!("{host} has no ansible_host address")),
        }
    }
    for env in &repo.environments {
        for fact in [&env.vip, &env.founder, &env.endpoint] {
            // A variable no server defines names no address: nothing of it can be dialled.
            // One that cannot be rendered, or on which servers disagree, might: refused.
            let undefined = !env.problems.iter().any(|p| {
                matches!(p, EnvProblem::Unrenderable { var, .. } | EnvProblem::Disagree { var, .. }
                    if *var == fact.var)
            });
            match fact.get().map(|v| v.parse::<IpAddr>()) {
                None if undefined => {}
                Some(Ok(ip)) if ip.is_loopback() => {}
                Some(Ok(ip)) => bad.push(format!("{} {}={ip}", env.name, fact.var)),
                Some(Err(_)) => bad.push(format!(
                    "{} {}={} (not an address)",
                    env.name,
                    fact.var,
                    fact.get().unwrap_or_default()
                )),
                None => bad.push(format!("{} {} unknown", env.name, fact.var)),
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(DemoRepoError::NotLoopback(format!(
            "refusing to start: these would leave this machine: {}",
            bad.join("; ")
        )))
    }
}

/// What an earlier demo on a reopened directory wrote beside the repo copy: the `host_vars`
/// files that hold only its connection variables (it writes them with this header, and the
/// fresh copy has no such file). Removed before the copy is read, so its API port is the
/// repo's again and every port-derived value moves together onto the new simulation (the
/// Flux release's `k8sServicePort` once stayed at the repo's port while `k3s_api_port` moved,
/// and parity failed on the reopened copy).
fn forget_earlier_demo(dir: &Path, fresh: &[PathBuf]) -> Result<(), DemoRepoError> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(d) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    let name = e.file_name();
                    if name != "runs" && name != ".ssh" && name != ".cache" {
                        walk(&p, out);
                    }
                }
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    let mut all = Vec::new();
    walk(dir, &mut all);
    for p in all {
        let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
        let in_host_vars = rel.components().any(|c| c.as_os_str() == "host_vars");
        if !in_host_vars || fresh.contains(&rel) {
            continue;
        }
        let ours = std::fs::read_to_string(&p)
            .is_ok_and(|t| t.starts_with("# Written by hk-console demo: "));
        if ours {
            std::fs::remove_file(&p).map_err(|source| DemoRepoError::Write {
                path: p.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// Write the sample under `dir`, move it onto loopback, reload it and check it.
pub fn prepare(dir: &Path) -> Result<(Repo, AddressPlan), DemoRepoError> {
    prepare_from(dir, None)
}

/// [`prepare`] on a copy of the operator's repo `source` instead of the sample (`demo
/// --repo DIR`): the same address plan, rewrite and loopback proof, on that repo's own
/// environments, hosts and groups.
pub fn prepare_from(
    dir: &Path,
    source: Option<&Path>,
) -> Result<(Repo, AddressPlan), DemoRepoError> {
    let files = match source {
        Some(src) => copy_repo(src, dir)?,
        None => {
            write_sample(dir)?;
            sample_files().iter().map(|(rel, _)| rel.into()).collect()
        }
    };
    forget_earlier_demo(dir, &files)?;
    let origin = Repo::load(dir).map_err(|e| match source {
        Some(src) => DemoRepoError::Source {
            path: src.to_path_buf(),
            why: format!("does not load: {e}"),
        },
        None => DemoRepoError::Load(e.to_string()),
    })?;
    if let Some(src) = source {
        if origin.environments.is_empty() {
            return Err(DemoRepoError::Source {
                path: src.to_path_buf(),
                why: "defines no environment: nothing to simulate".into(),
            });
        }
    }
    let mut plan = plan_addresses(&origin)?;
    plan.api_ports = origin
        .environments
        .iter()
        .filter_map(|e| e.api_port.get().map(|p| (e.name.clone(), p.to_string())))
        .collect();
    rewrite_files(dir, &files, &plan)?;
    let given = give_nodes(dir, &origin, &plan)?;
    plan.files = files;
    plan.files.extend(given);
    // A host named by its IPv4 address was renamed with it (the inventory's own text
    // moved); one named by an IPv6 address keeps its name (the rewrite moves dotted quads
    // only) and reaches its node through the host_vars `give_nodes` wrote.
    plan.hosts = std::mem::take(&mut plan.hosts)
        .into_iter()
        .map(|(host, addr)| match host.parse::<IpAddr>() {
            Ok(old @ IpAddr::V4(_)) => (
                plan.rewrite.get(&old).map_or(host, |new| new.to_string()),
                addr,
            ),
            _ => (host, addr),
        })
        .collect();
    let repo = Repo::load(dir).map_err(|e| DemoRepoError::Load(e.to_string()))?;
    verify_loopback(&repo)?;
    Ok((repo, plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demo_dir_is_claimed_then_reopened_and_a_foreign_one_refused() {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = tmp.path().join("demo");
        assert_eq!(claim_dir(&d, None), Ok(Claimed::New));
        std::fs::create_dir_all(d.join("runs")).expect("runs");
        std::fs::write(d.join("runs/r1.jsonl"), "{}\n").expect("journal");
        std::fs::write(d.join("runs/r1.output.jsonl"), "").expect("output");
        assert_eq!(claim_dir(&d, None), Ok(Claimed::Reopened { journals: 1 }));
        let other = claim_dir(&d, Some(Path::new("/srv/infra"))).expect_err("another repo");
        assert!(
            other.contains("the bundled sample") && other.contains("/srv/infra"),
            "{other}"
        );
        let foreign = tmp.path().join("foreign");
        std::fs::create_dir_all(&foreign).expect("dir");
        std::fs::write(foreign.join("notes"), "mine").expect("file");
        let why = claim_dir(&foreign, None).expect_err("refused");
        assert!(why.contains("not a demo directory"), "{why}");
        assert!(!foreign.join(DEMO_MARKER).exists(), "nothing written there");
    }

    #[test]
    fn finds_the_service_port_value() {
        let at = |l: &str| service_port_value(l).map(|(a, b)| l[a..b].to_string());
        assert_eq!(at("    k8sServicePort: 6443\n").as_deref(), Some("6443"));
        assert_eq!(
            at("  - k8sServicePort: \"6443\" # api\n").as_deref(),
            Some("6443")
        );
        assert_eq!(
            at("k8sServicePort: {{ k3s_api_port }}").as_deref(),
            Some("{{ k3s_api_port }}")
        );
        assert_eq!(at("    k8sServiceHost: 6443\n"), None);
        assert_eq!(at("    k8sServicePort:\n"), None);
    }

    #[test]
    fn moves_only_the_ports_the_environments_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = "a:\n  k8sServicePort: 6443 # api\nb:\n  k8sServicePort: \"7443\"\nc:\n  k8sServicePort: ${PORT}\n";
        std::fs::write(dir.path().join("hr.yaml"), text).expect("write");
        let moved = move_service_port(dir.path(), &["hr.yaml".into()], &["6443".into()], 40001)
            .expect("move");
        assert_eq!(moved, 1);
        let after = std::fs::read_to_string(dir.path().join("hr.yaml")).expect("read");
        // 7443 named no environment's port: the repo's own mismatch stays for the check.
        assert_eq!(
            after,
            "a:\n  k8sServicePort: 40001 # api\nb:\n  k8sServicePort: \"7443\"\nc:\n  k8sServicePort: ${PORT}\n"
        );
    }

    #[test]
    fn rewrites_whole_quads_only() {
        let mut map = BTreeMap::new();
        map.insert(
            "192.168.1.5".parse::<IpAddr>().expect("ip"),
            Ipv4Addr::new(127, 0, 10, 1),
        );
        let text = "a=192.168.1.5 b=192.168.1.50 c=10.192.168.1.5 d=192.168.1.5:6443 é 192.168.1.5";
        assert_eq!(
            rewrite_text(text, &map),
            "a=127.0.10.1 b=192.168.1.50 c=10.192.168.1.5 d=127.0.10.1:6443 é 127.0.10.1"
        );
    }
}
