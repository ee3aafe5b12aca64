//! The one reader of `ansible.cfg` in hk-console: which file ansible-playbook (run in the
//! repo's Ansible directory) reads, the keys of its `[defaults]` as Ansible's config parser
//! reads them, and the settings hk-console takes from it (`inventory`, `roles_path`,
//! `vault_password_file`, `vault_identity_list`) with their environment overrides.
//!
//! Owns: the search order (`ANSIBLE_CONFIG`, `./ansible.cfg`, `~/.ansible.cfg`,
//! `/etc/ansible/ansible.cfg`), the value rules (a `;` starts an inline comment only after
//! whitespace; `#` and `;` start a comment line; `#` mid-value is part of the value; `key =
//! value` or `key: value`), path lists (relative to the cfg file's directory, `~` expanded,
//! an empty item of a comma list is the cfg's directory), all as measured with the real
//! ansible-config / ansible-inventory 2.19 (tests/inventory_cfg.rs).
//! Must not: decide what hk-console does with a setting (roles.rs, vault.rs and `Repo`
//! do), or read any section but `[defaults]`.
//!
//! Not modelled (said here so nobody assumes it): continuation lines of a multi-line value,
//! `%(...)s` interpolation (Ansible's parser has none either), Ansible's refusal of a
//! world-writable `./ansible.cfg`, and non-UTF-8 bytes (refused, where Ansible reads them
//! as surrogate escapes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What of the process environment Ansible's configuration depends on (given, so tests can
/// pin it).
#[derive(Debug, Clone, Default)]
pub struct AnsibleEnv {
    pub home: Option<PathBuf>,
    /// `ANSIBLE_HOME` (default `~/.ansible`).
    pub ansible_home: Option<PathBuf>,
    /// `ANSIBLE_CONFIG`.
    pub config: Option<PathBuf>,
    /// `ANSIBLE_ROLES_PATH`.
    pub roles_path: Option<String>,
    /// `ANSIBLE_INVENTORY`.
    pub inventory: Option<String>,
    /// `ANSIBLE_VAULT_PASSWORD_FILE`.
    pub vault_password_file: Option<PathBuf>,
    /// `ANSIBLE_VAULT_IDENTITY_LIST`.
    pub vault_identity_list: Option<String>,
}

impl AnsibleEnv {
    pub fn from_process() -> AnsibleEnv {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let text = |k: &str| var(k).map(|v| v.to_string_lossy().into_owned());
        AnsibleEnv {
            home: var("HOME").map(PathBuf::from),
            ansible_home: var("ANSIBLE_HOME").map(PathBuf::from),
            config: var("ANSIBLE_CONFIG").map(PathBuf::from),
            roles_path: text("ANSIBLE_ROLES_PATH"),
            inventory: text("ANSIBLE_INVENTORY"),
            vault_password_file: var("ANSIBLE_VAULT_PASSWORD_FILE").map(PathBuf::from),
            vault_identity_list: text("ANSIBLE_VAULT_IDENTITY_LIST"),
        }
    }

    /// `p` with `~` expanded, and made absolute against `base` when relative.
    pub fn expand(&self, p: &str, base: &Path) -> PathBuf {
        let p = match (p.strip_prefix("~/"), &self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ if p == "~" => self.home.clone().unwrap_or_else(|| PathBuf::from(p)),
            _ => PathBuf::from(p),
        };
        if p.is_absolute() {
            p
        } else {
            base.join(p)
        }
    }
}

/// The ansible.cfg ansible-playbook run in an Ansible directory reads, and its `[defaults]`.
#[derive(Debug, Clone)]
pub struct AnsibleCfg {
    /// The file read, if any was found.
    pub file: Option<PathBuf>,
    /// The file named in messages: the one read, else `ansible_dir/ansible.cfg` (where the
    /// operator would create one).
    pub shown: PathBuf,
    /// `[defaults]` keys -> (value, 1-based line), comments stripped; the last of a key wins.
    defaults: BTreeMap<String, (String, usize)>,
    /// Why the file found could not be read (Ansible stops there too): its keys are then
    /// unknown, which a caller that needs one must say rather than take a default.
    pub problem: Option<String>,
    /// The directory ansible-playbook runs in.
    ansible_dir: PathBuf,
    pub env: AnsibleEnv,
}

/// Where an inventory list came from, for `envs` and messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventoryOrigin {
    /// `inventory:` of hk-console.yaml.
    HkConsoleYaml,
    /// The `ANSIBLE_INVENTORY` environment variable.
    Env,
    /// `inventory =` of an ansible.cfg, at this line.
    Cfg { file: PathBuf, line: usize },
    /// Nothing names one: hk-console's own default (not Ansible's /etc/ansible/hosts).
    Default,
}

impl InventoryOrigin {
    /// Which setting named the inventory, as `envs` says it.
    pub fn describe(&self) -> String {
        match self {
            InventoryOrigin::HkConsoleYaml => "hk-console.yaml `inventory:`".into(),
            InventoryOrigin::Env => "ANSIBLE_INVENTORY".into(),
            InventoryOrigin::Cfg { file, line } => {
                format!("{}:{line} `inventory =`", file.display())
            }
            InventoryOrigin::Default => format!(
                "hk-console's default {}: neither hk-console.yaml `inventory:`, ANSIBLE_INVENTORY nor an ansible.cfg names one",
                super::config::DEFAULT_INVENTORY
            ),
        }
    }
}

impl AnsibleCfg {
    /// The configuration ansible-playbook run in `ansible_dir` reads: the first that exists
    /// of `ANSIBLE_CONFIG` (relative to `ansible_dir`; a directory means its ansible.cfg),
    /// `ansible_dir/ansible.cfg`, `~/.ansible.cfg`, `/etc/ansible/ansible.cfg`. A file that
    /// cannot be read gives no keys and a [`AnsibleCfg::problem`].
    pub fn load(ansible_dir: &Path, env: &AnsibleEnv) -> AnsibleCfg {
        let local = ansible_dir.join("ansible.cfg");
        // As Ansible's find_ini_config_file: ANSIBLE_CONFIG (a directory means its
        // ansible.cfg) only if it exists, else the next candidate (measured with
        // ansible-config 2.19: a missing ANSIBLE_CONFIG falls through to ./ansible.cfg).
        let from_env = env.config.as_ref().map(|c| {
            let p = env.expand(&c.to_string_lossy(), ansible_dir);
            if p.is_dir() {
                p.join("ansible.cfg")
            } else {
                p
            }
        });
        let file = [
            from_env,
            Some(local.clone()),
            env.home.as_ref().map(|h| h.join(".ansible.cfg")),
            Some(PathBuf::from("/etc/ansible/ansible.cfg")),
        ]
        .into_iter()
        .flatten()
        .find(|p| p.exists());
        let (defaults, problem) = match file.as_ref().map(|f| super::read::read_text(f)) {
            None => (BTreeMap::new(), None),
            Some(Ok(t)) => (parse_defaults(&t), None),
            Some(Err(e)) => (BTreeMap::new(), Some(e.to_string())),
        };
        AnsibleCfg {
            shown: file.clone().unwrap_or(local),
            file,
            defaults,
            problem,
            ansible_dir: ansible_dir.to_path_buf(),
            env: env.clone(),
        }
    }

    /// A `[defaults]` key's value (comments stripped, trimmed) and its line.
    pub fn get(&self, key: &str) -> Option<(&str, usize)> {
        self.defaults.get(key).map(|(v, l)| (v.as_str(), *l))
    }

    /// The directory relative paths of the file are taken from.
    pub fn base(&self) -> &Path {
        self.file
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(&self.ansible_dir)
    }

    /// A path value of the file, expanded as Ansible's `path` type does.
    pub fn path(&self, value: &str) -> PathBuf {
        self.env.expand(value, self.base())
    }

    /// The inventory sources ansible-playbook uses with no `-i`: `ANSIBLE_INVENTORY`
    /// (relative to the Ansible directory, where it runs), else `inventory` of
    /// `[defaults]`; each a comma-separated list (an empty item is the base directory).
    /// None when neither is set (Ansible would read /etc/ansible/hosts).
    pub fn inventory(&self) -> Option<(Vec<PathBuf>, InventoryOrigin)> {
        if let Some(v) = &self.env.inventory {
            return Some((
                path_list(v, ',', &self.env, &self.ansible_dir),
                InventoryOrigin::Env,
            ));
        }
        let (v, line) = self.get("inventory")?;
        Some((
            path_list(v, ',', &self.env, self.base()),
            InventoryOrigin::Cfg {
                file: self.shown.clone(),
                line,
            },
        ))
    }
}

/// Ansible's `pathlist` type: split on `sep`, items trimmed, each expanded against `base`
/// (an empty item is `base` itself, as the real tool resolves it).
pub fn path_list(value: &str, sep: char, env: &AnsibleEnv, base: &Path) -> Vec<PathBuf> {
    value
        .split(sep)
        .map(|p| {
            let p = p.trim();
            if p.is_empty() {
                base.to_path_buf()
            } else {
                env.expand(p, base)
            }
        })
        .collect()
}

/// The `[defaults]` section of an ansible.cfg text: key -> (value, line).
fn parse_defaults(text: &str) -> BTreeMap<String, (String, usize)> {
    let mut in_defaults = false;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        if let Some(name) = t.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_defaults = name.trim() == "defaults";
            continue;
        }
        if !in_defaults {
            continue;
        }
        if let Some((k, v)) = t.split_once(['=', ':']) {
            out.insert(
                k.trim().to_string(),
                (strip_inline_comment(v).trim().to_string(), i + 1),
            );
        }
    }
    out
}

/// A value with its inline comment removed: Ansible's parser takes `;` as a comment only
/// where whitespace precedes it (`a;b` is one value, `a ;b` is `a`); `#` never is.
pub fn strip_inline_comment(v: &str) -> &str {
    let mut prev_ws = false;
    for (i, c) in v.char_indices() {
        if c == ';' && prev_ws {
            return &v[..i];
        }
        prev_ws = c.is_whitespace();
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_comments_as_ansibles_parser_reads_them() {
        assert_eq!(strip_inline_comment(" a.ini ; c").trim(), "a.ini");
        assert_eq!(strip_inline_comment(" a.ini\t;c").trim(), "a.ini");
        assert_eq!(strip_inline_comment(" a.ini;b ;c").trim(), "a.ini;b");
        assert_eq!(strip_inline_comment(" a.ini # c").trim(), "a.ini # c");
    }

    #[test]
    fn only_defaults_and_the_last_key_wins() {
        let d = parse_defaults(
            "# c\n[ssh_connection]\ninventory = no\n[defaults]\n; c\ninventory = a\ninventory: b ; c\n",
        );
        assert_eq!(d.get("inventory"), Some(&("b".to_string(), 7)));
    }

    #[test]
    fn an_empty_item_is_the_base_and_tilde_is_home() {
        let env = AnsibleEnv {
            home: Some(PathBuf::from("/h")),
            ..AnsibleEnv::default()
        };
        let got = path_list(" a , ,~/x,/abs", ',', &env, Path::new("/cfg"));
        assert_eq!(
            got,
            ["/cfg/a", "/cfg", "/h/x", "/abs"]
                .map(PathBuf::from)
                .to_vec()
        );
    }
}
