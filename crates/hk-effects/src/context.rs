//! What the commands and the console share: a loaded repo, the runbook set, and planning
//! one runbook for one environment.
//!
//! Owns: the glue between the model (`repo`) and the pure engine (`runbook`): reading a
//! `--runbooks` directory, the planner's [`Topology`] over the real inventory, and turning
//! an [`Environment`] into a [`PlanEnv`]. An environment whose facts are unknown cannot be
//! planned for: the error says which fact and why.
//! Must not: run anything.

use std::path::{Path, PathBuf};

use hk_engine::repo::config::NameKey;
use hk_engine::repo::env::Environment;
use hk_engine::repo::Repo;
use hk_engine::runbook::embedded::{self, RunbookSet};
use hk_engine::runbook::plan::{self, Plan, PlanEnv, PlanNames};
use hk_engine::runbook::validate::Diagnostic;

#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    #[error("{path}: cannot read runbooks: {source}")]
    ReadRunbooks {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    InvalidRunbooks { diagnostics: Vec<Diagnostic> },
    #[error("no runbook `{id}` (known: {known})")]
    UnknownRunbook { id: String, known: String },
    #[error("no environment `{name}` in hk-console.yaml (known: {known})")]
    UnknownEnv { name: String, known: String },
    #[error("cannot plan for `{env}`: its {what} is unknown{why}\n  hint: run `hk-console envs` to see what the inventory says")]
    UnknownFact {
        env: String,
        what: &'static str,
        why: String,
    },
    #[error("{0}")]
    Plan(#[from] plan::PlanError),
    #[error("no host `{host}` in {}", inventory.display())]
    UnknownHost { host: String, inventory: PathBuf },
    #[error("host {host}: {message}")]
    Connection { host: String, message: String },
}

/// Read every runbook file (`*.yaml`, `*.yml`) in `dir` as (file path, text) pairs.
pub fn read_runbook_dir(dir: &Path) -> Result<Vec<(String, String)>, ContextError> {
    let err = |source| ContextError::ReadRunbooks {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let path = entry.map_err(err)?.path();
        // Every runbook-named entry that is not a directory is read, so a FIFO or device
        // named `x.yaml` is refused by the bounded reader, naming it, never skipped.
        let runbook_named = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if runbook_named && !path.is_dir() {
            let text = hk_engine::repo::read::read_to_string(&path).map_err(|source| {
                ContextError::ReadRunbooks {
                    path: path.clone(),
                    source,
                }
            })?;
            files.push((path.display().to_string(), text));
        }
    }
    Ok(embedded::runbook_files(files))
}

/// The built-in runbooks, plus `--runbooks DIR` adding or overriding by id.
pub fn load_runbooks(dir: Option<&Path>) -> Result<RunbookSet, ContextError> {
    load_runbooks_of(None, dir)
}

/// The directory of the operator's own runbooks in an infra repo: `ROOT/runbooks`, when
/// anything is there (a file of that name is read as a directory and refused, loudly).
pub fn repo_runbooks_dir(root: &Path) -> Option<std::path::PathBuf> {
    let d = root.join(REPO_RUNBOOKS_DIR);
    d.symlink_metadata().is_ok().then_some(d)
}

/// The infra repo's own runbook directory, relative to its root.
pub const REPO_RUNBOOKS_DIR: &str = "runbooks";

/// The runbooks a command uses, lowest layer first: the built-in ones, the infra repo's
/// `runbooks/` (when `repo_root` is given and has one), then `--runbooks DIR`; a higher
/// layer's id replaces a lower one's. Every file of every layer is validated alike.
pub fn load_runbooks_of(
    repo_root: Option<&Path>,
    dir: Option<&Path>,
) -> Result<RunbookSet, ContextError> {
    let mut layers = Vec::new();
    if let Some(d) = repo_root.and_then(repo_runbooks_dir) {
        layers.push((embedded::Layer::Repo, read_runbook_dir(&d)?));
    }
    if let Some(d) = dir {
        layers.push((embedded::Layer::Flag, read_runbook_dir(d)?));
    }
    embedded::load_layers(&layers)
        .map_err(|diagnostics| ContextError::InvalidRunbooks { diagnostics })
}

/// Why `loaded` is not offered on `repo` (listed, counted, checked for blockers), or None
/// where it is: a runbook written for none of the repo's environments; or a built-in one
/// whose playbooks the repo does not have (the built-ins run the sample's playbooks: on a
/// repo that has none of them, and happens to call an environment `prod`, each only
/// stopped on a missing file). The one decision `runbooks list`, `check`, the overview and
/// the console's Home share; `plan` of a runbook named on purpose still plans it.
pub fn not_offered(repo: &Repo, loaded: &embedded::Loaded) -> Option<NotOffered> {
    let rb = &loaded.runbook;
    let names = repo.environment_names();
    if !rb.environments.iter().any(|e| names.contains(&e.as_str())) {
        return Some(NotOffered::OtherEnvironments(format!(
            "written for {}; this repo's environments: {}",
            rb.environments.join(", "),
            names.join(", ")
        )));
    }
    if loaded.origin != embedded::Origin::Embedded {
        return None;
    }
    let dir = match repo.rel(&repo.ansible_dir) {
        d if d.is_empty() => "its top directory".to_string(),
        d => d,
    };
    let missing: Vec<String> = rb
        .playbooks()
        .into_iter()
        .filter(|p| !repo.ansible_dir.join(p).is_file())
        .collect();
    if !missing.is_empty() {
        return Some(NotOffered::Lacks(format!(
            "built in, and this repo has no {} in {dir}",
            missing.join(", ")
        )));
    }
    // What else a built-in one needs of an environment: the group its target names, and
    // the Flux tree its reconciles act on. Offered where one of its environments has both.
    let flux: Vec<&str> = rb
        .steps
        .iter()
        .filter_map(|s| match &s.spec {
            hk_engine::runbook::schema::StepSpec::FluxReconcile { object, .. } => {
                Some(object.as_str())
            }
            _ => None,
        })
        .collect();
    let lacks = |e: &Environment| -> Option<String> {
        if let Some(t) = &rb.target {
            let none = match t.group.as_str() {
                "vpn_gateways" => e.vpn_gateways_group.is_none(),
                "agents" => e.agents_group.is_none(),
                _ => false,
            };
            if none {
                return Some(format!(
                    "built in, for the {} group, and {} has none",
                    t.group, e.name
                ));
            }
        }
        if !flux.is_empty() && !repo.root.join(&e.flux_overlay).is_dir() {
            return Some(format!(
                "built in, it reconciles {} through Flux, and {} has no Flux overlay ({} is not in this repo)",
                flux.join(", "),
                e.name,
                e.flux_overlay.display()
            ));
        }
        None
    };
    let why: Vec<String> = rb
        .environments
        .iter()
        .filter_map(|n| repo.environment(n))
        .map(lacks)
        .collect::<Option<Vec<String>>>()?;
    why.into_iter().next().map(NotOffered::Lacks)
}

/// Why a runbook is not offered on a repo ([`not_offered`]); `Display` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOffered {
    /// Written for none of the repo's environments.
    OtherEnvironments(String),
    /// Built in, and what it runs is not in the repo for any environment it is for.
    Lacks(String),
}

impl std::fmt::Display for NotOffered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotOffered::OtherEnvironments(why) | NotOffered::Lacks(why) => f.write_str(why),
        }
    }
}

fn known_fact<'a>(
    env: &'a Environment,
    fact: &'a hk_engine::repo::env::Fact,
    what: &'static str,
) -> Result<&'a str, ContextError> {
    fact.get().ok_or_else(|| {
        let related: Vec<String> = env
            .problems
            .iter()
            .map(ToString::to_string)
            .filter(|p| p.contains(fact.var.as_str()) || p.contains("servers group"))
            .collect();
        ContextError::UnknownFact {
            env: env.name.clone(),
            what,
            why: if env.no_counterpart.contains(&fact.var) {
                format!(
                    ": this repo neither defines nor uses `{}` (the seed's name); map its own variable under `facts:` in hk-console.yaml",
                    fact.var
                )
            } else if related.is_empty() {
                format!(" (`{}` has no value)", fact.var)
            } else {
                format!(": {}", related.join("; "))
            },
        }
    })
}

/// The secondary group: the one child of the servers group that is not the primary.
fn secondary_group(repo: &Repo, env: &Environment, primary: &str) -> Option<String> {
    let children = repo.inventory.children_of(&env.servers_group)?;
    let mut others = children.into_iter().filter(|c| c != primary);
    let first = others.next()?;
    others.next().is_none().then_some(first)
}

/// An environment as the planner needs it.
pub fn plan_env(repo: &Repo, env_name: &str, host: Option<&str>) -> Result<PlanEnv, ContextError> {
    let env = repo
        .environment(env_name)
        .ok_or_else(|| ContextError::UnknownEnv {
            name: env_name.to_string(),
            known: repo.environment_names().join(", "),
        })?;
    let primary = known_fact(env, &env.primary_group, "primary group")?.to_string();
    let vip = known_fact(env, &env.vip, "VIP")?.to_string();
    let port_text = known_fact(env, &env.api_port, "API port")?;
    let api_port: u16 = port_text.parse().map_err(|_| ContextError::UnknownFact {
        env: env.name.clone(),
        what: "API port",
        why: format!(
            ": `{}` is `{port_text}`, not a port number",
            env.api_port.var
        ),
    })?;
    // ansible-playbook runs in the ansible dir, so each source is given relative to it.
    let inventories = repo
        .inventory_sources
        .iter()
        .map(|p| {
            p.strip_prefix(&repo.ansible_dir)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string()
        })
        .collect();
    Ok(PlanEnv {
        name: env.name.clone(),
        servers: env.servers_group.clone(),
        vpn_gateways: env.vpn_gateways_group.clone(),
        agents: env.agents_group.clone(),
        secondary_group: secondary_group(repo, env, &primary),
        primary_group: primary,
        vip,
        api_port,
        operator_present: env.operator_present,
        protected: env.protected,
        inventories,
        ansible_dir: repo.ansible_dir.display().to_string(),
        kubeconfig: env
            .kubeconfig_name
            .get()
            .map(|k| repo.root.join(".cache").join(k).display().to_string()),
        host: host.map(str::to_string),
        names: plan_names(repo, env),
    })
}

/// The names of `env`'s live objects as the panes resolve them: the Lease from
/// [`crate::cluster::watch_settings`], the VPN names from each gateway's
/// [`crate::gateway::gateway_spec`] (one value only when every gateway agrees). A name
/// that cannot be resolved stays undefined with its reason, so a runbook using it fails to
/// plan saying why.
fn plan_names(repo: &Repo, env: &hk_engine::repo::env::Environment) -> PlanNames {
    use hk_engine::repo::config as c;
    let mut unresolved = std::collections::BTreeMap::new();
    let lease = match crate::cluster::watch_settings(repo, &env.name) {
        Ok(s) => Some(s.lease_name),
        Err(e) => {
            unresolved.insert("kube_vip_lease".to_string(), e.to_string());
            None
        }
    };
    let specs: Vec<(String, Result<crate::gateway::GatewaySpec, String>)> = env
        .vpn_gateways
        .iter()
        .map(|g| {
            let spec =
                crate::gateway::gateway_spec(repo, &env.name, &g.name).map_err(|e| e.to_string());
            (g.name.clone(), spec)
        })
        .collect();
    let mut agreed = |key: &str,
                      pick: fn(&crate::gateway::GatewaySpec) -> &String,
                      name: NameKey,
                      default: &str|
     -> Option<String> {
        // No gateways: what hk-console.yaml (or the default) names still applies.
        if specs.is_empty() {
            return Some(env.names.get(name).unwrap_or(default).to_string());
        }
        let mut by_value: std::collections::BTreeMap<&String, Vec<&str>> = Default::default();
        for (host, spec) in &specs {
            match spec {
                Ok(s) => by_value.entry(pick(s)).or_default().push(host),
                Err(why) => {
                    unresolved.insert(key.to_string(), why.clone());
                    return None;
                }
            }
        }
        if by_value.len() > 1 {
            unresolved.insert(
                key.to_string(),
                format!(
                    "the gateways disagree: {}",
                    hk_engine::repo::env::who_says_what(&by_value)
                ),
            );
            return None;
        }
        by_value.into_keys().next().cloned()
    };
    let vpn_unit = agreed(
        "vpn_unit",
        |s| &s.service,
        NameKey::VpnUnit,
        c::DEFAULT_VPN_UNIT,
    );
    let vpn_interface = agreed(
        "vpn_interface",
        |s| &s.interface,
        NameKey::VpnInterface,
        c::DEFAULT_VPN_INTERFACE,
    );
    let vpn_exit_ip_url = agreed(
        "vpn_exit_ip_url",
        |s| &s.exit_ip_url,
        NameKey::VpnExitIpUrl,
        c::DEFAULT_VPN_EXIT_IP_URL,
    );
    PlanNames {
        kube_vip_lease: lease,
        vpn_unit,
        vpn_interface,
        vpn_exit_ip_url,
        unresolved,
    }
}

/// Plan one runbook, by its id, for one environment.
pub fn plan_runbook(
    repo: &Repo,
    runbooks: &RunbookSet,
    runbook_id: &str,
    env_name: &str,
    host: Option<&str>,
) -> Result<Plan, ContextError> {
    let runbook = runbooks
        .get(runbook_id)
        .ok_or_else(|| ContextError::UnknownRunbook {
            id: runbook_id.to_string(),
            known: runbooks.ids().collect::<Vec<_>>().join(", "),
        })?;
    plan_for(repo, runbook, env_name, host)
}

/// Plan `runbook` for one environment: the environment's facts, then the planner. The one
/// place a plan is made (the commands through [`plan_runbook`], the session through its
/// `RepoPlans`).
pub fn plan_for(
    repo: &Repo,
    runbook: &hk_engine::runbook::schema::Runbook,
    env_name: &str,
    host: Option<&str>,
) -> Result<Plan, ContextError> {
    let env = plan_env(repo, env_name, host)?;
    Ok(plan::plan(runbook, &env, repo)?)
}

/// How to reach `host` over SSH, as Ansible's ssh connection would: its rendered hostvars
/// (`ansible_host`, `ansible_port`, `ansible_user`, `ansible_ssh_private_key_file`), then
/// `~/.ssh/config` where the inventory is silent. A connection variable that cannot be
/// rendered is an error naming it, never a silent fallback to another address.
pub fn connect_settings(
    repo: &Repo,
    host: &str,
) -> Result<crate::exec::settings::ConnectSettings, ContextError> {
    let defaults = crate::exec::settings::SshDefaults::from_env();
    let ssh_config = load_ssh_config(&defaults).map_err(|e| ContextError::Connection {
        host: host.to_string(),
        message: e.to_string(),
    })?;
    connect_settings_with(repo, host, &ssh_config, &defaults)
}

/// `~/.ssh/config` (an absent file is an empty config).
pub fn load_ssh_config(
    defaults: &crate::exec::settings::SshDefaults,
) -> Result<crate::exec::settings::SshConfig, crate::exec::settings::SettingsError> {
    crate::exec::settings::SshConfig::load(&defaults.home.join(".ssh").join("config"))
}

/// [`connect_settings`] with `~/.ssh/config` already read: for settling every host of an
/// inventory without reading the file once per host.
pub fn connect_settings_with(
    repo: &Repo,
    host: &str,
    ssh_config: &crate::exec::settings::SshConfig,
    defaults: &crate::exec::settings::SshDefaults,
) -> Result<crate::exec::settings::ConnectSettings, ContextError> {
    let resolved = repo
        .resolve_all(host)
        .ok_or_else(|| ContextError::UnknownHost {
            host: host.to_string(),
            inventory: repo.inventory_path.clone(),
        })?;
    let mut vars = std::collections::BTreeMap::new();
    for (name, value) in resolved {
        match value {
            hk_engine::repo::resolve::Resolved::Value(v) => {
                vars.insert(name, v);
            }
            hk_engine::repo::resolve::Resolved::Unrenderable { reason }
                if name.starts_with("ansible_") =>
            {
                return Err(ContextError::Connection {
                    host: host.to_string(),
                    message: format!("`{name}` cannot be rendered: {reason}"),
                });
            }
            hk_engine::repo::resolve::Resolved::Unrenderable { .. } => {}
        }
    }
    crate::exec::settings::ConnectSettings::resolve(host, &vars, ssh_config, defaults).map_err(
        |e| ContextError::Connection {
            host: host.to_string(),
            message: e.to_string(),
        },
    )
}

/// The known_hosts files the SSH executor trusts: `~/.ssh/known_hosts`, then the one
/// hk-console.yaml names (relative to the repo root).
pub fn ssh_options(repo: &Repo) -> crate::exec::ssh::SshOptions {
    crate::exec::ssh::SshOptions::from_env(
        repo.config.known_hosts.as_ref().map(|p| repo.root.join(p)),
    )
}
