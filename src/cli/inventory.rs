//! `inventory` and `envs`: the Ansible inventory as Ansible reads it, and each environment
//! as the inventory defines it.

use std::path::Path;

use super::{load_repo, print_json, repo_root, Cli, CmdResult, Failure, Status};
use crate::repo::config::Config;
use crate::repo::env::{EnvHost, Environment};
use crate::repo::inventory::Inventory;
use crate::repo::listing;
use crate::repo::resolve::{Resolved, Resolver};
use crate::repo::Repo;

pub(super) fn inventory_cmd(
    cli: &Cli,
    sources: &[std::path::PathBuf],
    list: bool,
    host: Option<&str>,
    resolved: bool,
) -> CmdResult {
    if !list && host.is_none() {
        return Err(Failure::msg("say what to print: --list, or --host HOST"));
    }
    let inventory = if sources.is_empty() {
        let root = repo_root(cli.repo.as_deref())?;
        let config = Config::load(&root)?;
        let ansible_dir = root.join(&config.ansible_dir);
        Inventory::load_sources(&crate::repo::inventory_sources(&root, &ansible_dir, &config)?.0)?
    } else {
        Inventory::load_sources(sources)?
    };
    for f in inventory.vaulted_files() {
        errln!(
            "note: {}: vaulted, not read (its variables are not shown)",
            f.display()
        );
    }
    for w in inventory.warnings() {
        errln!("warning: {w}");
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
        // Streamed (repo::listing::write_list): no tree of every host's variables.
        None if !resolved => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            return match listing::write_list(&inventory, &mut out)
                .and_then(|()| std::io::Write::flush(&mut out))
            {
                Ok(()) => Ok(Status::Clean),
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
                Err(e) => Err(Failure::msg(format!("cannot write to stdout: {e}"))),
            };
        }
        None => listing::list_json(&inventory),
    };
    // A template that spent its budget (jinja.max_fuel) is a refusal, not a warning.
    let mut spent: Option<String> = None;
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
                        if crate::repo::resolve::is_out_of_fuel(&reason) && spent.is_none() {
                            let at = inventory
                                .host_vars(name)
                                .and_then(|vs| vs.get(&var).map(|v| v.origin.to_string()))
                                .unwrap_or_else(|| name.to_string());
                            spent = Some(format!("{at}: `{var}` (for {name}): {reason}"));
                        }
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
    if let Some(why) = spent {
        return Err(Failure::msg(why));
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
        print_inventory_source(&repo);
        for env in &repo.environments {
            print_env(&repo, env);
        }
    }
    let status = if repo.environments.iter().any(|e| !e.problems.is_empty()) {
        Status::Violations
    } else {
        Status::Clean
    };
    // The process ends once this returns: freeing the repo (every host, group and variable
    // of the inventory, one allocation at a time) cost ~7% of `envs` on a repo with 2,000
    // hosts, and gives back nothing the exit does not. Nothing in a `Repo` acts when
    // dropped (plain data, a minijinja environment, a mutex: no file, lock, journal or
    // child process; crates/hk-engine/src/repo has no `Drop` impl), and every line above was written to
    // stdout with `writeln!` (a line-buffered stream) before this point.
    std::mem::forget(repo);
    Ok(status)
}

/// Which inventory the repo was read from and which setting named it: with no
/// `inventory:` in hk-console.yaml it may come from ansible.cfg, which the operator should
/// not have to guess.
pub(super) fn print_inventory_source(repo: &Repo) {
    let rel = |p: &Path| repo.rel(p);
    let sources: Vec<String> = repo.inventory_sources.iter().map(|p| rel(p)).collect();
    outln!(
        "inventory {} (from {})",
        sources.join(", "),
        repo.inventory_origin.describe()
    );
}

fn fact(v: Option<&str>) -> &str {
    v.unwrap_or("(unknown)")
}

/// Hosts as `name address`; a host named by its address (an inventory line of a bare IP) is
/// said once.
fn named_hosts(hosts: &[EnvHost]) -> Vec<String> {
    hosts
        .iter()
        .map(|h| {
            if h.name == h.address {
                h.name.clone()
            } else {
                format!("{} {}", h.name, h.address)
            }
        })
        .collect()
}

pub(super) fn print_env(repo: &Repo, env: &Environment) {
    let hosts = named_hosts(&env.servers);
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
    if let Some(group) = &env.agents_group {
        let agents = named_hosts(&env.agents);
        outln!(
            "  agents       {group} ({}): {}",
            agents.len(),
            if agents.is_empty() {
                "(none)".to_string()
            } else {
                agents.join(", ")
            }
        );
    }
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
    // hk-console.yaml `names:` where it renames something (unset: hostvars, else the seed's).
    let named = hk_console_names(env);
    if !named.is_empty() {
        outln!("  names        {}", named.join("   "));
    }
    if env.operator_present {
        outln!("  operator     must be present before anything mutates");
    }
    if env.protected {
        outln!("  protected    every mutating step is previewed and approved (gate policy)");
    }
    for p in &env.problems {
        outln!("  problem      {p}");
    }
    if !env.no_counterpart.is_empty() {
        outln!(
            "  unmapped     {} (the seed's names: this repo neither defines nor uses them; map its own under `facts:`)",
            env.no_counterpart.join(", ")
        );
    }
}

/// The `names:` keys hk-console.yaml sets for `env`, as `key value`.
fn hk_console_names(env: &Environment) -> Vec<String> {
    use crate::repo::config::NameKey;
    NameKey::ALL
        .into_iter()
        .filter_map(|k| env.names.get(k).map(|v| format!("{} {v}", k.key())))
        .collect()
}

/// `inventory --host H --resolved --playbook P` (logic: repo::provenance). P is relative to
/// the repo's Ansible directory, or with `-i SOURCE` to the current directory.
pub(super) fn play_vars_cmd(
    cli: &Cli,
    sources: &[std::path::PathBuf],
    host: Option<&str>,
    playbook: &Path,
) -> CmdResult {
    let host = host.ok_or_else(|| Failure::msg("--playbook needs --host HOST"))?;
    let (inventory, ansible_dir) = if sources.is_empty() {
        let root = repo_root(cli.repo.as_deref())?;
        let config = Config::load(&root)?;
        let ansible_dir = root.join(&config.ansible_dir);
        let sources = crate::repo::inventory_sources(&root, &ansible_dir, &config)?.0;
        (Inventory::load_sources(&sources)?, ansible_dir)
    } else {
        (
            Inventory::load_sources(sources)?,
            std::path::PathBuf::from("."),
        )
    };
    let books = [playbook.to_string_lossy().into_owned()];
    let view = crate::repo::provenance::play_view(
        &inventory,
        &ansible_dir,
        &books,
        host,
        &Resolver::new(),
    )?;
    // The runbooks that run this playbook: their own `defaults:` are the lowest layer their
    // plans see (below role defaults), for a value no repo states.
    let runbooks = super::runbooks_of(cli)?;
    let wanted = normal_playbook(&books[0]);
    let users: Vec<&crate::runbook::schema::Runbook> = runbooks
        .iter()
        .map(|l| &l.runbook)
        .filter(|r| r.playbooks().iter().any(|p| normal_playbook(p) == wanted))
        .collect();
    let mut notes = Vec::new();
    let mut runbook_defaults: std::collections::BTreeMap<
        String,
        (String, String, serde_json::Value),
    > = std::collections::BTreeMap::new();
    for r in &users {
        for (name, value) in &r.defaults {
            let (line, col) = r.default_marks.get(name).copied().unwrap_or((1, 1));
            let from = format!("{}:{line}:{col}", r.source);
            let layer = format!("runbook defaults ({})", r.id);
            match runbook_defaults.get(name) {
                Some((first_layer, first_from, first)) if first != value => notes.push(format!(
                    "`{name}`: {layer} {from} says {value}, {first_layer} {first_from} says {first}: each runbook's plan uses its own"
                )),
                Some(_) => {}
                None => {
                    runbook_defaults.insert(name.clone(), (layer, from, value.clone()));
                }
            }
        }
    }
    let mut unrenderable = Vec::new();
    let mut out = serde_json::Map::new();
    for (name, (layer, from, value)) in &runbook_defaults {
        if !view.vars.contains_key(name) {
            out.insert(
                name.clone(),
                serde_json::json!({ "value": value, "from": from, "layer": layer, "overrides": [] }),
            );
        }
    }
    for (name, v) in &view.vars {
        let value = match &v.resolved {
            Some(Resolved::Value(r)) => r.clone(),
            Some(Resolved::Unrenderable { reason }) => {
                if crate::repo::resolve::is_out_of_fuel(reason) {
                    return Err(Failure::msg(format!(
                        "{}: `{name}` (for {host}): {reason}",
                        v.var.origin
                    )));
                }
                unrenderable.push(format!("{host}: {name}: cannot render: {reason}"));
                crate::repo::vars::listing_value(&v.var)
            }
            None => crate::repo::vars::listing_value(&v.var),
        };
        // A runbook default the repo also states is beaten by everything: listed first.
        let overrides: Vec<String> = runbook_defaults
            .get(name)
            .map(|(l, f, _)| format!("{l} {f}"))
            .into_iter()
            .chain(v.overrides.iter().map(|(l, o)| format!("{l} {o}")))
            .collect();
        out.insert(
            name.clone(),
            serde_json::json!({ "value": value, "from": v.var.origin.to_string(), "layer": v.layer, "overrides": overrides }),
        );
    }
    let runbook_ids: Vec<&str> = users.iter().map(|r| r.id.as_str()).collect();
    print_json(
        &serde_json::json!({ "host": host, "roles": view.roles, "runbooks": runbook_ids, "vars": out }),
    )?;
    for n in &notes {
        errln!("note: {n}");
    }
    for f in &view.vaulted {
        errln!(
            "note: {}: vaulted, not read (its variables are not shown)",
            f.display()
        );
    }
    for r in &view.unknown_roles {
        errln!("warning: role `{r}` is named by a template: its defaults and vars are not known before the play runs");
    }
    for u in &unrenderable {
        errln!("warning: {u} (left unrendered)");
    }
    Ok(
        if unrenderable.is_empty() && view.unknown_roles.is_empty() {
            Status::Clean
        } else {
            Status::Violations
        },
    )
}

/// A playbook path as written in a runbook or on the command line, compared as paths
/// (`./playbooks/x.yml` is `playbooks/x.yml`).
fn normal_playbook(p: &str) -> std::path::PathBuf {
    Path::new(p)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}
