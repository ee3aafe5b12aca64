//! `check` (the static parity contract) and the overview printed when no command is given
//! and there is no terminal.

use super::{load_repo, print_json, Cli, CmdResult, Failure, Status};
use crate::checks::parity;
use crate::repo::Repo;

pub(super) fn check_cmd(cli: &Cli, env: Option<&str>, json: bool) -> CmdResult {
    let repo = load_repo(cli)?;
    if json {
        let (input, findings) = check_input_findings(&repo, env)?;
        print_json(&parity::to_json_report(&input, &findings))?;
        return Ok(check_status(&findings));
    }
    print_check(&repo, env)
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
    let status = print_check(&repo, None)?;
    outln!("\n== Runbooks");
    super::runbooks::list(cli, false)?;
    outln!("\nNext: hk-console plan etcd-io-priority --env prod    (a plan runs nothing)");
    Ok(status)
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
    let input = crate::gather::parity_input(repo);
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

pub(super) fn print_check(repo: &Repo, env: Option<&str>) -> CmdResult {
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
    outln!("{}", parity::summary(&findings));
    Ok(check_status(&findings))
}
