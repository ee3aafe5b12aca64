//! `check` (the static parity contract) and the overview printed when no command is given
//! and there is no terminal.

use std::collections::BTreeSet;

use super::{load_repo, print_json, Cli, CmdResult, Failure, Status};
use crate::checks::parity;
use crate::context::{load_runbooks, plan_runbook, ContextError};
use crate::repo::blockers::kinds;
use crate::repo::Repo;
use crate::runbook::embedded::RunbookSet;
use crate::runbook::plan::{Blocker, PlanError};

pub(super) fn check_cmd(cli: &Cli, env: Option<&str>, json: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    let runbooks = load_runbooks(cli.runbooks.as_deref())?;
    if json {
        let (input, findings) = check_input_findings(&repo, env)?;
        let blocked = runbook_blockers(&repo, &runbooks, env);
        let mut doc = parity::to_json_report(&input, &findings);
        if let Some(obj) = doc.as_object_mut() {
            obj.insert("blockers".into(), blockers_json(&blocked, &findings));
        }
        print_json(&doc)?;
        return Ok(worse(check_status(&findings), blockers_status(&blocked)));
    }
    print_check(&repo, env, &runbooks)
}

pub(super) fn overview(cli: &Cli) -> CmdResult {
    let repo = load_repo(cli)?;
    outln!("hk-console: infra repo {}", repo.root.display());
    if repo.is_bundled_sample() {
        outln!("(the bundled sample; point --repo or HK_REPO at your infra repo)");
    }
    outln!("\n== Environments");
    for env in &repo.environments {
        super::inventory::print_env(&repo, env);
    }
    outln!("\n== Parity check (static, L0)");
    let runbooks = load_runbooks(cli.runbooks.as_deref())?;
    let status = print_check(&repo, None, &runbooks)?;
    outln!("\n== Runbooks");
    super::runbooks::list(cli, false, false)?;
    outln!("\n{}", next_step(&repo, &super::runbooks_of(cli)?));
    Ok(status)
}

/// The overview's next step: the plan of a runbook written for one of the repo's
/// environments, or (a repo that has none yet) how to scaffold one. It named the sample's
/// `etcd-io-priority --env prod` on every repo, which refuses on a repo without `prod`.
fn next_step(repo: &Repo, set: &RunbookSet) -> String {
    let names = repo.environment_names();
    let found = set.iter().find_map(|l| {
        if crate::context::not_offered(repo, l).is_some() {
            return None;
        }
        let rb = &l.runbook;
        rb.environments
            .iter()
            .find(|e| names.contains(&e.as_str()))
            .map(|env| (rb.id.clone(), env.clone()))
    });
    match found {
        Some((id, env)) => {
            format!("Next: hk-console plan {id} --env {env}    (a plan runs nothing)")
        }
        None => "Next: hk-console runbooks new --playbook PLAYBOOK --out runbooks/NAME.yaml    (no runbook is offered for this repo yet; see docs/runbooks.md)".to_string(),
    }
}

/// The static check for the console's Check screen: the repo read afresh (the operator may
/// have just fixed a file), its findings sorted as `check` prints them.
pub(super) fn console_check(root: &std::path::Path) -> crate::ui::panes::check::CheckView {
    use crate::ui::panes::check::CheckView;
    let at = crate::observe::timeline::clock(crate::journal::now());
    let (findings, engine_line) = match Repo::load(root) {
        Err(e) => (Err(e.to_string()), None),
        Ok(repo) => match check_input_findings(&repo, None) {
            Ok((input, findings)) => (Ok(findings), input.engine_line.clone()),
            Err(e) => (Err(e.0.to_string()), None),
        },
    };
    CheckView {
        findings: Some(findings),
        engine_line,
        ran_at: Some(at),
    }
}

/// The facts (for the JSON's per-environment engine and value) and the findings.
fn check_input_findings(
    repo: &Repo,
    env: Option<&str>,
) -> Result<(parity::ParityInput, Vec<parity::Finding>), Failure> {
    let input = crate::gather::parity_input(repo, crate::exec::kustomize::Kustomize::shared());
    let input = match env {
        None => input,
        Some(name) => input.only_env(name).ok_or_else(|| {
            Failure::msg(format!(
                "no environment `{name}` in hk-console.yaml (known: {})",
                repo.environment_names().join(", ")
            ))
        })?,
    };
    let mut findings = parity::check(&input);
    findings.sort_by(|a, b| (&a.env, &a.file, a.line).cmp(&(&b.env, &b.file, b.line)));
    Ok((input, findings))
}

fn check_status(findings: &[parity::Finding]) -> Status {
    match parity::exit_code(findings) {
        0 => Status::Clean,
        1 => Status::Violations,
        _ => Status::CouldNotRun,
    }
}

/// The parity findings, then the blockers of every runbook `runbooks` holds (each once,
/// naming the runbooks and environments it stops), then the two summaries; the exit status
/// is the worse of the two.
pub(super) fn print_check(repo: &Repo, env: Option<&str>, runbooks: &RunbookSet) -> CmdResult {
    let (input, findings) = check_input_findings(repo, env)?;
    if let Some(line) = &input.engine_line {
        outln!("{line}");
    }
    for line in &input.not_applicable {
        outln!("{line}");
    }
    for f in &findings {
        outln!("{f}");
    }
    let blocked = runbook_blockers(repo, runbooks, env);
    for b in &blocked {
        let stops = b.stops();
        if already_found(&b.blocker, &findings) {
            // The vault finding above is this blocker: said once, with what it stops.
            outln!(
                "{}: [{}] the finding above stops {stops} before step 1",
                b.blocker.at,
                b.blocker.kind
            );
            continue;
        }
        outln!(
            "{}: [{}] {}: stops {stops} before step 1: {}\n    fix: {}",
            b.blocker.at,
            b.blocker.kind,
            if is_violation(&b.blocker) {
                "violation"
            } else {
                "warning"
            },
            b.message(),
            b.blocker.fix
        );
    }
    outln!("{}", parity::summary(&findings));
    if !blocked.is_empty() {
        outln!("{}", blockers_summary(&blocked));
    }
    Ok(worse(check_status(&findings), blockers_status(&blocked)))
}

/// One distinct blocker and every (runbook, environment) it stops.
struct Blocked {
    blocker: Blocker,
    /// (runbook id, environment), sorted.
    stops: BTreeSet<(String, String)>,
    /// The hosts a per-host blocker was found for (its message's `(for HOST)`), merged
    /// into one blocker: the same line of the same file stops each of them.
    hosts: BTreeSet<String>,
}

/// A blocker's message without its `(for HOST)`, and that host.
fn split_host(message: &str) -> (String, Option<String>) {
    if let Some(i) = message.find(" (for ") {
        if let Some(j) = message[i..].find(')') {
            let host = message[i + 6..i + j].to_string();
            return (
                format!("{}{}", &message[..i], &message[i + j + 1..]),
                Some(host),
            );
        }
    }
    (message.to_string(), None)
}

impl Blocked {
    /// The message, naming the hosts it was found for when it is a per-host one.
    fn message(&self) -> String {
        if self.hosts.is_empty() {
            return self.blocker.message.clone();
        }
        let hosts = self.hosts.iter().cloned().collect::<Vec<_>>().join(", ");
        // Where the single host's `(for HOST)` stood: after the placeholder's value.
        match self.blocker.message.find(" and ") {
            Some(i) => format!(
                "{} (for {hosts}){}",
                &self.blocker.message[..i],
                &self.blocker.message[i..]
            ),
            None => format!("{} (for {hosts})", self.blocker.message),
        }
    }

    /// `etcd-io-priority (prod), reprovision-node (dev, prod)`.
    fn stops(&self) -> String {
        let mut by_runbook: Vec<(String, Vec<&str>)> = Vec::new();
        for (rb, env) in &self.stops {
            match by_runbook.iter_mut().find(|(r, _)| r == rb) {
                Some((_, envs)) => envs.push(env),
                None => by_runbook.push((rb.clone(), vec![env])),
            }
        }
        by_runbook
            .iter()
            .map(|(rb, envs)| format!("{rb} ({})", envs.join(", ")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A device placeholder is a pending decision the parity check already warns of (the
/// packages-only runbook still runs); everything else stops ansible-playbook itself.
fn is_violation(b: &Blocker) -> bool {
    b.kind != kinds::DEVICE_PLACEHOLDER
}

/// The blockers of every runbook in `runbooks` for every environment it allows (only `env`
/// when given), each once. A one-host runbook is looked at on every host of its target:
/// its blockers are those of the host the operator will name. A runbook that cannot be
/// planned for another reason is `plan`'s to report, not a blocker.
fn runbook_blockers(repo: &Repo, runbooks: &RunbookSet, env: Option<&str>) -> Vec<Blocked> {
    let mut out: Vec<Blocked> = Vec::new();
    let mut add = |rb: &str, env: &str, blockers: Vec<Blocker>| {
        for mut b in blockers {
            let stop = (rb.to_string(), env.to_string());
            let (message, host) = split_host(&b.message);
            b.message = message;
            match out.iter_mut().find(|x| x.blocker == b) {
                Some(x) => {
                    x.stops.insert(stop);
                    x.hosts.extend(host);
                }
                None => out.push(Blocked {
                    blocker: b,
                    stops: BTreeSet::from([stop]),
                    hosts: host.into_iter().collect(),
                }),
            }
        }
    };
    let blockers_of = |result: Result<_, ContextError>| match result {
        Err(ContextError::Plan(PlanError::Blocked { blockers, .. })) => Some(blockers),
        _ => None,
    };
    for loaded in runbooks.iter() {
        let rb = &loaded.runbook;
        // A runbook not offered here (a built-in one whose playbooks the repo lacks) is not
        // this repo's: its missing files are not the repo's defects.
        if crate::context::not_offered(repo, loaded).is_some() {
            continue;
        }
        for e in &rb.environments {
            if env.is_some_and(|want| want != e) || repo.environment(e).is_none() {
                continue;
            }
            match plan_runbook(repo, runbooks, &rb.id, e, None) {
                Err(ContextError::Plan(PlanError::NoHostChosen { hosts, .. })) => {
                    for h in hosts.split(", ").filter(|h| !h.is_empty()) {
                        if let Some(b) =
                            blockers_of(plan_runbook(repo, runbooks, &rb.id, e, Some(h)))
                        {
                            add(&rb.id, e, b);
                        }
                    }
                }
                other => {
                    if let Some(b) = blockers_of(other) {
                        add(&rb.id, e, b);
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| (&a.blocker.at, &a.blocker.kind).cmp(&(&b.blocker.at, &b.blocker.kind)));
    out
}

/// The parity check's vault finding already names this vault blocker.
fn already_found(b: &Blocker, findings: &[parity::Finding]) -> bool {
    let file = b.at.split(':').next().unwrap_or_default();
    b.kind == kinds::VAULT_LOCKED
        && findings.iter().any(|f| {
            f.rule == parity::rules::VAULT_LOCKED
                && f.file == std::path::Path::new(file)
                && f.message.contains(&b.message)
        })
}

fn blockers_status(blocked: &[Blocked]) -> Status {
    if blocked.iter().any(|b| is_violation(&b.blocker)) {
        Status::Violations
    } else {
        Status::Clean
    }
}

fn blockers_summary(blocked: &[Blocked]) -> String {
    let runbooks: BTreeSet<&str> = blocked
        .iter()
        .flat_map(|b| b.stops.iter().map(|(rb, _)| rb.as_str()))
        .collect();
    let violations = blocked.iter().filter(|b| is_violation(&b.blocker)).count();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    format!(
        "blockers: {} before step 1 ({}, {}) in {}",
        blocked.len(),
        plural(violations, "violation"),
        plural(blocked.len() - violations, "warning"),
        plural(runbooks.len(), "runbook")
    )
}

fn blockers_json(blocked: &[Blocked], findings: &[parity::Finding]) -> serde_json::Value {
    serde_json::Value::Array(
        blocked
            .iter()
            .map(|b| {
                serde_json::json!({
                    "kind": b.blocker.kind,
                    "at": b.blocker.at,
                    "severity": if is_violation(&b.blocker) { "violation" } else { "warning" },
                    "message": b.message(),
                    "fix": b.blocker.fix,
                    "also_a_finding": already_found(&b.blocker, findings),
                    "stops": b.stops.iter().map(|(rb, env)| serde_json::json!({"runbook": rb, "env": env})).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// The worse of two statuses: could not run, then violations, then clean.
fn worse(a: Status, b: Status) -> Status {
    let rank = |s: &Status| match s {
        Status::Clean => 0,
        Status::Violations => 1,
        _ => 2,
    };
    if rank(&b) > rank(&a) {
        b
    } else {
        a
    }
}
