//! The infra repo as data. Owns: reading `hk-console.yaml`, the Ansible inventory and its
//! vars files, Flux overlays and templates; resolving Jinja; deriving environments.
//! Must not: run ansible, talk to hosts, or decrypt vaulted files.
pub mod ansible_cfg;
pub mod blockers;
pub mod check_mode;
pub mod config;
pub mod env;
pub mod flux;
pub mod init;
pub mod inventory;
pub mod listing;
pub mod playbook;
pub mod provenance;
pub mod read;
pub mod resolve;
pub mod roles;
pub mod scaffold;
pub mod uses;
pub mod vars;
pub mod vault;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use self::ansible_cfg::{AnsibleCfg, AnsibleEnv, InventoryOrigin};
use self::config::{Config, ConfigError, DEFAULT_INVENTORY};
use self::env::{Environment, HostFacts};
use self::inventory::{Inventory, InventoryError};
use self::resolve::{GroupMap, Groups, HostContext, Resolved, Resolver};
use self::vars::Origin;

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Inventory(#[from] InventoryError),
    #[error("{path}: cannot read: {message}\n  hint: hk-console.yaml names no `inventory:`, so the inventory is the one this ansible.cfg names (as for ansible-playbook); fix the file, or name the inventory in hk-console.yaml")]
    AnsibleCfg { path: PathBuf, message: String },
    #[error("{path}: no such inventory (hk-console's default: neither hk-console.yaml `inventory:`, ANSIBLE_INVENTORY nor an ansible.cfg `inventory =` names one)\n  hint: name it in hk-console.yaml (`inventory: PATH`, relative to the repo root) or in {cfg} (`[defaults]` `inventory = PATH`)")]
    NoDefaultInventory { path: PathBuf, cfg: PathBuf },
    #[error("{path}: not a directory\n  hint: --repo (or HK_REPO) names the infra repo's top directory, the one holding hk-console.yaml")]
    NotADirectory { path: PathBuf },
    /// A variable an environment is derived from spent its template budget
    /// (`jinja.max_fuel`): refused, not shown as a value or a mere problem.
    #[error("{at}: `{var}` (for {host}): {reason}")]
    TemplateBudget {
        at: String,
        var: String,
        host: String,
        reason: String,
    },
}

/// An infra repo, loaded: its config, its inventory, and its environments derived.
#[derive(Debug)]
pub struct Repo {
    /// The repo's top directory.
    pub root: PathBuf,
    pub config: Config,
    /// `root/ansible_dir`: where ansible-playbook runs.
    pub ansible_dir: PathBuf,
    /// The first of [`Repo::inventory_sources`] (where messages point, and whose directory
    /// holds the group_vars/host_vars the vault scan reads).
    pub inventory_path: PathBuf,
    /// Every inventory source, in order, as ansible-playbook is given them (`-i` each).
    pub inventory_sources: Vec<PathBuf>,
    /// Which setting named them.
    pub inventory_origin: InventoryOrigin,
    /// Shared with the `groups` map below, which is made from it when first read.
    pub inventory: Arc<Inventory>,
    pub environments: Vec<Environment>,
    resolver: Resolver,
    /// Ansible's magic `groups`, made when a template first reads it and shared by every
    /// host's context.
    groups: Groups,
    /// The roles of each set of playbooks a runbook runs, read once.
    roles_cache: std::sync::Mutex<RolesCache>,
    /// The vars files beside each playbook directory a play was looked at in, read once.
    play_files_cache: std::sync::Mutex<PlayFilesCache>,
    /// The repo's vaults read once ([`vault::scan_repo_running`]): the executors, the etcd
    /// probe and the VPN look each ask for what to mask, and a password script runs once.
    vault_scan: std::sync::OnceLock<vault::VaultScan>,
}

type PlayFilesCache = BTreeMap<PathBuf, Result<Option<Arc<inventory::PlayFiles>>, String>>;

type RolesCache = BTreeMap<Vec<String>, Result<Arc<roles::PlayRoles>, roles::RoleError>>;

/// The sample repo bundled with the source tree (`inventory/`): its addresses are
/// documentation values, not an operator's hosts.
pub fn bundled_sample_dir() -> PathBuf {
    Path::new(env!("HK_SOURCE_ROOT")).join("inventory")
}

/// The inventory sources of a repo and which setting named them: hk-console.yaml's
/// `inventory:`, else what ansible-playbook in the Ansible directory uses with no `-i`
/// (`ANSIBLE_INVENTORY`, then ansible.cfg's `inventory =`), else [`DEFAULT_INVENTORY`].
/// Never empty. An ansible.cfg that cannot be read is an error, not the default.
pub fn inventory_sources(
    root: &Path,
    ansible_dir: &Path,
    config: &Config,
) -> Result<(Vec<PathBuf>, InventoryOrigin), RepoError> {
    if let Some(p) = &config.inventory {
        return Ok((vec![root.join(p)], InventoryOrigin::HkConsoleYaml));
    }
    let env = AnsibleEnv::from_process();
    let cfg = AnsibleCfg::load(ansible_dir, &env);
    if let (Some(message), None) = (&cfg.problem, &env.inventory) {
        return Err(RepoError::AnsibleCfg {
            path: cfg.shown.clone(),
            message: message.clone(),
        });
    }
    match cfg.inventory() {
        Some((list, origin)) if !list.is_empty() => Ok((list, origin)),
        _ => {
            let path = root.join(DEFAULT_INVENTORY);
            if path.symlink_metadata().is_err() {
                return Err(RepoError::NoDefaultInventory {
                    path,
                    cfg: cfg.shown.clone(),
                });
            }
            Ok((vec![path], InventoryOrigin::Default))
        }
    }
}

impl Repo {
    /// Whether this is the bundled sample, however its path was spelt (`--repo ./inventory`
    /// is the sample too): nothing is dialled on it.
    pub fn is_bundled_sample(&self) -> bool {
        let sample = bundled_sample_dir();
        self.root == sample
            || matches!(
                (self.root.canonicalize(), sample.canonicalize()),
                (Ok(a), Ok(b)) if a == b
            )
    }

    pub fn load(root: &Path) -> Result<Repo, RepoError> {
        if !root.is_dir() {
            return Err(RepoError::NotADirectory {
                path: root.to_path_buf(),
            });
        }
        let config = Config::load(root)?;
        Repo::load_with(root, config)
    }

    /// A repo read with `config` instead of its `hk-console.yaml` (which `init` proposes
    /// when there is none).
    pub fn load_with(root: &Path, config: Config) -> Result<Repo, RepoError> {
        let ansible_dir = root.join(&config.ansible_dir);
        let (inventory_sources, inventory_origin) = inventory_sources(root, &ansible_dir, &config)?;
        let inventory_path = inventory_sources[0].clone();
        let inventory = Arc::new(Inventory::load_sources(&inventory_sources)?);
        // Every host name copied twice (under `all` and its group): for 2,000 hosts no
        // environment uses, that is most of a command's work, and few templates read it.
        let groups = {
            let inventory = inventory.clone();
            Groups::lazy(move || all_groups(&inventory))
        };
        let mut repo = Repo {
            root: root.to_path_buf(),
            ansible_dir,
            inventory_path,
            inventory_sources,
            inventory_origin,
            inventory,
            environments: Vec::new(),
            config,
            resolver: Resolver::new(),
            groups,
            roles_cache: std::sync::Mutex::default(),
            play_files_cache: std::sync::Mutex::default(),
            vault_scan: std::sync::OnceLock::new(),
        };
        repo.environments = repo
            .config
            .environments
            .iter()
            .map(|(name, cfg)| {
                // The environment's own facts over the top-level ones, key by key.
                let mut cfg = cfg.clone();
                cfg.facts = cfg.facts.merged_over(&repo.config.facts);
                cfg.names = cfg.names.merged_over(&repo.config.names);
                env::derive(name, &cfg, &repo)
            })
            .collect();
        repo.set_aside_absent_defaults();
        repo.refuse_spent_budgets()?;
        Ok(repo)
    }

    /// A seed default no server defines and no Ansible file of the repo uses is no problem:
    /// the repo has no counterpart of that fact (`Environment::no_counterpart`). Read only
    /// when some environment misses one.
    fn set_aside_absent_defaults(&mut self) {
        let absent = |p: &env::EnvProblem| matches!(p, env::EnvProblem::Missing { var } if uses::SEED_FACT_VARS.contains(&var.as_str()));
        if !self
            .environments
            .iter()
            .any(|e| e.problems.iter().any(absent))
        {
            return;
        }
        let used = uses::vars_used_under(&self.ansible_dir);
        for e in &mut self.environments {
            let (aside, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut e.problems)
                .into_iter()
                .partition(|p| match p {
                    env::EnvProblem::Missing { var } => absent(p) && !used.contains(var),
                    _ => false,
                });
            e.problems = kept;
            e.no_counterpart = aside
                .into_iter()
                .filter_map(|p| match p {
                    env::EnvProblem::Missing { var } => Some(var),
                    _ => None,
                })
                .collect();
        }
    }

    /// An environment fact whose template ran out of its budget (`jinja.max_fuel`) is a
    /// refusal naming the variable and where it is written: its value is unknown, and a
    /// template that loops that long is not a value anything should be derived from.
    fn refuse_spent_budgets(&self) -> Result<(), RepoError> {
        for e in &self.environments {
            for p in &e.problems {
                if let env::EnvProblem::Unrenderable { var, host, reason } = p {
                    if resolve::is_out_of_fuel(reason) {
                        return Err(RepoError::TemplateBudget {
                            at: self
                                .origin(host, var)
                                .map(|o| o.to_string())
                                .unwrap_or_else(|| "hk-console.yaml".into()),
                            var: var.clone(),
                            host: host.clone(),
                            reason: reason.clone(),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    pub fn environment(&self, name: &str) -> Option<&Environment> {
        self.environments.iter().find(|e| e.name == name)
    }

    pub fn environment_names(&self) -> Vec<&str> {
        self.environments.iter().map(|e| e.name.as_str()).collect()
    }

    /// What a host's templates can see besides its variables.
    pub fn host_context(&self, host: &str) -> HostContext {
        host_context_in(&self.inventory, self.groups.clone(), host)
    }

    /// A host's merged variables, unrendered.
    pub fn raw_vars(&self, host: &str) -> Option<BTreeMap<String, serde_json::Value>> {
        raw_vars(&self.inventory, host)
    }

    pub fn resolve_var(&self, host: &str, var: &str) -> Option<Resolved> {
        let raw = self.raw_vars(host)?;
        raw.contains_key(var).then(|| {
            self.resolver
                .resolve_var(&self.host_context(host), &raw, var)
        })
    }

    pub fn resolve_all(&self, host: &str) -> Option<BTreeMap<String, Resolved>> {
        let raw = self.raw_vars(host)?;
        Some(self.resolver.resolve_all(&self.host_context(host), &raw))
    }

    /// The roles `playbooks` (relative to the Ansible directory) use, with their defaults
    /// and vars; read once per set of playbooks.
    pub fn play_roles(
        &self,
        playbooks: &[String],
    ) -> Result<Arc<roles::PlayRoles>, roles::RoleError> {
        let mut cache = match self.roles_cache.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(hit) = cache.get(playbooks) {
            return hit.clone();
        }
        let got = roles::play_roles(&self.ansible_dir, playbooks).map(Arc::new);
        cache.insert(playbooks.to_vec(), got.clone());
        got
    }

    /// `var` of `host` as a play with `roles` sees it, at Ansible's precedence: role
    /// defaults lowest, then the inventory (group_vars, host_vars), then role vars.
    /// `None`: no layer defines it.
    pub fn var_in_play(&self, host: &str, var: &str, roles: &roles::PlayRoles) -> Option<Resolved> {
        // The inventory as this play sees it: with its playbook's own group_vars/host_vars.
        let inventory: BTreeMap<String, serde_json::Value> = match self.play_files(roles) {
            Err(reason) => return Some(Resolved::Unrenderable { reason }),
            Ok(None) => self.raw_vars(host)?,
            Ok(Some(play)) => self
                .inventory
                .host_vars_in(host, Some(&play))?
                .into_iter()
                .map(|(k, v)| (k, v.value))
                .collect(),
        };
        let mut raw: BTreeMap<String, serde_json::Value> = roles
            .defaults
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        raw.extend(inventory);
        raw.extend(roles.vars.iter().map(|(k, v)| (k.clone(), v.value.clone())));
        raw.contains_key(var).then(|| {
            self.resolver
                .resolve_var(&self.host_context(host), &raw, var)
        })
    }

    /// The vars files beside the playbook of `roles` ([`roles::PlayRoles::play_dir`]), read
    /// once per directory; None where there are none of its own. A file that cannot be read
    /// is an error naming it: ansible-playbook stops on it too.
    pub fn play_files(
        &self,
        roles: &roles::PlayRoles,
    ) -> Result<Option<Arc<inventory::PlayFiles>>, String> {
        let Some(dir) = &roles.play_dir else {
            return Ok(None);
        };
        let mut cache = match self.play_files_cache.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(hit) = cache.get(dir) {
            return hit.clone();
        }
        let got = self
            .inventory
            .play_files(dir)
            .map(|p| p.map(Arc::new))
            .map_err(|e| e.to_string());
        cache.insert(dir.clone(), got.clone());
        got
    }

    /// `path` relative to the repo's top directory when it lies inside it (`""` for the
    /// top directory itself), as messages name files; else `path` as it is.
    pub fn rel(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }
}

/// Ansible's magic `groups`: every group's hosts.
pub fn all_groups(inv: &Inventory) -> GroupMap {
    inv.group_names()
        .into_iter()
        .map(|g| {
            let hosts = inv.hosts_in(&g).unwrap_or_default();
            (g, hosts)
        })
        .collect()
}

/// Ansible's magic `groups` and `group_names` for one host.
pub fn host_context(inv: &Inventory, host: &str) -> HostContext {
    host_context_with(inv, Arc::new(all_groups(inv)), host)
}

/// [`host_context`] with a `groups` map already made (shared by many hosts).
pub fn host_context_with(inv: &Inventory, groups: Arc<GroupMap>, host: &str) -> HostContext {
    host_context_in(inv, groups.into(), host)
}

fn host_context_in(inv: &Inventory, groups: Groups, host: &str) -> HostContext {
    let mut group_names: Vec<String> = inv
        .groups_of(host)
        .into_iter()
        .filter(|g| g != "all")
        .collect();
    group_names.sort();
    HostContext {
        inventory_hostname: host.to_string(),
        groups,
        group_names,
    }
}

/// A host's merged variables as plain JSON values.
pub fn raw_vars(inv: &Inventory, host: &str) -> Option<BTreeMap<String, serde_json::Value>> {
    Some(
        inv.host_vars(host)?
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect(),
    )
}

impl HostFacts for Repo {
    fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
        self.inventory.pattern_hosts(group)
    }

    fn resolved(&self, host: &str, var: &str) -> Option<Resolved> {
        self.resolve_var(host, var)
    }

    fn origin(&self, host: &str, var: &str) -> Option<Origin> {
        self.inventory
            .host_vars(host)?
            .get(var)
            .map(|v| v.origin.clone())
    }

    fn rendered(&self, host: &str, template: &str) -> Resolved {
        match self.raw_vars(host) {
            Some(raw) => self
                .resolver
                .render(&self.host_context(host), &raw, template),
            None => Resolved::Unrenderable {
                reason: format!("{host} is not in the inventory"),
            },
        }
    }
}
