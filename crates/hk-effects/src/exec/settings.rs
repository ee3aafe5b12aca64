//! How to reach a host: the connection settings Ansible would use, from the inventory's
//! hostvars, with `~/.ssh/config` filling in what the inventory leaves unsaid.
//!
//! Owns: [`ConnectSettings`] and a small `ssh_config` reader ([`SshConfig`]) for the keywords
//! that matter here (HostName, User, Port, IdentityFile). Must not: open connections or read
//! the inventory files itself (hostvars come in as a plain map; the integrator glues).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Errors reading connection settings; each names where the bad value came from.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("host {host}: hostvar {var} = {value}: expected a TCP port number (1-65535)")]
    BadPort {
        host: String,
        var: String,
        value: String,
    },
    #[error("host {host}: hostvar {var} = {value}: expected a string")]
    NotAString {
        host: String,
        var: String,
        value: String,
    },
    #[error("{file}:{line}: Port {value}: expected a TCP port number (1-65535)")]
    ConfigBadPort {
        file: String,
        line: usize,
        value: String,
    },
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
}

/// Everything needed to open one SSH connection to one inventory host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectSettings {
    /// The inventory name (`k3s-prod-1`); what the operator and the plan call the host.
    pub host_alias: String,
    /// What is dialled: `ansible_host`, else ssh_config `HostName`, else the alias.
    pub address: String,
    pub port: u16,
    pub user: String,
    /// Key files to try after the agent, in order.
    pub identity_files: Vec<PathBuf>,
}

impl ConnectSettings {
    /// Settings for `host_alias` from its hostvars, as Ansible's ssh connection would use them:
    /// `ansible_host`/`ansible_port`/`ansible_user`/`ansible_ssh_private_key_file` (and their
    /// legacy `ansible_ssh_*` spellings) win; where they are silent, the `~/.ssh/config` entry
    /// for the name ssh would be given (`ansible_host` if set, else the alias) answers; then
    /// OpenSSH's defaults (port 22, the local user, `~/.ssh/id_{ed25519,ecdsa,rsa}` that exist).
    pub fn resolve(
        host_alias: &str,
        hostvars: &BTreeMap<String, Value>,
        ssh_config: &SshConfig,
        defaults: &SshDefaults,
    ) -> Result<Self, SettingsError> {
        let var_str = |names: &[&str]| -> Result<Option<String>, SettingsError> {
            for name in names {
                match hostvars.get(*name) {
                    None | Some(Value::Null) => continue,
                    Some(Value::String(s)) if s.trim().is_empty() => continue,
                    Some(Value::String(s)) => return Ok(Some(s.trim().to_string())),
                    Some(other) => {
                        return Err(SettingsError::NotAString {
                            host: host_alias.to_string(),
                            var: (*name).to_string(),
                            value: other.to_string(),
                        })
                    }
                }
            }
            Ok(None)
        };
        let inv_host = var_str(&["ansible_host", "ansible_ssh_host"])?;
        let inv_user = var_str(&["ansible_user", "ansible_ssh_user"])?;
        let inv_key = var_str(&["ansible_ssh_private_key_file", "ansible_private_key_file"])?;
        let mut inv_port = None;
        for name in ["ansible_port", "ansible_ssh_port"] {
            let Some(v) = hostvars.get(name) else {
                continue;
            };
            let bad = || SettingsError::BadPort {
                host: host_alias.to_string(),
                var: name.to_string(),
                value: v.to_string(),
            };
            let port = match v {
                Value::Null => continue,
                Value::Number(n) => n.as_u64().ok_or_else(bad)?,
                Value::String(s) => s.trim().parse::<u64>().map_err(|_| bad())?,
                _ => return Err(bad()),
            };
            let port = u16::try_from(port)
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(bad)?;
            inv_port = Some(port);
            break;
        }

        let ssh_name = inv_host.clone().unwrap_or_else(|| host_alias.to_string());
        let entry = ssh_config.lookup(&ssh_name);

        let address = inv_host
            .or_else(|| entry.host_name.as_ref().map(|h| h.replace("%h", &ssh_name)))
            .unwrap_or_else(|| host_alias.to_string());
        let port = inv_port.or(entry.port).unwrap_or(22);
        let user = inv_user
            .or(entry.user.clone())
            .unwrap_or_else(|| defaults.user.clone());
        let expand = |p: &str| expand_path(p, &defaults.home, &user, &ssh_name);
        let identity_files = if let Some(k) = inv_key {
            vec![expand(&k)]
        } else if !entry.identity_files.is_empty() {
            entry.identity_files.iter().map(|p| expand(p)).collect()
        } else {
            ["id_ed25519", "id_ecdsa", "id_rsa"]
                .iter()
                .map(|n| defaults.home.join(".ssh").join(n))
                .filter(|p| p.exists())
                .collect()
        };
        Ok(ConnectSettings {
            host_alias: host_alias.to_string(),
            address,
            port,
            user,
            identity_files,
        })
    }

    /// `address:port` for logs and messages.
    pub fn endpoint(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]:{}", self.address, self.port)
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }
}

/// OpenSSH's defaults that depend on who runs hk-console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshDefaults {
    pub user: String,
    pub home: PathBuf,
}

impl SshDefaults {
    /// From `$USER` (else `root`) and `$HOME` (else `/`).
    pub fn from_env() -> Self {
        SshDefaults {
            user: std::env::var("USER").unwrap_or_else(|_| "root".to_string()),
            home: std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/")),
        }
    }
}

fn expand_path(p: &str, home: &Path, user: &str, host: &str) -> PathBuf {
    let p = p
        .replace("%d", &home.to_string_lossy())
        .replace("%u", user)
        .replace("%h", host)
        .replace("%%", "%");
    if let Some(rest) = p.strip_prefix("~/") {
        home.join(rest)
    } else if p == "~" {
        home.to_path_buf()
    } else {
        PathBuf::from(p)
    }
}

/// The parts of one `Host` block this module uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshConfigEntry {
    pub host_name: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    patterns: Vec<String>,
    /// `Match` blocks are not evaluated; they never apply (and are reported by `skipped`).
    is_match: bool,
    entry: SshConfigEntry,
}

/// A parsed `~/.ssh/config`: `Host` blocks in file order. `Match` blocks and `Include`
/// are recorded in [`SshConfig::skipped`] rather than guessed at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshConfig {
    blocks: Vec<Block>,
    /// `file:line: directive` for every directive not evaluated (Match, Include).
    pub skipped: Vec<String>,
}

impl SshConfig {
    /// An empty config (no `~/.ssh/config`).
    pub fn empty() -> Self {
        SshConfig::default()
    }

    /// Reads and parses `path`; a missing file is an empty config.
    pub fn load(path: &Path) -> Result<Self, SettingsError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::empty()),
            Err(source) => Err(SettingsError::Read {
                file: path.display().to_string(),
                source,
            }),
        }
    }

    /// Parses ssh_config text; `file` is used in error messages.
    pub fn parse(text: &str, file: &str) -> Result<Self, SettingsError> {
        let mut cfg = SshConfig::default();
        // Lines before the first Host/Match apply to every host, like `Host *`.
        let mut cur = Block {
            patterns: vec!["*".to_string()],
            is_match: false,
            entry: SshConfigEntry::default(),
        };
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, rest) = split_keyword(line);
            let key = key.to_ascii_lowercase();
            let args = split_args(rest);
            match key.as_str() {
                "host" => {
                    cfg.blocks.push(std::mem::replace(
                        &mut cur,
                        Block {
                            patterns: args,
                            is_match: false,
                            entry: SshConfigEntry::default(),
                        },
                    ));
                }
                "match" => {
                    cfg.skipped.push(format!("{file}:{line_no}: {line}"));
                    cfg.blocks.push(std::mem::replace(
                        &mut cur,
                        Block {
                            patterns: Vec::new(),
                            is_match: true,
                            entry: SshConfigEntry::default(),
                        },
                    ));
                }
                "include" => cfg.skipped.push(format!("{file}:{line_no}: {line}")),
                // First value wins, as in OpenSSH.
                "hostname" if cur.entry.host_name.is_none() => {
                    cur.entry.host_name = args.into_iter().next();
                }
                "user" if cur.entry.user.is_none() => {
                    cur.entry.user = args.into_iter().next();
                }
                "port" => {
                    let v = args.into_iter().next().unwrap_or_default();
                    let port = v.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                        SettingsError::ConfigBadPort {
                            file: file.to_string(),
                            line: line_no,
                            value: v.clone(),
                        }
                    })?;
                    if cur.entry.port.is_none() {
                        cur.entry.port = Some(port);
                    }
                }
                "identityfile" => cur.entry.identity_files.extend(args.into_iter().take(1)),
                _ => {}
            }
        }
        cfg.blocks.push(cur);
        Ok(cfg)
    }

    /// The settings for `name`, first value wins per keyword (IdentityFile accumulates),
    /// as OpenSSH reads its config.
    pub fn lookup(&self, name: &str) -> SshConfigEntry {
        let mut out = SshConfigEntry::default();
        for b in &self.blocks {
            if b.is_match || !host_matches(&b.patterns, name) {
                continue;
            }
            if out.host_name.is_none() {
                out.host_name.clone_from(&b.entry.host_name);
            }
            if out.user.is_none() {
                out.user.clone_from(&b.entry.user);
            }
            if out.port.is_none() {
                out.port = b.entry.port;
            }
            out.identity_files
                .extend(b.entry.identity_files.iter().cloned());
        }
        out
    }
}

fn split_keyword(line: &str) -> (&str, &str) {
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let (k, rest) = line.split_at(end);
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim();
    (k, rest)
}

fn split_args(rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in rest.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// OpenSSH Host matching: any positive pattern matches and no negated one does.
fn host_matches(patterns: &[String], name: &str) -> bool {
    let mut hit = false;
    for p in patterns {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, name) {
                return false;
            }
        } else if glob(p, name) {
            hit = true;
        }
    }
    hit
}

/// `*` and `?` globbing, case-insensitive like OpenSSH's host patterns.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaults() -> SshDefaults {
        SshDefaults {
            user: "op".into(),
            home: PathBuf::from("/home/op"),
        }
    }

    fn vars(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).expect("map")
    }

    const CONFIG: &str = "\
# comment
Host node-a 10.0.0.*
    User cfguser
    Port 2200
    IdentityFile ~/.ssh/node_key
Host !10.0.0.9 *.lab
    HostName %h.example
Match exec true
    User ignored
Host *
    User fallback
    IdentityFile=\"%d/.ssh/all key\"
";

    #[test]
    fn inventory_wins_config_fills_the_rest() {
        let cfg = SshConfig::parse(CONFIG, "cfg").expect("parse");
        assert_eq!(cfg.skipped, vec!["cfg:8: Match exec true".to_string()]);
        let s = ConnectSettings::resolve(
            "node-a",
            &vars(json!({"ansible_host": "10.0.0.5", "ansible_port": "2222"})),
            &cfg,
            &defaults(),
        )
        .expect("resolve");
        assert_eq!(s.address, "10.0.0.5");
        assert_eq!(s.port, 2222);
        // ssh is given 10.0.0.5, which matches `10.0.0.*`.
        assert_eq!(s.user, "cfguser");
        assert_eq!(
            s.identity_files,
            vec![
                PathBuf::from("/home/op/.ssh/node_key"),
                PathBuf::from("/home/op/.ssh/all key")
            ]
        );
        assert_eq!(s.endpoint(), "10.0.0.5:2222");
    }

    #[test]
    fn config_hostname_and_negation() {
        let cfg = SshConfig::parse(CONFIG, "cfg").expect("parse");
        let s = ConnectSettings::resolve(
            "gw.lab",
            &vars(json!({"ansible_user": "root", "ansible_ssh_private_key_file": "~/k"})),
            &cfg,
            &defaults(),
        )
        .expect("resolve");
        assert_eq!(s.address, "gw.lab.example");
        assert_eq!(s.port, 22);
        assert_eq!(s.user, "root");
        assert_eq!(s.identity_files, vec![PathBuf::from("/home/op/k")]);
        assert_eq!(cfg.lookup("10.0.0.9").host_name, None);
        assert_eq!(cfg.lookup("10.0.0.9").user.as_deref(), Some("cfguser"));
    }

    #[test]
    fn silent_everywhere_gives_openssh_defaults() {
        let s = ConnectSettings::resolve("h", &BTreeMap::new(), &SshConfig::empty(), &defaults())
            .expect("resolve");
        assert_eq!(
            (s.address.as_str(), s.port, s.user.as_str()),
            ("h", 22, "op")
        );
    }

    #[test]
    fn bad_values_are_named() {
        let err = ConnectSettings::resolve(
            "h",
            &vars(json!({"ansible_port": "ssh"})),
            &SshConfig::empty(),
            &defaults(),
        )
        .expect_err("bad port");
        assert_eq!(
            err.to_string(),
            "host h: hostvar ansible_port = \"ssh\": expected a TCP port number (1-65535)"
        );
        let err = SshConfig::parse("Host x\n  Port 99999\n", "/c").expect_err("bad");
        assert_eq!(
            err.to_string(),
            "/c:2: Port 99999: expected a TCP port number (1-65535)"
        );
    }

    #[test]
    fn globbing() {
        assert!(glob("k3s-*", "K3S-prod-1"));
        assert!(glob("10.0.0.?", "10.0.0.7"));
        assert!(!glob("10.0.0.?", "10.0.0.17"));
        assert!(glob("*", ""));
    }
}
