//! The Kubernetes side: which cluster an environment is, and a client to it.
//!
//! Owns: choosing the kubeconfig and context of an environment ([`kube_target`]): the
//! `cluster_kubeconfig_name` its servers agree on, under the repo's `.cache/`, unless the
//! operator names another with `--kubeconfig` or `KUBECONFIG` (and `--context`), as kubectl
//! users expect; building a [`kube::Client`] from it ([`client`]); the environment's
//! [`EnvTopology`] for the live rules ([`env_topology`]).
//! Also kube errors in words ([`explain`]) for every reader of the API; conversions of
//! objects into rule inputs ([`convert`]), the run lock ([`lock`]), the health gate's read-only
//! look ([`health_probe`]) and how a wait ended ([`WaitEnd`], which `exec::kube` re-exports:
//! `cluster/` imports nothing of `exec/`). The live watchers that use this client are `observe::watch`/`once`.
//! Must not: judge what it reads (that is `checks::live`), know the terminal, or invent a
//! cluster: a missing kubeconfig is an error naming the file and where its name came from.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use hk_engine::checks::live::{EnvTopology, Server};
use hk_engine::repo::config::NameKey;
use hk_engine::repo::Repo;

pub mod convert;
mod explain;
pub mod health_probe;
pub mod lock;
mod wait_end;

pub use explain::explain;
pub use wait_end::WaitEnd;

/// The operator's overrides, from `--kubeconfig`/`KUBECONFIG` and `--context`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeOverrides {
    /// `--kubeconfig FILE` (wins over `KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// `KUBECONFIG` as read from the environment: one or more files, `:`-separated.
    pub kubeconfig_env: Option<String>,
    /// `--context NAME`.
    pub context: Option<String>,
    /// The one environment these overrides point at (a kubeconfig is one cluster): the
    /// others keep the inventory's kubeconfig. `None`: every environment given.
    pub env: Option<String>,
}

impl KubeOverrides {
    /// `--kubeconfig`/`--context` as given, and `KUBECONFIG` from the process environment.
    pub fn from_args(kubeconfig: Option<PathBuf>, context: Option<String>) -> KubeOverrides {
        KubeOverrides {
            kubeconfig,
            kubeconfig_env: std::env::var("KUBECONFIG").ok().filter(|s| !s.is_empty()),
            context,
            env: None,
        }
    }

    /// These overrides for `env` only; every other environment keeps the inventory's.
    pub fn for_env(mut self, env: &str) -> KubeOverrides {
        self.env = Some(env.to_string());
        self
    }

    /// Whether the operator named anything (a kubeconfig or a context).
    pub fn any(&self) -> bool {
        self.names_kubeconfig() || self.context.is_some()
    }

    /// Whether the overrides apply to `env`.
    fn applies_to(&self, env: &str) -> bool {
        self.env.as_deref().is_none_or(|e| e == env)
    }

    /// Whether the operator named a kubeconfig (it then applies to one environment only).
    pub fn names_kubeconfig(&self) -> bool {
        self.kubeconfig.is_some() || self.kubeconfig_env.is_some()
    }
}

/// Which kubeconfig file(s) and context an environment's client is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeTarget {
    pub env: String,
    /// One file, or several merged in order (a `KUBECONFIG` list: the first wins, as kubectl).
    pub kubeconfig: Vec<PathBuf>,
    pub context: Option<String>,
    /// Where the choice came from, for messages: `--kubeconfig`, `KUBECONFIG`, or the
    /// inventory variable and its file:line.
    pub origin: String,
}

impl std::fmt::Display for KubeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<String> = self
            .kubeconfig
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        write!(f, "{} (from {})", files.join(":"), self.origin)?;
        if let Some(c) = &self.context {
            write!(f, ", context {c}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("no environment `{env}` in hk-console.yaml (known: {known})")]
    UnknownEnv { env: String, known: String },
    #[error("environment `{env}`: its servers do not agree on one `{var}` (hk-console.yaml `facts.kubeconfig`), so hk-console cannot tell which cluster it is; give --kubeconfig")]
    NoKubeconfigName { env: String, var: String },
    #[error("environment `{env}`: kubeconfig {path} (from {origin}) does not exist: fetch it (the repo's scripts export it there) or give --kubeconfig")]
    KubeconfigMissing {
        env: String,
        path: PathBuf,
        origin: String,
    },
    #[error("environment `{env}`: kubeconfig {path}: {message}")]
    KubeconfigInvalid {
        env: String,
        path: String,
        message: String,
    },
    #[error("{0}")]
    Topology(String),
    #[error("environment `{env}`: cannot build a client from {target}: {message}")]
    Client {
        env: String,
        target: String,
        message: String,
    },
}

/// The environment `env`, or an error listing the known ones.
fn environment<'r>(
    repo: &'r Repo,
    env: &str,
) -> Result<&'r hk_engine::repo::env::Environment, ClusterError> {
    repo.environment(env)
        .ok_or_else(|| ClusterError::UnknownEnv {
            env: env.to_string(),
            known: repo.environment_names().join(", "),
        })
}

/// The kubeconfig and context for `env`. `--kubeconfig`/`KUBECONFIG` replace the
/// inventory's file; `--context` picks a context in whichever file is used.
pub fn kube_target(repo: &Repo, env: &str, ov: &KubeOverrides) -> Result<KubeTarget, ClusterError> {
    let environment = environment(repo, env)?;
    let own = KubeOverrides::default();
    let ov = if ov.applies_to(env) { ov } else { &own };
    let (kubeconfig, origin) =
        if let Some(p) = &ov.kubeconfig {
            (vec![p.clone()], "--kubeconfig".to_string())
        } else if let Some(list) = &ov.kubeconfig_env {
            (
                std::env::split_paths(list).collect::<Vec<_>>(),
                "KUBECONFIG".to_string(),
            )
        } else {
            let name = environment.kubeconfig_name.get().ok_or_else(|| {
                ClusterError::NoKubeconfigName {
                    env: env.to_string(),
                    var: environment.kubeconfig_name.var.clone(),
                }
            })?;
            let origin = match &environment.kubeconfig_name.origin {
                Some(o) => format!("{} at {o}", environment.kubeconfig_name.var),
                None => environment.kubeconfig_name.var.to_string(),
            };
            (vec![repo.root.join(".cache").join(name)], origin)
        };
    for p in &kubeconfig {
        if !p.is_file() {
            return Err(ClusterError::KubeconfigMissing {
                env: env.to_string(),
                path: p.clone(),
                origin,
            });
        }
    }
    Ok(KubeTarget {
        env: env.to_string(),
        kubeconfig,
        context: ov.context.clone(),
        origin,
    })
}

/// Read (and merge, for a list) the target's kubeconfig files.
pub fn read_kubeconfig(target: &KubeTarget) -> Result<Kubeconfig, ClusterError> {
    let mut merged: Option<Kubeconfig> = None;
    for p in &target.kubeconfig {
        let k = Kubeconfig::read_from(p).map_err(|e| invalid(target, p, e))?;
        merged = Some(match merged {
            None => k,
            Some(m) => m.merge(k).map_err(|e| invalid(target, p, e))?,
        });
    }
    merged.ok_or_else(|| ClusterError::KubeconfigInvalid {
        env: target.env.clone(),
        path: String::new(),
        message: "no kubeconfig file given".into(),
    })
}

fn invalid(target: &KubeTarget, p: &Path, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::KubeconfigInvalid {
        env: target.env.clone(),
        path: p.display().to_string(),
        message: e.to_string(),
    }
}

/// A client for the target. Only reads files; the first request is what reaches the
/// cluster, so an unreachable API server shows up there (as a pane state), not here.
pub async fn client(target: &KubeTarget) -> Result<kube::Client, ClusterError> {
    let kubeconfig = read_kubeconfig(target)?;
    let options = KubeConfigOptions {
        context: target.context.clone(),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ClusterError::Client {
            env: target.env.clone(),
            target: target.to_string(),
            message: e.to_string(),
        })?;
    kube::Client::try_from(config).map_err(|e| ClusterError::Client {
        env: target.env.clone(),
        target: target.to_string(),
        message: e.to_string(),
    })
}

/// Why `var` (what the live panes need as `what`) is unknown, as the inventory says it:
/// servers disagreeing (who says what), a value that cannot be rendered, or no server
/// defining it at all, with where to map it.
fn unknown_fact(e: &hk_engine::repo::env::Environment, env: &str, var: &str, what: &str) -> String {
    use hk_engine::repo::env::EnvProblem;
    let why = e
        .problems
        .iter()
        .find(|p| match p {
            EnvProblem::Disagree { var: v, .. }
            | EnvProblem::Unrenderable { var: v, .. }
            | EnvProblem::Missing { var: v } => v == var,
            _ => false,
        })
        .map_or_else(|| format!("no server defines `{var}`"), ToString::to_string);
    format!(
        "environment `{env}`: {why}; the live panes need {what} (map the repo's own variable \
         or expression for it under the environment's `facts:` in hk-console.yaml)"
    )
}

/// The environment as the live rules need it: VIP, API port and servers with addresses.
/// Unknown facts are an error naming what is missing (a rule judged against a guessed VIP
/// would be worse than no rule).
pub fn env_topology(repo: &Repo, env: &str) -> Result<EnvTopology, ClusterError> {
    let e = environment(repo, env)?;
    let vip_text = e
        .vip
        .get()
        .ok_or_else(|| ClusterError::Topology(unknown_fact(e, env, &e.vip.var, "the VIP")))?;
    let vip: IpAddr = vip_text.parse().map_err(|_| {
        ClusterError::Topology(format!(
            "environment `{env}`: `{}` is `{vip_text}`, expected an IP address",
            e.vip.var
        ))
    })?;
    let port_text = e.api_port.get().ok_or_else(|| {
        ClusterError::Topology(unknown_fact(e, env, &e.api_port.var, "the API port"))
    })?;
    let api_port: u16 = port_text.parse().map_err(|_| {
        ClusterError::Topology(format!(
            "environment `{env}`: `{}` is `{port_text}`, expected a port number",
            e.api_port.var
        ))
    })?;
    let mut servers = Vec::new();
    for h in &e.servers {
        let address: IpAddr = h.address.parse().map_err(|_| {
            ClusterError::Topology(format!(
                "environment `{env}`: server {} is reached at `{}`, expected an IP address (ansible_host)",
                h.name, h.address
            ))
        })?;
        servers.push(Server {
            name: h.name.clone(),
            address,
        });
    }
    let mut agents = Vec::new();
    for h in &e.agents {
        let address: IpAddr = h.address.parse().map_err(|_| {
            ClusterError::Topology(format!(
                "environment `{env}`: agent {} is reached at `{}`, expected an IP address (ansible_host)",
                h.name, h.address
            ))
        })?;
        agents.push(Server {
            name: h.name.clone(),
            address,
        });
    }
    Ok(EnvTopology {
        env: env.to_string(),
        vip,
        api_port,
        agents,
        servers,
    })
}

/// The hostvar that names kube-vip's leader-election Lease (kube-vip's `vip_leasename`).
pub const VAR_KUBE_VIP_LEASE: &str = "kube_vip_lease_name";
/// The seed repo's Lease, the default of hk-console.yaml `names.kube_vip_lease` (defined
/// once, in the config).
pub use hk_engine::repo::config::DEFAULT_KUBE_VIP_LEASE;

/// What the kube panes read and how often they look again. [`Default`] holds the documented
/// defaults (kube-vip's Lease name, Cilium's labels and names); [`watch_settings`] takes the
/// Lease name from the repo when its servers define it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchSettings {
    /// Where the Lease, the agents, their DaemonSet and ConfigMaps live.
    pub namespace: String,
    /// kube-vip's control-plane Lease.
    pub lease_name: String,
    /// Label selector of the cilium-agent pods.
    pub agent_selector: String,
    /// The agent container whose env is judged.
    pub agent_container: String,
    /// The agents' DaemonSet.
    pub daemonset: String,
    /// Re-judge without asking the API (lease staleness and a stuck rollout age).
    pub tick: Duration,
    /// Probe VIP:port this often...
    pub probe_every: Duration,
    /// ...giving up on a connect after this long.
    pub probe_timeout: Duration,
    /// An updated agent pod not ready for longer than this is a stuck rollout.
    pub stuck_after: Duration,
    /// A failed watch is retried after `retry_min`, doubling up to `retry_max`.
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// `look_once`: how long one LIST may take before the pane says it could not look.
    pub request_timeout: Duration,
}

/// Cilium's agent label: the default of hk-console.yaml `cni.selector`.
pub const DEFAULT_CNI_SELECTOR: &str = "k8s-app=cilium";

impl Default for WatchSettings {
    fn default() -> Self {
        WatchSettings {
            namespace: "kube-system".to_string(),
            lease_name: DEFAULT_KUBE_VIP_LEASE.to_string(),
            agent_selector: DEFAULT_CNI_SELECTOR.to_string(),
            agent_container: "cilium-agent".to_string(),
            daemonset: "cilium".to_string(),
            tick: Duration::from_secs(1),
            probe_every: Duration::from_secs(3),
            probe_timeout: Duration::from_secs(2),
            stuck_after: Duration::from_secs(5 * 60),
            retry_min: Duration::from_millis(500),
            retry_max: Duration::from_secs(15),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// The settings for `env`: the defaults, with the Lease name from hk-console.yaml
/// `names.kube_vip_lease` (the environment's, else the top level's), else from the servers'
/// hostvar [`VAR_KUBE_VIP_LEASE`] when the repo defines it (a server without it uses
/// kube-vip's default). Servers that disagree, or a value that cannot be rendered, is an
/// error naming the hosts: watching the wrong Lease would report a healthy VIP as
/// unelected.
pub fn watch_settings(repo: &Repo, env: &str) -> Result<WatchSettings, ClusterError> {
    let e = environment(repo, env)?;
    let mut settings = WatchSettings::default();
    // hk-console.yaml `names:` wins (checked as a Lease name when the file was read).
    let lease = match e.names.get(NameKey::KubeVipLease) {
        Some(name) => Some(name.to_string()),
        None => lease_from_hostvars(repo, e)?,
    };
    if let Some(name) = lease {
        settings.lease_name = name;
    }
    // hk-console.yaml `cni:`: the repo's CNI names over Cilium's.
    let cni = &repo.config.cni;
    let set = |field: &mut String, v: &Option<String>| {
        if let Some(v) = v.as_ref().map(|v| v.trim()).filter(|v| !v.is_empty()) {
            *field = v.to_string();
        }
    };
    set(&mut settings.namespace, &cni.namespace);
    set(&mut settings.agent_selector, &cni.selector);
    set(&mut settings.agent_container, &cni.container);
    set(&mut settings.daemonset, &cni.daemonset);
    Ok(settings)
}

/// The Lease the servers of `e` agree on by [`VAR_KUBE_VIP_LEASE`] (`None`: no server
/// defines it), or the error naming the servers that disagree or cannot render it.
fn lease_from_hostvars(
    repo: &Repo,
    e: &hk_engine::repo::env::Environment,
) -> Result<Option<String>, ClusterError> {
    let env = &e.name;
    let mut by_value: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for h in &e.servers {
        let name = match repo.resolve_var(&h.name, VAR_KUBE_VIP_LEASE) {
            None => DEFAULT_KUBE_VIP_LEASE.to_string(),
            Some(r) => match (&r, r.value()) {
                (_, Some(serde_json::Value::String(s))) if !s.trim().is_empty() => {
                    s.trim().to_string()
                }
                (hk_engine::repo::resolve::Resolved::Unrenderable { reason }, _) => {
                    return Err(ClusterError::Topology(format!(
                        "environment `{env}`: `{VAR_KUBE_VIP_LEASE}` cannot be rendered for {}: {reason}",
                        h.name
                    )))
                }
                (_, v) => {
                    return Err(ClusterError::Topology(format!(
                        "environment `{env}`: `{VAR_KUBE_VIP_LEASE}` of {} is {}, expected a Lease name",
                        h.name,
                        v.map(|v| v.to_string()).unwrap_or_default()
                    )))
                }
            },
        };
        by_value.entry(name).or_default().push(h.name.clone());
    }
    if by_value.len() > 1 {
        return Err(ClusterError::Topology(format!(
            "environment `{env}`: servers disagree on `{VAR_KUBE_VIP_LEASE}` (undefined means \
             kube-vip's default `{DEFAULT_KUBE_VIP_LEASE}`; hk-console.yaml `names.kube_vip_lease` \
             would settle it): {}",
            hk_engine::repo::env::who_says_what(&by_value)
        )));
    }
    Ok(by_value.into_keys().next())
}

#[cfg(test)]
mod watch_settings_tests {
    use super::*;

    /// A one-environment repo whose servers s1, s2 have these extra vars.
    fn repo(s1: &str, s2: &str) -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().expect("temp dir");
        let inv = dir.path().join("infra/ansible/inventory");
        std::fs::create_dir_all(inv.join("host_vars")).expect("mkdir");
        std::fs::write(
            dir.path().join("hk-console.yaml"),
            "environments:\n  lab:\n    servers: lab\n",
        )
        .expect("config");
        std::fs::write(
            inv.join("hosts.ini"),
            "[lab]\ns1 ansible_host=127.0.10.1\ns2 ansible_host=127.0.10.2\n",
        )
        .expect("hosts");
        std::fs::write(inv.join("host_vars/s1.yml"), s1).expect("s1");
        std::fs::write(inv.join("host_vars/s2.yml"), s2).expect("s2");
        let repo = Repo::load(dir.path()).expect("load repo");
        (dir, repo)
    }

    #[test]
    fn lease_name_default_override_and_disagreement() {
        let (_d, r) = repo("---\n", "---\n");
        assert_eq!(
            watch_settings(&r, "lab").expect("settings").lease_name,
            DEFAULT_KUBE_VIP_LEASE
        );
        let both = "kube_vip_lease_name: my-lock\n";
        let (_d, r) = repo(both, both);
        assert_eq!(
            watch_settings(&r, "lab").expect("settings").lease_name,
            "my-lock"
        );
        // One server on the default, one renamed: they would not elect on one Lease.
        let (_d, r) = repo(both, "---\n");
        let e = watch_settings(&r, "lab")
            .expect_err("disagreement")
            .to_string();
        assert!(
            e.contains("s1 say `my-lock`") && e.contains("s2 say `plndr-cp-lock`"),
            "{e}"
        );
        let (_d, r) = repo("kube_vip_lease_name: \"{{ nope }}\"\n", "---\n");
        let e = watch_settings(&r, "lab")
            .expect_err("unrenderable")
            .to_string();
        assert!(e.contains("cannot be rendered for s1"), "{e}");
        assert!(watch_settings(&r, "prod").is_err());
    }

    #[test]
    fn hk_console_yaml_names_the_lease_over_the_hostvar_and_the_default() {
        // The servers disagree by hostvar; the config's name settles which Lease is watched.
        let (d, _) = repo("kube_vip_lease_name: my-lock\n", "---\n");
        let write = |config: &str| {
            std::fs::write(d.path().join("hk-console.yaml"), config).expect("config");
            Repo::load(d.path()).expect("load repo")
        };
        let r = write(
            "names:\n  kube_vip_lease: my-cp-lock\nenvironments:\n  lab:\n    servers: lab\n",
        );
        assert_eq!(
            watch_settings(&r, "lab").expect("settings").lease_name,
            "my-cp-lock"
        );
        // The environment's own over the top level's.
        let r = write("names:\n  kube_vip_lease: my-cp-lock\nenvironments:\n  lab:\n    servers: lab\n    names: {kube_vip_lease: lab-cp-lock}\n");
        assert_eq!(
            watch_settings(&r, "lab").expect("settings").lease_name,
            "lab-cp-lock"
        );
        // Unset in the config: the hostvars decide again, and their disagreement says how to
        // settle it.
        let r = write("environments:\n  lab:\n    servers: lab\n");
        let e = watch_settings(&r, "lab").expect_err("disagree").to_string();
        assert!(e.contains("hk-console.yaml `names.kube_vip_lease`"), "{e}");
    }

    #[test]
    fn the_repos_cni_names_replace_ciliums() {
        let (d, _) = repo("---\n", "---\n");
        std::fs::write(
            d.path().join("hk-console.yaml"),
            "cni:\n  namespace: cni-system\n  selector: app=flannel\n  container: kube-flannel\n  daemonset: kube-flannel-ds\nenvironments:\n  lab:\n    servers: lab\n",
        )
        .expect("config");
        let r = Repo::load(d.path()).expect("load repo");
        let s = watch_settings(&r, "lab").expect("settings");
        assert_eq!(
            (
                s.namespace.as_str(),
                s.agent_selector.as_str(),
                s.agent_container.as_str(),
                s.daemonset.as_str()
            ),
            (
                "cni-system",
                "app=flannel",
                "kube-flannel",
                "kube-flannel-ds"
            )
        );
        // Unset: Cilium's names.
        let (_d2, r) = repo("---\n", "---\n");
        let s = watch_settings(&r, "lab").expect("settings");
        assert_eq!(
            (s.namespace.as_str(), s.daemonset.as_str()),
            ("kube-system", "cilium")
        );
    }
}
