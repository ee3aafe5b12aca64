//! The Ansible inventory (INI, the `yaml` plugin's YAML/JSON, the `toml` plugin's TOML; files,
//! directories, several sources), read exactly as ansible-core 2.19 reads it.
//!
//! Owns: choosing the plugin that reads a file (Ansible's enabled plugins in order: an
//! executable is `script`'s and is refused; `.yml`/`.yaml` with `plugin:` is `auto`'s and
//! is refused by name; `yaml` for `.yaml`/`.yml`/`.json` or no extension; then `ini` for
//! any file but `.toml`, which is `toml`'s alone; a plugin that fails hands the file to the
//! next), parsing an INI inventory (sections, `[g:children]`, `[g:vars]`, inline host vars
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
//! What the real tool does (checked against ansible-core 2.19 by crates/hk-engine/tests/inventory_parity.rs):
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
//!
//! Layout: this file holds the model (groups, hosts, the graph rules, the variable layers)
//! `sources` the plugin choice, directories and several sources; `ini` the INI parser,
//! `tomlinv` the toml plugin's format,
//! `yamlinv` the yaml plugin's format, `shlex` the host-line splitter, `pyliteral` the `ast.literal_eval`
//! typing of values, `hostpattern` `host:port` and host ranges.
//!
//! Why one file over 800 lines: the code is about 860 lines (the shlex, literal_eval and
//! host-range parsers, the INI and YAML readers and the source choice are already their own
//! files); the rest is unit tests.

mod hostpattern;
mod ini;
pub mod pyliteral;
mod pyset;
mod pytext;
mod shlex;
mod sources;
mod tomlinv;
mod yamlinv;

pub use hostpattern::{expand_hostname_range, expand_hostpattern, HostPatternError};
pub use shlex::shlex_split;
pub use sources::{is_ignored_in_dir, MAX_DIR_DEPTH};

use self::ini::IniParser;
use super::vars::{self, Loaded, Origin, Var, VarMap, VarsError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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
    /// A host line's pattern cannot be expanded (a bad range, or one past the bounds).
    #[error("{}:{line}: {source}", file.display())]
    HostPattern {
        file: PathBuf,
        line: usize,
        #[source]
        source: HostPatternError,
    },
    #[error(transparent)]
    Vars(#[from] VarsError),
    /// Not a regular file, or over the size cap (see `repo::read`).
    #[error(transparent)]
    Refused(super::read::ReadError),
    /// A bound on the whole inventory (not one line) was crossed.
    #[error("{}: {message}", file.display())]
    TooLarge { file: PathBuf, message: String },
    /// A source that is not an inventory (an empty directory, a link loop, none given).
    #[error("{}: {message}", path.display())]
    Source { path: PathBuf, message: String },
    /// No plugin read the file: the error of the plugin it most looks meant for first, then
    /// the other's (Ansible tried both, in its order).
    #[error("{first}\n  (read as {other_plugin} too, Ansible's next try: {other})")]
    NoPluginRead {
        first: Box<InventoryError>,
        other_plugin: &'static str,
        other: Box<InventoryError>,
    },
}

/// Which plugin's format an inventory was read in (names its variable layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Ini,
    Yaml,
    Toml,
    /// Files of more than one, from a directory or several sources.
    Mixed,
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
    /// The same allocation as the host index's key: a name is stored once.
    name: Arc<str>,
    /// Inline INI vars (and `ansible_port` from `host:port`), one set per line naming the
    /// host, later lines winning. Shared: the hosts of one range line hold the same set.
    vars: Vec<Arc<LineVars>>,
    /// The merge budget's estimate of `vars` ([`map_bytes`] summed), kept as lines are
    /// added: a line's map is sized once, not once per host and per check.
    vars_bytes: usize,
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
    host_index: HashMap<Arc<str>, usize>,
    /// `group_vars/` files per group (same index as `groups`; empty where there are none,
    /// and for groups without hosts, whose files Ansible never reads).
    group_files: Vec<VarMap>,
    /// `host_vars/` files per host (same index as `hosts`).
    host_files: Vec<VarMap>,
    /// Each host's merged variables, made on first use by [`Inventory::host_vars`]: a
    /// command pays for the hosts it looks at, and `--list` streams without keeping any
    /// (see [`Inventory::host_vars_view`]).
    merged: Vec<OnceLock<VarMap>>,
    /// Each group's ancestors (sorted), filled once the graph is final.
    ancestor_cache: Vec<Vec<usize>>,
    vaulted: Vec<PathBuf>,
    /// The directories whose `group_vars/`/`host_vars/` were read (each source's base).
    bases: Vec<PathBuf>,
    /// What was read differently from what a play would see (see [`Inventory::warnings`]).
    warnings: Vec<String>,
    format: Format,
    /// Inventory files read into it (a directory source counts each).
    files_read: usize,
}

const ALL: usize = 0;
const UNGROUPED: usize = 1;

impl Inventory {
    /// Parse INI text only (no vars files); `path` names the file in errors and origins.
    pub fn parse_ini(text: &str, path: &Path) -> Result<Inventory, InventoryError> {
        let mut p = IniParser::adding_to(Inventory::empty(path), path);
        p.parse(text)?;
        let mut inv = p.inv.read_as(Format::Ini);
        inv.finish_graph()?;
        Ok(inv)
    }

    /// Once every group and host is in: Ansible's reconcile, the depths, and the budget.
    fn finish_graph(&mut self) -> Result<(), InventoryError> {
        self.reconcile();
        self.compute_depths();
        // Without vars files the merged view is the inventory file's alone.
        self.merged = vec![OnceLock::new(); self.hosts.len()];
        self.check_merge_budget()
    }

    /// Which plugin's format the file was read in.
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every host, in the order `ansible all --list-hosts` gives.
    pub fn hosts(&self) -> Vec<String> {
        self.hosts_of_group(ALL)
            .into_iter()
            .map(|h| self.hosts[h].name.to_string())
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
                .map(|h| self.hosts[h].name.to_string())
                .collect(),
        )
    }

    /// The hosts a one-name Ansible pattern selects where hk-console.yaml or a runbook names
    /// a group: the group's ([`Inventory::hosts_in`]), else the host of that name (a
    /// single-server cluster whose server has no group of its own: `servers: node01`).
    pub fn pattern_hosts(&self, name: &str) -> Option<Vec<String>> {
        self.hosts_in(name).or_else(|| {
            self.host_index
                .contains_key(name)
                .then(|| vec![name.to_string()])
        })
    }

    /// Hosts listed directly under a group (what `ansible-inventory --list` shows as `hosts`).
    pub fn direct_hosts(&self, group: &str) -> Option<Vec<String>> {
        let g = *self.group_index.get(group)?;
        Some(
            self.groups[g]
                .hosts
                .iter()
                .map(|&h| self.hosts[h].name.to_string())
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
    /// Merged on first use and kept: see [`Inventory::host_vars_view`] for a view that
    /// copies nothing.
    pub fn host_vars(&self, host: &str) -> Option<&VarMap> {
        let h = *self.host_index.get(host)?;
        Some(self.merged[h].get_or_init(|| {
            self.merged_refs(h)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        }))
    }

    /// The host's variables as [`Inventory::host_vars`] gives them, but borrowed from the
    /// layers they come from (nothing copied, nothing kept): what `--list` streams.
    pub fn host_vars_view(&self, host: &str) -> Option<BTreeMap<&str, &Var>> {
        let h = *self.host_index.get(host)?;
        Some(match self.merged[h].get() {
            Some(done) => done.iter().map(|(k, v)| (k.as_str(), v)).collect(),
            None => self.merged_refs(h),
        })
    }

    /// Every host (in [`Inventory::hosts`] order) with its [`Inventory::host_vars_view`].
    pub fn host_vars_views(&self) -> impl Iterator<Item = (&str, BTreeMap<&str, &Var>)> {
        self.hosts_of_group(ALL).into_iter().map(|h| {
            let view = match self.merged[h].get() {
                Some(done) => done.iter().map(|(k, v)| (k.as_str(), v)).collect(),
                None => self.merged_refs(h),
            };
            (&*self.hosts[h].name, view)
        })
    }

    /// The layers a host's variables come from, lowest precedence first, each named the
    /// way a person would look for it (`[web:vars]`, `group_vars/web`, `host line`, ...).
    pub fn host_var_layers(&self, host: &str) -> Option<Vec<(String, &VarMap)>> {
        self.host_var_layers_in(host, None)
    }

    fn layer_label(&self, h: usize, kind: Layer) -> String {
        match kind {
            Layer::IniGroup(g) => match self.format {
                Format::Ini => format!("[{}:vars]", self.groups[g].name),
                Format::Yaml => format!("{}: vars", self.groups[g].name),
                Format::Toml => format!("[{}] vars", self.groups[g].name),
                Format::Mixed => {
                    format!("inventory vars of group {}", self.groups[g].name)
                }
            },
            Layer::GroupFiles(g) => format!("group_vars/{}", self.groups[g].name),
            Layer::IniHost => match self.format {
                Format::Ini => format!("host line of {}", self.hosts[h].name),
                Format::Yaml => format!("hosts: {} entry", self.hosts[h].name),
                Format::Toml => format!("hosts.{} entry", self.hosts[h].name),
                Format::Mixed => {
                    format!("inventory vars of host {}", self.hosts[h].name)
                }
            },
            Layer::HostFiles => format!("host_vars/{}", self.hosts[h].name),
            Layer::PlayGroupFiles(g) => {
                format!("playbook group_vars/{}", self.groups[g].name)
            }
            Layer::PlayHostFiles => {
                format!("playbook host_vars/{}", self.hosts[h].name)
            }
        }
    }

    /// Vars files found encrypted: "vaulted, not read" (their variable names are unknown).
    /// Things read the way ansible-inventory prints them but not the way a play sees them
    /// (bytes that are not UTF-8), each naming file:line. Callers print them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

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
            group_files: Vec::new(),
            host_files: Vec::new(),
            merged: Vec::new(),
            ancestor_cache: Vec::new(),
            vaulted: Vec::new(),
            bases: Vec::new(),
            warnings: Vec::new(),
            format: Format::Ini,
            files_read: 0,
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

    /// `port`: the host's `host:port` (not 0) and where it was written; only the line that
    /// creates the host sets it.
    fn add_host(&mut self, name: &str, group: usize, port: Option<&(u64, Origin)>) -> usize {
        let h = match self.host_index.get(name) {
            Some(&h) => h,
            None => {
                let h = self.hosts.len();
                let mut vars = Vec::new();
                let mut vars_bytes = 0;
                // Only the first definition's port counts (Ansible sets it when creating
                // the host); `if port:` in Ansible skips port 0.
                if let Some((port, origin)) = port {
                    let var = Var {
                        value: serde_json::Value::from(*port),
                        origin: origin.clone(),
                        secret: false,
                    };
                    let line = LineVars::new(vec![("ansible_port".to_string(), var)]);
                    vars_bytes = line.bytes;
                    vars.push(Arc::new(line));
                }
                let name: Arc<str> = Arc::from(name);
                self.host_index.insert(name.clone(), h);
                self.hosts.push(Host {
                    name,
                    vars,
                    vars_bytes,
                    direct: Vec::new(),
                });
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
        // The graph is final from here: each host's groups are a merge of cached lists,
        // not a walk of the graph per host.
        self.cache_ancestors();
        for h in 0..self.hosts.len() {
            // Most hosts are listed under one group: its cached ancestors answer both
            // questions below without a list of the host's groups; only a host with
            // something to change goes the long way.
            if let [g] = self.hosts[h].direct[..] {
                let anc = &self.ancestor_cache[g];
                let has_ungrouped = g == UNGROUPED || anc.binary_search(&UNGROUPED).is_ok();
                let has_other =
                    (g != ALL && g != UNGROUPED) || anc.iter().any(|&a| a != ALL && a != UNGROUPED);
                if has_ungrouped != has_other {
                    continue;
                }
            }
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

    /// The host's direct groups and their ancestors, sorted, each once.
    fn direct_and_ancestor_groups(&self, h: usize) -> Vec<usize> {
        let mut out = Vec::new();
        for &g in &self.hosts[h].direct {
            out.push(g);
            match self.ancestor_cache.get(g) {
                Some(anc) => out.extend_from_slice(anc),
                None => out.extend(self.ancestors(g)),
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every group's ancestors, once the graph is final: a host's groups are then a merge
    /// of short lists, not a graph walk per host.
    fn cache_ancestors(&mut self) {
        self.ancestor_cache = (0..self.groups.len())
            .map(|g| {
                let mut a: Vec<usize> = self.ancestors(g).into_iter().collect();
                a.sort_unstable();
                a
            })
            .collect();
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
        // A group without children: its own hosts, each listed once already (`add_host`).
        if self.groups[g].children.is_empty() {
            return self.groups[g].hosts.clone();
        }
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

    /// Each base directory's `group_vars/`/`host_vars/` files, a later base's winning key by
    /// key (Ansible combines its vars plugins' results source by source).
    fn merge_vars(&mut self, bases: &[PathBuf]) -> Result<(), InventoryError> {
        self.bases = bases.to_vec();
        let mut group_files: Vec<VarMap> = vec![VarMap::new(); self.groups.len()];
        let mut host_files: Vec<VarMap> = vec![VarMap::new(); self.hosts.len()];
        let mut cache: HashMap<PathBuf, VarMap> = HashMap::new();
        let mut seen: Vec<&Path> = Vec::new();
        for base in bases {
            // The same base twice (`-i a.ini -i b.ini` side by side) combines to the same.
            if seen.contains(&base.as_path()) {
                continue;
            }
            seen.push(base);
            let mut vaulted = std::mem::take(&mut self.vaulted);
            let got = self.entity_files(base, &mut cache, &mut vaulted);
            self.vaulted = vaulted;
            let (groups, hosts) = got?;
            if bases.len() == 1 {
                (group_files, host_files) = (groups, hosts);
                break;
            }
            for (into, more) in group_files.iter_mut().zip(&groups) {
                vars::combine(into, more);
            }
            for (into, more) in host_files.iter_mut().zip(&hosts) {
                vars::combine(into, more);
            }
        }
        self.group_files = group_files;
        self.host_files = host_files;
        self.merged = vec![OnceLock::new(); self.hosts.len()];
        self.check_merge_budget()
    }

    /// One base directory's vars files: per group, per host.
    #[allow(clippy::type_complexity)]
    fn entity_files(
        &self,
        base: &Path,
        cache: &mut HashMap<PathBuf, VarMap>,
        vaulted: &mut Vec<PathBuf>,
    ) -> Result<(Vec<VarMap>, Vec<VarMap>), InventoryError> {
        let gv_dir = base.join("group_vars");
        let hv_dir = base.join("host_vars");
        // Neither directory: nothing to look up (not four stats per group and host).
        let (gv_exists, hv_exists) = (gv_dir.is_dir(), hv_dir.is_dir());
        let read = self.groups_with_hosts();
        // One listing of group_vars/ instead of eight stats per group without a file (a lab
        // of a hundred groups that no environment uses has mostly none).
        let group_stems = if gv_exists {
            vars_file_stems(&gv_dir)
        } else {
            Some(HashSet::new())
        };
        let mut group_files: Vec<VarMap> = Vec::with_capacity(self.groups.len());
        for (g, &has_hosts) in read.iter().enumerate() {
            // Ansible runs its vars plugins on demand, for the groups of a host it gives
            // variables to: a group with no hosts never has its files read.
            if !has_hosts || !gv_exists || !may_have_files(&group_stems, &self.groups[g].name) {
                group_files.push(VarMap::new());
                continue;
            }
            let name = self.groups[g].name.clone();
            let files = vars::find_vars_files(&gv_dir, &name);
            group_files.push(self.load_entity_files(&gv_dir, &name, files, cache, vaulted)?);
        }
        // One listing of host_vars/ instead of four stats per host: most hosts have no file.
        let present = if hv_exists {
            vars_file_stems(&hv_dir)
        } else {
            Some(HashSet::new())
        };
        let mut host_files: Vec<VarMap> = Vec::with_capacity(self.hosts.len());
        for h in 0..self.hosts.len() {
            let name = &self.hosts[h].name;
            let may_have = match &present {
                Some(stems) if !name.contains('/') => stems.contains(&**name),
                _ => true,
            };
            if !may_have {
                host_files.push(VarMap::new());
                continue;
            }
            let name = name.clone();
            let files = vars::find_vars_files(&hv_dir, &name);
            host_files.push(self.load_entity_files(&hv_dir, &name, files, cache, vaulted)?);
        }
        Ok((group_files, host_files))
    }

    /// Groups that hold a host, directly or through a descendant.
    fn groups_with_hosts(&self) -> Vec<bool> {
        let mut has = vec![false; self.groups.len()];
        let mut todo: Vec<usize> = (0..self.groups.len())
            .filter(|&g| !self.groups[g].hosts.is_empty())
            .collect();
        while let Some(g) = todo.pop() {
            if !has[g] {
                has[g] = true;
                todo.extend(self.groups[g].parents.iter().copied());
            }
        }
        has
    }

    /// Ansible's `host_group_vars` plugin for one group or host: every vars file found,
    /// combined in order. Names starting with `/` are skipped, as Ansible does.
    fn load_entity_files(
        &self,
        dir: &Path,
        name: &str,
        files: Vec<PathBuf>,
        cache: &mut HashMap<PathBuf, VarMap>,
        vaulted: &mut Vec<PathBuf>,
    ) -> Result<VarMap, InventoryError> {
        let mut out = VarMap::new();
        if name.starts_with('/') || !dir.is_dir() {
            return Ok(out);
        }
        for file in files {
            if let Some(v) = cache.get(&file) {
                vars::combine(&mut out, v);
                continue;
            }
            let loaded = match vars::load_vars_file(&file)? {
                Loaded::Vars(v) => v,
                Loaded::Vaulted => {
                    if !vaulted.contains(&file) {
                        vaulted.push(file.clone());
                    }
                    VarMap::new()
                }
            };
            vars::combine(&mut out, &loaded);
            cache.insert(file, loaded);
        }
        Ok(out)
    }

    /// Refuses an inventory whose per-host copies would pass [`MAX_MERGED_BYTES`] if every
    /// host were looked at (estimated from the layers, an upper bound: overlapping keys count
    /// twice), so no later command can be made to build them.
    fn check_merge_budget(&self) -> Result<(), InventoryError> {
        let size = map_bytes;
        let group_bytes: Vec<usize> = (0..self.groups.len())
            .map(|g| {
                size(&self.groups[g].vars).saturating_add(self.group_files.get(g).map_or(0, size))
            })
            .collect();
        let mut total = 0usize;
        // A host's groups follow from its direct groups alone, and most hosts share theirs
        // with many others (a rack, a site): their sum is worked out once per set.
        // Most hosts have one direct group: those sums are kept by group, not hashed.
        let sum_for = |h: usize| {
            self.direct_and_ancestor_groups(h)
                .into_iter()
                .filter(|&g| g != ALL)
                .fold(0usize, |acc, g| acc.saturating_add(group_bytes[g]))
        };
        let mut by_single: Vec<Option<usize>> = vec![None; self.groups.len()];
        let mut by_direct: HashMap<&[usize], usize> = HashMap::new();
        for h in 0..self.hosts.len() {
            let direct = self.hosts[h].direct.as_slice();
            let groups = match direct {
                [g] => *by_single[*g].get_or_insert_with(|| sum_for(h)),
                _ => *by_direct.entry(direct).or_insert_with(|| sum_for(h)),
            };
            let bytes = self.hosts[h]
                .vars_bytes
                .saturating_add(self.host_files.get(h).map_or(0, size))
                .saturating_add(group_bytes[ALL])
                .saturating_add(groups);
            total = total.saturating_add(bytes);
            if total > MAX_MERGED_BYTES {
                return Err(InventoryError::TooLarge {
                    file: self.path.clone(),
                    message: format!(
                        "the merged variables of the first {} of {} hosts already take more than {} MiB (limit inventory.max_merged_bytes): a command may hold each host's own copy of its groups' variables, so many hosts times large variables is refused",
                        h + 1,
                        self.hosts.len(),
                        MAX_MERGED_BYTES / (1024 * 1024)
                    ),
                });
            }
        }
        Ok(())
    }

    /// The layers of a host's variables, lowest precedence first (see the module docs).
    fn layers(&self, h: usize) -> Vec<(Layer, &VarMap)> {
        self.layers_in(h, None)
    }

    /// [`Inventory::layers`] in the play of a playbook whose directory has vars files of
    /// its own (`play`): ansible-core's default `VARIABLE_PRECEDENCE` puts each of its
    /// levels right after the inventory's: group_vars/all of the inventory, then of the
    /// playbook; every group's group_vars of the inventory, then every group's of the
    /// playbook; host_vars of the inventory, then of the playbook (checked against
    /// `ansible-inventory --playbook-dir`).
    fn layers_in<'a>(&'a self, h: usize, play: Option<&'a PlayFiles>) -> Vec<(Layer, &'a VarMap)> {
        let sorted = self.sorted_groups_of(h);
        let mut out = Vec::with_capacity(2 * sorted.len() + 4);
        out.push((Layer::IniGroup(ALL), &self.groups[ALL].vars));
        for &g in &sorted {
            out.push((Layer::IniGroup(g), &self.groups[g].vars));
        }
        if let Some(v) = self.group_files.get(ALL) {
            out.push((Layer::GroupFiles(ALL), v));
        }
        if let Some(v) = play.and_then(|p| p.group_files.get(ALL)) {
            out.push((Layer::PlayGroupFiles(ALL), v));
        }
        for &g in &sorted {
            if let Some(v) = self.group_files.get(g) {
                out.push((Layer::GroupFiles(g), v));
            }
        }
        if let Some(p) = play {
            for &g in &sorted {
                if let Some(v) = p.group_files.get(g) {
                    out.push((Layer::PlayGroupFiles(g), v));
                }
            }
        }
        for line in &self.hosts[h].vars {
            out.push((Layer::IniHost, line.map()));
        }
        if let Some(v) = self.host_files.get(h) {
            out.push((Layer::HostFiles, v));
        }
        if let Some(v) = play.and_then(|p| p.host_files.get(h)) {
            out.push((Layer::PlayHostFiles, v));
        }
        out.retain(|(_, m)| !m.is_empty());
        out
    }

    /// The `group_vars/` and `host_vars/` beside a playbook in `dir`, which ansible-playbook
    /// loads for that playbook's plays on top of the inventory's (see
    /// [`Inventory::layers_in`]). None where `dir` is a directory the inventory already
    /// reads them from (the same files: Ansible reading them twice changes nothing), or has
    /// neither.
    pub fn play_files(&self, dir: &Path) -> Result<Option<PlayFiles>, InventoryError> {
        let norm = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let dir_n = norm(dir);
        if self.bases.iter().any(|b| norm(b) == dir_n)
            || !(dir.join("group_vars").is_dir() || dir.join("host_vars").is_dir())
        {
            return Ok(None);
        }
        let mut vaulted = Vec::new();
        let (group_files, host_files) =
            self.entity_files(dir, &mut HashMap::new(), &mut vaulted)?;
        Ok(Some(PlayFiles {
            dir: dir.to_path_buf(),
            group_files,
            host_files,
            vaulted,
        }))
    }

    /// [`Inventory::host_var_layers`] in the play of a playbook with `play`'s vars files.
    pub fn host_var_layers_in<'a>(
        &'a self,
        host: &str,
        play: Option<&'a PlayFiles>,
    ) -> Option<Vec<(String, &'a VarMap)>> {
        let h = *self.host_index.get(host)?;
        Some(
            self.layers_in(h, play)
                .into_iter()
                .map(|(kind, m)| (self.layer_label(h, kind), m))
                .collect(),
        )
    }

    /// A host's variables merged in the play of a playbook with `play`'s vars files.
    pub fn host_vars_in(&self, host: &str, play: Option<&PlayFiles>) -> Option<VarMap> {
        let h = *self.host_index.get(host)?;
        let mut out = VarMap::new();
        for (_, layer) in self.layers_in(h, play) {
            for (k, v) in layer {
                out.insert(k.clone(), v.clone());
            }
        }
        Some(out)
    }

    /// Each level replaces whole top-level keys (`hash_behaviour = replace`).
    fn merged_refs(&self, h: usize) -> BTreeMap<&str, &Var> {
        let mut out = BTreeMap::new();
        for (_, layer) in self.layers(h) {
            for (k, v) in layer {
                out.insert(k.as_str(), v);
            }
        }
        out
    }
}

/// The inline variables of one host line (or a host's `host:port`), shared by every host
/// the line names. Kept as a short sorted list, not a map: a map's first node is sized for
/// eleven variables (about 1.6 KiB here), and a lab of 2,000 host lines that no command
/// looks at paid that per line. The map a layer is read as is made on first read.
#[derive(Debug)]
struct LineVars {
    /// Sorted by key, each key once with the last value the line gave it (as a map built
    /// by inserting them in line order holds them).
    entries: Box<[(String, Var)]>,
    map: OnceLock<VarMap>,
    /// The merge budget's size of the line ([`map_bytes`] of its map).
    bytes: usize,
}

impl LineVars {
    /// `entries` in line order; a repeated key keeps its last value, as a map's insert does.
    fn new(entries: Vec<(String, Var)>) -> LineVars {
        // Written in key order with no key twice (`ansible_host=... slot=3`): already the
        // list, kept as it is.
        let sorted = if entries.windows(2).all(|w| w[0].0 < w[1].0) {
            entries
        } else {
            let mut sorted: Vec<(String, Var)> = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                match sorted.binary_search_by(|(have, _)| have.as_str().cmp(&k)) {
                    Ok(i) => sorted[i].1 = v,
                    Err(i) => sorted.insert(i, (k, v)),
                }
            }
            sorted
        };
        let bytes = sorted.iter().map(|(k, v)| k.len() + var_bytes(v)).sum();
        LineVars {
            entries: sorted.into_boxed_slice(),
            map: OnceLock::new(),
            bytes,
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &Var)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    fn map(&self) -> &VarMap {
        self.map
            .get_or_init(|| self.entries.iter().cloned().collect())
    }
}

/// Which layer of a host's variables (see [`Inventory::host_var_layers`]).
#[derive(Debug, Clone, Copy)]
enum Layer {
    IniGroup(usize),
    GroupFiles(usize),
    IniHost,
    HostFiles,
    PlayGroupFiles(usize),
    PlayHostFiles,
}

/// The vars files beside a playbook (see [`Inventory::play_files`]).
#[derive(Debug, Clone)]
pub struct PlayFiles {
    pub dir: PathBuf,
    group_files: Vec<VarMap>,
    host_files: Vec<VarMap>,
    /// Its vars files found encrypted: "vaulted, not read".
    pub vaulted: Vec<PathBuf>,
}

/// The names a vars file in `dir` can be found under: each entry's name, and the name
/// without `.yml`, `.yaml` or `.json`; so a host or group `n` may have a file exactly when
/// `n` is in the set (`n`, `n.yml`, `n.yaml` or `n.json` exists). `None` when the directory
/// cannot be listed (then every candidate is looked up the slow way).
fn vars_file_stems(dir: &Path) -> Option<HashSet<String>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut stems = HashSet::new();
    for e in entries {
        let name = e.ok()?.file_name().into_string().ok()?;
        for ext in [".yml", ".yaml", ".json"] {
            if let Some(stem) = name.strip_suffix(ext) {
                stems.insert(stem.to_string());
            }
        }
        stems.insert(name);
    }
    Some(stems)
}

/// Whether a group may have files in group_vars/ by its listing. A name that is a path of
/// its own (`a/b`, `.`, `..`) or an unlisted directory goes the slow way, as Ansible joins it.
fn may_have_files(stems: &Option<HashSet<String>>, name: &str) -> bool {
    match stems {
        Some(stems) if !name.contains('/') && name != "." && name != ".." => stems.contains(name),
        _ => true,
    }
}

/// A rough size in bytes of a map of variables, for the merge budget.
fn map_bytes(m: &VarMap) -> usize {
    m.iter().map(|(k, v)| k.len() + var_bytes(v)).sum()
}

/// A rough size in bytes of a variable's value and origin, for the merge budget.
fn var_bytes(var: &Var) -> usize {
    let mut total = var.origin.file.as_os_str().len() + 64;
    // Most values are scalars (an address, a number): no work list for them.
    match &var.value {
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => {}
        serde_json::Value::String(s) => return total + 32 + s.len(),
        _ => return total + 32,
    }
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

    /// A line's variables read as a map are the map its `k=v` make inserted in line order
    /// (a repeated key keeps its last value and column), and the budget sizes them alike.
    #[test]
    fn line_vars_read_as_the_map_inserted_in_line_order() {
        let var = |value: serde_json::Value, col: usize| Var {
            value,
            origin: Origin {
                file: vars::VarFile::from(Path::new("inv/hosts.ini")),
                line: 3,
                col,
            },
            secret: false,
        };
        let lines: [&[(&str, serde_json::Value)]; 5] = [
            &[("ansible_host", json!("10.0.0.1")), ("slot", json!(3))],
            &[("slot", json!(3)), ("ansible_host", json!("10.0.0.1"))],
            &[("a", json!(1)), ("b", json!(2)), ("a", json!("last"))],
            &[
                ("z", json!([1, 2])),
                ("z", json!({"k": "v"})),
                ("m", json!(null)),
            ],
            &[("only", json!(true))],
        ];
        for line in lines {
            let entries: Vec<(String, Var)> = line
                .iter()
                .enumerate()
                .map(|(i, (k, v))| (k.to_string(), var(v.clone(), i + 1)))
                .collect();
            let mut want = VarMap::new();
            for (k, v) in entries.clone() {
                want.insert(k, v);
            }
            let got = LineVars::new(entries);
            assert_eq!(got.map(), &want, "{line:?}");
            assert_eq!(
                got.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                want.keys().map(String::as_str).collect::<Vec<_>>(),
                "{line:?}"
            );
            assert_eq!(got.bytes, map_bytes(&want), "{line:?}");
        }
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
    fn non_utf8_is_read_as_ansible_prints_it_and_warned_about() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ini = tmp.path().join("hosts.ini");
        std::fs::write(&ini, b"# caf\xe9\n[g]\nh\n").expect("ini");
        let inv = Inventory::load(&ini).expect("comment bytes are fine");
        assert_eq!(inv.hosts(), ["h"]);
        std::fs::write(&ini, b"[g]\nh v=caf\xe9\nbad\xff\n").expect("ini");
        let inv = Inventory::load(&ini).expect("ansible reads them too");
        assert_eq!(inv.hosts(), ["h", "bad?"]);
        assert_eq!(inv.host_vars("h").expect("h")["v"].value, json!("caf?"));
        let w = inv.warnings().join("\n");
        assert!(
            w.contains("hosts.ini:2: bytes that are not UTF-8") && w.contains("hosts.ini:3: "),
            "{w}"
        );
    }

    /// Which plugin reads a file is Ansible's rule: by extension, then the next plugin when
    /// one fails; an executable is the `script` plugin's and is refused.
    #[test]
    fn the_plugin_is_chosen_as_ansible_chooses_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let yaml = "all:\n  children:\n    g:\n      hosts:\n        h1: {a: yes}\n";
        let write = |name: &str, text: &str| {
            let p = tmp.path().join(name);
            std::fs::write(&p, text).expect("write");
            p
        };
        for name in ["inv.yml", "inv.yaml", "inv.json", "inv"] {
            let inv = Inventory::load(&write(name, yaml)).expect(name);
            assert_eq!(inv.format(), Format::Yaml, "{name}");
            assert_eq!(inv.hosts_in("g").expect("g"), ["h1"], "{name}");
            assert_eq!(inv.host_vars("h1").expect("h1")["a"].value, json!(true));
            assert_eq!(
                inv.host_var_layers("h1").expect("h1")[0].0,
                "hosts: h1 entry"
            );
        }
        // `.ini` (and `.txt`) is never YAML's: the ini plugin says why it is not INI.
        let err = Inventory::load(&write("inv.ini", yaml))
            .expect_err("yaml in .ini")
            .to_string();
        assert!(
            err.starts_with(&format!(
                "{}:1: Invalid host pattern 'all:'",
                tmp.path().join("inv.ini").display()
            )),
            "{err}"
        );
        // INI text with no extension: the yaml plugin fails on it, the ini plugin reads it.
        let inv = Inventory::load(&write("plain", "[g]\nh1 a=yes\n")).expect("ini");
        assert_eq!(inv.format(), Format::Ini);
        assert_eq!(inv.host_vars("h1").expect("h1")["a"].value, json!("yes"));
        // A .yml that is a YAML mapping but not an inventory: its YAML error first, then INI's.
        let err = Inventory::load(&write("bad.yml", "g:\n  hosts: [a]\n"))
            .expect_err("bad")
            .to_string();
        assert!(
            err.contains("bad.yml:2: Invalid \"hosts\" entry for \"g\" group")
                && err.contains("(read as INI too, Ansible's next try: ")
                && err.contains("bad.yml:1: Invalid host pattern 'g:'"),
            "{err}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let script = write("inv.py", "#!/bin/sh\necho '{}'\n");
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            let err = Inventory::load(&script).expect_err("script").to_string();
            assert!(
                err.contains("inv.py:1: an executable file with a `#!` line: Ansible's `script` inventory plugin"),
                "{err}"
            );
            // No `#!` line: the script plugin cannot run it, Ansible reads it as YAML.
            let generated = write(
                "hosts.yaml",
                "all:\n  children:\n    servers:\n      hosts:\n        a:\n",
            );
            std::fs::set_permissions(&generated, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            let inv = Inventory::load(&generated).expect("a static inventory with the run bit");
            assert!(inv.host_vars("a").is_some());
        }
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
