//! The Kubernetes side: which cluster an environment is, and a client to it.
//!
//! Owns: choosing the kubeconfig and context of an environment ([`kube_target`]): the
//! `cluster_kubeconfig_name` its servers agree on, under the repo's `.cache/`, unless the
//! operator names another with `--kubeconfig` or `KUBECONFIG` (and `--context`), as kubectl
//! users expect; building a [`kube::Client`] from it ([`client`]); the environment's
//! [`EnvTopology`] for the live rules ([`env_topology`]).
//! Must not: judge what it reads (that is `checks::live`), know the terminal, or invent a
//! cluster: a missing kubeconfig is an error naming the file and where its name came from.

pub mod flux;
pub mod wait;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::checks::live::{EnvTopology, Server};
use crate::repo::Repo;

/// The operator's overrides, from `--kubeconfig`/`KUBECONFIG` and `--context`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeOverrides {
    /// `--kubeconfig FILE` (wins over `KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// `KUBECONFIG` as read from the environment: one or more files, `:`-separated.
    pub kubeconfig_env: Option<String>,
    /// `--context NAME`.
    pub context: Option<String>,
}

impl KubeOverrides {
    /// `--kubeconfig`/`--context` as given, and `KUBECONFIG` from the process environment.
    pub fn from_args(kubeconfig: Option<PathBuf>, context: Option<String>) -> KubeOverrides {
        KubeOverrides {
            kubeconfig,
            kubeconfig_env: std::env::var("KUBECONFIG").ok().filter(|s| !s.is_empty()),
            context,
        }
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
    #[error("environment `{env}`: its servers do not agree on one `cluster_kubeconfig_name`, so hk-console cannot tell which cluster it is; give --kubeconfig")]
    NoKubeconfigName { env: String },
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

/// The kubeconfig and context for `env`. `--kubeconfig`/`KUBECONFIG` replace the
/// inventory's file; `--context` picks a context in whichever file is used.
pub fn kube_target(repo: &Repo, env: &str, ov: &KubeOverrides) -> Result<KubeTarget, ClusterError> {
    let environment = repo
        .environment(env)
        .ok_or_else(|| ClusterError::UnknownEnv {
            env: env.to_string(),
            known: repo.environment_names().join(", "),
        })?;
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

/// The environment as the live rules need it: VIP, API port and servers with addresses.
/// Unknown facts are an error naming what is missing (a rule judged against a guessed VIP
/// would be worse than no rule).
pub fn env_topology(repo: &Repo, env: &str) -> Result<EnvTopology, ClusterError> {
    let e = repo
        .environment(env)
        .ok_or_else(|| ClusterError::UnknownEnv {
            env: env.to_string(),
            known: repo.environment_names().join(", "),
        })?;
    let vip_text = e.vip.get().ok_or_else(|| {
        ClusterError::Topology(format!(
            "environment `{env}`: its servers do not agree on `{}`; the live panes need the VIP",
            e.vip.var
        ))
    })?;
    let vip: IpAddr = vip_text.parse().map_err(|_| {
        ClusterError::Topology(format!(
            "environment `{env}`: `{}` is `{vip_text}`, expected an IP address",
            e.vip.var
        ))
    })?;
    let port_text = e.api_port.get().ok_or_else(|| {
        ClusterError::Topology(format!(
            "environment `{env}`: its servers do not agree on `{}`; the live panes need the API port",
            e.api_port.var
        ))
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
    Ok(EnvTopology {
        env: env.to_string(),
        vip,
        api_port,
        servers,
    })
}
