//! The Ansible INI inventory, read exactly as ansible-core 2.19 reads it.
//!
//! Owns: parsing an INI inventory (sections, `[g:children]`, `[g:vars]`, inline host vars
//! split like Python's `shlex` and typed like `ast.literal_eval`, host ranges, `host:port`),
//! the group graph with Ansible's implicit `all`/`ungrouped` rules, group depth and priority,
//! the `group_vars/`/`host_vars/` beside the inventory file, and merging everything into
//! per-host variables with Ansible's precedence, keeping where each winning value came from.
//!
//! Must not: run Ansible, render Jinja (values stay raw), or decrypt vaulted files (they are
//! listed in [`Inventory::vaulted_files`] as "vaulted, not read").
//!
//! Precedence, lowest first (ansible-core `VariableManager.get_vars`, default
//! `VARIABLE_PRECEDENCE`): INI `[all:vars]` < INI `[g:vars]` of the host's groups (sorted by
//! depth, `ansible_group_priority`, name) < `group_vars/all` < `group_vars/<g>` (same order) <
//! INI inline host vars < `host_vars/<host>`. Each level replaces whole top-level keys.
//!
//! What the real tool does (checked against ansible-core 2.19 by tests/inventory_parity.rs):
//! - `[g:vars]` values are typed exactly like inline host vars (`ast.literal_eval`, else the
//!   raw string): `5` is an int, `True` a bool, `yes` and `0755` stay strings, `'q'` is `q`,
//!   `"a b" # c` is `a b` (a Python comment), `hello # c` is the whole text.
//! - Inline host vars go through `shlex` first, so quotes are removed before typing
//!   (`c="[1, 2]"` is a list) and `#` starts a comment even inside a word.
//! - `ansible_group_priority` in INI sets the priority and is not a variable; the same key in
//!   a group_vars file is an ordinary variable and does not change the priority.
//! - Group names are kept as written (`k3s-dev` stays `k3s-dev`).
//! - A host's port comes from its first `host:port`; later lines do not change it.
//! - A group with no hosts and no children is absent from `--list` but still named in its
//!   parent's `children`; hosts without variables are absent from `_meta.hostvars`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::vars::{self, Loaded, Origin, Var, VarMap, VarsError};

/// A malformed inventory: always names the file and line, and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("{}: cannot read inventory: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error(transparent)]
    Vars(#[from] VarsError),
    /// Not a regular file, or over the size cap (see `repo::read`).
    #[error(transparent)]
    Refused(super::read::ReadError),
    /// A bound on the whole inventory (not one line) was crossed.
    #[error("{}: {message}", file.display())]
    TooLarge { file: PathBuf, message: String },
}

/// Hosts one host pattern may expand to (`inventory.max_range_hosts`). A range like
/// `node[0:99999999]` would otherwise build a hundred million hosts.
pub const MAX_RANGE_HOSTS: usize = 10_000;
/// Bytes of host names one pattern may produce, counting the partial expansions
/// (`inventory.max_range_bytes`): many ranges on a long name multiply its length.
pub const MAX_RANGE_BYTES: usize = 4 * 1024 * 1024;
/// Bytes the merged per-host variables of the whole inventory may take
/// (`inventory.max_merged_bytes`, 128 MiB, estimated). Every host gets its own copy of its
/// groups' variables, so a range of many hosts with a long variable multiplies it.
pub const MAX_MERGED_BYTES: usize = 128 * 1024 * 1024;

#[derive(Debug, Clone)]
struct Group {
    name: String,
    /// Hosts listed directly in this group, in the order Ansible added them.
    hosts: Vec<usize>,
    children: Vec<usize>,
    parents: Vec<usize>,
    /// `[g:vars]` from the INI file.
    vars: VarMap,
    priority: i64,
    depth: usize,
}

#[derive(Debug, Clone)]
struct Host {
    name: String,
    /// Inline INI vars (and `ansible_port` from `host:port`).
    vars: VarMap,
    /// Groups that list this host directly (an index, so membership is not a scan).
    direct: Vec<usize>,
}

/// An Ansible inventory: groups, hosts and merged host variables.
#[derive(Debug, Clone)]
pub struct Inventory {
    path: PathBuf,
    groups: Vec<Group>,
    group_index: HashMap<String, usize>,
    hosts: Vec<Host>,
    host_index: HashMap<String, usize>,
    /// Merged variables per host (same index as `hosts`).
    merged: Vec<VarMap>,
    vaulted: Vec<PathBuf>,
}

const ALL: usize = 0;
const UNGROUPED: usize = 1;

impl Inventory {
    /// Load an INI inventory file plus `group_vars/` and `host_vars/` beside it.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        let bytes = super::read::read_bytes(path).map_err(|e| match e {
            super::read::ReadError::Io { path, source } => InventoryError::Io { path, source },
            other => InventoryError::Refused(other),
        })?;
        let text = decode_ini(bytes, path)?;
        if vars::is_vaulted_text(&text) {
            return Err(InventoryError::Syntax {
                file: path.to_path_buf(),
                line: 1,
                message: "the inventory file is ansible-vault encrypted: vaulted, not read \
                          (expected a plain INI inventory)"
                    .into(),
            });
        }
        let mut inv = Self::parse_ini(&text, path)?;
        // Ansible's `basedir`: the inventory file's own directory (a symlinked file is not
        // followed), so group_vars/ and host_vars/ are looked up beside the path given.
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        inv.merge_vars(&base)?;
        Ok(inv)
    }

    /// Parse INI text only (no vars files); `path` names the file in errors and origins.
    pub fn parse_ini(text: &str, path: &Path) -> Result<Inventory, InventoryError> {
        let mut p = IniParser::new(path);
        p.parse(text)?;
        let mut inv = p.inv;
        inv.reconcile();
        inv.compute_depths();
        // Without vars files the merged view is INI-only.
        inv.merged = inv.merge_all(&[], &[])?;
        Ok(inv)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every host, in the order `ansible all --list-hosts` gives.
    pub fn hosts(&self) -> Vec<String> {
        self.hosts_of_group(ALL)
            .into_iter()
            .map(|h| self.hosts[h].name.clone())
            .collect()
    }

    pub fn has_group(&self, group: &str) -> bool {
        self.group_index.contains_key(group)
    }

    /// Group names in the order Ansible created them (`all`, `ungrouped` first).
    pub fn group_names(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.name.clone()).collect()
    }

    /// Hosts of a group including its descendants, in `ansible GROUP --list-hosts` order.
    /// Where two groups of one level below `group` both bring new child groups, Ansible's
    /// own order between their hosts changes from run to run (it walks a Python set); we
    /// keep declaration order there. (An Ansible *pattern* naming both a host and a group
    /// selects the host; this is the group.)
    pub fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
        let g = *self.group_index.get(group)?;
        Some(
            self.hosts_of_group(g)
                .into_iter()
                .map(|h| self.hosts[h].name.clone())
                .collect(),
        )
    }

    /// Hosts listed directly under a group (what `ansible-inventory --list` shows as `hosts`).
    pub fn direct_hosts(&self, group: &str) -> Option<Vec<String>> {
        let g = *self.group_index.get(group)?;
        Some(
            self.groups[g]
                .hosts
                .iter()
                .map(|&h| self.hosts[h].name.clone())
                .collect(),
        )
    }

    /// Child group names, in declaration order.
    pub fn children_of(&self, group: &str) -> Option<Vec<String>> {
        let g = *self.group_index.get(group)?;
        Some(
            self.groups[g]
                .children
                .iter()
                .map(|&c| self.groups[c].name.clone())
                .collect(),
        )
    }

    /// Every group the host belongs to, transitively, including `all`, in Ansible's
    /// variable precedence order (depth, priority, name): `all` first.
    pub fn groups_of(&self, host: &str) -> Vec<String> {
        let Some(&h) = self.host_index.get(host) else {
            return Vec::new();
        };
        let mut gs = self.sorted_groups_of(h);
        gs.insert(0, ALL);
        gs.into_iter()
            .map(|g| self.groups[g].name.clone())
            .collect()
    }

    pub fn is_member(&self, host: &str, group: &str) -> bool {
        self.groups_of(host).iter().any(|g| g == group)
    }

    /// The host's variables merged with Ansible's precedence (raw values, Jinja NOT rendered).
    pub fn host_vars(&self, host: &str) -> Option<&VarMap> {
        self.host_index.get(host).map(|&h| &self.merged[h])
    }

    /// Vars files found encrypted: "vaulted, not read" (their variable names are unknown).
    pub fn vaulted_files(&self) -> &[PathBuf] {
        &self.vaulted
    }

    /// `ansible_group_priority` of a group (1 when unset).
    pub fn group_priority(&self, group: &str) -> Option<i64> {
        self.group_index
            .get(group)
            .map(|&g| self.groups[g].priority)
    }

    /// A group's depth below `all` (the longest path), as Ansible sorts by it.
    pub fn group_depth(&self, group: &str) -> Option<usize> {
        self.group_index.get(group).map(|&g| self.groups[g].depth)
    }

    // ----- graph -----

    fn empty(path: &Path) -> Inventory {
        let mut inv = Inventory {
            path: path.to_path_buf(),
            groups: Vec::new(),
            group_index: HashMap::new(),
            hosts: Vec::new(),
            host_index: HashMap::new(),
            merged: Vec::new(),
            vaulted: Vec::new(),
        };
        inv.add_group("all");
        inv.add_group("ungrouped");
        // Cannot fail: two distinct fresh groups.
        let _ = inv.add_child(ALL, UNGROUPED);
        inv
    }

    fn add_group(&mut self, name: &str) -> usize {
        if let Some(&g) = self.group_index.get(name) {
            return g;
        }
        let idx = self.groups.len();
        self.groups.push(Group {
            name: name.to_string(),
            hosts: Vec::new(),
            children: Vec::new(),
            parents: Vec::new(),
            vars: VarMap::new(),
            priority: 1,
            depth: 0,
        });
        self.group_index.insert(name.to_string(), idx);
        idx
    }

    /// Ansible's `Group.add_child_group`, with its loop checks.
    fn add_child(&mut self, parent: usize, child: usize) -> Result<(), String> {
        if parent == child {
            return Err(format!(
                "can't add group '{}' to itself",
                self.groups[parent].name
            ));
        }
        if self.groups[parent].children.contains(&child) {
            return Ok(());
        }
        if self.ancestors(parent).contains(&child) {
            return Err(format!(
                "Adding group '{}' as child to '{}' creates a recursive dependency loop.",
                self.groups[child].name, self.groups[parent].name
            ));
        }
        self.groups[parent].children.push(child);
        if !self.groups[child].parents.contains(&parent) {
            self.groups[child].parents.push(parent);
        }
        Ok(())
    }

    fn ancestors(&self, g: usize) -> HashSet<usize> {
        let mut seen = HashSet::new();
        let mut todo: Vec<usize> = self.groups[g].parents.clone();
        while let Some(p) = todo.pop() {
            if seen.insert(p) {
                todo.extend(self.groups[p].parents.iter().copied());
            }
        }
        seen
    }

    fn add_host(&mut self, name: &str, group: usize, port: Option<u64>, origin: &Origin) -> usize {
        let h = match self.host_index.get(name) {
            Some(&h) => h,
            None => {
                let h = self.hosts.len();
                let mut vars = VarMap::new();
                // Only the first definition's port counts (Ansible sets it when creating
                // the host); `if port:` in Ansible skips port 0.
                if let Some(port) = port.filter(|p| *p != 0) {
                    vars.insert(
                        "ansible_port".into(),
                        Var {
                            value: serde_json::Value::from(port),
                            origin: origin.clone(),
                            secret: false,
                        },
                    );
                }
                self.hosts.push(Host {
                    name: name.to_string(),
                    vars,
                    direct: Vec::new(),
                });
                self.host_index.insert(name.to_string(), h);
                h
            }
        };
        if !self.hosts[h].direct.contains(&group) {
            self.hosts[h].direct.push(group);
            self.groups[group].hosts.push(h);
        }
        h
    }

    /// Ansible's `InventoryData.reconcile_inventory`: parentless groups go under `all`; a host
    /// in `ungrouped` and in another group leaves `ungrouped`; a host in no group joins it.
    fn reconcile(&mut self) {
        for g in 0..self.groups.len() {
            if g != ALL && self.groups[g].parents.is_empty() {
                let _ = self.add_child(ALL, g);
            }
        }
        for h in 0..self.hosts.len() {
            let mine = self.direct_and_ancestor_groups(h);
            if mine.contains(&UNGROUPED) {
                if mine.iter().any(|&g| g != ALL && g != UNGROUPED) {
                    self.groups[UNGROUPED].hosts.retain(|&x| x != h);
                    self.hosts[h].direct.retain(|&g| g != UNGROUPED);
                }
            } else if mine.iter().all(|&g| g == ALL) {
                self.hosts[h].direct.push(UNGROUPED);
                self.groups[UNGROUPED].hosts.push(h);
            }
        }
    }

    fn direct_and_ancestor_groups(&self, h: usize) -> HashSet<usize> {
        let mut out = HashSet::new();
        for &g in &self.hosts[h].direct {
            out.insert(g);
            out.extend(self.ancestors(g));
        }
        out
    }

    /// Depth = longest path from `all` (Ansible raises depths as edges are added).
    fn compute_depths(&mut self) {
        fn depth(inv: &Inventory, g: usize, memo: &mut Vec<Option<usize>>) -> usize {
            if let Some(d) = memo[g] {
                return d;
            }
            let d = inv.groups[g]
                .parents
                .iter()
                .map(|&p| depth(inv, p, memo) + 1)
                .max()
                .unwrap_or(0);
            memo[g] = Some(d);
            d
        }
        let mut memo = vec![None; self.groups.len()];
        for g in 0..self.groups.len() {
            let d = depth(self, g, &mut memo);
            self.groups[g].depth = d;
        }
    }

    /// Ansible's `Group.get_hosts`: the group itself, its children in order, then deeper
    /// levels breadth-first. (Python walks deeper levels through a `set`, so when two groups
    /// of one level both have unseen children the order between them is not defined there;
    /// we keep declaration order.)
    fn hosts_of_group(&self, g: usize) -> Vec<usize> {
        let mut ordered = vec![g];
        ordered.extend(self.groups[g].children.iter().copied());
        let mut seen: HashSet<usize> = ordered.iter().copied().collect();
        let mut level = ordered.clone();
        while !level.is_empty() {
            let mut next = Vec::new();
            for &lg in &level {
                for &c in &self.groups[lg].children {
                    // Inserting into `seen` here also keeps `next` free of duplicates.
                    if seen.insert(c) {
                        next.push(c);
                    }
                }
            }
            ordered.extend(next.iter().copied());
            level = next;
        }
        let mut hosts = Vec::new();
        let mut seen_hosts = HashSet::new();
        for kid in ordered {
            for &h in &self.groups[kid].hosts {
                if seen_hosts.insert(h) {
                    hosts.push(h);
                }
            }
        }
        hosts
    }

    /// The host's groups except `all`, sorted as Ansible's `sort_groups`.
    fn sorted_groups_of(&self, h: usize) -> Vec<usize> {
        let mut gs: Vec<usize> = self
            .direct_and_ancestor_groups(h)
            .into_iter()
            .filter(|&g| g != ALL)
            .collect();
        gs.sort_by(|&a, &b| {
            let (ga, gb) = (&self.groups[a], &self.groups[b]);
            (ga.depth, ga.priority, &ga.name).cmp(&(gb.depth, gb.priority, &gb.name))
        });
        gs
    }

    // ----- variables -----

    fn merge_vars(&mut self, base: &Path) -> Result<(), InventoryError> {
        let mut cache: HashMap<PathBuf, VarMap> = HashMap::new();
        let gv_dir = base.join("group_vars");
        let hv_dir = base.join("host_vars");
        let mut group_files: Vec<VarMap> = Vec::with_capacity(self.groups.len());
        for g in 0..self.groups.len() {
            let name = self.groups[g].name.clone();
            group_files.push(self.load_entity_files(&gv_dir, &name, &mut cache)?);
        }
        let mut host_files: Vec<VarMap> = Vec::with_capacity(self.hosts.len());
        for h in 0..self.hosts.len() {
            let name = self.hosts[h].name.clone();
            host_files.push(self.load_entity_files(&hv_dir, &name, &mut cache)?);
        }
        self.merged = self.merge_all(&group_files, &host_files)?;
        Ok(())
    }

    /// Ansible's `host_group_vars` plugin for one group or host: every vars file found,
    /// combined in order. Names starting with `/` are skipped, as Ansible does.
    fn load_entity_files(
        &mut self,
        dir: &Path,
        name: &str,
        cache: &mut HashMap<PathBuf, VarMap>,
    ) -> Result<VarMap, InventoryError> {
        let mut out = VarMap::new();
        if name.starts_with('/') || !dir.is_dir() {
            return Ok(out);
        }
        for file in vars::find_vars_files(dir, name) {
            if let Some(v) = cache.get(&file) {
                vars::combine(&mut out, v);
                continue;
            }
            let loaded = match vars::load_vars_file(&file)? {
                Loaded::Vars(v) => v,
                Loaded::Vaulted => {
                    if !self.vaulted.contains(&file) {
                        self.vaulted.push(file.clone());
                    }
                    VarMap::new()
                }
            };
            vars::combine(&mut out, &loaded);
            cache.insert(file, loaded);
        }
        Ok(out)
    }

    /// Every host's merged variables, refusing past [`MAX_MERGED_BYTES`] (checked host by
    /// host, so at most one host's copy is made beyond it).
    fn merge_all(
        &self,
        group_files: &[VarMap],
        host_files: &[VarMap],
    ) -> Result<Vec<VarMap>, InventoryError> {
        let mut total = 0usize;
        let mut merged = Vec::with_capacity(self.hosts.len());
        for h in 0..self.hosts.len() {
            let vars = self.merge_host(h, group_files, host_files);
            total = total.saturating_add(vars.iter().map(|(k, v)| k.len() + var_bytes(v)).sum());
            if total > MAX_MERGED_BYTES {
                return Err(InventoryError::TooLarge {
                    file: self.path.clone(),
                    message: format!(
                        "the merged variables of the first {} of {} hosts already take more than {} MiB (limit inventory.max_merged_bytes): every host copies its groups' variables, so many hosts times large variables is refused",
                        h + 1,
                        self.hosts.len(),
                        MAX_MERGED_BYTES / (1024 * 1024)
                    ),
                });
            }
            merged.push(vars);
        }
        Ok(merged)
    }

    fn merge_host(&self, h: usize, group_files: &[VarMap], host_files: &[VarMap]) -> VarMap {
        let sorted = self.sorted_groups_of(h);
        let mut out = VarMap::new();
        vars::combine(&mut out, &self.groups[ALL].vars);
        for &g in &sorted {
            vars::combine(&mut out, &self.groups[g].vars);
        }
        if let Some(v) = group_files.get(ALL) {
            vars::combine(&mut out, v);
        }
        for &g in &sorted {
            if let Some(v) = group_files.get(g) {
                vars::combine(&mut out, v);
            }
        }
        vars::combine(&mut out, &self.hosts[h].vars);
        if let Some(v) = host_files.get(h) {
            vars::combine(&mut out, v);
        }
        out
    }
}

// ----- the INI parser -----

#[derive(Debug)]
enum PendingState {
    Vars,
    Children { parents: Vec<usize> },
}

#[derive(Debug)]
struct Pending {
    name: String,
    line: usize,
    state: PendingState,
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Hosts,
    Children,
    Vars,
}

struct IniParser {
    inv: Inventory,
    file: PathBuf,
    line: usize,
    /// Ansible's `pending_declarations`, in insertion order (the first one is reported).
    pending: Vec<Pending>,
}

struct Patterns {
    section: Regex,
    groupname: Regex,
    bracketed_hostport: Regex,
    hostport: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        #[allow(clippy::unwrap_used)] // constant patterns, exercised by every test
        Patterns {
            section: Regex::new(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$").unwrap(),
            groupname: Regex::new(r"^([^:\]\s]+)\s*(?:#.*)?$").unwrap(),
            bracketed_hostport: Regex::new(r"^\[(.+)\]:([0-9]+)$").unwrap(),
            hostport: Regex::new(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$").unwrap(),
        }
    })
}

impl IniParser {
    fn new(path: &Path) -> Self {
        IniParser {
            inv: Inventory::empty(path),
            file: path.to_path_buf(),
            line: 0,
            pending: Vec::new(),
        }
    }

    fn err(&self, message: impl Into<String>) -> InventoryError {
        self.err_at(self.line, message)
    }

    fn err_at(&self, line: usize, message: impl Into<String>) -> InventoryError {
        InventoryError::Syntax {
            file: self.file.clone(),
            line,
            message: message.into(),
        }
    }

    fn origin(&self, col: usize) -> Origin {
        Origin {
            file: self.file.clone(),
            line: self.line,
            col,
        }
    }

    fn pending_pos(&self, name: &str) -> Option<usize> {
        self.pending.iter().position(|p| p.name == name)
    }

    fn parse(&mut self, text: &str) -> Result<(), InventoryError> {
        let mut group = UNGROUPED;
        let mut state = State::Hosts;
        for raw in split_lines(text) {
            self.line += 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(caps) = patterns().section.captures(line) {
                // Ansible's INI plugin calls `to_safe_group_name` without `force`, and the
                // default TRANSFORM_INVALID_GROUP_CHARS is "never": `k3s-dev` stays as is.
                let name = caps.get(1).map_or("", |m| m.as_str()).to_string();
                let kind = caps.get(2).map(|m| m.as_str());
                state = match kind {
                    None | Some("hosts") => State::Hosts,
                    Some("children") => State::Children,
                    Some("vars") => State::Vars,
                    Some(other) => {
                        return Err(self.err(format!(
                            "Section [{}:{other}] has unknown type: {other} (expected [group], [group:children] or [group:vars])",
                            caps.get(1).map_or("", |m| m.as_str())
                        )))
                    }
                };
                if !self.inv.group_index.contains_key(&name) {
                    if state == State::Vars && self.pending_pos(&name).is_none() {
                        self.pending.push(Pending {
                            name: name.clone(),
                            line: self.line,
                            state: PendingState::Vars,
                        });
                    }
                    self.inv.add_group(&name);
                }
                group = self.inv.group_index[&name];
                if state != State::Vars {
                    if let Some(pos) = self.pending_pos(&name) {
                        match self.pending[pos].state {
                            PendingState::Children { .. } => self.add_pending_children(&name)?,
                            PendingState::Vars => {
                                self.pending.remove(pos);
                            }
                        }
                    }
                }
                continue;
            }
            if line.starts_with('[') && line.ends_with(']') {
                return Err(self.err(format!(
                    "Invalid section entry: '{line}'. Please make sure that there are no spaces in the section entry, and that there are no other invalid characters (expected [group], [group:children] or [group:vars])"
                )));
            }
            match state {
                State::Hosts => self.host_line(line, raw, group)?,
                State::Vars => self.vars_line(line, raw, group)?,
                State::Children => self.children_line(line, group)?,
            }
        }
        if let Some(decl) = self.pending.first() {
            let message = match &decl.state {
                PendingState::Vars => format!(
                    "Section [{0}:vars] not valid for undefined group '{0}' (declare it with [{0}] or [{0}:children])",
                    decl.name
                ),
                PendingState::Children { parents } => {
                    let parent = parents
                        .last()
                        .map(|&p| self.inv.groups[p].name.clone())
                        .unwrap_or_default();
                    format!(
                        "Section [{parent}:children] includes undefined group '{}' (expected a group declared with [{}] or [{}:children])",
                        decl.name, decl.name, decl.name
                    )
                }
            };
            return Err(self.err_at(decl.line, message));
        }
        Ok(())
    }

    fn add_pending_children(&mut self, name: &str) -> Result<(), InventoryError> {
        let Some(pos) = self.pending_pos(name) else {
            return Ok(());
        };
        let parents = match &self.pending[pos].state {
            PendingState::Children { parents } => parents.clone(),
            PendingState::Vars => Vec::new(),
        };
        let child = self.inv.group_index[name];
        for parent in parents {
            self.inv.add_child(parent, child).map_err(|m| self.err(m))?;
            let parent_name = self.inv.groups[parent].name.clone();
            if let Some(pp) = self.pending_pos(&parent_name) {
                if matches!(self.pending[pp].state, PendingState::Children { .. }) {
                    self.add_pending_children(&parent_name)?;
                }
            }
        }
        if let Some(pos) = self.pending_pos(name) {
            self.pending.remove(pos);
        }
        Ok(())
    }

    fn children_line(&mut self, line: &str, group: usize) -> Result<(), InventoryError> {
        let Some(child) = patterns()
            .groupname
            .captures(line)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_string())
        else {
            return Err(self.err(format!("Expected group name, got: {line}")));
        };
        match self.inv.group_index.get(&child) {
            Some(&c) => self.inv.add_child(group, c).map_err(|m| self.err(m)),
            None => {
                match self.pending_pos(&child) {
                    None => self.pending.push(Pending {
                        name: child,
                        line: self.line,
                        state: PendingState::Children {
                            parents: vec![group],
                        },
                    }),
                    Some(pos) => match &mut self.pending[pos].state {
                        PendingState::Children { parents } => parents.push(group),
                        // Python would raise a KeyError on 'parents' here.
                        PendingState::Vars => {
                            return Err(
                                self.err(format!("group '{child}' is pending as a vars section"))
                            )
                        }
                    },
                }
                Ok(())
            }
        }
    }

    fn vars_line(&mut self, line: &str, raw: &str, group: usize) -> Result<(), InventoryError> {
        let Some((k, v)) = line.split_once('=') else {
            return Err(self.err(format!("Expected key=value, got: {line}")));
        };
        let (k, v) = (k.trim(), v.trim());
        let value = pyliteral::parse_value(v).map_err(|m| self.err(format!("{k}: {m}")))?;
        let col = column_of(raw, k);
        self.set_group_var(group, k, value, col)
    }

    fn set_group_var(
        &mut self,
        group: usize,
        k: &str,
        value: serde_json::Value,
        col: usize,
    ) -> Result<(), InventoryError> {
        if k == "ansible_group_priority" {
            let p = python_int(&value).ok_or_else(|| {
                self.err(format!(
                    "ansible_group_priority must be an integer, got: {value}"
                ))
            })?;
            self.inv.groups[group].priority = p;
            return Ok(());
        }
        let var = Var {
            value,
            origin: self.origin(col),
            secret: false,
        };
        self.inv.groups[group].vars.insert(k.to_string(), var);
        Ok(())
    }

    fn host_line(&mut self, line: &str, raw: &str, group: usize) -> Result<(), InventoryError> {
        let tokens = shlex_split(line)
            .map_err(|e| self.err(format!("Error parsing host definition '{line}': {e}")))?;
        let Some(pattern) = tokens.first() else {
            return Err(self.err(format!("Expected a host name, got: {line}")));
        };
        let (names, port) = expand_hostpattern(pattern).map_err(|m| self.err(m))?;
        // Each host gets its own copy of the line's variables.
        if names.len().saturating_mul(line.len()) > MAX_MERGED_BYTES {
            return Err(self.err(format!(
                "{} hosts each copying this {}-byte line's variables exceed {} MiB (limit inventory.max_merged_bytes)",
                names.len(),
                line.len(),
                MAX_MERGED_BYTES / (1024 * 1024)
            )));
        }
        let mut variables: Vec<(String, serde_json::Value, usize)> = Vec::new();
        let mut var_index: HashMap<String, usize> = HashMap::new();
        // Tokens come in line order: each `k=` is searched for after the previous one, so a
        // long line is scanned once, not once per variable.
        let mut cursor = 0;
        for t in &tokens[1..] {
            let Some((k, v)) = t.split_once('=') else {
                return Err(self.err(format!(
                    "Expected key=value host variable assignment, got: {t}"
                )));
            };
            let value = pyliteral::parse_value(v).map_err(|m| self.err(format!("{k}: {m}")))?;
            let needle = format!("{k}=");
            let col = match raw.get(cursor..).and_then(|rest| rest.find(&needle)) {
                Some(i) => {
                    cursor += i + needle.len();
                    raw[..cursor - needle.len()].chars().count() + 1
                }
                // Not written as-is (a quoted key): no column to point at.
                None => 1,
            };
            match var_index.get(k) {
                Some(&i) => {
                    variables[i].1 = value;
                    variables[i].2 = col;
                }
                None => {
                    var_index.insert(k.to_string(), variables.len());
                    variables.push((k.to_string(), value, col));
                }
            }
        }
        let host_origin = self.origin(column_of(raw, pattern));
        for name in names {
            if name.is_empty() {
                return Err(self.err(format!("Invalid empty host name in: {line}")));
            }
            let h = self.inv.add_host(&name, group, port, &host_origin);
            for (k, v, col) in &variables {
                let var = Var {
                    value: v.clone(),
                    origin: self.origin(*col),
                    secret: false,
                };
                self.inv.hosts[h].vars.insert(k.clone(), var);
            }
        }
        Ok(())
    }
}

/// Python's `int(value)` for `ansible_group_priority`.
fn python_int(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Bool(b) => Some(i64::from(*b)),
        serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        serde_json::Value::String(s) => s.trim().replace('_', "").parse().ok(),
        _ => None,
    }
}

/// A rough size in bytes of a variable's value and origin, for the merge budget.
fn var_bytes(var: &Var) -> usize {
    let mut total = var.origin.file.as_os_str().len() + 64;
    let mut todo = vec![&var.value];
    while let Some(v) = todo.pop() {
        total += 32;
        match v {
            serde_json::Value::String(s) => total += s.len(),
            serde_json::Value::Array(items) => todo.extend(items.iter()),
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    total += k.len() + 32;
                    todo.push(v);
                }
            }
            _ => {}
        }
    }
    total
}

/// 1-based column of `needle` in the raw line (for provenance), 1 if not found.
fn column_of(raw: &str, needle: &str) -> usize {
    raw.find(needle).map_or(1, |i| raw[..i].chars().count() + 1)
}

/// The file as text. Like Ansible, bytes that are not UTF-8 are tolerated in comment lines
/// only (they become empty lines, keeping line numbers); anywhere else they are an error.
fn decode_ini(bytes: Vec<u8>, path: &Path) -> Result<String, InventoryError> {
    let bytes = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(e) => e.into_bytes(),
    };
    let mut out = String::with_capacity(bytes.len());
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if matches!(line.first(), Some(b'#') | Some(b';')) {
            out.push_str(std::str::from_utf8(line).unwrap_or(""));
            continue;
        }
        match std::str::from_utf8(line) {
            Ok(l) => out.push_str(l),
            Err(_) => {
                return Err(InventoryError::Syntax {
                    file: path.to_path_buf(),
                    line: i + 1,
                    message: "bytes that are not UTF-8 (expected UTF-8 text; only comment lines may hold other bytes)".into(),
                })
            }
        }
    }
    Ok(out)
}

/// `str.splitlines()` for the line breaks that occur in practice.
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            Some(i) => {
                out.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                out.push(rest);
                rest = "";
            }
        }
    }
    out
}

/// Python's `shlex.split(line, comments=True)` (POSIX mode): whitespace splits, `'...'` is
/// literal, `"..."` honours `\"` and `\\`, a backslash outside quotes escapes any character,
/// and `#` starts a comment even in the middle of a word.
pub fn shlex_split(line: &str) -> Result<Vec<String>, &'static str> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Space,
        Word,
        Quote(char),
        Escape(char),
    }
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut quoted = false;
    let mut state = S::Space;
    // The state an escape returns to: Word, or the quote it happened in.
    let mut back = S::Word;
    for c in line.chars() {
        match state {
            S::Space => {
                if c.is_whitespace() {
                    continue;
                } else if c == '#' {
                    break;
                } else if c == '\\' {
                    back = S::Word;
                    state = S::Escape('\\');
                } else if c == '\'' || c == '"' {
                    state = S::Quote(c);
                } else {
                    token.push(c);
                    state = S::Word;
                }
            }
            S::Word => {
                if c.is_whitespace() || c == '#' {
                    if !token.is_empty() || quoted {
                        tokens.push(std::mem::take(&mut token));
                    }
                    quoted = false;
                    state = S::Space;
                    if c == '#' {
                        return Ok(tokens);
                    }
                } else if c == '\'' || c == '"' {
                    state = S::Quote(c);
                } else if c == '\\' {
                    back = S::Word;
                    state = S::Escape('\\');
                } else {
                    token.push(c);
                }
            }
            S::Quote(q) => {
                quoted = true;
                if c == q {
                    state = S::Word;
                } else if c == '\\' && q == '"' {
                    back = S::Quote(q);
                    state = S::Escape('\\');
                } else {
                    token.push(c);
                }
            }
            S::Escape(_) => {
                if let S::Quote(q) = back {
                    if c != '\\' && c != q {
                        token.push('\\');
                    }
                }
                token.push(c);
                state = back;
            }
        }
    }
    match state {
        S::Quote(_) => Err("No closing quotation"),
        S::Escape(_) => Err("No escaped character"),
        _ => {
            if !token.is_empty() || quoted {
                tokens.push(token);
            }
            Ok(tokens)
        }
    }
}

/// Ansible's INI `_expand_hostpattern`: split an optional `:port`, expand `[a:b(:s)]` ranges.
pub fn expand_hostpattern(pattern: &str) -> Result<(Vec<String>, Option<u64>), String> {
    let (host, port) = match parse_address(pattern) {
        Some((h, p)) => (h, p),
        None => (pattern.to_string(), None),
    };
    if pattern.trim().ends_with(':') && port.is_none() {
        return Err(format!(
            "Invalid host pattern '{pattern}' supplied, ending in ':' is not allowed, this character is reserved to provide a port."
        ));
    }
    let names = if host.contains('[') {
        expand_hostname_range(&host)?
    } else {
        vec![host]
    };
    if names.iter().any(|n| n.trim() == "---") {
        return Err(format!(
            "Invalid host pattern '{pattern}' supplied, '---' is normally a sign this is a YAML file."
        ));
    }
    Ok((names, port))
}

/// Ansible's `parse_address(allow_ranges=True)`; `None` when not a recognisable host
/// (Ansible then keeps the whole pattern as the name, port included).
fn parse_address(address: &str) -> Option<(String, Option<u64>)> {
    let p = patterns();
    let mut address = address.to_string();
    let mut port = None;
    for re in [&p.bracketed_hostport, &p.hostport] {
        if let Some(c) = re.captures(&address) {
            let (a, pt) = (c.get(1)?.as_str().to_string(), c.get(2)?.as_str());
            port = Some(pt.parse::<u64>().ok()?);
            address = a;
        }
    }
    if is_hostname(&address) || is_ipv6ish(&address) {
        Some((address, port))
    } else {
        None
    }
}

/// Ansible's `hostname` pattern: dot-separated labels of word characters, `-` and
/// `[x:y(:s)]` ranges, starting with a word character or range, not ending in `_` or `-`.
fn is_hostname(s: &str) -> bool {
    s.split('.').all(is_label)
}

fn is_label(label: &str) -> bool {
    let chars: Vec<char> = label.chars().collect();
    if chars.is_empty() {
        return false;
    }
    let mut i = 0;
    let mut last = ' ';
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            let Some(len) = alnum_range_len(&chars[i..]) else {
                return false;
            };
            i += len;
            last = ']';
        } else if c.is_alphanumeric() || c == '_' || (c == '-' && i > 0) {
            last = c;
            i += 1;
        } else {
            return false;
        }
    }
    last != '_' && last != '-'
}

/// Length of an `alphanumeric_range` (`[a:z]`, `[0:9]`, optional `:step`) at the start.
fn alnum_range_len(chars: &[char]) -> Option<usize> {
    let end = chars.iter().position(|&c| c == ']')?;
    let body: String = chars[1..end].iter().collect();
    let parts: Vec<&str> = body.split(':').collect();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let letter = |s: &str| s.len() == 1 && s.chars().all(|c| c.is_ascii_alphabetic());
    let ok = match parts.as_slice() {
        [a, b] | [a, b, _] => (letter(a) && letter(b)) || (digits(a) && digits(b)),
        _ => false,
    } && (parts.len() == 2 || digits(parts[2]));
    ok.then_some(end + 1)
}

fn is_ipv6ish(s: &str) -> bool {
    s.matches(':').count() >= 2
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.' || c == '[' || c == ']')
}

/// Ansible's `expand_hostname_range`, including its quirks: the first `[...]` is expanded,
/// then the result recursively; a begin with a leading zero sets a zero-padded width; a
/// single-letter (or letter-run) begin/end makes an alphabetic range over `a..zA..Z`.
/// Bounded: at most [`MAX_RANGE_HOSTS`] hosts and [`MAX_RANGE_BYTES`] bytes of names, each
/// range's size checked before it is built.
pub fn expand_hostname_range(line: &str) -> Result<Vec<String>, String> {
    let mut budget = RangeBudget {
        hosts: 0,
        bytes: 0,
        pattern: line,
    };
    let mut all = Vec::new();
    expand_range_into(line, &mut budget, &mut all)?;
    Ok(all)
}

struct RangeBudget<'a> {
    hosts: usize,
    bytes: usize,
    pattern: &'a str,
}

impl RangeBudget<'_> {
    fn too_many(&self) -> String {
        format!(
            "host pattern '{}' expands to more than {MAX_RANGE_HOSTS} hosts (limit inventory.max_range_hosts): split it or narrow the range",
            self.pattern
        )
    }

    fn spend(&mut self, hosts: usize, bytes: usize) -> Result<(), String> {
        self.hosts = self.hosts.saturating_add(hosts);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.hosts > MAX_RANGE_HOSTS {
            return Err(self.too_many());
        }
        if self.bytes > MAX_RANGE_BYTES {
            return Err(format!(
                "host pattern '{}' expands to more than {MAX_RANGE_BYTES} bytes of host names (limit inventory.max_range_bytes): split it or narrow the range",
                self.pattern
            ));
        }
        Ok(())
    }
}

fn expand_range_into(
    line: &str,
    budget: &mut RangeBudget<'_>,
    all: &mut Vec<String>,
) -> Result<(), String> {
    let replaced = line.replacen('[', "|", 1).replacen(']', "|", 1);
    let parts: Vec<&str> = replaced.split('|').collect();
    let [head, nrange, tail] = parts.as_slice() else {
        return Err(format!(
            "host range in '{line}' must be one [begin:end] or [begin:end:step] per bracket"
        ));
    };
    let bounds: Vec<&str> = nrange.split(':').collect();
    if bounds.len() != 2 && bounds.len() != 3 {
        return Err(format!(
            "host range must be begin:end or begin:end:step (in '{line}')"
        ));
    }
    let beg = if bounds[0].is_empty() { "0" } else { bounds[0] };
    let end = bounds[1];
    let step = bounds.get(2).copied().unwrap_or("1");
    if end.is_empty() {
        return Err(format!("host range must specify end value (in '{line}')"));
    }
    let width = if beg.starts_with('0') && beg.len() > 1 {
        if beg.len() != end.len() {
            return Err(format!(
                "host range must specify equal-length begin and end formats (in '{line}')"
            ));
        }
        Some(beg.len())
    } else {
        None
    };
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut seq: Vec<String> = Vec::new();
    let alpha = match (LETTERS.find(beg), LETTERS.find(end)) {
        (Some(ib), Some(ie)) => {
            if ib > ie {
                return Err(format!("host range must have begin <= end (in '{line}')"));
            }
            // A step Python cannot slice with falls through to the numeric attempt.
            match py_int(step) {
                Some(s) if s > 0 => {
                    seq = LETTERS[ib..=ie]
                        .chars()
                        .step_by(usize::try_from(s).unwrap_or(usize::MAX))
                        .map(String::from)
                        .collect();
                    true
                }
                Some(s) if s < 0 => true,
                _ => false,
            }
        }
        _ => false,
    };
    if !alpha {
        let bad = || format!("host range bounds must be integers or single letters (in '{line}')");
        let b = i128::from(py_int(beg).ok_or_else(bad)?);
        let e = i128::from(py_int(end).ok_or_else(bad)?);
        let s = i128::from(py_int(step).ok_or_else(bad)?);
        if s == 0 {
            return Err(format!("host range step must not be zero (in '{line}')"));
        }
        // Python's range(b, e + 1, s), sized before anything is built.
        let stop = e + 1;
        let count = if s > 0 && b < stop {
            (stop - b + s - 1) / s
        } else if s < 0 && b > stop {
            (b - stop + (-s) - 1) / (-s)
        } else {
            0
        };
        if count > MAX_RANGE_HOSTS as i128 {
            return Err(budget.too_many());
        }
        seq = (0..count).map(|k| (b + k * s).to_string()).collect();
    }
    for item in seq {
        let filled = match width {
            Some(w) => python_zfill(&item, w),
            None => item,
        };
        let name = format!("{head}{filled}{tail}");
        if name.contains('[') {
            budget.spend(0, name.len())?;
            expand_range_into(&name, budget, all)?;
        } else {
            budget.spend(1, name.len())?;
            all.push(name);
        }
    }
    Ok(())
}

/// Python's `int(str)` for the forms that occur in ranges.
fn py_int(s: &str) -> Option<i64> {
    let t = s.trim();
    if t.is_empty() || t.starts_with('_') || t.ends_with('_') || t.contains("__") {
        return None;
    }
    t.replace('_', "").parse().ok()
}

fn python_zfill(s: &str, width: usize) -> String {
    let (sign, digits) = match s.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", s),
    };
    let pad = width.saturating_sub(s.chars().count());
    format!("{sign}{}{digits}", "0".repeat(pad))
}

/// Python's `ast.literal_eval`, as Ansible's INI plugin uses it: a value that is a Python
/// literal becomes that value (`True`, `None`, `5`, `1.5`, `'x'`, `[1, 2]`, `{'a': 1}`),
/// anything else stays the string it was. Then Ansible's coercion: tuples and sets become
/// lists, bytes become text, `...` and complex numbers become their string form.
pub mod pyliteral {
    use serde_json::Value as J;

    #[derive(Debug, Clone, PartialEq)]
    enum Py {
        None,
        Bool(bool),
        Int(i128),
        Float(f64),
        Complex(f64, f64),
        Str(String),
        Ellipsis,
        List(Vec<Py>),
        Set(Vec<Py>),
        Dict(Vec<(Py, Py)>),
    }

    /// Python's tokenizer refuses brackets nested deeper than this ("too many nested
    /// parentheses"), so Ansible keeps such a value as the string it was.
    pub const PYTHON_MAX_NESTING: i32 = 200;
    /// Literals nested deeper than this are refused (`inventory.max_literal_depth`):
    /// ansible-core itself fails on them ("maximum recursion depth exceeded", from about
    /// 165 levels on ansible-core 2.19 / Python 3.11), so no inventory that works has one.
    pub const MAX_LITERAL_DEPTH: usize = 100;

    /// Type an INI value like Ansible's `_parse_value`. Errs (with the reason) only for a
    /// literal nested past [`MAX_LITERAL_DEPTH`].
    pub fn parse_value(v: &str) -> Result<J, String> {
        match literal_eval(v) {
            Some(py) => {
                let depth = py_depth(&py);
                if depth > MAX_LITERAL_DEPTH {
                    return Err(format!(
                        "a value nested {depth} levels deep, more than {MAX_LITERAL_DEPTH} (limit inventory.max_literal_depth); ansible-core fails on such values with 'maximum recursion depth exceeded'"
                    ));
                }
                Ok(to_json(&py))
            }
            None => Ok(J::String(v.to_string())),
        }
    }

    /// How many containers deep a value goes (a scalar is 0).
    fn py_depth(v: &Py) -> usize {
        match v {
            Py::List(items) | Py::Set(items) => 1 + items.iter().map(py_depth).max().unwrap_or(0),
            Py::Dict(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| py_depth(k).max(py_depth(v)))
                    .max()
                    .unwrap_or(0)
            }
            _ => 0,
        }
    }

    fn literal_eval(v: &str) -> Option<Py> {
        let src = v.trim_start_matches([' ', '\t']);
        let tokens = tokenize(src)?;
        let mut p = Parser { t: &tokens, i: 0 };
        let value = p.expr_list()?;
        (p.i == tokens.len()).then_some(value)
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Tok {
        Num(Py),
        Str { text: String, bytes: bool },
        Name(String),
        Op(char),
        Ellipsis,
    }

    fn tokenize(s: &str) -> Option<Vec<Tok>> {
        let chars: Vec<char> = s.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        let mut depth = 0i32;
        while i < chars.len() {
            let c = chars[i];
            if c == ' ' || c == '\t' || c == '\x0c' {
                i += 1;
            } else if c == '\n' || c == '\r' {
                // A newline outside brackets ends the expression; only trailing blank lines
                // may follow.
                if depth == 0 && chars[i..].iter().any(|c| !c.is_whitespace()) {
                    return None;
                }
                i += 1;
            } else if c == '#' {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '.' && chars.get(i + 1) == Some(&'.') && chars.get(i + 2) == Some(&'.') {
                out.push(Tok::Ellipsis);
                i += 3;
            } else if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric()
                        || chars[i] == '_'
                        || chars[i] == '.'
                        || ((chars[i] == '+' || chars[i] == '-')
                            && matches!(chars[i - 1], 'e' | 'E')
                            && !is_hex_or_prefixed(&chars[start..i])))
                {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                out.push(Tok::Num(number(&text)?));
            } else if c.is_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                // String prefixes.
                if matches!(chars.get(i), Some('\'') | Some('"')) && word.len() <= 2 {
                    let lw = word.to_ascii_lowercase();
                    let (raw, bytes) = match lw.as_str() {
                        "r" => (true, false),
                        "u" => (false, false),
                        "b" => (false, true),
                        "br" | "rb" => (true, true),
                        // f-strings are not literals; anything else is a syntax error.
                        _ => return None,
                    };
                    let (text, next) = string(&chars, i, raw, bytes)?;
                    out.push(Tok::Str { text, bytes });
                    i = next;
                } else {
                    out.push(Tok::Name(word));
                }
            } else if c == '\'' || c == '"' {
                let (text, next) = string(&chars, i, false, false)?;
                out.push(Tok::Str { text, bytes: false });
                i = next;
            } else if "()[]{},:+-".contains(c) {
                match c {
                    '(' | '[' | '{' => {
                        depth += 1;
                        // Python's "too many nested parentheses": not a literal, and the
                        // parser below never recurses deeper than this.
                        if depth > PYTHON_MAX_NESTING {
                            return None;
                        }
                    }
                    ')' | ']' | '}' => depth -= 1,
                    _ => {}
                }
                out.push(Tok::Op(c));
                i += 1;
            } else {
                return None;
            }
        }
        Some(out)
    }

    fn is_hex_or_prefixed(chars: &[char]) -> bool {
        chars.len() > 1 && chars[0] == '0' && matches!(chars[1], 'x' | 'X' | 'o' | 'O' | 'b' | 'B')
    }

    fn digits_ok(s: &str, radix: u32) -> bool {
        // Underscores only between digits (one at a time).
        !s.is_empty()
            && !s.starts_with('_')
            && !s.ends_with('_')
            && !s.contains("__")
            && s.chars().all(|c| c == '_' || c.is_digit(radix))
    }

    fn number(text: &str) -> Option<Py> {
        let lower = text.to_ascii_lowercase();
        if let Some(rest) = lower.strip_suffix('j') {
            let f = float_text(rest)?;
            return Some(Py::Complex(0.0, f));
        }
        for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
            if let Some(body) = lower.strip_prefix(prefix) {
                // Python allows one underscore right after the prefix.
                let body = body.strip_prefix('_').unwrap_or(body);
                if !digits_ok(body, radix) {
                    return None;
                }
                return i128::from_str_radix(&body.replace('_', ""), radix)
                    .ok()
                    .map(Py::Int);
            }
        }
        if lower.contains(['.', 'e']) {
            return float_text(&lower).map(Py::Float);
        }
        if !digits_ok(&lower, 10) {
            return None;
        }
        let plain = lower.replace('_', "");
        // Leading zeros are a syntax error unless the number is all zeros.
        if plain.len() > 1 && plain.starts_with('0') && plain.chars().any(|c| c != '0') {
            return None;
        }
        plain.parse().ok().map(Py::Int)
    }

    fn float_text(s: &str) -> Option<f64> {
        // digits [. digits] [e [+-] digits], with underscores only between digits.
        let (mantissa, exp) = match s.split_once('e') {
            Some((m, e)) => (m, Some(e)),
            None => (s, None),
        };
        let (int_part, frac) = match mantissa.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (mantissa, None),
        };
        if int_part.is_empty() && frac.is_none_or(str::is_empty) {
            return None;
        }
        if !int_part.is_empty() && !digits_ok(int_part, 10) {
            return None;
        }
        if let Some(f) = frac {
            if !f.is_empty() && !digits_ok(f, 10) {
                return None;
            }
        }
        if let Some(e) = exp {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            if !digits_ok(e, 10) {
                return None;
            }
        }
        s.replace('_', "").parse().ok()
    }

    /// A quoted string starting at `chars[i]`; returns its value and the index after it.
    fn string(chars: &[char], i: usize, raw: bool, bytes: bool) -> Option<(String, usize)> {
        let q = chars[i];
        let triple = chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q);
        let mut j = if triple { i + 3 } else { i + 1 };
        let mut out = String::new();
        loop {
            let c = *chars.get(j)?;
            if bytes && !c.is_ascii() {
                return None;
            }
            if c == q {
                if !triple {
                    return Some((out, j + 1));
                }
                if chars.get(j + 1) == Some(&q) && chars.get(j + 2) == Some(&q) {
                    return Some((out, j + 3));
                }
                out.push(c);
                j += 1;
                continue;
            }
            if (c == '\n' || c == '\r') && !triple {
                return None;
            }
            if c == '\\' {
                let n = *chars.get(j + 1)?;
                if raw {
                    // Raw strings keep the backslash; it still protects the next quote.
                    out.push('\\');
                    out.push(n);
                    j += 2;
                    continue;
                }
                j += 2;
                match n {
                    '\n' => {}
                    '\\' => out.push('\\'),
                    '\'' => out.push('\''),
                    '"' => out.push('"'),
                    'a' => out.push('\x07'),
                    'b' => out.push('\x08'),
                    'f' => out.push('\x0c'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'v' => out.push('\x0b'),
                    '0'..='7' => {
                        let mut val = n.to_digit(8)?;
                        let mut k = 0;
                        while k < 2 {
                            match chars.get(j).and_then(|c| c.to_digit(8)) {
                                Some(d) => {
                                    val = val * 8 + d;
                                    j += 1;
                                    k += 1;
                                }
                                None => break,
                            }
                        }
                        out.push(char::from_u32(val)?);
                    }
                    'x' => {
                        let hex: String = chars.get(j..j + 2)?.iter().collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        j += 2;
                    }
                    'u' | 'U' if !bytes => {
                        let len = if n == 'u' { 4 } else { 8 };
                        let hex: String = chars.get(j..j + len)?.iter().collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        j += len;
                    }
                    // \N{NAME} needs the Unicode name table; treat as not a literal.
                    'N' if !bytes => return None,
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
                continue;
            }
            out.push(c);
            j += 1;
        }
    }

    struct Parser<'a> {
        t: &'a [Tok],
        i: usize,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<&Tok> {
            self.t.get(self.i)
        }

        fn eat(&mut self, c: char) -> bool {
            if self.peek() == Some(&Tok::Op(c)) {
                self.i += 1;
                true
            } else {
                false
            }
        }

        /// Top level: `1, 2` is a tuple.
        fn expr_list(&mut self) -> Option<Py> {
            let first = self.expr()?;
            if self.peek() != Some(&Tok::Op(',')) {
                return Some(first);
            }
            let mut items = vec![first];
            while self.eat(',') {
                if self.i == self.t.len() {
                    break;
                }
                items.push(self.expr()?);
            }
            Some(Py::List(items))
        }

        /// `signed_num [(+|-) imaginary]` or an atom.
        fn expr(&mut self) -> Option<Py> {
            let (left, is_num) = self.signed()?;
            if let Some(Tok::Op(op)) = self.peek() {
                let op = *op;
                if op == '+' || op == '-' {
                    self.i += 1;
                    let (right, right_num) = self.atom()?;
                    // Only `real (+|-) imaginary` is a literal.
                    let re = match (is_num, &left) {
                        (true, Py::Int(i)) => *i as f64,
                        (true, Py::Float(f)) => *f,
                        _ => return None,
                    };
                    let Py::Complex(_, im) = (right_num.then_some(right))? else {
                        return None;
                    };
                    return Some(Py::Complex(re, if op == '-' { -im } else { im }));
                }
            }
            Some(left)
        }

        fn signed(&mut self) -> Option<(Py, bool)> {
            let sign = if self.eat('-') {
                Some(-1.0)
            } else if self.eat('+') {
                Some(1.0)
            } else {
                None
            };
            let (v, is_num) = self.atom()?;
            let Some(sign) = sign else {
                return Some((v, is_num));
            };
            if !is_num {
                return None;
            }
            let negate = sign < 0.0;
            let v = match v {
                Py::Int(i) => Py::Int(if negate { -i } else { i }),
                Py::Float(f) => Py::Float(if negate { -f } else { f }),
                Py::Complex(re, im) => {
                    if negate {
                        Py::Complex(-re, -im)
                    } else {
                        Py::Complex(re, im)
                    }
                }
                _ => return None,
            };
            // A signed number is a literal but cannot be signed again or be the imaginary
            // right-hand side; it may still be the real left-hand side.
            Some((v, true))
        }

        /// Returns the value and whether it is a plain numeric constant.
        fn atom(&mut self) -> Option<(Py, bool)> {
            let tok = self.peek()?.clone();
            self.i += 1;
            match tok {
                Tok::Num(n) => Some((n, true)),
                Tok::Ellipsis => Some((Py::Ellipsis, false)),
                Tok::Str { mut text, bytes } => {
                    // Adjacent literals concatenate; mixing bytes and text is an error.
                    while let Some(Tok::Str {
                        text: more,
                        bytes: b2,
                    }) = self.peek()
                    {
                        if *b2 != bytes {
                            return None;
                        }
                        text.push_str(more);
                        self.i += 1;
                    }
                    Some((Py::Str(text), false))
                }
                Tok::Name(n) => match n.as_str() {
                    "True" => Some((Py::Bool(true), false)),
                    "False" => Some((Py::Bool(false), false)),
                    "None" => Some((Py::None, false)),
                    "set" if self.eat('(') && self.eat(')') => Some((Py::Set(Vec::new()), false)),
                    _ => None,
                },
                Tok::Op('(') => {
                    if self.eat(')') {
                        return Some((Py::List(Vec::new()), false));
                    }
                    let (first, is_num) = self.expr_num()?;
                    if self.eat(')') {
                        // Parentheses do not make a node: `-(1)` is still -1.
                        return Some((first, is_num));
                    }
                    let mut items = vec![first];
                    while self.eat(',') {
                        if self.peek() == Some(&Tok::Op(')')) {
                            break;
                        }
                        items.push(self.expr()?);
                    }
                    self.eat(')').then_some((Py::List(items), false))
                }
                Tok::Op('[') => {
                    let items = self.items(']')?;
                    Some((Py::List(items), false))
                }
                Tok::Op('{') => {
                    if self.eat('}') {
                        return Some((Py::Dict(Vec::new()), false));
                    }
                    let first = self.expr()?;
                    if self.eat(':') {
                        let mut entries = vec![(first, self.expr()?)];
                        while self.eat(',') {
                            if self.peek() == Some(&Tok::Op('}')) {
                                break;
                            }
                            let k = self.expr()?;
                            if !self.eat(':') {
                                return None;
                            }
                            entries.push((k, self.expr()?));
                        }
                        self.eat('}').then_some((Py::Dict(entries), false))
                    } else {
                        let mut items = vec![first];
                        while self.eat(',') {
                            if self.peek() == Some(&Tok::Op('}')) {
                                break;
                            }
                            items.push(self.expr()?);
                        }
                        self.eat('}').then_some((Py::Set(items), false))
                    }
                }
                _ => None,
            }
        }

        /// An expression inside parentheses, remembering whether it is a bare number.
        fn expr_num(&mut self) -> Option<(Py, bool)> {
            let start = self.i;
            if let Some(Tok::Num(_)) = self.peek() {
                let (v, is_num) = self.atom()?;
                if matches!(self.peek(), Some(Tok::Op(')')) | Some(Tok::Op(','))) {
                    return Some((v, is_num));
                }
                self.i = start;
            }
            Some((self.expr()?, false))
        }

        fn items(&mut self, close: char) -> Option<Vec<Py>> {
            let mut items = Vec::new();
            loop {
                if self.eat(close) {
                    return Some(items);
                }
                items.push(self.expr()?);
                if !self.eat(',') {
                    return self.eat(close).then_some(items);
                }
            }
        }
    }

    fn to_json(v: &Py) -> J {
        match v {
            Py::None => J::Null,
            Py::Bool(b) => J::Bool(*b),
            Py::Int(i) => i64::try_from(*i)
                .map(J::from)
                .or_else(|_| u64::try_from(*i).map(J::from))
                .unwrap_or_else(|_| J::from(*i as f64)),
            Py::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| J::String(f.to_string()), J::Number)
            }
            Py::Complex(re, im) => J::String(complex_repr(*re, *im)),
            Py::Str(s) => J::String(s.clone()),
            Py::Ellipsis => J::String("...".into()),
            Py::List(items) => J::Array(items.iter().map(to_json).collect()),
            Py::Set(items) => {
                // Python sets drop duplicates; their iteration order is Python's hash order,
                // which for small ints is ascending and for strings varies per process.
                // Seen scalars by their JSON text, so a long set is not a quadratic scan;
                // containers (rare, unhashable in Python) are compared directly.
                let mut out: Vec<J> = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for j in items.iter().map(to_json) {
                    let fresh = match &j {
                        J::Array(_) | J::Object(_) => !out.contains(&j),
                        scalar => seen.insert(scalar.to_string()),
                    };
                    if fresh {
                        out.push(j);
                    }
                }
                J::Array(out)
            }
            Py::Dict(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    map.insert(json_key(k), to_json(v));
                }
                J::Object(map)
            }
        }
    }

    /// What `json.dumps` writes for a non-string key.
    fn json_key(k: &Py) -> String {
        match k {
            Py::Str(s) => s.clone(),
            Py::None => "null".into(),
            Py::Bool(b) => b.to_string(),
            Py::Int(i) => i.to_string(),
            Py::Float(f) => format!("{f:?}"),
            other => to_json(other).to_string(),
        }
    }

    fn float_part(f: f64) -> String {
        if f.fract() == 0.0 && f.abs() < 1e16 {
            format!("{}", f as i64)
        } else {
            format!("{f:?}")
        }
    }

    /// Python's `str(complex)`.
    fn complex_repr(re: f64, im: f64) -> String {
        let imag = float_part(im);
        if re == 0.0 && re.is_sign_positive() {
            return format!("{imag}j");
        }
        let sign = if im.is_sign_negative() { "" } else { "+" };
        let real = if re == 0.0 {
            "-0".to_string()
        } else {
            float_part(re)
        };
        format!("({real}{sign}{imag}j)")
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use serde_json::json;

        #[test]
        fn literal_eval_like_python() {
            let cases = [
                ("1", json!(1)),
                ("-5", json!(-5)),
                ("1.5", json!(1.5)),
                ("1e3", json!(1000.0)),
                ("1.", json!(1.0)),
                ("0x1F", json!(31)),
                ("0o17", json!(15)),
                ("0b101", json!(5)),
                ("1_000", json!(1000)),
                ("0_0", json!(0)),
                ("True", json!(true)),
                ("None", json!(null)),
                ("'x y'", json!("x y")),
                ("\"a\" 'b'", json!("ab")),
                ("b'by'", json!("by")),
                ("'\\x41\\n'", json!("A\n")),
                ("r'\\n'", json!("\\n")),
                ("[1, 2,]", json!([1, 2])),
                ("(1, (2, 3))", json!([1, [2, 3]])),
                ("(1,)", json!([1])),
                ("1, 2", json!([1, 2])),
                ("{'a': [1, 2], 'b': None}", json!({"a": [1, 2], "b": null})),
                ("{1: 2, 1: 3}", json!({"1": 3})),
                ("{4, 5, 4}", json!([4, 5])),
                ("set()", json!([])),
                ("-(1)", json!(-1)),
                ("  5", json!(5)),
                ("'a' # comment", json!("a")),
                ("...", json!("...")),
                ("1+2j", json!("(1+2j)")),
                ("2j", json!("2j")),
                ("-1-2j", json!("(-1-2j)")),
            ];
            for (src, want) in cases {
                assert_eq!(parse_value(src), Ok(want), "literal_eval({src:?})");
            }
        }

        #[test]
        fn non_literals_stay_strings() {
            for src in [
                "yes",
                "true",
                "0755",
                "1e",
                "1__0",
                "hello # comment",
                "{k:1}",
                "1+2",
                "--1",
                "-True",
                "f'x'",
                "foo(1)",
                "'unterminated",
                "[1, 2",
                "1 2",
                "a b",
                "192.168.1.50",
                "1.2.3",
                "{{ kube_vip_address }}",
                "",
                "01",
                "1_",
                "0x",
            ] {
                assert_eq!(
                    parse_value(src),
                    Ok(J::String(src.to_string())),
                    "literal_eval({src:?})"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Inventory {
        Inventory::parse_ini(text, Path::new("inv/hosts.ini")).expect("parse")
    }

    fn parse_err(text: &str) -> String {
        Inventory::parse_ini(text, Path::new("inv/hosts.ini"))
            .expect_err("must fail")
            .to_string()
    }

    #[test]
    fn ranges_numeric_padded_alpha_and_steps() {
        assert_eq!(
            expand_hostname_range("web[01:03]").expect("r"),
            ["web01", "web02", "web03"]
        );
        assert_eq!(
            expand_hostname_range("db-[a:c]").expect("r"),
            ["db-a", "db-b", "db-c"]
        );
        assert_eq!(
            expand_hostname_range("n[1:10:4]").expect("r"),
            ["n1", "n5", "n9"]
        );
        assert_eq!(
            expand_hostname_range("x[:2]").expect("r"),
            ["x0", "x1", "x2"]
        );
        assert_eq!(
            expand_hostname_range("[y:B]z").expect("r"),
            ["yz", "zz", "Az", "Bz"]
        );
        assert_eq!(
            expand_hostname_range("r[1:2]c[a:b]").expect("r"),
            ["r1ca", "r1cb", "r2ca", "r2cb"]
        );
        assert_eq!(
            expand_hostname_range("s[a:e:2]").expect("r"),
            ["sa", "sc", "se"]
        );
        assert!(expand_hostname_range("w[01:3]")
            .expect_err("len")
            .contains("equal-length"));
        assert!(expand_hostname_range("w[1]")
            .expect_err("b")
            .contains("begin:end"));
        assert!(expand_hostname_range("w[1:]")
            .expect_err("e")
            .contains("end value"));
        assert!(expand_hostname_range("w[c:a]")
            .expect_err("o")
            .contains("begin <= end"));
    }

    #[test]
    fn host_port_and_patterns() {
        assert_eq!(
            expand_hostpattern("h:2222").expect("p"),
            (vec!["h".to_string()], Some(2222))
        );
        assert_eq!(
            expand_hostpattern("w[1:2].lan:22").expect("p"),
            (vec!["w1.lan".to_string(), "w2.lan".to_string()], Some(22))
        );
        assert_eq!(
            expand_hostpattern("192.168.1.50").expect("p"),
            (vec!["192.168.1.50".to_string()], None)
        );
        assert_eq!(
            expand_hostpattern("[fe80::1]:22").expect("p"),
            (vec!["fe80::1".to_string()], Some(22))
        );
        assert_eq!(
            expand_hostpattern("fe80::1").expect("p"),
            (vec!["fe80::1".to_string()], None)
        );
        assert!(expand_hostpattern("h:")
            .expect_err("colon")
            .contains("ending in ':'"));
        assert!(expand_hostpattern("---")
            .expect_err("yaml")
            .contains("YAML"));
    }

    #[test]
    fn shlex_like_python() {
        let s = |l: &str| shlex_split(l).expect("split");
        assert_eq!(s("h a=1#x b=2"), ["h", "a=1"]);
        assert_eq!(s("h a=\"x y\"z b='q\\'"), ["h", "a=x yz", "b=q\\"]);
        assert_eq!(s("h a=x\\ y"), ["h", "a=x y"]);
        assert_eq!(s("h a=\"x\\\"y\" b=\"\\n\""), ["h", "a=x\"y", "b=\\n"]);
        assert_eq!(s("h a=''"), ["h", "a="]);
        assert_eq!(s("h a=1 ;b=2"), ["h", "a=1", ";b=2"]);
        assert_eq!(
            shlex_split("h a='x").expect_err("open"),
            "No closing quotation"
        );
    }

    #[test]
    fn groups_children_vars_and_implicit_groups() {
        let inv = parse(
            "lone\n[p:children]\nc\n[c]\nh1 a=1\n[c:vars]\nx=yes\ny='q'\n[other]\nh1\nlone\n[empty]\n",
        );
        assert_eq!(
            inv.group_names(),
            ["all", "ungrouped", "p", "c", "other", "empty"]
        );
        assert_eq!(
            inv.children_of("all").expect("all"),
            ["ungrouped", "p", "other", "empty"]
        );
        assert_eq!(inv.hosts_in("p").expect("p"), ["h1"]);
        assert_eq!(inv.hosts_in("ungrouped").expect("u"), Vec::<String>::new());
        assert_eq!(inv.hosts(), ["h1", "lone"]);
        assert_eq!(inv.groups_of("h1"), ["all", "other", "p", "c"]);
        assert!(inv.is_member("h1", "p"));
        assert!(!inv.is_member("lone", "p"));
        assert!(inv.hosts_in("nope").is_none());
        let v = inv.host_vars("h1").expect("h1");
        assert_eq!(v["x"].value, json!("yes"));
        assert_eq!(v["y"].value, json!("q"));
        assert_eq!(v["a"].value, json!(1));
        assert_eq!(v["a"].origin.to_string(), "inv/hosts.ini:5:4");
        assert_eq!(v["x"].origin.line, 7);
        assert_eq!(inv.group_depth("c"), Some(2));
    }

    #[test]
    fn first_port_wins_and_inline_vars_override() {
        let inv = parse("[a]\nh:22 v=1\n[b]\nh:23 v=2\n");
        let v = inv.host_vars("h").expect("h");
        assert_eq!(v["ansible_port"].value, json!(22));
        assert_eq!(v["v"].value, json!(2));
        assert_eq!(v["v"].origin.line, 4);
    }

    #[test]
    fn group_precedence_depth_priority_name() {
        let inv = parse(
            "[top:children]\nmid\n[mid]\nh\n[zz]\nh\n[aa]\nh\n[top:vars]\nv=top\n[mid:vars]\nv=mid\n[zz:vars]\nw=zz\nansible_group_priority=5\n[aa:vars]\nw=aa\n[all:vars]\nv=all\nu=all\n",
        );
        let v = inv.host_vars("h").expect("h");
        assert_eq!(v["v"].value, json!("mid"), "deeper group wins");
        assert_eq!(
            v["w"].value,
            json!("zz"),
            "higher priority wins at equal depth"
        );
        assert_eq!(v["u"].value, json!("all"));
        assert_eq!(inv.group_priority("zz"), Some(5));
        assert!(!v.contains_key("ansible_group_priority"));
    }

    #[test]
    fn errors_name_file_and_line() {
        assert_eq!(
            parse_err("[g]\nh\n[g:bad]\n"),
            "inv/hosts.ini:3: Section [g:bad] has unknown type: bad (expected [group], [group:children] or [group:vars])"
        );
        assert!(
            parse_err("\n[g x]\n").starts_with("inv/hosts.ini:2: Invalid section entry: '[g x]'")
        );
        assert_eq!(
            parse_err("[g:vars]\nx\n"),
            "inv/hosts.ini:2: Expected key=value, got: x"
        );
        assert_eq!(
            parse_err("[g]\nh novalue\n"),
            "inv/hosts.ini:2: Expected key=value host variable assignment, got: novalue"
        );
        assert_eq!(
            parse_err("[g]\nweb[01:3]\n"),
            "inv/hosts.ini:2: host range must specify equal-length begin and end formats (in 'web[01:3]')"
        );
        assert!(parse_err("[g]\nh a='x\n")
            .starts_with("inv/hosts.ini:2: Error parsing host definition"));
        assert!(
            parse_err("[p:children]\nmissing\n[p:vars]\na=1\n").starts_with(
                "inv/hosts.ini:2: Section [p:children] includes undefined group 'missing'"
            )
        );
        assert!(parse_err("[g]\nh\n[nog:vars]\na=1\n").starts_with(
            "inv/hosts.ini:3: Section [nog:vars] not valid for undefined group 'nog'"
        ));
        assert!(
            parse_err("[a:children]\nb\n[b:children]\na\n").contains("recursive dependency loop")
        );
        assert!(parse_err("[a:children]\nbad name\n")
            .starts_with("inv/hosts.ini:2: Expected group name"));
        assert!(parse_err("[g:vars]\nansible_group_priority=high\n[g]\n")
            .contains("ansible_group_priority"));
    }

    #[test]
    fn load_reports_bad_group_vars_and_vaulted_inventory() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ini = tmp.path().join("hosts.ini");
        std::fs::write(&ini, "[g]\nh\n").expect("ini");
        std::fs::create_dir(tmp.path().join("group_vars")).expect("gv");
        std::fs::write(tmp.path().join("group_vars/g.yml"), "ok: 1\nbad: [1,\n").expect("gv");
        let err = Inventory::load(&ini).expect_err("bad yaml").to_string();
        let want = format!("{}:", tmp.path().join("group_vars/g.yml").display());
        assert!(
            err.starts_with(&want) && err.contains("invalid YAML"),
            "{err}"
        );

        std::fs::write(&ini, "$ANSIBLE_VAULT;1.1;AES256\n3132\n").expect("ini");
        let err = Inventory::load(&ini).expect_err("vaulted").to_string();
        assert!(
            err.contains("hosts.ini:1: the inventory file is ansible-vault encrypted"),
            "{err}"
        );
    }

    #[test]
    fn non_utf8_is_tolerated_in_comments_only() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ini = tmp.path().join("hosts.ini");
        std::fs::write(&ini, b"# caf\xe9\n[g]\nh\n").expect("ini");
        let inv = Inventory::load(&ini).expect("comment bytes are fine");
        assert_eq!(inv.hosts(), ["h"]);
        std::fs::write(&ini, b"[g]\nh\nbad\xff\n").expect("ini");
        let err = Inventory::load(&ini).expect_err("bad bytes").to_string();
        assert!(
            err.contains("hosts.ini:3: bytes that are not UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn vars_declared_before_group_is_fine() {
        let inv = parse("[g:vars]\na=1\n[g]\nh\n");
        assert_eq!(inv.host_vars("h").expect("h")["a"].value, json!(1));
    }

    #[test]
    fn host_in_all_section_is_also_ungrouped() {
        let inv = parse("[all]\nh\n");
        assert_eq!(inv.direct_hosts("ungrouped").expect("u"), ["h"]);
        assert_eq!(inv.hosts(), ["h"]);
    }
}
