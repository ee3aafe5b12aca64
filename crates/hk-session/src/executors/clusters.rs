//! Which cluster a kube-backed step reaches: every environment's kubeconfig, topology and
//! watch settings, read from the repo once when the executors are built.
//!
//! Owns: [`Clusters`] (per environment: the kubeconfig or why there is none, naming the
//! file and where its name came from), the step -> environment attribution a kube
//! executor uses to refuse a step that belongs to another cluster, and connecting.
//! Must not: read the network before a step asks (building the console stays offline).

use std::collections::BTreeMap;

use hk_effects::cluster::{KubeOverrides, KubeTarget, WatchSettings};
use hk_engine::checks::live::EnvTopology;
use hk_engine::repo::Repo;
use hk_engine::runbook::plan::PlannedStep;

/// Why a kube-backed step cannot reach its cluster (each message is the step's failure as
/// the operator reads it).
#[derive(Debug, thiserror::Error)]
pub enum NoCluster {
    #[error("step {n} ({kind}): {by} belongs to several environments ({envs})")]
    Ambiguous {
        n: usize,
        kind: &'static str,
        by: String,
        envs: String,
    },
    #[error(
        "step {n} ({kind}) is bound to no host and names no kubeconfig, and the repo has \
         {count} environments ({envs}): hk-console cannot tell which cluster it is for"
    )]
    Unattributed {
        n: usize,
        kind: &'static str,
        count: usize,
        envs: String,
    },
    #[error("no environment `{0}` in hk-console.yaml")]
    NoEnvironment(String),
    /// The environment's kubeconfig, topology or watch settings could not be read when
    /// the executors were built: the reason, as it was said then.
    #[error("{0}")]
    Unreadable(String),
    #[error(transparent)]
    Client(#[from] hk_effects::cluster::ClusterError),
}

/// One environment's cluster as the kube executors reach it.
#[derive(Debug, Clone)]
struct EnvCluster {
    /// The kubeconfig, or why there is none (naming the file and where its name came from).
    target: Result<KubeTarget, String>,
    topology: Result<EnvTopology, String>,
    /// What the panes read (the agents' namespace, selector, container; the stuck
    /// threshold): a kube-wait reads the same.
    settings: Result<WatchSettings, String>,
    /// Inventory hosts of the environment (servers, VPN gateways): a step bound to a host
    /// belongs to the environment that has it.
    hosts: Vec<String>,
    /// The kubeconfig path the planner writes into a `flux reconcile` argv for it.
    planned_kubeconfig: Option<String>,
    /// The repo root and the environment's Flux overlay (relative to it): what a reconcile
    /// preview compares the cluster with.
    overlay: (std::path::PathBuf, std::path::PathBuf),
}

/// The clusters of a repo's environments.
#[derive(Debug, Clone)]
pub struct Clusters {
    envs: BTreeMap<String, EnvCluster>,
}

impl Clusters {
    /// Every environment of `repo`: its kubeconfig (`cluster::kube_target` with `ov`) and
    /// topology (`cluster::env_topology`). Nothing is read from the network here.
    pub fn for_repo(repo: &Repo, ov: &KubeOverrides) -> Clusters {
        let envs = repo
            .environments
            .iter()
            .map(|e| {
                let hosts = e
                    .servers
                    .iter()
                    .chain(e.vpn_gateways.iter())
                    .map(|h| h.name.clone())
                    .collect();
                let c = EnvCluster {
                    target: hk_effects::cluster::kube_target(repo, &e.name, ov)
                        .map_err(|x| x.to_string()),
                    topology: hk_effects::cluster::env_topology(repo, &e.name)
                        .map_err(|x| x.to_string()),
                    settings: hk_effects::cluster::watch_settings(repo, &e.name)
                        .map_err(|x| x.to_string()),
                    hosts,
                    planned_kubeconfig: e
                        .kubeconfig_name
                        .get()
                        .map(|k| repo.root.join(".cache").join(k).display().to_string()),
                    overlay: (repo.root.clone(), e.flux_overlay.clone()),
                };
                (e.name.clone(), c)
            })
            .collect();
        Clusters { envs }
    }

    /// Each server's environment VIP and API port (`VIP:PORT`), for the environments whose
    /// topology could be read: what a mutating step on that server probes while it runs,
    /// with where the VIP's Lease is read once the step ends.
    pub fn vip_by_server(
        &self,
    ) -> std::collections::BTreeMap<String, hk_effects::observe::vip_outage::VipTarget> {
        self.envs
            .values()
            .filter_map(|c| c.topology.as_ref().ok().map(|t| (c, t)))
            .flat_map(|(c, t)| {
                let target = hk_effects::observe::vip_outage::VipTarget {
                    addr: std::net::SocketAddr::new(t.vip, t.api_port),
                    lease: match (&c.target, &c.settings) {
                        (Ok(k), Ok(s)) => Ok((k.clone(), s.clone())),
                        (Err(why), _) | (_, Err(why)) => Err(why.clone()),
                    },
                };
                t.servers
                    .iter()
                    .map(move |s| (s.name.clone(), target.clone()))
            })
            .collect()
    }

    /// Whether any environment has a kubeconfig to reach.
    pub fn usable(&self) -> bool {
        self.envs.values().any(|c| c.target.is_ok())
    }

    /// Why no kube executor exists (every environment's reason).
    pub fn why_none(&self) -> String {
        if self.envs.is_empty() {
            return "the repo has no environments, so no cluster to reach".into();
        }
        let whys: Vec<&str> = self
            .envs
            .values()
            .filter_map(|c| c.target.as_ref().err())
            .map(String::as_str)
            .collect();
        format!("no environment has a kubeconfig: {}", whys.join("; "))
    }

    /// One notice per environment whose cluster cannot be reached (when others can).
    pub fn problems(&self) -> Vec<String> {
        if !self.usable() {
            return vec![format!("kube-wait and flux-reconcile: {}", self.why_none())];
        }
        self.envs
            .values()
            .filter_map(|c| c.target.as_ref().err())
            .map(|why| format!("kube-wait and flux-reconcile: {why}"))
            .collect()
    }

    /// Which environment a planned step is for: the one whose kubeconfig its `flux` argv
    /// names, else the one that has its host, else the repo's only environment. The executor
    /// runs a step on the run's environment (it travels with `ExecRequest::Execute`) and
    /// uses this only to refuse a step whose own host or kubeconfig says another one.
    pub fn env_of(&self, step: &PlannedStep) -> Result<String, NoCluster> {
        let one = |found: Vec<&String>, by: &str| -> Option<Result<String, NoCluster>> {
            match found.as_slice() {
                [] => None,
                [env] => Some(Ok((*env).clone())),
                many => Some(Err(NoCluster::Ambiguous {
                    n: step.n,
                    kind: step.kind.as_str(),
                    by: by.to_string(),
                    envs: many
                        .iter()
                        .map(|e| e.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })),
            }
        };
        if let Some(argv) = &step.command {
            if let Some(i) = argv.iter().position(|a| a == "--kubeconfig") {
                if let Some(path) = argv.get(i + 1) {
                    let found = self
                        .envs
                        .iter()
                        .filter(|(_, c)| c.planned_kubeconfig.as_deref() == Some(path.as_str()))
                        .map(|(e, _)| e)
                        .collect();
                    if let Some(r) = one(found, &format!("kubeconfig {path}")) {
                        return r;
                    }
                }
            }
        }
        if let Some(host) = &step.host {
            let found = self
                .envs
                .iter()
                .filter(|(_, c)| c.hosts.iter().any(|h| h == host))
                .map(|(e, _)| e)
                .collect();
            if let Some(r) = one(found, &format!("host {host}")) {
                return r;
            }
        }
        if self.envs.len() == 1 {
            if let Some(env) = self.envs.keys().next() {
                return Ok(env.clone());
            }
        }
        Err(NoCluster::Unattributed {
            n: step.n,
            kind: step.kind.as_str(),
            count: self.envs.len(),
            envs: self.envs.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// What `env`'s Flux overlay renders for the Flux object `kind`/`name` in `namespace`
    /// (substituted as Flux would), for a reconcile's preview: reads the repo's files, so
    /// call it off the async workers. `None`: no such environment.
    pub fn rendered(
        &self,
        env: &str,
        kind: &str,
        name: &str,
        namespace: &str,
    ) -> Option<hk_effects::exec::kube::flux::Rendered> {
        let (root, overlay) = &self.envs.get(env)?.overlay;
        let shown = overlay.display().to_string();
        let applied = if !root.join(overlay).is_dir() {
            Err(format!("there is no directory {shown} in the repo"))
        } else {
            hk_engine::repo::flux::applied_objects(root, overlay).map_err(|e| e.to_string())
        };
        // A Kustomization's preview compares what it applies: the objects under its path.
        let applies = (kind == "Kustomization").then(|| match &applied {
            Err(why) => Err(why.clone()),
            Ok(a) => a
                .by_kustomization
                .iter()
                .find(|(ks, _)| *ks == format!("{namespace}/{name}") || *ks == name)
                .map(|(_, objects)| match objects {
                    Ok(v) => Ok(v.clone()),
                    Err(e) => Err(e.to_string()),
                })
                .unwrap_or_else(|| Err(format!("it renders no Kustomization {namespace}/{name}"))),
        });
        let object = {
            match applied {
                Err(e) => Err(e),
                Ok(applied) => {
                    let mut found = None;
                    let mut unreadable = Vec::new();
                    let named = |o: &serde_json::Value| {
                        o["kind"] == kind
                            && o["metadata"]["name"] == name
                            && o["metadata"]["namespace"]
                                .as_str()
                                .is_none_or(|ns| ns == namespace)
                    };
                    found = found.or_else(|| applied.top.iter().find(|o| named(o)).cloned());
                    for (ks, objects) in &applied.by_kustomization {
                        match objects {
                            Ok(v) => found = found.or_else(|| v.iter().find(|o| named(o)).cloned()),
                            Err(e) => unreadable.push(format!("{ks}: {e}")),
                        }
                    }
                    found.ok_or_else(|| {
                        let mut why = format!("it renders no {kind} {namespace}/{name}");
                        if !unreadable.is_empty() {
                            why.push_str(&format!(
                                " (and could not render: {})",
                                unreadable.join("; ")
                            ));
                        }
                        why
                    })
                }
            }
        };
        Some(hk_effects::exec::kube::flux::Rendered {
            overlay: shown,
            object,
            applies,
        })
    }

    /// A client, the topology and the watch settings for `env`, or why not.
    pub(super) async fn connect(
        &self,
        env: &str,
    ) -> Result<(kube::Client, EnvTopology, WatchSettings), NoCluster> {
        let c = self
            .envs
            .get(env)
            .ok_or_else(|| NoCluster::NoEnvironment(env.to_string()))?;
        let target = c.target.clone().map_err(NoCluster::Unreadable)?;
        let topology = c.topology.clone().map_err(NoCluster::Unreadable)?;
        let settings = c.settings.clone().map_err(NoCluster::Unreadable)?;
        let client = hk_effects::cluster::client(&target).await?;
        Ok((client, topology, settings))
    }
}
