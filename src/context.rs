//! What the commands and the console share: a loaded repo, the runbook set, and planning
//! one runbook for one environment.
//!
//! Owns: the glue between the model (`repo`) and the pure engine (`runbook`): reading a
//! `--runbooks` directory, the planner's [`Topology`] over the real inventory, and turning
//! an [`Environment`] into a [`PlanEnv`]. An environment whose facts are unknown cannot be
//! planned for: the error says which fact and why.
//! Must not: run anything.

use std::path::{Path, PathBuf};

use crate::repo::env::Environment;
use crate::repo::Repo;
use crate::runbook::embedded::{self, RunbookSet};
use crate::runbook::plan::{self, Plan, PlanEnv, Topology};
use crate::runbook::validate::Diagnostic;

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
        if path.is_file() {
            let text =
                std::fs::read_to_string(&path).map_err(|source| ContextError::ReadRunbooks {
                    path: path.clone(),
                    source,
                })?;
            files.push((path.display().to_string(), text));
        }
    }
    Ok(embedded::runbook_files(files))
}

/// The built-in runbooks, plus `--runbooks DIR` adding or overriding by id.
pub fn load_runbooks(dir: Option<&Path>) -> Result<RunbookSet, ContextError> {
    let overrides = match dir {
        Some(d) => read_runbook_dir(d)?,
        None => Vec::new(),
    };
    embedded::load(&overrides).map_err(|diagnostics| ContextError::InvalidRunbooks { diagnostics })
}

impl Topology for Repo {
    fn hosts_in(&self, group: &str) -> Option<Vec<String>> {
        self.inventory.hosts_in(group)
    }

    fn is_member(&self, host: &str, group: &str) -> bool {
        self.inventory.is_member(host, group)
    }

    fn host_var(&self, host: &str, var: &str) -> Option<serde_json::Value> {
        self.resolve_var(host, var)?.value().cloned()
    }
}

fn known_fact<'a>(
    env: &'a Environment,
    fact: &'a crate::repo::env::Fact,
    what: &'static str,
) -> Result<&'a str, ContextError> {
    fact.get().ok_or_else(|| {
        let related: Vec<String> = env
            .problems
            .iter()
            .map(ToString::to_string)
            .filter(|p| p.contains(fact.var) || p.contains("servers group"))
            .collect();
        ContextError::UnknownFact {
            env: env.name.clone(),
            what,
            why: if related.is_empty() {
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
        why: format!(": `k3s_api_port` is `{port_text}`, not a port number"),
    })?;
    // ansible-playbook runs in the ansible dir, so the inventory is given relative to it.
    let inventory = repo
        .inventory_path
        .strip_prefix(&repo.ansible_dir)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| repo.inventory_path.clone());
    Ok(PlanEnv {
        name: env.name.clone(),
        servers: env.servers_group.clone(),
        vpn_gateways: env.vpn_gateways_group.clone(),
        secondary_group: secondary_group(repo, env, &primary),
        primary_group: primary,
        vip,
        api_port,
        operator_present: env.operator_present,
        inventory: inventory.display().to_string(),
        ansible_dir: repo.ansible_dir.display().to_string(),
        kubeconfig: env
            .kubeconfig_name
            .get()
            .map(|k| repo.root.join(".cache").join(k).display().to_string()),
        host: host.map(str::to_string),
    })
}

/// Plan one runbook for one environment.
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
    let env = plan_env(repo, env_name, host)?;
    Ok(plan::plan(runbook, &env, repo)?)
}
