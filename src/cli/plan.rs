//! `plan`: a runbook's expanded, ordered plan for one environment, printed. Runs nothing.

use super::{load_repo, print_json, Cli, CmdResult, Status};
use crate::context::plan_runbook;
use crate::runbook::plan::{Gate, GateSource, Plan};

fn gate_text(g: &Gate) -> String {
    match g {
        Gate::OperatorPresent => "operator-present".into(),
        Gate::TypedConfirm { phrase } => format!("typed-confirm (type `{phrase}`)"),
        Gate::Authorise { flag } => format!("authorise {flag}"),
        Gate::ConfirmHosts { expected } => {
            format!(
                "confirm-hosts: exactly {} ({})",
                expected.len(),
                expected.join(", ")
            )
        }
        Gate::ApproveDiff => "approve-diff".into(),
        Gate::ConfirmDone => "confirm-done".into(),
    }
}

fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_plan(plan: &Plan) {
    outln!(
        "{} for {}: {} steps, {}",
        plan.runbook,
        plan.env,
        plan.steps.len(),
        if plan.mutates {
            "MUTATING"
        } else {
            "read-only"
        }
    );
    for s in &plan.steps {
        outln!(
            "{:>3}. [{}] {:<14} {}{}",
            s.n,
            if s.mutates { "M" } else { " " },
            s.kind.as_str(),
            s.host
                .as_deref()
                .map(|h| format!("{h}: "))
                .unwrap_or_default(),
            s.title
        );
        if let Some(cmd) = &s.command {
            outln!("       $ {}", shell_words(cmd));
        }
        if let Some(g) = &s.gate {
            let from = match s.source {
                Some(GateSource::Policy) => " (from the gate policy)",
                _ => "",
            };
            outln!("       gate: {}{from}", gate_text(g));
        }
        if let Some(b) = &s.blast_radius {
            outln!("       blast radius: {}", b.summary);
            for t in &b.runs_for_real {
                outln!("       runs for real under --check: {}", t.line());
            }
        }
        if let Some(at) = &s.declared_read_only {
            outln!(
                "       declared read-only by {at}, not verified (observe mode will not run it)"
            );
        }
        if let Some(e) = &s.expect {
            if let Some(t) = &e.tcp {
                outln!("       expect: {t} accepts TCP");
            }
            if let Some(c) = &e.condition {
                outln!("       expect: {c}");
            }
        }
    }
    outln!("[M] = mutates. Nothing was run: this is a plan.");
}

pub(super) fn plan_cmd(
    cli: &Cli,
    runbook: &str,
    env: &str,
    host: Option<&str>,
    json: bool,
) -> CmdResult {
    let repo = load_repo(cli)?;
    let set = super::runbooks_of(cli)?;
    let plan = plan_runbook(&repo, &set, runbook, env, host)?;
    if json {
        print_json(&plan)?;
    } else {
        print_plan(&plan);
        if let Some(file) = set.overrides_shipped(runbook) {
            outln!("{runbook} overrides the shipped runbook {runbook}: {file}");
        }
    }
    Ok(Status::Clean)
}
