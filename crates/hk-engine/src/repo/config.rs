//! `hk-console.yaml`: which inventory groups make each environment, and where things live.
//!
//! Owns: the file's schema (strict: an unknown key is an error with file:line:col), its
//! defaults, and turning its relative paths into paths under the repo root.
//! Must not: derive anything the inventory already says (founder, VIP, endpoint, port,
//! primary group, kubeconfig name come from hostvars; see `env.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The name of the file at the top of an infra repo.
pub const CONFIG_FILE: &str = "hk-console.yaml";

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where ansible-playbook runs from, relative to the repo root.
    #[serde(default = "default_ansible_dir")]
    pub ansible_dir: PathBuf,
    /// The inventory source (an INI/YAML/JSON file or a directory), relative to the repo root.
    /// Unset: what ansible-playbook in `ansible_dir` uses with no `-i` (`ANSIBLE_INVENTORY`,
    /// else `inventory =` of its ansible.cfg), else [`DEFAULT_INVENTORY`] (`Repo::load_with`).
    #[serde(default)]
    pub inventory: Option<PathBuf>,
    /// An extra known_hosts file the SSH executor trusts besides `~/.ssh/known_hosts`.
    #[serde(default)]
    pub known_hosts: Option<PathBuf>,
    /// Environments by name (dev, prod, ...).
    pub environments: BTreeMap<String, EnvConfig>,
    /// The kustomize `check` builds Flux overlays with: a `kustomize` or `kubectl` binary (a
    /// name looked up on PATH, or a path relative to the repo root). Unset: `kustomize`, else
    /// `kubectl`, on PATH; neither: the builtin engine.
    #[serde(default)]
    pub kustomize_bin: Option<PathBuf>,
    /// The cluster-held lock of mutating runs (`hk-console-run-lock` in kube-system).
    #[serde(default)]
    pub run_lock: RunLockConfig,
    /// Where every environment's facts come from (an environment's own `facts:` wins, key by
    /// key). Unset keys: the seed repo's variable names ([`FactsConfig::default_source`]).
    #[serde(default)]
    pub facts: FactsConfig,
    /// What the live panes look for in the cluster: the CNI's agents (Cilium's names by
    /// default).
    #[serde(default)]
    pub cni: CniConfig,
    /// Which of the seed's Ansible-side contract rules apply to this repo (all by default).
    #[serde(default)]
    pub contract: ContractConfig,
}

/// Where the seed's contract rules look, under the Ansible directory (the layout the infra
/// repo documents; `contract:` switches a rule off where a repo has no counterpart).
pub const CILIUM_TEMPLATE: &str = "roles/cilium/templates/cilium-values.yaml.j2";
pub const SITE_PLAYBOOK: &str = "playbooks/site.yml";
/// The server variable listing the API certificate's SANs (the `tls-sans` rule).
pub const TLS_SANS_VAR: &str = "k3s_tls_sans";

/// `contract:` in hk-console.yaml: where the repo keeps the things the Ansible-side parity
/// rules read (its site playbook, its CNI values template, the server variable listing the
/// API certificate's SANs). Each key takes a path (or, for `tls_sans`, a variable name) when
/// the repo keeps it elsewhere than the seed repo, or `false` when it has no counterpart:
/// `check` then names the rule not applicable, with this file as the reason, instead of
/// failing it. Unset (or `true`): the seed repo's place, and the rule applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractConfig {
    /// The site playbook importing k3s, kube-vip and cilium in order, under the Ansible
    /// directory (default [`SITE_PLAYBOOK`]).
    #[serde(default)]
    pub site_playbook: Option<ContractPart>,
    /// The CNI values template whose `k8sServiceHost` must consume the endpoint, under the
    /// Ansible directory (default [`CILIUM_TEMPLATE`]).
    #[serde(default)]
    pub cni_values_template: Option<ContractPart>,
    /// The server variable listing the API certificate's SANs (default [`TLS_SANS_VAR`]).
    #[serde(default)]
    pub tls_sans: Option<ContractPart>,
}

/// One `contract:` key: `false` (no counterpart), `true` (the default place) or where.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ContractPart {
    Applies(bool),
    At(String),
}

impl ContractConfig {
    /// Whether `part` is switched off (`false`).
    pub fn is_off(part: &Option<ContractPart>) -> bool {
        matches!(part, Some(ContractPart::Applies(false)))
    }

    /// Where `part` is: the configured path or name, else `default`.
    pub fn place<'a>(part: &'a Option<ContractPart>, default: &'a str) -> &'a str {
        match part {
            Some(ContractPart::At(p)) if !p.trim().is_empty() => p.trim(),
            _ => default,
        }
    }

    pub fn site_playbook_path(&self) -> &str {
        Self::place(&self.site_playbook, SITE_PLAYBOOK)
    }

    pub fn cni_values_template_path(&self) -> &str {
        Self::place(&self.cni_values_template, CILIUM_TEMPLATE)
    }

    pub fn tls_sans_var(&self) -> &str {
        Self::place(&self.tls_sans, TLS_SANS_VAR)
    }

    /// The first key whose value cannot be used: its key and why.
    fn invalid(&self) -> Option<(&'static str, String)> {
        for (key, part) in [
            ("site_playbook", &self.site_playbook),
            ("cni_values_template", &self.cni_values_template),
        ] {
            if let Some(ContractPart::At(p)) = part {
                if p.trim().is_empty() || Path::new(p.trim()).is_absolute() {
                    return Some((
                        key,
                        format!("`{p}` is not a path under the Ansible directory (write it relative to it, or `false`)"),
                    ));
                }
            }
        }
        if let Some(ContractPart::At(v)) = &self.tls_sans {
            if !is_identifier(v.trim()) {
                return Some((
                    "tls_sans",
                    format!("`{v}` is not a variable name (write the server variable that lists the SANs, or `false`)"),
                ));
            }
        }
        None
    }
}

/// `cni:` in hk-console.yaml: where the CNI's agents run and what they are called, for the
/// agent pane, the rollout watch and the waits that read them. Unset keys are Cilium's
/// names as its Helm chart installs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CniConfig {
    /// The namespace of the agents, their DaemonSet and ConfigMaps (also kube-vip's Lease).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The label selector of the agent pods.
    #[serde(default)]
    pub selector: Option<String>,
    /// The container whose API endpoint environment is judged.
    #[serde(default)]
    pub container: Option<String>,
    /// The agents' DaemonSet.
    #[serde(default)]
    pub daemonset: Option<String>,
}

/// The seed repo's variables for each environment fact: the defaults of `facts:`.
pub const VAR_PRIMARY_GROUP: &str = "k3s_primary_group";
pub const VAR_FOUNDER: &str = "k3s_api_host";
pub const VAR_VIP: &str = "kube_vip_address";
pub const VAR_ENDPOINT: &str = "k3s_apiserver_endpoint";
pub const VAR_API_PORT: &str = "k3s_api_port";
pub const VAR_KUBECONFIG: &str = "cluster_kubeconfig_name";

/// Which environment fact a [`FactsConfig`] key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactKey {
    PrimaryGroup,
    Founder,
    Vip,
    Endpoint,
    ApiPort,
    Kubeconfig,
}

impl FactKey {
    pub const ALL: [FactKey; 6] = [
        FactKey::PrimaryGroup,
        FactKey::Founder,
        FactKey::Vip,
        FactKey::Endpoint,
        FactKey::ApiPort,
        FactKey::Kubeconfig,
    ];

    /// The key as hk-console.yaml writes it under `facts:`.
    pub fn key(self) -> &'static str {
        match self {
            FactKey::PrimaryGroup => "primary_group",
            FactKey::Founder => "founder",
            FactKey::Vip => "vip",
            FactKey::Endpoint => "endpoint",
            FactKey::ApiPort => "api_port",
            FactKey::Kubeconfig => "kubeconfig",
        }
    }
}

/// `facts:` in hk-console.yaml: for each environment fact, the server variable that holds
/// it (`vip: cluster_vip`) or a Jinja expression over a server's variables, rendered as the
/// repo's own templates would (`endpoint: "{{ cluster_vip }}"`,
/// `api_port: "{{ apiserver_port | default(6443) }}"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactsConfig {
    /// The inventory group of the primary (first) server.
    #[serde(default)]
    pub primary_group: Option<String>,
    /// The address the other servers join (the founder's).
    #[serde(default)]
    pub founder: Option<String>,
    /// The control-plane VIP.
    #[serde(default)]
    pub vip: Option<String>,
    /// The API endpoint the CNI and the kubeconfigs dial.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The API server port.
    #[serde(default)]
    pub api_port: Option<String>,
    /// The kubeconfig file name under the repo's `.cache/`.
    #[serde(default)]
    pub kubeconfig: Option<String>,
}

/// Where one fact comes from, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactSource {
    /// A server variable, by name.
    Var(String),
    /// A Jinja expression over a server's variables.
    Template(String),
}

impl FactSource {
    /// `text` as hk-console.yaml writes it: a template when it holds `{{` or `{%`, else a
    /// variable name.
    pub fn parse(text: &str) -> FactSource {
        if text.contains("{{") || text.contains("{%") {
            FactSource::Template(text.to_string())
        } else {
            FactSource::Var(text.trim().to_string())
        }
    }

    /// How messages name it: the variable, or the expression.
    pub fn shown(&self) -> &str {
        match self {
            FactSource::Var(v) | FactSource::Template(v) => v,
        }
    }
}

impl FactsConfig {
    /// What this mapping itself says for `k` (no default).
    pub fn source_of(&self, k: FactKey) -> Option<&String> {
        self.get(k)
    }

    fn get(&self, k: FactKey) -> Option<&String> {
        match k {
            FactKey::PrimaryGroup => self.primary_group.as_ref(),
            FactKey::Founder => self.founder.as_ref(),
            FactKey::Vip => self.vip.as_ref(),
            FactKey::Endpoint => self.endpoint.as_ref(),
            FactKey::ApiPort => self.api_port.as_ref(),
            FactKey::Kubeconfig => self.kubeconfig.as_ref(),
        }
    }

    /// The seed repo's variable for `k`: what a repo that writes no `facts:` uses.
    pub fn default_source(k: FactKey) -> &'static str {
        match k {
            FactKey::PrimaryGroup => VAR_PRIMARY_GROUP,
            FactKey::Founder => VAR_FOUNDER,
            FactKey::Vip => VAR_VIP,
            FactKey::Endpoint => VAR_ENDPOINT,
            FactKey::ApiPort => VAR_API_PORT,
            FactKey::Kubeconfig => VAR_KUBECONFIG,
        }
    }

    /// This mapping's keys over `outer`'s, key by key.
    pub fn merged_over(&self, outer: &FactsConfig) -> FactsConfig {
        let pick = |k: FactKey| self.get(k).or_else(|| outer.get(k)).cloned();
        FactsConfig {
            primary_group: pick(FactKey::PrimaryGroup),
            founder: pick(FactKey::Founder),
            vip: pick(FactKey::Vip),
            endpoint: pick(FactKey::Endpoint),
            api_port: pick(FactKey::ApiPort),
            kubeconfig: pick(FactKey::Kubeconfig),
        }
    }

    /// Where fact `k` comes from: this mapping's key, else `outer`'s, else the default.
    pub fn source(&self, outer: &FactsConfig, k: FactKey) -> FactSource {
        FactSource::parse(
            self.get(k)
                .or_else(|| outer.get(k))
                .map(String::as_str)
                .unwrap_or(Self::default_source(k)),
        )
    }

    /// The first key whose value is neither a variable name nor a template: its key and
    /// why.
    fn invalid(&self) -> Option<(FactKey, String)> {
        FactKey::ALL.into_iter().find_map(|k| {
            let v = self.get(k)?;
            match FactSource::parse(v) {
                FactSource::Var(name) if !is_identifier(&name) => Some((
                    k,
                    format!(
                        "`{v}` is neither a variable name nor a Jinja expression (write the server variable that holds it, e.g. `cluster_vip`, or an expression such as \"{{{{ cluster_vip }}}}\")"
                    ),
                )),
                FactSource::Template(t) => minijinja::Environment::new()
                    .template_from_str(&t)
                    .err()
                    .map(|e| (k, format!("`{t}` does not parse as Jinja: {e}"))),
                FactSource::Var(_) => None,
            }
        })
    }
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// `run_lock:` in hk-console.yaml.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunLockConfig {
    /// Seconds a holder's lock lasts without a renewal; the console renews it three times
    /// per duration while its run lives. A lock not renewed for longer is stale.
    #[serde(default = "default_lock_duration_s")]
    pub duration_s: u64,
}

impl Default for RunLockConfig {
    fn default() -> Self {
        RunLockConfig {
            duration_s: default_lock_duration_s(),
        }
    }
}

fn default_lock_duration_s() -> u64 {
    60
}

/// The shortest lock duration accepted: renewals go out every third of it.
pub const MIN_LOCK_DURATION_S: u64 = 6;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// The inventory group holding this environment's k3s servers.
    pub servers: String,
    /// The inventory group holding its VPN egress gateways, if it has any.
    #[serde(default)]
    pub vpn_gateways: Option<String>,
    /// Nothing mutates here unless the operator first confirms they are present.
    #[serde(default)]
    pub operator_present: bool,
    /// The gate policy holds here: every mutating step is previewed where its kind can be
    /// and approved with its blast radius stated, or confirmed by typing the environment's
    /// name and the host count. No runbook can opt out.
    #[serde(default)]
    pub protected: bool,
    /// The Flux overlay directory, relative to the repo root (default `clusters/<name>`).
    #[serde(default)]
    pub flux_overlay: Option<PathBuf>,
    /// The vaulted file holding this environment's become password, relative to the repo
    /// root. Named so `check` can say when it is missing or not actually vaulted.
    #[serde(default)]
    pub vault: Option<PathBuf>,
    /// The inventory group holding its agent (worker) nodes, if it has any: nodes of the
    /// cluster, not of its control plane.
    #[serde(default)]
    pub agents: Option<String>,
    /// This environment's own `facts:` (key by key over the top-level `facts:`).
    #[serde(default)]
    pub facts: FactsConfig,
}

/// The seed repo's Ansible directory: the default of `ansible_dir:`.
pub const DEFAULT_ANSIBLE_DIR: &str = "infra/ansible";

fn default_ansible_dir() -> PathBuf {
    PathBuf::from(DEFAULT_ANSIBLE_DIR)
}

/// The inventory when neither hk-console.yaml nor any ansible.cfg names one (Ansible's own
/// default, /etc/ansible/hosts, is no infra repo's inventory).
pub const DEFAULT_INVENTORY: &str = "infra/ansible/inventory/hosts.ini";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}\n  hint: the repo root must hold {CONFIG_FILE}, which names the environments; `hk-console init --repo DIR` proposes one from the inventory and the Flux tree (`--write` writes it and runs check)")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not a regular file, or over the size cap (see `repo::read`).
    #[error("{0}")]
    Refused(super::read::ReadError),
    #[error("{path}:{line}:{col}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        col: usize,
        message: String,
    },
}

impl Config {
    /// Read `root/hk-console.yaml`.
    pub fn load(root: &Path) -> Result<Config, ConfigError> {
        use super::read::{read_text, ReadError};
        let path = root.join(CONFIG_FILE);
        let text = read_text(&path).map_err(|e| match e {
            ReadError::Io { path, source } => ConfigError::Read { path, source },
            ReadError::NotUtf8 { path, line, col } => ConfigError::Invalid {
                path,
                line,
                col,
                message: "bytes that are not UTF-8 (expected UTF-8 text)".into(),
            },
            other => ConfigError::Refused(other),
        })?;
        let config = Self::parse(&path, &text)?;
        config.refuse_special_vault_files(root, &path, &text)?;
        Ok(config)
    }

    /// Parse the text of a config file; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        // The bounded loader first: serde_yaml's scanner is quadratic in flow nesting and
        // copies aliases without limit; ours refuses both, linearly, naming the line.
        if let Err(e) = crate::yaml::parse_documents(text) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: e.mark.line,
                col: e.mark.col,
                message: e.message,
            });
        }
        let config: Config = serde_yaml::from_str(text).map_err(|e| {
            let (line, col) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                col,
                message: e
                    .to_string()
                    .split(" at line ")
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            }
        })?;
        if config.run_lock.duration_s < MIN_LOCK_DURATION_S {
            let (line, col) = text
                .lines()
                .enumerate()
                .find_map(|(i, l)| l.find("duration_s").map(|c| (i + 1, c + 1)))
                .unwrap_or((1, 1));
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                col,
                message: format!(
                    "`run_lock.duration_s: {}` is too short: at least {MIN_LOCK_DURATION_S} seconds (the lock is renewed every third of it)",
                    config.run_lock.duration_s
                ),
            });
        }
        // A fact mapping that names no variable and is no template would leave the fact
        // silently unknown: refused here, at its line.
        let scopes = std::iter::once((vec!["facts".to_string()], &config.facts)).chain(
            config.environments.iter().map(|(n, e)| {
                (
                    vec!["environments".to_string(), n.clone(), "facts".to_string()],
                    &e.facts,
                )
            }),
        );
        for (at, facts) in scopes {
            if let Some((k, why)) = facts.invalid() {
                let doc = crate::yaml::parse_one(text).ok();
                let mut keys: Vec<&str> = at.iter().map(String::as_str).collect();
                keys.push(k.key());
                let mark = doc
                    .as_ref()
                    .and_then(|d| d.path(&keys))
                    .map(|n| n.mark)
                    .unwrap_or_default();
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    line: mark.line.max(1),
                    col: mark.col.max(1),
                    message: format!("{}: {why}", keys.join(".")),
                });
            }
        }
        // A contract path or variable that cannot be one would make its rule read nothing.
        if let Some((k, why)) = config.contract.invalid() {
            let mark = crate::yaml::parse_one(text)
                .ok()
                .and_then(|d| d.path(&["contract", k]).map(|n| n.mark))
                .unwrap_or_default();
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: mark.line.max(1),
                col: mark.col.max(1),
                message: format!("contract.{k}: {why}"),
            });
        }
        if config.environments.is_empty() {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: 1,
                col: 1,
                message:
                    "`environments` is empty: name at least one, e.g. `prod: { servers: control_plane }`"
                        .into(),
            });
        }
        Ok(config)
    }
}

impl Config {
    /// A `vault:` that names a FIFO or device (`/dev/zero`) would hang or never end when
    /// `check` reads it: refused here, by type, at the line that names it.
    fn refuse_special_vault_files(
        &self,
        root: &Path,
        path: &Path,
        text: &str,
    ) -> Result<(), ConfigError> {
        let doc = crate::yaml::parse_one(text).ok();
        for (name, env) in &self.environments {
            let Some(vault) = &env.vault else { continue };
            let Ok(meta) = std::fs::metadata(root.join(vault)) else {
                continue;
            };
            if meta.is_file() {
                continue;
            }
            let mark = doc
                .as_ref()
                .and_then(|d| d.path(&["environments", name.as_str(), "vault"]))
                .map(|n| n.mark)
                .unwrap_or_default();
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: mark.line.max(1),
                col: mark.col.max(1),
                message: format!(
                    "environments.{name}.vault: {} is not a regular file (expected the vaulted file itself; a FIFO or device is refused before reading)",
                    vault.display()
                ),
            });
        }
        Ok(())
    }
}

impl EnvConfig {
    /// The overlay directory relative to the repo root.
    pub fn overlay_dir(&self, env_name: &str) -> PathBuf {
        self.flux_overlay
            .clone()
            .unwrap_or_else(|| Path::new("clusters").join(env_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_every_path() {
        let c = Config::parse(
            Path::new("x.yaml"),
            "environments:\n  prod: { servers: k3s_prod }\n",
        )
        .expect("valid");
        assert_eq!(c.ansible_dir, PathBuf::from("infra/ansible"));
        // Unset: Repo::load_with asks ansible.cfg, then takes DEFAULT_INVENTORY.
        assert_eq!(c.inventory, None);
        let prod = &c.environments["prod"];
        assert_eq!(prod.overlay_dir("prod"), PathBuf::from("clusters/prod"));
        assert!(!prod.operator_present);
        assert!(!prod.protected, "protection is asked for, never assumed");
    }

    #[test]
    fn the_run_lock_has_a_default_duration_and_a_strict_schema() {
        let env = "environments:\n  prod: { servers: k3s_prod }\n";
        let c = Config::parse(Path::new("x.yaml"), env).expect("valid");
        assert_eq!(c.run_lock.duration_s, 60);
        let c = Config::parse(
            Path::new("x.yaml"),
            &format!("run_lock:\n  duration_s: 30\n{env}"),
        )
        .expect("valid");
        assert_eq!(c.run_lock.duration_s, 30);
        let err = Config::parse(
            Path::new("x.yaml"),
            &format!("run_lock:\n  duration: 30\n{env}"),
        )
        .expect_err("typo");
        assert!(err.to_string().starts_with("x.yaml:2:"), "{err}");
        assert!(
            err.to_string().contains("unknown field `duration`"),
            "{err}"
        );
        let err = Config::parse(
            Path::new("x.yaml"),
            &format!("run_lock:\n  duration_s: 3\n{env}"),
        )
        .expect_err("too short");
        assert_eq!(
            err.to_string(),
            "x.yaml:2:3: `run_lock.duration_s: 3` is too short: at least 6 seconds (the lock is renewed every third of it)"
        );
    }

    #[test]
    fn unknown_keys_name_file_line_and_column() {
        let err = Config::parse(
            Path::new("hk-console.yaml"),
            "environments:\n  prod:\n    servers: k3s_prod\n    severs: typo\n",
        )
        .expect_err("must fail");
        let text = err.to_string();
        assert!(text.starts_with("hk-console.yaml:4:"), "{text}");
        assert!(text.contains("unknown field `severs`"), "{text}");
    }

    #[test]
    fn kustomize_bin_is_read_and_misspelling_it_is_an_error() {
        let c = Config::parse(
            Path::new("c.yaml"),
            "kustomize_bin: tools/kustomize\nenvironments:\n  prod: { servers: k3s_prod }\n",
        )
        .expect("valid");
        assert_eq!(c.kustomize_bin, Some(PathBuf::from("tools/kustomize")));
        let err = Config::parse(
            Path::new("c.yaml"),
            "kustomize_binary: kubectl\nenvironments:\n  prod: { servers: k3s_prod }\n",
        )
        .expect_err("must fail");
        assert!(
            err.to_string().contains("unknown field `kustomize_binary`"),
            "{err}"
        );
    }

    #[test]
    fn missing_servers_is_an_error() {
        let err = Config::parse(
            Path::new("c.yaml"),
            "environments:\n  dev: { operator_present: true }\n",
        )
        .expect_err("must fail");
        assert!(err.to_string().contains("missing field `servers`"), "{err}");
    }

    #[test]
    fn empty_environments_is_an_error() {
        let err = Config::parse(Path::new("c.yaml"), "environments: {}\n").expect_err("must fail");
        assert!(err.to_string().contains("`environments` is empty"), "{err}");
    }
}
