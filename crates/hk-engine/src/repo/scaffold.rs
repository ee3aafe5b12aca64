//! `hk-console runbooks new --playbook PLAYBOOK`: a guided runbook scaffolded from a
//! playbook of the repo, for the operator to edit.
//!
//! Owns: reading the playbook (following `import_playbook`) for its plays' `hosts:` and
//! `serial:`, mapping each `hosts:` pattern onto a runbook target (an environment's servers
//! or VPN gateways group where it is one, else the literal group), and writing the runbook
//! text: a list-hosts step and an `ansible` step with `check_first` per playbook run, one
//! node at a time where a play says `serial: 1` or targets servers (or `all`), and a
//! `# QUESTION:` wherever hk-console cannot know what the operator means.
//! Must not: write files (the CLI does, refusing to overwrite), or decide anything the
//! validator and planner decide: the output goes through both like any runbook.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::Repo;
use crate::yaml::{self, Node};

/// How deep `import_playbook` is followed.
const MAX_DEPTH: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{}: no such playbook{}\n  hint: --playbook is relative to the Ansible directory ({})", path.display(), from.as_ref().map(|(f, l)| format!(" (imported at {}:{l})", f.display())).unwrap_or_default(), ansible_dir.display())]
    Missing {
        path: PathBuf,
        from: Option<(PathBuf, usize)>,
        ansible_dir: PathBuf,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// One play as read: where, its `hosts:` and `serial:`.
#[derive(Debug, Clone)]
struct Play {
    /// The playbook file, relative to the Ansible directory.
    file: String,
    line: usize,
    name: Option<String>,
    hosts: String,
    serial: Option<String>,
}

impl Play {
    /// The runbook comment naming this play: `  # play FILE:LINE "NAME": hosts "H"TAIL`.
    fn comment(&self, tail: &str) -> String {
        format!(
            "  # play {}:{}{}: hosts {}{tail}",
            self.file,
            self.line,
            self.name
                .as_deref()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default(),
            quote(&self.hosts),
        )
    }
}

/// A playbook file that gets its own steps, and the plays it runs.
#[derive(Debug, Default)]
struct Unit {
    file: String,
    plays: Vec<Play>,
    questions: Vec<String>,
}

/// What a play's `hosts:` means for the runbook.
#[derive(Debug, Clone, PartialEq)]
struct Mapped {
    /// The runbook target group: `servers`, `primary`, `vpn_gateways`, or an inventory
    /// group.
    group: String,
    /// The environments it holds in (None: every environment).
    envs: Option<Vec<String>>,
    /// A templated `hosts: "{{ VAR | default(...) }}"`: VAR, to be set per environment.
    var: Option<(String, &'static str)>,
    one_at_a_time: bool,
    /// The group holds an environment's servers and other hosts (its agents): the runbook
    /// takes the servers first, one at a time, then the others (`order: servers_first`).
    servers_first: bool,
    question: Option<String>,
}

/// The runbook text for `playbook` (relative to the repo's Ansible directory).
pub fn scaffold(repo: &Repo, playbook: &str, id: Option<&str>) -> Result<String, ScaffoldError> {
    let top = repo.ansible_dir.join(playbook);
    let mut units = Vec::new();
    read_units(repo, &top, None, &mut units, 0)?;
    if units.iter().all(|u| u.plays.is_empty()) {
        return Err(ScaffoldError::Invalid {
            path: top,
            message: "no play in it (a playbook is a list of plays with `hosts:`)".into(),
        });
    }
    let stem = Path::new(playbook)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "playbook".into());
    let id = id.map(str::to_string).unwrap_or_else(|| runbook_id(&stem));
    let all_envs: Vec<String> = repo.environments.iter().map(|e| e.name.clone()).collect();

    let mut questions: Vec<String> = Vec::new();
    let mut mapped: Vec<(usize, Play, Mapped)> = Vec::new();
    // Plays on the controller (this machine) are no node's: they are kept out of the
    // target and get steps of their own.
    let mut controller: Vec<(usize, Play, Controller)> = Vec::new();
    for (i, u) in units.iter().enumerate() {
        for p in &u.plays {
            match controller_of(repo, p) {
                Some(c) => controller.push((i, p.clone(), c)),
                None => mapped.push((i, p.clone(), map_hosts(repo, p))),
            }
        }
        questions.extend(u.questions.iter().cloned());
    }
    // The target: a group holding every play's hosts where the plays run on several
    // groups of the cluster (servers, then agents: each host runs the plays that name
    // it); else the first play's group, and a play elsewhere gets `only_on:`.
    let cover = covering_group(repo, &mapped);
    if let Some((g, envs)) = &cover {
        questions.push(format!(
            "the plays run on different groups of the cluster; `{g}` holds them all in {}: the runbook takes its servers one at a time, then its other hosts one at a time, each host running the plays that name it",
            envs.join(", ")
        ));
        for (_, _, m) in &mut mapped {
            m.envs = Some(envs.clone());
        }
    }
    let target = match &cover {
        Some((g, _)) => g.clone(),
        None => mapped
            .first()
            .map(|(_, _, m)| m.group.clone())
            .unwrap_or_else(|| "servers".into()),
    };
    let serial = mapped.iter().any(|(_, _, m)| m.one_at_a_time);
    let mut envs: Vec<String> = all_envs.clone();
    for (_, _, m) in &mapped {
        if let Some(only) = &m.envs {
            envs.retain(|e| only.contains(e));
        }
    }
    if envs.is_empty() {
        questions.push(format!(
            "the plays' hosts belong to no one environment together; listing every environment ({}): narrow `environments:`",
            all_envs.join(", ")
        ));
        envs = all_envs.clone();
    }
    if crate::runbook::embedded::embedded()
        .iter()
        .any(|(_, text)| text.lines().any(|l| l.trim() == format!("id: {id}")))
    {
        questions.push(format!(
            "`{id}` is the id of a built-in runbook: saved in the repo's runbooks/ this replaces it (pass --id to name it otherwise)"
        ));
    }

    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Scaffolded by `hk-console runbooks new --playbook {playbook}` from {}.",
        repo.rel(&top)
    );
    t.push_str(
        "# Edit it, then: `hk-console runbooks validate FILE` and `hk-console plan ID --env ENV`.\n\
         # Put it in the repo's runbooks/ directory to use it (see docs/runbooks.md).\n",
    );
    for q in &questions {
        let _ = writeln!(t, "# QUESTION: {q}");
    }
    let _ = writeln!(t, "id: {id}");
    let _ = writeln!(t, "title: {}", quote(&format!("{stem} (scaffolded)")));
    let _ = writeln!(t, "environments: [{}]", envs.join(", "));
    if !mapped.is_empty() {
        t.push_str("target:\n");
        let _ = writeln!(t, "  group: {}", quote(&target));
    }
    if serial && !mapped.is_empty() {
        t.push_str(
            "  # One node at a time: a play says `serial: 1`, or runs on the cluster's nodes (servers, agents, or all).\n",
        );
        t.push_str("  serial: 1\n");
        // Declared, so the gate holds in an environment that is not `protected:` too (a
        // protected one gets it anyway): nothing about the next node is decided before
        // the cluster has come back from the last one.
        let d = crate::runbook::schema::BetweenHosts::default();
        t.push_str(
            "  # The health gate between one node and the next (docs/runbooks.md): every node Ready,\n  # etcd's members caught up, the VIP lease holder stable, then healthy for the soak.\n",
        );
        let _ = writeln!(
            t,
            "  between_hosts:\n    stable_for_s: {}\n    soak_s: {}\n    timeout_s: {}",
            d.stable_for_s, d.soak_s, d.timeout_s
        );
    }
    if cover.is_some()
        || mapped
            .iter()
            .any(|(_, _, m)| m.servers_first && m.group == target)
    {
        t.push_str(
            "  # The environment's servers first, one at a time, then its other hosts (resolved at plan time).\n",
        );
        t.push_str("  order: servers_first\n");
    }
    t.push_str("steps:\n");
    let numbered = units.iter().filter(|u| !u.plays.is_empty()).count() > 1;
    for (i, u) in units.iter().enumerate() {
        if u.plays.is_empty() {
            continue;
        }
        let n = if numbered {
            format!("-{}", i + 1)
        } else {
            String::new()
        };
        let ctl: Vec<&(usize, Play, Controller)> =
            controller.iter().filter(|(j, ..)| *j == i).collect();
        let plays: Vec<&(usize, Play, Mapped)> = mapped.iter().filter(|(j, ..)| *j == i).collect();
        let ctl_text = controller_steps(&u.file, &n, &ctl, &plays);
        // In the playbook's order: the controller's plays first where its first play is.
        let ctl_first = match (ctl.first(), plays.first()) {
            (Some(c), Some(p)) => c.1.line < p.1.line,
            (Some(_), None) => true,
            _ => false,
        };
        if ctl_first {
            t.push_str(&ctl_text);
        }
        if plays.is_empty() {
            continue;
        }
        for (_, p, m) in &plays {
            let serial = p
                .serial
                .as_deref()
                .map(|s| format!(", serial {s}"))
                .unwrap_or_default();
            let _ = writeln!(t, "{}", p.comment(&serial));
            // Under a covering target the first question says where each play runs.
            if let Some(q) = m.question.as_ref().filter(|_| cover.is_none()) {
                let _ = writeln!(t, "  # QUESTION: {q}");
            }
        }
        // `only_on:` where every play of this file runs on one other group; plays on
        // different groups are the operator's to split (only_on would drop some).
        let groups: Vec<&String> = plays.iter().map(|(_, _, m)| &m.group).collect();
        let only_on = match groups.first() {
            Some(g) if groups.iter().all(|x| x == g) && **g != target => Some((*g).clone()),
            _ => None,
        };
        // Under a covering target every host runs the plays that name it: nothing to split.
        let only_on = only_on.filter(|_| cover.is_none());
        let mixed = cover.is_none() && groups.iter().any(|g| **g != target) && only_on.is_none();
        let mut vars: Vec<(String, &'static str)> = Vec::new();
        for (_, _, m) in &plays {
            if let Some(v) = &m.var {
                if !vars.contains(v) {
                    vars.push(v.clone());
                }
            }
        }
        let file = &u.file;
        let scope = if serial { "" } else { "    scope: once\n" };
        let (confirm, on) = if serial {
            (
                format!("Confirm {file} --limit {{{{ host }}}} targets exactly {{{{ host }}}}"),
                " on {{ host }}",
            )
        } else {
            (format!("Confirm the hosts {file} runs on"), "")
        };
        let mut common = String::new();
        let _ = writeln!(common, "    playbook: {}", quote(file));
        if mixed {
            let _ = writeln!(
                common,
                "    # QUESTION: the plays of {file} run on different groups ({}): split the steps with `only_on:`, or limit them",
                groups
                    .iter()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if let Some(g) = &only_on {
            let _ = writeln!(
                common,
                "    # QUESTION: these plays run on `{g}`, not on the target `{target}`: only its members are taken"
            );
            let _ = writeln!(common, "    only_on: {}", quote(g));
        }
        if !vars.is_empty() {
            common.push_str("    extra_vars:\n");
            for (v, group) in &vars {
                let _ = writeln!(common, "      {v}: \"{{{{ env.{group} }}}}\"");
            }
        }
        let _ = writeln!(t, "  - id: list-hosts{n}");
        t.push_str("    kind: list-hosts\n");
        t.push_str(scope);
        let _ = writeln!(t, "    title: {}", quote(&confirm));
        t.push_str(&common);
        let _ = writeln!(t, "  - id: apply{n}");
        t.push_str("    kind: ansible\n");
        t.push_str(scope);
        let _ = writeln!(t, "    title: {}", quote(&format!("Run {file}{on}")));
        t.push_str(&common);
        t.push_str("    # A --check --diff preview, approved, before it changes anything.\n");
        t.push_str("    check_first: true\n");
        if !ctl_first {
            t.push_str(&ctl_text);
        }
    }
    t.push_str(
        "  # QUESTION: how do you know it worked? Add a read-back (kind: ssh with expect:, or\n  # kind: probe) here; see docs/runbooks.md.\n",
    );
    Ok(t)
}

/// `stem` as a runbook id: lower case, `-` for anything not alphanumeric.
fn runbook_id(stem: &str) -> String {
    let s: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches('-').to_string();
    if s.is_empty() {
        "scaffolded".into()
    } else {
        s
    }
}

/// A YAML double-quoted scalar.
fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The playbook files that get their own steps: a file of only `import_playbook`s is
/// replaced by what it imports (each can be run, and previewed, by itself); a file with
/// plays of its own is one unit (running it runs its imports too).
fn read_units(
    repo: &Repo,
    path: &Path,
    from: Option<(PathBuf, usize)>,
    out: &mut Vec<Unit>,
    depth: usize,
) -> Result<(), ScaffoldError> {
    if depth > MAX_DEPTH {
        return Err(ScaffoldError::Invalid {
            path: path.to_path_buf(),
            message: format!("imports nest deeper than {MAX_DEPTH} (a cycle?)"),
        });
    }
    if !path.is_file() {
        return Err(ScaffoldError::Missing {
            path: path.to_path_buf(),
            from,
            ansible_dir: repo.ansible_dir.clone(),
        });
    }
    let text = crate::repo::read::read_text(path).map_err(|e| ScaffoldError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let doc = yaml::parse_one(&text).map_err(|e| ScaffoldError::Invalid {
        path: path.to_path_buf(),
        message: format!("not YAML: {e}"),
    })?;
    let Some(items) = doc.as_seq() else {
        return Err(ScaffoldError::Invalid {
            path: path.to_path_buf(),
            message: format!("{}: not a list of plays", doc.mark),
        });
    };
    let file = path
        .strip_prefix(&repo.ansible_dir)
        .unwrap_or(path)
        .display()
        .to_string();
    let imports_only = items.iter().all(|p| import_of(p).is_some());
    let mut unit = Unit {
        file: file.clone(),
        ..Unit::default()
    };
    let dir = path.parent().unwrap_or(&repo.ansible_dir).to_path_buf();
    for item in items {
        if let Some(imported) = import_of(item) {
            if imported.contains("{{") {
                unit.questions.push(format!(
                    "{file}:{}: imports `{imported}`, a template hk-console cannot follow: add its steps by hand",
                    item.mark.line
                ));
                continue;
            }
            let target = dir.join(imported);
            let from = Some((path.to_path_buf(), item.mark.line));
            if imports_only {
                read_units(repo, &target, from, out, depth + 1)?;
            } else {
                // Run as part of this file: its plays are listed under this file's steps.
                let mut inner = Vec::new();
                read_units(repo, &target, from, &mut inner, depth + 1)?;
                for u in inner {
                    unit.plays.extend(u.plays);
                    unit.questions.extend(u.questions);
                }
            }
            continue;
        }
        let hosts = match item.get("hosts") {
            Some(h) => match (h.as_str(), h.as_seq()) {
                (Some(s), _) => s.to_string(),
                (None, Some(list)) => list
                    .iter()
                    .filter_map(Node::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
                _ => scalar(h),
            },
            None => {
                return Err(ScaffoldError::Invalid {
                    path: path.to_path_buf(),
                    message: format!(
                        "{}: a play with no `hosts:` (ansible-playbook refuses it)",
                        item.mark
                    ),
                })
            }
        };
        unit.plays.push(Play {
            file: file.clone(),
            line: item.mark.line,
            name: item.get("name").and_then(Node::as_str).map(str::to_string),
            hosts,
            serial: item.get("serial").map(scalar),
        });
    }
    if !imports_only || !unit.questions.is_empty() {
        out.push(unit);
    }
    Ok(())
}

fn import_of(play: &Node) -> Option<&str> {
    play.get("import_playbook")
        .or_else(|| play.get("ansible.builtin.import_playbook"))
        .and_then(Node::as_str)
}

fn scalar(n: &Node) -> String {
    match n.to_json() {
        serde_json::Value::String(s) => s,
        v => v.to_string(),
    }
}

/// `{{ VAR | default('GROUP') }}` (either quote, spaces free): (VAR, GROUP).
fn templated_default(hosts: &str) -> Option<(String, String)> {
    let inner = hosts.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
    let (var, rest) = inner.split_once('|')?;
    let var = var.trim();
    let rest = rest.trim();
    let arg = rest
        .strip_prefix("default(")
        .or_else(|| rest.strip_prefix("d("))?
        .strip_suffix(')')?
        .trim();
    let group = arg
        .strip_prefix('\'')
        .and_then(|a| a.strip_suffix('\''))
        .or_else(|| arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')))?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    (ok(var) && ok(group)).then(|| (var.to_string(), group.to_string()))
}

fn map_hosts(repo: &Repo, play: &Play) -> Mapped {
    let (var, pattern) = match templated_default(&play.hosts) {
        Some((v, g)) => (Some(v), g),
        None => (None, play.hosts.trim().to_string()),
    };
    let serial_one = play.serial.as_deref() == Some("1");
    if var.is_none() && play.hosts.contains("{{") {
        return Mapped {
            group: "servers".into(),
            envs: None,
            var: None,
            one_at_a_time: true,
            servers_first: false,
            question: Some(format!(
                "hosts {} is a template hk-console cannot read: the runbook targets the environment's servers, one at a time; set the play's variables in extra_vars",
                quote(&play.hosts)
            )),
        };
    }
    // An environment role where the pattern is one environment's group.
    // The first environment role whose group `g` is, with the environments that say so.
    let role_of = |g: &str| -> Option<(&'static str, Vec<String>)> {
        type Is = fn(&super::env::Environment, &str) -> bool;
        let roles: [(&'static str, Is); 4] = [
            ("servers", |e, g| e.servers_group == g),
            ("primary", |e, g| e.primary_group.get() == Some(g)),
            ("vpn_gateways", |e, g| {
                e.vpn_gateways_group.as_deref() == Some(g)
            }),
            ("agents", |e, g| e.agents_group.as_deref() == Some(g)),
        ];
        roles.into_iter().find_map(|(role, is)| {
            let envs: Vec<String> = repo
                .environments
                .iter()
                .filter(|e| is(e, g))
                .map(|e| e.name.clone())
                .collect();
            (!envs.is_empty()).then_some((role, envs))
        })
    };
    if pattern == "all" {
        return Mapped {
            group: "servers".into(),
            envs: None,
            var: None,
            one_at_a_time: true,
            servers_first: false,
            question: Some(format!(
                "hosts: all is every host of the inventory ({} hosts, every environment's): the runbook runs it on the environment's servers, one at a time with --limit; is that what you want?",
                repo.inventory.hosts().len()
            )),
        };
    }
    // A group of every node (`all_nodes`, the agents of a server named by a variable) holds
    // a server too: it is not an agents-only target.
    let holds_a_server = |g: &str| {
        let members = repo.inventory.hosts_in(g).unwrap_or_default();
        repo.environments
            .iter()
            .any(|e| e.servers.iter().any(|s| members.contains(&s.name)))
    };
    let role = role_of(&pattern).filter(|(r, _)| *r != "agents" || !holds_a_server(&pattern));
    let mixed = if role.is_none() {
        mixed_envs(repo, &pattern)
    } else {
        Vec::new()
    };
    match (role, var) {
        // `hosts: "{{ VAR | default('k3s_servers') }}"`: VAR set to the environment's group
        // makes the play run where the runbook runs, in every environment.
        (Some((role, _)), Some(v)) => Mapped {
            group: role.into(),
            envs: None,
            // The `env.` template key holding the role's group name.
            var: Some((
                v,
                match role {
                    "servers" => "servers",
                    "primary" => "primary_group",
                    "agents" => "agents",
                    _ => "vpn_gateways",
                },
            )),
            one_at_a_time: serial_one || role != "vpn_gateways",
            servers_first: false,
            question: None,
        },
        (Some((role, envs)), None) => Mapped {
            group: role.into(),
            one_at_a_time: serial_one || role != "vpn_gateways",
            servers_first: false,
            question: Some(format!(
                "hosts `{pattern}` is the {role} group of {} only: the play runs there whatever environment is chosen, so the runbook is for {} only",
                envs.join(", "),
                envs.join(", ")
            )),
            envs: Some(envs),
            var: None,
        },
        (None, var) if !mixed.is_empty() => {
            let envs = mixed;
            let serial = match play.serial.as_deref() {
                Some(s) => format!("the play says `serial: {s}`"),
                None => "the play says no `serial:`, so Ansible would take them all at once".into(),
            };
            Mapped {
                group: pattern.clone(),
                one_at_a_time: true,
                servers_first: true,
                question: Some(format!(
                    "hosts `{pattern}` holds the servers and other nodes of {}: the runbook takes the servers one at a time, then the others one at a time ({serial}){}",
                    envs.join(", "),
                    var.map(|v| format!("; `{v}` is left to its default")).unwrap_or_default()
                )),
                envs: Some(envs),
                var: None,
            }
        }
        (None, var) => {
            let known = repo.inventory.has_group(&pattern);
            Mapped {
                group: pattern.clone(),
                envs: None,
                var: None,
                one_at_a_time: serial_one,
                servers_first: false,
                question: Some(if known {
                    format!(
                        "hosts `{pattern}` is no environment's servers, agents or VPN gateways group: the runbook targets that group as it is, in every environment{}",
                        var.map(|v| format!(" (`{v}` is left to its default)")).unwrap_or_default()
                    )
                } else {
                    format!(
                        "hosts `{pattern}` is not a group of the inventory (a host pattern?): name the group this runbook targets"
                    )
                }),
            }
        }
    }
}

/// Where the plays (localhost's aside) run on two or more inventory groups whose hosts
/// together are exactly an inventory group's (not `all`) that holds an environment's
/// servers and other hosts: that group and those environments.
fn covering_group(repo: &Repo, plays: &[(usize, Play, Mapped)]) -> Option<(String, Vec<String>)> {
    let mut patterns: Vec<String> = Vec::new();
    for (_, p, _) in plays {
        let pattern = match templated_default(&p.hosts) {
            Some((_, g)) => g,
            None => p.hosts.trim().to_string(),
        };
        if !repo.inventory.has_group(&pattern) {
            // A host pattern or a template: hk-console cannot tell what it covers.
            return None;
        }
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
    }
    if patterns.len() < 2 {
        return None;
    }
    let mut union: Vec<String> = Vec::new();
    for g in &patterns {
        for h in repo.inventory.hosts_in(g).unwrap_or_default() {
            if !union.contains(&h) {
                union.push(h);
            }
        }
    }
    union.sort();
    repo.inventory
        .group_names()
        .into_iter()
        .filter(|g| g != "all" && g != "ungrouped")
        .filter(|g| {
            let mut hosts = repo.inventory.hosts_in(g).unwrap_or_default();
            hosts.sort();
            hosts == union
        })
        .map(|g| {
            let envs = mixed_envs(repo, &g);
            (g, envs)
        })
        .find(|(_, envs)| !envs.is_empty())
}

/// A play on the controller: `Some(limit)` selects its hosts with `--limit` (an inventory
/// group or host whose every host has `ansible_connection: local`); `None` is Ansible's
/// implicit localhost, which no `--limit` can select (ansible-playbook stops with "...
/// leaves us with no hosts to target" when `localhost` is not in the inventory).
#[derive(Debug, Clone)]
struct Controller {
    limit: Option<String>,
}

fn controller_of(repo: &Repo, play: &Play) -> Option<Controller> {
    let pattern = play.hosts.trim();
    if pattern.contains("{{") || pattern.contains([',', ':', '!', '&', '*']) {
        return None;
    }
    let hosts = match repo.inventory.hosts_in(pattern) {
        Some(h) => h,
        None if repo.inventory.hosts().iter().any(|h| h == pattern) => vec![pattern.to_string()],
        None if matches!(pattern, "localhost" | "127.0.0.1" | "::1") => {
            return Some(Controller { limit: None })
        }
        None => return None,
    };
    let local = |h: &String| {
        repo.resolve_var(h, "ansible_connection")
            .and_then(|r| r.value()?.as_str().map(str::to_string))
            .as_deref()
            == Some("local")
    };
    (!hosts.is_empty() && hosts.iter().all(local)).then(|| Controller {
        limit: Some(pattern.to_string()),
    })
}

/// The steps (and questions) of one playbook's plays on the controller: a list-hosts and
/// a previewed ansible step, once, limited to the controller's hosts, which skips the
/// plays on nodes (their hosts are not in the limit); or, on the implicit localhost, the
/// question of how to run them.
fn controller_steps(
    file: &str,
    n: &str,
    ctl: &[&(usize, Play, Controller)],
    node_plays: &[&(usize, Play, Mapped)],
) -> String {
    let mut t = String::new();
    if ctl.is_empty() {
        return t;
    }
    let mut limits: Vec<&str> = Vec::new();
    for (_, p, c) in ctl {
        let _ = writeln!(
            t,
            "{}",
            p.comment(" (the controller: this machine, not a node)")
        );
        if let Some(l) = &c.limit {
            if !limits.contains(&l.as_str()) {
                limits.push(l);
            }
        }
    }
    let implicit: Vec<String> = ctl
        .iter()
        .filter(|(_, _, c)| c.limit.is_none())
        .map(|(_, p, _)| format!("{}:{}", p.file, p.line))
        .collect();
    if !implicit.is_empty() {
        let _ = writeln!(
            t,
            "  # QUESTION: the plays on localhost ({}) do not run in this runbook: `--limit HOST` matches none of their hosts, and ansible-playbook refuses `--limit localhost` while localhost is not in the inventory; add it (with ansible_connection: local) to give them steps of their own",
            implicit.join(", ")
        );
    }
    if limits.is_empty() {
        return t;
    }
    let limit = limits.join(",");
    if !node_plays.is_empty() {
        let first_ctl = ctl.first().map(|c| c.1.line).unwrap_or(0);
        let last_ctl = ctl.last().map(|c| c.1.line).unwrap_or(0);
        if node_plays
            .iter()
            .any(|p| p.1.line > first_ctl && p.1.line < last_ctl)
        {
            let _ = writeln!(
                t,
                "  # QUESTION: {file} alternates between the controller and the nodes; the runbook runs all of the controller's plays here, together: is that order safe?"
            );
        }
    }
    let _ = writeln!(t, "  - id: list-hosts{n}-controller");
    t.push_str("    kind: list-hosts\n    scope: once\n");
    let _ = writeln!(
        t,
        "    title: {}",
        quote(&format!(
            "Confirm {file} --limit {limit} runs only on the controller"
        ))
    );
    let _ = writeln!(t, "    playbook: {}", quote(file));
    let _ = writeln!(t, "    limit: {}", quote(&limit));
    let _ = writeln!(t, "  - id: apply{n}-controller");
    t.push_str("    kind: ansible\n    scope: once\n");
    let _ = writeln!(
        t,
        "    title: {}",
        quote(&format!("Run {file}'s plays on the controller ({limit})"))
    );
    let _ = writeln!(t, "    playbook: {}", quote(file));
    let _ = writeln!(t, "    limit: {}", quote(&limit));
    t.push_str("    # A --check --diff preview, approved, before it changes anything.\n");
    t.push_str("    check_first: true\n");
    t
}

/// The environments whose servers are all in `group`, which also holds other hosts of
/// the inventory (agents, or anything else): a play there disrupts the control plane and
/// more.
fn mixed_envs(repo: &Repo, group: &str) -> Vec<String> {
    let Some(members) = repo.inventory.hosts_in(group) else {
        return Vec::new();
    };
    repo.environments
        .iter()
        .filter(|e| {
            let servers = repo
                .inventory
                .pattern_hosts(&e.servers_group)
                .unwrap_or_default();
            !servers.is_empty()
                && servers.iter().all(|h| members.contains(h))
                && members.iter().any(|h| !servers.contains(h))
        })
        .map(|e| e.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_templated_default_is_read_and_anything_else_is_not() {
        assert_eq!(
            templated_default("{{ k3s_hosts | default('k3s_servers') }}"),
            Some(("k3s_hosts".into(), "k3s_servers".into()))
        );
        assert_eq!(
            templated_default("{{k3s_hosts|d(\"g\")}}"),
            Some(("k3s_hosts".into(), "g".into()))
        );
        assert_eq!(templated_default("{{ a + b }}"), None);
        assert_eq!(templated_default("k3s_servers"), None);
    }

    #[test]
    fn ids_are_kebab_case() {
        assert_eq!(runbook_id("vpn.egress_Gateway"), "vpn-egress-gateway");
        assert_eq!(runbook_id("..."), "scaffolded");
    }
}
