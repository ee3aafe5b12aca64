//! `inventory` and `envs`: the Ansible inventory as Ansible reads it, and each environment
//! as the inventory defines it.

use std::path::Path;

use super::{load_repo, print_json, repo_root, Cli, CmdResult, Failure, Status};
use crate::repo::config::Config;
use crate::repo::env::Environment;
use crate::repo::inventory::Inventory;
use crate::repo::listing;
use crate::repo::resolve::{Resolved, Resolver};
use crate::repo::Repo;

pub(super) fn inventory_cmd(
    cli: &Cli,
    file: Option<&Path>,
    list: bool,
    host: Option<&str>,
    resolved: bool,
) -> CmdResult {
    if !list && host.is_none() {
        return Err(Failure::msg("say what to print: --list, or --host HOST"));
    }
    let inventory = match file {
        Some(f) => Inventory::load(f)?,
        None => {
            let root = repo_root(cli.repo.as_deref())?;
            let config = Config::load(&root)?;
            Inventory::load(&root.join(&config.inventory))?
        }
    };
    for f in inventory.vaulted_files() {
        errln!(
            "note: {}: vaulted, not read (its variables are not shown)",
            f.display()
        );
    }
    let mut unrenderable: Vec<String> = Vec::new();
    let mut output = match host {
        Some(h) => {
            let vars = inventory.host_vars(h).ok_or_else(|| {
                Failure::msg(format!("no host `{h}` in {}", inventory.path().display()))
            })?;
            serde_json::Value::Object(
                vars.iter()
                    .map(|(k, v)| (k.clone(), crate::repo::vars::listing_value(v)))
                    .collect(),
            )
        }
        None => listing::list_json(&inventory),
    };
    if resolved {
        let resolver = Resolver::new();
        let groups = std::sync::Arc::new(crate::repo::all_groups(&inventory));
        let mut render_host = |name: &str, vars: &mut serde_json::Value| {
            let Some(raw) = crate::repo::raw_vars(&inventory, name) else {
                return;
            };
            let mut ctx = crate::repo::host_context_with(&inventory, groups.clone(), name);
            ctx.inventory_hostname = name.to_string();
            for (var, r) in resolver.resolve_all(&ctx, &raw) {
                match r {
                    Resolved::Value(v) => {
                        if let Some(slot) = vars.get_mut(&var) {
                            *slot = v;
                        }
                    }
                    Resolved::Unrenderable { reason } => {
                        unrenderable.push(format!("{name}: {var}: cannot render: {reason}"))
                    }
                }
            }
        };
        match host {
            Some(h) => render_host(h, &mut output),
            None => {
                if let Some(hostvars) = output
                    .get_mut("_meta")
                    .and_then(|m| m.get_mut("hostvars"))
                    .and_then(|h| h.as_object_mut())
                {
                    for (name, vars) in hostvars.iter_mut() {
                        render_host(name, vars);
                    }
                }
            }
        }
    }
    print_json(&output)?;
    for u in &unrenderable {
        errln!("warning: {u} (left unrendered)");
    }
    Ok(if unrenderable.is_empty() {
        Status::Clean
    } else {
        Status::Violations
    })
}

pub(super) fn envs_cmd(cli: &Cli, json: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    if json {
        print_json(&repo.environments)?;
    } else {
        for env in &repo.environments {
            print_env(&repo, env);
        }
    }
    Ok(
        if repo.environments.iter().any(|e| !e.problems.is_empty()) {
            Status::Violations
        } else {
            Status::Clean
        },
    )
}

fn fact(v: Option<&str>) -> &str {
    v.unwrap_or("(unknown)")
}

pub(super) fn print_env(repo: &Repo, env: &Environment) {
    let hosts: Vec<String> = env
        .servers
        .iter()
        .map(|h| format!("{} {}", h.name, h.address))
        .collect();
    outln!("{}", env.name);
    outln!(
        "  servers      {} ({}): {}",
        env.servers_group,
        env.servers.len(),
        hosts.join(", ")
    );
    outln!(
        "  VIP          {}   endpoint {}   founder {}   port {}",
        fact(env.vip.get()),
        fact(env.endpoint.get()),
        fact(env.founder.get()),
        fact(env.api_port.get())
    );
    outln!(
        "  primary      {}   kubeconfig {}",
        fact(env.primary_group.get()),
        env.kubeconfig_name
            .get()
            .map(|k| repo.root.join(".cache").join(k).display().to_string())
            .unwrap_or_else(|| "(unknown)".into())
    );
    if let Some(group) = &env.vpn_gateways_group {
        let gws: Vec<&str> = env.vpn_gateways.iter().map(|h| h.name.as_str()).collect();
        outln!(
            "  vpn gateways {group}: {}",
            if gws.is_empty() {
                "(none)".to_string()
            } else {
                gws.join(", ")
            }
        );
    }
    outln!("  flux overlay {}", env.flux_overlay.display());
    if env.operator_present {
        outln!("  operator     must be present before anything mutates");
    }
    if env.protected {
        outln!("  protected    every mutating step is previewed and approved (gate policy)");
    }
    for p in &env.problems {
        outln!("  problem      {p}");
    }
}
